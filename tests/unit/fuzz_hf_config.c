/* fuzz_hf_config.c — a Hugging Face directory's config.json as a model
 * (frontend/lua/hf.c reads it, frontend/lua/hf.lua maps it onto a built-in
 * model) under mutated input (tests/unit/fuzz.h):
 *
 *   fuzz_hf_config ITERATIONS CONFIG.json...
 *
 * Each input is written as config.json in a scratch directory, which then
 * goes where `lrc inspect DIR` takes it: lrc_model_load, lrc_model_build at
 * inspect's default shape [1, 256], the config printed, the FLOPs and the
 * parameters counted. It must end in a model or a one-line error within
 * 10 s. The models run in fuzz_lua.c's state. */
#include "fuzz.h"
#include "frontend/lua/lrc_lua.h"

enum { MODELS, REFUSED_LOAD, REFUSED_BUILD };
static FILE *devnull;

/* `lrc inspect DIR` without options, printing to devnull: a model or an error. */
static int inspect(const char *model)
{
    lrc_err err;
    lrc_model m;
    lrc_graph *g = lrc_graph_new();
    if (lrc_model_load(&m, model, NULL, NULL, 0, &err)) {
        fuzz_check_error(&err);
        FUZZ_COUNT(REFUSED_LOAD);
    } else if (lrc_model_build(&m, 1, 256, g, &err)) {
        fuzz_check_error(&err);
        FUZZ_COUNT(REFUSED_BUILD);
    } else {
        FUZZ_COUNT(MODELS);
        double bwd;
        lrc_model_print_config(&m, devnull);
        fprintf(devnull, "%g %g %lld\n", lrc_graph_flops(g, &bwd), bwd, (long long)lrc_graph_param_count(g));
    }
    lrc_graph_free(g);
    lrc_model_free(&m);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    fuzz_write("config.json", d, n);
    return inspect(fuzz_dir);
}

#ifndef LRC_LIBFUZZER
static void finish(void)
{
    if (devnull) fclose(devnull);
    devnull = NULL;
}

int main(int argc, char **argv)
{
    static const char *const counts[] = {"models", "refused by lrc_model_load", "refused by lrc_model_build", NULL};
    static const char *const dict[] = {
        /* values */
        "0", "1", "-1", "2", "3", "7", "64", "65536", "2147483647", "2147483648", "4294967296", "9007199254740992",
        "1e308", "-1e308", "1e-320", "0.5", "1.5", "-0.0", "null", "true", "false", "\"\"", "[]", "{}", "[1,2]", "{\"a\":1}",
        /* model types and values lrc.hf reads (unquoted: they replace a string's text) */
        "llama", "mistral", "qwen2", "phi3", "olmo", "mixtral", "gemma", "gemma2", "gpt2", "llama3", "linear", "dynamic",
        "silu", "gelu", "gelu_pytorch_tanh", "gelu_new", "relu",
        /* keys */
        "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size", "vocab_size",
        "head_dim", "rope_theta", "rope_scaling", "rope_type", "factor", "low_freq_factor", "high_freq_factor",
        "original_max_position_embeddings", "sliding_window", "use_sliding_window", "max_window_layers",
        "num_local_experts", "num_experts_per_tok", "tie_word_embeddings", "attention_bias", "mlp_bias", "rms_norm_eps",
        "query_pre_attn_scalar", "attn_logit_softcapping", "final_logit_softcapping", "n_embd", "n_layer", "n_head",
        "n_inner", "n_positions", "layer_norm_epsilon", "model_type", "clip_qkv", "hidden_act", "hidden_activation", NULL};
    static const fuzz_spec spec = {.name = "hf_config", .seeds = "CONFIG.json...", .count_names = counts, .dict = dict,
                                   .timeout_s = 10, .rounds = 3, .words = true, .one = LLVMFuzzerTestOneInput, .finish = finish};
    fuzz_scratch("hf_config");
    devnull = fopen("/dev/null", "w");
    return fuzz_main(argc, argv, &spec);
}
#else
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("hf_config");
    devnull = fopen("/dev/null", "w");
    return 0;
}
#endif
