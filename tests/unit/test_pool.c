/* test_pool — the kernel thread pool: every item visited exactly once, the
 * documented partition, back-to-back runs, visibility of the workers'
 * results, both the spinning and the sleeping wait paths, bad thread
 * counts, stealing runs (every item once; a held thread's items taken by the
 * others), the busy fraction a profile reports, and lrc_params_init's
 * tensors filled alike on any number of threads. Run it under
 * -fsanitize=thread too: the pool's memory ordering is what keeps the plain
 * writes below race-free. */
#define _GNU_SOURCE
#include "check.h"
#include "runtime/lrc_runtime.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* The partition as lrc_pool.h documents it, written out independently. */
static void expected_chunk(int64_t n, int T, int t, int64_t *begin, int64_t *end)
{
    int64_t q = n / T, r = n % T;
    *begin = t * q + (t < r ? t : r);
    *end = *begin + q + (t < r ? 1 : 0);
}

/* ---- every item exactly once, in the documented chunks ----------------- */

#define MAXT 64

typedef struct visit_ctx {
    uint8_t *count;        /* per item: how often it was visited */
    int calls[MAXT];       /* per thread: how often fn ran there */
    int64_t begin[MAXT], end[MAXT];
} visit_ctx;

static void visit(void *ctx, int64_t begin, int64_t end, int thread)
{
    visit_ctx *v = ctx;
    v->calls[thread]++;
    v->begin[thread] = begin;
    v->end[thread] = end;
    for (int64_t i = begin; i < end; i++) v->count[i]++;
}

static void check_partition(lrc_pool *p, int T, int64_t n, int rep)
{
    visit_ctx v;
    memset(&v, 0, sizeof v);
    v.count = calloc((size_t)(n > 0 ? n : 1), 1);
    lrc_pool_run(p, visit, &v, n, NULL);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += v.count[i] != 1;
    CHECK(bad == 0, "T=%d n=%lld rep %d: %lld items not visited exactly once", T, (long long)n, rep,
          (long long)bad);
    for (int t = 0; t < T; t++) {
        int64_t b, e;
        expected_chunk(n, T, t, &b, &e);
        if (b == e) {
            CHECK(v.calls[t] == 0, "T=%d n=%lld: fn called for the empty chunk of thread %d", T,
                  (long long)n, t);
        } else {
            CHECK(v.calls[t] == 1 && v.begin[t] == b && v.end[t] == e,
                  "T=%d n=%lld: thread %d got %d calls, last [%lld,%lld), expected [%lld,%lld)", T,
                  (long long)n, t, v.calls[t], (long long)v.begin[t], (long long)v.end[t],
                  (long long)b, (long long)e);
        }
    }
    free(v.count);
}

static void test_partition(void)
{
    static const int64_t sizes[] = {0, 1, 2, 3, 7, 1000, 1 << 20};
    static const int threads[] = {1, 2, 3, 4, 8};
    for (size_t k = 0; k < sizeof threads / sizeof *threads; k++) {
        int T = threads[k];
        lrc_err err;
        lrc_pool *p = lrc_pool_new(T, &err);
        CHECK(p && lrc_pool_threads(p) == T, "lrc_pool_new(%d) failed", T);
        if (!p) continue;
        for (int rep = 0; rep < 3; rep++)
            for (size_t j = 0; j < sizeof sizes / sizeof *sizes; j++) check_partition(p, T, sizes[j], rep);
        lrc_pool_free(p);
    }
}

/* The formula itself: contiguous, covering, near-equal, chunk t to thread t. */
static void test_formula(void)
{
    int bad = 0;
    for (int T = 1; T <= 17; T++)
        for (int64_t n = 0; n <= 100; n++) {
            int64_t prev_end = 0, lo = INT64_MAX, hi = 0;
            for (int t = 0; t < T; t++) {
                int64_t b, e;
                expected_chunk(n, T, t, &b, &e);
                bad += b != prev_end || e < b;
                lo = e - b < lo ? e - b : lo;
                hi = e - b > hi ? e - b : hi;
                prev_end = e;
            }
            bad += prev_end != n || hi - lo > 1;
        }
    CHECK(bad == 0, "the documented formula is not a near-equal contiguous partition (%d cases)", bad);
    int64_t b, e;
    expected_chunk(INT64_MAX, 3, 2, &b, &e);
    CHECK(e == INT64_MAX, "the formula must not overflow for huge n");
}

/* ---- results visible after run, on both wait paths ---------------------- */

typedef struct fill_ctx {
    int64_t *out;
    int slow_thread; /* this thread sleeps first, so the caller waits asleep */
} fill_ctx;

static void fill(void *ctx, int64_t begin, int64_t end, int thread)
{
    fill_ctx *f = ctx;
    if (thread == f->slow_thread) usleep(2000);
    for (int64_t i = begin; i < end; i++) f->out[i] = 3 * i + 1;
}

static void test_visibility(void)
{
    enum { N = 4099 };
    lrc_err err;
    lrc_pool *p = lrc_pool_new(4, &err);
    CHECK(p != NULL, "lrc_pool_new(4): %s", err.msg);
    if (!p) return;
    int64_t *out = malloc(N * sizeof *out);
    /* slow_thread -1: hot path; 3: caller sleeps; then an idle gap longer
     * than the spin so the workers are asleep when the run starts. */
    for (int mode = 0; mode < 3; mode++)
        for (int rep = 0; rep < 20; rep++) {
            memset(out, 0, N * sizeof *out);
            fill_ctx f = {out, mode == 1 ? 3 : -1};
            if (mode == 2) usleep(1000);
            lrc_pool_run(p, fill, &f, N, NULL);
            int64_t bad = 0;
            for (int64_t i = 0; i < N; i++) bad += out[i] != 3 * i + 1;
            CHECK(bad == 0, "mode %d rep %d: %lld results not visible after run", mode, rep,
                  (long long)bad);
        }
    free(out);
    lrc_pool_free(p);
}

/* ---- many tiny runs; the cost of an empty one ---------------------------- */

typedef struct sum_ctx {
    int64_t partial[MAXT];
} sum_ctx;

static void sum(void *ctx, int64_t begin, int64_t end, int thread)
{
    sum_ctx *s = ctx;
    for (int64_t i = begin; i < end; i++) s->partial[thread] += i;
}

static void nothing(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)ctx, (void)begin, (void)end, (void)thread;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Prints, does not check: timing depends on the machine and its load. The
 * median of batches ignores the batches a preemption landed in. */
static void report_empty_run(lrc_pool *p)
{
    enum { BATCHES = 100, PER_BATCH = 100 };
    double batch[BATCHES], total = 0;
    for (int r = 0; r < 1000; r++) lrc_pool_run(p, nothing, NULL, 2, NULL); /* warm up */
    for (int b = 0; b < BATCHES; b++) {
        double t0 = now_us();
        for (int r = 0; r < PER_BATCH; r++) lrc_pool_run(p, nothing, NULL, 2, NULL);
        batch[b] = (now_us() - t0) / PER_BATCH;
        total += batch[b];
    }
    qsort(batch, BATCHES, sizeof *batch, cmp_double);
    printf("empty run with 2 threads: %.2f us (median of %d batches of %d; mean %.2f us)\n",
           batch[BATCHES / 2], BATCHES, PER_BATCH, total / BATCHES);
}

static void test_back_to_back(void)
{
    enum { RUNS = 10000 };
    static const int threads[] = {2, 3, 4, 8};
    for (size_t k = 0; k < sizeof threads / sizeof *threads; k++) {
        int T = threads[k];
        lrc_err err;
        lrc_pool *p = lrc_pool_new(T, &err);
        CHECK(p != NULL, "lrc_pool_new(%d): %s", T, err.msg);
        if (!p) continue;
        sum_ctx s;
        memset(&s, 0, sizeof s);
        for (int r = 0; r < RUNS; r++) lrc_pool_run(p, sum, &s, 1 + r % 16, NULL);
        int64_t total = 0, want = 0;
        for (int t = 0; t < T; t++) total += s.partial[t];
        for (int r = 0; r < RUNS; r++) want += (int64_t)(r % 16) * (r % 16 + 1) / 2;
        CHECK(total == want, "T=%d: %d tiny runs summed to %lld, expected %lld", T, RUNS,
              (long long)total, (long long)want);
        if (T == 2) report_empty_run(p);
        lrc_pool_free(p);
    }
}

/* ---- deterministic per-thread partial sums ------------------------------ */

typedef struct fsum_ctx {
    const float *x;
    float partial[MAXT];
} fsum_ctx;

static void fsum(void *ctx, int64_t begin, int64_t end, int thread)
{
    fsum_ctx *s = ctx;
    float acc = 0;
    for (int64_t i = begin; i < end; i++) acc += s->x[i];
    s->partial[thread] = acc;
}

static void test_determinism(void)
{
    enum { N = 100003 };
    float *x = malloc(N * sizeof *x);
    for (int i = 0; i < N; i++) x[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    lrc_err err;
    lrc_pool *p = lrc_pool_new(3, &err);
    CHECK(p != NULL, "lrc_pool_new(3): %s", err.msg);
    if (p) {
        float first = 0;
        int differ = 0;
        for (int r = 0; r < 50; r++) {
            fsum_ctx s = {.x = x};
            lrc_pool_run(p, fsum, &s, N, NULL);
            float total = s.partial[0] + s.partial[1] + s.partial[2];
            if (r == 0) first = total;
            else differ += memcmp(&total, &first, sizeof total) != 0;
        }
        CHECK(differ == 0, "a fixed-thread-count float sum changed in %d of 49 runs", differ);
        lrc_pool_free(p);
    }
    free(x);
}

/* ---- parameters filled on the pool ------------------------------------- */

/* lrc_params_init hands tensors to threads as they come free: every tensor
 * must be filled, once, with its own stream's values, so that any thread
 * count (and none) writes the same bytes. */
static void test_params_init(void)
{
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    static const int64_t rows[] = {300, 1, 37, 64, 5, 1000, 2, 64, 129};
    for (int i = 0; i < (int)(sizeof rows / sizeof *rows); i++) {
        char name[32];
        snprintf(name, sizeof name, "p%d.weight", i);
        lrc_shape s = {2, {rows[i], 64}};
        lrc_init init = {i % 3 == 2 ? LRC_INIT_XAVIER_NORMAL : LRC_INIT_NORMAL, 0.02 * (i + 1)};
        if (i == 4) init = (lrc_init){LRC_INIT_ONES, 0};
        CHECK(lrc_graph_add_param(g, name, &s, init, "test", "test_pool.c", &err) >= 0, "add_param %s: %s", name, err.msg);
    }
    lrc_tensor_set serial;
    CHECK(lrc_params_init(g, 42, NULL, &serial, &err) == LRC_OK, "serial init: %s", err.msg);
    int zeros = 0;
    for (int i = 0; i < serial.n; i++) {
        const float *d = serial.items[i]->data;
        zeros += d[0] == 0.f && d[serial.items[i]->nbytes / 4 - 1] == 0.f;
    }
    CHECK(serial.n == 9 && zeros == 0, "%d tensors, %d left unfilled", serial.n, zeros);
    static const int counts[] = {1, 2, 3, 8, 16};
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        lrc_pool *p = lrc_pool_new(counts[k], &err);
        lrc_tensor_set par;
        CHECK(p && lrc_params_init(g, 42, p, &par, &err) == LRC_OK, "init on %d threads: %s", counts[k], err.msg);
        int differ = par.n != serial.n;
        for (int i = 0; i < par.n && !differ; i++)
            differ = strcmp(par.items[i]->name, serial.items[i]->name) || par.items[i]->nbytes != serial.items[i]->nbytes ||
                     memcmp(par.items[i]->data, serial.items[i]->data, par.items[i]->nbytes);
        CHECK(!differ, "init on %d threads differs from the serial one", counts[k]);
        lrc_tensor_set_clear(&par);
        lrc_pool_free(p);
    }
    lrc_tensor_set_clear(&serial);
    lrc_graph_free(g);
}

/* ---- construction and destruction -------------------------------------- */

static void test_lifecycle(void)
{
    static const int invalid[] = {0, -1, -1000, LRC_POOL_MAX_THREADS + 1, 1 << 30};
    for (size_t k = 0; k < sizeof invalid / sizeof *invalid; k++) {
        lrc_err err = {0};
        lrc_pool *p = lrc_pool_new(invalid[k], &err);
        CHECK(p == NULL && err.msg[0] && !strchr(err.msg, '\n'),
              "lrc_pool_new(%d) must fail with a one-line message, got %p \"%s\"", invalid[k],
              (void *)p, err.msg);
        lrc_pool_free(p);
    }
    lrc_pool_free(NULL);
    for (int T = 1; T <= 8; T *= 2) { /* freed without ever running */
        lrc_err err;
        lrc_pool *p = lrc_pool_new(T, &err);
        CHECK(p && lrc_pool_threads(p) == T, "lrc_pool_new(%d)", T);
        lrc_pool_free(p);
    }
    lrc_err err;
    lrc_pool *p = lrc_pool_new(4, &err); /* freed while its workers sleep */
    CHECK(p != NULL, "lrc_pool_new(4): %s", err.msg);
    if (p) {
        sum_ctx s;
        memset(&s, 0, sizeof s);
        lrc_pool_run(p, sum, &s, 100, NULL);
        usleep(2000);
        lrc_pool_free(p);
    }
    p = lrc_pool_new(4, &err); /* idle workers block instead of spinning */
    if (p) {
        sum_ctx s;
        memset(&s, 0, sizeof s);
        lrc_pool_run(p, sum, &s, 100, NULL);
        double cpu0 = cpu_ms(), wall0 = now_us();
        usleep(200000);
        double cpu = cpu_ms() - cpu0, wall = (now_us() - wall0) / 1e3;
        CHECK(cpu < 0.25 * wall, "an idle pool of 4 used %.1f ms of CPU in %.1f ms", cpu, wall);
        lrc_pool_free(p);
    }
    p = lrc_pool_new(MAXT, &err); /* more threads than this machine has */
    CHECK(p != NULL, "lrc_pool_new(%d): %s", MAXT, err.msg);
    if (p) {
        check_partition(p, MAXT, 1000, 0);
        check_partition(p, MAXT, 10, 0);
        lrc_pool_free(p);
    }
    int d = lrc_pool_default_threads();
    CHECK(d >= 1 && d <= LRC_POOL_MAX_THREADS, "lrc_pool_default_threads() = %d", d);
    printf("default threads: %d\n", d);
}

/* ---- stealing runs ------------------------------------------------------ */

typedef struct steal_ctx {
    uint8_t *count;
    int *ran_on;          /* per item: the thread that ran it */
    int wider;            /* calls of more than one item */
    atomic_int stolen;    /* an item of chunk 0 ran off thread 0 */
    int64_t chunk0_end;
    int hold_item0;       /* item 0 waits (up to 10 s) until one is */
} steal_ctx;

static void steal_visit(void *ctx, int64_t begin, int64_t end, int thread)
{
    steal_ctx *v = ctx;
    if (end - begin != 1) v->wider = 1; /* one thread at a time takes a call's items */
    for (int64_t i = begin; i < end; i++) {
        if (i < v->chunk0_end && thread != 0) atomic_store(&v->stolen, 1);
        if (i == 0 && v->hold_item0)
            for (int w = 0; w < 10000 && !atomic_load(&v->stolen); w++) usleep(1000);
        v->count[i]++;
        v->ran_on[i] = thread;
    }
}

/* lrc_pool_run_stealing: every item exactly once, one per call; and a
 * thread held inside its first item has the rest of its chunk taken by the
 * others (item 0 returns only once another thread ran an item of chunk 0). */
static void test_stealing(void)
{
    static const int64_t sizes[] = {0, 1, 2, 3, 7, 1000};
    static const int threads[] = {1, 2, 3, 4, 8};
    for (size_t k = 0; k < sizeof threads / sizeof *threads; k++) {
        int T = threads[k];
        lrc_err err;
        lrc_pool *p = lrc_pool_new(T, &err);
        CHECK(p != NULL, "lrc_pool_new(%d): %s", T, err.msg);
        if (!p) continue;
        for (size_t j = 0; j < sizeof sizes / sizeof *sizes; j++)
            for (int hold = 0; hold <= (T > 1 && sizes[j] >= T); hold++) {
                int64_t n = sizes[j], b0, e0;
                expected_chunk(n, T, 0, &b0, &e0);
                steal_ctx v = {.count = calloc((size_t)n + 1, 1), .ran_on = calloc((size_t)n + 1, sizeof(int)), .chunk0_end = e0,
                               .hold_item0 = hold && e0 > 1};
                atomic_init(&v.stolen, 0);
                lrc_pool_run_stealing(p, steal_visit, &v, n, NULL);
                int64_t bad = 0;
                for (int64_t i = 0; i < n; i++) bad += v.count[i] != 1;
                CHECK(bad == 0, "stealing T=%d n=%lld: %lld items not run exactly once", T, (long long)n, (long long)bad);
                CHECK(T == 1 || !v.wider, "stealing T=%d n=%lld: a call of more than one item", T, (long long)n);
                if (v.hold_item0) {
                    CHECK(atomic_load(&v.stolen), "stealing T=%d n=%lld: no other thread took an item of thread 0's chunk", T, (long long)n);
                    CHECK(v.ran_on[e0 - 1] != 0, "stealing T=%d n=%lld: chunk 0's last item ran on thread 0 while it was held", T, (long long)n);
                }
                free(v.count);
                free(v.ran_on);
            }
        lrc_pool_free(p);
    }
}

static void nap(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)ctx, (void)thread;
    for (int64_t i = begin; i < end; i++) usleep(2000);
}

/* lrc_pool_count_busy: one thread alone is busy for the whole run; of two
 * threads with one item, the second has no chunk, so at most half the time
 * is busy; with counting off (never on, or paused) nothing is counted. */
static void test_busy_fraction(void)
{
    lrc_err err;
    lrc_pool *one = lrc_pool_new(1, &err), *two = lrc_pool_new(2, &err);
    CHECK(one && two, "pools: %s", err.msg);
    if (!one || !two) return;
    lrc_pool_run(two, nap, NULL, 1, NULL);
    CHECK(lrc_pool_busy_fraction(two) == 0, "counting off: busy %g", lrc_pool_busy_fraction(two));
    lrc_pool_count_busy(one, true, true);
    lrc_pool_run(one, nap, NULL, 3, NULL);
    lrc_pool_count_busy(one, false, false);
    CHECK(lrc_pool_busy_fraction(one) == 1.0, "one thread: busy %.17g, expected 1", lrc_pool_busy_fraction(one));
    lrc_pool_count_busy(two, true, true);
    lrc_pool_run(two, nap, NULL, 1, NULL);
    lrc_pool_count_busy(two, false, false);
    double f = lrc_pool_busy_fraction(two);
    CHECK(f > 0 && f <= 0.5, "two threads, one item: busy %g, expected in (0, 0.5]", f);
    lrc_pool_run(two, nap, NULL, 2, NULL); /* paused: not counted */
    CHECK(lrc_pool_busy_fraction(two) == f, "paused counting: busy %g, was %g", lrc_pool_busy_fraction(two), f);
    lrc_pool_count_busy(two, true, true); /* from zero again */
    lrc_pool_count_busy(two, false, false);
    CHECK(lrc_pool_busy_fraction(two) == 0, "restarted counting: busy %g", lrc_pool_busy_fraction(two));
    lrc_pool_free(one);
    lrc_pool_free(two);
}

/* ---- a nested run: refused with an error, the outer run unharmed ------- */

typedef struct nest_ctx {
    lrc_pool *pool;
    bool stealing;
    atomic_int refused, other, outer_items; /* nested runs refused / returning anything else; items the outer run did */
    lrc_err err;                           /* the first refusal's message */
    atomic_int inner_items;                /* items a nested run did: none */
} nest_ctx;

static void inner_item(void *ctx, int64_t begin, int64_t end, int thread)
{
    (void)thread;
    atomic_fetch_add(&((nest_ctx *)ctx)->inner_items, (int)(end - begin));
}

static void nesting(void *ctx, int64_t begin, int64_t end, int thread)
{
    nest_ctx *c = ctx;
    (void)thread;
    lrc_err e;
    int rc = c->stealing ? lrc_pool_run_stealing(c->pool, inner_item, c, 5, &e) : lrc_pool_run(c->pool, inner_item, c, 5, &e);
    if (rc == LRC_EUSER && atomic_fetch_add(&c->refused, 1) == 0) c->err = e; /* read after the run: the pool orders it */
    if (rc != LRC_EUSER) atomic_fetch_add(&c->other, 1);
    atomic_fetch_add(&c->outer_items, (int)(end - begin));
}

/* A task that runs the pool it runs on: before, lrc_pool_run aborted the
 * process; now the inner run returns LRC_EUSER with a message and does
 * nothing, the outer run completes, and the pool runs again afterwards. */
static void test_nested_run(void)
{
    static const int threads[] = {1, 2, 4};
    for (int ti = 0; ti < 3; ti++)
        for (int steal = 0; steal < 2; steal++) {
            int T = threads[ti];
            lrc_err err;
            lrc_pool *p = lrc_pool_new(T, &err);
            CHECK(p != NULL, "T=%d: %s", T, err.msg);
            if (!p) continue;
            nest_ctx c = {.pool = p, .stealing = steal};
            c.err.msg[0] = 0;
            atomic_init(&c.refused, 0), atomic_init(&c.other, 0), atomic_init(&c.outer_items, 0), atomic_init(&c.inner_items, 0);
            int rc = steal ? lrc_pool_run_stealing(p, nesting, &c, 8, &err) : lrc_pool_run(p, nesting, &c, 8, &err);
            int calls = atomic_load(&c.refused) + atomic_load(&c.other);
            CHECK(rc == LRC_OK && atomic_load(&c.outer_items) == 8, "T=%d steal=%d: the outer run returned %d after %d of 8 items", T, steal,
                  rc, atomic_load(&c.outer_items));
            CHECK(calls > 0 && atomic_load(&c.other) == 0 && atomic_load(&c.inner_items) == 0,
                  "T=%d steal=%d: %d of %d nested runs not refused, %d items run by them", T, steal, atomic_load(&c.other), calls,
                  atomic_load(&c.inner_items));
            CHECK(strstr(c.err.msg, "thread pool") && strstr(c.err.msg, "another run") && !strchr(c.err.msg, '\n'),
                  "T=%d steal=%d: the refusal says '%s'", T, steal, c.err.msg);
            visit_ctx v;
            memset(&v, 0, sizeof v);
            v.count = calloc(16, 1);
            rc = lrc_pool_run(p, visit, &v, 16, &err);
            int64_t bad = 0;
            for (int i = 0; i < 16; i++) bad += v.count[i] != 1;
            CHECK(rc == LRC_OK && bad == 0, "T=%d steal=%d: the run after a refused one returned %d, %lld items wrong", T, steal, rc,
                  (long long)bad);
            free(v.count);
            lrc_pool_free(p);
        }
}

int main(void)
{
    test_nested_run();
    test_stealing();
    test_busy_fraction();
    test_formula();
    test_lifecycle();
    test_partition();
    test_visibility();
    test_back_to_back();
    test_determinism();
    test_params_init();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
