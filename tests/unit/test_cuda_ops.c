/* test_cuda_ops — every op of the PyTorch fixtures (tests/fixtures/ops, the
 * ones test_ops runs on ref and cpu) as a one-op graph on the cuda target: compiled
 * by NVRTC for GPU 0, run with LRC_CUDA_CHECK's guard region after every
 * buffer (checked after every launch), the result within 1e-5 of PyTorch's
 * (f32 storage: a one-op graph's inputs and output are f32), its launch
 * table the same after a trip through package.json's format. On a machine
 * with no cuda device it says why in one line and exits 77, which ctest
 * counts as skipped; CI runs it on the host emulator (tests/cuemu).
 * Usage: test_cuda_ops FIXTURE.safetensors... */
#include "cuda_test.h"
#include "frontend/compile.h"
#include "op_fixture.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed, excepted;

/* The launch table as a package stores it (runtime/package_cuda.c) and
 * read back: the same struct; and with a GEMM argument past its launch's,
 * refused by name. */
static int table_round_trip(const lrc_compiled *c, lrc_err *err)
{
    const lrc_cuda_table *t = &c->cuda.table;
    cJSON *meta = cJSON_CreateObject();
    cJSON_AddItemToObject(meta, "cuda", lrc_package_cuda_json(t));
    lrc_cuda_table back;
    int rc = lrc_package_cuda_read(meta, &c->plan, "package.json", &back, err);
    if (!rc && (back.n_launches != t->n_launches || back.n_storage != t->n_storage ||
                memcmp(back.storage, t->storage, (size_t)t->n_storage * sizeof *t->storage)))
        rc = lrc_err_set(err, "the launch table read back has other launches or storage");
    for (int i = 0; i < t->n_launches && !rc; i++) {
        const lrc_cuda_launch *a = &t->launches[i], *b = &back.launches[i];
        bool same = !strcmp(a->symbol, b->symbol) && !memcmp(a->grid, b->grid, sizeof a->grid) && a->block == b->block &&
                    a->scratch_bytes == b->scratch_bytes && (!a->scratch_bytes || a->scratch_storage == b->scratch_storage) &&
                    a->access_bytes == b->access_bytes && a->n_gemm == b->n_gemm;
        for (int j = 0; j < a->n_gemm && same; j++)
            same = a->gemm[j].op == b->gemm[j].op && a->gemm[j].m == b->gemm[j].m && a->gemm[j].n == b->gemm[j].n &&
                   a->gemm[j].k == b->gemm[j].k && a->gemm[j].a_arg == b->gemm[j].a_arg && a->gemm[j].b_arg == b->gemm[j].b_arg &&
                   a->gemm[j].c_arg == b->gemm[j].c_arg && a->gemm[j].bias_arg == b->gemm[j].bias_arg;
        if (!same) rc = lrc_err_set(err, "launch %d of the table read back differs", i);
    }
    if (!rc) lrc_cuda_table_free(&back);
    for (int i = 0; i < t->n_launches && !rc; i++) {
        if (!t->launches[i].n_gemm) continue;
        cJSON *ls = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(meta, "cuda"), "launches");
        cJSON *g = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(ls, i), "gemm"), 0);
        cJSON_SetNumberValue(cJSON_GetObjectItemCaseSensitive(g, "a_arg"), c->plan.launches[i].n_args);
        lrc_err why;
        if (!lrc_package_cuda_read(meta, &c->plan, "package.json", &back, &why)) {
            lrc_cuda_table_free(&back);
            rc = lrc_err_set(err, "a GEMM argument past launch %d's was read", i);
        } else if (!strstr(why.msg, "is damaged")) rc = lrc_err_set(err, "a damaged GEMM refused with '%s'", why.msg);
        break;
    }
    cJSON_Delete(meta);
    return rc;
}

static void run_fixture(const char *path, const char *arch)
{
    lrc_err err;
    lrc_tensor_set f, in, outs;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&outs);
    char opname[64] = "?";
    const char *file = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    lrc_graph *g;
    const lrc_tensor *want;
    int id = op_fixture_open(path, &f, &g, opname, sizeof opname, &want, &err), rc = id < 0 ? LRC_EUSER : LRC_OK;
    if (!g) {
        printf("FAIL %s: %s\n", file, err.msg);
        failed++;
        return;
    }
    /* the inputs, without the states (kv_attention's caches): the plan holds those, zeroed */
    for (int k = 0; !rc && k < lrc_op_table[g->nodes[id].op].n_in; k++) {
        const lrc_node *src = &g->nodes[g->nodes[id].in[k]];
        const lrc_tensor *t = lrc_tensor_set_find(&f, src->name);
        lrc_tensor *copy = src->op == LRC_OP_INPUT ? lrc_tensor_new(src->name, t->dtype, &t->shape, &err) : NULL;
        if (copy) memcpy(copy->data, t->data, t->nbytes);
        if (copy && lrc_tensor_set_add(&in, copy, &err)) rc = LRC_EUSER;
    }
    if (!rc && (id < 0 || lrc_graph_add_output(g, "out", id, &err) < 0)) rc = LRC_EUSER;
    lrc_compiled c;
    memset(&c, 0, sizeof c);
    lrc_cuda_exec *x = NULL;
    bool compiled = false;
    if (!rc) {
        rc = lrc_compile_graph_cuda(g, NULL, arch, true, &c, &err); /* takes g */
        g = NULL;
        compiled = true;
    }
    if (!rc) rc = table_round_trip(&c, &err);
    if (!rc) rc = lrc_cuda_exec_new(&c.plan, &c.cuda.table, c.cubin, &x, &err);
    if (!rc) rc = lrc_cuda_exec_run(x, &in, &outs, &err);
    const lrc_tensor *got = rc ? NULL : lrc_tensor_set_find(&outs, "out");
    if (!rc && (!got || !lrc_shape_eq(&got->shape, &want->shape))) rc = lrc_err_set(&err, "no output 'out' of the fixture's shape");
    double rel = rc ? 0 : op_fixture_rel_error(got->data, want->data, lrc_shape_numel(&want->shape));
    const op_fixture_exception *ex = op_fixture_excepted("cuda", opname);
    if (ex && rc && strstr(err.msg, ex->error)) {
        printf("EXCEPTION %-23s %-14s not run on cuda: %s (\"%s\")\n", file, opname, ex->why, err.msg);
        excepted++;
    } else if (ex) {
        printf("FAIL %-28s %-14s listed as an exception on cuda (\"%s\") but got: %s\n", file, opname, ex->error,
               !rc && rel <= 1e-5 ? "a pass (remove it from op_fixture.h's list)" : rc ? err.msg : "a wrong result");
        failed++;
    } else if (rc || !(rel <= 1e-5)) {
        printf("FAIL %-28s %-14s %s relative error %.3e\n", file, opname, rc ? err.msg : "", rel);
        failed++;
    } else {
        printf("ok   %-28s %-14s relative error %.3e\n", file, opname, rel);
        passed++;
    }
    lrc_cuda_exec_free(x);
    if (compiled) lrc_compiled_free(&c);
    lrc_graph_free(g);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&outs);
    lrc_tensor_set_clear(&f);
}

/* ---- GQA attention with a window and the soft-cap, in kernels of more than one op ---- */

static lrc_tensor *random_input(lrc_graph *g, const char *name, lrc_shape s, uint32_t seed, int *id)
{
    lrc_err err;
    *id = lrc_graph_add_input(g, name, LRC_F32, &s, NULL, &err);
    lrc_tensor *t = lrc_tensor_new(name, LRC_F32, &s, &err);
    for (int64_t i = 0; i < lrc_shape_numel(&s); i++) {
        seed = seed * 1664525u + 1013904223u;
        ((float *)t->data)[i] = (float)((double)(seed >> 8) / (double)(1u << 24) * 4.0 - 2.0);
    }
    return t;
}

/* RoPE fused into GQA attention (6 query heads over 2) with a window of 3
 * and the soft-cap, and dq, dk, dv in one kernel (fuse rule 6), on cuda
 * against the reference backend, each output within 1e-5. */
static void run_attention_graph(const char *arch)
{
    const int64_t B = 2, T = 37, H = 6, Hkv = 2, D = 8;
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set in, want, outs, params;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&want);
    lrc_tensor_set_init(&outs);
    lrc_tensor_set_init(&params);
    int q, k, v, dy;
    lrc_tensor_set_add(&in, random_input(g, "q", (lrc_shape){4, {B, T, H, D}}, 1, &q), &err);
    lrc_tensor_set_add(&in, random_input(g, "k", (lrc_shape){4, {B, T, Hkv, D}}, 2, &k), &err);
    lrc_tensor_set_add(&in, random_input(g, "v", (lrc_shape){4, {B, T, Hkv, D}}, 3, &v), &err);
    lrc_tensor_set_add(&in, random_input(g, "dy", (lrc_shape){4, {B, T, H, D}}, 4, &dy), &err);
    lrc_node rq = {.op = LRC_OP_ROPE, .n_in = 1, .in = {q}, .fattr = {500}}, rk = {.op = LRC_OP_ROPE, .n_in = 1, .in = {k}, .fattr = {500}};
    lrc_node a = {.op = LRC_OP_ATTENTION, .n_in = 3, .in = {lrc_graph_add(g, &rq, &err), lrc_graph_add(g, &rk, &err), v},
                  .iattr = {1, 3}, .fattr = {0.7, 1.5}};
    int rc = lrc_graph_add_output(g, "y", lrc_graph_add(g, &a, &err), &err) < 0;
    for (int w = 0; w < 3 && !rc; w++) {
        lrc_node d = {.op = LRC_OP_ATTENTION_GRAD, .n_in = 4, .in = {q, k, v, dy}, .iattr = {1, w, 3}, .fattr = {0.7, 1.5}};
        rc = lrc_graph_add_output(g, w == 0 ? "dq" : w == 1 ? "dk" : "dv", lrc_graph_add(g, &d, &err), &err) < 0;
    }
    lrc_backend *ref = lrc_backend_ref_new();
    if (!rc) rc = lrc_exec_run(ref, g, &in, &params, &want, &err);
    lrc_backend_close(ref);
    lrc_compiled c;
    memset(&c, 0, sizeof c);
    lrc_cuda_exec *x = NULL;
    if (!rc) {
        rc = lrc_compile_graph_cuda(g, NULL, arch, true, &c, &err); /* takes g */
        g = NULL;
    }
    if (!rc) rc = lrc_cuda_exec_new(&c.plan, &c.cuda.table, c.cubin, &x, &err);
    if (!rc) rc = lrc_cuda_exec_run(x, &in, &outs, &err);
    double worst = 0;
    for (int i = 0; !rc && i < want.n; i++) {
        const lrc_tensor *got = lrc_tensor_set_find(&outs, want.items[i]->name);
        if (!got || !lrc_shape_eq(&got->shape, &want.items[i]->shape)) rc = lrc_err_set(&err, "no output '%s'", want.items[i]->name);
        double rel = rc ? 0 : op_fixture_rel_error(got->data, want.items[i]->data, lrc_shape_numel(&got->shape));
        if (!rc && !(rel <= worst)) worst = rel;
    }
    if (rc || !(worst <= 1e-5)) {
        printf("FAIL attention graph (GQA 6/2, window 3, softcap 1.5, RoPE, dq dk dv) %s worst relative error %.3e\n", rc ? err.msg : "", worst);
        failed++;
    } else {
        printf("ok   attention graph (GQA 6/2, window 3, softcap 1.5, RoPE, dq dk dv) worst relative error %.3e\n", worst);
        passed++;
    }
    lrc_cuda_exec_free(x);
    if (c.g) lrc_compiled_free(&c);
    lrc_graph_free(g);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&want);
    lrc_tensor_set_clear(&outs);
    lrc_tensor_set_clear(&params);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_cuda_ops FIXTURE...\n");
        return 2;
    }
    char arch[16];
    cuda_test_device(arch, sizeof arch);
    for (int i = 1; i < argc; i++) run_fixture(argv[i], arch);
    run_attention_graph(arch);
    failed += op_fixture_walk("cuda", lrc_cuda_supports_op); /* every op the renderer's table has was tested */
    if (excepted) printf("%d listed exceptions on cuda (see above)\n", excepted);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
