/* cuemu.h — shared by the emulator's parts (cuemu.c: the driver API;
 * cuemu_nvrtc.c: NVRTC passed through, each image's source registered;
 * cuemu_blas.c: cublasGemmEx; cuemu_cubin.c: a kernel's resources); internal to tests/cuemu. */
#ifndef CUEMU_H
#define CUEMU_H

#include <stddef.h>
#include <stdint.h>

/* bytes of a cubin (an ELF file, to the end of its section headers) or of a
 * PTX text */
size_t cuemu_image_size(const void *image);
/* the registered source of an image; nonzero (with a message) when
 * nothing registered it */
int cuemu_image_paths(const void *image, size_t size, char *src, size_t n);
/* src compiled with prelude.h into a shared library, unless it is there:
 * its path into so (n bytes), named by the architecture the source was
 * compiled for (what NVRTC was asked for; else LRC_CUEMU_SM), which the
 * host compile defines as __CUDA_ARCH__ (900 for sm_90) */
int cuemu_compile(const char *src, char *so, size_t n);
/* src (its name for messages) with each asm statement a call of its model
 * in prelude.h (cuemu_asm.c); NULL, with a message naming the statement,
 * when one has none. The caller frees it. */
char *cuemu_asm_rewrite(const char *src, const char *name);
/* what a cubin says of kernel name (cuemu_cubin.c): the most threads a
 * block may have (its __launch_bounds__; 0 when unsaid), registers a thread
 * and static shared memory; nonzero when image is no cubin or lacks it */
typedef struct {
    unsigned max_threads, regs;
    size_t shared;
} cuemu_resources;
int cuemu_cubin_resources(const void *image, size_t size, const char *name, cuemu_resources *out);
/* nonzero, with a message, when a kernel or GEMM wrote past an allocation */
int cuemu_check_guards(const char *what);

/* ---- streams and graphs (cuemu_graph.c) ---- */
/* a recorded call: runs it with its copied arguments; a driver or cuBLAS status */
typedef int (*cuemu_replay_fn)(void *payload);
#define CUEMU_CAPTURED (-1)
/* A call that goes on stream s (NULL: the legacy stream), its arguments in
 * payload (size bytes): 0 to run it now; CUEMU_CAPTURED when a capture on s
 * recorded it (replay runs it at each launch of the graph); otherwise the
 * driver's error (s is no stream; another stream while a capture is on). */
int cuemu_stream_use(void *s, cuemu_replay_fn replay, const void *payload, size_t size);
/* for a call that waits for the device: the driver's error while a capture
 * is on (it invalidates the capture), else 0 */
int cuemu_capture_refuses(void);

#endif
