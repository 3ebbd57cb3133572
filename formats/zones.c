/*
 * zones.c - finding, reading and caching compiled zoneinfo files.
 */
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "billing_config.h"
#include "util.h"

struct billing_config_zones {
    billing_zone **zones;
    size_t len;
    size_t cap;
};

static int name_char_ok(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '/' ||
           c == '_' || c == '-' || c == '+' || c == '.';
}

/* A component [s, s+n) other than "", "." and "..", not starting with '.'. */
static int component_ok(const char *s, size_t n)
{
    return n > 0 && s[0] != '.';
}

/*
 * Names whose meaning depends on the host: "localtime" is its own setting,
 * "posixrules" the default rules of POSIX strings, "Factory" a placeholder
 * without an offset, and Debian's posix/ and right/ trees are copies (the
 * latter counting leap seconds) that other systems lack. The database
 * refuses the same (billing.host_dependent_zone, doc/database.md).
 */
static const char *const host_dependent[] = {"localtime", "posixrules", "Factory"};
static const char *const host_dependent_dirs[] = {"posix", "right"};

static int host_dependent_name(const char *name)
{
    size_t i;
    size_t n;

    if (name == NULL)
        return 0;
    for (i = 0; i < sizeof(host_dependent) / sizeof(host_dependent[0]); i++) {
        if (strcmp(name, host_dependent[i]) == 0)
            return 1;
    }
    for (i = 0; i < sizeof(host_dependent_dirs) / sizeof(host_dependent_dirs[0]); i++) {
        n = strlen(host_dependent_dirs[i]);
        if (strncmp(name, host_dependent_dirs[i], n) == 0 && (name[n] == '/' || name[n] == '\0'))
            return 1;
    }
    return 0;
}

int billing_config_zone_name_valid(const char *name)
{
    size_t i;
    size_t start = 0;

    if (name == NULL || name[0] == '\0')
        return 0;
    for (i = 0; name[i] != '\0'; i++) {
        if (i >= BILLING_CONFIG_ZONE_NAME_MAX || !name_char_ok(name[i]))
            return 0;
        if (name[i] == '/') {
            if (!component_ok(name + start, i - start))
                return 0;
            start = i + 1;
        }
    }
    return component_ok(name + start, i - start) && !host_dependent_name(name);
}

static const char *zoneinfo_dir(void)
{
    const char *dir = getenv("TZDIR");

    return (dir != NULL && dir[0] != '\0') ? dir : "/usr/share/zoneinfo";
}

static billing_status zone_fail(char *errbuf, size_t errsize, billing_status st, const char *fmt,
                                ...) BC_PRINTF(4, 5);

static billing_status zone_fail(char *errbuf, size_t errsize, billing_status st, const char *fmt,
                                ...)
{
    va_list ap;

    va_start(ap, fmt);
    bc_vseterr(errbuf, errsize, fmt, ap);
    va_end(ap);
    return st;
}

static billing_status check_name(const char *name, char *errbuf, size_t errsize)
{
    if (host_dependent_name(name))
        return zone_fail(errbuf, errsize, BILLING_ERR_ZONE,
                         "time zone '%s' depends on the host's configuration: use an IANA zone "
                         "name such as 'Asia/Shanghai'",
                         name);
    if (!billing_config_zone_name_valid(name))
        return zone_fail(errbuf, errsize, BILLING_ERR_ZONE,
                         "time zone '%.64s' is not a valid IANA zone name", name ? name : "");
    return BILLING_OK;
}

/* Longest zone name compared, and most bytes of a zone.tab read, for suggestions. */
#define SUGGEST_NAME_MAX 64
#define ZONE_TAB_MAX (1u << 20)
#define N_SUGGEST 3

/* Edit distance between @a and @b (ASCII case folded), both at most SUGGEST_NAME_MAX bytes. */
static size_t distance(const char *a, size_t na, const char *b, size_t nb)
{
    size_t row[SUGGEST_NAME_MAX + 1];
    size_t i;
    size_t j;

    for (j = 0; j <= nb; j++)
        row[j] = j;
    for (i = 1; i <= na; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (j = 1; j <= nb; j++) {
            size_t up = row[j];
            int same = (a[i - 1] | 0x20) == (b[j - 1] | 0x20);
            size_t best = diag + (same ? 0 : 1);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[nb];
}

/*
 * The names of zone.tab (third column) closest to @name, as "; did you
 * mean 'A' or 'B'?" in @out; "" when none is close (at most a quarter of
 * the name, and 3, edits away) or the table cannot be read.
 */
static void suggest_zones(const char *name, char *out, size_t size)
{
    char path[4096];
    char why[64];
    char *data = NULL;
    size_t len = 0;
    size_t nn = strlen(name);
    size_t limit = nn / 4 > 3 ? 3 : (nn / 4 < 1 ? 1 : nn / 4);
    const char *best[N_SUGGEST];
    size_t best_len[N_SUGGEST];
    size_t best_d[N_SUGGEST];
    size_t n_best = 0;
    char *line;
    char *save = NULL;
    size_t i;
    size_t used;

    out[0] = '\0';
    if (nn > SUGGEST_NAME_MAX)
        return;
    snprintf(path, sizeof(path), "%s/zone1970.tab", zoneinfo_dir());
    if (bc_read_file(path, ZONE_TAB_MAX, &data, &len, why, sizeof(why)) != 0)
        return;
    for (line = strtok_r(data, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        char *zone;
        size_t zl;
        size_t d;
        size_t k;

        if (line[0] == '#')
            continue;
        zone = strchr(line, '\t');
        zone = zone != NULL ? strchr(zone + 1, '\t') : NULL;
        if (zone == NULL)
            continue;
        zone++;
        zl = strcspn(zone, "\t");
        if (zl == 0 || zl > SUGGEST_NAME_MAX)
            continue;
        d = distance(name, nn, zone, zl);
        if (d > limit)
            continue;
        /* Insert by distance, keeping the N_SUGGEST closest. */
        for (k = n_best; k > 0 && best_d[k - 1] > d; k--) {
            if (k < N_SUGGEST) {
                best[k] = best[k - 1];
                best_len[k] = best_len[k - 1];
                best_d[k] = best_d[k - 1];
            }
        }
        if (k < N_SUGGEST) {
            best[k] = zone;
            best_len[k] = zl;
            best_d[k] = d;
            if (n_best < N_SUGGEST)
                n_best++;
        }
    }
    used = 0;
    for (i = 0; i < n_best && used < size; i++) {
        int w = snprintf(out + used, size - used, "%s'%.*s'",
                         i == 0            ? "; did you mean "
                         : i + 1 == n_best ? " or "
                                           : ", ",
                         (int)best_len[i], best[i]);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (n_best > 0 && used < size)
        snprintf(out + used, size - used, "?");
    free(data);
}

billing_status billing_config_zone_load(const char *name, billing_zone **out, char *errbuf,
                                        size_t errsize)
{
    char path[4096];
    char why[256];
    char hint[256];
    char *data = NULL;
    size_t len = 0;
    billing_status st;
    int n;

    if (out == NULL)
        return zone_fail(errbuf, errsize, BILLING_ERR_INVALID, "time zone: NULL output pointer");
    *out = NULL;
    st = check_name(name, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    if (strcmp(name, "UTC") == 0) {
        *out = billing_zone_new_utc();
        return *out != NULL ? BILLING_OK
                            : zone_fail(errbuf, errsize, BILLING_ERR_NOMEM,
                                        "time zone 'UTC': out of memory");
    }
    n = snprintf(path, sizeof(path), "%s/%s", zoneinfo_dir(), name);
    if (n < 0 || (size_t)n >= sizeof(path))
        return zone_fail(errbuf, errsize, BILLING_ERR_ZONE,
                         "time zone '%s': zoneinfo path too long", name);
    if (bc_read_file(path, BILLING_CONFIG_ZONE_FILE_MAX, &data, &len, why, sizeof(why)) != 0) {
        if (access(path, F_OK) == 0 || errno != ENOENT)
            return zone_fail(errbuf, errsize, BILLING_ERR_ZONE, "time zone '%s': %s", name, why);
        suggest_zones(name, hint, sizeof(hint));
        return zone_fail(errbuf, errsize, BILLING_ERR_ZONE, "time zone '%s': %s%s", name, why,
                         hint);
    }
    st = billing_zone_new(name, (const unsigned char *)data, len, out, why, sizeof(why));
    free(data);
    if (st != BILLING_OK)
        return zone_fail(errbuf, errsize, st == BILLING_ERR_NOMEM ? st : BILLING_ERR_ZONE,
                         "time zone '%s': %s: %s", name, path, why);
    return BILLING_OK;
}

billing_config_zones *billing_config_zones_new(void)
{
    return calloc(1, sizeof(billing_config_zones));
}

void billing_config_zones_destroy(billing_config_zones *set)
{
    size_t i;

    if (set == NULL)
        return;
    for (i = 0; i < set->len; i++)
        billing_zone_destroy(set->zones[i]);
    free(set->zones);
    free(set);
}

static int reserve(billing_config_zones *set)
{
    size_t ncap;
    billing_zone **p;

    if (set->len < set->cap)
        return 0;
    ncap = set->cap ? set->cap * 2 : 8;
    p = realloc(set->zones, ncap * sizeof(*p));
    if (p == NULL)
        return -1;
    set->zones = p;
    set->cap = ncap;
    return 0;
}

billing_status billing_config_zones_get(billing_config_zones *set, const char *name,
                                        const billing_zone **out, char *errbuf, size_t errsize)
{
    size_t i;
    billing_zone *zone;
    billing_status st;

    if (set == NULL || out == NULL)
        return zone_fail(errbuf, errsize, BILLING_ERR_INVALID, "time zone: NULL argument");
    *out = NULL;
    st = check_name(name, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    for (i = 0; i < set->len; i++) {
        if (strcmp(billing_zone_name(set->zones[i]), name) == 0) {
            *out = set->zones[i];
            return BILLING_OK;
        }
    }
    if (set->len >= BILLING_CONFIG_ZONES_MAX)
        return zone_fail(errbuf, errsize, BILLING_ERR_TOO_LARGE, "more than %d distinct time zones",
                         BILLING_CONFIG_ZONES_MAX);
    if (reserve(set) != 0)
        return zone_fail(errbuf, errsize, BILLING_ERR_NOMEM, "time zone '%.64s': out of memory",
                         name);
    st = billing_config_zone_load(name, &zone, errbuf, errsize);
    if (st != BILLING_OK)
        return st;
    set->zones[set->len++] = zone;
    *out = zone;
    return BILLING_OK;
}
