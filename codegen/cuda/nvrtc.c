/* nvrtc.c — NVRTC, loaded with dlopen when first needed: the same lrc
 * binary builds and runs where no CUDA toolkit is installed, and says what
 * is missing when asked to compile for a GPU. Declares the few entry points
 * it calls itself (their C ABI is stable across NVRTC versions). */
#include "lrc_cuda.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* One compilation for one target: "sm_90" gives a cubin, "compute_90" PTX. */
static int compile_one(const char *source, const char *name, const char *arch, bool want_ptx, char **out, size_t *size,
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
    r = want_ptx ? api.ptx_size(prog, size) : api.cubin_size(prog, size);
    if (!r) {
        *out = lrc_xmalloc(*size + 1);
        r = want_ptx ? api.ptx(prog, *out) : api.cubin(prog, *out);
    }
    api.destroy(&prog);
    if (r) {
        free(*out);
        *out = NULL;
        return lrc_err_set(err, "nvrtc: cannot read the %s for %s: %s", want_ptx ? "PTX" : "cubin", arch, api.error_string(r));
    }
    return LRC_OK;
}

/* ---- the on-disk cache (docs/architecture.md, rule 7) ------------------------------------
 * An entry is named by a hash of everything the result depends on (source,
 * architecture, NVRTC version, options, whether PTX was asked for) and holds
 * a header (magic, sizes, a hash of the payload) before the cubin and PTX:
 * a damaged entry is detected, compiled again and replaced, never used. */

#define CACHE_MAGIC "LRCNVRT1"

static lrc_nvrtc_cache_state last_state;
static int compile_uncached(const char *source, const char *name, const char *arch, void **cubin, size_t *cubin_size,
                            char **ptx, lrc_err *err);

lrc_nvrtc_cache_state lrc_nvrtc_last_cache_state(void) { return last_state; }

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static bool cache_dir(char *out, size_t n)
{
    const char *dir = getenv("LRC_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char base[3800];
    if (lrc_env_is("LRC_NVRTC_CACHE", "off")) return false;
    if (dir && *dir) snprintf(base, sizeof base, "%s", dir);
    else if (xdg && *xdg) snprintf(base, sizeof base, "%s/lrc", xdg);
    else if (home && *home) snprintf(base, sizeof base, "%s/.cache/lrc", home);
    else return false;
    mkdir(base, 0755); /* parents of XDG/HOME exist; failures show up below */
    snprintf(out, n, "%s/nvrtc", base);
    return mkdir(out, 0755) == 0 || errno == EEXIST;
}

static void cache_path(const char *source, const char *arch, bool want_ptx, char *out, size_t n)
{
    char dir[4000];
    if (!cache_dir(dir, sizeof dir)) {
        out[0] = 0;
        return;
    }
    uint64_t h1 = 0xcbf29ce484222325ull, h2 = 0x84222325cbf29ce4ull;
    const char *parts[] = {source, arch, api.version_str, OPTS[0], OPTS[1], OPTS[2], want_ptx ? "ptx" : "cubin"};
    for (int i = 0; i < 7; i++) {
        h1 = fnv(h1, parts[i], strlen(parts[i]) + 1);
        h2 = fnv(h2, parts[i], strlen(parts[i]) + 1);
    }
    snprintf(out, n, "%s/%016llx%016llx.bin", dir, (unsigned long long)h1, (unsigned long long)h2);
}

static bool cache_read(const char *path, void **cubin, size_t *cubin_size, char **ptx)
{
    FILE *f = path[0] ? fopen(path, "rb") : NULL;
    if (!f) return false;
    char magic[8];
    uint64_t hdr[3]; /* cubin bytes, PTX bytes, hash of both */
    bool ok = fread(magic, 1, 8, f) == 8 && !memcmp(magic, CACHE_MAGIC, 8) && fread(hdr, 8, 3, f) == 3 && hdr[0] > 0 &&
              hdr[0] < ((uint64_t)1 << 32) && hdr[1] < ((uint64_t)1 << 32) && (ptx ? hdr[1] > 0 : hdr[1] == 0);
    char *data = ok ? lrc_xmalloc((size_t)(hdr[0] + hdr[1] + 1)) : NULL;
    ok = ok && fread(data, 1, (size_t)(hdr[0] + hdr[1]), f) == hdr[0] + hdr[1] && fgetc(f) == EOF &&
         fnv(0xcbf29ce484222325ull, data, (size_t)(hdr[0] + hdr[1])) == hdr[2];
    fclose(f);
    if (!ok) {
        free(data);
        return false;
    }
    *cubin = lrc_xmalloc((size_t)hdr[0]);
    memcpy(*cubin, data, (size_t)hdr[0]);
    *cubin_size = (size_t)hdr[0];
    if (ptx) {
        *ptx = lrc_xmalloc((size_t)hdr[1] + 1);
        memcpy(*ptx, data + hdr[0], (size_t)hdr[1]);
        (*ptx)[hdr[1]] = 0;
    }
    free(data);
    return true;
}

/* Best effort: a cache that cannot be written only costs a compilation. */
static void cache_write(const char *path, const void *cubin, size_t cubin_size, const char *ptx)
{
    if (!path[0]) return;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    uint64_t n_ptx = ptx ? strlen(ptx) : 0, h = fnv(fnv(0xcbf29ce484222325ull, cubin, cubin_size), ptx ? ptx : "", (size_t)n_ptx);
    uint64_t hdr[3] = {cubin_size, n_ptx, h};
    FILE *f = fopen(tmp, "wb");
    bool ok = f && fwrite(CACHE_MAGIC, 1, 8, f) == 8 && fwrite(hdr, 8, 3, f) == 3 && fwrite(cubin, 1, cubin_size, f) == cubin_size &&
              fwrite(ptx ? ptx : "", 1, (size_t)n_ptx, f) == n_ptx;
    if (f && fclose(f)) ok = false;
    if (!ok || rename(tmp, path)) remove(tmp);
}

int lrc_nvrtc_compile(const char *source, const char *name, const char *arch, void **cubin, size_t *cubin_size, char **ptx,
                      lrc_err *err)
{
    if (!load()) return lrc_err_set(err, "%s", api.why);
    char path[4200];
    cache_path(source, arch, ptx != NULL, path, sizeof path);
    struct stat st;
    bool existed = path[0] && stat(path, &st) == 0;
    if (cache_read(path, cubin, cubin_size, ptx)) {
        last_state = LRC_NVRTC_CACHE_HIT;
        return LRC_OK;
    }
    last_state = existed ? LRC_NVRTC_CACHE_REBUILT : path[0] ? LRC_NVRTC_CACHE_MISS : LRC_NVRTC_CACHE_OFF;
    int rc = compile_uncached(source, name, arch, cubin, cubin_size, ptx, err);
    if (!rc) cache_write(path, *cubin, *cubin_size, ptx ? *ptx : NULL);
    return rc;
}

static int compile_uncached(const char *source, const char *name, const char *arch, void **cubin, size_t *cubin_size,
                            char **ptx, lrc_err *err)
{
    int sm = 0;
    if (sscanf(arch, "sm_%d", &sm) != 1 || sm < 50)
        return lrc_err_set(err, "--arch %s: expected sm_XX with XX >= 50 (sm_80, sm_90, ...)", arch);
    char *bin = NULL;
    int rc = compile_one(source, name, arch, false, &bin, cubin_size, err);
    if (rc) return rc;
    *cubin = bin;
    if (ptx) {
        char virt[32];
        size_t n;
        snprintf(virt, sizeof virt, "compute_%d", sm);
        if ((rc = compile_one(source, name, virt, true, ptx, &n, err))) {
            free(bin);
            *cubin = NULL;
            return rc;
        }
        (*ptx)[n] = 0;
    }
    return LRC_OK;
}
