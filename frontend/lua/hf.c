/* hf.c — a Hugging Face model directory (config.json beside model.safetensors
 * or its shards) as a model: reading config.json into a Lua table for
 * lrc.hf (frontend/lua/hf.lua), which maps it onto a built-in model and its
 * config keys. */
#include "lrc_lua.h"

#include <math.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Real configs are a few kilobytes; a larger one is not a config. */
#define MAX_CONFIG (4u << 20)
#define MAX_DEPTH 32

bool lrc_hf_is_dir(const char *path)
{
    struct stat st;
    if (stat(path, &st) || !S_ISDIR(st.st_mode)) return false;
    char cfg[4096];
    if (snprintf(cfg, sizeof cfg, "%s/config.json", path) >= (int)sizeof cfg) return false;
    return stat(cfg, &st) == 0;
}

/* Offset of the first byte that does not start or continue valid UTF-8
 * (no overlongs, surrogates or code points past U+10FFFF), or -1. */
static long utf8_invalid_at(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (!len || i + len > n) return (long)i;
        unsigned cp = len == 1 ? c : c & (0x7Fu >> len);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return (long)i;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        static const unsigned min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return (long)i;
        i += len;
    }
    return -1;
}

/* Whether the text ends inside a string, object or array: a file cut short. */
static bool json_ends_open(const char *s, size_t n)
{
    int depth = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        if (in_str) {
            if (s[i] == '\\') i++;
            else if (s[i] == '"') in_str = false;
        } else if (s[i] == '"') in_str = true;
        else if (s[i] == '{' || s[i] == '[') depth++;
        else if (s[i] == '}' || s[i] == ']') depth--;
    }
    return in_str || depth > 0;
}

static int push_json(lua_State *L, const cJSON *v, int depth)
{
    if (depth > MAX_DEPTH) return -1;
    luaL_checkstack(L, 4, "config.json");
    if (cJSON_IsObject(v) || cJSON_IsArray(v)) {
        lua_newtable(L);
        lua_Integer i = 1;
        for (const cJSON *c = v->child; c; c = c->next) {
            if (push_json(L, c, depth + 1)) return -1;
            if (cJSON_IsArray(v)) lua_rawseti(L, -2, i++);
            else lua_setfield(L, -2, c->string);
        }
        /* lrc.hf tells an array from an object by this mark */
        lua_pushboolean(L, cJSON_IsArray(v));
        lua_setfield(L, -2, "__array");
    } else if (cJSON_IsString(v)) {
        lua_pushstring(L, v->valuestring);
    } else if (cJSON_IsBool(v)) {
        lua_pushboolean(L, cJSON_IsTrue(v));
    } else if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        /* cJSON keeps no text, so 10000.0 reads as an integer: lrc.hf and the
         * config types make integers numbers where a number is wanted */
        if (d >= -9007199254740992.0 && d <= 9007199254740992.0 && d == (double)(lua_Integer)d)
            lua_pushinteger(L, (lua_Integer)d);
        else
            lua_pushnumber(L, d);
    } else {
        lua_pushlightuserdata(L, NULL); /* null: lrc.null; lrc.hf's readers take it as absent */
    }
    return 0;
}

int lrc_hf_push_config(lua_State *L, const char *dir, lrc_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    size_t len = 0;
    char *buf = lrc_read_file(path, &len, err);
    if (!buf) return LRC_EUSER;
    int rc = LRC_OK;
    long bad = utf8_invalid_at((const unsigned char *)buf, len);
    cJSON *root = NULL;
    if (len > MAX_CONFIG) rc = lrc_err_set(err, "%s: %zu bytes, over the %u-byte limit for a config", path, len, MAX_CONFIG);
    else if (bad >= 0 || memchr(buf, 0, len))
        rc = lrc_err_set(err, "%s: not UTF-8 text (byte offset %ld)", path, bad >= 0 ? bad : (long)((char *)memchr(buf, 0, len) - buf));
    else if (!(root = cJSON_ParseWithLength(buf, len))) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= buf && at <= buf + len ? (size_t)(at - buf) : 0;
        rc = lrc_err_set(err, "%s: invalid JSON near byte offset %zu%s", path, off,
                         json_ends_open(buf, len) ? " (the file ends inside an object: truncated?)" : "");
    } else if (!cJSON_IsObject(root))
        rc = lrc_err_set(err, "%s: the top level is not a JSON object", path);
    else if (push_json(L, root, 0))
        rc = lrc_err_set(err, "%s: nested deeper than %d levels", path, MAX_DEPTH);
    cJSON_Delete(root);
    free(buf);
    return rc;
}

/* ---- writing (lrc export --hf) ---------------------------------------- */

static int key_cmp(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static bool is_array(lua_State *L, int idx)
{
    lua_getfield(L, idx, "__array");
    bool marked = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return marked || lua_rawlen(L, idx) > 0;
}

/* A Lua float stays a float in the text: cJSON writes 8.0 as 8, which
 * Python reads as an int, and transformers wants floats where it checks
 * (rope_scaling's factor: "must be a float >= 1, got 8"). */
static cJSON *number_to_json(lua_State *L, int idx)
{
    double v = lua_tonumber(L, idx);
    if (lua_isinteger(L, idx) || !isfinite(v) || v != floor(v) || fabs(v) >= 1e15) return cJSON_CreateNumber(v);
    char buf[32];
    snprintf(buf, sizeof buf, "%.1f", v);
    return cJSON_CreateRaw(buf);
}

static cJSON *to_json(lua_State *L, int idx, int depth, const char *key, lrc_err *err)
{
    idx = lua_absindex(L, idx);
    if (depth > MAX_DEPTH) {
        lrc_err_set(err, "'%s': nested deeper than %d levels", key, MAX_DEPTH);
        return NULL;
    }
    switch (lua_type(L, idx)) {
    case LUA_TBOOLEAN: return cJSON_CreateBool(lua_toboolean(L, idx));
    case LUA_TSTRING: return cJSON_CreateString(lua_tostring(L, idx));
    case LUA_TNUMBER: return number_to_json(L, idx);
    case LUA_TLIGHTUSERDATA: return cJSON_CreateNull();
    case LUA_TTABLE: break;
    default: lrc_err_set(err, "'%s': a %s has no JSON form", key, luaL_typename(L, idx)); return NULL;
    }
    cJSON *out;
    if (is_array(L, idx)) {
        out = cJSON_CreateArray();
        for (lua_Integer i = 1; i <= (lua_Integer)lua_rawlen(L, idx); i++) {
            lua_rawgeti(L, idx, i);
            cJSON *v = to_json(L, -1, depth + 1, key, err);
            lua_pop(L, 1);
            if (!v) return cJSON_Delete(out), NULL;
            cJSON_AddItemToArray(out, v);
        }
        return out;
    }
    const char *keys[1024];
    int n = 0;
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING || n == 1024) {
            lua_pop(L, 1);
            lrc_err_set(err, "'%s': object keys must be strings (at most 1024)", key);
            return NULL;
        }
        keys[n++] = lua_tostring(L, -1);
    }
    qsort(keys, (size_t)n, sizeof *keys, key_cmp);
    out = cJSON_CreateObject();
    for (int i = 0; i < n; i++) {
        if (!strcmp(keys[i], "__array")) continue;
        lua_getfield(L, idx, keys[i]);
        cJSON *v = to_json(L, -1, depth + 1, keys[i], err);
        lua_pop(L, 1);
        if (!v) return cJSON_Delete(out), NULL;
        cJSON_AddItemToObject(out, keys[i], v);
    }
    return out;
}

int lrc_hf_write_json(lua_State *L, int idx, const char *path, lrc_err *err)
{
    cJSON *root = to_json(L, idx, 0, "config", err);
    if (!root) return lrc_err_prefix(err, "%s", path);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    size_t n = strlen(text);
    char *withnl = lrc_xmalloc(n + 2);
    memcpy(withnl, text, n);
    withnl[n] = '\n';
    cJSON_free(text);
    int rc = lrc_write_atomic(path, withnl, n + 1, err);
    free(withnl);
    return rc;
}

/* Llama 2's shape of tokenizer.json (BPE with byte fallback and no merges,
 * spaces normalized to U+2581): llama.cpp's own convert_hf_to_gguf.py takes
 * it by its Llama path, where a byte-level BPE is refused for a
 * pre-tokenizer it does not know. Every byte is one token, its value: ids
 * 0..255 are "<0xNN>", except 32, which is "\u2581" (what a space becomes). */
int lrc_hf_write_byte_tokenizer(const char *path, int64_t vocab, lrc_err *err)
{
    static const char space[] = "\xe2\x96\x81"; /* U+2581 */
    cJSON *root = cJSON_CreateObject(), *model = cJSON_CreateObject(), *v = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddNullToObject(root, "truncation");
    cJSON_AddNullToObject(root, "padding");
    cJSON_AddArrayToObject(root, "added_tokens");
    cJSON *norm = cJSON_AddObjectToObject(root, "normalizer");
    cJSON_AddStringToObject(norm, "type", "Replace");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(norm, "pattern"), "String", " ");
    cJSON_AddStringToObject(norm, "content", space);
    cJSON_AddNullToObject(root, "pre_tokenizer");
    cJSON_AddNullToObject(root, "post_processor");
    cJSON *dec = cJSON_AddObjectToObject(root, "decoder"), *steps = cJSON_AddArrayToObject(dec, "decoders");
    cJSON_AddStringToObject(dec, "type", "Sequence");
    cJSON *rep = cJSON_CreateObject();
    cJSON_AddStringToObject(rep, "type", "Replace");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(rep, "pattern"), "String", space);
    cJSON_AddStringToObject(rep, "content", " ");
    cJSON_AddItemToArray(steps, rep);
    static const char *const tail[] = {"ByteFallback", "Fuse"};
    for (int i = 0; i < 2; i++) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "type", tail[i]);
        cJSON_AddItemToArray(steps, d);
    }
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddNullToObject(model, "continuing_subword_prefix");
    cJSON_AddNullToObject(model, "end_of_word_suffix");
    cJSON_AddBoolToObject(model, "fuse_unk", 0);
    cJSON_AddBoolToObject(model, "byte_fallback", 1);
    for (int64_t id = 0; id < vocab; id++) {
        char tok[32];
        if (id == 32) snprintf(tok, sizeof tok, "%s", space);
        else if (id < 256) snprintf(tok, sizeof tok, "<0x%02X>", (unsigned)id);
        else snprintf(tok, sizeof tok, "<unused%lld>", (long long)(id - 256));
        cJSON_AddNumberToObject(v, tok, (double)id);
    }
    cJSON_AddItemToObject(model, "vocab", v);
    cJSON_AddArrayToObject(model, "merges");
    cJSON_AddItemToObject(root, "model", model);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    int rc = lrc_write_atomic(path, text, strlen(text), err);
    cJSON_free(text);
    return rc;
}
