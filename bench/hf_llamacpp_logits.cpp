// llama.cpp's logits for a text, at every position (bench/hf_llamacpp.py's comparison).
//
//   hf_llamacpp_logits MODEL.gguf TEXT OUT.f32 [THREADS] [KV] [FA]
//
// Tokenizes TEXT with the GGUF's own tokenizer (llama_tokenize, add_special = true, so a
// BOS shows up if the GGUF asks for one), prints the ids on stdout ("ids: 72 101 ..."),
// runs them through llama_decode as one batch with logits for every position, and writes
// OUT.f32: n_tokens x n_vocab little-endian float32, row-major. KV: f16 (llama.cpp's default
// KV cache type) or f32 (K and V cached in f32, for a comparison of f32 weights); FA: auto
// (llama.cpp's default: flash attention where it can, on the CPU too) or off. Only
// llama.h's public API.
// Build: g++ -O2 -std=c++17 -I SRC/include -I SRC/ggml/include hf_llamacpp_logits.cpp
//            -L BUILD/bin -lllama -lggml -lggml-base -Wl,-rpath,BUILD/bin
#include "llama.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char ** argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s MODEL.gguf TEXT OUT.f32 [THREADS] [f16|f32] [auto|off]\n", argv[0]);
        return 2;
    }
    const char * text = argv[2];
    int threads = argc > 4 ? atoi(argv[4]) : 2;
    bool kv_f32 = argc > 5 && strcmp(argv[5], "f32") == 0;
    bool fa_off = argc > 6 && strcmp(argv[6], "off") == 0;
    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    llama_model * model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
    const llama_vocab * vocab = llama_model_get_vocab(model);
    int n_vocab = llama_vocab_n_tokens(vocab);
    int len = (int) strlen(text);
    std::vector<llama_token> ids(len + 8);
    int n = llama_tokenize(vocab, text, len, ids.data(), (int) ids.size(), true, false);
    if (n < 0) { fprintf(stderr, "tokenize failed (%d)\n", n); return 1; }
    ids.resize(n);
    printf("ids:");
    for (int i = 0; i < n; i++) printf(" %d", ids[i]);
    printf("\n");
    fflush(stdout);
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n < 64 ? 64 : n;
    cp.n_batch = cp.n_ctx;
    cp.n_ubatch = cp.n_ctx;
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    if (kv_f32) {
        cp.type_k = GGML_TYPE_F32;
        cp.type_v = GGML_TYPE_F32;
    }
    if (fa_off) cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    llama_context * ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "cannot create a context\n"); return 1; }
    llama_batch batch = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        batch.token[i] = ids[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1;
    }
    batch.n_tokens = n;
    if (llama_decode(ctx, batch) != 0) { fprintf(stderr, "llama_decode failed\n"); return 1; }
    FILE * f = fopen(argv[3], "wb");
    if (!f) { fprintf(stderr, "cannot write %s\n", argv[3]); return 1; }
    for (int i = 0; i < n; i++) fwrite(llama_get_logits_ith(ctx, i), sizeof(float), n_vocab, f);
    fclose(f);
    printf("n_vocab: %d\n", n_vocab);
    llama_batch_free(batch);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
