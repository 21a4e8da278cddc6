/* lrc_passes.h — the public header of the passes: graph rewrites (gain
 * folding, CSE, DCE) and the schedule (fusion into kernel groups, memory
 * planning). Passes know no target; they depend on ir/ only. */
#ifndef LRC_PASSES_H
#define LRC_PASSES_H

#include "../lrc_ir.h"

typedef struct lrc_schedule lrc_schedule;

/* What a pipeline run is asked to do, and what it carries between passes.
 * A pass that is not asked for (kv_cache without kv_cache_len, autodiff
 * without autodiff, fuse and plan_memory without a schedule) leaves the
 * graph as it is, so that every caller runs the one pipeline and stops
 * where it needs to. */
typedef struct lrc_pass_ctx {
    /* Values of the parameters when they are frozen (weights given at compile
     * time), else NULL. Passes read constants here and add the constants they
     * make (folded gains and weights); the graph's PARAM nodes name them. */
    lrc_tensor_set *consts;
    /* consts belong to this graph alone: dce frees the constants no PARAM
     * names any more (the originals of folded and widened weights), so a
     * set shared with another graph must leave it false */
    bool own_consts;
    /* pad_hidden: the multiple a hidden width is padded to (the cuda target
     * asks 8, 16 bytes of bf16, for cuBLAS's aligned kernels); 0 or 1: off */
    int64_t pad_multiple;
    /* kv_cache: > 0 turns a graph built for one new token into a decoding
     * step with caches of this many positions; cleared once it ran */
    int64_t kv_cache_len;
    /* last_rows: the output "logits" at the last position only (lrc
     * compile --logits last); cleared once it ran */
    bool last_rows;
    /* autodiff: adds the gradients of the scalar node `loss`; cleared once
     * it ran, so a graph is never differentiated twice */
    bool autodiff;
    int loss;
    /* fuse: an LM head's matmul, loss and the loss's gradient as one
     * kernel (fuse rule 8), for a target that renders it (cpu) */
    bool loss_head;
    /* fuse: a loss and its gradient as one kernel (fuse rule 9) */
    bool loss_pair;
    /* fuse: a gain gradient's product inside its row sum (fuse rule 10) */
    bool sum_product;
    /* fuse: an elementwise prologue inside a reduction's kernel (fuse rule 11) */
    bool reduce_prologue;
    /* fuse and plan_memory build this schedule when it is not NULL;
     * `scheduled` says it was built (the caller frees it then) */
    lrc_schedule *schedule;
    bool scheduled;
} lrc_pass_ctx;

typedef struct lrc_pass {
    const char *name;
    const char *doc;
    /* Replaces *g by the rewritten graph (freeing the old one). */
    int (*run)(lrc_graph **g, lrc_pass_ctx *ctx, lrc_err *err);
    /* what `lrc inspect --after` prints after it: the schedule, or the graph */
    bool prints_schedule;
    /* its errors are about the user's model and say so themselves (with
     * the model's line first); the others' are prefixed "pass NAME: " */
    bool own_errors;
} lrc_pass;

/* Every pass in pipeline order (ir/passes/pipeline.c): kv_cache, last_rows,
 * autodiff, fold_gains, pad_hidden, cse, dce, fuse, plan_memory. */
extern const lrc_pass lrc_passes[];
extern const int lrc_pass_count;

/* The one function that runs the pipeline: every pass in order on *g (each
 * result verified), stopping after the pass named stop_after when it is not
 * NULL (an unknown name is an error listing the passes). */
int lrc_passes_run(lrc_graph **g, lrc_pass_ctx *ctx, const char *stop_after, lrc_err *err);
/* The pass named name, or NULL. */
const lrc_pass *lrc_pass_find(const char *name);
/* "kv_cache, last_rows, autodiff, fold_gains, pad_hidden, cse, dce, fuse, plan_memory" */
const char *lrc_pass_names(void);

/* The passes one by one (what the pipeline's steps call). */
int lrc_pass_fold_gains(lrc_graph **g, lrc_pass_ctx *ctx, lrc_err *err);
int lrc_pass_pad_hidden(lrc_graph **g, lrc_pass_ctx *ctx, lrc_err *err);
int lrc_pass_cse(lrc_graph **g, lrc_pass_ctx *ctx, lrc_err *err);
int lrc_pass_dce(lrc_graph **g, lrc_pass_ctx *ctx, lrc_err *err);

/* Every output in a buffer of its own (the fuse step runs it first): an
 * output whose value is a source's (an input, a parameter) or an earlier
 * output's, through views or not, becomes a copy of it (scale by 1), so
 * that gradients CSE merged, or an output that returns a parameter, each
 * get their own output buffer. Adds nodes to g in place. */
int lrc_pass_own_outputs(lrc_graph *g, lrc_err *err);

/* One decoding step with a KV cache (ir/passes/decode.c): from a graph
 * built for the new tokens, caches of max_len positions as state buffers
 * "cache.L.k" / "cache.L.v" and an input "pos" (i32 [1]). */
int lrc_pass_kv_cache(lrc_graph **g, int64_t max_len, lrc_err *err);

/* The output "logits" [B, T, V] at the last position only, [B, 1, V], and
 * the rows nothing else needs no longer computed (ir/passes/last_rows.c). */
int lrc_pass_last_rows(lrc_graph **g, lrc_err *err);

/* Reverse mode (ir/passes/autodiff.c): adds the gradient of the scalar
 * node `loss` with respect to every parameter to g; the outputs become
 * "loss" and one gradient per parameter, named as the parameter. */
int lrc_pass_autodiff(lrc_graph *g, int loss, lrc_err *err);

/* True when node id is a PARAM whose value is in ctx->consts. */
bool lrc_node_is_const(const lrc_graph *g, int id, const lrc_pass_ctx *ctx);

/* ---- the schedule: kernel groups and memory ---------------------------- */

typedef enum lrc_group_kind {
    LRC_GROUP_ELEMENTWISE, /* elementwise ops over one output shape */
    LRC_GROUP_ROW,         /* a row reduction (rmsnorm, softmax) with elementwise epilogue */
    LRC_GROUP_GEMM,        /* a matmul with an elementwise epilogue */
    LRC_GROUP_ATTENTION,   /* fused causal attention, RoPE on q and k as prologue */
    LRC_GROUP_OPAQUE,      /* one op run as is (gather, transpose, depth_gain, loss) */
    LRC_GROUP_KIND_COUNT
} lrc_group_kind;

const char *lrc_group_kind_name(lrc_group_kind k);
/* The ops a row group anchors (a reduction over the last axis with a
 * prologue and an epilogue): rmsnorm, layernorm, softmax. */
bool lrc_op_is_row(lrc_op op);

typedef struct lrc_group {
    lrc_group_kind kind;
    int anchor;   /* the node that gives the group its kind */
    int *nodes;   /* members in topological order (anchor included) */
    int n_nodes;
    int *inputs;  /* buffers read from outside the group (source or other group) */
    int n_inputs;
    int *outputs; /* members read outside the group or graph outputs */
    int n_outputs;
} lrc_group;

struct lrc_schedule {
    lrc_group *groups;
    int n_groups;
    int *group_of;  /* per node: its group, or -1 (sources, views) */
    int *buffer_of; /* per node: the node whose buffer holds its value (a view
                       maps to what it views; others to themselves) */
    /* memory plan: per node, offset in the arena of an intermediate's buffer,
     * or -1 (sources, graph outputs, views, values internal to a group) */
    int64_t *offset;
    int64_t arena_bytes;
    int64_t peak_bytes; /* most bytes of intermediates live at one time */
};

/* Groups g's nodes into kernels by general rules (ir/passes/fuse.c);
 * loss_head: rule 8 too, an LM head's matmul with its loss and the loss's
 * gradient in one kernel; loss_pair: rule 9, a loss and its gradient in one
 * kernel; sum_product: rule 10, a product summed over rows in the sum's
 * kernel; reduce_prologue: rule 11, an elementwise chain computed in the
 * kernel of the one reduction that reads it (a target that renders them asks). */
int lrc_schedule_build(const lrc_graph *g, bool loss_head, bool loss_pair, bool sum_product, bool reduce_prologue, lrc_schedule *s,
                       lrc_err *err);
/* Whether group gr is rule 8's: a matmul, a cross_entropy and its gradient. */
bool lrc_group_is_loss_head(const lrc_graph *g, const lrc_group *gr);
/* The cross_entropy_grad of rule 9's group gr (a cross_entropy and its
 * gradient), or -1 when gr is not one. */
int lrc_group_loss_pair_grad(const lrc_graph *g, const lrc_group *gr);
/* SUM_TO node n that sums whole leading rows of its input ([R, D] to the D
 * of its last axis, as a gain's gradient does): D, else 0. */
int64_t lrc_sum_to_columns(const lrc_graph *g, const lrc_node *n);
/* The mul of rule 10's group gr (a sum_to over rows of a product), or -1
 * when gr is not one. */
int lrc_group_sum_product(const lrc_graph *g, const lrc_group *gr);
/* sum, mean, amax, logsumexp: the reductions along one axis (ir/reduce.c). */
bool lrc_op_is_reduce(lrc_op op);
/* Whether shape x broadcasts to `to` (aligned at the right, each dim 1 or equal). */
bool lrc_broadcasts_to(const lrc_shape *x, const lrc_shape *to);
/* Whether group gr is rule 11's: a reduction with an elementwise prologue. */
bool lrc_group_is_reduce_prologue(const lrc_graph *g, const lrc_group *gr);
/* Places every intermediate in one arena by liveness (ir/passes/plan.c). */
void lrc_schedule_plan_memory(const lrc_graph *g, lrc_schedule *s);
void lrc_schedule_free(lrc_schedule *s);
void lrc_schedule_print(const lrc_graph *g, const lrc_schedule *s, FILE *out);

/* Offsets for buffers with lifetimes [first, last] (inclusive steps):
 * greedy by size into the lowest gap that fits. Returns the arena size and
 * sets *peak to the most bytes live at one step. */
typedef struct lrc_live_buf {
    int64_t size;
    int first, last;
    int64_t offset; /* result */
} lrc_live_buf;
int64_t lrc_plan_offsets(lrc_live_buf *bufs, int n, int64_t align, int64_t *peak);

#endif
