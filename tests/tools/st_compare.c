/* st_compare — compares tensors of two safetensors files by relative error
 * ||a - b|| / ||b|| (b the reference), for the parity tests: one tensor, or
 * with NAME "*" every tensor of REF, each against its own norm.
 * With FLOOR, a tensor of one element (LayerRoPE's slopes: each a sum over
 * the whole model) has its error measured against at least FLOOR times the
 * largest norm of REF: in bf16 its rounding noise is that of the whole
 * gradient, up to several times its own size. Every larger tensor is held
 * to its own norm, so one that is zeroed or unwritten (a relative error of
 * 1 or more) fails at any TOL under 1.
 * usage: st_compare OUT.safetensors REF.safetensors NAME|'*' TOL [FLOOR] */
#include "runtime/lrc_runtime.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: st_compare OUT REF NAME TOL [FLOOR]\n");
        return 2;
    }
    lrc_err err;
    lrc_tensor_set a, b;
    if (lrc_safetensors_load(argv[1], &a, &err) || lrc_safetensors_load(argv[2], &b, &err)) {
        fprintf(stderr, "st_compare: %s\n", err.msg);
        return 1;
    }
    /* NAME "*": every tensor of REF, each within TOL of its own norm */
    double tol = atof(argv[4]), worst = 0, floor_frac = argc == 6 ? atof(argv[5]) : 0;
    const char *worst_name = "";
    int64_t values = 0;
    bool all = !strcmp(argv[3], "*"), ok = true;
    /* A tensor whose reference is over a million times smaller than the
     * largest one is zero in exact arithmetic (ViT's key bias: softmax
     * ignores a shift shared by every key), so both sides are rounding
     * noise, in f32 ~1e-8 of the largest norm: its error is measured
     * against 1e-3 of the largest norm. */
    double largest = 0;
    int floored = 0, floored_scalars = 0;
    for (int i = 0; i < b.n; i++) { /* over all of REF, whichever NAME is compared */
        if (b.items[i]->dtype != LRC_F32) continue;
        const float *q = b.items[i]->data;
        double den = 0;
        for (int64_t j = 0; j < lrc_shape_numel(&b.items[i]->shape); j++) den += (double)q[j] * q[j];
        if (sqrt(den) > largest) largest = sqrt(den);
    }
    for (int i = 0; i < b.n && ok; i++) {
        const lrc_tensor *y = b.items[i];
        if (!all && strcmp(y->name, argv[3])) continue;
        const lrc_tensor *x = lrc_tensor_set_find(&a, y->name);
        if (!x || x->dtype != LRC_F32 || y->dtype != LRC_F32 || !lrc_shape_eq(&x->shape, &y->shape)) {
            fprintf(stderr, "st_compare: '%s' missing in %s, not F32, or shapes differ\n", y->name, argv[1]);
            ok = false;
            break;
        }
        const float *p = x->data, *q = y->data;
        double num = 0, den = 0;
        int64_t n = lrc_shape_numel(&x->shape);
        for (int64_t j = 0; j < n; j++) {
            double d = (double)p[j] - q[j];
            num += d * d;
            den += (double)q[j] * q[j];
        }
        double scale = sqrt(den);
        if (scale < 1e-6 * largest) scale = 1e-3 * largest, floored++;
        if (n == 1 && scale < floor_frac * largest) scale = floor_frac * largest, floored_scalars++;
        double rel = sqrt(num) / (scale > 0 ? scale : 1);
        /* a NaN is the worst and stays so (a later tensor must not hide it) */
        if (!isnan(worst) && (!(rel <= worst) || !isfinite(rel))) worst = rel, worst_name = y->name;
        values += n;
    }
    if (ok && values == 0) {
        fprintf(stderr, "st_compare: no tensor '%s' in %s\n", argv[3], argv[2]);
        ok = false;
    }
    if (ok) printf("%s: worst relative error %.3e (%s; tolerance %.0e, %lld values", argv[3], worst, worst_name, tol,
                   (long long)values);
    if (ok && floor_frac > 0)
        printf("; %d of one element against at least %.0e of the largest norm", floored_scalars, floor_frac);
    if (ok && floored) printf("; %d zero in exact arithmetic, against 1e-3 of the largest norm", floored);
    if (ok) printf(")\n");
    int rc = ok && worst <= tol && isfinite(worst) ? 0 : 1;
    lrc_tensor_set_clear(&a);
    lrc_tensor_set_clear(&b);
    return rc;
}
