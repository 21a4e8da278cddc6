/* cuemu_blas.c — the cuBLAS calls the cuda executor makes, on the host:
 * cublasGemmEx and cublasLtMatmul (D = A B + C), column-major, f32 or bf16
 * operands and results, f32 accumulation in a fixed order. */
#include "cuemu.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STATUS_OK = 0, STATUS_INVALID_VALUE = 7, STATUS_EXECUTION_FAILED = 13, STATUS_NOT_SUPPORTED = 15 };
enum { OP_N = 0, OP_T = 1, R_32F = 0, R_16BF = 14, COMPUTE_32F = 68 };

static int handle_token;
static void *handle_stream; /* cublasSetStream's: the GEMMs' stream */
int cublasCreate_v2(void **h) { *h = &handle_token; return STATUS_OK; }
int cublasSetStream_v2(void *h, void *stream)
{
    if (h != &handle_token) return STATUS_INVALID_VALUE;
    handle_stream = stream;
    return STATUS_OK;
}

/* a cuemu_stream_use of a GEMM as cuBLAS's status: recorded, run now (0) or failed */
static int on_stream(void *stream, cuemu_replay_fn replay, const void *call, size_t size)
{
    int r = cuemu_stream_use(stream, replay, call, size);
    return r == CUEMU_CAPTURED ? 1 : r ? -1 : 0;
}
int cublasDestroy_v2(void *h) { return h == &handle_token ? STATUS_OK : STATUS_INVALID_VALUE; }

static float load(const void *p, int type, long i)
{
    if (type == R_32F) return ((const float *)p)[i];
    uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void store(void *p, int type, long i, float v)
{
    if (type == R_32F) {
        ((float *)p)[i] = v;
        return;
    }
    uint32_t u;
    memcpy(&u, &v, 4);
    ((uint16_t *)p)[i] = (u & 0x7fffffffu) > 0x7f800000u ? 0x7fc0 : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* D = alpha op(A) op(B) + beta C (+ bias[i] on row i when bias is not
 * NULL, stored as D is), column-major, f32 accumulation in a fixed order */
static void gemm(int ta, int tb, long m, long n, long k, float al, const void *A, int at, long lda, const void *B, int bt, long ldb,
                 float be, const void *C, int ct, long ldc, void *D, int dt, long ldd, const void *bias)
{
    for (long j = 0; j < n; j++)
        for (long i = 0; i < m; i++) {
            float acc = 0.f;
            for (long l = 0; l < k; l++) {
                float a = load(A, at, ta == OP_N ? i + l * lda : l + i * lda);
                float b = load(B, bt, tb == OP_N ? l + j * ldb : j + l * ldb);
                acc += a * b;
            }
            float c = al * acc;
            if (be != 0.f) c += be * load(C, ct, i + j * ldc);
            if (bias) c += load(bias, dt, i);
            store(D, dt, i + j * ldd, c);
        }
}

static void trace(const char *what, int ta, int tb, long m, long n, long k, const void *A, const void *B, const void *C, int at, int bt,
                  int ct)
{
    if (!getenv("LRC_CUEMU_TRACE")) return;
    const unsigned char *qa = A, *qb = B;
    int ba = 1, bb = 1;
    for (int q = 0; q < 4; q++) ba &= qa[q] == 0x5A, bb &= qb[q] == 0x5A;
    fprintf(stderr, "%s %c%c m %ld n %ld k %ld A %p%s B %p%s C %p types %d %d %d\n", what, ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, A,
            ba ? "(5A)" : "", B, bb ? "(5A)" : "", C, at, bt, ct);
}

typedef struct {
    int ta, tb, m, n, k, at, lda, bt, ldb, ct, ldc;
    float alpha, beta; /* read at the call, as cuBLAS reads host scalars */
    const void *A, *B;
    void *C;
} gemm_call;

static int gemm_now(void *p)
{
    const gemm_call *g = p;
    trace("gemm", g->ta, g->tb, g->m, g->n, g->k, g->A, g->B, g->C, g->at, g->bt, g->ct);
    gemm(g->ta, g->tb, g->m, g->n, g->k, g->alpha, g->A, g->at, g->lda, g->B, g->bt, g->ldb, g->beta, g->C, g->ct, g->ldc, g->C, g->ct,
         g->ldc, NULL);
    return cuemu_check_guards("a cublasGemmEx") ? STATUS_EXECUTION_FAILED : STATUS_OK;
}

int cublasGemmEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha, const void *A, int at, int lda, const void *B,
                 int bt, int ldb, const void *beta, void *C, int ct, int ldc, int compute, int algo)
{
    (void)algo;
    if (h != &handle_token || compute != COMPUTE_32F || (ta != OP_N && ta != OP_T) || (tb != OP_N && tb != OP_T) || m < 0 || n < 0 ||
        k < 0 || lda < (ta == OP_N ? m : k) || ldb < (tb == OP_N ? k : n) || ldc < m)
        return STATUS_INVALID_VALUE;
    for (int t = 0; t < 3; t++) {
        int type = t == 0 ? at : t == 1 ? bt : ct;
        if (type != R_32F && type != R_16BF) return STATUS_INVALID_VALUE;
    }
    gemm_call g = {ta, tb, m, n, k, at, lda, bt, ldb, ct, ldc, *(const float *)alpha, *(const float *)beta, A, B, C};
    int r = on_stream(handle_stream, gemm_now, &g, sizeof g);
    return r > 0 ? STATUS_OK : r < 0 ? STATUS_EXECUTION_FAILED : gemm_now(&g);
}

/* ---- cuBLASLt: cublasLtMatmul with its descriptors (the epilogues the
 * executor asks for: beta C, and a bias on every row) --------------------- */

enum { LT_DESC_TRANSA = 3, LT_DESC_TRANSB = 4, LT_DESC_EPILOGUE = 7, LT_DESC_BIAS_POINTER = 8, LT_PREF_MAX_WORKSPACE = 1,
       LT_PREF_MIN_ALIGNMENT_A = 5, LT_PREF_MIN_ALIGNMENT_D = 8 };
enum { LT_EPILOGUE_DEFAULT = 1, LT_EPILOGUE_BIAS = 4 };
typedef struct {
    int compute, scale, ta, tb;
    uint32_t epilogue;
    const void *bias;
} lt_desc;
typedef struct {
    int type;
    uint64_t rows, cols;
    int64_t ld;
} lt_layout;

static int lt_token;
int cublasLtCreate(void **h) { *h = &lt_token; return STATUS_OK; }
int cublasLtDestroy(void *h) { return h == &lt_token ? STATUS_OK : STATUS_INVALID_VALUE; }

int cublasLtMatmulDescCreate(void **out, int compute, int scale)
{
    if (compute != COMPUTE_32F || scale != R_32F) return STATUS_INVALID_VALUE;
    lt_desc *d = calloc(1, sizeof *d);
    d->compute = compute, d->scale = scale, d->epilogue = LT_EPILOGUE_DEFAULT;
    *out = d;
    return STATUS_OK;
}
int cublasLtMatmulDescDestroy(void *d) { free(d); return STATUS_OK; }
int cublasLtMatmulDescSetAttribute(void *desc, int attr, const void *buf, size_t size)
{
    lt_desc *d = desc;
    if (attr == LT_DESC_EPILOGUE) {
        uint32_t e;
        if (size != sizeof e) return STATUS_INVALID_VALUE;
        memcpy(&e, buf, sizeof e);
        if (e != LT_EPILOGUE_DEFAULT && e != LT_EPILOGUE_BIAS) return STATUS_NOT_SUPPORTED; /* none other here */
        d->epilogue = e;
        return STATUS_OK;
    }
    if (attr == LT_DESC_BIAS_POINTER) {
        if (size != sizeof d->bias) return STATUS_INVALID_VALUE;
        memcpy(&d->bias, buf, sizeof d->bias);
        return STATUS_OK;
    }
    if ((attr != LT_DESC_TRANSA && attr != LT_DESC_TRANSB) || size != sizeof(int)) return STATUS_INVALID_VALUE;
    int v;
    memcpy(&v, buf, sizeof v);
    if (v != OP_N && v != OP_T) return STATUS_INVALID_VALUE;
    *(attr == LT_DESC_TRANSA ? &d->ta : &d->tb) = v;
    return STATUS_OK;
}

int cublasLtMatrixLayoutCreate(void **out, int type, uint64_t rows, uint64_t cols, int64_t ld)
{
    if ((type != R_32F && type != R_16BF) || ld < (int64_t)rows || ld < 1) return STATUS_INVALID_VALUE;
    lt_layout *l = malloc(sizeof *l);
    *l = (lt_layout){type, rows, cols, ld};
    *out = l;
    return STATUS_OK;
}
int cublasLtMatrixLayoutDestroy(void *l) { free(l); return STATUS_OK; }

/* a preference: the least alignment of A, B, C and D the caller promises,
 * 256 bytes each unless set, as in cuBLASLt */
typedef struct {
    uint32_t align[4];
} lt_pref;
int cublasLtMatmulPreferenceCreate(void **p)
{
    lt_pref *q = malloc(sizeof *q);
    *q = (lt_pref){{256, 256, 256, 256}};
    *p = q;
    return STATUS_OK;
}
int cublasLtMatmulPreferenceDestroy(void *p) { free(p); return STATUS_OK; }
int cublasLtMatmulPreferenceSetAttribute(void *p, int attr, const void *buf, size_t size)
{
    if (attr == LT_PREF_MAX_WORKSPACE) return size == 8 ? STATUS_OK : STATUS_INVALID_VALUE;
    if (attr < LT_PREF_MIN_ALIGNMENT_A || attr > LT_PREF_MIN_ALIGNMENT_D || size != 4) return STATUS_INVALID_VALUE;
    memcpy(&((lt_pref *)p)->align[attr - LT_PREF_MIN_ALIGNMENT_A], buf, 4);
    return STATUS_OK;
}

/* m of D = op(A) op(B) + C as the layouts give it (and *n, *k), or -1 when they disagree */
static long lt_dims(const lt_desc *d, const lt_layout *a, const lt_layout *b, const lt_layout *c, const lt_layout *dd, long *n, long *k)
{
    long m = (long)(d->ta == OP_N ? a->rows : a->cols);
    *k = (long)(d->ta == OP_N ? a->cols : a->rows);
    *n = (long)(d->tb == OP_N ? b->cols : b->rows);
    long kb = (long)(d->tb == OP_N ? b->rows : b->cols);
    if (kb != *k || (long)c->rows != m || (long)c->cols != *n || (long)dd->rows != m || (long)dd->cols != *n || c->type != dd->type)
        return -1;
    return m;
}

int cublasLtMatmulAlgoGetHeuristic(void *h, void *desc, void *A, void *B, void *C, void *D, void *pref, int want, void *results,
                                   int *count)
{
    long n, k;
    if (h != &lt_token || !pref || want < 1 || lt_dims(desc, A, B, C, D, &n, &k) < 0) return STATUS_INVALID_VALUE;
    /* cublasLtMatmulHeuristicResult_t: the algorithm (64 bytes), workspace size, state, waves, reserved;
     * the algorithm remembers the alignments it was chosen for, as a real one needs them */
    memset(results, 0, 96);
    memcpy(results, ((const lt_pref *)pref)->align, sizeof ((lt_pref *)pref)->align);
    /* LRC_CUEMU_LT_NONE=1: no algorithm for any layout, as cuBLASLt says for some */
    const char *none = getenv("LRC_CUEMU_LT_NONE");
    *count = none && *none == '1' ? 0 : 1;
    return *count ? STATUS_OK : STATUS_NOT_SUPPORTED;
}

typedef struct {
    lt_desc d; /* the descriptors as they were at the call */
    lt_layout a, b, c, dd;
    long m, n, k;
    float alpha, beta;
    const void *A, *B, *C;
    void *D;
} lt_call;

static int lt_now(void *p)
{
    const lt_call *c = p;
    trace("ltmatmul", c->d.ta, c->d.tb, c->m, c->n, c->k, c->A, c->B, c->C, c->a.type, c->b.type, c->c.type);
    gemm(c->d.ta, c->d.tb, c->m, c->n, c->k, c->alpha, c->A, c->a.type, (long)c->a.ld, c->B, c->b.type, (long)c->b.ld, c->beta, c->C,
         c->c.type, (long)c->c.ld, c->D, c->dd.type, (long)c->dd.ld, c->d.epilogue == LT_EPILOGUE_BIAS ? c->d.bias : NULL);
    return cuemu_check_guards("a cublasLtMatmul") ? STATUS_EXECUTION_FAILED : STATUS_OK;
}

int cublasLtMatmul(void *h, void *desc, const void *alpha, const void *A, void *Ad, const void *B, void *Bd, const void *beta,
                   const void *C, void *Cd, void *D, void *Dd, const void *algo, void *ws, size_t ws_bytes, void *stream)
{
    (void)ws, (void)ws_bytes;
    const lt_desc *d = desc;
    const lt_layout *a = Ad, *b = Bd, *c = Cd, *dd = Dd;
    long n, k, m = lt_dims(d, a, b, c, dd, &n, &k);
    if (h != &lt_token || m < 0 || a->type != b->type || (d->epilogue == LT_EPILOGUE_BIAS && !d->bias))
        return STATUS_INVALID_VALUE;
    /* LRC_CUEMU_LT_REFUSE=1: every matmul refused before it runs, as cuBLASLt
     * may refuse an algorithm its heuristic offered */
    const char *refuse = getenv("LRC_CUEMU_LT_REFUSE");
    if (refuse && *refuse == '1') return STATUS_NOT_SUPPORTED;
    /* an operand less aligned than the algorithm was chosen for: on a GPU a
     * misaligned-address fault, here the failure of the launch */
    uint32_t align[4];
    memcpy(align, algo, sizeof align);
    const void *ptrs[4] = {A, B, C, D};
    for (int i = 0; i < 4; i++)
        if ((uintptr_t)ptrs[i] % align[i]) {
            fprintf(stderr, "cuemu: cublasLtMatmul: operand %c at %p is not %u-byte aligned, as the algorithm's preference promised\n",
                    "ABCD"[i], ptrs[i], align[i]);
            return STATUS_EXECUTION_FAILED;
        }
    lt_call call = {*d, *a, *b, *c, *dd, m, n, k, *(const float *)alpha, *(const float *)beta, A, B, C, D};
    int r = on_stream(stream, lt_now, &call, sizeof call);
    return r > 0 ? STATUS_OK : r < 0 ? STATUS_EXECUTION_FAILED : lt_now(&call);
}
