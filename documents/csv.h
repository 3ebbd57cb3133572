/*
 * csv.h - one CSV cell as every CSV the tool writes it (`billing rate
 * --format csv`, `billing invoice export --format csv`): RFC 4180
 * quoting, and cells that a spreadsheet would run as a formula made
 * inert (doc/formats.md, "CSV").
 */
#ifndef DOCUMENTS_CSV_H
#define DOCUMENTS_CSV_H

#include <stdio.h>

/*
 * csv_cell - write @v as one CSV cell to @out (no separator; NULL is an
 * empty cell). A cell that begins with '=', '+', '-', '@', a tab or a
 * carriage return is written as "'<v>" (quoted, with a leading single
 * quote), as OWASP's CSV injection guidance says, unless it is a plain
 * number, -?[0-9]+(.[0-9]+)? (a negative amount stays a number). A cell
 * holding a comma, a double quote, CR or LF is quoted, quotes doubled.
 * Write errors are left in @out's error flag. Thread-safe on distinct
 * streams.
 */
void csv_cell(FILE *out, const char *v);

/*
 * csv_neutralized - whether csv_cell prefixes @v with a single quote.
 * Pure; thread-safe.
 */
int csv_neutralized(const char *v);

#endif /* DOCUMENTS_CSV_H */
