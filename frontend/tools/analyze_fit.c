/* analyze_fit.c — lrc analyze --fit-layerrope: one shared gain and the
 * depth scalars per site fitted to a checkpoint's per-layer gains, by least
 * squares over the complex form of LayerRoPE (seeds/000, equation 1):
 *
 *   gamma_L ~ e^r(L) R(theta(L)) gamma,   r(L) = alpha + beta u,
 *   theta(L, j) = exp(alpha_rot + beta_rot u) base^(-2j/d),   u = log(L + 1),
 *
 * R rotating the pairs (2j, 2j + 1). For fixed scalars the best gamma is
 * linear: sum_L e^r R^T gamma_L / sum_L e^2r (R is orthogonal), so the fit
 * minimises over (beta, alpha_rot, beta_rot) alone, by Nelder-Mead from a grid
 * of starts. alpha is 0: a common scale is gamma's. */
#include "lrc_tools.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const double *const *g; /* g[L][i] */
    int64_t L, d;
    const double *freq; /* base^(-2j/d) of pair j */
} fit_data;

/* gamma* for scalars s (beta, alpha_rot, beta_rot) into out[d]; the squared residual */
static double residual(const fit_data *f, const double *s, double *out)
{
    int64_t d = f->d, half = d / 2;
    double den = 0, res = 0;
    for (int64_t i = 0; i < d; i++) out[i] = 0;
    for (int64_t l = 0; l < f->L; l++) {
        double u = log((double)l + 1), e = exp(s[0] * u), th = exp(s[1] + s[2] * u);
        den += e * e;
        for (int64_t j = 0; j < half; j++) { /* e R^T g: rotate by -theta_j */
            double a = th * f->freq[j], c = cos(a), sn = sin(a);
            double g0 = f->g[l][2 * j], g1 = f->g[l][2 * j + 1];
            out[2 * j] += e * (g0 * c + g1 * sn);
            out[2 * j + 1] += e * (-g0 * sn + g1 * c);
        }
    }
    for (int64_t i = 0; i < d; i++) out[i] /= den;
    for (int64_t l = 0; l < f->L; l++) {
        double u = log((double)l + 1), e = exp(s[0] * u), th = exp(s[1] + s[2] * u);
        for (int64_t j = 0; j < half; j++) {
            double a = th * f->freq[j], c = cos(a), sn = sin(a);
            double p0 = e * (out[2 * j] * c - out[2 * j + 1] * sn), p1 = e * (out[2 * j] * sn + out[2 * j + 1] * c);
            res += (f->g[l][2 * j] - p0) * (f->g[l][2 * j] - p0) + (f->g[l][2 * j + 1] - p1) * (f->g[l][2 * j + 1] - p1);
        }
    }
    return res;
}

/* Nelder-Mead over 3 scalars from x (updated), n steps */
static double nelder_mead(const fit_data *f, double *x, double *tmp, int n)
{
    double p[4][3], v[4];
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 3; i++) p[k][i] = x[i] + (k == i + 1 ? 0.2 : 0);
        v[k] = residual(f, p[k], tmp);
    }
    for (int it = 0; it < n; it++) {
        for (int a = 0; a < 4; a++) /* order: best first */
            for (int b = a + 1; b < 4; b++)
                if (v[b] < v[a]) {
                    double t = v[a];
                    v[a] = v[b], v[b] = t;
                    for (int i = 0; i < 3; i++) t = p[a][i], p[a][i] = p[b][i], p[b][i] = t;
                }
        double c[3], r[3], e[3], k[3];
        for (int i = 0; i < 3; i++) c[i] = (p[0][i] + p[1][i] + p[2][i]) / 3;
        for (int i = 0; i < 3; i++) r[i] = c[i] + (c[i] - p[3][i]);
        double vr = residual(f, r, tmp);
        if (vr < v[0]) {
            for (int i = 0; i < 3; i++) e[i] = c[i] + 2 * (c[i] - p[3][i]);
            double ve = residual(f, e, tmp);
            memcpy(p[3], ve < vr ? e : r, sizeof r), v[3] = ve < vr ? ve : vr;
        } else if (vr < v[2]) {
            memcpy(p[3], r, sizeof r), v[3] = vr;
        } else {
            for (int i = 0; i < 3; i++) k[i] = c[i] + 0.5 * (p[3][i] - c[i]);
            double vk = residual(f, k, tmp);
            if (vk < v[3]) memcpy(p[3], k, sizeof k), v[3] = vk;
            else
                for (int a = 1; a < 4; a++) { /* shrink towards the best */
                    for (int i = 0; i < 3; i++) p[a][i] = p[0][i] + 0.5 * (p[a][i] - p[0][i]);
                    v[a] = residual(f, p[a], tmp);
                }
        }
    }
    int best = 0;
    for (int a = 1; a < 4; a++)
        if (v[a] < v[best]) best = a;
    memcpy(x, p[best], 3 * sizeof(double));
    return v[best];
}

/* The fit of one site: scalars s (beta, alpha_rot, beta_rot), gamma[d], and the relative error */
double lrc_analyze_fit_site(const double *const *g, int64_t L, int64_t d, double base, double *s, double *gamma)
{
    double *freq = lrc_xmalloc((size_t)(d / 2) * sizeof(double) + 8);
    for (int64_t j = 0; j < d / 2; j++) freq[j] = pow(base, -2.0 * (double)j / (double)d);
    fit_data f = {g, L, d, freq};
    double best = INFINITY, total = 0, x[3];
    static const double betas[] = {-0.5, 0, 0.5}, arots[] = {-3, -1, 0}, brots[] = {-1, -0.5, 0};
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 3; b++)
            for (size_t c = 0; c < 3; c++) {
                x[0] = betas[a], x[1] = arots[b], x[2] = brots[c];
                double v = nelder_mead(&f, x, gamma, 200);
                if (v < best) best = v, memcpy(s, x, sizeof x);
            }
    nelder_mead(&f, s, gamma, 2000); /* polish the best start */
    best = residual(&f, s, gamma);
    free(freq);
    for (int64_t l = 0; l < L; l++)
        for (int64_t i = 0; i < d; i++) total += g[l][i] * g[l][i];
    return total > 0 ? sqrt(best / total) : 0;
}
