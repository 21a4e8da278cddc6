/* cmd_generate.c — lrc generate: text from a model, one byte a token (or
 * token ids in and out with --prompt-ids),
 * decoding with a KV cache (each step runs the new token only), sampling
 * with temperature and top-k from an explicit seed. */
#include "cli_session.h"
#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* Text through a tokenizer.json: the prompt's ids, and the continuation
 * printed as it comes, as the decoders give the text of all ids so far
 * (a trailing U+FFFD waits: the next token may complete its bytes). */
typedef struct {
    lrc_tokenizer *tok;
    lrc_ids ids;       /* the prompt's, then the new ones */
    size_t printed;    /* bytes of the decoded text out, the prompt's first */
} gen_text;

static int gen_text_open(const cli_args *a, gen_text *g, lrc_err *err)
{
    char path[4200];
    struct stat st;
    const char *t = a->tokenizer;
    if (!t && lrc_package_is(a->m.model)) snprintf(path, sizeof path, "%s/tokenizer.json", a->m.model), t = path;
    else if (!t && lrc_hf_is_dir(a->m.model)) snprintf(path, sizeof path, "%s/tokenizer.json", a->m.model), t = path;
    if (!t || (!a->tokenizer && stat(t, &st) != 0)) return LRC_OK; /* bytes */
    return lrc_tokenizer_load(t, &g->tok, err);
}

static int64_t gen_text_prompt(gen_text *g, const char *prompt, int32_t **ids, lrc_err *err)
{
    if (lrc_tokenizer_encode(g->tok, prompt, strlen(prompt), true, &g->ids, err)) return lrc_err_prefix(err, "--prompt"), -1;
    char *text;
    size_t len;
    if (lrc_tokenizer_decode(g->tok, g->ids.ids, g->ids.n, false, &text, &len, err)) return -1;
    g->printed = len;
    free(text);
    fputs(prompt, stdout);
    *ids = lrc_xmalloc((size_t)(g->ids.n + 1) * sizeof **ids);
    memcpy(*ids, g->ids.ids, (size_t)g->ids.n * sizeof **ids);
    return g->ids.n;
}

static int gen_text_put(gen_text *g, int id, bool last, lrc_err *err)
{
    if (id >= 0) {
        if (g->ids.n == g->ids.cap) {
            g->ids.cap = g->ids.cap * 2 + 16;
            g->ids.ids = realloc(g->ids.ids, (size_t)g->ids.cap * sizeof *g->ids.ids);
            if (!g->ids.ids) return lrc_err_set(err, "out of memory");
        }
        g->ids.ids[g->ids.n++] = id;
    }
    char *text;
    size_t len;
    if (lrc_tokenizer_decode(g->tok, g->ids.ids, g->ids.n, false, &text, &len, err)) return LRC_EUSER;
    size_t end = len;
    while (!last && end >= g->printed + 3 && !memcmp(text + end - 3, "\xEF\xBF\xBD", 3)) end -= 3;
    if (end > g->printed) fwrite(text + g->printed, 1, end - g->printed, stdout), g->printed = end;
    free(text);
    return LRC_OK;
}

static void gen_text_close(gen_text *g)
{
    lrc_tokenizer_free(g->tok);
    lrc_ids_free(&g->ids);
}

/* Picks among ids [0, n): the byte tokenizer's 0..255 (larger ids have no
 * text, so they are never sampled), or every id with --prompt-ids. */
static int sample(const float *logits, int64_t n, double temperature, int64_t top_k, lrc_rng *rng)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    if (temperature <= 0) return (int)best;
    /* the top-k ids (all of them when k is 0) */
    int64_t k = top_k > 0 && top_k < n ? top_k : n;
    int *ids = lrc_xmalloc((size_t)k * sizeof(int));
    double *p = lrc_xmalloc((size_t)k * sizeof(double)), sum = 0;
    if (k == n) { /* every id: in id order, the largest first (the softmax's reference) */
        for (int64_t i = 0; i < n; i++) ids[i] = (int)i;
        ids[0] = (int)best, ids[best] = 0;
    } else { /* a partial selection sort, O(k n): k is small */
        bool *taken = calloc((size_t)n, 1);
        for (int64_t j = 0; j < k; j++) {
            int64_t m = -1;
            for (int64_t i = 0; i < n; i++)
                if (!taken[i] && (m < 0 || logits[i] > logits[m])) m = i;
            taken[m] = true;
            ids[j] = (int)m;
        }
        free(taken);
    }
    double mx = logits[ids[0]];
    for (int64_t j = 0; j < k; j++) sum += (p[j] = exp(((double)logits[ids[j]] - mx) / temperature));
    double u = lrc_rng_uniform(rng) * sum;
    int pick = ids[k - 1];
    for (int64_t j = 0; j < k; j++) {
        if (u < p[j]) {
            pick = ids[j];
            break;
        }
        u -= p[j];
    }
    free(ids);
    free(p);
    return pick;
}

/* --prompt-ids "3 17 5" (spaces or commas) into ids; the count, or -1 with
 * err set. */
static int64_t parse_ids(const char *text, int32_t **ids, lrc_err *err)
{
    int64_t n = 0, cap = 16;
    *ids = lrc_xmalloc((size_t)cap * sizeof(int32_t));
    for (const char *p = text; *p;) {
        if (*p == ' ' || *p == ',') {
            p++;
            continue;
        }
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || v > INT32_MAX || (*end && *end != ' ' && *end != ',')) {
            lrc_err_set(err, "--prompt-ids: '%s' is not a list of token ids (non-negative integers)", text);
            return -1;
        }
        if (n == cap) *ids = lrc_xrealloc(*ids, (size_t)(cap *= 2) * sizeof(int32_t));
        (*ids)[n++] = (int32_t)v;
        p = end;
    }
    return n;
}

/* A decoder package opened through the embedding API: its context and
 * vocabulary (a whole-sequence package is refused by lrc_session_reset). */
static int open_decoder_package(const cli_args *a, lrc_session **s, int64_t *ctx, int64_t *vocab, lrc_err *err)
{
    lrc_session_info info;
    if (cli_session_start(a, s, err)) return LRC_EUSER;
    if (lrc_session_reset(*s) || lrc_session_describe(*s, &info)) return cli_session_error(*s, err);
    *ctx = info.context;
    *vocab = info.vocab;
    return LRC_OK;
}

/* One decoding step, on a package's session or on a model compiled now. */
typedef struct decoder {
    lrc_session *s;
    lrc_exec *x;
    lrc_tensor_set in, outs; /* the model's: tokens [1, 1] and pos [1]; its logits */
} decoder;

static int decoder_inputs(decoder *d, lrc_err *err)
{
    lrc_shape one = {2, {1, 1}}, p1 = {1, {1}};
    lrc_tensor *tok = lrc_tensor_new("tokens", LRC_I32, &one, err), *pos = tok ? lrc_tensor_new("pos", LRC_I32, &p1, err) : NULL;
    if (tok && lrc_tensor_set_add(&d->in, tok, err)) return LRC_EUSER;
    return pos ? lrc_tensor_set_add(&d->in, pos, err) : LRC_EUSER;
}

static int decoder_step(decoder *d, int token, int64_t i, const float **logits, int64_t *V, lrc_err *err)
{
    if (d->s) return lrc_session_step(d->s, token, logits, V) ? cli_session_error(d->s, err) : LRC_OK;
    ((int32_t *)d->in.items[0]->data)[0] = token;
    ((int32_t *)d->in.items[1]->data)[0] = (int32_t)i;
    if (lrc_exec_run_plan(d->x, &d->in, &d->outs, err)) return LRC_EUSER;
    *logits = d->outs.items[0]->data;
    *V = lrc_shape_numel(&d->outs.items[0]->shape);
    return LRC_OK;
}

int cmd_generate(int argc, char **argv)
{
    static const struct option opts[] = {MODEL_OPTS,
                                         {"weights", required_argument, 0, OPT_WEIGHTS},
                                         {"prompt", required_argument, 0, OPT_PROMPT},
                                         {"prompt-ids", required_argument, 0, OPT_PROMPT_IDS},
                                         {"tokens", required_argument, 0, OPT_NEW},
                                         {"temperature", required_argument, 0, OPT_TEMPERATURE},
                                         {"top-k", required_argument, 0, OPT_TOPK},
                                         {"seed", required_argument, 0, OPT_SEED},
                                         {"threads", required_argument, 0, OPT_THREADS},
                                         {"ctx", required_argument, 0, OPT_CTX},
                                         {"target", required_argument, 0, OPT_TARGET},
                                         {"tokenizer", required_argument, 0, OPT_TOKENIZER},
                                         {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc generate MODEL|PKG [--preset P] [--set KEY=VALUE]... [--weights W] --prompt TEXT|--prompt-ids IDS\n"
        "                    [-n N | --tokens N] [--temperature T] [--top-k K] [--seed S] [--ctx C]\n"
        "                    [--threads N] [--target cpu] [--tokenizer T]\n"
        "\n"
        "Continues TEXT by N tokens (default 100; one token per byte, the model's vocab\n"
        "must be >= 256, unless a tokenizer.json is given or the Hugging Face\n"
        "directory or package holds one), decoding with a KV cache on the cpu target (or on GPU 0 for\n"
        "a package compiled with --target cuda --ctx C), and prints the text as it\n"
        "comes, then tokens/s on stderr.\n"
        "\n" MODEL_HELP
        "  --weights FILE    parameters (not needed for a package that holds them)\n"
        "  --prompt TEXT     the text to continue, one token per byte or as the\n"
        "                    tokenizer encodes it (with its BOS)\n"
        "  --tokenizer T     a tokenizer.json, or a directory with one (a run of\n"
        "                    lrc train --tokenizer keeps a copy)\n"
        "  --prompt-ids IDS  token ids to continue (\"3 17 5\" or \"3,17,5\"): prints the\n"
        "                    new ids, one line, and picks among the whole vocabulary\n"
        "  -n N, --tokens N  tokens to generate (default 100)\n"
        "  --temperature T   0 picks the most likely token (default 0.8)\n"
        "  --top-k K         sample among the K most likely tokens (default 40; 0: all)\n"
        "  --seed S          random seed for sampling (default 0)\n"
        "  --ctx C           positions in the KV cache (default: prompt + N; a compiled\n"
        "                    package has its own)\n"
        "  --threads N       cpu: threads (default: all cores)\n"
        "  --target cpu      the target (default; ref is taken as cpu): a model is\n"
        "                    compiled for this CPU, a cuda package runs on GPU 0\n";
    cli_args a;
    int rc = cli_parse_args("generate", argc, argv, opts, help, true, &a);
    if (rc >= 0) goto out;
    if ((rc = cli_check_run_args("generate", &a, "--prompt or --prompt-ids", a.prompt || a.prompt_ids)) >= 0) goto out;
    if (a.prompt && a.prompt_ids) {
        rc = cli_usage_error("generate", "give --prompt or --prompt-ids, not both");
        goto out;
    }
    bool pkg = lrc_package_is(a.m.model), by_id = a.prompt_ids != NULL;
    lrc_err err;
    int32_t *prompt = NULL;
    gen_text gt = {0};
    int64_t P = by_id ? parse_ids(a.prompt_ids, &prompt, &err) : (int64_t)strlen(a.prompt);
    if (!by_id && (rc = gen_text_open(&a, &gt, &err)) == LRC_OK && gt.tok) P = gen_text_prompt(&gt, a.prompt, &prompt, &err);
    if (rc > 0) P = -1;
    rc = LRC_OK;
    bool text_tok = gt.tok != NULL;
    int64_t N = a.new_tokens >= 0 ? a.new_tokens : 100;
    cli_engine e;
    memset(&e, 0, sizeof e);
    lrc_session *s = NULL; /* a package: through the embedding API */
    int64_t ctx = a.ctx > 0 ? a.ctx : P + N, vocab = 0;
    const char *unit = by_id || text_tok ? "tokens" : "bytes";
    rc = P < 0 ? LRC_EUSER : LRC_OK;
    if (!rc && P < 1) rc = lrc_err_set(&err, "%s: give at least one token to start from", by_id ? "--prompt-ids" : "--prompt");
    if (!rc && pkg) rc = open_decoder_package(&a, &s, &ctx, &vocab, &err);
    if (!rc && P > ctx)
        rc = lrc_err_set(&err, "the prompt (%lld %s) is longer than the context (%lld positions)", (long long)P, unit, (long long)ctx);
    if (!rc && P + N > ctx)
        rc = lrc_err_set(&err, "the prompt (%lld %s) and %lld new tokens need %lld positions; the context holds %lld",
                         (long long)P, unit, (long long)N, (long long)(P + N), (long long)ctx);
    if (!rc && pkg) rc = cli_session_weights(&a, s, &err);
    if (!rc && !pkg && !(rc = cli_engine_open_decoder(&a, 1, ctx, &e, &err))) vocab = e.vocab;
    if (!rc && text_tok && vocab < lrc_tokenizer_n_vocab(gt.tok))
        rc = lrc_err_set(&err, "the tokenizer has %lld tokens, more than the model's vocabulary of %lld",
                         (long long)lrc_tokenizer_n_vocab(gt.tok), (long long)vocab);
    if (!rc && !by_id && !text_tok && vocab && vocab < 256)
        rc = lrc_err_set(&err, "byte tokens need a vocabulary of at least 256, the model has %lld (give --prompt-ids)",
                         (long long)vocab);
    for (int64_t i = 0; !rc && (by_id || text_tok) && i < P; i++)
        if (prompt[i] >= vocab)
            rc = lrc_err_set(&err, "--prompt-ids: id %d (token %lld) is outside the vocabulary of %lld", prompt[i], (long long)i,
                             (long long)vocab);
    decoder d = {.s = s, .x = e.x};
    lrc_tensor_set_init(&d.in);
    lrc_tensor_set_init(&d.outs);
    if (!rc && !pkg) rc = decoder_inputs(&d, &err);
    lrc_rng rng;
    lrc_rng_seed(&rng, (uint64_t)a.seed);
    double t0 = lrc_now_s(), t_prompt = t0;
    int64_t made = 0;
    int next = 0;
    if (!rc && !by_id && !text_tok) fputs(a.prompt, stdout); /* gen_text_prompt printed it */
    /* position i holds the prompt's token i, then the tokens made so far; the
     * logits at the last prompt position and after give the new ones */
    for (int64_t i = 0; !rc && N > 0 && i < P + N - 1; i++) {
        const float *logits;
        int64_t V;
        int tok = i >= P ? next : by_id || text_tok ? prompt[i] : (unsigned char)a.prompt[i];
        if (i == P - 1) t_prompt = lrc_now_s(); /* N steps timed: the prompt's last token in, the first new one out, ... */
        if ((rc = decoder_step(&d, tok, i, &logits, &V, &err))) break;
        if (i < P - 1) continue;
        int64_t pick = text_tok ? lrc_tokenizer_n_vocab(gt.tok) : by_id || V < 256 ? V : 256;
        next = sample(logits, pick < V ? pick : V, a.temperature, a.top_k, &rng);
        if (by_id) printf("%s%d", made ? " " : "", next);
        else if (text_tok) rc = gen_text_put(&gt, next, false, &err);
        else putchar(next);
        fflush(stdout);
        made++;
    }
    if (!rc && text_tok) rc = gen_text_put(&gt, -1, true, &err);
    if (!rc) {
        double t1 = lrc_now_s();
        putchar('\n');
        fprintf(stderr, "generate: %lld new tokens in %.1f ms, %.1f tokens/s (prompt: %lld tokens in %.1f ms, context %lld)\n",
                (long long)made, 1e3 * (t1 - t_prompt), made / (t1 - t_prompt > 0 ? t1 - t_prompt : 1e-9), (long long)P,
                1e3 * (t_prompt - t0), (long long)ctx);
    }
    free(prompt);
    gen_text_close(&gt);
    cli_engine_close(&e);
    lrc_session_close(s);
    lrc_tensor_set_clear(&d.in);
    lrc_tensor_set_clear(&d.outs);
    rc = rc ? cli_user_error(&err) : 0;
out:
    cli_model_opts_free(&a.m);
    return rc;
}
