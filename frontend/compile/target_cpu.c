/* target_cpu.c — the cpu entry of the target table: graphs compiled
 * through LLVM for this CPU, in memory (run by the cpu executor on the
 * thread pool) or into a package's kernels.so. */
#include "lrc_compile.h"

#include "../../codegen/llvm/lrc_link.h"
#include "../../codegen/llvm/lrc_llvm.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* the graph compiled like any graph; without consts its parameters stay variables */
static int cpu_compile(lrc_graph *g, lrc_tensor_set *consts, const lrc_compile_opts *o, const lrc_exec_host *h, lrc_compiled *c,
                       lrc_err *err)
{
    (void)o, (void)h;
    return lrc_compile_graph(g, consts, c, err);
}

static int cpu_compile_package(lrc_graph *g, lrc_tensor_set *consts, const lrc_compile_opts *o, lrc_package_writer *w, lrc_compiled *c,
                               lrc_err *err)
{
    char obj[4200], so[4200];
    lrc_package_kernels_path(w, true, obj, sizeof obj);
    lrc_package_kernels_path(w, false, so, sizeof so);
    return lrc_compile_graph_to(g, consts, obj, o->w_store, c, err) || lrc_llvm_link_shared(obj, so, err) ||
                   lrc_compile_pack_weights(c, so, err)
               ? LRC_EUSER
               : LRC_OK;
}

static void cpu_package_meta(cJSON *o, const lrc_compiled *c)
{
    cJSON_AddStringToObject(o, "cpu", c->cpu_name);
    cJSON_AddStringToObject(o, "requires", c->cpu_features);
    cJSON_AddStringToObject(o, "weights_dtype", lrc_wstore_name(c->prog.tiling.w_store));
    cJSON_AddNumberToObject(o, "peak_flops_per_item", lrc_peak_flops_per_item(&c->prog.tiling));
    cJSON_AddStringToObject(o, "llvm", lrc_llvm_version());
}

/* --weights-dtype bf16: every weight matrix is written as bf16 (rounded to
 * nearest even, as the GEMMs' panels round it), half the file; the
 * loader widens them to f32 exactly, and packing them again is exact.
 * q8: as int8 with f16 scales per block of 32 along the axis the GEMM
 * reduces (the first when its panels are packed from W^T), as the pack
 * kernels quantize: read back, they pack to the same values and scales.
 * Vectors (norm gains, biases) stay f32. */
static int cpu_package_weight(const lrc_compiled *c, int b, lrc_tensor *t, lrc_tensor **extra, lrc_err *err)
{
    *extra = NULL;
    if (t->shape.ndim < 2 || c->prog.tiling.w_store == LRC_WSTORE_F32) return LRC_OK;
    if (c->prog.tiling.w_store == LRC_WSTORE_BF16) {
        lrc_tensor_round_bf16(t);
        return LRC_OK;
    }
    int axis = t->shape.ndim - 1;
    for (int x = 0; x < c->prog.n_extra; x++)
        if (c->prog.extra[x].of_node == b && c->prog.extra[x].panel > 0 && c->prog.extra[x].transposed) axis = 0;
    return lrc_tensor_quantize_q8(t, axis, extra, err);
}

/* launches of equal structure share a function */
static int cpu_functions(const lrc_compiled *c)
{
    int functions = 0;
    for (int i = 0; i < c->prog.n_kernels; i++) functions += c->prog.kernels[i].impl == i;
    return functions;
}

const lrc_target lrc_target_cpu = {
    .name = "cpu",
    .ex = &lrc_executor_cpu,
    .supports_op = lrc_llvm_supports_op,
    .pass_rules = lrc_cpu_pass_rules,
    .compile = cpu_compile,
    .compile_package = cpu_compile_package,
    .package_meta = cpu_package_meta,
    .package_weight = cpu_package_weight,
    .functions = cpu_functions,
};
