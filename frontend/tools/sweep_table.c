/* sweep_table.c — lrc sweep's record (sweep.jsonl) and what is made of it:
 * per arm the best rate eta*, its loss L*, the seeds' spread there, the
 * largest stable rate, the failed runs and the sensitivity S of the
 * LayerRoPE paper's Table 9; the markdown table and the plots (gnuplot). */
#include "lrc_tools.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void lrc_sweep_points_free(lrc_sweep_point *p, int n)
{
    for (int i = 0; i < n; i++) free(p[i].run), free(p[i].arm), free(p[i].x);
    free(p);
}

static char *dup_or_null(const char *s) { return s ? lrc_xstrdup(s) : NULL; }

static int read_point(const cJSON *o, lrc_sweep_point *p, const char *path, int line, lrc_err *err)
{
    const cJSON *run = cJSON_GetObjectItemCaseSensitive(o, "run"), *arm = cJSON_GetObjectItemCaseSensitive(o, "arm");
    const cJSON *lr = cJSON_GetObjectItemCaseSensitive(o, "lr"), *seed = cJSON_GetObjectItemCaseSensitive(o, "seed");
    const cJSON *loss = cJSON_GetObjectItemCaseSensitive(o, "val_loss"), *div = cJSON_GetObjectItemCaseSensitive(o, "diverged");
    const cJSON *l0 = cJSON_GetObjectItemCaseSensitive(o, "l0"), *x = cJSON_GetObjectItemCaseSensitive(o, "x");
    if (!cJSON_IsString(run) || !cJSON_IsString(arm) || !cJSON_IsNumber(lr) || !cJSON_IsNumber(seed) || !cJSON_IsBool(div) ||
        !cJSON_IsNumber(l0) || (!cJSON_IsTrue(div) && !cJSON_IsNumber(loss)) || (x && !cJSON_IsString(x)))
        return lrc_err_set(err, "%s:%d: a point needs run, arm (strings), lr, seed, l0 (numbers), diverged (true or false) and, "
                                "unless diverged, val_loss", path, line);
    if (!(lr->valuedouble > 0) || !(l0->valuedouble > 0))
        return lrc_err_set(err, "%s:%d: lr and l0 must be positive", path, line);
    *p = (lrc_sweep_point){.run = lrc_xstrdup(run->valuestring), .arm = lrc_xstrdup(arm->valuestring),
                           .x = dup_or_null(x ? x->valuestring : NULL), .lr = lr->valuedouble, .seed = (long long)seed->valuedouble,
                           .loss = cJSON_IsTrue(div) ? NAN : loss->valuedouble, .diverged = cJSON_IsTrue(div), .l0 = l0->valuedouble};
    return LRC_OK;
}

int lrc_sweep_read(const char *path, lrc_sweep_point **out, int *n, lrc_err *err)
{
    *out = NULL, *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) return lrc_err_set(err, "cannot read %s", path);
    char *buf = NULL;
    size_t cap = 0;
    int line = 0, cap_pts = 0, rc = LRC_OK;
    while (!rc && getline(&buf, &cap, f) > 0) {
        line++;
        if (strspn(buf, " \t\r\n") == strlen(buf)) continue;
        cJSON *o = cJSON_Parse(buf);
        if (!cJSON_IsObject(o)) {
            rc = lrc_err_set(err, "%s:%d: not a JSON object", path, line);
        } else {
            if (*n == cap_pts) *out = lrc_xrealloc(*out, (size_t)(cap_pts = cap_pts ? 2 * cap_pts : 16) * sizeof **out);
            if (!(rc = read_point(o, &(*out)[*n], path, line, err))) ++*n;
        }
        cJSON_Delete(o);
    }
    free(buf);
    fclose(f);
    if (rc) lrc_sweep_points_free(*out, *n), *out = NULL, *n = 0;
    return rc;
}

int lrc_sweep_append(const char *path, const lrc_sweep_point *p, lrc_err *err)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "run", p->run);
    cJSON_AddStringToObject(o, "arm", p->arm);
    if (p->x) cJSON_AddStringToObject(o, "x", p->x);
    cJSON_AddNumberToObject(o, "lr", p->lr);
    cJSON_AddNumberToObject(o, "seed", (double)p->seed);
    if (!p->diverged) cJSON_AddNumberToObject(o, "val_loss", p->loss);
    cJSON_AddBoolToObject(o, "diverged", p->diverged);
    cJSON_AddNumberToObject(o, "l0", p->l0);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    FILE *f = fopen(path, "a");
    int rc = LRC_OK;
    if (!f || fprintf(f, "%s\n", s) < 0 || fflush(f) || fsync(fileno(f))) rc = lrc_err_set(err, "cannot write %s", path);
    if (f) fclose(f);
    free(s);
    return rc;
}

/* min(loss, l0), a diverged run counting as l0 */
static double capped(const lrc_sweep_point *p) { return p->diverged || !(p->loss < p->l0) ? p->l0 : p->loss; }

/* L(lr) of arm: the mean over its runs at that rate; *count their number */
static double arm_loss_at(const lrc_sweep_point *pts, int n, const char *arm, double lr, int *count)
{
    double sum = 0;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(pts[i].arm, arm) && pts[i].lr == lr) sum += capped(&pts[i]), k++;
    if (count) *count = k;
    return k ? sum / k : NAN;
}

static bool arm_has_rate(const lrc_sweep_point *pts, int n, const char *arm, double lr)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(pts[i].arm, arm) && pts[i].lr == lr) return true;
    return false;
}

/* eta*, L*, the spread at eta*, the failed runs and the largest stable rate */
static void arm_best(const lrc_sweep_point *pts, int n, lrc_sweep_arm *a)
{
    a->best_loss = INFINITY, a->best_lr = NAN;
    for (int i = 0; i < n; i++) {
        if (strcmp(pts[i].arm, a->arm)) continue;
        a->runs++;
        int k;
        double L = arm_loss_at(pts, n, a->arm, pts[i].lr, &k);
        if (L < a->best_loss || (L == a->best_loss && pts[i].lr < a->best_lr)) a->best_loss = L, a->best_lr = pts[i].lr, a->seeds = k;
    }
    double ss = 0;
    for (int i = 0; i < n; i++)
        if (!strcmp(pts[i].arm, a->arm) && pts[i].lr == a->best_lr) ss += pow(capped(&pts[i]) - a->best_loss, 2);
    a->spread = a->seeds > 1 ? sqrt(ss / (a->seeds - 1)) : 0;
    a->stable_lr = NAN;
    for (int i = 0; i < n; i++) {
        if (strcmp(pts[i].arm, a->arm)) continue;
        bool failed = pts[i].diverged || pts[i].loss > a->best_loss + 1.0;
        a->failed += failed;
        if (failed) continue;
        bool rate_ok = true; /* every run at this rate */
        for (int j = 0; j < n; j++)
            if (!strcmp(pts[j].arm, a->arm) && pts[j].lr == pts[i].lr && (pts[j].diverged || pts[j].loss > a->best_loss + 1.0))
                rate_ok = false;
        if (rate_ok && !(pts[i].lr <= a->stable_lr)) a->stable_lr = pts[i].lr;
    }
}

int lrc_sweep_arms(const lrc_sweep_point *pts, int n, lrc_sweep_arm **arms, int *n_arms)
{
    *arms = lrc_xcalloc((size_t)(n ? n : 1), sizeof **arms);
    *n_arms = 0;
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int a = 0; a < *n_arms && !seen; a++) seen = !strcmp((*arms)[a].arm, pts[i].arm);
        if (!seen) (*arms)[(*n_arms)++].arm = pts[i].arm;
    }
    for (int a = 0; a < *n_arms; a++) arm_best(pts, n, &(*arms)[a]);
    /* S: over the rates that every arm swept (a rate one arm alone swept
     * would compare that arm at a rate the others never tried) */
    for (int a = 0; a < *n_arms; a++) {
        lrc_sweep_arm *A = &(*arms)[a];
        double sum = 0;
        for (int i = 0; i < n; i++) {
            if (strcmp(pts[i].arm, A->arm)) continue;
            bool first = true, everywhere = true; /* each rate once: at its first run */
            for (int j = 0; j < i && first; j++) first = strcmp(pts[j].arm, A->arm) || pts[j].lr != pts[i].lr;
            for (int b = 0; b < *n_arms && everywhere; b++) everywhere = arm_has_rate(pts, n, (*arms)[b].arm, pts[i].lr);
            if (!first || !everywhere) continue;
            sum += arm_loss_at(pts, n, A->arm, pts[i].lr, NULL) - A->best_loss;
            A->s_rates++;
        }
        A->s = A->s_rates ? sum / A->s_rates : NAN;
    }
    return LRC_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* the rates any arm swept, ascending, once each */
static int all_rates(const lrc_sweep_point *pts, int n, double *rates)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        bool seen = false;
        for (int j = 0; j < k && !seen; j++) seen = rates[j] == pts[i].lr;
        if (!seen) rates[k++] = pts[i].lr;
    }
    qsort(rates, (size_t)k, sizeof *rates, cmp_double);
    return k;
}

void lrc_sweep_table_write(FILE *f, const lrc_sweep_point *pts, int n, const lrc_sweep_arm *arms, int n_arms)
{
    fprintf(f, "| arm | eta* | L* | seeds at eta* (sd) | largest stable rate | failed runs | S (rates) |\n");
    fprintf(f, "|---|---|---|---|---|---|---|\n");
    for (int a = 0; a < n_arms; a++) {
        const lrc_sweep_arm *A = &arms[a];
        char stable[32] = "none";
        if (!isnan(A->stable_lr)) snprintf(stable, sizeof stable, "%.3g", A->stable_lr);
        fprintf(f, "| %s | %.3g | %.4f | %d (%.4f) | %s | %d of %d | %.4f (%d) |\n", *A->arm ? A->arm : "(all)", A->best_lr,
                A->best_loss, A->seeds, A->spread, stable, A->failed, A->runs, A->s, A->s_rates);
    }
    double *rates = lrc_xmalloc((size_t)(n ? n : 1) * sizeof *rates);
    int nr = all_rates(pts, n, rates);
    fprintf(f, "\nL(rate), the mean over seeds of the last validation loss (a diverged run counts as ln V; - : not swept)\n\n| rate |");
    for (int a = 0; a < n_arms; a++) fprintf(f, " %s |", *arms[a].arm ? arms[a].arm : "(all)");
    fprintf(f, "\n|---|");
    for (int a = 0; a < n_arms; a++) fprintf(f, "---|");
    fprintf(f, "\n");
    for (int r = 0; r < nr; r++) {
        fprintf(f, "| %.3g |", rates[r]);
        for (int a = 0; a < n_arms; a++) {
            int k, div = 0;
            double L = arm_loss_at(pts, n, arms[a].arm, rates[r], &k);
            for (int i = 0; i < n; i++) div += !strcmp(pts[i].arm, arms[a].arm) && pts[i].lr == rates[r] && pts[i].diverged;
            if (!k) fprintf(f, " - |");
            else if (div) fprintf(f, " %.4f (%d diverged) |", L, div);
            else fprintf(f, " %.4f |", L);
        }
        fprintf(f, "\n");
    }
    free(rates);
}

/* arm less its "key=value" (the family a plot against key draws as one curve) */
static void arm_without(const char *arm, const char *key, char *out, size_t cap)
{
    out[0] = 0;
    size_t kl = strlen(key);
    for (const char *p = arm; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (!(len > kl && !strncmp(p, key, kl) && p[kl] == '='))
            snprintf(out + strlen(out), cap - strlen(out), "%s%.*s", out[0] ? "," : "", (int)len, p);
        p += len + (e ? 1 : 0);
    }
}

int lrc_sweep_plot(const lrc_sweep_point *pts, int n, const lrc_sweep_arm *arms, int n_arms, const char *png, const char *png_x,
                   const char *x_key, lrc_err *err)
{
    char *s = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&s, &len);
    double *rates = lrc_xmalloc((size_t)(n ? n : 1) * sizeof *rates);
    int nr = all_rates(pts, n, rates);
    fprintf(f, "set terminal pngcairo size 900,600\nset output '%s'\nset logscale x\nset xlabel 'learning rate'\n"
               "set ylabel 'final validation loss (diverged: ln V)'\nset key outside right\nplot ", png);
    for (int a = 0; a < n_arms; a++) fprintf(f, "%s'-' with linespoints title '%s'", a ? ", " : "", *arms[a].arm ? arms[a].arm : "all");
    fprintf(f, "\n");
    for (int a = 0; a < n_arms; a++) {
        for (int r = 0; r < nr; r++) {
            double L = arm_loss_at(pts, n, arms[a].arm, rates[r], NULL);
            if (!isnan(L)) fprintf(f, "%.9g %.9g\n", rates[r], L);
        }
        fprintf(f, "e\n");
    }
    fclose(f);
    int rc = lrc_gnuplot(s, png, err);
    free(s);
    if (rc || !x_key || !png_x) return free(rates), rc;
    /* the loss at each arm's best rate against the key, a curve per family */
    s = NULL, f = open_memstream(&s, &len);
    char fam[512], other[512];
    fprintf(f, "set terminal pngcairo size 900,600\nset output '%s'\nset xlabel '%s'\nset ylabel 'L* (at each arm''s best rate)'\n"
               "set key outside right\nplot ", png_x, x_key);
    int curves = 0;
    for (int a = 0; a < n_arms; a++) {
        arm_without(arms[a].arm, x_key, fam, sizeof fam);
        bool first = true;
        for (int b = 0; b < a && first; b++) arm_without(arms[b].arm, x_key, other, sizeof other), first = strcmp(fam, other);
        if (first) fprintf(f, "%s'-' with linespoints title '%s'", curves++ ? ", " : "", *fam ? fam : "all");
    }
    fprintf(f, "\n");
    for (int a = 0; a < n_arms; a++) {
        arm_without(arms[a].arm, x_key, fam, sizeof fam);
        bool first = true;
        for (int b = 0; b < a && first; b++) arm_without(arms[b].arm, x_key, other, sizeof other), first = strcmp(fam, other);
        if (!first) continue;
        for (int b = a; b < n_arms; b++) {
            arm_without(arms[b].arm, x_key, other, sizeof other);
            if (strcmp(fam, other)) continue;
            for (int i = 0; i < n; i++)
                if (!strcmp(pts[i].arm, arms[b].arm) && pts[i].x) {
                    fprintf(f, "%s %.9g\n", pts[i].x, arms[b].best_loss);
                    break;
                }
        }
        fprintf(f, "e\n");
    }
    fclose(f);
    rc = lrc_gnuplot(s, png_x, err);
    free(s);
    free(rates);
    return rc;
}
