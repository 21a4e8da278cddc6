/* test_safetensors — host tensors, the f32 <-> bf16/f16 conversions and the
 * safetensors reader and writer: a round trip through a file, the atomic
 * save, and every kind of corrupt input the parser must reject cleanly
 * (right error, file name first, nothing left in the set), and
 * lrc_params_bind's move of F32 tensors. Runs under
 * AddressSanitizer/LeakSanitizer in CI, so everything allocated is freed and
 * corrupt inputs live in exact-size heap buffers (an overread is caught). */
#include "check.h"
#include "runtime/lrc_runtime.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static lrc_tensor *mk(const char *name, lrc_dtype t, int nd, const int64_t *dims)
{
    lrc_shape s = {nd, {0}};
    for (int i = 0; i < nd; i++) s.dim[i] = dims[i];
    lrc_err err;
    lrc_tensor *x = lrc_tensor_new(name, t, &s, &err);
    if (!x) { printf("cannot make %s: %s\n", name, err.msg); exit(2); }
    return x;
}

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    *len = fread(b, 1, (size_t)n, f);
    fclose(f);
    return b;
}

/* Names in dir containing ".tmp." — the writer's temporary files. */
static int count_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

/* ---- 1 and 2: round trip, file layout, atomic save --------------------- */

static const char *META = "{\"format\":\"pt\",\"note\":\"a \\\"quoted\\\" value\"}";

static void fill_set(lrc_tensor_set *s)
{
    lrc_err err;
    lrc_tensor_set_init(s);
    lrc_tensor *f = mk("w.f32", LRC_F32, 2, (int64_t[]){2, 3});
    for (int i = 0; i < 6; i++) ((float *)f->data)[i] = (float)i * 0.25f - 1.0f;
    lrc_tensor *b = mk("w.bf16", LRC_BF16, 1, (int64_t[]){4});
    for (int i = 0; i < 4; i++) ((uint16_t *)b->data)[i] = lrc_f32_to_bf16((float)i - 1.5f);
    lrc_tensor *h = mk("w.f16", LRC_F16, 2, (int64_t[]){2, 2});
    for (int i = 0; i < 4; i++) ((uint16_t *)h->data)[i] = lrc_f32_to_f16((float)i * 1000.0f + 0.5f);
    lrc_tensor *ids = mk("ids", LRC_I32, 1, (int64_t[]){5});
    int32_t iv[5] = {0, -1, 7, INT32_MAX, INT32_MIN};
    memcpy(ids->data, iv, sizeof iv);
    lrc_tensor *sc = mk("scale", LRC_F32, 0, NULL); /* rank 0: one element */
    *(float *)sc->data = 3.5f;
    lrc_tensor *e = mk("empty", LRC_F32, 2, (int64_t[]){3, 0}); /* no bytes at all */
    /* A name that needs JSON escaping. */
    lrc_tensor *q = mk("layers.0/\"q\"\\w", LRC_BF16, 1, (int64_t[]){1});
    *(uint16_t *)q->data = 0xbeef;
    lrc_tensor *all[] = {f, b, h, ids, sc, e, q};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (lrc_tensor_set_add(s, all[i], &err)) { printf("add: %s\n", err.msg); exit(2); }
    s->metadata_json = lrc_strdup(META);
}

/* The bytes on disk: 8-byte LE length (a multiple of 8), JSON padded with
 * spaces, then the tensors' data back to back in set order. */
static void check_layout(const char *path, const lrc_tensor_set *s)
{
    size_t len = 0;
    uint8_t *buf = read_file(path, &len);
    CHECK(buf && len >= 8, "%s: cannot read back", path);
    if (!buf || len < 8) { free(buf); return; }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    CHECK(hlen % 8 == 0, "header length %llu is not a multiple of 8", (unsigned long long)hlen);
    size_t total = 0;
    for (int i = 0; i < s->n; i++) total += s->items[i]->nbytes;
    CHECK(8 + hlen + total == len, "file is %zu bytes, want 8 + %llu + %zu", len, (unsigned long long)hlen, total);
    if (8 + hlen + total != len) { free(buf); return; }
    const char *hdr = (const char *)buf + 8, *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(hdr, (size_t)hlen, &end, 0);
    CHECK(cJSON_IsObject(root), "header is not a JSON object");
    int pad_ok = end != NULL;
    for (const char *p = end; p && p < hdr + hlen; p++) pad_ok &= *p == ' ';
    CHECK(pad_ok, "header padding after the JSON is not all spaces");
    CHECK(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(root, "__metadata__")), "no __metadata__ object");
    uint64_t off = 0;
    for (int i = 0; i < s->n; i++) {
        const lrc_tensor *t = s->items[i];
        cJSON *o = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, t->name), "data_offsets");
        CHECK(cJSON_GetArraySize(o) == 2 && cJSON_GetArrayItem(o, 0)->valuedouble == (double)off &&
                  cJSON_GetArrayItem(o, 1)->valuedouble == (double)(off + t->nbytes),
              "'%s': data_offsets are not [%llu, %llu]", t->name, (unsigned long long)off,
              (unsigned long long)(off + t->nbytes));
        CHECK(!t->nbytes || !memcmp(buf + 8 + hlen + off, t->data, t->nbytes), "'%s': data bytes differ", t->name);
        off += t->nbytes;
    }
    cJSON_Delete(root);
    free(buf);
}

static void test_roundtrip(const char *dir)
{
    char path[512], bad[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    lrc_tensor_set s, r;
    lrc_err err = {0};
    fill_set(&s);
    CHECK(lrc_safetensors_save(path, &s, &err) == LRC_OK, "save: %s", err.msg);
    CHECK(count_tmp(dir) == 0, "a *.tmp.* file is left after a successful save");
    check_layout(path, &s);

    CHECK(lrc_safetensors_load(path, &r, &err) == LRC_OK, "load: %s", err.msg);
    CHECK(r.n == s.n, "loaded %d tensors, saved %d", r.n, s.n);
    for (int i = 0; i < s.n && i < r.n; i++) {
        const lrc_tensor *a = s.items[i], *b = r.items[i]; /* file order is set order */
        CHECK(!strcmp(a->name, b->name), "tensor %d: name '%s', want '%s'", i, b->name, a->name);
        CHECK(a->dtype == b->dtype, "'%s': dtype %d, want %d", a->name, b->dtype, a->dtype);
        CHECK(lrc_shape_eq(&a->shape, &b->shape), "'%s': shape differs", a->name);
        CHECK(a->nbytes == b->nbytes && (!a->nbytes || !memcmp(a->data, b->data, a->nbytes)),
              "'%s': data differs", a->name);
    }
    lrc_tensor *sc = lrc_tensor_set_find(&r, "scale");
    CHECK(sc && sc->shape.ndim == 0 && sc->nbytes == 4 && *(float *)sc->data == 3.5f, "rank-0 scalar lost");
    lrc_tensor *e = lrc_tensor_set_find(&r, "empty");
    CHECK(e && e->shape.ndim == 2 && e->shape.dim[1] == 0 && e->nbytes == 0, "zero-size tensor lost");
    CHECK(r.metadata_json && !strcmp(r.metadata_json, META), "metadata '%s', want '%s'",
          r.metadata_json ? r.metadata_json : "(null)", META);
    lrc_tensor_set_clear(&r);

    /* Saving over an existing file replaces it (rename over the old one). */
    lrc_tensor_set one;
    lrc_tensor_set_init(&one);
    lrc_tensor_set_add(&one, mk("only", LRC_I32, 1, (int64_t[]){1}), &err);
    CHECK(lrc_safetensors_save(path, &one, &err) == LRC_OK, "second save: %s", err.msg);
    CHECK(lrc_safetensors_load(path, &r, &err) == LRC_OK && r.n == 1 && !strcmp(r.items[0]->name, "only") &&
              !r.metadata_json,
          "the second save did not replace the file");
    CHECK(count_tmp(dir) == 0, "a *.tmp.* file is left after overwriting");
    lrc_tensor_set_clear(&r);
    lrc_tensor_set_clear(&one);

    /* Into a directory that does not exist: fails, and leaves nothing. */
    snprintf(bad, sizeof bad, "%s/no/such/dir/out.safetensors", dir);
    struct stat st;
    CHECK(lrc_safetensors_save(bad, &s, &err) == LRC_EUSER, "save into a missing directory succeeded");
    CHECK(strstr(err.msg, "cannot create"), "missing directory: msg '%s'", err.msg);
    CHECK(stat(bad, &st) != 0, "a file exists after a failed save");
    snprintf(bad, sizeof bad, "%s/no", dir);
    CHECK(stat(bad, &st) != 0, "a failed save created a directory");
    CHECK(count_tmp(dir) == 0, "a *.tmp.* file is left after a failed save");

    /* Loading a missing file names it. */
    snprintf(bad, sizeof bad, "%s/missing.safetensors", dir);
    CHECK(lrc_safetensors_load(bad, &r, &err) == LRC_EUSER && strstr(err.msg, bad) && r.n == 0,
          "load of a missing file: '%s'", err.msg);
    lrc_tensor_set_clear(&r);
    lrc_tensor_set_clear(&s);
    remove(path);
}

/* ---- 3: corrupt inputs ------------------------------------------------- */

/* Parses exactly len bytes (a copy in its own allocation, so that ASan sees
 * any read past the end) and expects a clean rejection mentioning want. */
static void expect_bad(const char *label, const uint8_t *bytes, size_t len, const char *want)
{
    uint8_t *buf = malloc(len ? len : 1);
    if (len) memcpy(buf, bytes, len);
    lrc_tensor_set s;
    memset(&s, 0xa5, sizeof s); /* parse must initialise the set itself */
    lrc_err err = {0};
    int rc = lrc_safetensors_parse(buf, len, "x.safetensors", &s, &err);
    CHECK(rc == LRC_EUSER, "%s: returned %d, want LRC_EUSER", label, rc);
    CHECK(s.n == 0 && !s.items && !s.metadata_json, "%s: set not empty after failure", label);
    CHECK(!strncmp(err.msg, "x.safetensors:", 14), "%s: msg '%s' does not start with the file name", label,
          err.msg);
    CHECK(strstr(err.msg, want), "%s: msg '%s' lacks '%s'", label, err.msg, want);
    if (rc == LRC_OK) lrc_tensor_set_clear(&s);
    free(buf);
}

/* A file with header hdr (length exactly strlen(hdr)) and data_len bytes. */
static uint8_t *build(const char *hdr, size_t data_len, size_t *len)
{
    size_t h = strlen(hdr);
    *len = 8 + h + data_len;
    uint8_t *b = malloc(*len);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(b + 8, hdr, h);
    for (size_t i = 0; i < data_len; i++) b[8 + h + i] = (uint8_t)i;
    return b;
}

static void bad_hdr(const char *hdr, size_t data_len, const char *want)
{
    size_t len;
    uint8_t *b = build(hdr, data_len, &len);
    expect_bad(hdr, b, len, want);
    free(b);
}

#define T(dt, sh, offs) "{\"dtype\":\"" dt "\",\"shape\":" sh ",\"data_offsets\":" offs "}"

static void test_corrupt(void)
{
    /* The length prefix itself. */
    expect_bad("empty buffer", (const uint8_t *)"", 0, "0 bytes, too short");
    expect_bad("5 bytes", (const uint8_t *)"\x10\0\0\0\0", 5, "5 bytes, too short");
    uint8_t past[18] = {100}; /* says 100 header bytes, has 10 */
    expect_bad("header past the end", past, sizeof past, "header length 100 at offset 0 runs past the end");
    uint8_t huge[16];
    memset(huge, 0xff, 8);
    memcpy(huge + 8, "{}      ", 8);
    expect_bad("header length 2^64-1", huge, sizeof huge, "header length 18446744073709551615");

    /* The JSON. */
    bad_hdr("", 0, "invalid JSON in the header");
    bad_hdr("not json", 0, "invalid JSON in the header near byte offset");
    bad_hdr("{\"a\":" T("F32", "[1]", "[0,4]"), 4, "invalid JSON"); /* missing final brace */
    bad_hdr("{\"a\":{\"dtype\":\"F3", 0, "invalid JSON");
    bad_hdr("[1,2]", 0, "the header at offset 8 is not a JSON object");
    bad_hdr("\"str\"", 0, "is not a JSON object");
    /* Trailing garbage is not JSON (serde_json, the reference reader, says so). */
    bad_hdr("{} xyz", 0, "unexpected text after the header JSON");

    /* One entry. */
    bad_hdr("{\"a\":5}", 0, "tensor 'a': entry is not a JSON object");
    bad_hdr("{\"a\":[1]}", 0, "tensor 'a': entry is not a JSON object");
    bad_hdr("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "tensor 'a': missing \"dtype\" string");
    bad_hdr("{\"a\":{\"dtype\":4,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "missing \"dtype\" string");
    bad_hdr("{\"a\":" T("F64", "[1]", "[0,8]") "}", 8, "tensor 'a': unsupported dtype 'F64'");
    bad_hdr("{\"a\":" T("U16", "[1]", "[0,2]") "}", 2, "unsupported dtype 'U16'");
    bad_hdr("{\"a\":" T("float32", "[1]", "[0,4]") "}", 4, "unsupported dtype 'float32'");
    bad_hdr("{\"a\":" T("f32", "[1]", "[0,4]") "}", 4, "unsupported dtype 'f32'"); /* lrc's own spelling */
    bad_hdr("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, "tensor 'a': missing \"shape\" array");
    bad_hdr("{\"a\":" T("F32", "4", "[0,4]") "}", 4, "missing \"shape\" array");
    bad_hdr("{\"a\":" T("F32", "[-1]", "[0,4]") "}", 4, "shape entry 0 is not a valid size");
    bad_hdr("{\"a\":" T("F32", "[2,1.5]", "[0,4]") "}", 4, "shape entry 1 is not a valid size");
    bad_hdr("{\"a\":" T("F32", "[\"2\"]", "[0,8]") "}", 8, "shape entry 0 is not a valid size");
    bad_hdr("{\"a\":" T("F32", "[1e300]", "[0,4]") "}", 4, "shape entry 0 is not a valid size");
    bad_hdr("{\"a\":" T("F32", "[2199023255553]", "[0,4]") "}", 4, "shape entry 0 is not a valid size"); /* 2^41+1 */
    bad_hdr("{\"a\":" T("F32", "[1048576,1048576,2]", "[0,4]") "}", 4, "tensor 'a': shape is too large");
    bad_hdr("{\"a\":" T("F32", "[1,1,1,1,1,1,1]", "[0,4]") "}", 4, "7 axes, at most 6");
    /* 2^40 * 2^24 wraps a 64-bit count to 0, so it claims 0 bytes; it must
     * still be refused as too large, with the file name. */
    bad_hdr("{\"a\":" T("F32", "[1099511627776,16777216]", "[0,0]") "}", 0, "too large");
    bad_hdr("{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "tensor 'a': \"data_offsets\" must be [begin, end]");
    bad_hdr("{\"a\":" T("F32", "[1]", "[1]") "}", 4, "\"data_offsets\" must be [begin, end]");
    bad_hdr("{\"a\":" T("F32", "[1]", "[0,4,8]") "}", 8, "\"data_offsets\" must be [begin, end]");
    bad_hdr("{\"a\":" T("F32", "[1]", "[-1,4]") "}", 4, "\"data_offsets\" must be [begin, end]");
    bad_hdr("{\"a\":" T("F32", "[1]", "[\"a\",4]") "}", 4, "\"data_offsets\" must be [begin, end]");
    bad_hdr("{\"a\":" T("F32", "[1]", "[0,4.5]") "}", 8, "\"data_offsets\" must be [begin, end]");
    bad_hdr("{\"a\":" T("F32", "[1]", "{}") "}", 4, "\"data_offsets\" must be [begin, end]");
    bad_hdr("{\"a\":" T("F32", "[1]", "[8,4]") "}", 8, "tensor 'a': data_offsets [8, 4] lie outside the data section");
    bad_hdr("{\"a\":" T("F32", "[2]", "[0,8]") "}", 4, "data_offsets [0, 8] lie outside the data section");
    bad_hdr("{\"a\":" T("F32", "[2]", "[0,4]") "}", 8, "tensor 'a': 4 bytes at file offset");
    bad_hdr("{\"a\":" T("BF16", "[3]", "[0,4]") "}", 4, "but BF16 [3] needs 6");
    bad_hdr("{\"a\":" T("I32", "[]", "[0,0]") "}", 4, "but I32 [] needs 4"); /* a scalar is not empty */

    /* Between entries. */
    bad_hdr("{\"a\":" T("F32", "[2]", "[0,8]") ",\"b\":" T("F32", "[2]", "[4,12]") "}", 12,
            "tensors 'a' and 'b' overlap at file offset");
    bad_hdr("{\"b\":" T("F32", "[2]", "[4,12]") ",\"a\":" T("F32", "[2]", "[0,8]") "}", 12, "overlap");
    bad_hdr("{\"a\":" T("F32", "[1]", "[0,4]") ",\"b\":" T("F32", "[1]", "[0,4]") "}", 4, "overlap");
    /* A zero-size tensor sitting inside 'a' must not hide that 'a' and 'b' overlap. */
    bad_hdr("{\"a\":" T("F32", "[4]", "[0,16]") ",\"e\":" T("F32", "[0]", "[4,4]") ",\"b\":" T("F32", "[2]",
            "[8,16]") "}", 16, "overlap");
    bad_hdr("{\"a\":" T("F32", "[1]", "[0,4]") ",\"a\":" T("F32", "[1]", "[4,8]") "}", 8,
            "x.safetensors: tensor 'a' appears twice");
    /* A good tensor and metadata before the bad entry are dropped too. */
    bad_hdr("{\"__metadata__\":{\"k\":\"v\"},\"a\":" T("F32", "[1]", "[0,4]") ",\"b\":" T("F64", "[1]", "[4,12]")
            "}", 12, "tensor 'b': unsupported dtype");

    /* __metadata__. */
    bad_hdr("{\"__metadata__\":[\"k\"]}", 0, "\"__metadata__\" must be an object of strings");
    bad_hdr("{\"__metadata__\":\"k\"}", 0, "\"__metadata__\" must be an object of strings");
    bad_hdr("{\"__metadata__\":{\"k\":1}}", 0, "\"__metadata__\" value 'k' is not a string");
    bad_hdr("{\"__metadata__\":{\"a\":\"x\",\"k\":{}}}", 0, "\"__metadata__\" value 'k' is not a string");
}

static void test_valid_minimal(void)
{
    const char *hdrs[] = {"{}", "{}      ", "{\"__metadata__\":{}}"}; /* bare, padded, empty metadata */
    for (size_t i = 0; i < 3; i++) {
        size_t len;
        uint8_t *b = build(hdrs[i], 0, &len);
        lrc_tensor_set s;
        lrc_err err = {0};
        int rc = lrc_safetensors_parse(b, len, "x.safetensors", &s, &err);
        CHECK(rc == LRC_OK && s.n == 0, "header '%s': rc %d n %d: %s", hdrs[i], rc, s.n, err.msg);
        lrc_tensor_set_clear(&s);
        free(b);
    }
    /* A hand-written file (not the writer's output): little-endian values,
     * offsets in any order, unused bytes between tensors allowed. */
    size_t len;
    uint8_t *b = build("{\"v\":" T("I32", "[2]", "[8,16]") ",\"h\":" T("F16", "[1]", "[0,2]") "}", 16, &len);
    size_t d = len - 16;
    const uint8_t vals[] = {0x00, 0x3c, 0, 0, 0, 0, 0, 0, 0x02, 0x01, 0, 0, 0xfe, 0xff, 0xff, 0xff};
    memcpy(b + d, vals, 16);
    lrc_tensor_set s;
    lrc_err err = {0};
    CHECK(lrc_safetensors_parse(b, len, "x.safetensors", &s, &err) == LRC_OK, "hand-written file: %s", err.msg);
    lrc_tensor *v = lrc_tensor_set_find(&s, "v"), *h = lrc_tensor_set_find(&s, "h");
    CHECK(v && v->dtype == LRC_I32 && ((int32_t *)v->data)[0] == 258 && ((int32_t *)v->data)[1] == -2,
          "I32 values wrong");
    CHECK(h && h->dtype == LRC_F16 && lrc_f16_to_f32(*(uint16_t *)h->data) == 1.0f, "F16 value wrong");
    CHECK(s.n == 2 && !strcmp(s.items[0]->name, "v"), "file order not kept");
    lrc_tensor_set_clear(&s);
    free(b);
}

/* ---- 4: conversions ---------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd32(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* The correctly rounded narrow code for finite x, found by binary search
 * over the decoded values (independent of the bit tricks under test): the
 * nearer of the two codes around |x|, ties to the even one. Past `max` (the
 * largest finite code) comes max + 1, the infinity, which IEEE places one
 * ulp above max for rounding purposes. */
static uint16_t ref_round(float x, float (*dec)(uint16_t), uint16_t max)
{
    double a = fabs((double)x);
    unsigned lo = 0, hi = max;
    while (lo < hi) {
        unsigned mid = (lo + hi + 1) / 2;
        if (dec((uint16_t)mid) <= a) lo = mid;
        else hi = mid - 1;
    }
    double below = dec((uint16_t)lo);
    double above = lo < max ? dec((uint16_t)(lo + 1)) : 2.0 * dec(max) - dec((uint16_t)(max - 1));
    unsigned m = a - below < above - a || (a - below == above - a && !(lo & 1)) ? lo : lo + 1;
    return (uint16_t)((signbit(x) ? 0x8000 : 0) | m);
}

static void test_conversions(void)
{
    /* bf16: exact values, signed zero, infinities, NaN. */
    CHECK(lrc_f32_to_bf16(1.0f) == 0x3f80 && lrc_bf16_to_f32(0x3f80) == 1.0f, "bf16 1");
    CHECK(lrc_f32_to_bf16(-2.0f) == 0xc000 && lrc_bf16_to_f32(0xc000) == -2.0f, "bf16 -2");
    CHECK(lrc_f32_to_bf16(0.5f) == 0x3f00 && lrc_bf16_to_f32(0x3f00) == 0.5f, "bf16 0.5");
    CHECK(lrc_f32_to_bf16(0.0f) == 0x0000 && lrc_f32_to_bf16(-0.0f) == 0x8000, "bf16 zeros");
    CHECK(signbit(lrc_bf16_to_f32(0x8000)) && lrc_bf16_to_f32(0x8000) == 0.0f, "bf16 -0 decodes");
    CHECK(lrc_f32_to_bf16(INFINITY) == 0x7f80 && lrc_f32_to_bf16(-INFINITY) == 0xff80, "bf16 inf");
    CHECK(isinf(lrc_bf16_to_f32(0x7f80)), "bf16 inf decodes");
    CHECK(isnan(lrc_bf16_to_f32(lrc_f32_to_bf16(NAN))), "bf16 NaN stays NaN");
    CHECK(isnan(lrc_bf16_to_f32(lrc_f32_to_bf16(u2f(0x7f800001u)))), "bf16 NaN with a low payload stays NaN");
    CHECK(lrc_f32_to_bf16(u2f(0x7f7fffffu)) == 0x7f80, "bf16 FLT_MAX rounds to inf");
    /* bf16 ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 (even: 1). */
    CHECK(lrc_f32_to_bf16(u2f(0x3f808000u)) == 0x3f80, "bf16 tie down to even");
    CHECK(lrc_f32_to_bf16(u2f(0x3f818000u)) == 0x3f82, "bf16 tie up to even");
    CHECK(lrc_f32_to_bf16(u2f(0x3f808001u)) == 0x3f81, "bf16 just above half");
    CHECK(lrc_f32_to_bf16(u2f(0x3f807fffu)) == 0x3f80, "bf16 just below half");
    CHECK(lrc_f32_to_bf16(u2f(0xbf818000u)) == 0xbf82, "bf16 negative tie");

    /* f16. */
    CHECK(lrc_f32_to_f16(1.0f) == 0x3c00 && lrc_f16_to_f32(0x3c00) == 1.0f, "f16 1");
    CHECK(lrc_f32_to_f16(-2.0f) == 0xc000 && lrc_f16_to_f32(0xc000) == -2.0f, "f16 -2");
    CHECK(lrc_f32_to_f16(0.5f) == 0x3800 && lrc_f16_to_f32(0x3800) == 0.5f, "f16 0.5");
    CHECK(lrc_f32_to_f16(65504.0f) == 0x7bff && lrc_f16_to_f32(0x7bff) == 65504.0f, "f16 max 65504");
    CHECK(lrc_f32_to_f16(ldexpf(1, -24)) == 0x0001 && lrc_f16_to_f32(0x0001) == ldexpf(1, -24),
          "f16 smallest subnormal 2^-24");
    CHECK(lrc_f32_to_f16(ldexpf(1023, -24)) == 0x03ff && lrc_f16_to_f32(0x03ff) == ldexpf(1023, -24),
          "f16 largest subnormal");
    CHECK(lrc_f32_to_f16(ldexpf(1, -14)) == 0x0400, "f16 smallest normal");
    CHECK(lrc_f32_to_f16(0.0f) == 0x0000 && lrc_f32_to_f16(-0.0f) == 0x8000, "f16 zeros");
    CHECK(signbit(lrc_f16_to_f32(0x8000)) && lrc_f16_to_f32(0x8000) == 0.0f, "f16 -0 decodes");
    CHECK(lrc_f32_to_f16(INFINITY) == 0x7c00 && lrc_f32_to_f16(-INFINITY) == 0xfc00, "f16 inf");
    CHECK(isinf(lrc_f16_to_f32(0xfc00)) && lrc_f16_to_f32(0xfc00) < 0, "f16 -inf decodes");
    CHECK(isnan(lrc_f16_to_f32(lrc_f32_to_f16(NAN))), "f16 NaN stays NaN");
    CHECK(isnan(lrc_f16_to_f32(lrc_f32_to_f16(u2f(0x7f800001u)))), "f16 NaN with a low payload stays NaN");
    CHECK(lrc_f32_to_f16(1e6f) == 0x7c00 && lrc_f32_to_f16(1e-10f) == 0 && lrc_f32_to_f16(-1e-10f) == 0x8000,
          "f16 overflow and underflow");
    /* f16 ties in the normal range: 1 + 2^-11 is halfway between 1 and 1 + 2^-10. */
    CHECK(lrc_f32_to_f16(1.0f + ldexpf(1, -11)) == 0x3c00, "f16 tie down to even");
    CHECK(lrc_f32_to_f16(1.0f + ldexpf(3, -11)) == 0x3c02, "f16 tie up to even");
    CHECK(lrc_f32_to_f16(1.0f + ldexpf(1, -11) + ldexpf(1, -20)) == 0x3c01, "f16 just above half");
    CHECK(lrc_f32_to_f16(65519.0f) == 0x7bff, "f16 65519 rounds to 65504");
    CHECK(lrc_f32_to_f16(65520.0f) == 0x7c00, "f16 65520 (tie, 65504 is odd) rounds to inf");
    /* ... and among subnormals, in units of 2^-24. */
    CHECK(lrc_f32_to_f16(ldexpf(1, -25)) == 0x0000, "f16 half a unit ties to 0");
    CHECK(lrc_f32_to_f16(u2f(f2u(ldexpf(1, -25)) + 1)) == 0x0001, "f16 just over half a unit");
    CHECK(lrc_f32_to_f16(ldexpf(3, -25)) == 0x0002, "f16 1.5 units ties to 2");
    CHECK(lrc_f32_to_f16(ldexpf(5, -25)) == 0x0002, "f16 2.5 units ties to 2");
    CHECK(lrc_f32_to_f16(ldexpf(2047, -25)) == 0x0400, "f16 tie carries into the smallest normal");

    /* Every narrow value survives widening and narrowing unchanged. */
    int bad_bf = 0, bad_h = 0;
    for (uint32_t h = 0; h < 0x10000; h++) {
        float b = lrc_bf16_to_f32((uint16_t)h), f = lrc_f16_to_f32((uint16_t)h);
        bad_bf += isnan(b) ? !isnan(lrc_bf16_to_f32(lrc_f32_to_bf16(b))) : lrc_f32_to_bf16(b) != h;
        bad_h += isnan(f) ? !isnan(lrc_f16_to_f32(lrc_f32_to_f16(f))) : lrc_f32_to_f16(f) != h;
    }
    CHECK(bad_bf == 0, "%d bf16 values do not round-trip through f32", bad_bf);
    CHECK(bad_h == 0, "%d f16 values do not round-trip through f32", bad_h);

    /* Random finite floats round to nearest, ties to even (checked against
     * the neighbours of the result, independently of the bit tricks). */
    int wrong_bf = 0, wrong_h = 0;
    for (int i = 0; i < 200000; i++) {
        uint32_t u = rnd32();
        float x = u2f(u);
        if (!isfinite(x)) continue;
        wrong_bf += lrc_f32_to_bf16(x) != ref_round(x, lrc_bf16_to_f32, 0x7f7f);
        /* For f16, bias towards its range: exponents 2^-26 .. 2^17. */
        float y = u2f((u & 0x807fffffu) | ((uint32_t)(101 + u % 44) << 23));
        wrong_h += lrc_f32_to_f16(y) != ref_round(y, lrc_f16_to_f32, 0x7bff);
    }
    CHECK(wrong_bf == 0, "%d random floats misrounded to bf16", wrong_bf);
    CHECK(wrong_h == 0, "%d random floats misrounded to f16", wrong_h);

    /* lrc_tensor_to_f32 widens each dtype. */
    lrc_err err;
    lrc_tensor *b = mk("b", LRC_BF16, 2, (int64_t[]){2, 2});
    uint16_t bv[4] = {0x3f80, 0xc000, 0x3f00, 0x7f80};
    memcpy(b->data, bv, 8);
    lrc_tensor *h = mk("h", LRC_F16, 1, (int64_t[]){4});
    uint16_t hv[4] = {0x7bff, 0x0001, 0x8000, 0x3c00};
    memcpy(h->data, hv, 8);
    lrc_tensor *i32 = mk("i", LRC_I32, 1, (int64_t[]){4});
    int32_t iv[4] = {-7, 0, 16777217, INT32_MIN};
    memcpy(i32->data, iv, 16);
    lrc_tensor *src[3] = {b, h, i32};
    const float want[3][4] = {{1, -2, 0.5f, INFINITY},
                              {65504, ldexpf(1, -24), -0.0f, 1},
                              {-7, 0, 16777216.0f, -2147483648.0f}};
    for (int k = 0; k < 3; k++) {
        lrc_tensor *o = lrc_tensor_to_f32(src[k], &err);
        CHECK(o && o->dtype == LRC_F32 && !strcmp(o->name, src[k]->name) && lrc_shape_eq(&o->shape, &src[k]->shape) &&
                  o->nbytes == 16,
              "to_f32 %s: wrong header", src[k]->name);
        for (int j = 0; o && j < 4; j++)
            CHECK(f2u(((float *)o->data)[j]) == f2u(want[k][j]), "to_f32 %s[%d] = %g, want %g", src[k]->name, j,
                  (double)((float *)o->data)[j], (double)want[k][j]);
        lrc_tensor_free(o);
        lrc_tensor_free(src[k]);
    }
}

/* ---- 5: tensors and sets ----------------------------------------------- */

static void test_sets(void)
{
    lrc_err err = {0};
    lrc_tensor_set s;
    lrc_tensor_set_init(&s);
    lrc_tensor *first = mk("w", LRC_F32, 1, (int64_t[]){2});
    CHECK(lrc_tensor_set_add(&s, first, &err) == LRC_OK, "add: %s", err.msg);
    /* The duplicate is refused and freed by the set (LeakSanitizer checks). */
    CHECK(lrc_tensor_set_add(&s, mk("w", LRC_I32, 1, (int64_t[]){3}), &err) == LRC_EUSER, "duplicate accepted");
    CHECK(strstr(err.msg, "tensor 'w' appears twice"), "duplicate: msg '%s'", err.msg);
    CHECK(s.n == 1 && lrc_tensor_set_find(&s, "w") == first, "duplicate changed the set");
    for (int i = 0; i < 40; i++) { /* grows past the initial capacity */
        char name[16];
        snprintf(name, sizeof name, "t%d", i);
        lrc_tensor_set_add(&s, mk(name, LRC_F16, 0, NULL), &err);
    }
    CHECK(s.n == 41 && lrc_tensor_set_find(&s, "t39") == s.items[40] && !lrc_tensor_set_find(&s, "t40"),
          "find after growth");
    lrc_tensor_set_clear(&s);
    CHECK(s.n == 0 && !s.items, "clear leaves an empty set");

    lrc_shape neg = {2, {2, -1}}, big = {3, {1 << 30, 1 << 30, 1 << 30}};
    CHECK(!lrc_tensor_new("n", LRC_F32, &neg, &err) && strstr(err.msg, "negative size at axis 1"),
          "negative dim: '%s'", err.msg);
    CHECK(!lrc_tensor_new("o", LRC_F32, &big, &err) && strstr(err.msg, "overflows"), "overflow: '%s'", err.msg);
    lrc_tensor *z = mk("z", LRC_BF16, 0, NULL);
    CHECK(z->nbytes == 2 && *(uint16_t *)z->data == 0, "scalar is 2 zero bytes");
    lrc_tensor_free(z);
    lrc_tensor_free(NULL);
}

/* lrc_params_bind: an F32 tensor moves from the file's set to the bound
 * one (the same data, not a copy), a BF16 or F16 one is widened and stays
 * in the file's set; a refused file is left whole. */
static void test_bind(void)
{
    lrc_err err = {0};
    lrc_graph *g = lrc_graph_new();
    static const char *names[] = {"a.weight", "b.weight", "c.weight"};
    lrc_shape s = {1, {3}};
    for (int i = 0; i < 3; i++)
        CHECK(lrc_graph_add_param(g, names[i], &s, (lrc_init){LRC_INIT_ZEROS, 0}, "test", "test_safetensors.c", &err) >= 0,
              "add_param: %s", err.msg);
    lrc_tensor_set file, out;
    lrc_tensor_set_init(&file);
    lrc_tensor *a = mk("a.weight", LRC_F32, 1, (int64_t[]){3}), *b = mk("b.weight", LRC_BF16, 1, (int64_t[]){3});
    lrc_tensor *c = mk("c.weight", LRC_F16, 1, (int64_t[]){3});
    for (int i = 0; i < 3; i++) {
        ((float *)a->data)[i] = 0.5f * (float)i;
        ((uint16_t *)b->data)[i] = lrc_f32_to_bf16(1.5f + (float)i);
        ((uint16_t *)c->data)[i] = lrc_f32_to_f16(-2.0f * (float)i);
    }
    void *a_data = a->data;
    lrc_tensor_set_add(&file, c, &err);
    lrc_tensor_set_add(&file, a, &err);
    lrc_tensor *extra = mk("extra", LRC_F32, 1, (int64_t[]){3});
    lrc_tensor_set_add(&file, extra, &err);
    CHECK(lrc_params_bind(g, &file, "w.st", &out, &err) == LRC_EUSER && strstr(err.msg, "missing tensor 'b.weight'"),
          "a missing tensor: '%s'", err.msg);
    CHECK(file.n == 3 && file.items[1] == a && out.n == 0, "a refused file was changed");
    lrc_tensor_set_add(&file, b, &err);
    CHECK(lrc_params_bind(g, &file, "w.st", &out, &err) == LRC_EUSER && strstr(err.msg, "extra tensor 'extra'"),
          "an extra tensor: '%s'", err.msg);
    CHECK(file.n == 4 && file.items[1] == a && file.items[2] == extra && out.n == 0, "a refused file was changed");
    file.items[2] = file.items[3], file.n = 3; /* extra dropped */
    lrc_tensor_free(extra);
    CHECK(lrc_params_bind(g, &file, "w.st", &out, &err) == LRC_OK, "bind: %s", err.msg);
    CHECK(out.n == 3 && !strcmp(out.items[0]->name, "a.weight") && !strcmp(out.items[1]->name, "b.weight") &&
              !strcmp(out.items[2]->name, "c.weight"), "bound in the graph's order");
    CHECK(out.n == 3 && out.items[0]->data == a_data, "the F32 tensor was copied, not moved");
    CHECK(file.n == 2 && file.items[0] == c && file.items[1] == b, "the file keeps the widened tensors alone");
    for (int i = 0; i < 3 && out.n == 3; i++) {
        const float *va = out.items[0]->data, *vb = out.items[1]->data, *vc = out.items[2]->data;
        CHECK(out.items[1]->dtype == LRC_F32 && out.items[2]->dtype == LRC_F32, "widened to F32");
        CHECK(va[i] == 0.5f * (float)i && vb[i] == 1.5f + (float)i && vc[i] == -2.0f * (float)i, "value %d", i);
    }
    lrc_tensor_set_clear(&out);
    lrc_tensor_set_clear(&file);
    lrc_graph_free(g);
}

int main(void)
{
    char dir[] = "/tmp/lrc_test_st.XXXXXX";
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 2; }
    test_roundtrip(dir);
    test_corrupt();
    test_valid_minimal();
    test_conversions();
    test_sets();
    test_bind();
    if (rmdir(dir)) printf("FAIL: %s is not empty at the end\n", dir), failed++;
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
