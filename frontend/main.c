/* main.c — the `lrc` command: dispatch to the subcommands and the option
 * handling they share. */
#include "cli.h"

#include "../codegen/cuda/lrc_cuda.h"
#include "../codegen/llvm/lrc_llvm.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <getopt.h>
#include <string.h>

static const char *usage_text =
    "usage: lrc COMMAND [options]\n"
    "\n"
    "lrc compiles neural-network models described in Lua.\n"
    "\n"
    "commands:\n"
    "  inspect MODEL   parameters by group, FLOPs per token, the IR\n"
    "  init MODEL      initialise parameters from a seed into a safetensors file\n"
    "  train MODEL     train on text (next byte) or images (vit), with checkpoints and --resume\n"
    "  eval MODEL      test accuracy of an image model; validation loss of a language model\n"
    "  plot RUN...     loss (and accuracy) curves of training runs in one PNG\n"
    "  diagnose MODEL  a looped model's state per iteration and its recurrence's Jacobian\n"
    "  backward MODEL  loss and parameter gradients of a batch (reverse mode)\n"
    "  compile MODEL   compile ahead of time into a package (kernels, plan, weights)\n"
    "  forward MODEL   run the model (or a package) on tokens or images from a safetensors file\n"
    "  generate MODEL  continue a prompt, byte by byte, with a KV cache\n"
    "  profile MODEL   per-kernel times against this machine's ceilings, and a trace\n"
    "  demo            build, initialise and run the default LayerRoPE LLaMA\n"
    "  gemm-bench      time one generated GEMM (for bench/cpu_gemm.py)\n"
    "  devices         the targets this machine can compile for and run (also --version)\n"
    "\n"
    "MODEL is a Lua file, or the name of a built-in model (llama, vit, parcae).\n"
    "Every command takes --help. Exit status: 0 success, 1 bad input, 2 bad usage.\n";

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

void cli_model_opts_free(cli_model_opts *o) { free(o->sets); }

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

int cli_parse_args(const char *cmd, int argc, char **argv, const struct option *opts, const char *help,
                      bool need_model, cli_args *a)
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
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":o:n:", opts, NULL)) != -1) {
        if (cli_model_option(&a->m, c, optarg)) continue;
        switch (c) {
        case OPT_HELP: fputs(help, stdout); return 0;
        case OPT_PARAMS: a->params = true; break;
        case OPT_FLOPS: a->flops = true; break;
        case OPT_IR: a->ir = true; break;
        case OPT_KERNELS: a->kernels = true; break;
        case OPT_AFTER: a->after = optarg; break;
        case OPT_SEQ:
            if (cli_parse_int(optarg, 1, &a->seq)) return cli_usage_error(cmd, "--seq %s: expected an integer >= 1", optarg);
            break;
        case OPT_BATCH:
            if (cli_parse_int(optarg, 1, &a->batch)) return cli_usage_error(cmd, "--batch %s: expected an integer >= 1", optarg);
            break;
        case OPT_SEED:
            if (cli_parse_int(optarg, 0, &a->seed)) return cli_usage_error(cmd, "--seed %s: expected an integer >= 0", optarg);
            break;
        case OPT_THREADS:
            /* --threads 0 is bad input (exit 1), not bad usage: it names a count */
            if (cli_parse_int(optarg, INT64_MIN, &a->threads) || a->threads > LRC_POOL_MAX_THREADS)
                return cli_usage_error(cmd, "--threads %s: expected an integer from 1 to %d", optarg, LRC_POOL_MAX_THREADS);
            break;
        case OPT_REPEAT:
            if (cli_parse_int(optarg, 1, &a->repeat)) return cli_usage_error(cmd, "--repeat %s: expected an integer >= 1", optarg);
            break;
        case OPT_WEIGHTS: a->weights = optarg; break;
        case OPT_INPUT: a->input = optarg; break;
        case OPT_TARGET: a->target = optarg; break;
        case OPT_PROMPT: a->prompt = optarg; break;
        case 'o': a->out = optarg; break;
        case 'n':
            if (strcmp(cmd, "generate")) return cli_usage_error(cmd, "unknown option -n");
            /* fall through */
        case OPT_NEW:
            if (cli_parse_int(optarg, 0, &a->new_tokens)) return cli_usage_error(cmd, "-n %s: expected an integer >= 0", optarg);
            break;
        case OPT_TOPK:
            if (cli_parse_int(optarg, 0, &a->top_k)) return cli_usage_error(cmd, "--top-k %s: expected an integer >= 0", optarg);
            break;
        case OPT_CTX:
            if (cli_parse_int(optarg, 1, &a->ctx) || a->ctx > INT32_MAX) return cli_usage_error(cmd, "--ctx %s: expected a positive integer", optarg);
            break;
        case OPT_STEPS:
            if (cli_parse_int(optarg, INT64_MIN, &a->steps) || a->steps > INT32_MAX || a->steps < INT32_MIN)
                return cli_usage_error(cmd, "--steps %s: expected an integer", optarg);
            break;
        case OPT_EVAL_EVERY:
            if (cli_parse_int(optarg, 1, &a->eval_every)) return cli_usage_error(cmd, "--eval-every %s: expected an integer >= 1", optarg);
            break;
        case OPT_STOP_AFTER:
            if (cli_parse_int(optarg, 1, &a->stop_after)) return cli_usage_error(cmd, "--stop-after %s: expected an integer >= 1", optarg);
            break;
        case OPT_ACCUM:
            if (cli_parse_int(optarg, 1, &a->accum) || a->accum > 1 << 20)
                return cli_usage_error(cmd, "--accum %s: expected an integer from 1 to %d", optarg, 1 << 20);
            break;
        case OPT_DATA: a->data = optarg; break;
        case OPT_ARCH: a->arch = optarg; break;
        case OPT_PRECISION:
            if (strcmp(optarg, "bf16") && strcmp(optarg, "f32"))
                return cli_usage_error(cmd, "--precision %s: expected bf16 or f32", optarg);
            a->precision = optarg;
            break;
        case OPT_RESUME: a->resume = optarg; break;
        case OPT_DECAY_ALL: a->decay_all = true; break;
        case OPT_FLIP: a->flip = true; break;
        case OPT_CROP_PAD:
            if (cli_parse_int(optarg, 0, &a->crop_pad) || a->crop_pad > 64)
                return cli_usage_error(cmd, "--crop-pad %s: expected an integer from 0 to 64", optarg);
            break;
        case OPT_WEIGHT_DECAY: {
            char *end;
            errno = 0;
            double v = strtod(optarg, &end);
            if (!*optarg || *end || errno || !isfinite(v) || v < 0 || v >= 1)
                return cli_usage_error(cmd, "--weight-decay %s: expected a number in [0, 1)", optarg);
            a->weight_decay = v;
            break;
        }
        case OPT_LR:
        case OPT_CLIP:
        case OPT_WARMUP: {
            char *end;
            errno = 0;
            double v = strtod(optarg, &end);
            if (!*optarg || *end || errno || !isfinite(v) || v < 0 || (c == OPT_WARMUP && v >= 1))
                return cli_usage_error(cmd, "%s %s: expected a number%s",
                                       c == OPT_LR ? "--lr" : c == OPT_CLIP ? "--clip" : "--warmup", optarg,
                                       c == OPT_WARMUP ? " in [0, 1)" : " >= 0");
            *(c == OPT_LR ? &a->lr : c == OPT_CLIP ? &a->clip : &a->warmup) = v;
            break;
        }
        case OPT_TEMPERATURE: {
            char *end;
            errno = 0;
            a->temperature = strtod(optarg, &end);
            if (!*optarg || *end || errno || !(a->temperature >= 0) || a->temperature > 1e6)
                return cli_usage_error(cmd, "--temperature %s: expected a number >= 0", optarg);
            break;
        }
        case ':': return cli_usage_error(cmd, "%s needs a value", argv[optind - 1]);
        default: return cli_usage_error(cmd, "unknown option %s", argv[optind - 1]);
        }
    }
    if (need_model) {
        if (optind >= argc) return cli_usage_error(cmd, "missing MODEL (a .lua file or a built-in model name)");
        a->m.model = argv[optind++];
    }
    if (optind < argc) return cli_usage_error(cmd, "unexpected argument '%s'", argv[optind]);
    return -1;
}

int cli_check_run_args(const char *cmd, const cli_args *a, const char *need, bool have)
{
    bool pkg = lrc_package_is(a->m.model);
    if (!have || (!pkg && !a->weights))
        return pkg ? cli_usage_error(cmd, "needs %s", need) : cli_usage_error(cmd, "needs --weights and %s", need);
    if (strcmp(a->target, "ref") && strcmp(a->target, "cpu"))
        return cli_usage_error(cmd, "--target %s: %s runs on the cpu target", a->target, cmd);
    return -1;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage_text, stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "devices")) {
        lrc_llvm_target t;
        lrc_err err;
        printf("lrc %s (built with LLVM %s)\n", LRC_VERSION, LRC_LLVM_VERSION);
        printf("target ref: available (the plain-C reference)\n");
        if (lrc_llvm_target_host(&t, &err)) printf("target cpu: not available: %s\n", err.msg);
        else printf("target cpu: available (%s, %d-float vectors, GEMM tile %dx%d)\n", t.triple, t.tiling.vec, t.tiling.mr,
                    t.tiling.vec * t.tiling.nv);
        /* cuda: compiling needs NVRTC only; running needs the driver, a GPU and cuBLAS */
        char why[256];
        if (lrc_nvrtc_available(why, sizeof why))
            printf("target cuda, compile: available (NVRTC %s: lrc compile --target cuda --arch sm_XX, no GPU needed)\n",
                   lrc_nvrtc_version());
        else printf("target cuda, compile: not available: %s\n", why);
        lrc_cuda_device dev;
        if (lrc_cuda_probe(&dev, why, sizeof why))
            printf("target cuda, run: not available: %s\n", why);
        else
            printf("target cuda, run: available: %s (sm_%d, %.0f GiB; %d device%s; lrc forward runs cuda packages)\n",
                   dev.name, dev.sm, (double)dev.memory_bytes / (1 << 30), dev.count, dev.count == 1 ? "" : "s");
        return 0;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {{"inspect", cmd_inspect}, {"init", cmd_init}, {"compile", cmd_compile}, {"profile", cmd_profile}, {"generate", cmd_generate}, {"backward", cmd_backward}, {"train", cmd_train}, {"plot", cmd_plot}, {"eval", cmd_eval}, {"diagnose", cmd_diagnose}, {"forward", cmd_forward}, {"demo", cmd_demo},
                  {"gemm-bench", cmd_gemm_bench}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(cmd, cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "lrc: unknown command '%s' (commands: inspect, init, forward, demo; see lrc --help)\n", cmd);
    return EXIT_USAGE;
}
