/* package_cuda.c — a cuda package's launch table (lrc_cuda_abi.h) as
 * package.json's meta "cuda" stores it: {"launches": [{grid, block,
 * scratch_bytes, scratch_storage?, access_bytes?, gemm?: [{op, m, n, k,
 * a_arg, b_arg, c_arg?, bias_arg?}]}], "storage": ["bf16", ...]}. Part of
 * the package module (package.c): the only code that converts the table to
 * and from the file, so the executor and the renderer share a struct. */
#include "lrc_runtime.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void lrc_cuda_table_free(lrc_cuda_table *t)
{
    free(t->launches);
    free(t->storage);
    memset(t, 0, sizeof *t);
}

cJSON *lrc_package_cuda_json(const lrc_cuda_table *t)
{
    lrc_json_hooks();
    int64_t failed = lrc_alloc_failures(); /* cJSON's builders drop what they cannot allocate: none, or NULL */
    cJSON *o = cJSON_CreateObject(), *ls = cJSON_AddArrayToObject(o, "launches"), *st = cJSON_AddArrayToObject(o, "storage");
    for (int i = 0; i < t->n_launches; i++) {
        const lrc_cuda_launch *l = &t->launches[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddItemToObject(x, "grid", cJSON_CreateIntArray((const int[3]){(int)l->grid[0], (int)l->grid[1], (int)l->grid[2]}, 3));
        cJSON_AddNumberToObject(x, "block", l->block);
        cJSON_AddNumberToObject(x, "scratch_bytes", (double)l->scratch_bytes);
        if (l->scratch_bytes) cJSON_AddStringToObject(x, "scratch_storage", lrc_cuda_storage_name(l->scratch_storage));
        if (l->access_bytes) cJSON_AddNumberToObject(x, "access_bytes", l->access_bytes);
        if (l->n_gemm) {
            cJSON *gs = cJSON_AddArrayToObject(x, "gemm");
            for (int j = 0; j < l->n_gemm; j++) {
                const lrc_cuda_gemm *g = &l->gemm[j];
                cJSON *gm = cJSON_CreateObject();
                cJSON_AddStringToObject(gm, "op", lrc_op_name(g->op));
                cJSON_AddNumberToObject(gm, "m", (double)g->m);
                cJSON_AddNumberToObject(gm, "n", (double)g->n);
                cJSON_AddNumberToObject(gm, "k", (double)g->k);
                cJSON_AddNumberToObject(gm, "a_arg", g->a_arg);
                cJSON_AddNumberToObject(gm, "b_arg", g->b_arg);
                if (g->c_arg >= 0) cJSON_AddNumberToObject(gm, "c_arg", g->c_arg);
                if (g->bias_arg >= 0) cJSON_AddNumberToObject(gm, "bias_arg", g->bias_arg);
                cJSON_AddItemToArray(gs, gm);
            }
        }
        cJSON_AddItemToArray(ls, x);
    }
    for (int b = 0; b < t->n_storage; b++) cJSON_AddItemToArray(st, cJSON_CreateString(lrc_cuda_storage_name(t->storage[b])));
    if (lrc_alloc_failures() != failed) cJSON_Delete(o), o = NULL;
    return o;
}

/* "f32", "bf16" or "i32"; f32 when absent (a launch without scratch writes no scratch_storage) */
static lrc_cuda_storage storage_of(const cJSON *s)
{
    for (int k = 0; cJSON_IsString(s) && k < LRC_CUDA_N_STORAGE; k++)
        if (!strcmp(s->valuestring, lrc_cuda_storage_name((lrc_cuda_storage)k))) return (lrc_cuda_storage)k;
    return LRC_CUDA_F32;
}

/* GEMM j of launch i; its arguments index the launch's own, so a damaged
 * package cannot reach past them. */
static int read_gemm(const cJSON *g, int j, int n_args, lrc_cuda_gemm *out)
{
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(g, "op"), *m = cJSON_GetObjectItemCaseSensitive(g, "m"),
                *n = cJSON_GetObjectItemCaseSensitive(g, "n"), *k = cJSON_GetObjectItemCaseSensitive(g, "k"),
                *a = cJSON_GetObjectItemCaseSensitive(g, "a_arg"), *b = cJSON_GetObjectItemCaseSensitive(g, "b_arg"),
                *c = cJSON_GetObjectItemCaseSensitive(g, "c_arg"), *bias = cJSON_GetObjectItemCaseSensitive(g, "bias_arg");
    if (!cJSON_IsString(op) || !cJSON_IsNumber(m) || !cJSON_IsNumber(n) || !cJSON_IsNumber(k) || !cJSON_IsNumber(a) ||
        !cJSON_IsNumber(b) || m->valuedouble < 1 || n->valuedouble < 1 || k->valuedouble < 1 || a->valueint < 0 ||
        a->valueint >= n_args || b->valueint < 0 || b->valueint >= n_args ||
        (c && (!cJSON_IsNumber(c) || c->valueint < 0 || c->valueint >= n_args)) ||
        (bias && (!cJSON_IsNumber(bias) || bias->valueint < 0 || bias->valueint >= n_args || j > 0)))
        return -1;
    /* as the executor always read it: matmul, matmul_nn, anything else matmul_tn */
    out->op = !strcmp(op->valuestring, "matmul") ? LRC_OP_MATMUL : !strcmp(op->valuestring, "matmul_nn") ? LRC_OP_MATMUL_NN : LRC_OP_MATMUL_TN;
    out->m = (int64_t)m->valuedouble;
    out->n = (int64_t)n->valuedouble;
    out->k = (int64_t)k->valuedouble;
    out->a_arg = a->valueint;
    out->b_arg = b->valueint;
    out->c_arg = c ? c->valueint : -1;
    out->bias_arg = bias ? bias->valueint : -1;
    return 0;
}

int lrc_package_cuda_read(const cJSON *meta, const lrc_plan *p, const char *path, lrc_cuda_table *out, lrc_err *err)
{
    memset(out, 0, sizeof *out);
    const cJSON *cu = cJSON_GetObjectItemCaseSensitive(meta, "cuda");
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(cu, "launches"), *st = cJSON_GetObjectItemCaseSensitive(cu, "storage");
    if (!cJSON_IsArray(ls) || cJSON_GetArraySize(ls) != p->n_launches || !cJSON_IsArray(st) || cJSON_GetArraySize(st) > p->n_bufs)
        return lrc_err_set(err, "%s: the cuda launches or storage do not match the plan (a damaged package?)", path);
    out->n_storage = cJSON_GetArraySize(st);
    out->storage = lrc_calloc((size_t)out->n_storage + 1, sizeof *out->storage);
    out->launches = lrc_calloc((size_t)p->n_launches + 1, sizeof *out->launches);
    if (!out->storage || !out->launches) {
        lrc_cuda_table_free(out);
        return lrc_err_nomem(err, "for the cuda launch table of %s", path);
    }
    for (int i = 0; i < out->n_storage; i++) out->storage[i] = storage_of(cJSON_GetArrayItem(st, i));
    out->n_launches = p->n_launches;
    int rc = LRC_OK;
    for (int i = 0; i < p->n_launches && !rc; i++) {
        lrc_cuda_launch *l = &out->launches[i];
        const cJSON *x = cJSON_GetArrayItem(ls, i), *grid = cJSON_GetObjectItemCaseSensitive(x, "grid");
        const cJSON *block = cJSON_GetObjectItemCaseSensitive(x, "block"), *scr = cJSON_GetObjectItemCaseSensitive(x, "scratch_bytes");
        if (!cJSON_IsArray(grid) || cJSON_GetArraySize(grid) != 3 || !cJSON_IsNumber(block) || !cJSON_IsNumber(scr)) {
            rc = lrc_err_set(err, "%s: cuda launch %d is damaged", path, i);
            break;
        }
        for (int d = 0; d < 3; d++) l->grid[d] = (unsigned)cJSON_GetArrayItem(grid, d)->valueint;
        l->block = (unsigned)block->valueint;
        l->scratch_bytes = (int64_t)scr->valuedouble;
        l->scratch_storage = storage_of(cJSON_GetObjectItemCaseSensitive(x, "scratch_storage"));
        const cJSON *acc = cJSON_GetObjectItemCaseSensitive(x, "access_bytes");
        l->access_bytes = cJSON_IsNumber(acc) ? acc->valueint : 0;
        snprintf(l->symbol, sizeof l->symbol, "%s", p->launches[i].symbol ? p->launches[i].symbol : "");
        const cJSON *gs = cJSON_GetObjectItemCaseSensitive(x, "gemm");
        for (int j = 0; cJSON_IsArray(gs) && j < cJSON_GetArraySize(gs) && j < 2 && !rc; j++) {
            if (read_gemm(cJSON_GetArrayItem(gs, j), j, p->launches[i].n_args, &l->gemm[j]))
                rc = lrc_err_set(err, "%s: the GEMM of cuda launch %d ('%s') is damaged", path, i, p->launches[i].label);
            else l->n_gemm = j + 1;
        }
    }
    if (rc) lrc_cuda_table_free(out);
    return rc;
}
