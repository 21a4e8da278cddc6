/* pack.c — a cpu package's weights packed at compile time: the plan's pack
 * launches (the `once` kernels that lay a constant weight out in its GEMM's
 * panels) run here, on the folded weights, from the kernels just linked;
 * each panel buffer becomes a U8 parameter WEIGHT@LAYOUT that the package's
 * weights file holds as it is, and the launch and the weight it read leave
 * the plan. Loading a package then reads the panels: no f32 copy of a bf16
 * or q8 weight, no packing, and the file as small as the layout. */
#include "lrc_compile.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "lm_head.weight@q8p16", "...@f32p32t" (packed from W^T) */
static void packed_name(char *buf, size_t n, const char *weight, const lrc_extra_buf *x)
{
    snprintf(buf, n, "%s@%sp%d%s", weight, lrc_wstore_name(x->store), x->panel, x->transposed ? "t" : "");
}

/* Launch l packs one weight into one panel buffer: runs it, and makes the
 * buffer the packed parameter. 1: done (the launch goes); 0: not a packing
 * launch of a constant, kept; -1: an error. */
static int pack_launch(lrc_compiled *c, void *dl, const lrc_plan_launch *l, lrc_err *err)
{
    lrc_plan *pl = &c->plan;
    const int n_nodes = c->g->n_nodes;
    int src = -1, dst = -1;
    for (int a = 0; a < l->n_args; a++) {
        int b = l->args[a];
        if (pl->bufs[b].kind == LRC_BUF_PARAM && src < 0 && pl->bufs[b].dtype == LRC_F32) src = b;
        else if (pl->bufs[b].kind == LRC_BUF_PERSIST && b >= n_nodes && dst < 0) dst = b;
        else return 0;
    }
    const lrc_extra_buf *x = dst >= 0 ? &c->prog.extra[dst - n_nodes] : NULL;
    const lrc_tensor *w = src >= 0 ? lrc_tensor_set_find(c->consts, pl->bufs[src].name) : NULL;
    if (!x || x->panel <= 0 || !w) return 0;
    char name[600];
    packed_name(name, sizeof name, w->name, x);
    if (lrc_tensor_set_find(c->consts, name)) return lrc_err_set(err, "pack: '%s' packed twice", name), -1;
    lrc_tensor *t = lrc_tensor_new(name, LRC_U8, &(lrc_shape){1, {x->bytes}}, err);
    void *sym = t ? dlsym(dl, l->symbol) : NULL;
    if (t && !sym) lrc_err_set(err, "pack: kernel '%s' is missing from the kernels just linked", l->symbol);
    if (!sym || lrc_tensor_set_add(c->consts, t, err)) {
        lrc_tensor_free(t);
        return -1;
    }
    lrc_kernel_fn fn;
    memcpy(&fn, &sym, sizeof sym);
    void **args = lrc_xmalloc((size_t)l->n_args * sizeof(void *) + 1);
    for (int a = 0; a < l->n_args; a++) args[a] = l->args[a] == src ? w->data : t->data;
    fn(args, 0, l->n_items);
    free(args);
    lrc_plan_buf *b = &pl->bufs[dst];
    free(b->name);
    *b = (lrc_plan_buf){.kind = LRC_BUF_PARAM, .name = lrc_xstrdup(name), .dtype = LRC_U8, .shape = {1, {x->bytes}}, .bytes = x->bytes,
                        .packed_panel = x->panel, .packed_cols = x->cols, .packed_inner = x->inner};
    snprintf(b->packed, sizeof b->packed, "%s", lrc_wstore_name(x->store));
    return 1;
}

/* Parameters no launch reads any more (the originals of packed weights)
 * have no buffer: the package does not store them. */
static void drop_unread_params(lrc_plan *pl)
{
    bool *read = lrc_xcalloc((size_t)pl->n_bufs + 1, sizeof(bool));
    for (int li = 0; li < pl->n_launches; li++)
        for (int a = 0; a < pl->launches[li].n_args; a++) read[pl->launches[li].args[a]] = true;
    for (int b = 0; b < pl->n_bufs; b++)
        if (pl->bufs[b].kind == LRC_BUF_PARAM && !read[b]) {
            free(pl->bufs[b].name);
            pl->bufs[b] = (lrc_plan_buf){.kind = LRC_BUF_NONE};
        }
    free(read);
}

int lrc_compile_pack_weights(lrc_compiled *c, const char *so, lrc_err *err)
{
    lrc_plan *pl = &c->plan;
    bool any = false;
    for (int li = 0; li < pl->n_launches; li++) any = any || pl->launches[li].once;
    if (!any || !c->consts) return LRC_OK;
    void *dl = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    if (!dl) return lrc_err_set(err, "%s: cannot load the kernels to pack the weights: %s", so, dlerror());
    int rc = LRC_OK, kept = 0;
    int *map = lrc_xmalloc(((size_t)pl->n_launches + 1) * sizeof(int));
    for (int li = 0; li < pl->n_launches; li++) {
        lrc_plan_launch l = pl->launches[li];
        int done = rc || !l.once ? 0 : pack_launch(c, dl, &l, err);
        if (done < 0) rc = LRC_EUSER;
        map[li] = done > 0 ? -1 : kept;
        if (done > 0) {
            free(l.symbol);
            free(l.label);
            free(l.args);
        } else {
            pl->launches[kept++] = l;
        }
    }
    pl->n_launches = kept;
    for (int li = 0; li < kept; li++) /* a loop's back edge goes to its body's first kernel, never a pack */
        if (pl->launches[li].loop_to >= 0) pl->launches[li].loop_to = map[pl->launches[li].loop_to];
    free(map);
    dlclose(dl);
    if (!rc) drop_unread_params(pl);
    return rc;
}
