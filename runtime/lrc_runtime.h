/* lrc_runtime.h — the public header of the runtime layer: host tensors,
 * safetensors files, parameter initialisation, the backend interface and the
 * executor. Depends on ir/ only, so that a compiled package runs without Lua,
 * LLVM or NVRTC. */
#ifndef LRC_RUNTIME_H
#define LRC_RUNTIME_H

#include "../ir/lrc_ir.h"

/* ---- safetensors ------------------------------------------------------- */

/* Reads the whole file; every structural problem (header length past the end,
 * invalid JSON, unknown dtype, offsets outside the data or overlapping, a
 * size that does not match the shape) is reported with the file name and the
 * byte offset or tensor name. */
int lrc_safetensors_load(const char *path, lrc_tensor_set *out, lrc_err *err);
/* Same, from memory (the fuzz and unit tests use it). `what` names the source. */
int lrc_safetensors_parse(const uint8_t *buf, size_t len, const char *what, lrc_tensor_set *out,
                          lrc_err *err);
/* Writes a temporary file beside path and renames it over path, so a reader
 * never sees a partial file and a failure leaves no file behind. */
int lrc_safetensors_save(const char *path, const lrc_tensor_set *s, lrc_err *err);

/* ---- parameters -------------------------------------------------------- */

/* One f32 tensor per PARAM node of g, filled by its init rule. Each tensor's
 * random stream depends only on (seed, name), so adding a parameter does not
 * change the others. */
int lrc_params_init(const lrc_graph *g, uint64_t seed, lrc_tensor_set *out, lrc_err *err);
/* Checks that `file` holds exactly g's parameters with the right shapes and
 * returns them as f32 tensors in *out (ordered as in g). Reports a missing,
 * extra or wrongly shaped tensor by name; `what` names the file. */
int lrc_params_bind(const lrc_graph *g, const lrc_tensor_set *file, const char *what,
                    lrc_tensor_set *out, lrc_err *err);

/* Deterministic random numbers (splitmix64 seeding a xoshiro256** stream). */
typedef struct lrc_rng {
    uint64_t s[4];
} lrc_rng;
void lrc_rng_seed(lrc_rng *r, uint64_t seed);
uint64_t lrc_rng_next(lrc_rng *r);
double lrc_rng_uniform(lrc_rng *r); /* [0, 1) with 53 random bits */
double lrc_rng_normal(lrc_rng *r);  /* N(0, 1), Box-Muller */
uint64_t lrc_hash_str(const char *s, uint64_t seed);

/* ---- backends ---------------------------------------------------------- */

typedef struct lrc_backend lrc_backend;

/* What every target provides (DESIGN rule 6). Buffers are opaque handles. */
typedef struct lrc_backend_ops {
    const char *name;
    bool (*supports_op)(const lrc_graph *g, const lrc_node *n);
    void *(*alloc)(lrc_backend *be, size_t nbytes, lrc_err *err);
    void (*free)(lrc_backend *be, void *buf);
    int (*write)(lrc_backend *be, void *dst, const void *src, size_t nbytes, lrc_err *err);
    int (*read)(lrc_backend *be, void *dst, const void *src, size_t nbytes, lrc_err *err);
    /* Runs node `id` of g; bufs[k] holds input k, out the result. */
    int (*launch)(lrc_backend *be, const lrc_graph *g, int id, void *const *bufs, void *out, lrc_err *err);
    int (*synchronize)(lrc_backend *be, lrc_err *err);
    void (*destroy)(lrc_backend *be);
} lrc_backend_ops;

struct lrc_backend {
    const lrc_backend_ops *ops;
    void *impl;
};

/* The reference backend: plain C, f32 storage, f64 accumulation. */
lrc_backend *lrc_backend_ref_new(void);
/* Looks a backend up by name ("ref"); explains which exist when not found. */
lrc_backend *lrc_backend_open(const char *name, lrc_err *err);
void lrc_backend_close(lrc_backend *be);
/* Names of the backends this build knows, comma-separated. */
const char *lrc_backend_list(void);

/* ---- the executor ------------------------------------------------------ */

/* Runs g on a backend. `inputs` holds a tensor for every INPUT node and
 * `params` one for every PARAM node (f32; see lrc_params_bind). The graph's
 * outputs are appended to *outputs as f32/i32 host tensors named like the
 * outputs. Intermediates are freed after their last use. */
int lrc_exec_run(lrc_backend *be, const lrc_graph *g, const lrc_tensor_set *inputs,
                 const lrc_tensor_set *params, lrc_tensor_set *outputs, lrc_err *err);

#endif
