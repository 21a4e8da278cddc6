/* cmd_bench.c — lrc gemm-bench: one GEMM Y = X W^T compiled exactly as a
 * model's GEMMs are, timed; bench/cpu_gemm.py runs it beside OpenBLAS. */
#include "cli.h"
#include "compile.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int cmd_gemm_bench(int argc, char **argv)
{
    static const struct option opts[] = {{"m", required_argument, 0, OPT_M},
                                         {"n", required_argument, 0, OPT_N},
                                         {"k", required_argument, 0, OPT_K},
                                         {"threads", required_argument, 0, OPT_THREADS},
                                         {"repeat", required_argument, 0, OPT_REPEAT},
                                         {"help", no_argument, 0, OPT_HELP},
                                         {0, 0, 0, 0}};
    static const char *help = "usage: lrc gemm-bench --m M --n N --k K [--threads T] [--repeat R]\n"
                              "\n"
                              "Compiles Y[M,N] = X[M,K] W[N,K]^T as lrc compiles a model's GEMMs and prints\n"
                              "the median time of R runs (default 10) after a warm-up.\n";
    int64_t dims[3] = {0, 0, 0}, threads = -1, repeat = 10;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        int64_t *dst = c == OPT_M ? &dims[0] : c == OPT_N ? &dims[1] : c == OPT_K ? &dims[2]
                     : c == OPT_THREADS ? &threads : c == OPT_REPEAT ? &repeat : NULL;
        if (c == OPT_HELP) {
            fputs(help, stdout);
            return 0;
        }
        if (!dst) return cli_usage_error("gemm-bench", "unknown option %s", argv[optind - 1]);
        if (cli_parse_int(optarg, 1, dst)) return cli_usage_error("gemm-bench", "%s %s: expected an integer >= 1", argv[optind - 2], optarg);
    }
    if (!dims[0] || !dims[1] || !dims[2]) return cli_usage_error("gemm-bench", "needs --m, --n and --k");
    int64_t M = dims[0], N = dims[1], K = dims[2];
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set params, in, out;
    lrc_tensor_set_init(&params);
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&out);
    lrc_shape xs = {2, {M, K}}, ws = {2, {N, K}};
    lrc_init init = {LRC_INIT_NORMAL, 0.02};
    int x = lrc_graph_add_input(g, "x", LRC_F32, &xs, NULL, &err);
    int w = lrc_graph_add_param(g, "w", &ws, init, NULL, NULL, &err);
    lrc_node mm = {.op = LRC_OP_MATMUL, .n_in = 2, .in = {x, w}};
    int y = x < 0 || w < 0 ? -1 : lrc_graph_add(g, &mm, &err);
    lrc_tensor *xt = lrc_tensor_new("x", LRC_F32, &xs, &err);
    if (y < 0 || !xt || lrc_graph_add_output(g, "y", y, &err) || lrc_params_init(g, 1, NULL, &params, &err) ||
        lrc_tensor_set_add(&in, xt, &err)) {
        lrc_graph_free(g);
        return cli_user_error(&err);
    }
    for (int64_t i = 0; i < M * K; i++) ((float *)xt->data)[i] = (float)((i * 7919 % 1000) - 500) / 500.0f;
    lrc_compiled comp;
    lrc_pool *pool = NULL;
    lrc_exec *ex = NULL;
    int rc = lrc_compile_graph(g, &params, &comp, &err);
    if (!rc && !(pool = lrc_pool_new(threads > 0 ? (int)threads : lrc_pool_default_threads(), &err))) rc = LRC_EUSER;
    if (!rc) rc = lrc_exec_new(&comp.plan, pool, &ex, &err);
    if (!rc) rc = lrc_exec_bind_params(ex, &params, &err);
    if (!rc) rc = lrc_exec_run_plan(ex, &in, &out, &err); /* warm-up, packs W */
    double *ms = lrc_xmalloc((size_t)repeat * sizeof(double));
    for (int64_t r = 0; r < repeat && !rc; r++) { /* into the same Y, as BLAS benchmarks do */
        double t0 = lrc_now_s();
        rc = lrc_exec_run_plan(ex, &in, &out, &err);
        ms[r] = 1e3 * (lrc_now_s() - t0);
    }
    if (!rc) {
        qsort(ms, (size_t)repeat, sizeof *ms, cmp_double);
        double med = ms[repeat / 2];
        printf("gemm %lld %lld %lld: median %.3f ms, %.1f GFLOP/s (%d threads, %d-float vectors)\n", (long long)M,
               (long long)N, (long long)K, med, 2.0 * (double)M * (double)N * (double)K / (med * 1e6),
               lrc_pool_threads(pool), comp.prog.tiling.vec);
    }
    free(ms);
    lrc_exec_free(ex);
    lrc_pool_free(pool);
    lrc_compiled_free(&comp);
    lrc_tensor_set_clear(&params);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&out);
    return rc ? cli_user_error(&err) : 0;
}
