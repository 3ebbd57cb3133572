/*
 * fuzzcommon.h - what the fuzz targets share: the libFuzzer entry points,
 * the way a broken property stops the run, and, for the two event
 * decoders, a small catalog built once and the properties every accepted
 * event must satisfy (protobuf round trip, rating taken back exactly).
 *
 * Every target defines both entry points. Under libFuzzer (configure
 * --enable-fuzzing) libFuzzer's main calls them; in the ordinary build
 * replay.c provides a main that runs the seed corpus through them.
 */
#ifndef FUZZCOMMON_H
#define FUZZCOMMON_H

#include <stddef.h>
#include <stdint.h>

#include "billing.h"

/* libFuzzer's entry points (https://llvm.org/docs/LibFuzzer.html). */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#if defined(__GNUC__)
#define FZ_NORETURN __attribute__((noreturn))
#define FZ_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define FZ_NORETURN
#define FZ_PRINTF(a, b)
#endif

/*
 * fz_fail - report a broken property on stderr ("fuzz: FILE:LINE: ...")
 * and abort(), which libFuzzer and the replay driver both treat as a
 * crash of the current input.
 */
void fz_fail(const char *file, int line, const char *fmt, ...) FZ_NORETURN FZ_PRINTF(3, 4);

/* FZ_CHECK - abort with the condition's text and a message unless @cond holds. */
#define FZ_CHECK(cond, ...)                                                           \
    do {                                                                              \
        if (!(cond))                                                                  \
            fz_fail(__FILE__, __LINE__, "property '" #cond "' broken: " __VA_ARGS__); \
    } while (0)

/*
 * fz_check_message - a function that failed must have written a message
 * into its @errbuf of @size bytes: non-empty and NUL-terminated.
 * @what names the call in the report.
 */
void fz_check_message(const char *what, const char *errbuf, size_t size);

/*
 * fz_config_zones - a new zone set for libbilling-config's loaders, kept by
 * the caller for the whole run (zones are immutable, and the set only
 * caches them); aborts when out of memory.
 */
struct billing_config_zones *fz_config_zones(void);

/*
 * fz_eastern_zone - a new zone for US Eastern time by rule (an embedded
 * TZif file: no zoneinfo needed), which the caller frees; aborts if the
 * library refuses it.
 */
billing_zone *fz_eastern_zone(void);

/*
 * fz_months - the months with charges of @account as year*100+month in
 * @out (room for @cap), checked to be a valid list; returns how many
 * there are (may exceed @cap).
 */
int fz_months(billing_rater *r, const char *account, int *out, int cap);

/*
 * fz_events_init - build, once, the catalog the event targets rate
 * against (CNY; two price versions; accounts lab-a and lab-b in UTC and
 * lab-ny in an embedded US Eastern zone; a monthly and a daily
 * subscription; two credit grants) and the background events every
 * rating starts from. Aborts if the library refuses its own example.
 */
void fz_events_init(void);

/*
 * fz_check_roundtrip - @ev (accepted by a decoder) encodes to protobuf;
 * when that encoding decodes, encoding the decoded event again gives the
 * same bytes. Returns the status of that decode: BILLING_OK, or the
 * catalog-free check it failed (possible only for events from JSON, whose
 * parser leaves those checks to the rater).
 */
billing_status fz_check_roundtrip(const billing_event *ev);

/*
 * fz_check_rating - rate @ev in a fresh rater (dedupe off) that already
 * holds the background events. If billing_rater_add refuses it, a message
 * was written and the rater is unchanged (event and aggregate counts). If
 * it accepts it: the event count grew by one and the month of its start
 * is listed for its account; billing_rater_take_back takes it back, leaving
 * the event count, the account's months and the invoice of that month as
 * a rater that never saw the event has them; adding it again gives the
 * invoice it gave the first time. Returns billing_rater_add's status.
 */
billing_status fz_check_rating(const billing_event *ev);

/*
 * fz_rated_by_catalog_checks - non-zero if @st is a status billing_rater_add
 * may give for an event that passed every catalog-free check (what
 * billing_event_decode verifies): rated, unknown account, no price, or
 * out of memory; never "invalid" or "out of range".
 */
int fz_rated_by_catalog_checks(billing_status st);

#endif /* FUZZCOMMON_H */
