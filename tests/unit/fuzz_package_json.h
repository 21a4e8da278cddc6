/* fuzz_package_json.h — fuzz_package.c's mutations of a package.json that
 * know its structure (fuzz_spec.mutate): a launch's items, arguments
 * (shifted, rotated, swapped, dropped, added), symbol, flags or place; a
 * buffer's shape, dtype, kind, offset, name or packing, its bytes kept
 * consistent with them or not; the range checks, arena_bytes, meta's
 * shapes, sizes, target and CPU features; names with a control character;
 * any value replaced, removed or repeated. Included once, by
 * fuzz_package.c: the edits draw on fuzz.h's generator, which must be the
 * one its loop (and --keep-going's children) share. */
#ifndef LRC_TEST_FUZZ_PACKAGE_JSON_H
#define LRC_TEST_FUZZ_PACKAGE_JSON_H

#include "fuzz.h"

#include <cjson/cJSON.h>
#include <math.h>

static uint32_t pick(uint32_t n) { return n ? (uint32_t)(fuzz_next() % n) : 0; }

/* An edge of what a count, a size or an index can be, near v. */
static double edge_near(double v)
{
    static const double far[] = {0, 1, -1, 2, 3, 8, 255, 256, 4096, 65535, 65536, 2147483647.0, 2147483648.0, 4294967296.0,
                                 1099511627776.0, 9007199254740992.0, 1e15, 1e16, -1e15, 0.5, 1e308};
    switch (pick(6)) {
    case 0: return v + 1;
    case 1: return v - 1;
    case 2: return v * 2;
    case 3: return floor(v / 2);
    default: return far[pick(sizeof far / sizeof *far)];
    }
}

static cJSON *item(cJSON *arr, int i) { return cJSON_GetArrayItem(arr, i); }
static cJSON *key(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* o's key k set to v (added when o lacks it); v is taken, freed when o is no object. */
static void replace_key(cJSON *o, const char *k, cJSON *v)
{
    if (!cJSON_IsObject(o)) cJSON_Delete(v);
    else if (!key(o, k)) cJSON_AddItemToObject(o, k, v);
    else if (!cJSON_ReplaceItemInObjectCaseSensitive(o, k, v)) cJSON_Delete(v);
}

static void replace_at(cJSON *a, int i, cJSON *v)
{
    if (!cJSON_IsArray(a) || !cJSON_ReplaceItemInArray(a, i, v)) cJSON_Delete(v);
}

static void insert_at(cJSON *a, int i, cJSON *v)
{
    if (!cJSON_IsArray(a) || !cJSON_InsertItemInArray(a, i, v)) cJSON_Delete(v);
}

static void set_num(cJSON *o, const char *k, double v)
{
    cJSON *x = key(o, k);
    if (cJSON_IsNumber(x)) cJSON_SetNumberValue(x, v);
    else replace_key(o, k, cJSON_CreateNumber(v));
}

/* Numbers of an array (args, a shape) moved: shifted either way, rotated,
 * two swapped, one dropped, one added, one changed. */
static void edit_list(cJSON *a, int most)
{
    int n = cJSON_GetArraySize(a);
    if (!cJSON_IsArray(a)) return;
    cJSON *x;
    switch (pick(7)) {
    case 0: /* shifted left, the last repeated */
        if (n > 1 && (x = cJSON_DetachItemFromArray(a, 0))) cJSON_Delete(x), insert_at(a, n - 1, cJSON_Duplicate(item(a, n - 2), 1));
        break;
    case 1: /* shifted right, the first repeated */
        if (n > 1) cJSON_DeleteItemFromArray(a, n - 1), insert_at(a, 0, cJSON_Duplicate(item(a, 0), 1));
        break;
    case 2: /* rotated */
        if (n > 1 && (x = cJSON_DetachItemFromArray(a, 0))) insert_at(a, n - 1, x);
        break;
    case 3: { /* two swapped */
        int i = (int)pick((uint32_t)n), j = (int)pick((uint32_t)n);
        if (i != j) {
            cJSON *xi = cJSON_Duplicate(item(a, i), 1), *xj = cJSON_Duplicate(item(a, j), 1);
            replace_at(a, i, xj);
            replace_at(a, j, xi);
        }
        break;
    }
    case 4: if (n) cJSON_DeleteItemFromArray(a, (int)pick((uint32_t)n)); break;
    case 5: insert_at(a, (int)pick((uint32_t)n + 1), cJSON_CreateNumber(pick(2) ? (double)pick((uint32_t)most + 2) - 1 : 1)); break;
    default:
        if (n && cJSON_IsNumber(x = item(a, (int)pick((uint32_t)n))))
            cJSON_SetNumberValue(x, pick(2) ? (double)pick((uint32_t)most + 2) - 1 : edge_near(x->valuedouble));
    }
}

/* name with a line break, a carriage return or another control character
 * put in (a static buffer): quoted in a message, it must stay one line. */
static const char *odd_name(const char *name)
{
    static char out[256];
    static const char odd[] = "\n\r\t\x01\x1b\x7f";
    size_t n = strlen(name) < 200 ? strlen(name) : 200, at = pick((uint32_t)n + 1);
    snprintf(out, sizeof out, "%.*s%c%s", (int)at, name, odd[pick(sizeof odd - 1)], name + at);
    return out;
}

static int dtype_bytes(const char *dt)
{
    return !strcmp(dt, "U8") || !strcmp(dt, "I8") ? 1 : !strcmp(dt, "BF16") || !strcmp(dt, "F16") ? 2 : 4;
}

/* bytes = its shape's elements times its dtype's size, as the loader checks (also to edge values). */
static void fix_bytes(cJSON *buf)
{
    const cJSON *sh = key(buf, "shape"), *dt = key(buf, "dtype");
    double n = cJSON_IsString(dt) ? dtype_bytes(dt->valuestring) : 4;
    for (const cJSON *x = cJSON_IsArray(sh) ? sh->child : NULL; x; x = x->next) n *= cJSON_IsNumber(x) ? x->valuedouble : 1;
    set_num(buf, "bytes", n);
}

static void edit_buffer(cJSON *root, cJSON *buf, int n_bufs)
{
    static const char *const dtypes[] = {"F32", "I32", "BF16", "F16", "U8", "I8", "F64", "x"};
    static const char *const kinds[] = {"none", "input", "param", "output", "arena", "persist", "state", "x"};
    cJSON *bufs = key(root, "buffers"), *x;
    double arena = cJSON_IsNumber(x = key(root, "arena_bytes")) ? x->valuedouble : 0;
    switch (pick(9)) {
    case 0: edit_list(key(buf, "shape"), 64), fix_bytes(buf); break; /* another shape, bytes to match */
    case 1: edit_list(key(buf, "shape"), 64); break;
    case 2: replace_key(buf, "dtype", cJSON_CreateString(dtypes[pick(8)])), fix_bytes(buf); break;
    case 3: replace_key(buf, "kind", cJSON_CreateString(kinds[pick(8)])); break;
    case 4: { /* another place in the arena, or past it */
        const cJSON *by = key(buf, "bytes");
        double room = arena - (cJSON_IsNumber(by) ? by->valuedouble : 0);
        set_num(buf, "offset", pick(3) && room > 0 ? (double)pick((uint32_t)room + 1) : edge_near(room));
        break;
    }
    case 5: set_num(buf, pick(2) ? "bytes" : "offset", edge_near(cJSON_IsNumber(x = key(buf, "bytes")) ? x->valuedouble : 0)); break;
    case 6: { /* another buffer's name, or its own with a control character */
        const cJSON *o = item(bufs, (int)pick((uint32_t)n_bufs)), *nm = key(o, "name");
        if (cJSON_IsString(nm)) replace_key(buf, "name", cJSON_CreateString(pick(4) ? nm->valuestring : odd_name(nm->valuestring)));
        break;
    }
    case 7: { /* its packing */
        cJSON *k = key(buf, "packed");
        static const char *const stores[] = {"f32", "bf16", "q8", "q4"};
        static const char *const fields[] = {"panel", "cols", "inner"};
        if (!k) break;
        if (pick(4) == 0) replace_key(k, "store", cJSON_CreateString(stores[pick(4)]));
        else {
            const char *f = fields[pick(3)];
            set_num(k, f, edge_near(cJSON_IsNumber(x = key(k, f)) ? x->valuedouble : 0));
        }
        break;
    }
    default: /* the same as another buffer: two launches' arguments then alias */
        x = item(bufs, (int)pick((uint32_t)n_bufs));
        if (x && x != buf && key(x, "offset")) {
            set_num(buf, "offset", key(x, "offset")->valuedouble);
            if (pick(2) && key(x, "shape")) replace_key(buf, "shape", cJSON_Duplicate(key(x, "shape"), 1)), fix_bytes(buf);
        }
    }
}

static void edit_launch(cJSON *root, cJSON *l, int n_bufs)
{
    cJSON *ls = key(root, "launches"), *x;
    int n = cJSON_GetArraySize(ls);
    cJSON *o = item(ls, (int)pick((uint32_t)n));
    switch (pick(8)) {
    case 0:
    case 1: edit_list(key(l, "args"), n_bufs); break;
    case 2: set_num(l, "items", pick(2) && cJSON_IsNumber(x = key(o, "items")) ? x->valuedouble : edge_near(cJSON_IsNumber(x = key(l, "items")) ? x->valuedouble : 1)); break;
    case 3: /* another launch's symbol, or its own with a control character */
        if (cJSON_IsString(x = key(pick(4) ? o : l, "symbol")))
            replace_key(l, "symbol", cJSON_CreateString(o == l || !pick(4) ? odd_name(x->valuestring) : x->valuestring));
        break;
    case 4: { /* its flags */
        static const char *const flags[] = {"once", "steal"};
        const char *f = flags[pick(2)];
        replace_key(l, f, cJSON_CreateBool(!cJSON_IsTrue(key(l, f))));
        break;
    }
    case 5: /* a back edge to another launch, or none */
        if (key(l, "loop_to") && pick(2)) cJSON_DeleteItemFromObjectCaseSensitive(l, "loop_to");
        else set_num(l, "loop_to", (double)pick((uint32_t)n + 1));
        break;
    case 6: /* moved, or another's arguments */
        if (pick(2) && o != l) replace_key(l, "args", cJSON_Duplicate(key(o, "args"), 1));
        else if ((x = cJSON_DetachItemFromArray(ls, (int)pick((uint32_t)n)))) insert_at(ls, (int)pick((uint32_t)n), x);
        break;
    default: /* dropped or repeated */
        if (pick(2)) cJSON_DeleteItemFromArray(ls, (int)pick((uint32_t)n));
        else insert_at(ls, (int)pick((uint32_t)n + 1), cJSON_Duplicate(l, 1));
    }
}

/* meta: the shapes, sizes and features the runtime reads. */
static void edit_meta(cJSON *meta)
{
    static const char *const sizes[] = {"batch", "seq", "ctx", "vocab", "iterations", "peak_flops_per_item"};
    cJSON *x, *pre = key(meta, "prefix");
    switch (pick(6)) {
    case 0:
    case 1: {
        const char *k = sizes[pick(6)];
        set_num(meta, k, edge_near(cJSON_IsNumber(x = key(meta, k)) ? x->valuedouble : 1));
        break;
    }
    case 2: /* the list of shapes */
        if (cJSON_IsArray(x = key(meta, "shapes")) && cJSON_GetArraySize(x) && pick(2)) edit_list(item(x, (int)pick((uint32_t)cJSON_GetArraySize(x))), 16);
        else if (x) edit_list(x, 4);
        break;
    case 3: { /* which axes run shorter */
        static const char *const flags[] = {"batch", "seq"};
        const char *f = flags[pick(2)];
        replace_key(pre, f, cJSON_CreateBool(!cJSON_IsTrue(key(pre, f))));
        break;
    }
    case 4: /* where they are */
        if ((x = key(pre, "axes")) && x->child) edit_list(pick(2) ? x->child : x->child->next ? x->child->next : x->child, 4);
        break;
    default: {
        static const char *const reqs[] = {"", "avx2", "avx2,fma,f16c,avx512f", "sse9", "avx2,,fma"};
        static const char *const targets[] = {"cpu", "cuda", "ref", ""};
        if (pick(2)) replace_key(meta, "requires", cJSON_CreateString(reqs[pick(5)]));
        else replace_key(meta, "target", cJSON_CreateString(targets[pick(4)]));
    }
    }
}

/* Any value of the document (a random walk from the root) replaced,
 * removed or repeated. */
static void edit_any(cJSON *root)
{
    cJSON *parent = root, *at = root->child;
    for (int depth = 0; at && depth < 6; depth++) {
        int n = cJSON_GetArraySize(parent);
        at = n ? cJSON_GetArrayItem(parent, (int)pick((uint32_t)n)) : NULL;
        if (!at || !at->child || pick(3) == 0) break;
        parent = at;
    }
    if (!at) return;
    int i = 0;
    for (cJSON *c = parent->child; c && c != at; c = c->next) i++;
    cJSON *v;
    switch (pick(8)) {
    case 0: cJSON_Delete(cJSON_DetachItemViaPointer(parent, at)); return;
    case 1:
        if (cJSON_IsArray(parent)) insert_at(parent, i, cJSON_Duplicate(at, 1));
        return;
    case 2: v = cJSON_CreateNull(); break;
    case 3: v = cJSON_CreateString(pick(2) ? "" : cJSON_IsString(at) ? odd_name(at->valuestring) : "x\ny"); break;
    case 4: v = pick(2) ? cJSON_CreateArray() : cJSON_CreateObject(); break;
    case 5: v = cJSON_CreateBool(pick(2)); break;
    default: v = cJSON_CreateNumber(edge_near(cJSON_IsNumber(at) ? at->valuedouble : 0));
    }
    if (!cJSON_ReplaceItemViaPointer(parent, at, v)) cJSON_Delete(v);
}

/* fuzz_spec.mutate: one edit of the JSON document buf[0..*n), printed back
 * as `lrc compile` prints it. */
static bool mutate(uint8_t *buf, size_t *n, size_t cap)
{
    cJSON *root = cJSON_ParseWithLength((const char *)buf, *n);
    if (!cJSON_IsObject(root)) return cJSON_Delete(root), false;
    cJSON *bufs = key(root, "buffers"), *ls = key(root, "launches"), *x;
    int n_bufs = cJSON_GetArraySize(bufs), n_ls = cJSON_GetArraySize(ls);
    switch (pick(11)) {
    case 10: break; /* kept as it is: the directory's change alone, or fewer edits */
    case 0:
    case 1:
    case 2:
        if (n_ls) edit_launch(root, item(ls, (int)pick((uint32_t)n_ls)), n_bufs);
        break;
    case 3:
    case 4:
        if (n_bufs) edit_buffer(root, item(bufs, (int)pick((uint32_t)n_bufs)), n_bufs);
        break;
    case 5: edit_meta(key(root, "meta")); break;
    case 6: /* a range check */
        if ((x = item(key(root, "checks"), 0))) {
            static const char *const fields[] = {"buffer", "lo", "hi"};
            const char *f = fields[pick(3)];
            set_num(x, f, pick(2) ? (double)pick((uint32_t)n_bufs + 1) : edge_near(cJSON_IsNumber(key(x, f)) ? key(x, f)->valuedouble : 0));
        }
        break;
    case 7: set_num(root, "arena_bytes", edge_near(cJSON_IsNumber(x = key(root, "arena_bytes")) ? x->valuedouble : 0)); break;
    default: edit_any(root);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    size_t k = text ? strlen(text) : 0;
    bool fits = text && k <= cap;
    if (fits) memcpy(buf, text, k), *n = k;
    cJSON_free(text);
    return fits;
}

#endif
