/* ref_grad64.c — the reference gradient ops with f64 storage (see ref_ops64.c). */
#define LRC_REF_F64
#include "ref_grad.c"
