/* cuemu_blas.c — the cuBLAS calls the cuda executor makes, on the host:
 * cublasGemmEx, column-major, f32 or bf16 operands and results, f32
 * accumulation in a fixed order. */
#include "cuemu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { STATUS_OK = 0, STATUS_INVALID_VALUE = 7, STATUS_EXECUTION_FAILED = 13 };
enum { OP_N = 0, OP_T = 1, R_32F = 0, R_16BF = 14, COMPUTE_32F = 68 };

static int handle_token;
int cublasCreate_v2(void **h) { *h = &handle_token; return STATUS_OK; }
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
    if (getenv("LRC_CUEMU_TRACE")) {
        const unsigned char *qa = A, *qb = B;
        int ba = 1, bb = 1;
        for (int q = 0; q < 4; q++) ba &= qa[q] == 0x5A, bb &= qb[q] == 0x5A;
        fprintf(stderr, "gemm %c%c m %d n %d k %d A %p%s B %p%s C %p types %d %d %d\n", ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, A, ba ? "(5A)" : "", B,
                bb ? "(5A)" : "", C, at, bt, ct);
    }
    const float al = *(const float *)alpha, be = *(const float *)beta;
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
            store(C, ct, i + j * ldc, c);
        }
    return cuemu_check_guards("a cublasGemmEx") ? STATUS_EXECUTION_FAILED : STATUS_OK;
}
