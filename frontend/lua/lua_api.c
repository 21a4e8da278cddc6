/* lua_api.c — the `lrc` Lua module: tensor handles and one builder function
 * per op, generated from the op table, that add nodes to the graph being
 * built. Every error names the line of the user's model file. */
#include "lrc_lua.h"
#include "ir/lrc_ew.h"

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <string.h>

#define TENSOR_MT "lrc.tensor"
#define GRAPH_KEY "lrc.graph"

typedef struct {
    int id;
} ltensor;

/* "models/llama.lua:42" for the innermost frame of a user file (a chunk
 * loaded from a file, '@'), skipping lrc's own embedded library ('='). */
const char *lrc_lua_where(lua_State *L, char *buf, size_t n)
{
    lua_Debug ar;
    for (int level = 0; lua_getstack(L, level, &ar); level++) {
        lua_getinfo(L, "Sl", &ar);
        if (ar.source[0] == '@' && ar.currentline > 0) {
            snprintf(buf, n, "%s:%d", ar.short_src, ar.currentline);
            return buf;
        }
    }
    snprintf(buf, n, "?");
    return buf;
}

static int raise_at(lua_State *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int raise_at(lua_State *L, const char *fmt, ...)
{
    char loc[256], msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    lua_pushfstring(L, "%s: %s", lrc_lua_where(L, loc, sizeof loc), msg);
    return lua_error(L);
}

static lrc_graph *graph_of(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, GRAPH_KEY);
    lrc_graph *g = lua_touserdata(L, -1);
    lua_pop(L, 1);
    if (!g) raise_at(L, "tensors can only be made while a model is being built (inside build)");
    return g;
}

lrc_graph *lrc_lua_graph(lua_State *L) { return graph_of(L); }

void lrc_lua_set_graph(lua_State *L, lrc_graph *g)
{
    if (g) lua_pushlightuserdata(L, g);
    else lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, GRAPH_KEY);
}

void lrc_lua_push_tensor(lua_State *L, int id)
{
    ltensor *t = lua_newuserdatauv(L, sizeof *t, 0);
    t->id = id;
    luaL_setmetatable(L, TENSOR_MT);
}

int lrc_lua_tensor_id(lua_State *L, int idx)
{
    ltensor *t = luaL_testudata(L, idx, TENSOR_MT);
    return t ? t->id : -1;
}

static int check_tensor(lua_State *L, int idx, const char *fn, int argno)
{
    int id = lrc_lua_tensor_id(L, idx);
    if (id < 0) raise_at(L, "%s: argument %d must be a tensor, got %s", fn, argno, luaL_typename(L, idx));
    if (id >= graph_of(L)->n_nodes) raise_at(L, "%s: argument %d is a tensor of another model", fn, argno);
    return id;
}

/* An integer from a Lua value: integers, or floats with an exact integer value. */
static bool to_int(lua_State *L, int idx, int64_t *out)
{
    int ok = 0;
    lua_Integer v = lua_tointegerx(L, idx, &ok);
    if (!ok) return false;
    *out = (int64_t)v;
    return true;
}

static void read_shape(lua_State *L, int idx, const char *fn, lrc_shape *s)
{
    if (!lua_istable(L, idx)) raise_at(L, "%s: the shape must be a list of sizes, got %s", fn, luaL_typename(L, idx));
    int n = (int)lua_rawlen(L, idx);
    if (n > LRC_MAX_DIMS) raise_at(L, "%s: %d axes, at most %d are supported", fn, n, LRC_MAX_DIMS);
    s->ndim = n;
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, idx, i + 1);
        if (!to_int(L, -1, &s->dim[i]))
            raise_at(L, "%s: size %d of the shape is not an integer (%s)", fn, i + 1, luaL_tolstring(L, -1, NULL));
        lua_pop(L, 1);
    }
}

static const char *init_kinds[LRC_INIT_COUNT] = {"zeros", "ones", "const", "normal", "xavier_normal", "identity"};
static const char *init_field[LRC_INIT_COUNT] = {NULL, NULL, "value", "std", "gain", NULL};

/* "ones" | "zeros" | "identity" | {"normal", std=} | {"xavier_normal", gain=} | {"const", value=} */
static lrc_init read_init(lua_State *L, int idx, const char *name)
{
    lrc_init init = {LRC_INIT_ZEROS, 0};
    const char *kind = NULL;
    if (lua_type(L, idx) == LUA_TSTRING) kind = lua_tostring(L, idx);
    else if (lua_istable(L, idx)) {
        lua_rawgeti(L, idx, 1);
        kind = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    int k = 0;
    while (kind && k < LRC_INIT_COUNT && strcmp(kind, init_kinds[k])) k++;
    if (!kind || k == LRC_INIT_COUNT)
        raise_at(L, "parameter '%s': init must be \"zeros\", \"ones\", \"identity\", {\"const\", value=}, "
                 "{\"normal\", std=} or {\"xavier_normal\", gain=}", name);
    init.kind = (lrc_init_kind)k;
    if (init_field[k]) {
        if (!lua_istable(L, idx)) raise_at(L, "parameter '%s': init %s needs {\"%s\", %s=...}", name, kind, kind, init_field[k]);
        lua_getfield(L, idx, init_field[k]);
        int ok = 0;
        init.value = lua_tonumberx(L, -1, &ok);
        lua_pop(L, 1);
        if (!ok || !isfinite(init.value)) raise_at(L, "parameter '%s': init %s needs a number %s", name, kind, init_field[k]);
        if (k != LRC_INIT_CONST && init.value < 0) raise_at(L, "parameter '%s': %s must be >= 0", name, init_field[k]);
    }
    return init;
}

/* lrc.param(name, shape, init [, group]) */
static int l_param(lua_State *L)
{
    lrc_graph *g = graph_of(L);
    const char *name = luaL_checkstring(L, 1);
    lrc_shape s;
    read_shape(L, 2, "param", &s);
    lrc_init init = read_init(L, 3, name);
    const char *group = luaL_optstring(L, 4, NULL);
    char loc[256];
    lrc_err err;
    int id = lrc_graph_add_param(g, name, &s, init, group, lrc_lua_where(L, loc, sizeof loc), &err);
    if (id < 0) {
        lua_pushstring(L, err.msg);
        return lua_error(L);
    }
    lrc_lua_push_tensor(L, id);
    return 1;
}

/* lrc.get_param(name): the parameter an earlier lrc.param made (a model's
 * to_hf reads the parameters its build made). */
static int l_get_param(lua_State *L)
{
    lrc_graph *g = graph_of(L);
    const char *name = luaL_checkstring(L, 1);
    int id = lrc_graph_find(g, LRC_OP_PARAM, name);
    if (id < 0) raise_at(L, "no parameter '%s' in this model", name);
    lrc_lua_push_tensor(L, id);
    return 1;
}

/* The defaults lrc.input declared, by input name: a number each (what
 * fills the input where the data gives none). */
#define INPUT_DEFAULTS_KEY "lrc.input_defaults"

/* {default = v} at idx for input `name` of dtype t: v into *value, true; an
 * absent table false. Unknown keys and a default that is no number (an
 * integer for an i32 input) are errors at the user's line. */
static bool read_input_options(lua_State *L, int idx, const char *name, lrc_dtype t, double *value)
{
    if (lua_isnoneornil(L, idx)) return false;
    if (!lua_istable(L, idx)) raise_at(L, "input '%s': the options must be a table {default = v}, got %s", name, luaL_typename(L, idx));
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING || strcmp(lua_tostring(L, -1), "default"))
            raise_at(L, "input '%s': unknown option '%s' (options: default)", name, luaL_tolstring(L, -1, NULL));
    }
    lua_getfield(L, idx, "default");
    int ok = 0;
    *value = lua_tonumberx(L, -1, &ok);
    bool given = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (!given) return false;
    if (!ok || !isfinite(*value)) raise_at(L, "input '%s': default must be a finite number", name);
    if (t == LRC_I32 && (*value != floor(*value) || fabs(*value) > 2147483647.0))
        raise_at(L, "input '%s': default %g of an i32 input must be a 32-bit integer", name, *value);
    return true;
}

/* lrc.input(name, shape [, dtype [, {default = v}]]) */
static int l_input(lua_State *L)
{
    lrc_graph *g = graph_of(L);
    const char *name = luaL_checkstring(L, 1);
    lrc_shape s;
    read_shape(L, 2, "input", &s);
    lrc_dtype t = LRC_F32;
    if (!lua_isnoneornil(L, 3) && (lrc_dtype_parse(luaL_checkstring(L, 3), &t) || t == LRC_I8 || t == LRC_U8)) /* file storage only */
        raise_at(L, "input '%s': unknown dtype '%s' (f32, bf16, f16, i32)", name, lua_tostring(L, 3));
    double value = 0;
    bool has_default = read_input_options(L, 4, name, t, &value);
    char loc[256];
    lrc_err err;
    int id = lrc_graph_add_input(g, name, t, &s, lrc_lua_where(L, loc, sizeof loc), &err);
    if (id < 0) {
        lua_pushstring(L, err.msg);
        return lua_error(L);
    }
    /* set or cleared: a build declares its inputs anew */
    luaL_getsubtable(L, LUA_REGISTRYINDEX, INPUT_DEFAULTS_KEY);
    if (has_default) lua_pushnumber(L, value);
    else lua_pushnil(L);
    lua_setfield(L, -2, name);
    lua_pop(L, 1);
    lrc_lua_push_tensor(L, id);
    return 1;
}

bool lrc_lua_input_default(lua_State *L, const char *name, double *value)
{
    int top = lua_gettop(L);
    bool found = lua_getfield(L, LUA_REGISTRYINDEX, INPUT_DEFAULTS_KEY) == LUA_TTABLE && lua_getfield(L, -1, name) == LUA_TNUMBER;
    if (found) *value = (double)lua_tonumber(L, -1);
    lua_settop(L, top);
    return found;
}

/* Reads attribute table at idx into proto, by the names in the op table. */
static void read_attrs(lua_State *L, int idx, const lrc_op_info *info, lrc_node *proto)
{
    if (info->ilist) { /* the list itself, e.g. lrc.reshape(x, {B, T, d}) */
        if (!lua_istable(L, idx)) raise_at(L, "%s: expects a list %s", info->name, info->ilist);
        int n = (int)lua_rawlen(L, idx);
        if (n > LRC_MAX_IATTR) raise_at(L, "%s: %s has more than %d entries", info->name, info->ilist, LRC_MAX_IATTR);
        proto->n_iattr = n;
        for (int i = 0; i < n; i++) {
            lua_rawgeti(L, idx, i + 1);
            if (!to_int(L, -1, &proto->iattr[i]))
                raise_at(L, "%s: entry %d of %s is not an integer", info->name, i + 1, info->ilist);
            lua_pop(L, 1);
        }
        return;
    }
    if (!lua_istable(L, idx)) raise_at(L, "%s: attributes must be a table, got %s", info->name, luaL_typename(L, idx));
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "?";
        bool found = false;
        for (int a = 0; a < LRC_MAX_IATTR && info->iattr[a] && !found; a++)
            if (!strcmp(key, info->iattr[a])) {
                found = true;
                if (lua_isboolean(L, -1)) proto->iattr[a] = lua_toboolean(L, -1);
                else if (!to_int(L, -1, &proto->iattr[a]))
                    raise_at(L, "%s: attribute %s must be an integer", info->name, key);
            }
        for (int a = 0; a < LRC_MAX_FATTR && info->fattr[a] && !found; a++)
            if (!strcmp(key, info->fattr[a])) {
                found = true;
                int ok = 0;
                proto->fattr[a] = lua_tonumberx(L, -1, &ok);
                if (!ok || !isfinite(proto->fattr[a]))
                    raise_at(L, "%s: attribute %s must be a finite number", info->name, key);
            }
        if (!found && info->opt_in && !strcmp(key, info->opt_in)) { /* an optional input, attention's bias */
            found = true;
            int id = lrc_lua_tensor_id(L, -1);
            if (id < 0) raise_at(L, "%s: %s must be a tensor, got %s", info->name, key, luaL_typename(L, -1));
            proto->in[proto->n_in++] = id;
        }
        if (!found) raise_at(L, "%s: unknown attribute '%s'", info->name, key);
        lua_pop(L, 1);
    }
}

static int add_node(lua_State *L, lrc_node *proto)
{
    lrc_graph *g = graph_of(L);
    char loc[256];
    lrc_err err;
    proto->loc = (char *)lrc_lua_where(L, loc, sizeof loc);
    int id = lrc_graph_add(g, proto, &err);
    if (id < 0) {
        lua_pushstring(L, err.msg);
        return lua_error(L);
    }
    lrc_lua_push_tensor(L, id);
    return 1;
}

/* A number operand of + - * / as a tensor: full's [] scalar, which
 * broadcasts to the other side */
static int scalar_node(lua_State *L, int idx, const char *what)
{
    if (!lua_isnumber(L, idx)) raise_at(L, "%s needs tensors or a number, got %s", what, luaL_typename(L, idx));
    lrc_node proto = {.op = LRC_OP_FULL};
    proto.fattr[0] = lua_tonumber(L, idx);
    add_node(L, &proto);
    int id = lrc_lua_tensor_id(L, -1);
    lua_pop(L, 1);
    return id;
}

/* lrc.<op>(t1, ..., tn [, attrs]) — upvalue 1 is the op. */
static int l_op(lua_State *L)
{
    lrc_op op = (lrc_op)lua_tointeger(L, lua_upvalueindex(1));
    const lrc_op_info *info = &lrc_op_table[op];
    lrc_node proto = {.op = op, .n_in = info->n_in};
    for (int k = 0; k < info->n_in; k++) /* an elementwise op takes a number for a tensor (lrc.maximum(x, 0)) */
        proto.in[k] = lrc_ew_is(op) && lua_type(L, k + 1) == LUA_TNUMBER ? scalar_node(L, k + 1, info->name)
                                                                           : check_tensor(L, k + 1, info->name, k + 1);
    int extra = lua_gettop(L) - info->n_in;
    if (op == LRC_OP_ATTENTION && graph_of(L)->nodes[proto.in[0]].shape.ndim == 4) /* scale's default, 1 / sqrt(Dqk) */
        proto.fattr[0] = 1.0 / sqrt((double)graph_of(L)->nodes[proto.in[0]].shape.dim[3]);
    if (extra > 1) raise_at(L, "%s: takes %d tensors and an attribute table, got %d arguments", info->name,
                            info->n_in, lua_gettop(L));
    if (extra == 1 && !lua_isnil(L, info->n_in + 1)) read_attrs(L, info->n_in + 1, info, &proto);
    else if (info->ilist) raise_at(L, "%s: missing the %s list", info->name, info->ilist);
    return add_node(L, &proto);
}

static int unary_scale(lua_State *L, int t, double s)
{
    lrc_node proto = {.op = LRC_OP_SCALE, .n_in = 1};
    proto.in[0] = t;
    proto.fattr[0] = s;
    return add_node(L, &proto);
}

static int binary(lua_State *L, lrc_op op, int a, int b)
{
    lrc_node proto = {.op = op, .n_in = 2};
    proto.in[0] = a;
    proto.in[1] = b;
    return add_node(L, &proto);
}

/* tensor OP tensor, or a number on either side */
static int arith(lua_State *L, lrc_op op, const char *what)
{
    int a = lrc_lua_tensor_id(L, 1), b = lrc_lua_tensor_id(L, 2);
    if (a < 0) a = scalar_node(L, 1, what);
    if (b < 0) b = scalar_node(L, 2, what);
    return binary(L, op, a, b);
}

static int m_add(lua_State *L) { return arith(L, LRC_OP_ADD, "+"); }

static int m_sub(lua_State *L)
{
    int a = lrc_lua_tensor_id(L, 1), b = lrc_lua_tensor_id(L, 2);
    if (a < 0 || b < 0) return arith(L, LRC_OP_SUB, "-");
    unary_scale(L, b, -1.0); /* a + (-b): what models have always computed */
    return binary(L, LRC_OP_ADD, a, lrc_lua_tensor_id(L, -1));
}

static int m_mul(lua_State *L)
{
    int a = lrc_lua_tensor_id(L, 1), b = lrc_lua_tensor_id(L, 2);
    if (a >= 0 && b >= 0) return binary(L, LRC_OP_MUL, a, b);
    int t = a >= 0 ? a : b, num = a >= 0 ? 2 : 1;
    if (!lua_isnumber(L, num)) raise_at(L, "* needs tensors or a number, got %s", luaL_typename(L, num));
    return unary_scale(L, t, lua_tonumber(L, num));
}

static int m_div(lua_State *L)
{
    int a = lrc_lua_tensor_id(L, 1);
    if (a >= 0 && lua_isnumber(L, 2)) return unary_scale(L, a, 1.0 / lua_tonumber(L, 2));
    return arith(L, LRC_OP_DIV, "/");
}

static int m_unm(lua_State *L) { return unary_scale(L, check_tensor(L, 1, "-", 1), -1.0); }

static int m_index(lua_State *L)
{
    const lrc_node *n = &graph_of(L)->nodes[check_tensor(L, 1, "index", 1)];
    const char *key = luaL_checkstring(L, 2);
    if (!strcmp(key, "shape")) {
        lua_createtable(L, n->shape.ndim, 0);
        for (int i = 0; i < n->shape.ndim; i++) {
            lua_pushinteger(L, n->shape.dim[i]);
            lua_rawseti(L, -2, i + 1);
        }
    } else if (!strcmp(key, "dtype")) lua_pushstring(L, lrc_dtype_name(n->dtype));
    else if (!strcmp(key, "ndim")) lua_pushinteger(L, n->shape.ndim);
    else if (!strcmp(key, "name")) lua_pushstring(L, n->name);
    else {
        /* methods: x:reshape{...}, x:silu(), ... are the lrc.<op> functions */
        lua_getglobal(L, "lrc");
        if (lua_istable(L, -1)) lua_getfield(L, -1, key);
        else lua_pushnil(L);
    }
    return 1;
}

static int m_tostring(lua_State *L)
{
    const lrc_node *n = &graph_of(L)->nodes[check_tensor(L, 1, "tostring", 1)];
    char b[96];
    lua_pushfstring(L, "tensor %s%s (%s at %s)", lrc_dtype_name(n->dtype), lrc_shape_str(&n->shape, b, sizeof b),
                    lrc_op_name(n->op), n->loc ? n->loc : "?");
    return 1;
}

/* lrc.tap(name, x): x, and while a tool that studies the model builds it
 * (lrc diagnose), x's node under that name in the registry's TAPS_KEY list. */
#define TAPS_KEY "lrc.taps"
static int l_tap(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    ltensor *t = luaL_testudata(L, 2, TENSOR_MT);
    if (!t) return raise_at(L, "lrc.tap: the second argument must be a tensor, got %s", luaL_typename(L, 2));
    lua_getfield(L, LUA_REGISTRYINDEX, TAPS_KEY);
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, name);
        bool twice = !lua_isnil(L, -1);
        lua_pop(L, 1);
        if (twice) return raise_at(L, "lrc.tap: '%s' is tapped twice", name);
        lua_pushinteger(L, t->id);
        lua_setfield(L, -2, name);
        lua_pushstring(L, name); /* and in order, so a tool lists them as the model made them */
        lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
    }
    lua_pop(L, 1);
    lua_settop(L, 2);
    return 1;
}

void lrc_lua_taps(lua_State *L, bool on)
{
    if (on) lua_newtable(L);
    else lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, TAPS_KEY);
}

int lrc_lua_tap_list(lua_State *L, lrc_tap **taps)
{
    lua_getfield(L, LUA_REGISTRYINDEX, TAPS_KEY);
    int n = lua_istable(L, -1) ? (int)lua_rawlen(L, -1) : 0;
    *taps = lrc_xcalloc((size_t)n + 1, sizeof **taps);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, -1, i + 1);
        const char *name = lua_tostring(L, -1);
        snprintf((*taps)[i].name, sizeof (*taps)[i].name, "%s", name);
        lua_getfield(L, -2, name);
        (*taps)[i].id = (int)lua_tointeger(L, -1);
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
    return n;
}

/* lrc.full(shape, v): a tensor of the shape ({} for a scalar) holding v */
static int l_full(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    if (!lua_isnumber(L, 2)) raise_at(L, "lrc.full: the value must be a number, got %s", luaL_typename(L, 2));
    lrc_node proto = {.op = LRC_OP_FULL};
    proto.n_iattr = (int)lua_rawlen(L, 1);
    if (proto.n_iattr > LRC_MAX_DIMS) raise_at(L, "lrc.full: the shape has %d axes, at most %d", proto.n_iattr, LRC_MAX_DIMS);
    for (int i = 0; i < proto.n_iattr; i++) {
        lua_rawgeti(L, 1, i + 1);
        if (!to_int(L, -1, &proto.iattr[i])) raise_at(L, "lrc.full: size %d of the shape is not an integer", i + 1);
        lua_pop(L, 1);
    }
    proto.fattr[0] = lua_tonumber(L, 2);
    return add_node(L, &proto);
}

/* lrc.cast(x, "f32" | "i32"): x itself where it has that dtype already */
static int l_cast(lua_State *L)
{
    int x = check_tensor(L, 1, "cast", 1);
    const char *to = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : NULL;
    lrc_node proto = {.op = LRC_OP_CAST, .n_in = 1, .in = {x}};
    if (!to || (strcmp(to, "f32") && strcmp(to, "i32")))
        raise_at(L, "cast: the dtype must be \"f32\" or \"i32\", got %s", to ? to : luaL_typename(L, 2));
    proto.iattr[0] = to[0] == 'f' ? LRC_F32 : LRC_I32;
    if (graph_of(L)->nodes[x].dtype == (lrc_dtype)proto.iattr[0]) {
        lua_settop(L, 1);
        return 1;
    }
    return add_node(L, &proto);
}

/* lrc.arange(n): i32 [n], 0 .. n-1 */
static int l_arange(lua_State *L)
{
    lrc_node proto = {.op = LRC_OP_ARANGE};
    if (!to_int(L, 1, &proto.iattr[0])) raise_at(L, "arange: n must be an integer, got %s", luaL_tolstring(L, 1, NULL));
    return add_node(L, &proto);
}

/* g rebuilt node by node (the same ids, names and attributes) */
static lrc_graph *clone_graph(const lrc_graph *g, lrc_err *err)
{
    lrc_graph *c = lrc_graph_new();
    int rc = 0;
    for (int i = 0; i < g->n_nodes && rc >= 0; i++) {
        const lrc_node *n = &g->nodes[i];
        if (n->op == LRC_OP_INPUT) rc = lrc_graph_add_input(c, n->name, n->dtype, &n->shape, n->loc, err);
        else if (n->op == LRC_OP_PARAM) rc = lrc_graph_add_param(c, n->name, &n->shape, n->init, n->group, n->loc, err);
        else if (n->op == LRC_OP_STATE) rc = lrc_graph_add_state(c, n->name, &n->shape, n->loc, err);
        else rc = lrc_graph_add(c, n, err);
    }
    if (rc < 0) lrc_graph_free(c);
    return rc < 0 ? NULL : c;
}

/* lrc.trace_apart(fn): fn() run against a copy of the model's graph, which
 * is then dropped: what it returns (plain values, not tensors) tells the
 * caller shapes that only tracing finds (nn.scan's per-step output), and
 * the graph keeps none of its nodes. fn's error is raised as it is. */
static int l_trace_apart(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    lrc_graph *g = graph_of(L);
    lrc_err err;
    lrc_graph *c = clone_graph(g, &err);
    if (!c) return raise_at(L, "%s", err.msg);
    lrc_lua_set_graph(L, c);
    lua_settop(L, 1);
    int status = lua_pcall(L, 0, LUA_MULTRET, 0);
    lrc_lua_set_graph(L, g);
    lrc_graph_free(c);
    if (status != LUA_OK) return lua_error(L);
    return lua_gettop(L);
}

/* lrc.training(): whether the graph being built is a training graph (the
 * ctx.training M.build receives), for library code that builds otherwise
 * there (nn.scan unrolls). */
static int l_training(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, LRC_LUA_TRAINING_KEY);
    lua_pushboolean(L, lua_toboolean(L, -1));
    return 1;
}

/* lrc.fail(fmt, ...): an error at the user's line, for library code. */
static int l_fail(lua_State *L)
{
    int n = lua_gettop(L);
    lua_getglobal(L, "string");
    lua_getfield(L, -1, "format");
    for (int i = 1; i <= n; i++) lua_pushvalue(L, i);
    lua_call(L, n, 1);
    return raise_at(L, "%s", lua_tostring(L, -1));
}

static int open_lrc(lua_State *L)
{
    lua_newtable(L);
    static const luaL_Reg fns[] = {{"param", l_param}, {"get_param", l_get_param}, {"input", l_input}, {"fail", l_fail}, {"tap", l_tap}, {"trace_apart", l_trace_apart},
                                    {"training", l_training}, {NULL, NULL}};
    luaL_setfuncs(L, fns, 0);
    for (int op = 0; op < LRC_OP_COUNT; op++) {
        if (lrc_op_table[op].fusion == LRC_FUSE_SOURCE) continue;
        lua_pushinteger(L, op);
        lua_pushcclosure(L, l_op, 1);
        lua_setfield(L, -2, lrc_op_table[op].name);
    }
    lua_pushcfunction(L, l_full); /* full(shape, v), not the op table's attribute form */
    lua_setfield(L, -2, "full");
    lua_pushcfunction(L, l_cast); /* cast(x, "f32"), arange(n): likewise */
    lua_setfield(L, -2, "cast");
    lua_pushcfunction(L, l_arange);
    lua_setfield(L, -2, "arange");
    /* JSON's null, as lrc.hf reads config.json and a to_hf writes it */
    lua_pushlightuserdata(L, NULL);
    lua_setfield(L, -2, "null");
    return 1;
}

static int load_embedded(lua_State *L)
{
    const lrc_embedded *e = lua_touserdata(L, lua_upvalueindex(1));
    char chunk[128];
    /* a model's errors name its file (models/llama.lua:42), as a user's do */
    bool model = !strncmp(e->name, "models/", 7);
    snprintf(chunk, sizeof chunk, "%c%s", model ? '@' : '=', e->name);
    if (luaL_loadbufferx(L, e->source, e->len, chunk, "t")) return lua_error(L);
    lua_call(L, 0, 1);
    return 1;
}

void lrc_lua_open(lua_State *L)
{
    luaL_newmetatable(L, TENSOR_MT);
    static const luaL_Reg mt[] = {{"__add", m_add}, {"__sub", m_sub}, {"__mul", m_mul}, {"__div", m_div},
                                  {"__unm", m_unm}, {"__index", m_index}, {"__tostring", m_tostring},
                                  {NULL, NULL}};
    luaL_setfuncs(L, mt, 0);
    lua_pop(L, 1);

    luaL_requiref(L, "lrc", open_lrc, 1);
    lua_pop(L, 1);
    /* Embedded libraries load on require, under their module names; a
     * built-in model as "models.llama", so that a family file can build on
     * one (require "models.llama") without a copy of it. */
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    for (int i = 0; i < lrc_embedded_count; i++) {
        const lrc_embedded *e = &lrc_embedded_files[i];
        char name[128];
        size_t n = strlen(e->name);
        if (!strncmp(e->name, "models/", 7) && n > 11 && n - 4 < sizeof name) { /* "models/" NAME ".lua" */
            snprintf(name, sizeof name, "models.%.*s", (int)(n - 4 - 7), e->name + 7);
        } else {
            snprintf(name, sizeof name, "%s", e->name);
        }
        lua_pushlightuserdata(L, (void *)e);
        lua_pushcclosure(L, load_embedded, 1);
        lua_setfield(L, -2, name);
    }
    lua_pop(L, 1);
}
