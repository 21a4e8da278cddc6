/* lrc_cuda_abi.h — what the CUDA renderer (codegen/cuda) and the cuda
 * executor (runtime/cuda_exec.c, cuda_optim.c) must agree on, declared once:
 * how a buffer is stored on the device, the launch table (grids, blocks,
 * scratch, cuBLAS calls) the renderer fills and the executor runs, and the
 * argument structs of the AdamW kernels, whose CUDA C is generated from the
 * same macro. Header only (no code to link), so codegen/cuda may include it
 * while runtime/ still depends on ir/ alone. A package stores the table in
 * package.json; runtime/package_cuda.c alone converts between the two. */
#ifndef LRC_CUDA_ABI_H
#define LRC_CUDA_ABI_H

#include "lrc_ir.h"

/* How a buffer is stored on the device (docs/architecture.md, numerics):
 * activations and weight matrices in bf16, and the biases of a forward
 * graph; gains, LayerRoPE scalars, logits, losses, graph outputs and inputs
 * in f32; ids in i32. The order is the package format's too. */
typedef enum lrc_cuda_storage { LRC_CUDA_F32, LRC_CUDA_BF16, LRC_CUDA_I32 } lrc_cuda_storage;
#define LRC_CUDA_N_STORAGE 3

/* Its name in package.json and in messages: "f32", "bf16", "i32". */
static inline const char *lrc_cuda_storage_name(lrc_cuda_storage s)
{
    return s == LRC_CUDA_BF16 ? "bf16" : s == LRC_CUDA_I32 ? "i32" : "f32";
}
/* Bytes of one element. */
static inline size_t lrc_cuda_storage_bytes(lrc_cuda_storage s) { return s == LRC_CUDA_BF16 ? 2 : 4; }

/* A GEMM of a launch, row-major: C[m, n] = A B^T (matmul), A B (matmul_nn)
 * or A^T B (matmul_tn), A and B the buffers of arguments a_arg and b_arg;
 * with c_arg >= 0, plus that argument's buffer (a residual add, which
 * cuBLASLt's epilogue does as it writes the launch's output); with
 * bias_arg >= 0, plus that argument's vector [n] on every row (a bias, in
 * cuBLASLt's epilogue too). A launch with a bias keeps its kernel, which
 * adds bias and residual to the product in scratch where cuBLASLt offers
 * no algorithm. */
typedef struct lrc_cuda_gemm {
    lrc_op op;
    int64_t m, n, k;
    int a_arg, b_arg, c_arg, bias_arg;
} lrc_cuda_gemm;

/* One launch of the program, in order. A GEMM group runs cuBLAS first (one
 * GEMM, or two of the same input for SwiGLU's gate and up): with a kernel
 * (an epilogue) after it, into the scratch (GEMM i at element offset
 * i m n) that the kernel reads as its last argument; with none, into the
 * group's output; with a bias that cuBLASLt adds, into the group's output,
 * the kernel then skipped. */
typedef struct lrc_cuda_launch {
    char symbol[64];         /* the kernel; "" when cuBLAS alone does the work */
    unsigned grid[3], block; /* blocks of `block` threads */
    int64_t scratch_bytes;   /* workspace passed as the last argument, or 0 */
    /* how it is stored: f32, or bf16 for a gated unit's two products
       where its outputs are bf16 (rounded as the activations they are in
       PyTorch, with half the bytes) */
    lrc_cuda_storage scratch_storage;
    /* bytes a thread reads or writes at once in an element-wise copy or
       row kernel (16 where the shape allows), 0 where the kernel is not one */
    int access_bytes;
    int n_gemm;
    lrc_cuda_gemm gemm[2];
} lrc_cuda_launch;

/* The launch table: what the cuda executor needs besides the plan and the
 * device code. launches[i] belongs to the plan's launch i; storage[b] says
 * how plan buffer b is stored (buffers from n_storage on, the packing
 * buffers a cuda plan never has, are f32). */
typedef struct lrc_cuda_table {
    lrc_cuda_launch *launches;
    int n_launches;
    lrc_cuda_storage *storage;
    int n_storage;
} lrc_cuda_table;

/* ---- the AdamW kernels' arguments (codegen/cuda/prelude.c's optimizer) ---- */

/* One declaration of the two structs the optimizer kernels read from
 * device memory: expanded here for the host (pointers as 64-bit device
 * addresses) and, stringified, into the kernels' CUDA C (real pointers),
 * so the two layouts cannot drift apart. */
#define LRC_CUDA_OPT_STRUCTS(PTR, BF16_PTR, CONST_PTR)                                                                  \
    struct opt_tensor {                                                                                                \
        PTR p;                                                                                                         \
        BF16_PTR p16;                                                                                                  \
        CONST_PTR g;                                                                                                   \
        PTR acc; /* one declarator each: PTR may be a pointer type */                                                 \
        PTR m;                                                                                                         \
        PTR v;                                                                                                         \
        long long n, first_block;                                                                                      \
        int decayed, pad;                                                                                              \
    };                                                                                                                 \
    /* c: 1 - b; nstep: -lr / bc1; sbc2: sqrt(bc2) */                                                                \
    struct opt_hp {                                                                                                    \
        float b1, c1, b2, c2, scale, decay, nstep, sbc2, eps, div;                                                     \
        int n_tensors, from_acc, first;                                                                                \
    };
/* Elements a block of the optimizer kernels handles, and its threads. */
#define LRC_CUDA_OPT_CHUNK 4096
#define LRC_CUDA_OPT_BLOCK 256
/* The sizes both sides assert (the host here, the device in its source). */
#define LRC_CUDA_OPT_TENSOR_BYTES 72
#define LRC_CUDA_OPT_HP_BYTES 52

#define LRC_CUDA_STR_(...) #__VA_ARGS__
/* The text of a macro's expansion, for generated CUDA C. */
#define LRC_CUDA_STR(...) LRC_CUDA_STR_(__VA_ARGS__)

#endif
