/* cuda_exec.c — runs a cuda package on device 0: its cubin (or, on a newer
 * GPU, its PTX) loaded with the driver API, buffers in device memory in the
 * storage the renderer chose (bf16 or f32; ids i32), cuBLAS for the GEMMs,
 * one stream, launches in plan order. The driver and cuBLAS are loaded with
 * dlopen, so nothing here is linked against CUDA. */
#include "cuda_internal.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int lrc_cuda_fail(const lrc_cuda_exec *x, int r, const char *what, lrc_err *err)
{
    const char *name = "?";
    if (x->api.error_name) x->api.error_name(r, &name);
    return lrc_err_set(err, "cuda: %s failed: %s", what, name);
}

static int load_api(cuda_api *a, lrc_err *err)
{
    a->lib = dlopen(LRC_CUDA_DRIVER_LIB, RTLD_NOW | RTLD_LOCAL);
    if (!a->lib) return lrc_err_set(err, "cuda: no NVIDIA driver (" LRC_CUDA_DRIVER_LIB " not found)");
    a->blas = lrc_cuda_open_cublas();
    if (!a->blas) return lrc_err_set(err, "cuda: cuBLAS not found (libcublas.so)");
#define SYM(lib, field, name) \
    if (!(*(void **)&a->field = dlsym(a->lib, name))) return lrc_err_set(err, "cuda: %s lacks %s", #lib, name);
    SYM(lib, init, "cuInit");
    SYM(lib, device_get, "cuDeviceGet");
    SYM(lib, ctx_retain, "cuDevicePrimaryCtxRetain");
    SYM(lib, ctx_set, "cuCtxSetCurrent");
    SYM(lib, ctx_release, "cuDevicePrimaryCtxRelease_v2");
    SYM(lib, module_load, "cuModuleLoadData");
    SYM(lib, module_unload, "cuModuleUnload");
    SYM(lib, get_function, "cuModuleGetFunction");
    SYM(lib, mem_alloc, "cuMemAlloc_v2");
    SYM(lib, mem_free, "cuMemFree_v2");
    SYM(lib, htod, "cuMemcpyHtoD_v2");
    SYM(lib, dtoh, "cuMemcpyDtoH_v2");
    SYM(lib, dtod, "cuMemcpyDtoD_v2");
    SYM(lib, memset8, "cuMemsetD8_v2");
    SYM(lib, launch, "cuLaunchKernel");
    SYM(lib, sync, "cuCtxSynchronize");
    SYM(lib, error_name, "cuGetErrorName");
    SYM(lib, event_create, "cuEventCreate");
    SYM(lib, event_record, "cuEventRecord");
    SYM(lib, event_sync, "cuEventSynchronize");
    SYM(lib, event_elapsed, "cuEventElapsedTime");
    SYM(lib, event_destroy, "cuEventDestroy_v2");
#undef SYM
    /* CUDA graphs are an optimization: without a symbol, launch by launch */
    a->has_graph = true;
#define SYM(lib, field, name) \
    if (a->has_graph && !(*(void **)&a->field = dlsym(a->lib, name))) a->has_graph = false;
    SYM(lib, stream_create, "cuStreamCreate");
    SYM(lib, stream_destroy, "cuStreamDestroy_v2");
    SYM(lib, begin_capture, "cuStreamBeginCapture_v2");
    SYM(lib, end_capture, "cuStreamEndCapture");
    SYM(lib, graph_instantiate, "cuGraphInstantiateWithFlags");
    SYM(lib, graph_launch, "cuGraphLaunch");
    SYM(lib, graph_exec_destroy, "cuGraphExecDestroy");
    SYM(lib, graph_destroy, "cuGraphDestroy");
    SYM(lib, dtod_async, "cuMemcpyDtoDAsync_v2");
    SYM(blas, blas_set_stream, "cublasSetStream_v2");
#undef SYM
#define SYM(field, name) \
    if (!(*(void **)&a->field = dlsym(a->blas, name))) return lrc_err_set(err, "cuda: cuBLAS lacks %s", name);
    SYM(blas_create, "cublasCreate_v2");
    SYM(blas_destroy, "cublasDestroy_v2");
    SYM(gemm_ex, "cublasGemmEx");
#undef SYM
    /* cuBLASLt through cuBLAS's handle: cuBLAS depends on the cuBLASLt of
     * its own version, so the two always match; where a symbol is missing,
     * every residual GEMM runs through cublasGemmEx instead */
    a->has_lt = true;
#define SYM(field, name) \
    if (a->has_lt && !(*(void **)&a->field = dlsym(a->blas, name))) a->has_lt = false;
    SYM(lt_create, "cublasLtCreate");
    SYM(lt_destroy, "cublasLtDestroy");
    SYM(lt_desc_create, "cublasLtMatmulDescCreate");
    SYM(lt_desc_destroy, "cublasLtMatmulDescDestroy");
    SYM(lt_desc_set, "cublasLtMatmulDescSetAttribute");
    SYM(lt_layout_create, "cublasLtMatrixLayoutCreate");
    SYM(lt_layout_destroy, "cublasLtMatrixLayoutDestroy");
    SYM(lt_pref_create, "cublasLtMatmulPreferenceCreate");
    SYM(lt_pref_destroy, "cublasLtMatmulPreferenceDestroy");
    SYM(lt_pref_set, "cublasLtMatmulPreferenceSetAttribute");
    SYM(lt_heuristic, "cublasLtMatmulAlgoGetHeuristic");
    SYM(lt_matmul, "cublasLtMatmul");
#undef SYM
    return LRC_OK;
}

enum { BLAS_INVALID_VALUE = 7, BLAS_NOT_SUPPORTED = 15 }; /* cublasStatus_t */

/* Row-major C[m, n] of GEMM op (lrc_cuda_gemm) as cuBLAS (column-major)
 * computes it: C^T = op(B') op(A'), the operands' roles swapped, so cuBLAS's
 * A is our B. Its transposes and leading dimensions. */
typedef struct {
    int ta, tb, lda, ldb;
} blas_shape;
static blas_shape blas_shape_of(int op, int64_t M, int64_t N, int64_t K)
{
    if (op == 0) return (blas_shape){OP_T, OP_N, (int)K, (int)K};      /* X W^T: C^T = W X^T */
    if (op == 1) return (blas_shape){OP_N, OP_N, (int)N, (int)K};      /* dy W, W [K, N]: C^T = W^T dy^T */
    return (blas_shape){OP_N, OP_T, (int)N, (int)M};                   /* dy^T X, dy [K, M], X [K, N]: C^T = X^T dy */
}

/* cuBLAS's data type for a buffer's storage (GEMM operands are never i32) */
static int blas_type(int storage) { return storage == LRC_CUDA_BF16 ? R_16BF : R_32F; }

/* the largest power of two up to 256 that p is a multiple of */
static uint32_t alignment_of(devptr p)
{
    uint32_t a = 256; /* cuBLASLt's default requirement, the most it asks */
    while (a > 1 && p % a) a >>= 1;
    return a;
}

/* cuBLASLt for launch li's GEMM with a residual or a bias: its operation,
 * epilogue, layouts and the algorithm its heuristic picks for them, once;
 * else in_place. */
static void lt_setup(lrc_cuda_exec *x, int li)
{
    cuda_api *a = &x->api;
    const lrc_plan_launch *l = &x->plan->launches[li];
    lrc_lt_gemm *g = &x->lt_gemm[li];
    const int64_t M = x->gemm[li][0].m, N = x->gemm[li][0].n, K = x->gemm[li][0].k;
    blas_shape b = blas_shape_of(x->gemm[li][0].op, M, N, K);
    int type = blas_type(x->storage[l->args[x->gemm[li][0].a]]), ctype = blas_type(x->storage[l->args[l->n_args - 1]]);
    /* cuBLAS's A is [N, K] (or its transpose) with leading dimension lda; B is [K, M] likewise; C and D [N, M] */
    uint64_t ar = b.ta == OP_N ? (uint64_t)N : (uint64_t)K, ac = b.ta == OP_N ? (uint64_t)K : (uint64_t)N;
    uint64_t br = b.tb == OP_N ? (uint64_t)K : (uint64_t)M, bc = b.tb == OP_N ? (uint64_t)M : (uint64_t)K;
    uint64_t ws = LRC_LT_WORKSPACE;
    /* the arena aligns its tensors to 64 bytes, not to the 256 cuBLASLt
     * assumes unless told: the heuristic must only offer algorithms that
     * work at the alignment the operands have */
    const int out = l->args[l->n_args - 1], cb = x->gemm[li][0].c >= 0 ? l->args[x->gemm[li][0].c] : out;
    uint32_t align[4] = {alignment_of(x->ptr[l->args[x->gemm[li][0].b]]), alignment_of(x->ptr[l->args[x->gemm[li][0].a]]),
                         alignment_of(x->ptr[cb]), alignment_of(x->ptr[out])};
    /* a bias: CUBLASLT_EPILOGUE_BIAS (4) through CUBLASLT_MATMUL_DESC_EPILOGUE
     * (7), its pointer as CUBLASLT_MATMUL_DESC_BIAS_POINTER (8), stored as D
     * is (the default bias type); the heuristic reads the pointer's alignment */
    const uint32_t epilogue_bias = 4;
    const void *bias = x->gemm[li][0].bias >= 0 ? (const void *)(uintptr_t)x->ptr[l->args[x->gemm[li][0].bias]] : NULL;
    void *pref = NULL;
    int n_algo = 0, r;
    if ((r = a->lt_desc_create(&g->desc, COMPUTE_32F, R_32F)) || (r = a->lt_desc_set(g->desc, 3, &b.ta, sizeof b.ta)) ||
        (r = a->lt_desc_set(g->desc, 4, &b.tb, sizeof b.tb)) ||
        (bias && ((r = a->lt_desc_set(g->desc, 7, &epilogue_bias, sizeof epilogue_bias)) ||
                  (r = a->lt_desc_set(g->desc, 8, &bias, sizeof bias)))) ||
        (r = a->lt_layout_create(&g->layout[0], type, ar, ac, b.lda)) ||
        (r = a->lt_layout_create(&g->layout[1], type, br, bc, b.ldb)) ||
        (r = a->lt_layout_create(&g->layout[2], ctype, (uint64_t)N, (uint64_t)M, N)) || (r = a->lt_pref_create(&pref)) ||
        (r = a->lt_pref_set(pref, 1, &ws, sizeof ws)) || (r = a->lt_pref_set(pref, 5, &align[0], sizeof align[0])) ||
        (r = a->lt_pref_set(pref, 6, &align[1], sizeof align[1])) || (r = a->lt_pref_set(pref, 7, &align[2], sizeof align[2])) ||
        (r = a->lt_pref_set(pref, 8, &align[3], sizeof align[3])) ||
        (r = a->lt_heuristic(x->lt, g->desc, g->layout[0], g->layout[1], g->layout[2], g->layout[2], pref, 1, &g->algo, &n_algo)) ||
        n_algo < 1)
        r = r ? r : -1;
    if (pref) a->lt_pref_destroy(pref);
    g->in_place = r != 0; /* no algorithm for these layouts: the same sum through cublasGemmEx */
}

int lrc_cuda_upload(lrc_cuda_exec *x, int i, const void *data, int64_t count, lrc_err *err)
{
    int r;
    if (x->storage[i] == LRC_CUDA_BF16) {
        uint16_t *h = lrc_malloc((size_t)count * 2 + 2);
        if (!h) return lrc_err_nomem(err, "for %lld bf16 values on their way to the device", (long long)count);
        /* to nearest even, as the kernels' st() rounds a finite value */
        for (int64_t k = 0; k < count; k++) h[k] = lrc_f32_to_bf16(((const float *)data)[k]);
        r = x->api.htod(x->ptr[i], h, (size_t)count * 2);
        free(h);
    } else {
        r = x->api.htod(x->ptr[i], data, (size_t)count * 4);
    }
    return r ? lrc_cuda_fail(x, r, "copy to the device", err) : LRC_OK;
}

int lrc_cuda_download(lrc_cuda_exec *x, int i, float *out, int64_t count, lrc_err *err)
{
    int r;
    if (x->storage[i] == LRC_CUDA_BF16) {
        uint16_t *h = lrc_malloc((size_t)count * 2 + 2);
        if (!h) return lrc_err_nomem(err, "for %lld bf16 values on their way from the device", (long long)count);
        r = x->api.dtoh(h, x->ptr[i], (size_t)count * 2);
        for (int64_t k = 0; k < count && !r; k++) out[k] = lrc_bf16_to_f32(h[k]);
        free(h);
    } else {
        r = x->api.dtoh(out, x->ptr[i], (size_t)count * 4);
    }
    return r ? lrc_cuda_fail(x, r, "copy from the device", err) : LRC_OK;
}

/* The launch table into the exec's per-launch arrays, checked against the
 * plan: a table made for another plan must not index past its buffers or
 * its launches' arguments (a package's is checked as it loads too). */
static int take_table(lrc_cuda_exec *x, const lrc_cuda_table *t, lrc_err *err)
{
    const lrc_plan *p = x->plan;
    if (!t || t->n_launches != p->n_launches || t->n_storage < 0 || t->n_storage > p->n_bufs)
        return lrc_err_set(err, "cuda: the launch table does not match the plan (%d launches for %d)", t ? t->n_launches : 0, p->n_launches);
    for (int i = 0; i < p->n_bufs; i++) x->storage[i] = i < t->n_storage ? t->storage[i] : LRC_CUDA_F32;
    for (int i = 0; i < p->n_launches; i++) {
        const lrc_cuda_launch *l = &t->launches[i];
        const int n_args = p->launches[i].n_args;
        for (int d = 0; d < 3; d++) x->grid[3 * i + d] = (int)l->grid[d];
        x->block[i] = (int)l->block;
        x->scratch_of[i] = l->scratch_bytes;
        x->scratch_st[i] = l->scratch_storage;
        x->access[i] = l->access_bytes;
        if (x->scratch_of[i] > x->scratch_bytes) x->scratch_bytes = x->scratch_of[i];
        for (int j = 0; j < l->n_gemm && j < 2; j++) {
            const lrc_cuda_gemm *g = &l->gemm[j];
            if (g->m < 1 || g->n < 1 || g->k < 1 || g->a_arg < 0 || g->a_arg >= n_args || g->b_arg < 0 || g->b_arg >= n_args ||
                g->c_arg >= n_args || g->bias_arg >= n_args || (g->bias_arg >= 0 && j > 0))
                return lrc_err_set(err, "cuda: the GEMM of launch %d ('%s') does not match the plan", i, p->launches[i].label);
            x->gemm[i][j].op = g->op == LRC_OP_MATMUL ? 0 : g->op == LRC_OP_MATMUL_NN ? 1 : 2;
            x->gemm[i][j].m = g->m;
            x->gemm[i][j].n = g->n;
            x->gemm[i][j].k = g->k;
            x->gemm[i][j].a = g->a_arg;
            x->gemm[i][j].b = g->b_arg;
            x->gemm[i][j].c = g->c_arg < 0 ? -1 : g->c_arg;
            x->gemm[i][j].bias = g->bias_arg < 0 ? -1 : g->bias_arg;
            x->n_gemm[i] = j + 1;
        }
    }
    return LRC_OK;
}

int lrc_cuda_exec_new(const lrc_plan *plan, const lrc_cuda_table *table, const void *image, lrc_cuda_exec **out, lrc_err *err)
{
    lrc_cuda_exec *x = lrc_calloc(1, sizeof *x);
    if (!x) return lrc_err_nomem(err, "for a cuda executor");
    x->unsynced_first = -1;
    x->plan = plan;
    int n = plan->n_bufs, L = plan->n_launches;
    x->storage = lrc_calloc((size_t)n + 1, sizeof *x->storage);
    x->ptr = lrc_calloc((size_t)n + 1, sizeof(devptr));
    x->fn = lrc_calloc((size_t)L + 1, sizeof(void *));
    x->grid = lrc_calloc((size_t)L * 3 + 3, sizeof(int));
    x->block = lrc_calloc((size_t)L + 1, sizeof(int));
    x->scratch_of = lrc_calloc((size_t)L + 1, sizeof(int64_t));
    x->scratch_st = lrc_calloc((size_t)L + 1, sizeof *x->scratch_st);
    x->access = lrc_calloc((size_t)L + 1, sizeof(int));
    x->n_gemm = lrc_calloc((size_t)L + 1, sizeof(int));
    x->iteration = lrc_calloc((size_t)L + 1, sizeof(int64_t));
    x->gemm = lrc_calloc((size_t)L + 1, sizeof *x->gemm);
    x->on_device = lrc_calloc((size_t)n + 1, sizeof(bool));
    int most = 0;
    for (int li = 0; li < L; li++) most = plan->launches[li].n_args > most ? plan->launches[li].n_args : most;
    x->argv = lrc_calloc((size_t)most + 1, sizeof(devptr)); /* + 1: the scratch */
    x->params = lrc_calloc((size_t)most + 1, sizeof(void *));
    if (!x->storage || !x->ptr || !x->fn || !x->grid || !x->block || !x->scratch_of || !x->scratch_st || !x->access || !x->n_gemm ||
        !x->iteration || !x->gemm || !x->on_device || !x->argv || !x->params) {
        lrc_cuda_exec_free(x); /* before the driver is loaded: host memory alone to free */
        return lrc_err_nomem(err, "for the cuda executor of a plan of %d buffers and %d launches", n, L);
    }
    int rc = load_api(&x->api, err), r = 0;
    if (!rc) rc = take_table(x, table, err);
    cuda_api *a = &x->api;
    if (!rc && (r = a->init(0))) rc = lrc_cuda_fail(x, r, "cuInit", err);
    if (!rc && (r = a->device_get(&x->device, 0))) rc = lrc_cuda_fail(x, r, "cuDeviceGet", err);
    if (!rc && (r = a->ctx_retain(&x->ctx, x->device))) rc = lrc_cuda_fail(x, r, "creating a context", err);
    if (!rc && (r = a->ctx_set(x->ctx))) rc = lrc_cuda_fail(x, r, "cuCtxSetCurrent", err);
    if (!rc && (r = a->module_load(&x->module, image))) rc = lrc_cuda_fail(x, r, "loading the kernels (another GPU architecture?)", err);
    for (int i = 0; i < L && !rc; i++)
        if (plan->launches[i].symbol[0] && (r = a->get_function(&x->fn[i], x->module, plan->launches[i].symbol)))
            rc = lrc_err_set(err, "cuda: kernel '%s' is missing from the cubin (a damaged package?)", plan->launches[i].symbol);
    if (!rc && a->blas_create(&x->blas)) rc = lrc_err_set(err, "cuda: cuBLAS does not start (cublasCreate)");
    x->graph_off = !a->has_graph || lrc_env_is("LRC_CUDA_GRAPH", "0");
    for (int i = 0; i < L; i++) x->graph_off |= plan->launches[i].loop_to >= 0; /* a back edge decides on the host */
    if (!rc && a->has_graph && (a->stream_create(&x->stream, 0) || a->blas_set_stream(x->blas, x->stream))) { /* 0: blocking */
        if (x->stream) a->stream_destroy(x->stream);
        x->stream = NULL, x->graph_off = true;
        a->blas_set_stream(x->blas, NULL);
    }
    if (!rc && !(x->lt_gemm = lrc_calloc((size_t)L + 1, sizeof *x->lt_gemm)))
        rc = lrc_err_nomem(err, "for the cuBLASLt state of %d launches", L);
    /* the arena, the scratch, and a buffer for every tensor that is not in the arena */
    const char *check = getenv("LRC_CUDA_CHECK");
    x->check = check && *check && strcmp(check, "0");
    x->sync_each = lrc_env_is("LRC_CUDA_SYNC", "1");
    x->graph_off |= x->check || x->sync_each; /* both act between launches */
    size_t pad = x->check ? GUARD : 0;
    if (!rc && plan->arena_bytes && !x->check && (r = a->mem_alloc(&x->arena, (size_t)plan->arena_bytes)))
        rc = lrc_err_set(err, "cuda: out of device memory for the %lld-byte arena (a smaller --batch or --seq needs less)", (long long)plan->arena_bytes);
    if (!rc && x->scratch_bytes && (r = a->mem_alloc(&x->scratch, (size_t)x->scratch_bytes + pad)))
        rc = lrc_err_set(err, "cuda: out of device memory for %lld bytes of scratch (a smaller --batch or --seq needs less)", (long long)x->scratch_bytes);
    for (int i = 0; i < n && !rc; i++) {
        const lrc_plan_buf *b = &plan->bufs[i];
        size_t bytes = (size_t)lrc_shape_numel(&b->shape) * lrc_cuda_elem_bytes(x->storage[i]);
        if (b->kind == LRC_BUF_ARENA && !x->check) x->ptr[i] = x->arena + (devptr)b->offset;
        else if (b->kind == LRC_BUF_INPUT || b->kind == LRC_BUF_PARAM || b->kind == LRC_BUF_OUTPUT || b->kind == LRC_BUF_STATE ||
                 b->kind == LRC_BUF_ARENA) {
            if ((r = a->mem_alloc(&x->ptr[i], (bytes ? bytes : 4) + pad)))
                rc = lrc_err_set(err, "cuda: out of device memory for %zu bytes of %s%s%s (the device has too little free memory for this model)",
                                 bytes, b->name ? "'" : "", b->name ? b->name : "an intermediate", b->name ? "'" : "");
            else if (b->kind == LRC_BUF_STATE && (r = a->memset8(x->ptr[i], 0, bytes))) rc = lrc_cuda_fail(x, r, "zeroing a cache", err);
            else if (pad && (r = a->memset8(x->ptr[i] + (devptr)(bytes ? bytes : 4), GUARD_BYTE, pad)))
                rc = lrc_cuda_fail(x, r, "writing a guard region", err);
        }
    }
    if (!rc && pad && x->scratch && (r = a->memset8(x->scratch + (devptr)x->scratch_bytes, GUARD_BYTE, pad)))
        rc = lrc_cuda_fail(x, r, "writing a guard region", err);
    /* cuBLASLt is an optimization: its workspace comes after everything the
     * model needs, and where it does not start or the workspace does not
     * fit, every residual GEMM runs in place through cublasGemmEx, and every
     * biased one into scratch before its kernel */
    /* LRC_CUBLASLT=0: cublasGemmEx alone, to tell the two apart on a device */
    bool lt_ok = a->has_lt && !lrc_env_is("LRC_CUBLASLT", "0");
    for (int i = 0; i < L && !rc; i++) {
        if (x->n_gemm[i] != 1 || (x->gemm[i][0].c < 0 && x->gemm[i][0].bias < 0)) continue;
        if (lt_ok && !x->lt && a->lt_create(&x->lt)) lt_ok = false, x->lt = NULL;
        if (lt_ok && !x->lt_workspace && a->mem_alloc(&x->lt_workspace, LRC_LT_WORKSPACE)) lt_ok = false, x->lt_workspace = 0;
        if (lt_ok) lt_setup(x, i);
        else x->lt_gemm[i].in_place = true;
    }
    if (rc) {
        lrc_cuda_exec_free(x);
        return rc;
    }
    *out = x;
    return LRC_OK;
}

bool lrc_cuda_lt_release(lrc_cuda_exec *x)
{
    if (!x->lt_workspace) return false;
    x->api.mem_free(x->lt_workspace);
    x->lt_workspace = 0;
    for (int i = 0; i < x->plan->n_launches; i++) x->lt_gemm[i].in_place = true;
    if (x->graph_exec) x->api.graph_exec_destroy(x->graph_exec), x->graph_exec = NULL; /* it ran cuBLASLt: captured again */
    return true;
}

void lrc_cuda_exec_free(lrc_cuda_exec *x)
{
    if (!x) return;
    cuda_api *a = &x->api;
    if (a->mem_free) {
        for (int i = 0; i < x->plan->n_bufs; i++)
            if (x->ptr[i] && (x->plan->bufs[i].kind != LRC_BUF_ARENA || x->check)) a->mem_free(x->ptr[i]);
        if (x->arena) a->mem_free(x->arena);
        if (x->scratch) a->mem_free(x->scratch);
    }
    for (int i = 0; x->lt_gemm && i < x->plan->n_launches; i++) {
        lrc_lt_gemm *g = &x->lt_gemm[i];
        for (int k = 0; k < 3; k++)
            if (g->layout[k]) a->lt_layout_destroy(g->layout[k]);
        if (g->desc) a->lt_desc_destroy(g->desc);
    }
    free(x->lt_gemm);
    if (x->lt) a->lt_destroy(x->lt);
    if (x->lt_workspace) a->mem_free(x->lt_workspace);
    if (x->graph_exec) a->graph_exec_destroy(x->graph_exec);
    if (x->stream) a->stream_destroy(x->stream);
    for (int i = 0; i < x->n_events; i++) a->event_destroy(x->events[i]);
    free(x->events);
    free(x->event_launch);
    if (x->blas) a->blas_destroy(x->blas);
    if (x->module) a->module_unload(x->module);
    if (x->ctx) a->ctx_release(x->device);
    free(x->storage);
    free(x->ptr);
    free(x->fn);
    free(x->grid);
    free(x->block);
    free(x->scratch_of);
    free(x->scratch_st);
    free(x->access);
    free(x->n_gemm);
    free(x->gemm);
    free(x->iteration);
    free(x->argv);
    free(x->params);
    free(x->on_device);
    free(x);
}

int lrc_cuda_exec_bind_params(lrc_cuda_exec *x, const lrc_tensor_set *params, lrc_err *err)
{
    for (int i = 0; i < x->plan->n_bufs; i++) {
        const lrc_plan_buf *b = &x->plan->bufs[i];
        if (b->kind != LRC_BUF_PARAM) continue;
        const lrc_tensor *t = lrc_tensor_set_find(params, b->name);
        const bool half = t && (t->dtype == LRC_BF16 || t->dtype == LRC_F16) && lrc_shape_eq(&t->shape, &b->shape);
        int rc;
        if (half && t->dtype == LRC_BF16 && x->storage[i] == LRC_CUDA_BF16) {
            /* stored as the device stores it (a cuda package's weights, or
             * a bf16 checkpoint): copied as it is */
            int r = x->api.htod(x->ptr[i], t->data, t->nbytes);
            rc = r ? lrc_cuda_fail(x, r, "copy to the device", err) : LRC_OK;
        } else if (half) {
            lrc_tensor *wide = lrc_tensor_to_f32(t, err); /* exact */
            rc = wide ? lrc_cuda_upload(x, i, wide->data, lrc_shape_numel(&wide->shape), err) : LRC_EUSER;
            lrc_tensor_free(wide);
        } else if (!(rc = lrc_plan_find_tensor(b, params, &t, err))) { /* names what is missing or wrong */
            rc = lrc_cuda_upload(x, i, t->data, lrc_shape_numel(&t->shape), err);
        }
        if (rc) return rc;
    }
    return LRC_OK;
}

/* Whether launch li's GEMM wrote the launch's output through cuBLASLt's
 * epilogue (a bias and maybe a residual), so its kernel has nothing to do. */
static bool lt_wrote_output(const lrc_cuda_exec *x, int li)
{
    return x->n_gemm[li] == 1 && x->gemm[li][0].bias >= 0 && !x->lt_gemm[li].in_place;
}

static int gemm_failed(const char *lib, int64_t M, int64_t N, int64_t K, const char *label, int status, lrc_err *err)
{
    return lrc_err_set(err, "cuda: %s GEMM %lldx%lldx%lld of '%s' failed (status %d)", lib, (long long)M, (long long)N, (long long)K, label,
                       status);
}

/* Launch li's GEMM j: through cuBLASLt when it adds a residual or a bias,
 * into the launch's output; else through cublasGemmEx, into the scratch
 * its epilogue kernel reads, or into the output. */
static int run_gemm(lrc_cuda_exec *x, int li, int j, lrc_err *err)
{
    const lrc_plan_launch *l = &x->plan->launches[li];
    const int ab = l->args[x->gemm[li][j].a], bb = l->args[x->gemm[li][j].b], ob = l->args[l->n_args - 1];
    const int64_t M = x->gemm[li][j].m, N = x->gemm[li][j].n, K = x->gemm[li][j].k;
    if (x->storage[ab] != x->storage[bb] || x->storage[ab] == LRC_CUDA_I32)
        return lrc_err_set(err, "cuda: GEMM '%s' has operands stored as %s and %s", l->label, lrc_cuda_storage_name(x->storage[ab]),
                           lrc_cuda_storage_name(x->storage[bb]));
    int type = blas_type(x->storage[ab]);
    const float one = 1.f, zero = 0.f;
    blas_shape b = blas_shape_of(x->gemm[li][j].op, M, N, K);
    int r = 0;
    const int rb = x->gemm[li][j].c >= 0 ? l->args[x->gemm[li][j].c] : -1;
    lrc_lt_gemm *g = &x->lt_gemm[li];
    if ((rb >= 0 || x->gemm[li][j].bias >= 0) && !g->in_place) { /* D = product (+ residual) (+ bias) */
        r = x->api.lt_matmul(x->lt, g->desc, &one, (void *)x->ptr[bb], g->layout[0], (void *)x->ptr[ab], g->layout[1],
                             rb >= 0 ? &one : &zero, (void *)x->ptr[rb >= 0 ? rb : ob], g->layout[2], (void *)x->ptr[ob], g->layout[2],
                             g->algo.algo, (void *)x->lt_workspace, LRC_LT_WORKSPACE, x->stream);
        /* refused before it ran (an algorithm the heuristic offered for
         * layouts it then rejects): this GEMM goes through cublasGemmEx
         * from now on; an error of the device itself stays an error */
        if (r == BLAS_NOT_SUPPORTED || r == BLAS_INVALID_VALUE) g->in_place = true, r = 0;
        else return r ? gemm_failed("cuBLASLt", M, N, K, l->label, r, err) : LRC_OK;
    }
    devptr C = x->ptr[ob];
    int ctype = blas_type(x->storage[ob]);
    const bool to_scratch = l->symbol[0]; /* an epilogue kernel follows: it reads the product (and adds what it adds) */
    if (to_scratch) C = x->scratch + (devptr)(j * M * N) * lrc_cuda_elem_bytes(x->scratch_st[li]), ctype = blas_type(x->scratch_st[li]);
    const bool add_c = rb >= 0 && !to_scratch;
    if (add_c && x->ptr[rb] != C) { /* the residual first, on the launches' stream (a capture records it) */
        const size_t bytes = (size_t)(M * N) * lrc_cuda_elem_bytes(x->storage[rb]);
        r = x->stream ? x->api.dtod_async(C, x->ptr[rb], bytes, x->stream) : x->api.dtod(C, x->ptr[rb], bytes);
    }
    if (!r)
        r = x->api.gemm_ex(x->blas, b.ta, b.tb, (int)N, (int)M, (int)K, &one, (void *)x->ptr[bb], type, b.lda, (void *)x->ptr[ab], type,
                           b.ldb, add_c ? &one : &zero, (void *)C, ctype, (int)N, COMPUTE_32F, GEMM_DEFAULT);
    return r ? gemm_failed("cuBLAS", M, N, K, l->label, r, err) : LRC_OK;
}

static int launch_all(lrc_cuda_exec *x, lrc_err *err);

/* A kernel's fault, which the driver reports at whatever call comes next:
 * CUDA_ERROR_ILLEGAL_ADDRESS, _LAUNCH_TIMEOUT, _HARDWARE_STACK_ERROR to
 * _LAUNCH_FAILED (cuda.h: 700, 702, 714-719) */
static bool is_fault(int r) { return r == 700 || r == 702 || (r >= 714 && r <= 719); }

/* A synchronize that failed: a kernel faulted somewhere since the last one.
 * The error names the launches that may have, and how to name the one. */
static int sync_failed(const lrc_cuda_exec *x, int r, lrc_err *err)
{
    const char *name = "?";
    if (x->api.error_name) x->api.error_name(r, &name);
    int a = x->unsynced_first, b = x->unsynced_last;
    if (a < 0) return lrc_cuda_fail(x, r, "running the kernels", err);
    const lrc_plan_launch *la = &x->plan->launches[a], *lb = &x->plan->launches[b];
    const char *sa = la->label && *la->label ? la->label : la->symbol, *sb = lb->label && *lb->label ? lb->label : lb->symbol;
    if (a == b) return lrc_err_set(err, "cuda: launch %d '%s' failed: %s", a, sa, name);
    return lrc_err_set(err,
                       "cuda: a kernel failed (%s) in launches %d '%s' to %d '%s', since the last synchronize: "
                       "LRC_CUDA_SYNC=1 synchronizes after every launch and names it",
                       name, a, sa, b, sb);
}

bool lrc_cuda_guard_intact(lrc_cuda_exec *x, devptr end, int *r)
{
    unsigned char g[GUARD];
    if ((*r = x->api.dtoh(g, end, GUARD))) return true;
    for (int k = 0; k < GUARD; k++)
        if (g[k] != GUARD_BYTE) return false;
    return true;
}

/* LRC_CUDA_CHECK: after launch li, every guard region as it was. */
static int check_guards(lrc_cuda_exec *x, int li, lrc_err *err)
{
    const lrc_plan_launch *l = &x->plan->launches[li];
    char what[160];
    snprintf(what, sizeof what, "launch %d '%s'", li, l->label && *l->label ? l->label : l->symbol);
    return lrc_cuda_check_guards(x, what, err);
}

int lrc_cuda_check_guards(lrc_cuda_exec *x, const char *what, lrc_err *err)
{
    int r = x->api.sync();
    if (r) return lrc_cuda_fail(x, r, what, err);
    for (int i = 0; i < x->plan->n_bufs; i++) {
        const lrc_plan_buf *b = &x->plan->bufs[i];
        if (!x->ptr[i] || b->kind == LRC_BUF_NONE || b->kind == LRC_BUF_PERSIST) continue;
        size_t bytes = (size_t)lrc_shape_numel(&b->shape) * lrc_cuda_elem_bytes(x->storage[i]);
        if (!lrc_cuda_guard_intact(x, x->ptr[i] + (devptr)(bytes ? bytes : 4), &r))
            return lrc_err_set(err, "cuda (LRC_CUDA_CHECK): %s wrote past the end of buffer %d%s%s%s (%zu bytes)", what,
                               i, b->name ? " '" : "", b->name ? b->name : "", b->name ? "'" : "", bytes);
        if (r) return lrc_cuda_fail(x, r, "reading a guard region", err);
    }
    if (x->scratch && !lrc_cuda_guard_intact(x, x->scratch + (devptr)x->scratch_bytes, &r))
        return lrc_err_set(err, "cuda (LRC_CUDA_CHECK): %s wrote past the end of the GEMM scratch", what);
    return r ? lrc_cuda_fail(x, r, "reading a guard region", err) : LRC_OK;
}

/* The next event of the run, recorded on the stream: one before and one
 * after each timed launch. */
static int mark(lrc_cuda_exec *x, int li, lrc_err *err)
{
    if (x->used_events == x->n_events) {
        if (x->n_events == x->cap_events) {
            int cap = x->cap_events ? 2 * x->cap_events : 256;
            void *events = lrc_reallocarray(x->events, (size_t)cap, sizeof *x->events);
            if (events) x->events = events;
            int *launch = events ? lrc_reallocarray(x->event_launch, (size_t)cap, sizeof *x->event_launch) : NULL;
            if (!launch) return lrc_err_nomem(err, "for %d timing events", cap);
            x->event_launch = launch, x->cap_events = cap;
        }
        int r = x->api.event_create(&x->events[x->n_events], 0);
        if (r) return lrc_cuda_fail(x, r, "cuEventCreate", err);
        x->n_events++;
    }
    x->event_launch[x->used_events] = li;
    int r = x->api.event_record(x->events[x->used_events++], NULL);
    return r ? lrc_cuda_fail(x, r, "cuEventRecord", err) : LRC_OK;
}

/* After a run: each launch's time between its two events, and its place
 * on a timeline that starts at the run's first event. */
static int collect(lrc_cuda_exec *x, lrc_err *err)
{
    int r = x->used_events ? x->api.event_sync(x->events[x->used_events - 1]) : 0;
    for (int e = 0; e + 1 < x->used_events && !r; e += 2) {
        float ms = 0, at = 0;
        int li = x->event_launch[e];
        if ((r = x->api.event_elapsed(&ms, x->events[e], x->events[e + 1])) ||
            (r = x->api.event_elapsed(&at, x->events[0], x->events[e])))
            break;
        if (x->times_ns) x->times_ns[li] += 1e6 * ms, x->calls[li]++;
        if (x->trace && *x->n_trace < x->trace_cap)
            x->trace[(*x->n_trace)++] = (lrc_trace_event){li, x->trace_clock_ns + 1e6 * at, 1e6 * ms};
    }
    float span = 0;
    if (!r && x->used_events && !(r = x->api.event_elapsed(&span, x->events[0], x->events[x->used_events - 1])))
        x->trace_clock_ns += 1e6 * span + 1e3; /* the next run 1 us later on the timeline */
    x->used_events = 0;
    return r ? lrc_cuda_fail(x, r, "reading the launches' events", err) : LRC_OK;
}

void lrc_cuda_exec_profile(lrc_cuda_exec *x, double *times_ns, int64_t *calls)
{
    x->times_ns = times_ns;
    x->calls = calls;
}

void lrc_cuda_exec_trace(lrc_cuda_exec *x, lrc_trace_event *events, int64_t cap, int64_t *n)
{
    x->trace = events;
    x->trace_cap = cap;
    x->n_trace = n;
}

enum { CAPTURE_THREAD_LOCAL = 1 }; /* CUstreamCaptureMode: only this thread's calls are captured */

/* The plan's launches: one CUDA graph where the plan can be one (launch by
 * launch at the first run, captured at the second and replayed from then
 * on: a launch of the whole plan instead of one per kernel and GEMM), else
 * launch by launch. A capture that fails (a
 * library refusing to be captured) leaves the plan launch by launch: the
 * capture ran nothing, and the launches report their own errors. */
static int run_plan(lrc_cuda_exec *x, lrc_err *err)
{
    /* the first run launch by launch: cuBLAS and cuBLASLt set themselves up
     * (workspaces, algorithms) where a capture would refuse it */
    if (x->graph_off || x->times_ns || x->trace || !x->runs++) return launch_all(x, err);
    if (!x->graph_exec) {
        void *graph = NULL;
        lrc_err ignored;
        int r = x->api.begin_capture(x->stream, CAPTURE_THREAD_LOCAL);
        int rc = r ? LRC_EUSER : launch_all(x, &ignored);
        if (!r) r = x->api.end_capture(x->stream, &graph);
        if (!rc && !r && graph) r = x->api.graph_instantiate(&x->graph_exec, graph, 0);
        if (graph) x->api.graph_destroy(graph);
        if (rc || r || !graph) {
            x->graph_off = true, x->graph_exec = NULL;
            return launch_all(x, err);
        }
    }
    x->unsynced_first = 0, x->unsynced_last = x->plan->n_launches - 1;
    int r = x->api.graph_launch(x->graph_exec, x->stream);
    return !r ? LRC_OK : is_fault(r) ? sync_failed(x, r, err) : lrc_cuda_fail(x, r, "launching the plan's CUDA graph", err);
}

int lrc_cuda_exec_run(lrc_cuda_exec *x, const lrc_tensor_set *inputs, lrc_tensor_set *outputs, lrc_err *err)
{
    const lrc_plan *p = x->plan;
    int rc = lrc_plan_check_ids(p, inputs, err); /* on the host, before anything runs */
    for (int i = 0; i < p->n_bufs && !rc; i++) {
        const lrc_plan_buf *b = &p->bufs[i];
        if (b->kind != LRC_BUF_INPUT) continue;
        const lrc_tensor *t;
        if (!(rc = lrc_plan_find_tensor(b, inputs, &t, err))) rc = lrc_cuda_upload(x, i, t->data, lrc_shape_numel(&t->shape), err);
    }
    x->unsynced_first = -1;
    if (!rc) rc = run_plan(x, err);
    int r;
    if (!rc && (r = x->api.sync())) rc = sync_failed(x, r, err);
    if (!rc && x->used_events) rc = collect(x, err);
    x->used_events = 0;
    for (int i = 0; i < p->n_bufs && !rc; i++) {
        const lrc_plan_buf *b = &p->bufs[i];
        if (b->kind != LRC_BUF_OUTPUT || x->on_device[i]) continue;
        lrc_tensor *t = lrc_tensor_set_find(outputs, b->name);
        if (!t && (!(t = lrc_tensor_new_uninit(b->name, b->dtype, &b->shape, err)) || lrc_tensor_set_add(outputs, t, err))) {
            rc = LRC_EUSER;
            break;
        }
        rc = lrc_cuda_download(x, i, t->data, lrc_shape_numel(&b->shape), err);
    }
    return rc;
}

int lrc_cuda_exec_time(lrc_cuda_exec *x, int64_t repeat, double *median_ms, lrc_err *err)
{
    double *ms = lrc_malloc((size_t)repeat * sizeof(double) + 8);
    if (!ms) return lrc_err_nomem(err, "for the times of %lld runs", (long long)repeat);
    int rc = LRC_OK, r;
    for (int64_t i = 0; i < repeat && !rc; i++) {
        double t0 = lrc_now_s();
        x->unsynced_first = -1;
        rc = run_plan(x, err);
        if (!rc && (r = x->api.sync())) rc = sync_failed(x, r, err);
        ms[i] = 1e3 * (lrc_now_s() - t0);
        if (!rc && x->used_events) rc = collect(x, err);
    }
    *median_ms = lrc_median(ms, repeat);
    free(ms);
    return rc;
}

/* A loop's back edge on the device: the counts read back (the loop's
 * length is decided on the host), the rows that still iterate copied
 * device to device; true in *again when the body runs again. */
static int back_edge(lrc_cuda_exec *x, int li, bool *again, lrc_err *err)
{
    const lrc_plan_launch *l = &x->plan->launches[li];
    const lrc_plan_buf *st = &x->plan->bufs[l->args[0]];
    lrc_cuda_storage sb = x->storage[l->args[0]];
    if (sb != x->storage[l->args[1]])
        return lrc_err_set(err, "cuda: loop '%s' carries a state stored as %s, its body returns %s", l->label, lrc_cuda_storage_name(sb),
                           lrc_cuda_storage_name(x->storage[l->args[1]]));
    int64_t rows = st->shape.ndim ? st->shape.dim[0] : 1, most = 0, t = x->iteration[li];
    int64_t row_bytes = lrc_shape_numel(&st->shape) / rows * (sb == LRC_CUDA_BF16 ? 2 : 4);
    int32_t *counts = lrc_malloc((size_t)rows * 4);
    if (!counts) return lrc_err_nomem(err, "for a loop's %lld iteration counts", (long long)rows);
    int r = x->api.dtoh(counts, x->ptr[l->args[2]], (size_t)rows * 4);
    for (int64_t b = 0; b < rows && !r; b++) {
        if (t < counts[b])
            r = x->api.dtod(x->ptr[l->args[0]] + (devptr)(b * row_bytes), x->ptr[l->args[1]] + (devptr)(b * row_bytes), (size_t)row_bytes);
        if (counts[b] > most) most = counts[b];
    }
    free(counts);
    *again = !r && t + 1 < most;
    x->iteration[li] = *again ? t + 1 : 0; /* a failed run starts the next one at the loop's beginning */
    return r ? lrc_cuda_fail(x, r, "a loop's back edge", err) : LRC_OK;
}

/* After launch li has gone in (its GEMMs, its kernel): the event that ends
 * its time, LRC_CUDA_CHECK's guard regions where it ran anything, and
 * LRC_CUDA_SYNC's synchronize; either of those two leaves no launch
 * unsynchronized. */
static int after_launch(lrc_cuda_exec *x, int li, bool timed, bool ran, lrc_err *err)
{
    int rc = timed ? mark(x, li, err) : LRC_OK, r;
    if (x->check && ran && !rc) rc = check_guards(x, li, err);
    if (x->sync_each && !rc && (r = x->api.sync())) rc = sync_failed(x, r, err);
    if (!rc && (x->check || x->sync_each)) x->unsynced_first = -1;
    return rc;
}

/* Every launch in order on the default stream: cuBLAS, then the kernel. */
static int launch_all(lrc_cuda_exec *x, lrc_err *err)
{
    const lrc_plan *p = x->plan;
    int rc = LRC_OK;
    for (int li = 0; li < p->n_launches && !rc; li++) {
        const lrc_plan_launch *l = &p->launches[li];
        if (l->loop_to >= 0) {
            bool again = false;
            if (!(rc = back_edge(x, li, &again, err)) && again) li = l->loop_to - 1;
            continue;
        }
        bool timed = (x->times_ns || x->trace) && (x->n_gemm[li] || x->fn[li]);
        if (timed && !rc) rc = mark(x, li, err);
        if (x->unsynced_first < 0) x->unsynced_first = li;
        x->unsynced_last = li;
        for (int j = 0; j < x->n_gemm[li] && !rc; j++) rc = run_gemm(x, li, j, err);
        if (rc || !x->fn[li] || lt_wrote_output(x, li)) {
            if (!rc) rc = after_launch(x, li, timed, x->n_gemm[li] > 0, err);
            continue;
        }
        devptr *argv = x->argv; /* cuLaunchKernel copies the values: reused by the next launch */
        void **params = x->params;
        int na = 0;
        for (int k = 0; k < l->n_args; k++) argv[na] = x->ptr[l->args[k]], params[na] = &argv[na], na++;
        if (x->scratch_of[li]) argv[na] = x->scratch, params[na] = &argv[na], na++;
        int r = x->api.launch(x->fn[li], (unsigned)x->grid[3 * li], (unsigned)x->grid[3 * li + 1], (unsigned)x->grid[3 * li + 2],
                              (unsigned)x->block[li], 1, 1, 0, x->stream, params, NULL);
        /* a fault of an earlier kernel can surface at this launch (the
         * context is lost): then it names the launches since the last synchronize */
        rc = r && is_fault(r) ? sync_failed(x, r, err) : r ? lrc_cuda_fail(x, r, l->label ? l->label : l->symbol, err)
                                                          : after_launch(x, li, timed, true, err);
    }
    return rc;
}

void lrc_cuda_exec_launch_shape(const lrc_cuda_exec *x, int li, int64_t *blocks, int *threads, int *access_bytes)
{
    *blocks = (int64_t)x->grid[3 * li] * x->grid[3 * li + 1] * x->grid[3 * li + 2];
    *threads = x->block[li];
    *access_bytes = x->access[li];
}

double lrc_cuda_exec_bytes(const lrc_cuda_exec *x, int li)
{
    const lrc_plan_launch *l = &x->plan->launches[li];
    double as_f32 = 0, stored = 0;
    for (int a = 0; a < l->n_args; a++) {
        double n = (double)lrc_shape_numel(&x->plan->bufs[l->args[a]].shape);
        as_f32 += 4 * n;
        stored += (double)lrc_cuda_elem_bytes(x->storage[l->args[a]]) * n;
    }
    return as_f32 > 0 ? l->bytes * stored / as_f32 : l->bytes;
}
