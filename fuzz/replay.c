/*
 * replay.c - main() for the fuzz targets in the ordinary build (no
 * libFuzzer): runs LLVMFuzzerTestOneInput once on each file named on the
 * command line, or on each file of a directory named there (a corpus;
 * names starting with '.' skipped), in name order. `make check` runs each
 * target over its seed corpus this way, so that the harnesses and their
 * seeds keep compiling and passing without clang.
 *
 * Each input runs in a child process, with a heap buffer of exactly its
 * size so that a sanitizer or valgrind sees any read past its end. A
 * broken property aborts the child (see fz_fail): that input counts as a
 * failure and the others still run. Prints a Check-style summary line at
 * the end; exits 0 if every input passed, 1 if one failed or could not be
 * read or there was none, 2 on bad usage.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzzcommon.h"

typedef struct counts {
    unsigned long checks;
    unsigned long failures;
    unsigned long errors;
} counts;

/* Read @path whole into a buffer of exactly its size; 0 or -1 (errno set). */
static int read_all(const char *path, unsigned char **data, size_t *size)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    size_t len = 0;
    size_t cap = 0;
    size_t n;
    void *p;

    if (f == NULL)
        return -1;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 4096;
            p = realloc(buf, cap);
            if (p == NULL)
                goto fail;
            buf = p;
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    if (ferror(f))
        goto fail;
    fclose(f);
    /* Exactly @len bytes (at least one, so that malloc cannot return NULL for 0). */
    *data = malloc(len ? len : 1);
    if (*data == NULL) {
        free(buf);
        return -1;
    }
    memcpy(*data, buf, len);
    free(buf);
    *size = len;
    return 0;
fail:
    free(buf);
    fclose(f);
    return -1;
}

static void run_file(const char *path, counts *c)
{
    unsigned char *data = NULL;
    size_t size = 0;
    pid_t pid;
    int status = 0;

    c->checks++;
    if (read_all(path, &data, &size) != 0) {
        printf("error %s: %s\n", path, strerror(errno));
        c->errors++;
        return;
    }
    printf("input %s (%zu bytes)\n", path, size);
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        LLVMFuzzerTestOneInput(data, size);
        free(data);
        _exit(0);
    }
    free(data);
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        printf("error %s: cannot run it in a child process: %s\n", path, strerror(errno));
        c->errors++;
    } else if (WIFSIGNALED(status)) {
        printf("FAIL %s: killed by signal %d\n", path, WTERMSIG(status));
        c->failures++;
    } else if (WEXITSTATUS(status) != 0) {
        printf("FAIL %s: exit status %d\n", path, WEXITSTATUS(status));
        c->failures++;
    }
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every regular file of directory @dir, in name order. */
static void run_dir(const char *dir, counts *c)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0;
    size_t cap = 0;
    size_t i;
    char path[4096];
    struct stat st;
    void *p;

    if (d == NULL) {
        printf("error %s: %s\n", dir, strerror(errno));
        c->checks++;
        c->errors++;
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            p = realloc(names, cap * sizeof(*names));
            if (p == NULL)
                break;
            names = p;
        }
        names[n] = strdup(e->d_name);
        if (names[n] != NULL)
            n++;
    }
    closedir(d);
    if (n > 0)
        qsort(names, n, sizeof(*names), cmp_names);
    for (i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
            run_file(path, c);
        free(names[i]);
    }
    free(names);
}

int main(int argc, char **argv)
{
    counts c = {0, 0, 0};
    unsigned long passed;
    struct stat st;
    int i;

    if (argc < 2) {
        fprintf(stderr, "usage: %s FILE|DIRECTORY...\n", argv[0]);
        return 2;
    }
    LLVMFuzzerInitialize(&argc, &argv);
    for (i = 1; i < argc; i++) {
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode))
            run_dir(argv[i], &c);
        else
            run_file(argv[i], &c);
    }
    passed = c.checks - c.failures - c.errors;
    printf("%lu%%: Checks: %lu, Failures: %lu, Errors: %lu\n",
           c.checks ? passed * 100 / c.checks : 0, c.checks, c.failures, c.errors);
    return passed == c.checks && c.checks > 0 ? 0 : 1;
}
