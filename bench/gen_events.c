/*
 * gen_events.c - deterministic usage events for benchmarking `billing rate`.
 *
 *   gen_events [--protobuf] [--accounts N] [--seed S] EVENTS > events.{jsonl,pb}
 *   gen_events --accounts-json [--accounts N] [--grants AMOUNT] [--plans K] > accounts.json
 *
 * Events are bench_rate's workload (workload.h) of N accounts
 * ("acct-000000"...), so that they rate against
 * examples/gpu-cloud/pricebook.json and the --accounts-json output.
 * Ids are "ev-<n>", all distinct. The same arguments give the same bytes;
 * --seed S (a number) picks another sequence, for tests of random cases.
 * --grants gives every account a trial credit of AMOUNT (CNY) for January
 * 2026, --plans every K-th account a monthly RTX 4090 plan on its
 * resource i-<n>-0 for January: the business's workload (issue 28).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "billing.h"
#include "workload.h"

static uint64_t rng_state = UINT64_C(88172645463325252);

static int write_json(const spec *s)
{
    char line[512];
    int n = bench_format_json(s, line, sizeof(line));

    if (n < 0 || (size_t)n >= sizeof(line))
        return -1;
    return fwrite(line, 1, (size_t)n, stdout) == (size_t)n ? 0 : -1;
}

/* A varint length prefix, then the message (length-delimited framing). */
static int write_proto(const spec *s, billing_event *ev)
{
    unsigned char msg[BILLING_EVENT_WIRE_MAX];
    unsigned char prefix[10];
    size_t len;
    size_t n = 0;
    size_t v;

    bench_fill_event(ev, s, s->id);
    if (billing_event_encode(ev, msg, sizeof(msg), &len) != BILLING_OK)
        return -1;
    for (v = len; v >= 0x80; v >>= 7)
        prefix[n++] = (unsigned char)(v | 0x80);
    prefix[n++] = (unsigned char)v;
    if (fwrite(prefix, 1, n, stdout) != n || fwrite(msg, 1, len, stdout) != len)
        return -1;
    return 0;
}

/* The accounts file: --grants @amount (NULL: none) and --plans @plans (0: none). */
static int write_accounts(int accounts, const char *amount, int plans)
{
    const char *sep = "";
    int a;

    printf("{\n  \"description\": \"gen_events --accounts-json --accounts %d\",\n"
           "  \"accounts\": [\n",
           accounts);
    for (a = 0; a < accounts; a++)
        printf("    {\"id\": \"acct-%06d\", \"currency\": \"CNY\", \"time_zone\": "
               "\"Asia/Shanghai\", \"tax_rate\": \"0.06\"}%s\n",
               a, a + 1 < accounts ? "," : "");
    printf("  ],\n  \"subscriptions\": [\n");
    for (a = 0; plans > 0 && a < accounts; a += plans) {
        printf("%s    {\"id\": \"plan-%06d\", \"account\": \"acct-%06d\", \"resource\": "
               "\"i-%06d-0\", \"plan\": \"rtx4090x8-monthly\", \"start\": "
               "\"2026-01-01T00:00:00+08:00\", \"terms\": 1, \"cancelled_at\": null}",
               sep, a, a, a);
        sep = ",\n";
    }
    printf("\n  ],\n  \"grants\": [\n");
    sep = "";
    for (a = 0; amount != NULL && a < accounts; a++) {
        printf("%s    {\"id\": \"trial-%06d\", \"account\": \"acct-%06d\", \"amount\": \"%s\", "
               "\"granted_at\": \"2026-01-01T00:00:00+08:00\", \"expires_at\": "
               "\"2026-02-01T00:00:00+08:00\", \"applies_to\": [\"usage\"], \"priority\": 0}",
               sep, a, a, amount);
        sep = ",\n";
    }
    printf("\n  ]\n}\n");
    return fflush(stdout) == 0 ? 0 : 1;
}

static int write_events(long events, int accounts, int protobuf)
{
    billing_event *ev = billing_event_new();
    spec s;
    long n;
    int rc = 0;

    if (ev == NULL)
        return 1;
    for (n = 0; n < events && rc == 0; n++) {
        bench_make_spec(&s, &rng_state, accounts);
        snprintf(s.id, sizeof(s.id), "ev-%ld", n);
        rc = protobuf ? write_proto(&s, ev) : write_json(&s);
    }
    billing_event_destroy(ev);
    if (rc != 0 || fflush(stdout) != 0) {
        fprintf(stderr, "gen_events: write failed\n");
        return 1;
    }
    return 0;
}

static int usage(void)
{
    fprintf(stderr, "usage: gen_events [--protobuf] [--accounts N] [--seed S] EVENTS\n"
                    "       gen_events --accounts-json [--accounts N] [--grants AMOUNT] "
                    "[--plans K]\n");
    return 2;
}

int main(int argc, char **argv)
{
    int accounts = 1000;
    long events = -1;
    int protobuf = 0;
    int accounts_json = 0;
    const char *grants = NULL;
    int plans = 0;
    int i;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--protobuf") == 0)
            protobuf = 1;
        else if (strcmp(argv[i], "--accounts-json") == 0)
            accounts_json = 1;
        else if (strcmp(argv[i], "--accounts") == 0 && i + 1 < argc)
            accounts = atoi(argv[++i]);
        else if (strcmp(argv[i], "--grants") == 0 && i + 1 < argc)
            grants = argv[++i];
        else if (strcmp(argv[i], "--plans") == 0 && i + 1 < argc)
            plans = atoi(argv[++i]);
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            /* xorshift64 needs a state that is not 0: an odd one from the seed. */
            rng_state = (strtoull(argv[++i], NULL, 10) * UINT64_C(0x9E3779B97F4A7C15)) | 1;
        else if (argv[i][0] != '-' && events < 0)
            events = atol(argv[i]);
        else
            return usage();
    }
    if (accounts <= 0 || accounts > 1000000 || plans < 0 ||
        (grants != NULL && strspn(grants, "0123456789.") != strlen(grants)))
        return usage();
    if (accounts_json)
        return write_accounts(accounts, grants, plans);
    if (events < 0)
        return usage();
    return write_events(events, accounts, protobuf);
}
