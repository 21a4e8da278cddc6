/* test_api — the embedding API (runtime/lrc.h) on bad input: a missing
 * package, damaged ones (package.json cut short, another format version,
 * kernels.so cut short or gone), weights of the wrong shape (from a file
 * and from memory), inputs of another shape than compiled, token ids
 * outside the vocabulary, a decoder's full context, and calls out of order.
 * Each returns a status, never aborts, and gives one line; where the
 * command line takes the same input, the line is exactly what `lrc forward`
 * or `lrc generate` prints after "lrc: " (and the input file's name). And
 * the good paths the checks depend on: a run, replaced weights, a decoder's
 * steps and reset.
 *   test_api LRC MODEL.lua */
#define _GNU_SOURCE
#include "check.h"
#include "runtime/lrc.h"
#include "runtime/lrc_runtime.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *lrc_bin, *model;
static char dir[256];

/* The one line `lrc ARGS` prints on stderr (its stdout dropped), without the newline. */
static void cli_stderr(const char *args, char *out, size_t n)
{
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "cd %s && %s %s 2>&1 >/dev/null", dir, lrc_bin, args);
    FILE *p = popen(cmd, "r");
    size_t got = p ? fread(out, 1, n - 1, p) : 0;
    out[got] = 0;
    if (p) pclose(p);
    out[strcspn(out, "\n")] = 0;
}

/* An input file of tokens [B, T], ids from fill (or id everywhere). */
static void write_tokens(const char *name, int64_t B, int64_t T, int32_t id)
{
    lrc_err err;
    lrc_tensor_set s;
    lrc_tensor_set_init(&s);
    lrc_shape sh2 = {2, {B, T}};
    lrc_tensor *t = lrc_tensor_new("tokens", LRC_I32, &sh2, &err);
    for (int64_t i = 0; i < B * T; i++) ((int32_t *)t->data)[i] = (int32_t)((i * 37) % 256);
    if (id >= 0) ((int32_t *)t->data)[B * T - 1 - 3] = id;
    lrc_tensor_set_add(&s, t, &err);
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (lrc_safetensors_save(path, &s, &err)) printf("cannot write %s: %s\n", path, err.msg);
    lrc_tensor_set_clear(&s);
}

/* Opens dir/name; the status, the message in msg. */
static lrc_status open_pkg(const char *name, lrc_session **s, char *msg, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    lrc_session_options o = lrc_session_default_options();
    o.threads = 2;
    lrc_status st = lrc_session_open(path, &o, s);
    snprintf(msg, n, "%s", lrc_session_error(*s));
    return st;
}

/* A package that does not open: the status and, with cli, that `lrc
 * forward` prints the same line (a path without package.json is a model
 * file to the command line, so a missing package has no command-line twin). */
static void bad_package(const char *name, lrc_status want, const char *needle, bool cli_too)
{
    lrc_session *s;
    char msg[1200], cli[1400], expect[1400], args[1024];
    lrc_status st = open_pkg(name, &s, msg, sizeof msg);
    CHECK(st == want, "%s: status %d, want %d (%s)", name, st, want, msg);
    CHECK(strstr(msg, needle) && !strchr(msg, '\n'), "%s: message '%s' lacks '%s'", name, msg, needle);
    lrc_session_info info;
    CHECK(lrc_session_describe(s, &info) == LRC_STATUS_INVALID && !strcmp(lrc_session_error(s), msg),
          "%s: a session that did not open refuses calls and keeps its message", name);
    lrc_session_close(s);
    if (!cli_too) return;
    snprintf(args, sizeof args, "forward %s --input in.st -o out.st", name);
    cli_stderr(args, cli, sizeof cli);
    snprintf(expect, sizeof expect, "lrc: %s", msg);
    /* the CLI names the package as given (relative), the test by its path */
    char rel[1400];
    snprintf(rel, sizeof rel, "%s/", dir);
    char *p = strstr(expect, rel);
    while (p) {
        memmove(p, p + strlen(rel), strlen(p + strlen(rel)) + 1);
        p = strstr(expect, rel);
    }
    CHECK(!strcmp(cli, expect), "%s: lrc forward printed\n  '%s'\nthe API\n  '%s'", name, cli, expect);
}

static lrc_array tokens_array(int32_t *ids, int64_t B, int64_t T)
{
    lrc_array a = {.name = "tokens", .elem = LRC_ELEM_I32, .ndim = 2, .shape = {B, T}, .data = ids};
    return a;
}

/* A run's logits copied (n floats), or -1. */
static int64_t run_logits(lrc_session *s, const lrc_array *in, float *out, int64_t cap)
{
    lrc_array o;
    if (lrc_session_run(s, in, 1) || lrc_session_output(s, "logits", &o)) return -1;
    int64_t n = 1;
    for (int d = 0; d < o.ndim; d++) n *= o.shape[d];
    if (n > cap) return -1;
    memcpy(out, o.data, (size_t)n * sizeof(float));
    return n;
}

static void test_packages(void)
{
    bad_package("nope", LRC_STATUS_PACKAGE, "nope: not an lrc package (no package.json: No such file or directory)", false);
    bad_package("pkg_cut", LRC_STATUS_PACKAGE, "pkg_cut/package.json: invalid JSON", true);
    bad_package("pkg_v99", LRC_STATUS_PACKAGE, "package format version 99", true);
    bad_package("pkg_badso", LRC_STATUS_PACKAGE, "pkg_badso/kernels.so: 1000 bytes with hash", true);
    bad_package("pkg_noso", LRC_STATUS_PACKAGE, "pkg_noso/kernels.so: cannot read", true);
    /* the package loads, its own weights do not bind: the session did not open */
    bad_package("pkg_badw", LRC_STATUS_PACKAGE,
                "pkg_badw/weights.safetensors: parameter 'model.embed_tokens.weight' is F32 [256,16], the program expects F32 [256,32]",
                true);
    /* a name in package.json with a line break, quoted: still one line (package_fuzz found it; a decoder: no shapes) */
    bad_package("pkg_nl", LRC_STATUS_PACKAGE, "pkg_nl/weights.safetensors: missing parameter 'model.embed\\ntokens.weight'", true);
}

static void test_inputs(void)
{
    lrc_session *s;
    char msg[1200], cli[1400], expect[1400];
    CHECK(open_pkg("pkg", &s, msg, sizeof msg) == LRC_STATUS_OK, "pkg opens: %s", msg);
    lrc_session_info info;
    CHECK(!lrc_session_describe(s, &info) && info.batch == 2 && info.seq == 7 && info.vocab == 256 && info.has_weights &&
              info.n_inputs == 1 && info.n_outputs == 1 && info.threads == 2 && !strcmp(info.target, "cpu") && info.context == 0,
          "describe: [%lld, %lld], vocab %lld, weights %d, %d inputs", (long long)info.batch, (long long)info.seq,
          (long long)info.vocab, info.has_weights, info.n_inputs);
    lrc_array in0;
    CHECK(!lrc_session_input(s, 0, &in0) && !strcmp(in0.name, "tokens") && in0.elem == LRC_ELEM_I32 && in0.ndim == 2 &&
              in0.shape[0] == 2 && in0.shape[1] == 7 && !in0.data,
          "input 0 is tokens I32 [2, 7]");
    CHECK(lrc_session_input(s, 1, &in0) == LRC_STATUS_INVALID, "input 1 does not exist: %s", lrc_session_error(s));
    static int32_t ids[2 * 9];
    for (int i = 0; i < 18; i++) ids[i] = (i * 37) % 256;
    static float good[2 * 7 * 256], again[2 * 7 * 256];
    lrc_array a = tokens_array(ids, 2, 7);
    CHECK(run_logits(s, &a, good, 2 * 7 * 256) == 2 * 7 * 256, "a run gives logits [2, 7, 256]: %s", lrc_session_error(s));
    CHECK(!strcmp(lrc_session_error(s), ""), "no message after success: '%s'", lrc_session_error(s));
    /* tokens of another shape than compiled (more of them) */
    a = tokens_array(ids, 2, 9);
    lrc_status st = lrc_session_run(s, &a, 1);
    snprintf(msg, sizeof msg, "%s", lrc_session_error(s));
    CHECK(st == LRC_STATUS_INVALID && strstr(msg, "is I32 [2,9], the package takes I32 [1..2,1..7]"), "tokens [2, 9]: %d '%s'", st, msg);
    write_tokens("in_big.st", 2, 9, -1);
    cli_stderr("forward pkg --input in_big.st -o out.st", cli, sizeof cli);
    snprintf(expect, sizeof expect, "lrc: in_big.st: %s", msg);
    CHECK(!strcmp(cli, expect), "tokens [2, 9]: lrc forward printed\n  '%s'\nthe API\n  '%s'", cli, expect);
    /* a token outside the vocabulary */
    ids[2 * 7 - 1 - 3] = 300;
    a = tokens_array(ids, 2, 7);
    st = lrc_session_run(s, &a, 1);
    snprintf(msg, sizeof msg, "%s", lrc_session_error(s));
    CHECK(st == LRC_STATUS_INVALID && strstr(msg, "tokens[1,3] = 300"), "token 300: %d '%s'", st, msg);
    write_tokens("in_vocab.st", 2, 7, 300);
    cli_stderr("forward pkg --input in_vocab.st -o out.st", cli, sizeof cli);
    snprintf(expect, sizeof expect, "lrc: in_vocab.st: %s", msg);
    CHECK(!strcmp(cli, expect), "token 300: lrc forward printed\n  '%s'\nthe API\n  '%s'", cli, expect);
    ids[2 * 7 - 1 - 3] = -1;
    CHECK(lrc_session_run(s, &a, 1) == LRC_STATUS_INVALID && strstr(lrc_session_error(s), "= -1 is outside [0, 256)"),
          "token -1: '%s'", lrc_session_error(s));
    ids[2 * 7 - 1 - 3] = (10 * 37) % 256;
    /* an input the package does not have, a wrong element type, a bad rank */
    lrc_array two[2] = {tokens_array(ids, 2, 7), {.name = "labels", .elem = LRC_ELEM_I32, .ndim = 1, .shape = {2}, .data = ids}};
    CHECK(lrc_session_run(s, two, 2) == LRC_STATUS_INVALID && strstr(lrc_session_error(s), "unexpected tensor 'labels'"),
          "an extra input: '%s'", lrc_session_error(s));
    lrc_array f = {.name = "tokens", .elem = LRC_ELEM_F32, .ndim = 2, .shape = {2, 7}, .data = good};
    CHECK(lrc_session_run(s, &f, 1) == LRC_STATUS_INVALID && strstr(lrc_session_error(s), "is F32 [2,7]"),
          "F32 tokens: '%s'", lrc_session_error(s));
    lrc_array r = {.name = "tokens", .elem = LRC_ELEM_I32, .ndim = 9, .data = ids};
    CHECK(lrc_session_run(s, &r, 1) == LRC_STATUS_INVALID && strstr(lrc_session_error(s), "9 dimensions"), "rank 9: '%s'",
          lrc_session_error(s));
    lrc_array e = {.name = "tokens", .elem = (lrc_elem)42, .ndim = 2, .shape = {2, 7}, .data = ids};
    CHECK(lrc_session_run(s, &e, 1) == LRC_STATUS_INVALID && strstr(lrc_session_error(s), "element type 42"),
          "element type 42: '%s'", lrc_session_error(s));
    CHECK(lrc_session_run(s, NULL, 0) == LRC_STATUS_INVALID && strstr(lrc_session_error(s), "no tensor 'tokens'"),
          "no inputs: '%s'", lrc_session_error(s));
    CHECK(lrc_session_step(s, 1, NULL, NULL) == LRC_STATUS_INVALID && strstr(lrc_session_error(s), "compiled for whole sequences"),
          "step on a whole-sequence package: '%s'", lrc_session_error(s));
    /* after all that, the same run gives the same logits */
    a = tokens_array(ids, 2, 7);
    CHECK(run_logits(s, &a, again, 2 * 7 * 256) > 0 && !memcmp(good, again, sizeof good), "the package still runs alike");
    double ms = -1;
    CHECK(lrc_session_time(s, 3, &ms) == LRC_STATUS_OK && ms >= 0, "time: %s", lrc_session_error(s));
    CHECK(lrc_session_time(s, (int64_t)1 << 62, &ms) == LRC_STATUS_INVALID &&
              strstr(lrc_session_error(s), "time between 1 and 1000000 runs"),
          "time of 2^62 runs: '%s'", lrc_session_error(s));
    lrc_session_close(s);
}

/* Weights: a file of another config's shapes (as lrc forward --weights), a
 * wrongly shaped tensor from memory (nothing changes), a good replacement. */
static void test_weights(void)
{
    lrc_session *s, *w;
    char msg[1200], cli[1400], expect[1400], path[512];
    CHECK(open_pkg("pkg_now", &s, msg, sizeof msg) == LRC_STATUS_OK, "pkg_now opens: %s", msg);
    lrc_session_info info;
    CHECK(!lrc_session_describe(s, &info) && !info.has_weights, "pkg_now has no weights");
    static int32_t ids[14];
    for (int i = 0; i < 14; i++) ids[i] = (i * 37) % 256;
    lrc_array a = tokens_array(ids, 2, 7);
    CHECK(lrc_session_run(s, &a, 1) == LRC_STATUS_INVALID && strstr(lrc_session_error(s), "compiled without weights"),
          "a run before weights: '%s'", lrc_session_error(s));
    snprintf(path, sizeof path, "%s/other_w.st", dir);
    lrc_status st = lrc_session_bind_weights_file(s, path);
    snprintf(msg, sizeof msg, "%s", lrc_session_error(s));
    CHECK(st == LRC_STATUS_INVALID && strstr(msg, "other_w.st: parameter '"), "weights of another config: %d '%s'", st, msg);
    cli_stderr("forward pkg_now --weights other_w.st --input in.st -o out.st", cli, sizeof cli);
    snprintf(expect, sizeof expect, "lrc: %s", msg);
    char *p = strstr(expect, dir); /* the CLI names the file as given */
    if (p) memmove(p, p + strlen(dir) + 1, strlen(p + strlen(dir) + 1) + 1);
    CHECK(!strcmp(cli, expect), "weights of another config: lrc forward printed\n  '%s'\nthe API\n  '%s'", cli, expect);
    snprintf(path, sizeof path, "%s/nope.st", dir);
    CHECK(lrc_session_bind_weights_file(s, path) == LRC_STATUS_INVALID && strstr(lrc_session_error(s), "nope.st"),
          "a missing weights file: '%s'", lrc_session_error(s));
    snprintf(path, sizeof path, "%s/w.st", dir);
    CHECK(lrc_session_bind_weights_file(s, path) == LRC_STATUS_OK, "the right weights bind: %s", lrc_session_error(s));
    static float base[2 * 7 * 256], now[2 * 7 * 256], ref[2 * 7 * 256];
    CHECK(run_logits(s, &a, base, 2 * 7 * 256) > 0, "runs once bound: %s", lrc_session_error(s));
    /* the package compiled with the same weights (folded) gives the same logits, to rounding */
    CHECK(open_pkg("pkg", &w, msg, sizeof msg) == LRC_STATUS_OK && run_logits(w, &a, ref, 2 * 7 * 256) > 0, "pkg runs");
    double worst = 0;
    for (int i = 0; i < 2 * 7 * 256; i++) worst = fmax(worst, fabs((double)base[i] - ref[i]));
    CHECK(worst < 1e-3, "weights bound at run time give the compiled-in package's logits (max diff %g)", worst);
    /* a package compiled with its weights holds its GEMMs' weights packed: another lm_head cannot bind */
    static float head[256 * 32];
    lrc_array lm = {.name = "lm_head.weight", .elem = LRC_ELEM_F32, .ndim = 2, .shape = {256, 32}, .data = head};
    CHECK(lrc_session_bind_weights(w, &lm, 1) == LRC_STATUS_INVALID &&
              strstr(lrc_session_error(w), "tensor 'lm_head.weight' is packed into the package") &&
              strstr(lrc_session_error(w), "compile it without --weights to bind others"),
          "a packed weight bound again: '%s'", lrc_session_error(w));
    lrc_session_close(w);
    /* from memory: the wrong shape changes nothing */
    static float e[4096];
    for (int i = 0; i < 4096; i++) e[i] = 0.01f * (float)(i % 97);
    lrc_array bad = {.name = "model.embed_tokens.weight", .elem = LRC_ELEM_F32, .ndim = 2, .shape = {256, 16}, .data = e};
    st = lrc_session_bind_weights(s, &bad, 1);
    CHECK(st == LRC_STATUS_INVALID && strstr(lrc_session_error(s), "'model.embed_tokens.weight' is F32 [256,16], the program expects F32 [256,32]"),
          "a wrongly shaped weight from memory: %d '%s'", st, lrc_session_error(s));
    CHECK(run_logits(s, &a, now, 2 * 7 * 256) > 0 && !memcmp(now, base, sizeof now), "... and the weights bound before stay");
    lrc_array extra = {.name = "no.such.weight", .elem = LRC_ELEM_F32, .ndim = 1, .shape = {4}, .data = e};
    CHECK(lrc_session_bind_weights(s, &extra, 1) == LRC_STATUS_INVALID && strstr(lrc_session_error(s), "extra tensor 'no.such.weight'"),
          "a weight the package does not have: '%s'", lrc_session_error(s));
    lrc_array nodata = {.name = "model.embed_tokens.weight", .elem = LRC_ELEM_F32, .ndim = 2, .shape = {256, 32}};
    CHECK(lrc_session_bind_weights(s, &nodata, 1) == LRC_STATUS_INVALID && strstr(lrc_session_error(s), "no data"),
          "a weight without data: '%s'", lrc_session_error(s));
    /* the right shape replaces that one tensor: the logits change, and change back */
    static float emb[256 * 32];
    for (int i = 0; i < 256 * 32; i++) emb[i] = 0.02f * (float)((i * 13) % 17) - 0.16f;
    lrc_array good = {.name = "model.embed_tokens.weight", .elem = LRC_ELEM_F32, .ndim = 2, .shape = {256, 32}, .data = emb};
    CHECK(lrc_session_bind_weights(s, &good, 1) == LRC_STATUS_OK, "one weight replaced from memory: %s", lrc_session_error(s));
    CHECK(run_logits(s, &a, now, 2 * 7 * 256) > 0 && memcmp(now, base, sizeof now), "... changes the logits");
    snprintf(path, sizeof path, "%s/w.st", dir);
    CHECK(lrc_session_bind_weights_file(s, path) == LRC_STATUS_OK && run_logits(s, &a, now, 2 * 7 * 256) > 0 &&
              !memcmp(now, base, sizeof now),
          "... and the file's weights bound again give the first logits back");
    lrc_session_close(s);
}

/* A decoder: steps equal to a whole-sequence run's logits; the context's
 * end; reset; a token outside the vocabulary. */
static void test_decoder(void)
{
    lrc_session *s;
    char msg[1200];
    CHECK(open_pkg("pkg_dec", &s, msg, sizeof msg) == LRC_STATUS_OK, "pkg_dec opens: %s", msg);
    lrc_session_info info;
    CHECK(!lrc_session_describe(s, &info) && info.context == 8 && info.position == 0, "context 8, position 0");
    float first[3][256];
    const float *lg = NULL;
    int64_t V = 0;
    for (int i = 0; i < 8; i++) {
        CHECK(lrc_session_step(s, 65 + i, &lg, &V) == LRC_STATUS_OK && V == 256, "step %d: %s", i, lrc_session_error(s));
        if (i < 3 && lg) memcpy(first[i], lg, sizeof first[i]);
    }
    lrc_status st = lrc_session_step(s, 65, &lg, &V);
    CHECK(st == LRC_STATUS_INVALID && strstr(lrc_session_error(s), "the context holds 8 positions"), "step 9: %d '%s'", st,
          lrc_session_error(s));
    CHECK(lrc_session_reset(s) == LRC_STATUS_OK && !lrc_session_describe(s, &info) && info.position == 0, "reset");
    st = lrc_session_step(s, 256, &lg, &V);
    CHECK(st == LRC_STATUS_INVALID && strstr(lrc_session_error(s), "tokens[0,0] = 256 is outside [0, 256)"), "token 256: '%s'",
          lrc_session_error(s));
    CHECK(!lrc_session_describe(s, &info) && info.position == 0, "a failed step does not advance");
    for (int i = 0; i < 3; i++)
        CHECK(lrc_session_step(s, 65 + i, &lg, &V) == LRC_STATUS_OK && !memcmp(lg, first[i], sizeof first[i]),
              "after reset, step %d gives the first sequence's logits again", i);
    lrc_session_close(s);
}

/* The logits of a run of ids [B, T] on package name (weights from wfile
 * when given) into out; their count, or -1 with the message printed. */
static int64_t logits_of(const char *name, const char *wfile, const int32_t *ids, int64_t B, int64_t T, float *out, int64_t cap)
{
    lrc_session *s;
    char msg[1200], path[512];
    int64_t n = -1;
    if (open_pkg(name, &s, msg, sizeof msg) == LRC_STATUS_OK) {
        snprintf(path, sizeof path, "%s/%s", dir, wfile ? wfile : "");
        lrc_array a = tokens_array((int32_t *)ids, B, T);
        if (!wfile || lrc_session_bind_weights_file(s, path) == LRC_STATUS_OK) n = run_logits(s, &a, out, cap);
    }
    if (n < 0) printf("  %s on [%lld, %lld]: %s\n", name, (long long)B, (long long)T, lrc_session_error(s));
    lrc_session_close(s);
    return n;
}

static double max_diff(const float *a, const float *b, int64_t n)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)a[i] - b[i]));
    return worst;
}

/* Shorter shapes: a package compiled for [2, 7] (and one for [2, 8] with
 * its shapes halved down to 2 positions) runs [1, 3], [2, 5] and [1, 7]
 * with the logits of packages compiled for exactly those; more rows or
 * positions than compiled, or none, are refused; a damaged shape is a
 * damaged package; weights bound anew reach every shape. */
static void test_shapes(void)
{
    static int32_t ids[3 * 8]; /* the largest run below: [3, 8], refused */
    static float got[2 * 8 * 256], want[2 * 8 * 256];
    const struct { const char *pkg, *exact; int64_t B, T; } runs[] = {
        {"pkg", "pkg_13", 1, 3}, {"pkg_mins", "pkg_13", 1, 3}, {"pkg", "pkg_25", 2, 5}, {"pkg_mins", "pkg_25", 2, 5}, {"pkg", "pkg_mins", 1, 7}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        for (int i = 0; i < 3 * 8; i++) ids[i] = (i * 53 + 7) % 256;
        int64_t n = logits_of(runs[r].pkg, NULL, ids, runs[r].B, runs[r].T, got, 2 * 8 * 256);
        int64_t m = logits_of(runs[r].exact, NULL, ids, runs[r].B, runs[r].T, want, 2 * 8 * 256);
        double d = n > 0 && n == m ? max_diff(got, want, n) : INFINITY;
        CHECK(n == runs[r].B * runs[r].T * 256 && d <= 1e-6, "%s on [%lld, %lld] gives %s's logits (%lld values, max diff %g)", runs[r].pkg,
              (long long)runs[r].B, (long long)runs[r].T, runs[r].exact, (long long)n, d);
    }
    lrc_session *s;
    char msg[1200], cli[1400], expect[1400];
    CHECK(open_pkg("pkg", &s, msg, sizeof msg) == LRC_STATUS_OK, "pkg opens: %s", msg);
    lrc_session_info info;
    CHECK(!lrc_session_describe(s, &info) && info.shorter_batch && info.shorter_seq, "describe: shorter batches and sequences run");
    const struct { int64_t B, T; const char *needle; } refused[] = {
        {3, 7, "input 'tokens' is I32 [3,7], the package takes I32 [1..2,1..7]"},
        {2, 0, "input 'tokens' is I32 [2,0], the package takes I32 [1..2,1..7]"},
        {0, 7, "input 'tokens' is I32 [0,7], the package takes I32 [1..2,1..7]"}};
    for (size_t r = 0; r < sizeof refused / sizeof refused[0]; r++) {
        lrc_array a = tokens_array(ids, refused[r].B, refused[r].T);
        lrc_status st = lrc_session_run(s, &a, 1);
        snprintf(msg, sizeof msg, "%s", lrc_session_error(s));
        CHECK(st == LRC_STATUS_INVALID && strstr(msg, refused[r].needle),
              "tokens [%lld, %lld]: %d '%s'", (long long)refused[r].B, (long long)refused[r].T, st, msg);
    }
    write_tokens("in_38.st", 3, 8, -1);
    lrc_array a = tokens_array(ids, 3, 8);
    lrc_session_run(s, &a, 1);
    snprintf(msg, sizeof msg, "%s", lrc_session_error(s));
    cli_stderr("forward pkg --input in_38.st -o out.st", cli, sizeof cli);
    snprintf(expect, sizeof expect, "lrc: in_38.st: %s", msg);
    CHECK(!strcmp(cli, expect), "tokens [3, 8]: lrc forward printed\n  '%s'\nthe API\n  '%s'", cli, expect);
    /* a shorter run is timed as one */
    a = tokens_array(ids, 1, 3);
    double ms = -1;
    CHECK(!lrc_session_run(s, &a, 1) && lrc_session_time(s, 3, &ms) == LRC_STATUS_OK && ms >= 0, "time of a shorter run: %s",
          lrc_session_error(s));
    lrc_session_close(s);
    /* weights bound anew, after a shorter shape ran with the first ones */
    lrc_session *w;
    static float first[3 * 256];
    CHECK(open_pkg("pkg_now", &w, msg, sizeof msg) == LRC_STATUS_OK, "pkg_now opens");
    char path[512];
    snprintf(path, sizeof path, "%s/w.st", dir);
    a = tokens_array(ids, 1, 3);
    CHECK(!lrc_session_bind_weights_file(w, path) && run_logits(w, &a, first, 3 * 256) == 3 * 256, "pkg_now with w.st on [1, 3]: %s",
          lrc_session_error(w));
    snprintf(path, sizeof path, "%s/w2.st", dir);
    CHECK(!lrc_session_bind_weights_file(w, path) && run_logits(w, &a, got, 3 * 256) == 3 * 256, "pkg_now with w2.st on [1, 3]: %s",
          lrc_session_error(w));
    CHECK(logits_of("pkg_now13", "w2.st", ids, 1, 3, want, 3 * 256) == 3 * 256 && max_diff(got, want, 3 * 256) <= 1e-6 &&
              max_diff(first, got, 3 * 256) > 1e-3,
          "weights bound anew reach the shorter shape (diff to the exact package %g, to the first weights' %g)", max_diff(got, want, 3 * 256),
          max_diff(first, got, 3 * 256));
    /* weights bound anew, then the shorter run timed without a run between: it binds them first */
    snprintf(path, sizeof path, "%s/w.st", dir);
    CHECK(!lrc_session_bind_weights_file(w, path) && lrc_session_time(w, 2, &ms) == LRC_STATUS_OK && run_logits(w, &a, got, 3 * 256) == 3 * 256 &&
              max_diff(first, got, 3 * 256) == 0,
          "time after new weights, then a run: the first weights' logits again (%s)", lrc_session_error(w));
    lrc_session_close(w);
    /* a model that attends both ways: fewer rows run, a shorter sequence is refused with the op that fixes it */
    CHECK(logits_of("pkg_bi", NULL, ids, 1, 8, got, 8 * 256) == 8 * 256 && logits_of("pkg_bi18", NULL, ids, 1, 8, want, 8 * 256) == 8 * 256 &&
              max_diff(got, want, 8 * 256) <= 1e-6,
          "a bidirectional model's [2, 8] package on [1, 8]: the [1, 8] package's logits (max diff %g)", max_diff(got, want, 8 * 256));
    CHECK(open_pkg("pkg_bi", &s, msg, sizeof msg) == LRC_STATUS_OK && !lrc_session_describe(s, &info) && info.shorter_batch &&
              !info.shorter_seq,
          "describe: the bidirectional package runs fewer rows, not fewer positions");
    a = tokens_array(ids, 2, 4);
    CHECK(lrc_session_run(s, &a, 1) == LRC_STATUS_INVALID &&
              strstr(lrc_session_error(s), "input 'tokens' is I32 [2,4], the package takes I32 [1..2,8]") &&
              strstr(lrc_session_error(s), "runs only that length: bi.lua:8: attention has no causal mask: every position attends to the whole sequence)"),
          "a shorter sequence of a bidirectional model: '%s'", lrc_session_error(s));
    lrc_session_close(s);
    /* replacing a package removes its own shapes, never what a link named like one points to */
    CHECK(check_sh(dir, "mkdir -p keep && touch keep/package.json && ln -s ../keep pkg_now13/shape-1x2 && "
             "%s compile %s --preset tiny --batch 1 --seq 3 --target cpu -o pkg_now13 >/dev/null && test -f keep/package.json && "
             "test ! -e pkg_now13/shape-1x2 && ! ls -d pkg_now13.* 2>/dev/null", lrc_bin, model) == 0,
          "a link in a package replaced: the directory it points to is left alone");
    /* a shape's kernels damaged: the package does not open */
    bad_package("pkg_mins_cut", LRC_STATUS_PACKAGE, "pkg_mins_cut/shape-1x4/kernels.so: 1000 bytes with hash", true);
}

/* A package compiled with --tokenizer (tests/tokenizer/small.json): text to
 * ids and back through lrc.h; one without a tokenizer says so. */
static void test_tokenizer(void)
{
    lrc_session *s;
    char msg[1200];
    CHECK(open_pkg("pkg_tok", &s, msg, sizeof msg) == LRC_STATUS_OK, "pkg_tok opens: %s", msg);
    const int32_t *ids = NULL;
    int64_t n = 0;
    static const int32_t want[] = {0, 4, 1, 3, 4, 3};
    CHECK(lrc_session_tokenize(s, "a b ab", 6, 1, &ids, &n) == LRC_STATUS_OK && n == 6 && !memcmp(ids, want, sizeof want),
          "tokenize 'a b ab': %lld ids (%s)", (long long)n, lrc_session_error(s));
    CHECK(lrc_session_tokenize(s, "a b ab", 6, 0, &ids, &n) == LRC_STATUS_OK && n == 5 && ids[0] == 4, "without the BOS");
    const char *text = NULL;
    size_t len = 0;
    CHECK(lrc_session_detokenize(s, want, 6, &text, &len) == LRC_STATUS_OK && len == 10 && !memcmp(text, "<s> a b ab", 10),
          "detokenize: '%.*s'", (int)len, text ? text : "");
    CHECK(lrc_session_tokenize(s, "a\xff", 2, 1, &ids, &n) == LRC_STATUS_INVALID &&
              strstr(lrc_session_error(s), "invalid UTF-8 at byte 1"),
          "invalid UTF-8: '%s'", lrc_session_error(s));
    static const int32_t bad[] = {0, 9};
    CHECK(lrc_session_detokenize(s, bad, 2, &text, &len) == LRC_STATUS_INVALID && strstr(lrc_session_error(s), "id 9 (at 1)"),
          "an id outside the vocabulary: '%s'", lrc_session_error(s));
    lrc_session_close(s);
    CHECK(open_pkg("pkg", &s, msg, sizeof msg) == LRC_STATUS_OK, "pkg opens: %s", msg);
    CHECK(lrc_session_tokenize(s, "a", 1, 1, &ids, &n) == LRC_STATUS_INVALID && strstr(lrc_session_error(s), "has no tokenizer"),
          "no tokenizer: '%s'", lrc_session_error(s));
    lrc_session_close(s);
}

static void test_misuse(void)
{
    lrc_session *s = NULL;
    CHECK(lrc_session_open(NULL, NULL, &s) == LRC_STATUS_INVALID && s && strstr(lrc_session_error(s), "no package"),
          "open(NULL): '%s'", lrc_session_error(s));
    lrc_session_close(s);
    CHECK(lrc_session_open("x", NULL, NULL) == LRC_STATUS_INVALID, "open without out");
    CHECK(strstr(lrc_session_error(NULL), "no session") != NULL, "error(NULL)");
    CHECK(lrc_session_step(NULL, 0, NULL, NULL) == LRC_STATUS_INVALID && lrc_session_reset(NULL) == LRC_STATUS_INVALID &&
              lrc_session_run(NULL, NULL, 0) == LRC_STATUS_INVALID && lrc_session_bind_weights_file(NULL, "w") == LRC_STATUS_INVALID,
          "calls on NULL");
    lrc_session_close(NULL);
    lrc_session_options o = {.threads = -3};
    char path[512];
    snprintf(path, sizeof path, "%s/pkg", dir);
    CHECK(lrc_session_open(path, &o, &s) == LRC_STATUS_INVALID && strstr(lrc_session_error(s), "threads -3"), "threads -3: '%s'",
          lrc_session_error(s));
    lrc_session_close(s);
    CHECK(!strcmp(lrc_version(), "0.1.0"), "version %s", lrc_version());
    /* a cuda package: without a GPU the device error lrc forward prints; with one, it opens */
    lrc_cuda_device dev;
    char why[256], msg[1200], cli[1400], expect[1400];
    bool gpu = lrc_cuda_probe(&dev, why, sizeof why) == 0;
    lrc_status st = open_pkg("pkg_cu", &s, msg, sizeof msg);
    if (gpu) {
        CHECK(st == LRC_STATUS_OK, "a cuda package on %s: %s", dev.name, msg);
    } else {
        CHECK(st == LRC_STATUS_DEVICE && strstr(msg, "is compiled for cuda") && strstr(msg, why), "cuda without a GPU: %d '%s'", st, msg);
        cli_stderr("forward pkg_cu --input in.st -o out.st", cli, sizeof cli);
        snprintf(expect, sizeof expect, "lrc: %s", msg);
        char *p = strstr(expect, dir);
        if (p) memmove(p, p + strlen(dir) + 1, strlen(p + strlen(dir) + 1) + 1);
        CHECK(!strcmp(cli, expect), "cuda without a GPU: lrc forward printed\n  '%s'\nthe API\n  '%s'", cli, expect);
    }
    lrc_session_close(s);
}

/* A model whose attention has no causal mask: its sequence cannot run shorter. */
static const char *bidirectional = "local lrc = require \"lrc\"\n"
                                   "local nn = require \"lrc.nn\"\n"
                                   "local M = {}\n"
                                   "M.defaults = { d = 16, vocab = 256 }\n"
                                   "function M.build(cfg, tokens)\n"
                                   "  local B, T = tokens.shape[1], tokens.shape[2]\n"
                                   "  local q = nn.embedding(\"embed\", cfg.vocab, cfg.d)(tokens):reshape{B, T, 2, cfg.d // 2}\n"
                                   "  local a = lrc.attention(q, q, q, { causal = false, scale = 0.25 })\n"
                                   "  return nn.linear(\"head\", cfg.d, cfg.vocab)(a:reshape{B, T, cfg.d})\n"
                                   "end\n"
                                   "return M\n";

/* Writes text to dir/name; 0 on success. */
static int write_file(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    int ok = f && fputs(text, f) >= 0;
    if (f && fclose(f)) ok = 0;
    return !ok;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: test_api LRC MODEL.lua TOKENIZER.json\n");
        return 2;
    }
    lrc_bin = argv[1];
    model = argv[2];
    snprintf(dir, sizeof dir, "/tmp/lrc_test_api.XXXXXX");
    if (!mkdtemp(dir)) return 2;
    const char *tiny = "--preset tiny --batch 2 --seq 7";
    int rc = check_sh(dir, "%s init %s --preset tiny --seed 1 -o w.st >/dev/null", lrc_bin, model) ||
             check_sh(dir, "%s init %s --preset tiny --set d_model=16 --seed 1 -o other_w.st >/dev/null", lrc_bin, model) ||
             check_sh(dir, "%s compile %s %s --target cpu --weights w.st -o pkg >/dev/null", lrc_bin, model, tiny) ||
             check_sh(dir, "%s compile %s %s --target cpu -o pkg_now >/dev/null", lrc_bin, model, tiny) ||
             check_sh(dir, "%s compile %s --preset tiny --target cpu --weights w.st --ctx 8 -o pkg_dec >/dev/null", lrc_bin, model) ||
             check_sh(dir, "%s compile %s %s --target cuda --arch sm_80 --weights w.st -o pkg_cu >/dev/null", lrc_bin, model, tiny) ||
             check_sh(dir, "cp -r pkg pkg_cut && head -c 300 pkg/package.json >pkg_cut/package.json") ||
             check_sh(dir, "cp -r pkg pkg_v99 && sed -i 's/\"version\":[[:space:]]*[0-9]*/\"version\": 99/' pkg_v99/package.json") ||
             check_sh(dir, "cp -r pkg pkg_badso && head -c 1000 pkg/kernels.so >pkg_badso/kernels.so") ||
             check_sh(dir, "cp -r pkg pkg_noso && rm pkg_noso/kernels.so") ||
             check_sh(dir, "cp -r pkg pkg_badw && cp other_w.st pkg_badw/weights.safetensors") ||
             check_sh(dir, "cp -r pkg_dec pkg_nl && sed -i 's/\"model.embed_tokens.weight\"/\"model.embed\\\\ntokens.weight\"/' pkg_nl/package.json") ||
             check_sh(dir, "%s init %s --preset tiny --seed 2 -o w2.st >/dev/null", lrc_bin, model) ||
             check_sh(dir, "%s compile %s --preset tiny --batch 1 --seq 3 --target cpu --weights w.st -o pkg_13 >/dev/null", lrc_bin, model) ||
             check_sh(dir, "%s compile %s --preset tiny --batch 2 --seq 5 --target cpu --weights w.st -o pkg_25 >/dev/null", lrc_bin, model) ||
             check_sh(dir, "%s compile %s --preset tiny --batch 1 --seq 3 --target cpu -o pkg_now13 >/dev/null", lrc_bin, model) ||
             check_sh(dir, "%s compile %s --preset tiny --batch 2 --seq 8 --min-seq 2 --target cpu --weights w.st -o pkg_mins >/dev/null", lrc_bin, model) ||
             check_sh(dir, "cp -r pkg_mins pkg_mins_cut && head -c 1000 pkg_mins/shape-1x4/kernels.so >pkg_mins_cut/shape-1x4/kernels.so") ||
             write_file("bi.lua", bidirectional) ||
             check_sh(dir, "%s init bi.lua -o bi_w.st >/dev/null", lrc_bin) ||
             check_sh(dir, "%s compile bi.lua --batch 2 --seq 8 --min-seq 2 --target cpu --weights bi_w.st -o pkg_bi >/dev/null", lrc_bin) ||
             check_sh(dir, "%s compile bi.lua --batch 1 --seq 8 --target cpu --weights bi_w.st -o pkg_bi18 >/dev/null", lrc_bin) ||
             check_sh(dir, "%s compile %s %s --target cpu --weights w.st --tokenizer %s -o pkg_tok >/dev/null", lrc_bin, model, tiny, argv[3]);
    CHECK(rc == 0, "the packages were made");
    write_tokens("in.st", 2, 7, -1);
    if (rc == 0) {
        test_packages();
        test_inputs();
        test_weights();
        test_decoder();
        test_shapes();
        test_tokenizer();
        test_misuse();
    }
    check_sh(dir, "rm -rf pkg pkg_now pkg_dec pkg_cu pkg_cut pkg_v99 pkg_badso pkg_noso pkg_badw pkg_nl pkg_13 pkg_25 pkg_now13 pkg_mins pkg_mins_cut pkg_bi pkg_bi18 pkg_tok keep *.st bi.lua");
    rmdir(dir);
    return check_summary();
}
