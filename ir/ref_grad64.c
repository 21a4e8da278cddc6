/* ref_grad64.c — the reference gradient ops with f64 storage (see ref_ops64.c). */
#define REF(name) lrc_ref64_##name
typedef double real;
#include "ref_grad.c"
