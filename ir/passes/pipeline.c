/* pipeline.c — the pass pipeline: every pass a graph goes through, from the
 * graph a model builds to the schedule a code generator renders, in one
 * table and run by one function. Each step does what the context asks and
 * nothing otherwise, so a caller stops where it needs to (the reference
 * executor after autodiff, `lrc inspect --after P` after P) and the passes
 * it ran are the ones a compiled package runs. */
#include "lrc_passes.h"

#include <stdio.h>
#include <string.h>

static int step_kv_cache(lrc_graph **g, lrc_pass_ctx *ctx, lrc_err *err)
{
    if (ctx->kv_cache_len <= 0) return LRC_OK;
    int rc = lrc_pass_kv_cache(g, ctx->kv_cache_len, err);
    ctx->kv_cache_len = 0;
    return rc;
}

static int step_last_rows(lrc_graph **g, lrc_pass_ctx *ctx, lrc_err *err)
{
    if (!ctx->last_rows) return LRC_OK;
    ctx->last_rows = false;
    return lrc_pass_last_rows(g, err);
}

static int step_autodiff(lrc_graph **g, lrc_pass_ctx *ctx, lrc_err *err)
{
    if (!ctx->autodiff) return LRC_OK;
    ctx->autodiff = false;
    return lrc_pass_autodiff(*g, ctx->loss, err);
}

static int step_fuse(lrc_graph **g, lrc_pass_ctx *ctx, lrc_err *err)
{
    if (!ctx->schedule || ctx->scheduled) return LRC_OK;
    int rc = lrc_pass_own_outputs(*g, err);
    if (rc) return rc;
    rc = lrc_schedule_build(*g, ctx->loss_head, ctx->loss_pair, ctx->sum_product, ctx->reduce_prologue, ctx->schedule, err);
    ctx->scheduled = rc == LRC_OK;
    return rc;
}

static int step_plan_memory(lrc_graph **g, lrc_pass_ctx *ctx, lrc_err *err)
{
    (void)err;
    if (ctx->scheduled) lrc_schedule_plan_memory(*g, ctx->schedule);
    return LRC_OK;
}

const lrc_pass lrc_passes[] = {
    {"kv_cache", "with --ctx C: a graph built for one new token becomes one decoding step, each causal attention "
                 "reading and extending K and V caches of C positions at the input 'pos'",
     step_kv_cache, false, true},
    {"last_rows", "with --logits last: the logits at the last position only, and every row nothing else reads (the LM "
                  "head's, the last layer's after its attention) no longer computed",
     step_last_rows, false, true},
    {"autodiff", "for training: the gradient of the loss with respect to every parameter, as new nodes after the "
                 "forward graph; the outputs become the loss and one gradient per parameter",
     step_autodiff, false, true},
    {"fold_gains", "constant LayerRoPE gains and norm weights folded into the adjacent matmul weights",
     lrc_pass_fold_gains, false, false},
    {"pad_hidden", "with frozen weights and a target that asks (cuda: 8), a hidden width no 16-byte row holds, such as "
                   "SwiGLU's d_ff = 5461, widened with zero weights, for the GEMMs' aligned kernels",
     lrc_pass_pad_hidden, false, false},
    {"cse", "common subexpressions merged", lrc_pass_cse, false, false},
    {"dce", "nodes that reach no output removed", lrc_pass_dce, false, false},
    {"fuse", "each output given a buffer of its own (a copy where it is an input, a parameter or another output's "
             "value), then nodes grouped into kernels: elementwise chains, row reductions with their prologue and epilogue, GEMMs "
             "with their epilogue, attention with RoPE, and opaque ops",
     step_fuse, true, true},
    {"plan_memory", "every intermediate placed in one arena by its lifetime", step_plan_memory, true, true},
};
const int lrc_pass_count = sizeof lrc_passes / sizeof lrc_passes[0];

const lrc_pass *lrc_pass_find(const char *name)
{
    for (int i = 0; i < lrc_pass_count; i++)
        if (!strcmp(name, lrc_passes[i].name)) return &lrc_passes[i];
    return NULL;
}

const char *lrc_pass_names(void)
{
    static char names[256];
    if (!names[0]) {
        size_t len = 0;
        for (int i = 0; i < lrc_pass_count && len < sizeof names; i++)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", i ? ", " : "", lrc_passes[i].name);
    }
    return names;
}

int lrc_passes_run(lrc_graph **g, lrc_pass_ctx *ctx, const char *stop_after, lrc_err *err)
{
    if (stop_after && !lrc_pass_find(stop_after))
        return lrc_err_set(err, "unknown pass '%s' (passes: %s)", stop_after, lrc_pass_names());
    for (int i = 0; i < lrc_pass_count; i++) {
        int rc = lrc_passes[i].run(g, ctx, err);
        if (rc && lrc_passes[i].own_errors) return rc;
        if (!rc) rc = lrc_graph_verify(*g, err);
        if (rc) return lrc_err_prefix(err, "pass %s", lrc_passes[i].name);
        if (stop_after && !strcmp(stop_after, lrc_passes[i].name)) break;
    }
    return LRC_OK;
}
