/* main.c — the lrc command: the command table, lrc --help, devices. */
#include "cli.h"
#include "cli_targets.h"

#include <stdio.h>
#include <string.h>

/* lrc devices, and lrc --version: what this machine can compile for and run. */
static int cmd_devices(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, 0, OPT_HELP}, {0, 0, 0, 0}};
    static const char *help = "usage: lrc devices\n"
                              "\n"
                              "The version, and for each target (ref, cpu, cuda to compile, cuda to run)\n"
                              "whether this machine has it, and if not, why. lrc --version prints the same.\n";
    opterr = 0;
    optind = 1;
    int c = getopt_long(argc, argv, ":", opts, NULL);
    if (c == OPT_HELP) return cli_help("devices", opts, "", help);
    if (c != -1) return cli_usage_error("devices", "unknown option %s", argv[optind - 1]);
    if (optind < argc) return cli_usage_error("devices", "unexpected argument '%s'", argv[optind]);
    printf("lrc %s (built with LLVM %s)\n", LRC_VERSION, LRC_LLVM_VERSION);
    for (int i = 0; i < lrc_n_targets; i++) cli_target_of(lrc_targets[i])->report();
    return 0;
}

/* The commands. lrc --help prints this table, so a command the dispatcher
 * runs is always listed (and tests/cli/help.sh then wants it in docs/cli.md). */
static const struct {
    const char *name, *args, *summary;
    int (*fn)(int, char **);
} commands[] = {
    {"inspect", "MODEL", "parameters by group, FLOPs per token, the IR", cmd_inspect},
    {"init", "MODEL", "initialise parameters from a seed into a safetensors file", cmd_init},
    {"train", "MODEL", "train on text (bytes, or a tokenizer's ids) or images, with checkpoints and --resume", cmd_train},
    {"eval", "MODEL", "test accuracy of an image model; validation loss of a language model", cmd_eval},
    {"plot", "RUN...", "loss (and accuracy) curves of training runs in one PNG", cmd_plot},
    {"sweep", "MODEL", "a grid of training runs (rates, seeds, config keys): eta*, L*, S per arm", cmd_sweep},
    {"diagnose", "MODEL", "the residual stream per layer; a looped model's state and its Jacobian", cmd_diagnose},
    {"analyze", "CHECKPOINT", "what the norm gains say about depth: percentiles, cosines, MDS, LayerRoPE", cmd_analyze},
    {"backward", "MODEL", "loss and parameter gradients of a batch (reverse mode)", cmd_backward},
    {"compile", "MODEL", "compile ahead of time into a package (kernels, plan, weights)", cmd_compile},
    {"export", "RUN|WEIGHTS", "write a model's weights as a Hugging Face directory (--hf)", cmd_export},
    {"forward", "MODEL", "run the model (or a package) on tokens or images from a safetensors file", cmd_forward},
    {"generate", "MODEL", "continue a prompt with a KV cache (the model's tokenizer.json, or bytes)", cmd_generate},
    {"tokenize", "TOKENIZER", "text to token ids (or --decode) with a Hugging Face tokenizer.json", cmd_tokenize},
    {"profile", "MODEL", "per-kernel times against this machine's ceilings, and a trace", cmd_profile},
    {"demo", "", "build, initialise and run the default LayerRoPE LLaMA", cmd_demo},
    {"gemm-bench", "", "time one generated GEMM (for bench/cpu_gemm.py)", cmd_gemm_bench},
    {"devices", "", "the targets this machine can compile for and run (also --version)", cmd_devices},
    {"cache", "", "the cache of compiled kernels: folder, entries, size; --clear", cmd_cache},
};

static void usage(FILE *f)
{
    fputs("usage: lrc COMMAND [options]\n"
          "\n"
          "lrc compiles neural-network models described in Lua.\n"
          "\n"
          "commands:\n",
          f);
    /* the first column as wide as its widest entry, then two spaces */
    int width = 0;
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        int w = (int)(strlen(commands[i].name) + (*commands[i].args ? 1 + strlen(commands[i].args) : 0));
        if (w > width) width = w;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        char head[64];
        snprintf(head, sizeof head, "%s%s%s", commands[i].name, *commands[i].args ? " " : "", commands[i].args);
        fprintf(f, "  %-*s  %s\n", width, head, commands[i].summary);
    }
    /* the built-in models from the table embedded in this binary */
    fputs("\n"
          "MODEL is a Lua file, a Hugging Face model directory, or a built-in model:", f);
    for (int i = 0, n = 0; i < lrc_embedded_count; i++)
        if (!strncmp(lrc_embedded_files[i].name, "models/", 7)) {
            const char *name = lrc_embedded_files[i].name + 7;
            fprintf(f, "%s%.*s", n++ ? ", " : " ", (int)(strcspn(name, ".")), name);
        }
    fputs(".\n"
          "forward, generate and profile also run a package that lrc compile wrote.\n"
          "Every command takes --help. Exit status: 0 success, 1 bad input, 2 bad usage.\n",
          f);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "--version")) return cmd_devices(argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    /* the commands from the dispatcher's table, so that none is left out */
    char names[512] = "";
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", commands[i].name);
    fprintf(stderr, "lrc: unknown command '%s' (commands: %s; see lrc --help)\n", cmd, names);
    return EXIT_USAGE;
}
