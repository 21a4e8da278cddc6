/* dist.c — the ranks of a data-parallel run over MPI (docs/distributed.md).
 * libmpi is loaded with dlopen, and only when an MPI launcher started the
 * process, so that lrc builds, packages and runs without MPI; one process
 * without mpirun never touches it. The handles are Open MPI's (its ABI:
 * MPI_Comm and friends are pointers to its predefined objects, found by
 * dlsym), which Debian's openmpi-bin provides. */
#include "lrc_runtime.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#define LRC_MPI_LIB "libmpi.so.40" /* Open MPI 3 to 5 */
enum { MPI_THREAD_FUNNELED_ = 1 };  /* Open MPI's value: only the main thread calls MPI */
#define MPI_IN_PLACE_ ((void *)1)   /* Open MPI's */
/* a bucket: the elements one MPI_Allreduce sums (small tensors are packed
 * into one); large enough that the call's latency is small beside its bytes */
enum { LRC_DIST_BUCKET = 1 << 20 };

typedef void *mpi_handle;
struct lrc_dist {
    void *lib;
    int rank, size;
    mpi_handle comm, f32, f64, i32, byte, sum, max;
    int (*allreduce)(const void *, void *, int, mpi_handle, mpi_handle, mpi_handle);
    int (*bcast)(void *, int, mpi_handle, int, mpi_handle);
    int (*send)(const void *, int, mpi_handle, int, int, mpi_handle);
    int (*recv)(void *, int, mpi_handle, int, int, mpi_handle, void *);
    int (*finalize)(void);
    float *bucket; /* LRC_DIST_BUCKET floats, for the packed small tensors */
    double comm_s; /* seconds in the gradients' all-reduce, summed */
};

const char *lrc_dist_launcher(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK"};
    for (int i = 0; i < 2; i++)
        if (getenv(vars[i])) return vars[i];
    return NULL;
}

static void *sym(lrc_dist *d, const char *name, const char **missing)
{
    void *p = dlsym(d->lib, name);
    if (!p && !*missing) *missing = name;
    return p;
}

int lrc_dist_open(lrc_dist **out, lrc_err *err)
{
    *out = NULL;
    const char *by = lrc_dist_launcher();
    if (!by) return LRC_OK;
    const char *name = getenv("LRC_MPI_LIB") ? getenv("LRC_MPI_LIB") : LRC_MPI_LIB;
    /* global: Open MPI's components, loaded by libmpi, resolve its symbols */
    void *lib = dlopen(name, RTLD_NOW | RTLD_GLOBAL);
    if (!lib)
        return lrc_err_set(err, "an MPI launcher started this process (%s is set) but %s cannot be loaded (%s): install Open MPI "
                                "(Debian: openmpi-bin) or set LRC_MPI_LIB",
                           by, name, dlerror());
    lrc_dist *d = lrc_calloc(1, sizeof *d);
    if (!d) {
        dlclose(lib);
        return lrc_err_nomem(err, "for the MPI ranks");
    }
    d->lib = lib;
    const char *missing = NULL;
    int (*init_thread)(int *, char ***, int, int *) = (int (*)(int *, char ***, int, int *))sym(d, "MPI_Init_thread", &missing);
    int (*comm_rank)(mpi_handle, int *) = (int (*)(mpi_handle, int *))sym(d, "MPI_Comm_rank", &missing);
    int (*comm_size)(mpi_handle, int *) = (int (*)(mpi_handle, int *))sym(d, "MPI_Comm_size", &missing);
    d->allreduce = (int (*)(const void *, void *, int, mpi_handle, mpi_handle, mpi_handle))sym(d, "MPI_Allreduce", &missing);
    d->bcast = (int (*)(void *, int, mpi_handle, int, mpi_handle))sym(d, "MPI_Bcast", &missing);
    d->send = (int (*)(const void *, int, mpi_handle, int, int, mpi_handle))sym(d, "MPI_Send", &missing);
    d->recv = (int (*)(void *, int, mpi_handle, int, int, mpi_handle, void *))sym(d, "MPI_Recv", &missing);
    d->finalize = (int (*)(void))sym(d, "MPI_Finalize", &missing);
    d->comm = sym(d, "ompi_mpi_comm_world", &missing);
    d->f32 = sym(d, "ompi_mpi_float", &missing);
    d->f64 = sym(d, "ompi_mpi_double", &missing);
    d->i32 = sym(d, "ompi_mpi_int", &missing);
    d->byte = sym(d, "ompi_mpi_byte", &missing);
    d->sum = sym(d, "ompi_mpi_op_sum", &missing);
    d->max = sym(d, "ompi_mpi_op_max", &missing);
    int provided = 0, rc = LRC_OK;
    if (missing) rc = lrc_err_set(err, "%s: no %s, so not Open MPI's libmpi (set LRC_MPI_LIB to Open MPI's)", name, missing);
    else if (init_thread(NULL, NULL, MPI_THREAD_FUNNELED_, &provided) || comm_rank(d->comm, &d->rank) || comm_size(d->comm, &d->size))
        rc = lrc_err_set(err, "%s: MPI_Init_thread failed", name);
    else if (provided < MPI_THREAD_FUNNELED_)
        rc = lrc_err_set(err, "%s: MPI gives thread level %d, lrc's thread pool needs MPI_THREAD_FUNNELED", name, provided);
    else if (!(d->bucket = lrc_calloc(LRC_DIST_BUCKET, sizeof *d->bucket)))
        rc = lrc_err_nomem(err, "for the all-reduce's bucket");
    if (rc) {
        free(d->bucket);
        free(d); /* libmpi stays loaded: it may have started threads */
        return rc;
    }
    *out = d;
    return LRC_OK;
}

int lrc_dist_rank(const lrc_dist *d) { return d ? d->rank : 0; }
int lrc_dist_size(const lrc_dist *d) { return d ? d->size : 1; }
double lrc_dist_comm_s(const lrc_dist *d) { return d ? d->comm_s : 0; }

static int allreduce(lrc_dist *d, void *x, size_t n, mpi_handle type, mpi_handle op, lrc_err *err)
{
    if (n > 0x7fffffff) return lrc_err_set(err, "MPI_Allreduce of %zu elements: more than an int counts", n);
    if (d->allreduce(MPI_IN_PLACE_, x, (int)n, type, op, d->comm)) return lrc_err_set(err, "MPI_Allreduce failed");
    return LRC_OK;
}

int lrc_dist_sum_f64(lrc_dist *d, double *x, int n, lrc_err *err) { return allreduce(d, x, (size_t)n, d->f64, d->sum, err); }
int lrc_dist_max_int(lrc_dist *d, int *x, int n, lrc_err *err) { return allreduce(d, x, (size_t)n, d->i32, d->max, err); }

int lrc_dist_sum_f32(lrc_dist *d, float *x, size_t n, lrc_err *err)
{
    for (size_t at = 0; at < n; at += LRC_DIST_BUCKET) {
        size_t k = n - at < LRC_DIST_BUCKET ? n - at : LRC_DIST_BUCKET;
        if (allreduce(d, x + at, k, d->f32, d->sum, err)) return LRC_EUSER;
    }
    return LRC_OK;
}

/* Tensors larger than half a bucket are summed in place; runs of smaller
 * ones are packed into the bucket, so that a model's many gains and biases
 * cost a few calls, not one each. */
int lrc_dist_sum_tensors(lrc_dist *d, lrc_tensor *const *t, int n, lrc_err *err)
{
    double t0 = lrc_now_s();
    int rc = LRC_OK;
    for (int i = 0; i < n && !rc;) {
        size_t count = t[i]->nbytes / sizeof(float);
        if (count > LRC_DIST_BUCKET / 2) {
            rc = lrc_dist_sum_f32(d, t[i++]->data, count, err);
            continue;
        }
        int j = i;
        size_t used = 0;
        for (; j < n && t[j]->nbytes / sizeof(float) <= LRC_DIST_BUCKET - used && t[j]->nbytes / sizeof(float) <= LRC_DIST_BUCKET / 2; j++) {
            memcpy(d->bucket + used, t[j]->data, t[j]->nbytes);
            used += t[j]->nbytes / sizeof(float);
        }
        rc = lrc_dist_sum_f32(d, d->bucket, used, err);
        for (used = 0; i < j; i++) {
            memcpy(t[i]->data, d->bucket + used, t[i]->nbytes);
            used += t[i]->nbytes / sizeof(float);
        }
    }
    d->comm_s += lrc_now_s() - t0;
    return rc;
}

int lrc_dist_bcast(lrc_dist *d, void *buf, size_t bytes, lrc_err *err)
{
    for (size_t at = 0; at < bytes; at += 1u << 30) {
        size_t k = bytes - at < (1u << 30) ? bytes - at : (1u << 30);
        if (d->bcast((char *)buf + at, (int)k, d->byte, 0, d->comm)) return lrc_err_set(err, "MPI_Bcast failed");
    }
    return LRC_OK;
}

/* A rank's floats to every rank (bcast), or from one rank to another:
 * in calls of at most 2^30 elements, which an int counts */
enum { CHUNK = 1 << 30 };

int lrc_dist_bcast_f32(lrc_dist *d, float *x, size_t n, int root, lrc_err *err)
{
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t k = n - at < CHUNK ? n - at : CHUNK;
        if (d->bcast(x + at, (int)k, d->f32, root, d->comm)) return lrc_err_set(err, "MPI_Bcast from rank %d failed", root);
    }
    return LRC_OK;
}

int lrc_dist_send_f32(lrc_dist *d, const float *x, size_t n, int to, lrc_err *err)
{
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t k = n - at < CHUNK ? n - at : CHUNK;
        if (d->send(x + at, (int)k, d->f32, to, 0, d->comm)) return lrc_err_set(err, "MPI_Send to rank %d failed", to);
    }
    return LRC_OK;
}

int lrc_dist_recv_f32(lrc_dist *d, float *x, size_t n, int from, lrc_err *err)
{
    for (size_t at = 0; at < n; at += CHUNK) { /* MPI_STATUS_IGNORE: Open MPI's is NULL */
        size_t k = n - at < CHUNK ? n - at : CHUNK;
        if (d->recv(x + at, (int)k, d->f32, from, 0, d->comm, NULL)) return lrc_err_set(err, "MPI_Recv from rank %d failed", from);
    }
    return LRC_OK;
}

int lrc_dist_agree(lrc_dist *d, uint64_t h, int *differ, lrc_err *err)
{
    uint64_t h0 = h;
    int mine = 0;
    if (lrc_dist_bcast(d, &h0, sizeof h0, err)) return LRC_EUSER;
    mine = h0 != h ? d->rank : -1;
    *differ = mine;
    return lrc_dist_max_int(d, differ, 1, err);
}

void lrc_dist_close(lrc_dist *d, bool finalize)
{
    if (!d) return;
    /* after an error the other ranks may wait in a collective, which
     * MPI_Finalize would join: the process exits, and mpirun ends them */
    if (finalize) d->finalize();
    free(d->bucket);
    free(d);
}
