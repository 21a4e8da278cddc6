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
/* Checks the generated IR (an error here is a generator's bug). */
int lrc_llvm_module_verify(lrc_llvm_module *m, lrc_err *err);
/* Optimises (default<O3>), once. */
int lrc_llvm_module_optimize(lrc_llvm_module *m, lrc_err *err);
void lrc_llvm_module_free(lrc_llvm_module *m);
/* Textual IR, for debugging (caller frees with free()). */
char *lrc_llvm_module_print(lrc_llvm_module *m);

/* Renders every kernel of p into a new verified module, not yet optimised. */
int lrc_llvm_generate(const lrc_graph *g, const lrc_schedule *s, const lrc_program *p, const lrc_llvm_target *t,
                      lrc_llvm_module **out, lrc_err *err);

/* Whether the renderer has code for op (a kernel, a value inside fused
 * groups, or none needed): read from its per-op table (kernels.c). */
bool lrc_llvm_supports_op(lrc_op op);

/* Native code for a module, as an object file's bytes, and where it came
 * from: the kernel cache's "llvm" folder (lrc_codegen.h) holds it under a
 * hash of the module's IR before optimisation, the target (triple, CPU,
 * features), LLVM's version and the options; on a miss the module is
 * optimised, compiled and the entry written. LRC_LLVM_CACHE=off (or
 * LRC_CACHE=off) compiles every time. */
typedef struct lrc_llvm_object {
    void *data;
    size_t size;
    lrc_kcache_state cache;
} lrc_llvm_object;
int lrc_llvm_module_compile(lrc_llvm_module *m, lrc_llvm_object *obj, lrc_err *err);
void lrc_llvm_object_free(lrc_llvm_object *obj);
/* The object in a file (ahead of time). */
int lrc_llvm_object_write(const lrc_llvm_object *obj, const char *path, lrc_err *err);

typedef struct lrc_llvm_jit lrc_llvm_jit;
/* Loads the object's native code into memory (just in time). */
int lrc_llvm_jit_new(const lrc_llvm_object *obj, lrc_llvm_jit **out, lrc_err *err);
lrc_kernel_fn lrc_llvm_jit_lookup(lrc_llvm_jit *j, const char *name, lrc_err *err);
void lrc_llvm_jit_free(lrc_llvm_jit *j);

#endif
