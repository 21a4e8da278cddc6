/* tokenizer_decode.c — ids back to text through tokenizer.json's decoders,
 * each a map from a list of token strings to a list, as tokenizers'
 * decode_chain is; the text is their concatenation (without a decoder, the
 * tokens joined by spaces, as the library joins them). */
#include "tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    char *s;
    size_t n;
} str;

typedef struct {
    str *v;
    size_t n, cap;
    bool oom;
} strs;

static void put(strs *l, const char *s, size_t n)
{
    if (l->n == l->cap) {
        size_t c = l->cap ? l->cap * 2 : 16;
        str *v = lrc_reallocarray(l->v, c, sizeof *v);
        if (!v) return (void)(l->oom = true);
        l->v = v, l->cap = c;
    }
    char *d = lrc_malloc(n + 1);
    if (!d) return (void)(l->oom = true);
    memcpy(d, s, n);
    d[n] = 0;
    l->v[l->n++] = (str){d, n};
}

static void clear(strs *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->v[i].s);
    free(l->v);
    *l = (strs){0};
}

/* A growing byte string. */
typedef struct {
    char *s;
    size_t n, cap;
    bool oom;
} buf;

static void add(buf *b, const void *p, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        size_t c = (b->cap + n + 1) * 2;
        char *s = lrc_realloc(b->s, c);
        if (!s) return (void)(b->oom = true);
        b->s = s, b->cap = c;
    }
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = 0;
}

static const char FFFD[] = "\xEF\xBF\xBD";

/* Rust's String::from_utf8_lossy: one U+FFFD per maximal invalid subpart. */
static void add_lossy(buf *b, const char *s, size_t n)
{
    size_t i = 0, ok = 0;
    while (i < n) {
        size_t bad;
        if (lrc_tok_utf8_valid(s + i, n - i, &bad)) break;
        add(b, s + ok, i + bad - ok);
        i += bad;
        /* how far the broken sequence's valid prefix reaches */
        const uint8_t *u = (const uint8_t *)s + i;
        size_t k = 1;
        int len = u[0] >= 0xF0 ? 4 : u[0] >= 0xE0 ? 3 : 2;
        uint8_t lo = u[0] == 0xE0 ? 0xA0 : u[0] == 0xF0 ? 0x90 : 0x80;
        uint8_t hi = u[0] == 0xED ? 0x9F : u[0] == 0xF4 ? 0x8F : 0xBF;
        bool lead = (u[0] >= 0xC2 && u[0] <= 0xF4);
        if (lead && i + 1 < n && u[1] >= lo && u[1] <= hi) {
            k = 2;
            while ((int)k < len && i + k < n && (u[k] & 0xC0) == 0x80) k++;
        }
        add(b, FFFD, 3);
        i += k;
        ok = i;
    }
    add(b, s + ok, n - ok);
}

/* Replaces every `from` in s by `to` (per token), or, for Metaspace, the
 * replacement by a space except in the first token (dropped there). */
static void replace_all(buf *b, const str *t, const char *from, const char *to)
{
    size_t nf = strlen(from), nt = strlen(to);
    for (size_t i = 0; i < t->n;) {
        if (i + nf <= t->n && !memcmp(t->s + i, from, nf)) add(b, to, nt), i += nf;
        else add(b, t->s + i++, 1);
    }
}

static bool byte_token(const str *t, uint8_t *out)
{
    /* u8::from_str_radix(&token[3..5], 16), which takes a leading '+' */
    if (t->n != 6 || memcmp(t->s, "<0x", 3) || t->s[5] != '>') return false;
    unsigned v = 0;
    for (int i = 3; i < 5; i++) {
        char c = t->s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0 && !(i == 3 && c == '+')) return false;
        if (d >= 0) v = v * 16 + (unsigned)d;
    }
    return *out = (uint8_t)v, true;
}

/* A run of <0xXX> tokens: its text when it is UTF-8, else one U+FFFD per byte. */
static void flush_bytes(strs *out, buf *run)
{
    size_t bad;
    if (!run->n) return;
    if (lrc_tok_utf8_valid(run->s, run->n, &bad)) put(out, run->s, run->n);
    else
        for (size_t i = 0; i < run->n; i++) put(out, FFFD, 3);
    run->n = 0;
}

static void dec_step(const tok_dec *d, const strs *in, strs *out)
{
    buf b = {0};
    switch (d->kind) {
    case DEC_BYTELEVEL: {
        buf raw = {0};
        for (size_t i = 0; i < in->n; i++) {
            const str *t = &in->v[i];
            size_t start = raw.n;
            bool all = true;
            for (size_t k = 0; k < t->n && all;) {
                int l, byte = lrc_tok_char_byte(lrc_tok_utf8_next(t->s + k, t->n - k, &l));
                if (byte < 0) all = false;
                else {
                    uint8_t c = (uint8_t)byte;
                    add(&raw, &c, 1);
                }
                k += (size_t)l;
            }
            if (!all) raw.n = start, add(&raw, t->s, t->n); /* a char outside the map: the token as it is */
        }
        add_lossy(&b, raw.s ? raw.s : "", raw.n);
        put(out, b.s ? b.s : "", b.n);
        b.oom |= raw.oom;
        free(raw.s);
        break;
    }
    case DEC_METASPACE:
        for (size_t i = 0; i < in->n; i++) {
            b.n = 0;
            replace_all(&b, &in->v[i], d->a, i == 0 && d->prepend != PREPEND_NEVER ? "" : " ");
            put(out, b.s ? b.s : "", b.n);
        }
        break;
    case DEC_REPLACE:
        for (size_t i = 0; i < in->n; i++) {
            b.n = 0;
            replace_all(&b, &in->v[i], d->a, d->b);
            put(out, b.s ? b.s : "", b.n);
        }
        break;
    case DEC_BYTEFALLBACK:
        for (size_t i = 0; i < in->n; i++) {
            uint8_t c;
            if (byte_token(&in->v[i], &c)) add(&b, &c, 1);
            else flush_bytes(out, &b), put(out, in->v[i].s, in->v[i].n);
        }
        flush_bytes(out, &b);
        break;
    case DEC_FUSE:
        for (size_t i = 0; i < in->n; i++) add(&b, in->v[i].s, in->v[i].n);
        put(out, b.s ? b.s : "", b.n);
        break;
    case DEC_STRIP: {
        size_t nc = strlen(d->a);
        for (size_t i = 0; i < in->n; i++) {
            const str *t = &in->v[i];
            size_t a = 0, e = t->n;
            for (int k = 0; k < d->start && a + nc <= e && !memcmp(t->s + a, d->a, nc); k++) a += nc;
            for (int k = 0; k < d->stop && e >= a + nc && !memcmp(t->s + e - nc, d->a, nc); k++) e -= nc;
            put(out, t->s + a, e - a);
        }
        break;
    }
    }
    out->oom |= b.oom;
    free(b.s);
}

int lrc_tokenizer_decode(const lrc_tokenizer *t, const int32_t *ids, int64_t n, bool skip_special, char **text,
                         size_t *len, lrc_err *err)
{
    strs l = {0};
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab || !t->piece[ids[i]]) continue;
        if (skip_special && t->is_special[ids[i]]) continue;
        put(&l, t->piece[ids[i]], t->piece_len[ids[i]]);
    }
    for (int i = 0; i < t->n_dec && !l.oom; i++) {
        strs o = {0};
        dec_step(&t->dec[i], &l, &o);
        clear(&l);
        l = o;
    }
    buf b = {0};
    add(&b, "", 0);
    for (size_t i = 0; i < l.n; i++) {
        if (i && !t->has_decoder) add(&b, " ", 1);
        add(&b, l.v[i].s, l.v[i].n);
    }
    bool oom = l.oom || b.oom;
    clear(&l);
    if (oom) return free(b.s), lrc_err_nomem(err, "decoding %lld ids", (long long)n);
    *text = b.s, *len = b.n;
    return LRC_OK;
}

int64_t lrc_tokenizer_token_bytes(const lrc_tokenizer *t, int32_t id)
{
    if (id < 0 || id >= t->n_vocab || !t->piece[id]) return 0;
    const char *p = t->piece[id];
    size_t n = t->piece_len[id];
    if (t->byte_fallback && n == 6 && lrc_tok_strmap_get(&t->vocab, p, 6) == id && !memcmp(p, "<0x", 3) &&
        t->byte_token[(uint8_t)strtol(p + 3, NULL, 16)] == id)
        return 1;
    int64_t chars = 0, spaces = 0;
    bool mapped = true;
    for (size_t k = 0; k < n;) {
        int l;
        uint32_t c = lrc_tok_utf8_next(p + k, n - k, &l);
        mapped = mapped && lrc_tok_char_byte(c) >= 0;
        spaces += c == 0x2581; /* ▁: a space of the text, in SentencePiece's vocabularies */
        chars++;
        k += (size_t)l;
    }
    bool added = false;
    for (int i = 0; i < t->n_added && !added; i++) added = t->added[i].id == id;
    if (t->bytelevel && mapped && !added) return chars;
    return (int64_t)n - (t->bytelevel || added ? 0 : 2 * spaces);
}
