/* lrc.h — the embedding API of lrc: run a compiled package from C.
 *
 * A package is the directory `lrc compile` writes (--target cpu or cuda;
 * with --ctx C, a decoder that takes one token a step and keeps its KV
 * cache). This header is all a program needs: it includes only the C
 * standard headers, and the library it links (liblrc, `pkg-config --libs
 * lrc` or CMake's lrc::lrc) needs no Lua, LLVM or NVRTC at run time.
 *
 *     lrc_session *s;
 *     if (lrc_session_open("pkg", NULL, &s) != LRC_STATUS_OK) {
 *         fprintf(stderr, "%s\n", lrc_session_error(s));
 *         lrc_session_close(s);
 *         return 1;
 *     }
 *     const float *logits;
 *     int64_t vocab;
 *     lrc_session_step(s, 'I', &logits, &vocab);   (a decoder package)
 *     lrc_session_close(s);
 *
 * Errors. Every function that can fail returns an lrc_status; on failure
 * the session keeps a one-line message naming what is wrong (the file, the
 * tensor, the index), the same text `lrc forward` and `lrc generate` print
 * after "lrc: ", since they run packages through this API. Bad input (a
 * missing or damaged package, weights of the wrong shape, inputs larger
 * than compiled, token ids outside the vocabulary) is always an error
 * code, never an abort. So is running out of memory: LRC_STATUS_NOMEM,
 * with a message that begins or continues "out of memory" and says what
 * for; the library never ends its host (no exit, no abort). Like
 * sqlite3_open, lrc_session_open returns a session even when it fails, so
 * that its message can be read: close it in every case.
 *
 * Threads. A session is used by one thread at a time; sessions are
 * independent of each other. The cpu target runs each call on the
 * session's own thread pool.
 *
 * Memory. Data passed in is copied before the call returns; pointers the
 * session returns stay valid until the next call on that session: outputs
 * until one that runs, binds or closes it, the error message until any. */
#ifndef LRC_H
#define LRC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define LRC_API __attribute__((visibility("default")))
#else
#define LRC_API
#endif

/* What a call returned. */
typedef enum lrc_status {
    LRC_STATUS_OK = 0,
    LRC_STATUS_PACKAGE = 1, /* the package: missing, damaged, another format version, for another CPU */
    LRC_STATUS_INVALID = 2, /* the caller's data or call: names, types, shapes, token ids, a full context */
    LRC_STATUS_DEVICE = 3,  /* the GPU: no driver or device, too old, or a failure while running */
    LRC_STATUS_NOMEM = 4,   /* the host's memory (or threads) ran out: the call changed nothing, freed what it made, and may be retried */
} lrc_status;

/* Element types of the arrays passed in and out. */
typedef enum lrc_elem {
    LRC_ELEM_F32 = 0,
    LRC_ELEM_BF16 = 1, /* weights only */
    LRC_ELEM_F16 = 2,  /* weights only */
    LRC_ELEM_I32 = 3,
} lrc_elem;

#define LRC_ARRAY_MAX_DIMS 8

/* A named, dense, row-major array in the caller's or the session's memory. */
typedef struct lrc_array {
    const char *name;
    lrc_elem elem;
    int ndim;
    int64_t shape[LRC_ARRAY_MAX_DIMS];
    const void *data;
} lrc_array;

/* How a session is opened; start from lrc_session_default_options(). */
typedef struct lrc_session_options {
    int threads; /* cpu: threads of the session's pool; 0 (the default): every core this process may run on */
} lrc_session_options;

/* What a package was compiled for (lrc_session_describe). */
typedef struct lrc_session_info {
    char target[16];     /* "cpu" or "cuda" */
    char device[128];    /* cuda: the GPU's name; cpu: the CPU the package was compiled for */
    int sm;              /* cuda: the GPU's compute capability, 90 for sm_90; cpu: 0 */
    int64_t batch, seq;  /* the token shape [batch, seq] it was compiled for (1, 1 for a decoder): the most a run takes */
    int shorter_batch;   /* whether a run may take fewer rows than batch (lrc_session_run) */
    int shorter_seq;     /* whether a run may take fewer positions than seq */
    int64_t context;     /* a decoder's KV-cache positions; 0 for a whole-sequence package */
    int64_t vocab;       /* the vocabulary (an image model: its classes) */
    int64_t position;    /* a decoder: the position the next lrc_session_step writes */
    int has_weights;     /* whether weights are bound (compiled in, or bound since) */
    int n_inputs;        /* inputs, described by lrc_session_input */
    int n_outputs;       /* outputs of a run, read by lrc_session_output_at */
    int threads;         /* cpu: the pool's threads; cuda: 0 */
} lrc_session_info;

typedef struct lrc_session lrc_session;

/* This library's version, "0.1.0". */
LRC_API const char *lrc_version(void);

/* What a status means, for a person: "ok", "package", "invalid",
 * "device", "out of memory"; "unknown status" for any other value. */
LRC_API const char *lrc_status_string(lrc_status st);

/* The default options: all cores. */
LRC_API lrc_session_options lrc_session_default_options(void);

/* Opens the package in directory `dir` (options NULL: the defaults) into
 * *out, checking everything before it returns: the format version, the
 * size and hash of the kernels, the plan, this CPU's features (cpu) or the
 * GPU's architecture (cuda: its cubin, or its PTX on a newer GPU), and the
 * weights compiled in, which are bound. A package compiled without weights
 * opens too; bind them before the first run. *out is set even on failure
 * (NULL only when out is NULL): read lrc_session_error, then close it;
 * every other call on a session that did not open returns
 * LRC_STATUS_INVALID and keeps that message. */
LRC_API lrc_status lrc_session_open(const char *dir, const lrc_session_options *options, lrc_session **out);

/* Frees everything; NULL is fine. */
LRC_API void lrc_session_close(lrc_session *s);

/* The message of the last failed call on s, one line without a newline
 * ("" after success). NULL s: a message saying so. */
LRC_API const char *lrc_session_error(const lrc_session *s);

/* The package's shapes and state. */
LRC_API lrc_status lrc_session_describe(lrc_session *s, lrc_session_info *info);

/* Input i (0 <= i < info.n_inputs) as compiled: its name, element type and
 * shape (data is NULL). Inputs a looped model can do without (its
 * iteration counts, its initial state) are listed too. */
LRC_API lrc_status lrc_session_input(lrc_session *s, int i, lrc_array *out);

/* Binds weights from a safetensors file (F32, BF16 or F16 tensors named as
 * the package's parameters), replacing the ones bound before. The file
 * must hold every parameter the package reads, each of its shape; an extra
 * or wrongly shaped tensor is an error naming the file and the tensor, and
 * then the weights bound before stay. */
LRC_API lrc_status lrc_session_bind_weights_file(lrc_session *s, const char *path);

/* Binds n weights from the caller's memory (copied), replacing those of the
 * same names and keeping the others: replace one tensor, or give all of a
 * package compiled without weights. Each must name a parameter and have
 * its shape; on any error nothing changes. */
LRC_API lrc_status lrc_session_bind_weights(lrc_session *s, const lrc_array *weights, int n);

/* Runs the package once on n inputs (by name; "tokens" I32 [batch, seq] for
 * a language model, "images" F32 [B, C, H, W] for an image model). Each
 * input has the shape it was compiled for, or fewer rows (B' <= batch) and
 * positions (T' <= seq) where info.shorter_batch and info.shorter_seq say
 * so: the run is padded to one of the shapes compiled with the package and
 * its outputs are those of a package compiled for exactly [B', T'], at the
 * cost of that shape. Token ids must lie in the vocabulary. A decoder's
 * state (its KV cache) is read and updated. */
LRC_API lrc_status lrc_session_run(lrc_session *s, const lrc_array *inputs, int n);

/* Output `name` of the last run ("logits"), F32, in *out; its data stays
 * valid until the next run, bind or close. */
LRC_API lrc_status lrc_session_output(lrc_session *s, const char *name, lrc_array *out);

/* Output i of the last run (0 <= i < info.n_outputs), in the package's
 * order, as lrc_session_output gives it. */
LRC_API lrc_status lrc_session_output_at(lrc_session *s, int i, lrc_array *out);

/* A decoder package: runs one token at the next position and returns the
 * logits for the position after it (*logits: vocab floats, valid until the
 * next call). The KV cache keeps every earlier step; when the context is
 * full it is an error (reset to start again). */
LRC_API lrc_status lrc_session_step(lrc_session *s, int32_t token, const float **logits, int64_t *vocab);

/* A decoder package: starts a new sequence at position 0; the weights
 * stay. (A step at position p reads cache rows 0..p only, so what earlier
 * sequences left there is never read; the cpu target also zeros it.) */
LRC_API lrc_status lrc_session_reset(lrc_session *s);

/* Runs the inputs of the last run `repeat` more times and gives the median
 * milliseconds of one run: the host's wall time of a whole run (cpu), the
 * device time of the launches alone, inputs already there (cuda). repeat
 * is 1 to 1000000; a run that fails is an error, with no median. */
LRC_API lrc_status lrc_session_time(lrc_session *s, int64_t repeat, double *median_ms);

/* A package compiled with a tokenizer (lrc compile --tokenizer) holds its
 * tokenizer.json: text (UTF-8) to ids, with the post-processor's tokens (a
 * BOS) when add_special, as Hugging Face tokenizers' encode gives them; and
 * ids to text, as its decode does. *ids and *text are valid until the next
 * call of the same function. Without a tokenizer, LRC_STATUS_INVALID. */
LRC_API lrc_status lrc_session_tokenize(lrc_session *s, const char *text, size_t len, int add_special, const int32_t **ids,
                                        int64_t *n);
LRC_API lrc_status lrc_session_detokenize(lrc_session *s, const int32_t *ids, int64_t n, const char **text, size_t *len);

#ifdef __cplusplus
}
#endif

#endif
