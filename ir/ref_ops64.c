/* ref_ops64.c — the reference ops again with f64 storage (lrc_ref64_*): a
 * central difference of an f32 loss is mostly rounding, so finite-difference
 * checks of the gradient rules run the whole graph in double. */
#define LRC_REF_F64
#include "ref_ops.c"
