/* main.c — the `lrc` command: dispatch to the subcommands and the option
 * handling they share. */
#include "cli.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const char *usage_text =
    "usage: lrc COMMAND [options]\n"
    "\n"
    "lrc compiles neural-network models described in Lua.\n"
    "\n"
    "commands:\n"
    "  inspect MODEL   parameters by group, FLOPs per token, the IR\n"
    "  init MODEL      initialise parameters from a seed into a safetensors file\n"
    "  forward MODEL   run the model on tokens from a safetensors file\n"
    "  demo            build, initialise and run the default LayerRoPE LLaMA\n"
    "  gemm-bench      time one generated GEMM (for bench/cpu_gemm.py)\n"
    "\n"
    "MODEL is a Lua file, or the name of a built-in model (llama).\n"
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
    if (!strcmp(cmd, "--version")) {
        printf("lrc %s (built with LLVM %s)\nbackends: %s\n", LRC_VERSION, LRC_LLVM_VERSION, lrc_backend_list());
        return 0;
    }
    static const struct {
        const char *name;
        int (*fn)(int, char **);
    } cmds[] = {{"inspect", cmd_inspect}, {"init", cmd_init}, {"forward", cmd_forward}, {"demo", cmd_demo},
                  {"gemm-bench", cmd_gemm_bench}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++)
        if (!strcmp(cmd, cmds[i].name)) return cmds[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "lrc: unknown command '%s' (commands: inspect, init, forward, demo; see lrc --help)\n", cmd);
    return EXIT_USAGE;
}
