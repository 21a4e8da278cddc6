/* target_cuda.c — the cuda entry of the target table: graphs rendered as
 * CUDA C and compiled by NVRTC (codegen/cuda) for GPU 0's architecture
 * (run by the cuda executor), or for an architecture named into a package
 * (no GPU needed). */
#include "lrc_compile.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

/* for the host's GPU, or the one named */
static int cuda_compile(lrc_graph *g, lrc_tensor_set *consts, const lrc_compile_opts *o, const lrc_exec_host *h, lrc_compiled *c,
                        lrc_err *err)
{
    char arch[16];
    snprintf(arch, sizeof arch, "sm_%d", h && h->sm ? h->sm : 90);
    return lrc_compile_graph_cuda(g, consts, o->arch ? o->arch : arch, o->f32, c, err);
}

static int cuda_compile_package(lrc_graph *g, lrc_tensor_set *consts, const lrc_compile_opts *o, lrc_package_writer *w, lrc_compiled *c,
                                lrc_err *err)
{
    if (cuda_compile(g, consts, o, o->host, c, err)) return LRC_EUSER;
    return lrc_package_write_cuda(w, c->cuda.source, c->cubin, c->cubin_size, c->ptx, err);
}

static void cuda_package_meta(cJSON *o, const lrc_compiled *c)
{
    cJSON_AddStringToObject(o, "arch", c->arch);
    cJSON_AddStringToObject(o, "nvrtc", lrc_nvrtc_version());
    cJSON_AddItemToObject(o, "cuda", lrc_package_cuda_json(&c->cuda.table)); /* the launch table, as the package stores it */
}

/* A weight the device stores as bf16 is written as bf16, rounded as the
 * upload would round it: half the file, and the same bits on the GPU. */
static int cuda_package_weight(const lrc_compiled *c, int b, lrc_tensor *t, lrc_tensor **extra, lrc_err *err)
{
    (void)err;
    *extra = NULL;
    if (b < c->cuda.table.n_storage && c->cuda.table.storage[b] == LRC_CUDA_BF16) lrc_tensor_round_bf16(t);
    return LRC_OK;
}

static int cuda_functions(const lrc_compiled *c) { return c->cuda.n_symbols; }

const lrc_target lrc_target_cuda = {
    .name = "cuda",
    .ex = &lrc_executor_cuda,
    .pass_rules = lrc_cuda_pass_rules,
    .supports_op = lrc_cuda_supports_op,
    .compile = cuda_compile,
    .device_package = true,
    .compile_package = cuda_compile_package,
    .package_meta = cuda_package_meta,
    .package_weight = cuda_package_weight,
    .functions = cuda_functions,
};
