/* text_data.c — the text that lrc train and lrc eval read: --data FILE or
 * the King James Bible, as bytes (one token per byte), or as the ids of a
 * tokenizer.json. Encoding a text is done once: the ids are kept in
 * CACHE_DIR/tokens-HASH.bin, HASH over the text and the tokenizer.json. */
#include "cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* tokens-HASH.bin: magic, version, hash, text bytes, n, then n ids (i32 LE). */
static const char CACHE_MAGIC[8] = {'L', 'R', 'C', 'T', 'O', 'K', 'S', '\0'};
enum { CACHE_VERSION = 1 };

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

typedef struct {
    char magic[8];
    uint32_t version, pad;
    uint64_t hash, text_bytes, n;
} cache_head;

/* The cached ids, when the file is there, whole and of this text. */
static int32_t *cache_read(const char *path, uint64_t hash, size_t text_bytes, int64_t *n)
{
    size_t len;
    lrc_err ignore;
    char *b = lrc_read_file(path, &len, &ignore);
    cache_head h;
    if (!b || len < sizeof h) return free(b), NULL;
    memcpy(&h, b, sizeof h);
    if (memcmp(h.magic, CACHE_MAGIC, 8) || h.version != CACHE_VERSION || h.hash != hash || h.text_bytes != text_bytes ||
        h.n > (len - sizeof h) / 4 || len != sizeof h + h.n * 4)
        return free(b), NULL;
    int32_t *ids = lrc_xmalloc((size_t)h.n * 4 + 4);
    memcpy(ids, b + sizeof h, (size_t)h.n * 4);
    free(b);
    *n = (int64_t)h.n;
    return ids;
}

static int cache_write(const char *path, uint64_t hash, size_t text_bytes, const lrc_ids *ids, lrc_err *err)
{
    cache_head h = {{0}, CACHE_VERSION, 0, hash, text_bytes, (uint64_t)ids->n};
    memcpy(h.magic, CACHE_MAGIC, 8);
    size_t len = sizeof h + (size_t)ids->n * 4;
    char *b = lrc_xmalloc(len);
    memcpy(b, &h, sizeof h);
    memcpy(b + sizeof h, ids->ids, (size_t)ids->n * 4);
    int rc = lrc_write_atomic(path, b, len, err);
    free(b);
    return rc;
}

int cli_text_load(const char *path, const lrc_tokenizer *tok, const char *tok_json, const char *cache_dir, int64_t seq,
                  lrc_text *t, lrc_err *err)
{
    char *text;
    size_t len;
    const char *what = path ? path : "bible-kjv";
    if (lrc_corpus_read(path, &text, &len, err)) return LRC_EUSER;
    if (!tok) {
        int rc = lrc_text_from_bytes(t, (const uint8_t *)text, (int64_t)len, seq, what, err);
        free(text);
        return rc;
    }
    uint64_t hash = fnv(fnv(1469598103934665603ull, text, len), tok_json, strlen(tok_json));
    char cpath[4200];
    snprintf(cpath, sizeof cpath, "%s/tokens-%016llx.bin", cache_dir ? cache_dir : ".", (unsigned long long)hash);
    lrc_ids ids = {0};
    ids.ids = cache_dir ? cache_read(cpath, hash, len, &ids.n) : NULL;
    int rc = LRC_OK;
    if (!ids.ids) {
        double t0 = lrc_now_s();
        rc = lrc_tokenizer_encode(tok, text, len, false, &ids, err);
        if (rc) lrc_err_prefix(err, "%s", what);
        else printf("tokenized %s: %zu bytes into %lld tokens (%.2f bytes a token) in %.1f s\n", what, len,
                    (long long)ids.n, ids.n ? (double)len / (double)ids.n : 0.0, lrc_now_s() - t0);
        if (!rc && cache_dir) rc = cache_write(cpath, hash, len, &ids, err);
    }
    free(text);
    if (!rc) rc = lrc_text_from_ids(t, ids.ids, ids.n, seq, what, err);
    lrc_ids_free(&ids);
    return rc;
}

int cli_tokenizer_open(const char *path, lrc_tokenizer **tok, char **json, size_t *len, lrc_err *err)
{
    char file[4200];
    struct stat st;
    snprintf(file, sizeof file, stat(path, &st) == 0 && S_ISDIR(st.st_mode) ? "%s/tokenizer.json" : "%s", path);
    *tok = NULL;
    if (!(*json = lrc_read_file(file, len, err))) return LRC_EUSER;
    int rc = lrc_tokenizer_parse(*json, *len, file, tok, err);
    if (rc) free(*json), *json = NULL;
    return rc;
}

double cli_text_label_bytes(const lrc_tokenizer *tok, const int32_t *labels, int64_t n)
{
    if (!tok) return (double)n;
    double b = 0;
    for (int64_t i = 0; i < n; i++) b += (double)lrc_tokenizer_token_bytes(tok, labels[i]);
    return b;
}
