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

#endif
