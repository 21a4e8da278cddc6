/* check.h — what the C unit tests share: a CHECK that counts, the closing
 * "N passed, M failed" line, and reading a fixture's config.txt. */
#ifndef LRC_TEST_CHECK_H
#define LRC_TEST_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;

#define CHECK(cond, ...)                                \
    do {                                                \
        if (cond) passed++;                             \
        else {                                          \
            failed++;                                   \
            printf("FAIL %s:%d: ", __FILE__, __LINE__); \
            printf(__VA_ARGS__);                        \
            printf("\n");                               \
        }                                               \
    } while (0)

/* Prints the closing line and returns main's exit status. */
static inline int check_summary(void)
{
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

/* dir/config.txt, one KEY=VALUE a line, as --set arguments in argv. */
static inline int read_config_sets(const char *dir, char sets[][128], char **argv, int max)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/config.txt", dir);
    FILE *f = fopen(path, "r");
    int n = 0;
    while (f && n < max && fgets(sets[n], 128, f)) {
        sets[n][strcspn(sets[n], "\n")] = 0;
        argv[n] = sets[n];
        if (sets[n][0]) n++;
    }
    if (f) fclose(f);
    return n;
}

/* Runs a shell command (printf's format) in folder dir; its exit status
 * as system gives it. */
static inline int check_sh(const char *dir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline int check_sh(const char *dir, const char *fmt, ...)
{
    char cmd[4096], full[4400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    snprintf(full, sizeof full, "cd %s && %s", dir, cmd);
    return system(full);
}

#endif
