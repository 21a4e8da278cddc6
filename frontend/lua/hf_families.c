/* hf_families.c — the model files lrc.hf searches for a Hugging Face
 * model_type: each folder of LRC_MODEL_PATH (colon-separated, in order),
 * then the built-in models. lrc.hf (hf.find_families) runs each file and
 * reads the model_types its from_hf table names, so a family is one Lua
 * file and a user's needs no rebuild. */
#include "lrc_lua.h"

#include <dirent.h>
#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static bool is_lua(const char *name)
{
    size_t n = strlen(name);
    return name[0] != '.' && n > 4 && !strcmp(name + n - 4, ".lua");
}

/* Pushes the list { {name = "DIR/x.lua", builtin = false}, ... } of the
 * *.lua files in dir, sorted by name so that an error between two files
 * reads the same on every file system. */
static int push_folder(lua_State *L, const char *dir, lrc_err *err)
{
    DIR *d = opendir(dir);
    if (!d) return lrc_err_set(err, "LRC_MODEL_PATH: %s: %s", dir, strerror(errno));
    char **names = NULL;
    size_t n = 0, cap = 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;) {
        if (!is_lua(de->d_name)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            names = lrc_xrealloc(names, cap * sizeof *names);
        }
        names[n++] = lrc_xstrdup(de->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, name_cmp);
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_createtable(L, 0, 2);
        lua_pushfstring(L, "%s/%s", dir, names[i]);
        lua_setfield(L, -2, "name");
        lua_pushboolean(L, 0);
        lua_setfield(L, -2, "builtin");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
        free(names[i]);
    }
    free(names);
    return LRC_OK;
}

static void push_builtin(lua_State *L)
{
    lua_newtable(L);
    int k = 0;
    for (int i = 0; i < lrc_embedded_count; i++) {
        if (strncmp(lrc_embedded_files[i].name, "models/", 7)) continue;
        lua_createtable(L, 0, 2);
        lua_pushstring(L, lrc_embedded_files[i].name);
        lua_setfield(L, -2, "name");
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "builtin");
        lua_rawseti(L, -2, ++k);
    }
}

int lrc_hf_push_family_files(lua_State *L, lrc_err *err)
{
    lua_newtable(L);
    int levels = 0;
    const char *path = getenv("LRC_MODEL_PATH");
    for (const char *p = path; p && *p;) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        if (len) { /* an empty entry (a:b::c, a trailing colon) names no folder */
            char *dir = lrc_xmalloc(len + 1);
            memcpy(dir, p, len);
            dir[len] = 0;
            int rc = push_folder(L, dir, err);
            free(dir);
            if (rc) {
                lua_pop(L, 1);
                return rc;
            }
            lua_rawseti(L, -2, ++levels);
        }
        p = colon ? colon + 1 : p + len;
    }
    push_builtin(L);
    lua_rawseti(L, -2, ++levels);
    return LRC_OK;
}

const lrc_embedded *lrc_embedded_model(const char *file)
{
    for (int i = 0; i < lrc_embedded_count; i++)
        if (!strcmp(lrc_embedded_files[i].name, file)) return &lrc_embedded_files[i];
    return NULL;
}

/* load(name, builtin): runs the model file and returns what it returned. */
static int load_family(lua_State *L)
{
    const char *name = luaL_checkstring(L, 1);
    int rc;
    if (lua_toboolean(L, 2)) {
        const lrc_embedded *e = lrc_embedded_model(name);
        if (!e) return luaL_error(L, "%s: not a built-in model", name);
        lua_pushfstring(L, "@%s", name);
        rc = luaL_loadbufferx(L, e->source, e->len, lua_tostring(L, -1), "t");
    } else {
        rc = luaL_loadfilex(L, name, "t");
    }
    if (rc) return lua_error(L);
    lua_call(L, 0, 1);
    return 1;
}

void lrc_hf_push_family_loader(lua_State *L) { lua_pushcfunction(L, load_family); }
