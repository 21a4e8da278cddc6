/* common.c — what several research tools share: a folder checked for
 * writing, mkdir -p, gnuplot, the default text, and a graph run in f64 with
 * a weights file. lrc train (the command line) uses the folders and the
 * text too. */
#include "lrc_tools.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int lrc_check_folder(const char *path, lrc_err *err)
{
    char dir[4200];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    if (access(*dir ? dir : "/", W_OK)) return lrc_err_set(err, "%s: cannot write in %s: %s", path, *dir ? dir : "/", strerror(errno));
    return LRC_OK;
}

/* A run directory under runs/sweep-3/ needs no mkdir first. */
int lrc_make_parents(const char *path)
{
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = 0;
        if (mkdir(p, 0755) && errno != EEXIST) return -1;
        *s = '/';
    }
    return 0;
}

int lrc_gnuplot(const char *script, const char *png, lrc_err *err)
{
    if (lrc_check_folder(png, err)) return LRC_EUSER;
    /* gnuplot writes the image to its stdout when it cannot open the file */
    FILE *gp = popen("gnuplot >/dev/null 2>&1", "w");
    if (!gp) return lrc_err_set(err, "cannot run gnuplot (apt-get install gnuplot-nox)");
    fputs(script, gp);
    if (pclose(gp) != 0 || access(png, F_OK)) return lrc_err_set(err, "gnuplot could not draw %s (apt-get install gnuplot-nox)", png);
    return LRC_OK;
}

int lrc_corpus_read(const char *path, char **buf, size_t *len, lrc_err *err)
{
    if (path) return (*buf = lrc_read_file(path, len, err)) ? LRC_OK : LRC_EUSER;
    FILE *p = popen("bible -f Gen1:1-Rev22:21 2>/dev/null", "r");
    *len = 0;
    *buf = p ? lrc_read_all(p, len) : NULL;
    int status = p ? pclose(p) : -1;
    if (status != 0 || !*buf || *len == 0) {
        free(*buf);
        *buf = NULL;
        return lrc_err_set(err, "no --data given and the King James Bible is not installed (apt-get install bible-kjv)");
    }
    return LRC_OK;
}

int lrc_run64_weights(const lrc_graph *g, const lrc_tensor_set *in, const char *weights, lrc_tensor_set *params, lrc_run64 *r,
                      lrc_err *err)
{
    lrc_tensor_set wfile;
    lrc_tensor_set_init(&wfile);
    int rc = lrc_safetensors_load(weights, &wfile, err);
    if (!rc) rc = lrc_params_bind(g, &wfile, weights, params, err);
    lrc_tensor_set_clear(&wfile);
    if (rc) return rc;
    lrc_run64_init(r, g, in, params);
    return lrc_run64_exec(r, 0, g->n_nodes, err);
}
