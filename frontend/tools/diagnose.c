/* diagnose.c — lrc diagnose: what a looped model's recurrence does to
 * its state, in f64 on the reference kernels. Per iteration: the mean norm
 * of the state leaving the recurrent block and the mean pairwise cosine
 * similarity of its centred token states. At the fixed point of h -> G(h)
 * for the input: whether the fixed-point iteration converged, the spectral
 * radius of the Jacobian J = dG/dh and its operator norm (power iteration on
 * J and on J^T J; J assembled from Jacobian-vector products by central
 * differences), and their gap, which non-normal J make positive. */
#include "lrc_tools.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_STATE 4096 /* J is N x N doubles: 128 MiB at most */

typedef struct {
    int next, state, body; /* loop_next, loop_state, the body's result */
    int64_t B, T, D;       /* the state [B, T, D] */
} loop_info;

/* mean token norm and mean pairwise cosine of the centred token states, over the batch */
static void state_stats(const double *h, const loop_info *L, double *norm, double *cosine)
{
    double nsum = 0, csum = 0;
    int64_t npairs = 0;
    double *c = lrc_xmalloc((size_t)(L->T * L->D) * sizeof(double)), *len = lrc_xmalloc((size_t)L->T * sizeof(double));
    for (int64_t b = 0; b < L->B; b++) {
        const double *x = h + b * L->T * L->D;
        for (int64_t t = 0; t < L->T; t++) {
            double s = 0;
            for (int64_t i = 0; i < L->D; i++) s += x[t * L->D + i] * x[t * L->D + i];
            nsum += sqrt(s);
        }
        for (int64_t i = 0; i < L->D; i++) { /* centre over the tokens */
            double mean = 0;
            for (int64_t t = 0; t < L->T; t++) mean += x[t * L->D + i];
            mean /= (double)L->T;
            for (int64_t t = 0; t < L->T; t++) c[t * L->D + i] = x[t * L->D + i] - mean;
        }
        for (int64_t t = 0; t < L->T; t++) {
            double s = 0;
            for (int64_t i = 0; i < L->D; i++) s += c[t * L->D + i] * c[t * L->D + i];
            len[t] = sqrt(s);
        }
        for (int64_t t = 0; t < L->T; t++)
            for (int64_t u = t + 1; u < L->T; u++) {
                double dot = 0;
                for (int64_t i = 0; i < L->D; i++) dot += c[t * L->D + i] * c[u * L->D + i];
                csum += len[t] > 0 && len[u] > 0 ? dot / (len[t] * len[u]) : 0;
                npairs++;
            }
    }
    *norm = nsum / (double)(L->B * L->T);
    *cosine = npairs ? csum / (double)npairs : NAN;
    free(c);
    free(len);
}

static void on_iteration(lrc_run64 *r, int next, int64_t t)
{
    const loop_info *L = r->user;
    if (next != L->next) return;
    double norm, cosine;
    state_stats(r->buf[L->body], L, &norm, &cosine);
    printf("%9lld  %10.4f  %12.4f\n", (long long)t + 1, norm, cosine);
}

/* G(h) into out: the body once from state h */
static int apply_g(lrc_run64 *r, const loop_info *L, const double *h, double *out, lrc_err *err)
{
    int64_t n = L->B * L->T * L->D;
    memcpy(r->buf[L->state], h, (size_t)n * sizeof(double));
    int rc = lrc_run64_exec(r, L->state + 1, L->next, err);
    if (!rc) memcpy(out, r->buf[L->body], (size_t)n * sizeof(double));
    return rc;
}

static double norm2(const double *x, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i] * x[i];
    return sqrt(s);
}

/* y = J x (transposed: J^T x) for J row-major N x N */
static void matvec(const double *J, const double *x, double *y, int64_t N, bool transposed)
{
    for (int64_t i = 0; i < N; i++) y[i] = 0;
    for (int64_t i = 0; i < N; i++)
        for (int64_t j = 0; j < N; j++) {
            if (transposed) y[j] += J[i * N + j] * x[i];
            else y[i] += J[i * N + j] * x[j];
        }
}

/* The spectral radius of J (N x N) as ||J^k v||^(1/k) (Gelfand), which
 * also holds when the dominant eigenvalues are a complex pair, and its
 * operator norm: the top eigenvalue of J^T J by power iteration. */
static void spectrum(const double *J, int64_t N, double *rho_out, double *sigma_out)
{
    int64_t K = 400;
    double *v = lrc_xmalloc((size_t)N * sizeof(double)), *w = lrc_xmalloc((size_t)N * sizeof(double));
    lrc_rng rng;
    lrc_rng_seed(&rng, 1);
    for (int64_t i = 0; i < N; i++) v[i] = lrc_rng_normal(&rng);
    double nv = norm2(v, N), logsum = 0;
    for (int64_t i = 0; i < N; i++) v[i] /= nv;
    for (int64_t k = 0; k < K; k++) {
        matvec(J, v, w, N, false);
        double nw = norm2(w, N);
        if (nw == 0) {
            logsum = -INFINITY;
            break;
        }
        logsum += log(nw);
        for (int64_t i = 0; i < N; i++) v[i] = w[i] / nw;
    }
    double rho = exp(logsum / (double)K), sigma = 0;
    for (int64_t i = 0; i < N; i++) v[i] = lrc_rng_normal(&rng);
    for (int64_t k = 0; k < K; k++) {
        nv = norm2(v, N);
        for (int64_t i = 0; i < N; i++) v[i] /= nv;
        matvec(J, v, w, N, false);
        matvec(J, w, v, N, true);
        sigma = sqrt(norm2(v, N)); /* ||J^T J v|| -> sigma_max^2 */
    }
    free(v), free(w);
    *rho_out = rho, *sigma_out = sigma;
}

int lrc_diagnose_run(const lrc_diagnose_opts *o, lrc_err *err)
{
    lrc_model m = {0};
    lrc_graph *g = lrc_graph_new();
    lrc_tensor_set in, wfile, params;
    lrc_tensor_set_init(&in);
    lrc_tensor_set_init(&wfile);
    lrc_tensor_set_init(&params);
    lrc_run64 r = {.g = g, .inputs = &in};
    loop_info L = {-1, -1, -1, 0, 0, 0};
    double *J = NULL, *h = NULL, *gh = NULL, *up = NULL, *down = NULL;
    const char *prompt = o->prompt ? o->prompt : "In the beginning God created";
    int64_t T = (int64_t)strlen(prompt);
    lrc_shape bt = {2, {1, T}};
    lrc_tensor *tok = T > 0 ? lrc_tensor_new("tokens", LRC_I32, &bt, err) : NULL;
    int rc = tok ? lrc_tensor_set_add(&in, tok, err) : lrc_err_set(err, "--prompt: give at least one byte");
    for (int64_t i = 0; !rc && i < T; i++) ((int32_t *)tok->data)[i] = (unsigned char)prompt[i];
    if (!rc) rc = lrc_model_load(&m, o->model, o->preset, o->sets, o->n_sets, err);
    if (!rc && m.task != LRC_TASK_LM) { /* an image model (ViT): its residual stream */
        rc = lrc_diagnose_residual(o, &m, err);
        goto out;
    }
    if (!rc) rc = lrc_model_build(&m, 1, T, g, err);
    for (int id = 0; !rc && id < g->n_nodes; id++)
        if (g->nodes[id].op == LRC_OP_LOOP_NEXT) L.next = id;
    if (!rc && L.next < 0) { /* not looped: the residual stream after each layer */
        rc = lrc_diagnose_residual(o, &m, err);
        goto out;
    }
    if (!rc) {
        L.state = g->nodes[L.next].in[0];
        L.body = g->nodes[L.next].in[1];
        const lrc_shape *s = &g->nodes[L.next].shape;
        L.B = s->dim[0];
        L.T = s->ndim == 3 ? s->dim[1] : 1;
        L.D = s->dim[s->ndim - 1];
        if (L.B * L.T * L.D > MAX_STATE)
            rc = lrc_err_set(err, "the state holds %lld values; the Jacobian is assembled for at most %d: a shorter --prompt",
                             (long long)(L.B * L.T * L.D), MAX_STATE);
    }
    lrc_plan_buf want[16];
    if (!rc) rc = lrc_model_complete_inputs(want, lrc_model_graph_inputs(g, want, 16), &m, &in, "diagnose", err);
    if (!rc) rc = lrc_safetensors_load(o->weights, &wfile, err);
    if (!rc) rc = lrc_params_bind(g, &wfile, o->weights, &params, err);
    if (rc) goto out;
    lrc_run64_init(&r, g, &in, &params);
    r.user = &L;
    printf("%s, prompt of %lld bytes, state [%lld, %lld, %lld], in f64\n", m.path, (long long)T, (long long)L.B,
           (long long)L.T, (long long)L.D);
    printf("iteration  state norm  token cosine (centred)\n");
    r.on_iteration = on_iteration;
    if ((rc = lrc_run64_exec(&r, 0, g->n_nodes, err))) goto out;
    r.on_iteration = NULL;

    /* the fixed point of h -> G(h) for this input, from the state the run ended in */
    int64_t N = L.B * L.T * L.D, it = 0, max_iter = o->steps > 0 ? o->steps : 1000;
    h = lrc_xmalloc((size_t)N * sizeof(double));
    gh = lrc_xmalloc((size_t)N * sizeof(double));
    memcpy(h, r.buf[L.next], (size_t)N * sizeof(double));
    double resid = INFINITY, tol = 1e-9;
    for (it = 1; it <= max_iter && !rc; it++) {
        if ((rc = apply_g(&r, &L, h, gh, err))) break;
        double d = 0;
        for (int64_t i = 0; i < N; i++) d += (gh[i] - h[i]) * (gh[i] - h[i]);
        resid = sqrt(d) / (norm2(gh, N) > 0 ? norm2(gh, N) : 1);
        memcpy(h, gh, (size_t)N * sizeof(double));
        if (resid < tol) break;
    }
    if (rc) goto out;
    bool converged = resid < tol;
    if (converged) printf("fixed point: converged after %lld iterations (relative residual %.2e)\n", (long long)it, resid);
    else printf("fixed point: not converged after %lld iterations (relative residual %.2e; the Jacobian is taken there)\n",
                (long long)max_iter, resid);

    /* J column by column: central differences of G, f64 */
    J = lrc_xmalloc((size_t)(N * N) * sizeof(double));
    up = lrc_xmalloc((size_t)N * sizeof(double));
    down = lrc_xmalloc((size_t)N * sizeof(double));
    double eps = 1e-6 * (norm2(h, N) / sqrt((double)N) > 1 ? norm2(h, N) / sqrt((double)N) : 1);
    for (int64_t j = 0; j < N && !rc; j++) {
        double keep = h[j];
        h[j] = keep + eps;
        rc = apply_g(&r, &L, h, up, err);
        h[j] = keep - eps;
        if (!rc) rc = apply_g(&r, &L, h, down, err);
        h[j] = keep;
        for (int64_t i = 0; i < N; i++) J[i * N + j] = (up[i] - down[i]) / (2 * eps);
    }
    if (rc) goto out;
    double rho, sigma;
    spectrum(J, N, &rho, &sigma);
    printf("Jacobian dG/dh at the fixed point (%lld x %lld): spectral radius %.4f, operator norm %.4f, "
           "non-normality gap %.4f\n", (long long)N, (long long)N, rho, sigma, sigma - rho);
out:
    free(J), free(h), free(gh), free(up), free(down);
    if (r.buf) lrc_run64_free(&r);
    lrc_tensor_set_clear(&in);
    lrc_tensor_set_clear(&wfile);
    lrc_tensor_set_clear(&params);
    lrc_graph_free(g);
    lrc_model_free(&m);
    return rc;
}
