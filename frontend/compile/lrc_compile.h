/* lrc_compile.h — the compile half of the targets (frontend/compile/):
 * graphs compiled into plans (passes, schedule, program, LLVM or NVRTC),
 * the table of targets, a compiled graph made ready to run on its
 * target's executor (runtime/'s table), and packages written. It takes
 * graphs and plain option structs; the command line, the Lua binding and
 * the research tools sit above it and call it. */
#ifndef LRC_COMPILE_H
#define LRC_COMPILE_H

#include "../../codegen/cuda/lrc_cuda.h"
#include "../../codegen/lrc_codegen.h"
#include "../../runtime/lrc_runtime.h"

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

/* ---- the targets (targets.c, target_cpu.c, target_cuda.c) ---------------- */

/* What compiling for a target takes besides the graph. */
typedef struct lrc_compile_opts {
    const char *arch;   /* cuda: the architecture ("sm_90"); NULL: the host's GPU, or sm_90 */
    const struct lrc_exec_host *host; /* a package: compiled for this machine's device (its architecture), or NULL */
    bool f32;           /* cuda: activations and weight matrices stored as f32 (else bf16) */
    lrc_wstore w_store; /* cpu, a package: how weight panels are stored */
} lrc_compile_opts;

typedef struct lrc_target lrc_target;
struct cJSON;

/* One entry per target: how it compiles and packages graphs, and the
 * executor (lrc_runtime.h) that runs what it compiles. A new target is a
 * codegen folder, an executor, and an entry here and in the command
 * line's table (docs/architecture.md). */
struct lrc_target {
    const char *name;
    const lrc_executor_ops *ex;
    /* what its schedule asks of the passes (pad_hidden's multiple, fuse
     * rules 8-10), as its compile sets them, or NULL: none */
    void (*pass_rules)(lrc_pass_ctx *ctx);
    bool (*supports_op)(lrc_op op);
    /* g (taken over, on failure too) compiled with consts (or NULL) to run
     * on host h; NULL: the executor runs the graph as it is (ref) */
    int (*compile)(lrc_graph *g, lrc_tensor_set *consts, const lrc_compile_opts *o, const lrc_exec_host *h, lrc_compiled *c,
                   lrc_err *err);
    /* ---- packages: its kernels run on a device (the writer's file names) */
    bool device_package;
    /* g (taken over) compiled with consts (or NULL) into c, the kernels written into w; NULL: no packages */
    int (*compile_package)(lrc_graph *g, lrc_tensor_set *consts, const lrc_compile_opts *o, lrc_package_writer *w, lrc_compiled *c,
                           lrc_err *err);
    /* its part of package.json's meta (added after "target") */
    void (*package_meta)(struct cJSON *o, const lrc_compiled *c);
    /* a frozen weight as the package stores it for plan buffer b (NULL: as
     * it is), changed in place; a tensor the file adds beside it (q8's
     * scales) in *extra, else NULL */
    int (*package_weight)(const lrc_compiled *c, int b, lrc_tensor *t, lrc_tensor **extra, lrc_err *err);
    /* the distinct kernel functions of c */
    int (*functions)(const lrc_compiled *c);
    /* the target that runs compiled code in its place (ref's: cpu), or NULL: itself */
    const char *compiled_by;
};

extern const lrc_target *const lrc_targets[];
extern const int lrc_n_targets;
extern const lrc_target lrc_target_ref, lrc_target_cpu, lrc_target_cuda;
/* The entry named name, or NULL. */
const lrc_target *lrc_target_find(const char *name);
/* The entry that runs compiled code for t (ref's is cpu's), or NULL for NULL. */
const lrc_target *lrc_target_compiled(const lrc_target *t);
/* The entry of a package's target, as the loader runs it (cpu when it cannot be read). */
const lrc_target *lrc_target_of_package(const char *dir);

/* What preparing a graph takes besides it. */
typedef struct lrc_target_opts {
    lrc_tensor_set *consts; /* frozen parameters (taken over as lrc_compile_graph takes them), or NULL */
    lrc_pool *pool;         /* cpu: the threads to run on (borrowed), or NULL: a pool of `threads` */
    int64_t threads;        /* cpu: <= 0 all cores */
    bool f32;               /* cuda: f32 storage */
} lrc_target_opts;

/* A graph prepared on a target: compiled (unless its executor runs graphs)
 * and its executor made on the host, ready to bind parameters and run. */
typedef struct lrc_target_plan {
    const lrc_target *target;
    const lrc_executor_ops *ex;
    void *x;             /* the executor */
    lrc_exec_host host;  /* host.device: "" for this CPU */
    lrc_graph *g;        /* the graph an interpreter runs (owned) */
    lrc_compiled c;      /* a compiled target's */
    bool have_c;
    const lrc_plan *plan; /* the plan it runs, NULL for an interpreter */
} lrc_target_plan;

/* g (taken over, on failure too) compiled for t and its executor made:
 * LRC_OK or LRC_EUSER. */
int lrc_target_prepare(const lrc_target *t, lrc_graph *g, const lrc_target_opts *o, lrc_target_plan *p, lrc_err *err);
int lrc_target_bind(lrc_target_plan *p, const lrc_tensor_set *params, lrc_err *err);
int lrc_target_run(lrc_target_plan *p, const lrc_tensor_set *in, lrc_tensor_set *out, lrc_err *err);
/* the executor's own timing of the last run's inputs (p->ex->time must be set) */
int lrc_target_time(lrc_target_plan *p, int64_t repeat, double *median_ms, lrc_err *err);
/* lrc_trainer's device over the plan (p->ex->train must be set) */
int lrc_target_train(lrc_target_plan *p, lrc_trainer *tr, lrc_err *err);
/* what prepare made freed, and the plan zeroed; a plan never prepared is fine */
void lrc_target_plan_free(lrc_target_plan *p);

#endif
