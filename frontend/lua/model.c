/* model.c — loading a model description (a Lua file returning a table with
 * defaults, presets and build), resolving its configuration from a preset
 * and --set KEY=VALUE, and building its graph. */
#include "lrc_lua.h"

#include "../../ir/passes/lrc_passes.h"

#include <assert.h>
#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* A model description that runs longer than this is stuck in a loop. */
#define MAX_INSTRUCTIONS_M 500 /* millions of Lua VM instructions */

static void count_hook(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_getfield(L, LUA_REGISTRYINDEX, "lrc.icount");
    lua_Integer n = lua_tointeger(L, -1) + 1;
    lua_pop(L, 1);
    lua_pushinteger(L, n);
    lua_setfield(L, LUA_REGISTRYINDEX, "lrc.icount");
    if (n > MAX_INSTRUCTIONS_M) {
        char loc[300];
        luaL_error(L, "%s: the model description ran for over %d million Lua instructions (an endless loop?)",
                   lrc_lua_where(L, loc, sizeof loc), MAX_INSTRUCTIONS_M);
    }
}

/* Error values become one-line strings (no traceback: the location is in
 * the message already). */
static int msgh(lua_State *L)
{
    if (!lua_isstring(L, 1)) { /* error({...}): say where, since the value cannot */
        char loc[300];
        lua_pushfstring(L, "%s: error with a %s value: %s", lrc_lua_where(L, loc, sizeof loc), luaL_typename(L, 1),
                        luaL_tolstring(L, 1, NULL));
        lua_replace(L, 1);
    }
    const char *s = luaL_tolstring(L, 1, NULL);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (; *s; s++) luaL_addchar(&b, *s == '\n' || *s == '\r' || *s == '\t' ? ' ' : *s);
    luaL_pushresult(&b);
    return 1;
}

static int pcall_err(lua_State *L, int nargs, int nres, lrc_err *err)
{
    int base = lua_gettop(L) - nargs;
    lua_pushcfunction(L, msgh);
    lua_insert(L, base);
    int rc = lua_pcall(L, nargs, nres, base);
    lua_remove(L, base);
    if (rc) {
        lrc_err_set(err, "%s", lua_tostring(L, -1));
        lua_pop(L, 1);
        return LRC_EUSER;
    }
    return LRC_OK;
}

static int l_index(lua_State *L)
{
    lua_gettable(L, 1);
    return 1;
}

/* t[k] for the table at idx, pushed, as lua_getfield but in a pcall: the
 * model's tables are read outside the chunk's pcall, where a metamethod
 * that fails or recurses without end (__index) would end the process in a
 * Lua panic. Returns the value's type, or -1 with err set (nothing pushed). */
static int get_field(lua_State *L, int idx, const char *k, lrc_err *err)
{
    idx = lua_absindex(L, idx);
    lua_pushcfunction(L, l_index);
    lua_pushvalue(L, idx);
    lua_pushstring(L, k);
    return pcall_err(L, 2, 1, err) ? -1 : lua_type(L, -1);
}

/* The value at idx for a message, pushed, without its __tostring (which,
 * outside a pcall, could fail into a Lua panic too). */
static const char *show(lua_State *L, int idx)
{
    int t = lua_type(L, idx);
    if (t == LUA_TSTRING || t == LUA_TNUMBER) {
        lua_pushvalue(L, idx);
        return lua_tostring(L, -1);
    }
    return lua_pushstring(L, t == LUA_TBOOLEAN ? (lua_toboolean(L, idx) ? "true" : "false") : luaL_typename(L, idx));
}

static const lrc_embedded *find_embedded_model(const char *name)
{
    char want[256];
    const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
    snprintf(want, sizeof want, "models/%s%s", base, strstr(base, ".lua") ? "" : ".lua");
    for (int i = 0; i < lrc_embedded_count; i++)
        if (!strcmp(lrc_embedded_files[i].name, want)) return &lrc_embedded_files[i];
    return NULL;
}

static void list_embedded_models(char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < lrc_embedded_count && used < n; i++)
        if (!strncmp(lrc_embedded_files[i].name, "models/", 7))
            used += (size_t)snprintf(buf + used, n - used, "%s%s", used ? ", " : "", lrc_embedded_files[i].name + 7);
}

/* Sorted, comma-separated string keys of the table at idx. */
static void table_keys(lua_State *L, int idx, char *buf, size_t n)
{
    const char *keys[256];
    int k = 0;
    lua_pushnil(L);
    while (lua_next(L, idx) && k < 256) {
        if (lua_type(L, -2) == LUA_TSTRING) keys[k++] = lua_tostring(L, -2);
        lua_pop(L, 1);
    }
    for (int i = 1; i < k; i++)
        for (int j = i; j > 0 && strcmp(keys[j - 1], keys[j]) > 0; j--) {
            const char *t = keys[j];
            keys[j] = keys[j - 1];
            keys[j - 1] = t;
        }
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < k && used < n; i++) used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", keys[i]);
}

/* Parses text as the type of the default at the top of the stack and pushes it. */
static int push_value_like(lua_State *L, const char *key, const char *text, lrc_err *err)
{
    char *end;
    errno = 0;
    if (lua_isinteger(L, -1)) {
        long long v = strtoll(text, &end, 10);
        if (!*text || *end || errno) return lrc_err_set(err, "--set %s=%s: expected an integer", key, text);
        lua_pushinteger(L, v);
    } else if (lua_type(L, -1) == LUA_TNUMBER) {
        double v = strtod(text, &end);
        if (!*text || *end || errno || !isfinite(v)) return lrc_err_set(err, "--set %s=%s: expected a number", key, text);
        lua_pushnumber(L, v);
    } else if (lua_isboolean(L, -1)) {
        if (!strcmp(text, "true") || !strcmp(text, "1") || !strcmp(text, "yes")) lua_pushboolean(L, 1);
        else if (!strcmp(text, "false") || !strcmp(text, "0") || !strcmp(text, "no")) lua_pushboolean(L, 0);
        else return lrc_err_set(err, "--set %s=%s: expected true or false", key, text);
    } else {
        lua_pushstring(L, text);
    }
    return LRC_OK;
}

/* cfg[key] = over[key] for each key of the table at over (a Hugging Face
 * config's mapping), each of a default's type (an integer is a number where
 * the default is one). */
static int apply_overrides(lrc_model *m, int over, int defaults, int cfg, lrc_err *err)
{
    lua_State *L = m->L;
    lua_pushnil(L);
    while (lua_next(L, over)) {
        if (lua_type(L, -2) != LUA_TSTRING)
            return lrc_err_set(err, "%s: from_hf returned a key that is not a string", m->path);
        const char *key = lua_tostring(L, -2);
        int dt = get_field(L, defaults, key, err), vt = lua_type(L, -2);
        if (dt < 0) return LRC_EUSER;
        bool ok = dt == vt && (dt != LUA_TNUMBER || !lua_isinteger(L, -1) || lua_isinteger(L, -2));
        if (dt == LUA_TNUMBER && vt == LUA_TNUMBER && !lua_isinteger(L, -1)) {
            lua_pushnumber(L, lua_tonumber(L, -2));
            lua_replace(L, -3);
            ok = true;
        }
        if (!ok)
            return lrc_err_set(err, "%s: from_hf sets '%s' to a %s, but the config key is %s", m->path, key,
                               luaL_typename(L, -2), dt == LUA_TNIL ? "not one of its keys" : luaL_typename(L, -1));
        lua_pop(L, 1);
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_settable(L, cfg);
    }
    return LRC_OK;
}

static int apply_config(lrc_model *m, const char *preset, int over, char *const *sets, int n_sets, lrc_err *err)
{
    lua_State *L = m->L;
    char keys[2048];
    int mod = lua_gettop(L);
    int dt = get_field(L, mod, "defaults", err);
    if (dt < 0) return LRC_EUSER;
    if (dt != LUA_TTABLE)
        return lrc_err_set(err, "%s: the model table has no 'defaults' table", m->path);
    int defaults = lua_gettop(L);
    lua_newtable(L);
    int cfg = lua_gettop(L);
    lua_pushnil(L);
    while (lua_next(L, defaults)) {
        int t = lua_type(L, -1);
        if (lua_type(L, -2) != LUA_TSTRING || (t != LUA_TNUMBER && t != LUA_TSTRING && t != LUA_TBOOLEAN))
            return lrc_err_set(err, "%s: defaults must map names to numbers, strings or booleans", m->path);
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_settable(L, cfg);
    }
    if (over && apply_overrides(m, over, defaults, cfg, err)) return LRC_EUSER;
    if (preset) {
        int pt = get_field(L, mod, "presets", err), t = LUA_TNIL;
        if (pt < 0 || (pt == LUA_TTABLE && (t = get_field(L, -1, preset, err)) < 0)) return LRC_EUSER;
        if (pt != LUA_TTABLE || t != LUA_TTABLE) {
            if (lua_istable(L, -2)) table_keys(L, lua_gettop(L) - 1, keys, sizeof keys);
            else snprintf(keys, sizeof keys, "none");
            return lrc_err_set(err, "%s: unknown preset '%s' (available: %s)", m->path, preset, keys);
        }
        int p = lua_gettop(L);
        lua_pushnil(L);
        while (lua_next(L, p)) {
            lua_pushvalue(L, -2);
            if (lua_type(L, -1) != LUA_TSTRING || lua_rawget(L, defaults) == LUA_TNIL)
                return lrc_err_set(err, "%s: preset '%s' sets '%s', which is not a config key", m->path, preset,
                                   show(L, -3));
            lua_pop(L, 1);
            lua_pushvalue(L, -2);
            lua_insert(L, -2);
            lua_settable(L, cfg);
        }
        lua_pop(L, 2);
    }
    for (int i = 0; i < n_sets; i++) {
        const char *eq = strchr(sets[i], '=');
        if (!eq || eq == sets[i]) return lrc_err_set(err, "--set %s: expected KEY=VALUE", sets[i]);
        lua_pushlstring(L, sets[i], (size_t)(eq - sets[i]));
        const char *key = lua_tostring(L, -1);
        int kt = get_field(L, defaults, key, err);
        if (kt < 0) return LRC_EUSER;
        if (kt == LUA_TNIL) {
            table_keys(L, defaults, keys, sizeof keys);
            return lrc_err_set(err, "--set %s: unknown config key '%s' for %s (keys: %s)", sets[i], key, m->path, keys);
        }
        if (push_value_like(L, key, eq + 1, err)) return LRC_EUSER;
        lua_setfield(L, cfg, key);
        lua_pop(L, 2);
    }
    lua_pushvalue(L, cfg);
    m->cfg_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_settop(L, mod);
    return LRC_OK;
}

/* For a Hugging Face directory: lrc.hf's family for its config.json, found
 * among the model files of $LRC_MODEL_PATH and the built-in ones (hf_ref and hf_cfg_ref
 * keep lrc.hf and the config for hf_map); sets *e to the built-in model,
 * or *file to the user's model file, or returns with err set. */
static int hf_family(lrc_model *m, const char *dir, const lrc_embedded **e, char **file, lrc_err *err)
{
    lua_State *L = m->L;
    char where[4200];
    snprintf(where, sizeof where, "%s/config.json", dir);
    lua_getglobal(L, "require");
    lua_pushstring(L, "lrc.hf");
    if (pcall_err(L, 1, 1, err)) return LRC_EUSER;
    lua_pushvalue(L, -1);
    m->hf_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_getfield(L, -1, "find_families");
    if (lrc_hf_push_family_files(L, err)) return LRC_EUSER;
    lrc_hf_push_family_loader(L);
    if (pcall_err(L, 2, 0, err)) return LRC_EUSER;
    lua_getfield(L, -1, "family");
    if (lrc_hf_push_config(L, dir, err)) return LRC_EUSER;
    lua_pushvalue(L, -1);
    m->hf_cfg_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_getfield(L, -1, "model_type");
    m->hf_type = lrc_xstrdup(lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?");
    lua_pop(L, 1);
    lua_pushstring(L, where);
    if (pcall_err(L, 2, 2, err)) return LRC_EUSER;
    const char *name = lua_tostring(L, -2);
    if (lua_toboolean(L, -1)) {
        if (!(*e = lrc_embedded_model(name)))
            return lrc_err_set(err, "%s: lrc.hf names model '%s', which is not built in", where, name);
    } else {
        *file = lrc_xstrdup(name);
    }
    lua_pop(L, 3);
    return LRC_OK;
}

/* The config keys M.from_hf gives for the directory's config.json, pushed. */
static int hf_map(lrc_model *m, lrc_err *err)
{
    lua_State *L = m->L;
    int mod = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, m->hf_ref);
    lua_getfield(L, -1, "map");
    lua_remove(L, -2);
    lua_pushvalue(L, mod);
    lua_rawgeti(L, LUA_REGISTRYINDEX, m->hf_cfg_ref);
    lua_pushfstring(L, "%s/config.json", m->hf_dir);
    if (pcall_err(L, 3, 1, err)) return LRC_EUSER;
    if (!lua_istable(L, -1))
        return lrc_err_set(err, "%s: from_hf.%s returned %s, not a table of config keys", m->path, "?", luaL_typename(L, -1));
    return LRC_OK;
}

static int load_chunk(lrc_model *m, const char *model, const lrc_embedded *e)
{
    if (!e) {
        m->path = lrc_xstrdup(model);
        return luaL_loadfilex(m->L, model, "t");
    }
    m->path = lrc_xstrdup(e->name);
    char chunk[300];
    snprintf(chunk, sizeof chunk, "@%s", e->name);
    return luaL_loadbufferx(m->L, e->source, e->len, chunk, "t");
}

int lrc_model_load(lrc_model *m, const char *model, const char *preset, char *const *sets, int n_sets,
                   lrc_err *err)
{
    memset(m, 0, sizeof *m);
    m->mod_ref = m->cfg_ref = m->hf_ref = m->hf_cfg_ref = LUA_NOREF;
    lua_State *L = luaL_newstate();
    if (!L) return lrc_err_set(err, "cannot create a Lua state (out of memory)");
    m->L = L;
    luaL_openlibs(L);
    lrc_lua_open(L);
    lrc_lua_open_along(L);
    lua_sethook(L, count_hook, LUA_MASKCOUNT, 1000000);

    const lrc_embedded *e = NULL;
    char *family_file = NULL; /* a Hugging Face directory's model file on LRC_MODEL_PATH */
    struct stat st;
    bool exists = stat(model, &st) == 0;
    if (lrc_hf_is_dir(model)) {
        if (preset)
            return lrc_err_set(err, "%s: --preset does not apply to a Hugging Face directory (its config.json sets the model)",
                               model);
        m->hf_dir = lrc_xstrdup(model);
        if (hf_family(m, model, &e, &family_file, err)) return LRC_EUSER;
    } else if (exists && !S_ISDIR(st.st_mode)) {
        e = NULL; /* a model file */
    } else if ((e = find_embedded_model(model)) == NULL) {
        char list[512];
        list_embedded_models(list, sizeof list);
        if (exists)
            return lrc_err_set(err, "%s: a directory without config.json, so not a Hugging Face model directory "
                                    "(built-in models: %s)", model, list);
        return lrc_err_set(err, "%s: no such file (built-in models: %s)", model, list);
    }
    int rc = load_chunk(m, family_file ? family_file : model, e);
    free(family_file);
    if (rc) { /* syntax errors are one line; some load errors lack the file name */
        const char *msg = lua_tostring(L, -1);
        if (strstr(msg, m->path)) return lrc_err_set(err, "%s", msg);
        return lrc_err_set(err, "%s: %s", m->path, msg);
    }
    if (pcall_err(L, 0, 1, err)) return LRC_EUSER;
    if (!lua_istable(L, -1))
        return lrc_err_set(err, "%s: a model file must return a table with defaults, presets and build, got %s",
                           m->path, luaL_typename(L, -1));
    int bt = get_field(L, -1, "build", err);
    if (bt < 0) return LRC_EUSER;
    if (bt != LUA_TFUNCTION)
        return lrc_err_set(err, "%s: the model table has no build function", m->path);
    lua_pop(L, 1);
    int tt = get_field(L, -1, "task", err);
    if (tt < 0) return LRC_EUSER;
    if (tt == LUA_TSTRING && !strcmp(lua_tostring(L, -1), "image-classification")) m->task = LRC_TASK_IMAGE;
    else if (tt == LUA_TSTRING && !strcmp(lua_tostring(L, -1), "language-model")) m->task = LRC_TASK_LM;
    else if (tt != LUA_TNIL)
        return lrc_err_set(err, "%s: task must be \"language-model\" or \"image-classification\", got %s", m->path,
                           show(L, -1));
    lua_pop(L, 1);
    int over = 0;
    if (m->hf_dir) {
        if (hf_map(m, err)) return LRC_EUSER;
        lua_insert(L, -2); /* the module stays on top */
        over = lua_gettop(L) - 1;
    }
    if (apply_config(m, preset, over, sets, n_sets, err)) return LRC_EUSER;
    m->mod_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    if (over) lua_pop(L, 1);
    return LRC_OK;
}

void lrc_model_free(lrc_model *m)
{
    if (m->L) lua_close(m->L);
    free(m->path);
    free(m->hf_dir);
    free(m->hf_type);
    memset(m, 0, sizeof *m);
}

/* A copy of the config, so that a model cannot change it for later builds. */
static void push_config_copy(lrc_model *m)
{
    lua_State *L = m->L;
    lua_newtable(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, m->cfg_ref);
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_settable(L, -5);
    }
    lua_pop(L, 1);
}

static int build(lrc_model *m, int64_t B, int64_t T, bool training, lrc_graph *g, lrc_err *err)
{
    lua_State *L = m->L;
    lrc_shape s = {2, {B, T}};
    char where[300];
    snprintf(where, sizeof where, "%s", m->path);
    int tokens;
    if (m->task == LRC_TASK_IMAGE) {
        int64_t C = 0, S = 0;
        if (lrc_model_config_int(m, "channels", &C, err) || lrc_model_config_int(m, "image_size", &S, err)) return LRC_EUSER;
        lrc_shape is = {4, {B, C, S, S}};
        tokens = lrc_graph_add_input(g, "images", LRC_F32, &is, NULL, err);
    } else {
        tokens = lrc_graph_add_input(g, "tokens", LRC_I32, &s, NULL, err);
    }
    if (tokens < 0) return LRC_EUSER;
    lua_rawgeti(L, LUA_REGISTRYINDEX, m->mod_ref);
    if (get_field(L, -1, "build", err) < 0) {
        lua_pop(L, 1);
        return LRC_EUSER;
    }
    lua_remove(L, -2);
    lrc_lua_set_graph(L, g);
    push_config_copy(m);
    lrc_lua_push_tensor(L, tokens);
    /* what the graph is for: a model may build differently for training
     * (Parcae unrolls the iterations that take gradients) */
    lua_createtable(L, 0, 1);
    lua_pushboolean(L, training);
    lua_setfield(L, -2, "training");
    lua_pushboolean(L, training); /* and for library code, lrc.training() */
    lua_setfield(L, LUA_REGISTRYINDEX, LRC_LUA_TRAINING_KEY);
    int rc = pcall_err(L, 3, 1, err);
    lua_pushboolean(L, false);
    lua_setfield(L, LUA_REGISTRYINDEX, LRC_LUA_TRAINING_KEY);
    if (!rc) {
        int out = lrc_lua_tensor_id(L, -1);
        if (out < 0) rc = lrc_err_set(err, "%s: build must return the logits tensor, got %s", where, luaL_typename(L, -1));
        else rc = lrc_graph_add_output(g, "logits", out, err);
        lua_pop(L, 1);
    }
    lrc_lua_set_graph(L, NULL);
    if (!rc) rc = lrc_graph_verify(g, err);
    return rc;
}

int lrc_model_build(lrc_model *m, int64_t B, int64_t T, lrc_graph *g, lrc_err *err)
{
    return build(m, B, T, false, g, err);
}

int lrc_model_build_tapped(lrc_model *m, int64_t B, int64_t T, lrc_graph *g, lrc_tap **taps, int *n, lrc_err *err)
{
    lrc_lua_taps(m->L, true);
    int rc = build(m, B, T, false, g, err);
    *n = lrc_lua_tap_list(m->L, taps);
    lrc_lua_taps(m->L, false);
    return rc;
}

/* The tensors table that to_hf returned (at idx) as outputs of g, by name. */
static int export_outputs(lrc_model *m, int idx, lrc_graph *g, lrc_err *err)
{
    lua_State *L = m->L;
    int n = 0, cap = 64;
    const char **names = lrc_xmalloc((size_t)cap * sizeof *names);
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING) {
            lua_pop(L, 1);
            free(names);
            return lrc_err_set(err, "%s: to_hf's tensors must be named by strings", m->path);
        }
        if (n == cap) names = lrc_xrealloc(names, (size_t)(cap *= 2) * sizeof *names);
        names[n++] = lua_tostring(L, -1);
    }
    for (int i = 1; i < n; i++) /* sorted: the file's order does not depend on the table's */
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            const char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    lrc_graph_clear_outputs(g);
    int rc = n ? LRC_OK : lrc_err_set(err, "%s: to_hf returned no tensors", m->path);
    for (int i = 0; i < n && !rc; i++) {
        lua_getfield(L, idx, names[i]);
        int id = lrc_lua_tensor_id(L, -1);
        lua_pop(L, 1);
        if (id < 0) rc = lrc_err_set(err, "%s: to_hf's '%s' is not a tensor", m->path, names[i]);
        else rc = lrc_graph_add_output(g, names[i], id, err);
    }
    free(names);
    return rc;
}

int lrc_model_build_export(lrc_model *m, lrc_graph **gp, int *config_ref, lrc_err *err)
{
    lua_State *L = m->L;
    *config_ref = LUA_NOREF;
    int rc = build(m, 1, 1, false, *gp, err);
    if (rc) return rc;
    lua_rawgeti(L, LUA_REGISTRYINDEX, m->mod_ref);
    int ht = get_field(L, -1, "to_hf", err);
    if (ht != LUA_TFUNCTION) {
        lua_pop(L, ht < 0 ? 1 : 2);
        return ht < 0 ? LRC_EUSER : lrc_err_set(err, "%s has no to_hf function, so lrc cannot write it as a Hugging Face model", m->path);
    }
    lua_remove(L, -2);
    push_config_copy(m);
    lrc_lua_set_graph(L, *gp);
    rc = pcall_err(L, 1, 2, err);
    lrc_lua_set_graph(L, NULL);
    if (rc) return rc;
    if (!lua_istable(L, -2) || !lua_istable(L, -1))
        rc = lrc_err_set(err, "%s: to_hf must return the config.json table and a table of tensors", m->path);
    if (!rc) rc = export_outputs(m, lua_gettop(L), *gp, err);
    lua_pop(L, 1);
    if (rc) {
        lua_pop(L, 1);
        return rc;
    }
    *config_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    rc = lrc_graph_verify(*gp, err);
    return rc ? rc : lrc_pass_dce(gp, NULL, err);
}

int lrc_model_build_training(lrc_model *m, int64_t B, int64_t T, lrc_graph *g, lrc_err *err)
{
    lrc_shape bt = m->task == LRC_TASK_IMAGE ? (lrc_shape){1, {B}} : (lrc_shape){2, {B, T}};
    int rc = build(m, B, T, true, g, err), labels = -1, loss = -1;
    if (!rc && (labels = lrc_graph_add_input(g, "labels", LRC_I32, &bt, NULL, err)) < 0) rc = LRC_EUSER;
    if (!rc) {
        lrc_node ce = {.op = LRC_OP_CROSS_ENTROPY, .n_in = 2, .in = {g->outputs[0], labels}};
        if ((loss = lrc_graph_add(g, &ce, err)) < 0) rc = LRC_EUSER;
    }
    /* the pipeline up to its autodiff step: the reference executor runs
     * this graph as it is, a compiler continues with the other passes */
    lrc_pass_ctx ctx = {.autodiff = true, .loss = loss};
    lrc_graph *gp = g;
    if (!rc) rc = lrc_passes_run(&gp, &ctx, "autodiff", err);
    assert(gp == g); /* kv_cache is not asked for and autodiff adds in place */
    return rc;
}

int lrc_model_config_int(lrc_model *m, const char *key, int64_t *out, lrc_err *err)
{
    lua_rawgeti(m->L, LUA_REGISTRYINDEX, m->cfg_ref);
    lua_getfield(m->L, -1, key);
    int ok = lua_isinteger(m->L, -1);
    if (ok) *out = (int64_t)lua_tointeger(m->L, -1);
    lua_pop(m->L, 2);
    return ok ? LRC_OK : lrc_err_set(err, "%s: config key '%s' is not an integer", m->path, key);
}

int lrc_model_config_number(lrc_model *m, const char *key, double *out, lrc_err *err)
{
    lua_rawgeti(m->L, LUA_REGISTRYINDEX, m->cfg_ref);
    lua_getfield(m->L, -1, key);
    int ok = lua_type(m->L, -1) == LUA_TNUMBER;
    if (ok) *out = (double)lua_tonumber(m->L, -1);
    lua_pop(m->L, 2);
    return ok ? LRC_OK : lrc_err_set(err, "%s: config key '%s' is not a number", m->path, key);
}

void lrc_model_print_config(lrc_model *m, FILE *out)
{
    lua_State *L = m->L;
    char keys[2048];
    lua_rawgeti(L, LUA_REGISTRYINDEX, m->cfg_ref);
    table_keys(L, lua_gettop(L), keys, sizeof keys);
    for (char *k = strtok(keys, ", "); k; k = strtok(NULL, ", ")) {
        lua_getfield(L, -1, k);
        fprintf(out, "  %-22s %s\n", k, luaL_tolstring(L, -1, NULL));
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
}

int lrc_model_complete_inputs(const lrc_plan_buf *want, int n, lrc_model *m, lrc_tensor_set *in, const char *path, lrc_err *err)
{
    char names[512] = "";
    size_t used = 0;
    for (int i = 0; i < n; i++)
        if (used < sizeof names) used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", want[i].name);
    for (int i = 0; i < in->n; i++) {
        bool known = false;
        for (int j = 0; j < n && !known; j++) known = !strcmp(in->items[i]->name, want[j].name);
        if (!known && !strcmp(in->items[i]->name, "labels")) { /* backward's, where a graph without a loss has none: one file serves both */
            lrc_tensor_free(in->items[i]);
            memmove(in->items + i, in->items + i + 1, (size_t)(in->n - i - 1) * sizeof *in->items);
            in->n--, i--;
            continue;
        }
        if (!known)
            return lrc_err_set(err, "%s: unexpected tensor '%s' (the model's inputs: %s)", path, in->items[i]->name, names);
    }
    for (int j = 0; j < n; j++) {
        if (lrc_tensor_set_find(in, want[j].name)) continue;
        lrc_tensor *d = NULL;
        if (m && lrc_model_default_input(m, &want[j], &d, NULL, err)) return LRC_EUSER;
        if (d) {
            if (lrc_tensor_set_add(in, d, err)) return LRC_EUSER;
            continue;
        }
        int64_t T = 0;
        /* a looped model's iteration count: its config T for every row; in a
         * training graph the loop runs those without gradients, the last
         * mu_bwd unrolled after it (iteration_mask) */
        bool mask = !strcmp(want[j].name, "iteration_mask") && want[j].shape.ndim == 5;
        if ((mask || (!strcmp(want[j].name, "iterations") && want[j].dtype == LRC_I32 && want[j].shape.ndim == 1)) && m &&
            !lrc_model_config_int(m, "T", &T, err)) {
            if (T <= 0) return lrc_err_set(err, "T = %lld: a looped model iterates at least once", (long long)T);
            int64_t K = 0; /* a training graph's unrolled iterations (its iteration_mask), else 0 */
            for (int q = 0; q < n; q++)
                if (!strcmp(want[q].name, "iteration_mask")) K = want[q].shape.dim[1];
            bool training = K > 0;
            int64_t k = T < K ? T : K; /* the iterations with gradients */
            lrc_tensor *t = lrc_tensor_new(want[j].name, want[j].dtype, &want[j].shape, err);
            if (!t) return LRC_EUSER;
            if (mask)
                lrc_parcae_mask(t->data, K, want[j].shape.dim[2], NULL, k);
            else
                for (int64_t b = 0; b < want[j].shape.dim[0]; b++) ((int32_t *)t->data)[b] = (int32_t)(training ? T - k : T);
            if (lrc_tensor_set_add(in, t, err)) return LRC_EUSER;
            continue;
        }
        /* a looped model's random initial state, from a fixed seed: the same every run */
        if (!strcmp(want[j].name, "h0") && want[j].dtype == LRC_F32 && want[j].shape.ndim >= 1) {
            lrc_tensor *t = lrc_tensor_new("h0", LRC_F32, &want[j].shape, err);
            if (!t) return LRC_EUSER;
            lrc_rng r;
            lrc_rng_seed(&r, 0);
            lrc_fill_trunc_normal(t->data, lrc_shape_numel(&t->shape), sqrt(2.0 / (5.0 * (double)want[j].shape.dim[want[j].shape.ndim - 1])), &r);
            if (lrc_tensor_set_add(in, t, err)) return LRC_EUSER;
            continue;
        }
        if (!m) return lrc_err_set(err, "%s: no tensor '%s' (the model's inputs: %s)", path, want[j].name, names);
        char b[96];
        return lrc_err_set(err, "%s: no tensor '%s' (%s %s), an input the model declares without a default: give it in the "
                                "--input file, or a default in the model with lrc.input(\"%s\", shape, dtype, {default = v})",
                           path, want[j].name, lrc_dtype_name(want[j].dtype), lrc_shape_str(&want[j].shape, b, sizeof b),
                           want[j].name);
    }
    return LRC_OK;
}

int lrc_model_fill_defaults(lrc_model *m, const lrc_graph *g, lrc_tensor_set *in, char *said, size_t cap, lrc_err *err)
{
    lrc_plan_buf want[16];
    int n = lrc_model_graph_inputs(g, want, 16);
    size_t used = 0;
    said[0] = 0;
    for (int j = 0; j < n; j++) {
        if (lrc_tensor_set_find(in, want[j].name)) continue;
        lrc_tensor *t = NULL;
        double v = 0;
        char b[96];
        lrc_shape_str(&want[j].shape, b, sizeof b);
        if (lrc_model_default_input(m, &want[j], &t, &v, err)) return LRC_EUSER;
        if (!t)
            return lrc_err_set(err, "no data for input '%s' (%s %s) and the model declares no default for it: declare one "
                                    "with lrc.input(\"%s\", shape, dtype, {default = v})",
                               want[j].name, lrc_dtype_name(want[j].dtype), b, want[j].name);
        if (lrc_tensor_set_add(in, t, err)) return LRC_EUSER;
        if (used < cap)
            used += (size_t)snprintf(said + used, cap - used, "%sinput '%s' %s %s filled with its default %g", used ? ", " : "",
                                     want[j].name, b, lrc_dtype_name(want[j].dtype), v);
    }
    return LRC_OK;
}

int lrc_model_default_input(lrc_model *m, const lrc_plan_buf *want, lrc_tensor **out, double *value, lrc_err *err)
{
    double v = 0;
    *out = NULL;
    if (!lrc_lua_input_default(m->L, want->name, &v)) return LRC_OK;
    if (value) *value = v;
    bool i32 = want->dtype == LRC_I32;
    lrc_tensor *t = lrc_tensor_new_uninit(want->name, i32 ? LRC_I32 : LRC_F32, &want->shape, err); /* every element written below */
    if (!t) return LRC_EUSER;
    int64_t count = lrc_shape_numel(&want->shape);
    for (int64_t i = 0; i < count; i++)
        if (i32) ((int32_t *)t->data)[i] = (int32_t)v; /* an integer: lrc.input checked it */
        else ((float *)t->data)[i] = (float)v;
    *out = t;
    return LRC_OK;
}


int lrc_model_graph_inputs(const lrc_graph *g, lrc_plan_buf *out, int cap)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes && n < cap; i++)
        if (g->nodes[i].op == LRC_OP_INPUT)
            out[n++] = (lrc_plan_buf){.kind = LRC_BUF_INPUT, .name = g->nodes[i].name, .dtype = g->nodes[i].dtype, .shape = g->nodes[i].shape};
    return n;
}

