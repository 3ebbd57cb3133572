/*
 * csv.c - CSV cells: see csv.h.
 */
#include "config.h"

#include <string.h>

#include "csv.h"

/*
 * The first characters with which Excel, LibreOffice and Google Sheets
 * start a formula (or, tab and CR, hide one behind blank-looking text):
 * OWASP "CSV Injection". Account ids, plan ids, models and regions are
 * chosen by customers or producers, so any of them may be "=HYPERLINK(...)".
 */
#define FORMULA_STARTS "=+-@\t\r"

/* -?[0-9]+(.[0-9]+)?: what the tool writes for amounts and quantities. */
static int plain_number(const char *v)
{
    size_t n;

    if (*v == '-')
        v++;
    n = strspn(v, "0123456789");
    if (n == 0)
        return 0;
    v += n;
    if (*v == '.') {
        n = strspn(v + 1, "0123456789");
        if (n == 0)
            return 0;
        v += 1 + n;
    }
    return *v == '\0';
}

int csv_neutralized(const char *v)
{
    return v != NULL && v[0] != '\0' && strchr(FORMULA_STARTS, v[0]) != NULL && !plain_number(v);
}

void csv_cell(FILE *out, const char *v)
{
    int neutralize = csv_neutralized(v);
    const char *p;

    if (v == NULL)
        return;
    if (!neutralize && strpbrk(v, ",\"\r\n") == NULL) {
        fputs(v, out);
        return;
    }
    fputc('"', out);
    if (neutralize)
        fputc('\'', out);
    for (p = v; *p != '\0'; p++) {
        if (*p == '"')
            fputc('"', out);
        fputc(*p, out);
    }
    fputc('"', out);
}
