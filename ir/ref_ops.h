/* ref_ops.h — reference kernels of the op table (internal to ir/). */
#ifndef LRC_REF_OPS_H
#define LRC_REF_OPS_H

#include "lrc_ir.h"

#define LRC_REF_ARGS const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err
/* Every reference kernel, declared at both storage precisions. */
#define LRC_REF_KERNELS(X) \
    X(embedding) \
    X(ew) \
    X(matmul) \
    X(rmsnorm) \
    X(rope) \
    X(attention) \
    X(attention_lse) \
    X(softmax) \
    X(reshape) \
    X(transpose) \
    X(depth_gain) \
    X(cross_entropy) \
    X(kv_attention) \
    X(matmul_nn) \
    X(matmul_tn) \
    X(embedding_grad) \
    X(sum_to) \
    X(rmsnorm_grad) \
    X(rope_grad) \
    X(attention_grad) \
    X(softmax_grad) \
    X(depth_gain_grad) \
    X(cross_entropy_grad) \
    X(layernorm) \
    X(slice) \
    X(loop_state) \
    X(layernorm_grad) \
    X(topk) \
    X(gather) \
    X(gather_grad) \
    X(expert_matmul) \
    X(expert_matmul_tn) \
    X(reduce) \
    X(cumsum) \
    X(concat) \
    X(expand) \
    X(amax_grad) \
    X(scan) \
    X(bmm) \
    X(cast) \
    X(arange)
#define LRC_REF_DECLARE(name) int lrc_ref_##name(LRC_REF_ARGS); int lrc_ref64_##name(LRC_REF_ARGS);
LRC_REF_KERNELS(LRC_REF_DECLARE)

/* Gradient rules (ir/grad.c), one per differentiable op. */
int lrc_grad_embedding(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_matmul(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_rmsnorm(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_rope(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_attention(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_softmax(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_reshape(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_transpose(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_depth_gain(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_cross_entropy(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_layernorm(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_slice(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_stop(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
/* a loop's back edge: none flows through (lrc_grad_stop), and an
 * nn.scan's (attribute scan 1) is refused, as its body's parameters would
 * otherwise get no gradient without a word */
int lrc_grad_loop_next(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_gather(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_expert_matmul(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);

/* The routing ops' shape rules and FLOPs (ir/route.c). */
int lrc_infer_topk(const lrc_graph *g, lrc_node *n, lrc_err *err);
int lrc_infer_gather(const lrc_graph *g, lrc_node *n, lrc_err *err);
int lrc_infer_gather_grad(const lrc_graph *g, lrc_node *n, lrc_err *err);
int lrc_infer_expert_matmul(const lrc_graph *g, lrc_node *n, lrc_err *err);
int lrc_infer_expert_matmul_tn(const lrc_graph *g, lrc_node *n, lrc_err *err);
double lrc_flops_topk(const lrc_graph *g, const lrc_node *n);
double lrc_flops_expert_matmul(const lrc_graph *g, const lrc_node *n);
double lrc_flops_expert_matmul_tn(const lrc_graph *g, const lrc_node *n);

/* The ops along one axis (ir/reduce.c): shape rules, FLOPs, gradient
 * rules, and a shape split as [outer, len, inner] about an axis. */
int lrc_infer_reduce(const lrc_graph *g, lrc_node *n, lrc_err *err);
int lrc_infer_cumsum(const lrc_graph *g, lrc_node *n, lrc_err *err);
int lrc_infer_concat(const lrc_graph *g, lrc_node *n, lrc_err *err);
int lrc_infer_expand(const lrc_graph *g, lrc_node *n, lrc_err *err);
int lrc_infer_amax_grad(const lrc_graph *g, lrc_node *n, lrc_err *err);
double lrc_flops_along(const lrc_graph *g, const lrc_node *n);
int lrc_grad_reduce(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_amax(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_logsumexp(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_cumsum(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_concat(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_expand(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);

/* scan, the linear recurrence (ir/scan.c) */
int lrc_infer_scan(const lrc_graph *g, lrc_node *n, lrc_err *err);
double lrc_flops_scan(const lrc_graph *g, const lrc_node *n);
int lrc_grad_scan(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);

/* bmm, the batched product of two activations (ir/bmm.c) */
int lrc_infer_bmm(const lrc_graph *g, lrc_node *n, lrc_err *err);
double lrc_flops_bmm(const lrc_graph *g, const lrc_node *n);
int lrc_grad_bmm(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);

/* cast between i32 and f32, arange (ir/cast.c) */
int lrc_infer_cast(const lrc_graph *g, lrc_node *n, lrc_err *err);
int lrc_infer_arange(const lrc_graph *g, lrc_node *n, lrc_err *err);

int lrc_ref_rotate(const lrc_node *n, const float *x, float *out, int sign);
int lrc_ref64_rotate(const lrc_node *n, const double *x, double *out, int sign);

#endif
