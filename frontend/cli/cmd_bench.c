/* cmd_bench.c — lrc gemm-bench: one GEMM compiled exactly as a model's GEMMs
 * are, timed: the forward's Y = X W^T, or the backward's dX = dY W
 * (matmul_nn) and dW = dY^T X (matmul_tn, both operands activations, so its
 * packing runs each time, as in a training step); bench/cpu_gemm.py runs it
 * beside OpenBLAS. */
#include "cli.h"
#include "../compile/lrc_compile.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Where operand entries X(i, k) and W(j, k) of Y[i, j] = sum_k X(i, k) W(j, k)
 * lie: at i * xi + k * xk and j * wj + k * wk. */
typedef struct {
    int64_t xi, xk, wj, wk;
} operand_strides;

/* Checks Y against an f64 product: every entry when there are at most
 * 65536, else 4096 spread over the matrix plus the last row and column (where
 * the tile tails are). Each entry within the worst-case bound of recursive
 * f32 summation, K * 2^-24 * sum_k |x_ik w_jk|, so no rounding fails it and a
 * wrong or unwritten entry does. Returns the largest error as a fraction of
 * its bound (NaN counts as the worst); *checked gets the number of entries. */
static double check_product(const float *x, const float *w, const float *y, int64_t M, int64_t N, int64_t K,
                            operand_strides st, int64_t *checked)
{
    int64_t all = M * N <= 65536, n = all ? M * N : 4096 + M + N;
    double worst = 0, bound_scale = (double)K * FLT_EPSILON / 2;
    for (int64_t e = 0; e < n; e++) {
        int64_t i, j;
        if (all) i = e / N, j = e % N;
        else if (e < 4096) i = (e * 7919) % M, j = (e * 104729 + e / M) % N; /* a stride through rows and columns */
        else if (e < 4096 + M) i = e - 4096, j = N - 1;
        else i = M - 1, j = e - 4096 - M;
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < K; k++) {
            double p = (double)x[i * st.xi + k * st.xk] * w[j * st.wj + k * st.wk];
            ref += p;
            mag += fabs(p);
        }
        double frac = fabs((double)y[i * N + j] - ref) / (bound_scale * mag + DBL_MIN);
        if (!isnan(worst) && !(frac <= worst)) worst = frac; /* a NaN is the worst, and stays */
    }
    *checked = n;
    return worst;
}

/* gemm-bench's weight (params' only tensor) as a package of that storage
 * holds it: rounded to bf16, or quantized to q8 along the GEMM's reduction
 * axis and read back; f32 values either way, which the kernels' packing
 * reproduces exactly. */
static int store_weight(lrc_tensor_set *params, lrc_wstore store, lrc_op op, lrc_err *err)
{
    if (store == LRC_WSTORE_F32) return LRC_OK; /* matmul_tn has no weight at all */
    lrc_tensor *w = params->items[0], *scale = NULL;
    if (store == LRC_WSTORE_BF16) lrc_tensor_round_bf16(w);
    if (store == LRC_WSTORE_Q8 && lrc_tensor_quantize_q8(w, op == LRC_OP_MATMUL ? 1 : 0, &scale, err)) return LRC_EUSER;
    if (scale && lrc_tensor_set_add(params, scale, err)) return LRC_EUSER;
    if (store == LRC_WSTORE_Q8) return lrc_tensor_set_dequantize_q8(params, "gemm-bench", err);
    lrc_tensor *wf = store == LRC_WSTORE_BF16 ? lrc_tensor_to_f32(w, err) : w;
    if (!wf) return LRC_EUSER;
    if (wf != w) lrc_tensor_free(w), params->items[0] = wf;
    return LRC_OK;
}

int cmd_gemm_bench(int argc, char **argv)
{
    static const struct option opts[] = {{"m", required_argument, 0, OPT_M},
                                         {"n", required_argument, 0, OPT_N},
                                         {"k", required_argument, 0, OPT_K},
                                         {"threads", required_argument, 0, OPT_THREADS},
                                         {"repeat", required_argument, 0, OPT_REPEAT},
                                         {"op", required_argument, 0, OPT_OP},
                                         {"weights-dtype", required_argument, 0, OPT_WEIGHTS_DTYPE},
                                         {"help", no_argument, 0, OPT_HELP},
                                         {0, 0, 0, 0}};
    static const char *help = "usage: lrc gemm-bench --m M --n N --k K [--op OP] [--weights-dtype f32|bf16|q8]\n"
                              "                      [--threads T] [--repeat R]\n"
                              "\n"
                              "Compiles Y[M,N] = X[M,K] W[N,K]^T as lrc compiles a model's GEMMs and prints\n"
                              "the median time of R runs (default 10) after a warm-up, then checks the product\n"
                              "against an f64 one (every entry up to 65536, else 4096 and the last row and\n"
                              "column) within the bound of f32 summation; exit status 1 when it is off.\n"
                              "--op matmul_nn is the backward's Y = X[M,K] W[K,N] (dX = dY W), and matmul_tn\n"
                              "its Y = A[K,M]^T B[K,N] (dW = dY^T X, both operands inputs, packed each run as\n"
                              "in a training step); the default is matmul. --weights-dtype bf16 or q8 packs W\n"
                              "as lrc compile --weights-dtype does (W's values rounded to bf16, or quantized\n"
                              "to q8 and read back, first, so the check stays exact); it needs a weight, so\n"
                              "not matmul_tn.\n";
    int64_t dims[3] = {0, 0, 0}, threads = -1, repeat = 10;
    lrc_op op = LRC_OP_MATMUL;
    lrc_wstore store = LRC_WSTORE_F32;
    opterr = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, ":", opts, NULL)) != -1) {
        if (c == OPT_OP) {
            op = !strcmp(optarg, "matmul") ? LRC_OP_MATMUL : !strcmp(optarg, "matmul_nn") ? LRC_OP_MATMUL_NN
               : !strcmp(optarg, "matmul_tn") ? LRC_OP_MATMUL_TN : LRC_OP_COUNT;
            if (op == LRC_OP_COUNT) return cli_usage_error("gemm-bench", "--op %s: expected matmul, matmul_nn or matmul_tn", optarg);
            continue;
        }
        if (c == OPT_WEIGHTS_DTYPE) {
            if (lrc_wstore_parse(optarg, &store)) return cli_usage_error("gemm-bench", "--weights-dtype %s: expected f32, bf16 or q8", optarg);
            continue;
        }
        int64_t *dst = c == OPT_M ? &dims[0] : c == OPT_N ? &dims[1] : c == OPT_K ? &dims[2]
                     : c == OPT_THREADS ? &threads : c == OPT_REPEAT ? &repeat : NULL;
        if (c == OPT_HELP) return cli_help("gemm-bench", opts, "", help);
        if (!dst) return cli_usage_error("gemm-bench", "unknown option %s", argv[optind - 1]);
        /* named from the table: with --m=5 the value is in the same argv word */
        const char *name = "";
        for (const struct option *o = opts; o->name; o++)
            if (o->val == c) name = o->name;
        if (cli_parse_int(optarg, 1, dst)) return cli_usage_error("gemm-bench", "--%s %s: expected an integer >= 1", name, optarg);
    }
    if (!dims[0] || !dims[1] || !dims[2]) return cli_usage_error("gemm-bench", "needs --m, --n and --k");
    if (store != LRC_WSTORE_F32 && op == LRC_OP_MATMUL_TN)
        return cli_usage_error("gemm-bench", "--weights-dtype %s needs a weight: matmul_tn's operands are both activations",
                               lrc_wstore_name(store));
    int64_t M = dims[0], N = dims[1], K = dims[2];
    lrc_err err;
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set params, in, out;
    lrc_tensor_set_init(&params);
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&out);
    /* the operands as each op reads them, and where X(i, k) and W(j, k) lie */
    bool tn = op == LRC_OP_MATMUL_TN;
    lrc_shape xs = tn ? (lrc_shape){2, {K, M}} : (lrc_shape){2, {M, K}}, ws = op == LRC_OP_MATMUL ? (lrc_shape){2, {N, K}} : (lrc_shape){2, {K, N}};
    operand_strides st = op == LRC_OP_MATMUL ? (operand_strides){K, 1, K, 1} : op == LRC_OP_MATMUL_NN ? (operand_strides){K, 1, 1, N} : (operand_strides){1, M, 1, N};
    lrc_init init = {LRC_INIT_NORMAL, 0.02};
    int x = lrc_graph_add_input(g, "x", LRC_F32, &xs, NULL, &err);
    int w = tn ? lrc_graph_add_input(g, "w", LRC_F32, &ws, NULL, &err) : lrc_graph_add_param(g, "w", &ws, init, NULL, NULL, &err);
    lrc_node mm = {.op = op, .n_in = 2, .in = {x, w}};
    int y = x < 0 || w < 0 ? -1 : lrc_graph_add(g, &mm, &err);
    lrc_tensor *xt = lrc_tensor_new("x", LRC_F32, &xs, &err), *wt = tn ? lrc_tensor_new("w", LRC_F32, &ws, &err) : NULL;
    if (y < 0 || !xt || (tn && !wt) || lrc_graph_add_output(g, "y", y, &err) || lrc_params_init(g, 1, NULL, &params, &err) ||
        lrc_tensor_set_add(&in, xt, &err) || (wt && lrc_tensor_set_add(&in, wt, &err))) {
        lrc_graph_free(g);
        return cli_user_error(&err);
    }
    for (int64_t i = 0; i < M * K; i++) ((float *)xt->data)[i] = (float)((i * 7919 % 1000) - 500) / 500.0f;
    for (int64_t i = 0; wt && i < N * K; i++) ((float *)wt->data)[i] = (float)((i * 104729 % 1000) - 500) / 25000.0f;
    int rc = store_weight(&params, store, op, &err); /* W as the kernels will hold it, exact in f32 */
    lrc_compiled comp;
    memset(&comp, 0, sizeof comp);
    lrc_pool *pool = NULL;
    lrc_exec *ex = NULL;
    if (rc) lrc_graph_free(g);
    else rc = lrc_compile_graph_to(g, &params, NULL, store, &comp, &err);
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
        printf("%s %lld %lld %lld: median %.3f ms, %.1f GFLOP/s (%d threads, %d-float vectors%s)\n", op == LRC_OP_MATMUL ? "gemm" : lrc_op_name(op), (long long)M,
               (long long)N, (long long)K, med, 2.0 * (double)M * (double)N * (double)K / (med * 1e6),
               lrc_pool_threads(pool), comp.prog.tiling.vec, store == LRC_WSTORE_BF16 ? ", bf16 weights" : store == LRC_WSTORE_Q8 ? ", q8 weights" : "");
        const lrc_tensor *wv = tn ? wt : lrc_tensor_set_find(&params, "w"), *yt = lrc_tensor_set_find(&out, "y");
        int64_t checked = 0;
        double frac = check_product(xt->data, wv->data, yt->data, M, N, K, st, &checked);
        printf("check: %lld entries against an f64 product, largest error %.3g of the f32 summation bound: %s\n",
               (long long)checked, frac, frac <= 1 ? "ok" : "WRONG");
        if (!(frac <= 1)) rc = lrc_err_set(&err, "gemm-bench: the product is wrong (an entry %.3g times the f32 summation bound off)", frac);
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
