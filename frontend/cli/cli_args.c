/* cli_args.c — what every command shares: its options parsed into
 * cli_args, --help checked against the parser, usage and user errors,
 * model options (main.c dispatches to the commands). */
#include "cli.h"
#include "../compile/lrc_compile.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <getopt.h>
#include <string.h>
#include <sys/stat.h>

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "lrc %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see lrc %s --help)\n", cmd);
    va_end(ap);
    return EXIT_USAGE;
}

int cli_user_error(const lrc_err *err)
{
    char line[sizeof err->msg];
    size_t i = 0;
    for (; err->msg[i] && i + 1 < sizeof line; i++) line[i] = err->msg[i] == '\n' ? ' ' : err->msg[i];
    line[i] = 0;
    fprintf(stderr, "lrc: %s\n", line);
    return EXIT_USER;
}

int cli_model_option(cli_model_opts *o, int opt, const char *arg)
{
    if (opt == OPT_PRESET) {
        o->preset = arg;
        return 1;
    }
    if (opt == OPT_SET) {
        o->sets = realloc(o->sets, (size_t)(o->n_sets + 1) * sizeof *o->sets);
        o->sets[o->n_sets++] = (char *)arg;
        return 1;
    }
    return 0;
}

void cli_model_opts_free(cli_model_opts *o)
{
    free(o->sets);
    free(o->hf_weights);
}

int cli_parse_int(const char *s, int64_t min, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno == ERANGE || v < min) return -1;
    *out = v;
    return 0;
}

int cli_model_load(const char *cmd, const cli_model_opts *o, lrc_model *m, lrc_err *err)
{
    (void)cmd;
    return lrc_model_load(m, o->model, o->preset, o->sets, o->n_sets, err);
}

/* The next option a help text's synopsis (help up to end) offers after p,
 * written as there ("--seq", "-o"), into name; returns where to go on, or
 * NULL when there is none. An option is a '-' after a space, '[', '|' or a
 * line break, then a letter (tests/cli/help.sh reads synopses by the same
 * rule). */
static const char *synopsis_option(const char *p, const char *end, char *name, size_t cap)
{
    for (; p < end; p++) {
        if (*p != '-' || !strchr(" [|\n", p[-1])) continue; /* help starts "usage:": p[-1] exists */
        const char *q = p + 1 + (p[1] == '-');
        if (q >= end || !isalpha((unsigned char)*q)) continue;
        while (q < end && (isalnum((unsigned char)*q) || *q == '-')) q++;
        size_t n = (size_t)(q - p) < cap ? (size_t)(q - p) : cap - 1;
        memcpy(name, p, n);
        name[n] = 0;
        return q;
    }
    return NULL;
}

/* The synopsis: the usage lines, before the help's first blank line. */
static const char *synopsis_end(const char *help)
{
    const char *end = strstr(help, "\n\n");
    return end ? end : help + strlen(help);
}

static bool synopsis_has(const char *help, const char *opt)
{
    char name[64];
    for (const char *p = help + 1, *end = synopsis_end(help); (p = synopsis_option(p, end, name, sizeof name));)
        if (!strcmp(name, opt)) return true;
    return false;
}

int cli_help(const char *cmd, const struct option *opts, const char *shorts, const char *help)
{
    fputs(help, stdout);
    fflush(stdout);
    int bad = 0;
    char name[64];
    for (const char *p = help + 1, *end = synopsis_end(help); (p = synopsis_option(p, end, name, sizeof name));) {
        bool known = false;
        if (name[1] == '-')
            for (const struct option *o = opts; o->name && !known; o++) known = !strcmp(o->name, name + 2);
        else known = !name[2] && strchr(shorts, name[1]);
        if (!known) bad = fprintf(stderr, "lrc %s: internal error: --help lists %s, which the parser does not take\n", cmd, name);
    }
    for (const struct option *o = opts; o->name; o++) {
        snprintf(name, sizeof name, "--%s", o->name);
        if (strcmp(o->name, "help") && !synopsis_has(help, name))
            bad = fprintf(stderr, "lrc %s: internal error: the parser takes %s, which --help does not list\n", cmd, name);
    }
    for (const char *s = shorts; *s; s++) {
        snprintf(name, sizeof name, "-%c", *s);
        if (!synopsis_has(help, name))
            bad = fprintf(stderr, "lrc %s: internal error: the parser takes %s, which --help does not list\n", cmd, name);
    }
    return bad ? EXIT_INTERNAL : 0;
}

/* -o and -n are the short options cli_parse_args' switch knows (both take a
 * value); a command takes those its --help synopsis offers, so the two cannot
 * disagree. Fills getopt's optstring and the letters alone. */
static void synopsis_shorts(const char *help, char optstring[8], char letters[3])
{
    char *o = optstring, *l = letters;
    *o++ = ':'; /* a missing value returns ':' */
    for (const char *c = "on"; *c; c++)
        if (synopsis_has(help, (const char[]){'-', *c, 0})) *o++ = *c, *o++ = ':', *l++ = *c;
    *o = *l = 0;
}

/* An integer option's value into its field: true when c is one (*rc then
 * -1, or the usage error's status). */
static bool parse_int_option(const char *cmd, int c, const char *arg, cli_args *a, int *rc)
{
    *rc = -1;
    switch (c) {
    case OPT_SEQ:
        if (cli_parse_int(arg, 1, &a->seq)) *rc = cli_usage_error(cmd, "--seq %s: expected an integer >= 1", arg);
        return true;
    case OPT_BATCH:
        if (cli_parse_int(arg, 1, &a->batch)) *rc = cli_usage_error(cmd, "--batch %s: expected an integer >= 1", arg);
        return true;
    case OPT_SEED:
        if (cli_parse_int(arg, 0, &a->seed)) *rc = cli_usage_error(cmd, "--seed %s: expected an integer >= 0", arg);
        return true;
    case OPT_THREADS:
        /* --threads 0 is bad input (exit 1), not bad usage: it names a count */
        if (cli_parse_int(arg, INT64_MIN, &a->threads) || a->threads > LRC_POOL_MAX_THREADS)
            *rc = cli_usage_error(cmd, "--threads %s: expected an integer from 1 to %d", arg, LRC_POOL_MAX_THREADS);
        return true;
    case OPT_REPEAT:
        if (cli_parse_int(arg, 1, &a->repeat)) *rc = cli_usage_error(cmd, "--repeat %s: expected an integer >= 1", arg);
        return true;
    case 'n':
    case OPT_NEW:
        if (cli_parse_int(arg, 0, &a->new_tokens))
            *rc = cli_usage_error(cmd, "%s %s: expected an integer >= 0", c == 'n' ? "-n" : "--tokens", arg);
        return true;
    case OPT_TOPK:
        if (cli_parse_int(arg, 0, &a->top_k)) *rc = cli_usage_error(cmd, "--top-k %s: expected an integer >= 0", arg);
        return true;
    case OPT_CTX:
        if (cli_parse_int(arg, 1, &a->ctx) || a->ctx > INT32_MAX) *rc = cli_usage_error(cmd, "--ctx %s: expected a positive integer", arg);
        return true;
    case OPT_MIN_SEQ:
        if (cli_parse_int(arg, 1, &a->min_seq) || a->min_seq > INT32_MAX)
            *rc = cli_usage_error(cmd, "--min-seq %s: expected a positive integer", arg);
        return true;
    case OPT_STEPS:
        if (cli_parse_int(arg, INT64_MIN, &a->steps) || a->steps > INT32_MAX || a->steps < INT32_MIN)
            *rc = cli_usage_error(cmd, "--steps %s: expected an integer", arg);
        return true;
    case OPT_EVAL_EVERY:
        if (cli_parse_int(arg, 1, &a->eval_every)) *rc = cli_usage_error(cmd, "--eval-every %s: expected an integer >= 1", arg);
        return true;
    case OPT_VAL_TOKENS:
        if (cli_parse_int(arg, 1, &a->val_tokens)) *rc = cli_usage_error(cmd, "--val-tokens %s: expected an integer >= 1", arg);
        return true;
    case OPT_STOP_AFTER:
        if (cli_parse_int(arg, 1, &a->stop_after)) *rc = cli_usage_error(cmd, "--stop-after %s: expected an integer >= 1", arg);
        return true;
    case OPT_ACCUM:
        if (cli_parse_int(arg, 1, &a->accum) || a->accum > 1 << 20)
            *rc = cli_usage_error(cmd, "--accum %s: expected an integer from 1 to %d", arg, 1 << 20);
        return true;
    case OPT_ZERO:
        if (cli_parse_int(arg, 0, &a->zero) || a->zero > 1) *rc = cli_usage_error(cmd, "--zero %s: expected 0 or 1", arg);
        return true;
    case OPT_CROP_PAD:
        if (cli_parse_int(arg, 0, &a->crop_pad) || a->crop_pad > 64)
            *rc = cli_usage_error(cmd, "--crop-pad %s: expected an integer from 0 to 64", arg);
        return true;
    default: return false;
    }
}

/* A real number option's value, as parse_int_option does an integer's. */
static bool parse_real_option(const char *cmd, int c, const char *arg, cli_args *a, int *rc)
{
    if (c != OPT_WEIGHT_DECAY && c != OPT_LR && c != OPT_CLIP && c != OPT_WARMUP && c != OPT_TEMPERATURE) return false;
    char *end;
    errno = 0;
    double v = strtod(arg, &end);
    bool bad = !*arg || *end || errno;
    *rc = -1;
    if (c == OPT_WEIGHT_DECAY) {
        if (bad || !isfinite(v) || v < 0 || v >= 1) *rc = cli_usage_error(cmd, "--weight-decay %s: expected a number in [0, 1)", arg);
        else a->weight_decay = v;
    } else if (c == OPT_TEMPERATURE) {
        a->temperature = v;
        if (bad || !(v >= 0) || v > 1e6) *rc = cli_usage_error(cmd, "--temperature %s: expected a number >= 0", arg);
    } else if (bad || !isfinite(v) || v < 0 || (c == OPT_WARMUP && v >= 1)) {
        *rc = cli_usage_error(cmd, "%s %s: expected a number%s", c == OPT_LR ? "--lr" : c == OPT_CLIP ? "--clip" : "--warmup", arg,
                              c == OPT_WARMUP ? " in [0, 1)" : " >= 0");
    } else {
        *(c == OPT_LR ? &a->lr : c == OPT_CLIP ? &a->clip : &a->warmup) = v;
    }
    return true;
}

/* The defaults of the fields a command's options may set. */
static void args_defaults(cli_args *a)
{
    memset(a, 0, sizeof *a);
    a->seq = 256;
    a->batch = 0; /* not given: each command has its default */
    a->target = "ref";
    a->new_tokens = -1;
    a->lr = -1;
    a->steps = -1; /* not given */
    a->warmup = 0.1;
    a->temperature = 0.8;
    a->top_k = 40;
    a->threads = -1; /* all cores */
    a->crop_pad = -1;
}

int cli_parse_args(const char *cmd, int argc, char **argv, const struct option *opts, const char *help,
                      bool need_model, cli_args *a)
{
    args_defaults(a);
    char shortopts[8], shorts[3];
    synopsis_shorts(help, shortopts, shorts);
    opterr = 0;
    optind = 1;
    int c, rc;
    while ((c = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
        if (cli_model_option(&a->m, c, optarg)) continue;
        if (parse_int_option(cmd, c, optarg, a, &rc) || parse_real_option(cmd, c, optarg, a, &rc)) {
            if (rc >= 0) return rc;
            continue;
        }
        switch (c) {
        case OPT_HELP: return cli_help(cmd, opts, shorts, help);
        case OPT_PARAMS: a->params = true; break;
        case OPT_FLOPS: a->flops = true; break;
        case OPT_IR: a->ir = true; break;
        case OPT_KERNELS: a->kernels = true; break;
        case OPT_AFTER: a->after = optarg; break;
        case OPT_WEIGHTS: a->weights = optarg; break;
        case OPT_INPUT: a->input = optarg; break;
        case OPT_TARGET: a->target = optarg; break;
        case OPT_PROMPT: a->prompt = optarg; break;
        case OPT_PROMPT_IDS: a->prompt_ids = optarg; break;
        case OPT_HF: a->out = optarg; break;
        case 'o': a->out = optarg; break;
        case OPT_DATA: a->data = optarg; break;
        case OPT_TOKENIZER: a->tokenizer = optarg; break;
        case OPT_ARCH: a->arch = optarg; break;
        case OPT_PRECISION:
            if (strcmp(optarg, "bf16") && strcmp(optarg, "f32"))
                return cli_usage_error(cmd, "--precision %s: expected bf16 or f32", optarg);
            a->precision = optarg;
            break;
        case OPT_WEIGHTS_DTYPE:
            if (lrc_wstore_parse(optarg, &(lrc_wstore){0}))
                return cli_usage_error(cmd, "--weights-dtype %s: expected f32, bf16 or q8", optarg);
            a->weights_dtype = optarg;
            break;
        case OPT_LOGITS:
            if (strcmp(optarg, "all") && strcmp(optarg, "last")) return cli_usage_error(cmd, "--logits %s: expected all or last", optarg);
            a->logits_last = !strcmp(optarg, "last");
            break;
        case OPT_RESUME: a->resume = optarg; break;
        case OPT_DECAY_ALL: a->decay_all = true; break;
        case OPT_FLIP: a->flip = true; break;
        case ':': return cli_usage_error(cmd, "%s needs a value", argv[optind - 1]);
        default: return cli_usage_error(cmd, "unknown option %s", argv[optind - 1]);
        }
    }
    if (need_model) {
        if (optind >= argc) return cli_usage_error(cmd, "missing MODEL (a .lua file, a Hugging Face directory or a built-in model name)");
        a->m.model = argv[optind++];
        /* a Hugging Face directory brings its weights: model.safetensors or
         * the index of its shards, named in errors */
        static const char *const uses[] = {"forward", "backward", "generate", "compile", "profile", "diagnose", "eval"};
        bool runs = false;
        for (size_t i = 0; i < sizeof uses / sizeof uses[0]; i++) runs |= !strcmp(cmd, uses[i]);
        if (!a->weights && runs && lrc_hf_is_dir(a->m.model) && !(a->weights = a->m.hf_weights = lrc_safetensors_dir_file(a->m.model))) {
            fprintf(stderr, "lrc: out of memory\n");
            exit(1);
        }
    }
    if (optind < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    return -1;
}

int cli_check_run_args(const char *cmd, const cli_args *a, const char *need, bool have)
{
    bool pkg = lrc_package_is(a->m.model);
    if (!have || (!pkg && !a->weights))
        return pkg ? cli_usage_error(cmd, "needs %s", need) : cli_usage_error(cmd, "needs --weights and %s", need);
    if (lrc_target_compiled(lrc_target_find(a->target)) != &lrc_target_cpu) /* the default's compiled code runs there too */
        return cli_usage_error(cmd, "--target %s: %s runs on the %s target", a->target, cmd, lrc_target_cpu.name);
    return -1;
}

