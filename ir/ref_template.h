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
