/* ref_template.h — what ref_ops.c and ref_grad.c share: the reference
 * kernels are written once over `real` and compiled twice, real = float
 * giving lrc_ref_* (the `ref` backend) and, with LRC_REF_F64 defined (by
 * ref_ops64.c and ref_grad64.c), real = double giving lrc_ref64_*, all
 * storage in f64, for finite-difference gradient checks. Internal to ir/;
 * included once per translation unit. */
#include "ref_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef LRC_REF_F64
#define REF(name) lrc_ref64_##name
typedef double real;
#else
#define REF(name) lrc_ref_##name
typedef float real;
#endif

#define SHAPE(k) (&g->nodes[n->in[k]].shape)
#define F(k) ((const real *)in[k])
#define I(k) ((const int32_t *)in[k])

static inline int64_t last_dim(const lrc_shape *s) { return s->ndim ? s->dim[s->ndim - 1] : 1; }

/* The first key query position t sees under a sliding window of `window`
 * keys (0: none): transformers 4.44's Mistral and Gemma2 masks (sdpa and
 * eager) hide key j when j <= t - window, so query t attends to
 * t - window < j <= t, `window` keys counting itself. */
static inline int64_t attn_first_key(int64_t t, int64_t window) { return window > 0 && t >= window ? t - window + 1 : 0; }

/* Gemma2's logit soft-capping, cap tanh(s / cap), before mask and softmax (0: none). */
static inline double attn_softcap(double s, double cap) { return cap > 0 ? cap * tanh(s / cap) : s; }

/* The mean of a row of d values and 1 / sqrt(variance + eps), the variance
 * taken about the mean (layernorm and its gradient). */
static inline double row_mean_inv_std(const real *x, int64_t d, double eps, double *mean)
{
    double m = 0, var = 0;
    for (int64_t i = 0; i < d; i++) m += x[i];
    m /= (double)d;
    for (int64_t i = 0; i < d; i++) var += (x[i] - m) * (x[i] - m);
    *mean = m;
    return 1.0 / sqrt(var / (double)d + eps);
}

/* 1 / (1 + e^-x) from e^-|x|, which cannot overflow: for x < 0 it is
 * e^x / (1 + e^x), so a tiny result keeps its relative precision too. */
static inline double ref_sigmoid(double x)
{
    double t = exp(-fabs(x));
    return x >= 0 ? 1.0 / (1.0 + t) : t / (1.0 + t);
}
