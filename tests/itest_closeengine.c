/*
 * itest_closeengine.c - the month-end close engine (monthend/close.h)
 * called directly, as a server would, against the private PostgreSQL of
 * scripts/pg.sh: no `billing close`. The result object's rows (accounts,
 * drafts by outcome, events, money per meter, subtotal, tax, total) are
 * compared with the drafts the run stored; progress arrives through the
 * callback; an unchanged second run keeps every draft; close_finalize
 * numbers the drafts past their grace; a run against a database that
 * does not exist returns CLOSE_ERR_DATABASE with its reason in the
 * result. Every run writes nothing to stdout or stderr:
 * both are captured in a file for the call and must stay empty.
 *
 * The catalog and events are put in with the `billing` tool (load,
 * ingest): the engine is what is under test. Needs BILLING_PG_CONNINFO;
 * FAILS without it. Each test has its own database.
 */
#include "config.h"

#include <check.h>
#include <fcntl.h>
#include <gmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "close.h"
#include "itestdb.h"
#include "store.h"

#define CONNINFO_MAX 2048
#define PATH_LEN 1024
#define CMD_MAX (3 * PATH_LEN + CONNINFO_MAX)
#define NOTES_MAX 16

static itdb_work work; /* the test's database and scratch directory (tests/itestdb.h) */

/* What the callbacks saw. */
typedef struct seen {
    int starts, updates, ends;
    size_t start_total, end_done, end_total;
    uint64_t end_events;
    int notes[3]; /* by close_note_kind */
    char last_note[1024];
} seen;

static void on_progress(void *arg, close_phase phase, size_t done, size_t total, uint64_t events)
{
    seen *s = arg;

    if (phase == CLOSE_PHASE_START) {
        s->starts++;
        s->start_total = total;
    } else if (phase == CLOSE_PHASE_END) {
        s->ends++;
        s->end_done = done;
        s->end_total = total;
        s->end_events = events;
    } else {
        s->updates++;
    }
}

static void on_note(void *arg, close_note_kind kind, const char *text)
{
    seen *s = arg;

    s->notes[kind]++;
    snprintf(s->last_note, sizeof(s->last_note), "%s", text);
}

/* ---------------------------------------------------------------------- */
/* A database with two accounts and their October                          */
/* ---------------------------------------------------------------------- */

/* `billing ARGS --db CONNINFO` (ARGS a shell command line); asserts exit status 0. */
static void billing_ok(const char *args)
{
    char cmd[CMD_MAX];
    const char *top = getenv("top_builddir");

    ck_assert(snprintf(cmd, sizeof(cmd), "%s/billing/billing %s --db '%s' >/dev/null",
                       top != NULL ? top : "..", args, work.conninfo) < (int)sizeof(cmd));
    ck_assert_msg(system(cmd) == 0, "failed: %s", cmd);
}

/*
 * A book with two GPU prices and two accounts in different zones and tax
 * rates, loaded; five October events of which four fall in October in
 * their account's zone (b's first starts on September 30 in UTC, which is
 * September there), ingested.
 */
static bs_conn *fresh_october(const char *tag)
{
    char cmd[CMD_MAX];
    char pb[PATH_LEN];
    char acc[PATH_LEN];
    char ev[PATH_LEN];
    bs_conn *c;

    c = itdb_work_fresh(&work, "closeengine", tag);
    itdb_work_write(
        &work, "pricebook.json",
        "{\"currency\": \"CNY\", \"rounding\": \"half-up\", \"plans\": [], \"versions\":"
        " [{\"id\": \"v1\", \"effective_from\": \"2026-01-01T00:00:00Z\", \"rates\": ["
        "{\"meter\": \"gpu\", \"model\": \"RTX4090\", \"region\": \"r\", \"price\": \"2.00\"},"
        "{\"meter\": \"gpu\", \"model\": \"A100\", \"region\": \"r\", \"price\": \"3.30\"},"
        "{\"meter\": \"storage\", \"model\": \"*\", \"region\": \"*\", \"price\": \"0.20\"}],"
        " \"plan_fees\": []}]}\n");
    itdb_work_write(&work, "accounts.json",
                    "{\"accounts\": ["
                    "{\"id\": \"a\", \"currency\": \"CNY\", \"time_zone\": \"Asia/Shanghai\","
                    " \"tax_rate\": \"0.06\"},"
                    "{\"id\": \"b\", \"currency\": \"CNY\", \"time_zone\": \"America/New_York\","
                    " \"tax_rate\": \"0\"}], \"subscriptions\": [], \"grants\": []}\n");
    itdb_work_write(&work, "events.jsonl",
                    "{\"id\":\"e1\",\"account\":\"a\",\"resource\":\"i-1\",\"meter\":\"gpu\","
                    "\"start\":\"2026-10-05T00:00:00Z\",\"end\":\"2026-10-05T01:00:00Z\","
                    "\"quantity\":\"1\",\"model\":\"RTX4090\",\"region\":\"r\"}\n"
                    "{\"id\":\"e2\",\"account\":\"a\",\"resource\":\"i-2\",\"meter\":\"gpu\","
                    "\"start\":\"2026-10-06T00:00:00Z\",\"end\":\"2026-10-06T02:20:00Z\","
                    "\"quantity\":\"1\",\"model\":\"A100\",\"region\":\"r\"}\n"
                    "{\"id\":\"e3\",\"account\":\"b\",\"resource\":\"i-3\",\"meter\":\"gpu\","
                    "\"start\":\"2026-10-10T00:00:00Z\",\"end\":\"2026-10-10T00:45:00Z\","
                    "\"quantity\":\"1\",\"model\":\"RTX4090\",\"region\":\"r\"}\n"
                    "{\"id\":\"e4\",\"account\":\"b\",\"resource\":\"d-1\",\"meter\":\"storage\","
                    "\"start\":\"2026-10-11T00:00:00Z\",\"end\":\"2026-10-21T00:00:00Z\","
                    "\"quantity\":\"100\",\"region\":\"r\"}\n"
                    "{\"id\":\"e5\",\"account\":\"b\",\"resource\":\"i-4\",\"meter\":\"gpu\","
                    "\"start\":\"2026-10-01T01:00:00Z\",\"end\":\"2026-10-01T02:00:00Z\","
                    "\"quantity\":\"1\",\"model\":\"RTX4090\",\"region\":\"r\"}\n");
    itdb_work_path(&work, pb, sizeof(pb), "pricebook.json");
    itdb_work_path(&work, acc, sizeof(acc), "accounts.json");
    itdb_work_path(&work, ev, sizeof(ev), "events.jsonl");
    ck_assert(snprintf(cmd, sizeof(cmd), "load --pricebook '%s' --accounts '%s'", pb, acc) <
              (int)sizeof(cmd));
    billing_ok(cmd);
    ck_assert(snprintf(cmd, sizeof(cmd), "ingest --quiet '%s'", ev) < (int)sizeof(cmd));
    billing_ok(cmd);
    return c;
}

static void drop(bs_conn *c)
{
    itdb_work_drop(c, &work);
}

/* ---------------------------------------------------------------------- */
/* Running the engine with stdout and stderr captured                      */
/* ---------------------------------------------------------------------- */

/*
 * close_run for October 2026 of @db (NULL: the test's database) with
 * @jobs workers, or close_finalize with @grace seconds when @grace >= 0,
 * the callbacks into @s; stdout and stderr go to a file for the call,
 * whose size (what the engine printed) goes to *@printed.
 */
static close_status run_engine(const char *db, int jobs, int64_t grace, close_result *r, seen *s,
                               long *printed)
{
    char path[PATH_LEN];
    close_params p;
    close_status st;
    struct stat sb;
    int out;
    int err;
    int fd;

    memset(&p, 0, sizeof(p));
    memset(s, 0, sizeof(*s));
    p.db = db != NULL ? db : work.conninfo;
    p.book = "default";
    p.year = 2026;
    p.month = 10;
    p.jobs = jobs;
    p.on_progress = on_progress;
    p.on_note = on_note;
    p.arg = s;
    itdb_work_path(&work, path, sizeof(path), "printed.txt");
    fflush(NULL);
    out = dup(STDOUT_FILENO);
    err = dup(STDERR_FILENO);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert(out >= 0 && err >= 0 && fd >= 0);
    ck_assert(dup2(fd, STDOUT_FILENO) >= 0 && dup2(fd, STDERR_FILENO) >= 0);
    close(fd);
    st = grace >= 0 ? close_finalize(&p, grace, r) : close_run(&p, r);
    fflush(NULL);
    ck_assert(dup2(out, STDOUT_FILENO) >= 0 && dup2(err, STDERR_FILENO) >= 0);
    close(out);
    close(err);
    ck_assert_int_eq(stat(path, &sb), 0);
    *printed = (long)sb.st_size;
    return st;
}

/* close_run of October 2026 (run_engine). */
static close_status run_close(const char *db, int jobs, close_result *r, seen *s, long *printed)
{
    return run_engine(db, jobs, -1, r, s, printed);
}

/* @v (minor units) equals the single number of @sql (a sum in currency units). */
static void expect_minor(bs_conn *c, const mpz_t v, const char *sql, const char *what)
{
    char q[1024];
    long stored;

    ck_assert(snprintf(q, sizeof(q), "SELECT (coalesce((%s), 0) * 100)::bigint", sql) <
              (int)sizeof(q));
    stored = itdb_long(c, q);
    ck_assert_msg(mpz_cmp_si(v, stored) == 0, "%s: the result says %s, the drafts %ld", what,
                  mpz_get_str(NULL, 10, v), stored);
}

#define OCT_DRAFTS "FROM billing.invoices WHERE month = '2026-10-01' AND status = 'draft'"
#define OCT_LINES                                                                 \
    "FROM billing.invoice_lines l JOIN billing.invoices i ON i.id = l.invoice_id" \
    " WHERE i.month = '2026-10-01'"

/* Every money row of @r against the stored drafts of October. */
static void expect_drafts(bs_conn *c, const close_result *r)
{
    ck_assert_str_eq(r->currency, "CNY");
    ck_assert_int_eq(r->digits, 2);
    ck_assert_int_eq(r->year, 2026);
    ck_assert_int_eq(r->month, 10);
    ck_assert_int_eq((long)r->invoices, itdb_long(c, "SELECT count(*) " OCT_DRAFTS));
    expect_minor(c, r->by_meter[BILLING_METER_GPU],
                 "SELECT sum(l.amount) " OCT_LINES " AND l.meter = 'gpu'", "charges gpu");
    expect_minor(c, r->by_meter[BILLING_METER_STORAGE],
                 "SELECT sum(l.amount) " OCT_LINES " AND l.meter = 'storage'", "charges storage");
    expect_minor(c, r->by_meter[BILLING_METER_GPULESS],
                 "SELECT sum(l.amount) " OCT_LINES " AND l.meter = 'gpuless'", "charges gpuless");
    expect_minor(c, r->fees, "SELECT sum(l.amount) " OCT_LINES " AND l.meter IS NULL",
                 "charges fees");
    expect_minor(c, r->subtotal, "SELECT sum(subtotal) " OCT_DRAFTS, "subtotal");
    expect_minor(c, r->credits, "SELECT sum(credits) " OCT_DRAFTS, "credit used");
    expect_minor(c, r->tax, "SELECT sum(tax) " OCT_DRAFTS, "tax");
    expect_minor(c, r->total, "SELECT sum(total) " OCT_DRAFTS, "total");
    ck_assert_int_eq(mpz_sgn(r->adjusted), 0);
    ck_assert_uint_eq(r->adjustments, 0);
}

/* ---------------------------------------------------------------------- */
/* Tests                                                                   */
/* ---------------------------------------------------------------------- */

START_TEST(test_result_rows_are_the_stored_drafts)
{
    bs_conn *c = fresh_october("rows");
    close_result r;
    seen s;
    long printed;

    ck_assert_int_eq(run_close(NULL, 2, &r, &s, &printed), CLOSE_OK);
    ck_assert_msg(printed == 0, "the engine printed %ld bytes", printed);
    ck_assert_str_eq(r.error, "");
    ck_assert_uint_eq(r.accounts, 2);
    ck_assert_uint_eq(r.invoices, 2);
    ck_assert_uint_eq(r.outcome[BS_DRAFT_NEW], 2);
    ck_assert_uint_eq(r.outcome[BS_DRAFT_UPDATED] + r.outcome[BS_DRAFT_UNCHANGED] +
                          r.outcome[BS_DRAFT_FINALIZED],
                      0);
    ck_assert_uint_eq(r.skipped, 0);
    /* e5 is September 30 in New York: rated, not the period's. */
    ck_assert_uint_eq(r.events, 4);
    ck_assert_uint_eq(r.rejected, 0);
    ck_assert_uint_eq(r.warnings, 0);
    expect_drafts(c, &r);
    /*
     * Per account (its close mark), each event counted in its own account's
     * zone: the batch's events interleave its accounts, and each account's
     * period and count are kept by its position in the batch.
     */
    ck_assert_int_eq(itdb_long(c, "SELECT events FROM billing.close_marks WHERE account_id = 'a'"
                                  " AND month = '2026-10-01'"),
                     2);
    ck_assert_int_eq(itdb_long(c, "SELECT events FROM billing.close_marks WHERE account_id = 'b'"
                                  " AND month = '2026-10-01'"),
                     2);
    /* a by hand: 1 h at 2.00 + 7/3 h at 3.30 = 9.70, tax at 6% 0.58. */
    ck_assert_int_eq(
        itdb_long(c, "SELECT (total * 100)::bigint " OCT_DRAFTS " AND account_id = 'a'"), 1028);
    ck_assert_int_eq(s.starts, 1);
    ck_assert_int_eq(s.ends, 1);
    ck_assert_uint_eq(s.start_total, 2);
    ck_assert_uint_eq(s.end_done, 2);
    ck_assert_uint_eq(s.end_total, 2);
    ck_assert_uint_eq(s.end_events, 4);
    ck_assert_int_eq(
        s.notes[CLOSE_NOTE_ERROR] + s.notes[CLOSE_NOTE_WARNING] + s.notes[CLOSE_NOTE_REJECTED], 0);
    close_result_clear(&r);
    drop(c);
}
END_TEST

START_TEST(test_unchanged_rerun_keeps_the_drafts)
{
    bs_conn *c = fresh_october("again");
    close_result r;
    seen s;
    long printed;
    char *before;
    char *after;
    const char *drafts =
        "SELECT account_id, subtotal, tax, total, updated_at " OCT_DRAFTS " ORDER BY account_id";

    ck_assert_int_eq(run_close(NULL, 1, &r, &s, &printed), CLOSE_OK);
    close_result_clear(&r);
    before = itdb_text(c, drafts);
    ck_assert_int_eq(run_close(NULL, 2, &r, &s, &printed), CLOSE_OK);
    ck_assert_msg(printed == 0, "the engine printed %ld bytes", printed);
    ck_assert_uint_eq(r.accounts, 2);
    ck_assert_uint_eq(r.skipped, 2);
    ck_assert_uint_eq(r.outcome[BS_DRAFT_UNCHANGED], 2);
    ck_assert_uint_eq(r.outcome[BS_DRAFT_NEW] + r.outcome[BS_DRAFT_UPDATED], 0);
    ck_assert_uint_eq(r.events, 4);
    /* No account to re-rate: the workers had nothing, the progress says so. */
    ck_assert_uint_eq(s.start_total, 0);
    expect_drafts(c, &r);
    after = itdb_text(c, drafts);
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
    close_result_clear(&r);
    drop(c);
}
END_TEST

START_TEST(test_database_error_is_a_status_not_a_message)
{
    bs_conn *c = fresh_october("nodb");
    char other[CONNINFO_MAX];
    close_result r;
    seen s;
    long printed;

    itdb_conninfo("billing_no_such_database_closeengine", other, sizeof(other));
    ck_assert_int_eq(run_close(other, 1, &r, &s, &printed), CLOSE_ERR_DATABASE);
    ck_assert_msg(printed == 0, "the engine printed %ld bytes", printed);
    ck_assert_msg(strstr(r.error, "billing_no_such_database_closeengine") != NULL,
                  "the error does not name the database: %s", r.error);
    ck_assert_int_eq(s.notes[CLOSE_NOTE_ERROR], 1);
    ck_assert_str_eq(s.last_note, r.error);
    ck_assert_int_eq(s.starts, 0);
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.invoices"), 0);
    close_result_clear(&r);
    drop(c);
}
END_TEST

START_TEST(test_finalize_numbers_the_drafts)
{
    bs_conn *c = fresh_october("final");
    close_result r;
    seen s;
    long printed;

    ck_assert_int_eq(run_close(NULL, 1, &r, &s, &printed), CLOSE_OK);
    close_result_clear(&r);
    /* A grace of ten years: every draft is still waiting. */
    ck_assert_int_eq(run_engine(NULL, 1, INT64_C(3650) * 86400, &r, &s, &printed), CLOSE_OK);
    ck_assert_msg(printed == 0, "the engine printed %ld bytes", printed);
    ck_assert_uint_eq(r.finalized, 0);
    ck_assert_uint_eq(r.waiting, 2);
    close_result_clear(&r);
    ck_assert_int_eq(run_engine(NULL, 1, 0, &r, &s, &printed), CLOSE_OK);
    ck_assert_msg(printed == 0, "the engine printed %ld bytes", printed);
    ck_assert_uint_eq(r.finalized, 2);
    ck_assert_uint_eq(r.waiting, 0);
    ck_assert_str_eq(r.error, "");
    ck_assert_int_eq(itdb_long(c, "SELECT count(*) FROM billing.invoices WHERE month = "
                                  "'2026-10-01' AND status = 'finalized' AND number IS NOT NULL"),
                     2);
    close_result_clear(&r);
    /* Closing again leaves the finalized month alone and says so. */
    ck_assert_int_eq(run_close(NULL, 2, &r, &s, &printed), CLOSE_OK);
    ck_assert_msg(printed == 0, "the engine printed %ld bytes", printed);
    ck_assert_uint_eq(r.outcome[BS_DRAFT_FINALIZED], 2);
    ck_assert_int_eq(itdb_long(c, "SELECT (sum(total) * 100)::bigint FROM billing.invoices "
                                  "WHERE month = '2026-10-01'"),
                     mpz_get_si(r.total));
    close_result_clear(&r);
    drop(c);
}
END_TEST

static Suite *closeengine_suite(void)
{
    Suite *s = suite_create("closeengine");
    TCase *tc = tcase_create("engine");

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_result_rows_are_the_stored_drafts);
    tcase_add_test(tc, test_unchanged_rerun_keeps_the_drafts);
    tcase_add_test(tc, test_database_error_is_a_status_not_a_message);
    tcase_add_test(tc, test_finalize_numbers_the_drafts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(closeengine_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
