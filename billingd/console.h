/*
 * console.h - the web console's static files (doc/console.md), served by
 * the API's HTTP server under /console/: a fixed list of files (index.html,
 * app.js, app.css, icon.svg) read once at start from api.console_dir
 * (default the installed pkgdatadir/console), each with its Content-Type,
 * a Content-Security-Policy allowing only the server's own scripts, styles,
 * images and API (no inline script, no other host), and
 * X-Content-Type-Options: nosniff. Any other path under /console/ is 404:
 * no file name from the request ever reaches the file system.
 */
#ifndef BILLINGD_CONSOLE_H
#define BILLINGD_CONSOLE_H

#include <microhttpd.h>

typedef struct bd_console bd_console;

/*
 * bd_console_new - read the console's files from directory @dir. A file
 * missing or over 1 MiB is logged and answered 404. Returns NULL only
 * when out of memory.
 */
bd_console *bd_console_new(const char *dir);

/* bd_console_free - free the files; NULL is a no-op. */
void bd_console_free(bd_console *c);

/* bd_console_path - 1 if @url is the console's ("/console" or under "/console/"), else 0. */
int bd_console_path(const char *url);

/*
 * bd_console_answer - answer @method @url (a bd_console_path) on @conn:
 * "/console" redirects to "/console/", "/console/" is index.html, a known
 * file is sent with its headers (GET or HEAD), an unknown path is 404, any
 * other method 405. Returns MHD_queue_response's result.
 */
enum MHD_Result bd_console_answer(const bd_console *c, struct MHD_Connection *conn, const char *url,
                                  const char *method);

#endif
