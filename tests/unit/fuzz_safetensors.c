/* fuzz_safetensors.c — the safetensors reader (runtime/safetensors.c) and a
 * sharded directory's index (runtime/safetensors_dir.c) under mutated input
 * (tests/unit/fuzz.h):
 *
 *   fuzz_safetensors ITERATIONS FILE.safetensors... [-- model.safetensors.index.json...]
 *
 * An input that starts with '{' is an index, read beside the shards its
 * seed names (linked into a scratch directory); any other is a safetensors
 * file, parsed from memory and, when its length is 5 mod 8, read from a file (the
 * mapped path), which must agree. A file that loads is written back and
 * read again: the same tensors, bytes and metadata. Besides the files given,
 * the seeds include files this fuzzer writes: every dtype, a 0-d and an
 * empty tensor, q8 weights with their scales, metadata. */
#include "fuzz.h"

#include <cjson/cJSON.h>

enum { PARSED, REFUSED, FILES, INDEXES, INDEX_REFUSED };
static bool have_index;

static bool same_sets(const lrc_tensor_set *a, const lrc_tensor_set *b)
{
    if (a->n != b->n || !a->metadata_json != !b->metadata_json ||
        (a->metadata_json && strcmp(a->metadata_json, b->metadata_json)))
        return false;
    for (int i = 0; i < a->n; i++) {
        const lrc_tensor *x = a->items[i], *y = lrc_tensor_set_find(b, x->name);
        if (!y || x->dtype != y->dtype || !lrc_shape_eq(&x->shape, &y->shape) || x->nbytes != y->nbytes ||
            memcmp(x->data, y->data, x->nbytes))
            return false;
    }
    return true;
}

/* What a loaded set promises: each tensor's bytes are its shape's, and it
 * writes back and reads again as itself. */
static void check_loaded(const lrc_tensor_set *s)
{
    for (int i = 0; i < s->n; i++) {
        const lrc_tensor *t = s->items[i];
        if (!t->name || t->nbytes != (size_t)lrc_shape_numel(&t->shape) * lrc_dtype_size(t->dtype)) {
            fprintf(stderr, "fuzz: tensor %d ('%s') holds %zu bytes for its shape\n", i, t->name, t->nbytes);
            abort();
        }
    }
    lrc_err err;
    lrc_tensor_set back;
    const char *path = fuzz_path("back.safetensors");
    if (lrc_safetensors_save(path, s, &err) || lrc_safetensors_load(path, &back, &err)) {
        fprintf(stderr, "fuzz: a loaded file does not write back and load: %s\n", err.msg);
        abort();
    }
    fuzz_scratch_also("back.safetensors");
    if (!same_sets(s, &back)) {
        fprintf(stderr, "fuzz: a loaded file written back reads differently\n");
        abort();
    }
    lrc_tensor_set_clear(&back);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    lrc_err err, err2;
    lrc_tensor_set s, f;
    if (n && d[0] == '{' && have_index) {
        FUZZ_COUNT(INDEXES);
        fuzz_write("model.safetensors.index.json", d, n);
        if (lrc_safetensors_load(fuzz_path("model.safetensors.index.json"), &s, &err)) fuzz_check_error(&err), FUZZ_COUNT(INDEX_REFUSED);
        else check_loaded(&s);
        lrc_tensor_set_clear(&s);
        return 0;
    }
    int rc = lrc_safetensors_parse(d, n, "fuzz.safetensors", &s, &err);
    if (rc) fuzz_check_error(&err), FUZZ_COUNT(REFUSED);
    else FUZZ_COUNT(PARSED), check_loaded(&s);
    if (n % 8 == 5) { /* the same bytes from a file */
        FUZZ_COUNT(FILES);
        fuzz_write("in.safetensors", d, n);
        int rc2 = lrc_safetensors_load(fuzz_path("in.safetensors"), &f, &err2);
        if (!rc2 != !rc || (!rc && !same_sets(&s, &f))) {
            fprintf(stderr, "fuzz: a file reads differently from its bytes in memory (%s; %s)\n", rc ? err.msg : "loaded",
                    rc2 ? err2.msg : "loaded");
            abort();
        }
        if (rc2) fuzz_check_error(&err2);
        lrc_tensor_set_clear(&f);
    }
    lrc_tensor_set_clear(&s);
    return 0;
}

#ifndef LRC_LIBFUZZER
/* Links the shards an index names into the scratch directory, so that its
 * mutations load beside them. */
static int add_index(const char *path, const uint8_t *d, size_t n, lrc_err *err)
{
    cJSON *root = cJSON_ParseWithLength((const char *)d, n);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(root);
        return lrc_err_set(err, "%s: not an index (no weight_map)", path);
    }
    char dir[4096], target[8192];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    for (const cJSON *e = map->child; e; e = e->next)
        if (cJSON_IsString(e)) {
            snprintf(target, sizeof target, "%s/%s", slash ? dir : ".", e->valuestring);
            fuzz_link(e->valuestring, target);
        }
    cJSON_Delete(root);
    have_index = true;
    return LRC_OK;
}

/* Each seed loads as it is (a seed that does not is a mistake in the test). */
static int add_seed(const char *path, const uint8_t *d, size_t n, int group, lrc_err *err)
{
    if (group) return add_index(path, d, n, err);
    lrc_tensor_set s;
    int rc = lrc_safetensors_parse(d, n, path, &s, err);
    lrc_tensor_set_clear(&s);
    return rc;
}

/* safetensors' header length, repaired after the mutations */
static void fix(uint8_t *buf, size_t *n, size_t cap)
{
    fuzz_fix_safetensors_length(buf, n, cap);
}

static void add(lrc_tensor_set *s, const char *name, lrc_dtype dt, lrc_shape shape)
{
    lrc_err err;
    lrc_tensor *t = lrc_tensor_new(name, dt, &shape, &err);
    for (size_t i = 0; t && i < t->nbytes; i++) ((uint8_t *)t->data)[i] = (uint8_t)(i * 37 + 11);
    if (!t || lrc_tensor_set_add(s, t, &err)) {
        fprintf(stderr, "fuzz_safetensors: %s\n", err.msg);
        exit(2);
    }
}

/* Files of every kind the reader takes, written by the writer; their
 * paths appended to seeds. */
static int make_seeds(char **seeds, int cap)
{
    if (cap < 3) return 0;
    lrc_err err;
    lrc_tensor_set s;
    lrc_tensor_set_init(&s);
    add(&s, "model.embed_tokens.weight", LRC_F32, (lrc_shape){2, {3, 4}});
    add(&s, "model.norm.weight", LRC_BF16, (lrc_shape){1, {4}});
    add(&s, "h", LRC_F16, (lrc_shape){3, {1, 2, 2}});
    add(&s, "tokens", LRC_I32, (lrc_shape){2, {1, 3}});
    add(&s, "packed", LRC_U8, (lrc_shape){1, {5}});
    add(&s, "scalar", LRC_F32, (lrc_shape){0, {0}});
    add(&s, "empty", LRC_F32, (lrc_shape){2, {0, 7}});
    s.metadata_json = lrc_strdup("{\"format\":\"pt\",\"note\":\"\\u00e9\\n\"}");
    int rc = lrc_safetensors_save(fuzz_path("made_all.safetensors"), &s, &err);
    lrc_tensor_set_clear(&s);
    /* q8: an I8 weight [2, 32] with its F16 scales, one block a row */
    add(&s, "w", LRC_I8, (lrc_shape){2, {2, 32}});
    add(&s, "w" LRC_Q8_SCALE_SUFFIX, LRC_F16, (lrc_shape){2, {2, 1}});
    for (int i = 0; i < 2; i++) ((uint16_t *)s.items[1]->data)[i] = lrc_f32_to_f16(0.01f);
    if (!rc) rc = lrc_safetensors_save(fuzz_path("made_q8.safetensors"), &s, &err);
    lrc_tensor_set_clear(&s);
    if (!rc) rc = lrc_safetensors_save(fuzz_path("made_empty.safetensors"), &s, &err);
    if (rc) {
        fprintf(stderr, "fuzz_safetensors: %s\n", err.msg);
        exit(2);
    }
    const char *names[] = {"made_all.safetensors", "made_q8.safetensors", "made_empty.safetensors"};
    for (int i = 0; i < 3; i++) seeds[i] = lrc_strdup(fuzz_path(names[i])), fuzz_scratch_also(names[i]);
    return 3;
}

int main(int argc, char **argv)
{
    static const char *const counts[] = {"parsed", "refused", "also read from a file", "indexes", "indexes refused", NULL};
    static const char *const dict[] = {"F32", "BF16", "F16", "I32", "I8", "U8", "F64", "I64", "BOOL", "dtype", "shape",
                                       "data_offsets", "__metadata__", "w" LRC_Q8_SCALE_SUFFIX, "weight_map", "metadata",
                                       "0", "1", "2", "4", "7", "8", "-1", "255", "256", "65536", "4294967296",
                                       "1099511627776", "1099511627777", "9007199254740992", "9007199254740993", "1e300",
                                       "1.5", "-0", "null", "true", "[]", "{}", "\"\"", "[0,0]", "[1,2,3,4,5,6,7,8,9]",
                                       "model-00001-of-00007.safetensors", "..", "/", NULL};
    static const fuzz_spec spec = {.name = "safetensors", .seeds = "FILE.safetensors... [-- INDEX.json...]",
                                   .count_names = counts, .dict = dict, .timeout_s = 10, .add_seed = add_seed,
                                   .make_seeds = make_seeds, .fix = fix, .one = LLVMFuzzerTestOneInput};
    fuzz_scratch("safetensors");
    return fuzz_main(argc, argv, &spec);
}
#else
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("safetensors");
    return 0;
}
#endif
