/* launch_table.c — the launch table (ir/lrc_launch_table.h) as a
 * constant of the kernels' module, so that kernels.so says what each launch
 * was compiled for: its items, and each argument's buffer, size and storage.
 * The buffers are the plan's as frontend/compile/compile.c numbers and sizes them
 * (node ids, then the extra buffers; four bytes an element). */
#include "../../ir/lrc_launch_table.h"
#include "kgen.h"

#include <stdlib.h>

static int64_t *push(int64_t *w, int64_t *n, int64_t *cap, int64_t v)
{
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 256;
        w = lrc_xrealloc(w, (size_t)*cap * sizeof *w);
    }
    w[(*n)++] = v;
    return w;
}

void kg_emit_launch_table(em_t *e, const lrc_graph *g, const lrc_program *p)
{
    int64_t *w = NULL, n = 0, cap = 0;
    w = push(w, &n, &cap, LRC_LAUNCH_TABLE_MAGIC);
    w = push(w, &n, &cap, 0); /* the total, below */
    w = push(w, &n, &cap, p->n_kernels);
    for (int i = 0; i < p->n_kernels; i++) {
        const lrc_kernel_desc *k = &p->kernels[i];
        w = push(w, &n, &cap, k->loop_to >= 0 ? 0 : lrc_launch_table_hash(p->kernels[k->impl].name));
        w = push(w, &n, &cap, k->n_items);
        w = push(w, &n, &cap, (k->once ? LRC_LT_ONCE : 0) | (k->any_split ? LRC_LT_STEAL : 0));
        w = push(w, &n, &cap, k->loop_to);
        w = push(w, &n, &cap, k->n_args);
        for (int a = 0; a < k->n_args; a++) {
            int b = k->args[a];
            bool node = b < g->n_nodes;
            w = push(w, &n, &cap, b);
            w = push(w, &n, &cap, node ? lrc_shape_numel(&g->nodes[b].shape) * 4 : p->extra[b - g->n_nodes].bytes);
            w = push(w, &n, &cap, !node ? LRC_LT_RAW : g->nodes[b].dtype == LRC_I32 ? LRC_LT_I32 : LRC_LT_F32);
        }
    }
    w[1] = n;
    LLVMValueRef *vals = lrc_xmalloc((size_t)n * sizeof *vals);
    for (int64_t i = 0; i < n; i++) vals[i] = LLVMConstInt(e->i64, (unsigned long long)w[i], 0);
    LLVMTypeRef at = LLVMArrayType(e->i64, (unsigned)n);
    LLVMValueRef gv = LLVMAddGlobal(e->mod, at, LRC_LAUNCH_TABLE_SYMBOL);
    LLVMSetInitializer(gv, LLVMConstArray(e->i64, vals, (unsigned)n));
    LLVMSetGlobalConstant(gv, 1); /* external: the package loader finds it with dlsym */
    free(vals);
    free(w);
}
