/* train_run.c — a training run's settings in RUN_DIR/run.json: written by
 * lrc train, read by --resume (and by export and the tools that take a run
 * directory), and the options --resume takes beside them. */
#include "cli.h"
#include "cli_targets.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The run's settings, kept in RUN_DIR/run.json so that --resume continues
 * the same run (schedule of the same steps, same data, same seed). */
int cli_run_save(const char *dir, const cli_args *a, lrc_err *err)
{
    cJSON *o = cJSON_CreateObject(), *sets = cJSON_AddArrayToObject(o, "sets");
    cJSON_AddStringToObject(o, "model", a->m.model);
    if (a->m.preset) cJSON_AddStringToObject(o, "preset", a->m.preset);
    for (int i = 0; i < a->m.n_sets; i++) cJSON_AddItemToArray(sets, cJSON_CreateString(a->m.sets[i]));
    cJSON_AddNumberToObject(o, "steps", (double)a->steps);
    cJSON_AddNumberToObject(o, "lr", a->lr);
    cJSON_AddNumberToObject(o, "batch", (double)a->batch);
    cJSON_AddNumberToObject(o, "seq", (double)a->seq);
    cJSON_AddNumberToObject(o, "warmup", a->warmup);
    cJSON_AddNumberToObject(o, "eval_every", (double)a->eval_every);
    if (a->val_tokens) cJSON_AddNumberToObject(o, "val_tokens", (double)a->val_tokens);
    cJSON_AddNumberToObject(o, "seed", (double)a->seed);
    cJSON_AddNumberToObject(o, "clip", a->clip);
    cJSON_AddNumberToObject(o, "accum", (double)a->accum);
    cJSON_AddNumberToObject(o, "weight_decay", a->weight_decay);
    cJSON_AddBoolToObject(o, "decay_all", a->decay_all);
    cJSON_AddNumberToObject(o, "crop_pad", (double)a->crop_pad);
    cJSON_AddStringToObject(o, "target", a->target);
    cJSON_AddBoolToObject(o, "flip", a->flip);
    if (a->data) cJSON_AddStringToObject(o, "data", a->data);
    if (a->tokenizer) { /* the run's own copy, beside run.json */
        cJSON_AddStringToObject(o, "tokenizer", "tokenizer.json");
        cJSON_AddStringToObject(o, "tokenizer_from", a->tokenizer);
    }
    char *text = cJSON_Print(o), path[4200];
    cJSON_Delete(o);
    snprintf(path, sizeof path, "%s/run.json", dir);
    FILE *f = fopen(path, "w");
    int rc = !f || fputs(text, f) == EOF || fclose(f) ? lrc_err_set(err, "%s: cannot write: %s", path, strerror(errno)) : LRC_OK;
    cJSON_free(text);
    return rc;
}

int cli_run_load(const char *dir, cli_args *a, cJSON **keep, lrc_err *err)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/run.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return lrc_err_set(err, "%s: not a run directory (no run.json: %s)", dir, strerror(errno));
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cJSON *o = *keep = cJSON_Parse(buf);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(o, "model"), *sets = cJSON_GetObjectItemCaseSensitive(o, "sets");
    if (!cJSON_IsString(model) || !cJSON_IsArray(sets)) return lrc_err_set(err, "%s: damaged (no model or sets)", path);
    a->m.model = model->valuestring;
    const cJSON *preset = cJSON_GetObjectItemCaseSensitive(o, "preset"), *data = cJSON_GetObjectItemCaseSensitive(o, "data");
    a->m.preset = cJSON_IsString(preset) ? preset->valuestring : NULL;
    a->data = cJSON_IsString(data) ? data->valuestring : NULL;
    cJSON *tok = cJSON_GetObjectItemCaseSensitive(o, "tokenizer");
    a->tokenizer = NULL;
    if (cJSON_IsString(tok)) { /* the run directory's copy; the JSON keeps the path */
        char tp[4300];
        snprintf(tp, sizeof tp, "%s/%s", dir, tok->valuestring);
        if (!cJSON_SetValuestring(tok, tp)) return lrc_err_set(err, "out of memory");
        a->tokenizer = tok->valuestring;
    }
    a->m.n_sets = 0;
    for (const cJSON *s = sets->child; s; s = s->next)
        if (cJSON_IsString(s)) {
            a->m.sets = realloc(a->m.sets, (size_t)(a->m.n_sets + 1) * sizeof *a->m.sets);
            a->m.sets[a->m.n_sets++] = s->valuestring;
        }
    static const char *keys[] = {"steps", "lr", "batch", "seq", "warmup", "eval_every", "seed"};
    double v[7];
    for (int i = 0; i < 7; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, keys[i]);
        if (!cJSON_IsNumber(x)) return lrc_err_set(err, "%s: damaged (no %s)", path, keys[i]);
        v[i] = x->valuedouble;
        /* counts a run divides by or allocates for (eval_every 0 would divide by zero) */
        bool count = i == 0 || i == 2 || i == 3 || i == 5;
        if (count && !(v[i] >= 1 && v[i] <= 1e12)) return lrc_err_set(err, "%s: damaged (%s %g)", path, keys[i], v[i]);
    }
    a->steps = (int64_t)v[0], a->lr = v[1], a->batch = (int64_t)v[2], a->seq = (int64_t)v[3];
    a->warmup = v[4], a->eval_every = (int64_t)v[5], a->seed = (int64_t)v[6];
    const cJSON *clip = cJSON_GetObjectItemCaseSensitive(o, "clip"), *vt = cJSON_GetObjectItemCaseSensitive(o, "val_tokens");
    a->clip = cJSON_IsNumber(clip) ? clip->valuedouble : 0;
    if (vt && (!cJSON_IsNumber(vt) || !(vt->valuedouble >= 1 && vt->valuedouble <= 1e12)))
        return lrc_err_set(err, "%s: damaged (val_tokens)", path);
    a->val_tokens = vt ? (int64_t)vt->valuedouble : 0;
    const cJSON *accum = cJSON_GetObjectItemCaseSensitive(o, "accum");
    a->accum = cJSON_IsNumber(accum) && accum->valuedouble >= 1 ? (int64_t)accum->valuedouble : 1;
    const cJSON *wd = cJSON_GetObjectItemCaseSensitive(o, "weight_decay");
    a->weight_decay = cJSON_IsNumber(wd) ? wd->valuedouble : 0;
    a->decay_all = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "decay_all"));
    const cJSON *pad = cJSON_GetObjectItemCaseSensitive(o, "crop_pad");
    a->crop_pad = cJSON_IsNumber(pad) ? (int64_t)pad->valuedouble : -1;
    a->flip = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "flip"));
    const cJSON *target = cJSON_GetObjectItemCaseSensitive(o, "target");
    const lrc_target *t = cJSON_IsString(target) ? lrc_target_find(target->valuestring) : NULL;
    if (t && t->ex->train) a->target = target->valuestring;
    return LRC_OK;
}

/* The first argument that --resume cannot take, or NULL: the run goes on
 * with its run.json's settings, so any other option (or a model) would be
 * ignored, and is refused instead. An option may be abbreviated, as
 * getopt_long allows (which then refuses an ambiguous one). */
const char *cli_run_resume_extra(int argc, char **argv)
{
    static const char *takes[] = {"--resume", "--stop-after", "--threads", "--zero"};
    for (int i = 1; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        size_t n = eq ? (size_t)(eq - argv[i]) : strlen(argv[i]);
        bool ok = !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
        for (int k = 0; k < 4 && !ok; k++)
            if (n > 2 && n <= strlen(takes[k]) && !strncmp(argv[i], takes[k], n)) {
                ok = true;
                if (!eq) i++; /* its value */
            }
        if (!ok) return argv[i];
    }
    return NULL;
}
