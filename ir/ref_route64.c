/* ref_route64.c — the routing ops' reference kernels with f64 storage
 * (lrc_ref64_*), for finite-difference gradient checks (ref_ops64.c). */
#define LRC_REF_F64
#include "ref_route.c"
