/* cmd_profile.c — lrc profile: every kernel of a forward pass timed over
 * repeated runs, against ceilings measured on this machine at the same
 * thread count (the FMA probe of the program, a large copy), and a trace
 * that Perfetto and chrome://tracing open. */
#include "cli_targets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* MODEL on a target whose code runs on a device: compiled first, as lrc
 * compile would, for this machine's device and the input's shape, into a
 * package that lives as long as the profile. */
static int profile_on_device(const cli_args *a, const lrc_target *t, int64_t repeat, const char *trace)
{
    if (!a->input || !a->weights) return cli_usage_error("profile", "needs --weights and --input");
    lrc_err err;
    lrc_exec_host host = {0};
    char tmp[64] = "/tmp/lrc-profile-XXXXXX", dir[128];
    lrc_tensor_set in;
    lrc_tensor_set_init(&in);
    const lrc_tensor *x = NULL;
    int rc = t->ex->open_host(&(lrc_exec_host_opts){0}, &host, &err) ? lrc_err_prefix(&err, "--target %s", t->name) : LRC_OK;
    if (!rc) rc = lrc_safetensors_load(a->input, &in, &err);
    if (!rc && !(x = lrc_tensor_set_find(&in, "tokens")) && !(x = lrc_tensor_set_find(&in, "images")))
        rc = lrc_err_set(&err, "%s: no tensor 'tokens' (I32 [B, T]) or 'images' (F32 [B, C, H, W])", a->input);
    if (!rc && x->shape.ndim != 2 && x->shape.ndim != 4) rc = lrc_err_set(&err, "%s: '%s' must be [B, T] or [B, C, H, W]", a->input, x->name);
    if (!rc && !mkdtemp(tmp)) rc = lrc_err_set(&err, "%s: cannot create a temporary directory", tmp);
    if (rc) {
        lrc_tensor_set_clear(&in);
        lrc_exec_host_close(t->ex, &host);
        return cli_user_error(&err);
    }
    cli_args b = *a;
    snprintf(dir, sizeof dir, "%s/pkg", tmp);
    b.target = t->name, b.host = &host, b.out = dir, b.one_shape = true; /* the input's shape alone */
    b.batch = x->shape.dim[0], b.seq = x->shape.ndim == 2 ? x->shape.dim[1] : 1;
    lrc_tensor_set_clear(&in);
    rc = cli_compile_package(&b);
    lrc_exec_host_close(t->ex, &host);
    if (!rc) {
        b = *a;
        b.m.model = dir, b.weights = NULL; /* folded into the package */
        rc = cli_target_of(t)->profile_command(&b, true, repeat, trace);
    }
    cli_package_remove(dir);
    rmdir(tmp);
    return rc;
}

int cmd_profile(int argc, char **argv)
{
    static const struct option opts[] = {MODEL_OPTS,
                                         {"weights", required_argument, 0, OPT_WEIGHTS},
                                         {"input", required_argument, 0, OPT_INPUT},
                                         {"target", required_argument, 0, OPT_TARGET},
                                         {"threads", required_argument, 0, OPT_THREADS},
                                         {"repeat", required_argument, 0, OPT_REPEAT},
                                         {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc profile MODEL|PKG [--preset P] [--set KEY=VALUE]... [--weights W] --input IN\n"
        "                   [--target cpu|cuda] [--threads N] [--repeat N] [-o TRACE.json]\n"
        "\n"
        "Runs the forward pass N times (default 10) after a warm-up and prints, per\n"
        "kernel function, calls, total time, share, GFLOP/s, GB/s and the fraction of\n"
        "this machine's ceilings (FMA throughput and copy bandwidth, measured now with\n"
        "the same threads). Writes a trace for Perfetto / chrome://tracing (default\n"
        "lrc-trace.json).\n"
        "\n"
        "On cuda (a cuda package, or MODEL with --target cuda, compiled first for GPU 0\n"
        "and the input's shape): every launch timed with CUDA events, against a bf16\n"
        "cuBLAS GEMM and a device-to-device copy measured now; a kernel other than a\n"
        "GEMM under 60% of the copy bandwidth gets the reason in brackets.\n";
    cli_args a;
    int rc = cli_parse_args("profile", argc, argv, opts, help, true, &a);
    if (rc >= 0) goto out;
    const char *trace = a.out ? a.out : "lrc-trace.json";
    int64_t repeat = a.repeat > 0 ? a.repeat : 10;
    bool pkg = lrc_package_is(a.m.model);
    /* a package's own target, else --target's; one not known here: the default's (which says what it takes) */
    const lrc_target *t = pkg ? lrc_target_of_package(a.m.model) : lrc_target_find(a.target);
    if (!t || !cli_target_of(t)->profile_command) t = lrc_targets[0];
    if (!pkg && t->device_package) rc = profile_on_device(&a, t, repeat, trace);
    else rc = cli_target_of(t)->profile_command(&a, pkg, repeat, trace);
out:
    cli_model_opts_free(&a.m);
    return rc;
}
