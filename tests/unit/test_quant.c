/* test_quant — q8 weights (ir/quant.c): llama.cpp's Q8_0 arithmetic (an
 * f16 scale per block of 32, values rounded half away from zero), blocks
 * along either axis with a partial last block, the round trip a package
 * relies on (a q8 file read back quantizes to the same values and scales),
 * a safetensors file of I8 tensors read as F32, and every error: a NaN or
 * Inf weight, a NaN or Inf scale, an I8 tensor without scales, scales
 * without their tensor or of the wrong shape. */
#include "check.h"
#include "runtime/lrc_runtime.h"

#include <math.h>
#include <stdlib.h>
#include <unistd.h>

static lrc_tensor *mk(const char *name, lrc_dtype t, int64_t r, int64_t c)
{
    lrc_err err;
    lrc_tensor *x = lrc_tensor_new(name, t, &(lrc_shape){2, {r, c}}, &err);
    if (!x) { printf("cannot make %s: %s\n", name, err.msg); exit(2); }
    return x;
}

static lrc_tensor *copy(const lrc_tensor *t)
{
    lrc_tensor *c = mk(t->name, t->dtype, t->shape.dim[0], t->shape.dim[1]);
    memcpy(c->data, t->data, t->nbytes);
    return c;
}

/* the Q8_0 properties of one quantized tensor against its f32 source */
static void check_blocks(const lrc_tensor *src, const lrc_tensor *q, const lrc_tensor *s, int axis)
{
    int64_t R = src->shape.dim[0], C = src->shape.dim[1], K = axis ? C : R, rows = axis ? R : C;
    const float *x = src->data;
    const int8_t *v = q->data;
    const uint16_t *sc = s->data;
    int bad = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b * 32 < K; b++) {
            float amax = 0, d = lrc_f16_to_f32(sc[axis ? r * s->shape.dim[1] + b : b * C + r]);
            int qmax = 0;
            for (int64_t k = b * 32; k < K && k < b * 32 + 32; k++) {
                int64_t i = axis ? r * C + k : k * C + r;
                amax = fmaxf(amax, fabsf(x[i]));
                qmax = abs(v[i]) > qmax ? abs(v[i]) : qmax;
                if (fabsf(x[i] - (float)v[i] * d) > 0.5f * d * (1 + 1e-3f)) bad++;
            }
            if (fabsf(d - amax / 127) > amax / 127 / 2048 || (amax > 0 && qmax != 127) || (amax == 0 && d != 0)) bad++;
        }
    CHECK(!bad, "axis %d: every value within half a step of its source, each block's scale its max / 127 in f16 (%d off)", axis, bad);
}

static void test_quantize(void)
{
    for (int axis = 0; axis < 2; axis++) {
        lrc_tensor *w = mk("w", LRC_F32, axis ? 3 : 70, axis ? 70 : 3), *s = NULL; /* 70: two blocks of 32 and one of 6 */
        float *x = w->data;
        for (int64_t i = 0; i < 210; i++) x[i] = sinf(0.37f * (float)i) * (1 + (float)(i % 7));
        for (int64_t k = 0; k < 32; k++) x[axis ? k : k * 3] = 0; /* row 0's first block all zero */
        lrc_tensor *src = copy(w);
        lrc_err err;
        CHECK(lrc_tensor_quantize_q8(w, axis, &s, &err) == LRC_OK, "quantize along axis %d", axis);
        CHECK(w->dtype == LRC_I8 && w->nbytes == 210 && s && s->dtype == LRC_F16, "I8 values, F16 scales");
        CHECK(s && s->shape.dim[axis] == 3 && s->shape.dim[1 - axis] == 3 && !strcmp(s->name, "w.q8_scale"),
              "scales [3, 3] named w.q8_scale");
        if (s) check_blocks(src, w, s, axis);
        /* read back as f32 and quantized again: the same bytes (a q8 file packs to what it holds) */
        lrc_tensor_set set;
        lrc_tensor_set_init(&set);
        lrc_tensor *q0 = copy(w), *s0 = s ? copy(s) : NULL;
        lrc_tensor_set_add(&set, w, &err);
        if (s) lrc_tensor_set_add(&set, s, &err);
        CHECK(lrc_tensor_set_dequantize_q8(&set, "t", &err) == LRC_OK && set.n == 1 && set.items[0]->dtype == LRC_F32,
              "dequantized to one F32 tensor");
        lrc_tensor *s1 = NULL;
        CHECK(set.n == 1 && lrc_tensor_quantize_q8(set.items[0], axis, &s1, &err) == LRC_OK && s1 && s0 &&
                  !memcmp(set.items[0]->data, q0->data, 210) && !memcmp(s1->data, s0->data, s0->nbytes),
              "axis %d: quantized again, the same values and scales", axis);
        lrc_tensor_free(s1);
        lrc_tensor_free(q0);
        lrc_tensor_free(s0);
        lrc_tensor_free(src);
        lrc_tensor_set_clear(&set);
    }
    /* ties round away from zero, as llama.cpp's roundf: scale 0.5, 1.25 / 0.5 = 2.5 -> 3 */
    lrc_tensor *w = mk("t", LRC_F32, 1, 4), *s = NULL;
    memcpy(w->data, (float[]){63.5f, 1.25f, -1.25f, 0.75f}, 16);
    lrc_err err;
    lrc_tensor_quantize_q8(w, 1, &s, &err);
    const int8_t *q = w->data;
    CHECK(s && lrc_f16_to_f32(((uint16_t *)s->data)[0]) == 0.5f && q[0] == 127 && q[1] == 3 && q[2] == -3 && q[3] == 2,
          "ties away from zero: %d %d %d %d", q[0], q[1], q[2], q[3]);
    lrc_tensor_free(w);
    lrc_tensor_free(s);
    for (int nan = 0; nan < 2; nan++) {
        w = mk("bad", LRC_F32, 2, 40);
        ((float *)w->data)[45] = nan ? NAN : INFINITY;
        int rc = lrc_tensor_quantize_q8(w, 1, &s, &err);
        CHECK(rc == LRC_EUSER && !s && strstr(err.msg, "weight 'bad': element 45 is ") && strstr(err.msg, nan ? "NaN" : "Inf"),
              "a %s weight: %s", nan ? "NaN" : "Inf", err.msg);
        lrc_tensor_free(w);
    }
}

/* a set of I8 "w" [4, 40] and scales named sname, of dtype dt and shape [r, c], after fill */
static int load_bad(const char *sname, lrc_dtype dt, int64_t r, int64_t c, uint16_t fill, bool with_w, lrc_err *err)
{
    lrc_tensor_set set;
    lrc_tensor_set_init(&set);
    if (with_w) lrc_tensor_set_add(&set, mk("w", LRC_I8, 4, 40), err);
    lrc_tensor *s = mk(sname, dt, r, c);
    if (dt == LRC_F16)
        for (int64_t i = 0; i < r * c; i++) ((uint16_t *)s->data)[i] = i == 5 ? fill : 0x3c00;
    lrc_tensor_set_add(&set, s, err);
    int rc = lrc_tensor_set_dequantize_q8(&set, "f.st", err);
    lrc_tensor_set_clear(&set);
    return rc;
}

static void test_errors(void)
{
    lrc_err err;
    CHECK(load_bad("w.q8_scale", LRC_F16, 4, 2, 0x3c00, true, &err) == LRC_OK, "a good pair loads");
    CHECK(load_bad("w.q8_scale", LRC_F16, 4, 2, 0x7e00, true, &err) == LRC_EUSER &&
              !strcmp(err.msg, "f.st: tensor 'w.q8_scale': block scale 5 is NaN: the file is corrupt"), "NaN scale: %s", err.msg);
    CHECK(load_bad("w.q8_scale", LRC_F16, 4, 2, 0xfc00, true, &err) == LRC_EUSER && strstr(err.msg, "block scale 5 is Inf"),
          "-Inf scale: %s", err.msg);
    CHECK(load_bad("w.q8_scale", LRC_F16, 4, 3, 0x3c00, true, &err) == LRC_EUSER && strstr(err.msg, "one axis divided by 32"),
          "scales of the wrong shape: %s", err.msg);
    CHECK(load_bad("w.q8_scale", LRC_F32, 4, 2, 0, true, &err) == LRC_EUSER && strstr(err.msg, "are F16"), "F32 scales: %s", err.msg);
    CHECK(load_bad("v.q8_scale", LRC_F16, 4, 2, 0x3c00, true, &err) == LRC_EUSER &&
              strstr(err.msg, "f.st: tensor 'w' is I8 without its scales 'w.q8_scale'"), "no scales: %s", err.msg);
    CHECK(load_bad("w.q8_scale", LRC_F16, 4, 2, 0x3c00, false, &err) == LRC_OK, "no I8 tensor: scales are an ordinary F16 tensor");
    lrc_tensor_set set;
    lrc_tensor_set_init(&set);
    lrc_tensor_set_add(&set, mk("w", LRC_I8, 4, 40), &err);
    lrc_tensor_set_add(&set, mk("w.q8_scale", LRC_F16, 4, 2), &err);
    lrc_tensor_set_add(&set, mk("u.q8_scale", LRC_F16, 4, 2), &err);
    CHECK(lrc_tensor_set_dequantize_q8(&set, "f.st", &err) == LRC_EUSER && strstr(err.msg, "'u.q8_scale' holds q8 scales, but 'u' is not an I8 tensor"),
          "scales without their tensor: %s", err.msg);
    lrc_tensor_set_clear(&set);
}

/* through a file: I8 and F16 written, F32 read */
static void test_file(void)
{
    char path[] = "/tmp/lrc_test_q8.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) { perror("mkstemp"); exit(2); }
    close(fd);
    lrc_tensor *w = mk("m", LRC_F32, 2, 33), *s = NULL;
    for (int i = 0; i < 66; i++) ((float *)w->data)[i] = (float)(i - 30) / 8;
    lrc_err err;
    lrc_tensor_set set, back;
    lrc_tensor_set_init(&set);
    lrc_tensor_quantize_q8(w, 1, &s, &err);
    lrc_tensor_set_add(&set, w, &err);
    lrc_tensor_set_add(&set, s, &err);
    CHECK(lrc_safetensors_save(path, &set, &err) == LRC_OK, "saved: %s", err.msg);
    int rc = lrc_safetensors_load(path, &back, &err);
    CHECK(rc == LRC_OK && back.n == 1 && back.items[0]->dtype == LRC_F32, "read back as one F32 tensor (%s)", rc ? err.msg : "");
    int off = 0;
    for (int i = 0; rc == LRC_OK && back.n == 1 && i < 66; i++) {
        float d = lrc_f16_to_f32(((uint16_t *)s->data)[(i / 33) * 2 + (i % 33) / 32]);
        off += ((float *)back.items[0]->data)[i] != (float)((int8_t *)w->data)[i] * d;
    }
    CHECK(!off, "every value its int8 times its block's scale (%d off)", off);
    lrc_tensor_set_clear(&set);
    lrc_tensor_set_clear(&back);
    unlink(path);
}

/* q8 panels as a package stores them (lrc_q8_panels_check): their size
 * for the weight's shape, and every f16 scale finite and not negative */
static void test_panels(void)
{
    const int64_t N = 40, K = 70, NR = 16, per = lrc_q8_panel_bytes(NR, K), bytes = 3 * per; /* 3 panels, the last partial */
    CHECK(per == (NR * (2 * 3 + K) + 63) / 64 * 64, "a panel: 3 blocks of f16 scales, then the int8 values, padded to 64 bytes");
    unsigned char *p = calloc((size_t)bytes, 1);
    lrc_err err;
    CHECK(!lrc_q8_panels_check(p, bytes, N, K, NR, "w", &err), "zero panels pass: %s", err.msg);
    CHECK(lrc_q8_panels_check(p, bytes - 64, N, K, NR, "w", &err) && strstr(err.msg, "w: 3584 bytes, but 3 q8 panels of 16 columns and 70 rows take 3648"),
          "a short buffer: '%s'", err.msg);
    const struct { uint16_t bits; const char *what; } bad[] = {{0x7e00, "NaN"}, {0x7c00, "Inf"}, {0xbc00, "negative"}};
    for (int i = 0; i < 3; i++) {
        uint16_t *s = (uint16_t *)(p + per); /* panel 1: columns 16..31; block 2 of column 21 */
        s[2 * NR + 5] = bad[i].bits;
        char want[128];
        snprintf(want, sizeof want, "w: the q8 scale of column 21, rows 64-95 is %s: a damaged package?", bad[i].what);
        CHECK(lrc_q8_panels_check(p, bytes, N, K, NR, "w", &err) && !strcmp(err.msg, want), "a %s scale: '%s'", bad[i].what, err.msg);
        s[2 * NR + 5] = 0;
    }
    free(p);
}

int main(void)
{
    test_quantize();
    test_errors();
    test_file();
    test_panels();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
