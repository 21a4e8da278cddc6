/* tokenizer.c — encoding and decoding with a loaded tokenizer.json, step
 * for step as Hugging Face's `tokenizers` (0.19) does it, so that the ids
 * and the text are the library's byte for byte:
 *   added tokens split off (leftmost-longest; the unnormalized ones first),
 *   each other segment normalized, pre-tokenized into pieces, each piece
 *   merged by BPE rank (lowest rank first, then leftmost), then the
 *   post-processor's special tokens around the whole.
 * A piece carries `zero`: how many of its leading bytes came from the text's
 * first char, which is what Metaspace's prepend_scheme "first" asks. */
#include "tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>
#include <uninorm.h>

/* ---- UTF-8 ----------------------------------------------------------------- */

/* The length of the valid prefix of a sequence at s (1..4), or -k when only
 * its first k bytes form the maximal prefix of a valid one (Rust's rule for
 * one U+FFFD per maximal invalid subpart). */
static int utf8_seq(const uint8_t *u, size_t n)
{
    uint8_t c = u[0], lo = 0x80, hi = 0xBF;
    int len;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return -1;
    if (n < 2 || u[1] < lo || u[1] > hi) return -1;
    for (int k = 2; k < len; k++)
        if ((size_t)k >= n || (u[k] & 0xC0) != 0x80) return -k;
    return len;
}

bool lrc_tok_utf8_valid(const char *s, size_t n, size_t *bad)
{
    for (size_t i = 0; i < n;) {
        int k = utf8_seq((const uint8_t *)s + i, n - i);
        if (k < 0) return *bad = i, false;
        i += (size_t)k;
    }
    return true;
}

/* Rust's char::is_whitespace (Unicode White_Space). */
static bool is_white(uint32_t c)
{
    return (c >= 9 && c <= 13) || c == 32 || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* ---- growable buffers -------------------------------------------------------- */

typedef struct {
    uint32_t off, len, zero;
} piece;

typedef struct {
    int32_t id, prev, next, len;
} sym;

typedef struct {
    int32_t rank, pos, merged;
} merge;

typedef struct {
    char *a; /* the arena that pieces point into */
    size_t n, cap;
    piece *p, *q;
    int np, nq, capp, capq;
    sym *s;
    merge *h;
    size_t caps, caph;
    char *w; /* a byte-level piece's mapped chars, for ignore_merges */
    size_t capw;
    uint32_t *mb; /* matches */
    size_t capmb;
    struct span *sp;
    size_t capsp;
    pcre2_match_data *md;
    lrc_ids *out;
    bool oom;
} scratch;

static bool reserve(void **buf, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return true;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    void *b = lrc_reallocarray(*buf, c, elem);
    if (!b) return false;
    *buf = b, *cap = c;
    return true;
}

static bool arena(scratch *s, size_t more) { return reserve((void **)&s->a, &s->cap, s->n + more, 1) || (s->oom = true, false); }

static void push_piece(scratch *s, uint32_t off, uint32_t len, uint32_t zero)
{
    if (!len) return; /* the library drops empty pieces */
    size_t cap = (size_t)s->capq;
    if (!reserve((void **)&s->q, &cap, (size_t)s->nq + 1, sizeof *s->q)) return (void)(s->oom = true);
    s->capq = (int)cap;
    s->q[s->nq++] = (piece){off, len, zero};
}

static void push_id(scratch *s, int32_t id)
{
    lrc_ids *v = s->out;
    size_t cap = (size_t)v->cap;
    if (!reserve((void **)&v->ids, &cap, (size_t)v->n + 1, sizeof *v->ids)) return (void)(s->oom = true);
    v->cap = (int64_t)cap;
    v->ids[v->n++] = id;
}

void lrc_ids_free(lrc_ids *v)
{
    free(v->ids);
    *v = (lrc_ids){0};
}

/* s->q becomes the current list. */
static void swap_lists(scratch *s)
{
    piece *t = s->p;
    int c = s->capp;
    s->p = s->q, s->np = s->nq, s->capp = s->capq;
    s->q = t, s->nq = 0, s->capq = c;
}

/* ---- normalizers --------------------------------------------------------------- */

/* Appends a piece's bytes with every `from` replaced by `to` (prefix first),
 * and where the bytes of the text's first char end up. */
static piece rewrite(scratch *s, piece p, const char *prefix, const char *from, const char *to)
{
    size_t nf = from ? strlen(from) : 0, nt = to ? strlen(to) : 0, np = prefix ? strlen(prefix) : 0;
    size_t worst = np + (size_t)p.len * (nt > nf ? nt : 1) + 1;
    if (!arena(s, worst)) return p;
    const char *src = s->a + p.off;
    char *dst = s->a + s->n;
    size_t o = 0, zero = p.zero ? np : 0;
    if (np) memcpy(dst, prefix, np);
    o = np;
    for (size_t i = 0; i < p.len;) {
        bool hit = nf && i + nf <= p.len && !memcmp(src + i, from, nf);
        if (hit) memcpy(dst + o, to, nt), o += nt, i += nf;
        else dst[o++] = src[i++];
        if (i <= p.zero) zero = o;
    }
    piece r = {(uint32_t)s->n, (uint32_t)o, (uint32_t)(p.zero ? zero : 0)};
    s->n += o;
    return r;
}

/* Unicode normalization (libunistring): the text's first char, where the
 * piece starts with it, is the first char of the result. */
static piece unicode_form(scratch *s, piece p, int form)
{
    static const uninorm_t forms[4] = {UNINORM_NFC, UNINORM_NFD, UNINORM_NFKC, UNINORM_NFKD};
    size_t len = 0;
    uint8_t *r = u8_normalize(forms[form], (const uint8_t *)s->a + p.off, p.len, NULL, &len);
    if (!r || !arena(s, len + 1)) return free(r), s->oom = true, p;
    memcpy(s->a + s->n, r, len);
    free(r);
    int l = 0;
    if (p.zero && len) lrc_tok_utf8_next(s->a + s->n, len, &l);
    piece q = {(uint32_t)s->n, (uint32_t)len, (uint32_t)l};
    s->n += len;
    return q;
}

static piece normalize(const lrc_tokenizer *t, scratch *s, piece p)
{
    for (int i = 0; i < t->n_norm && !s->oom; i++) {
        const tok_norm *n = &t->norm[i];
        if (n->kind == NORM_UNICODE) {
            if (p.len) p = unicode_form(s, p, n->form);
        } else if (n->kind == NORM_PREPEND) {
            if (p.len) p = rewrite(s, p, n->a, NULL, NULL);
        } else
            p = rewrite(s, p, NULL, n->a, n->b);
    }
    return p;
}

/* ---- pre-tokenizers ------------------------------------------------------------ */

typedef struct span {
    uint32_t a, e;
    bool m;
} span;

static void emit_span(scratch *s, piece p, span x) { push_piece(s, p.off + x.a, x.e - x.a, x.a < p.zero ? p.zero - x.a : 0); }

/* Splits p at its matches (m: [start, end) pairs, in order) with one of
 * tokenizers' SplitDelimiterBehaviors, folded as the library folds them. */
static void split_at(scratch *s, piece p, const uint32_t *m, int nm, tok_split_behavior b, bool invert)
{
    if (!reserve((void **)&s->sp, &s->capsp, (size_t)nm * 2 + 2, sizeof *s->sp)) return (void)(s->oom = true);
    span *v = s->sp;
    int n = 0;
    uint32_t prev = 0;
    for (int i = 0; i < nm; i++) {
        if (prev != m[2 * i]) v[n++] = (span){prev, m[2 * i], invert};
        v[n++] = (span){m[2 * i], m[2 * i + 1], !invert};
        prev = m[2 * i + 1];
    }
    if (prev != p.len || !n) v[n++] = (span){prev, p.len, invert};
    if (b == SPLIT_REMOVED || b == SPLIT_ISOLATED) {
        for (int i = 0; i < n; i++)
            if (b == SPLIT_ISOLATED || !v[i].m) emit_span(s, p, v[i]);
        return;
    }
    int k = 0; /* the folded spans, in place */
    bool prev_m = false;
    if (b == SPLIT_MERGED_NEXT) { /* a match joins the span after it: fold from the right */
        for (int i = n - 1; i >= 0; i--) {
            if (v[i].m && !prev_m && k) v[n - k].a = v[i].a;
            else v[n - 1 - k++] = v[i];
            prev_m = v[i].m;
        }
        for (int i = n - k; i < n; i++) emit_span(s, p, v[i]);
        return;
    }
    for (int i = 0; i < n; i++) {
        bool join = b == SPLIT_MERGED_PREV ? v[i].m && !prev_m : v[i].m == prev_m;
        if (join && k) v[k - 1].e = v[i].e;
        else v[k++] = v[i];
        prev_m = v[i].m;
    }
    for (int i = 0; i < k; i++) emit_span(s, p, v[i]);
}

/* The matches of a regex or a literal in p, as [start, end) pairs. */
static int find_matches(scratch *s, piece p, const pcre2_code *re, const char *lit, uint32_t **out, size_t *cap)
{
    int nm = 0;
    const char *str = s->a + p.off;
    if (lit) {
        size_t nl = strlen(lit);
        for (size_t i = 0; i + nl <= p.len;) {
            if (memcmp(str + i, lit, nl)) {
                i++;
                continue;
            }
            if (!reserve((void **)out, cap, (size_t)(nm + 1) * 2, sizeof **out)) return s->oom = true, 0;
            (*out)[2 * nm] = (uint32_t)i, (*out)[2 * nm + 1] = (uint32_t)(i + nl), nm++;
            i += nl;
        }
        return nm;
    }
    for (size_t at = 0; at < p.len;) {
        int rc = pcre2_match(re, (PCRE2_SPTR)str, p.len, at, PCRE2_NO_UTF_CHECK, s->md, NULL);
        if (rc < 0) break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
        if (ov[1] == ov[0]) { /* an empty match: the next char */
            int l;
            lrc_tok_utf8_next(str + ov[0], p.len - ov[0], &l);
            at = ov[0] + (size_t)l;
            continue;
        }
        if (!reserve((void **)out, cap, (size_t)(nm + 1) * 2, sizeof **out)) return s->oom = true, 0;
        (*out)[2 * nm] = (uint32_t)ov[0], (*out)[2 * nm + 1] = (uint32_t)ov[1], nm++;
        at = ov[1];
    }
    return nm;
}

static void pre_step(const tok_pre *pt, scratch *s, piece p, uint32_t **mb, size_t *mc)
{
    if (pt->kind == PRE_METASPACE) {
        p = rewrite(s, p, NULL, " ", pt->replacement);
        size_t nr = strlen(pt->replacement);
        bool starts = p.len >= nr && !memcmp(s->a + p.off, pt->replacement, nr);
        if (!starts && (pt->prepend == PREPEND_ALWAYS || (pt->prepend == PREPEND_FIRST && p.zero)))
            p = rewrite(s, p, pt->replacement, NULL, NULL);
        if (!pt->split) return push_piece(s, p.off, p.len, p.zero);
        int nm = find_matches(s, p, NULL, pt->replacement, mb, mc);
        return split_at(s, p, *mb, nm, SPLIT_MERGED_NEXT, false);
    }
    if (pt->kind == PRE_BYTELEVEL) {
        if (pt->add_prefix_space && !(p.len && s->a[p.off] == ' ')) p = rewrite(s, p, " ", NULL, NULL);
        if (!pt->re) return push_piece(s, p.off, p.len, p.zero);
    }
    int nm = find_matches(s, p, pt->re, pt->literal, mb, mc);
    split_at(s, p, *mb, nm, pt->behavior, pt->invert);
}

/* ---- BPE ------------------------------------------------------------------------ */

static bool before(merge a, merge b) { return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos; }

static void heap_push(merge *h, size_t *n, merge m)
{
    size_t i = (*n)++;
    while (i && before(m, h[(i - 1) / 2])) h[i] = h[(i - 1) / 2], i = (i - 1) / 2;
    h[i] = m;
}

static merge heap_pop(merge *h, size_t *n)
{
    merge top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && before(h[c + 1], h[c])) c++;
        if (!before(h[c], last)) break;
        h[i] = h[c], i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static void add_sym(scratch *s, size_t *ns, int32_t id, int32_t len)
{
    if (!reserve((void **)&s->s, &s->caps, *ns + 1, sizeof *s->s)) return (void)(s->oom = true);
    s->s[*ns] = (sym){id, (int32_t)*ns - 1, (int32_t)*ns + 1, len};
    (*ns)++;
}

/* One char (its vocabulary form c[0..n), `len` bytes of the piece) as
 * symbols: the token, else its bytes' <0xXX> tokens, else unk (fused when
 * fuse_unk), as the library's merge_word does, a pending unk included. */
static int char_syms(const lrc_tokenizer *t, scratch *s, size_t *ns, const char *c, int n, int len, int32_t *unk,
                     int32_t *unk_len, lrc_err *err)
{
    int32_t id = lrc_tok_strmap_get(&t->vocab, c, (uint32_t)n);
    if (id >= 0) {
        if (*unk >= 0) add_sym(s, ns, *unk, *unk_len), *unk = -1;
        add_sym(s, ns, id, len);
        return 0;
    }
    if (t->byte_fallback) {
        bool all = true;
        for (int i = 0; i < n; i++) all = all && t->byte_token[(uint8_t)c[i]] >= 0;
        if (all) {
            for (int i = 0; i < n; i++) add_sym(s, ns, t->byte_token[(uint8_t)c[i]], 1);
            return 0;
        }
    }
    if (t->unk_id == -2) return lrc_err_set(err, "tokenizer: model.unk_token is not in model.vocab, and the text needs it");
    if (t->unk_id < 0) return 0; /* no unk: the library drops the char */
    if (*unk >= 0 && t->fuse_unk) *unk_len += len;
    else {
        if (*unk >= 0) add_sym(s, ns, *unk, *unk_len);
        *unk = t->unk_id, *unk_len = len;
    }
    return 0;
}

static void merge_all(const lrc_tokenizer *t, scratch *s, size_t ns)
{
    if (!reserve((void **)&s->h, &s->caph, ns * 2 + 1, sizeof *s->h)) return (void)(s->oom = true);
    size_t nh = 0;
    for (size_t i = 0; i + 1 < ns; i++) {
        int64_t k = lrc_tok_mergemap_find(&t->merges, s->s[i].id, s->s[i + 1].id);
        if (k >= 0) heap_push(s->h, &nh, (merge){t->merges.rank[k], (int32_t)i, t->merges.merged[k]});
    }
    while (nh) {
        merge top = heap_pop(s->h, &nh);
        sym *cur = &s->s[top.pos];
        if (!cur->len || cur->next >= (int32_t)ns) continue;
        sym *right = &s->s[cur->next];
        int64_t k = lrc_tok_mergemap_find(&t->merges, cur->id, right->id);
        if (k < 0 || t->merges.merged[k] != top.merged) continue; /* a stale entry */
        cur->id = top.merged, cur->len += right->len, cur->next = right->next;
        right->len = 0;
        if (cur->next < (int32_t)ns) s->s[cur->next].prev = top.pos;
        if (!reserve((void **)&s->h, &s->caph, nh + 2, sizeof *s->h)) return (void)(s->oom = true);
        if (cur->prev >= 0 && (k = lrc_tok_mergemap_find(&t->merges, s->s[cur->prev].id, cur->id)) >= 0)
            heap_push(s->h, &nh, (merge){t->merges.rank[k], cur->prev, t->merges.merged[k]});
        if (cur->next < (int32_t)ns && (k = lrc_tok_mergemap_find(&t->merges, cur->id, s->s[cur->next].id)) >= 0)
            heap_push(s->h, &nh, (merge){t->merges.rank[k], top.pos, t->merges.merged[k]});
    }
}

static int bpe(const lrc_tokenizer *t, scratch *s, piece p, lrc_err *err)
{
    const char *w = s->a + p.off;
    size_t ns = 0;
    int32_t unk = -1, unk_len = 0;
    if (t->bytelevel) {
        if (t->ignore_merges) {
            if (!reserve((void **)&s->w, &s->capw, (size_t)p.len * 2, 1)) return s->oom = true, 0;
            size_t o = 0;
            for (uint32_t i = 0; i < p.len; i++) {
                int l;
                lrc_tok_byte_char((uint8_t)w[i], s->w + o, &l);
                o += (size_t)l;
            }
            int32_t id = lrc_tok_strmap_get(&t->vocab, s->w, (uint32_t)o);
            if (id >= 0) return push_id(s, id), 0;
        }
        for (uint32_t i = 0; i < p.len; i++) {
            int32_t id = t->bytelevel_id[(uint8_t)w[i]];
            if (id >= 0) {
                if (unk >= 0) add_sym(s, &ns, unk, unk_len), unk = -1;
                add_sym(s, &ns, id, 1);
                continue;
            }
            char c[3];
            int l;
            lrc_tok_byte_char((uint8_t)w[i], c, &l);
            if (char_syms(t, s, &ns, c, l, 1, &unk, &unk_len, err)) return 1;
        }
    } else {
        if (t->ignore_merges) {
            int32_t id = lrc_tok_strmap_get(&t->vocab, w, p.len);
            if (id >= 0) return push_id(s, id), 0;
        }
        for (uint32_t i = 0; i < p.len;) {
            int l;
            lrc_tok_utf8_next(w + i, p.len - i, &l);
            if (char_syms(t, s, &ns, w + i, l, l, &unk, &unk_len, err)) return 1;
            i += (uint32_t)l;
        }
    }
    if (unk >= 0) add_sym(s, &ns, unk, unk_len);
    if (s->oom) return 0;
    merge_all(t, s, ns);
    for (size_t i = 0; i < ns && !s->oom; i++)
        if (s->s[i].len) push_id(s, s->s[i].id);
    return 0;
}

/* ---- the pipeline ------------------------------------------------------------------- */

/* A segment without added tokens: normalizers, pre-tokenizers, BPE. */
static int encode_plain(const lrc_tokenizer *t, scratch *s, const char *text, size_t a, size_t e, lrc_err *err)
{
    if (a == e) return 0;
    s->n = 0;
    if (!arena(s, e - a)) return 0;
    memcpy(s->a, text + a, e - a);
    int l = 1;
    if (!a) lrc_tok_utf8_next(text, e, &l);
    s->n = e - a;
    piece p = normalize(t, s, (piece){0, (uint32_t)(e - a), a == 0 ? (uint32_t)l : 0});
    s->np = 0, s->nq = 0;
    push_piece(s, p.off, p.len, p.zero);
    swap_lists(s);
    for (int i = 0; i < t->n_pre && !s->oom; i++) {
        for (int k = 0; k < s->np && !s->oom; k++) pre_step(&t->pre[i], s, s->p[k], &s->mb, &s->capmb);
        swap_lists(s);
    }
    for (int k = 0; k < s->np && !s->oom; k++)
        if (bpe(t, s, s->p[k], err)) return 1;
    return 0;
}

/* The longest added token of one kind (normalized or not) at text[pos]. */
static int added_at(const lrc_tokenizer *t, const char *text, size_t n, size_t pos, bool normalized)
{
    int best = -1;
    if (!t->added_first[normalized][(uint8_t)text[pos]]) return -1;
    for (int k = 0; k < t->n_added; k++) {
        const tok_added *a = &t->added[k];
        if (a->normalized != normalized || a->len > n - pos || a->content[0] != text[pos]) continue;
        if (!memcmp(text + pos, a->content, a->len) && (best < 0 || a->len > t->added[best].len)) best = k;
    }
    return best;
}

/* Splits text[a, e) on added tokens: the unnormalized ones (level 0), then
 * in what is left the normalized ones (level 1), then encode_plain. */
static int encode_segment(const lrc_tokenizer *t, scratch *s, const char *text, size_t a, size_t e, int level,
                          lrc_err *err)
{
    if (level == 2) return encode_plain(t, s, text, a, e, err);
    size_t seg = a;
    for (size_t pos = a; pos < e && !s->oom;) {
        int k = added_at(t, text, e, pos, level == 1);
        if (k < 0) {
            pos++;
            continue;
        }
        const tok_added *tk = &t->added[k];
        size_t st = pos, en = pos + tk->len;
        if (tk->lstrip)
            while (st > seg) {
                size_t b = st - 1;
                while (b > seg && ((uint8_t)text[b] & 0xC0) == 0x80) b--;
                int l;
                if (!is_white(lrc_tok_utf8_next(text + b, e - b, &l))) break;
                st = b;
            }
        if (tk->rstrip)
            while (en < e) {
                int l;
                if (!is_white(lrc_tok_utf8_next(text + en, e - en, &l))) break;
                en += (size_t)l;
            }
        if (encode_segment(t, s, text, seg, st, level + 1, err)) return 1;
        push_id(s, tk->id);
        pos = seg = en;
    }
    return encode_segment(t, s, text, seg, e, level + 1, err);
}

int lrc_tokenizer_encode(const lrc_tokenizer *t, const char *text, size_t len, bool add_special, lrc_ids *out,
                         lrc_err *err)
{
    size_t bad;
    if (!lrc_tok_utf8_valid(text, len, &bad))
        return lrc_err_set(err, "invalid UTF-8 at byte %zu (tokenizers takes only Unicode text; lrc refuses it too)", bad);
    scratch s = {.out = out, .md = pcre2_match_data_create(1, NULL)};
    int rc = s.md ? 0 : lrc_err_nomem(err, "encoding %zu bytes", len);
    for (int i = 0; add_special && i < t->n_post_prefix; i++) push_id(&s, t->post_prefix[i]);
    if (!rc) rc = encode_segment(t, &s, text, 0, len, 0, err);
    for (int i = 0; add_special && i < t->n_post_suffix; i++) push_id(&s, t->post_suffix[i]);
    if (!rc && s.oom) rc = lrc_err_nomem(err, "encoding %zu bytes", len);
    pcre2_match_data_free(s.md);
    free(s.a), free(s.p), free(s.q), free(s.s), free(s.h), free(s.w), free(s.mb), free(s.sp);
    return rc;
}

