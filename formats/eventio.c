/*
 * eventio.c - record framing for JSON Lines and length-delimited protobuf
 * over one fixed buffer, with read(2) rather than stdio to avoid a copy.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eventio.h"
#include "eventjson.h"
#include "util.h"

/* Much larger than a record, so that compaction (a memmove) is rare. */
#define READ_BUFFER_SIZE (1024u * 1024u)
#define VARINT_MAX 10
#define WHERE_MAX 4200
/* What a range reader reads beyond its end at once, to finish its last record. */
#define RANGE_SLACK (16u * 1024u)

struct bc_reader {
    int fd;
    int own_fd;
    bc_format format;
    char *name;
    unsigned char *buf;
    size_t pos;
    size_t fill;
    int eof;
    uint64_t base;   /* input offset of buf[0] */
    uint64_t line;   /* JSONL: line number of the last record */
    uint64_t offset; /* byte offset of the last record (protobuf: of its length prefix) */
    size_t rec_pos;  /* the last event's bytes in buf (valid until the next call) */
    size_t rec_len;
    uint64_t limit;      /* no record starting at or after this input offset is read */
    int skipping_line;   /* JSONL: discarding the rest of an over-long line */
    uint64_t skip_bytes; /* protobuf: bytes of an oversized message still to discard */
    char where[WHERE_MAX];
};

/* ---------------------------------------------------------------------- */
/* Formats                                                                 */
/* ---------------------------------------------------------------------- */

int bc_format_parse(const char *name, bc_format *out)
{
    if (strcmp(name, "jsonl") == 0)
        *out = BC_FORMAT_JSONL;
    else if (strcmp(name, "protobuf") == 0)
        *out = BC_FORMAT_PROTOBUF;
    else
        return -1;
    return 0;
}

const char *bc_format_name(bc_format format)
{
    return format == BC_FORMAT_PROTOBUF ? "protobuf" : "jsonl";
}

static int has_suffix(const char *s, const char *suffix)
{
    size_t n = strlen(s);
    size_t m = strlen(suffix);

    return n > m && strcmp(s + n - m, suffix) == 0;
}

int bc_format_guess(const char *path, bc_format *out)
{
    if (strcmp(path, "-") == 0 || has_suffix(path, ".jsonl") || has_suffix(path, ".json") ||
        has_suffix(path, ".ndjson"))
        *out = BC_FORMAT_JSONL;
    else if (has_suffix(path, ".pb") || has_suffix(path, ".bin") || has_suffix(path, ".protobuf"))
        *out = BC_FORMAT_PROTOBUF;
    else
        return -1;
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Opening and buffering                                                   */
/* ---------------------------------------------------------------------- */

static int open_input(const char *path, char *errbuf, size_t errsize)
{
    struct stat st;
    int fd;

    if (strcmp(path, "-") == 0)
        return STDIN_FILENO;
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return bc_seterr(errbuf, errsize, "%s: %s", path, strerror(errno));
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        return bc_seterr(errbuf, errsize, "%s: is a directory", path);
    }
    return fd;
}

bc_reader *bc_reader_open(const char *path, bc_format format, char *errbuf, size_t errsize)
{
    bc_reader *r = calloc(1, sizeof(*r));

    if (r == NULL) {
        bc_seterr(errbuf, errsize, "%s: out of memory", path);
        return NULL;
    }
    r->fd = -1;
    r->format = format;
    r->limit = UINT64_MAX;
    r->name = strdup(strcmp(path, "-") == 0 ? "(stdin)" : path);
    r->buf = malloc(READ_BUFFER_SIZE);
    if (r->name == NULL || r->buf == NULL) {
        bc_seterr(errbuf, errsize, "%s: out of memory", path);
        bc_reader_close(r);
        return NULL;
    }
    r->fd = open_input(path, errbuf, errsize);
    if (r->fd < 0) {
        bc_reader_close(r);
        return NULL;
    }
    r->own_fd = r->fd != STDIN_FILENO;
    return r;
}

int bc_reader_set_range(bc_reader *r, uint64_t start, uint64_t end, char *errbuf, size_t errsize)
{
    /* JSON Lines: from the byte before @start, to see whether a line starts at @start. */
    uint64_t from = r->format == BC_FORMAT_JSONL && start > 0 ? start - 1 : start;

    if (!r->own_fd || end < start)
        return bc_seterr(errbuf, errsize, "%s: a byte range needs a file and start <= end",
                         r->name);
    if (lseek(r->fd, (off_t)from, SEEK_SET) == (off_t)-1)
        return bc_seterr(errbuf, errsize, "%s: %s", r->name, strerror(errno));
    r->pos = 0;
    r->fill = 0;
    r->eof = 0;
    r->base = from;
    r->line = 0;
    r->offset = from;
    r->rec_pos = 0;
    r->rec_len = 0;
    r->skip_bytes = 0;
    r->limit = end;
    /* The line running across @start (if any) is the previous range's: skip past its newline. */
    r->skipping_line = from < start;
    return 0;
}

bc_reader *bc_reader_open_range(const char *path, bc_format format, uint64_t start, uint64_t end,
                                char *errbuf, size_t errsize)
{
    bc_reader *r;

    if (strcmp(path, "-") == 0) {
        bc_seterr(errbuf, errsize, "%s: a byte range needs a file", path);
        return NULL;
    }
    r = bc_reader_open(path, format, errbuf, errsize);
    if (r != NULL && bc_reader_set_range(r, start, end, errbuf, errsize) != 0) {
        bc_reader_close(r);
        return NULL;
    }
    return r;
}

void bc_reader_close(bc_reader *r)
{
    if (r == NULL)
        return;
    if (r->own_fd)
        close(r->fd);
    free(r->name);
    free(r->buf);
    free(r);
}

/* Move the unread bytes to the front and read more. Returns 0 or -1 (errno set). */
static int refill(bc_reader *r)
{
    ssize_t n;
    size_t want;
    uint64_t end;

    if (r->pos > 0) {
        memmove(r->buf, r->buf + r->pos, r->fill - r->pos);
        r->base += r->pos;
        r->fill -= r->pos;
        r->pos = 0;
    }
    want = READ_BUFFER_SIZE - r->fill;
    /* A range reads little past its end: the rest of its last record, in small steps. */
    end = r->base + r->fill;
    if (r->limit != UINT64_MAX && end < r->limit && want > RANGE_SLACK &&
        r->limit - end < want - RANGE_SLACK)
        want = (size_t)(r->limit - end) + RANGE_SLACK;
    else if (r->limit != UINT64_MAX && end >= r->limit)
        want = want < RANGE_SLACK ? want : RANGE_SLACK;
    do {
        n = read(r->fd, r->buf + r->fill, want);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return -1;
    if (n == 0)
        r->eof = 1;
    r->fill += (size_t)n;
    return 0;
}

static bc_read_result read_error(bc_reader *r, char *errbuf, size_t errsize)
{
    bc_seterr(errbuf, errsize, "read error: %s", strerror(errno));
    return BC_READ_ERROR;
}

void bc_location_format(char *buf, size_t size, const char *name, bc_format format, uint64_t pos)
{
    if (format == BC_FORMAT_JSONL)
        snprintf(buf, size, "%s:%llu", name, (unsigned long long)pos);
    else
        snprintf(buf, size, "%s: offset %llu", name, (unsigned long long)pos);
}

uint64_t bc_reader_position(const bc_reader *r)
{
    return r->format == BC_FORMAT_JSONL ? r->line : r->offset;
}

uint64_t bc_reader_offset(const bc_reader *r)
{
    return r->offset;
}

const unsigned char *bc_reader_record(const bc_reader *r, size_t *len)
{
    *len = r->rec_len;
    return r->rec_len > 0 ? r->buf + r->rec_pos : NULL;
}

uint64_t bc_reader_record_hash(const bc_reader *r)
{
    /* Hashed on demand: only the dedupe asks, so reading pays nothing for it. */
    return bc_hash_bytes(r->buf + r->rec_pos, r->rec_len);
}

int bc_reader_rereadable(const bc_reader *r)
{
    struct stat st;

    return r->own_fd && fstat(r->fd, &st) == 0 && S_ISREG(st.st_mode);
}

const char *bc_reader_name(const bc_reader *r)
{
    return r->name;
}

const char *bc_reader_where(bc_reader *r)
{
    bc_location_format(r->where, sizeof(r->where), r->name, r->format, bc_reader_position(r));
    return r->where;
}

/* ---------------------------------------------------------------------- */
/* JSON Lines                                                              */
/* ---------------------------------------------------------------------- */

static int blank(const unsigned char *s, size_t n)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r')
            return 0;
    }
    return 1;
}

/* Discard up to the end of an over-long line. Returns 1 when done, 0 for more input. */
static int skip_line(bc_reader *r)
{
    unsigned char *nl = memchr(r->buf + r->pos, '\n', r->fill - r->pos);

    if (nl == NULL) {
        r->pos = r->fill;
        return r->eof;
    }
    r->pos = (size_t)(nl - r->buf) + 1;
    r->skipping_line = 0;
    return 1;
}

static bc_read_result too_long(bc_reader *r, char *errbuf, size_t errsize)
{
    r->line++;
    r->skipping_line = 1;
    bc_seterr(errbuf, errsize, "line longer than %d bytes", BC_JSONL_LINE_MAX);
    return BC_READ_REJECT;
}

/*
 * The next line into [*start, *start + *len), without its newline.
 * Returns BC_READ_EVENT when one is there, or another result.
 */
static bc_read_result next_line(bc_reader *r, const unsigned char **start, size_t *len,
                                char *errbuf, size_t errsize)
{
    unsigned char *nl;
    size_t avail;

    for (;;) {
        if (r->skipping_line && !skip_line(r)) {
            if (refill(r) != 0)
                return read_error(r, errbuf, errsize);
            continue;
        }
        if (r->base + r->pos >= r->limit)
            return BC_READ_EOF;
        avail = r->fill - r->pos;
        nl = memchr(r->buf + r->pos, '\n', avail);
        if (nl == NULL && avail > BC_JSONL_LINE_MAX)
            return too_long(r, errbuf, errsize);
        if (nl == NULL && !r->eof) {
            if (refill(r) != 0)
                return read_error(r, errbuf, errsize);
            continue;
        }
        if (nl == NULL && avail == 0)
            return BC_READ_EOF;
        *start = r->buf + r->pos;
        r->offset = r->base + r->pos;
        *len = nl != NULL ? (size_t)(nl - *start) : avail;
        r->pos += *len + (nl != NULL);
        r->line++;
        if (*len > BC_JSONL_LINE_MAX) {
            bc_seterr(errbuf, errsize, "line longer than %d bytes", BC_JSONL_LINE_MAX);
            return BC_READ_REJECT;
        }
        if (!blank(*start, *len))
            return BC_READ_EVENT;
    }
}

static bc_read_result next_json(bc_reader *r, billing_event *ev, char *errbuf, size_t errsize)
{
    const unsigned char *line;
    size_t len;
    bc_read_result rr = next_line(r, &line, &len, errbuf, errsize);

    if (rr != BC_READ_EVENT)
        return rr;
    r->rec_pos = (size_t)(line - r->buf);
    r->rec_len = len;
    if (bc_event_parse_json(ev, (const char *)line, len, errbuf, errsize) != BILLING_OK)
        return BC_READ_REJECT;
    return BC_READ_EVENT;
}

/* ---------------------------------------------------------------------- */
/* Length-delimited protobuf                                               */
/* ---------------------------------------------------------------------- */

/* Make @n bytes available after pos, if the input has them. Returns 0 or -1 (read error). */
static int want(bc_reader *r, size_t n)
{
    while (r->fill - r->pos < n && !r->eof) {
        if (refill(r) != 0)
            return -1;
    }
    return 0;
}

/* Discard what is left of an oversized message. Returns 0, or -1 if the input ends first. */
static int skip_message(bc_reader *r)
{
    size_t take;

    while (r->skip_bytes > 0) {
        take = r->fill - r->pos;
        if (take > r->skip_bytes)
            take = (size_t)r->skip_bytes;
        r->pos += take;
        r->skip_bytes -= take;
        if (r->skip_bytes == 0)
            break;
        if (r->eof)
            return -1;
        if (refill(r) != 0)
            return -1;
    }
    return 0;
}

/* The varint at @p (@avail bytes): 0 and its size in *used, or -1 when malformed or cut short. */
static int parse_length(const unsigned char *p, size_t avail, uint64_t *out, size_t *used)
{
    uint64_t v = 0;
    size_t i;

    for (i = 0; i < avail && i < VARINT_MAX; i++) {
        v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if ((p[i] & 0x80) == 0) {
            *out = v;
            *used = i + 1;
            return 0;
        }
    }
    return -1;
}

static bc_read_result framing_error(bc_reader *r, char *errbuf, size_t errsize, const char *what)
{
    bc_seterr(errbuf, errsize, "%s; the rest of the input cannot be framed", what);
    /* Nothing after this can be framed: the reader reports the end from now on. */
    r->pos = r->fill;
    r->eof = 1;
    r->skip_bytes = 0;
    return BC_READ_ERROR;
}

/* Frame the next message: its bytes at rec_pos, rec_len long. BC_READ_EVENT when there is one. */
static bc_read_result frame_proto(bc_reader *r, char *errbuf, size_t errsize)
{
    uint64_t len;
    size_t used;

    if (r->skip_bytes > 0 && skip_message(r) != 0)
        return framing_error(r, errbuf, errsize, "input ends inside an oversized message");
    if (r->base + r->pos >= r->limit)
        return BC_READ_EOF;
    if (want(r, VARINT_MAX) != 0)
        return read_error(r, errbuf, errsize);
    if (r->pos == r->fill)
        return BC_READ_EOF;
    r->offset = r->base + r->pos;
    if (parse_length(r->buf + r->pos, r->fill - r->pos, &len, &used) != 0)
        return framing_error(r, errbuf, errsize, "malformed or truncated length prefix");
    r->pos += used;
    if (len > BILLING_EVENT_WIRE_MAX) {
        r->skip_bytes = len;
        bc_seterr(errbuf, errsize, "message of %llu bytes exceeds the %d-byte limit",
                  (unsigned long long)len, BILLING_EVENT_WIRE_MAX);
        return BC_READ_REJECT;
    }
    if (want(r, (size_t)len) != 0)
        return read_error(r, errbuf, errsize);
    if (r->fill - r->pos < len)
        return framing_error(r, errbuf, errsize, "input ends inside a message");
    r->pos += (size_t)len;
    r->rec_pos = r->pos - (size_t)len;
    r->rec_len = (size_t)len;
    return BC_READ_EVENT;
}

static bc_read_result next_proto(bc_reader *r, billing_event *ev, char *errbuf, size_t errsize)
{
    bc_read_result rr = frame_proto(r, errbuf, errsize);

    if (rr != BC_READ_EVENT)
        return rr;
    if (billing_event_decode(ev, r->buf + r->rec_pos, r->rec_len, errbuf, errsize) != BILLING_OK)
        return BC_READ_REJECT;
    return BC_READ_EVENT;
}

bc_read_result bc_reader_next_raw(bc_reader *r, const unsigned char **data, size_t *len,
                                  char *errbuf, size_t errsize)
{
    const unsigned char *line;
    bc_read_result rr;

    *data = NULL;
    *len = 0;
    if (r->format == BC_FORMAT_PROTOBUF) {
        rr = frame_proto(r, errbuf, errsize);
        if (rr == BC_READ_EVENT) {
            *data = r->buf + r->rec_pos;
            *len = r->rec_len;
        }
        return rr;
    }
    rr = next_line(r, &line, len, errbuf, errsize);
    if (rr == BC_READ_EVENT) {
        r->rec_pos = (size_t)(line - r->buf);
        r->rec_len = *len;
        *data = line;
    }
    return rr;
}

bc_read_result bc_reader_next(bc_reader *r, billing_event *ev, char *errbuf, size_t errsize)
{
    /* No bytes of an earlier record may pass for this one's (a line too long is not kept). */
    r->rec_len = 0;
    if (r->format == BC_FORMAT_PROTOBUF)
        return next_proto(r, ev, errbuf, errsize);
    return next_json(r, ev, errbuf, errsize);
}

/* ---------------------------------------------------------------------- */
/* Splitting a protobuf stream                                             */
/* ---------------------------------------------------------------------- */

/* Bytes read at once while hopping from one length prefix to the next. */
#define SPLIT_BUFFER (256u * 1024u)

int bc_proto_split(int fd, uint64_t from, uint64_t at_least, uint64_t size, uint64_t *out)
{
    unsigned char *buf = malloc(SPLIT_BUFFER);
    uint64_t pos = from;
    uint64_t bufpos = 0;
    uint64_t len;
    size_t have = 0;
    size_t used;
    ssize_t n;

    if (buf == NULL)
        return -1;
    *out = size;
    while (pos < size && pos - from < at_least) {
        if (pos < bufpos || pos + VARINT_MAX > bufpos + have) {
            n = bc_read_full(fd, buf, SPLIT_BUFFER, (int64_t)pos);
            if (n < 0) {
                free(buf);
                return -1;
            }
            bufpos = pos;
            have = (size_t)n;
        }
        /* A prefix that cannot be read is left to the reader, which reports it. */
        if (parse_length(buf + (pos - bufpos), have - (size_t)(pos - bufpos), &len, &used) != 0 ||
            len > size - pos - used)
            break;
        pos += used + len;
    }
    if (pos < size && pos - from >= at_least)
        *out = pos;
    free(buf);
    return 0;
}

/* ---------------------------------------------------------------------- */
/* Reading one record again                                                */
/* ---------------------------------------------------------------------- */

/* The JSON line at @offset: a first small read, and a longer one for a long line. */
static bc_read_result json_at(int fd, uint64_t offset, billing_event *ev, uint64_t *raw_hash,
                              char *errbuf, size_t errsize)
{
    unsigned char small[4096];
    unsigned char *buf = small;
    unsigned char *nl;
    ssize_t n = bc_read_full(fd, small, sizeof(small), (int64_t)offset);
    bc_read_result rr = BC_READ_EVENT;

    if (n < 0)
        return read_error(NULL, errbuf, errsize);
    nl = memchr(small, '\n', (size_t)n);
    if (nl == NULL && n == (ssize_t)sizeof(small)) {
        buf = malloc(BC_JSONL_LINE_MAX + 1);
        if (buf == NULL) {
            bc_seterr(errbuf, errsize, "out of memory");
            return BC_READ_ERROR;
        }
        n = bc_read_full(fd, buf, BC_JSONL_LINE_MAX + 1, (int64_t)offset);
        nl = n < 0 ? NULL : memchr(buf, '\n', (size_t)n);
    }
    if (n < 0) {
        rr = read_error(NULL, errbuf, errsize);
    } else if (nl == NULL && n > BC_JSONL_LINE_MAX) {
        bc_seterr(errbuf, errsize, "line longer than %d bytes", BC_JSONL_LINE_MAX);
        rr = BC_READ_ERROR;
    } else {
        n = nl != NULL ? nl - buf : n;
        *raw_hash = bc_hash_bytes(buf, (size_t)n);
        if (bc_event_parse_json(ev, (const char *)buf, (size_t)n, errbuf, errsize) != BILLING_OK)
            rr = BC_READ_ERROR;
    }
    if (buf != small)
        free(buf);
    return rr;
}

/* The length-delimited message at @offset. */
static bc_read_result proto_at(int fd, uint64_t offset, billing_event *ev, uint64_t *raw_hash,
                               char *errbuf, size_t errsize)
{
    unsigned char buf[VARINT_MAX + BILLING_EVENT_WIRE_MAX];
    ssize_t n = bc_read_full(fd, buf, sizeof(buf), (int64_t)offset);
    uint64_t len = 0;
    size_t used = 0;

    if (n < 0)
        return read_error(NULL, errbuf, errsize);
    if (parse_length(buf, (size_t)n, &len, &used) != 0 || len > BILLING_EVENT_WIRE_MAX ||
        len > (uint64_t)n - used) {
        bc_seterr(errbuf, errsize, "no whole message at offset %llu", (unsigned long long)offset);
        return BC_READ_ERROR;
    }
    *raw_hash = bc_hash_bytes(buf + used, (size_t)len);
    if (billing_event_decode(ev, buf + used, (size_t)len, errbuf, errsize) != BILLING_OK)
        return BC_READ_ERROR;
    return BC_READ_EVENT;
}

bc_read_result bc_event_read_at(int fd, bc_format format, uint64_t offset, billing_event *ev,
                                uint64_t *raw_hash, char *errbuf, size_t errsize)
{
    uint64_t ignored;

    if (raw_hash == NULL)
        raw_hash = &ignored;
    if (format == BC_FORMAT_PROTOBUF)
        return proto_at(fd, offset, ev, raw_hash, errbuf, errsize);
    return json_at(fd, offset, ev, raw_hash, errbuf, errsize);
}

int bc_record_bytes_at(int fd, bc_format format, uint64_t offset, unsigned char *buf, size_t cap,
                       size_t *len)
{
    ssize_t n = bc_read_full(fd, buf, cap, (int64_t)offset);
    unsigned char *nl;
    uint64_t msg = 0;
    size_t used = 0;

    if (n < 0)
        return -1;
    if (format == BC_FORMAT_PROTOBUF) {
        if (parse_length(buf, (size_t)n, &msg, &used) != 0 || msg > (uint64_t)n - used)
            return -1;
        memmove(buf, buf + used, (size_t)msg);
        *len = (size_t)msg;
        return 0;
    }
    nl = memchr(buf, '\n', (size_t)n);
    if (nl == NULL && (size_t)n == cap)
        return -1;
    *len = nl != NULL ? (size_t)(nl - buf) : (size_t)n;
    return 0;
}
