/* check.h — what the C unit tests share: a CHECK that counts, the closing
 * "N passed, M failed" line, and reading a fixture's config.txt. */
#ifndef LRC_TEST_CHECK_H
#define LRC_TEST_CHECK_H

#include <stdio.h>
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

#endif
