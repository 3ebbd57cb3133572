/*
 * zones.c - finding, reading and caching compiled zoneinfo files.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"
#include "zones.h"

/* Distinct zones one set may hold: bounds memory on hostile config files. */
#define BC_ZONES_MAX 1024

struct bc_zones {
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

int bc_zone_host_dependent(const char *name)
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

int bc_zone_name_valid(const char *name)
{
    size_t i;
    size_t start = 0;

    if (name == NULL || name[0] == '\0')
        return 0;
    for (i = 0; name[i] != '\0'; i++) {
        if (i >= BC_ZONE_NAME_MAX || !name_char_ok(name[i]))
            return 0;
        if (name[i] == '/') {
            if (!component_ok(name + start, i - start))
                return 0;
            start = i + 1;
        }
    }
    return component_ok(name + start, i - start) && !bc_zone_host_dependent(name);
}

static const char *zoneinfo_dir(void)
{
    const char *dir = getenv("TZDIR");

    return (dir != NULL && dir[0] != '\0') ? dir : "/usr/share/zoneinfo";
}

billing_zone *bc_zone_load(const char *name, char *errbuf, size_t errsize)
{
    char path[4096];
    char why[256];
    char *data = NULL;
    size_t len = 0;
    billing_zone *zone;
    int n;

    if (bc_zone_host_dependent(name)) {
        bc_seterr(errbuf, errsize,
                  "time zone '%s' depends on the host's configuration: use an IANA zone name "
                  "such as 'Asia/Shanghai'",
                  name);
        return NULL;
    }
    if (!bc_zone_name_valid(name)) {
        bc_seterr(errbuf, errsize, "time zone '%.64s' is not a valid IANA zone name",
                  name ? name : "");
        return NULL;
    }
    if (strcmp(name, "UTC") == 0)
        return billing_zone_new_utc();
    n = snprintf(path, sizeof(path), "%s/%s", zoneinfo_dir(), name);
    if (n < 0 || (size_t)n >= sizeof(path)) {
        bc_seterr(errbuf, errsize, "time zone '%s': zoneinfo path too long", name);
        return NULL;
    }
    if (bc_read_file(path, BC_ZONE_FILE_MAX, &data, &len, why, sizeof(why)) != 0) {
        bc_seterr(errbuf, errsize, "time zone '%s': %s", name, why);
        return NULL;
    }
    zone = billing_zone_new(name, (const unsigned char *)data, len, why, sizeof(why));
    if (zone == NULL)
        bc_seterr(errbuf, errsize, "time zone '%s': %s: %s", name, path, why);
    free(data);
    return zone;
}

bc_zones *bc_zones_new(void)
{
    return calloc(1, sizeof(bc_zones));
}

void bc_zones_destroy(bc_zones *set)
{
    size_t i;

    if (set == NULL)
        return;
    for (i = 0; i < set->len; i++)
        billing_zone_destroy(set->zones[i]);
    free(set->zones);
    free(set);
}

static int reserve(bc_zones *set)
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

const billing_zone *bc_zones_get(bc_zones *set, const char *name, char *errbuf, size_t errsize)
{
    size_t i;
    billing_zone *zone;

    for (i = 0; i < set->len; i++) {
        if (strcmp(billing_zone_name(set->zones[i]), name) == 0)
            return set->zones[i];
    }
    if (set->len >= BC_ZONES_MAX) {
        bc_seterr(errbuf, errsize, "more than %d distinct time zones", BC_ZONES_MAX);
        return NULL;
    }
    if (reserve(set) != 0) {
        bc_seterr(errbuf, errsize, "time zone '%.64s': out of memory", name);
        return NULL;
    }
    zone = bc_zone_load(name, errbuf, errsize);
    if (zone == NULL)
        return NULL;
    set->zones[set->len++] = zone;
    return zone;
}
