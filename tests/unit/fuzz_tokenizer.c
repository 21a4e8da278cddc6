/* fuzz_tokenizer.c — the tokenizer.json loader and the encoder and decoder
 * under mutated input. LLVMFuzzerTestOneInput is libFuzzer's entry (build
 * with clang -fsanitize=fuzzer to run it open-ended); main() is a fixed,
 * seeded mutation loop for CI, which the sanitizer build runs: every input
 * must end in a tokenizer or a one-line error, never a crash or a report.
 *
 *   fuzz_tokenizer ITERATIONS TOKENIZER.json... -- TEXT...
 *
 * The first byte of an input picks what it is: even, a tokenizer.json;
 * odd, text for the first seed tokenizer (then its ids, decoded). */
#include "runtime/lrc_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lrc_tokenizer *seed_tok[8];
static int n_seed_tok;
static long n_loaded, n_refused, n_texts; /* what the inputs reached, printed at the end */

static void check_error(const lrc_err *err)
{
    /* one line, not empty */
    if (!err->msg[0] || strchr(err->msg, '\n')) {
        fprintf(stderr, "fuzz: a message that is not one line: \"%s\"\n", err->msg);
        abort();
    }
}

static void run_text(const lrc_tokenizer *t, const uint8_t *d, size_t n)
{
    lrc_ids ids = {0};
    lrc_err err;
    if (lrc_tokenizer_encode(t, (const char *)d, n, true, &ids, &err)) check_error(&err);
    else {
        char *text;
        size_t len;
        for (int64_t i = 0; i < ids.n; i++)
            if (ids.ids[i] < 0 || ids.ids[i] >= lrc_tokenizer_n_vocab(t)) {
                fprintf(stderr, "fuzz: id %d outside the vocabulary\n", ids.ids[i]);
                abort();
            }
        if (lrc_tokenizer_decode(t, ids.ids, ids.n, false, &text, &len, &err)) check_error(&err);
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
        if (lrc_tokenizer_parse((const char *)d + 1, n - 1, "fuzz.json", &t, &err)) check_error(&err), n_refused++;
        else {
            n_loaded++;
            run_text(t, (const uint8_t *)"Hello, world! 12345 \xe4\xb8\xad\xe6\x96\x87 <s>", 30);
            lrc_tokenizer_free(t);
        }
    } else if (n_seed_tok) {
        n_texts++;
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
/* ---- the seeded loop ------------------------------------------------------ */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* One mutation of buf[0..*n) (capacity cap): flip, set, insert, delete,
 * duplicate a span, or truncate; a few bytes that JSON and UTF-8 care about. */
static void mutate(uint8_t *buf, size_t *n, size_t cap)
{
    static const uint8_t special[] = {'"', '\\', '{', '}', '[', ']', ',', ':', '0', '-', 0xC3, 0xE4, 0xF0, 0x80, 0xBF, 0xFF, ' ', '\n', 0};
    size_t at = *n ? next() % *n : 0;
    switch (next() % 7) {
    case 0: if (*n) buf[at] ^= (uint8_t)(1u << (next() % 8)); break;
    case 1: if (*n) buf[at] = special[next() % sizeof special]; break;
    case 2:
        if (*n < cap) memmove(buf + at + 1, buf + at, *n - at), buf[at] = special[next() % sizeof special], (*n)++;
        break;
    case 3: {
        size_t k = *n - at < 8 ? *n - at : 1 + next() % 8;
        memmove(buf + at, buf + at + k, *n - at - k), *n -= k;
        break;
    }
    case 4: {
        size_t k = 1 + next() % 16;
        if (*n + k <= cap && at + k <= *n) memmove(buf + at + k, buf + at, *n - at), *n += k; /* a span twice */
        break;
    }
    case 5: *n = at; break;
    default:
        if (*n) buf[at] = (uint8_t)next();
        break;
    }
}

int main(int argc, char **argv)
{
    if (argc < 4) return fprintf(stderr, "usage: fuzz_tokenizer ITERATIONS TOKENIZER.json... -- TEXT...\n"), 2;
    long iters = atol(argv[1]);
    uint8_t *seeds[32];
    size_t seed_n[32];
    bool is_text[32];
    int ns = 0;
    bool text = false;
    for (int i = 2; i < argc && ns < 32; i++) {
        if (!strcmp(argv[i], "--")) {
            text = true;
            continue;
        }
        lrc_err err;
        if (!(seeds[ns] = (uint8_t *)lrc_read_file(argv[i], &seed_n[ns], &err))) return fprintf(stderr, "fuzz: %s\n", err.msg), 2;
        if (!text && n_seed_tok < 8 && lrc_tokenizer_parse((char *)seeds[ns], seed_n[ns], argv[i], &seed_tok[n_seed_tok], &err))
            return fprintf(stderr, "fuzz: a seed does not load: %s\n", err.msg), 2;
        if (!text) n_seed_tok++;
        is_text[ns++] = text;
    }
    long crashes_checked = 0;
    for (long it = 0; it < iters; it++) {
        int s = (int)(next() % (uint64_t)ns);
        size_t cap = seed_n[s] + 4096, n = seed_n[s] + 1;
        uint8_t *buf = malloc(cap);
        memcpy(buf + 1, seeds[s], seed_n[s]);
        /* text: a slice of a seed text, for any seed tokenizer */
        if (is_text[s]) {
            size_t a = seed_n[s] ? next() % seed_n[s] : 0, len = 1 + next() % 512;
            if (a + len > seed_n[s]) len = seed_n[s] - a;
            memmove(buf + 1, seeds[s] + a, len), n = len + 1;
        }
        buf[0] = (uint8_t)(is_text[s] ? 1 + 2 * (next() % 8) : 0);
        int rounds = 1 + (int)(next() % 8);
        for (int r = 0; r < rounds; r++) {
            size_t body = n - 1;
            mutate(buf + 1, &body, cap - 1);
            n = body + 1;
        }
        LLVMFuzzerTestOneInput(buf, n);
        free(buf);
        crashes_checked++;
    }
    for (int i = 0; i < ns; i++) free(seeds[i]);
    for (int i = 0; i < n_seed_tok; i++) lrc_tokenizer_free(seed_tok[i]);
    printf("fuzz: %ld inputs (%d seeds): %ld tokenizer.json loaded, %ld refused, %ld texts; no crash and every error "
           "one line\n", crashes_checked, ns, n_loaded, n_refused, n_texts);
    return 0;
}
#endif
