/* lua_along.c — the `lrc` functions of the ops along one axis whose Lua
 * form is not the op table's generic one: sum, mean, amax and logsumexp
 * over an axis or every element, cumsum with the last axis by default;
 * scan (a linear recurrence) with an optional init tensor;
 * softmax over any axis; concat of a
 * list of any length and stack. They replace the generic builders in the
 * `lrc` table (lrc_lua_open_along). Every error names the user's line. */
#include "lrc_lua.h"

#include <lauxlib.h>
#include <lua.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int fail(lua_State *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(lua_State *L, const char *fmt, ...)
{
    char loc[256], msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    lua_pushfstring(L, "%s: %s", lrc_lua_where(L, loc, sizeof loc), msg);
    return lua_error(L);
}

/* Adds p (its loc set here) and returns the new node's id, or raises. */
static int add(lua_State *L, lrc_node *p)
{
    char loc[256];
    lrc_err err;
    p->loc = (char *)lrc_lua_where(L, loc, sizeof loc);
    int id = lrc_graph_add(lrc_lua_graph(L), p, &err);
    if (id < 0) {
        lua_pushstring(L, err.msg);
        lua_error(L);
    }
    return id;
}

static int tensor_at(lua_State *L, int idx, const char *fn, const char *what)
{
    int id = lrc_lua_tensor_id(L, idx);
    if (id < 0) fail(L, "%s: %s must be a tensor, got %s", fn, what, luaL_typename(L, idx));
    if (id >= lrc_lua_graph(L)->n_nodes) fail(L, "%s: %s is a tensor of another model", fn, what);
    return id;
}

/* The options table at idx: each key one of `names` (integers or booleans)
 * into val, in names' order; absent ones keep their value. */
static void options(lua_State *L, int idx, const char *fn, const char *const *names, int n, int64_t *val)
{
    if (lua_isnoneornil(L, idx)) return;
    if (!lua_istable(L, idx)) fail(L, "%s: the options must be a table, got %s", fn, luaL_typename(L, idx));
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        int k = 0;
        while (k < n && strcmp(key, names[k])) k++;
        if (k == n) fail(L, "%s: unknown option '%s'", fn, key);
        int ok = 1;
        if (lua_isboolean(L, -1)) val[k] = lua_toboolean(L, -1);
        else val[k] = (int64_t)lua_tointegerx(L, -1, &ok);
        if (!ok) fail(L, "%s: option %s must be an integer or a boolean, got %s", fn, key, luaL_typename(L, -1));
        lua_pop(L, 1);
    }
}

/* x viewed as the shape of nd dims, each 1 or, with numel > 0, the one of
 * all elements at axis `at` */
static int view_flat(lua_State *L, int x, int nd, int at)
{
    const lrc_shape *s = &lrc_lua_graph(L)->nodes[x].shape;
    lrc_node p = {.op = LRC_OP_RESHAPE, .n_in = 1, .in = {x}, .n_iattr = nd};
    for (int d = 0; d < nd; d++) p.iattr[d] = d == at ? lrc_shape_numel(s) : 1;
    return add(L, &p);
}

/* lrc.sum(x, {axis = , keepdim = false}), and mean, amax, logsumexp: over
 * `axis`, or without one over every element as torch's x.sum() (a view of
 * x as one axis, so amax's ties split evenly over all of them);
 * lrc.cumsum(x, {axis = -1, reverse = false}) — upvalue 1 is the op */
static int l_along(lua_State *L)
{
    lrc_op op = (lrc_op)lua_tointeger(L, lua_upvalueindex(1));
    const char *fn = lrc_op_name(op);
    static const char *const reduce_opts[] = {"axis", "keepdim"}, *const cumsum_opts[] = {"axis", "reverse"};
    bool cumsum = op == LRC_OP_CUMSUM;
    lrc_node p = {.op = op, .n_in = 1, .iattr = {cumsum ? -1 : INT64_MIN, 0}};
    p.in[0] = tensor_at(L, 1, fn, "argument 1");
    options(L, 2, fn, cumsum ? cumsum_opts : reduce_opts, 2, p.iattr);
    if (p.iattr[0] != INT64_MIN) {
        lrc_lua_push_tensor(L, add(L, &p));
        return 1;
    }
    int nd = lrc_lua_graph(L)->nodes[p.in[0]].shape.ndim, keepdim = (int)p.iattr[1];
    p.in[0] = view_flat(L, p.in[0], 1, 0);
    p.iattr[0] = 0, p.iattr[1] = 0;
    int y = add(L, &p);
    lrc_lua_push_tensor(L, keepdim && nd > 0 ? view_flat(L, y, nd, -1) : y);
    return 1;
}

/* lrc.softmax(x, {axis = -1}): the last axis is the softmax kernel; any
 * other exp(x - logsumexp(x, axis, keepdim)) */
static int l_softmax(lua_State *L)
{
    static const char *const opts[] = {"axis"};
    int64_t axis = -1;
    int x = tensor_at(L, 1, "softmax", "argument 1");
    options(L, 2, "softmax", opts, 1, &axis);
    const lrc_shape *s = &lrc_lua_graph(L)->nodes[x].shape;
    int nd = s->ndim;
    char b[96];
    if (axis < -nd || axis >= nd)
        fail(L, "softmax: axis %lld is not an axis of %s (%d to %d)", (long long)axis, lrc_shape_str(s, b, sizeof b), -nd, nd - 1);
    if (axis == -1 || axis == nd - 1) {
        lrc_node p = {.op = LRC_OP_SOFTMAX, .n_in = 1, .in = {x}};
        lrc_lua_push_tensor(L, add(L, &p));
        return 1;
    }
    lrc_node lse = {.op = LRC_OP_LOGSUMEXP, .n_in = 1, .in = {x}, .iattr = {axis, 1}};
    lrc_node neg = {.op = LRC_OP_SCALE, .n_in = 1, .in = {add(L, &lse)}, .fattr = {-1.0}};
    lrc_node sub = {.op = LRC_OP_ADD, .n_in = 2, .in = {x, add(L, &neg)}};
    lrc_node ex = {.op = LRC_OP_EXP, .n_in = 1, .in = {add(L, &sub)}};
    lrc_lua_push_tensor(L, add(L, &ex));
    return 1;
}

/* ids[0..n) joined along axis: LRC_MAX_INPUTS at a time, each join the
 * first input of the next */
static int join(lua_State *L, const int *ids, int n, int64_t axis)
{
    int acc = -1;
    for (int at = 0; at < n;) {
        lrc_node p = {.op = LRC_OP_CONCAT, .iattr = {axis}};
        if (acc >= 0) p.in[p.n_in++] = acc;
        while (p.n_in < LRC_MAX_INPUTS && at < n) p.in[p.n_in++] = ids[at++];
        acc = add(L, &p);
    }
    return acc;
}

/* The tensors of the list at idx (1 to 64 of them) */
static int list(lua_State *L, int idx, const char *fn, int *ids)
{
    if (!lua_istable(L, idx)) fail(L, "%s: argument 1 must be a list of tensors, got %s", fn, luaL_typename(L, idx));
    int n = (int)lua_rawlen(L, idx);
    if (n < 1 || n > 64) fail(L, "%s: takes 1 to 64 tensors, got %d", fn, n);
    for (int i = 0; i < n; i++) {
        char what[32];
        snprintf(what, sizeof what, "entry %d of the list", i + 1);
        lua_rawgeti(L, idx, i + 1);
        ids[i] = tensor_at(L, -1, fn, what);
        lua_pop(L, 1);
    }
    return n;
}

/* lrc.concat({a, b, ...}, {axis = 0}) */
static int l_concat(lua_State *L)
{
    static const char *const opts[] = {"axis"};
    int ids[64], n = list(L, 1, "concat", ids);
    int64_t axis = 0;
    options(L, 2, "concat", opts, 1, &axis);
    lrc_lua_push_tensor(L, join(L, ids, n, axis));
    return 1;
}

/* lrc.stack({a, b, ...}, {axis = 0}): each given a new axis of 1, then joined there */
static int l_stack(lua_State *L)
{
    static const char *const opts[] = {"axis"};
    int ids[64], n = list(L, 1, "stack", ids);
    int64_t axis = 0;
    options(L, 2, "stack", opts, 1, &axis);
    const lrc_graph *g = lrc_lua_graph(L);
    lrc_shape s = g->nodes[ids[0]].shape;
    if (axis < -(s.ndim + 1) || axis > s.ndim)
        fail(L, "stack: axis %lld is not an axis of the stacked shape (%d to %d)", (long long)axis, -(s.ndim + 1), s.ndim);
    if (s.ndim + 1 > LRC_MAX_DIMS) fail(L, "stack: the tensors have %d axes already, the most a tensor has", s.ndim);
    if (axis < 0) axis += s.ndim + 1;
    for (int i = 0; i < n; i++) {
        const lrc_shape *si = &lrc_lua_graph(L)->nodes[ids[i]].shape;
        if (!lrc_shape_eq(si, &s)) {
            char b1[96], b2[96];
            fail(L, "stack: entry %d %s differs from entry 1 %s (stacked tensors have one shape)", i + 1, lrc_shape_str(si, b1, sizeof b1),
                 lrc_shape_str(&s, b2, sizeof b2));
        }
        lrc_node p = {.op = LRC_OP_RESHAPE, .n_in = 1, .in = {ids[i]}, .n_iattr = s.ndim + 1};
        for (int d = 0, j = 0; d <= s.ndim; d++) p.iattr[d] = d == axis ? 1 : s.dim[j++];
        ids[i] = add(L, &p);
    }
    lrc_lua_push_tensor(L, join(L, ids, n, axis));
    return 1;
}

/* lrc.scan(a, b, {axis = 1, init = nil, reverse = false}): the linear
 * recurrence h_t = a_t h_{t-1} + b_t along axis (1: the sequence of
 * [B, T, ...]), h_{-1} = init (a's shape without the axis) or zeros */
static int l_scan(lua_State *L)
{
    lrc_node p = {.op = LRC_OP_SCAN, .n_in = 2, .iattr = {1, 0}};
    p.in[0] = tensor_at(L, 1, "scan", "a");
    p.in[1] = tensor_at(L, 2, "scan", "b");
    if (lua_istable(L, 3)) { /* init is a tensor: taken out before the integer options */
        lua_getfield(L, 3, "init");
        if (!lua_isnil(L, -1)) p.in[p.n_in++] = tensor_at(L, lua_gettop(L), "scan", "option init");
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushnil(L);
        while (lua_next(L, 3)) {
            bool init = lua_type(L, -2) == LUA_TSTRING && !strcmp(lua_tostring(L, -2), "init");
            if (init) lua_pop(L, 1);
            else {
                lua_pushvalue(L, -2);
                lua_insert(L, -2);
                lua_settable(L, -4);
            }
        }
        lua_replace(L, 3);
    }
    static const char *const opts[] = {"axis", "reverse"};
    options(L, 3, "scan", opts, 2, p.iattr);
    lrc_lua_push_tensor(L, add(L, &p));
    return 1;
}

void lrc_lua_open_along(lua_State *L)
{
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_getfield(L, -1, "lrc");
    static const lrc_op ops[] = {LRC_OP_SUM, LRC_OP_MEAN, LRC_OP_AMAX, LRC_OP_LOGSUMEXP, LRC_OP_CUMSUM};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        lua_pushinteger(L, ops[i]);
        lua_pushcclosure(L, l_along, 1);
        lua_setfield(L, -2, lrc_op_name(ops[i]));
    }
    static const luaL_Reg fns[] = {{"softmax", l_softmax}, {"concat", l_concat}, {"stack", l_stack}, {"scan", l_scan}, {NULL, NULL}};
    luaL_setfuncs(L, fns, 0);
    lua_pop(L, 2);
}
