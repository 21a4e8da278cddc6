/* analyze.c — lrc analyze: what a checkpoint's normalisation gains say
 * about depth (the LayerRoPE paper's Section 2 and Appendix E).
 *
 * Per-layer gains (model.layers.L.SITE.weight, vit.encoder.layer.L.SITE.weight):
 * per layer the mean and the 50th, 90th and 99th percentiles of gamma (linear
 * interpolation between order statistics, numpy's default), its cosine to the
 * layer before and to layer 0, and a classical MDS of the unit vectors
 * gamma_L / |gamma_L| in two dimensions (the top two eigenvectors of the
 * double-centred squared distances, scaled by the root of their eigenvalues;
 * each axis's sign is the one that makes layer 0's coordinate non-negative),
 * with the arc the layers trace: the sum of the turns between successive
 * points as seen from their centroid, in degrees.
 *
 * LayerRoPE gains (model.layerrope.SITE_gamma and its four scalars): per
 * site the slopes, and per layer the magnitude e^r(L), the rotation theta(L)
 * of the highest-frequency pair in degrees, and |gamma_eff_L| / |gamma_eff_0|
 * = (L + 1)^beta beside Layer-Norm Scaling's 1 / sqrt(L + 1). Every number
 * is in double; -o writes them as JSON. */
#include "lrc_tools.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SITES 16

typedef struct {
    char name[64];     /* input_layernorm, layernorm_before, ... */
    int64_t d, layers; /* gamma's length, the layers found */
    double **g;        /* g[L][i] */
} gain_site;

/* "model.layers.12.input_layernorm.weight" -> layer 12, site "input_layernorm" */
static bool per_layer_name(const char *name, int64_t *layer, char *site, size_t n)
{
    static const char *const prefixes[] = {"model.layers.", "vit.encoder.layer."};
    for (size_t p = 0; p < sizeof prefixes / sizeof *prefixes; p++) {
        size_t k = strlen(prefixes[p]);
        if (strncmp(name, prefixes[p], k)) continue;
        char *end;
        long long l = strtoll(name + k, &end, 10);
        if (end == name + k || *end != '.' || l < 0) return false;
        const char *s = end + 1, *w = strstr(s, ".weight");
        if (!w || w[7] || w == s || memchr(s, '.', (size_t)(w - s)) || (size_t)(w - s) >= n) return false;
        memcpy(site, s, (size_t)(w - s));
        site[w - s] = 0;
        *layer = l;
        return true;
    }
    return false;
}

static double *as_f64(const lrc_tensor *t, lrc_err *err)
{
    lrc_tensor *f = lrc_tensor_to_f32(t, err);
    if (!f) return NULL;
    int64_t n = lrc_shape_numel(&f->shape);
    double *x = lrc_xmalloc((size_t)n * sizeof(double) + 8);
    for (int64_t i = 0; i < n; i++) x[i] = ((const float *)f->data)[i];
    lrc_tensor_free(f);
    return x;
}

/* the 1-D per-layer norm weights of w, grouped by site; every site must
 * have layers 0 .. n-1 with one length */
static int collect_sites(const lrc_tensor_set *w, const char *path, gain_site *sites, int *n_sites, lrc_err *err)
{
    *n_sites = 0;
    for (int i = 0; i < w->n; i++) {
        int64_t l;
        char site[64];
        const lrc_tensor *t = w->items[i];
        if (t->shape.ndim != 1 || !per_layer_name(t->name, &l, site, sizeof site) || !strstr(site, "norm")) continue;
        int s = 0;
        while (s < *n_sites && strcmp(sites[s].name, site)) s++;
        if (s == *n_sites) {
            if (s == MAX_SITES) return lrc_err_set(err, "%s: more than %d kinds of per-layer norm weights", path, MAX_SITES);
            snprintf(sites[s].name, sizeof sites[s].name, "%s", site);
            sites[s].d = t->shape.dim[0];
            (*n_sites)++;
        }
        gain_site *g = &sites[s];
        if (t->shape.dim[0] != g->d)
            return lrc_err_set(err, "%s: %s has %lld elements, layer norms of site %s %lld", path, t->name, (long long)t->shape.dim[0],
                               site, (long long)g->d);
        if (l >= g->layers) {
            g->g = lrc_xrealloc(g->g, (size_t)(l + 1) * sizeof *g->g);
            for (int64_t k = g->layers; k <= l; k++) g->g[k] = NULL;
            g->layers = l + 1;
        }
        if (!(g->g[l] = as_f64(t, err))) return LRC_EUSER;
    }
    for (int s = 0; s < *n_sites; s++)
        for (int64_t l = 0; l < sites[s].layers; l++)
            if (!sites[s].g[l]) return lrc_err_set(err, "%s: site %s has no weight for layer %lld", path, sites[s].name, (long long)l);
    return LRC_OK;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* numpy.percentile's default: linear between the order statistics */
static double percentile(const double *sorted, int64_t n, double q)
{
    double at = q / 100.0 * (double)(n - 1);
    int64_t lo = (int64_t)floor(at), hi = lo + 1 < n ? lo + 1 : lo;
    return sorted[lo] + (at - (double)lo) * (sorted[hi] - sorted[lo]);
}

static double dot(const double *a, const double *b, int64_t n)
{
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* eigenvalues (descending) and eigenvectors (columns of V) of the symmetric
 * n x n A (destroyed), by cyclic Jacobi rotations */
static void sym_eigen(double *A, int64_t n, double *vals, double *V)
{
    for (int64_t i = 0; i < n * n; i++) V[i] = i / n == i % n;
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0;
        for (int64_t p = 0; p < n; p++)
            for (int64_t q = p + 1; q < n; q++) off += A[p * n + q] * A[p * n + q];
        if (off < 1e-30) break;
        for (int64_t p = 0; p < n; p++)
            for (int64_t q = p + 1; q < n; q++) {
                if (fabs(A[p * n + q]) < 1e-300) continue;
                double th = (A[q * n + q] - A[p * n + p]) / (2 * A[p * n + q]);
                double t = (th >= 0 ? 1 : -1) / (fabs(th) + sqrt(th * th + 1)), c = 1 / sqrt(t * t + 1), s = t * c;
                for (int64_t k = 0; k < n; k++) { /* A <- J^T A J, V <- V J */
                    double akp = A[k * n + p], akq = A[k * n + q];
                    A[k * n + p] = c * akp - s * akq, A[k * n + q] = s * akp + c * akq;
                }
                for (int64_t k = 0; k < n; k++) {
                    double apk = A[p * n + k], aqk = A[q * n + k];
                    A[p * n + k] = c * apk - s * aqk, A[q * n + k] = s * apk + c * aqk;
                }
                for (int64_t k = 0; k < n; k++) {
                    double vkp = V[k * n + p], vkq = V[k * n + q];
                    V[k * n + p] = c * vkp - s * vkq, V[k * n + q] = s * vkp + c * vkq;
                }
            }
    }
    for (int64_t i = 0; i < n; i++) vals[i] = A[i * n + i];
    for (int64_t i = 0; i < n; i++) /* sort descending, columns with them */
        for (int64_t j = i + 1; j < n; j++)
            if (vals[j] > vals[i]) {
                double t = vals[i];
                vals[i] = vals[j], vals[j] = t;
                for (int64_t k = 0; k < n; k++) t = V[k * n + i], V[k * n + i] = V[k * n + j], V[k * n + j] = t;
            }
}

/* classical MDS of the unit gains into xy[L][2], and the arc in degrees */
static double mds(const gain_site *g, double *xy)
{
    int64_t L = g->layers, d = g->d;
    double *A = lrc_xcalloc((size_t)(L * L) + 1, sizeof(double)), *V = lrc_xcalloc((size_t)(L * L) + 1, sizeof(double));
    double *vals = lrc_xcalloc((size_t)L + 1, sizeof(double)), *nrm = lrc_xcalloc((size_t)L + 1, sizeof(double));
    for (int64_t i = 0; i < L; i++) nrm[i] = sqrt(dot(g->g[i], g->g[i], d));
    for (int64_t i = 0; i < L; i++) /* squared distances of unit vectors: 2 - 2 cos */
        for (int64_t j = 0; j < L; j++) A[i * L + j] = 2 - 2 * dot(g->g[i], g->g[j], d) / (nrm[i] * nrm[j]);
    double *row = lrc_xcalloc((size_t)L + 1, sizeof(double)), all = 0;
    for (int64_t i = 0; i < L; i++) {
        for (int64_t j = 0; j < L; j++) row[i] += A[i * L + j] / (double)L;
        all += row[i] / (double)L;
    }
    for (int64_t i = 0; i < L; i++) /* B = -1/2 J D^2 J */
        for (int64_t j = 0; j < L; j++) A[i * L + j] = -0.5 * (A[i * L + j] - row[i] - row[j] + all);
    sym_eigen(A, L, vals, V);
    for (int k = 0; k < 2; k++) {
        double scale = k < L && vals[k] > 0 ? sqrt(vals[k]) : 0, sign = k < L && V[k] < 0 ? -1 : 1;
        for (int64_t i = 0; i < L; i++) xy[i * 2 + k] = k < L ? sign * scale * V[i * L + k] : 0;
    }
    double cx = 0, cy = 0, arc = 0;
    for (int64_t i = 0; i < L; i++) cx += xy[i * 2] / (double)L, cy += xy[i * 2 + 1] / (double)L;
    for (int64_t i = 1; i < L; i++) {
        double a0 = atan2(xy[(i - 1) * 2 + 1] - cy, xy[(i - 1) * 2] - cx), a1 = atan2(xy[i * 2 + 1] - cy, xy[i * 2] - cx);
        double turn = a1 - a0;
        while (turn > M_PI) turn -= 2 * M_PI;
        while (turn < -M_PI) turn += 2 * M_PI;
        arc += turn;
    }
    free(A), free(V), free(vals), free(nrm), free(row);
    return fabs(arc) * 180 / M_PI;
}

static void analyze_site(const gain_site *g, int64_t head, double tol, cJSON *out)
{
    int64_t L = g->layers, d = g->d;
    double *xy = lrc_xcalloc((size_t)(2 * L) + 1, sizeof(double)), *s = lrc_xmalloc((size_t)d * sizeof(double) + 8);
    double arc = mds(g, xy);
    cJSON *site = cJSON_AddObjectToObject(out, g->name), *rows = cJSON_AddArrayToObject(site, "layers");
    cJSON_AddNumberToObject(site, "arc_degrees", arc);
    printf("\n%s: %lld layers of %lld; the MDS of gamma / |gamma| traces an arc of %.1f degrees\n", g->name, (long long)L, (long long)d,
           arc);
    printf("%5s  %9s  %9s  %9s  %9s  %9s  %9s  %9s  %9s\n", "layer", "mean", "p50", "p90", "p99", "cos prev", "cos 0", "mds x", "mds y");
    for (int64_t l = 0; l < L; l++) {
        memcpy(s, g->g[l], (size_t)d * sizeof(double));
        qsort(s, (size_t)d, sizeof(double), by_value);
        double mean = 0;
        for (int64_t i = 0; i < d; i++) mean += s[i] / (double)d;
        double n0 = sqrt(dot(g->g[0], g->g[0], d)), nl = sqrt(dot(g->g[l], g->g[l], d));
        double cprev = l ? dot(g->g[l], g->g[l - 1], d) / (nl * sqrt(dot(g->g[l - 1], g->g[l - 1], d))) : NAN;
        double c0 = dot(g->g[l], g->g[0], d) / (nl * n0);
        const double v[8] = {mean, percentile(s, d, 50), percentile(s, d, 90), percentile(s, d, 99), cprev, c0, xy[2 * l], xy[2 * l + 1]};
        static const char *const keys[8] = {"mean", "p50", "p90", "p99", "cos_prev", "cos_first", "mds_x", "mds_y"};
        printf("%5lld", (long long)l);
        cJSON *r = cJSON_CreateObject();
        cJSON_AddNumberToObject(r, "layer", (double)l);
        for (int k = 0; k < 8; k++) {
            if (isnan(v[k])) printf("  %9s", "-");
            else printf("  %9.5f", v[k]), cJSON_AddNumberToObject(r, keys[k], v[k]);
        }
        printf("\n");
        cJSON_AddItemToArray(rows, r);
    }
    lrc_analyze_trajectory((const double *const *)g->g, L, d, head, tol, site);
    free(xy), free(s);
}

/* LayerRoPE's four sites, if w has them: per layer e^r, theta of pair 0, the effective-gain ratio */
static int analyze_layerrope(const lrc_tensor_set *w, const char *path, int64_t layers, cJSON *out, lrc_err *err)
{
    static const char *const sites[4] = {"in_attn", "out_attn", "in_mlp", "out_mlp"};
    static const char *const prefixes[2] = {"model.layerrope.", "vit.layerrope."};
    for (int p = 0; p < 2; p++) {
        char name[128];
        snprintf(name, sizeof name, "%s%s_gamma", prefixes[p], sites[0]);
        if (!lrc_tensor_set_find(w, name)) continue;
        cJSON *lr = cJSON_AddObjectToObject(out, "layerrope");
        for (int s = 0; s < 4; s++) {
            double v[4];
            static const char *const sc[4] = {"alpha", "beta", "alpha_rot", "beta_rot"};
            for (int k = 0; k < 4; k++) {
                snprintf(name, sizeof name, "%s%s_%s", prefixes[p], sites[s], sc[k]);
                const lrc_tensor *t = lrc_tensor_set_find(w, name);
                if (!t || lrc_shape_numel(&t->shape) != 1) return lrc_err_set(err, "%s: no scalar %s", path, name);
                double *x = as_f64(t, err);
                if (!x) return LRC_EUSER;
                v[k] = x[0];
                free(x);
            }
            cJSON *site = cJSON_AddObjectToObject(lr, sites[s]), *rows = cJSON_AddArrayToObject(site, "layers");
            for (int k = 0; k < 4; k++) cJSON_AddNumberToObject(site, sc[k], v[k]);
            printf("\nLayerRoPE %s: alpha %.5f, beta %.5f, alpha_rot %.5f, beta_rot %.5f\n", sites[s], v[0], v[1], v[2], v[3]);
            printf("%5s  %11s  %13s  %15s  %13s\n", "layer", "e^r", "theta (deg)", "|g_L| / |g_0|", "LNS 1/sqrt");
            for (int64_t l = 0; l < layers; l++) {
                double u = log((double)l + 1), mag = exp(v[0] + v[1] * u), th = exp(v[2] + v[3] * u) * 180 / M_PI;
                double ratio = exp(v[1] * u), lns = 1 / sqrt((double)l + 1);
                printf("%5lld  %11.5f  %13.4f  %15.5f  %13.5f\n", (long long)l, mag, th, ratio, lns);
                cJSON *r = cJSON_CreateObject();
                cJSON_AddNumberToObject(r, "layer", (double)l);
                cJSON_AddNumberToObject(r, "magnitude", mag);
                cJSON_AddNumberToObject(r, "theta_degrees", th);
                cJSON_AddNumberToObject(r, "gain_ratio", ratio);
                cJSON_AddNumberToObject(r, "lns", lns);
                cJSON_AddItemToArray(rows, r);
            }
        }
        return LRC_OK;
    }
    return LRC_OK;
}

/* What a directory records of the shape: the layer count and the attention's
 * head size (a run's model config; a Hugging Face config.json's
 * num_hidden_layers and head_dim or hidden_size / num_attention_heads); a
 * head size it does not give stays as it was. *hf: a Hugging Face language
 * model (its logits can be compared after a fit). */
static int dir_shape(const char *dir, lrc_run_model_fn run_model, int64_t *layers, int64_t *head, bool *hf, lrc_err *err)
{
    char path[4200];
    struct stat st;
    snprintf(path, sizeof path, "%s/run.json", dir);
    if (!stat(path, &st)) {
        lrc_model m = {0};
        lrc_err ignored;
        int64_t d, nh, hd = 0;
        int rc = run_model(dir, &m, err);
        if (!rc && *layers <= 0) rc = lrc_model_config_int(&m, "n_layers", layers, err);
        if (!rc && *head <= 0 && (lrc_model_config_int(&m, "head_dim", &hd, &ignored) || hd <= 0) &&
            !lrc_model_config_int(&m, "d_model", &d, &ignored) && !lrc_model_config_int(&m, "n_heads", &nh, &ignored) && nh > 0)
            hd = d / nh;
        if (!rc && *head <= 0) *head = hd;
        lrc_model_free(&m);
        return rc;
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return lrc_err_set(err, "%s is neither a run (run.json) nor a Hugging Face model (config.json)", dir);
    char *text = lrc_xcalloc(1 << 20, 1);
    size_t n = fread(text, 1, (1 << 20) - 1, f);
    fclose(f);
    text[n] = 0;
    cJSON *cfg = cJSON_Parse(text);
    const cJSON *nl = cJSON_GetObjectItemCaseSensitive(cfg, "num_hidden_layers"),
                *hd = cJSON_GetObjectItemCaseSensitive(cfg, "head_dim"), *hs = cJSON_GetObjectItemCaseSensitive(cfg, "hidden_size"),
                *nh = cJSON_GetObjectItemCaseSensitive(cfg, "num_attention_heads"),
                *im = cJSON_GetObjectItemCaseSensitive(cfg, "image_size");
    if (cJSON_IsNumber(nl) && *layers <= 0) *layers = (int64_t)nl->valuedouble;
    if (*head <= 0 && cJSON_IsNumber(hd) && hd->valuedouble > 0) *head = (int64_t)hd->valuedouble;
    else if (*head <= 0 && cJSON_IsNumber(hs) && cJSON_IsNumber(nh) && nh->valuedouble > 0)
        *head = (int64_t)hs->valuedouble / (int64_t)nh->valuedouble;
    *hf = !im;
    cJSON_Delete(cfg);
    free(text);
    return LRC_OK;
}

/* a tensor of f32 values x[n] (shape: [n], or a scalar when n is 0) into w */
static int add_f32(lrc_tensor_set *w, const char *name, const double *x, int64_t n, lrc_err *err)
{
    lrc_shape s = {n ? 1 : 0, {n}};
    lrc_tensor *t = lrc_tensor_new(name, LRC_F32, &s, err);
    if (!t) return LRC_EUSER;
    for (int64_t i = 0; i < (n ? n : 1); i++) ((float *)t->data)[i] = (float)x[i];
    return lrc_tensor_set_add(w, t, err);
}

/* what --fit-layerrope refuses, before anything is printed */
static int fit_check(const char *path, const gain_site *sites, int n_sites, lrc_err *err)
{
    for (int s = 0; s < n_sites; s++)
        if (!strcmp(sites[s].name, "post_feedforward_layernorm"))
            return lrc_err_set(err, "%s: --fit-layerrope: a Post-Norm checkpoint (post_feedforward_layernorm): LayerRoPE's gains "
                                    "replace the read and write gains of Pre- and Peri-Norm", path);
    if (!n_sites || sites[0].d % 2) return lrc_err_set(err, "%s: --fit-layerrope: no per-layer gains of an even width to fit", path);
    return LRC_OK;
}

/* --fit-layerrope OUT: each read (and Peri's write) site of per-layer gains
 * fitted; a site the checkpoint lacks is the identity (gamma 1, no scale, a
 * rotation of e^-30 rad); OUT holds every other tensor and LayerRoPE's. */
static int fit_layerrope(lrc_tensor_set *w, const gain_site *sites, int n_sites, const char *fit_out, double base, cJSON *out,
                         lrc_err *err)
{
    static const char *const from[4][2] = {{"input_layernorm", "layernorm_before"}, {"post_block_norm_attn", NULL},
                                           {"post_attention_layernorm", "layernorm_after"}, {"post_block_norm_mlp", NULL}};
    static const char *const to[4] = {"in_attn", "out_attn", "in_mlp", "out_mlp"};
    int vit = 0, d = 0, rc = LRC_OK;
    for (int s = 0; s < n_sites; s++) vit |= !strcmp(sites[s].name, "layernorm_before"), d = (int)sites[s].d;
    cJSON *fit = cJSON_AddObjectToObject(out, "fit_layerrope");
    cJSON_AddNumberToObject(fit, "base", base);
    printf("\nLayerRoPE fitted (base %g; alpha 0, the shared gamma carries the scale):\n%-9s  %-26s  %10s  %9s  %9s  %9s\n", base,
           "site", "from", "rel. error", "beta", "alpha_rot", "beta_rot");
    double *gamma = lrc_xmalloc((size_t)d * sizeof(double));
    for (int k = 0; k < 4 && !rc; k++) {
        const gain_site *g = NULL;
        for (int s = 0; s < n_sites; s++)
            if (!strcmp(sites[s].name, from[k][0]) || (from[k][1] && !strcmp(sites[s].name, from[k][1]))) g = &sites[s];
        double sc[3] = {0, -30, 0}, alpha = 0, rel = 0;
        if (g) rel = lrc_analyze_fit_site((const double *const *)g->g, g->layers, g->d, base, sc, gamma);
        else
            for (int i = 0; i < d; i++) gamma[i] = 1;
        printf("%-9s  %-26s  %10.3e  %9.5f  %9.5f  %9.5f\n", to[k], g ? g->name : "(none: the identity)", rel, sc[0], sc[1], sc[2]);
        cJSON *o = cJSON_AddObjectToObject(fit, to[k]);
        cJSON_AddNumberToObject(o, "relative_error", rel);
        cJSON_AddNumberToObject(o, "beta", sc[0]);
        cJSON_AddNumberToObject(o, "alpha_rot", sc[1]);
        cJSON_AddNumberToObject(o, "beta_rot", sc[2]);
        char name[128];
        const char *prefix = vit ? "vit.layerrope." : "model.layerrope.";
        snprintf(name, sizeof name, "%s%s_gamma", prefix, to[k]);
        rc = add_f32(w, name, gamma, d, err);
        const double *vals[4] = {&alpha, &sc[0], &sc[1], &sc[2]};
        static const char *const sn[4] = {"alpha", "beta", "alpha_rot", "beta_rot"};
        for (int i = 0; i < 4 && !rc; i++) {
            snprintf(name, sizeof name, "%s%s_%s", prefix, to[k], sn[i]);
            rc = add_f32(w, name, vals[i], 0, err);
        }
    }
    free(gamma);
    lrc_tensor_set kept; /* every tensor but the per-layer gains fitted */
    lrc_tensor_set_init(&kept);
    for (int i = 0; i < w->n && !rc; i++) {
        int64_t l;
        char site[64];
        bool fitted = false;
        if (per_layer_name(w->items[i]->name, &l, site, sizeof site))
            for (int k = 0; k < 4; k++) fitted |= !strcmp(site, from[k][0]) || (from[k][1] && !strcmp(site, from[k][1]));
        if (!fitted) rc = lrc_tensor_set_add(&kept, w->items[i], err);
    }
    if (!rc) rc = lrc_safetensors_save(fit_out, &kept, err);
    if (!rc) printf("wrote %s (%d tensors): run it with --set norm=layerrope%s\n", fit_out, kept.n,
                    base != 100 ? " and the base as layerrope_base" : "");
    kept.n = 0; /* the tensors are w's */
    lrc_tensor_set_clear(&kept);
    return rc;
}

int lrc_analyze_run(const lrc_analyze_opts *opts, lrc_err *err)
{
    lrc_analyze_opts o = *opts; /* the directory may give the layers and the head size */
    const char *path = o.checkpoint;
    lrc_tensor_set w;
    lrc_tensor_set_init(&w);
    gain_site sites[MAX_SITES];
    memset(sites, 0, sizeof sites);
    int n_sites = 0;
    struct stat st;
    int rc = stat(path, &st) ? lrc_err_set(err, "%s: %s", path, strerror(errno)) : LRC_OK;
    bool hf = false;
    if (!rc && S_ISDIR(st.st_mode)) rc = dir_shape(path, o.run_model, &o.layers, &o.head, &hf, err);
    if (!rc) rc = lrc_safetensors_load(path, &w, err);
    if (!rc) rc = collect_sites(&w, path, sites, &n_sites, err);
    /* what can fail, before anything is printed */
    const bool rope = lrc_tensor_set_find(&w, "model.layerrope.in_attn_gamma") || lrc_tensor_set_find(&w, "vit.layerrope.in_attn_gamma");
    if (!rc && !n_sites && !rope)
        rc = lrc_err_set(err, "%s has no norm weights: neither per-layer gains (model.layers.L.*norm*.weight) nor LayerRoPE's", path);
    if (!rc && rope && o.layers <= 0)
        rc = lrc_err_set(err, "%s: LayerRoPE's gains depend on a depth the weights do not record: give --layers N (or a run directory)",
                         path);
    if (!rc && o.fit_out) rc = fit_check(path, sites, n_sites, err);
    if (!rc && o.plot && lrc_check_folder(o.plot, err)) rc = lrc_err_prefix(err, "--plot");
    cJSON *out = cJSON_CreateObject();
    if (!rc) printf("%s: %d tensors\n", path, w.n);
    for (int s = 0; s < n_sites && !rc; s++) analyze_site(&sites[s], o.head, o.tol, out);
    if (!rc) rc = analyze_layerrope(&w, path, o.layers, out, err);
    if (!rc && o.fit_out) rc = fit_layerrope(&w, sites, n_sites, o.fit_out, o.base, out, err);
    if (!rc && o.fit_out && hf && n_sites) rc = lrc_analyze_fit_logits(path, o.fit_out, out, err);
    if (!rc && o.plot) rc = lrc_analyze_plot(out, o.plot, err);
    if (!rc && o.json_out) {
        char *text = cJSON_Print(out);
        FILE *f = fopen(o.json_out, "w");
        if (!f || fputs(text, f) < 0 || fclose(f)) rc = lrc_err_set(err, "%s: cannot write: %s", o.json_out, strerror(errno));
        else printf("\nwrote %s\n", o.json_out);
        free(text);
    }
    cJSON_Delete(out);
    for (int s = 0; s < n_sites; s++) {
        for (int64_t l = 0; l < sites[s].layers; l++) free(sites[s].g[l]);
        free(sites[s].g);
    }
    lrc_tensor_set_clear(&w);
    return rc;
}
