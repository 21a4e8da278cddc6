/* cuemu_nvrtc.c — NVRTC for the emulator: every call goes to the real
 * library (CUEMU_REAL_NVRTC, or LRC_CUEMU_NVRTC), and each cubin or PTX it
 * hands out is registered under the hash of its bytes with the source it
 * came from, so cuModuleLoadData (cuemu.c) can find and compile that source
 * for the host. Also the registry and the host compile. */
#define _GNU_SOURCE
#include "cuemu.h"

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef void *prog;
static void *real;

static void *sym(const char *name)
{
    if (!real) {
        const char *path = getenv("LRC_CUEMU_NVRTC");
        real = dlopen(path && *path ? path : CUEMU_REAL_NVRTC, RTLD_NOW | RTLD_LOCAL);
        if (!real) {
            fprintf(stderr, "cuemu: the real NVRTC (%s) does not load: %s\n", path && *path ? path : CUEMU_REAL_NVRTC, dlerror());
            exit(3);
        }
    }
    void *f = dlsym(real, name);
    if (!f) {
        fprintf(stderr, "cuemu: the real NVRTC lacks %s\n", name);
        exit(3);
    }
    return f;
}
#define REAL(type, name) ((type)sym(#name))

/* the source of each live program, and the architecture it was compiled
 * for (its __CUDA_ARCH__: 900 for sm_90 or compute_90; 0 when unsaid) */
static struct {
    prog p;
    char *src;
    int arch;
} progs[64];

static int prog_index(prog p)
{
    for (int i = 0; i < 64; i++)
        if (progs[i].p && progs[i].p == p) return i;
    return -1;
}

static const char *dir(void)
{
    static char d[4096];
    const char *e = getenv("LRC_CUEMU_DIR");
    if (e && *e) snprintf(d, sizeof d, "%s", e);
    else snprintf(d, sizeof d, "/tmp/lrc-cuemu-%u", (unsigned)getuid());
    mkdir(d, 0755);
    return d;
}

static uint64_t fnv1a(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

size_t cuemu_image_size(const void *image)
{
    const unsigned char *p = image;
    if (memcmp(p, "\177ELF", 4)) return strlen(image);
    uint64_t shoff;
    uint16_t shentsize, shnum;
    memcpy(&shoff, p + 0x28, 8);
    memcpy(&shentsize, p + 0x3A, 2);
    memcpy(&shnum, p + 0x3C, 2);
    return (size_t)(shoff + (uint64_t)shentsize * shnum);
}

static int paths(const void *image, size_t size, char *src, size_t n)
{
    snprintf(src, n, "%s/%016llx.cu", dir(), (unsigned long long)fnv1a(image, size));
    return access(src, R_OK) != 0;
}

/* what stands beside a registered source: its architecture */
static void arch_path(const char *src, char *out, size_t n) { snprintf(out, n, "%.*s.arch", (int)(strlen(src) - 3), src); }

int cuemu_image_paths(const void *image, size_t size, char *src, size_t n)
{
    if (!paths(image, size, src, n)) return 0;
    fprintf(stderr, "cuemu: no source registered for this %zu-byte image in %s (compiled without the emulator's NVRTC, or with the NVRTC cache on?)\n",
            size, dir());
    return 1;
}

/* text into path, through a file of this process's own renamed into place */
static void write_file(const char *path, const char *text)
{
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f || fputs(text, f) == EOF || fclose(f) || rename(tmp, path)) fprintf(stderr, "cuemu: cannot write %s\n", path);
}

static void register_image(prog p, const void *image)
{
    const int i = prog_index(p);
    char src[4200], arch[4300], num[16];
    if (i < 0) return;
    if (paths(image, cuemu_image_size(image), src, sizeof src)) write_file(src, progs[i].src);
    arch_path(src, arch, sizeof arch);
    snprintf(num, sizeof num, "%d\n", progs[i].arch);
    if (progs[i].arch && access(arch, R_OK)) write_file(arch, num);
}

/* the architecture NVRTC's options name (--gpu-architecture=sm_90, -arch
 * compute_80, ...) as __CUDA_ARCH__ has it; 0 when none does */
static int options_arch(int n, const char *const *o)
{
    int arch = 0;
    for (int i = 0; i < n; i++) {
        const char *v = NULL;
        if (!strncmp(o[i], "--gpu-architecture", 18) || !strncmp(o[i], "-arch", 5)) v = strchr(o[i], '=') ? strchr(o[i], '=') + 1 : i + 1 < n ? o[i + 1] : "";
        int sm;
        if (v && (sscanf(v, "sm_%d", &sm) == 1 || sscanf(v, "compute_%d", &sm) == 1)) arch = sm * 10;
    }
    return arch;
}

/* the architecture src was registered for; else the emulated device's */
static int source_arch(const char *src)
{
    char path[4300];
    arch_path(src, path, sizeof path);
    FILE *f = fopen(path, "r");
    int arch = 0;
    if (f) {
        if (fscanf(f, "%d", &arch) != 1) arch = 0;
        fclose(f);
    }
    const char *e = getenv("LRC_CUEMU_SM");
    return arch ? arch : 10 * (e && *e ? atoi(e) : 90);
}

/* the file's contents, NUL-terminated; NULL when it does not read */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *t = len >= 0 ? calloc((size_t)len + 1, 1) : NULL;
    if (t && fread(t, 1, (size_t)len, f) != (size_t)len) free(t), t = NULL;
    fclose(f);
    return t;
}

/* modified after the file at path, which exists */
static int newer(const struct stat *built, const char *path)
{
    struct stat s;
    return !stat(path, &s) && built->st_mtime > s.st_mtime;
}

int cuemu_compile(const char *src, char *so, size_t n)
{
    const int arch = source_arch(src);
    char host[4300], tmp[4400], cmd[13000];
    snprintf(so, n, "%.*s.sm%d.so", (int)(strlen(src) - 3), src, arch);
    snprintf(host, sizeof host, "%.*s.sm%d.host.cu", (int)(strlen(src) - 3), src, arch);
    /* compiled already, after the prelude and this library (the asm rewrite) last changed */
    Dl_info self;
    struct stat built;
    if (!stat(so, &built) && newer(&built, CUEMU_PRELUDE) && dladdr((void *)cuemu_compile, &self) && newer(&built, self.dli_fname)) return 0;
    char *text = read_text(src), *rewritten = text ? cuemu_asm_rewrite(text, src) : NULL;
    const bool read = text != NULL;
    free(text);
    if (!rewritten) {
        fprintf(stderr, "cuemu: the host compile of %s failed: %s\n", src, read ? "an asm statement without a model" : "it does not read");
        return 1;
    }
    write_file(host, rewritten);
    free(rewritten);
    snprintf(tmp, sizeof tmp, "%s.%d", so, (int)getpid());
    snprintf(cmd, sizeof cmd, "'%s' -std=c++17 -O1 -w -fPIC -shared -D__CUDA_ARCH__=%d -include '%s' -x c++ '%s' -o '%s'", CUEMU_CXX, arch,
             CUEMU_PRELUDE, host, tmp);
    if (system(cmd) != 0 || rename(tmp, so)) {
        fprintf(stderr, "cuemu: the host compile of %s failed: %s\n", src, cmd);
        remove(tmp);
        return 1;
    }
    return 0;
}

int nvrtcCreateProgram(prog *p, const char *src, const char *name, int nh, const char *const *h, const char *const *hn)
{
    int r = REAL(int (*)(prog *, const char *, const char *, int, const char *const *, const char *const *), nvrtcCreateProgram)(
        p, src, name, nh, h, hn);
    for (int i = 0; !r && i < 64; i++)
        if (!progs[i].p) {
            progs[i].p = *p;
            progs[i].src = strdup(src);
            break;
        }
    return r;
}

int nvrtcDestroyProgram(prog *p)
{
    for (int i = 0; i < 64; i++)
        if (progs[i].p && progs[i].p == *p) {
            free(progs[i].src);
            progs[i].p = NULL, progs[i].src = NULL;
        }
    return REAL(int (*)(prog *), nvrtcDestroyProgram)(p);
}

int nvrtcGetCUBIN(prog p, char *out)
{
    int r = REAL(int (*)(prog, char *), nvrtcGetCUBIN)(p, out);
    if (!r) register_image(p, out);
    return r;
}

int nvrtcGetPTX(prog p, char *out)
{
    int r = REAL(int (*)(prog, char *), nvrtcGetPTX)(p, out);
    if (!r) register_image(p, out);
    return r;
}

int nvrtcCompileProgram(prog p, int n, const char *const *o)
{
    const int i = prog_index(p);
    if (i >= 0) progs[i].arch = options_arch(n, o);
    return REAL(int (*)(prog, int, const char *const *), nvrtcCompileProgram)(p, n, o);
}
int nvrtcGetProgramLogSize(prog p, size_t *n) { return REAL(int (*)(prog, size_t *), nvrtcGetProgramLogSize)(p, n); }
int nvrtcGetProgramLog(prog p, char *s) { return REAL(int (*)(prog, char *), nvrtcGetProgramLog)(p, s); }
int nvrtcGetCUBINSize(prog p, size_t *n) { return REAL(int (*)(prog, size_t *), nvrtcGetCUBINSize)(p, n); }
int nvrtcGetPTXSize(prog p, size_t *n) { return REAL(int (*)(prog, size_t *), nvrtcGetPTXSize)(p, n); }
int nvrtcVersion(int *major, int *minor) { return REAL(int (*)(int *, int *), nvrtcVersion)(major, minor); }
const char *nvrtcGetErrorString(int r) { return REAL(const char *(*)(int), nvrtcGetErrorString)(r); }
