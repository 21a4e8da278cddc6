/* fuzz_tokenizer.c — the tokenizer.json loader and the encoder and decoder
 * under mutated input. LLVMFuzzerTestOneInput is libFuzzer's entry (build
 * with clang -fsanitize=fuzzer -DLRC_LIBFUZZER to run it open-ended);
 * main() runs tests/unit/fuzz.h's fixed, seeded mutation loop for CI, which
 * the sanitizer build runs: every input must end in a tokenizer or a
 * one-line error, never a crash, a report or a hang.
 *
 *   fuzz_tokenizer ITERATIONS TOKENIZER.json... -- TEXT...
 *
 * The first byte of an input picks what it is: even, a tokenizer.json;
 * odd, text for the first seed tokenizer (then its ids, decoded). */
#include "fuzz.h"

static lrc_tokenizer *seed_tok[8];
static int n_seed_tok;
enum { LOADED, REFUSED, TEXTS }; /* what the inputs reached, printed at the end */

static void run_text(const lrc_tokenizer *t, const uint8_t *d, size_t n)
{
    lrc_ids ids = {0};
    lrc_err err;
    if (lrc_tokenizer_encode(t, (const char *)d, n, true, &ids, &err)) fuzz_check_error(&err);
    else {
        char *text;
        size_t len;
        for (int64_t i = 0; i < ids.n; i++)
            if (ids.ids[i] < 0 || ids.ids[i] >= lrc_tokenizer_n_vocab(t)) {
                fprintf(stderr, "fuzz: id %d outside the vocabulary\n", ids.ids[i]);
                abort();
            }
        if (lrc_tokenizer_decode(t, ids.ids, ids.n, false, &text, &len, &err)) fuzz_check_error(&err);
        else free(text);
    }
    /* the bytes as ids too: decoding takes any id */
    int32_t *raw = malloc(n / 2 * sizeof *raw + sizeof *raw);
    for (size_t i = 0; i + 1 < n; i += 2) raw[i / 2] = (int32_t)(d[i] | d[i + 1] << 8) - 64;
    char *text;
    size_t len;
    if (!lrc_tokenizer_decode(t, raw, (int64_t)(n / 2), n % 2, &text, &len, &err)) free(text);
    free(raw);
    lrc_ids_free(&ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    if (!n) return 0;
    lrc_err err;
    if (d[0] % 2 == 0) {
        lrc_tokenizer *t;
        if (lrc_tokenizer_parse((const char *)d + 1, n - 1, "fuzz.json", &t, &err)) fuzz_check_error(&err), FUZZ_COUNT(REFUSED);
        else {
            FUZZ_COUNT(LOADED);
            run_text(t, (const uint8_t *)"Hello, world! 12345 \xe4\xb8\xad\xe6\x96\x87 <s>", 30);
            lrc_tokenizer_free(t);
        }
    } else if (n_seed_tok) {
        FUZZ_COUNT(TEXTS);
        run_text(seed_tok[(d[0] / 2) % n_seed_tok], d + 1, n - 1);
    }
    return 0;
}

#ifdef LRC_LIBFUZZER
/* libFuzzer: the seed tokenizers for text inputs from LRC_FUZZ_TOKENIZERS
 * (paths separated by ':'). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *env = getenv("LRC_FUZZ_TOKENIZERS");
    char *list = env ? strdup(env) : NULL;
    lrc_err err;
    for (char *p = list ? strtok(list, ":") : NULL; p && n_seed_tok < 8; p = strtok(NULL, ":"))
        if (!lrc_tokenizer_load(p, &seed_tok[n_seed_tok], &err)) n_seed_tok++;
    free(list);
    return 0;
}
#else
/* Each tokenizer.json (group 0) loads, and the first 8 are the tokenizers
 * that text inputs (group 1, after "--") run through. */
static int add_seed(const char *path, const uint8_t *d, size_t n, int group, lrc_err *err)
{
    if (group || n_seed_tok == 8) return LRC_OK;
    int rc = lrc_tokenizer_parse((const char *)d, n, path, &seed_tok[n_seed_tok], err);
    if (!rc) n_seed_tok++;
    return rc;
}

/* A tokenizer.json after an even byte; a slice of a seed text after an odd
 * one, which picks the seed tokenizer. */
static size_t start(uint8_t *buf, size_t cap, const uint8_t *seed, size_t n, int group)
{
    (void)cap;
    if (!group) {
        buf[0] = 0;
        memcpy(buf + 1, seed, n);
        return n + 1;
    }
    size_t a = n ? fuzz_next() % n : 0, len = 1 + fuzz_next() % 512;
    if (a + len > n) len = n - a;
    memcpy(buf + 1, seed + a, len);
    buf[0] = (uint8_t)(1 + 2 * (fuzz_next() % 8));
    return len + 1;
}

static void finish(void)
{
    for (int i = 0; i < n_seed_tok; i++) lrc_tokenizer_free(seed_tok[i]);
    n_seed_tok = 0;
}

int main(int argc, char **argv)
{
    static const char *const counts[] = {"tokenizer.json loaded", "refused", "texts", NULL};
    static const fuzz_spec spec = {.name = "tokenizer", .seeds = "TOKENIZER.json... -- TEXT...", .count_names = counts,
                                   .timeout_s = 10, .prefix = 1, .add_seed = add_seed, .start = start,
                                   .one = LLVMFuzzerTestOneInput, .finish = finish};
    return fuzz_main(argc, argv, &spec);
}
#endif
