/*
 * rejects.h - `billing rate --rejects FILE`: every rejected event record
 * kept, as JSON Lines that can be fixed and fed back (schema in
 * doc/formats.md, "Rejected records"):
 *
 *   {"source": "ev.jsonl", "line": 3, "reason": "...", "text": "{\"id\":...}"}
 *   {"source": "ev.pb", "offset": 120, "reason": "...", "protobuf_base64": "..."}
 *
 * "text" is the JSON line exactly as read (`jq -r .text` gives it back),
 * "bytes_base64" a line that is not UTF-8; protobuf records keep the
 * message bytes. A conflicting repeat is read again from its file; from
 * standard input or a pipe it is kept as its protobuf encoding. A record
 * over the size limit has none of them.
 */
#ifndef BILLING_REJECTS_H
#define BILLING_REJECTS_H

#include <stddef.h>
#include <stdint.h>

#include "eventio.h"

typedef struct rate_rejects rate_rejects;

/*
 * rejects_open - create or truncate @path for writing. Returns a new
 * handle (closed with rejects_close), or NULL with a message in @err.
 */
rate_rejects *rejects_open(const char *path, char *err, size_t errsize);

/*
 * rejects_write - one rejected record: where it was read (@source, and
 * @pos: its line for JSON Lines, its byte offset for protobuf), @reason,
 * and its @len bytes at @rec (NULL when not kept), in @rec_format (a
 * repeat found after reading is kept as its protobuf encoding, whatever
 * its file's format). Returns 0 or -1 (write error, kept for
 * rejects_close to report).
 */
int rejects_write(rate_rejects *rj, const char *source, bc_format format, uint64_t pos,
                  const char *reason, const unsigned char *rec, size_t len, bc_format rec_format);

/* rejects_count - records written so far. */
uint64_t rejects_count(const rate_rejects *rj);

/*
 * rejects_close - flush and close; NULL is a no-op. Returns 0, or -1 with
 * a message in @err naming the file when any write failed.
 */
int rejects_close(rate_rejects *rj, char *err, size_t errsize);

#endif /* BILLING_REJECTS_H */
