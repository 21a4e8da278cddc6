/* executor.c — runs a graph node by node on a backend, binding inputs and
 * parameters, freeing each intermediate after its last use. */
#include "lrc_runtime.h"

#include <stdlib.h>
#include <string.h>

/* Every backend stores 4-byte elements on the host boundary: f32, or i32
 * for integer tensors; wider or narrower device storage is the backend's
 * business behind write/read. */
static size_t buffer_bytes(const lrc_node *n) { return (size_t)lrc_shape_numel(&n->shape) * 4; }

static int bind_source(lrc_backend *be, const lrc_graph *g, int id, const lrc_tensor_set *inputs,
                       const lrc_tensor_set *params, void **buf, lrc_err *err)
{
    const lrc_node *n = &g->nodes[id];
    bool is_param = n->op == LRC_OP_PARAM;
    const lrc_tensor *t = lrc_tensor_set_find(is_param ? params : inputs, n->name);
    char b1[96], b2[96];
    if (!t) return lrc_err_set(err, "missing %s '%s'", is_param ? "parameter" : n->op == LRC_OP_STATE ? "state" : "input", n->name);
    bool want_int = n->dtype == LRC_I32;
    if (!lrc_shape_eq(&t->shape, &n->shape) || (want_int ? t->dtype != LRC_I32 : t->dtype != LRC_F32))
        return lrc_err_set(err, "%s '%s' is %s %s, the model expects %s %s", is_param ? "parameter" : "input",
                           n->name, lrc_dtype_st_name(t->dtype), lrc_shape_str(&t->shape, b1, sizeof b1),
                           want_int ? "I32" : "F32", lrc_shape_str(&n->shape, b2, sizeof b2));
    *buf = be->ops->alloc(be, buffer_bytes(n), err);
    if (!*buf) return LRC_EUSER;
    return be->ops->write(be, *buf, t->data, buffer_bytes(n), err);
}

int lrc_exec_run(lrc_backend *be, const lrc_graph *g, const lrc_tensor_set *inputs,
                 const lrc_tensor_set *params, lrc_tensor_set *outputs, lrc_err *err)
{
    int rc = lrc_graph_verify(g, err);
    if (rc) return rc;
    int N = g->n_nodes;
    void **buf = lrc_calloc((size_t)N, sizeof *buf);
    int *last_use = lrc_malloc((size_t)N * sizeof *last_use);
    int64_t *iteration = lrc_calloc((size_t)N + 1, sizeof(int64_t));
    if (!buf || !last_use || !iteration) {
        free(buf), free(last_use), free(iteration);
        return lrc_err_nomem(err, "for the interpreter's %d buffers", N);
    }
    for (int i = 0; i < N; i++) {
        last_use[i] = i;
        for (int k = 0; k < g->nodes[i].n_in; k++) last_use[g->nodes[i].in[k]] = i;
    }
    for (int i = 0; i < g->n_outputs; i++) last_use[g->outputs[i]] = N; /* kept to the end */
    /* a loop's body runs again: what it reads (the state too) lives until its back edge */
    for (int id = 0; id < N; id++) {
        if (g->nodes[id].op != LRC_OP_LOOP_NEXT) continue;
        int st = g->nodes[id].in[0];
        for (int j = st; j < id; j++)
            for (int k = 0; k < g->nodes[j].n_in; k++)
                if (last_use[g->nodes[j].in[k]] < id) last_use[g->nodes[j].in[k]] = id;
    }
    for (int i = 0; i < N; i++)
        if (g->nodes[i].op == LRC_OP_STATE) last_use[i] = N; /* read back after the run */

    for (int id = 0; id < N && !rc; id++) {
        const lrc_node *n = &g->nodes[id];
        if (lrc_op_table[n->op].fusion == LRC_FUSE_SOURCE) {
            if (!buf[id]) rc = bind_source(be, g, id, inputs, params, &buf[id], err); /* once, even inside a loop */
            continue;
        }
        if (n->op == LRC_OP_LOOP_NEXT) { /* the back edge: rows still iterating take h_next */
            int st = n->in[0];
            int64_t rows = n->shape.ndim ? n->shape.dim[0] : 1;
            int32_t *counts = lrc_malloc((size_t)rows * 4);
            char *h = lrc_malloc(2 * buffer_bytes(n)), *next = h ? h + buffer_bytes(n) : NULL;
            rc = counts && h ? be->ops->read(be, counts, buf[n->in[2]], (size_t)rows * 4, err)
                             : lrc_err_nomem(err, "for a loop's back edge (%zu bytes)", 2 * buffer_bytes(n));
            for (int64_t b = 0; b < rows && !rc; b++)
                if (counts[b] < 0) rc = lrc_err_set(err, "a loop's iteration count must be 0 or more, got %d", counts[b]);
            if (!rc) rc = be->ops->read(be, h, buf[st], buffer_bytes(n), err);
            if (!rc) rc = be->ops->read(be, next, buf[n->in[1]], buffer_bytes(n), err);
            bool again = !rc && lrc_loop_rows(counts, rows, iteration[id], h, next, buffer_bytes(n) / (size_t)rows);
            if (!rc) rc = be->ops->write(be, buf[st], h, buffer_bytes(n), err);
            free(counts);
            free(h);
            if (!rc && again) {
                iteration[id]++;
                id = st; /* the body again, from the node after the state */
                continue;
            }
            iteration[id] = 0;
            if (buf[id]) be->ops->free(be, buf[id]); /* an inner loop's final state of the outer loop's previous iteration */
            buf[id] = buf[st]; /* the final state: the state's buffer, handed over (nothing after the loop reads the state) */
            buf[st] = NULL;
            continue;
        }
        if (!be->ops->supports_op(g, n)) {
            rc = lrc_err_set(err, "backend %s does not support op %s", be->ops->name, lrc_op_name(n->op));
            break;
        }
        void *in[LRC_MAX_INPUTS];
        for (int k = 0; k < n->n_in; k++) in[k] = buf[n->in[k]];
        if (buf[id]) be->ops->free(be, buf[id]); /* a loop body's previous iteration */
        buf[id] = be->ops->alloc(be, buffer_bytes(n), err);
        if (!buf[id]) { rc = LRC_EUSER; break; }
        rc = be->ops->launch(be, g, id, in, buf[id], err);
        if (rc && n->loc) lrc_err_prefix(err, "%s", n->loc);
        for (int k = 0; k < n->n_in; k++) {
            int src = n->in[k];
            if (last_use[src] == id && buf[src]) {
                be->ops->free(be, buf[src]);
                buf[src] = NULL;
            }
        }
    }
    if (!rc) rc = be->ops->synchronize(be, err);
    /* state buffers (KV caches) were updated in place: hand them back */
    for (int id = 0; id < N && !rc; id++)
        if (g->nodes[id].op == LRC_OP_STATE && buf[id]) {
            lrc_tensor *t = lrc_tensor_set_find(inputs, g->nodes[id].name);
            rc = be->ops->read(be, t->data, buf[id], buffer_bytes(&g->nodes[id]), err);
        }
    for (int i = 0; i < g->n_outputs && !rc; i++) {
        const lrc_node *n = &g->nodes[g->outputs[i]];
        lrc_tensor *t = lrc_tensor_new(g->output_names[i], n->dtype == LRC_I32 ? LRC_I32 : LRC_F32, &n->shape, err);
        if (!t) { rc = LRC_EUSER; break; }
        rc = be->ops->read(be, t->data, buf[g->outputs[i]], t->nbytes, err);
        if (!rc) rc = lrc_tensor_set_add(outputs, t, err);
        else lrc_tensor_free(t);
    }
    for (int i = 0; i < N; i++)
        if (buf[i]) be->ops->free(be, buf[i]);
    free(buf);
    free(last_use);
    free(iteration);
    return rc;
}

lrc_backend *lrc_backend_open(const char *name, lrc_err *err)
{
    if (!strcmp(name, "ref")) {
        lrc_backend *be = lrc_backend_ref_new();
        if (!be) lrc_err_nomem(err, "for the ref backend");
        return be;
    }
    lrc_err_set(err, "unknown target '%s' (targets: ref, cpu; see lrc --version)", name);
    return NULL;
}

void lrc_backend_close(lrc_backend *be)
{
    if (be) be->ops->destroy(be);
}
