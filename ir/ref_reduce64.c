/* ref_reduce64.c — the reference kernels of the ops along one axis with
 * f64 storage (lrc_ref64_*), for finite-difference gradient checks. */
#define LRC_REF_F64
#include "ref_reduce.c"
