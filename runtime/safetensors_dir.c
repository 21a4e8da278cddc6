/* safetensors_dir.c — the weights of a Hugging Face model directory:
 * DIR/model.safetensors, or the shards that DIR/model.safetensors.index.json
 * lists ({"metadata": {...}, "weight_map": {tensor: shard file}}), read
 * into one set. Every tensor the index names must be in its shard and every
 * tensor of a shard in the index, so a damaged directory is refused whole. */
#include "lrc_runtime.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_INDEX (64u << 20)

static int read_index(const char *path, cJSON **out, lrc_err *err)
{
    size_t len = 0;
    char *buf = lrc_read_file(path, &len, err);
    if (!buf) return LRC_EUSER;
    bool nomem = false;
    *out = len > MAX_INDEX ? NULL : lrc_json_parse(buf, len, NULL, &nomem);
    int rc = LRC_OK;
    if (len > MAX_INDEX) rc = lrc_err_set(err, "%s: %zu bytes, over the %u-byte limit", path, len, MAX_INDEX);
    else if (nomem) rc = lrc_err_nomem(err, "reading %s", path);
    else if (!*out) {
        const char *at = cJSON_GetErrorPtr();
        rc = lrc_err_set(err, "%s: invalid JSON near byte offset %zu", path,
                         at && at >= buf && at <= buf + len ? (size_t)(at - buf) : (size_t)0);
    }
    free(buf);
    return rc;
}

/* Loads one shard and moves its tensors into out, each checked against the
 * index's weight_map. */
static int take_shard(const char *dir, const char *index, const char *shard, const cJSON *map, lrc_tensor_set *out,
                      lrc_err *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, shard);
    lrc_tensor_set s;
    struct stat st;
    /* a plain file: an index or a directory here would load the index again, forever */
    if (lrc_safetensors_is_index(shard) || (stat(path, &st) == 0 && !S_ISREG(st.st_mode)))
        return lrc_err_set(err, "%s: shard '%s' is not a safetensors file", index, shard);
    if (lrc_safetensors_load(path, &s, err)) {
        lrc_err_prefix(err, "%s names shard %s", index, shard);
        return LRC_EUSER;
    }
    int rc = LRC_OK;
    for (int i = 0; i < s.n && !rc; i++) {
        const cJSON *want = cJSON_GetObjectItemCaseSensitive(map, s.items[i]->name);
        if (!cJSON_IsString(want) || strcmp(want->valuestring, shard))
            rc = lrc_err_set(err, "%s: tensor '%s' is in %s, but the index %s", index, s.items[i]->name, shard,
                             cJSON_IsString(want) ? "puts it in another shard" : "does not list it");
        else {
            lrc_tensor *t = s.items[i];
            s.items[i] = NULL; /* out owns it now, or freed it on failure */
            rc = lrc_tensor_set_add(out, t, err);
        }
    }
    lrc_tensor_set_clear(&s);
    return rc;
}

static int load_index(const char *dir, const char *index, lrc_tensor_set *out, lrc_err *err)
{
    cJSON *root = NULL;
    if (read_index(index, &root, err)) return LRC_EUSER;
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    int rc = LRC_OK;
    if (!cJSON_IsObject(map)) rc = lrc_err_set(err, "%s: no \"weight_map\" object", index);
    for (const cJSON *e = map ? map->child : NULL; e && !rc; e = e->next) {
        if (!cJSON_IsString(e)) {
            rc = lrc_err_set(err, "%s: weight_map entry '%s' is not a file name", index, e->string);
            break;
        }
        const char *shard = e->valuestring;
        if (!*shard || strchr(shard, '/') || !strcmp(shard, "..") || !strcmp(shard, "."))
            rc = lrc_err_set(err, "%s: shard '%s' (tensor '%s') is not a file name in the directory", index, shard,
                             e->string);
        bool seen = false; /* each shard once, at the first tensor that names it */
        for (const cJSON *p = map->child; p != e && !seen; p = p->next) seen = !strcmp(p->valuestring, shard);
        if (!rc && !seen) rc = take_shard(dir, index, shard, map, out, err);
        if (!rc && !lrc_tensor_set_find(out, e->string))
            rc = lrc_err_set(err, "%s: tensor '%s' is listed in %s, which does not hold it", index, e->string, shard);
    }
    cJSON_Delete(root);
    return rc;
}

char *lrc_safetensors_dir_file(const char *dir)
{
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (stat(path, &st) == 0) return lrc_strdup(path);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (stat(path, &st) == 0) return lrc_strdup(path);
    return lrc_strdup(dir); /* NULL in all three when out of memory */
}

bool lrc_safetensors_is_index(const char *path)
{
    static const char suffix[] = ".safetensors.index.json";
    size_t n = strlen(path), k = sizeof suffix - 1;
    return n >= k && !strcmp(path + n - k, suffix);
}

int lrc_safetensors_load_index(const char *index, lrc_tensor_set *out, lrc_err *err)
{
    lrc_tensor_set_init(out);
    char *dir = lrc_strdup(index), *slash = dir ? strrchr(dir, '/') : NULL;
    if (!dir) return lrc_err_nomem(err, "reading %s", index);
    if (slash) *slash = 0;
    int rc = load_index(slash ? dir : ".", index, out, err);
    free(dir);
    if (rc) lrc_tensor_set_clear(out);
    return rc;
}

int lrc_safetensors_load_dir(const char *dir, lrc_tensor_set *out, lrc_err *err)
{
    lrc_tensor_set_init(out);
    char *file = lrc_safetensors_dir_file(dir);
    int rc;
    if (!file) rc = lrc_err_nomem(err, "reading %s", dir);
    else if (!strcmp(file, dir))
        rc = lrc_err_set(err, "%s: a directory with neither model.safetensors nor model.safetensors.index.json "
                              "(lrc reads safetensors: save_pretrained(..., safe_serialization=True))", dir);
    else if (lrc_safetensors_is_index(file)) rc = lrc_safetensors_load_index(file, out, err);
    else rc = lrc_safetensors_load(file, out, err);
    free(file);
    return rc;
}
