/* test_text — lrc train's text (runtime/train.c): the validation split is
 * every 20th block, seeded batches of either split stay inside it, and
 * lrc_text_val_windows (--val-tokens) gives fixed windows of the validation
 * split, T apart, each with its next tokens as labels: the same set whatever
 * the seed, which a sweep's arms need to compare. The ids are their own
 * positions, so a window's place in the text can be read off it. */
#include "../../runtime/lrc_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failed;

static void check(bool ok, const char *what)
{
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    failed += !ok;
}

/* every window of rows B x T: in the split (validation: block % 20 == 19),
 * contiguous, labels the next ids */
static bool windows_ok(const lrc_text *t, bool validation, const int32_t *tok, const int32_t *lab, int64_t B, int64_t T)
{
    for (int64_t b = 0; b < B; b++) {
        int64_t s = tok[b * T], blk = s / t->block;
        if ((blk % 20 == 19) != validation || (s + T) / t->block != blk) return false;
        for (int64_t i = 0; i < T; i++)
            if (tok[b * T + i] != s + i || lab[b * T + i] != s + i + 1) return false;
    }
    return true;
}

int main(void)
{
    enum { N = 3 << 20, B = 4, T = 64 };
    int32_t *ids = malloc(N * sizeof *ids), tok[B * T], lab[B * T], tok2[B * T], lab2[B * T];
    for (int i = 0; i < N; i++) ids[i] = i;
    lrc_text t;
    lrc_err err = {0};
    if (!ids || lrc_text_from_ids(&t, ids, N, T, "ids", &err)) return fprintf(stderr, "%s\n", err.msg), 1;
    bool train_ok = true, val_ok = true;
    lrc_rng r;
    lrc_rng_seed(&r, 7);
    for (int k = 0; k < 200; k++) {
        lrc_text_batch(&t, false, B, T, &r, tok, lab), train_ok &= windows_ok(&t, false, tok, lab, B, T);
        lrc_text_batch(&t, true, B, T, &r, tok, lab), val_ok &= windows_ok(&t, true, tok, lab, B, T);
    }
    check(train_ok, "200 seeded training batches: every window inside a training block, labels the next ids");
    check(val_ok, "200 seeded validation batches: every window inside a validation block (every 20th)");
    bool fixed = true, apart = true;
    for (int64_t e = 0; e < 50; e++) {
        lrc_text_val_windows(&t, e * B, B, T, tok, lab);
        lrc_text_val_windows(&t, e * B, B, T, tok2, lab2);
        fixed &= windows_ok(&t, true, tok, lab, B, T) && !memcmp(tok, tok2, sizeof tok) && !memcmp(lab, lab2, sizeof lab);
        for (int64_t b = 1; b < B; b++) /* within a block the next window starts T on */
            if (tok[b * T] / t.block == tok[(b - 1) * T] / t.block) apart &= tok[b * T] - tok[(b - 1) * T] == T;
    }
    check(fixed, "--val-tokens' windows: inside validation blocks, labels the next ids, the same on every call (no seed)");
    check(apart, "--val-tokens' windows: T apart within a block, so they do not overlap");
    lrc_text_val_windows(&t, 0, 1, T, tok, lab);
    check(tok[0] == 19 * t.block, "the first fixed window starts the first validation block (block 19)");
    lrc_text_free(&t);
    free(ids);
    return failed;
}
