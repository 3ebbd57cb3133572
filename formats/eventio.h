/*
 * eventio.h - reading usage events from files, pipes or stdin, as JSON
 * Lines or as length-delimited protobuf (each billing.v1.UsageEvent
 * preceded by its length as a base-128 varint, as Java's
 * writeDelimitedTo and Go's protodelim write them). See doc/formats.md.
 *
 * Memory is fixed per reader (a 1 MiB buffer) whatever the input size:
 * a JSON line is at most BC_JSONL_LINE_MAX bytes and a message at most
 * BILLING_EVENT_WIRE_MAX; longer ones are rejected and skipped.
 */
#ifndef BILLING_FORMATS_EVENTIO_H
#define BILLING_FORMATS_EVENTIO_H

#include <stddef.h>
#include <stdint.h>

#include "billing.h"

/* Longest JSON line accepted, newline excluded. */
#define BC_JSONL_LINE_MAX 65536

typedef enum bc_format {
    BC_FORMAT_JSONL = 1,   /* one JSON object per line (eventjson.h) */
    BC_FORMAT_PROTOBUF = 2 /* varint length, then a UsageEvent message; repeated */
} bc_format;

/* bc_format_parse - "jsonl" or "protobuf". Returns 0, or -1 for another name. */
int bc_format_parse(const char *name, bc_format *out);

/* bc_format_name - "jsonl" or "protobuf"; static. */
const char *bc_format_name(bc_format format);

/*
 * bc_format_guess - the format implied by @path: ".jsonl", ".json" and
 * ".ndjson" are JSON Lines, ".pb", ".bin" and ".protobuf" are protobuf,
 * and "-" (stdin) is JSON Lines. Returns 0, or -1 if the name says nothing.
 */
int bc_format_guess(const char *path, bc_format *out);

typedef enum bc_read_result {
    BC_READ_EVENT = 0,  /* the event was parsed into the caller's billing_event */
    BC_READ_REJECT = 1, /* one bad record, message written; reading may go on */
    BC_READ_EOF = 2,    /* no more records */
    BC_READ_ERROR = -1  /* read error or a framing error after which nothing can be trusted */
} bc_read_result;

typedef struct bc_reader bc_reader;

/*
 * bc_reader_open - read events from @path ("-" for stdin) in @format.
 * Returns a reader (close with bc_reader_close) or NULL with a message.
 */
bc_reader *bc_reader_open(const char *path, bc_format format, char *errbuf, size_t errsize);

/*
 * bc_reader_open_range - read the records of the regular file @path that
 * start at an input offset in [@start, @end): a chunk, so that several
 * readers can share one file. JSON Lines: a record starts at offset 0 or
 * after a newline, so ranges may be cut anywhere and every line belongs
 * to exactly one range; line numbers (bc_reader_position) count from 1
 * at the range's first line, and the caller adds the lines of the ranges
 * before. Protobuf: @start must be where a length prefix starts (0, or a
 * boundary from bc_proto_split); offsets stay those of the file. Returns a
 * reader (bc_reader_close) or NULL with a message. Thread-safe (one reader
 * per thread).
 */
bc_reader *bc_reader_open_range(const char *path, bc_format format, uint64_t start, uint64_t end,
                                char *errbuf, size_t errsize);

/*
 * bc_reader_set_range - make @r, opened by bc_reader_open_range, read the
 * range [@start, @end) of its file instead, as if just opened for it,
 * keeping its file and buffer (a thread reading many chunks of one file).
 * Returns 0, or -1 with a message (not a file, or a seek error).
 */
int bc_reader_set_range(bc_reader *r, uint64_t start, uint64_t end, char *errbuf, size_t errsize);

/*
 * bc_proto_split - where to cut a length-delimited protobuf file of @size
 * bytes after the record boundary @from: the first record boundary at
 * least @at_least bytes further, found by hopping from length prefix to
 * length prefix (the messages themselves are not decoded). *@out is @size
 * when there is none, or when a prefix cannot be read or points past the
 * end: the rest of the file is then one range, and its reader reports the
 * framing error where it is. Returns 0, or -1 on a read error or when out
 * of memory.
 */
int bc_proto_split(int fd, uint64_t from, uint64_t at_least, uint64_t size, uint64_t *out);

/* bc_reader_close - close the file (not stdin) and free the reader; NULL is a no-op. */
void bc_reader_close(bc_reader *r);

/*
 * bc_reader_next - the next record into @ev (reset first). On
 * BC_READ_REJECT and BC_READ_ERROR, @errbuf holds the reason; the record's
 * location is bc_reader_where. Blank JSON lines are skipped (they carry
 * nothing) but counted in line numbers.
 */
bc_read_result bc_reader_next(bc_reader *r, billing_event *ev, char *errbuf, size_t errsize);

/*
 * bc_reader_next_raw - the next record's bytes, undecoded (the JSON line
 * without its newline, or the protobuf message without its length
 * prefix), for callers that keep the original bytes (`billing ingest`
 * stores rejects with them). *@data points into the reader's buffer and
 * is valid until the next call. Returns BC_READ_EVENT with the bytes;
 * BC_READ_REJECT for a record over its bound (skipped; no bytes, message
 * written); BC_READ_EOF; or BC_READ_ERROR as bc_reader_next.
 */
bc_read_result bc_reader_next_raw(bc_reader *r, const unsigned char **data, size_t *len,
                                  char *errbuf, size_t errsize);

/*
 * bc_reader_where - the location of the record last returned, for
 * messages: "events.jsonl:17" or "events.pb: offset 1234". Owned by the
 * reader, valid until the next call.
 */
const char *bc_reader_where(bc_reader *r);

/*
 * bc_reader_position - where the record last returned starts: its line
 * number (JSON Lines, from 1) or the byte offset of its length prefix
 * (protobuf, from 0). With bc_reader_name, enough to name the record
 * later through bc_location_format.
 */
uint64_t bc_reader_position(const bc_reader *r);

/*
 * bc_reader_offset - the byte offset in the input where the record last
 * returned starts (for bc_event_read_at).
 */
uint64_t bc_reader_offset(const bc_reader *r);

/*
 * bc_reader_record_hash - bc_hash_bytes of the bytes of the record last
 * returned as an event (the JSON line without its newline, or the
 * protobuf message without its length prefix): what bc_event_read_at
 * gives back when the record is read again unchanged. Only valid until
 * the next bc_reader_next.
 */
uint64_t bc_reader_record_hash(const bc_reader *r);

/*
 * bc_reader_record - the bytes of the record last returned, event or
 * rejected (the JSON line without its newline, or the protobuf message
 * without its length prefix), *@len of them; NULL with *@len 0 when they
 * were not kept (a line or message over the size limit, skipped unread).
 * Owned by @r and valid until the next bc_reader_next.
 */
const unsigned char *bc_reader_record(const bc_reader *r, size_t *len);

/*
 * bc_reader_rereadable - 1 if the input is a regular file opened by path,
 * so that a record can be read again at its offset later; 0 for stdin,
 * pipes and devices.
 */
int bc_reader_rereadable(const bc_reader *r);

/* bc_reader_name - the input's name in messages: the path, or "(stdin)". */
const char *bc_reader_name(const bc_reader *r);

/*
 * bc_location_format - write "NAME:LINE" (JSON Lines) or "NAME: offset N"
 * (protobuf) for position @pos of input @name into @buf, truncated to @size.
 */
void bc_location_format(char *buf, size_t size, const char *name, bc_format format, uint64_t pos);

/*
 * bc_event_read_at - read again the record that starts at byte @offset
 * of the file @fd (a bc_reader_offset), parsed exactly as bc_reader_next
 * parsed it, with the hash of its bytes in *@raw_hash (may be NULL) to
 * compare with bc_reader_record_hash. Returns BC_READ_EVENT, or
 * BC_READ_ERROR with a message (read error, or no valid record there:
 * the file changed).
 */
bc_read_result bc_event_read_at(int fd, bc_format format, uint64_t offset, billing_event *ev,
                                uint64_t *raw_hash, char *errbuf, size_t errsize);

/*
 * bc_record_bytes_at - the bytes of the record that starts at byte
 * @offset of @fd, as bc_reader_record gives them (the JSON line without
 * its newline, or the protobuf message without its prefix), into @buf of
 * @cap bytes (BC_JSONL_LINE_MAX + 1 holds any line; a protobuf record
 * needs its prefix too, at most 10 + BILLING_EVENT_WIRE_MAX), their count in
 * *@len. Returns 0, or -1 when it cannot be read or does not fit.
 */
int bc_record_bytes_at(int fd, bc_format format, uint64_t offset, unsigned char *buf, size_t cap,
                       size_t *len);

#endif /* BILLING_FORMATS_EVENTIO_H */
