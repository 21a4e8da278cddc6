/* cmd_generate.c — lrc generate: text from a model, one byte a token,
 * decoding with a KV cache (each step runs the new token only), sampling
 * with temperature and top-k from an explicit seed. */
#include "engine.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The byte tokenizer: ids 0..255 are bytes; larger ids have no text, so
 * they are never sampled. */
static int sample(const float *logits, int64_t V, double temperature, int64_t top_k, lrc_rng *rng)
{
    int64_t n = V < 256 ? V : 256, best = 0;
    for (int64_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    if (temperature <= 0) return (int)best;
    /* the top-k ids (all of them when k is 0), by a partial selection sort */
    int64_t k = top_k > 0 && top_k < n ? top_k : n;
    int ids[256];
    bool taken[256] = {0};
    for (int64_t j = 0; j < k; j++) {
        int64_t m = -1;
        for (int64_t i = 0; i < n; i++)
            if (!taken[i] && (m < 0 || logits[i] > logits[m])) m = i;
        taken[m] = true;
        ids[j] = (int)m;
    }
    double p[256], sum = 0, mx = logits[ids[0]];
    for (int64_t j = 0; j < k; j++) sum += (p[j] = exp(((double)logits[ids[j]] - mx) / temperature));
    double u = lrc_rng_uniform(rng) * sum;
    for (int64_t j = 0; j < k; j++) {
        if (u < p[j]) return ids[j];
        u -= p[j];
    }
    return ids[k - 1];
}

int cmd_generate(int argc, char **argv)
{
    static const struct option opts[] = {MODEL_OPTS,
                                         {"weights", required_argument, 0, OPT_WEIGHTS},
                                         {"prompt", required_argument, 0, OPT_PROMPT},
                                         {"tokens", required_argument, 0, OPT_NEW},
                                         {"temperature", required_argument, 0, OPT_TEMPERATURE},
                                         {"top-k", required_argument, 0, OPT_TOPK},
                                         {"seed", required_argument, 0, OPT_SEED},
                                         {"threads", required_argument, 0, OPT_THREADS},
                                         {"ctx", required_argument, 0, OPT_CTX},
                                         {"target", required_argument, 0, OPT_TARGET},
                                         {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc generate MODEL|PKG [--preset P] [--set KEY=VALUE]... [--weights W] --prompt TEXT\n"
        "                    [-n N | --tokens N] [--temperature T] [--top-k K] [--seed S] [--ctx C]\n"
        "                    [--threads N] [--target cpu]\n"
        "\n"
        "Continues TEXT by N bytes (default 100; one token per byte, the model's vocab\n"
        "must be >= 256), decoding with a KV cache on the cpu target (or on GPU 0 for\n"
        "a package compiled with --target cuda --ctx C), and prints the text as it\n"
        "comes, then tokens/s on stderr.\n"
        "\n" MODEL_HELP
        "  --weights FILE    parameters (not needed for a package that holds them)\n"
        "  --prompt TEXT     the text to continue, one token per byte\n"
        "  -n N, --tokens N  bytes to generate (default 100)\n"
        "  --temperature T   0 picks the most likely byte (default 0.8)\n"
        "  --top-k K         sample among the K most likely bytes (default 40; 0: all)\n"
        "  --seed S          random seed for sampling (default 0)\n"
        "  --ctx C           positions in the KV cache (default: prompt + N; a compiled\n"
        "                    package has its own)\n"
        "  --threads N       cpu: threads (default: all cores)\n"
        "  --target cpu      the target (default; ref is taken as cpu): a model is\n"
        "                    compiled for this CPU, a cuda package runs on GPU 0\n";
    cli_args a;
    int rc = cli_parse_args("generate", argc, argv, opts, help, true, &a);
    if (rc >= 0) goto out;
    if ((rc = cli_check_run_args("generate", &a, "--prompt", a.prompt != NULL)) >= 0) goto out;
    bool pkg = lrc_package_is(a.m.model);
    int64_t P = (int64_t)strlen(a.prompt), N = a.new_tokens >= 0 ? a.new_tokens : 100;
    lrc_err err;
    cli_engine e;
    memset(&e, 0, sizeof e);
    lrc_tensor_set in, outs;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&outs);
    int64_t ctx = a.ctx > 0 ? a.ctx : P + N;
    char target[16] = "";
    if (pkg) lrc_package_target(a.m.model, target, sizeof target);
    bool cuda = !strcmp(target, "cuda"); /* a decoder package compiled with --target cuda: on GPU 0 */
    cli_cuda_run cu;
    memset(&cu, 0, sizeof cu);
    int64_t vocab = 0;
    rc = LRC_OK;
    if (P < 1) rc = lrc_err_set(&err, "--prompt: give at least one byte to start from");
    if (!rc && pkg) {
        lrc_package probe;
        if (!(rc = lrc_package_load(a.m.model, &probe, &err))) {
            cJSON *meta = cJSON_Parse(probe.meta_json);
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(meta, "ctx");
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(meta, "vocab");
            vocab = cJSON_IsNumber(v) ? (int64_t)v->valuedouble : 0;
            if (!cJSON_IsNumber(c))
                rc = lrc_err_set(&err, "%s was compiled for whole sequences: compile it with --ctx C to generate", a.m.model);
            else ctx = (int64_t)c->valuedouble;
            cJSON_Delete(meta);
            lrc_package_free(&probe);
        }
    }
    if (!rc && P > ctx)
        rc = lrc_err_set(&err, "the prompt (%lld bytes) is longer than the context (%lld positions)", (long long)P, (long long)ctx);
    if (!rc && P + N > ctx)
        rc = lrc_err_set(&err, "the prompt (%lld bytes) and %lld new tokens need %lld positions; the context holds %lld",
                         (long long)P, (long long)N, (long long)(P + N), (long long)ctx);
    if (!rc) rc = cuda ? cli_cuda_open(&a, &cu, &err) : cli_engine_open_decoder(&a, 1, ctx, &e, &err);
    if (!cuda) vocab = e.vocab;
    if (!rc && vocab && vocab < 256)
        rc = lrc_err_set(&err, "byte tokens need a vocabulary of at least 256, the model has %lld", (long long)vocab);
    lrc_shape one = {2, {1, 1}}, p1 = {1, {1}};
    lrc_tensor *tok = rc ? NULL : lrc_tensor_new("tokens", LRC_I32, &one, &err);
    lrc_tensor *pos = rc ? NULL : lrc_tensor_new("pos", LRC_I32, &p1, &err);
    if (tok && pos) {
        lrc_tensor_set_add(&in, tok, &err);
        lrc_tensor_set_add(&in, pos, &err);
    }
    lrc_rng rng;
    lrc_rng_seed(&rng, (uint64_t)a.seed);
    double t0 = lrc_now_s(), t_prompt = t0;
    int64_t made = 0;
    int next = 0;
    if (!rc) fputs(a.prompt, stdout);
    /* position i holds the prompt's byte i, then the bytes made so far; the
     * logits at the last prompt position and after give the new bytes */
    for (int64_t i = 0; !rc && N > 0 && i < P + N - 1; i++) {
        ((int32_t *)tok->data)[0] = i < P ? (unsigned char)a.prompt[i] : next;
        ((int32_t *)pos->data)[0] = (int32_t)i;
        if ((rc = cuda ? lrc_cuda_exec_run(cu.x, &in, &outs, &err) : lrc_exec_run_plan(e.x, &in, &outs, &err))) break;
        if (i < P - 1) continue;
        if (i == P - 1) t_prompt = lrc_now_s();
        const lrc_tensor *lg = outs.items[0];
        next = sample(lg->data, lrc_shape_numel(&lg->shape), a.temperature, a.top_k, &rng);
        putchar(next);
        fflush(stdout);
        made++;
    }
    if (!rc) {
        double t1 = lrc_now_s();
        putchar('\n');
        fprintf(stderr, "generate: %lld new tokens in %.1f ms, %.1f tokens/s (prompt: %lld tokens in %.1f ms, context %lld)\n",
                (long long)made, 1e3 * (t1 - t_prompt), made / (t1 - t_prompt > 0 ? t1 - t_prompt : 1e-9), (long long)P,
                1e3 * (t_prompt - t0), (long long)ctx);
    }
    cli_engine_close(&e);
    cli_cuda_close(&cu);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&outs);
    rc = rc ? cli_user_error(&err) : 0;
out:
    cli_model_opts_free(&a.m);
    return rc;
}
