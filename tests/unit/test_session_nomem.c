/* test_session_nomem — the embedding API when memory runs out, by fault
 * injection as SQLite's malloc tests do it (ir/util.c's lrc_alloc_fail_at):
 * for each path (a session's open, binding weights from a file and from
 * memory, a first run, a shorter run, a decoder's first and later step, a
 * tokenizer's first encode and a decode, a timing), N = 1, 2, 3, ... makes
 * the N-th allocation of the call fail (alone, then with every one after
 * it), until a call that asks for fewer than N succeeds. Each failing call
 * must return LRC_STATUS_NOMEM with one line saying "out of memory"; the
 * session must then close without allocating, and the same call without a
 * fault must give what a clean session gives, bit for bit (the failure
 * changed nothing). Under the sanitizer build LeakSanitizer checks that
 * nothing made on the way was kept. Prints how many allocation points each
 * path has. A cuda package's open and first run too, on a GPU or on the
 * emulator of tests/cuemu (ctest gives its environment): the cuda
 * executor's host allocations.
 *   test_session_nomem LRC MODEL.lua TOKENIZER.json */
#define _GNU_SOURCE
#include "check.h"
#include "runtime/lrc.h"
#include "runtime/lrc_runtime.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* far above any path's points: a loop that never ends is a failure */
#define MAX_POINTS 100000

/* failures of a pool's pthread_create seen (a point of the open path) */
static int thread_failures;

static char dir[256];
static int32_t ids[2 * 7], ids5[2 * 5];
/* pkg's logits (its weights compiled in); pkg_now's bound to w.st and to
 * w2.st; a shorter run's; a decoder's first two steps' */
static float want_logits[2 * 7 * 256], want_bound[2][2 * 7 * 256], want_short[2 * 5 * 256], want_step[2][256];
static float want_cu[2 * 7 * 256]; /* pkg_cu's, on the emulator of tests/cuemu (or a GPU) */
static char w_path[2][512];
static int32_t want_tok[16];
static int64_t want_ntok;

static lrc_status open_pkg(const char *name, lrc_session **s)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    lrc_session_options o = lrc_session_default_options();
    o.threads = 2; /* the same threads every time: bit-identical outputs */
    return lrc_session_open(path, &o, s);
}

/* The first output of the last run, copied; its element count or -1. */
static int64_t output0(lrc_session *s, float *out, int64_t cap)
{
    lrc_array o;
    if (lrc_session_output_at(s, 0, &o)) return -1;
    int64_t n = 1;
    for (int d = 0; d < o.ndim; d++) n *= o.shape[d];
    if (n > cap) return -1;
    memcpy(out, o.data, (size_t)n * sizeof(float));
    return n;
}

/* A run of tokens [B, T] gives exactly want (n floats). */
static bool runs_as(lrc_session *s, const int32_t *tok, int64_t B, int64_t T, const float *want, int64_t n)
{
    static float got[2 * 7 * 256];
    lrc_array a = {.name = "tokens", .elem = LRC_ELEM_I32, .ndim = 2, .shape = {B, T}, .data = tok};
    return !lrc_session_run(s, &a, 1) && output0(s, got, n) == n && !memcmp(got, want, (size_t)n * sizeof(float));
}

/* Closes s with the fault injection on for every allocation: a close asks
 * for none. */
static void close_without_memory(lrc_session *s, const char *path, int64_t n)
{
    lrc_alloc_fail_at(1, true);
    lrc_session_close(s);
    int64_t asked = lrc_alloc_count();
    lrc_alloc_fail_at(0, false);
    CHECK(asked == 0, "%s, point %lld: closing the session asked for %lld allocations", path, (long long)n, (long long)asked);
}

/* One call of a path with the n-th allocation failing (and every one
 * after it when after): its status, its message and how many points the
 * call asked for; false when the clean call after it did not give the
 * clean session's result. */
typedef struct {
    lrc_status st;
    char msg[1100];
    int64_t asked;
} attempt;

typedef bool (*path_fn)(int64_t n, bool after, attempt *a);

/* Arms the injection, runs the call, keeps what it said, disarms. */
#define FAULTY(a, n, after, s, call)                            \
    do {                                                        \
        lrc_alloc_fail_at(n, after);                            \
        (a)->st = (call);                                       \
        (a)->asked = lrc_alloc_count();                         \
        lrc_alloc_fail_at(0, false);                            \
        snprintf((a)->msg, sizeof (a)->msg, "%s", lrc_session_error(s)); \
    } while (0)

/* Opens pkg with the fault; a session that opened runs as want, one that
 * did not refuses to run. (The sweep's last call is a clean open and run
 * after all the failed ones: nothing global was left behind.) */
static bool open_path(const char *pkg, const float *want, int64_t n, bool after, attempt *a)
{
    lrc_session *s = NULL;
    lrc_alloc_fail_at(n, after);
    a->st = open_pkg(pkg, &s);
    a->asked = lrc_alloc_count();
    lrc_alloc_fail_at(0, false);
    snprintf(a->msg, sizeof a->msg, "%s", lrc_session_error(s));
    bool ok = a->st == LRC_STATUS_OK ? runs_as(s, ids, 2, 7, want, 2 * 7 * 256) : lrc_session_run(s, NULL, 0) == LRC_STATUS_INVALID;
    close_without_memory(s, "open", n);
    return ok;
}

/* The first run of a fresh session: its outputs made, its `once` launches
 * run (cuda: its buffers uploaded). */
static bool run_path(const char *pkg, const float *want, int64_t n, bool after, attempt *a)
{
    lrc_session *s;
    if (open_pkg(pkg, &s)) return lrc_session_close(s), false;
    lrc_array in = {.name = "tokens", .elem = LRC_ELEM_I32, .ndim = 2, .shape = {2, 7}, .data = ids};
    FAULTY(a, n, after, s, lrc_session_run(s, &in, 1));
    bool ok = runs_as(s, ids, 2, 7, want, 2 * 7 * 256);
    close_without_memory(s, "run", n);
    return ok;
}

static bool path_open(int64_t n, bool after, attempt *a) { return open_path("pkg", want_logits, n, after, a); }
static bool path_run(int64_t n, bool after, attempt *a) { return run_path("pkg", want_logits, n, after, a); }
static bool path_cuda_open(int64_t n, bool after, attempt *a) { return open_path("pkg_cu", want_cu, n, after, a); }
static bool path_cuda_run(int64_t n, bool after, attempt *a) { return run_path("pkg_cu", want_cu, n, after, a); }

/* pkg_now bound to w.st, then to w2.st: a failed bind keeps the weights
 * bound before; the same bind without a fault binds the new ones. */
static bool path_bind_file(int64_t n, bool after, attempt *a)
{
    lrc_session *s;
    bool ok = !open_pkg("pkg_now", &s) && !lrc_session_bind_weights_file(s, w_path[0]) &&
              runs_as(s, ids, 2, 7, want_bound[0], 2 * 7 * 256);
    if (ok) {
        FAULTY(a, n, after, s, lrc_session_bind_weights_file(s, w_path[1]));
        if (a->st) ok = runs_as(s, ids, 2, 7, want_bound[0], 2 * 7 * 256) && !lrc_session_bind_weights_file(s, w_path[1]);
        ok = ok && runs_as(s, ids, 2, 7, want_bound[1], 2 * 7 * 256);
    }
    close_without_memory(s, "bind a file", n);
    return ok;
}

/* Every weight of w2.st as the caller's arrays (its tensors stay in *set). */
static int weight_arrays(lrc_tensor_set *set, lrc_array *arr, int cap)
{
    lrc_err err;
    if (lrc_safetensors_load(w_path[1], set, &err) || set->n > cap) return -1;
    for (int i = 0; i < set->n; i++) {
        const lrc_tensor *t = set->items[i];
        if (t->dtype != LRC_F32) return -1;
        arr[i] = (lrc_array){.name = t->name, .elem = LRC_ELEM_F32, .ndim = t->shape.ndim, .data = t->data};
        for (int d = 0; d < t->shape.ndim; d++) arr[i].shape[d] = t->shape.dim[d];
    }
    return set->n;
}

static bool path_bind_memory(int64_t n, bool after, attempt *a)
{
    lrc_session *s;
    lrc_tensor_set set;
    lrc_array arr[64];
    int nw = weight_arrays(&set, arr, 64);
    bool ok = !open_pkg("pkg_now", &s) && nw > 0 && !lrc_session_bind_weights_file(s, w_path[0]) &&
              runs_as(s, ids, 2, 7, want_bound[0], 2 * 7 * 256);
    if (ok) {
        FAULTY(a, n, after, s, lrc_session_bind_weights(s, arr, nw));
        if (a->st) ok = runs_as(s, ids, 2, 7, want_bound[0], 2 * 7 * 256) && !lrc_session_bind_weights(s, arr, nw);
        ok = ok && runs_as(s, ids, 2, 7, want_bound[1], 2 * 7 * 256);
    }
    close_without_memory(s, "bind from memory", n);
    lrc_tensor_set_clear(&set);
    return ok;
}

/* A first run of fewer positions than compiled: a shorter shape's executor opened and bound, the inputs padded. */
static bool path_run_shorter(int64_t n, bool after, attempt *a)
{
    lrc_session *s;
    if (open_pkg("pkg_mins", &s)) return lrc_session_close(s), false;
    lrc_array in = {.name = "tokens", .elem = LRC_ELEM_I32, .ndim = 2, .shape = {2, 5}, .data = ids5};
    FAULTY(a, n, after, s, lrc_session_run(s, &in, 1));
    bool ok = runs_as(s, ids5, 2, 5, want_short, 2 * 5 * 256);
    close_without_memory(s, "shorter run", n);
    return ok;
}

/* A decoder's step k (0: the first, which makes the step's inputs) fails;
 * the same step again, and the next, give a clean decoder's logits. */
static bool step_path(int64_t n, bool after, attempt *a, int k)
{
    lrc_session *s;
    const float *lg;
    int64_t vocab;
    if (open_pkg("pkg_dec", &s) || (k && lrc_session_step(s, ids[0], &lg, &vocab))) return lrc_session_close(s), false;
    FAULTY(a, n, after, s, lrc_session_step(s, ids[k], &lg, &vocab));
    bool ok = true;
    if (a->st) ok = !lrc_session_step(s, ids[k], &lg, &vocab) && vocab == 256 && !memcmp(lg, want_step[k], sizeof want_step[k]);
    lrc_session_info info;
    ok = ok && !lrc_session_describe(s, &info) && info.position == k + 1;
    if (!k) ok = ok && !lrc_session_step(s, ids[1], &lg, &vocab) && !memcmp(lg, want_step[1], sizeof want_step[1]);
    close_without_memory(s, k ? "a later step" : "a first step", n);
    return ok;
}

static bool path_step_first(int64_t n, bool after, attempt *a) { return step_path(n, after, a, 0); }
static bool path_step_later(int64_t n, bool after, attempt *a) { return step_path(n, after, a, 1); }

/* The first encode loads the package's tokenizer.json. */
static bool path_tokenize(int64_t n, bool after, attempt *a)
{
    lrc_session *s;
    const int32_t *got;
    int64_t ng;
    if (open_pkg("pkg_tok", &s)) return lrc_session_close(s), false;
    FAULTY(a, n, after, s, lrc_session_tokenize(s, "a b ab", 6, 1, &got, &ng));
    bool ok = !lrc_session_tokenize(s, "a b ab", 6, 1, &got, &ng) && ng == want_ntok && !memcmp(got, want_tok, (size_t)ng * 4);
    close_without_memory(s, "tokenize", n);
    return ok;
}

static bool path_detokenize(int64_t n, bool after, attempt *a)
{
    lrc_session *s;
    const int32_t *got;
    int64_t ng;
    const char *text;
    size_t len;
    if (open_pkg("pkg_tok", &s) || lrc_session_tokenize(s, "a b ab", 6, 1, &got, &ng)) return lrc_session_close(s), false;
    FAULTY(a, n, after, s, lrc_session_detokenize(s, want_tok, want_ntok, &text, &len));
    bool ok = !lrc_session_detokenize(s, want_tok, want_ntok, &text, &len) && len == 10 && !memcmp(text, "<s> a b ab", 10);
    close_without_memory(s, "detokenize", n);
    return ok;
}

static bool path_time(int64_t n, bool after, attempt *a)
{
    lrc_session *s;
    double ms;
    if (open_pkg("pkg", &s) || !runs_as(s, ids, 2, 7, want_logits, 2 * 7 * 256)) return lrc_session_close(s), false;
    FAULTY(a, n, after, s, lrc_session_time(s, 3, &ms));
    bool ok = !lrc_session_time(s, 3, &ms) && ms > 0 && runs_as(s, ids, 2, 7, want_logits, 2 * 7 * 256);
    close_without_memory(s, "time", n);
    return ok;
}

/* N = 1, 2, ... until the call asks for fewer than N; returns the
 * points, and the last failure's message in last. */
static int64_t sweep(const char *name, path_fn fn, bool after, char *last, size_t cap)
{
    int64_t n = 1;
    for (; n <= MAX_POINTS; n++) {
        attempt a = {0};
        bool same = fn(n, after, &a);
        if (a.st == LRC_STATUS_OK && a.asked < n) {
            CHECK(same, "%s: the clean call's result differs", name);
            break;
        }
        snprintf(last, cap, "%s", a.msg);
        thread_failures += strstr(a.msg, "thread pool: cannot create thread") != NULL;
        CHECK(a.st == LRC_STATUS_NOMEM, "%s, allocation %lld of %lld failing%s: status %d (%s)", name, (long long)n, (long long)a.asked,
              after ? " with all after it" : "", a.st, a.msg);
        CHECK(strstr(a.msg, "out of memory") && !strchr(a.msg, '\n'), "%s, allocation %lld: message '%s'", name, (long long)n, a.msg);
        CHECK(same, "%s, allocation %lld failing%s: after it the same call without a fault gave another result", name, (long long)n,
              after ? " with all after it" : "");
        if (failed > 20) break; /* the first failures say it; thousands more would not */
    }
    CHECK(n <= MAX_POINTS, "%s: more than %d allocation points", name, MAX_POINTS);
    CHECK(n > 1, "%s: no allocation point at all (a call that cannot fail here proves nothing)", name);
    return n - 1;
}

static void sweep_both(const char *name, path_fn fn)
{
    int before = failed;
    char last[1100] = "";
    double t0 = lrc_now_s();
    int64_t alone = sweep(name, fn, false, last, sizeof last), after = sweep(name, fn, true, last, sizeof last);
    CHECK(alone == after, "%s: %lld points failing alone, %lld failing with all after", name, (long long)alone, (long long)after);
    printf("%-18s %5lld allocation points, each failing alone and with all after it: %s (%.1f s)\n", name, (long long)alone,
           failed == before ? "LRC_STATUS_NOMEM, closed clean, then the clean result" : "FAILED (above)", lrc_now_s() - t0);
    /* the dir is the test's own: the package's name is enough */
    const char *at = strstr(last, dir);
    printf("%18s last failure: %s\n", "", at ? at + strlen(dir) + 1 : last);
}

/* The checked allocators themselves: sizes that overflow, the injection's
 * ordinals, alone and with all after, and off. */
static void test_allocators(void)
{
    int64_t before = lrc_alloc_failures();
    errno = 0;
    void *p = lrc_calloc(SIZE_MAX / 2, 4), *q = lrc_malloc(8);
    CHECK(!p && errno == ENOMEM && lrc_alloc_failures() == before + 1, "calloc of SIZE_MAX / 2 x 4: refused, counted");
    CHECK(q && !lrc_reallocarray(q, SIZE_MAX, 2) && lrc_alloc_failures() == before + 2, "reallocarray that overflows: refused, q kept");
    free(q);
    void *z = lrc_aligned_alloc(64, 0);
    CHECK(z && !((uintptr_t)z % 64), "aligned_alloc of 0 bytes: one aligned block");
    free(z);
    for (int after = 0; after < 2; after++) {
        lrc_alloc_fail_at(2, after);
        void *a = lrc_malloc(1), *b = lrc_strdup("b"), *c = lrc_calloc(1, 1);
        int64_t asked = lrc_alloc_count();
        lrc_alloc_fail_at(0, false);
        CHECK(a && !b && (c == NULL) == (after == 1) && asked == 3, "fail at 2%s: %p %p %p, %lld asked", after ? " and after" : "", a, (void *)b, c,
              (long long)asked);
        free(a), free(b), free(c);
    }
    void *d = lrc_malloc(1);
    CHECK(d && lrc_alloc_count() == 0, "off: nothing fails, nothing is counted");
    free(d);
}

/* The clean sessions' results that each path must give again. */
static int references(void)
{
    lrc_session *s = NULL;
    const float *lg;
    int64_t vocab;
    const int32_t *tok;
    lrc_array in = {.name = "tokens", .elem = LRC_ELEM_I32, .ndim = 2, .shape = {2, 7}, .data = ids};
    int rc = open_pkg("pkg", &s) || lrc_session_run(s, &in, 1) || output0(s, want_logits, 2 * 7 * 256) != 2 * 7 * 256;
    lrc_session_close(s);
    rc = rc || open_pkg("pkg_now", &s);
    for (int k = 0; k < 2 && !rc; k++)
        rc = lrc_session_bind_weights_file(s, w_path[k]) || lrc_session_run(s, &in, 1) || output0(s, want_bound[k], 2 * 7 * 256) != 2 * 7 * 256;
    rc = rc || !memcmp(want_bound[0], want_bound[1], sizeof want_bound[0]); /* the two weights must tell apart */
    lrc_session_close(s);
    lrc_array in5 = {.name = "tokens", .elem = LRC_ELEM_I32, .ndim = 2, .shape = {2, 5}, .data = ids5};
    rc = rc || open_pkg("pkg_mins", &s) || lrc_session_run(s, &in5, 1) || output0(s, want_short, 2 * 5 * 256) != 2 * 5 * 256;
    lrc_session_close(s);
    rc = rc || open_pkg("pkg_dec", &s);
    for (int k = 0; k < 2 && !rc; k++)
        rc = lrc_session_step(s, ids[k], &lg, &vocab) || vocab != 256 || (memcpy(want_step[k], lg, sizeof want_step[k]), 0);
    lrc_session_close(s);
    rc = rc || open_pkg("pkg_tok", &s) || lrc_session_tokenize(s, "a b ab", 6, 1, &tok, &want_ntok) || want_ntok > 16 ||
         (memcpy(want_tok, tok, (size_t)want_ntok * 4), 0);
    lrc_session_close(s);
    rc = rc || open_pkg("pkg_cu", &s) || lrc_session_run(s, &in, 1) || output0(s, want_cu, 2 * 7 * 256) != 2 * 7 * 256;
    if (rc) printf("a clean session: %s\n", lrc_session_error(s));
    lrc_session_close(s);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: test_session_nomem LRC MODEL.lua TOKENIZER.json\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0); /* each path's line as it ends */
    const char *lrc = argv[1], *model = argv[2];
    snprintf(dir, sizeof dir, "/tmp/lrc_test_nomem.XXXXXX");
    if (!mkdtemp(dir)) return 2;
    for (int i = 0; i < 14; i++) ids[i] = (i * 37) % 256;
    for (int i = 0; i < 10; i++) ids5[i] = (i * 53 + 7) % 256;
    for (int k = 0; k < 2; k++) snprintf(w_path[k], sizeof w_path[k], "%s/w%s.st", dir, k ? "2" : "");
    const char *tiny = "--preset tiny --batch 2 --seq 7 --target cpu";
    int rc = check_sh(dir, "%s init %s --preset tiny --seed 1 -o w.st >/dev/null", lrc, model) ||
             check_sh(dir, "%s init %s --preset tiny --seed 2 -o w2.st >/dev/null", lrc, model) ||
             check_sh(dir, "%s compile %s %s --weights w.st -o pkg >/dev/null", lrc, model, tiny) ||
             check_sh(dir, "%s compile %s %s -o pkg_now >/dev/null", lrc, model, tiny) ||
             check_sh(dir, "%s compile %s --preset tiny --batch 2 --seq 8 --min-seq 2 --target cpu --weights w.st -o pkg_mins >/dev/null", lrc, model) ||
             check_sh(dir, "%s compile %s --preset tiny --target cpu --weights w.st --ctx 8 -o pkg_dec >/dev/null", lrc, model) ||
             check_sh(dir, "%s compile %s %s --weights w.st --tokenizer %s -o pkg_tok >/dev/null", lrc, model, tiny, argv[3]) ||
             check_sh(dir, "%s compile %s --preset tiny --batch 2 --seq 7 --target cuda --arch sm_80 --weights w.st -o pkg_cu >/dev/null", lrc, model);
    test_allocators();
    CHECK(!strcmp(lrc_status_string(LRC_STATUS_NOMEM), "out of memory") && !strcmp(lrc_status_string(LRC_STATUS_OK), "ok") &&
              !strcmp(lrc_status_string((lrc_status)99), "unknown status"),
          "lrc_status_string names the statuses");
    CHECK(rc == 0, "the packages were made");
    CHECK(rc == 0 && references() == 0, "the clean sessions ran");
    if (!failed) {
        static const struct {
            const char *name;
            path_fn fn;
        } paths[] = {{"open", path_open},         {"bind a file", path_bind_file}, {"bind from memory", path_bind_memory},
                     {"first run", path_run},     {"shorter run", path_run_shorter}, {"first step", path_step_first},
                     {"later step", path_step_later}, {"tokenize", path_tokenize}, {"detokenize", path_detokenize},
                     {"time", path_time},         {"cuda open", path_cuda_open}, {"cuda first run", path_cuda_run}};
        for (size_t i = 0; i < sizeof paths / sizeof paths[0] && failed <= 20; i++) sweep_both(paths[i].name, paths[i].fn);
        CHECK(thread_failures > 0, "a pool thread that could not be created was among the points (%d times)", thread_failures);
        printf("a pool's pthread_create failed %d times among them\n", thread_failures);
    }
    check_sh(dir, "rm -rf pkg pkg_now pkg_mins pkg_dec pkg_tok pkg_cu w.st w2.st");
    rmdir(dir);
    return check_summary();
}
