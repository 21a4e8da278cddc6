/* ref_ops.h — reference kernels of the op table (internal to ir/). */
#ifndef LRC_REF_OPS_H
#define LRC_REF_OPS_H

#include "lrc_ir.h"

int lrc_ref_embedding(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_matmul(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_rmsnorm(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_binary(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_scale(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_silu(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_rope(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_attention(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_softmax(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_reshape(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_transpose(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_depth_gain(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_cross_entropy(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_kv_attention(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_matmul_nn(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_matmul_tn(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_embedding_grad(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_sum_to(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_rmsnorm_grad(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_silu_grad(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_rope_grad(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_attention_grad(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_softmax_grad(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_depth_gain_grad(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
int lrc_ref_cross_entropy_grad(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);

/* Gradient rules (ir/grad.c), one per differentiable op. */
int lrc_grad_embedding(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_matmul(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_rmsnorm(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_add(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_mul(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_scale(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_silu(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_rope(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_attention(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_softmax(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_reshape(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_transpose(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_depth_gain(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
int lrc_grad_cross_entropy(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);

int lrc_ref_rotate(const lrc_node *n, const float *x, float *out, int sign);

#endif
