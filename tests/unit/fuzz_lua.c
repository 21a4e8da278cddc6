/* fuzz_lua.c — the Lua state that the frontend's fuzzers (fuzz_hf_config.c,
 * fuzz_model_lua.c) run models in. It defines luaL_openlibs, which
 * lrc_model_load calls on each new state: the linker takes the program's
 * definition before liblua's shared one. The state gets the same libraries
 * less what a mutated model file must not reach (os.execute, os.remove,
 * os.exit, io, which could also wait on stdin, dofile and loadfile, modules
 * from files and C libraries, and debug, which could lift lrc's
 * instruction limit), and an allocator that refuses past FUZZ_LUA_MAX_BYTES:
 * a model that grows without end then ends in Lua's "not enough memory". */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <stddef.h>

void luaL_openlibs(lua_State *L);

#define FUZZ_LUA_MAX_BYTES ((size_t)512 << 20)

/* One state at a time: the fuzzers close each model's before the next. */
static struct {
    lua_Alloc f;
    void *ud;
    size_t used;
} lim;

static void *limited_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    (void)ud;
    size_t old = ptr ? osize : 0; /* without ptr, osize is the kind of object */
    if (nsize > old && lim.used - old + nsize > FUZZ_LUA_MAX_BYTES) return NULL;
    void *p = lim.f(lim.ud, ptr, osize, nsize);
    if (p || !nsize) lim.used = lim.used + nsize > old ? lim.used + nsize - old : 0;
    return p;
}

void luaL_openlibs(lua_State *L)
{
    static const luaL_Reg libs[] = {{LUA_GNAME, luaopen_base},       {LUA_LOADLIBNAME, luaopen_package},
                                    {LUA_COLIBNAME, luaopen_coroutine}, {LUA_TABLIBNAME, luaopen_table},
                                    {LUA_OSLIBNAME, luaopen_os},       {LUA_STRLIBNAME, luaopen_string},
                                    {LUA_MATHLIBNAME, luaopen_math},   {LUA_UTF8LIBNAME, luaopen_utf8},
                                    {NULL, NULL}};
    for (const luaL_Reg *l = libs; l->func; l++) {
        luaL_requiref(L, l->name, l->func, 1);
        lua_pop(L, 1);
    }
    static const char *const os_drop[] = {"execute", "remove", "rename", "exit", "tmpname", "setlocale", NULL};
    lua_getglobal(L, LUA_OSLIBNAME);
    for (int i = 0; os_drop[i]; i++) lua_pushnil(L), lua_setfield(L, -2, os_drop[i]);
    lua_pop(L, 1);
    lua_getglobal(L, LUA_LOADLIBNAME); /* require finds lrc's embedded modules (preload) only */
    lua_pushnil(L), lua_setfield(L, -2, "loadlib");
    lua_pushliteral(L, ""), lua_setfield(L, -2, "path");
    lua_pushliteral(L, ""), lua_setfield(L, -2, "cpath");
    lua_pop(L, 1);
    lua_pushnil(L), lua_setglobal(L, "dofile");
    lua_pushnil(L), lua_setglobal(L, "loadfile");
    /* what the state holds already, in the allocator's count from now on */
    lim.f = lua_getallocf(L, &lim.ud);
    lim.used = (size_t)lua_gc(L, LUA_GCCOUNT) * 1024 + (size_t)lua_gc(L, LUA_GCCOUNTB);
    lua_setallocf(L, limited_alloc, NULL);
}
