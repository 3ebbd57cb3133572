/*
 * console.c - the web console's static files (console.h).
 */
#include "config.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console.h"
#include "log.h"

/* Largest console file. */
#define FILE_MAX (1024 * 1024)

/* The files served: the only names that are ever opened. */
static const struct {
    const char *name;
    const char *type;
} files[] = {
    {"index.html", "text/html; charset=utf-8"},
    {"app.js", "text/javascript; charset=utf-8"},
    {"app.css", "text/css; charset=utf-8"},
    {"icon.svg", "image/svg+xml"},
};
#define N_FILES (sizeof(files) / sizeof(files[0]))

/* Only this server's files and API; no inline script or style element, no frame, no form. */
static const char csp[] = "default-src 'none'; script-src 'self'; style-src 'self'; "
                          "img-src 'self'; connect-src 'self'; base-uri 'none'; "
                          "form-action 'none'; frame-ancestors 'none'";

struct bd_console {
    char *data[N_FILES];
    size_t len[N_FILES];
};

/* The contents of @dir/@name, at most FILE_MAX bytes, in *@len; NULL if unreadable or larger. */
static char *slurp(const char *dir, const char *name, size_t *len)
{
    char path[4096];
    char *buf = NULL;
    FILE *f;
    size_t n;

    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >= sizeof(path))
        return NULL;
    f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    buf = malloc(FILE_MAX + 1);
    if (buf != NULL) {
        n = fread(buf, 1, FILE_MAX + 1, f);
        if (ferror(f) || n > FILE_MAX) {
            free(buf);
            buf = NULL;
        } else {
            *len = n;
        }
    }
    fclose(f);
    return buf;
}

bd_console *bd_console_new(const char *dir)
{
    bd_console *c = calloc(1, sizeof(*c));
    size_t i;

    if (c == NULL)
        return NULL;
    for (i = 0; i < N_FILES; i++) {
        c->data[i] = slurp(dir, files[i].name, &c->len[i]);
        if (c->data[i] == NULL)
            bd_log("warn", "console_file_missing", "dir=%s file=%s", bd_q(dir),
                   bd_q(files[i].name));
    }
    return c;
}

void bd_console_free(bd_console *c)
{
    size_t i;

    if (c == NULL)
        return;
    for (i = 0; i < N_FILES; i++)
        free(c->data[i]);
    free(c);
}

int bd_console_path(const char *url)
{
    return strcmp(url, "/console") == 0 || strncmp(url, "/console/", 9) == 0;
}

static enum MHD_Result send_file(struct MHD_Connection *conn, unsigned status, const char *type,
                                 const void *body, size_t len, const char *location)
{
    struct MHD_Response *r;
    enum MHD_Result ret;

    r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_PERSISTENT);
    if (r == NULL)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Content-Security-Policy", csp);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    if (location != NULL)
        MHD_add_response_header(r, "Location", location);
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, "Allow", "GET, HEAD");
    ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

enum MHD_Result bd_console_answer(const bd_console *c, struct MHD_Connection *conn, const char *url,
                                  const char *method)
{
    static const char not_found[] = "not found\n";
    static const char bad_method[] = "method not allowed\n";
    static const char moved[] = "/console/\n";
    const char *name;
    size_t i;

    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
        return send_file(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain; charset=utf-8", bad_method,
                         sizeof(bad_method) - 1, NULL);
    if (strcmp(url, "/console") == 0)
        return send_file(conn, MHD_HTTP_MOVED_PERMANENTLY, "text/plain; charset=utf-8", moved,
                         sizeof(moved) - 1, "/console/");
    name = url + 9;
    if (*name == '\0')
        name = "index.html";
    /* The name is compared with the list, never opened: "..", "%2e", "/" find nothing. */
    for (i = 0; c != NULL && i < N_FILES; i++)
        if (strcmp(name, files[i].name) == 0 && c->data[i] != NULL)
            return send_file(conn, MHD_HTTP_OK, files[i].type, c->data[i], c->len[i], NULL);
    return send_file(conn, MHD_HTTP_NOT_FOUND, "text/plain; charset=utf-8", not_found,
                     sizeof(not_found) - 1, NULL);
}
