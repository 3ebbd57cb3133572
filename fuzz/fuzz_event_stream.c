/*
 * fuzz_event_stream.c - fuzz target for the framing of event files
 * (formats/eventio.c): bc_reader_next over JSON Lines or length-delimited
 * protobuf, and bc_event_read_at, which reads one record again by offset
 * (how `billing rate` compares repeated event ids).
 *
 * Input: byte 0 picks the format ('P' protobuf, anything else JSON
 * Lines); bytes 1 and 2 give the size of filler written before the rest,
 * so that short inputs reach the reader's 1 MiB buffer boundary and its
 * over-long record handling: ((byte1 & 0x7f) << 8 | byte2) * 32 bytes,
 * that is up to 1 MiB. The filler is blank lines (JSON Lines; with byte1's
 * high bit, one line of 'x', over-long past 64 KiB) or one message of
 * zeros (protobuf; oversized past 4096 bytes). The rest is the stream.
 * Everything goes into a memfd file that the reader opens by its
 * /proc/self/fd path.
 *
 * Whatever the bytes: no crash, leak or out-of-bounds access, and the
 * reader ends (EOF or a framing error) after at most one call per input
 * byte. Each refusal comes with a message. For each event read, the
 * record offsets and line numbers advance, and bc_event_read_at at the
 * record's offset gives the same event (the same protobuf encoding).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "eventio.h"
#include "fuzzcommon.h"

#define FILLER_UNIT 32
/* Blank filler lines are at most this long, well under BC_JSONL_LINE_MAX. */
#define BLANK_LINE 1000

static int memfd = -1;
static char path[64];
static unsigned char *file;
static size_t file_cap;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    memfd = memfd_create("fuzz-event-stream", MFD_CLOEXEC);
    FZ_CHECK(memfd >= 0, "memfd_create");
    snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
    return 0;
}

/* Room for @n bytes in the file image. */
static void reserve(size_t n)
{
    unsigned char *p;

    if (n <= file_cap)
        return;
    p = realloc(file, n);
    FZ_CHECK(p != NULL, "out of memory");
    file = p;
    file_cap = n;
}

/* The base-128 varint of @v at @out; returns its length. */
static size_t put_varint(unsigned char *out, uint64_t v)
{
    size_t n = 0;

    while (v >= 0x80) {
        out[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (unsigned char)v;
    return n;
}

/* Lay the filler, then the stream, into the file image; returns its size. */
static size_t build_file(bc_format format, int overlong, size_t filler, const uint8_t *stream,
                         size_t len)
{
    size_t n = 0;
    size_t k;
    size_t body;
    unsigned char prefix[10];

    reserve(filler + len + 16);
    if (filler > 0 && format == BC_FORMAT_PROTOBUF) {
        /* One message: its length prefix and body make up the filler (or a byte less). */
        body = filler - put_varint(prefix, filler);
        k = put_varint(prefix, body);
        memcpy(file, prefix, k);
        memset(file + k, 0, body);
        n = k + body;
    } else if (filler > 0 && overlong) {
        memset(file, 'x', filler - 1);
        file[filler - 1] = '\n';
        n = filler;
    } else {
        while (n < filler) {
            k = filler - n < BLANK_LINE ? filler - n : BLANK_LINE;
            memset(file + n, ' ', k - 1);
            file[n + k - 1] = '\n';
            n += k;
        }
    }
    memcpy(file + n, stream, len);
    return n + len;
}

static void write_file(size_t size)
{
    size_t done = 0;
    ssize_t k;

    FZ_CHECK(ftruncate(memfd, 0) == 0, "ftruncate");
    while (done < size) {
        k = pwrite(memfd, file + done, size - done, (off_t)done);
        FZ_CHECK(k > 0, "pwrite");
        done += (size_t)k;
    }
}

/*
 * bc_event_read_at at @offset must give the event @ev the reader gave, and
 * the same record hash @hash.
 */
static void check_reread(bc_format format, uint64_t offset, uint64_t hash, const billing_event *ev,
                         billing_event *again)
{
    unsigned char enc1[BILLING_EVENT_WIRE_MAX];
    unsigned char enc2[BILLING_EVENT_WIRE_MAX];
    size_t len1 = 0;
    size_t len2 = 0;
    char err[512] = "";
    uint64_t hash2 = 0;
    bc_read_result rr = bc_event_read_at(memfd, format, offset, again, &hash2, err, sizeof(err));

    FZ_CHECK(rr == BC_READ_EVENT, "event '%s' at offset %llu cannot be read again: %s",
             billing_event_id(ev), (unsigned long long)offset, err);
    FZ_CHECK(hash2 == hash, "event '%s' at offset %llu: record hash differs when read again",
             billing_event_id(ev), (unsigned long long)offset);
    FZ_CHECK(billing_event_encode(ev, enc1, sizeof(enc1), &len1) == BILLING_OK, "encode");
    FZ_CHECK(billing_event_encode(again, enc2, sizeof(enc2), &len2) == BILLING_OK, "encode");
    FZ_CHECK(len1 == len2 && memcmp(enc1, enc2, len1) == 0,
             "event '%s' at offset %llu reads again as another event ('%s')", billing_event_id(ev),
             (unsigned long long)offset, billing_event_id(again));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bc_format format;
    size_t filler;
    size_t file_size;
    size_t calls = 0;
    uint64_t last_offset = 0;
    uint64_t last_line = 0;
    int events = 0;
    char err[512] = "";
    billing_event *ev;
    billing_event *again;
    bc_reader *r;
    bc_read_result rr;

    if (size < 3)
        return 0;
    format = data[0] == 'P' ? BC_FORMAT_PROTOBUF : BC_FORMAT_JSONL;
    filler = (size_t)(((data[1] & 0x7f) << 8) | data[2]) * FILLER_UNIT;
    file_size = build_file(format, (data[1] & 0x80) != 0, filler, data + 3, size - 3);
    write_file(file_size);
    ev = billing_event_new();
    again = billing_event_new();
    r = bc_reader_open(path, format, err, sizeof(err));
    FZ_CHECK(ev != NULL && again != NULL && r != NULL, "setup: %s", err);
    FZ_CHECK(bc_reader_rereadable(r), "a memfd is a regular file, so it can be read again");
    for (;;) {
        err[0] = '\0';
        rr = bc_reader_next(r, ev, err, sizeof(err));
        FZ_CHECK(++calls <= file_size + 2, "no end after %zu records from %zu bytes", calls,
                 file_size);
        if (rr == BC_READ_EOF)
            break;
        FZ_CHECK(bc_reader_where(r)[0] != '\0', "a record without a location");
        if (rr != BC_READ_EVENT) {
            fz_check_message("bc_reader_next", err, sizeof(err));
            if (rr == BC_READ_ERROR)
                break;
            continue;
        }
        FZ_CHECK(bc_reader_offset(r) < file_size, "record offset %llu past the end (%zu)",
                 (unsigned long long)bc_reader_offset(r), file_size);
        FZ_CHECK(events == 0 || bc_reader_offset(r) > last_offset, "record offset %llu after %llu",
                 (unsigned long long)bc_reader_offset(r), (unsigned long long)last_offset);
        if (format == BC_FORMAT_JSONL)
            FZ_CHECK(bc_reader_position(r) > last_line, "line %llu after %llu",
                     (unsigned long long)bc_reader_position(r), (unsigned long long)last_line);
        last_offset = bc_reader_offset(r);
        last_line = bc_reader_position(r);
        events++;
        check_reread(format, last_offset, bc_reader_record_hash(r), ev, again);
    }
    bc_reader_close(r);
    billing_event_destroy(ev);
    billing_event_destroy(again);
    return 0;
}
