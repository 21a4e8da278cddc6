/* nvrtc.c — NVRTC, loaded with dlopen when first needed: the same lrc
 * binary builds and runs where no CUDA toolkit is installed, and says what
 * is missing when asked to compile for a GPU. Declares the few entry points
 * it calls itself (their C ABI is stable across NVRTC versions). */
#include "lrc_cuda.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct nvrtc_prog *nvrtc_program;

/* no fast-math: the same arithmetic as the reference, within rounding; part
 * of every cache key */
static const char *const OPTS[3] = {"--std=c++17", "-default-device", "--extra-device-vectorization"};
typedef struct {
    void *lib;
    int (*create)(nvrtc_program *, const char *, const char *, int, const char *const *, const char *const *);
    int (*compile)(nvrtc_program, int, const char *const *);
    int (*log_size)(nvrtc_program, size_t *);
    int (*log)(nvrtc_program, char *);
    int (*cubin_size)(nvrtc_program, size_t *);
    int (*cubin)(nvrtc_program, char *);
    int (*ptx_size)(nvrtc_program, size_t *);
    int (*ptx)(nvrtc_program, char *);
    int (*destroy)(nvrtc_program *);
    int (*version)(int *, int *);
    const char *(*error_string)(int);
    char why[256], version_str[32];
    bool tried;
} nvrtc_api;

static nvrtc_api api;

static bool load(void)
{
    if (api.tried) return api.lib != NULL;
    api.tried = true;
    static const char *names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "/usr/local/cuda/lib64/libnvrtc.so"};
    for (size_t i = 0; i < sizeof names / sizeof *names && !api.lib; i++) api.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!api.lib) {
        snprintf(api.why, sizeof api.why, "NVRTC not found (libnvrtc.so: install the CUDA toolkit or add its lib64 to LD_LIBRARY_PATH)");
        return false;
    }
#define SYM(field, name)                                                                             \
    if (!(*(void **)&api.field = dlsym(api.lib, name))) {                                            \
        snprintf(api.why, sizeof api.why, "NVRTC library lacks %s (too old a CUDA toolkit?)", name); \
        dlclose(api.lib);                                                                            \
        api.lib = NULL;                                                                              \
        return false;                                                                                \
    }
    SYM(create, "nvrtcCreateProgram");
    SYM(compile, "nvrtcCompileProgram");
    SYM(log_size, "nvrtcGetProgramLogSize");
    SYM(log, "nvrtcGetProgramLog");
    SYM(cubin_size, "nvrtcGetCUBINSize");
    SYM(cubin, "nvrtcGetCUBIN");
    SYM(ptx_size, "nvrtcGetPTXSize");
    SYM(ptx, "nvrtcGetPTX");
    SYM(destroy, "nvrtcDestroyProgram");
    SYM(version, "nvrtcVersion");
    SYM(error_string, "nvrtcGetErrorString");
#undef SYM
    int major = 0, minor = 0;
    api.version(&major, &minor);
    snprintf(api.version_str, sizeof api.version_str, "%d.%d", major, minor);
    return true;
}

bool lrc_nvrtc_available(char *why, size_t n)
{
    bool ok = load();
    if (!ok && why) snprintf(why, n, "%s", api.why);
    return ok;
}

const char *lrc_nvrtc_version(void) { return load() ? api.version_str : "none"; }

/* One result of a compiled program into *out (NUL-terminated), *size its bytes. */
static int take_output(nvrtc_program prog, const char *arch, bool want_ptx, char **out, size_t *size, lrc_err *err)
{
    int r = want_ptx ? api.ptx_size(prog, size) : api.cubin_size(prog, size);
    if (!r) {
        *out = lrc_xcalloc(*size + 1, 1);
        r = want_ptx ? api.ptx(prog, *out) : api.cubin(prog, *out);
    }
    if (!r) return LRC_OK;
    free(*out);
    *out = NULL;
    return lrc_err_set(err, "nvrtc: cannot read the %s for %s: %s", want_ptx ? "PTX" : "cubin", arch, api.error_string(r));
}

/* One compilation for a real architecture ("sm_90"): its cubin, and with
 * ptx its PTX, which NVRTC keeps from the same compilation (the bytes a
 * compilation for "compute_90" gives, the driver's to compile for newer
 * GPUs): one front end and optimizer run, not two. */
static int compile_one(const char *source, const char *name, const char *arch, char **cubin, size_t *cubin_size, char **ptx,
                       lrc_err *err)
{
    nvrtc_program prog = NULL;
    int r = api.create(&prog, source, name, 0, NULL, NULL);
    if (r) return lrc_err_set(err, "nvrtc: cannot create a program: %s", api.error_string(r));
    char arch_opt[64];
    snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s", arch);
    const char *opts[] = {arch_opt, OPTS[0], OPTS[1], OPTS[2]};
    r = api.compile(prog, 4, opts);
    if (r) {
        size_t ls = 0;
        api.log_size(prog, &ls);
        char *log = lrc_xcalloc(ls + 1, 1);
        api.log(prog, log);
        /* the first error line of the log, which names the kernel source line */
        char *line = strstr(log, "error");
        while (line && line > log && line[-1] != '\n') line--; /* from "name(LINE): error: ..." */
        char *end = line ? strchr(line, '\n') : NULL;
        if (end) *end = 0;
        lrc_err_set(err, "nvrtc %s for %s: %s: %s", api.version_str, arch, api.error_string(r), line ? line : log);
        free(log);
        api.destroy(&prog);
        return LRC_EUSER;
    }
    size_t n;
    int rc = take_output(prog, arch, false, cubin, cubin_size, err);
    if (!rc && ptx && (rc = take_output(prog, arch, true, ptx, &n, err))) {
        free(*cubin);
        *cubin = NULL;
    }
    api.destroy(&prog);
    return rc;
}

/* ---- the on-disk cache (codegen/kcache.c) ------------------------------------------------
 * An entry is named by everything the result depends on (source,
 * architecture, NVRTC version, options, whether PTX was asked for) and
 * holds the cubin and the PTX. */

static lrc_kcache_state last_state;
static int compile_uncached(const char *source, const char *name, const char *arch, void **cubin, size_t *cubin_size,
                            char **ptx, lrc_err *err);

lrc_kcache_state lrc_nvrtc_last_cache_state(void) { return last_state; }

static void cache_path(const char *source, const char *arch, bool want_ptx, char *out, size_t n)
{
    out[0] = 0;
    if (!lrc_kcache_enabled("LRC_NVRTC_CACHE")) return;
    const char *parts[] = {source, arch, api.version_str, OPTS[0], OPTS[1], OPTS[2], want_ptx ? "ptx" : "cubin"};
    lrc_kcache_blob blobs[7];
    for (int i = 0; i < 7; i++) blobs[i] = (lrc_kcache_blob){parts[i], strlen(parts[i])};
    lrc_kcache_path("nvrtc", blobs, 7, out, n);
}

static bool cache_read(const char *path, void **cubin, size_t *cubin_size, char **ptx)
{
    lrc_kcache_blob segs[2];
    if (!lrc_kcache_read(path, 2, segs)) return false;
    if (!segs[0].size || (ptx != NULL) != (segs[1].size > 0)) {
        free((void *)segs[0].data), free((void *)segs[1].data);
        return false;
    }
    *cubin = (void *)segs[0].data;
    *cubin_size = segs[0].size;
    if (ptx) *ptx = (char *)segs[1].data;
    else free((void *)segs[1].data);
    return true;
}

int lrc_nvrtc_compile(const char *source, const char *name, const char *arch, void **cubin, size_t *cubin_size, char **ptx,
                      lrc_err *err)
{
    if (!load()) return lrc_err_set(err, "%s", api.why);
    char path[4400];
    cache_path(source, arch, ptx != NULL, path, sizeof path);
    bool existed = lrc_kcache_exists(path);
    if (cache_read(path, cubin, cubin_size, ptx)) {
        last_state = LRC_KCACHE_HIT;
        return LRC_OK;
    }
    last_state = existed ? LRC_KCACHE_REBUILT : path[0] ? LRC_KCACHE_MISS : LRC_KCACHE_OFF;
    int rc = compile_uncached(source, name, arch, cubin, cubin_size, ptx, err);
    if (rc) return rc; /* nothing to cache: *cubin and *ptx were not set */
    lrc_kcache_blob segs[2] = {{*cubin, *cubin_size}, {ptx ? *ptx : "", ptx ? strlen(*ptx) : 0}};
    lrc_kcache_write(path, segs, 2);
    return LRC_OK;
}

static int compile_uncached(const char *source, const char *name, const char *arch, void **cubin, size_t *cubin_size,
                            char **ptx, lrc_err *err)
{
    int sm = 0;
    if (sscanf(arch, "sm_%d", &sm) != 1 || sm < 50)
        return lrc_err_set(err, "--arch %s: expected sm_XX with XX >= 50 (sm_80, sm_90, ...)", arch);
    char *bin = NULL;
    int rc = compile_one(source, name, arch, &bin, cubin_size, ptx, err);
    if (!rc) *cubin = bin;
    return rc;
}
