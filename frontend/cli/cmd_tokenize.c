/* cmd_tokenize.c — lrc tokenize TOKENIZER: text on stdin to ids, or ids to
 * text with --decode, through runtime/'s tokenizer.json implementation. */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

enum { OPT_DECODE = 2000, OPT_LINES, OPT_NO_SPECIAL, OPT_REPEAT_ }; /* after cli.h's OPT_* */

static char *read_stdin(size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (size_t r; b && (r = fread(b + n, 1, cap - n, stdin)) > 0;) {
        n += r;
        if (n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
        }
    }
    if (b) b[n] = 0; /* n < cap always holds here */
    *len = n;
    return b;
}

static int encode_one(const lrc_tokenizer *t, const char *s, size_t n, bool special, lrc_ids *ids, FILE *out,
                      lrc_err *err)
{
    ids->n = 0;
    if (lrc_tokenizer_encode(t, s, n, special, ids, err)) return 1;
    for (int64_t i = 0; i < ids->n; i++) fprintf(out, i ? " %d" : "%d", ids->ids[i]);
    fputc('\n', out);
    return 0;
}

/* Whitespace-separated ids of s[0..n) into ids; where counts lines. */
static int parse_ids(const lrc_tokenizer *t, const char *s, size_t n, long line, lrc_ids *ids, lrc_err *err)
{
    ids->n = 0;
    for (size_t i = 0; i < n;) {
        if (strchr(" \t\r\n", s[i])) {
            i++;
            continue;
        }
        char *end;
        errno = 0;
        long v = strtol(s + i, &end, 10);
        size_t l = (size_t)(end - (s + i));
        if (!l || errno || (end < s + n && !strchr(" \t\r\n", *end))) {
            size_t w = 0;
            while (i + w < n && w < 20 && !strchr(" \t\r\n", s[i + w])) w++;
            return lrc_err_set(err, "stdin:%ld: '%.*s' is not an id (ids are integers separated by spaces)", line, (int)w,
                               s + i);
        }
        if (v < 0 || v >= lrc_tokenizer_n_vocab(t))
            return lrc_err_set(err, "stdin:%ld: id %ld is outside the vocabulary (0 to %lld)", line, v,
                               (long long)lrc_tokenizer_n_vocab(t) - 1);
        if (ids->n == ids->cap) {
            int64_t c = ids->cap ? ids->cap * 2 : 256;
            int32_t *p = realloc(ids->ids, (size_t)c * sizeof *p);
            if (!p) return lrc_err_set(err, "out of memory");
            ids->ids = p, ids->cap = c;
        }
        ids->ids[ids->n++] = (int32_t)v;
        i += l;
    }
    return 0;
}

static int decode_one(const lrc_tokenizer *t, const char *s, size_t n, long line, bool skip, bool newline,
                      lrc_ids *ids, FILE *out, lrc_err *err)
{
    char *text;
    size_t len;
    if (parse_ids(t, s, n, line, ids, err) || lrc_tokenizer_decode(t, ids->ids, ids->n, skip, &text, &len, err)) return 1;
    fwrite(text, 1, len, out);
    if (newline) fputc('\n', out);
    free(text);
    return 0;
}

/* Every line of in (a last empty one after a final newline is no line),
 * into out: stdout gets it only when all of it is done. */
static int run(const lrc_tokenizer *t, const char *in, size_t n, bool decode, bool lines, bool special, FILE *out,
               lrc_err *err)
{
    lrc_ids ids = {0};
    int rc = 0;
    if (!lines)
        rc = decode ? decode_one(t, in, n, 1, !special, false, &ids, out, err) : encode_one(t, in, n, special, &ids, out, err);
    long line = 1;
    for (size_t a = 0; lines && a < n && !rc; line++) {
        const char *nl = memchr(in + a, '\n', n - a);
        size_t e = nl ? (size_t)(nl - in) : n;
        rc = decode ? decode_one(t, in + a, e - a, line, !special, true, &ids, out, err)
                    : encode_one(t, in + a, e - a, special, &ids, out, err);
        if (rc && !decode) lrc_err_prefix(err, "stdin:%ld (the line from byte %zu)", line, a);
        a = e + 1;
    }
    if (rc && !decode && !lines) lrc_err_prefix(err, "stdin");
    lrc_ids_free(&ids);
    return rc;
}

/* The input encoded `repeat` times (as one text, or each line on its own):
 * the median rate on stderr. */
static int time_encode(const lrc_tokenizer *t, const char *in, size_t n, bool special, bool lines, int64_t repeat,
                       lrc_err *err)
{
    double *s = lrc_xmalloc((size_t)repeat * sizeof *s);
    lrc_ids ids = {0};
    int rc = 0;
    for (int64_t i = 0; i < repeat && !rc; i++) {
        ids.n = 0;
        double t0 = lrc_now_s();
        for (size_t a = 0; lines && a < n && !rc;) { /* the ids of all lines, one after another */
            const char *nl = memchr(in + a, '\n', n - a);
            size_t e = nl ? (size_t)(nl - in) : n;
            rc = lrc_tokenizer_encode(t, in + a, e - a, special, &ids, err);
            a = e + 1;
        }
        if (!lines) rc = lrc_tokenizer_encode(t, in, n, special, &ids, err);
        s[i] = lrc_now_s() - t0;
    }
    if (!rc) {
        double med = lrc_median(s, repeat);
        fprintf(stderr, "encode: %zu bytes into %lld tokens, median %.4f s of %lld: %.2f MB/s\n", n, (long long)ids.n, med,
                (long long)repeat, (double)n / med / 1e6);
    }
    free(s);
    lrc_ids_free(&ids);
    return rc;
}

int cmd_tokenize(int argc, char **argv)
{
    static const struct option opts[] = {{"decode", no_argument, 0, OPT_DECODE},
                                         {"lines", no_argument, 0, OPT_LINES},
                                         {"no-special", no_argument, 0, OPT_NO_SPECIAL},
                                         {"repeat", required_argument, 0, OPT_REPEAT_},
                                         {"help", no_argument, 0, OPT_HELP},
                                         {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc tokenize TOKENIZER [--decode] [--lines] [--no-special] [--repeat N] < INPUT\n"
        "\n"
        "Encodes the UTF-8 text on stdin into token ids (one line, separated by\n"
        "spaces), or with --decode the ids on stdin back into text, with a Hugging\n"
        "Face tokenizer.json (TOKENIZER: the file, or a directory holding it),\n"
        "giving the ids and text of the `tokenizers` library.\n"
        "\n"
        "  --decode      ids to text\n"
        "  --lines       each line of stdin on its own: one line of output per line\n"
        "  --no-special  encoding: without the post-processor's tokens (a BOS), which\n"
        "                the library's encode adds by default; decoding: special\n"
        "                tokens left out (skip_special_tokens)\n"
        "  --repeat N    encoding: N more times (with --lines, line by line), then\n"
        "                the median MB/s on stderr\n"
        "                (bench/tokenizer_speed.py)\n";
    bool decode = false, lines = false, special = true;
    int64_t repeat = 0;
    opterr = 0;
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, ":", opts, NULL)) != -1;) {
        if (c == OPT_HELP) return cli_help("tokenize", opts, "", help);
        if (c == OPT_DECODE) decode = true;
        else if (c == OPT_LINES) lines = true;
        else if (c == OPT_NO_SPECIAL) special = false;
        else if (c == OPT_REPEAT_) {
            if (cli_parse_int(optarg, 1, &repeat) || repeat > 1000)
                return cli_usage_error("tokenize", "--repeat %s: a count from 1 to 1000", optarg);
        }
        else return cli_usage_error("tokenize", "unknown option %s", argv[optind - 1]);
    }
    if (optind >= argc) return cli_usage_error("tokenize", "needs TOKENIZER (a tokenizer.json or a directory with one)");
    if (optind + 1 < argc) return cli_usage_error("tokenize", "unexpected argument '%s'", argv[optind + 1]);
    lrc_err err;
    lrc_tokenizer *t;
    if (lrc_tokenizer_load(argv[optind], &t, &err)) return cli_user_error(&err);
    size_t n;
    char *in = read_stdin(&n);
    char *buf = NULL;
    size_t blen = 0;
    FILE *out = open_memstream(&buf, &blen);
    int rc = !in || !out ? lrc_err_set(&err, "stdin: out of memory") : run(t, in, n, decode, lines, special, out, &err);
    if (out) fclose(out);
    if (!rc && repeat) rc = time_encode(t, in, n, special, lines, repeat, &err);
    if (!rc) fwrite(buf, 1, blen, stdout);
    free(buf);
    free(in);
    lrc_tokenizer_free(t);
    if (fflush(stdout) && !rc) rc = lrc_err_set(&err, "stdout: %s", strerror(errno));
    return rc ? cli_user_error(&err) : 0;
}
