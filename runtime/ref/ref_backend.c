/* ref_backend.c — the reference backend: host memory, and each node run by
 * its op's reference implementation from the op table (ir/ref_ops.c). The
 * ground truth every other backend is tested against. */
#include "../lrc_runtime.h"

#include <stdlib.h>
#include <string.h>

static bool ref_supports_op(const lrc_graph *g, const lrc_node *n)
{
    (void)g;
    return lrc_op_table[n->op].ref != NULL;
}

static void *ref_alloc(lrc_backend *be, size_t nbytes, lrc_err *err)
{
    (void)be;
    void *p = lrc_calloc(1, nbytes ? nbytes : 1);
    if (!p) lrc_err_nomem(err, "ref: allocating %zu bytes", nbytes);
    return p;
}

static void ref_free(lrc_backend *be, void *buf)
{
    (void)be;
    free(buf);
}

static int ref_copy(lrc_backend *be, void *dst, const void *src, size_t nbytes, lrc_err *err)
{
    (void)be;
    (void)err;
    memcpy(dst, src, nbytes);
    return LRC_OK;
}

static int ref_launch(lrc_backend *be, const lrc_graph *g, int id, void *const *bufs, void *out, lrc_err *err)
{
    (void)be;
    const lrc_node *n = &g->nodes[id];
    if (!lrc_op_table[n->op].ref) return lrc_err_set(err, "ref: op %s cannot be launched", lrc_op_name(n->op));
    return lrc_op_table[n->op].ref(g, n, bufs, out, err);
}

static int ref_sync(lrc_backend *be, lrc_err *err)
{
    (void)be;
    (void)err;
    return LRC_OK;
}

static void ref_destroy(lrc_backend *be) { free(be); }

static const lrc_backend_ops ref_ops = {
    .name = "ref",
    .supports_op = ref_supports_op,
    .alloc = ref_alloc,
    .free = ref_free,
    .write = ref_copy,
    .read = ref_copy,
    .launch = ref_launch,
    .synchronize = ref_sync,
    .destroy = ref_destroy,
};

lrc_backend *lrc_backend_ref_new(void)
{
    lrc_backend *be = lrc_calloc(1, sizeof *be);
    if (be) be->ops = &ref_ops;
    return be;
}
