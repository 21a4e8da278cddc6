/* package_launches.c — part of the package module: a cpu package's plan
 * checked, launch by launch, against the launch table its kernels.so holds
 * (lrc_launch_table.h), before anything runs. A kernel indexes its buffers
 * by what it was compiled for; a package.json whose launch runs more items,
 * or hands a kernel other buffers (shifted, rotated, resized), would read
 * and write out of bounds or silently compute something else. */
#include "../ir/lrc_launch_table.h"
#include "lrc_runtime.h"

#include <stdlib.h>

/* The storage a kernel sees for plan buffer b. */
static int64_t storage_of(const lrc_plan_buf *b)
{
    if (b->kind == LRC_BUF_PERSIST || b->packed[0]) return LRC_LT_RAW;
    return b->dtype == LRC_I32 ? LRC_LT_I32 : b->dtype == LRC_F32 ? LRC_LT_F32 : 0;
}

/* Whether record r (words at w) is a pack launch that `lrc compile` ran
 * and removed (frontend/compile/pack.c): a preparation kernel one of whose buffers
 * is now a parameter packed at compile time. */
static bool packed_away(const lrc_plan *p, const int64_t *w)
{
    if (!(w[2] & LRC_LT_ONCE)) return false;
    for (int64_t a = 0; a < w[4]; a++) {
        int64_t b = w[LRC_LT_RECORD + 3 * a];
        if (b >= 0 && b < p->n_bufs && p->bufs[b].packed[0]) return true;
    }
    return false;
}

/* Launch li against record w; map[r] is the launch of record r (or -1). */
static int check_launch(const lrc_plan *p, int li, const int64_t *w, const int *map, int64_t n_records, const char *where,
                        lrc_err *err)
{
    const lrc_plan_launch *l = &p->launches[li];
    const char *sym = l->loop_to >= 0 ? "a loop's back edge" : l->symbol;
    int64_t hash = l->loop_to >= 0 ? 0 : lrc_launch_table_hash(l->symbol);
    int64_t flags = (l->once ? LRC_LT_ONCE : 0) | (l->steal ? LRC_LT_STEAL : 0);
    if (hash != w[0])
        return lrc_err_set(err, "%s: launch %d: symbol '%s' is not the kernel compiled for this launch (a damaged package?)", where, li, sym);
    if (l->n_items != w[1])
        return lrc_err_set(err, "%s: launch %d (%s): items = %lld, the kernel was compiled for %lld (a damaged package?)", where, li, sym,
                           (long long)l->n_items, (long long)w[1]);
    if (flags != w[2])
        return lrc_err_set(err, "%s: launch %d (%s): once = %s, steal = %s, the kernel was compiled for once = %s, steal = %s (a damaged package?)",
                           where, li, sym, l->once ? "true" : "false", l->steal ? "true" : "false", (w[2] & LRC_LT_ONCE) ? "true" : "false",
                           (w[2] & LRC_LT_STEAL) ? "true" : "false");
    int64_t to = w[3] >= 0 && w[3] < n_records ? map[w[3]] : -1;
    if ((l->loop_to >= 0 || w[3] >= 0) && l->loop_to != to)
        return lrc_err_set(err, "%s: launch %d (%s): loop_to = %d, the kernels were compiled for %lld (a damaged package?)", where, li, sym,
                           l->loop_to, (long long)to);
    if (l->n_args != w[4])
        return lrc_err_set(err, "%s: launch %d (%s): args has %d buffers, the kernel was compiled for %lld (a damaged package?)", where, li, sym,
                           l->n_args, (long long)w[4]);
    for (int a = 0; a < l->n_args; a++) {
        const int64_t *t = &w[LRC_LT_RECORD + 3 * a];
        const lrc_plan_buf *b = &p->bufs[l->args[a]];
        if (l->args[a] != t[0])
            return lrc_err_set(err, "%s: launch %d (%s): args[%d] = buffer %d, the kernel was compiled for buffer %lld (a damaged package?)", where,
                               li, sym, a, l->args[a], (long long)t[0]);
        if (b->bytes != t[1] || storage_of(b) != t[2])
            return lrc_err_set(err, "%s: launch %d (%s): args[%d], buffer %d, has %lld bytes of %s, the kernel was compiled for %lld bytes of %s "
                               "(a damaged package?)", where, li, sym, a, l->args[a], (long long)b->bytes,
                               lrc_launch_table_storage_name(storage_of(b)), (long long)t[1], lrc_launch_table_storage_name(t[2]));
    }
    return LRC_OK;
}

int lrc_package_check_launches(const lrc_plan *p, const void *table, const char *where, lrc_err *err)
{
    const int64_t *w = table;
    if (!w) return lrc_err_set(err, "%s: the kernels carry no launch table (" LRC_LAUNCH_TABLE_SYMBOL "): compile the model again", where);
    if (w[0] != LRC_LAUNCH_TABLE_MAGIC || w[1] < LRC_LT_HEADER || w[2] < 0 || w[2] > w[1])
        return lrc_err_set(err, "%s: the kernels' launch table is of another lrc or damaged: compile the model again", where);
    int64_t total = w[1], n_records = w[2], pos = LRC_LT_HEADER;
    int *map = lrc_malloc((size_t)n_records * sizeof(int) + 1);
    if (!map) return lrc_err_nomem(err, "checking the %lld launches of the kernels' launch table (%s)", (long long)n_records, where);
    int li = 0, rc = LRC_OK;
    for (int64_t r = 0; r < n_records && !rc; r++) {
        const int64_t *rec = &w[pos];
        if (pos + LRC_LT_RECORD > total || rec[4] < 0 || rec[4] > (total - pos - LRC_LT_RECORD) / 3) {
            rc = lrc_err_set(err, "%s: the kernels' launch table is damaged at record %lld: compile the model again", where, (long long)r);
            break;
        }
        pos += LRC_LT_RECORD + 3 * rec[4];
        map[r] = -1;
        if (packed_away(p, rec)) continue;
        if (li == p->n_launches) {
            rc = lrc_err_set(err, "%s: launches has %d entries, the kernels were compiled for more (a damaged package?)", where, p->n_launches);
            break;
        }
        map[r] = li;
        rc = check_launch(p, li++, rec, map, n_records, where, err);
    }
    if (!rc && li < p->n_launches)
        rc = lrc_err_set(err, "%s: launch %d: not a launch the kernels were compiled for (launches has %d entries, %d expected; a damaged package?)",
                         where, li, p->n_launches, li);
    free(map);
    return rc;
}
