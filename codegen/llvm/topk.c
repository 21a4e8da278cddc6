/* topk.c — torch.topk's order (ir/topk_order.h) as LLVM functions, one
 * per function of the C, statement for statement, so that the cpu target
 * picks the same k of n as the reference and as transformers, ties
 * included. Built once per module with internal linkage; the topk kernel
 * (route.c) calls lrc_topk_order on each row. */
#include "kgen.h"
#include "ir/topk_order.h"

typedef struct fn_saved {
    LLVMValueRef fn;
    LLVMBasicBlockRef entry, block;
} fn_saved;

typedef struct tk {
    em_t *e;
    LLVMValueRef V, IX; /* the function's first two parameters: values, indices */
} tk;

/* ---- control flow and variables ----------------------------------------- */

typedef struct wl {
    LLVMBasicBlockRef head, body, exit;
} wl;

/* while (cond) { ... }: wl_head, then the condition, wl_test, the body, wl_end */
static void wl_head(em_t *e, wl *w)
{
    w->head = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "while");
    w->body = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "do");
    w->exit = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "done");
    LLVMBuildBr(e->b, w->head);
    LLVMPositionBuilderAtEnd(e->b, w->head);
}

static void wl_test(em_t *e, wl *w, LLVMValueRef cond)
{
    LLVMBuildCondBr(e->b, cond, w->body, w->exit);
    LLVMPositionBuilderAtEnd(e->b, w->body);
}

static void wl_end(em_t *e, wl *w)
{
    LLVMBuildBr(e->b, w->head);
    LLVMPositionBuilderAtEnd(e->b, w->exit);
}

typedef struct ie {
    LLVMBasicBlockRef then, els, done;
} ie;

static void ie_begin(em_t *e, ie *c, LLVMValueRef cond)
{
    c->then = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "then");
    c->els = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "else");
    c->done = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "fi");
    LLVMBuildCondBr(e->b, cond, c->then, c->els);
    LLVMPositionBuilderAtEnd(e->b, c->then);
}

static void ie_else(em_t *e, ie *c)
{
    LLVMBuildBr(e->b, c->done);
    LLVMPositionBuilderAtEnd(e->b, c->els);
}

static void ie_end(em_t *e, ie *c)
{
    LLVMBuildBr(e->b, c->done);
    LLVMPositionBuilderAtEnd(e->b, c->done);
}

/* a local variable (a stack slot that SROA promotes) holding init */
static LLVMValueRef var(em_t *e, LLVMTypeRef t, LLVMValueRef init)
{
    LLVMValueRef a = em_alloca(e, t, "var");
    LLVMBuildStore(e->b, init, a);
    return a;
}

#define I64(p) LLVMBuildLoad2(e->b, e->i64, (p), "")
#define SET(p, x) LLVMBuildStore(e->b, (x), (p))
#define ADD(x, y) LLVMBuildAdd(e->b, (x), (y), "")
#define SUB(x, y) LLVMBuildSub(e->b, (x), (y), "")
#define DIV2(x) LLVMBuildSDiv(e->b, (x), em_i64(e, 2), "")
#define CMP(p, x, y) LLVMBuildICmp(e->b, LLVMInt##p, (x), (y), "")
#define C(v) em_i64(e, v)

static LLVMValueRef vget(tk *t, LLVMValueRef i) { return em_load(t->e, t->V, i, 1); }
static void vset(tk *t, LLVMValueRef i, LLVMValueRef x) { em_store(t->e, t->V, i, x, 1); }
static LLVMValueRef iget(tk *t, LLVMValueRef i) { return em_load_i32(t->e, t->IX, i); }
static void iset(tk *t, LLVMValueRef i, LLVMValueRef x)
{
    LLVMBuildStore(t->e->b, x, LLVMBuildGEP2(t->e->b, t->e->i32, t->IX, &i, 1, ""));
}
/* v[dst], ix[dst] = v[src], ix[src] */
static void move(tk *t, LLVMValueRef dst, LLVMValueRef src)
{
    vset(t, dst, vget(t, src));
    iset(t, dst, iget(t, src));
}

/* a goes before b: NaN first, then larger */
static LLVMValueRef before(em_t *e, LLVMValueRef a, LLVMValueRef b)
{
    LLVMValueRef a_nan = LLVMBuildFCmp(e->b, LLVMRealUNO, a, a, ""), b_num = LLVMBuildFCmp(e->b, LLVMRealORD, b, b, "");
    return LLVMBuildOr(e->b, LLVMBuildAnd(e->b, a_nan, b_num, ""), LLVMBuildFCmp(e->b, LLVMRealOGT, a, b, ""), "");
}

/* ---- functions ------------------------------------------------------------ */

/* Starts internal function name(float *v, int *ix, rest...) with the
 * builder in its body; fn_end adds the entry's branch and goes back to
 * where the builder was. */
static void fn_begin(tk *t, fn_saved *s, const char *name, LLVMTypeRef ret, const char *rest)
{
    em_t *e = t->e;
    LLVMTypeRef params[8] = {e->f32p, e->i32p};
    int np = 2;
    for (const char *c = rest; *c; c++) params[np++] = *c == 'l' ? e->i64 : *c == 'f' ? e->f32 : e->i32;
    s->fn = e->fn, s->entry = e->entry, s->block = LLVMGetInsertBlock(e->b);
    LLVMValueRef fn = LLVMAddFunction(e->mod, name, LLVMFunctionType(ret, params, (unsigned)np, 0));
    LLVMSetLinkage(fn, LLVMInternalLinkage);
    e->fn = fn;
    e->entry = LLVMAppendBasicBlockInContext(e->ctx, fn, "entry");
    LLVMPositionBuilderAtEnd(e->b, LLVMAppendBasicBlockInContext(e->ctx, fn, "body"));
    t->V = LLVMGetParam(fn, 0), t->IX = LLVMGetParam(fn, 1);
}

/* Closes the function being built (after its return) and gives it back. */
static LLVMValueRef fn_end(tk *t, fn_saved *s)
{
    em_t *e = t->e;
    LLVMValueRef fn = e->fn;
    LLVMPositionBuilderAtEnd(e->b, e->entry);
    LLVMBuildBr(e->b, LLVMGetNextBasicBlock(e->entry));
    e->fn = s->fn, e->entry = s->entry;
    if (s->block) LLVMPositionBuilderAtEnd(e->b, s->block);
    return fn;
}

/* ret void, then fn_end */
static LLVMValueRef fn_done(tk *t, fn_saved *s)
{
    LLVMBuildRetVoid(t->e->b);
    return fn_end(t, s);
}

static LLVMValueRef P(tk *t, unsigned i) { return LLVMGetParam(t->e->fn, i); }

static LLVMValueRef call(tk *t, LLVMValueRef fn, LLVMValueRef *rest, unsigned n)
{
    LLVMValueRef args[8] = {t->V, t->IX};
    for (unsigned i = 0; i < n; i++) args[2 + i] = rest[i];
    return LLVMBuildCall2(t->e->b, LLVMGlobalGetValueType(fn), fn, args, n + 2, "");
}

static LLVMValueRef build_swap(tk *t)
{
    em_t *e = t->e;
    fn_saved s;
    fn_begin(t, &s, "lrc_topk_swap", e->voidt, "ll");
    LLVMValueRef a = P(t, 2), b = P(t, 3);
    LLVMValueRef va = vget(t, a), ia = iget(t, a);
    move(t, a, b);
    vset(t, b, va);
    iset(t, b, ia);
    return fn_done(t, &s);
}

/* (v, ix, f, hole, top, val, vi) */
static LLVMValueRef build_push_heap(tk *t)
{
    em_t *e = t->e;
    fn_saved s;
    fn_begin(t, &s, "lrc_topk_push_heap", e->voidt, "lllfi");
    LLVMValueRef f = P(t, 2), top = P(t, 4), val = P(t, 5), vi = P(t, 6);
    LLVMValueRef hole = var(e, e->i64, P(t, 3)), parent = var(e, e->i64, DIV2(SUB(P(t, 3), C(1))));
    wl w;
    wl_head(e, &w);
    /* both sides of the C's && evaluated: parent = (hole - 1) / 2 is never negative, so the load stays in the row */
    LLVMValueRef go = CMP(SGT, I64(hole), top);
    wl_test(e, &w, LLVMBuildAnd(e->b, go, before(e, vget(t, ADD(f, I64(parent))), val), ""));
    move(t, ADD(f, I64(hole)), ADD(f, I64(parent)));
    SET(hole, I64(parent));
    SET(parent, DIV2(SUB(I64(hole), C(1))));
    wl_end(e, &w);
    vset(t, ADD(f, I64(hole)), val);
    iset(t, ADD(f, I64(hole)), vi);
    return fn_done(t, &s);
}

/* (v, ix, f, hole, len, val, vi) */
static LLVMValueRef build_adjust_heap(tk *t, LLVMValueRef push)
{
    em_t *e = t->e;
    fn_saved s;
    fn_begin(t, &s, "lrc_topk_adjust_heap", e->voidt, "lllfi");
    LLVMValueRef f = P(t, 2), len = P(t, 4), val = P(t, 5), vi = P(t, 6), top = P(t, 3);
    LLVMValueRef hole = var(e, e->i64, top), second = var(e, e->i64, top);
    wl w;
    wl_head(e, &w);
    wl_test(e, &w, CMP(SLT, I64(second), DIV2(SUB(len, C(1)))));
    SET(second, LLVMBuildMul(e->b, C(2), ADD(I64(second), C(1)), ""));
    em_if c;
    em_if_begin(e, &c, before(e, vget(t, ADD(f, I64(second))), vget(t, ADD(f, SUB(I64(second), C(1))))));
    SET(second, SUB(I64(second), C(1)));
    em_if_end(e, &c);
    move(t, ADD(f, I64(hole)), ADD(f, I64(second)));
    SET(hole, I64(second));
    wl_end(e, &w);
    LLVMValueRef even = CMP(EQ, LLVMBuildAnd(e->b, len, C(1), ""), C(0));
    em_if_begin(e, &c, LLVMBuildAnd(e->b, even, CMP(EQ, I64(second), DIV2(SUB(len, C(2)))), ""));
    SET(second, LLVMBuildMul(e->b, C(2), ADD(I64(second), C(1)), ""));
    move(t, ADD(f, I64(hole)), ADD(f, SUB(I64(second), C(1))));
    SET(hole, SUB(I64(second), C(1)));
    em_if_end(e, &c);
    call(t, push, (LLVMValueRef[]){f, I64(hole), top, val, vi}, 5);
    return fn_done(t, &s);
}

/* (v, ix, f, len, result) */
static LLVMValueRef build_pop_heap(tk *t, LLVMValueRef adjust)
{
    em_t *e = t->e;
    fn_saved s;
    fn_begin(t, &s, "lrc_topk_pop_heap", e->voidt, "lll");
    LLVMValueRef f = P(t, 2), len = P(t, 3), result = P(t, 4);
    LLVMValueRef val = vget(t, result), vi = iget(t, result);
    move(t, result, f);
    call(t, adjust, (LLVMValueRef[]){f, C(0), len, val, vi}, 5);
    return fn_done(t, &s);
}

/* (v, ix, f, mid, last) */
static LLVMValueRef build_heap_select(tk *t, LLVMValueRef adjust, LLVMValueRef pop)
{
    em_t *e = t->e;
    fn_saved s;
    fn_begin(t, &s, "lrc_topk_heap_select", e->voidt, "lll");
    LLVMValueRef f = P(t, 2), mid = P(t, 3), last = P(t, 4), len = SUB(mid, f);
    em_if c;
    em_if_begin(e, &c, CMP(SGE, len, C(2)));
    LLVMValueRef parent = var(e, e->i64, DIV2(SUB(len, C(2))));
    wl w;
    wl_head(e, &w);
    wl_test(e, &w, CMP(SGE, I64(parent), C(0)));
    LLVMValueRef at = ADD(f, I64(parent));
    call(t, adjust, (LLVMValueRef[]){f, I64(parent), len, vget(t, at), iget(t, at)}, 5);
    SET(parent, SUB(I64(parent), C(1)));
    wl_end(e, &w);
    em_if_end(e, &c);
    em_loop l;
    LLVMValueRef i = em_for_begin(e, &l, mid, last);
    em_if_begin(e, &c, before(e, vget(t, i), vget(t, f)));
    call(t, pop, (LLVMValueRef[]){f, len, i}, 3);
    em_if_end(e, &c);
    em_for_end(e, &l, C(1));
    return fn_done(t, &s);
}

/* (v, ix, f, last) */
static LLVMValueRef build_insertion_sort(tk *t)
{
    em_t *e = t->e;
    fn_saved s;
    fn_begin(t, &s, "lrc_topk_insertion_sort", e->voidt, "ll");
    LLVMValueRef f = P(t, 2), last = P(t, 3);
    em_loop l;
    LLVMValueRef i = em_for_begin(e, &l, ADD(f, C(1)), last);
    LLVMValueRef val = vget(t, i), vi = iget(t, i), j = var(e, e->i64, i);
    ie c;
    ie_begin(e, &c, before(e, val, vget(t, f)));
    wl w;
    wl_head(e, &w);
    wl_test(e, &w, CMP(SGT, I64(j), f));
    move(t, I64(j), SUB(I64(j), C(1)));
    SET(j, SUB(I64(j), C(1)));
    wl_end(e, &w);
    ie_else(e, &c);
    wl_head(e, &w);
    wl_test(e, &w, before(e, val, vget(t, SUB(I64(j), C(1)))));
    move(t, I64(j), SUB(I64(j), C(1)));
    SET(j, SUB(I64(j), C(1)));
    wl_end(e, &w);
    ie_end(e, &c);
    vset(t, I64(j), val);
    iset(t, I64(j), vi);
    em_for_end(e, &l, C(1));
    return fn_done(t, &s);
}

/* (v, ix, r, a, b, c): the median of a, b, c swapped to r */
static LLVMValueRef build_median(tk *t, LLVMValueRef swap)
{
    em_t *e = t->e;
    fn_saved s;
    fn_begin(t, &s, "lrc_topk_median_to_first", e->voidt, "llll");
    LLVMValueRef r = P(t, 2), a = P(t, 3), b = P(t, 4), c = P(t, 5);
    LLVMValueRef va = vget(t, a), vb = vget(t, b), vc = vget(t, c);
    LLVMValueRef ab = before(e, va, vb), bc = before(e, vb, vc), ac = before(e, va, vc);
    LLVMValueRef sel = LLVMBuildSelect(e->b, ab, LLVMBuildSelect(e->b, bc, b, LLVMBuildSelect(e->b, ac, c, a, ""), ""),
                                       LLVMBuildSelect(e->b, ac, a, LLVMBuildSelect(e->b, bc, c, b, ""), ""), "");
    call(t, swap, (LLVMValueRef[]){r, sel}, 2);
    return fn_done(t, &s);
}

/* (v, ix, f, last, pivot) -> the cut */
static LLVMValueRef build_partition(tk *t, LLVMValueRef swap)
{
    em_t *e = t->e;
    fn_saved s;
    fn_begin(t, &s, "lrc_topk_partition", e->i64, "lll");
    LLVMValueRef f = var(e, e->i64, P(t, 2)), last = var(e, e->i64, P(t, 3)), pivot = P(t, 4);
    LLVMBasicBlockRef loop = LLVMAppendBasicBlockInContext(e->ctx, e->fn, "partition");
    LLVMBuildBr(e->b, loop);
    LLVMPositionBuilderAtEnd(e->b, loop);
    wl w;
    wl_head(e, &w);
    wl_test(e, &w, before(e, vget(t, I64(f)), vget(t, pivot)));
    SET(f, ADD(I64(f), C(1)));
    wl_end(e, &w);
    SET(last, SUB(I64(last), C(1)));
    wl_head(e, &w);
    wl_test(e, &w, before(e, vget(t, pivot), vget(t, I64(last))));
    SET(last, SUB(I64(last), C(1)));
    wl_end(e, &w);
    em_if c;
    em_if_begin(e, &c, CMP(SGE, I64(f), I64(last)));
    LLVMBuildRet(e->b, I64(f));
    LLVMPositionBuilderAtEnd(e->b, LLVMAppendBasicBlockInContext(e->ctx, e->fn, "unreachable"));
    em_if_end(e, &c);
    call(t, swap, (LLVMValueRef[]){I64(f), I64(last)}, 2);
    SET(f, ADD(I64(f), C(1)));
    LLVMBuildBr(e->b, loop);
    LLVMPositionBuilderAtEnd(e->b, LLVMAppendBasicBlockInContext(e->ctx, e->fn, "never"));
    LLVMBuildRet(e->b, I64(f));
    return fn_end(t, &s);
}

/* (v, ix, n, k): lrc_topk_order */
static LLVMValueRef build_order(tk *t, LLVMValueRef swap, LLVMValueRef heap_select, LLVMValueRef pop, LLVMValueRef insertion,
                                LLVMValueRef median, LLVMValueRef partition)
{
    em_t *e = t->e;
    fn_saved s;
    fn_begin(t, &s, "lrc_topk_order", e->voidt, "ll");
    LLVMValueRef n = P(t, 2), k = P(t, 3);
    ie c;
    ie_begin(e, &c, CMP(SLE, LLVMBuildMul(e->b, k, C(64), ""), n));
    call(t, heap_select, (LLVMValueRef[]){C(0), k, n}, 3);
    LLVMValueRef last = var(e, e->i64, k);
    wl w;
    wl_head(e, &w);
    wl_test(e, &w, CMP(SGT, I64(last), C(1)));
    SET(last, SUB(I64(last), C(1)));
    call(t, pop, (LLVMValueRef[]){C(0), I64(last), I64(last)}, 3);
    wl_end(e, &w);
    ie_else(e, &c);
    LLVMValueRef f = var(e, e->i64, C(0)), l = var(e, e->i64, n), nth = SUB(k, C(1)), depth = var(e, e->i64, C(0));
    LLVMValueRef m = var(e, e->i64, n);
    wl_head(e, &w);
    wl_test(e, &w, CMP(SGT, I64(m), C(1)));
    SET(depth, ADD(I64(depth), C(2)));
    SET(m, LLVMBuildAShr(e->b, I64(m), C(1), ""));
    wl_end(e, &w);
    wl_head(e, &w);
    wl_test(e, &w, CMP(SGT, SUB(I64(l), I64(f)), C(3)));
    ie z;
    ie_begin(e, &z, CMP(EQ, I64(depth), C(0)));
    call(t, heap_select, (LLVMValueRef[]){I64(f), ADD(nth, C(1)), I64(l)}, 3);
    call(t, swap, (LLVMValueRef[]){I64(f), nth}, 2);
    SET(f, C(0));
    SET(l, C(0));
    ie_else(e, &z);
    SET(depth, SUB(I64(depth), C(1)));
    LLVMValueRef f0 = I64(f), l0 = I64(l);
    call(t, median, (LLVMValueRef[]){f0, ADD(f0, C(1)), ADD(f0, DIV2(SUB(l0, f0))), SUB(l0, C(1))}, 4);
    LLVMValueRef cut = call(t, partition, (LLVMValueRef[]){ADD(f0, C(1)), l0, f0}, 3);
    LLVMValueRef low = CMP(SLE, cut, nth);
    SET(f, LLVMBuildSelect(e->b, low, cut, f0, ""));
    SET(l, LLVMBuildSelect(e->b, low, l0, cut, ""));
    ie_end(e, &z);
    wl_end(e, &w);
    call(t, insertion, (LLVMValueRef[]){I64(f), I64(l)}, 2);
    call(t, insertion, (LLVMValueRef[]){C(0), nth}, 2);
    ie_end(e, &c);
    return fn_done(t, &s);
}

/* lrc_topk_order(float *v, int *ix, i64 n, i64 k) in e's module, built on first use */
LLVMValueRef kg_topk_order_fn(em_t *e)
{
    LLVMValueRef fn = LLVMGetNamedFunction(e->mod, "lrc_topk_order");
    if (fn) return fn;
    tk t = {.e = e};
    LLVMValueRef swap = build_swap(&t), push = build_push_heap(&t);
    LLVMValueRef adjust = build_adjust_heap(&t, push), pop = build_pop_heap(&t, adjust);
    LLVMValueRef heap_select = build_heap_select(&t, adjust, pop), insertion = build_insertion_sort(&t);
    LLVMValueRef median = build_median(&t, swap), partition = build_partition(&t, swap);
    return build_order(&t, swap, heap_select, pop, insertion, median, partition);
}
