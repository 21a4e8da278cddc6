/* tokenizer_load.c — a Hugging Face tokenizer.json into an lrc_tokenizer
 * (tokenizer_internal.h), through cJSON. Every key is checked against what
 * lrc implements: an unknown type, key or value ends the load with its JSON
 * path, so that no feature is silently approximated. */
#include "tokenizer_internal.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_JSON (1u << 30)
/* Ids index tables of the largest id + 1 entries: real vocabularies stay
 * far below (Gemma's: 256 000). */
#define MAX_ID (1 << 24)

/* ---- JSON checks ------------------------------------------------------------- */

typedef struct {
    const char *what; /* the file, for messages */
    lrc_err *err;
} ctx;

/* Keys and tokens in a message may hold any char: control chars are
 * written as \xNN, so that the message stays one line. */
static int fail(ctx *c, const char *path, const char *msg)
{
    char raw[1024], *o = c->err ? c->err->msg : NULL;
    snprintf(raw, sizeof raw, "%s: %s: %s", c->what, path, msg);
    if (!o) return LRC_EUSER;
    c->err->nomem = false;
    size_t k = 0, cap = sizeof c->err->msg;
    for (const unsigned char *r = (const unsigned char *)raw; *r && k + 5 < cap; r++)
        if (*r < 0x20 || *r == 0x7f) k += (size_t)snprintf(o + k, cap - k, "\\x%02X", *r);
        else o[k++] = (char)*r;
    o[k] = 0;
    return LRC_EUSER;
}

/* "WHAT: PATH: out of memory", marked as lrc_err_nomem marks it. */
static int no_memory(ctx *c, const char *path)
{
    fail(c, path, "out of memory");
    if (c->err) c->err->nomem = true;
    return LRC_EUSER;
}

/* Every key of o is in the NULL-terminated list. */
static int only(ctx *c, const cJSON *o, const char *path, const char *const *keys)
{
    for (const cJSON *k = o->child; k; k = k->next) {
        int i = 0;
        while (keys[i] && strcmp(keys[i], k->string)) i++;
        if (!keys[i]) {
            char m[300];
            snprintf(m, sizeof m, "the key \"%.200s\" is not implemented by lrc's tokenizer", k->string);
            char p[300];
            snprintf(p, sizeof p, "%s.%.200s", path, k->string);
            return fail(c, p, m);
        }
    }
    return 0;
}

/* o[key] as a string (required), into *out (not copied). */
static int get_str(ctx *c, const cJSON *o, const char *path, const char *key, const char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    char p[300];
    snprintf(p, sizeof p, "%s.%s", path, key);
    if (!cJSON_IsString(v)) return fail(c, p, v ? "must be a string" : "is missing");
    *out = v->valuestring;
    return 0;
}

/* o[key] as a bool, def when absent. */
static int get_bool(ctx *c, const cJSON *o, const char *path, const char *key, bool def, bool *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    char p[300];
    snprintf(p, sizeof p, "%s.%s", path, key);
    if (!v || cJSON_IsNull(v)) return *out = def, 0;
    if (!cJSON_IsBool(v)) return fail(c, p, "must be true or false");
    *out = cJSON_IsTrue(v);
    return 0;
}

static int get_int(ctx *c, const cJSON *o, const char *path, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    char p[300];
    snprintf(p, sizeof p, "%s.%s", path, key);
    if (!cJSON_IsNumber(v)) return fail(c, p, v ? "must be an integer" : "is missing");
    double d = v->valuedouble;
    if (!(d >= (double)lo && d <= (double)hi) || d != (double)(int64_t)d) return fail(c, p, "is not an integer in range");
    *out = (int64_t)d;
    return 0;
}

static const char *type_of(ctx *c, const cJSON *o, const char *path)
{
    const char *t = NULL;
    if (!cJSON_IsObject(o)) return fail(c, path, "must be an object or null"), NULL;
    return get_str(c, o, path, "type", &t) ? NULL : t;
}

/* A Split or Replace pattern: {"String": s} or {"Regex": r}. */
static int get_pattern(ctx *c, const cJSON *o, const char *path, char **literal, pcre2_code **re)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pattern");
    char pp[300];
    snprintf(pp, sizeof pp, "%s.pattern", path);
    if (!cJSON_IsObject(p) || !p->child || p->child->next || !cJSON_IsString(p->child))
        return fail(c, pp, "must be {\"String\": ...} or {\"Regex\": ...}");
    char ps[320];
    snprintf(ps, sizeof ps, "%s.%s", pp, p->child->string);
    if (!strcmp(p->child->string, "String")) {
        if (!p->child->valuestring[0]) return fail(c, ps, "an empty pattern is not implemented");
        return (*literal = lrc_strdup(p->child->valuestring)) ? 0 : no_memory(c, ps);
    }
    if (strcmp(p->child->string, "Regex") || !re) return fail(c, ps, "is not implemented here (String or Regex)");
    int code;
    PCRE2_SIZE at;
    *re = pcre2_compile((PCRE2_SPTR)p->child->valuestring, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &code, &at,
                        NULL);
    if (!*re) {
        PCRE2_UCHAR m[256];
        pcre2_get_error_message(code, m, sizeof m);
        char msg[400];
        snprintf(msg, sizeof msg, "PCRE2 rejects the regex at offset %zu: %s", (size_t)at, (char *)m);
        return fail(c, ps, msg);
    }
    pcre2_jit_compile(*re, PCRE2_JIT_COMPLETE); /* the interpreter runs it where JIT is missing */
    return 0;
}

static int get_prepend(ctx *c, const cJSON *o, const char *path, tok_prepend *out)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "prepend_scheme");
    if (!s) {
        bool add = false;
        if (get_bool(c, o, path, "add_prefix_space", true, &add)) return 1;
        return *out = add ? PREPEND_ALWAYS : PREPEND_NEVER, 0;
    }
    char p[300];
    snprintf(p, sizeof p, "%s.prepend_scheme", path);
    const char *v = cJSON_IsString(s) ? s->valuestring : "";
    if (!strcmp(v, "always")) *out = PREPEND_ALWAYS;
    else if (!strcmp(v, "first")) *out = PREPEND_FIRST;
    else if (!strcmp(v, "never")) *out = PREPEND_NEVER;
    else return fail(c, p, "must be \"always\", \"first\" or \"never\"");
    return 0;
}

/* ---- normalizer, pre-tokenizer, decoder, post-processor ------------------------ */

/* Room for n + 1 entries in arr; false (arr as it was) when out of memory. */
#define GROW(arr, n) grow((void **)&(arr), (size_t)(n) + 1, sizeof *(arr))
static bool grow(void **arr, size_t n, size_t size)
{
    void *p = lrc_reallocarray(*arr, n, size);
    if (p) *arr = p;
    return p != NULL;
}

/* A "Sequence" of one stage: each item of o[key] through load, its path
 * PATH.key[i]. */
typedef int (*stage_loader)(ctx *c, lrc_tokenizer *t, const cJSON *o, const char *path);
static int load_sequence(ctx *c, lrc_tokenizer *t, const cJSON *o, const char *path, const char *key, stage_loader load)
{
    if (only(c, o, path, (const char *[]){"type", key, NULL})) return 1;
    const cJSON *l = cJSON_GetObjectItemCaseSensitive(o, key);
    char p[300];
    if (!cJSON_IsArray(l)) return snprintf(p, sizeof p, "%s must be an array", key), fail(c, path, p);
    int i = 0;
    for (const cJSON *e = l->child; e; e = e->next, i++) {
        snprintf(p, sizeof p, "%s.%s[%d]", path, key, i);
        if (load(c, t, e, p)) return 1;
    }
    return 0;
}

static int load_normalizer(ctx *c, lrc_tokenizer *t, const cJSON *o, const char *path)
{
    if (!o || cJSON_IsNull(o)) return 0;
    const char *type = type_of(c, o, path);
    if (!type) return 1;
    if (!strcmp(type, "Sequence")) return load_sequence(c, t, o, path, "normalizers", load_normalizer);
    if (!GROW(t->norm, t->n_norm)) return no_memory(c, path);
    tok_norm *n = &t->norm[t->n_norm];
    memset(n, 0, sizeof *n);
    const char *a = NULL;
    if (!strcmp(type, "Prepend")) {
        if (only(c, o, path, (const char *[]){"type", "prepend", NULL}) || get_str(c, o, path, "prepend", &a)) return 1;
        n->kind = NORM_PREPEND;
        if (!(n->a = lrc_strdup(a))) return no_memory(c, path);
    } else if (!strcmp(type, "Replace")) {
        if (only(c, o, path, (const char *[]){"type", "pattern", "content", NULL}) ||
            get_pattern(c, o, path, &n->a, NULL) || get_str(c, o, path, "content", &a))
            return free(n->a), 1;
        n->kind = NORM_REPLACE;
        if (!(n->b = lrc_strdup(a))) return free(n->a), no_memory(c, path);
    } else if (!strcmp(type, "NFC") || !strcmp(type, "NFD") || !strcmp(type, "NFKC") || !strcmp(type, "NFKD")) {
        if (only(c, o, path, (const char *[]){"type", NULL})) return 1;
        n->kind = NORM_UNICODE;
        n->form = (type[2] == 'K' ? 2 : 0) + (type[strlen(type) - 1] == 'D');
    } else {
        char p[300], m[300];
        snprintf(p, sizeof p, "%s.type", path);
        snprintf(m, sizeof m,
                 "the normalizer \"%.100s\" is not implemented (lrc has Sequence, Prepend, Replace, NFC, NFD, NFKC, NFKD)",
                 type);
        return fail(c, p, m);
    }
    t->n_norm++;
    return 0;
}

static int split_behavior(ctx *c, const cJSON *o, const char *path, tok_split_behavior *b)
{
    const char *v = NULL;
    if (get_str(c, o, path, "behavior", &v)) return 1;
    static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    for (int i = 0; i < 5; i++)
        if (!strcmp(v, names[i])) return *b = (tok_split_behavior)i, 0;
    char p[300];
    snprintf(p, sizeof p, "%s.behavior", path);
    return fail(c, p, "must be Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous");
}

/* tokenizers' ByteLevel regex (GPT-2's), which use_regex applies. */
static const char GPT2_SPLIT[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static int load_pre_one(ctx *c, lrc_tokenizer *t, const cJSON *o, const char *path, const char *type, tok_pre *p)
{
    if (!strcmp(type, "Split")) {
        p->kind = PRE_SPLIT;
        return only(c, o, path, (const char *[]){"type", "pattern", "behavior", "invert", NULL}) ||
               get_pattern(c, o, path, &p->literal, &p->re) || split_behavior(c, o, path, &p->behavior) ||
               get_bool(c, o, path, "invert", false, &p->invert);
    }
    if (!strcmp(type, "Metaspace")) {
        const char *r = NULL;
        p->kind = PRE_METASPACE;
        if (only(c, o, path,
                 (const char *[]){"type", "replacement", "prepend_scheme", "add_prefix_space", "split", "str_rep", NULL}) ||
            get_str(c, o, path, "replacement", &r) || get_prepend(c, o, path, &p->prepend) ||
            get_bool(c, o, path, "split", true, &p->split))
            return 1;
        p->replacement = lrc_strdup(r);
        return p->replacement ? 0 : no_memory(c, path);
    }
    if (!strcmp(type, "ByteLevel")) {
        bool use_regex = false, trim = false;
        p->kind = PRE_BYTELEVEL;
        if (only(c, o, path, (const char *[]){"type", "add_prefix_space", "trim_offsets", "use_regex", NULL}) ||
            get_bool(c, o, path, "add_prefix_space", true, &p->add_prefix_space) ||
            get_bool(c, o, path, "trim_offsets", true, &trim) || get_bool(c, o, path, "use_regex", true, &use_regex))
            return 1;
        p->behavior = SPLIT_ISOLATED;
        if (use_regex) {
            int code;
            PCRE2_SIZE at;
            p->re = pcre2_compile((PCRE2_SPTR)GPT2_SPLIT, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &code, &at, NULL);
            if (!p->re) return fail(c, path, "PCRE2 rejects GPT-2's split regex");
            pcre2_jit_compile(p->re, PCRE2_JIT_COMPLETE);
        }
        t->bytelevel = true;
        return 0;
    }
    char pp[300], m[300];
    snprintf(pp, sizeof pp, "%s.type", path);
    snprintf(m, sizeof m, "the pre-tokenizer \"%.100s\" is not implemented (lrc has Sequence, Split, Metaspace, ByteLevel)",
             type);
    return fail(c, pp, m);
}

static int load_pre(ctx *c, lrc_tokenizer *t, const cJSON *o, const char *path)
{
    if (!o || cJSON_IsNull(o)) return 0;
    const char *type = type_of(c, o, path);
    if (!type) return 1;
    if (!strcmp(type, "Sequence")) return load_sequence(c, t, o, path, "pretokenizers", load_pre);
    /* ByteLevel maps bytes to chars that a later step would see: only last */
    if (t->bytelevel) return fail(c, path, "a pre-tokenizer after ByteLevel is not implemented");
    if (!GROW(t->pre, t->n_pre)) return no_memory(c, path);
    tok_pre *p = &t->pre[t->n_pre++];
    memset(p, 0, sizeof *p);
    return load_pre_one(c, t, o, path, type, p);
}

static int load_decoder(ctx *c, lrc_tokenizer *t, const cJSON *o, const char *path)
{
    if (!o || cJSON_IsNull(o)) return 0;
    const char *type = type_of(c, o, path), *a = NULL, *b = NULL;
    if (!type) return 1;
    t->has_decoder = true;
    if (!strcmp(type, "Sequence")) return load_sequence(c, t, o, path, "decoders", load_decoder);
    if (!GROW(t->dec, t->n_dec)) return no_memory(c, path);
    tok_dec *d = &t->dec[t->n_dec];
    memset(d, 0, sizeof *d);
    if (!strcmp(type, "ByteLevel")) {
        d->kind = DEC_BYTELEVEL;
        if (only(c, o, path, (const char *[]){"type", "add_prefix_space", "trim_offsets", "use_regex", NULL})) return 1;
    } else if (!strcmp(type, "Metaspace")) {
        d->kind = DEC_METASPACE;
        if (only(c, o, path,
                 (const char *[]){"type", "replacement", "prepend_scheme", "add_prefix_space", "split", "str_rep", NULL}) ||
            get_str(c, o, path, "replacement", &a) || get_prepend(c, o, path, &d->prepend))
            return 1;
        if (!(d->a = lrc_strdup(a))) return no_memory(c, path);
    } else if (!strcmp(type, "Replace")) {
        d->kind = DEC_REPLACE;
        if (only(c, o, path, (const char *[]){"type", "pattern", "content", NULL}) ||
            get_pattern(c, o, path, &d->a, NULL) || get_str(c, o, path, "content", &b))
            return free(d->a), 1;
        if (!(d->b = lrc_strdup(b))) return free(d->a), no_memory(c, path);
    } else if (!strcmp(type, "ByteFallback") || !strcmp(type, "Fuse")) {
        d->kind = type[0] == 'B' ? DEC_BYTEFALLBACK : DEC_FUSE;
        if (only(c, o, path, (const char *[]){"type", NULL})) return 1;
    } else if (!strcmp(type, "Strip")) {
        int64_t s = 0, e = 0;
        d->kind = DEC_STRIP;
        if (only(c, o, path, (const char *[]){"type", "content", "start", "stop", NULL}) ||
            get_str(c, o, path, "content", &a) || get_int(c, o, path, "start", 0, 1 << 20, &s) ||
            get_int(c, o, path, "stop", 0, 1 << 20, &e))
            return 1;
        int n;
        if (!a[0] || (lrc_tok_utf8_next(a, strlen(a), &n), a[n])) return fail(c, path, "Strip's content must be one char");
        if (!(d->a = lrc_strdup(a))) return no_memory(c, path);
        d->start = (int)s, d->stop = (int)e;
    } else {
        char p[300], m[300];
        snprintf(p, sizeof p, "%s.type", path);
        snprintf(m, sizeof m,
                 "the decoder \"%.100s\" is not implemented (lrc has Sequence, ByteLevel, Metaspace, Replace, "
                 "ByteFallback, Fuse, Strip)",
                 type);
        return fail(c, p, m);
    }
    t->n_dec++;
    return 0;
}

/* TemplateProcessing's single template: special tokens' ids before and after $A. */
static int load_template(ctx *c, lrc_tokenizer *t, const cJSON *o, const char *path)
{
    if (only(c, o, path, (const char *[]){"type", "single", "pair", "special_tokens", NULL})) return 1;
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(o, "single");
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(o, "special_tokens");
    if (!cJSON_IsArray(single)) return fail(c, path, "single must be an array");
    bool seen_a = false;
    int i = 0;
    for (const cJSON *e = single->child; e; e = e->next, i++) {
        char p[300];
        snprintf(p, sizeof p, "%s.single[%d]", path, i);
        const cJSON *item = cJSON_IsObject(e) ? e->child : NULL;
        const cJSON *id = item ? cJSON_GetObjectItemCaseSensitive(item, "id") : NULL;
        if (!item || item->next || !cJSON_IsString(id))
            return fail(c, p, "must be {\"Sequence\": {\"id\": ...}} or {\"SpecialToken\": {\"id\": ...}}");
        if (!strcmp(item->string, "Sequence")) {
            if (strcmp(id->valuestring, "A") || seen_a) return fail(c, p, "the single template takes $A once");
            seen_a = true;
            continue;
        }
        if (strcmp(item->string, "SpecialToken")) return fail(c, p, "must be Sequence or SpecialToken");
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(specials, id->valuestring);
        const cJSON *ids = cJSON_GetObjectItemCaseSensitive(st, "ids");
        if (!cJSON_IsArray(ids)) return fail(c, p, "names a token that special_tokens lacks");
        for (const cJSON *v = ids->child; v; v = v->next) {
            if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 2e9 || v->valuedouble != (int32_t)v->valuedouble)
                return fail(c, p, "special_tokens' ids must be integers");
            int32_t **arr = seen_a ? &t->post_suffix : &t->post_prefix;
            int *n = seen_a ? &t->n_post_suffix : &t->n_post_prefix;
            if (!GROW(*arr, *n)) return no_memory(c, p);
            (*arr)[(*n)++] = (int32_t)v->valuedouble;
        }
    }
    if (!seen_a) return fail(c, path, "the single template lacks $A");
    return 0;
}

static int load_post(ctx *c, lrc_tokenizer *t, const cJSON *o, const char *path)
{
    if (!o || cJSON_IsNull(o)) return 0;
    const char *type = type_of(c, o, path);
    if (!type) return 1;
    if (!strcmp(type, "Sequence")) return load_sequence(c, t, o, path, "processors", load_post);
    if (!strcmp(type, "ByteLevel")) /* offsets only: ids unchanged */
        return only(c, o, path, (const char *[]){"type", "add_prefix_space", "trim_offsets", "use_regex", NULL});
    if (!strcmp(type, "TemplateProcessing")) {
        if (t->n_post_prefix || t->n_post_suffix) return fail(c, path, "a second TemplateProcessing is not implemented");
        return load_template(c, t, o, path);
    }
    char p[300], m[300];
    snprintf(p, sizeof p, "%s.type", path);
    snprintf(m, sizeof m,
             "the post-processor \"%.100s\" is not implemented (lrc has Sequence, ByteLevel, TemplateProcessing)", type);
    return fail(c, p, m);
}

/* ---- model, added tokens, the whole file --------------------------------------- */

static int load_vocab(ctx *c, lrc_tokenizer *t, const cJSON *v)
{
    if (!cJSON_IsObject(v)) return fail(c, "model.vocab", v ? "must be an object" : "is missing");
    for (const cJSON *e = v->child; e; e = e->next) {
        char p[300];
        snprintf(p, sizeof p, "model.vocab[\"%.200s\"]", e->string);
        double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!(d >= 0 && d < MAX_ID) || d != (int32_t)d) return fail(c, p, "must be an id (an integer from 0, below 2^24)");
        if (lrc_tok_strmap_get(&t->vocab, e->string, (uint32_t)strlen(e->string)) >= 0) return fail(c, p, "is listed twice");
        if (lrc_tok_strmap_put(&t->vocab, e->string, (uint32_t)strlen(e->string), (int32_t)d)) return no_memory(c, p);
        if ((int64_t)d + 1 > t->n_vocab) t->n_vocab = (int64_t)d + 1;
    }
    return 0;
}

static int merge_token(ctx *c, lrc_tokenizer *t, const char *p, const char *s, size_t n, int32_t *id)
{
    if ((*id = lrc_tok_strmap_get(&t->vocab, s, (uint32_t)n)) >= 0) return 0;
    char m[400];
    snprintf(m, sizeof m, "the token \"%.*s\" is not in model.vocab", (int)(n > 200 ? 200 : n), s);
    return fail(c, p, m);
}

/* "a b" (tokenizers before 0.20) or ["a", "b"]; a + b must be a token too. */
static int load_merges(ctx *c, lrc_tokenizer *t, const cJSON *v)
{
    if (!cJSON_IsArray(v)) return fail(c, "model.merges", v ? "must be an array" : "is missing");
    int32_t rank = 0;
    char *both = NULL;
    for (const cJSON *e = v->child; e; e = e->next, rank++) {
        char p[64];
        snprintf(p, sizeof p, "model.merges[%d]", rank);
        const char *a = NULL, *b = NULL;
        size_t na, nb;
        if (cJSON_IsString(e)) {
            const char *sp = strchr(e->valuestring, ' ');
            if (!sp || strchr(sp + 1, ' ')) return free(both), fail(c, p, "must be two tokens with one space between");
            a = e->valuestring, na = (size_t)(sp - a), b = sp + 1, nb = strlen(b);
        } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(e->child) &&
                   cJSON_IsString(e->child->next)) {
            a = e->child->valuestring, na = strlen(a), b = e->child->next->valuestring, nb = strlen(b);
        } else
            return free(both), fail(c, p, "must be \"a b\" or [\"a\", \"b\"]");
        int32_t ia, ib, im;
        char *nb_ = lrc_realloc(both, na + nb + 1);
        if (!nb_) return free(both), no_memory(c, p);
        both = nb_;
        memcpy(both, a, na), memcpy(both + na, b, nb);
        if (merge_token(c, t, p, a, na, &ia) || merge_token(c, t, p, b, nb, &ib) ||
            merge_token(c, t, p, both, na + nb, &im))
            return free(both), 1;
        if (lrc_tok_mergemap_put(&t->merges, ia, ib, rank, im)) return free(both), no_memory(c, p);
    }
    free(both);
    return 0;
}

static int null_or_empty(ctx *c, const cJSON *m, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, key);
    char p[64];
    snprintf(p, sizeof p, "model.%s", key);
    if (!v || cJSON_IsNull(v) || (cJSON_IsString(v) && !v->valuestring[0])) return 0;
    return fail(c, p, "is not implemented (only null)");
}

static int load_model(ctx *c, lrc_tokenizer *t, const cJSON *m)
{
    const char *type = type_of(c, m, "model");
    if (!type) return 1;
    if (strcmp(type, "BPE")) {
        char msg[300];
        snprintf(msg, sizeof msg, "the model \"%.100s\" is not implemented (lrc has BPE)", type);
        return fail(c, "model.type", msg);
    }
    if (only(c, m, "model",
             (const char *[]){"type", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
                              "fuse_unk", "byte_fallback", "ignore_merges", "vocab", "merges", NULL}) ||
        null_or_empty(c, m, "continuing_subword_prefix") || null_or_empty(c, m, "end_of_word_suffix") ||
        get_bool(c, m, "model", "fuse_unk", false, &t->fuse_unk) ||
        get_bool(c, m, "model", "byte_fallback", false, &t->byte_fallback) ||
        get_bool(c, m, "model", "ignore_merges", false, &t->ignore_merges))
        return 1;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(m, "dropout");
    if (d && !cJSON_IsNull(d)) return fail(c, "model.dropout", "is not implemented (only null: encoding is deterministic)");
    if (load_vocab(c, t, cJSON_GetObjectItemCaseSensitive(m, "vocab")) ||
        load_merges(c, t, cJSON_GetObjectItemCaseSensitive(m, "merges")))
        return 1;
    const cJSON *u = cJSON_GetObjectItemCaseSensitive(m, "unk_token");
    t->unk_id = -1;
    if (cJSON_IsString(u)) {
        /* the library fails only when an unknown char needs it */
        t->unk_id = lrc_tok_strmap_get(&t->vocab, u->valuestring, (uint32_t)strlen(u->valuestring));
        if (t->unk_id < 0) t->unk_id = -2;
    } else if (u && !cJSON_IsNull(u))
        return fail(c, "model.unk_token", "must be a string or null");
    for (int b = 0; b < 256; b++) {
        char s[8], ch[3];
        int n;
        snprintf(s, sizeof s, "<0x%02X>", b);
        t->byte_token[b] = lrc_tok_strmap_get(&t->vocab, s, 6);
        lrc_tok_byte_char((uint8_t)b, ch, &n);
        t->bytelevel_id[b] = lrc_tok_strmap_get(&t->vocab, ch, (uint32_t)n);
    }
    return 0;
}

static int load_added(ctx *c, lrc_tokenizer *t, const cJSON *a)
{
    if (!a || cJSON_IsNull(a)) return 0;
    if (!cJSON_IsArray(a)) return fail(c, "added_tokens", "must be an array");
    int i = 0;
    for (const cJSON *e = a->child; e; e = e->next, i++) {
        char p[64];
        snprintf(p, sizeof p, "added_tokens[%d]", i);
        if (!cJSON_IsObject(e)) return fail(c, p, "must be an object");
        if (!GROW(t->added, t->n_added)) return no_memory(c, p);
        tok_added *k = &t->added[t->n_added];
        memset(k, 0, sizeof *k);
        const char *content = NULL;
        int64_t id = 0;
        bool single_word = false;
        if (only(c, e, p, (const char *[]){"id", "content", "single_word", "lstrip", "rstrip", "normalized", "special", NULL}) ||
            get_int(c, e, p, "id", 0, MAX_ID - 1, &id) || get_str(c, e, p, "content", &content) ||
            get_bool(c, e, p, "single_word", false, &single_word) || get_bool(c, e, p, "lstrip", false, &k->lstrip) ||
            get_bool(c, e, p, "rstrip", false, &k->rstrip) || get_bool(c, e, p, "special", false, &k->special) ||
            get_bool(c, e, p, "normalized", !k->special, &k->normalized))
            return 1;
        char pp[96];
        if (single_word) return snprintf(pp, sizeof pp, "%s.single_word", p), fail(c, pp, "true is not implemented");
        if (!content[0]) return snprintf(pp, sizeof pp, "%s.content", p), fail(c, pp, "must not be empty");
        /* such a token matches the normalized text; lrc matches the raw text */
        if (k->normalized && t->n_norm)
            return snprintf(pp, sizeof pp, "%s.normalized", p), fail(c, pp, "true beside a normalizer is not implemented");
        if (!(k->content = lrc_strdup(content))) return no_memory(c, p);
        k->len = strlen(content), k->id = (int32_t)id;
        t->added_first[k->normalized][(uint8_t)content[0]] = true;
        t->n_added++;
        if (id + 1 > t->n_vocab) t->n_vocab = id + 1;
    }
    return 0;
}

static int load_root(ctx *c, lrc_tokenizer *t, const cJSON *root)
{
    if (!cJSON_IsObject(root)) return fail(c, "(top level)", "must be an object");
    if (only(c, root, "(top level)",
             (const char *[]){"version", "truncation", "padding", "added_tokens", "normalizer", "pre_tokenizer",
                              "post_processor", "decoder", "model", NULL}))
        return 1;
    const char *off[] = {"truncation", "padding"};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, off[i]);
        if (v && !cJSON_IsNull(v)) return fail(c, off[i], "is not implemented (only null)");
    }
    if (load_model(c, t, cJSON_GetObjectItemCaseSensitive(root, "model")) ||
        load_normalizer(c, t, cJSON_GetObjectItemCaseSensitive(root, "normalizer"), "normalizer") ||
        load_pre(c, t, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), "pre_tokenizer") ||
        load_post(c, t, cJSON_GetObjectItemCaseSensitive(root, "post_processor"), "post_processor") ||
        load_decoder(c, t, cJSON_GetObjectItemCaseSensitive(root, "decoder"), "decoder") ||
        load_added(c, t, cJSON_GetObjectItemCaseSensitive(root, "added_tokens")))
        return 1;
    for (int i = 0; i < t->n_post_prefix + t->n_post_suffix; i++) {
        int32_t id = i < t->n_post_prefix ? t->post_prefix[i] : t->post_suffix[i - t->n_post_prefix];
        if (id >= t->n_vocab) return fail(c, "post_processor", "a special token's id is outside the vocabulary");
    }
    return 0;
}

/* id → string, vocab first, then added tokens (which win). */
static int index_pieces(lrc_tokenizer *t)
{
    t->piece = lrc_calloc((size_t)t->n_vocab + 1, sizeof *t->piece);
    t->piece_len = lrc_calloc((size_t)t->n_vocab + 1, sizeof *t->piece_len);
    t->is_special = lrc_calloc((size_t)t->n_vocab + 1, sizeof *t->is_special);
    if (!t->piece || !t->piece_len || !t->is_special) return -1;
    for (uint32_t i = 0; i < t->vocab.n; i++) {
        t->piece[t->vocab.id[i]] = t->vocab.pool + t->vocab.off[i];
        t->piece_len[t->vocab.id[i]] = t->vocab.len[i];
    }
    for (int i = 0; i < t->n_added; i++) {
        t->piece[t->added[i].id] = t->added[i].content;
        t->piece_len[t->added[i].id] = (uint32_t)t->added[i].len;
        t->is_special[t->added[i].id] = t->added[i].special;
    }
    return 0;
}

int lrc_tokenizer_parse(const char *json, size_t len, const char *what, lrc_tokenizer **out, lrc_err *err)
{
    *out = NULL;
    size_t bad;
    if (!lrc_tok_utf8_valid(json, len, &bad)) return lrc_err_set(err, "%s: invalid UTF-8 at byte %zu", what, bad);
    const char *end = NULL;
    bool nomem = false;
    cJSON *root = len > MAX_JSON ? NULL : lrc_json_parse(json, len, &end, &nomem);
    if (nomem) return lrc_err_nomem(err, "reading %s", what);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = at && at >= json && at <= json + len ? (size_t)(at - json) : len;
        return lrc_err_set(err, "%s: %s at byte %zu", what, off >= len ? "truncated JSON (it ends early)" : "invalid JSON",
                           off);
    }
    lrc_tokenizer *t = lrc_calloc(1, sizeof *t);
    ctx c = {what, err};
    int rc = !t ? lrc_err_nomem(err, "reading %s", what) : load_root(&c, t, root);
    cJSON_Delete(root);
    if (!rc && index_pieces(t)) rc = lrc_err_nomem(err, "reading %s", what);
    if (rc) return lrc_tokenizer_free(t), LRC_EUSER;
    *out = t;
    return LRC_OK;
}

int lrc_tokenizer_load(const char *path, lrc_tokenizer **out, lrc_err *err)
{
    char buf[4096];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(buf, sizeof buf, "%s/tokenizer.json", path);
        path = buf;
    }
    size_t len;
    char *text = lrc_read_file(path, &len, err);
    if (!text) return LRC_EUSER;
    int rc = lrc_tokenizer_parse(text, len, path, out, err);
    free(text);
    return rc;
}

void lrc_tokenizer_free(lrc_tokenizer *t)
{
    if (!t) return;
    lrc_tok_strmap_free(&t->vocab);
    free(t->merges.key), free(t->merges.rank), free(t->merges.merged);
    for (int i = 0; i < t->n_norm; i++) free(t->norm[i].a), free(t->norm[i].b);
    for (int i = 0; i < t->n_pre; i++) {
        pcre2_code_free(t->pre[i].re);
        free(t->pre[i].literal), free(t->pre[i].replacement);
    }
    for (int i = 0; i < t->n_dec; i++) free(t->dec[i].a), free(t->dec[i].b);
    for (int i = 0; i < t->n_added; i++) free(t->added[i].content);
    free(t->norm), free(t->pre), free(t->dec), free(t->added);
    free(t->post_prefix), free(t->post_suffix);
    free(t->piece), free(t->piece_len), free(t->is_special);
    free(t);
}

int64_t lrc_tokenizer_n_vocab(const lrc_tokenizer *t) { return t->n_vocab; }
