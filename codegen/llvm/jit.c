/* jit.c — the LLVM side of compiling: the host target machine, the module
 * and its optimisation (new pass manager, default<O3>), native code as an
 * object, from the kernel cache (codegen/kcache.c) when the module's IR was
 * compiled before with the same target, LLVM and options, written to a file
 * (ahead of time) or loaded by ORC LLJIT (just in time). Both paths take the
 * same object, so JIT and AOT code are the same code. */
#include "emit.h"
#include "lrc_llvm.h"

#include <llvm/Config/llvm-config.h>
#include <llvm-c/Analysis.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/Error.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lrc_llvm_module {
    em_t e;
    LLVMTargetMachineRef tm;
    lrc_llvm_target target;
    bool optimized;
};

struct lrc_llvm_jit {
    LLVMOrcLLJITRef jit;
};

#define STR2(x) #x
#define STR(x) STR2(x)
const char *lrc_llvm_version(void) { return "LLVM " STR(LLVM_VERSION_MAJOR) "." STR(LLVM_VERSION_MINOR) "." STR(LLVM_VERSION_PATCH); }

static void init_llvm(void)
{
    static int done;
    if (done) return;
    LLVMInitializeNativeTarget();
    LLVMInitializeNativeAsmPrinter();
    done = 1;
}

static int error_msg(LLVMErrorRef e, const char *what, lrc_err *err)
{
    char *m = LLVMGetErrorMessage(e);
    lrc_err_set(err, "%s: %s", what, m);
    LLVMDisposeErrorMessage(m);
    return LRC_EUSER;
}

int lrc_llvm_target_host(lrc_llvm_target *t, lrc_err *err)
{
    init_llvm();
    memset(t, 0, sizeof *t);
    char *triple = LLVMGetDefaultTargetTriple(), *cpu = LLVMGetHostCPUName(), *feat = LLVMGetHostCPUFeatures();
    snprintf(t->triple, sizeof t->triple, "%s", triple);
    snprintf(t->cpu, sizeof t->cpu, "%s", cpu);
    snprintf(t->features, sizeof t->features, "%s", feat);
    LLVMDisposeMessage(triple);
    LLVMDisposeMessage(cpu);
    LLVMDisposeMessage(feat);
    if (!strstr(t->features, "+avx2") || !strstr(t->features, "+fma"))
        return lrc_err_set(err, "the cpu target needs AVX2 and FMA; this CPU (%s) lacks them", t->cpu);
    /* 8-wide vectors everywhere: AVX-512 doubles the registers (ymm16-31),
     * which the GEMM tile uses, but on the CPUs here it does not double
     * the FMA throughput. */
    t->vec = 8;
    bool avx512 = strstr(t->features, "+avx512f") && strstr(t->features, "+avx512vl");
    /* mc and mc_wide: an item's rows of X (a block of kc: 192 or 384 KB)
     * and its partial sums (as much) in the 2 MB L2 of the AVX-512 Xeons.
     * mc 192 against 96 there: the 60m step's GEMMs 961-968 ms against
     * 995-1045 in two alternated runs, level in a third, the shapes alone
     * 1-3% faster. AVX2's EPYCs have 512 KB.
     * kc: there, sums over K up to 2048 in one pass, where blocks of 256
     * spent more on carrying the partial sums than they saved: a row tile's
     * panels stream from L3 fast enough (an AMD EPYC, the 60m step's GEMMs
     * 1690 -> 1597 ms and 1734 -> 1581 ms, medians of 6 and 8 alternated
     * runs; dX's 1024 x 512 x 1376, matmul_nn, 139.9 -> 168.2 GFLOP/s).
     * AVX2's mc 48, not 96: a row tile reads the item's panels from L3
     * either way (256 columns of K 512 fill the 512 KB L2), so shorter items
     * cost nothing there, and twice as many of them leave two threads half
     * the wait on the last one (an EPYC, 2 threads, medians of 5 alternated
     * rounds: 1024 x 512 x 512 157.5 -> 168.7 GFLOP/s, x 1376 x 512 165.7
     * -> 179.1, matmul_nn's 1024 x 512 x 1376 170.0 -> 174.6; on one
     * thread, an earlier test, no gain). mc_head keeps an LM head's loss blocks at 96 rows. */
    t->tiling = avx512 ? (lrc_gemm_tiling){.mr = 12, .vec = 16, .nv = 2, .mc = 192, .mc_wide = 384, .mc_min = 96, .mc_head = 192,
                                           .nc = 256, .kc = 256}
                       : (lrc_gemm_tiling){.mr = 6, .vec = 8, .nv = 2, .mc = 48, .mc_wide = 96, .mc_min = 96, .mc_head = 96,
                                           .nc = 256, .kc = 2048};
    return LRC_OK;
}

static LLVMTargetMachineRef make_tm(const lrc_llvm_target *t, lrc_err *err)
{
    init_llvm();
    LLVMTargetRef target;
    char *msg = NULL;
    if (LLVMGetTargetFromTriple(t->triple, &target, &msg)) {
        lrc_err_set(err, "LLVM has no target for %s: %s", t->triple, msg ? msg : "");
        LLVMDisposeMessage(msg);
        return NULL;
    }
    return LLVMCreateTargetMachine(target, t->triple, t->cpu, t->features, LLVMCodeGenLevelAggressive, LLVMRelocPIC,
                                   LLVMCodeModelDefault);
}

lrc_llvm_module *lrc_llvm_module_new(const char *name, const lrc_llvm_target *t, lrc_err *err)
{
    lrc_llvm_module *m = lrc_xcalloc(1, sizeof *m);
    m->target = *t;
    m->tm = make_tm(t, err);
    if (!m->tm) {
        free(m);
        return NULL;
    }
    em_init(&m->e, name);
    LLVMSetTarget(m->e.mod, t->triple);
    LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(m->tm);
    LLVMSetModuleDataLayout(m->e.mod, dl);
    LLVMDisposeTargetData(dl);
    return m;
}

struct em *lrc_llvm_module_emitter(lrc_llvm_module *m) { return &m->e; }

int lrc_llvm_module_verify(lrc_llvm_module *m, lrc_err *err)
{
    char *msg = NULL;
    if (LLVMVerifyModule(m->e.mod, LLVMReturnStatusAction, &msg)) {
        /* a bug in a generator, not the user's: say so, with LLVM's words */
        lrc_err_set(err, "internal error: generated LLVM IR does not verify: %.400s", msg ? msg : "");
        LLVMDisposeMessage(msg);
        return LRC_EUSER;
    }
    LLVMDisposeMessage(msg);
    return LRC_OK;
}

/* The optimisation and code generation options: part of every cache key. */
#define OPT_PIPELINE "default<O3>"
#define OPT_KEY OPT_PIPELINE ";loop-vectorize;slp-vectorize;loop-unroll;codegen-aggressive;pic;object"

int lrc_llvm_module_optimize(lrc_llvm_module *m, lrc_err *err)
{
    if (m->optimized) return LRC_OK;
    LLVMPassBuilderOptionsRef opts = LLVMCreatePassBuilderOptions();
    LLVMPassBuilderOptionsSetLoopVectorization(opts, 1);
    LLVMPassBuilderOptionsSetSLPVectorization(opts, 1);
    LLVMPassBuilderOptionsSetLoopUnrolling(opts, 1);
    LLVMErrorRef e = LLVMRunPasses(m->e.mod, OPT_PIPELINE, m->tm, opts);
    LLVMDisposePassBuilderOptions(opts);
    if (e) return error_msg(e, "LLVM optimisation", err);
    m->optimized = true;
    return LRC_OK;
}

/* The cache entry for m's IR before optimisation (its bitcode), the
 * target, LLVM's version and the options. */
static void cache_path(lrc_llvm_module *m, char *path, size_t cap)
{
    path[0] = 0;
    if (!lrc_kcache_enabled("LRC_LLVM_CACHE")) return;
    LLVMMemoryBufferRef bc = LLVMWriteBitcodeToMemoryBuffer(m->e.mod);
    const char *version = lrc_llvm_version();
    const lrc_llvm_target *t = &m->target;
    lrc_kcache_blob parts[] = {{LLVMGetBufferStart(bc), LLVMGetBufferSize(bc)},
                               {t->triple, strlen(t->triple)},
                               {t->cpu, strlen(t->cpu)},
                               {t->features, strlen(t->features)},
                               {version, strlen(version)},
                               {OPT_KEY, strlen(OPT_KEY)}};
    lrc_kcache_path("llvm", parts, (int)(sizeof parts / sizeof parts[0]), path, cap);
    LLVMDisposeMemoryBuffer(bc);
}

int lrc_llvm_module_compile(lrc_llvm_module *m, lrc_llvm_object *obj, lrc_err *err)
{
    memset(obj, 0, sizeof *obj);
    char path[4400];
    /* an optimised module (LRC_DUMP_IR printed it) is not what keys name */
    if (!m->optimized) cache_path(m, path, sizeof path);
    else path[0] = 0;
    bool existed = lrc_kcache_exists(path);
    lrc_kcache_blob seg;
    if (lrc_kcache_read(path, 1, &seg)) {
        if (seg.size > 0) {
            *obj = (lrc_llvm_object){(void *)seg.data, seg.size, LRC_KCACHE_HIT};
            return LRC_OK;
        }
        free((void *)seg.data);
    }
    int rc = lrc_llvm_module_optimize(m, err);
    if (rc) return rc;
    char *msg = NULL;
    LLVMMemoryBufferRef buf;
    if (LLVMTargetMachineEmitToMemoryBuffer(m->tm, m->e.mod, LLVMObjectFile, &msg, &buf)) {
        lrc_err_set(err, "LLVM code generation failed: %s", msg ? msg : "");
        LLVMDisposeMessage(msg);
        return LRC_EUSER;
    }
    size_t n = LLVMGetBufferSize(buf);
    obj->data = lrc_xmalloc(n + 1);
    memcpy(obj->data, LLVMGetBufferStart(buf), n);
    obj->size = n;
    LLVMDisposeMemoryBuffer(buf);
    obj->cache = existed ? LRC_KCACHE_REBUILT : path[0] ? LRC_KCACHE_MISS : LRC_KCACHE_OFF;
    lrc_kcache_write(path, &(lrc_kcache_blob){obj->data, obj->size}, 1);
    return LRC_OK;
}

void lrc_llvm_object_free(lrc_llvm_object *obj)
{
    free(obj->data);
    memset(obj, 0, sizeof *obj);
}

void lrc_llvm_module_free(lrc_llvm_module *m)
{
    if (!m) return;
    em_dispose_builder(&m->e);
    if (m->e.mod) LLVMDisposeModule(m->e.mod);
    if (m->e.ctx) LLVMContextDispose(m->e.ctx);
    if (m->tm) LLVMDisposeTargetMachine(m->tm);
    free(m);
}

char *lrc_llvm_module_print(lrc_llvm_module *m)
{
    char *s = LLVMPrintModuleToString(m->e.mod), *copy = lrc_xstrdup(s);
    LLVMDisposeMessage(s);
    return copy;
}

int lrc_llvm_object_write(const lrc_llvm_object *obj, const char *path, lrc_err *err)
{
    FILE *f = fopen(path, "wb");
    bool ok = f && fwrite(obj->data, 1, obj->size, f) == obj->size;
    if (f && fclose(f)) ok = false;
    if (!ok) return lrc_err_set(err, "%s: cannot write object code: %s", path, strerror(errno));
    return LRC_OK;
}

int lrc_llvm_jit_new(const lrc_llvm_object *obj, lrc_llvm_jit **out, lrc_err *err)
{
    LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(obj->data, obj->size, "lrc kernels");
    lrc_llvm_jit *j = lrc_xcalloc(1, sizeof *j);
    LLVMErrorRef e = LLVMOrcCreateLLJIT(&j->jit, NULL);
    if (e) {
        LLVMDisposeMemoryBuffer(buf);
        free(j);
        return error_msg(e, "cannot create the LLVM JIT", err);
    }
    /* kernels call into libm and libc (exp, pow, malloc) from this process */
    LLVMOrcDefinitionGeneratorRef gen;
    e = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(&gen, LLVMOrcLLJITGetGlobalPrefix(j->jit), NULL, NULL);
    if (!e) LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(j->jit), gen);
    if (!e) e = LLVMOrcLLJITAddObjectFile(j->jit, LLVMOrcLLJITGetMainJITDylib(j->jit), buf);
    else LLVMDisposeMemoryBuffer(buf);
    if (e) {
        lrc_llvm_jit_free(j);
        return error_msg(e, "cannot load the generated code", err);
    }
    *out = j;
    return LRC_OK;
}

lrc_kernel_fn lrc_llvm_jit_lookup(lrc_llvm_jit *j, const char *name, lrc_err *err)
{
    LLVMOrcExecutorAddress addr = 0;
    LLVMErrorRef e = LLVMOrcLLJITLookup(j->jit, &addr, name);
    if (e) {
        error_msg(e, name, err);
        return NULL;
    }
    lrc_kernel_fn fn;
    memcpy(&fn, &(void *){(void *)(uintptr_t)addr}, sizeof fn);
    return fn;
}

void lrc_llvm_jit_free(lrc_llvm_jit *j)
{
    if (!j) return;
    if (j->jit) LLVMOrcDisposeLLJIT(j->jit);
    free(j);
}
