/* compile.h — the compiler pipeline for the cpu target (internal to
 * frontend/, which ties passes, codegen and runtime together). */
#ifndef LRC_COMPILE_H
#define LRC_COMPILE_H

#include "../codegen/cuda/lrc_cuda.h"
#include "../codegen/lrc_codegen.h"
#include "../runtime/lrc_runtime.h"

typedef struct lrc_llvm_jit lrc_llvm_jit;

typedef struct lrc_compiled {
    lrc_graph *g;            /* the optimised graph (owned) */
    lrc_tensor_set *consts;  /* parameters and folded constants (borrowed), or NULL */
    lrc_schedule sched;
    lrc_program prog;
    lrc_plan plan;
    lrc_llvm_jit *jit;
    bool have_sched, have_prog, have_plan;
    double passes_ms, codegen_ms;
    char cpu_features[128], cpu_name[64];
    /* --target cuda: the rendered program and what NVRTC made of it */
    lrc_cuda_program cuda;
    bool have_cuda;
    void *cubin;
    size_t cubin_size;
    char *ptx;
    char arch[16];
    int kernel_cache; /* where the kernels came from (lrc_kcache_state): NVRTC or LLVM, as this compile left it */
} lrc_compiled;

/* Compiles g (taken over) for this CPU. With consts (the parameters'
 * values), parameters are constants: gains fold, and the folded weights are
 * added to consts, which the plan's parameters then name; consts are taken
 * over too, as far as the constants the compiled graph no longer reads are
 * freed (the originals of folded weights). */
int lrc_compile_graph(lrc_graph *g, lrc_tensor_set *consts, lrc_compiled *c, lrc_err *err);
/* Same, writing native code to an object file instead of the JIT (the
 * plan's launches then have no fn); w_store is how the constant weights'
 * GEMM panels are stored (lrc compile --weights-dtype). */
int lrc_compile_graph_to(lrc_graph *g, lrc_tensor_set *consts, const char *object_path, lrc_wstore w_store, lrc_compiled *c, lrc_err *err);
/* What the cpu target's schedule asks of the passes, set in ctx: a loss
 * and its gradient in one kernel (fuse rule 9), a gain gradient's product
 * in its row sum (rule 10), and an LM head's loss and its gradient in the
 * head's GEMM (rule 8) with LRC_CPU_LOSS_HEAD=1. Rule 8 is off by default:
 * the same values and no logits buffer, but on the 60m step the fused
 * kernel took 180-187 ms where the head's GEMM and the two loss kernels
 * took 152-160. lrc_compile_graph_to and lrc's commands (lrc_target's
 * pass_rules) both set them here. */
void lrc_cpu_pass_rules(lrc_pass_ctx *ctx);
/* The cuda target's: pad_hidden's multiple, LRC_CUDA_PAD_MULTIPLE, or 0
 * when LRC_PAD_HIDDEN=0 (to time what padding buys on a device). */
void lrc_cuda_pass_rules(lrc_pass_ctx *ctx);
/* Compiles g (taken over) for NVIDIA GPUs of architecture arch ("sm_90"):
 * CUDA C, a cubin and PTX from NVRTC, and the plan; no GPU needed.
 * Activations and weight matrices are stored as bf16, or f32 when f32. */
int lrc_compile_graph_cuda(lrc_graph *g, lrc_tensor_set *consts, const char *arch, bool f32, lrc_compiled *c, lrc_err *err);
void lrc_compiled_free(lrc_compiled *c);
/* A package's weights packed at compile time (pack.c): runs the plan's
 * pack launches on c's constants from the kernels linked into so, adds
 * each panel buffer to c->consts as U8 WEIGHT@LAYOUT, which the plan then
 * binds as a parameter, and drops those launches and the weights only they
 * read. Without constants (a package compiled without weights) nothing
 * changes: the package packs as it loads. */
int lrc_compile_pack_weights(lrc_compiled *c, const char *so, lrc_err *err);

#endif
