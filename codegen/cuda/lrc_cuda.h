/* lrc_cuda.h — the public header of codegen/cuda: every kernel group of a
 * program rendered as CUDA C (one `extern "C" __global__` function per
 * distinct kernel, launch bounds, 16-byte loads where the layout allows,
 * warp-shuffle reductions), GEMMs described as cuBLAS calls, and NVRTC,
 * loaded at run time, to compile the source for an architecture. Depends on
 * codegen/ (and ir/); NVRTC is found with dlopen, so nothing here needs a GPU
 * or links against the CUDA toolkit. */
#ifndef LRC_CUDA_H
#define LRC_CUDA_H

#include "../../ir/lrc_cuda_abi.h" /* the storage enum and the launch table, shared with the executor */
#include "../lrc_codegen.h"

typedef struct lrc_cuda_program {
    char *source;        /* the whole CUDA C translation unit */
    /* one launch per kernel of the lrc_program, and per node id how its
       buffer is stored: what lrc_cuda_exec_new takes with the plan */
    lrc_cuda_table table;
    int n_symbols;       /* distinct kernels in source */
} lrc_cuda_program;

/* The tiling that makes lrc_program_build leave GEMM operands unpacked
 * (cuBLAS reads them as they are). */
lrc_gemm_tiling lrc_cuda_tiling(void);
/* The multiple the pad_hidden pass widens hidden dimensions to for this
 * target: rows of 16 bytes in bf16, as cuBLAS's fast kernels need of every
 * leading dimension (an odd one, the 1b's d_ff = 5461, leaves it 2-byte
 * accesses). */
#define LRC_CUDA_PAD_MULTIPLE 8

/* Whether the renderer has code for op (a kernel, an expression inside
 * fused groups, or none needed): read from its per-op table (render_ops.c). */
bool lrc_cuda_supports_op(lrc_op op);

/* Renders program p (built with lrc_cuda_tiling) of graph g under schedule
 * s, activations and weight matrices stored as bulk (LRC_CUDA_BF16, or
 * LRC_CUDA_F32 for full precision). Fails, naming the node, on an op this
 * renderer has no kernel for. */
int lrc_cuda_render(const lrc_graph *g, const lrc_schedule *s, const lrc_program *p, lrc_cuda_storage bulk,
                    lrc_cuda_program *out, lrc_err *err);
void lrc_cuda_program_free(lrc_cuda_program *cp);

/* ---- NVRTC (codegen/cuda/nvrtc.c) ---------------------------------------- */

/* Whether NVRTC can be loaded; *why says what is missing when not. */
bool lrc_nvrtc_available(char *why, size_t n);
/* NVRTC's version, "13.0", or "none". */
const char *lrc_nvrtc_version(void);
/* Compiles source for arch ("sm_90"): the cubin, and the PTX (for newer
 * GPUs) when ptx is not NULL. The NVRTC log is part of any error. */
int lrc_nvrtc_compile(const char *source, const char *name, const char *arch, void **cubin, size_t *cubin_size,
                      char **ptx, lrc_err *err);
/* Results are cached on disk by content (source, architecture, NVRTC
 * version, options) in the kernel cache's "nvrtc" folder (lrc_codegen.h);
 * a damaged entry is compiled again and replaced. LRC_NVRTC_CACHE=off (or
 * LRC_CACHE=off) turns the cache off. Where the last compile's result came
 * from: */
lrc_kcache_state lrc_nvrtc_last_cache_state(void);

#endif
