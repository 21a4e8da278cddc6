/* kgen.h — the state shared by the LLVM kernel generators (internal to
 * codegen/llvm): one group being rendered, its argument pointers, and the
 * per-element evaluation of its elementwise members. */
#ifndef LRC_LLVM_KGEN_H
#define LRC_LLVM_KGEN_H

#include "../lrc_codegen.h"
#include "emit.h"

typedef struct kgen {
    em_t *e;
    const lrc_graph *g;
    const lrc_schedule *s;
    const lrc_program *p;
    const lrc_kernel_desc *k;
    const lrc_group *gr; /* NULL for preparation kernels */
    int vec;             /* floats per vector */
    int *arg_of;         /* buffer id -> argument index, or -1 */
    LLVMValueRef *argp;  /* argument index -> typed pointer */
    bool *member;        /* node id -> in this group */
    LLVMValueRef *memo;  /* node id -> value at the element being generated */
} kgen;

/* Pointer to the buffer holding node id (through views). */
LLVMValueRef kg_ptr(kgen *k, int id);
/* The kernel's scratch (program.c's add_scratch: an extra buffer with panel
 * 0, the last argument), or NULL when it has none. */
LLVMValueRef kg_scratch(kgen *k);
/* Forgets the values of the previous element. */
void kg_reset(kgen *k);
/* Value of node id at (row, col) of the group's [rows, D] iteration space,
 * width w: members are computed, other nodes loaded by the indexing rules
 * (same shape: row*D + col; vector along the last axis: col; scalar: 0). */
LLVMValueRef kg_value(kgen *k, int id, LLVMValueRef row, LLVMValueRef col, int64_t D, int w);
/* Stores every group output among the members at (row, col). */
void kg_store_outputs(kgen *k, LLVMValueRef row, LLVMValueRef col, int64_t D, int w);

void kg_gemm_pack(kgen *k);
void kg_gemm(kgen *k);
void kg_attention(kgen *k);
void kg_kv_attention(kgen *k);
/* The first key query row t sees under a window of W keys (0: none), as
 * attn_first_key (ir/ref_template.h): max(0, t + 1 - W) (attention.c). */
LLVMValueRef kg_first_key(em_t *e, LLVMValueRef t, int64_t W);
/* cos or sin table [T][D/2] of RoPE angles t * lrc_rope_inv_freq(rope, i, D), a constant global. */
LLVMValueRef kg_rope_table(em_t *e, int64_t T, int64_t D, const lrc_rope *rope, bool sine);
/* Gradient ops rendered as opaque kernels (kernels_grad.c); kernels.c's
 * per-op table names them. */
void kg_attention_grad(kgen *k);
/* the general form's gradient (a bias, Tq != Tk or Dv != Dqk;
 * attention_grad_general.c), which kg_attention_grad hands over to */
bool kg_attention_grad_is_general(const lrc_graph *g, const lrc_node *a);
void kg_attention_grad_general(kgen *k);
void kg_rmsnorm_grad(kgen *k, const lrc_node *n);
void kg_layernorm_grad(kgen *k, const lrc_node *n);
void kg_softmax_grad(kgen *k, const lrc_node *n);
void kg_cross_entropy_grad(kgen *k, const lrc_node *n);
void kg_sum_to(kgen *k, const lrc_node *n);
void kg_embedding_grad(kgen *k, const lrc_node *n);
void kg_depth_gain_grad(kgen *k, const lrc_node *n);
/* a mixture of experts' ops (route.c), and torch.topk's order as a function
 * of the module, lrc_topk_order(float *v, int *ix, i64 n, i64 k) (topk.c) */
void kg_topk(kgen *k, const lrc_node *n);
void kg_gather(kgen *k, const lrc_node *n);
void kg_gather_grad(kgen *k, const lrc_node *n);
void kg_expert_matmul(kgen *k, const lrc_node *n);
void kg_expert_matmul_tn(kgen *k, const lrc_node *n);
LLVMValueRef kg_topk_order_fn(em_t *e);
/* the ops along one axis (reduce.c): sum, mean, amax, logsumexp; cumsum,
 * concat, expand, amax_grad */
void kg_reduce(kgen *k, const lrc_node *n);
void kg_cumsum(kgen *k, const lrc_node *n);
void kg_scan(kgen *k, const lrc_node *n);
void kg_concat(kgen *k, const lrc_node *n);
void kg_expand(kgen *k, const lrc_node *n);
void kg_amax_grad(kgen *k, const lrc_node *n);
/* bmm, the batched product of two activations (bmm.c) */
void kg_bmm(kgen *k, const lrc_node *n);
/* cast between i32 and f32, arange (cast.c) */
void kg_cast(kgen *k, const lrc_node *n);
void kg_arange(kgen *k, const lrc_node *n);
/* The module's launch table, what kernels.so tells a package loader each
 * launch was compiled for (ir/lrc_launch_table.h; launch_table.c). */
void kg_emit_launch_table(em_t *e, const lrc_graph *g, const lrc_program *p);
/* The GEMM tiling's vector width where it is wider than k->vec (16 floats
 * with AVX-512 against 8): for kernels whose values do not depend on it */
static inline int kg_wide_vec(const kgen *k) { return k->p->tiling.vec > k->vec ? k->p->tiling.vec : k->vec; }
/* max and sum of exp(x - max) over a row of V floats at X + base
 * (vectorised); each exp(x - max) also into E + base unless E is NULL. */
void kg_row_logsumexp(kgen *k, LLVMValueRef X, LLVMValueRef base, int64_t V, LLVMValueRef E, LLVMValueRef *max_out,
                      LLVMValueRef *sum_out);
/* The cpu cross-entropy's pieces, which its kernels and an LM head's fused
 * one (fuse rule 8) share. Row r of logits x [.., V]: its statistics into
 * the scratch sc (LRC_CE_STATS doubles a row), and, unless E is NULL, the
 * row's exp(x - max) into E (which may be x) for kg_ce_grad_row. */
void kg_ce_row_stats(kgen *k, LLVMValueRef x, LLVMValueRef y, LLVMValueRef sc, LLVMValueRef r, int64_t V, LLVMValueRef E);
/* The call that brings a count of finished units (after sc's rows) to
 * `total` with its `mine` writes the mean loss to out[0] (rows in order)
 * and zeroes the count. */
void kg_ce_finish(kgen *k, LLVMValueRef sc, int64_t rows, LLVMValueRef mine, int64_t total, LLVMValueRef out);
/* The labels Y [rows] that count (not -100), as an f64. */
LLVMValueRef kg_ce_used(kgen *k, LLVMValueRef Y, int64_t rows);
/* Row r of the loss's gradient into O (which may be X) from the logits X.
 * With `stats`, the row's statistics come from kg_ce_row_stats, which also
 * left the row's exp(x - max) in O, so they are not taken again; without,
 * both are computed here from X. */
void kg_ce_grad_row(kgen *k, LLVMValueRef X, LLVMValueRef O, LLVMValueRef Y, LLVMValueRef stats, LLVMValueRef r, int64_t V,
                    LLVMValueRef nused);

#endif
