/* safetensors.c — reading and writing the safetensors format:
 * an 8-byte little-endian header length N, N bytes of JSON
 * {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
 * then the data section that the offsets index. JSON goes through cJSON. */
#include "lrc_runtime.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* Larger headers are refused: real files have a few hundred bytes per tensor. */
#define MAX_HEADER (100u << 20)

typedef struct {
    const char *name;
    uint64_t begin, end;
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}


/* JSON numbers are doubles; offsets and sizes must be exact integers. */
static int json_uint(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0) || d > 9007199254740992.0 || d != (double)(uint64_t)d) return -1;
    *out = (uint64_t)d;
    return 0;
}

static int parse_entry(const cJSON *e, const char *what, uint64_t data_start, uint64_t data_len,
                       lrc_dtype *dt, lrc_shape *shape, uint64_t *begin, uint64_t *end, lrc_err *err)
{
    const char *name = e->string;
    if (!cJSON_IsObject(e)) return lrc_err_set(err, "%s: tensor '%s': entry is not a JSON object", what, name);
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *jo = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(jd)) return lrc_err_set(err, "%s: tensor '%s': missing \"dtype\" string", what, name);
    if (lrc_dtype_parse(jd->valuestring, dt) || strcmp(jd->valuestring, lrc_dtype_st_name(*dt)))
        return lrc_err_set(err, "%s: tensor '%s': unsupported dtype '%s' (lrc reads F32, BF16, F16, I32, I8 with its q8 scales, and U8 as a package's packed weights)",
                           what, name, jd->valuestring);
    if (!cJSON_IsArray(js)) return lrc_err_set(err, "%s: tensor '%s': missing \"shape\" array", what, name);
    int nd = cJSON_GetArraySize(js);
    if (nd > LRC_MAX_DIMS)
        return lrc_err_set(err, "%s: tensor '%s': %d axes, at most %d are supported", what, name, nd, LRC_MAX_DIMS);
    shape->ndim = nd;
    uint64_t numel = 1;
    for (int i = 0; i < nd; i++) {
        uint64_t d;
        if (json_uint(cJSON_GetArrayItem(js, i), &d) || d > (1ull << 40))
            return lrc_err_set(err, "%s: tensor '%s': shape entry %d is not a valid size", what, name, i);
        shape->dim[i] = (int64_t)d;
        /* checked before multiplying, so the count cannot wrap */
        if (d && numel > (1ull << 40) / d) return lrc_err_set(err, "%s: tensor '%s': shape is too large", what, name);
        numel *= d;
    }
    if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2 || json_uint(cJSON_GetArrayItem(jo, 0), begin) ||
        json_uint(cJSON_GetArrayItem(jo, 1), end))
        return lrc_err_set(err, "%s: tensor '%s': \"data_offsets\" must be [begin, end] with integers >= 0",
                           what, name);
    if (*begin > *end || *end > data_len)
        return lrc_err_set(err, "%s: tensor '%s': data_offsets [%llu, %llu] lie outside the data section "
                           "(bytes %llu to %llu of the file)", what, name, (unsigned long long)*begin,
                           (unsigned long long)*end, (unsigned long long)data_start,
                           (unsigned long long)(data_start + data_len));
    uint64_t want = numel * lrc_dtype_size(*dt);
    if (*end - *begin != want)
        return lrc_err_set(err, "%s: tensor '%s': %llu bytes at file offset %llu, but %s %s needs %llu",
                           what, name, (unsigned long long)(*end - *begin),
                           (unsigned long long)(data_start + *begin), jd->valuestring,
                           lrc_shape_str(shape, (char[96]){0}, 96), (unsigned long long)want);
    return LRC_OK;
}

int lrc_safetensors_parse(const uint8_t *buf, size_t len, const char *what, lrc_tensor_set *out,
                          lrc_err *err)
{
    lrc_tensor_set_init(out);
    if (len < 8)
        return lrc_err_set(err, "%s: %zu bytes, too short for the 8-byte header length at offset 0", what, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | buf[i];
    if (hlen > len - 8)
        return lrc_err_set(err, "%s: header length %llu at offset 0 runs past the end of the file (%zu bytes)",
                           what, (unsigned long long)hlen, len);
    if (hlen > MAX_HEADER)
        return lrc_err_set(err, "%s: header length %llu at offset 0 is over the %u-byte limit", what,
                           (unsigned long long)hlen, MAX_HEADER);
    const char *hdr = (const char *)buf + 8;
    const char *end_ptr = NULL;
    bool nomem;
    cJSON *root = lrc_json_parse(hdr, (size_t)hlen, &end_ptr, &nomem);
    if (nomem) return lrc_err_nomem(err, "reading the %llu-byte header of %s", (unsigned long long)hlen, what);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= hdr && at <= hdr + hlen ? (size_t)(at - hdr) + 8 : 8;
        return lrc_err_set(err, "%s: invalid JSON in the header near byte offset %zu", what, off);
    }
    /* The header is one JSON value; only padding may follow it. */
    for (const char *p = end_ptr; p < hdr + hlen; p++)
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(root);
            return lrc_err_set(err, "%s: unexpected text after the header JSON at byte offset %zu", what,
                               (size_t)(p - hdr) + 8);
        }
    int rc = LRC_OK;
    span *spans = NULL;
    int n_spans = 0;
    uint64_t data_start = 8 + hlen, data_len = len - data_start;
    if (!cJSON_IsObject(root)) {
        rc = lrc_err_set(err, "%s: the header at offset 8 is not a JSON object", what);
        goto done;
    }
    if (!(spans = lrc_calloc((size_t)cJSON_GetArraySize(root) + 1, sizeof *spans))) {
        rc = lrc_err_nomem(err, "for the %d entries of the header of %s", cJSON_GetArraySize(root), what);
        goto done;
    }
    for (const cJSON *e = root->child; e; e = e->next) {
        if (!strcmp(e->string, "__metadata__")) {
            if (!cJSON_IsObject(e)) {
                rc = lrc_err_set(err, "%s: \"__metadata__\" must be an object of strings", what);
                goto done;
            }
            for (const cJSON *m = e->child; m; m = m->next)
                if (!cJSON_IsString(m)) {
                    rc = lrc_err_set(err, "%s: \"__metadata__\" value '%s' is not a string", what, m->string);
                    goto done;
                }
            free(out->metadata_json);
            if (!(out->metadata_json = cJSON_PrintUnformatted(e))) {
                rc = lrc_err_nomem(err, "for the metadata of %s", what);
                goto done;
            }
            continue;
        }
        lrc_dtype dt;
        lrc_shape shape;
        uint64_t b = 0, en = 0;
        if ((rc = parse_entry(e, what, data_start, data_len, &dt, &shape, &b, &en, err))) goto done;
        /* every byte is copied in below: no zeroing first, and huge pages */
        lrc_tensor *t = lrc_tensor_new_uninit(e->string, dt, &shape, err);
        if (!t) {
            rc = lrc_err_prefix(err, "%s", what);
            goto done;
        }
        if (t->nbytes) memcpy(t->data, buf + data_start + b, t->nbytes);
        if ((rc = lrc_tensor_set_add(out, t, err))) {
            lrc_err_prefix(err, "%s", what);
            goto done;
        }
        spans[n_spans++] = (span){e->string, b, en};
    }
    /* Sorted by start, non-empty spans overlap exactly when one starts
     * before the furthest end seen so far; empty ones occupy nothing. */
    qsort(spans, (size_t)n_spans, sizeof *spans, cmp_span);
    const span *furthest = NULL;
    for (int i = 0; i < n_spans; i++) {
        if (spans[i].begin == spans[i].end) continue;
        if (furthest && spans[i].begin < furthest->end) {
            rc = lrc_err_set(err, "%s: tensors '%s' and '%s' overlap at file offset %llu", what, furthest->name,
                             spans[i].name, (unsigned long long)(data_start + spans[i].begin));
            goto done;
        }
        if (!furthest || spans[i].end > furthest->end) furthest = &spans[i];
    }
    rc = lrc_tensor_set_dequantize_q8(out, what, err); /* a q8 package's weights, read as f32 */
done:
    free(spans);
    cJSON_Delete(root);
    if (rc) lrc_tensor_set_clear(out);
    return lrc_err_one_line(err, rc);
}

int lrc_safetensors_load(const char *path, lrc_tensor_set *out, lrc_err *err)
{
    lrc_tensor_set_init(out);
    struct stat dst;
    /* safetensors_dir.c's messages name the index's tensors and shards */
    if (stat(path, &dst) == 0 && S_ISDIR(dst.st_mode)) return lrc_err_one_line(err, lrc_safetensors_load_dir(path, out, err));
    if (lrc_safetensors_is_index(path)) return lrc_err_one_line(err, lrc_safetensors_load_index(path, out, err));
    FILE *f = fopen(path, "rb");
    if (!f) return lrc_err_set(err, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    const bool stat_ok = fstat(fileno(f), &st) == 0;
    if (stat_ok && S_ISDIR(st.st_mode)) {
        fclose(f);
        return lrc_err_set(err, "%s: is a directory, not a safetensors file", path);
    }
    /* A regular file is mapped, not read: the tensors are copied straight
     * out of the page cache, where reading it first would fault in, clear
     * and fill a buffer as large as the file (5.4 GB for the 1b preset's
     * f32 weights) only to copy it again. A pipe, or a mapping refused, is
     * read. (Another process truncating the file during the copy would
     * end this one with SIGBUS: lrc's own writers replace files by rename,
     * which leaves a mapped file whole.) */
    if (stat_ok && S_ISREG(st.st_mode) && st.st_size > 0 && (uint64_t)st.st_size <= SIZE_MAX) {
        size_t len = (size_t)st.st_size;
        void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fileno(f), 0);
        if (map != MAP_FAILED) {
            fclose(f);
            madvise(map, len, MADV_SEQUENTIAL);
            int rc = lrc_safetensors_parse(map, len, path, out, err);
            munmap(map, len);
            return rc;
        }
    }
    size_t len = 0;
    uint8_t *buf = (uint8_t *)lrc_read_all(f, &len);
    int saved = errno;
    fclose(f);
    int rc = !buf && saved == ENOMEM ? lrc_err_nomem(err, "reading %s", path)
             : !buf                  ? lrc_err_set(err, "%s: read error: %s", path, strerror(saved))
                                     : lrc_safetensors_parse(buf, len, path, out, err);
    free(buf);
    return rc;
}

static int write_all(FILE *f, const void *p, size_t n) { return fwrite(p, 1, n, f) == n ? 0 : -1; }

int lrc_safetensors_save(const char *path, const lrc_tensor_set *s, lrc_err *err)
{
    lrc_json_hooks();
    int64_t failed = lrc_alloc_failures(); /* cJSON's builders drop what they cannot allocate */
    cJSON *root = cJSON_CreateObject();
    if (s->metadata_json) {
        /* Written only as the format allows it: an object of strings. */
        cJSON *m = cJSON_Parse(s->metadata_json);
        if (!m && lrc_alloc_failures() != failed) {
            cJSON_Delete(root);
            return lrc_err_nomem(err, "writing %s", path);
        }
        bool ok = cJSON_IsObject(m);
        for (const cJSON *v = ok ? m->child : NULL; v; v = v->next) ok = ok && cJSON_IsString(v);
        if (!ok) {
            cJSON_Delete(m);
            cJSON_Delete(root);
            return lrc_err_set(err, "%s: metadata must be a JSON object of strings", path);
        }
        cJSON_AddItemToObject(root, "__metadata__", m);
    }
    uint64_t off = 0;
    for (int i = 0; i < s->n; i++) {
        const lrc_tensor *t = s->items[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "dtype", lrc_dtype_st_name(t->dtype));
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        for (int d = 0; d < t->shape.ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape.dim[d]));
        cJSON *offs = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + t->nbytes)));
        off += t->nbytes;
        cJSON_AddItemToObject(root, t->name, e);
    }
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    size_t tlen = strlen(path) + 32;
    char *tmp = json && lrc_alloc_failures() == failed ? lrc_malloc(tlen) : NULL;
    if (!tmp) {
        cJSON_free(json);
        return lrc_err_nomem(err, "writing %s", path);
    }
    size_t jlen = strlen(json), padded = (jlen + 7) & ~(size_t)7;
    snprintf(tmp, tlen, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    int rc = LRC_OK;
    if (!f) {
        rc = lrc_err_set(err, "%s: cannot create: %s", path, strerror(errno));
        goto out;
    }
    uint8_t lenbuf[8];
    for (int i = 0; i < 8; i++) lenbuf[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    int bad = write_all(f, lenbuf, 8) || write_all(f, json, jlen);
    for (size_t i = jlen; i < padded && !bad; i++) bad = fputc(' ', f) == EOF;
    for (int i = 0; i < s->n && !bad; i++) bad = write_all(f, s->items[i]->data, s->items[i]->nbytes);
    if (fflush(f) || fsync(fileno(f))) bad = 1;
    if (fclose(f)) bad = 1;
    if (bad) {
        rc = lrc_err_set(err, "%s: write failed: %s", path, strerror(errno));
        remove(tmp);
        goto out;
    }
    if (rename(tmp, path)) {
        rc = lrc_err_set(err, "%s: cannot rename the temporary file into place: %s", path, strerror(errno));
        remove(tmp);
    }
out:
    free(tmp);
    cJSON_free(json);
    return rc;
}
