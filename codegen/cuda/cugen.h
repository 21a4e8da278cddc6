/* cugen.h — what the CUDA renderer's files share (internal to codegen/cuda):
 * the growing source text, the per-kernel context, storage and argument
 * naming, and the elementwise evaluation every group kind uses. */
#ifndef LRC_CUGEN_H
#define LRC_CUGEN_H

#include "lrc_cuda.h"
#include "ir/lrc_ew.h"

#include <stdio.h>

typedef struct cu_text {
    char *s;
    size_t len, cap;
} cu_text;

void cu_printf(cu_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

typedef struct cu_gen {
    const lrc_graph *g;
    const lrc_schedule *s;
    const lrc_program *p;
    const lrc_kernel_desc *k;
    const lrc_group *gr;
    const lrc_cuda_storage *st; /* per node id */
    bool *member;               /* per node id: in this kernel's group */
    int *arg_of;                /* per buffer id: argument index, or -1 */
    cu_text *t;
    cu_text *tables;            /* file-scope constant tables, before every kernel */
    lrc_cuda_launch *launch;    /* what the renderer fills in for the runtime */
    int n_gemm;                 /* GEMM groups: matmuls computed by cuBLAS into scratch */
    int gemm_node[2];
    /* elementwise and row kernels: a thread's vw consecutive elements at once */
    int vw;
    bool *vec;                  /* per node id: an input read through one vector load into x<id>[u] */
    bool *used;                 /* per node id, then per product (n_nodes + m): read by the pass being rendered */
    bool col_read;              /* the pass reads an input element by element, at col */
} cu_gen;

/* "a3": the argument holding node id's buffer (a view resolves to what it views) */
const char *cu_arg(const cu_gen *c, int id, char *buf, size_t n);
lrc_cuda_storage cu_storage(const cu_gen *c, int id);
int64_t cu_last_dim(const lrc_shape *s);
int64_t cu_rows(const lrc_shape *s);
/* "extern \"C\" __global__ void __launch_bounds__(B) NAME(args)": the
 * kernel's parameter list from its arguments, plus `const float *scratch`
 * when the launch has a workspace. Opens the body. */
void cu_kernel_begin(cu_gen *c, int block);

/* Statements computing every member of the group not yet marked done, up
 * to stop_at, as scalars `m<id>` at element (row, col) of a [rows, D]
 * iteration; inputs are read with the group's broadcasting rule (scalar, a
 * [D] vector, or the full shape), from the pass's vector loads where
 * c->vec says. */
void cu_emit_members(cu_gen *c, int64_t D, bool *done, int stop_at);
/* Elements a thread handles at once: 16 bytes of bf16 (8) or f32 (4),
 * halved until it divides n and, where row > 0, row too; records the bytes
 * it moves an access in the launch (for the profile). */
int cu_vector_width(cu_gen *c, bool bf16, int64_t n, int64_t row);
/* m<id>, or the load of a non-member input, as an expression */
const char *cu_value(cu_gen *c, int id, int64_t D, char *buf, size_t n);

/* The CUDA C a kernels file begins with (prelude.c): bf16, loads and
 * stores, RoPE's sincos, mma; and the AdamW kernels a training graph's
 * file ends with. */
extern const char *const cu_prelude;
extern const char *const cu_optimizer;

/* The kernel of a group other than an elementwise one, by its anchor's
 * entry in the per-op table (render_ops.c): fills c->launch's
 * grid/block/scratch; false when the table has no kernel for the op. */
bool cu_render_anchor(cu_gen *c, const lrc_node *n);
/* Elementwise node n (an op of LRC_EW_OPS; false for any other) on operand
 * expressions x[]: its expression's statements, temporaries named
 * <prefix>_<k>, each line after indent, and its value (an expression) into
 * out. Shared by fused members and lone broadcasts. */
bool cu_elementwise_emit(cu_gen *c, const lrc_node *n, const char *const *x, const char *indent, const char *prefix, char *out,
                         size_t len);
/* ew_cuda.c: the same for any elementwise node, in double where f64; and
 * the algebra's primitives (NULL where one has no template), for ctest
 * ew_walk */
void cu_ew_emit(cu_text *t, const lrc_node *n, const char *const *x, const char *indent, const char *prefix, bool f64, char *out,
                size_t len);
void cu_ew_prims(lrc_ew_prim_fn *prims);
/* Row and GEMM groups (render.c) and attention (render_attention.c): the
 * kernels of the ops that anchor them. */
void cu_render_row(cu_gen *c);
void cu_render_gemm(cu_gen *c);
void cu_render_attention(cu_gen *c);
/* attention's q or k source: the input of the RoPE the group holds (*rope
 * set), else id itself (*rope NULL) */
int cu_attention_source(const cu_gen *c, int id, const lrc_node **rope);
/* the attention group's attention_lse node (written beside the output,
 * fuse rule 7, or the anchor alone), or -1 */
int cu_attention_lse_of(const cu_gen *c);
/* `DST = element i of the row at OFF of src`, rotated to position POS by
 * rope when given, times scale; INDENT before every line */
void cu_attention_element(cu_gen *c, const char *indent, const char *dst, int src, const lrc_node *rope, int64_t D, const char *off,
                          const char *pos, double scale);
/* Attention on the tensor cores (render_attention_tc.c) where storage is
 * bf16 and the head dimension a multiple of 16 up to 128; false elsewhere
 * (and with LRC_CUDA_TC_ATTENTION=0). */
bool cu_render_attention_tc(cu_gen *c);
void cu_render_kv_attention(cu_gen *c);
bool cu_render_attention_grad(cu_gen *c, const lrc_node *n);
/* the same on the tensor cores (bf16 storage, D a multiple of 16 up to 128,
 * no window or soft-cap); false, having rendered nothing, otherwise.
 * out_of: the group's node for dq, dk, dv, or -1 */
bool cu_render_attention_grad_tc(cu_gen *c, const lrc_node *n, const int out_of[3]);
/* the general form's gradient (a bias, Tq != Tk or Dv != Dqk; out_of[3]
 * the bias's gradient or -1; render_attention_grad_general.c); false for
 * the forms the tiled kernels take */
bool cu_render_attention_grad_general(cu_gen *c, const lrc_node *n, const int out_of[4]);
/* what both gradient kernels end with: the macros naming their outputs
 * (HAS_DQ ...) and arguments (QA ... DVA), body, then every macro in names
 * #undef'd */
void cu_attention_grad_body(cu_gen *c, const lrc_node *n, const int out_of[3], const char *body, const char *const *names,
                            size_t n_names);

/* a mixture of experts' ops (render_route.c): topk, gather, gather_grad,
 * expert_matmul, expert_matmul_tn; false for any other op */
bool cu_render_route(cu_gen *c, const lrc_node *n);
/* the ops along one axis (render_reduce.c): sum, mean, amax, logsumexp,
 * cumsum, concat, expand, amax_grad; false for any other op */
bool cu_render_along(cu_gen *c, const lrc_node *n);
/* bmm, the batched product of two activations (render_reduce.c) */
bool cu_render_bmm(cu_gen *c, const lrc_node *n);

/* RoPE's inverse frequencies lrc_rope_inv_freq(rope, i, D), i < D/2, as a __device__ table
 * named by the returned string (emitted once per source). */
const char *cu_rope_table(cu_gen *c, int64_t D, const lrc_rope *rope, char *buf, size_t n);

#endif
