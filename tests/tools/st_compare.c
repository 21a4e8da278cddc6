/* st_compare — compares one tensor of two safetensors files by relative
 * error ||a - b|| / ||b|| (b the reference), for the parity tests.
 * usage: st_compare OUT.safetensors REF.safetensors NAME TOL */
#include "runtime/lrc_runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: st_compare OUT REF NAME TOL\n");
        return 2;
    }
    lrc_err err;
    lrc_tensor_set a, b;
    if (lrc_safetensors_load(argv[1], &a, &err) || lrc_safetensors_load(argv[2], &b, &err)) {
        fprintf(stderr, "st_compare: %s\n", err.msg);
        return 1;
    }
    const lrc_tensor *x = lrc_tensor_set_find(&a, argv[3]), *y = lrc_tensor_set_find(&b, argv[3]);
    if (!x || !y || x->dtype != LRC_F32 || y->dtype != LRC_F32 || !lrc_shape_eq(&x->shape, &y->shape)) {
        fprintf(stderr, "st_compare: '%s' missing, not F32, or shapes differ\n", argv[3]);
        return 1;
    }
    const float *p = x->data, *q = y->data;
    double num = 0, den = 0;
    int64_t n = lrc_shape_numel(&x->shape);
    for (int64_t i = 0; i < n; i++) {
        double d = (double)p[i] - q[i];
        num += d * d;
        den += (double)q[i] * q[i];
    }
    double rel = sqrt(num) / (sqrt(den) > 0 ? sqrt(den) : 1);
    double tol = atof(argv[4]);
    printf("%s: relative error %.3e (tolerance %.0e, %lld values)\n", argv[3], rel, tol, (long long)n);
    lrc_tensor_set_clear(&a);
    lrc_tensor_set_clear(&b);
    return rel <= tol && isfinite(rel) ? 0 : 1;
}
