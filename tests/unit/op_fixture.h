/* op_fixture.h — what test_ops (ref) and test_cuda_ops (cuda) share about
 * the op fixtures of tests/fixtures/ops: the op and its attributes from a
 * fixture's metadata, and the relative error the results are judged by. */
#ifndef LRC_TEST_OP_FIXTURE_H
#define LRC_TEST_OP_FIXTURE_H

#include "ir/lrc_ir.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* Fills proto's op and attributes from the fixture's metadata by op-table
 * names, and opname; -1 when the metadata names no known op. */
static int op_fixture_read(const char *meta, lrc_node *proto, char *opname, size_t n)
{
    cJSON *m = cJSON_Parse(meta);
    const cJSON *op = cJSON_GetObjectItemCaseSensitive(m, "op");
    int rc = -1;
    if (cJSON_IsString(op) && !lrc_op_parse(op->valuestring, &proto->op)) {
        snprintf(opname, n, "%s", op->valuestring);
        const lrc_op_info *info = &lrc_op_table[proto->op];
        for (int a = 0; a < LRC_MAX_IATTR && info->iattr[a]; a++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, info->iattr[a]);
            if (cJSON_IsString(v)) proto->iattr[a] = strtoll(v->valuestring, NULL, 10);
        }
        for (int a = 0; a < LRC_MAX_FATTR && info->fattr[a]; a++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, info->fattr[a]);
            if (cJSON_IsString(v)) proto->fattr[a] = strtod(v->valuestring, NULL);
        }
        rc = 0;
    }
    cJSON_Delete(m);
    return rc;
}

/* ||got - want|| / ||want|| over n floats (against 1 when want is zero) */
static double op_fixture_rel_error(const float *got, const float *want, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
    }
    return sqrt(num) / (den > 0 ? sqrt(den) : 1);
}

#endif
