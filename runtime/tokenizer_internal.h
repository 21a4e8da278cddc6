/* tokenizer_internal.h — the loaded form of a Hugging Face tokenizer.json,
 * shared by its loader (tokenizer_load.c) and its encoder and decoder
 * (tokenizer.c). Each pipeline stage is a flat list of steps: a JSON
 * "Sequence" is flattened when it loads. */
#ifndef LRC_TOKENIZER_INTERNAL_H
#define LRC_TOKENIZER_INTERNAL_H

#include "lrc_runtime.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

/* A string → id table over one byte pool (open addressing, FNV-1a). */
typedef struct tok_strmap {
    uint32_t *slot; /* index + 1 into off/len/id, 0 = empty */
    uint32_t cap;   /* a power of two */
    uint32_t n, n_alloc;
    uint32_t *off, *len;
    int32_t *id;
    char *pool;
    size_t pool_n, pool_cap;
} tok_strmap;

/* (left id, right id) → (rank, merged id), as BPE's merges list gives it. */
typedef struct tok_mergemap {
    uint64_t *key; /* (left << 32 | right) + 1, 0 = empty */
    int32_t *rank, *merged;
    uint32_t cap, n;
} tok_mergemap;

typedef enum { NORM_PREPEND, NORM_REPLACE, NORM_UNICODE } tok_norm_kind;
typedef struct {
    tok_norm_kind kind;
    char *a, *b; /* PREPEND: a; REPLACE: a → b */
    int form;    /* UNICODE: 0 NFC, 1 NFD, 2 NFKC, 3 NFKD (libunistring's) */
} tok_norm;

/* tokenizers' SplitDelimiterBehavior */
typedef enum { SPLIT_REMOVED, SPLIT_ISOLATED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS } tok_split_behavior;
typedef enum { PRE_SPLIT, PRE_METASPACE, PRE_BYTELEVEL } tok_pre_kind;
typedef enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER } tok_prepend;
typedef struct {
    tok_pre_kind kind;
    pcre2_code *re;   /* SPLIT with a Regex, and BYTELEVEL with use_regex */
    char *literal;    /* SPLIT with a String pattern */
    tok_split_behavior behavior;
    bool invert;
    char *replacement; /* METASPACE */
    tok_prepend prepend;
    bool split;            /* METASPACE */
    bool add_prefix_space; /* BYTELEVEL */
} tok_pre;

typedef enum { DEC_BYTELEVEL, DEC_METASPACE, DEC_REPLACE, DEC_BYTEFALLBACK, DEC_FUSE, DEC_STRIP } tok_dec_kind;
typedef struct {
    tok_dec_kind kind;
    char *a, *b;       /* METASPACE: replacement; REPLACE: a → b; STRIP: content (one char) */
    tok_prepend prepend; /* METASPACE */
    int start, stop;   /* STRIP */
} tok_dec;

typedef struct {
    char *content;
    size_t len;
    int32_t id;
    bool special, lstrip, rstrip, normalized;
} tok_added;

struct lrc_tokenizer {
    tok_strmap vocab;   /* model.vocab */
    tok_mergemap merges;
    int32_t unk_id;     /* -1: none */
    bool byte_fallback, fuse_unk, ignore_merges;
    int32_t byte_token[256]; /* "<0xXX>" in the vocabulary, or -1 */
    bool bytelevel;          /* the pre-tokenizer ends in ByteLevel: the model sees mapped bytes */
    int32_t bytelevel_id[256]; /* the vocabulary id of each byte's mapped char, or -1 */

    tok_norm *norm;
    int n_norm;
    tok_pre *pre;
    int n_pre;
    tok_dec *dec;
    int n_dec;
    bool has_decoder;

    tok_added *added;
    int n_added;
    bool added_first[2][256]; /* [normalized]: some added token starts with this byte */
    int32_t *post_prefix, *post_suffix; /* TemplateProcessing's single: ids around $A */
    int n_post_prefix, n_post_suffix;

    int64_t n_vocab; /* the largest id + 1 */
    const char **piece; /* id → its string (vocab or added), NULL where no id */
    uint32_t *piece_len;
    bool *is_special;
};

/* The 256 chars of GPT-2's byte-to-unicode map, as UTF-8 (one or two bytes). */
void lrc_tok_byte_char(uint8_t b, char out[3], int *len);
/* tokenizers' 'byte for a char' inverse: 0..255, or -1 for a char outside the map. */
int lrc_tok_char_byte(uint32_t cp);
/* Decodes one UTF-8 char of s[0..n) (valid input): its code point and length. */
uint32_t lrc_tok_utf8_next(const char *s, size_t n, int *len);
/* Strict UTF-8 (no overlong forms, surrogates or code points past U+10FFFF);
 * else false with the offset of the first bad byte. */
bool lrc_tok_utf8_valid(const char *s, size_t n, size_t *bad);

int lrc_tok_strmap_put(tok_strmap *m, const char *s, uint32_t n, int32_t id);
int32_t lrc_tok_strmap_get(const tok_strmap *m, const char *s, uint32_t n);
void lrc_tok_strmap_free(tok_strmap *m);
int lrc_tok_mergemap_put(tok_mergemap *m, int32_t a, int32_t b, int32_t rank, int32_t merged);
/* Returns the index of (a, b), or -1. */
int64_t lrc_tok_mergemap_find(const tok_mergemap *m, int32_t a, int32_t b);

#endif
