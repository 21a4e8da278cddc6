/* fuzz_model_lua.c — model files (Lua) under mutated input
 * (tests/unit/fuzz.h), on the path `lrc inspect MODEL.lua --params` takes:
 * lrc_model_load (frontend/lua/model.c: the file run, its defaults and presets
 * read) and lrc_model_build (the build function through lrc.* and lrc.nn,
 * frontend/lua/lua_api.c) at inspect's default shape [1, 256], then the
 * parameters counted.
 *
 *   fuzz_model_lua ITERATIONS MODEL.lua...
 *
 * Each input is written as model.lua in a scratch directory and must end in
 * a graph or a one-line error within 20 s: a model stuck in a Lua loop ends
 * at model.c's limit of 500 million instructions, some 6 s on an idle
 * machine, and this leaves it room on a loaded one. It runs in fuzz_lua.c's
 * Lua state: no os.execute, no io, 512 MB at most. */
#include "fuzz.h"
#include "frontend/lua/lrc_lua.h"

enum { GRAPHS, REFUSED_LOAD, REFUSED_BUILD };

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    fuzz_write("model.lua", d, n);
    lrc_err err;
    lrc_model m;
    lrc_graph *g = lrc_graph_new();
    if (lrc_model_load(&m, fuzz_path("model.lua"), NULL, NULL, 0, &err)) {
        fuzz_check_error(&err);
        FUZZ_COUNT(REFUSED_LOAD);
    } else if (lrc_model_build(&m, 1, 256, g, &err)) {
        fuzz_check_error(&err);
        FUZZ_COUNT(REFUSED_BUILD);
    } else {
        FUZZ_COUNT(GRAPHS);
        if (lrc_graph_param_count(g) < 0) {
            fprintf(stderr, "fuzz: a negative parameter count\n");
            abort();
        }
    }
    lrc_graph_free(g);
    lrc_model_free(&m);
    return 0;
}

#ifndef LRC_LIBFUZZER
int main(int argc, char **argv)
{
    static const char *const counts[] = {"graphs", "refused by lrc_model_load", "refused by lrc_model_build", NULL};
    static const char *const dict[] = {
        /* values */
        "0", "1", "-1", "2", "3", "7", "64", "65536", "2147483648", "9007199254740992", "1e308", "-1e308", "0.5",
        "1/0", "0/0", "-0.0", "math.huge", "2^63", "math.maxinteger", "math.mininteger", "nil", "true", "false", "{}",
        "\"\"", "\"pre\"", "\"post\"", "\"peri\"", "\"lns\"", "\"deepnet\"", "\"f32\"", "\"i32\"",
        /* syntax */
        "end", "local", "function", "return", "(", ")", "{", "}", "..", "#", "~=", "==", "=", ",", "[", "]", ":",
        /* what a model does */
        "while true do end", "for i = 1, 1e12 do end", "error({})", "error()", "error(nil)",
        "error(setmetatable({}, {__tostring = function() error('x') end}))", "lrc.fail('%s %d %n')",
        "string.rep('x', 1 << 40)", "string.rep('ab', 1 << 20)", "setmetatable({}, {__index = function(t, k) return t[k] end})",
        "coroutine.wrap(function() error('x') end)()", "collectgarbage()", "lrc.param('w', {4, 4})",
        "lrc.param('w', {65536, 65536, 65536})", "lrc.input('x', {1, 2}, 'f32', {default = 0/0})", "lrc.tap('t', x)",
        "pcall(error)", "select('#')", "require('lrc.hf')",
        /* names in models/ */
        "d_model", "n_layers", "n_heads", "d_ff", "vocab", "n_kv_heads", "head_dim", "n_experts", "experts_per_tok",
        "sliding_window", "T", "n_recurrent", "n_prelude", "n_coda", "image_size", "patch", "channels", "n_classes",
        "norm", "eps", "defaults", "presets", "build", "task", "lrc.matmul", "lrc.reshape", "lrc.transpose", "lrc.slice",
        "lrc.attention", "lrc.rmsnorm", "lrc.rope", "lrc.softmax", "lrc.topk", "lrc.gather", "lrc.embedding",
        "lrc.expert_matmul", "lrc.loop_state", "lrc.loop_next", "lrc.depth_gain", "nn.linear", "nn.embedding",
        "nn.rmsnorm", "nn.attention", "nn.swiglu", "nn.moe", "nn.loop", "nn.layerrope", NULL};
    static const fuzz_spec spec = {.name = "model_lua", .seeds = "MODEL.lua...", .count_names = counts, .dict = dict,
                                   .special = "\"'(){}[],.=-+*/#~\n 0\x80\xff", .timeout_s = 20, .rounds = 4,
                                   .words = true, .one = LLVMFuzzerTestOneInput};
    fuzz_scratch("model_lua");
    return fuzz_main(argc, argv, &spec);
}
#else
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("model_lua");
    return 0;
}
#endif
