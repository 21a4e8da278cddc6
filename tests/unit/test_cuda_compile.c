/* test_cuda_compile — without a GPU: every kernel of a model compiles with
 * NVRTC. For each preset and norm placement given, the forward graph, the
 * training graph (forward, loss, backward) and the decoding graph (KV cache)
 * go through the passes, the scheduler and the CUDA renderer, and the whole
 * source compiles for every architecture given. First, the GEMM groups that
 * may add a bias in cuBLASLt's epilogue, and one that must not.
 * Usage: test_cuda_compile MODEL.lua --arch sm_80,sm_90 --presets P,Q --norms A,B
 *        [--kinds forward,training,decoding] [--batch B] [--seq T] [--dump DIR] */
#include "check.h"
#include "codegen/cuda/lrc_cuda.h"
#include "frontend/lua/lrc_lua.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The program and CUDA source (bf16 storage) of g and its schedule s, into
 * p and cp, zero-initialized by the caller; render_free releases them. */
static int render_graph(lrc_graph *g, lrc_schedule *s, lrc_program *p, lrc_cuda_program *cp, lrc_err *err)
{
    int rc = lrc_program_build(g, s, lrc_cuda_tiling(), p, err);
    if (!rc) rc = lrc_cuda_render(g, s, p, LRC_CUDA_BF16, cp, err);
    return rc;
}

static void render_free(lrc_schedule *s, lrc_program *p, lrc_cuda_program *cp)
{
    lrc_cuda_program_free(cp);
    if (p->kernels) lrc_program_free(p);
    lrc_schedule_free(s);
}

enum { FORWARD, TRAINING, DECODING };
static const char *kind_name[] = {"forward", "training", "decoding"};

static void run_case(const char *model, const char *preset, const char *norm, int kind, char **archs, int n_arch,
                     int64_t B, int64_t T, const char *dump)
{
    char set[64], label[160];
    snprintf(set, sizeof set, "norm=%s", norm);
    snprintf(label, sizeof label, "%s %s %s", preset, norm, kind_name[kind]);
    char *sets[] = {set};
    lrc_err err;
    lrc_model m = {0};
    lrc_graph *g = lrc_graph_new();
    int rc = lrc_model_load(&m, model, preset, sets, 1, &err);
    if (!rc) rc = kind == TRAINING ? lrc_model_build_training(&m, B, T, g, &err) : lrc_model_build(&m, B, kind == DECODING ? 1 : T, g, &err);
    lrc_schedule s = {0};
    lrc_pass_ctx ctx = {.kv_cache_len = kind == DECODING ? T : 0, .schedule = &s};
    if (!rc) rc = lrc_passes_run(&g, &ctx, NULL, &err);
    lrc_program p = {0};
    lrc_cuda_program cp = {0};
    if (!rc) rc = render_graph(g, &s, &p, &cp, &err);
    CHECK(!rc, "%s: %s", label, err.msg);
    if (!rc && dump) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s_%s_%s.cu", dump, preset, norm, kind_name[kind]);
        FILE *f = fopen(path, "w");
        if (f) fputs(cp.source, f), fclose(f);
    }
    for (int a = 0; a < n_arch && !rc; a++) {
        void *cubin = NULL;
        size_t size = 0;
        double t0 = now_s();
        int crc = lrc_nvrtc_compile(cp.source, label, archs[a], &cubin, &size, NULL, &err);
        CHECK(!crc && size > 0, "%s for %s: %s", label, archs[a], crc ? err.msg : "empty cubin");
        if (!crc)
            printf("%-32s %s: %3d kernels (%2d distinct), %d launches, cubin %zu bytes, %.2f s\n", label, archs[a], p.n_kernels,
                   cp.n_symbols, cp.table.n_launches, size, now_s() - t0);
        free(cubin);
    }
    render_free(&s, &p, &cp);
    lrc_graph_free(g);
    lrc_model_free(&m);
}

/* The bias epilogue's groups: z = (x W^T + b [+ r]) V^T. With r = x2 U^T (a
 * residual), or none, the first GEMM adds the bias (and r) in cuBLASLt's
 * epilogue; with r the product itself (x W^T + b + x W^T), which is no
 * argument of the launch, its kernel does the adds. The renderer alone:
 * no NVRTC. */
static void bias_groups(void)
{
    static const char *names[] = {"bias alone", "bias and residual", "bias and the product again"};
    for (int form = 0; form < 3; form++) {
        lrc_err err;
        lrc_graph *g = lrc_graph_new();
        lrc_init zeros = {LRC_INIT_ZEROS, 0};
        int x = lrc_graph_add_input(g, "x", LRC_F32, &(lrc_shape){3, {2, 3, 16}}, NULL, &err);
        int w = lrc_graph_add_param(g, "w", &(lrc_shape){2, {8, 16}}, zeros, NULL, NULL, &err);
        int u = lrc_graph_add_param(g, "u", &(lrc_shape){2, {8, 16}}, zeros, NULL, NULL, &err);
        /* an intermediate, stored bf16 as the sum is (an input would be f32) */
        int x2 = lrc_graph_add_input(g, "x2", LRC_F32, &(lrc_shape){3, {2, 3, 16}}, NULL, &err);
        int r = form == 1 ? lrc_graph_add(g, &(lrc_node){.op = LRC_OP_MATMUL, .n_in = 2, .in = {x2, u}}, &err) : -1;
        int v = lrc_graph_add_param(g, "v", &(lrc_shape){2, {16, 8}}, zeros, NULL, NULL, &err);
        int b = lrc_graph_add_param(g, "b", &(lrc_shape){1, {8}}, zeros, NULL, NULL, &err);
        int h = lrc_graph_add(g, &(lrc_node){.op = LRC_OP_MATMUL, .n_in = 2, .in = {x, w}}, &err);
        int y = lrc_graph_add(g, &(lrc_node){.op = LRC_OP_ADD, .n_in = 2, .in = {h, b}}, &err);
        if (form) y = lrc_graph_add(g, &(lrc_node){.op = LRC_OP_ADD, .n_in = 2, .in = {y, form == 1 ? r : h}}, &err);
        int z = lrc_graph_add(g, &(lrc_node){.op = LRC_OP_MATMUL, .n_in = 2, .in = {y, v}}, &err);
        lrc_schedule s = {0};
        lrc_program p = {0};
        lrc_cuda_program cp = {0};
        int rc = z < 0 || lrc_graph_add_output(g, "z", z, &err);
        lrc_pass_ctx ctx = {.schedule = &s};
        if (!rc) rc = lrc_passes_run(&g, &ctx, NULL, &err);
        if (!rc) rc = render_graph(g, &s, &p, &cp, &err);
        CHECK(!rc, "%s: %s", names[form], err.msg);
        int bias = -1, resid = -1;
        for (int i = 0; !rc && i < cp.table.n_launches; i++)
            if (cp.table.launches[i].n_gemm && cp.table.launches[i].gemm[0].bias_arg >= 0)
                bias = cp.table.launches[i].gemm[0].bias_arg, resid = cp.table.launches[i].gemm[0].c_arg;
        CHECK(!rc && (form == 2 ? bias < 0 : bias >= 0 && (resid >= 0) == (form == 1)), "%s: bias_arg %d, c_arg %d", names[form], bias,
              resid);
        printf("%-28s bias_arg %2d, c_arg %2d\n", names[form], bias, resid);
        render_free(&s, &p, &cp);
        lrc_graph_free(g);
    }
}

static int split(char *s, char **out, int max)
{
    int n = 0;
    for (char *t = strtok(s, ","); t && n < max; t = strtok(NULL, ",")) out[n++] = t;
    return n;
}

int main(int argc, char **argv)
{
    char *archs[8], *presets[32], *norms[16], *kinds[3], all_kinds[] = "forward,training,decoding";
    int n_arch = 0, n_presets = 0, n_norms = 0, n_kinds = 0;
    int64_t B = 2, T = 64;
    const char *dump = NULL;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--arch")) n_arch = split(argv[i + 1], archs, 8);
        else if (!strcmp(argv[i], "--presets")) n_presets = split(argv[i + 1], presets, 32);
        else if (!strcmp(argv[i], "--norms")) n_norms = split(argv[i + 1], norms, 16);
        else if (!strcmp(argv[i], "--kinds")) n_kinds = split(argv[i + 1], kinds, 3);
        else if (!strcmp(argv[i], "--batch")) B = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--seq")) T = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--dump")) dump = argv[i + 1];
    }
    if (argc < 2 || !n_arch || !n_presets || !n_norms) {
        fprintf(stderr, "usage: test_cuda_compile MODEL.lua --arch sm_80,sm_90 --presets P,Q --norms A,B [--batch B] [--seq T]\n");
        return 2;
    }
    if (!n_kinds) n_kinds = split(all_kinds, kinds, 3);
    /* every source compiles through NVRTC: this tests NVRTC, not the cache;
     * with a cache made fresh for the test run, once in that run */
    if (!lrc_env_is("LRC_TEST_SHARED_CACHE", "1")) setenv("LRC_NVRTC_CACHE", "off", 1);
    char why[256];
    if (!lrc_nvrtc_available(why, sizeof why)) {
        /* CI installs the CUDA toolkit, so this is a failure there, not a skip */
        printf("FAIL: %s\n", why);
        return 1;
    }
    printf("NVRTC %s\n", lrc_nvrtc_version());
    bias_groups();
    for (int p = 0; p < n_presets; p++)
        for (int n = 0; n < n_norms; n++)
            for (int k = 0; k < n_kinds; k++) {
                int kind = !strcmp(kinds[k], "training") ? TRAINING : !strcmp(kinds[k], "decoding") ? DECODING : FORWARD;
                run_case(argv[1], presets[p], norms[n], kind, archs, n_arch, B, T, dump);
            }
    return check_summary();
}
