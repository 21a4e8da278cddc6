/* analyze_plot.c — lrc analyze --plot PREFIX: the figures of its numbers,
 * drawn by gnuplot from the JSON object it builds. PREFIX_SITE.png per site
 * of per-layer gains: the mean and the 50/90/99th percentiles of gamma
 * against the layer (the paper's Fig. 2a) beside the MDS of the unit gains,
 * each point labelled by its layer (Fig. 2b); PREFIX_layerrope.png: e^r(L)
 * of each LayerRoPE site beside Layer-Norm Scaling's 1 / sqrt(L + 1) (Fig. 19). */
#include "lrc_tools.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static int plot_site(const cJSON *site, const char *prefix, lrc_err *err)
{
    char png[4200], *s = NULL;
    size_t len = 0;
    snprintf(png, sizeof png, "%s_%s.png", prefix, site->string);
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(site, "layers"), *r;
    FILE *f = open_memstream(&s, &len);
    fprintf(f, "set terminal pngcairo size 1200,500 noenhanced\nset output '%s'\nset multiplot layout 1,2 title '%s'\n", png, site->string);
    fprintf(f, "set xlabel 'layer'\nset ylabel 'gamma'\nset key top left\nplot '-' using 1:2 with linespoints title 'mean', "
               "'-' using 1:2 with lines title 'p50', '-' using 1:2 with lines title 'p90', '-' using 1:2 with lines title 'p99'\n");
    static const char *const keys[4] = {"mean", "p50", "p90", "p99"};
    for (int k = 0; k < 4; k++) {
        cJSON_ArrayForEach(r, rows) fprintf(f, "%.9g %.9g\n", num(r, "layer"), num(r, keys[k]));
        fprintf(f, "e\n");
    }
    fprintf(f, "set xlabel 'MDS 1'\nset ylabel 'MDS 2'\nset size ratio -1\nset title 'arc %.1f degrees'\n"
               "plot '-' using 1:2 with linespoints notitle, '-' using 1:2:3 with labels offset 1,1 notitle\n",
            num(site, "arc_degrees"));
    for (int k = 0; k < 2; k++) {
        cJSON_ArrayForEach(r, rows) fprintf(f, "%.9g %.9g %d\n", num(r, "mds_x"), num(r, "mds_y"), (int)num(r, "layer"));
        fprintf(f, "e\n");
    }
    fprintf(f, "unset multiplot\n");
    fclose(f);
    int rc = lrc_gnuplot(s, png, err);
    free(s);
    if (!rc) printf("wrote %s\n", png);
    return rc;
}

static int plot_layerrope(const cJSON *lr, const char *prefix, lrc_err *err)
{
    char png[4200], *s = NULL;
    size_t len = 0;
    snprintf(png, sizeof png, "%s_layerrope.png", prefix);
    FILE *f = open_memstream(&s, &len);
    fprintf(f, "set terminal pngcairo size 900,600 noenhanced\nset output '%s'\nset logscale y\nset xlabel 'layer'\n"
               "set ylabel 'magnitude multiplier e^r'\nset key outside right\nplot ", png);
    const cJSON *site, *r;
    cJSON_ArrayForEach(site, lr) fprintf(f, "'-' using 1:2 with linespoints title '%s (beta %.3f)', ", site->string, num(site, "beta"));
    fprintf(f, "'-' using 1:2 with lines dt 2 title 'LNS 1/sqrt(l+1)'\n");
    cJSON_ArrayForEach(site, lr) {
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(site, "layers")) fprintf(f, "%.9g %.9g\n", num(r, "layer"), num(r, "magnitude"));
        fprintf(f, "e\n");
    }
    const cJSON *first = lr->child;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(first, "layers")) fprintf(f, "%.9g %.9g\n", num(r, "layer"), num(r, "lns"));
    fprintf(f, "e\n");
    fclose(f);
    int rc = lrc_gnuplot(s, png, err);
    free(s);
    if (!rc) printf("wrote %s\n", png);
    return rc;
}

int lrc_analyze_plot(const cJSON *out, const char *prefix, lrc_err *err)
{
    int rc = LRC_OK;
    const cJSON *site;
    cJSON_ArrayForEach(site, out) {
        if (rc) break;
        if (!strcmp(site->string, "layerrope")) rc = plot_layerrope(site, prefix, err);
        else if (cJSON_GetObjectItemCaseSensitive(site, "arc_degrees")) rc = plot_site(site, prefix, err);
    }
    return rc;
}
