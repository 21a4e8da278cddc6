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

enum { EIFMT_SVAL = 4, EIATTR_MAX_THREADS = 0x05, EIATTR_REGCOUNT = 0x2f, SHT_SYMTAB = 2 };

typedef struct {
    const unsigned char *b;
    size_t n;
} bytes;

static uint64_t get(bytes e, size_t at, int width)
{
    uint64_t v = 0;
    if (at + (size_t)width > e.n) return 0;
    for (int i = width - 1; i >= 0; i--) v = v << 8 | e.b[at + (size_t)i];
    return v;
}

typedef struct {
    uint32_t name, type, link;
    uint64_t offset, size;
} section;

static section sec(bytes e, unsigned i)
{
    const size_t at = get(e, 0x28, 8) + (size_t)i * get(e, 0x3a, 2);
    return (section){(uint32_t)get(e, at, 4), (uint32_t)get(e, at + 4, 4), (uint32_t)get(e, at + 40, 4), get(e, at + 24, 8),
                     get(e, at + 32, 8)};
}

/* the NUL-terminated string at offset off of string table s, or "" */
static const char *str(bytes e, section s, uint32_t off)
{
    if (s.offset + off >= e.n || !memchr(e.b + s.offset + off, 0, e.n - s.offset - off)) return "";
    return (const char *)e.b + s.offset + off;
}

/* the value of attribute attr in info section s (for REGCOUNT, the one of
 * symbol sym), or 0 */
static uint64_t info(bytes e, section s, int attr, uint32_t sym, int word)
{
    for (size_t at = s.offset; at + 4 <= s.offset + s.size && at + 4 <= e.n;) {
        const int fmt = e.b[at], a = e.b[at + 1];
        const size_t len = fmt == EIFMT_SVAL ? get(e, at + 2, 2) : 0;
        if (fmt == EIFMT_SVAL && a == attr) {
            if (attr == EIATTR_REGCOUNT && get(e, at + 4, 4) == sym) return get(e, at + 8, 4);
            if (attr != EIATTR_REGCOUNT) return get(e, at + 4 + 4 * (size_t)word, 4);
        }
        at += 4 + len;
    }
    return 0;
}

int cuemu_cubin_resources(const void *image, size_t size, const char *name, cuemu_resources *out)
{
    const bytes e = {image, size};
    if (size < 64 || memcmp(image, "\177ELF", 4) || e.b[4] != 2) return 1; /* PTX, or not a 64-bit ELF */
    const unsigned count = (unsigned)get(e, 0x3c, 2);
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
        if (!strcmp(n, ".nv.info")) global = s, found_global = 1;
        else if (!strcmp(n, want_info)) own = s, found_own = 1;
        else if (!strcmp(n, want_shared)) out->shared = s.size;
        else if (s.type == SHT_SYMTAB) {
            const section strings = sec(e, s.link);
            for (uint64_t k = 0; k < s.size / 24; k++)
                if (!strcmp(str(e, strings, (uint32_t)get(e, s.offset + k * 24, 4)), name)) sym = (int64_t)k;
        }
    }
    if (sym < 0 || !found_global || !found_own) return 1;
    out->regs = (unsigned)info(e, global, EIATTR_REGCOUNT, (uint32_t)sym, 0);
    out->max_threads = (unsigned)(info(e, own, EIATTR_MAX_THREADS, 0, 0) * info(e, own, EIATTR_MAX_THREADS, 0, 1) *
                                  info(e, own, EIATTR_MAX_THREADS, 0, 2));
    return 0;
}
