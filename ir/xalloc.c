/* xalloc.c — allocators that end the process when out of memory, for the
 * compiler side (ir/passes, codegen, frontend) and the CLI, where an
 * out-of-memory ends the run anyway. liblrc never links this file: its
 * code allocates through util.c's checked allocators and returns
 * LRC_STATUS_NOMEM (ctest liblrc_no_exit). */
#include "lrc_ir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The message, then exit: only the compile side and the CLI get here. */
static void *or_exit(void *p, size_t n)
{
    if (!p) {
        fprintf(stderr, "lrc: out of memory allocating %zu bytes\n", n);
        exit(1);
    }
    return p;
}

void *lrc_xmalloc(size_t n) { return or_exit(lrc_malloc(n), n); }

void *lrc_xcalloc(size_t n, size_t size)
{
    void *p = lrc_calloc(n, size);
    if (!p) {
        fprintf(stderr, "lrc: out of memory allocating %zu x %zu bytes\n", n, size);
        exit(1);
    }
    return p;
}

void *lrc_xrealloc(void *p, size_t n) { return or_exit(lrc_realloc(p, n), n); }

char *lrc_xstrdup(const char *s) { return s ? or_exit(lrc_strdup(s), strlen(s) + 1) : NULL; }

lrc_graph *lrc_graph_new(void) { return lrc_xcalloc(1, sizeof(lrc_graph)); }
