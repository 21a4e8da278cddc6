/* lrc_codegen.h — the public header of codegen/: what every target's
 * renderer shares. From a graph and its schedule (kernel groups and memory
 * plan) it describes the launches of a program: one kernel per group, plus
 * the preparation kernels that repack constant weights once. Renderers
 * (codegen/llvm, codegen/cuda) turn each description into code; the
 * frontend turns the descriptions into a runtime plan. Depends on ir/ only. */
#ifndef LRC_CODEGEN_H
#define LRC_CODEGEN_H

#include "../ir/passes/lrc_passes.h"

#include <string.h>

/* Every kernel has the signature
 *     void NAME(void **args, int64_t begin, int64_t end)
 * and computes work items [begin, end) of its launch: the runtime splits
 * [0, n_items) across threads. args[i] points at the buffer of arg i. */
typedef void (*lrc_kernel_fn)(void **args, int64_t begin, int64_t end);

/* How constant weight matrices are stored in the GEMMs' packed panels
 * (lrc compile --weights-dtype): f32; bf16, widened in registers by a
 * shift; q8, llama.cpp's Q8_0 (ir/quant.c), widened and scaled in
 * registers. Activations and accumulators stay f32 in every case. */
typedef enum lrc_wstore { LRC_WSTORE_F32, LRC_WSTORE_BF16, LRC_WSTORE_Q8, LRC_WSTORE_COUNT } lrc_wstore;
static inline const char *lrc_wstore_name(lrc_wstore s)
{
    static const char *names[] = {"f32", "bf16", "q8"};
    _Static_assert(sizeof names / sizeof names[0] == LRC_WSTORE_COUNT, "every storage needs a name");
    return names[s];
}
/* 0 and *out for "f32", "bf16" or "q8", else -1 */
static inline int lrc_wstore_parse(const char *name, lrc_wstore *out)
{
    for (int s = 0; s < LRC_WSTORE_COUNT; s++)
        if (!strcmp(name, lrc_wstore_name((lrc_wstore)s))) return *out = (lrc_wstore)s, 0;
    return -1;
}

/* GEMM tiling shared by the packing kernel and the GEMM kernel: weights
 * W [N, K] are repacked into panels of NR output columns, panel p holding
 * W[p*NR + j, k] at (p*K + k)*NR + j, zero-padded past N. */
typedef struct lrc_gemm_tiling {
    int mr;     /* rows of the micro-tile */
    int vec;    /* floats per vector register */
    int nv;     /* vectors per micro-tile row: NR = vec * nv */
    int mc, nc; /* rows and columns of one work item (multiples of mr and NR; dW's 2 nc, lrc_gemm_item_cols) */
    int mc_wide; /* rows of an item whose second operand comes from beyond L2 each
                    item (lrc_gemm_item_rows), a multiple of mr */
    int mc_min;  /* the fewest rows the halving of an item's rows goes down to, where mc or
                    mc_wide leave too few items (lrc_gemm_item_rows) */
    int mc_head; /* rows of a block of an LM head's loss (fuse rule 8) at most: each block
                    streams the whole weight, so they are taller than mc */
    int kc;     /* inner length a tile sums in one pass at most: longer sums run in
                   blocks, the partial sums kept in the work item's MC x NC buffer */
    lrc_wstore w_store; /* constant weights' panels (lrc compile --weights-dtype); others are f32 */
} lrc_gemm_tiling; /* vec 0: no packing, a GEMM library takes W as it is (codegen/cuda) */

/* Whether a GEMM's packed second operand (N columns, inner size K, f32)
 * outgrows the caches, so that each pass over it comes from memory (an LM
 * head's 32000 x 512 weight) */
static inline bool lrc_gemm_panels_past_caches(int64_t N, int64_t K) { return N * K * 4 > ((int64_t)16 << 20); }

/* Rows of a work item of GEMM op over a second operand of N columns and
 * inner size K. An item reads its columns' panels once per block of K, so
 * taller items read them fewer times: where the panels come from memory (an
 * LM head's dX) or are packed anew each run (dW's matmul_tn, whose X is an
 * activation), 384 rows instead of 96 ran the 60m step's shapes 8-13%
 * faster on an AVX-512 Xeon (lrc gemm-bench, alternated: 512x1376x1024
 * matmul_tn 6.24 -> 5.71 ms, the head's dX 134.8 -> 116.8 ms). Elsewhere
 * the panels stay in L2 between items and shorter items share out better. */
#define LRC_GEMM_MIN_ITEMS 4
/* Columns of a work item: dW's (matmul_tn) twice nc, since each item packs
 * its rows of dy anew per block of K and fewer column blocks pack them
 * fewer times (a 4096 x 512 x 1024 dW, one thread: 136.5 -> 143.6 GFLOP/s
 * at best of six alternated runs). */
static inline int64_t lrc_gemm_item_cols(const lrc_gemm_tiling *t, bool a_trans) { return a_trans ? 2 * t->nc : t->nc; }
static inline int64_t lrc_gemm_item_rows(const lrc_gemm_tiling *t, bool a_trans, int64_t M, int64_t N, int64_t K)
{
    bool streamed = lrc_gemm_panels_past_caches(N, K) && K > t->kc;
    int64_t rows = a_trans || streamed ? t->mc_wide : t->mc, cols = lrc_gemm_item_cols(t, a_trans), col_blocks = (N + cols - 1) / cols;
    /* halved, down to mc_min, while the items are too few for the threads
     * to share (the small preset's 128 x 128 dW in one item of 384 rows
     * left one of two threads idle: its step 158 -> 171 ms) */
    while (rows / 2 >= t->mc_min && (rows / 2) % t->mr == 0 && (M + rows - 1) / rows * col_blocks < LRC_GEMM_MIN_ITEMS) rows /= 2;
    return rows;
}

/* The row blocks (work items) of an LM head's GEMM with its loss (fuse
 * rule 8), each all the vocabulary: at most mc rows, an even count, so that
 * two threads get the same share (11 blocks of a 1024-row batch left one
 * thread a twelfth of the head idle); each block streams the whole weight,
 * so no more of them than that. */
static inline int64_t lrc_loss_head_blocks(int64_t rows, int64_t mc)
{
    int64_t n = (rows + mc - 1) / mc;
    return n > 1 && n % 2 ? n + 1 : n;
}

/* Every program also has a kernel LRC_PEAK_SYMBOL that runs
 * LRC_PEAK_ITERS x mr x nv independent vector FMAs (vec floats each) per
 * work item and writes one float to args[0]: the profiler's FLOP/s ceiling. */
#define LRC_PEAK_SYMBOL "lrc_peak_fma"
#define LRC_PEAK_ITERS 100000
/* The FLOPs one work item of that probe computes for tiling t. */
static inline double lrc_peak_flops_per_item(const lrc_gemm_tiling *t)
{
    return (double)LRC_PEAK_ITERS * t->mr * t->nv * t->vec * 2.0;
}

/* A buffer the program uses besides the graph's nodes: packed weights, or a
 * kernel's scratch (the cpu cross-entropy's per-row terms). */
/* Doubles a row of the cpu cross-entropy's scratch holds: the row's max,
 * its sum of exp(x - max), 1 when its label counts, and the logit at the
 * label (else all 0): the loss needs no logit after its rows' pass, so an
 * LM head's fused kernel (fuse rule 8) overwrites them with the gradient. */
#define LRC_CE_STATS 4

typedef struct lrc_extra_buf {
    int of_node;     /* the node it is derived from, or whose kernel's scratch it is */
    int panel;       /* columns per panel: NR, or vec for a two-matmul kernel; 0: a kernel's scratch */
    bool transposed; /* the source holds W^T: [inner, columns] (gradient GEMMs) */
    int64_t cols, inner; /* of the operand as the GEMM sees it (a view may reshape its buffer) */
    int64_t bytes;
    lrc_wstore store; /* its panels' storage: a constant weight's is the tiling's w_store, others f32 */
} lrc_extra_buf;

/* GEMM ops: matmul (x W^T), matmul_nn (dy W) and matmul_tn (dy^T x) are the
 * same kernel with the second operand packed from W or from its transpose,
 * and for matmul_tn the first operand read transposed. */
bool lrc_is_gemm_op(lrc_op op);
/* Columns and inner size of the packed second operand of GEMM node n. */
void lrc_gemm_dims(const lrc_graph *g, const lrc_node *n, int64_t *cols, int64_t *inner);

typedef struct lrc_kernel_desc {
    char name[64];   /* symbol: "k12_gemm", "pack3" */
    int group;       /* schedule group, or -1 for a preparation kernel */
    lrc_group_kind kind;
    bool once;       /* a preparation kernel: run when its inputs change */
    int n_args;
    int *args;       /* buffer ids: node ids, or n_nodes + i for extra buffer i */
    int64_t n_items; /* parallel work items */
    /* Whether each item writes only its own outputs, so that any split of
     * the items over threads gives the same values (runtime: a stealing run) */
    bool any_split;
    double flops, bytes;
    /* The kernel whose code this launch runs: kernels with the same
     * structure (ops, attributes, shapes, argument layout) share one
     * function, so an L-layer model compiles each layer's kernels once. */
    int impl;
    char *signature; /* the structural key that decides it */
    /* A loop's back edge (loop_next), not a kernel: the executors copy the
     * carried state (args: state, h_next, counts) and go back to kernel
     * loop_to, the body's first, while iterations remain; -1 otherwise. */
    int loop_to;
} lrc_kernel_desc;

typedef struct lrc_program {
    lrc_kernel_desc *kernels;
    int n_kernels;
    lrc_extra_buf *extra;
    int n_extra;
    lrc_gemm_tiling tiling;
} lrc_program;

/* Kernels of sums over whole rows (lrc_sum_to_columns, ir/passes), and of
 * embedding gradients, run in blocks of LRC_SUM_COLS columns, one work item
 * each. */
#define LRC_SUM_COLS 64

/* Describes the launches of g under schedule s. Fails, naming the node,
 * when a group holds an op the renderers cannot generate. */
int lrc_program_build(const lrc_graph *g, const lrc_schedule *s, lrc_gemm_tiling tiling, lrc_program *p,
                      lrc_err *err);
void lrc_program_free(lrc_program *p);
/* The extra buffer holding weight node w packed in panels of `panel`
 * columns, or -1. */
int lrc_program_packed_of(const lrc_program *p, int w, int panel, bool transposed);

/* ---- the on-disk cache of compiled kernels (kcache.c) --------------------
 * Entries live in $LRC_CACHE_DIR/KIND/, else $XDG_CACHE_HOME/lrc/KIND/, else
 * ~/.cache/lrc/KIND/ (KIND "llvm" or "nvrtc"), each named by a hash of the
 * parts its result depends on. LRC_CACHE=off turns every kind off. */
typedef enum { LRC_KCACHE_OFF, LRC_KCACHE_MISS, LRC_KCACHE_HIT, LRC_KCACHE_REBUILT } lrc_kcache_state;
typedef struct { const void *data; size_t size; } lrc_kcache_blob;
typedef struct { int64_t entries, bytes; } lrc_kcache_usage;

/* "compiled, now cached", "from the cache", ... */
const char *lrc_kcache_state_name(lrc_kcache_state s);
/* The cache's root folder; false when no variable names one. */
bool lrc_kcache_root(char *out, size_t n);
/* Off with LRC_CACHE=off, or kind_var (e.g. "LRC_NVRTC_CACHE") set to off. */
bool lrc_kcache_enabled(const char *kind_var);
/* The entry for parts in KIND's folder, which it creates; false (and "")
 * when there is no cache folder to be had. */
bool lrc_kcache_path(const char *kind, const lrc_kcache_blob *parts, int n, char *out, size_t cap);
bool lrc_kcache_exists(const char *path);
/* The n segments of a whole, undamaged entry (each malloc'ed, zero
 * terminated: the caller frees), or false. */
bool lrc_kcache_read(const char *path, int n, lrc_kcache_blob *segs);
/* Best effort: an entry that cannot be written only costs a compilation. */
void lrc_kcache_write(const char *path, const lrc_kcache_blob *segs, int n);
/* KIND's entries and bytes; with clear, removes them first (counting
 * what it removed). False when there is no cache folder. */
bool lrc_kcache_usage_of(const char *kind, bool clear, lrc_kcache_usage *u);

#endif
