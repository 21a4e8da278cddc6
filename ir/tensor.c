/* tensor.c — host tensors, float conversions and named tensor sets. */
#include "lrc_ir.h"

#include <stdlib.h>
#include <string.h>

static lrc_tensor *tensor_new(const char *name, lrc_dtype t, const lrc_shape *s, bool zero, lrc_err *err);

lrc_tensor *lrc_tensor_new(const char *name, lrc_dtype t, const lrc_shape *s, lrc_err *err)
{
    return tensor_new(name, t, s, true, err);
}

lrc_tensor *lrc_tensor_new_uninit(const char *name, lrc_dtype t, const lrc_shape *s, lrc_err *err)
{
    return tensor_new(name, t, s, false, err);
}

static lrc_tensor *tensor_new(const char *name, lrc_dtype t, const lrc_shape *s, bool zero, lrc_err *err)
{
    size_t n = lrc_dtype_size(t);
    for (int i = 0; i < s->ndim; i++) {
        if (s->dim[i] < 0) {
            lrc_err_set(err, "tensor '%s': negative size at axis %d", name ? name : "?", i);
            return NULL;
        }
        if (s->dim[i] && n > SIZE_MAX / 4 / (size_t)s->dim[i]) {
            lrc_err_set(err, "tensor '%s': size overflows", name ? name : "?");
            return NULL;
        }
        n *= (size_t)s->dim[i];
    }
    lrc_tensor *x = lrc_calloc(1, sizeof *x);
    if (x) x->name = lrc_strdup(name ? name : "");
    if (!x || !x->name) {
        free(x);
        lrc_err_nomem(err, "for tensor '%s'", name ? name : "?");
        return NULL;
    }
    x->dtype = t;
    x->shape = *s;
    x->nbytes = n;
    /* lrc_alloc_data, zeroed or not: 64-byte aligned (a packed weight's
     * tensor is written by streaming stores), and large parameters and
     * optimizer state, read every step, on huge pages */
    x->data = lrc_alloc_data(n);
    if (x->data && zero) memset(x->data, 0, n);
    if (!x->data) {
        lrc_err_nomem(err, "for the %zu bytes of tensor '%s'", n, x->name);
        lrc_tensor_free(x);
        return NULL;
    }
    return x;
}

void lrc_tensor_free(lrc_tensor *t)
{
    if (!t) return;
    free(t->name);
    free(t->data);
    free(t);
}

float lrc_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t lrc_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

float lrc_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) u = sign;
        else { /* subnormal: renormalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            u = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t lrc_f32_to_f16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000;
    int32_t exp = (int32_t)((u >> 23) & 0xff) - 127 + 15;
    uint32_t man = u & 0x7fffff;
    if (((u >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = 1u << (shift - 1), rest = man & ((1u << shift) - 1);
        uint32_t r = man >> shift;
        if (rest > half || (rest == half && (r & 1))) r++;
        return (uint16_t)(sign | r);
    }
    uint32_t r = (uint32_t)(exp << 10) | (man >> 13), rest = man & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (r & 1))) r++; /* may carry into the exponent: correct */
    return (uint16_t)(sign | r);
}

void lrc_tensor_round_bf16(lrc_tensor *t)
{
    if (t->dtype != LRC_F32) return;
    int64_t n = lrc_shape_numel(&t->shape);
    /* element i's two bytes land at 2i, at or below the f32 read at 4i:
     * nothing is overwritten before it is read */
    const float *src = t->data;
    uint16_t *dst = t->data;
    for (int64_t i = 0; i < n; i++) {
        float f;
        memcpy(&f, src + i, 4);
        uint16_t h = lrc_f32_to_bf16(f);
        memcpy(dst + i, &h, 2);
    }
    t->dtype = LRC_BF16;
    t->nbytes = (size_t)n * 2;
}

lrc_tensor *lrc_tensor_to_f32(const lrc_tensor *t, lrc_err *err)
{
    lrc_tensor *o = lrc_tensor_new_uninit(t->name, LRC_F32, &t->shape, err); /* every dtype's case fills it */
    if (!o) return NULL;
    int64_t n = lrc_shape_numel(&t->shape);
    float *d = o->data;
    switch (t->dtype) {
    case LRC_F32: memcpy(d, t->data, t->nbytes); break;
    case LRC_BF16:
        for (int64_t i = 0; i < n; i++) d[i] = lrc_bf16_to_f32(((const uint16_t *)t->data)[i]);
        break;
    case LRC_F16:
        for (int64_t i = 0; i < n; i++) d[i] = lrc_f16_to_f32(((const uint16_t *)t->data)[i]);
        break;
    case LRC_I32:
        for (int64_t i = 0; i < n; i++) d[i] = (float)((const int32_t *)t->data)[i];
        break;
    default: memset(d, 0, o->nbytes); break;
    }
    return o;
}

void lrc_tensor_set_init(lrc_tensor_set *s) { memset(s, 0, sizeof *s); }

void lrc_tensor_set_clear(lrc_tensor_set *s)
{
    for (int i = 0; i < s->n; i++) lrc_tensor_free(s->items[i]);
    free(s->items);
    free(s->metadata_json);
    memset(s, 0, sizeof *s);
}

int lrc_tensor_set_add(lrc_tensor_set *s, lrc_tensor *t, lrc_err *err)
{
    if (lrc_tensor_set_find(s, t->name)) {
        lrc_err_set(err, "tensor '%s' appears twice", t->name);
        lrc_tensor_free(t);
        return LRC_EUSER;
    }
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        lrc_tensor **items = lrc_reallocarray(s->items, (size_t)cap, sizeof *s->items);
        if (!items) {
            lrc_err_nomem(err, "for a set of %d tensors (adding '%s')", cap, t->name);
            lrc_tensor_free(t); /* taken, as a duplicate is */
            return LRC_EUSER;
        }
        s->items = items, s->cap = cap;
    }
    s->items[s->n++] = t;
    return LRC_OK;
}

lrc_tensor *lrc_tensor_set_find(const lrc_tensor_set *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->items[i]->name, name)) return s->items[i];
    return NULL;
}
