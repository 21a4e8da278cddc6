/* lrc_pool.h — the thread pool that compiled CPU kernels run on.
 *
 * A pool of n_threads threads: the caller's thread plus n_threads - 1
 * workers. lrc_pool_run splits [0, n_items) into n_threads contiguous chunks
 * and runs chunk t on thread t (0 = the caller). The chunks depend only on
 * (n_items, n_threads), never on timing, so a kernel that reduces within a
 * chunk gives bit-identical results from run to run for a fixed thread count.
 *
 * A compiled model launches a few hundred kernels per forward pass, some
 * tiny, so a run is cheap (microseconds): idle workers spin briefly on a
 * generation counter before they fall back to sleeping, and the caller runs
 * chunk 0 itself instead of waiting for a worker to pick it up. Workers that
 * stay idle block, so an idle pool costs no CPU. */
#ifndef LRC_POOL_H
#define LRC_POOL_H

#include "../ir/lrc_ir.h"

#define LRC_POOL_MAX_THREADS 1024

typedef struct lrc_pool lrc_pool;

/* n_threads >= 1 (the caller's thread counts as one: n_threads - 1 workers).
 * Returns NULL and fills err for n_threads < 1 or > LRC_POOL_MAX_THREADS or
 * when threads cannot be created. */
lrc_pool *lrc_pool_new(int n_threads, lrc_err *err);
/* Joins the workers; NULL is fine. Must not be called during a run. */
void lrc_pool_free(lrc_pool *p);
int lrc_pool_threads(const lrc_pool *p);

/* Called once per non-empty chunk: items [begin, end) on thread `thread`. */
typedef void (*lrc_task_fn)(void *ctx, int64_t begin, int64_t end, int thread);

/* Runs fn over [0, n_items) and returns when every chunk is done; whatever
 * fn wrote is then visible to the caller. With T = n_threads,
 * q = n_items / T and r = n_items % T, thread t gets
 *     begin = t * q + min(t, r),  end = begin + q + (t < r ? 1 : 0),
 * so the first r threads get one item more. Empty chunks (n_items < T) are
 * skipped. n_items <= 0 returns at once; with one thread fn runs inline.
 *
 * Not reentrant: one run at a time per pool. Calling lrc_pool_run on a pool
 * from inside fn, or from two threads at once, is a bug (it aborts with a
 * message rather than deadlocking). Use one pool per calling thread. */
void lrc_pool_run(lrc_pool *p, lrc_task_fn fn, void *ctx, int64_t n_items);

/* Number of hardware threads this process may run on (sched_getaffinity),
 * at least 1 and at most LRC_POOL_MAX_THREADS, so it is always a valid
 * argument to lrc_pool_new. */
int lrc_pool_default_threads(void);

#endif
