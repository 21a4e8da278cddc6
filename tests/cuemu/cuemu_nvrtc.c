/* cuemu_nvrtc.c — NVRTC for the emulator: every call goes to the real
 * library (CUEMU_REAL_NVRTC, or LRC_CUEMU_NVRTC), and each cubin or PTX it
 * hands out is registered under the hash of its bytes with the source it
 * came from, so cuModuleLoadData (cuemu.c) can find and compile that source
 * for the host. Also the registry and the host compile. */
#define _GNU_SOURCE
#include "cuemu.h"

#include <dlfcn.h>
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

/* the source of each live program */
static struct {
    prog p;
    char *src;
} progs[64];

static const char *source_of(prog p)
{
    for (int i = 0; i < 64; i++)
        if (progs[i].p == p) return progs[i].src;
    return NULL;
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

static int paths(const void *image, size_t size, char *src, char *so, size_t n)
{
    const char *d = dir();
    uint64_t h = fnv1a(image, size);
    snprintf(src, n, "%s/%016llx.cu", d, (unsigned long long)h);
    snprintf(so, n, "%s/%016llx.so", d, (unsigned long long)h);
    return access(src, R_OK) != 0;
}

int cuemu_image_paths(const void *image, size_t size, char *src, char *so, size_t n)
{
    if (!paths(image, size, src, so, n)) return 0;
    fprintf(stderr, "cuemu: no source registered for this %zu-byte image in %s (compiled without the emulator's NVRTC, or with the NVRTC cache on?)\n",
            size, dir());
    return 1;
}

static void register_image(prog p, const void *image)
{
    const char *text = source_of(p);
    char src[4200], so[4200], tmp[4300];
    if (!text) return;
    size_t size = cuemu_image_size(image);
    if (!paths(image, size, src, so, sizeof src)) return; /* already there */
    snprintf(tmp, sizeof tmp, "%s.%d", src, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f || fputs(text, f) == EOF || fclose(f) || rename(tmp, src)) fprintf(stderr, "cuemu: cannot write %s\n", src);
}

int cuemu_compile(const char *src, const char *so)
{
    struct stat built, prelude;
    /* compiled already, after the prelude last changed */
    if (!stat(so, &built) && !stat(CUEMU_PRELUDE, &prelude) && built.st_mtime > prelude.st_mtime) return 0;
    char tmp[4300], cmd[13000];
    snprintf(tmp, sizeof tmp, "%s.%d", so, (int)getpid());
    snprintf(cmd, sizeof cmd, "'%s' -std=c++17 -O1 -w -fPIC -shared -include '%s' -x c++ '%s' -o '%s'", CUEMU_CXX, CUEMU_PRELUDE, src, tmp);
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

int nvrtcCompileProgram(prog p, int n, const char *const *o) { return REAL(int (*)(prog, int, const char *const *), nvrtcCompileProgram)(p, n, o); }
int nvrtcGetProgramLogSize(prog p, size_t *n) { return REAL(int (*)(prog, size_t *), nvrtcGetProgramLogSize)(p, n); }
int nvrtcGetProgramLog(prog p, char *s) { return REAL(int (*)(prog, char *), nvrtcGetProgramLog)(p, s); }
int nvrtcGetCUBINSize(prog p, size_t *n) { return REAL(int (*)(prog, size_t *), nvrtcGetCUBINSize)(p, n); }
int nvrtcGetPTXSize(prog p, size_t *n) { return REAL(int (*)(prog, size_t *), nvrtcGetPTXSize)(p, n); }
int nvrtcVersion(int *major, int *minor) { return REAL(int (*)(int *, int *), nvrtcVersion)(major, minor); }
const char *nvrtcGetErrorString(int r) { return REAL(const char *(*)(int), nvrtcGetErrorString)(r); }
