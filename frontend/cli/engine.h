/* engine.h — a ready-to-run program for the cpu target, from a model
 * (compiled just in time) or a package (internal to frontend/). */
#ifndef LRC_ENGINE_H
#define LRC_ENGINE_H

#include "cli.h"
#include "../compile/lrc_compile.h"

typedef struct cli_engine {
    bool is_package;
    lrc_package pkg;
    lrc_model model;
    lrc_compiled comp;
    bool have_pkg, have_model, have_comp;
    lrc_tensor_set wfile, folded;
    const lrc_tensor_set *params; /* what the plan's parameters are bound to */
    const lrc_plan *plan;
    lrc_pool *pool;
    lrc_exec *x;
    lrc_kernel_fn peak;           /* the FMA probe, or NULL */
    int64_t vocab;
    double build_ms;              /* Lua to graph */
} cli_engine;

/* MODEL (built for tokens [B, T] with --weights) or PKG (its own shapes;
 * weights inside or --weights), --threads: ready to run. */
int cli_engine_open(const cli_args *a, int64_t B, int64_t T, cli_engine *e, lrc_err *err);
/* The same for one decoding step (T new tokens) with KV caches of ctx
 * positions: inputs "tokens" and "pos", states "cache.L.k/v". */
int cli_engine_open_decoder(const cli_args *a, int64_t T, int64_t ctx, cli_engine *e, lrc_err *err);
void cli_engine_close(cli_engine *e);
/* The input file's tensors (from path) checked against the engine's plan,
 * completed with what the model or package gives (a looped model's
 * iterations and initial state). */
int cli_engine_inputs(cli_engine *e, lrc_tensor_set *in, const char *path, lrc_err *err);
/* FLOPs one work item of the probe computes. */
double cli_engine_peak_flops_per_item(const cli_engine *e);

#endif
