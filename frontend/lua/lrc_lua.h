/* lrc_lua.h — the public header of the Lua binding (frontend/lua/): the
 * embedded Lua state, model descriptions and their configuration. */
#ifndef LRC_LUA_H
#define LRC_LUA_H

#include "../../ir/lrc_ir.h"
#include "../../runtime/lrc_runtime.h"

typedef struct lua_State lua_State;

/* Registers the `lrc` module (graph-building API) and the embedded Lua
 * libraries (`lrc.nn`) in L. */
void lrc_lua_open(lua_State *L);
/* While g is set, lrc.* calls in L add nodes to g; NULL ends building. */
void lrc_lua_set_graph(lua_State *L, lrc_graph *g);
/* The registry key of whether the graph being built is a training graph
 * (lrc.training() reads it; model.c's build sets it). */
#define LRC_LUA_TRAINING_KEY "lrc.training"
/* "model.lua:42", the innermost line of a user's model file on L's stack
 * (skipping lrc's own Lua library), or "?" */
const char *lrc_lua_where(lua_State *L, char *buf, size_t n);
/* The graph being built; raises a Lua error outside a build. */
lrc_graph *lrc_lua_graph(lua_State *L);
/* Replaces the generic builders of the ops along one axis in the `lrc`
 * module that lrc_lua_open registered (lua_along.c). */
void lrc_lua_open_along(lua_State *L);
/* Pushes a tensor handle for node id of the graph being built. */
void lrc_lua_push_tensor(lua_State *L, int id);
/* Node id of the tensor handle at idx, or -1. */
int lrc_lua_tensor_id(lua_State *L, int idx);
/* The default lrc.input(name, shape, dtype, {default = v}) declared for
 * input `name` in the latest build: v into *value, true; false when none. */
bool lrc_lua_input_default(lua_State *L, const char *name, double *value);
/* lrc.tap(name, x) in a model: a tensor a tool reads by name. While taps
 * are on, each call records x's node; lrc_lua_tap_list returns them in the
 * order tapped (*taps allocated, the count returned). */
typedef struct lrc_tap {
    char name[64];
    int id;
} lrc_tap;
void lrc_lua_taps(lua_State *L, bool on);
int lrc_lua_tap_list(lua_State *L, lrc_tap **taps);

/* Embedded sources (generated at build time from frontend/lua and models/). */
typedef struct lrc_embedded {
    const char *name; /* "lrc.nn", "models/llama.lua" */
    const char *source;
    size_t len;
} lrc_embedded;
extern const lrc_embedded lrc_embedded_files[];
extern const int lrc_embedded_count;

/* A loaded model description with its resolved configuration. */
/* What a model takes and predicts (its table's `task` field). */
typedef enum lrc_task {
    LRC_TASK_LM,    /* tokens [B, T] -> next-token logits [B, T, vocab] (the default) */
    LRC_TASK_IMAGE, /* "image-classification": images f32 [B, channels, image_size,
                       image_size] -> class logits [B, n_classes] */
} lrc_task;

typedef struct lrc_model {
    lua_State *L;
    char *path;   /* as given, or "models/llama.lua" for an embedded one */
    int mod_ref;  /* registry refs: the module table, the config table */
    int cfg_ref;
    lrc_task task;
    char *hf_dir;   /* a Hugging Face directory's path, else NULL */
    int hf_ref;     /* registry refs: lrc.hf and the directory's config.json */
    int hf_cfg_ref;
    char *hf_type;  /* its config.json's model_type, else NULL */
} lrc_model;

/* A directory holding config.json: a Hugging Face model (frontend/lua/hf.c). */
bool lrc_hf_is_dir(const char *path);
/* Pushes DIR/config.json as a Lua table (objects and arrays as tables, an
 * array's marked __array = true; null as lrc.null, a light userdata). */
int lrc_hf_push_config(struct lua_State *L, const char *dir, lrc_err *err);
/* The model files lrc.hf searches for a model_type (frontend/lua/hf_families.c):
 * pushes a list of levels, searched in order, each a list of
 * {name = FILE, builtin = BOOL}: one per folder of $LRC_MODEL_PATH, then the
 * built-in models. An unreadable folder is an error. */
int lrc_hf_push_family_files(struct lua_State *L, lrc_err *err);
/* Pushes load(name, builtin), which runs a model file and returns its table. */
void lrc_hf_push_family_loader(struct lua_State *L);
/* The built-in model embedded as FILE ("models/llama.lua"), or NULL. */
const lrc_embedded *lrc_embedded_model(const char *file);

/* Loads MODEL (a path, a Hugging Face directory, or the name of an embedded model such as "llama"),
 * applies the preset (may be NULL) and then each "KEY=VALUE" in sets.
 * Unknown keys, values of the wrong type and unknown presets are errors. */
int lrc_model_load(lrc_model *m, const char *model, const char *preset, char *const *sets, int n_sets,
                   lrc_err *err);
void lrc_model_free(lrc_model *m);
/* Builds the forward graph into g: an INPUT "tokens" [B, T] (or, for an
 * image model, "images" [B, C, S, S], T unused) and an output "logits". */
int lrc_model_build(lrc_model *m, int64_t B, int64_t T, lrc_graph *g, lrc_err *err);
/* The same, with the tensors the model tapped (lrc.tap) in *taps, *n of them. */
int lrc_model_build_tapped(lrc_model *m, int64_t B, int64_t T, lrc_graph *g, lrc_tap **taps, int *n, lrc_err *err);
/* The training graph: the forward graph, an INPUT "labels" (I32 [B, T],
 * or [B] for an image model; -100 ignored), the mean cross-entropy as output "loss", then one gradient
 * output per parameter: the pass pipeline run to its autodiff step. */
int lrc_model_build_training(lrc_model *m, int64_t B, int64_t T, lrc_graph *g, lrc_err *err);
/* The graph of a Hugging Face export (lrc export --hf): the model built at
 * [1, 1] for its parameters, then its to_hf(cfg), whose tensors (named as
 * the Hugging Face checkpoint's) become the outputs of *gp (pruned to
 * them); *config_ref is a registry ref to the config.json table it gave. */
int lrc_model_build_export(lrc_model *m, lrc_graph **gp, int *config_ref, lrc_err *err);
/* Writes the Lua table at idx as JSON (keys sorted; a table with
 * __array = true or a non-empty sequence is an array) to path, atomically. */
int lrc_hf_write_json(struct lua_State *L, int idx, const char *path, lrc_err *err);
/* A tokenizer.json for byte tokens: ids 0..255 are the bytes (as GPT-2's
 * byte-level BPE writes them, with no merges), ids 256..vocab-1 unused. */
int lrc_hf_write_byte_tokenizer(const char *path, int64_t vocab, lrc_err *err);

/* Checks the tensors of an input file (path) against the model's inputs
 * want[0..n), drops a "labels" that none of them is (backward's, in a file
 * that forward reads too), and adds what the model gives (m may be NULL): an input's
 * declared default (lrc_model_default_input), a
 * looped model's "iterations" (its config T for every row; in a training
 * graph T - min(T, mu_bwd) with "iteration_mask" for the unrolled rest) and
 * "h0" (TruncNormal(0, sqrt(2 / 5d)) from a fixed seed). */
int lrc_model_complete_inputs(const lrc_plan_buf *want, int n, lrc_model *m, lrc_tensor_set *in, const char *path,
                              lrc_err *err);

/* Input `want` filled with the default the model declared for it
 * (lrc.input's {default = v}; v into *value when value is not NULL) into
 * *out; *out NULL when it declares none. i32 inputs are filled as i32,
 * the others as f32, as the executors take them. */
int lrc_model_default_input(lrc_model *m, const lrc_plan_buf *want, lrc_tensor **out, double *value, lrc_err *err);

/* Adds to `in` each input of g that it lacks, filled with the model's
 * declared default, and says which into said ("input 'attention_mask'
 * [4,256] f32 filled with its default 1", comma-separated; "" for none);
 * an input with no default is an error naming it. */
int lrc_model_fill_defaults(lrc_model *m, const lrc_graph *g, lrc_tensor_set *in, char *said, size_t cap, lrc_err *err);

/* The INPUT nodes of g as plan buffers (names borrowed), at most cap;
 * returns how many. */
int lrc_model_graph_inputs(const lrc_graph *g, lrc_plan_buf *out, int cap);

/* Integer config value (e.g. "vocab"); returns -1 with err set when absent. */
int lrc_model_config_int(lrc_model *m, const char *key, int64_t *out, lrc_err *err);
/* Number config value (integer or float), else an error. */
int lrc_model_config_number(lrc_model *m, const char *key, double *out, lrc_err *err);
/* Prints the resolved configuration, "key = value" a line, sorted. */
void lrc_model_print_config(lrc_model *m, FILE *out);

#endif
