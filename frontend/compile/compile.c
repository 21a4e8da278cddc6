/* compile.c — the CPU compiler pipeline, end to end: passes on the graph,
 * kernel groups and memory plan, launch descriptions, kernels through LLVM
 * into the JIT, and the runtime plan that runs them. */
#include "lrc_compile.h"

#include "../../codegen/llvm/lrc_llvm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* "gemm matmul+add (llama.lua:40)" */
static char *launch_label(const lrc_graph *g, const lrc_schedule *s, const lrc_kernel_desc *k)
{
    char buf[256];
    size_t used = 0;
    if (k->group < 0) {
        snprintf(buf, sizeof buf, "pack %s", g->nodes[k->args[0]].name ? g->nodes[k->args[0]].name : "weight");
        return lrc_xstrdup(buf);
    }
    const lrc_group *gr = &s->groups[k->group];
    used += (size_t)snprintf(buf, sizeof buf, "%s ", lrc_group_kind_name(gr->kind));
    for (int j = 0; j < gr->n_nodes && used < sizeof buf; j++)
        used += (size_t)snprintf(buf + used, sizeof buf - used, "%s%s", j ? "+" : "", lrc_op_name(g->nodes[gr->nodes[j]].op));
    const char *loc = g->nodes[gr->anchor].loc;
    if (loc && used < sizeof buf) snprintf(buf + used, sizeof buf - used, " (%s)", loc);
    return lrc_xstrdup(buf);
}

static int build_plan(lrc_compiled *c, lrc_err *err)
{
    const lrc_graph *g = c->g;
    const lrc_schedule *s = &c->sched;
    const lrc_program *p = &c->prog;
    lrc_plan *pl = &c->plan;
    memset(pl, 0, sizeof *pl);
    pl->n_bufs = g->n_nodes + p->n_extra;
    pl->bufs = lrc_xcalloc((size_t)pl->n_bufs, sizeof *pl->bufs);
    pl->arena_bytes = s->arena_bytes;
    for (int id = 0; id < g->n_nodes; id++) {
        const lrc_node *n = &g->nodes[id];
        lrc_plan_buf *b = &pl->bufs[id];
        b->dtype = n->dtype == LRC_I32 ? LRC_I32 : LRC_F32;
        b->shape = n->shape;
        b->bytes = lrc_shape_numel(&n->shape) * 4;
        if (n->op == LRC_OP_INPUT) b->kind = LRC_BUF_INPUT, b->name = lrc_xstrdup(n->name);
        else if (n->op == LRC_OP_PARAM) b->kind = LRC_BUF_PARAM, b->name = lrc_xstrdup(n->name);
        else if (n->op == LRC_OP_STATE) b->kind = LRC_BUF_STATE, b->name = lrc_xstrdup(n->name);
        else if (s->offset[id] >= 0) b->kind = LRC_BUF_ARENA, b->offset = s->offset[id];
    }
    for (int i = 0; i < g->n_outputs; i++) {
        lrc_plan_buf *b = &pl->bufs[s->buffer_of[g->outputs[i]]];
        if (b->kind != LRC_BUF_NONE) {
            lrc_plan_free(pl); /* the buffers' names so far: the caller keeps no plan */
            return lrc_err_set(err, "output '%s' is an input or parameter", g->output_names[i]);
        }
        b->kind = LRC_BUF_OUTPUT;
        b->name = lrc_xstrdup(g->output_names[i]);
        b->shape = g->nodes[g->outputs[i]].shape; /* the output's shape, even through a view */
    }
    for (int i = 0; i < p->n_extra; i++) {
        lrc_plan_buf *b = &pl->bufs[g->n_nodes + i];
        b->kind = LRC_BUF_PERSIST;
        b->bytes = p->extra[i].bytes;
        b->dtype = LRC_F32;
    }
    pl->n_launches = p->n_kernels;
    pl->launches = lrc_xcalloc((size_t)p->n_kernels + 1, sizeof *pl->launches);
    for (int i = 0; i < p->n_kernels; i++) {
        const lrc_kernel_desc *k = &p->kernels[i];
        lrc_plan_launch *l = &pl->launches[i];
        l->symbol = lrc_xstrdup(p->kernels[k->impl].name);
        l->label = launch_label(g, s, k);
        l->n_args = k->n_args;
        l->args = lrc_xmalloc((size_t)k->n_args * sizeof(int) + 1);
        memcpy(l->args, k->args, (size_t)k->n_args * sizeof(int));
        l->n_items = k->n_items;
        l->once = k->once;
        l->steal = k->any_split;
        l->loop_to = k->loop_to;
        if (k->loop_to >= 0) l->symbol[0] = 0; /* no kernel */
        l->flops = k->flops;
        l->bytes = k->bytes;
    }
    /* ids read by a gather (the op table's byte rule says which ops gather;
     * gather and gather_grad index a row's last axis) must index the table:
     * checked before each run */
    for (int id = 0; id < g->n_nodes; id++) {
        const lrc_node *n = &g->nodes[id];
        int ids = -1;
        int64_t hi = 0;
        if (lrc_op_table[n->op].bytes == LRC_BYTES_GATHER) ids = n->in[0], hi = g->nodes[n->in[1]].shape.dim[0];
        else if (n->op == LRC_OP_GATHER) ids = n->in[1], hi = g->nodes[n->in[0]].shape.dim[g->nodes[n->in[0]].shape.ndim - 1];
        else if (n->op == LRC_OP_GATHER_GRAD) ids = n->in[0], hi = n->iattr[0];
        if (ids < 0 || pl->bufs[s->buffer_of[ids]].kind != LRC_BUF_INPUT) continue;
        pl->checks = lrc_xrealloc(pl->checks, (size_t)(pl->n_checks + 1) * sizeof *pl->checks);
        pl->checks[pl->n_checks++] = (lrc_plan_check){s->buffer_of[ids], 0, hi};
    }
    return LRC_OK;
}

int lrc_compile_graph(lrc_graph *g, lrc_tensor_set *consts, lrc_compiled *c, lrc_err *err)
{
    return lrc_compile_graph_to(g, consts, NULL, LRC_WSTORE_F32, c, err);
}

/* The lowering every target shares, up to its renderer: g (taken over)
 * through the pass pipeline under the target's rules, into kernel groups,
 * a memory plan and launch descriptions for its tiling. *t1 is when the
 * passes ended (the renderer's time starts there). */
static int lower(lrc_graph *g, lrc_tensor_set *consts, void (*rules)(lrc_pass_ctx *), lrc_gemm_tiling tiling, lrc_compiled *c,
                 double *t1, lrc_err *err)
{
    c->g = g;
    c->consts = consts;
    lrc_pass_ctx ctx = {.consts = consts, .own_consts = true, .schedule = &c->sched};
    rules(&ctx);
    int rc = lrc_passes_run(&c->g, &ctx, NULL, err);
    c->have_sched = ctx.scheduled;
    if (!rc && !(rc = lrc_program_build(c->g, &c->sched, tiling, &c->prog, err))) c->have_prog = true;
    *t1 = 1e3 * lrc_now_s();
    return rc;
}

/* After the renderer: the runtime plan of the launches, and the times. */
static int finish(lrc_compiled *c, double t0, double t1, lrc_err *err)
{
    int rc = build_plan(c, err);
    c->have_plan = rc == LRC_OK;
    c->passes_ms = t1 - t0;
    c->codegen_ms = 1e3 * lrc_now_s() - t1;
    return rc;
}

int lrc_compile_graph_to(lrc_graph *g, lrc_tensor_set *consts, const char *object_path, lrc_wstore w_store, lrc_compiled *c, lrc_err *err)
{
    memset(c, 0, sizeof *c);
    double t0 = 1e3 * lrc_now_s(), t1 = t0;
    lrc_llvm_target target;
    if (lrc_llvm_target_host(&target, err)) {
        c->g = g; /* taken over: freed with c */
        return LRC_EUSER;
    }
    target.tiling.w_store = w_store;
    int rc = lower(g, consts, lrc_cpu_pass_rules, target.tiling, c, &t1, err);
    if (rc) return rc;
    lrc_llvm_module *mod = NULL;
    /* what the code needs of the CPU, checked when a package is loaded */
    snprintf(c->cpu_features, sizeof c->cpu_features, "avx2,fma%s%s", target.tiling.vec == 16 ? ",avx512f,avx512vl" : "",
             w_store == LRC_WSTORE_Q8 ? ",f16c" : ""); /* q8's pack kernels round scales to f16 */
    snprintf(c->cpu_name, sizeof c->cpu_name, "%s", target.cpu);
    if ((rc = lrc_llvm_generate(c->g, &c->sched, &c->prog, &target, &mod, err))) return rc;
    const char *dump = getenv("LRC_DUMP_IR"); /* a developer's look at the optimised kernels */
    if (dump && !(rc = lrc_llvm_module_optimize(mod, err))) {
        FILE *f = fopen(dump, "w");
        char *text = lrc_llvm_module_print(mod);
        if (f) fputs(text, f), fclose(f);
        free(text);
    }
    lrc_llvm_object obj = {0};
    if (!rc) rc = lrc_llvm_module_compile(mod, &obj, err);
    lrc_llvm_module_free(mod);
    if (!rc) rc = object_path ? lrc_llvm_object_write(&obj, object_path, err) : lrc_llvm_jit_new(&obj, &c->jit, err);
    c->kernel_cache = (int)obj.cache;
    lrc_llvm_object_free(&obj);
    if (rc) return rc;
    if ((rc = finish(c, t0, t1, err))) return rc;
    for (int i = 0; i < c->plan.n_launches && !rc && !object_path; i++)
        if (c->plan.launches[i].loop_to < 0 && !(c->plan.launches[i].fn = lrc_llvm_jit_lookup(c->jit, c->plan.launches[i].symbol, err))) rc = LRC_EUSER;
    c->codegen_ms = 1e3 * lrc_now_s() - t1; /* the symbols' lookup included */
    return rc;
}

void lrc_cpu_pass_rules(lrc_pass_ctx *ctx)
{
    ctx->loss_head = lrc_env_is("LRC_CPU_LOSS_HEAD", "1");
    ctx->loss_pair = true;
    ctx->sum_product = true;
    ctx->reduce_prologue = true;
}

void lrc_cuda_pass_rules(lrc_pass_ctx *ctx)
{
    ctx->pad_multiple = lrc_env_is("LRC_PAD_HIDDEN", "0") ? 0 : LRC_CUDA_PAD_MULTIPLE;
    ctx->reduce_prologue = true;
}

int lrc_compile_graph_cuda(lrc_graph *g, lrc_tensor_set *consts, const char *arch, bool f32, lrc_compiled *c, lrc_err *err)
{
    memset(c, 0, sizeof *c);
    double t0 = 1e3 * lrc_now_s(), t1 = t0;
    snprintf(c->arch, sizeof c->arch, "%s", arch);
    int rc = lower(g, consts, lrc_cuda_pass_rules, lrc_cuda_tiling(), c, &t1, err);
    if (rc) return rc;
    if ((rc = lrc_cuda_render(c->g, &c->sched, &c->prog, f32 ? LRC_CUDA_F32 : LRC_CUDA_BF16, &c->cuda, err))) return rc;
    c->have_cuda = true;
    if ((rc = lrc_nvrtc_compile(c->cuda.source, "kernels.cu", arch, &c->cubin, &c->cubin_size, &c->ptx, err))) return rc;
    c->kernel_cache = (int)lrc_nvrtc_last_cache_state(); /* a later compile (another shape) would change it */
    if ((rc = finish(c, t0, t1, err))) return rc;
    for (int i = 0; i < c->plan.n_launches; i++) { /* a GEMM alone has no kernel of its own */
        free(c->plan.launches[i].symbol);
        c->plan.launches[i].symbol = lrc_xstrdup(c->cuda.table.launches[i].symbol);
    }
    return LRC_OK;
}

void lrc_compiled_free(lrc_compiled *c)
{
    if (c->have_cuda) lrc_cuda_program_free(&c->cuda);
    free(c->cubin);
    free(c->ptx);
    if (c->have_plan) lrc_plan_free(&c->plan);
    if (c->have_prog) lrc_program_free(&c->prog);
    if (c->have_sched) lrc_schedule_free(&c->sched);
    lrc_llvm_jit_free(c->jit);
    lrc_graph_free(c->g);
    memset(c, 0, sizeof *c);
}
