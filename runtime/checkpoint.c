/* checkpoint.c — lrc train's state (parameters, AdamW's moments, the step
 * count and the random state of the data) and its checkpoint file, which
 * --resume reads back to continue a run bit for bit.
 *
 * The file is safetensors, so that other tools read the weights in it; its
 * __metadata__ {"format": "lrc-checkpoint", "version": "2"} is the magic
 * number and the version. Version 1 (lrc before the metadata) is the same
 * tensors without it, recognised by train.step and train.rng, and loads as
 * it always did: nothing else changed between the two. */
#include "lrc_runtime.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK_FORMAT "lrc-checkpoint"
#define CK_VERSION 2

/* Every tensor named `prefix + param name`, in order: the file's (checked
 * against the parameter, since AdamW reads it element for element) or a new
 * one of zeros. */
static lrc_tensor **moments(lrc_tensor_set *ck, const lrc_tensor_set *params, const char *prefix, const char *path,
                            lrc_err *err)
{
    lrc_tensor **out = lrc_calloc((size_t)params->n + 1, sizeof *out);
    if (!out) return lrc_err_nomem(err, "%s: for the moments of %d parameters", path, params->n), NULL;
    for (int i = 0; i < params->n; i++) {
        char name[600], b1[96], b2[96];
        const lrc_tensor *p = params->items[i];
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        lrc_tensor *t = lrc_tensor_set_find(ck, name);
        if (t && (t->dtype != LRC_F32 || !lrc_shape_eq(&t->shape, &p->shape))) {
            lrc_err_set(err, "%s: '%s' is %s %s, its parameter F32 %s: a damaged checkpoint", path ? path : "checkpoint", name,
                        lrc_dtype_st_name(t->dtype), lrc_shape_str(&t->shape, b1, sizeof b1), lrc_shape_str(&p->shape, b2, sizeof b2));
            t = NULL;
        } else if (!t && (!(t = lrc_tensor_new(name, LRC_F32, &p->shape, err)) || lrc_tensor_set_add(ck, t, err))) {
            t = NULL;
        }
        if (!t) {
            free(out);
            return NULL;
        }
        out[i] = t;
    }
    return out;
}

/* ck takes the parameters (a bound copy replaces the file's tensor of its
 * name); then the view in the graph's order, and the moments. */
static int arrange(lrc_train_state *s, const lrc_graph *g, lrc_tensor_set *params, const char *path, lrc_err *err)
{
    int rc = LRC_OK;
    for (int i = 0; i < params->n && !rc; i++) {
        lrc_tensor *old = lrc_tensor_set_find(&s->ck, params->items[i]->name);
        if (old) { /* resumed: the bound copy is the one that trains */
            for (int j = 0; j < s->ck.n; j++)
                if (s->ck.items[j] == old) {
                    lrc_tensor_free(old);
                    s->ck.items[j] = params->items[i];
                }
        } else if ((rc = lrc_tensor_set_add(&s->ck, params->items[i], err))) {
            for (int j = i; j < params->n; j++) lrc_tensor_free(params->items[j]);
        }
    }
    free(params->items); /* the tensors are ck's now */
    lrc_tensor_set_init(params);
    for (int i = 0; i < g->n_nodes && !rc; i++)
        if (g->nodes[i].op == LRC_OP_PARAM) {
            lrc_tensor **items = lrc_realloc(s->params.items, (size_t)(s->params.n + 1) * sizeof *s->params.items);
            if (!items) {
                rc = lrc_err_nomem(err, "%s: for the list of %d parameters", path, s->params.n + 1);
                break;
            }
            s->params.items = items;
            s->params.items[s->params.n++] = lrc_tensor_set_find(&s->ck, g->nodes[i].name);
        }
    if (!rc && (!(s->m = moments(&s->ck, &s->params, "adam.m/", path, err)) || !(s->v = moments(&s->ck, &s->params, "adam.v/", path, err))))
        rc = LRC_EUSER;
    return rc;
}

int lrc_train_state_new(lrc_train_state *s, const lrc_graph *g, uint64_t seed, lrc_pool *pool, lrc_err *err)
{
    memset(s, 0, sizeof *s);
    lrc_tensor_set_init(&s->ck);
    lrc_tensor_set_init(&s->params);
    lrc_rng_seed(&s->rng, seed);
    lrc_tensor_set params;
    lrc_shape one = {1, {1}}, eight = {1, {8}};
    int rc = lrc_params_init(g, seed, pool, &params, err);
    lrc_tensor *st = rc ? NULL : lrc_tensor_new("train.step", LRC_I32, &one, err);
    lrc_tensor *rs = st ? lrc_tensor_new("train.rng", LRC_I32, &eight, err) : NULL;
    if (!rc && (!rs || lrc_tensor_set_add(&s->ck, st, err) || lrc_tensor_set_add(&s->ck, rs, err))) {
        lrc_tensor_set_clear(&params);
        rc = LRC_EUSER;
    }
    return rc ? rc : arrange(s, g, &params, NULL, err);
}

/* The file's version from its __metadata__: 0 when it has no "format" (an
 * lrc checkpoint of version 1, or not one at all), -1 when it is another
 * kind of file (reported). */
static int file_version(const lrc_tensor_set *ck, const char *path, lrc_err *err)
{
    cJSON *meta = ck->metadata_json ? cJSON_Parse(ck->metadata_json) : NULL;
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(meta, "format"), *v = cJSON_GetObjectItemCaseSensitive(meta, "version");
    int version = 0;
    if (cJSON_IsString(f) && strcmp(f->valuestring, CK_FORMAT)) {
        lrc_err_set(err, "%s: not an lrc training checkpoint (its metadata says format '%.64s', a checkpoint's is '" CK_FORMAT "')", path,
                    f->valuestring);
        version = -1;
    } else if (cJSON_IsString(f)) {
        char *end;
        long n = cJSON_IsString(v) ? strtol(v->valuestring, &end, 10) : 0;
        if (!cJSON_IsString(v) || !*v->valuestring || *end || n < 1) {
            lrc_err_set(err, "%s: a damaged checkpoint (no version number in its metadata)", path);
            version = -1;
        } else if (n > CK_VERSION) {
            lrc_err_set(err, "%s: checkpoint format version %ld, this lrc reads versions 1 to %d: resume it with the newer lrc that wrote it",
                        path, n, CK_VERSION);
            version = -1;
        } else {
            version = (int)n;
        }
    }
    cJSON_Delete(meta);
    return version;
}

static int load(const char *path, const lrc_graph *g, lrc_train_state *s, lrc_err *err)
{
    memset(s, 0, sizeof *s);
    lrc_tensor_set_init(&s->ck);
    lrc_tensor_set_init(&s->params);
    int rc = lrc_safetensors_load(path, &s->ck, err);
    if (!rc && file_version(&s->ck, path, err) < 0) rc = LRC_EUSER;
    const lrc_tensor *st = rc ? NULL : lrc_tensor_set_find(&s->ck, "train.step"), *rs = rc ? NULL : lrc_tensor_set_find(&s->ck, "train.rng");
    if (!rc && (!st || !rs))
        return lrc_err_set(err, "%s: not an lrc training checkpoint (no train.step / train.rng)", path);
    if (!rc && (st->dtype != LRC_I32 || st->nbytes != 4 || rs->dtype != LRC_I32 || rs->nbytes != sizeof s->rng.s))
        return lrc_err_set(err, "%s: a damaged checkpoint (train.step must be I32 [1], train.rng I32 [8])", path);
    if (rc) return rc;
    s->step = ((const int32_t *)st->data)[0];
    memcpy(s->rng.s, rs->data, sizeof s->rng.s);
    if (s->step < 0 || !(s->rng.s[0] | s->rng.s[1] | s->rng.s[2] | s->rng.s[3])) /* xoshiro's state is never all zero */
        return lrc_err_set(err, "%s: a damaged checkpoint (train.step %lld, or a random state of zeros)", path, (long long)s->step);
    lrc_tensor_set model_part, params;
    lrc_tensor_set_init(&model_part);
    for (int i = 0; i < s->ck.n && !rc; i++)
        if (strncmp(s->ck.items[i]->name, "adam.", 5) && strncmp(s->ck.items[i]->name, "train.", 6)) {
            lrc_tensor *t = lrc_tensor_to_f32(s->ck.items[i], err);
            rc = t ? lrc_tensor_set_add(&model_part, t, err) : LRC_EUSER;
        }
    if (!rc) rc = lrc_params_bind(g, &model_part, path, &params, err);
    lrc_tensor_set_clear(&model_part);
    return rc ? rc : arrange(s, g, &params, path, err);
}


int lrc_checkpoint_load(const char *path, const lrc_graph *g, lrc_train_state *s, lrc_err *err)
{
    return lrc_err_one_line(err, load(path, g, s, err));
}

int lrc_checkpoint_save(const char *path, lrc_train_state *s, lrc_err *err)
{
    lrc_tensor *st = lrc_tensor_set_find(&s->ck, "train.step"), *rs = lrc_tensor_set_find(&s->ck, "train.rng");
    if (s->step > INT32_MAX) return lrc_err_set(err, "%s: step %lld does not fit the checkpoint's I32 train.step", path, (long long)s->step);
    ((int32_t *)st->data)[0] = (int32_t)s->step;
    memcpy(rs->data, s->rng.s, sizeof s->rng.s);
    free(s->ck.metadata_json); /* a version 1 file resumed is written as version 2 */
    char meta[64];
    snprintf(meta, sizeof meta, "{\"format\":\"" CK_FORMAT "\",\"version\":\"%d\"}", CK_VERSION);
    if (!(s->ck.metadata_json = lrc_strdup(meta))) return lrc_err_nomem(err, "%s: for the checkpoint's metadata", path);
    return lrc_safetensors_save(path, &s->ck, err); /* a temporary file renamed over: never partial */
}

void lrc_train_state_free(lrc_train_state *s)
{
    free(s->m);
    free(s->v);
    free(s->params.items); /* ck's tensors */
    lrc_tensor_set_clear(&s->ck);
    memset(s, 0, sizeof *s);
}
