/* pool.c — the kernel thread pool (see lrc_pool.h).
 *
 * A run stores (fn, ctx, n_items) in plain fields, then bumps `gen` (a
 * release); workers read gen with acquire, so they see the task. Each worker
 * counts `pending` down after its chunk (release); the caller waits for zero
 * (acquire), so the workers' writes are visible to it and no worker still
 * reads the task fields, which the next run overwrites.
 *
 * Both sides wait by spinning (pause, plus a sched_yield every 64 pauses so
 * that on a busy or oversubscribed machine the thread being waited for can
 * run), then after SPIN_NS by sleeping on a condition variable. A sleeper
 * registers itself (sleepers / caller_sleeping) before re-checking under the
 * mutex; the waker checks the registration after changing the counter. Both
 * are seq_cst, so either the sleeper sees the new value or the waker sees the
 * sleeper and signals. While everybody spins a run makes no system call.
 *
 * A stealing run (lrc_pool_run_stealing) starts from the same chunks, each
 * held as one word, (next item << 32) | end, that its owner advances from
 * the front and others, once their own chunk is done, shorten from the
 * back, an item at a time, by compare-and-swap: each item runs exactly once,
 * and with no thread delayed each thread runs exactly its static chunk. */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT_S */
#include "lrc_runtime.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Long enough to cover the gap between back-to-back kernel launches, short
 * enough that an idle pool stops burning CPU almost at once. */
#define SPIN_NS 50000

/* One thread's chunk in a stealing run, on its own cache line. */
typedef struct {
    _Alignas(64) atomic_uint_fast64_t span;
} lrc_chunk_slot;

typedef struct lrc_worker {
    lrc_pool *pool;
    int thread;
    pthread_t handle;
} lrc_worker;

struct lrc_pool {
    /* Each counter on its own cache line: the caller's bump of gen should
     * not contend with the workers' count-down of pending. */
    _Alignas(64) atomic_uint_fast64_t gen; /* one per run; written by the caller */
    _Alignas(64) atomic_int pending;       /* workers still in this run */
    _Alignas(64) atomic_int sleepers;      /* workers blocked on `wake` */
    atomic_bool caller_sleeping;
    atomic_bool busy; /* catches nested or concurrent runs */

    /* The task; read by workers only between gen and their pending count. */
    lrc_task_fn fn; /* NULL asks the workers to exit */
    void *ctx;
    int64_t n_items;
    bool stealing;         /* the run's items may run on any thread (chunks in slots) */
    lrc_chunk_slot *slots; /* n_threads */

    int n_threads;
    lrc_worker *workers; /* n_threads - 1 */
    /* lrc_pool_count_busy: set between runs by the caller, so workers see it
     * with the task; each thread adds to its own slot of busy_s */
    bool counting;
    double wall_s, *busy_s;
    pthread_mutex_t mu;
    pthread_cond_t wake; /* workers sleep here for a new gen */
    pthread_cond_t done; /* the caller sleeps here for pending == 0 */
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Called every 64 spins: true once the spin has lasted SPIN_NS. */
static bool spun_out(double deadline)
{
    if (lrc_now_s() > deadline) return true;
    sched_yield();
    return false;
}

/* The documented partition (lrc_pool.h); overflow-free for any n_items. */
static void chunk(int64_t n_items, int n_threads, int t, int64_t *begin, int64_t *end)
{
    int64_t q = n_items / n_threads, r = n_items % n_threads;
    *begin = t * q + (t < r ? t : r);
    *end = *begin + q + (t < r ? 1 : 0);
}

#define SPAN_MASK 0xffffffffu

/* Takes one item of slot s, its first (front) or its last: false when
 * the slot is empty. */
static bool take_item(lrc_chunk_slot *s, bool front, int64_t *item)
{
    uint_fast64_t v = atomic_load_explicit(&s->span, memory_order_relaxed);
    for (;;) {
        uint_fast64_t lo = v >> 32, hi = v & SPAN_MASK;
        if (lo >= hi) return false;
        uint_fast64_t nv = front ? ((lo + 1) << 32) | hi : (lo << 32) | (hi - 1);
        if (atomic_compare_exchange_weak_explicit(&s->span, &v, nv, memory_order_relaxed, memory_order_relaxed)) {
            *item = (int64_t)(front ? lo : hi - 1);
            return true;
        }
    }
}

/* Thread t's own items from the front, then the other threads' from
 * their backs, until every slot is empty. */
static void run_stealing(lrc_pool *p, int t)
{
    int64_t it;
    while (take_item(&p->slots[t], true, &it)) p->fn(p->ctx, it, it + 1, t);
    for (int found = 1; found;) {
        found = 0;
        for (int d = 1; d < p->n_threads; d++)
            while (take_item(&p->slots[(t + d) % p->n_threads], false, &it)) {
                p->fn(p->ctx, it, it + 1, t);
                found = 1;
            }
    }
}

static void run_chunk(lrc_pool *p, int t)
{
    int64_t begin, end;
    chunk(p->n_items, p->n_threads, t, &begin, &end);
    if (begin >= end && !p->stealing) return;
    double t0 = p->counting ? lrc_now_s() : 0;
    if (p->stealing)
        run_stealing(p, t);
    else
        p->fn(p->ctx, begin, end, t);
    if (p->counting) p->busy_s[t] += lrc_now_s() - t0;
}

/* Returns the first generation after `seen`. */
static uint64_t wait_for_gen(lrc_pool *p, uint64_t seen)
{
    uint64_t g;
    double deadline = lrc_now_s() + 1e-9 * SPIN_NS;
    for (unsigned i = 1;; i++) {
        g = atomic_load_explicit(&p->gen, memory_order_acquire);
        if (g != seen) return g;
        if (i % 64 == 0 && spun_out(deadline)) break;
        cpu_relax();
    }
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add(&p->sleepers, 1);
    while ((g = atomic_load(&p->gen)) == seen) pthread_cond_wait(&p->wake, &p->mu);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->mu);
    return g;
}

static void *worker_main(void *arg)
{
    lrc_worker *w = arg;
    lrc_pool *p = w->pool;
    uint64_t seen = 0;
    for (;;) {
        seen = wait_for_gen(p, seen);
        if (!p->fn) return NULL;
        run_chunk(p, w->thread);
        /* No access to the task after this: the caller may reuse it. */
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_sleeping)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

/* Hands the task in p's fields to every worker. */
static void publish(lrc_pool *p)
{
    atomic_store_explicit(&p->pending, p->n_threads - 1, memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1); /* seq_cst: also a release of the task */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
}

static void wait_for_workers(lrc_pool *p)
{
    double deadline = lrc_now_s() + 1e-9 * SPIN_NS;
    for (unsigned i = 1;; i++) {
        if (atomic_load_explicit(&p->pending, memory_order_acquire) == 0) return;
        if (i % 64 == 0 && spun_out(deadline)) break;
        cpu_relax();
    }
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->caller_sleeping, true);
    while (atomic_load(&p->pending) != 0) pthread_cond_wait(&p->done, &p->mu);
    atomic_store(&p->caller_sleeping, false);
    pthread_mutex_unlock(&p->mu);
}

/* Stops and joins the first n workers, then frees p. */
static void shut_down(lrc_pool *p, int n)
{
    if (n > 0) {
        p->fn = NULL;
        publish(p);
        for (int i = 0; i < n; i++) pthread_join(p->workers[i].handle, NULL);
    }
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    free(p->workers);
    free(p->busy_s);
    free(p->slots);
    free(p);
}

lrc_pool *lrc_pool_new(int n_threads, lrc_err *err)
{
    if (n_threads < 1 || n_threads > LRC_POOL_MAX_THREADS) {
        lrc_err_set(err, "thread pool: %d threads requested, expected 1 to %d", n_threads,
                    LRC_POOL_MAX_THREADS);
        return NULL;
    }
    /* aligned, because the struct's cache-line alignment exceeds malloc's. */
    lrc_pool *p = lrc_aligned_alloc(_Alignof(lrc_pool), sizeof *p);
    lrc_worker *workers = lrc_calloc((size_t)n_threads, sizeof *workers);
    double *busy = lrc_calloc((size_t)n_threads, sizeof *busy);
    lrc_chunk_slot *slots = lrc_aligned_alloc(_Alignof(lrc_chunk_slot), (size_t)n_threads * sizeof *slots);
    if (!p || !workers || !busy || !slots) {
        free(p), free(workers), free(busy), free(slots);
        lrc_err_nomem(err, "for a thread pool of %d threads", n_threads);
        return NULL;
    }
    memset(p, 0, sizeof *p); /* the task fields; the atomics are set below */
    atomic_init(&p->gen, 0), atomic_init(&p->pending, 0), atomic_init(&p->sleepers, 0);
    atomic_init(&p->caller_sleeping, false), atomic_init(&p->busy, false);
    p->n_threads = n_threads;
    p->workers = workers;
    p->busy_s = busy;
    p->slots = slots;
    for (int t = 0; t < n_threads; t++) atomic_init(&slots[t].span, 0);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->done, NULL);
    for (int i = 0; i < n_threads - 1; i++) {
        workers[i].pool = p;
        workers[i].thread = i + 1;
        /* a thread is memory too: a point of the tests' fault injection */
        int rc = lrc_alloc_fails() ? EAGAIN : pthread_create(&workers[i].handle, NULL, worker_main, &workers[i]);
        if (rc) {
            /* EAGAIN: the system's threads or memory ran out, which the host may retry */
            if (rc == EAGAIN) lrc_err_nomem(err, "or threads: thread pool: cannot create thread %d of %d: %s", i + 1, n_threads, strerror(rc));
            else lrc_err_set(err, "thread pool: cannot create thread %d of %d: %s", i + 1, n_threads, strerror(rc));
            shut_down(p, i);
            return NULL;
        }
    }
    return p;
}

void lrc_pool_free(lrc_pool *p)
{
    if (p) shut_down(p, p->n_threads - 1);
}

int lrc_pool_threads(const lrc_pool *p) { return p->n_threads; }

static int pool_run(lrc_pool *p, lrc_task_fn fn, void *ctx, int64_t n_items, bool stealing, lrc_err *err);

int lrc_pool_run(lrc_pool *p, lrc_task_fn fn, void *ctx, int64_t n_items, lrc_err *err)
{
    return pool_run(p, fn, ctx, n_items, false, err);
}

int lrc_pool_run_stealing(lrc_pool *p, lrc_task_fn fn, void *ctx, int64_t n_items, lrc_err *err)
{
    /* a chunk's bounds are 32 bits in its slot's word */
    return pool_run(p, fn, ctx, n_items, n_items <= (int64_t)SPAN_MASK, err);
}

static int pool_run(lrc_pool *p, lrc_task_fn fn, void *ctx, int64_t n_items, bool stealing, lrc_err *err)
{
    if (n_items <= 0) return LRC_OK;
    /* A run inside a run (or from a second thread) would wait for workers
     * that are busy with the outer run: a deadlock, refused instead. The
     * one-thread pool runs inline, so it can nest, but refuses alike to
     * keep the contract independent of the thread count. */
    if (atomic_exchange_explicit(&p->busy, true, memory_order_relaxed))
        return lrc_err_set(err, "thread pool: a run was started while another run on the same pool is going on "
                                "(a task that runs the pool it runs on, or two threads sharing one pool)");
    double t0 = p->counting ? lrc_now_s() : 0;
    if (p->n_threads == 1) {
        fn(ctx, 0, n_items, 0);
        if (p->counting) {
            double dt = lrc_now_s() - t0;
            p->wall_s += dt, p->busy_s[0] += dt;
        }
        atomic_store_explicit(&p->busy, false, memory_order_relaxed);
        return LRC_OK;
    }
    p->fn = fn;
    p->ctx = ctx;
    p->n_items = n_items;
    p->stealing = stealing;
    for (int t = 0; stealing && t < p->n_threads; t++) { /* published with the task by publish's seq_cst add */
        int64_t begin, end;
        chunk(n_items, p->n_threads, t, &begin, &end);
        atomic_store_explicit(&p->slots[t].span, ((uint_fast64_t)begin << 32) | (uint_fast64_t)end, memory_order_relaxed);
    }
    publish(p);
    run_chunk(p, 0);
    wait_for_workers(p);
    if (p->counting) p->wall_s += lrc_now_s() - t0;
    atomic_store_explicit(&p->busy, false, memory_order_relaxed);
    return LRC_OK;
}

void lrc_pool_count_busy(lrc_pool *p, bool on, bool from_zero)
{
    if (from_zero) {
        p->wall_s = 0;
        memset(p->busy_s, 0, (size_t)p->n_threads * sizeof *p->busy_s);
    }
    p->counting = on;
}

double lrc_pool_busy_fraction(const lrc_pool *p)
{
    double busy = 0;
    for (int t = 0; t < p->n_threads; t++) busy += p->busy_s[t];
    return p->wall_s > 0 ? busy / (p->wall_s * p->n_threads) : 0;
}

static int clamp_threads(long n)
{
    return n < 1 ? 1 : n > LRC_POOL_MAX_THREADS ? LRC_POOL_MAX_THREADS : (int)n;
}

int lrc_pool_default_threads(void)
{
    /* Grow the mask until the kernel accepts it: machines may have more
     * CPUs than the fixed cpu_set_t holds. */
    for (int ncpu = 1024; ncpu <= 1 << 16; ncpu *= 2) {
        cpu_set_t *set = CPU_ALLOC(ncpu);
        if (!set) break;
        size_t size = CPU_ALLOC_SIZE(ncpu);
        CPU_ZERO_S(size, set);
        int rc = sched_getaffinity(0, size, set);
        int n = rc == 0 ? CPU_COUNT_S(size, set) : 0;
        CPU_FREE(set);
        if (rc == 0) return clamp_threads(n);
        if (errno != EINVAL) break;
    }
    return clamp_threads(sysconf(_SC_NPROCESSORS_ONLN));
}
