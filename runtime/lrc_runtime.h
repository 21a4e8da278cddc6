/* lrc_runtime.h — the public header of the runtime layer: host tensors,
 * safetensors files, parameter initialisation, the backend interface and the
 * executor. Depends on ir/ only, so that a compiled package runs without Lua,
 * LLVM or NVRTC. */
#ifndef LRC_RUNTIME_H
#define LRC_RUNTIME_H

#include "../ir/lrc_ir.h"
#include "../ir/lrc_cuda_abi.h" /* the cuda launch table, shared with codegen/cuda */

typedef struct lrc_pool lrc_pool; /* the thread pool, below */

/* ---- safetensors ------------------------------------------------------- */

/* Reads the whole file; every structural problem (header length past the end,
 * invalid JSON, unknown dtype, offsets outside the data or overlapping, a
 * size that does not match the shape) is reported with the file name and the
 * byte offset or tensor name. */
int lrc_safetensors_load(const char *path, lrc_tensor_set *out, lrc_err *err);
/* A Hugging Face directory's weights: DIR/model.safetensors, or the shards
 * of DIR/model.safetensors.index.json in one set (runtime/safetensors_dir.c).
 * lrc_safetensors_load of a directory is this. */
int lrc_safetensors_load_dir(const char *dir, lrc_tensor_set *out, lrc_err *err);
/* The shards a model.safetensors.index.json lists (beside it), in one set;
 * lrc_safetensors_load of a path ending .safetensors.index.json is this. */
int lrc_safetensors_load_index(const char *index, lrc_tensor_set *out, lrc_err *err);
bool lrc_safetensors_is_index(const char *path);
/* The file a directory's weights load from: DIR/model.safetensors, else
 * DIR/model.safetensors.index.json, else DIR itself (whose load then says
 * what is missing). Newly allocated. */
char *lrc_safetensors_dir_file(const char *dir);
/* Same, from memory (the fuzz and unit tests use it). `what` names the source. */
int lrc_safetensors_parse(const uint8_t *buf, size_t len, const char *what, lrc_tensor_set *out,
                          lrc_err *err);
/* Writes a temporary file beside path and renames it over path, so a reader
 * never sees a partial file and a failure leaves no file behind. */
int lrc_safetensors_save(const char *path, const lrc_tensor_set *s, lrc_err *err);

/* ---- parameters -------------------------------------------------------- */

/* One f32 tensor per PARAM node of g, filled by its init rule. Each tensor's
 * random stream depends only on (seed, name), so adding a parameter does not
 * change the others, and the tensors are filled on pool's threads (NULL: on
 * the caller's alone) with the same values whatever the thread count. */
int lrc_params_init(const lrc_graph *g, uint64_t seed, lrc_pool *pool, lrc_tensor_set *out, lrc_err *err);
/* Checks that `file` holds exactly g's parameters with the right shapes and
 * returns them as f32 tensors in *out (ordered as in g). Reports a missing,
 * extra or wrongly shaped tensor by name, and then changes nothing; `what`
 * names the file. On success the F32 tensors have moved from file to *out
 * (a model's gigabytes are not copied) and the others were widened: file
 * keeps only those, to be cleared. */
int lrc_params_bind(const lrc_graph *g, lrc_tensor_set *file, const char *what,
                    lrc_tensor_set *out, lrc_err *err);
/* The model input of an input file (path names it), checked: `tokens` I32
 * [B, T] with B, T >= 1 and ids in [0, vocab), or `images` F32
 * [B, C, H, W] (a model's build checks C, H and W). *out: the one found;
 * other tensors are the model's to check once it is built. */
int lrc_tokens_check(const lrc_tensor_set *in, const char *path, int64_t vocab, const lrc_tensor **out, lrc_err *err);

/* Deterministic random numbers (splitmix64 seeding a xoshiro256** stream). */
typedef struct lrc_rng {
    uint64_t s[4];
} lrc_rng;
void lrc_rng_seed(lrc_rng *r, uint64_t seed);
uint64_t lrc_rng_next(lrc_rng *r);
double lrc_rng_uniform(lrc_rng *r); /* [0, 1) with 53 random bits */
double lrc_rng_normal(lrc_rng *r);  /* N(0, 1), Box-Muller */
uint64_t lrc_hash_str(const char *s, uint64_t seed);

/* ---- the thread pool ---------------------------------------------------- */

/* The thread pool that compiled CPU kernels run on.
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
#define LRC_POOL_MAX_THREADS 1024

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
 * from inside fn, or from two threads at once, is a bug: that run does
 * nothing and returns LRC_EUSER with a message in err (rather than
 * deadlocking); the outer run goes on. Use one pool per calling thread. */
int lrc_pool_run(lrc_pool *p, lrc_task_fn fn, void *ctx, int64_t n_items, lrc_err *err);
/* lrc_pool_run for tasks whose items are independent (any split of them
 * gives the same values): each thread starts on its chunk as above, one item
 * per call of fn, and a thread whose chunk is done takes the items left at
 * the end of another's, one at a time. On a machine whose other work delays
 * one thread the others finish its chunk instead of waiting for it. */
int lrc_pool_run_stealing(lrc_pool *p, lrc_task_fn fn, void *ctx, int64_t n_items, lrc_err *err);
/* A profile's view of the pool: while counting is on, each run's wall time
 * and each thread's time in its chunk are summed (from zero when asked);
 * the busy fraction is the threads' time over n_threads times the runs'
 * (1 - it is the share a run's threads sat idle, waiting for the slowest
 * chunk or with no chunk). Between runs only. */
void lrc_pool_count_busy(lrc_pool *p, bool on, bool from_zero);
double lrc_pool_busy_fraction(const lrc_pool *p);

/* Number of hardware threads this process may run on (sched_getaffinity),
 * at least 1 and at most LRC_POOL_MAX_THREADS, so it is always a valid
 * argument to lrc_pool_new. */
int lrc_pool_default_threads(void);

/* ---- backends ---------------------------------------------------------- */

typedef struct lrc_backend lrc_backend;

/* What every target provides (docs/architecture.md, rule 6). Buffers are opaque handles. */
typedef struct lrc_backend_ops {
    const char *name;
    bool (*supports_op)(const lrc_graph *g, const lrc_node *n);
    void *(*alloc)(lrc_backend *be, size_t nbytes, lrc_err *err);
    void (*free)(lrc_backend *be, void *buf);
    int (*write)(lrc_backend *be, void *dst, const void *src, size_t nbytes, lrc_err *err);
    int (*read)(lrc_backend *be, void *dst, const void *src, size_t nbytes, lrc_err *err);
    /* Runs node `id` of g; bufs[k] holds input k, out the result. */
    int (*launch)(lrc_backend *be, const lrc_graph *g, int id, void *const *bufs, void *out, lrc_err *err);
    int (*synchronize)(lrc_backend *be, lrc_err *err);
    void (*destroy)(lrc_backend *be);
} lrc_backend_ops;

struct lrc_backend {
    const lrc_backend_ops *ops;
    void *impl;
};

/* The reference backend: plain C, f32 storage, f64 accumulation. */
lrc_backend *lrc_backend_ref_new(void);
/* Looks a backend up by name ("ref"); explains which exist when not found. */
lrc_backend *lrc_backend_open(const char *name, lrc_err *err);
void lrc_backend_close(lrc_backend *be);

/* ---- compiled programs ------------------------------------------------- */

/* A compiled kernel (codegen/lrc_codegen.h): computes work items
 * [begin, end) with args[i] pointing at the buffer of its argument i. */
typedef void (*lrc_kernel_fn)(void **args, int64_t begin, int64_t end);

typedef enum lrc_buf_kind {
    LRC_BUF_NONE,    /* no storage: a value internal to a kernel */
    LRC_BUF_INPUT,   /* the caller's input tensor `name` */
    LRC_BUF_PARAM,   /* the parameter `name` */
    LRC_BUF_OUTPUT,  /* an output tensor `name`, allocated per run */
    LRC_BUF_ARENA,   /* an intermediate at `offset` in the arena */
    LRC_BUF_PERSIST, /* kernel-made data kept across runs (packed weights) */
    LRC_BUF_STATE,   /* a named state (KV cache): zeros, then kept across runs */
} lrc_buf_kind;

typedef struct lrc_plan_buf {
    lrc_buf_kind kind;
    char *name;
    lrc_dtype dtype;
    lrc_shape shape;
    int64_t offset, bytes;
    /* A parameter the compiler packed into its GEMM's panels (lrc compile
     * with weights, cpu): U8 [bytes] named WEIGHT@LAYOUT, its panels'
     * storage ("f32", "bf16" or "q8"; "" for any other buffer), columns per
     * panel, and the weight's columns and inner size as the GEMM sees them. */
    char packed[8];
    int64_t packed_panel, packed_cols, packed_inner;
} lrc_plan_buf;

/* Whether buffer b holds weight `name` packed at compile time: a parameter
 * NAME@LAYOUT, or fold.K:NAME@LAYOUT where norm gains were folded into it. */
bool lrc_plan_buf_packs(const lrc_plan_buf *b, const char *name);

typedef struct lrc_plan_launch {
    char *symbol;
    char *label;     /* for profiles: "gemm matmul+add (llama.lua:40)" */
    lrc_kernel_fn fn;
    int n_args;
    int *args;       /* buffer indices */
    int64_t n_items;
    bool once;       /* preparation: runs after parameters change */
    bool steal;      /* its items are independent: threads may take each other's (lrc_pool_run_stealing) */
    double flops, bytes;
    /* >= 0: a loop's back edge, no kernel (args: state, h_next, counts).
     * Iteration t copies h_next's rows b with t < counts[b] into the state,
     * then continues at launch loop_to while t + 1 < max(counts). */
    int loop_to;
} lrc_plan_launch;

/* Integer inputs checked before a run: values of bufs[buf] lie in [lo, hi). */
typedef struct lrc_plan_check {
    int buf;
    int64_t lo, hi;
} lrc_plan_check;

/* Buffers and ordered launches: what the runtime executes. */
typedef struct lrc_plan {
    lrc_plan_buf *bufs;
    int n_bufs;
    lrc_plan_launch *launches;
    int n_launches;
    lrc_plan_check *checks;
    int n_checks;
    int64_t arena_bytes;
} lrc_plan;

void lrc_plan_free(lrc_plan *p);
/* The tensor of set named as input or parameter buffer b, its dtype and
 * shape checked against the plan's; a one-line error otherwise. */
int lrc_plan_find_tensor(const lrc_plan_buf *b, const lrc_tensor_set *set, const lrc_tensor **out, lrc_err *err);
/* The plan's range checks of integer inputs (token ids, loop counts), on the host. */
int lrc_plan_check_ids(const lrc_plan *p, const lrc_tensor_set *inputs, lrc_err *err);
/* A loop's back edge after iteration t, on host memory: the rows b of
 * next with t < counts[b] copied into state; true when the body runs again
 * (t + 1 < max(counts)). Every host-side executor runs its loops with it. */
bool lrc_loop_rows(const int32_t *counts, int64_t rows, int64_t t, void *state, const void *next, size_t row_bytes);
/* Back edge li after iteration t with host buffers ptr (lrc_loop_rows). */
bool lrc_plan_back_edge(const lrc_plan *p, int li, int64_t t, void *const *ptr);

typedef struct lrc_exec lrc_exec;
/* A plan ready to run: arena and persistent buffers allocated. The plan
 * must outlive the exec and have every launch's fn set. */
int lrc_exec_new(const lrc_plan *plan, lrc_pool *pool, lrc_exec **out, lrc_err *err);
void lrc_exec_free(lrc_exec *x);
/* Binds parameters by name (f32, shapes checked); the preparation kernels
 * run again before the next forward. The tensors must outlive the exec. */
int lrc_exec_bind_params(lrc_exec *x, const lrc_tensor_set *params, lrc_err *err);
/* The bound parameters were written in place (an optimizer step): the
 * preparation kernels run again before the next forward. */
void lrc_exec_params_changed(lrc_exec *x);
/* Runs the plan on the inputs. Outputs already in *outputs (by name, F32,
 * the right shape) are written in place; the others are appended. */
int lrc_exec_run_plan(lrc_exec *x, const lrc_tensor_set *inputs, lrc_tensor_set *outputs, lrc_err *err);
/* Zeros every state buffer: a new sequence. */
void lrc_exec_reset_state(lrc_exec *x);
/* With profiling on, each launch's wall time is added to times_ns[i]. */
void lrc_exec_profile(lrc_exec *x, double *times_ns, int64_t *calls);

/* One launch as it ran: for traces. */
typedef struct lrc_trace_event {
    int launch;
    double start_ns, dur_ns; /* CLOCK_MONOTONIC */
} lrc_trace_event;
/* Records up to cap launches into events (*n counts them). */
void lrc_exec_trace(lrc_exec *x, lrc_trace_event *events, int64_t cap, int64_t *n);

/* ---- machine ceilings and traces (runtime/profile.c) -------------------- */

/* Seconds on the monotonic clock: the one timer every layer uses. */
double lrc_now_s(void);
/* The median of n >= 1 timings (v is sorted in place): what every timer reports. */
double lrc_median(double *v, int64_t n);

/* Copy bandwidth of this machine on the pool's threads, GB/s counting the
 * bytes read and written: the memory ceiling profiles compare against
 * (0: not measured, out of memory or the pool busy; so for the next too). */
double lrc_measure_copy_gbs(lrc_pool *pool, size_t bytes);
/* FLOP/s of a program's FMA probe kernel (LRC_PEAK_SYMBOL) on the pool:
 * flops_per_item is what one work item computes. */
double lrc_measure_peak_gflops(lrc_pool *pool, lrc_kernel_fn probe, double flops_per_item);
/* A trace that Perfetto and chrome://tracing open (Chrome's JSON format). */
int lrc_trace_write(const char *path, const lrc_plan *plan, const lrc_trace_event *ev, int64_t n, lrc_err *err);

/* ---- NVIDIA GPUs (runtime/cuda_probe.c) --------------------------------- */

typedef struct lrc_cuda_device {
    char name[128];
    int sm;               /* compute capability, 90 for sm_90 */
    int count;            /* devices */
    int64_t memory_bytes; /* of device 0 */
    int sms;              /* its multiprocessors */
} lrc_cuda_device;
/* Whether the driver, a device and cuBLAS are here (device 0 described);
 * else -1 and a one-line reason in why. */
int lrc_cuda_probe(lrc_cuda_device *dev, char *why, size_t n);

/* A cuda plan on device 0 (runtime/cuda_exec.c): table is its launch table
 * (codegen/cuda's, or a package's as loaded), image its cubin or PTX; both
 * are read during the call only.
 * Weights go up once (bf16 where the storage says so; F32, BF16 or F16
 * tensors, a BF16 one into bf16 storage copied as it is); each run uploads the
 * inputs, runs cuBLAS and the kernels in order on one stream, and brings
 * the outputs back as f32. */
typedef struct lrc_cuda_exec lrc_cuda_exec;
int lrc_cuda_exec_new(const lrc_plan *plan, const lrc_cuda_table *table, const void *image, lrc_cuda_exec **out, lrc_err *err);
int lrc_cuda_exec_bind_params(lrc_cuda_exec *x, const lrc_tensor_set *params, lrc_err *err);
int lrc_cuda_exec_run(lrc_cuda_exec *x, const lrc_tensor_set *inputs, lrc_tensor_set *outputs, lrc_err *err);
/* The launches alone, repeat times on the inputs of the last run: the
 * median wall time of one forward on the device (no copies). */
int lrc_cuda_exec_time(lrc_cuda_exec *x, int64_t repeat, double *median_ms, lrc_err *err);
/* From now on each run adds every launch's device time (CUDA events) to
 * times_ns[launch] and counts it in calls[launch]; and records up to cap
 * launches into events (*n counts them), as lrc_exec_profile / _trace do. */
void lrc_cuda_exec_profile(lrc_cuda_exec *x, double *times_ns, int64_t *calls);
void lrc_cuda_exec_trace(lrc_cuda_exec *x, lrc_trace_event *events, int64_t cap, int64_t *n);
/* The bytes launch li moves on the device: the plan's count (f32 elements)
 * scaled to its arguments' storage (bf16 halves them). */
double lrc_cuda_exec_bytes(const lrc_cuda_exec *x, int li);
/* Launch li's shape: blocks (of its grid), threads a block, and the bytes
 * a thread accesses at once where the renderer says (else 0). */
void lrc_cuda_exec_launch_shape(const lrc_cuda_exec *x, int li, int64_t *blocks, int *threads, int *access_bytes);
/* The device's ceilings, measured now: a device-to-device copy (GB/s, read
 * plus written) and a square bf16 cuBLAS GEMM (GFLOP/s), with buffers of at
 * most a sixteenth of device_bytes. */
int lrc_cuda_measure_ceilings(lrc_cuda_exec *x, int64_t device_bytes, double *copy_gbs, double *gemm_gflops, lrc_err *err);
void lrc_cuda_exec_free(lrc_cuda_exec *x);

/* ---- ahead-of-time packages -------------------------------------------- */

/* 2: the kernels' file is named (kernels.so, or a cubin); 3: a cuda GEMM may
 * add a residual (c_arg); 4: scratch_storage, access_bytes; 5: a cuda GEMM
 * may add a bias (bias_arg); 6: a cuda package's weights in bf16 storage
 * are written as BF16; 8: a cpu package's kernels.so holds the launch table
 * its plan is checked against (lrc_launch_table.h) */
#define LRC_PACKAGE_VERSION 8

/* A directory: package.json (plan and metadata), the kernels (kernels.so
 * for cpu; kernels.cubin, kernels.ptx and kernels.cu for cuda), and
 * weights.safetensors when weights were given at compile time. */
typedef struct lrc_package {
    lrc_plan plan;         /* launches resolved in kernels.so (cpu packages) */
    lrc_tensor_set weights;
    bool has_weights;
    lrc_cuda_table cuda;   /* a cuda package's launch table (meta's "cuda"), else empty */
    char *meta_json;       /* what compiled it: model, config, shapes, CPU or GPU */
    char target[16];       /* "cpu" or "cuda" */
    /* from meta, 0 or "" when absent: the token shape [batch, seq] it was
     * compiled for, a decoder's KV-cache positions (ctx), the vocabulary
     * (an image model's classes), a looped model's default iteration count;
     * cpu: the CPU and the features it needs, and what one work item of its
     * FMA probe kernel computes; cuda: the architecture */
    int64_t batch, seq, ctx, vocab, iterations;
    double peak_flops_per_item;
    char cpu[128], requires[128], arch[16];
    void *dl;
    /* Shorter shapes: a batch of fewer rows or a shorter sequence runs
     * padded to the smallest compiled shape that holds it, where the model
     * computes it as a prefix (batch_prefix, seq_prefix; else *_fixed says
     * why not). shapes[i] are those compiled besides [batch, seq], each a
     * package without weights (whose plan reads the weights of this one). */
    bool batch_prefix, seq_prefix;
    char batch_fixed[256], seq_fixed[256];
    int *batch_axis, *seq_axis; /* per plan buffer: where an input or output holds them, or -1 */
    char *dir;                  /* as loaded */
    struct lrc_package *shapes;
    int n_shapes;
} lrc_package;
#define LRC_PACKAGE_MAX_SHAPES 64
/* A looped model's iterations that a package runs when the caller gives
 * none (meta's "iterations", the config's T): the most lrc compile writes
 * and a package may say. */
#define LRC_PACKAGE_MAX_ITERATIONS 4096

/* package.json for plan p; kernels_file (in dir) is recorded with its size
 * and hash, so that a damaged one is never loaded. */
int lrc_package_write_plan(const char *dir, const lrc_plan *p, const char *kernels_file, const char *meta_json, lrc_err *err);
/* path is a directory with a package.json */
bool lrc_package_is(const char *path);
/* The target a package was compiled for ("cpu", "cuda"), read from its
 * package.json alone; "" when it cannot be read. */
void lrc_package_target(const char *dir, char *out, size_t n);
/* Reads and checks everything (format version, plan consistency, every
 * kernel symbol, weights); a damaged package is an error naming the file. */
int lrc_package_load(const char *dir, lrc_package *pkg, lrc_err *err);
void lrc_package_free(lrc_package *pkg);
/* A function of the package's kernels.so by name, or NULL. */
void *lrc_package_symbol(const lrc_package *pkg, const char *name);
/* A cuda package's device code, 0-terminated (malloc'd): its cubin, for
 * the GPU of its architecture, or its PTX, which the driver compiles for a
 * newer one. NULL and a message naming the file when it cannot be read. */
void *lrc_package_cuda_image(const char *dir, bool cubin, lrc_err *err);
/* The embedding API (lrc.h) runs packages; an open session's plan, and
 * its executor (lrc_executor_ops, below) for lrc forward's LRC_PROFILE look. */
struct lrc_session;
struct lrc_executor_ops;
void *lrc_session_executor(struct lrc_session *s, const struct lrc_executor_ops **ops, const lrc_plan **plan);
struct cJSON;
/* json.c: cJSON allocates through ir/util.c's checked allocators (its
 * hooks, set once for the process by lrc_json_hooks; malloc and free
 * underneath), so that fault injection reaches it. lrc_json_parse is
 * cJSON_ParseWithLengthOpts (end: where the value ended; may be NULL)
 * that says in *nomem whether a NULL means out of memory, not bad JSON. A
 * writer calls lrc_json_hooks first and compares lrc_alloc_failures
 * before and after, since cJSON's builders drop what they cannot
 * allocate. */
void lrc_json_hooks(void);
struct cJSON *lrc_json_parse(const char *text, size_t len, const char **end, bool *nomem);
/* A cuda package's launch table and package.json's "cuda" object
 * (runtime/package_cuda.c, the one place that knows the format): _read
 * checks it against the plan, a damaged one named as in path's; _json
 * makes the object for the meta of lrc_package_finish (NULL when out of
 * memory). */
int lrc_package_cuda_read(const struct cJSON *meta, const lrc_plan *p, const char *path, lrc_cuda_table *out, lrc_err *err);
struct cJSON *lrc_package_cuda_json(const lrc_cuda_table *t);
void lrc_cuda_table_free(lrc_cuda_table *t);
/* A cpu plan's launches against the launch table of its kernels.so (the
 * words of lrc_launch_table.h; NULL when the library has none): each
 * launch's kernel, items, flags and argument buffers with their sizes and
 * storage as compiled, launches that `lrc compile` packed away skipped. A
 * mismatch names the launch and the key, after `where` (package.json's path);
 * runtime/package_launches.c. */
int lrc_package_check_launches(const lrc_plan *p, const void *table, const char *where, lrc_err *err);
/* Writing a package: lrc_package_begin makes a directory beside dir, the
 * kernels and weights go into it, and lrc_package_finish writes
 * package.json and moves it into place (replacing an old package at dir
 * only then); lrc_package_abort removes it. A reader never sees half a
 * package, and a failure leaves none behind. */
typedef struct lrc_package_writer {
    char dir[4096], tmp[4160];
    bool cuda, started, nested;
} lrc_package_writer;
/* dir must not exist or be a package (which is replaced). */
int lrc_package_begin(lrc_package_writer *w, const char *dir, bool cuda, lrc_err *err);
/* A shorter shape [batch, seq] of the package w writes, as its own writer
 * (kernels and plan; finished into w's directory, moved with it). */
int lrc_package_begin_shape(lrc_package_writer *w, int64_t batch, int64_t seq, lrc_package_writer *sub, lrc_err *err);
/* Where a cpu package's kernels go: the object file codegen writes
 * (object), or the shared library linked from it. */
void lrc_package_kernels_path(const lrc_package_writer *w, bool object, char *out, size_t n);
/* A cuda package's CUDA C, cubin and PTX. */
int lrc_package_write_cuda(lrc_package_writer *w, const char *source, const void *cubin, size_t cubin_size, const char *ptx,
                           lrc_err *err);
int lrc_package_write_weights(lrc_package_writer *w, const lrc_tensor_set *weights, lrc_err *err);
/* The model's tokenizer.json, which the package then carries (lrc.h's
 * lrc_session_tokenize). */
int lrc_package_write_tokenizer(lrc_package_writer *w, const char *json, size_t len, lrc_err *err);
int lrc_package_finish(lrc_package_writer *w, const lrc_plan *p, const char *meta_json, lrc_err *err);
void lrc_package_abort(lrc_package_writer *w);
/* Removes a package directory: every file a package may hold, then dir. */
void lrc_package_remove(const char *dir);
/* Checks that this CPU has every feature in the comma-separated list
 * ("avx2,fma,avx512f"), naming the first one missing. */
int lrc_cpu_check_features(const char *list, lrc_err *err);

/* ---- tokenizers (runtime/tokenizer_load.c, runtime/tokenizer.c) ---------- */

/* A Hugging Face tokenizer.json: a BPE model (byte-level, or SentencePiece
 * style with byte fallback), its normalizers, pre-tokenizers, added tokens,
 * post-processor and decoders, with the results of the `tokenizers` library.
 * A feature lrc lacks is refused when it loads, naming its JSON path. */
typedef struct lrc_tokenizer lrc_tokenizer;
/* path: a tokenizer.json, or a directory holding one. */
int lrc_tokenizer_load(const char *path, lrc_tokenizer **out, lrc_err *err);
/* what names the text in messages. */
int lrc_tokenizer_parse(const char *json, size_t len, const char *what, lrc_tokenizer **out, lrc_err *err);
void lrc_tokenizer_free(lrc_tokenizer *t);
int64_t lrc_tokenizer_n_vocab(const lrc_tokenizer *t);
/* ids that grow: encode appends. */
typedef struct lrc_ids {
    int32_t *ids;
    int64_t n, cap;
} lrc_ids;
void lrc_ids_free(lrc_ids *v);
/* add_special: the post-processor's tokens (a BOS), as tokenizers' encode
 * adds by default. Invalid UTF-8 is refused with its byte offset (the
 * library takes only Unicode strings). */
int lrc_tokenizer_encode(const lrc_tokenizer *t, const char *text, size_t len, bool add_special, lrc_ids *out,
                         lrc_err *err);
/* The decoders' text for ids (tokenizers' decode): malloc'd, NUL-terminated
 * as well. An id outside the vocabulary is skipped, as the library skips it. */
int lrc_tokenizer_decode(const lrc_tokenizer *t, const int32_t *ids, int64_t n, bool skip_special, char **text,
                         size_t *len, lrc_err *err);
/* How many bytes of text a token stands for (byte-level: its bytes; a
 * SentencePiece piece: ▁ counted as one space; <0xXX>: one), for losses
 * per byte that compare across vocabularies. */
int64_t lrc_tokenizer_token_bytes(const lrc_tokenizer *t, int32_t id);

/* ---- training (runtime/train.c) ------------------------------------------ */

/* Text as token ids (byte-level: id = byte value). Blocks of 64 Ki tokens,
 * every 20th one validation (for short texts, the last block). */
typedef struct lrc_text {
    int32_t *tok;
    int64_t n, n_train; /* n_train: training windows */
    int64_t block, n_blocks;
    int64_t *cum[2]; /* per split: windows starting in blocks before i */
} lrc_text;
int lrc_text_load(lrc_text *t, const char *path, int64_t seq, lrc_err *err);
int lrc_text_from_bytes(lrc_text *t, const uint8_t *bytes, int64_t n, int64_t seq, const char *what, lrc_err *err);
int lrc_text_from_ids(lrc_text *t, const int32_t *ids, int64_t n, int64_t seq, const char *what, lrc_err *err);
void lrc_text_free(lrc_text *t);
/* B windows of T tokens at seeded positions of one split; labels are the
 * next tokens. */
void lrc_text_batch(const lrc_text *t, bool validation, int64_t B, int64_t T, lrc_rng *rng, int32_t *tokens,
                    int32_t *labels);
/* B windows of T tokens of the validation split, the same for any seed:
 * windows first, first + 1, ... of those that start T apart (wrapping
 * round the split). */
void lrc_text_val_windows(const lrc_text *t, int64_t first, int64_t B, int64_t T, int32_t *tokens, int32_t *labels);

/* ---- f64 evaluation (runtime/executor.c) ------------------------------- */

/* Every node of a graph on its ref64 kernel (every float in double, ids
 * i32), loops included: what finite-difference checks and the diagnostics
 * of looped models need. param[id] holds a PARAM's values (f64, which a
 * caller may perturb); inputs come from the set (f32 widened); buffers
 * persist between calls. */
typedef struct lrc_run64 {
    const lrc_graph *g;
    const lrc_tensor_set *inputs;
    double **param;
    void **buf;
    int64_t *iteration; /* per loop_next, allocated on the first run */
    /* called at every back edge after its copy (t: the iteration), or NULL */
    void (*on_iteration)(struct lrc_run64 *r, int loop_next, int64_t t);
    void *user;
} lrc_run64;
/* Runs nodes [first, end); a back edge loops only when its state is in range. */
int lrc_run64_exec(lrc_run64 *r, int first, int end, lrc_err *err);
/* Sets r up for g: params are lrc_params_bind's (every PARAM, f32), widened. */
void lrc_run64_init(lrc_run64 *r, const lrc_graph *g, const lrc_tensor_set *inputs, const lrc_tensor_set *params);
void lrc_run64_free(lrc_run64 *r);

/* ---- looped models (runtime/train.c) ---------------------------------- */

/* n values of TruncNormal(0, std) clipped at +-3 std (a looped model's
 * random initial state). */
void lrc_fill_trunc_normal(float *x, int64_t n, double std, lrc_rng *r);
/* Parcae's mask [2, K, B] of the K unrolled iterations that take
 * gradients: mask[j * B + b] = 1 when sequence b runs unrolled iteration j,
 * that is j >= K - k_b, with k_b = k[b] (or k_all when k is NULL), else 0;
 * mask[(K + j) * B + b] is its complement. */
void lrc_parcae_mask(float *mask, int64_t K, int64_t B, const int32_t *k, int64_t k_all);
/* T_b = max(1, Poisson(mu)) (Knuth's method; mu up to a few hundred). */
int32_t lrc_poisson_at_least_1(double mu, lrc_rng *r);

/* ---- images (runtime/images.c) ----------------------------------------- */

/* Fashion-MNIST as IDX files; the last 5,000 training images are the
 * validation split, never trained on. */
enum { LRC_SPLIT_TRAIN, LRC_SPLIT_VAL, LRC_SPLIT_TEST };
typedef struct lrc_images {
    int64_t channels, height, width, n_classes; /* 1, 28, 28, 10 (n_classes = max label + 1 over all files) */
    uint8_t *pixels[3];  /* per split, n[split] * channels * height * width */
    int32_t *labels[3];
    int64_t n[3];
    double mean, std;    /* of the training split's pixels scaled to [0, 1] */
    /* private: the epoch permutation cache for lrc_images_batch */
    int64_t *perm; int64_t perm_epoch; uint64_t perm_seed;
} lrc_images;
/* DIR holds the four IDX files (NAME or NAME.gz); NULL: /usr/share/datasets/fashion-mnist.
 * Every structural problem (missing file, damaged gzip stream, truncated
 * data, wrong magic number, absurd sizes, counts that disagree) is a
 * one-line error naming the file; nothing is left allocated then. */
int lrc_images_load(lrc_images *im, const char *dir, lrc_err *err);
void lrc_images_free(lrc_images *im);
typedef struct lrc_augment {
    int pad;   /* random crop: pad by this many pixels (with the background, i.e. raw value 0), crop back at a random offset; 0 = off */
    bool flip; /* random horizontal flip with probability 1/2 */
} lrc_augment;
/* Training batch number `index` (0, 1, 2, ... over the whole run) of B
 * images: sample k = index*B + i is image perm_e[k mod n] of the training
 * split, perm_e a seeded shuffle of epoch e = k / n (Fisher-Yates with an
 * lrc_rng seeded from seed and e), so that a run resumed at any batch sees
 * the same data without saving a random state. Augmentation draws come
 * from an lrc_rng seeded from (seed, k). Writes normalized pixels
 * (x/255 - mean) / std into x [B, C, H, W] f32 and labels [B]. aug may be
 * NULL (none). Updates im's permutation cache: one caller at a time. */
void lrc_images_batch(lrc_images *im, uint64_t seed, int64_t index, int64_t B, const lrc_augment *aug,
                      float *x, int32_t *labels);
/* Images start .. start+B-1 of a split in order, normalized, no
 * augmentation; positions past the end get zeros and label -100 (which the
 * loss ignores). Returns how many real images were written. */
int64_t lrc_images_range(const lrc_images *im, int split, int64_t start, int64_t B, float *x, int32_t *labels);

typedef struct lrc_schedule_cfg {
    double peak, warmup, floor; /* warm-up as a fraction of steps; floor as a fraction of peak */
    int64_t steps;
} lrc_schedule_cfg;
/* Linear warm-up, then cosine decay to floor x peak (the paper's recipe). */
double lrc_lr_at(const lrc_schedule_cfg *s, int64_t step);

typedef struct lrc_adamw_cfg {
    double beta1, beta2, eps, weight_decay, clip; /* clip <= 0: no clipping */
    bool decay_all;                               /* decay vectors and scalars too */
} lrc_adamw_cfg;
/* The parameters cut into spans of elements, the unit of the optimizer's
 * parallel passes: made once for the n tensors' shapes, then passed to
 * every step (gradients, moments and accumulators share those shapes). */
typedef struct lrc_param_spans lrc_param_spans;
/* NULL when out of memory */
lrc_param_spans *lrc_param_spans_new(lrc_tensor *const *tensors, int n);
/* A shard's: the elements [lo, hi) of the n tensors end to end. AdamW over
 * it takes moments that hold tensor i's elements of the shard alone. */
lrc_param_spans *lrc_param_spans_shard(lrc_tensor *const *tensors, int n, int64_t lo, int64_t hi);
void lrc_param_spans_free(lrc_param_spans *ps);
/* *norm = the global norm of the gradient tensors, in parallel and the same
 * for any thread count; *bad = the first tensor holding inf or nan, else -1.
 * Fails only when the pool is already running (lrc_pool_run). */
int lrc_grads_check(lrc_pool *pool, lrc_param_spans *ps, lrc_tensor **grads, double *norm, int *bad, lrc_err *err);
/* One AdamW step (0-based) over the tensors; grad_norm (lrc_grads_check's)
 * is what --clip scales against. Fails as lrc_grads_check does. */
int lrc_adamw_step(const lrc_adamw_cfg *c, lrc_pool *pool, const lrc_param_spans *ps, int64_t step, double lr,
                   double grad_norm, lrc_tensor **params, lrc_tensor **grads, lrc_tensor **m, lrc_tensor **v, lrc_err *err);

/* lrc train's AdamW on the device (cuda_optim.c), over a training graph's
 * exec: the f32 master weights, the moments (and, for accum > 1, the summed
 * gradients) in device memory, uploaded from the n host tensors params, m
 * and v (the caller's, read again by _download). The gradients, the graph's
 * outputs named as the parameters, stay on the device: lrc_cuda_exec_run
 * leaves them out of its outputs until _free. */
typedef struct lrc_cuda_optim lrc_cuda_optim;
int lrc_cuda_optim_new(lrc_cuda_exec *x, lrc_tensor *const *params, lrc_tensor *const *m, lrc_tensor *const *v, int n,
                       const lrc_adamw_cfg *cfg, int64_t accum, lrc_cuda_optim **out, lrc_err *err);
/* After the run of micro-batch `micro` (0-based, of accum): the gradients'
 * global norm (with the last micro-batch, that of their average) and *bad,
 * the first tensor holding inf or nan, else -1 (lrc_grads_check's). */
int lrc_cuda_optim_grads(lrc_cuda_optim *o, int64_t micro, double *norm, int *bad, lrc_err *err);
/* Over the ranks of d (a data-parallel lrc train; d NULL: one process): the
 * accum micro-batches shared by them, each rank's sum summed over all
 * through the host at its last one. */
typedef struct lrc_dist lrc_dist;
int lrc_cuda_optim_use_dist(lrc_cuda_optim *o, lrc_dist *d, lrc_err *err);
/* One AdamW step (0-based), as lrc_adamw_step computes it. */
int lrc_cuda_optim_step(lrc_cuda_optim *o, int64_t step, double lr, double grad_norm, lrc_err *err);
/* The device's weights and moments into the host tensors (for a checkpoint). */
int lrc_cuda_optim_download(lrc_cuda_optim *o, lrc_err *err);
void lrc_cuda_optim_free(lrc_cuda_optim *o);

/* ---- the ranks of a data-parallel run over MPI (dist.c, docs/distributed.md) */

typedef struct lrc_dist lrc_dist;
/* The environment variable by which an MPI launcher (mpirun) started this
 * process, or NULL: one process. */
const char *lrc_dist_launcher(void);
/* Under an MPI launcher: Open MPI's libmpi loaded (LRC_MPI_LIB, else
 * libmpi.so.40) and initialised; *out stays NULL without a launcher. */
int lrc_dist_open(lrc_dist **out, lrc_err *err);
int lrc_dist_rank(const lrc_dist *d); /* 0 for NULL */
int lrc_dist_size(const lrc_dist *d); /* 1 for NULL */
/* Sums over the ranks, in place, the result the same on every rank. */
int lrc_dist_sum_f32(lrc_dist *d, float *x, size_t n, lrc_err *err);
int lrc_dist_sum_f64(lrc_dist *d, double *x, int n, lrc_err *err);
int lrc_dist_max_int(lrc_dist *d, int *x, int n, lrc_err *err);
/* f32 tensors summed in buckets; the time goes to lrc_dist_comm_s. */
int lrc_dist_sum_tensors(lrc_dist *d, lrc_tensor *const *t, int n, lrc_err *err);
double lrc_dist_comm_s(const lrc_dist *d);
/* Rank 0's bytes to every rank. */
int lrc_dist_bcast(lrc_dist *d, void *buf, size_t bytes, lrc_err *err);
/* root's n floats to every rank, in place */
int lrc_dist_bcast_f32(lrc_dist *d, float *x, size_t n, int root, lrc_err *err);
/* n floats from this rank to rank `to`, which receives them with _recv */
int lrc_dist_send_f32(lrc_dist *d, const float *x, size_t n, int to, lrc_err *err);
int lrc_dist_recv_f32(lrc_dist *d, float *x, size_t n, int from, lrc_err *err);
/* *differ = the highest rank whose h differs from rank 0's, else -1 (on every rank). */
int lrc_dist_agree(lrc_dist *d, uint64_t h, int *differ, lrc_err *err);
/* finalize false after an error: MPI_Finalize could wait for ranks that
 * wait in a collective; the process exits and mpirun ends the others. */
void lrc_dist_close(lrc_dist *d, bool finalize);

/* ---- a training run: its state, checkpoint and loop (checkpoint.c, trainer.c) */

typedef struct lrc_train_state lrc_train_state;

/* What a checkpoint holds and --resume restores: with the run's settings
 * (run.json, the caller's) all that a run continues from bit for bit. */
struct lrc_train_state {
    lrc_tensor_set ck;     /* owns every tensor: the parameters, adam.m/NAME, adam.v/NAME, train.step, train.rng */
    lrc_tensor_set params; /* ck's parameters in the graph's order (owns none of them) */
    lrc_tensor **m, **v;   /* AdamW's moments, per parameter, in ck */
    int64_t step;          /* steps done */
    lrc_rng rng;           /* the random state of the text batches and a looped model's draws */
};

/* --zero 1 (zero.c): AdamW's moments sharded over the ranks of d. _new
 * takes this rank's shard of st's moments and frees st's (all ranks);
 * _step updates this rank's shard of the weights (from the whole
 * gradients) and then every rank's shard reaches every rank; _gather makes
 * st's moments whole on rank 0 (for a checkpoint), until the next _step. */
typedef struct lrc_zero lrc_zero;
int lrc_zero_new(lrc_dist *d, lrc_train_state *st, lrc_zero **out, lrc_err *err);
int lrc_zero_step(lrc_zero *z, const lrc_adamw_cfg *c, lrc_pool *pool, int64_t step, double lr, double norm, lrc_tensor **params,
                  lrc_tensor **grads, lrc_err *err);
int lrc_zero_gather(lrc_zero *z, lrc_err *err);
size_t lrc_zero_bytes(const lrc_zero *z); /* the moments this rank holds */
void lrc_zero_free(lrc_zero *z);
/* A new run: g's parameters initialised from the seed, zero moments, step 0. */
int lrc_train_state_new(lrc_train_state *s, const lrc_graph *g, uint64_t seed, lrc_pool *pool, lrc_err *err);
/* Reads a checkpoint for g (docs/formats.md): a file of another kind, of a
 * newer version or damaged is a one-line error naming it; free s even then. */
int lrc_checkpoint_load(const char *path, const lrc_graph *g, lrc_train_state *s, lrc_err *err);
/* Writes the current version atomically (a temporary file renamed over path). */
int lrc_checkpoint_save(const char *path, lrc_train_state *s, lrc_err *err);
void lrc_train_state_free(lrc_train_state *s);

/* Where a training step runs: lrc_trainer_use_cpu (the compiled plan on
 * this CPU, AdamW on the thread pool) or lrc_trainer_use_cuda (GPU 0, AdamW's
 * kernels in the graph's module) fill it; another target would fill it
 * with its own five functions. dev is the implementation's state. */
typedef struct lrc_train_device_ops {
    /* one run of the training graph: outs gets "loss" (and whatever gradients the device returns) */
    int (*run)(void *dev, const lrc_tensor_set *in, lrc_tensor_set *outs, lrc_err *err);
    /* after the run of micro-batch `micro` of accum: *norm, the gradients'
     * global norm (with the last micro-batch, that of their average), and
     * *bad, the first parameter whose gradient is not finite, else -1 */
    int (*grads)(void *dev, const lrc_tensor_set *outs, int64_t micro, double *norm, int *bad, lrc_err *err);
    int (*update)(void *dev, int64_t step, double lr, double norm, lrc_err *err); /* AdamW, step 0-based */
    int (*to_host)(void *dev, lrc_err *err); /* the state's weights and moments this step's */
    void (*free)(void *dev);
} lrc_train_device_ops;

typedef struct lrc_trainer {
    lrc_train_state st;
    lrc_tensor_set in, outs; /* the graph's inputs (the caller adds them, the batch hook fills them), its outputs */
    lrc_schedule_cfg sched;
    lrc_adamw_cfg adam;
    int64_t accum, eval_every, stop; /* micro-batches a step; a checkpoint every eval_every steps; the step to end at */
    /* NULL: one process. Else accum is the micro-batches of a step over all
     * the ranks: rank r runs those r * accum / size .. (r + 1) * accum / size - 1,
     * their gradients are summed over the ranks, and rank 0 alone writes the
     * checkpoint, after the ranks compared their weights' checksum */
    lrc_dist *dist;
    int zero;          /* 1: AdamW's moments sharded over the ranks (lrc_zero; cpu only) */
    size_t opt_bytes;  /* the optimizer state (AdamW's moments) this rank holds, set by the device */
    const lrc_train_device_ops *ops;
    void *dev;
    /* host seconds in the graph's runs, the gradient check and the update,
     * summed over this run's steps after its first (which touches every
     * buffer first), and how many steps that is: a profile's view of a step */
    double phase_s[3];
    int64_t phase_steps;
} lrc_trainer;
/* One step's results, for the caller's report. */
typedef struct lrc_train_step {
    int64_t step; /* 0-based */
    float loss;   /* the mean over the micro-batches */
    double lr, grad_norm;
    bool eval; /* an evaluation step: a checkpoint follows the report */
} lrc_train_step;
typedef struct lrc_train_hooks {
    void *ctx;
    /* the inputs of micro-batch `micro` of step `step` into the trainer's `in` (the draws from rng) */
    void (*batch)(void *ctx, int64_t step, int64_t micro, lrc_rng *rng);
    /* after AdamW: the validation (through lrc_trainer_loss, with in), the metrics, the progress */
    int (*after_step)(void *ctx, const lrc_train_step *s, lrc_err *err);
    bool (*interrupted)(void *ctx); /* true: the run ends after this step, with a checkpoint */
    const char *checkpoint;         /* the checkpoint's path */
} lrc_train_hooks;
void lrc_trainer_init(lrc_trainer *t);
/* The device, after st is made or loaded, the parameters bound to the
 * exec, and adam and accum set. */
int lrc_trainer_use_cpu(lrc_trainer *t, lrc_exec *x, lrc_pool *pool, lrc_err *err);
int lrc_trainer_use_cuda(lrc_trainer *t, lrc_cuda_exec *x, lrc_err *err);
/* Steps st.step .. stop-1; a checkpoint after each evaluation step and on
 * an interrupt (then *interrupted). An error stops the run; the last
 * checkpoint stays. */
int lrc_trainer_run(lrc_trainer *t, const lrc_train_hooks *h, bool *interrupted, lrc_err *err);
/* A forward (and backward) of the graph on `in`: its loss. */
int lrc_trainer_loss(lrc_trainer *t, float *loss, lrc_err *err);
int lrc_trainer_to_host(lrc_trainer *t, lrc_err *err);
/* The device, then the state and the sets: before the exec the device ran on is freed. */
void lrc_trainer_free(lrc_trainer *t);

/* ---- the executor ------------------------------------------------------ */

/* Runs g on a backend. `inputs` holds a tensor for every INPUT and STATE
 * node (states, such as KV caches, are updated in place) and
 * `params` one for every PARAM node (f32; see lrc_params_bind). The graph's
 * outputs are appended to *outputs as f32/i32 host tensors named like the
 * outputs. Intermediates are freed after their last use. */
int lrc_exec_run(lrc_backend *be, const lrc_graph *g, const lrc_tensor_set *inputs,
                 const lrc_tensor_set *params, lrc_tensor_set *outputs, lrc_err *err);

/* ---- executors: the run half of a target (runtime/executors.c) ---------- */

/* One interface that every target's executor implements (ref: the
 * interpreter over a graph; cpu: a compiled plan on the thread pool; cuda:
 * a compiled plan on GPU 0), registered in one table, lrc_executors. The
 * embedding API and lrc's commands run graphs and packages through it and
 * hold no per-target branch of their own. Hooks that can fail return 0 or
 * the lrc_status (lrc.h) the failure is: 1 the package, 2 the caller's data,
 * 3 the device. */

/* The machine an executor runs on, as open_host found it. */
typedef struct lrc_exec_host {
    char device[128];     /* the device's name: GPU 0's, a package's CPU, or "" for this CPU */
    int sm, sms;          /* cuda: GPU 0's compute capability (90: sm_90) and multiprocessors */
    int64_t memory_bytes; /* cuda: GPU 0's memory */
    bool cubin;           /* cuda, a package: the GPU runs its cubin (else its PTX) */
    lrc_pool *pool;       /* cpu: the threads runs use */
    bool own_pool;        /* made by open_host (else borrowed) */
} lrc_exec_host;

/* What open_host is asked for. */
typedef struct lrc_exec_host_opts {
    const lrc_package *pkg; /* a package to run, or NULL: graphs compiled on this machine now */
    const char *dir;        /* pkg's directory (messages) */
    int threads;            /* cpu: <= 0 all cores */
    lrc_pool *pool;         /* cpu: threads to borrow, or NULL: a pool of `threads` */
} lrc_exec_host_opts;

/* What one executor runs: a graph (ref) or a plan (cpu, cuda), all
 * borrowed and outliving the executor. */
typedef struct lrc_exec_source {
    const lrc_graph *g;         /* ref */
    const lrc_plan *plan;       /* cpu, cuda */
    const lrc_cuda_table *table; /* a device plan's launch table (cuda's), or NULL */
    const void *image;          /* cuda: its cubin or PTX, or NULL: dir's, as the host's cubin says */
    const char *dir;            /* a package (or one of its shapes) */
} lrc_exec_source;

typedef struct lrc_executor_ops {
    const char *name;
    /* binds BF16 and F16 weights as they are (a device that stores them
     * so); the others bind F32 (and U8 panels) */
    bool binds_half;
    /* the machine, checked against what o->pkg was compiled for; NULL: it runs no packages */
    int (*open_host)(const lrc_exec_host_opts *o, lrc_exec_host *h, lrc_err *err);
    void (*close_host)(lrc_exec_host *h);
    int (*create)(const lrc_exec_source *src, const lrc_exec_host *h, void **x, lrc_err *err);
    int (*bind)(void *x, const lrc_tensor_set *params, lrc_err *err);
    /* outputs already in *out (by name) are written in place */
    int (*run)(void *x, const lrc_tensor_set *in, lrc_tensor_set *out, lrc_err *err);
    /* the median of repeat runs of the last run's inputs, in device time;
     * NULL: the caller times runs on the host */
    int (*time)(void *x, int64_t repeat, double *median_ms, lrc_err *err);
    /* from now on each run adds every launch's time to ns[launch] and counts it (NULL, NULL: off); NULL: none */
    void (*profile)(void *x, double *ns, int64_t *calls);
    void (*trace)(void *x, lrc_trace_event *ev, int64_t cap, int64_t *n);
    /* zeros the state buffers (a decoder's new sequence), or NULL: position 0 alone starts one */
    void (*reset_state)(void *x);
    /* a trainer's device over the executor, or NULL: it does not train */
    int (*train)(void *x, const lrc_exec_host *h, lrc_trainer *tr, lrc_err *err);
    void (*destroy)(void *x);
} lrc_executor_ops;

extern const lrc_executor_ops lrc_executor_ref, lrc_executor_cpu, lrc_executor_cuda;
extern const lrc_executor_ops *const lrc_executors[];
extern const int lrc_n_executors;
/* The executor named name, or NULL. */
const lrc_executor_ops *lrc_executor_find(const char *name);
/* The executor that runs a package of target name: as the loader reads
 * packages, one that names no target known here runs on the first that
 * runs packages (cpu). */
const lrc_executor_ops *lrc_executor_for_package(const char *name);
/* close_host, and h zeroed; a host never opened is fine */
void lrc_exec_host_close(const lrc_executor_ops *ops, lrc_exec_host *h);

#endif
