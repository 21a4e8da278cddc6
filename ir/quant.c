/* quant.c — q8 weights (llama.cpp's Q8_0 layout): quantizing a weight
 * matrix for a package's file, and reading such a file back as f32. The
 * cpu pack kernels (codegen/llvm/gemm.c) quantize with the same two
 * functions' arithmetic, so a weight read back from a q8 file packs to the
 * very values and scales the file holds. */
#include "lrc_ir.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

float lrc_q8_scale(float amax) { return lrc_f16_to_f32(lrc_f32_to_f16(amax / 127.0f)); }

int8_t lrc_q8_value(float x, float inv_scale)
{
    float r = roundf(x * inv_scale);
    return (int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : r);
}

/* Element strides of t seen as rows of K values along axis: the value k of
 * row r lies at r * row_stride + k * k_stride. */
typedef struct {
    int64_t rows, K, nb, row_stride, k_stride;
} q8_view;

static q8_view view_of(const lrc_shape *s, int axis)
{
    q8_view v;
    int64_t numel = lrc_shape_numel(s);
    v.K = s->dim[axis];
    v.rows = v.K ? numel / v.K : 0;
    v.nb = (v.K + LRC_Q8_BLOCK - 1) / LRC_Q8_BLOCK;
    v.row_stride = axis == 0 ? 1 : v.K;
    v.k_stride = axis == 0 ? v.rows : 1;
    return v;
}

/* The scales' index of block b of row r: [nb, rows] along the first axis, [rows, nb] along the last */
static int64_t scale_at(const q8_view *v, int axis, int64_t r, int64_t b) { return axis == 0 ? b * v->rows + r : r * v->nb + b; }

int lrc_tensor_quantize_q8(lrc_tensor *t, int axis, lrc_tensor **scale, lrc_err *err)
{
    *scale = NULL;
    lrc_shape ss = t->shape;
    q8_view v = view_of(&t->shape, axis);
    ss.dim[axis] = v.nb;
    char name[512];
    snprintf(name, sizeof name, "%s%s", t->name, LRC_Q8_SCALE_SUFFIX);
    lrc_tensor *s = lrc_tensor_new(name, LRC_F16, &ss, err);
    int8_t *q = s ? lrc_malloc(t->shape.ndim && lrc_shape_numel(&t->shape) ? (size_t)lrc_shape_numel(&t->shape) : 1) : NULL;
    if (!s) return LRC_EUSER;
    if (!q) {
        lrc_tensor_free(s);
        return lrc_err_nomem(err, "quantizing weight '%s' to q8", t->name);
    }
    const float *x = t->data;
    for (int64_t r = 0; r < v.rows; r++)
        for (int64_t b = 0; b < v.nb; b++) {
            int64_t k1 = (b + 1) * LRC_Q8_BLOCK < v.K ? (b + 1) * LRC_Q8_BLOCK : v.K;
            float amax = 0;
            for (int64_t k = b * LRC_Q8_BLOCK; k < k1; k++) {
                float a = fabsf(x[r * v.row_stride + k * v.k_stride]);
                if (!(a <= 3.4e38f)) { /* NaN or Inf: no scale holds it */
                    lrc_tensor_free(s);
                    free(q);
                    return lrc_err_set(err, "weight '%s': element %lld is %s: q8 cannot store it", t->name,
                                       (long long)(r * v.row_stride + k * v.k_stride), isnan(a) ? "NaN" : "Inf");
                }
                amax = a > amax ? a : amax;
            }
            float d = lrc_q8_scale(amax), inv = d != 0.0f ? 1.0f / d : 0.0f;
            ((uint16_t *)s->data)[scale_at(&v, axis, r, b)] = lrc_f32_to_f16(d);
            for (int64_t k = b * LRC_Q8_BLOCK; k < k1; k++) {
                int64_t i = r * v.row_stride + k * v.k_stride;
                q[i] = lrc_q8_value(x[i], inv);
            }
        }
    free(t->data);
    t->data = q;
    t->dtype = LRC_I8;
    t->nbytes = (size_t)lrc_shape_numel(&t->shape);
    *scale = s;
    return LRC_OK;
}

static bool scale_shape_is(const lrc_shape *w, const lrc_shape *s, int axis)
{
    if (w->ndim != s->ndim || !w->ndim) return false;
    for (int d = 0; d < w->ndim; d++)
        if (s->dim[d] != (d == axis ? (w->dim[d] + LRC_Q8_BLOCK - 1) / LRC_Q8_BLOCK : w->dim[d])) return false;
    return true;
}

/* I8 tensor t as f32, from its scales s (checked finite) */
static lrc_tensor *dequantize(const lrc_tensor *t, const lrc_tensor *s, const char *what, lrc_err *err)
{
    int axis = scale_shape_is(&t->shape, &s->shape, t->shape.ndim - 1) ? t->shape.ndim - 1 : 0;
    if (s->dtype != LRC_F16 || !scale_shape_is(&t->shape, &s->shape, axis)) {
        lrc_err_set(err, "%s: tensor '%s' is %s %s, but the scales of I8 %s %s are F16 with one axis divided by %d", what,
                    s->name, lrc_dtype_st_name(s->dtype), lrc_shape_str(&s->shape, (char[96]){0}, 96), t->name,
                    lrc_shape_str(&t->shape, (char[96]){0}, 96), LRC_Q8_BLOCK);
        return NULL;
    }
    q8_view v = view_of(&t->shape, axis);
    const uint16_t *sd = s->data;
    for (int64_t i = 0; i < lrc_shape_numel(&s->shape); i++)
        if (((sd[i] >> 10) & 0x1f) == 0x1f) {
            lrc_err_set(err, "%s: tensor '%s': block scale %lld is %s: the file is corrupt", what, s->name, (long long)i,
                        sd[i] & 0x3ff ? "NaN" : "Inf");
            return NULL;
        }
    lrc_tensor *o = lrc_tensor_new_uninit(t->name, LRC_F32, &t->shape, err);
    if (!o) return NULL;
    const int8_t *q = t->data;
    float *x = o->data;
    for (int64_t r = 0; r < v.rows; r++)
        for (int64_t b = 0; b < v.nb; b++) { /* each scale widened once, for its block */
            float d = lrc_f16_to_f32(sd[scale_at(&v, axis, r, b)]);
            for (int64_t k = b * LRC_Q8_BLOCK; k < v.K && k < (b + 1) * LRC_Q8_BLOCK; k++) {
                int64_t i = r * v.row_stride + k * v.k_stride;
                x[i] = (float)q[i] * d;
            }
        }
    return o;
}

static bool is_scale_name(const char *n)
{
    size_t l = strlen(n), sl = strlen(LRC_Q8_SCALE_SUFFIX);
    return l > sl && !strcmp(n + l - sl, LRC_Q8_SCALE_SUFFIX);
}

int lrc_tensor_set_dequantize_q8(lrc_tensor_set *set, const char *what, lrc_err *err)
{
    int n_i8 = 0;
    for (int i = 0; i < set->n; i++) n_i8 += set->items[i]->dtype == LRC_I8;
    if (!n_i8) return LRC_OK;
    char name[512];
    for (int i = 0; i < set->n; i++) { /* pairs first: each I8 tensor with its scales, each scale tensor with its I8 */
        const lrc_tensor *t = set->items[i];
        snprintf(name, sizeof name, "%s%s", t->name, LRC_Q8_SCALE_SUFFIX);
        if (t->dtype == LRC_I8 && !lrc_tensor_set_find(set, name))
            return lrc_err_set(err, "%s: tensor '%s' is I8 without its scales '%s' (lrc reads I8 only as q8 weights)", what,
                               t->name, name);
        if (is_scale_name(t->name)) {
            snprintf(name, sizeof name, "%.*s", (int)(strlen(t->name) - strlen(LRC_Q8_SCALE_SUFFIX)), t->name);
            const lrc_tensor *w = lrc_tensor_set_find(set, name);
            if (!w || w->dtype != LRC_I8)
                return lrc_err_set(err, "%s: tensor '%s' holds q8 scales, but '%s' is not an I8 tensor", what, t->name, name);
        }
    }
    for (int i = 0; i < set->n; i++) {
        lrc_tensor *t = set->items[i];
        if (t->dtype != LRC_I8) continue;
        snprintf(name, sizeof name, "%s%s", t->name, LRC_Q8_SCALE_SUFFIX);
        lrc_tensor *f = dequantize(t, lrc_tensor_set_find(set, name), what, err);
        if (!f) return LRC_EUSER;
        lrc_tensor_free(t);
        set->items[i] = f;
    }
    int kept = 0;
    for (int i = 0; i < set->n; i++)
        if (is_scale_name(set->items[i]->name)) lrc_tensor_free(set->items[i]);
        else set->items[kept++] = set->items[i];
    set->n = kept;
    return LRC_OK;
}

int lrc_q8_panels_check(const void *data, int64_t bytes, int64_t cols, int64_t inner, int64_t NR, const char *what, lrc_err *err)
{
    if (NR <= 0 || inner <= 0 || cols <= 0)
        return lrc_err_set(err, "%s: q8 panels of %lld columns for a weight of %lld columns and %lld rows (a damaged package?)", what,
                           (long long)NR, (long long)cols, (long long)inner);
    int64_t panels = (cols + NR - 1) / NR, per = lrc_q8_panel_bytes(NR, inner), nb = (inner + LRC_Q8_BLOCK - 1) / LRC_Q8_BLOCK;
    if (bytes != panels * per)
        return lrc_err_set(err, "%s: %lld bytes, but %lld q8 panels of %lld columns and %lld rows take %lld (a damaged package?)", what,
                           (long long)bytes, (long long)panels, (long long)NR, (long long)inner, (long long)(panels * per));
    for (int64_t p = 0; p < panels; p++) {
        const unsigned char *panel = (const unsigned char *)data + p * per;
        for (int64_t i = 0; i < nb * NR; i++) {
            uint16_t h;
            memcpy(&h, panel + 2 * i, 2);
            float s = lrc_f16_to_f32(h);
            if (!(s >= 0 && s <= 65504.0f)) { /* NaN, Inf and negatives are damage */
                char v[32];
                snprintf(v, sizeof v, "%s", isnan(s) ? "NaN" : isinf(s) ? "Inf" : "negative");
                return lrc_err_set(err, "%s: the q8 scale of column %lld, rows %lld-%lld is %s: a damaged package?", what,
                                   (long long)(p * NR + i % NR), (long long)(i / NR * LRC_Q8_BLOCK),
                                   (long long)((i / NR + 1) * LRC_Q8_BLOCK - 1), v);
            }
        }
    }
    return LRC_OK;
}
