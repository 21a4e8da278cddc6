/* fuzz_checkpoint.c — lrc train's checkpoint reader (runtime/checkpoint.c,
 * lrc_checkpoint_load, through runtime/safetensors.c) under mutated input
 * (tests/unit/fuzz.h):
 *
 *   fuzz_checkpoint ITERATIONS [CHECKPOINT.safetensors...]
 *
 * The inputs are checkpoints of a small graph of three parameters; the
 * seeds are checkpoints this fuzzer writes through the checkpoint API: the
 * current version, version 1 (no metadata), and one with its parameters
 * stored BF16. A checkpoint that loads holds the graph's parameters and
 * their moments (F32, the parameters' shapes), saves, and loads again as
 * the same state. */
#include "fuzz.h"

enum { LOADED, REFUSED };
static lrc_graph *graph;

/* A loaded state as lrc_checkpoint_load promises it. */
static void check_state(const lrc_train_state *s)
{
    bool ok = s->params.n == 3 && s->m && s->v && s->step >= 0;
    for (int i = 0, k = 0; ok && i < graph->n_nodes; i++) {
        const lrc_node *p = &graph->nodes[i];
        if (p->op != LRC_OP_PARAM) continue;
        const lrc_tensor *t = s->params.items[k], *m = s->m[k], *v = s->v[k];
        ok = t && m && v && !strcmp(t->name, p->name) && t->dtype == LRC_F32 && m->dtype == LRC_F32 && v->dtype == LRC_F32 &&
             lrc_shape_eq(&t->shape, &p->shape) && lrc_shape_eq(&m->shape, &p->shape) && lrc_shape_eq(&v->shape, &p->shape);
        k++;
    }
    if (!ok) {
        fprintf(stderr, "fuzz: a checkpoint loaded without the graph's parameters and moments\n");
        abort();
    }
}

/* Saved and loaded again: the same step, random state and tensors. */
static void check_round_trip(lrc_train_state *s)
{
    lrc_err err;
    lrc_train_state back;
    const char *path = fuzz_path("back.safetensors");
    fuzz_scratch_also("back.safetensors");
    if (lrc_checkpoint_save(path, s, &err) || lrc_checkpoint_load(path, graph, &back, &err)) {
        fprintf(stderr, "fuzz: a loaded checkpoint does not save and load again: %s\n", err.msg);
        abort();
    }
    bool same = back.step == s->step && !memcmp(back.rng.s, s->rng.s, sizeof s->rng.s) && back.ck.n == s->ck.n;
    for (int i = 0; same && i < s->ck.n; i++) {
        const lrc_tensor *a = s->ck.items[i], *b = lrc_tensor_set_find(&back.ck, a->name);
        same = b && a->dtype == b->dtype && lrc_shape_eq(&a->shape, &b->shape) && !memcmp(a->data, b->data, a->nbytes);
    }
    lrc_train_state_free(&back);
    if (!same) {
        fprintf(stderr, "fuzz: a loaded checkpoint saved reads back differently\n");
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    lrc_err err;
    lrc_train_state s;
    fuzz_write("ck.safetensors", d, n);
    if (lrc_checkpoint_load(fuzz_path("ck.safetensors"), graph, &s, &err)) {
        fuzz_check_error(&err);
        FUZZ_COUNT(REFUSED);
    } else {
        FUZZ_COUNT(LOADED);
        check_state(&s);
        check_round_trip(&s);
    }
    lrc_train_state_free(&s); /* after a failure too, as lrc_checkpoint_load asks */
    return 0;
}

/* Parameters named and shaped as a model's: a matrix, a vector, a scalar. */
static void make_graph(void)
{
    lrc_err err;
    graph = lrc_graph_new();
    if (lrc_graph_add_param(graph, "model.embed_tokens.weight", &(lrc_shape){2, {5, 4}}, (lrc_init){LRC_INIT_NORMAL, 0.02}, "embedding", NULL, &err) < 0 ||
        lrc_graph_add_param(graph, "model.norm.weight", &(lrc_shape){1, {4}}, (lrc_init){LRC_INIT_ONES, 0}, "norm", NULL, &err) < 0 ||
        lrc_graph_add_param(graph, "model.layerrope.alpha", &(lrc_shape){0, {0}}, (lrc_init){LRC_INIT_CONST, 0.5}, "layerrope", NULL, &err) < 0) {
        fprintf(stderr, "fuzz_checkpoint: %s\n", err.msg);
        exit(2);
    }
}

#ifndef LRC_LIBFUZZER
static void die_unless(int rc, const lrc_err *err)
{
    if (rc) {
        fprintf(stderr, "fuzz_checkpoint: %s\n", err->msg);
        exit(2);
    }
}

/* Checkpoints of the graph, as lrc train writes them: its seeds. */
static int make_seeds(char **seeds, int cap)
{
    if (cap < 3) return 0;
    lrc_err err;
    lrc_train_state s;
    die_unless(lrc_train_state_new(&s, graph, 7, NULL, &err), &err);
    s.step = 3;
    lrc_rng_next(&s.rng);
    for (int i = 0; i < s.params.n; i++) /* moments that are not zeros */
        for (int64_t k = 0; k < lrc_shape_numel(&s.params.items[i]->shape); k++)
            ((float *)s.m[i]->data)[k] = 0.25f * (float)k, ((float *)s.v[i]->data)[k] = 0.0625f;
    die_unless(lrc_checkpoint_save(fuzz_path("made_v2.safetensors"), &s, &err), &err);
    /* version 1: the same tensors without the metadata */
    free(s.ck.metadata_json);
    s.ck.metadata_json = NULL;
    die_unless(lrc_safetensors_save(fuzz_path("made_v1.safetensors"), &s.ck, &err), &err);
    /* the parameters in BF16 (the loader widens them) */
    lrc_tensor_set bf;
    lrc_tensor_set_init(&bf);
    bf.metadata_json = lrc_strdup("{\"format\":\"lrc-checkpoint\",\"version\":\"2\"}");
    for (int i = 0; i < s.ck.n; i++) {
        const lrc_tensor *t = s.ck.items[i];
        bool param = strncmp(t->name, "adam.", 5) && strncmp(t->name, "train.", 6);
        lrc_tensor *c = lrc_tensor_new(t->name, param ? LRC_BF16 : t->dtype, &t->shape, &err);
        die_unless(!c, &err);
        if (!param) memcpy(c->data, t->data, t->nbytes);
        for (int64_t k = 0; param && k < lrc_shape_numel(&t->shape); k++) ((uint16_t *)c->data)[k] = lrc_f32_to_bf16(((float *)t->data)[k]);
        die_unless(lrc_tensor_set_add(&bf, c, &err), &err);
    }
    die_unless(lrc_safetensors_save(fuzz_path("made_bf16.safetensors"), &bf, &err), &err);
    lrc_tensor_set_clear(&bf);
    lrc_train_state_free(&s);
    const char *names[] = {"made_v2.safetensors", "made_v1.safetensors", "made_bf16.safetensors"};
    for (int i = 0; i < 3; i++) seeds[i] = lrc_strdup(fuzz_path(names[i])), fuzz_scratch_also(names[i]);
    return 3;
}

/* Each seed loads. */
static int add_seed(const char *path, const uint8_t *d, size_t n, int group, lrc_err *err)
{
    (void)d, (void)n, (void)group;
    lrc_train_state s;
    int rc = lrc_checkpoint_load(path, graph, &s, err);
    lrc_train_state_free(&s);
    return rc;
}

/* safetensors' header length, repaired after the mutations */
static void fix(uint8_t *buf, size_t *n, size_t cap)
{
    fuzz_fix_safetensors_length(buf, n, cap);
}

static void finish(void)
{
    lrc_graph_free(graph);
    graph = NULL;
}

int main(int argc, char **argv)
{
    static const char *const counts[] = {"loaded", "refused", NULL};
    static const char *const dict[] = {"F32", "BF16", "F16", "I32", "I8", "U8", "dtype", "shape", "data_offsets", "__metadata__",
                                       "format", "version", "lrc-checkpoint", "train.step", "train.rng", "adam.m/", "adam.v/",
                                       "model.norm.weight", "model.embed_tokens.weight", "model.layerrope.alpha", "\"1\"",
                                       "\"2\"", "\"3\"", "\"0\"", "\"-1\"", "\"\"", "0", "1", "2", "4", "8", "32", "-1",
                                       "65536", "2147483648", "4294967296", "9007199254740992", "1e300", "null", "[]", "{}",
                                       NULL};
    static const fuzz_spec spec = {.name = "checkpoint", .seeds = "[CHECKPOINT.safetensors...]", .count_names = counts,
                                   .dict = dict, .timeout_s = 10, .make_seeds = make_seeds, .add_seed = add_seed,
                                   .fix = fix, .one = LLVMFuzzerTestOneInput, .finish = finish};
    fuzz_scratch("checkpoint");
    make_graph();
    return fuzz_main(argc, argv, &spec);
}
#else
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("checkpoint");
    make_graph();
    return 0;
}
#endif
