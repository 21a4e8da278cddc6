/* test_cuda_compile — without a GPU: every kernel of a model compiles with
 * NVRTC. For each preset and norm placement given, the forward graph, the
 * training graph (forward, loss, backward) and the decoding graph (KV cache)
 * go through the passes, the scheduler and the CUDA renderer, and the whole
 * source compiles for every architecture given.
 * Usage: test_cuda_compile MODEL.lua --arch sm_80,sm_90 --presets P,Q --norms A,B
 *        [--kinds forward,training,decoding] [--batch B] [--seq T] [--dump DIR] */
#include "check.h"
#include "codegen/cuda/lrc_cuda.h"
#include "frontend/lrc_frontend.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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
    if (!rc && kind == DECODING) rc = lrc_pass_kv_cache(&g, T, &err);
    lrc_pass_ctx ctx = {.consts = NULL};
    if (!rc) rc = lrc_passes_run(&g, &ctx, NULL, &err);
    lrc_schedule s;
    memset(&s, 0, sizeof s);
    lrc_program p;
    memset(&p, 0, sizeof p);
    lrc_cuda_program cp;
    memset(&cp, 0, sizeof cp);
    if (!rc) rc = lrc_schedule_build(g, &s, &err);
    if (!rc) lrc_schedule_plan_memory(g, &s);
    if (!rc) rc = lrc_program_build(g, &s, lrc_cuda_tiling(), &p, &err);
    if (!rc) rc = lrc_cuda_render(g, &s, &p, LRC_CUDA_BF16, &cp, &err);
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
                   cp.n_symbols, cp.n_launches, size, now_s() - t0);
        free(cubin);
    }
    lrc_cuda_program_free(&cp);
    if (p.kernels) lrc_program_free(&p);
    lrc_schedule_free(&s);
    lrc_graph_free(g);
    lrc_model_free(&m);
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
    setenv("LRC_NVRTC_CACHE", "off", 1); /* every run compiles: this tests NVRTC, not the cache */
    char why[256];
    if (!lrc_nvrtc_available(why, sizeof why)) {
        /* CI installs the CUDA toolkit, so this is a failure there, not a skip */
        printf("FAIL: %s\n", why);
        return 1;
    }
    printf("NVRTC %s\n", lrc_nvrtc_version());
    for (int p = 0; p < n_presets; p++)
        for (int n = 0; n < n_norms; n++)
            for (int k = 0; k < n_kinds; k++) {
                int kind = !strcmp(kinds[k], "training") ? TRAINING : !strcmp(kinds[k], "decoding") ? DECODING : FORWARD;
                run_case(argv[1], presets[p], norms[n], kind, archs, n_arch, B, T, dump);
            }
    return check_summary();
}
