/* package.c — ahead-of-time packages: a directory holding the plan
 * (package.json: format version, target, the shapes it was compiled for,
 * buffers, launches, checks), the kernels as a shared library, and the
 * weights when they were given at compile time. Loading needs only libc,
 * libdl and cJSON: no Lua, no LLVM, no compilation. */
#include "../ir/lrc_launch_table.h"
#include "lrc_runtime.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_names[] = {"none", "input", "param", "output", "arena", "persist", "state"};

/* Every file a package directory may hold: the names live here alone. */
#define PKG_JSON "package.json"
#define PKG_WEIGHTS "weights.safetensors"
#define PKG_OBJECT "kernels.o" /* the cpu kernels before linking, removed when the package is whole */
#define PKG_SO "kernels.so"
#define PKG_CU "kernels.cu"
#define PKG_CUBIN "kernels.cubin"
#define PKG_PTX "kernels.ptx"
/* a shorter shape's plan and kernels: a package of its own, without weights */
#define PKG_SHAPE_PREFIX "shape-"
static const char *const pkg_files[] = {PKG_OBJECT, PKG_SO, PKG_CU, PKG_CUBIN, PKG_PTX, PKG_JSON, PKG_JSON ".tmp", PKG_WEIGHTS, "tokenizer.json"};
#define N_KINDS (int)(sizeof kind_names / sizeof kind_names[0])

static cJSON *shape_json(const lrc_shape *s)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < s->ndim; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)s->dim[i]));
    return a;
}

/* Size and FNV-1a hash of a file: package.json records them for kernels.so,
 * so a truncated or damaged library is refused before dlopen maps it (a
 * short mapping would fault, not fail). */
static int file_digest(const char *path, uint64_t *size, uint64_t *hash)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    unsigned char buf[65536];
    uint64_t h = LRC_FNV_SEED, n = 0;
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) {
        h = lrc_fnv1a(h, buf, got);
        n += got;
    }
    int bad = ferror(f);
    fclose(f);
    *size = n;
    *hash = h;
    return bad ? -1 : 0;
}

int lrc_package_write_plan(const char *dir, const lrc_plan *p, const char *kernels_file, const char *meta_json, lrc_err *err)
{
    lrc_json_hooks();
    int64_t failed = lrc_alloc_failures(); /* cJSON's builders drop what they cannot allocate */
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", "lrc-package");
    cJSON_AddNumberToObject(root, "version", LRC_PACKAGE_VERSION);
    cJSON *meta = meta_json ? cJSON_Parse(meta_json) : NULL;
    cJSON_AddItemToObject(root, "meta", meta ? meta : cJSON_CreateObject());
    cJSON_AddNumberToObject(root, "arena_bytes", (double)p->arena_bytes);
    char so[4200], hex[32];
    uint64_t size, hash;
    snprintf(so, sizeof so, "%s/%s", dir, kernels_file);
    if (file_digest(so, &size, &hash)) {
        cJSON_Delete(root);
        return lrc_err_set(err, "%s: cannot read: %s", so, strerror(errno));
    }
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)hash);
    cJSON_AddStringToObject(root, "kernels_file", kernels_file);
    cJSON_AddNumberToObject(root, "kernels_bytes", (double)size);
    cJSON_AddStringToObject(root, "kernels_fnv1a", hex);
    cJSON *bufs = cJSON_AddArrayToObject(root, "buffers");
    for (int i = 0; i < p->n_bufs; i++) {
        const lrc_plan_buf *b = &p->bufs[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "kind", kind_names[b->kind]);
        if (b->kind != LRC_BUF_NONE) {
            if (b->name) cJSON_AddStringToObject(o, "name", b->name);
            cJSON_AddStringToObject(o, "dtype", lrc_dtype_st_name(b->dtype));
            cJSON_AddItemToObject(o, "shape", shape_json(&b->shape));
            cJSON_AddNumberToObject(o, "offset", (double)b->offset);
            cJSON_AddNumberToObject(o, "bytes", (double)b->bytes);
            if (b->packed[0]) {
                cJSON *k = cJSON_AddObjectToObject(o, "packed");
                cJSON_AddStringToObject(k, "store", b->packed);
                cJSON_AddNumberToObject(k, "panel", (double)b->packed_panel);
                cJSON_AddNumberToObject(k, "cols", (double)b->packed_cols);
                cJSON_AddNumberToObject(k, "inner", (double)b->packed_inner);
            }
        }
        cJSON_AddItemToArray(bufs, o);
    }
    cJSON *ls = cJSON_AddArrayToObject(root, "launches");
    for (int i = 0; i < p->n_launches; i++) {
        const lrc_plan_launch *l = &p->launches[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "symbol", l->symbol);
        cJSON_AddStringToObject(o, "label", l->label ? l->label : "");
        cJSON *args = cJSON_AddArrayToObject(o, "args");
        for (int a = 0; a < l->n_args; a++) cJSON_AddItemToArray(args, cJSON_CreateNumber(l->args[a]));
        cJSON_AddNumberToObject(o, "items", (double)l->n_items);
        cJSON_AddBoolToObject(o, "once", l->once);
        if (l->steal) cJSON_AddBoolToObject(o, "steal", true);
        if (l->loop_to >= 0) cJSON_AddNumberToObject(o, "loop_to", l->loop_to);
        cJSON_AddNumberToObject(o, "flops", l->flops);
        cJSON_AddNumberToObject(o, "bytes", l->bytes);
        cJSON_AddItemToArray(ls, o);
    }
    cJSON *cs = cJSON_AddArrayToObject(root, "checks");
    for (int i = 0; i < p->n_checks; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "buffer", p->checks[i].buf);
        cJSON_AddNumberToObject(o, "lo", (double)p->checks[i].lo);
        cJSON_AddNumberToObject(o, "hi", (double)p->checks[i].hi);
        cJSON_AddItemToArray(cs, o);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    char path[4096];
    snprintf(path, sizeof path, "%s/" PKG_JSON, dir);
    int rc = !text || lrc_alloc_failures() != failed ? lrc_err_nomem(err, "writing %s", path) : lrc_write_atomic(path, text, strlen(text), err);
    cJSON_free(text);
    return rc;
}

/* ---- loading ----------------------------------------------------------- */

static int get_num(const cJSON *o, const char *key, double lo, double hi, double *out)
{
    const cJSON *v = key ? cJSON_GetObjectItemCaseSensitive(o, key) : o;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi) || v->valuedouble != (double)(int64_t)v->valuedouble)
        return -1;
    *out = v->valuedouble;
    return 0;
}

static int bad(lrc_err *err, const char *path, const char *what, int i)
{
    if (i < 0) return lrc_err_set(err, "%s: %s: missing or invalid (a damaged package?)", path, what);
    return lrc_err_set(err, "%s: %s %d is missing or invalid (a damaged package?)", path, what, i);
}

/* A parameter's "packed" object (its panels' layout), which U8 [bytes]
 * parameters need and no other buffer has; -1 when it is malformed. */
static int parse_packed(const cJSON *k, lrc_plan_buf *b)
{
    bool u8 = b->kind == LRC_BUF_PARAM && b->dtype == LRC_U8 && b->shape.ndim == 1;
    if (!k) return u8 ? -1 : 0;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(k, "store");
    double panel, cols, inner;
    if (!u8 || !cJSON_IsString(st) || (strcmp(st->valuestring, "f32") && strcmp(st->valuestring, "bf16") && strcmp(st->valuestring, "q8")) ||
        get_num(k, "panel", 1, 4096, &panel) || get_num(k, "cols", 1, 1e12, &cols) || get_num(k, "inner", 1, 1e12, &inner))
        return -1;
    snprintf(b->packed, sizeof b->packed, "%s", st->valuestring);
    b->packed_panel = (int64_t)panel, b->packed_cols = (int64_t)cols, b->packed_inner = (int64_t)inner;
    return 0;
}

/* What the plan makes the runtime allocate: an arena no larger than its
 * buffers need (the planner rounds each up to 64 bytes), and with the
 * caches, scratch and outputs no more than this machine's memory. A size
 * edited larger in package.json is refused here, before an allocator
 * fails on it or a memset of scratch touches it all. */
static int check_memory(const lrc_plan *p, const char *path, lrc_err *err)
{
    int64_t end = 0;
    double total = (double)p->arena_bytes, most = (double)p->arena_bytes;
    int largest = -1;
    for (int i = 0; i < p->n_bufs; i++) {
        const lrc_plan_buf *b = &p->bufs[i];
        if (b->kind == LRC_BUF_ARENA && b->offset + b->bytes > end) end = b->offset + b->bytes;
        if (b->kind != LRC_BUF_PERSIST && b->kind != LRC_BUF_STATE && b->kind != LRC_BUF_OUTPUT) continue;
        total += (double)b->bytes;
        if ((double)b->bytes > most) most = (double)b->bytes, largest = i;
    }
    int64_t need = (end + 63) / 64 * 64;
    if (p->arena_bytes > need)
        return lrc_err_set(err, "%s: arena_bytes = %lld, more than the %lld bytes its buffers take (a damaged package?)", path,
                           (long long)p->arena_bytes, (long long)need);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    double machine = pages > 0 && page > 0 ? (double)pages * (double)page : 1e300;
    if (total <= machine) return LRC_OK;
    char what[64] = "arena_bytes";
    if (largest >= 0) snprintf(what, sizeof what, "buffer %d", largest);
    return lrc_err_set(err, "%s: the plan allocates %.0f bytes (%s the most, %.0f), more than this machine's %.2f GB of memory (a damaged package?)",
                       path, total, what, most, 1e-9 * machine);
}

/* Whether two buffers share arena bytes: the rows a back edge copies from
 * h_next into the state must not overlap (memcpy), as no plan lrc writes
 * has them, both being live across the loop. */
static bool same_bytes_of(const lrc_plan_buf *a, const lrc_plan_buf *b)
{
    if (a == b) return true;
    if (a->kind != LRC_BUF_ARENA || b->kind != LRC_BUF_ARENA) return false;
    return a->offset < b->offset + b->bytes && b->offset < a->offset + a->bytes;
}

static int parse_plan(const cJSON *root, const char *path, lrc_plan *p, lrc_err *err)
{
    double v;
    const cJSON *bufs = cJSON_GetObjectItemCaseSensitive(root, "buffers");
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(root, "launches");
    const cJSON *cs = cJSON_GetObjectItemCaseSensitive(root, "checks");
    if (get_num(root, "arena_bytes", 0, 1e15, &v) || !cJSON_IsArray(bufs) || !cJSON_IsArray(ls) || !cJSON_IsArray(cs))
        return bad(err, path, "the plan", -1);
    p->arena_bytes = (int64_t)v;
    /* each count set once its array is there: lrc_plan_free walks them */
    if (!(p->bufs = lrc_calloc((size_t)cJSON_GetArraySize(bufs) + 1, sizeof *p->bufs)))
        return lrc_err_nomem(err, "for the %d buffers of %s", cJSON_GetArraySize(bufs), path);
    p->n_bufs = cJSON_GetArraySize(bufs);
    int i = 0;
    for (const cJSON *o = bufs->child; o; o = o->next, i++) {
        lrc_plan_buf *b = &p->bufs[i];
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(o, "kind");
        int k = 0;
        while (cJSON_IsString(kind) && k < N_KINDS && strcmp(kind->valuestring, kind_names[k])) k++;
        if (!cJSON_IsString(kind) || k == N_KINDS) return bad(err, path, "buffer", i);
        b->kind = (lrc_buf_kind)k;
        if (b->kind == LRC_BUF_NONE) continue;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(o, "dtype");
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(o, "shape");
        if (cJSON_IsString(name) && !(b->name = lrc_strdup(name->valuestring))) return lrc_err_nomem(err, "for the name of buffer %d of %s", i, path);
        bool named = b->kind == LRC_BUF_INPUT || b->kind == LRC_BUF_PARAM || b->kind == LRC_BUF_OUTPUT || b->kind == LRC_BUF_STATE;
        if ((named && !b->name) || !cJSON_IsString(dt) || lrc_dtype_parse(dt->valuestring, &b->dtype) ||
            !cJSON_IsArray(sh) || cJSON_GetArraySize(sh) > LRC_MAX_DIMS)
            return bad(err, path, "buffer", i);
        b->shape.ndim = cJSON_GetArraySize(sh);
        int d = 0;
        for (const cJSON *x = sh->child; x; x = x->next, d++) {
            if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > 1e12) return bad(err, path, "buffer", i);
            b->shape.dim[d] = (int64_t)x->valuedouble;
        }
        if (get_num(o, "offset", 0, 1e15, &v)) return bad(err, path, "buffer", i);
        b->offset = (int64_t)v;
        if (get_num(o, "bytes", 0, 1e15, &v)) return bad(err, path, "buffer", i);
        b->bytes = (int64_t)v;
        if (b->kind == LRC_BUF_ARENA && b->offset + b->bytes > p->arena_bytes) return bad(err, path, "buffer", i);
        if (b->kind != LRC_BUF_PERSIST && b->bytes != lrc_shape_numel(&b->shape) * (int64_t)lrc_dtype_size(b->dtype))
            return bad(err, path, "buffer", i);
        if (parse_packed(cJSON_GetObjectItemCaseSensitive(o, "packed"), b)) return bad(err, path, "buffer", i);
    }
    if (check_memory(p, path, err)) return LRC_EUSER;
    if (!(p->launches = lrc_calloc((size_t)cJSON_GetArraySize(ls) + 1, sizeof *p->launches)))
        return lrc_err_nomem(err, "for the %d launches of %s", cJSON_GetArraySize(ls), path);
    p->n_launches = cJSON_GetArraySize(ls);
    i = 0;
    for (const cJSON *o = ls->child; o; o = o->next, i++) {
        lrc_plan_launch *l = &p->launches[i];
        const cJSON *sym = cJSON_GetObjectItemCaseSensitive(o, "symbol"), *label = cJSON_GetObjectItemCaseSensitive(o, "label");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(o, "args");
        if (!cJSON_IsString(sym) || !cJSON_IsArray(args) || get_num(o, "items", 0, 1e15, &v))
            return bad(err, path, "launch", i);
        l->symbol = lrc_strdup(sym->valuestring);
        l->label = lrc_strdup(cJSON_IsString(label) ? label->valuestring : "");
        if (!l->symbol || !l->label) return lrc_err_nomem(err, "for the names of launch %d of %s", i, path);
        l->n_items = (int64_t)v;
        l->once = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "once"));
        l->steal = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "steal"));
        l->loop_to = -1;
        if (cJSON_GetObjectItemCaseSensitive(o, "loop_to")) {
            if (get_num(o, "loop_to", 0, i, &v) || cJSON_GetArraySize(args) != 3) return bad(err, path, "launch", i);
            l->loop_to = (int)v;
        }
        const cJSON *fl = cJSON_GetObjectItemCaseSensitive(o, "flops"), *by = cJSON_GetObjectItemCaseSensitive(o, "bytes");
        l->flops = cJSON_IsNumber(fl) ? fl->valuedouble : 0;
        l->bytes = cJSON_IsNumber(by) ? by->valuedouble : 0;
        l->n_args = cJSON_GetArraySize(args);
        if (!(l->args = lrc_calloc((size_t)l->n_args + 1, sizeof(int)))) return lrc_err_nomem(err, "for the arguments of launch %d of %s", i, path);
        int a = 0;
        for (const cJSON *x = args->child; x; x = x->next, a++) {
            if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble >= p->n_bufs ||
                p->bufs[(int)x->valuedouble].kind == LRC_BUF_NONE)
                return bad(err, path, "launch", i);
            l->args[a] = (int)x->valuedouble;
        }
        if (l->loop_to >= 0) { /* a back edge copies rows of h_next into the state: same f32 shape, i32 counts per row */
            const lrc_plan_buf *st = &p->bufs[l->args[0]], *nx = &p->bufs[l->args[1]], *ct = &p->bufs[l->args[2]];
            if (st->dtype != LRC_F32 || nx->dtype != LRC_F32 || !lrc_shape_eq(&st->shape, &nx->shape) || st->shape.ndim < 1 ||
                ct->dtype != LRC_I32 || ct->shape.ndim != 1 || ct->shape.dim[0] != st->shape.dim[0] || same_bytes_of(st, nx))
                return bad(err, path, "launch", i);
        }
    }
    if (!(p->checks = lrc_calloc((size_t)cJSON_GetArraySize(cs) + 1, sizeof *p->checks)))
        return lrc_err_nomem(err, "for the %d checks of %s", cJSON_GetArraySize(cs), path);
    p->n_checks = cJSON_GetArraySize(cs);
    i = 0;
    for (const cJSON *o = cs->child; o; o = o->next, i++) {
        double b, lo, hi;
        if (get_num(o, "buffer", 0, p->n_bufs - 1, &b) || get_num(o, "lo", -1e15, 1e15, &lo) ||
            get_num(o, "hi", -1e15, 1e15, &hi) || p->bufs[(int)b].kind != LRC_BUF_INPUT ||
            p->bufs[(int)b].dtype != LRC_I32)
            return bad(err, path, "check", i);
        p->checks[i] = (lrc_plan_check){(int)b, (int64_t)lo, (int64_t)hi};
    }
    return LRC_OK;
}

/* The weights packed at compile time as the plan says they are: their
 * size, and a q8 panel's every block scale finite (a bit flipped in the
 * file would otherwise scale a block by NaN) */
static int check_packed(const lrc_plan *p, const lrc_tensor_set *weights, const char *path, lrc_err *err)
{
    for (int i = 0; i < p->n_bufs; i++) {
        const lrc_plan_buf *b = &p->bufs[i];
        const lrc_tensor *t = b->packed[0] ? lrc_tensor_set_find(weights, b->name) : NULL;
        if (!t) continue; /* binding names what is missing */
        char what[4400];
        snprintf(what, sizeof what, "%.4000s: tensor '%.300s'", path, b->name);
        if (t->dtype != LRC_U8 || (int64_t)t->nbytes != b->bytes)
            return lrc_err_set(err, "%s is %s of %lld bytes, the plan packed %lld bytes (a damaged package?)", what, lrc_dtype_st_name(t->dtype),
                               (long long)t->nbytes, (long long)b->bytes);
        if (!strcmp(b->packed, "q8") && lrc_q8_panels_check(t->data, (int64_t)t->nbytes, b->packed_cols, b->packed_inner, b->packed_panel, what, err))
            return LRC_EUSER;
    }
    return LRC_OK;
}

bool lrc_package_is(const char *path)
{
    char json[4096];
    struct stat st;
    snprintf(json, sizeof json, "%s/" PKG_JSON, path);
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode) && stat(json, &st) == 0;
}

/* dir/package.json parsed (NULL when it cannot be read or parsed); the
 * path in path. *opened says whether the file could be opened, *nomem
 * whether reading or parsing it ran out of memory. */
static cJSON *read_package_json(const char *dir, char *path, size_t n, bool *opened, bool *nomem)
{
    snprintf(path, n, "%s/" PKG_JSON, dir);
    FILE *f = fopen(path, "rb");
    *opened = f != NULL;
    size_t len = 0;
    char *text = f ? lrc_read_all(f, &len) : NULL;
    *nomem = f && !text && errno == ENOMEM;
    if (f) fclose(f);
    cJSON *root = text ? lrc_json_parse(text, len, NULL, nomem) : NULL;
    free(text);
    return root;
}

void lrc_package_target(const char *dir, char *out, size_t n)
{
    char path[4096];
    bool opened, nomem;
    cJSON *root = read_package_json(dir, path, sizeof path, &opened, &nomem);
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "meta");
    const cJSON *t = meta ? cJSON_GetObjectItemCaseSensitive(meta, "target") : NULL;
    snprintf(out, n, "%s", cJSON_IsString(t) ? t->valuestring : root ? "cpu" : "");
    cJSON_Delete(root);
}

static int64_t meta_int(const cJSON *meta, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(meta, key);
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble < 1e15 ? (int64_t)v->valuedouble : 0;
}

static void meta_str(const cJSON *meta, const char *key, char *out, size_t n)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(meta, key);
    snprintf(out, n, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

/* What the runtime reads of meta (the rest is for people and tools). */
static void read_meta(const cJSON *meta, lrc_package *pkg)
{
    pkg->batch = meta_int(meta, "batch");
    pkg->seq = meta_int(meta, "seq");
    pkg->ctx = meta_int(meta, "ctx");
    pkg->vocab = meta_int(meta, "vocab");
    pkg->iterations = meta_int(meta, "iterations");
    const cJSON *peak = cJSON_GetObjectItemCaseSensitive(meta, "peak_flops_per_item");
    pkg->peak_flops_per_item = cJSON_IsNumber(peak) && peak->valuedouble > 0 ? peak->valuedouble : 0;
    meta_str(meta, "cpu", pkg->cpu, sizeof pkg->cpu);
    meta_str(meta, "requires", pkg->requires, sizeof pkg->requires);
    meta_str(meta, "arch", pkg->arch, sizeof pkg->arch);
    /* which axes run shorter (padded to a compiled shape), and why not */
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(meta, "prefix");
    pkg->batch_prefix = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pre, "batch"));
    pkg->seq_prefix = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pre, "seq"));
    meta_str(pre, "batch_fixed", pkg->batch_fixed, sizeof pkg->batch_fixed);
    meta_str(pre, "seq_fixed", pkg->seq_fixed, sizeof pkg->seq_fixed);
    if (!pre) snprintf(pkg->seq_fixed, sizeof pkg->seq_fixed, "it was compiled by an lrc that ran no other shape");
}

/* Where each input and output buffer holds the batch and the sequence, as
 * meta's prefix.axes says (-1: nowhere, or the axis is fixed). */
static int read_axes(const cJSON *meta, lrc_package *pkg, const char *path, lrc_err *err)
{
    const cJSON *axes = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(meta, "prefix"), "axes");
    int n = pkg->plan.n_bufs;
    pkg->batch_axis = lrc_calloc((size_t)(n ? n : 1), sizeof(int));
    pkg->seq_axis = lrc_calloc((size_t)(n ? n : 1), sizeof(int));
    if (!pkg->batch_axis || !pkg->seq_axis) return lrc_err_nomem(err, "for the axes of the %d buffers of %s", n, path);
    for (int b = 0; b < n; b++) {
        const lrc_plan_buf *pb = &pkg->plan.bufs[b];
        const cJSON *e = pb->kind == LRC_BUF_INPUT || pb->kind == LRC_BUF_OUTPUT ? cJSON_GetObjectItemCaseSensitive(axes, pb->name) : NULL;
        double ba, sa;
        bool ok = !get_num(cJSON_GetArrayItem(e, 0), NULL, -1, pb->shape.ndim - 1, &ba) &&
                  !get_num(cJSON_GetArrayItem(e, 1), NULL, -1, pb->shape.ndim - 1, &sa) && (ba < 0 || ba != sa);
        pkg->batch_axis[b] = ok && pkg->batch_prefix ? (int)ba : -1;
        pkg->seq_axis[b] = ok && pkg->seq_prefix ? (int)sa : -1;
    }
    return LRC_OK;
}

/* lrc_package_load; nested: a shape of another package, which lists none itself */
static int package_load(const char *dir, bool nested, lrc_package *pkg, lrc_err *err);

/* Why shape v's plan is not pkg's at its batch and seq, or NULL: each
 * input and output the same but along pkg's batch and sequence axes, the
 * same range checks, parameters pkg's of the same shapes. A run pads into
 * v's buffers and binds pkg's weights, so nothing else may differ. */
static const char *shape_mismatch(const lrc_package *pkg, const lrc_package *v)
{
    const lrc_plan *p = &pkg->plan, *q = &v->plan;
    int io = 0, qio = 0;
    for (int b = 0; b < q->n_bufs; b++) qio += q->bufs[b].kind == LRC_BUF_INPUT || q->bufs[b].kind == LRC_BUF_OUTPUT;
    for (int b = 0; b < p->n_bufs; b++) {
        const lrc_plan_buf *pb = &p->bufs[b];
        bool param = pb->kind == LRC_BUF_PARAM;
        if (!param && pb->kind != LRC_BUF_INPUT && pb->kind != LRC_BUF_OUTPUT) continue;
        io += !param;
        int k = 0;
        while (k < q->n_bufs && (q->bufs[k].kind != pb->kind || strcmp(q->bufs[k].name, pb->name))) k++;
        if (k == q->n_bufs) {
            if (param) continue; /* a shape may read fewer */
            return "an input or output is missing";
        }
        const lrc_plan_buf *qb = &q->bufs[k];
        lrc_shape want = pb->shape;
        if (pkg->batch_axis[b] >= 0) want.dim[pkg->batch_axis[b]] = v->batch;
        if (pkg->seq_axis[b] >= 0) want.dim[pkg->seq_axis[b]] = v->seq;
        if (qb->dtype != pb->dtype || !lrc_shape_eq(&qb->shape, &want)) return "an input, output or parameter of another type or shape";
        for (int c = 0; c < p->n_checks; c++) {
            if (p->checks[c].buf != b) continue;
            bool same = false;
            for (int e = 0; e < q->n_checks && !same; e++)
                same = q->checks[e].buf == k && q->checks[e].lo == p->checks[c].lo && q->checks[e].hi == p->checks[c].hi;
            if (!same) return "another range check of an input";
        }
    }
    for (int b = 0; b < q->n_bufs; b++) {
        if (q->bufs[b].kind != LRC_BUF_PARAM) continue;
        bool found = false;
        for (int k = 0; k < p->n_bufs && !found; k++) found = p->bufs[k].kind == LRC_BUF_PARAM && !strcmp(p->bufs[k].name, q->bufs[b].name);
        if (!found) return "a parameter the package does not read";
    }
    return io == qio && q->n_checks == p->n_checks ? NULL : "other inputs, outputs or range checks";
}

/* The shorter shapes meta lists, each a package in dir/shape-BxT that must
 * load as the main one does (a damaged one names its file), for the same
 * target and no larger than the main shape. */
static int load_shapes(const char *dir, const cJSON *meta, lrc_package *pkg, const char *path, lrc_err *err)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(meta, "shapes");
    int n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : 0;
    if (n > LRC_PACKAGE_MAX_SHAPES) return bad(err, path, "the list of shapes", -1);
    if (n && !(pkg->shapes = lrc_calloc((size_t)n, sizeof *pkg->shapes))) return lrc_err_nomem(err, "for the %d shapes %s lists", n, path);
    for (int i = 0; i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(list, i);
        double b, t;
        if (get_num(cJSON_GetArrayItem(e, 0), NULL, 1, (double)pkg->batch, &b) ||
            get_num(cJSON_GetArrayItem(e, 1), NULL, 1, (double)pkg->seq, &t))
            return bad(err, path, "shape", i);
        char sub[4300];
        snprintf(sub, sizeof sub, "%.4000s/" PKG_SHAPE_PREFIX "%lldx%lld", dir, (long long)b, (long long)t);
        lrc_package *v = &pkg->shapes[i];
        if (package_load(sub, true, v, err)) return LRC_EUSER;
        pkg->n_shapes = i + 1;
        const char *wrong = strcmp(v->target, pkg->target) || v->batch != (int64_t)b || v->seq != (int64_t)t ? "its target or shape"
                                                                                                             : shape_mismatch(pkg, v);
        if (wrong)
            return lrc_err_set(err, "%s/" PKG_JSON ": not the %s package of shape [%lld, %lld] that %s lists: %s (a damaged package?)",
                               sub, pkg->target, (long long)b, (long long)t, path, wrong);
    }
    return LRC_OK;
}

/* one line: package.json's strings (symbols, names) are quoted in its messages */
int lrc_package_load(const char *dir, lrc_package *pkg, lrc_err *err) { return lrc_err_one_line(err, package_load(dir, false, pkg, err)); }

static int package_load(const char *dir, bool nested, lrc_package *pkg, lrc_err *err)
{
    memset(pkg, 0, sizeof *pkg);
    char path[4096];
    bool opened, nomem;
    cJSON *root = read_package_json(dir, path, sizeof path, &opened, &nomem);
    if (!opened) return lrc_err_set(err, "%s: not an lrc package (no package.json: %s)", dir, strerror(errno));
    int rc = LRC_OK;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (nomem) rc = lrc_err_nomem(err, "reading %s", path);
    else if (!root) rc = lrc_err_set(err, "%s: invalid JSON (a truncated or damaged package?)", path);
    else if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "lrc-package"))
        rc = lrc_err_set(err, "%s: not an lrc package", path);
    else if (!cJSON_IsNumber(ver) || ver->valuedouble != LRC_PACKAGE_VERSION)
        rc = lrc_err_set(err, "%s: package format version %g, this lrc reads version %d: compile the model again",
                         path, cJSON_IsNumber(ver) ? ver->valuedouble : -1.0, LRC_PACKAGE_VERSION);
    else rc = parse_plan(root, path, &pkg->plan, err);
    if (!rc) {
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "meta");
        pkg->meta_json = meta ? cJSON_PrintUnformatted(meta) : lrc_strdup("{}");
        read_meta(meta, pkg);
        rc = read_axes(meta, pkg, path, err);
        pkg->dir = lrc_strdup(dir);
        if (!rc && (!pkg->meta_json || !pkg->dir)) rc = lrc_err_nomem(err, "reading %s", path);
        if (!rc && pkg->iterations > LRC_PACKAGE_MAX_ITERATIONS) /* a run that leaves them to the default would not end */
            rc = lrc_err_set(err, "%s: meta.iterations = %lld, more than %d, the most a package runs by default (a damaged package?)", path,
                             (long long)pkg->iterations, LRC_PACKAGE_MAX_ITERATIONS);
    }
    uint64_t want_size = 0, size = 0, hash = 0;
    char want_hash[32] = "", hex[32], kfile[256] = "";
    const cJSON *kb = cJSON_GetObjectItemCaseSensitive(root, "kernels_bytes");
    const cJSON *kh = cJSON_GetObjectItemCaseSensitive(root, "kernels_fnv1a");
    const cJSON *kf = cJSON_GetObjectItemCaseSensitive(root, "kernels_file");
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "meta");
    const cJSON *target = meta ? cJSON_GetObjectItemCaseSensitive(meta, "target") : NULL;
    if (!rc && (!cJSON_IsNumber(kb) || !cJSON_IsString(kh))) rc = bad(err, path, "the kernels' size and hash", -1);
    if (!rc && (!cJSON_IsString(kf) || strchr(kf->valuestring, '/') || strlen(kf->valuestring) >= sizeof kfile))
        rc = bad(err, path, "the kernels' file name", -1);
    /* neither cpu nor cuda: no executor would load its kernels, and the cpu one would call none */
    if (!rc && target && !cJSON_IsString(target)) rc = lrc_err_set(err, "%s: meta.target is not a string (a damaged package?)", path);
    else if (!rc && target && strcmp(target->valuestring, "cpu") && strcmp(target->valuestring, "cuda"))
        rc = lrc_err_set(err, "%s: meta.target '%.40s' is not cpu or cuda (a damaged package?)", path, target->valuestring);
    if (!rc && cJSON_IsString(target) && !strcmp(target->valuestring, "cuda")) /* its launch table, checked against the plan */
        rc = lrc_package_cuda_read(meta, &pkg->plan, path, &pkg->cuda, err);
    if (!rc) {
        want_size = (uint64_t)kb->valuedouble;
        snprintf(want_hash, sizeof want_hash, "%s", kh->valuestring);
        snprintf(kfile, sizeof kfile, "%s", kf->valuestring);
        snprintf(pkg->target, sizeof pkg->target, "%s", cJSON_IsString(target) ? target->valuestring : "cpu");
    }
    cJSON *shapes_meta = !rc && meta ? cJSON_Duplicate(meta, true) : NULL; /* read once the kernels are */
    if (!rc && meta && !shapes_meta) rc = lrc_err_nomem(err, "reading %s", path);
    cJSON_Delete(root);
    if (!rc) {
        snprintf(path, sizeof path, "%s/%s", dir, kfile);
        if (file_digest(path, &size, &hash)) rc = lrc_err_set(err, "%s: cannot read: %s", path, strerror(errno));
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)hash);
        if (!rc && (size != want_size || strcmp(hex, want_hash)))
            rc = lrc_err_set(err, "%s: %llu bytes with hash %s, package.json says %llu bytes with hash %s (a damaged package?)",
                             path, (unsigned long long)size, hex, (unsigned long long)want_size, want_hash);
    }
    bool native = !strcmp(pkg->target, "cpu"); /* a cuda package's cubin is its backend's to load */
    if (!rc && native) {
        pkg->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!pkg->dl) rc = lrc_err_set(err, "%s: cannot load the kernels: %s", path, dlerror());
    }
    for (int i = 0; i < pkg->plan.n_launches && !rc && native; i++) {
        if (pkg->plan.launches[i].loop_to >= 0) continue; /* a back edge has no kernel */
        void *sym = dlsym(pkg->dl, pkg->plan.launches[i].symbol);
        if (!sym) rc = lrc_err_set(err, "%s: kernel '%s' is missing (a damaged package?)", path, pkg->plan.launches[i].symbol);
        else memcpy(&pkg->plan.launches[i].fn, &sym, sizeof sym);
    }
    if (!rc && native) { /* the plan as the kernels were compiled for it: nothing runs otherwise */
        char json[4096];
        snprintf(json, sizeof json, "%.4000s/" PKG_JSON, dir);
        rc = lrc_package_check_launches(&pkg->plan, dlsym(pkg->dl, LRC_LAUNCH_TABLE_SYMBOL), json, err);
    }
    lrc_tensor_set_init(&pkg->weights);
    snprintf(path, sizeof path, "%s/" PKG_WEIGHTS, dir);
    struct stat st;
    if (!rc && stat(path, &st) == 0) {
        pkg->has_weights = true;
        rc = lrc_safetensors_load(path, &pkg->weights, err);
    }
    /* a cpu plan binds f32 parameters: bf16 weights (--weights-dtype bf16)
     * widen exactly, and its pack kernels store them as bf16 again */
    for (int i = 0; i < pkg->weights.n && !rc && native; i++) {
        lrc_tensor *t = pkg->weights.items[i];
        if (t->dtype == LRC_F32 || t->dtype == LRC_I32 || t->dtype == LRC_U8) continue; /* u8: packed at compile time */
        lrc_tensor *f = lrc_tensor_to_f32(t, err);
        if (!f) rc = lrc_err_prefix(err, "%s", path);
        else lrc_tensor_free(t), pkg->weights.items[i] = f;
    }
    if (!rc && pkg->has_weights) rc = check_packed(&pkg->plan, &pkg->weights, path, err);
    if (!rc && shapes_meta) {
        snprintf(path, sizeof path, "%s/" PKG_JSON, dir);
        if (nested && cJSON_GetObjectItemCaseSensitive(shapes_meta, "shapes")) rc = bad(err, path, "a shape's list of shapes", -1);
        else if (!nested) rc = load_shapes(dir, shapes_meta, pkg, path, err);
    }
    cJSON_Delete(shapes_meta);
    if (rc) lrc_package_free(pkg);
    return rc;
}

void lrc_package_free(lrc_package *pkg)
{
    for (int i = 0; i < pkg->n_shapes; i++) lrc_package_free(&pkg->shapes[i]);
    free(pkg->shapes);
    free(pkg->batch_axis);
    free(pkg->seq_axis);
    free(pkg->dir);
    lrc_plan_free(&pkg->plan);
    lrc_tensor_set_clear(&pkg->weights);
    free(pkg->meta_json);
    lrc_cuda_table_free(&pkg->cuda);
    if (pkg->dl) dlclose(pkg->dl);
    memset(pkg, 0, sizeof *pkg);
}

int lrc_cpu_check_features(const char *list, lrc_err *err)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list ? list : "");
    __builtin_cpu_init();
    for (char *f = strtok(buf, ","); f; f = strtok(NULL, ",")) {
        int have;
        /* __builtin_cpu_supports takes literals only */
        if (!strcmp(f, "avx2")) have = __builtin_cpu_supports("avx2");
        else if (!strcmp(f, "fma")) have = __builtin_cpu_supports("fma");
        else if (!strcmp(f, "avx512f")) have = __builtin_cpu_supports("avx512f");
        else if (!strcmp(f, "avx512vl")) have = __builtin_cpu_supports("avx512vl");
        else if (!strcmp(f, "f16c")) have = __builtin_cpu_supports("f16c");
        else return lrc_err_set(err, "the package needs CPU feature '%s', which this lrc cannot check", f);
        /* LRC_CPU_HIDE=f16c,avx512f: features taken as missing, so that the
         * tests reach this refusal on a CPU that has them all */
        const char *hide = getenv("LRC_CPU_HIDE");
        if (hide && strstr(hide, f)) have = 0;
        if (!have) return lrc_err_set(err, "the package was compiled for a CPU with %s, which this CPU lacks: compile it here", f);
    }
    return LRC_OK;
}

void *lrc_package_cuda_image(const char *dir, bool cubin, lrc_err *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, cubin ? PKG_CUBIN : PKG_PTX);
    FILE *f = fopen(path, "rb");
    size_t len;
    char *buf = f ? lrc_read_all(f, &len) : NULL; /* 0-terminated: PTX is text */
    bool nomem = f && !buf && errno == ENOMEM;
    if (f) fclose(f);
    if (nomem) lrc_err_nomem(err, "reading %s", path);
    else if (!buf) lrc_err_set(err, "%s: cannot read", path);
    return buf;
}

void *lrc_package_symbol(const lrc_package *pkg, const char *name) { return pkg->dl ? dlsym(pkg->dl, name) : NULL; }

/* ---- writing ----------------------------------------------------------- */

void lrc_package_remove(const char *dir)
{
    char p[4400];
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        long long b, t;
        char end;
        struct stat st;
        /* only the directories lrc_package_begin_shape makes: never a link out of the package */
        if (sscanf(e->d_name, PKG_SHAPE_PREFIX "%lldx%lld%c", &b, &t, &end) != 2) continue;
        snprintf(p, sizeof p, "%.4000s/%.255s", dir, e->d_name);
        if (lstat(p, &st)) continue;
        if (S_ISDIR(st.st_mode)) lrc_package_remove(p);
        else if (S_ISLNK(st.st_mode)) remove(p); /* the link alone, not what it points to */
    }
    if (d) closedir(d);
    for (size_t i = 0; i < sizeof pkg_files / sizeof pkg_files[0]; i++) {
        snprintf(p, sizeof p, "%.4300s/%s", dir, pkg_files[i]); /* dir: a package path, well under 4300 bytes */
        remove(p);
    }
    rmdir(dir);
}

int lrc_package_begin(lrc_package_writer *w, const char *dir, bool cuda, lrc_err *err)
{
    memset(w, 0, sizeof *w);
    struct stat st;
    if (stat(dir, &st) == 0 && !lrc_package_is(dir))
        return lrc_err_set(err, "%s exists and is not an lrc package: choose another -o", dir);
    if (strlen(dir) >= sizeof w->dir - 64) return lrc_err_set(err, "%.64s...: the package path is too long", dir);
    snprintf(w->dir, sizeof w->dir, "%s", dir);
    /* written beside dir, moved into place when whole */
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp.%ld", dir, (long)getpid());
    w->cuda = cuda;
    if (mkdir(w->tmp, 0755)) return lrc_err_set(err, "%s: cannot create: %s", w->tmp, strerror(errno));
    w->started = true;
    return LRC_OK;
}

int lrc_package_begin_shape(lrc_package_writer *w, int64_t batch, int64_t seq, lrc_package_writer *sub, lrc_err *err)
{
    memset(sub, 0, sizeof *sub);
    snprintf(sub->tmp, sizeof sub->tmp, "%.4000s/" PKG_SHAPE_PREFIX "%lldx%lld", w->tmp, (long long)batch, (long long)seq);
    sub->cuda = w->cuda;
    sub->nested = true;
    if (mkdir(sub->tmp, 0755)) return lrc_err_set(err, "%s: cannot create: %s", sub->tmp, strerror(errno));
    sub->started = true;
    return LRC_OK;
}

void lrc_package_kernels_path(const lrc_package_writer *w, bool object, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", w->tmp, object ? PKG_OBJECT : PKG_SO);
}

static int write_file(const char *dir, const char *name, const void *data, size_t size, lrc_err *err)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int e = errno;
    bool wrote = f && fwrite(data, 1, size, f) == size;
    if (f && !wrote) e = errno;
    if (f && fclose(f) && wrote) wrote = false, e = errno; /* closed either way: no descriptor left open */
    if (!wrote) {
        if (f) remove(path);
        return lrc_err_set(err, "%s: cannot write: %s", path, strerror(e));
    }
    return LRC_OK;
}

int lrc_package_write_cuda(lrc_package_writer *w, const char *source, const void *cubin, size_t cubin_size, const char *ptx,
                           lrc_err *err)
{
    if (write_file(w->tmp, PKG_CU, source, strlen(source), err) || write_file(w->tmp, PKG_CUBIN, cubin, cubin_size, err) ||
        write_file(w->tmp, PKG_PTX, ptx, strlen(ptx), err))
        return LRC_EUSER;
    return LRC_OK;
}

int lrc_package_write_weights(lrc_package_writer *w, const lrc_tensor_set *weights, lrc_err *err)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/" PKG_WEIGHTS, w->tmp);
    return lrc_safetensors_save(path, weights, err);
}

int lrc_package_write_tokenizer(lrc_package_writer *w, const char *json, size_t len, lrc_err *err)
{
    return write_file(w->tmp, "tokenizer.json", json, len, err);
}

int lrc_package_finish(lrc_package_writer *w, const lrc_plan *p, const char *meta_json, lrc_err *err)
{
    char obj[4400], old[4400];
    snprintf(obj, sizeof obj, "%s/" PKG_OBJECT, w->tmp);
    remove(obj); /* linked into kernels.so: not part of the package */
    int rc = lrc_package_write_plan(w->tmp, p, w->cuda ? PKG_CUBIN : PKG_SO, meta_json, err);
    if (w->nested) { /* inside its package's directory, moved with it */
        w->started = rc != LRC_OK;
        return rc;
    }
    /* an old package is replaced only once the new one is whole */
    struct stat st;
    snprintf(old, sizeof old, "%s.old.%ld", w->dir, (long)getpid());
    bool moved_old = false;
    if (!rc && stat(w->dir, &st) == 0) {
        if (rename(w->dir, old)) rc = lrc_err_set(err, "%s: cannot replace: %s", w->dir, strerror(errno));
        else moved_old = true;
    }
    if (!rc && rename(w->tmp, w->dir)) {
        rc = lrc_err_set(err, "%s: cannot create: %s", w->dir, strerror(errno));
        if (moved_old) rename(old, w->dir); /* the old package back where it was */
    }
    if (rc) return rc;
    w->started = false;
    if (moved_old) lrc_package_remove(old);
    return LRC_OK;
}

void lrc_package_abort(lrc_package_writer *w)
{
    if (w->started) lrc_package_remove(w->tmp);
    w->started = false;
}
