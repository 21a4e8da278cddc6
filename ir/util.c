/* util.c — errors, dtypes, shapes and allocation helpers of the IR layer. */
#include "lrc_ir.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

int lrc_err_set(lrc_err *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        err->nomem = false;
    }
    return LRC_EUSER;
}

int lrc_err_nomem(lrc_err *err, const char *fmt, ...)
{
    if (err) {
        static const char head[] = "out of memory ";
        memcpy(err->msg, head, sizeof head);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg + sizeof head - 1, sizeof err->msg - (sizeof head - 1), fmt, ap);
        va_end(ap);
        err->nomem = true;
    }
    return LRC_EUSER;
}

int lrc_err_prefix(lrc_err *err, const char *fmt, ...)
{
    if (err) {
        char prefix[512], old[sizeof err->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(prefix, sizeof prefix, fmt, ap);
        va_end(ap);
        memcpy(old, err->msg, sizeof old);
        /* Truncation keeps the head of the message, which says where. */
        size_t n = strlen(prefix);
        if (n > sizeof err->msg - 3) n = sizeof err->msg - 3;
        memcpy(err->msg, prefix, n);
        memcpy(err->msg + n, ": ", 2);
        size_t rest = strlen(old);
        if (rest > sizeof err->msg - n - 3) rest = sizeof err->msg - n - 3;
        memcpy(err->msg + n + 2, old, rest);
        err->msg[n + 2 + rest] = 0;
    }
    return LRC_EUSER;
}

static const struct {
    const char *name, *st_name;
    size_t size;
} dtype_info[] = {
    [LRC_F32] = {"f32", "F32", 4},
    [LRC_BF16] = {"bf16", "BF16", 2},
    [LRC_F16] = {"f16", "F16", 2},
    [LRC_I32] = {"i32", "I32", 4},
    [LRC_I8] = {"i8", "I8", 1},
    [LRC_U8] = {"u8", "U8", 1},
};
_Static_assert(sizeof dtype_info / sizeof dtype_info[0] == LRC_DTYPE_COUNT,
               "every dtype needs a row in dtype_info");

const char *lrc_dtype_name(lrc_dtype t) { return dtype_info[t].name; }
const char *lrc_dtype_st_name(lrc_dtype t) { return dtype_info[t].st_name; }
size_t lrc_dtype_size(lrc_dtype t) { return dtype_info[t].size; }

int lrc_dtype_parse(const char *name, lrc_dtype *out)
{
    for (int t = 0; t < LRC_DTYPE_COUNT; t++)
        if (!strcmp(name, dtype_info[t].name) || !strcmp(name, dtype_info[t].st_name)) {
            *out = (lrc_dtype)t;
            return 0;
        }
    return -1;
}

int64_t lrc_shape_numel(const lrc_shape *s)
{
    int64_t n = 1;
    for (int i = 0; i < s->ndim; i++) n *= s->dim[i];
    return n;
}

bool lrc_shape_eq(const lrc_shape *a, const lrc_shape *b)
{
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dim[i] != b->dim[i]) return false;
    return true;
}

char *lrc_shape_str(const lrc_shape *s, char *buf, size_t n)
{
    size_t used = 0;
    used += (size_t)snprintf(buf + used, n - used, "[");
    for (int i = 0; i < s->ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? "," : "",
                                 (long long)s->dim[i]);
    if (used < n) snprintf(buf + used, n - used, "]");
    return buf;
}

char *lrc_read_file(const char *path, size_t *len, lrc_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        lrc_err_set(err, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = lrc_read_all(f, len);
    int saved = errno;
    fclose(f);
    if (!buf && saved == ENOMEM) lrc_err_nomem(err, "reading %s", path);
    else if (!buf) lrc_err_set(err, "%s: read error: %s", path, strerror(saved));
    return buf;
}

int lrc_write_atomic(const char *path, const void *data, size_t len, lrc_err *err)
{
    char *tmp = lrc_malloc(strlen(path) + 5);
    if (!tmp) return lrc_err_nomem(err, "for the name of %s's temporary file", path);
    sprintf(tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    int rc = LRC_OK;
    if (!f || fwrite(data, 1, len, f) != len || fclose(f)) {
        rc = lrc_err_set(err, "%s: cannot write: %s", path, strerror(errno));
        if (f) remove(tmp);
    } else if (rename(tmp, path)) {
        rc = lrc_err_set(err, "%s: cannot write: %s", path, strerror(errno));
        remove(tmp);
    }
    free(tmp);
    return rc;
}

char *lrc_read_all(FILE *f, size_t *len)
{
    char *buf = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (n + 1 >= cap) {
            size_t more = cap ? 2 * cap : 1 << 16;
            char *b = more > cap ? lrc_realloc(buf, more) : NULL;
            if (!b) {
                free(buf);
                errno = ENOMEM;
                return NULL;
            }
            buf = b, cap = more;
        }
        got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
    } while (got > 0);
    buf[n] = 0;
    if (ferror(f)) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

int lrc_err_one_line(lrc_err *err, int rc)
{
    if (!rc || !err) return rc;
    char out[sizeof err->msg];
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)err->msg; *p && o + 5 < sizeof out; p++) {
        if (*p >= 0x20 && *p != 0x7f) out[o++] = (char)*p;
        else if (*p == '\n' || *p == '\r' || *p == '\t') out[o++] = '\\', out[o++] = *p == '\n' ? 'n' : *p == '\r' ? 'r' : 't';
        else o += (size_t)snprintf(out + o, sizeof out - o, "\\x%02x", *p);
    }
    out[o] = 0;
    memcpy(err->msg, out, o + 1);
    return rc;
}

uint64_t lrc_fnv1a(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

bool lrc_env_is(const char *name, const char *value)
{
    const char *v = getenv(name);
    return v && !strcmp(v, value);
}

/* ---- the checked allocators and their fault injection ------------------- */

/* fail_at: 0 off, else the ordinal (from the last lrc_alloc_fail_at) of
 * the point that fails; asked: the points counted since. Tests arm it from
 * one thread between calls; the counters are atomic so that a pool's
 * threads may count too. */
static atomic_int_fast64_t fail_at, asked;
static atomic_bool fail_after;
static _Thread_local int64_t failures;

void lrc_alloc_fail_at(int64_t n, bool and_after)
{
    atomic_store(&fail_at, 0);
    atomic_store(&asked, 0);
    atomic_store(&fail_after, and_after);
    atomic_store(&fail_at, n > 0 ? n : 0);
}

int64_t lrc_alloc_count(void) { return atomic_load(&asked); }

int64_t lrc_alloc_failures(void) { return failures; }

bool lrc_alloc_fails(void)
{
    int64_t at = atomic_load_explicit(&fail_at, memory_order_relaxed);
    if (__builtin_expect(at == 0, 1)) return false;
    int64_t k = atomic_fetch_add_explicit(&asked, 1, memory_order_relaxed) + 1;
    return k == at || (k > at && atomic_load_explicit(&fail_after, memory_order_relaxed));
}

/* p, or the failure counted and errno set when NULL. */
static void *counted(void *p)
{
    if (!p) {
        failures++;
        errno = ENOMEM;
    }
    return p;
}

void *lrc_malloc(size_t n) { return counted(lrc_alloc_fails() ? NULL : malloc(n ? n : 1)); }

void *lrc_calloc(size_t n, size_t size)
{
    bool over = size && n > SIZE_MAX / size;
    return counted(lrc_alloc_fails() || over ? NULL : calloc(n ? n : 1, size ? size : 1));
}

void *lrc_realloc(void *p, size_t n) { return counted(lrc_alloc_fails() ? NULL : realloc(p, n ? n : 1)); }

void *lrc_reallocarray(void *p, size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size) {
        lrc_alloc_fails(); /* counted as a point all the same: the same ordinals with any sizes */
        return counted(NULL);
    }
    return lrc_realloc(p, n * size);
}

void *lrc_aligned_alloc(size_t align, size_t n)
{
    if (!n) n = 1;
    size_t rounded = n > SIZE_MAX - align ? 0 : (n + align - 1) / align * align; /* 0: n is too large */
    return counted(lrc_alloc_fails() || !rounded ? NULL : aligned_alloc(align, rounded));
}

char *lrc_strdup(const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = lrc_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void *lrc_alloc_data(size_t n)
{
    /* Large buffers (logits, packed weights, arenas) on 2 MiB pages: one
     * fault per 2 MiB instead of 512, which on a 131 MB logits tensor is
     * tens of milliseconds. free() releases them. */
    size_t huge = (size_t)2 << 20;
    if (n >= huge) {
        void *p = lrc_aligned_alloc(huge, n);
        if (p) madvise(p, (n + huge - 1) / huge * huge, MADV_HUGEPAGE);
        return p;
    }
    return lrc_aligned_alloc(64, n ? n : 64);
}
