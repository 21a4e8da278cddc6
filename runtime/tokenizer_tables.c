/* tokenizer_tables.c — the tables a tokenizer is made of (string → id,
 * (left, right) → merge), GPT-2's byte-to-char map and the UTF-8 steps that
 * the loader, the encoder and the decoder share. */
#include "tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- tables ---------------------------------------------------------------- */

static uint64_t fnv(const char *s, uint32_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (uint32_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static int strmap_grow(tok_strmap *m)
{
    uint32_t cap = m->cap ? m->cap * 2 : 1024;
    uint32_t *slot = lrc_calloc(cap, sizeof *slot);
    if (!slot) return -1;
    for (uint32_t i = 0; i < m->n; i++) {
        uint32_t h = (uint32_t)fnv(m->pool + m->off[i], m->len[i]) & (cap - 1);
        while (slot[h]) h = (h + 1) & (cap - 1);
        slot[h] = i + 1;
    }
    free(m->slot);
    m->slot = slot;
    m->cap = cap;
    return 0;
}

int32_t lrc_tok_strmap_get(const tok_strmap *m, const char *s, uint32_t n)
{
    if (!m->cap) return -1;
    uint32_t h = (uint32_t)fnv(s, n) & (m->cap - 1);
    for (uint32_t e; (e = m->slot[h]); h = (h + 1) & (m->cap - 1))
        if (m->len[e - 1] == n && !memcmp(m->pool + m->off[e - 1], s, n)) return m->id[e - 1];
    return -1;
}

/* A key already there keeps its first id (JSON objects here have unique keys). */
int lrc_tok_strmap_put(tok_strmap *m, const char *s, uint32_t n, int32_t id)
{
    if (lrc_tok_strmap_get(m, s, n) >= 0) return 0;
    if ((m->n + 1) * 2 > m->cap && strmap_grow(m)) return -1;
    if (m->n == m->n_alloc) {
        uint32_t na = m->n_alloc ? m->n_alloc * 2 : 1024;
        uint32_t *off = lrc_reallocarray(m->off, na, sizeof *off);
        if (off) m->off = off;
        uint32_t *len = lrc_reallocarray(m->len, na, sizeof *len);
        if (len) m->len = len;
        int32_t *ids = lrc_reallocarray(m->id, na, sizeof *ids);
        if (ids) m->id = ids;
        if (!off || !len || !ids) return -1;
        m->n_alloc = na;
    }
    if (m->pool_n + n + 1 > m->pool_cap) {
        size_t pc = (m->pool_cap + n + 1) * 2;
        char *p = lrc_realloc(m->pool, pc);
        if (!p) return -1;
        m->pool = p;
        m->pool_cap = pc;
    }
    memcpy(m->pool + m->pool_n, s, n);
    m->pool[m->pool_n + n] = 0;
    m->off[m->n] = (uint32_t)m->pool_n;
    m->len[m->n] = n;
    m->id[m->n] = id;
    m->pool_n += n + 1;
    uint32_t h = (uint32_t)fnv(s, n) & (m->cap - 1);
    while (m->slot[h]) h = (h + 1) & (m->cap - 1);
    m->slot[h] = ++m->n;
    return 0;
}

void lrc_tok_strmap_free(tok_strmap *m)
{
    free(m->slot);
    free(m->off);
    free(m->len);
    free(m->id);
    free(m->pool);
}

static uint32_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (uint32_t)k;
}

int64_t lrc_tok_mergemap_find(const tok_mergemap *m, int32_t a, int32_t b)
{
    if (!m->cap) return -1;
    uint64_t k = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    for (uint32_t h = mix(k) & (m->cap - 1); m->key[h]; h = (h + 1) & (m->cap - 1))
        if (m->key[h] == k) return h;
    return -1;
}

/* A pair listed twice takes the later rank, as the library's map does. */
int lrc_tok_mergemap_put(tok_mergemap *m, int32_t a, int32_t b, int32_t rank, int32_t merged)
{
    if ((m->n + 1) * 2 > m->cap) {
        uint32_t cap = m->cap ? m->cap * 2 : 1024;
        tok_mergemap g = {lrc_calloc(cap, 8), lrc_malloc(cap * 4ull), lrc_malloc(cap * 4ull), cap, 0};
        if (!g.key || !g.rank || !g.merged) {
            free(g.key), free(g.rank), free(g.merged);
            return -1;
        }
        for (uint32_t i = 0; i < m->cap; i++) {
            if (!m->key[i]) continue;
            uint32_t h = mix(m->key[i]) & (cap - 1);
            while (g.key[h]) h = (h + 1) & (cap - 1);
            g.key[h] = m->key[i], g.rank[h] = m->rank[i], g.merged[h] = m->merged[i];
        }
        g.n = m->n;
        free(m->key), free(m->rank), free(m->merged);
        *m = g;
    }
    uint64_t k = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    uint32_t h = mix(k) & (m->cap - 1);
    while (m->key[h] && m->key[h] != k) h = (h + 1) & (m->cap - 1);
    if (!m->key[h]) m->n++;
    m->key[h] = k, m->rank[h] = rank, m->merged[h] = merged;
    return 0;
}

/* ---- GPT-2's bytes to unicode ------------------------------------------------ */

static bool byte_is_printable(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174); }

static uint32_t byte_cp(uint8_t b)
{
    if (byte_is_printable(b)) return b;
    int k = 0;
    for (int i = 0; i < b; i++) k += !byte_is_printable(i);
    return 256u + (uint32_t)k;
}

void lrc_tok_byte_char(uint8_t b, char out[3], int *len)
{
    uint32_t cp = byte_cp(b);
    if (cp < 0x80) out[0] = (char)cp, *len = 1;
    else out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 63)), *len = 2;
}

int lrc_tok_char_byte(uint32_t cp)
{
    if (cp < 256) return byte_is_printable((int)cp) ? (int)cp : -1;
    for (int b = 0; b < 256; b++)
        if (byte_cp((uint8_t)b) == cp) return b;
    return -1;
}

uint32_t lrc_tok_utf8_next(const char *s, size_t n, int *len)
{
    const uint8_t *u = (const uint8_t *)s;
    if (u[0] < 0x80 || n < 2) return *len = 1, u[0];
    if (u[0] < 0xE0) return *len = 2, (uint32_t)(u[0] & 31) << 6 | (u[1] & 63);
    if (u[0] < 0xF0 || n < 4) return *len = 3, (uint32_t)(u[0] & 15) << 12 | (uint32_t)(u[1] & 63) << 6 | (u[2] & 63);
    return *len = 4, (uint32_t)(u[0] & 7) << 18 | (uint32_t)(u[1] & 63) << 12 | (uint32_t)(u[2] & 63) << 6 | (u[3] & 63);
}

