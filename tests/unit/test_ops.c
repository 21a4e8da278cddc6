/* test_ops — every op of the reference backend against fixtures PyTorch
 * computed in f64 (tests/reference/make_fixtures.py), with guard regions
 * after every buffer to catch out-of-bounds writes (ggml's test-backend-ops
 * pattern). Usage: test_ops BACKEND FIXTURE.safetensors...
 * A fixture holds in0, in1, ... and out, and "__metadata__" with the op name
 * and its attributes as strings. */
#include "check.h"
#include "op_fixture.h"
#include "runtime/lrc_runtime.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GUARD 64
#define GUARD_BYTE 0xA5


/* A backend buffer of n bytes followed by GUARD bytes of a known pattern. */
static void *guarded(lrc_backend *be, const void *data, size_t n)
{
    lrc_err err;
    void *b = be->ops->alloc(be, n + GUARD, &err);
    uint8_t *host = malloc(n + GUARD);
    if (data) memcpy(host, data, n);
    else memset(host, 0, n);
    memset(host + n, GUARD_BYTE, GUARD);
    be->ops->write(be, b, host, n + GUARD, &err);
    free(host);
    return b;
}

static bool guard_ok(lrc_backend *be, void *b, size_t n, uint8_t *host)
{
    lrc_err err;
    be->ops->read(be, host, b, n + GUARD, &err);
    for (size_t i = n; i < n + GUARD; i++)
        if (host[i] != GUARD_BYTE) return false;
    return true;
}

static void run_fixture(lrc_backend *be, const char *path)
{
    lrc_err err;
    lrc_tensor_set f;
    char opname[64] = "?";
    if (lrc_safetensors_load(path, &f, &err)) {
        printf("FAIL %s: %s\n", path, err.msg);
        failed++;
        return;
    }
    lrc_graph *g = lrc_graph_new();
    lrc_node proto = {0};
    const lrc_tensor *want = lrc_tensor_set_find(&f, "out");
    if (!f.metadata_json || op_fixture_read(f.metadata_json, &proto, opname, sizeof opname) || !want) {
        printf("FAIL %s: no op metadata or no 'out'\n", path);
        failed++;
        goto done;
    }
    proto.n_in = lrc_op_table[proto.op].n_in;
    for (int k = 0; k < proto.n_in; k++) {
        char name[16];
        snprintf(name, sizeof name, "in%d", k);
        const lrc_tensor *t = lrc_tensor_set_find(&f, name);
        if (!t) {
            printf("FAIL %s: missing %s\n", path, name);
            failed++;
            goto done;
        }
        proto.in[k] = lrc_graph_add_input(g, name, t->dtype, &t->shape, NULL, &err);
    }
    int id = lrc_graph_add(g, &proto, &err);
    if (id < 0 || !lrc_shape_eq(&g->nodes[id].shape, &want->shape)) {
        printf("FAIL %s (%s): %s\n", path, opname, id < 0 ? err.msg : "shape rule disagrees with the fixture");
        failed++;
        goto done;
    }
    void *bufs[LRC_MAX_INPUTS];
    size_t sizes[LRC_MAX_INPUTS];
    for (int k = 0; k < proto.n_in; k++) {
        const lrc_tensor *t = lrc_tensor_set_find(&f, g->nodes[proto.in[k]].name);
        sizes[k] = t->nbytes;
        bufs[k] = guarded(be, t->data, t->nbytes);
    }
    size_t out_bytes = want->nbytes;
    void *out = guarded(be, NULL, out_bytes);
    uint8_t *host = malloc(out_bytes + GUARD + 1);
    int rc = be->ops->launch(be, g, id, bufs, out, &err);
    bool guards = guard_ok(be, out, out_bytes, host);
    double rel = op_fixture_rel_error((const float *)host, want->data, lrc_shape_numel(&want->shape));
    for (int k = 0; k < proto.n_in; k++) {
        uint8_t *scratch = malloc(sizes[k] + GUARD);
        guards = guards && guard_ok(be, bufs[k], sizes[k], scratch);
        free(scratch);
    }
    if (rc || !guards || !(rel <= 1e-5)) {
        printf("FAIL %s (%s): %s relative error %.3e\n", path, opname,
               rc ? err.msg : !guards ? "guard bytes overwritten;" : "", rel);
        failed++;
    } else {
        printf("ok   %-40s %-14s relative error %.3e\n", strrchr(path, '/') ? strrchr(path, '/') + 1 : path, opname, rel);
        passed++;
    }
    for (int k = 0; k < proto.n_in; k++) be->ops->free(be, bufs[k]);
    be->ops->free(be, out);
    free(host);
done:
    lrc_graph_free(g);
    lrc_tensor_set_clear(&f);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_ops BACKEND FIXTURE...\n");
        return 2;
    }
    lrc_err err;
    lrc_backend *be = lrc_backend_open(argv[1], &err);
    if (!be) {
        fprintf(stderr, "test_ops: %s\n", err.msg);
        return 1;
    }
    for (int i = 2; i < argc; i++) run_fixture(be, argv[i]);
    lrc_backend_close(be);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
