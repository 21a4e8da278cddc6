/* cli_session.c — a package opened for lrc forward and lrc generate through
 * the embedding API: what the command line adds is its rule for --weights
 * and --threads. */
#include "cli_session.h"

#include <stdlib.h>
#include <string.h>

int cli_session_error(const lrc_session *s, lrc_err *err) { return lrc_err_set(err, "%s", lrc_session_error(s)); }

int cli_session_start(const cli_args *a, lrc_session **s, lrc_err *err)
{
    *s = NULL;
    if (a->threads == 0 || a->threads < -1)
        return lrc_err_set(err, "--threads %lld: the thread count must be at least 1", (long long)a->threads);
    lrc_session_options o = lrc_session_default_options();
    o.threads = a->threads > 0 ? (int)a->threads : 0;
    return lrc_session_open(a->m.model, &o, s) ? cli_session_error(*s, err) : LRC_OK;
}

int cli_session_weights(const cli_args *a, lrc_session *s, lrc_err *err)
{
    lrc_session_info info;
    if (lrc_session_describe(s, &info)) return cli_session_error(s, err);
    /* a command line names one source of weights: a second one is a mistake */
    if (info.has_weights && a->weights)
        return lrc_err_set(err, "%s holds its weights (folded at compile time): leave out --weights", a->m.model);
    if (!info.has_weights && !a->weights)
        return lrc_err_set(err, "%s was compiled without weights: give them with --weights W", a->m.model);
    return a->weights && lrc_session_bind_weights_file(s, a->weights) ? cli_session_error(s, err) : LRC_OK;
}

int cli_session_open(const cli_args *a, lrc_session **s, lrc_err *err)
{
    int rc = cli_session_start(a, s, err);
    return rc ? rc : cli_session_weights(a, *s, err);
}

lrc_array *cli_session_arrays(const lrc_tensor_set *set)
{
    lrc_array *arr = lrc_xcalloc((size_t)set->n + 1, sizeof *arr);
    for (int i = 0; i < set->n; i++) {
        const lrc_tensor *t = set->items[i];
        static const lrc_elem elem[] = {[LRC_F32] = LRC_ELEM_F32, [LRC_BF16] = LRC_ELEM_BF16, [LRC_F16] = LRC_ELEM_F16,
                                        [LRC_I32] = LRC_ELEM_I32};
        arr[i].name = t->name;
        arr[i].elem = elem[t->dtype];
        arr[i].ndim = t->shape.ndim;
        for (int d = 0; d < t->shape.ndim; d++) arr[i].shape[d] = t->shape.dim[d];
        arr[i].data = t->data;
    }
    return arr;
}
