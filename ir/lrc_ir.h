/* lrc_ir.h — the public header of the IR layer: tensor types, the SSA graph,
 * the op table, shape inference, the verifier and the printer.
 *
 * The IR depends on nothing else in lrc (and on nothing outside libc), so that
 * passes, code generators and the runtime can all share it. */
#ifndef LRC_IR_H
#define LRC_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LRC_MAX_DIMS 6
#define LRC_MAX_INPUTS 7
#define LRC_MAX_IATTR 8
#define LRC_MAX_FATTR 8
#define LRC_MAX_NODES (1 << 21)             /* far above any real model (depth-L512: ~15k) */
#define LRC_MAX_ELEMENTS ((int64_t)1 << 40) /* per tensor */

/* ---- errors ------------------------------------------------------------ */

/* A one-line message for a person: where, then what was expected. Functions
 * that can fail on user input return LRC_OK or LRC_EUSER and fill one.
 * nomem: the message says the memory ran out (lrc_err_nomem), which the
 * embedding API returns as LRC_STATUS_NOMEM; lrc_err_set clears it, so it
 * always belongs to the message there is. */
typedef struct lrc_err {
    char msg[1024];
    bool nomem;
} lrc_err;

enum { LRC_OK = 0, LRC_EUSER = 1 };

/* Formats into err (when non-NULL) and returns LRC_EUSER, so that callers can
 * write `return lrc_err_set(err, "...")`. */
int lrc_err_set(lrc_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prepends "prefix: " to an existing message (adds context on the way up). */
int lrc_err_prefix(lrc_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "out of memory " and the rest (what it was for: "for 4096 bytes of tensor
 * 'x'"), marked nomem; returns LRC_EUSER as lrc_err_set does. */
int lrc_err_nomem(lrc_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- types ------------------------------------------------------------- */

typedef enum lrc_dtype {
    LRC_F32,
    LRC_BF16,
    LRC_F16,
    LRC_I32,
    LRC_I8, /* q8 weights' values in a file only: loading dequantizes them (lrc_tensor_set_dequantize_q8) */
    LRC_U8, /* bytes: a cpu package's weights packed in their GEMM's panels at compile time */
    LRC_DTYPE_COUNT
} lrc_dtype;

const char *lrc_dtype_name(lrc_dtype t);     /* "f32" */
const char *lrc_dtype_st_name(lrc_dtype t);  /* safetensors spelling: "F32" */
size_t lrc_dtype_size(lrc_dtype t);
/* Returns 0 and sets *out when name is "f32"/"F32"/..., else -1. */
int lrc_dtype_parse(const char *name, lrc_dtype *out);

typedef struct lrc_shape {
    int ndim;
    int64_t dim[LRC_MAX_DIMS];
} lrc_shape;

int64_t lrc_shape_numel(const lrc_shape *s);
bool lrc_shape_eq(const lrc_shape *a, const lrc_shape *b);
/* "[2,7,32]" into buf; returns buf. */
char *lrc_shape_str(const lrc_shape *s, char *buf, size_t n);

/* ---- host tensors ------------------------------------------------------ */

/* Tensors live in the IR layer because passes fold constants: parameters
 * with known values, LayerRoPE gains, folded weights. */

typedef struct lrc_tensor {
    char *name;
    lrc_dtype dtype;
    lrc_shape shape;
    void *data; /* contiguous, row-major, little-endian */
    size_t nbytes;
} lrc_tensor;

/* Zero-filled. Returns NULL with err set when the size overflows. */
lrc_tensor *lrc_tensor_new(const char *name, lrc_dtype t, const lrc_shape *s, lrc_err *err);
void lrc_tensor_free(lrc_tensor *t);
/* Not zero-filled, for storage that a kernel overwrites completely. */
lrc_tensor *lrc_tensor_new_uninit(const char *name, lrc_dtype t, const lrc_shape *s, lrc_err *err);
/* A new f32 tensor with t's values (bf16 and f16 widened exactly). */
lrc_tensor *lrc_tensor_to_f32(const lrc_tensor *t, lrc_err *err);
/* An f32 tensor rounded to bf16 (to nearest even) where it lies: the data
 * keeps its allocation, half of it used, so a model's gigabytes are not
 * held twice. Other dtypes are left as they are. */
void lrc_tensor_round_bf16(lrc_tensor *t);

float lrc_bf16_to_f32(uint16_t h);
float lrc_f16_to_f32(uint16_t h);
uint16_t lrc_f32_to_bf16(float f); /* round to nearest even */
uint16_t lrc_f32_to_f16(float f);  /* round to nearest even */

/* An ordered collection of named tensors: the contents of a file, the
 * parameters of a model, the inputs or outputs of a run. Owns its tensors. */
typedef struct lrc_tensor_set {
    lrc_tensor **items;
    int n, cap;
    char *metadata_json; /* safetensors "__metadata__" object, or NULL */
} lrc_tensor_set;

void lrc_tensor_set_init(lrc_tensor_set *s);
void lrc_tensor_set_clear(lrc_tensor_set *s);
/* Takes ownership of t (freed when it fails). Fails on a duplicate name, or
 * out of memory. */
int lrc_tensor_set_add(lrc_tensor_set *s, lrc_tensor *t, lrc_err *err);
lrc_tensor *lrc_tensor_set_find(const lrc_tensor_set *s, const char *name);

/* ---- q8 weights (ir/quant.c) ------------------------------------------- */

/* llama.cpp's Q8_0: int8 values with one scale per block of LRC_Q8_BLOCK
 * along the reduction axis, the scale the block's largest magnitude / 127
 * rounded to f16. A file stores tensor NAME as I8 (the parameter's shape)
 * and NAME LRC_Q8_SCALE_SUFFIX as F16, the shape with the block axis (the
 * first or the last) divided by LRC_Q8_BLOCK, rounded up. */
#define LRC_Q8_BLOCK 32
#define LRC_Q8_SCALE_SUFFIX ".q8_scale"
/* A q8 panel of NR columns and K rows: for each block b of LRC_Q8_BLOCK
 * rows, the NR columns' f16 scales at bytes (b*NR + j)*2; then the int8
 * values, W[n, k] at byte nb*NR*2 + k*NR + j; padded to 64 bytes. The
 * bytes of Q8_0: 34 per 32 values. */
static inline int64_t lrc_q8_panel_bytes(int64_t NR, int64_t K)
{
    int64_t nb = (K + LRC_Q8_BLOCK - 1) / LRC_Q8_BLOCK;
    return (NR * (2 * nb + K) + 63) / 64 * 64;
}
/* Checks q8 panels (bytes of them, packed at compile time from a weight of
 * cols columns and inner rows, NR columns a panel): their size, and every
 * block scale finite and not negative; else an error naming `what`. */
int lrc_q8_panels_check(const void *data, int64_t bytes, int64_t cols, int64_t inner, int64_t NR, const char *what, lrc_err *err);
/* A block's scale from its largest magnitude (an f16 value, widened). */
float lrc_q8_scale(float amax);
/* One value quantized with 1 / scale (0 for a zero scale): nearest, ties
 * away from zero, clamped to [-127, 127]. The pack kernels compute the same. */
int8_t lrc_q8_value(float x, float inv_scale);
/* F32 tensor t quantized in place to I8 along axis (0 or its last), its
 * scales returned in a new F16 tensor; a NaN or Inf weight is an error. */
int lrc_tensor_quantize_q8(lrc_tensor *t, int axis, lrc_tensor **scale, lrc_err *err);
/* Every I8 tensor of s and its scales replaced by the F32 tensor they
 * encode; a scale that is NaN or Inf, an I8 tensor without scales or
 * scales without theirs is an error naming `what` (the file). */
int lrc_tensor_set_dequantize_q8(lrc_tensor_set *s, const char *what, lrc_err *err);

/* ---- the op table ------------------------------------------------------ */

/* Every op, once: LRC_OPS(X) calls X(ENUM, op) per op, in enum order.
 * It makes the enum below, and every per-op table (the op table's rows in
 * ir/ops.c, each renderer's kernels) is this list expanded over a macro
 * that pastes the op's name onto the table's prefix (ROW_matmul,
 * KG_matmul, ...). So a table without an entry for some op names an
 * undefined macro, and the build fails there; a designated initializer
 * alone would leave the missing row zeroed, and a static assertion on the
 * table's length cannot see a row missing in the middle. */
#define LRC_OPS(X) \
    X(INPUT, input)                /* a named run-time input (tokens, labels) */                            \
    X(PARAM, param)                /* a named parameter with an init rule */                                \
    X(EMBEDDING, embedding)        /* ids[...] i32, W[V,d] -> [..., d] */                                   \
    X(MATMUL, matmul)              /* x[..., K], W[N, K] (nn.Linear layout) -> [..., N] */                  \
    X(RMSNORM, rmsnorm)            /* x / sqrt(mean(x^2) + eps) over the last axis */                       \
    X(ROPE, rope)                  /* sequence RoPE, rotate-half, x[B,T,H,Dh] */                            \
    X(ATTENTION, attention)        /* softmax(q k^T * scale [soft-capped] [+ bias] [+ causal/window mask]) v, \
                                      q [B,Tq,H,Dqk], k [B,Tk,Hkv,Dqk], v [B,Tk,Hkv,Dv] (Hkv dividing H:  \
                                      GQA), optional bias [B|1,H|1,Tq,Tk] -> [B,Tq,H,Dv]; a row that sees  \
                                      no key gives zeros */                                                 \
    X(SOFTMAX, softmax)            /* over the last axis */                                                 \
    X(RESHAPE, reshape)            /* same elements, new shape */                                           \
    X(TRANSPOSE, transpose)        /* permute axes */                                                       \
    X(DEPTH_GAIN, depth_gain)      /* LayerRoPE: gamma[d], alpha, beta, alpha_rot, beta_rot -> [d] */       \
    X(CROSS_ENTROPY, cross_entropy) /* logits[..., V], labels[...] i32 (-100 ignored) -> [] mean */         \
    X(STATE, state)                /* a named buffer kept across runs (a KV cache), zeros at first */       \
    X(KV_ATTENTION, kv_attention)  /* q [B,T,H,Dh], k, v [B,T,Hkv,Dh], caches [B,Tmax,Hkv,Dh], pos i32 [1]: \
                                      RoPE at positions pos.., k and v written into the caches, causal       \
                                      attention over cache positions [0, pos + t] (or its last `window`) */  \
    X(LAYERNORM, layernorm)        /* (x - mean) / sqrt(var + eps) over the last axis (no gain, no bias) */ \
    X(SLICE, slice)                /* along `axis`: out[i] = x[i + start] where that is inside x, else 0;   \
                                      `size` output positions (a narrowing, a zero padding, or both) */      \
    X(LOOP_STATE, loop_state)      /* a loop region's carried state (rule 5 of docs/architecture.md):     \
                                      init -> the state h_t the body reads; its kernels run once per        \
                                      iteration */                                                           \
    X(LOOP_NEXT, loop_next)        /* state, h_next, counts i32 [B]: the loop's back edge. Iteration t      \
                                      copies h_next into the state for the rows b (leading axis) with        \
                                      t < counts[b] (finished sequences keep theirs), and the body runs      \
                                      max(counts) times; the value is the final state. No gradient flows     \
                                      through a loop: gradients run through unrolled iterations */           \
    X(SUM, sum)                    /* x -> its sum along `axis` (ir/reduce.c), that axis kept as 1 with        \
                                      `keepdim`, else dropped; f64 sums in ref */                             \
    X(MEAN, mean)                  /* x -> its mean along `axis` (`keepdim` as sum) */                        \
    X(AMAX, amax)                  /* x -> its largest value along `axis` (`keepdim` as sum) */               \
    X(LOGSUMEXP, logsumexp)        /* x -> log(sum(exp(x))) along `axis`, from the max (`keepdim` as sum) */  \
    X(CUMSUM, cumsum)              /* x -> its inclusive running sum along `axis`; `reverse`: from the end */ \
    X(CONCAT, concat)              /* 1 to LRC_MAX_INPUTS inputs, equal but along `axis` -> joined there */   \
    X(EXPAND, expand)              /* x -> shape (a list): x broadcast as numpy broadcasts (torch's expand) */\
    X(SCAN, scan)                  /* a, b[, init] -> h, a's shape: h_t = a_t h_{t-1} + b_t along `axis`,  \
                                      h_{-1} = init (a's shape without the axis) or 0; `reverse`: from the  \
                                      end (ir/scan.c) */                                                   \
    X(BMM, bmm)                    /* a [..., M, K], b [..., K, N] -> [..., M, N], the batch axes broadcast \
                                      (ir/bmm.c): a product of two activations */                          \
    X(CAST, cast)                  /* x -> x as dtype `to` (f32 or i32, from the other): i32 -> f32 exact  \
                                      below 2^24, f32 -> i32 toward zero (ir/cast.c) */                     \
    X(ARANGE, arange)              /* no inputs -> i32 [n]: 0, 1, ..., n - 1 */                             \
    /* gradients (reverse mode, ir/passes/autodiff.c) */                                                    \
    X(MATMUL_NN, matmul_nn)        /* dy[..., N], W[N, K] -> [..., K] = dy W */                             \
    X(MATMUL_TN, matmul_tn)        /* dy[..., N], x[..., K] -> [N, K] = sum over rows of dy^T x */          \
    X(EMBEDDING_GRAD, embedding_grad) /* ids[...], dy[..., d] -> [vocab, d], rows summed by id */           \
    X(SUM_TO, sum_to)              /* x -> shape (a list): sums the axes a broadcast repeated */            \
    X(RMSNORM_GRAD, rmsnorm_grad)  /* x, dy -> dx of x / sqrt(mean(x^2) + eps) */                           \
    X(ROPE_GRAD, rope_grad)        /* dy -> dy rotated back (the transpose of RoPE) */                      \
    X(ATTENTION_GRAD, attention_grad) /* q, k, v, dy, y, lse [, bias] -> dq, dk, dv or dbias (`which` 0 to 3), \
                                      each its input's shape; y the forward's output, lse its attention_lse */ \
    X(SOFTMAX_GRAD, softmax_grad)  /* y, dy -> y * (dy - sum(dy * y)) */                                    \
    X(DEPTH_GAIN_GRAD, depth_gain_grad) /* gamma, alpha, beta, alpha_rot, beta_rot, dy -> the gradient of   \
                                      input `which` (0: gamma [d]; 1..4: a scalar) */                        \
    X(CROSS_ENTROPY_GRAD, cross_entropy_grad) /* logits, labels -> d(mean loss) / d logits */               \
    X(LAYERNORM_GRAD, layernorm_grad) /* x, dy -> dx of (x - mean) / sqrt(var + eps) */                     \
    X(ATTENTION_LSE, attention_lse) /* q, k, v [, bias] -> [B,Tq,H]: each query row's log-sum-exp, the       \
                                      statistic attention_grad reads; computed by the attention kernel   \
                                      over the same inputs (fuse rule 7) */                                  \
    X(TOPK, topk)                  /* x[..., E] -> i32 [..., k]: where the k largest are, as torch.topk      \
                                      orders them, ties included (ir/topk_order.h) */                        \
    X(GATHER, gather)              /* x[..., E], ids i32 [..., k] -> [..., k]: x[..., ids[..., j]] */        \
    X(GATHER_GRAD, gather_grad)    /* ids [..., k], dy [..., k] -> [..., n]: dy added at ids, else 0 */      \
    X(EXPERT_MATMUL, expert_matmul) /* x[..., S|1, K], W[N, K], ids i32 [..., S] -> [..., S, N]: row s is    \
                                      x W^T where ids[..., s] == expert, else 0 (nn: x W, W[K, N]); only  \
                                      the selected rows are computed (a mixture of experts) */             \
    X(EXPERT_MATMUL_TN, expert_matmul_tn) /* a[..., S|1, N], b[..., S|1, K], ids [..., S] -> [N, K]: a^T b   \
                                      over the rows where ids == expert (an expert weight's gradient) */ \
    X(AMAX_GRAD, amax_grad)        /* x, y (amax with keepdim), dy (its shape) -> dy split evenly among    \
                                      the elements of x equal to the max, else 0 (torch's amax) */

/* The elementwise ops, once: LRC_EW_OPS(X) calls X(ENUM, op, inputs,
 * shape rule, float attribute, FLOPs per element, backward/forward FLOP
 * ratio, flags) per op; they follow LRC_OPS in the enum. Each op's value is
 * ONE expression over the primitives (lrc_ew.h) and its gradient ONE rule,
 * both in ir/ew.c (expr_<op>, grad_<op>); ref, the cpu and cuda renderers
 * and autodiff read them from there and never name an elementwise op. So
 * an elementwise op is this row, its two functions in ew.c, and its line
 * in docs/ir.md.
 * Shape rules: SAME (one float input), BCAST (numpy broadcasting of every
 * input), FIRST (x, dy: the same shape; a gradient op), FULL (no inputs:
 * the `shape` list). Flags: LRC_EW_KEEPS_ZERO, LRC_EW_ROWS_FIRST /
 * LRC_EW_ROWS_EACH (the last_rows rule), LRC_EW_GRAD_OP (a gradient op:
 * axes mixed, no gradient rule of its own), LRC_EW_ALONE (a kernel of its
 * own, never fused), LRC_EW_F64 (computed in double, alone). */
#define LRC_EW_OPS(X) \
    X(ADD, add, 2, BCAST, NULL, 1, 1, LRC_EW_KEEPS_ZERO | LRC_EW_ROWS_EACH)                 /* a + b */                 \
    X(MUL, mul, 2, BCAST, NULL, 1, 2, LRC_EW_KEEPS_ZERO | LRC_EW_ROWS_EACH)                 /* a * b */                 \
    X(SCALE, scale, 1, SAME, "s", 1, 1, LRC_EW_KEEPS_ZERO | LRC_EW_ROWS_FIRST)              /* x * s, s an attribute */ \
    X(SILU, silu, 1, SAME, NULL, 4, 2, LRC_EW_KEEPS_ZERO | LRC_EW_ROWS_FIRST)               /* x * sigmoid(x) */        \
    X(GELU, gelu, 1, SAME, NULL, 8, 2, LRC_EW_KEEPS_ZERO | LRC_EW_ROWS_FIRST)               /* x * Phi(x), erf GELU */  \
    X(RELU, relu, 1, SAME, NULL, 1, 1, LRC_EW_KEEPS_ZERO | LRC_EW_ROWS_FIRST)               /* max(x, 0) */             \
    X(EXP, exp, 1, SAME, NULL, 8, 1, LRC_EW_ROWS_FIRST)                                     /* e^x */                   \
    /* in double with libm, for the few values (gates of a parameter vector) it sees */                                 \
    X(SOFTPLUS, softplus, 1, SAME, NULL, 8, 3, LRC_EW_ROWS_FIRST | LRC_EW_F64)              /* log(1 + e^x) */          \
    X(TANH, tanh, 1, SAME, NULL, 8, 1, LRC_EW_KEEPS_ZERO | LRC_EW_ROWS_FIRST)               /* tanh(x) */               \
    /* sigmoid(0) = 1/2: a zero padding does not stay zero through it */                                                \
    X(SIGMOID, sigmoid, 1, SAME, NULL, 4, 1, LRC_EW_ROWS_FIRST)                             /* 1 / (1 + e^-x) */        \
    X(GELU_TANH, gelu_tanh, 1, SAME, NULL, 8, 2, LRC_EW_KEEPS_ZERO | LRC_EW_ROWS_FIRST)     /* torch's gelu(approximate="tanh") */ \
    X(SILU_GRAD, silu_grad, 2, FIRST, NULL, 5, 0, LRC_EW_GRAD_OP)                           /* x, dy -> dy silu'(x) */  \
    X(GELU_GRAD, gelu_grad, 2, FIRST, NULL, 8, 0, LRC_EW_GRAD_OP)                           /* x, dy -> dy gelu'(x) */  \
    X(RELU_GRAD, relu_grad, 2, FIRST, NULL, 1, 0, LRC_EW_GRAD_OP)                           /* x, dy -> dy where x > 0 */ \
    X(TANH_GRAD, tanh_grad, 2, FIRST, NULL, 4, 0, LRC_EW_GRAD_OP)                           /* y, dy -> dy (1 - y^2) */ \
    X(SIGMOID_GRAD, sigmoid_grad, 2, FIRST, NULL, 4, 0, LRC_EW_GRAD_OP)                     /* y, dy -> dy y (1 - y) */ \
    X(GELU_TANH_GRAD, gelu_tanh_grad, 2, FIRST, NULL, 8, 0, LRC_EW_GRAD_OP)                 /* x, dy -> dy gelu_tanh'(x) */ \
    /* the primitives (lrc_ew.h's LRC_PRIMS) as ops of their own */                                                     \
    X(NEG, neg, 1, SAME, NULL, 1, 1, LRC_EW_ROWS_FIRST)                                     /* -x */                    \
    X(ABS, abs, 1, SAME, NULL, 1, 1, LRC_EW_ROWS_FIRST)                                     /* |x| */                   \
    X(SQRT, sqrt, 1, SAME, NULL, 4, 2, LRC_EW_ROWS_FIRST)                                   /* sqrt(x) */               \
    X(RSQRT, rsqrt, 1, SAME, NULL, 4, 2, LRC_EW_ROWS_FIRST)                                 /* 1 / sqrt(x) */           \
    X(LOG, log, 1, SAME, NULL, 8, 1, LRC_EW_ROWS_FIRST)                                     /* ln x */                  \
    X(LOG1P, log1p, 1, SAME, NULL, 8, 1, LRC_EW_ROWS_FIRST)                                 /* ln(1 + x) */             \
    X(EXPM1, expm1, 1, SAME, NULL, 8, 1, LRC_EW_ROWS_FIRST)                                 /* e^x - 1 */               \
    X(SIN, sin, 1, SAME, NULL, 8, 1, LRC_EW_ROWS_FIRST)                                     /* sin x */                 \
    X(COS, cos, 1, SAME, NULL, 8, 1, LRC_EW_ROWS_FIRST)                                     /* cos x */                 \
    X(ERF, erf, 1, SAME, NULL, 8, 1, LRC_EW_ROWS_FIRST)                                     /* erf x */                 \
    X(FLOOR, floor, 1, SAME, NULL, 1, 0, LRC_EW_ROWS_FIRST)                                 /* floor x (gradient 0) */  \
    X(SIGN, sign, 1, SAME, NULL, 1, 0, LRC_EW_ROWS_FIRST)                                   /* -1, 0, 1 (gradient 0) */ \
    X(RECIPROCAL, reciprocal, 1, SAME, NULL, 1, 2, LRC_EW_ROWS_FIRST)                       /* 1 / x */                 \
    X(SUB, sub, 2, BCAST, NULL, 1, 1, LRC_EW_ROWS_EACH)                                     /* a - b */                 \
    X(DIV, div, 2, BCAST, NULL, 1, 3, LRC_EW_ROWS_EACH)                                     /* a / b */                 \
    X(POW, pow, 2, BCAST, NULL, 8, 3, LRC_EW_ROWS_EACH)                                     /* a ^ b */                 \
    X(MAXIMUM, maximum, 2, BCAST, NULL, 1, 1, LRC_EW_ROWS_EACH)                             /* max(a, b) */             \
    X(MINIMUM, minimum, 2, BCAST, NULL, 1, 1, LRC_EW_ROWS_EACH)                             /* min(a, b) */             \
    X(LT, lt, 2, BCAST, NULL, 1, 0, LRC_EW_ROWS_EACH)                                       /* a < b: 1 or 0, no gradient */ \
    X(LE, le, 2, BCAST, NULL, 1, 0, LRC_EW_ROWS_EACH)                                       /* a <= b */                \
    X(EQ, eq, 2, BCAST, NULL, 1, 0, LRC_EW_ROWS_EACH)                                       /* a == b */                \
    X(NE, ne, 2, BCAST, NULL, 1, 0, LRC_EW_ROWS_EACH)                                       /* a != b */                \
    X(GT, gt, 2, BCAST, NULL, 1, 0, LRC_EW_ROWS_EACH)                                       /* a > b */                 \
    X(GE, ge, 2, BCAST, NULL, 1, 0, LRC_EW_ROWS_EACH)                                       /* a >= b */                \
    X(WHERE, where, 3, BCAST, NULL, 1, 1, LRC_EW_ROWS_EACH)                                 /* c != 0 ? a : b */        \
    X(FMA, fma, 3, BCAST, NULL, 2, 2, LRC_EW_ROWS_EACH)                                     /* a * b + c */             \
    X(SOFTSIGN, softsign, 1, SAME, NULL, 4, 2, LRC_EW_KEEPS_ZERO | LRC_EW_ROWS_FIRST)       /* x / (1 + |x|) */         \
    X(FULL, full, 0, FULL, "value", 0, 0, LRC_EW_ALONE)                                     /* `shape` filled with value */

enum { LRC_EW_KEEPS_ZERO = 1, LRC_EW_ROWS_FIRST = 2, LRC_EW_ROWS_EACH = 4, LRC_EW_GRAD_OP = 8, LRC_EW_ALONE = 16, LRC_EW_F64 = 32 };

typedef enum lrc_op {
#define LRC_OP_ENUM(E, op) LRC_OP_##E,
    LRC_OPS(LRC_OP_ENUM)
#undef LRC_OP_ENUM
#define LRC_EW_ENUM(E, op, ...) LRC_OP_##E,
    LRC_EW_OPS(LRC_EW_ENUM)
#undef LRC_EW_ENUM
    LRC_OP_COUNT
} lrc_op;

/* How the fusion pass and the code generators treat an op. */
typedef enum lrc_fusion {
    LRC_FUSE_SOURCE,      /* inputs and parameters: no computation */
    LRC_FUSE_VIEW,        /* reshapes: no data movement in a contiguous layout */
    LRC_FUSE_ELEMENTWISE,
    LRC_FUSE_ROW,         /* a reduction over the last axis that anchors a row group with epilogue */
    LRC_FUSE_REDUCTION,   /* any other reduction: a kernel of its own */
    LRC_FUSE_GEMM,
    LRC_FUSE_ATTENTION,
    LRC_FUSE_OPAQUE
} lrc_fusion;

typedef enum lrc_init_kind {
    LRC_INIT_ZEROS,
    LRC_INIT_ONES,
    LRC_INIT_CONST,          /* value */
    LRC_INIT_NORMAL,         /* N(0, std) */
    LRC_INIT_XAVIER_NORMAL,  /* N(0, gain * sqrt(2 / (fan_in + fan_out))) */
    LRC_INIT_IDENTITY,       /* the identity matrix (square) */
    LRC_INIT_COUNT
} lrc_init_kind;

typedef struct lrc_init {
    lrc_init_kind kind;
    double value; /* const value, normal std, or xavier gain */
} lrc_init;

typedef struct lrc_node {
    lrc_op op;
    int n_in;
    int in[LRC_MAX_INPUTS];
    lrc_dtype dtype;
    lrc_shape shape;
    int n_iattr; /* used by list attributes (reshape's shape, transpose's perm) */
    int64_t iattr[LRC_MAX_IATTR];
    double fattr[LRC_MAX_FATTR];
    char *name;  /* INPUT, PARAM and STATE: the tensor's name */
    char *group; /* PARAM: the group `lrc inspect --params` reports it under */
    lrc_init init; /* PARAM */
    char *loc;   /* where it was made, "llama.lua:42", or NULL */
} lrc_node;

typedef struct lrc_graph lrc_graph;

/* The memory traffic of an op's unfused kernel (lrc_node_bytes). */
typedef enum lrc_bytes_rule {
    LRC_BYTES_NONE,   /* sources and views: no kernel */
    LRC_BYTES_ALL,    /* every input and the output, in full */
    LRC_BYTES_GATHER, /* the ids, and the rows returned: read once, written once */
} lrc_bytes_rule;

/* What an op does to the batch and sequence axes of its inputs
 * (lrc_graph_track_axis): whether the rows of a shorter batch or the
 * positions of a shorter sequence are computed as a package compiled for
 * that shape computes them, by the longer one's prefix. */
typedef enum lrc_axes_rule {
    LRC_AXES_SOURCE,    /* inputs, parameters, states: as the caller says */
    LRC_AXES_LOCAL,     /* each output element from the same leading indices of its inputs
                         * (numpy broadcasting, aligned right); only the last axis mixes */
    LRC_AXES_GATHER,    /* ids[...], W -> [..., d]: the ids' axes lead the output's */
    LRC_AXES_ATTENTION, /* [B,T,H,Dh]: b at axis 0 stays; positions at axis 1 mix unless causal */
    LRC_AXES_RESHAPE,   /* an axis stays where the dims up to it are unchanged */
    LRC_AXES_TRANSPOSE, /* an axis moves with the permutation */
    LRC_AXES_SLICE,     /* along the tracked axis only from earlier positions (start <= 0), whole length */
    LRC_AXES_LOOP,      /* loop_next: state and body result as LOCAL, the counts per row of axis 0 */
    LRC_AXES_ROUTED,    /* expert_matmul: x[..., S|1, K] and ids[..., S] lead the output alike; the weight has none */
    LRC_AXES_ALONG,     /* reductions, cumsum, scan, concat along iattr[0] (`axis`), expand: the
                         * other axes stay (shifted where a reduction drops its axis); along
                         * `axis`, a reduction or concat mixes, cumsum and scan read earlier
                         * positions only */
    LRC_AXES_BMM,       /* a [..., M, K] x b [..., K, N]: batch axes as LOCAL, a's M and b's N stay, K mixes */
    LRC_AXES_MIXED,     /* reduces or mixes every axis (a loss, a gradient, a KV cache) */
} lrc_axes_rule;

/* What row t of an op's output along axis 1 (a sequence's position) reads,
 * for the last_rows pass: row t alone of the operands that carry the
 * sequence, whatever t is (so not RoPE, which needs t, nor attention). */
typedef enum lrc_rows_rule {
    LRC_ROWS_NONE,    /* rows meet, or a row's position matters */
    LRC_ROWS_FIRST,   /* input 0 (of the output's rank) row by row; the others whole (a matmul's W) */
    LRC_ROWS_EACH,    /* each input of the output's rank that carries the sequence row by row; the others broadcast */
    LRC_ROWS_RESHAPE, /* input 0 row by row, where the batch and sequence axes stay */
    LRC_ROWS_SLICE,   /* input 0 row by row, where the slice (or an op along one axis, iattr[0]) is along an axis past the sequence's */
    LRC_ROWS_ROUTED,  /* x and ids (inputs 0 and 2) row by row, the weight whole (expert_matmul) */
    LRC_ROWS_SCAN,    /* every input row by row (a, b, and init of one axis fewer), where the scan is along an axis past the sequence's */
} lrc_rows_rule;

/* Row of the op table. Attribute names are how the Lua API and the printer
 * spell them; an op with `ilist` set keeps a variable-length integer list in
 * iattr[0..n_iattr) under that name. */
typedef struct lrc_op_info {
    const char *name;
    int n_in; /* -1: 1 to LRC_MAX_INPUTS (concat; scan, whose shape rule takes 2 or 3) */
    lrc_fusion fusion;
    const char *iattr[LRC_MAX_IATTR]; /* names of integer attributes */
    const char *fattr[LRC_MAX_FATTR]; /* names of float attributes */
    const char *ilist;                /* name of the integer-list attribute */
    /* An optional input after the n_in required ones, given in the Lua
     * attribute table under this name (attention's bias), or NULL. */
    const char *opt_in;
    /* Fills n->dtype and n->shape from the inputs, or explains what is wrong. */
    int (*infer)(const lrc_graph *g, lrc_node *n, lrc_err *err);
    /* Floating-point operations of the forward computation. */
    double (*flops)(const lrc_graph *g, const lrc_node *n);
    /* Ratio of backward to forward FLOPs (gradients of all inputs). */
    double bwd_flops_ratio;
    /* The reference implementation (ir/ref_ops.c): contiguous f32 buffers
     * (i32 for integer tensors), f64 arithmetic; NULL for sources. Fails only
     * on bad data, such as an id outside the vocabulary. */
    int (*ref)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
    /* The gradient rule: given node id and the node dy holding the gradient
     * of its output (-1: the output is the loss, gradient 1), adds nodes
     * for the gradient of each input into dx[k] (-1 where there is none,
     * as for ids). NULL: the op has no gradient. */
    int (*grad)(lrc_graph *g, int id, int dy, int *dx, lrc_err *err);
    /* `ref` with every f32 buffer in f64 (i32 stays i32): the arithmetic of
     * finite-difference checks, where f32 storage would be mostly rounding. */
    int (*ref64)(const lrc_graph *g, const lrc_node *n, void *const *in, void *out, lrc_err *err);
    /* Gradient ops whose nodes differ only in iattr[1], the input whose
     * gradient they give: the nodes of one op's inputs share one kernel
     * (fuse rule 6), which computes what they have in common once. */
    bool share_by_which;
    /* Zero wherever every input is zero: a zero-padded column stays zero
     * through the op (the pad_hidden pass). */
    bool keeps_zero;
    lrc_bytes_rule bytes; /* lrc_node_bytes */
    lrc_axes_rule axes;   /* lrc_graph_track_axis */
    lrc_rows_rule rows;   /* the last_rows pass */
} lrc_op_info;

extern const lrc_op_info lrc_op_table[LRC_OP_COUNT];

/* Follows one axis of g's inputs (`what`: "batch" or "sequence") through
 * every node by its op's axes rule: axis[i] is where node i holds it (-1:
 * node i does not depend on it), starting from input_axis[i] for each
 * INPUT node i. Fails, naming the node, where an op mixes that axis, so
 * that a prefix of it is not what the graph built for the shorter shape
 * computes (attention without a causal mask, a mean over positions). */
int lrc_graph_track_axis(const lrc_graph *g, const int *input_axis, const char *what, int *axis, lrc_err *err);
/* Whether each position of a graph (inputs of two or more axes carry the
 * sequence at axis 1) can be computed one a step, as a KV-cache decoder
 * does: lrc_graph_track_axis's rules, and no slice shifting along the
 * sequence nor cumsum or scan over it, which would see no earlier position, nor
 * an arange as long as it, which counts from 0 in every step (causal
 * attention is what the decoder caches). Fails naming the node. */
int lrc_graph_check_stepwise(const lrc_graph *g, lrc_err *err);

const char *lrc_op_name(lrc_op op);
/* Returns 0 and sets *out for a known op name, else -1. */
int lrc_op_parse(const char *name, lrc_op *out);
/* Bytes an unfused kernel for n reads and writes (inputs + output). */
double lrc_node_bytes(const lrc_graph *g, const lrc_node *n);

/* ---- sequence RoPE (ir/rope.c) ----------------------------------------- */

/* The frequencies of rope, rope_grad and kv_attention: pair i of a head of D
 * turns by base^(-2i/D) a position, then scaled as transformers scales it.
 * factor 0 or 1: no scaling; orig_ctx 0: linear (every frequency divided by
 * factor); else Llama 3's (rope_type "llama3"). base 0: no RoPE. */
typedef struct lrc_rope {
    double base, factor, low_freq, high_freq, orig_ctx;
} lrc_rope;

lrc_rope lrc_rope_of(const lrc_node *n);
/* Writes r into n's attributes (n->op set first): what lrc_rope_of reads. */
void lrc_rope_set(lrc_node *n, const lrc_rope *r);
bool lrc_rope_scaled(const lrc_rope *r);
double lrc_rope_inv_freq(const lrc_rope *r, int64_t i, int64_t D);
/* The op's one-line error where the scaling attributes mean nothing. */
int lrc_rope_check(const lrc_rope *r, const char *op, lrc_err *err);
/* A name for the rope's angle tables, distinct for every distinct rope. */
void lrc_rope_name(const lrc_rope *r, char *buf, size_t n);

/* ---- the graph --------------------------------------------------------- */

/* Nodes are in topological order by construction: a node's inputs are always
 * earlier nodes. Node ids are indices. */
struct lrc_graph {
    lrc_node *nodes;
    int n_nodes, cap;
    int *outputs; /* node ids of the graph's results */
    char **output_names;
    int n_outputs, cap_outputs;
    /* the source nodes by name (graph.c), so that adding the n-th parameter
     * does not compare its name with all the others: a model of many
     * parameters builds in linear time; and the parameters' elements */
    int *src_index, src_cap, src_count;
    int64_t param_elems;
};

/* A new, empty graph; in xalloc.c (it never returns NULL: an
 * out-of-memory ends the process), since only the compile side makes
 * graphs. */
lrc_graph *lrc_graph_new(void);
void lrc_graph_free(lrc_graph *g);

/* Adds a node and runs its shape rule. On success returns the new node id;
 * on failure returns -1 with err set (prefixed by loc when given) and leaves
 * the graph unchanged. `proto` gives op, inputs and attributes. */
int lrc_graph_add(lrc_graph *g, const lrc_node *proto, lrc_err *err);
int lrc_graph_add_input(lrc_graph *g, const char *name, lrc_dtype t, const lrc_shape *s,
                        const char *loc, lrc_err *err);
int lrc_graph_add_param(lrc_graph *g, const char *name, const lrc_shape *s, lrc_init init,
                        const char *group, const char *loc, lrc_err *err);
int lrc_graph_add_state(lrc_graph *g, const char *name, const lrc_shape *s, const char *loc, lrc_err *err);
int lrc_graph_add_output(lrc_graph *g, const char *name, int node, lrc_err *err);
/* Drops every output (their nodes stay until a dce pass). */
void lrc_graph_clear_outputs(lrc_graph *g);
/* Node id of the source (INPUT, PARAM or STATE) op called name, or -1. */
int lrc_graph_find(const lrc_graph *g, lrc_op op, const char *name);

/* Checks every invariant the rest of lrc relies on: topological order, input
 * counts, types and shapes re-derived by the shape rules, unique names. */
int lrc_graph_verify(const lrc_graph *g, lrc_err *err);

/* Readable text form, one node a line. */
void lrc_graph_print(const lrc_graph *g, FILE *out);

/* Totals used by `lrc inspect`. */
int64_t lrc_graph_param_count(const lrc_graph *g);
double lrc_graph_flops(const lrc_graph *g, double *bwd_flops);

/* Small helpers shared by the layers. */
/* s as [outer, len, inner] about axis: the sizes before it multiplied, its
 * own, and those after it (the ops along one axis, ir/reduce.c). */
void lrc_axis_split(const lrc_shape *s, int axis, int64_t *outer, int64_t *len, int64_t *inner);
/* bmm's batch strides, in matrices: for each batch axis d of out (all but
 * its last two), how far a's and b's matrix index moves per step of d (0
 * where that operand broadcasts; ir/bmm.c). */
void lrc_bmm_strides(const lrc_shape *a, const lrc_shape *b, const lrc_shape *out, int64_t *sa, int64_t *sb);
/* Whether environment variable name is set to value (a developer's switch,
 * such as LRC_PAD_HIDDEN=0). */
bool lrc_env_is(const char *name, const char *value);
/* A message that quotes a file's strings (tensor names, metadata), which
 * may hold any character, kept to one line: control characters written
 * escaped (\n, \x01). Returns rc; does nothing when rc is 0. */
int lrc_err_one_line(lrc_err *err, int rc);
/* FNV-1a over n bytes, continuing from h (LRC_FNV_SEED to start): the
 * hash of package files, cache keys and parameter streams. */
#define LRC_FNV_SEED 0xcbf29ce484222325ull
uint64_t lrc_fnv1a(uint64_t h, const void *data, size_t n);
/* Everything left in f (a file or a pipe), with a 0 byte after it;
 * *len excludes it. Returns the buffer, or NULL on a read error or when
 * out of memory (errno ENOMEM). */
char *lrc_read_all(FILE *f, size_t *len);
/* The whole file (0-terminated, *len bytes), or NULL with err set naming it. */
char *lrc_read_file(const char *path, size_t *len, lrc_err *err);
/* Writes len bytes to path.tmp, then renames it over path: a reader never
 * sees a partial file, and a failure leaves none. */
int lrc_write_atomic(const char *path, const void *data, size_t len, lrc_err *err);

/* ---- memory ------------------------------------------------------------ */

/* The checked allocators (util.c): NULL when out of memory (errno ENOMEM),
 * never an exit, so that liblrc returns LRC_STATUS_NOMEM to its host. All
 * of ir/ and runtime/ that liblrc links allocates through them. A size of
 * 0 allocates 1 byte; lrc_calloc and lrc_reallocarray refuse an n * size
 * that overflows; lrc_realloc leaves p as it was when it fails;
 * lrc_strdup(NULL) is NULL. Release with free(). */
void *lrc_malloc(size_t n);
void *lrc_calloc(size_t n, size_t size);
void *lrc_realloc(void *p, size_t n);
void *lrc_reallocarray(void *p, size_t n, size_t size);
void *lrc_aligned_alloc(size_t align, size_t n); /* n rounded up to align */
char *lrc_strdup(const char *s);
/* Tensor storage: 64-byte aligned (the cpu pack kernels' streaming stores
 * need whole aligned vectors), large sizes on huge pages; not zeroed;
 * NULL when out of memory; release with free(). */
void *lrc_alloc_data(size_t n);

/* Fault injection, for tests (SQLite's malloc tests): every checked
 * allocation above, and every other point that can run out of memory or
 * threads (cJSON's allocations through runtime's hooks, a pool's
 * pthread_create), asks lrc_alloc_fails first. lrc_alloc_fail_at(n, false)
 * makes the n-th of them from now fail and no other; (n, true) that one and
 * all after it; n = 0 turns it off; n = INT64_MAX only counts.
 * lrc_alloc_count is how many were asked since the last lrc_alloc_fail_at
 * (counted only while it is on: off, a check is one relaxed load).
 * lrc_alloc_failures is how many checked allocations failed on this thread,
 * injected or not: a library that returns NULL for several reasons (cJSON)
 * is told apart from a real out-of-memory by it. */
bool lrc_alloc_fails(void);
void lrc_alloc_fail_at(int64_t n, bool and_after);
int64_t lrc_alloc_count(void);
int64_t lrc_alloc_failures(void);

/* xalloc.c: allocators that end the process with a message when out of
 * memory, for the compiler side (ir/passes, codegen, frontend) and the
 * CLI, where an out-of-memory ends the run anyway and a NULL checked at
 * every site would buy nothing. Nothing liblrc links may call them (ctest
 * liblrc_no_exit checks that it imports no exit). lrc_graph_new is the
 * compile side's graph, made by lrc_xcalloc. */
void *lrc_xmalloc(size_t n);
void *lrc_xcalloc(size_t n, size_t size);
void *lrc_xrealloc(void *p, size_t n);
char *lrc_xstrdup(const char *s);

#endif
