/* cuemu_cubin.c — what a cubin says of a kernel's resources, so the
 * emulator refuses a launch a GPU would refuse: more threads than the
 * kernel's __launch_bounds__, more registers than a multiprocessor has for
 * the block.
 *
 * A cubin is an ELF file. Its .nv.info section holds records (a format
 * byte, an attribute byte, then a 2-byte value, or a 2-byte size and that
 * many bytes); EIATTR_REGCOUNT (0x2f) pairs a kernel's symbol index with its
 * registers a thread. .nv.info.NAME holds EIATTR_MAX_THREADS (0x05: x, y, z,
 * from __launch_bounds__) and .nv.shared.NAME's size is the kernel's static
 * shared memory (on sm_90 with the 1 KiB the system reserves a block).
 * Registers and shared memory checked against ptxas -v on lrc's kernels. */
#include "cuemu.h"

#include <stdio.h>
#include <string.h>

enum { EIFMT_SVAL = 4, EIATTR_MAX_THREADS = 0x05, EIATTR_REGCOUNT = 0x2f, SHT_SYMTAB = 2, SHT_NOBITS = 8 };

typedef struct {
    const unsigned char *b;
    size_t n;
} bytes;

/* the little-endian value of width bytes at offset at, or 0 past the end */
static uint64_t get(bytes e, uint64_t at, int width)
{
    uint64_t v = 0;
    if (at > e.n || (uint64_t)width > e.n - at) return 0;
    for (int i = width - 1; i >= 0; i--) v = v << 8 | e.b[at + (size_t)i];
    return v;
}

typedef struct {
    uint32_t name, type, link;
    uint64_t offset, size;
    int ok; /* its bytes lie inside the file (or it has none there, as .nv.shared) */
} section;

/* section header i; every offset and size read from the file is checked
 * before use, so a truncated or corrupt image reads nothing outside it */
static section sec(bytes e, unsigned i)
{
    const uint64_t shoff = get(e, 0x28, 8), size = get(e, 0x3a, 2);
    section s = {0};
    if (size < 64 || shoff > e.n || (uint64_t)i * size > e.n - shoff) return s;
    const uint64_t at = shoff + (uint64_t)i * size;
    s = (section){(uint32_t)get(e, at, 4), (uint32_t)get(e, at + 4, 4), (uint32_t)get(e, at + 40, 4), get(e, at + 24, 8),
                  get(e, at + 32, 8), 0};
    s.ok = s.type == SHT_NOBITS || (s.offset <= e.n && s.size <= e.n - s.offset);
    return s;
}

/* the NUL-terminated string at offset off of string table s, or "" */
static const char *str(bytes e, section s, uint32_t off)
{
    if (!s.ok || s.type == SHT_NOBITS || off >= s.size) return "";
    const char *p = (const char *)e.b + s.offset + off;
    return memchr(p, 0, s.size - off) ? p : "";
}

/* word `word` of the value of attribute attr in info section s (for
 * REGCOUNT, the count of symbol sym), or 0 */
static uint64_t info(bytes e, section s, int attr, uint32_t sym, int word)
{
    if (!s.ok || s.type == SHT_NOBITS) return 0;
    for (uint64_t r = 0; r + 4 <= s.size;) {
        const int fmt = e.b[s.offset + r], a = e.b[s.offset + r + 1];
        const uint64_t len = fmt == EIFMT_SVAL ? get(e, s.offset + r + 2, 2) : 0;
        if (len > s.size - r - 4) return 0; /* a record past its section */
        if (fmt == EIFMT_SVAL && a == attr) {
            if (attr == EIATTR_REGCOUNT && len >= 8 && get(e, s.offset + r + 4, 4) == sym) return get(e, s.offset + r + 8, 4);
            if (attr != EIATTR_REGCOUNT && 4 * (uint64_t)word + 4 <= len) return get(e, s.offset + r + 4 + 4 * (uint64_t)word, 4);
        }
        r += 4 + len;
    }
    return 0;
}

int cuemu_cubin_resources(const void *image, size_t size, const char *name, cuemu_resources *out)
{
    const bytes e = {image, size};
    if (size < 64 || memcmp(image, "\177ELF", 4) || e.b[4] != 2) return 1; /* PTX, or not a 64-bit ELF */
    const unsigned count = (unsigned)get(e, 0x3c, 2);
    const uint64_t shoff = get(e, 0x28, 8), entsize = get(e, 0x3a, 2);
    if (entsize < 64 || shoff > size || count * entsize > size - shoff) return 1; /* the section headers past the end */
    const section names = sec(e, (unsigned)get(e, 0x3e, 2));
    char want_info[160], want_shared[160];
    snprintf(want_info, sizeof want_info, ".nv.info.%s", name);
    snprintf(want_shared, sizeof want_shared, ".nv.shared.%s", name);
    section global = {0}, own = {0};
    int64_t sym = -1, found_own = 0, found_global = 0;
    *out = (cuemu_resources){0, 0, 0};
    for (unsigned i = 0; i < count; i++) {
        const section s = sec(e, i);
        const char *n = str(e, names, s.name);
        if (!strcmp(n, ".nv.info")) global = s, found_global = s.ok;
        else if (!strcmp(n, want_info)) own = s, found_own = s.ok;
        else if (!strcmp(n, want_shared)) out->shared = s.size; /* NOBITS: a size, no bytes in the file */
        else if (s.type == SHT_SYMTAB && s.ok) { /* s.size within the file: at most a pass over it */
            const section strings = sec(e, s.link);
            for (uint64_t k = 0; k < s.size / 24; k++)
                if (!strcmp(str(e, strings, (uint32_t)get(e, s.offset + k * 24, 4)), name)) sym = (int64_t)k;
        }
    }
    if (sym < 0 || !found_global || !found_own) return 1;
    const uint64_t regs = info(e, global, EIATTR_REGCOUNT, (uint32_t)sym, 0);
    uint64_t bound[3], threads = 1;
    for (int w = 0; w < 3; w++) threads *= (bound[w] = info(e, own, EIATTR_MAX_THREADS, 0, w)) <= 1024 ? bound[w] : 0;
    if (!regs || regs > 255 || (!threads && (bound[0] || bound[1] || bound[2])) || threads > 1024) return 1; /* not as nvcc writes it */
    out->regs = (unsigned)regs, out->max_threads = (unsigned)threads; /* 0: no __launch_bounds__ */
    return 0;
}
