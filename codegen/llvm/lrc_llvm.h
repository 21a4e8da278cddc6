/* lrc_llvm.h — the public header of the LLVM renderer: kernels of a program
 * built with the LLVM C API, optimised by the new pass manager for the host
 * CPU, and run by ORC LLJIT or written as an object file. Depends on
 * codegen/ and LLVM. */
#ifndef LRC_LLVM_H
#define LRC_LLVM_H

#include "../lrc_codegen.h"

typedef struct lrc_llvm_target {
    char triple[128], cpu[64], features[2048];
    int vec;                /* floats per vector register used by kernels */
    lrc_gemm_tiling tiling; /* GEMM micro-tile and blocking for this CPU */
} lrc_llvm_target;

/* The host CPU (AVX2 + FMA: 8-wide; AVX-512: 16-wide). */
int lrc_llvm_target_host(lrc_llvm_target *t, lrc_err *err);
/* "llvm 14.0.6" */
const char *lrc_llvm_version(void);

typedef struct lrc_llvm_module lrc_llvm_module;
struct em;

lrc_llvm_module *lrc_llvm_module_new(const char *name, const lrc_llvm_target *t, lrc_err *err);
struct em *lrc_llvm_module_emitter(lrc_llvm_module *m);
/* Verifies and optimises (default<O3>). */
int lrc_llvm_module_finish(lrc_llvm_module *m, lrc_err *err);
void lrc_llvm_module_free(lrc_llvm_module *m);
/* Textual IR, for debugging (caller frees with free()). */
char *lrc_llvm_module_print(lrc_llvm_module *m);

/* Renders every kernel of p into a new optimised module. */
int lrc_llvm_generate(const lrc_graph *g, const lrc_schedule *s, const lrc_program *p, const lrc_llvm_target *t,
                      lrc_llvm_module **out, lrc_err *err);

/* Whether the renderer has code for op (a kernel, a value inside fused
 * groups, or none needed): read from its per-op table (kernels.c). */
bool lrc_llvm_supports_op(lrc_op op);

/* Native code for the module in an object file (ahead of time). */
int lrc_llvm_emit_object(lrc_llvm_module *m, const char *path, lrc_err *err);

typedef struct lrc_llvm_jit lrc_llvm_jit;
/* Compiles the module (which the JIT takes over) to native code in memory. */
int lrc_llvm_jit_new(lrc_llvm_module *m, lrc_llvm_jit **out, lrc_err *err);
lrc_kernel_fn lrc_llvm_jit_lookup(lrc_llvm_jit *j, const char *name, lrc_err *err);
void lrc_llvm_jit_free(lrc_llvm_jit *j);

#endif
