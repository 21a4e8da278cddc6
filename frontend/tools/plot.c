/* plot.c — lrc plot: loss curves of one or more training runs in one
 * PNG, drawn by gnuplot (Debian's gnuplot-nox) from their metrics.jsonl. */
#include "lrc_tools.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* step, train loss, validation loss and validation accuracy (or NaN) per
 * line, from metrics.jsonl */
static int write_series(const char *run, FILE *out, int *n_val, int *n_acc, lrc_err *err)
{
    char path[4200], line[4096];
    snprintf(path, sizeof path, "%s/metrics.jsonl", run);
    FILE *f = fopen(path, "r");
    if (!f) return lrc_err_set(err, "%s: cannot open: %s", path, strerror(errno));
    int n = 0, lineno = 0, rc = LRC_OK;
    while (fgets(line, sizeof line, f) && !rc) {
        lineno++;
        cJSON *o = cJSON_Parse(line);
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "step"), *tl = cJSON_GetObjectItemCaseSensitive(o, "train_loss");
        const cJSON *vl = cJSON_GetObjectItemCaseSensitive(o, "val_loss"), *va = cJSON_GetObjectItemCaseSensitive(o, "val_acc");
        if (!cJSON_IsNumber(st) || !cJSON_IsNumber(tl)) rc = lrc_err_set(err, "%s:%d: not a metrics line", path, lineno);
        else {
            fprintf(out, "%.17g %.17g %.17g %.17g\n", st->valuedouble, tl->valuedouble, cJSON_IsNumber(vl) ? vl->valuedouble : NAN,
                    cJSON_IsNumber(va) ? va->valuedouble : NAN);
            if (cJSON_IsNumber(vl)) (*n_val)++;
            if (cJSON_IsNumber(va)) (*n_acc)++;
            n++;
        }
        cJSON_Delete(o);
    }
    fclose(f);
    if (!rc && n == 0) rc = lrc_err_set(err, "%s: no metrics yet", path);
    fprintf(out, "\n\n"); /* gnuplot: the next data set */
    return rc;
}

int lrc_plot_runs(const lrc_plot_opts *o, lrc_err *err)
{
    char *const *runs = o->runs;
    const int n_runs = o->n_runs;
    const char *png = o->png;
    char data[] = "/tmp/lrc-plot-XXXXXX";
    int fd = mkstemp(data);
    if (fd < 0) return lrc_err_set(err, "cannot create a temporary file: %s", strerror(errno));
    FILE *f = fdopen(fd, "w");
    int rc = LRC_OK, n_val = 0, n_acc = 0;
    for (int i = 0; i < n_runs && !rc; i++) rc = write_series(runs[i], f, &n_val, &n_acc, err);
    fclose(f);
    if (!rc) {
        FILE *gp = popen("gnuplot 2>/dev/null", "w");
        if (!gp) rc = lrc_err_set(err, "cannot run gnuplot (apt-get install gnuplot-nox)");
        else {
            char tmp[4200];
            snprintf(tmp, sizeof tmp, "%s.tmp.png", png);
            fprintf(gp, "set terminal pngcairo size 1000,600 noenhanced\nset output '%s'\n", tmp);
            fprintf(gp, "set xlabel 'step'\nset ylabel 'loss (nats%s)'\nset grid\nset key top right\n", n_acc ? "" : " per byte");
            if (n_acc) /* classification: validation accuracy on the right axis */
                fprintf(gp, "set y2label 'validation accuracy'\nset y2range [0:1]\nset y2tics 0.1\nset ytics nomirror\nset key center right\n");
            fprintf(gp, "set datafile missing 'NaN'\nplot ");
            for (int i = 0; i < n_runs; i++)
                fprintf(gp, "%s'%s' index %d using 1:2 with lines lw 1 title '%s train', '%s' index %d using 1:3 with linespoints lw 2 title '%s validation'",
                        i ? ", " : "", data, i, runs[i], data, i, runs[i]);
            for (int i = 0; i < n_runs && n_acc; i++)
                fprintf(gp, ", '%s' index %d using 1:4 axes x1y2 with linespoints lw 2 dt 2 title '%s validation accuracy'", data, i, runs[i]);
            fprintf(gp, "\n");
            int status = pclose(gp);
            if (status != 0 || access(tmp, F_OK)) {
                rc = lrc_err_set(err, "gnuplot could not draw %s (apt-get install gnuplot-nox)", png);
                remove(tmp);
            } else if (rename(tmp, png)) {
                rc = lrc_err_set(err, "%s: cannot write: %s", png, strerror(errno));
            }
        }
    }
    remove(data);
    return rc;
}
