/* cuda_internal.h — the cuda executor's state, shared by cuda_exec.c (the
 * plan's launches) and cuda_optim.c (AdamW on the device); internal. */
#ifndef LRC_CUDA_INTERNAL_H
#define LRC_CUDA_INTERNAL_H

#include "cuda_dl.h"
#include "lrc_runtime.h" /* and with it lrc_cuda_abi.h: the storage enum, the launch table */

typedef unsigned long long devptr;

typedef struct {
    void *lib, *blas;
    int (*init)(unsigned);
    int (*device_get)(int *, int);
    int (*ctx_retain)(void **, int);
    int (*ctx_set)(void *);
    int (*ctx_release)(int);
    int (*module_load)(void **, const void *);
    int (*module_unload)(void *);
    int (*get_function)(void **, void *, const char *);
    int (*mem_alloc)(devptr *, size_t);
    int (*mem_free)(devptr);
    int (*htod)(devptr, const void *, size_t);
    int (*dtoh)(void *, devptr, size_t);
    int (*dtod)(devptr, devptr, size_t);
    int (*memset8)(devptr, unsigned char, size_t);
    int (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void *, void **, void **);
    int (*sync)(void);
    int (*error_name)(int, const char **);
    int (*event_create)(void **, unsigned);
    int (*event_record)(void *, void *);
    int (*event_sync)(void *);
    int (*event_elapsed)(float *, void *, void *);
    int (*event_destroy)(void *);
    /* streams and CUDA graphs: a plan's launches captured once and replayed
     * as one graph launch (has_graph: every symbol is there) */
    bool has_graph;
    int (*stream_create)(void **, unsigned);
    int (*stream_destroy)(void *);
    int (*begin_capture)(void *, int);
    int (*end_capture)(void *, void **);
    int (*graph_instantiate)(void **, void *, unsigned long long);
    int (*graph_launch)(void *, void *);
    int (*graph_exec_destroy)(void *);
    int (*graph_destroy)(void *);
    int (*dtod_async)(devptr, devptr, size_t, void *);
    int (*blas_set_stream)(void *, void *);
    int (*blas_create)(void **);
    int (*blas_destroy)(void *);
    int (*gemm_ex)(void *, int, int, int, int, int, const void *, const void *, int, int, const void *, int, int, const void *,
                   void *, int, int, int, int);
    /* cuBLASLt */
    bool has_lt; /* cuBLAS's cuBLASLt has every symbol used */
    int (*lt_create)(void **);
    int (*lt_destroy)(void *);
    int (*lt_desc_create)(void **, int, int);
    int (*lt_desc_destroy)(void *);
    int (*lt_desc_set)(void *, int, const void *, size_t);
    int (*lt_layout_create)(void **, int, uint64_t, uint64_t, int64_t);
    int (*lt_layout_destroy)(void *);
    int (*lt_pref_create)(void **);
    int (*lt_pref_destroy)(void *);
    int (*lt_pref_set)(void *, int, const void *, size_t);
    int (*lt_heuristic)(void *, void *, void *, void *, void *, void *, void *, int, void *, int *);
    int (*lt_matmul)(void *, void *, const void *, const void *, void *, const void *, void *, const void *, const void *, void *,
                     void *, void *, const void *, void *, size_t, void *);
} cuda_api;

/* cuBLAS's constants as its header has them: cublasOperation_t, cudaDataType_t,
 * cublasComputeType_t, cublasGemmAlgo_t */
enum { OP_N = 0, OP_T = 1, R_32F = 0, R_16BF = 14, COMPUTE_32F = 68, GEMM_DEFAULT = -1 };

/* cublasLtMatmulHeuristicResult_t */
typedef struct {
    uint64_t algo[8];
    size_t workspace_bytes;
    int state;
    float waves;
    int reserved[4];
} lrc_lt_algo;
_Static_assert(sizeof(lrc_lt_algo) == 96, "cublasLtMatmulHeuristicResult_t");

/* A launch's GEMM with a residual (c_arg) or a bias (bias_arg): its
 * cuBLASLt operation, the layouts of its operands (A, B, and C = D) and
 * the algorithm chosen once; or (in_place), where cuBLASLt offers none,
 * cublasGemmEx: for a residual alone, the residual copied into the output
 * and the product added to it (beta = 1); with a bias, the product into
 * scratch and the launch's kernel after it. */
typedef struct {
    void *desc, *layout[3];
    lrc_lt_algo algo;
    bool in_place;
} lrc_lt_gemm;
#define LRC_LT_WORKSPACE ((size_t)32 << 20) /* what cuBLASLt's Hopper kernels want at most */

struct lrc_cuda_exec {
    cuda_api api;
    const lrc_plan *plan;
    int device;
    void *ctx, *module, *blas;
    void **fn;        /* per launch */
    lrc_cuda_storage *storage; /* per buffer */
    devptr arena, scratch, *ptr;
    int64_t scratch_bytes;
    int *grid, *block;   /* per launch: 3 and 1 */
    int64_t *scratch_of; /* per launch */
    lrc_cuda_storage *scratch_st; /* per launch: how its scratch is stored */
    int *access;         /* per launch: bytes a thread accesses at once, 0: not said */
    int *n_gemm;
    struct {
        int op, a, b, c; /* c: the argument added as cuBLASLt's C, or -1 */
        int bias;        /* the argument cuBLASLt's epilogue adds to every row, or -1 */
        int64_t m, n, k;
    } (*gemm)[2];
    void *lt;          /* the cuBLASLt handle, when a GEMM adds a residual or a bias */
    lrc_lt_gemm *lt_gemm; /* per launch */
    devptr lt_workspace;
    int64_t *iteration; /* per back edge: the loop's current iteration */
    devptr *argv;       /* a launch's kernel arguments (and its scratch), room for the longest */
    void **params;      /* their addresses, as cuLaunchKernel takes them */
    /* lrc_cuda_exec_profile / _trace: a pair of events around every launch
     * that ran, in order (loops run some more than once) */
    double *times_ns;
    int64_t *calls;
    lrc_trace_event *trace;
    int64_t trace_cap, *n_trace;
    void **events;
    int *event_launch;
    int n_events, cap_events, used_events;
    double trace_clock_ns; /* where the next run starts on the trace's timeline */
    bool check; /* LRC_CUDA_CHECK: every buffer alone, a guard region after it, checked after each launch */
    bool sync_each; /* LRC_CUDA_SYNC: a synchronize after every launch, so that a fault names its launch */
    int unsynced_first, unsynced_last; /* the launches since the last synchronize (first -1: none) */
    bool *on_device; /* per buffer: an output that lrc_cuda_exec_run leaves on the device (the optimizer reads it) */
    /* the launches go on `stream` (a blocking one: ordered with the legacy
     * stream's copies and the optimizer's kernels); a plan without loops
     * runs as one CUDA graph, captured at its second run (LRC_CUDA_GRAPH=0:
     * launch by launch) */
    void *stream, *graph_exec;
    bool graph_off; /* a capture failed, or the plan cannot be one graph */
    int64_t runs;   /* of the plan: the first is launch by launch */
};

/* LRC_CUDA_CHECK=1: each buffer (the arena's too, the scratch, the
 * optimizer's) in its own allocation followed by GUARD bytes of GUARD_BYTE,
 * read back after every launch: a kernel or GEMM that writes past a buffer
 * is named. Slow; for finding kernel bugs, as compute-sanitizer is. */
#define GUARD 256
#define GUARD_BYTE 0xA5
/* whether the GUARD bytes at end are intact (*r: a failed copy) */
bool lrc_cuda_guard_intact(lrc_cuda_exec *x, devptr end, int *r);
/* after WHAT ran ("launch 3 'label'"), every guard region of the plan's buffers intact */
int lrc_cuda_check_guards(lrc_cuda_exec *x, const char *what, lrc_err *err);

static inline size_t lrc_cuda_elem_bytes(lrc_cuda_storage st) { return lrc_cuda_storage_bytes(st); }

/* A driver call's failure r as a message: "cuda: WHAT failed: CUDA_ERROR_..." */
int lrc_cuda_fail(const lrc_cuda_exec *x, int r, const char *what, lrc_err *err);
/* host f32 (or i32) data into buffer i in its device storage, and back as f32 */
int lrc_cuda_upload(lrc_cuda_exec *x, int i, const void *data, int64_t count, lrc_err *err);
int lrc_cuda_download(lrc_cuda_exec *x, int i, float *out, int64_t count, lrc_err *err);
/* Frees cuBLASLt's workspace for memory the model needs, its residual GEMMs
 * in place through cublasGemmEx from then on; false if there was none. */
bool lrc_cuda_lt_release(lrc_cuda_exec *x);

#endif
