/* generate.c — text from a compiled LLaMA decoder package through lrc.h:
 * one byte a token, greedy (the most likely byte each step), as
 * `lrc generate PKG --prompt TEXT -n N --temperature 0` prints it.
 *
 *   lrc compile models/llama.lua --preset tiny --weights w.safetensors \
 *       --target cpu --ctx 64 -o pkg
 *   cc generate.c $(pkg-config --cflags --libs lrc) -o generate
 *   ./generate pkg "In the beginning" 40 */
#include <lrc.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The most likely byte: ids past 255 have no text. */
static int greedy(const float *logits, int64_t vocab)
{
    int best = 0;
    for (int i = 1; i < vocab && i < 256; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: %s PKG PROMPT N\n", argv[0]);
        return 2;
    }
    const char *prompt = argv[2];
    long n = strtol(argv[3], NULL, 10);
    size_t len = strlen(prompt);
    if (len == 0 || n < 0) {
        fprintf(stderr, "generate: give a prompt of at least one byte and N >= 0\n");
        return 2;
    }
    lrc_session *s = NULL;
    lrc_session_info info;
    /* reset refuses a package compiled for whole sequences (no --ctx) */
    if (lrc_session_open(argv[1], NULL, &s) != LRC_STATUS_OK || lrc_session_reset(s) != LRC_STATUS_OK ||
        lrc_session_describe(s, &info) != LRC_STATUS_OK) {
        fprintf(stderr, "generate: %s\n", lrc_session_error(s)); /* one line naming the file and what is wrong */
        lrc_session_close(s);
        return 1;
    }
    if ((int64_t)len + n > info.context) {
        fprintf(stderr, "generate: %s holds %lld positions, fewer than the prompt and %ld bytes need\n", argv[1],
                (long long)info.context, n);
        lrc_session_close(s);
        return 1;
    }
    fputs(prompt, stdout);
    const float *logits = NULL;
    int64_t vocab = 0;
    int next = 0, rc = 0;
    /* the prompt's bytes fill the KV cache; from its last one on, each
     * step's logits give the next byte, which the following step reads */
    for (long i = 0; i < (long)len + n - 1 && n > 0; i++) {
        int token = i < (long)len ? (unsigned char)prompt[i] : next;
        if (lrc_session_step(s, token, &logits, &vocab) != LRC_STATUS_OK) {
            fprintf(stderr, "\ngenerate: %s\n", lrc_session_error(s));
            rc = 1;
            break;
        }
        if (i < (long)len - 1) continue;
        next = greedy(logits, vocab);
        putchar(next);
    }
    putchar('\n');
    lrc_session_close(s);
    return rc;
}
