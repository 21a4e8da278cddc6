/* test_dist — runtime/dist.c under `mpirun -np 2` (tests/cli/train_dist.sh
 * runs it): the bucketed sum of tensors of every size class (small ones
 * packed into one bucket and past its end, a large one in place over
 * several calls) gives every rank the exact sums, the scalar sums and max,
 * rank 0's bytes by broadcast, and lrc_dist_agree naming the rank whose
 * value differs (what the weights' checksum and the option checks rest on).
 * Each rank prints its own "N passed, M failed" line. */
#include "check.h"
#include "runtime/lrc_runtime.h"

#include <stdlib.h>
#include <string.h>

/* an element's value on a rank: small integers, so that every sum is exact */
static float value(int rank, int t, int64_t k) { return (float)((rank + 1) * ((t * 7 + k) % 13)); }

int main(void)
{
    lrc_err err;
    lrc_dist *d = NULL;
    if (lrc_dist_open(&d, &err) || !d) {
        printf("not under mpirun, or MPI did not start: %s\n", d ? "" : err.msg);
        return 1;
    }
    int rank = lrc_dist_rank(d), size = lrc_dist_size(d);
    CHECK(size == 2, "2 ranks expected, %d", size);
    /* sizes: small ones that fill the 1 Mi-element bucket past its end, a
     * large one (summed in place, in two calls), and small ones after it */
    const int64_t sizes[] = {1, 3, 300000, 300000, 300000, 300000, 5, 2500000, 7, 1};
    enum { N = sizeof sizes / sizeof *sizes };
    lrc_tensor *t[N];
    for (int i = 0; i < N; i++) {
        lrc_shape s = {1, {sizes[i]}};
        t[i] = lrc_tensor_new("g", LRC_F32, &s, &err);
        for (int64_t k = 0; k < sizes[i]; k++) ((float *)t[i]->data)[k] = value(rank, i, k);
    }
    CHECK(!lrc_dist_sum_tensors(d, t, N, &err), "sum_tensors: %s", err.msg);
    int64_t wrong = 0;
    for (int i = 0; i < N; i++)
        for (int64_t k = 0; k < sizes[i]; k++) wrong += ((float *)t[i]->data)[k] != value(0, i, k) + value(1, i, k);
    CHECK(wrong == 0, "%lld elements of the summed tensors are wrong", (long long)wrong);
    CHECK(lrc_dist_comm_s(d) > 0, "the all-reduce's time is counted");
    double x[2] = {rank + 0.5, 1};
    int m[1] = {rank * 10};
    CHECK(!lrc_dist_sum_f64(d, x, 2, &err) && x[0] == 2 && x[1] == 2, "sum_f64: %g %g", x[0], x[1]);
    CHECK(!lrc_dist_max_int(d, m, 1, &err) && m[0] == 10, "max_int: %d", m[0]);
    char buf[16];
    snprintf(buf, sizeof buf, "rank %d", rank);
    CHECK(!lrc_dist_bcast(d, buf, sizeof buf, &err) && !strcmp(buf, "rank 0"), "bcast: %s", buf);
    int differ = 0;
    CHECK(!lrc_dist_agree(d, 42, &differ, &err) && differ == -1, "agree on equal values: %d", differ);
    CHECK(!lrc_dist_agree(d, rank ? 43 : 42, &differ, &err) && differ == 1, "agree names rank 1: %d", differ);
    for (int i = 0; i < N; i++) lrc_tensor_free(t[i]);
    lrc_dist_close(d, true);
    printf("rank %d: ", rank);
    return check_summary();
}
