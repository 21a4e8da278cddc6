/* analyze_trajectory.c — lrc analyze: the fraction of a site's gain
 * dimensions that follow their head's shared depth trajectory (the LayerRoPE
 * paper's Fig. 3 and Appendix C).
 *
 * The paper splits gamma into heads of the attention's head size and finds
 * that ~99% of each head's dimensions follow "the same near-monotone curve
 * across layers, well captured by the head-mean", as "a per-layer scalar
 * magnification of the same trajectory", with ~1% outliers that deviate
 * strongly or sit near zero. It gives no threshold, so this is the rule, and
 * the tolerance is an option:
 *   m(L) = the mean over the head's dimensions of gamma_L,j   (the trajectory)
 *   a_j  = <x_j, m> / <m, m>, x_j = (gamma_0,j ... gamma_{n-1},j)
 *   r_j  = |x_j - a_j m| / |x_j|        (what a scaled copy of m leaves)
 * Dimension j is deactivated when |x_j| < 0.1 |m| (a null route), and follows
 * the trajectory when it is not and r_j <= tol. */
#include "lrc_tools.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define DEACTIVATED 0.1 /* |x_j| below this share of |m| */
#define MAX_LISTED 8    /* the largest deviations printed and kept in the JSON */

typedef struct {
    int64_t dim;
    double r;
} deviation;

static int by_r_desc(const void *a, const void *b)
{
    const deviation *x = a, *y = b;
    return (x->r < y->r) - (x->r > y->r);
}

void lrc_analyze_trajectory(const double *const *g, int64_t L, int64_t d, int64_t head, double tol, cJSON *site)
{
    if (head <= 0 || d % head) head = d; /* no head size known: the whole vector is one group */
    double *m = lrc_xmalloc((size_t)L * sizeof(double));
    deviation *dev = lrc_xmalloc((size_t)d * sizeof(deviation));
    int64_t follow = 0, dead = 0, n_dev = 0;
    for (int64_t h0 = 0; h0 < d; h0 += head) {
        double mm = 0;
        for (int64_t l = 0; l < L; l++) {
            m[l] = 0;
            for (int64_t j = h0; j < h0 + head; j++) m[l] += g[l][j];
            m[l] /= (double)head;
            mm += m[l] * m[l];
        }
        for (int64_t j = h0; j < h0 + head; j++) {
            double xm = 0, xx = 0;
            for (int64_t l = 0; l < L; l++) xm += g[l][j] * m[l], xx += g[l][j] * g[l][j];
            if (!(xx >= DEACTIVATED * DEACTIVATED * mm)) { /* NaN counts here too */
                dead++;
                continue;
            }
            const double a = mm > 0 ? xm / mm : 0;
            double rr = 0;
            for (int64_t l = 0; l < L; l++) rr += (g[l][j] - a * m[l]) * (g[l][j] - a * m[l]);
            const double r = sqrt(rr / xx);
            if (r <= tol) follow++;
            else dev[n_dev++] = (deviation){j, r};
        }
    }
    qsort(dev, (size_t)n_dev, sizeof *dev, by_r_desc);
    const double frac = (double)follow / (double)d;
    cJSON *t = cJSON_AddObjectToObject(site, "trajectory");
    cJSON_AddNumberToObject(t, "head_dim", (double)head);
    cJSON_AddNumberToObject(t, "tolerance", tol);
    cJSON_AddNumberToObject(t, "fraction", frac);
    cJSON_AddNumberToObject(t, "follow", (double)follow);
    cJSON_AddNumberToObject(t, "deviating", (double)n_dev);
    cJSON_AddNumberToObject(t, "deactivated", (double)dead);
    cJSON *list = cJSON_AddArrayToObject(t, "largest_deviations");
    printf("shared trajectory (Appendix C; %lld group%s of %lld, tolerance %g): %lld of %lld dimensions (%.2f%%) follow their "
           "head's mean, %lld deviate, %lld deactivated", (long long)(d / head), d / head == 1 ? "" : "s", (long long)head, tol,
           (long long)follow, (long long)d, 100 * frac, (long long)n_dev, (long long)dead);
    for (int64_t i = 0; i < n_dev && i < MAX_LISTED; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "dim", (double)dev[i].dim);
        cJSON_AddNumberToObject(o, "r", dev[i].r);
        cJSON_AddItemToArray(list, o);
        printf("%s dim %lld (%.3f)", i ? "," : "; most:", (long long)dev[i].dim, dev[i].r);
    }
    printf("\n");
    free(m), free(dev);
}
