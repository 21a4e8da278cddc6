/* fuzz_package.c — a compiled package (runtime/package.c's loader,
 * package_launches.c's checks, the plan's executor) opened, bound and run
 * through the embedding API (runtime/lrc.h) under mutated input
 * (tests/unit/fuzz.h):
 *
 *   fuzz_package ITERATIONS PKG[:WEIGHTS]... [--replay INPUT...]
 *
 * Each PKG is a package directory (tests/unit/fuzz_packages.sh compiles
 * them; a cuda one opens as far as the device where there is no GPU);
 * WEIGHTS, the file bound when it opens without weights.
 * Its package.json and each shape's (shape-BxT/package.json) are the seeds.
 * An input is a header line of HEADER bytes, which mutations leave alone,
 * and the text of one package.json:
 *
 *   lrc-fuzz-package base=llama json=shape-1x4/package.json op=s file=kernels.so arg=123 run=5
 *
 * For each input the scratch directory becomes the package BASE (its files
 * linked, its shapes' directories made), with the text as its file JSON
 * and one change to the directory, op on file: '.' none, 'm' missing, 't'
 * truncated to arg mod (size + 1) bytes, 'f' one bit flipped, 's' swapped
 * for (or given) the file of that name of another seed package (for
 * kernels.so with package.json's size and hash made to match, when arg is
 * odd). The package is then opened (lrc_session_open), its weights bound
 * when it has none or when run asks, and run once on small valid inputs
 * (run's bits: 1 a shorter run, 2 the optional inputs left to their
 * defaults, 4 timed, 8 its tokenizer used, 16 its weights bound again, 32
 * two threads), a decoder stepped three times and reset. With run's bit
 * 64, the text's kernels_bytes and kernels_fnv1a are first made those of
 * the kernels beside it, so that a saved input (tests/unit/fuzz_inputs)
 * still reaches what it tests where the seed packages' kernels.so differ
 * (another CPU, another LLVM). Every call must
 * give a result or a one-line error within 10 s.
 *
 * Besides fuzz.h's byte mutations, three mutations in four edit the JSON
 * as a document (fuzz_package_json.h). */
#include "fuzz.h"
#include "fuzz_package_json.h"
#include "runtime/lrc.h"

#define HEADER 128
#define MAX_BASES 16
#define MAX_BASE_FILES 32
#define MAX_SEEDS 64

enum { OPENED, REFUSED_OPEN, RAN, REFUSED_RUN, STEPPED, TOO_LARGE };

typedef struct base {
    char name[32];
    char dir[2048];                  /* absolute */
    char bind[2048];                 /* the weights bound when the package opens without any; "" none */
    char *files[MAX_BASE_FILES];     /* relative paths, a directory ("shape-1x4/") before its files */
    int n_files;
} base;

static base bases[MAX_BASES];
static int n_bases;
#ifndef LRC_LIBFUZZER
static struct {
    const uint8_t *d;                /* the seed's bytes, as fuzz_main holds them */
    int base;
    char json[64];
} seeds[MAX_SEEDS];
static int n_seeds;
#endif

/* ---- the seed packages ------------------------------------------------- */

static void add_file(base *b, const char *rel)
{
    if (b->n_files < MAX_BASE_FILES) b->files[b->n_files++] = lrc_strdup(rel);
}

/* The base's files: the top level's, then each shape-* directory and its files. */
static void list_files(base *b, const char *sub)
{
    char path[4200], rel[300];
    snprintf(path, sizeof path, "%s%s%s", b->dir, *sub ? "/" : "", sub);
    struct dirent **ents;
    int n = scandir(path, &ents, NULL, alphasort); /* sorted: the same files in the same order everywhere */
    for (int i = 0; i < n; i++) {
        const char *e = ents[i]->d_name;
        struct stat st;
        snprintf(path, sizeof path, "%s/%s%s%s", b->dir, sub, *sub ? "/" : "", e);
        snprintf(rel, sizeof rel, "%s%s%s", sub, *sub ? "/" : "", e);
        if (e[0] != '.' && stat(path, &st) == 0) {
            if (S_ISREG(st.st_mode)) add_file(b, rel);
            else if (S_ISDIR(st.st_mode) && !*sub && !strncmp(e, "shape-", 6)) {
                snprintf(rel, sizeof rel, "%s/", e);
                add_file(b, rel);
                list_files(b, e);
            }
        }
        free(ents[i]);
    }
    if (n >= 0) free(ents);
}

/* "DIR[:WEIGHTS]" as a base; its index, or -1. */
static int add_base(const char *arg)
{
    char dir[2048], *colon;
    snprintf(dir, sizeof dir, "%s", arg);
    base *b = &bases[n_bases];
    memset(b, 0, sizeof *b);
    if ((colon = strchr(dir, ':'))) {
        *colon = 0;
        if (!realpath(colon + 1, b->bind)) return fprintf(stderr, "fuzz_package: %s: %s\n", colon + 1, strerror(errno)), -1;
    }
    if (n_bases == MAX_BASES || !realpath(dir, b->dir)) return fprintf(stderr, "fuzz_package: %s: not a package\n", dir), -1;
    const char *slash = strrchr(b->dir, '/');
    snprintf(b->name, sizeof b->name, "%s", slash ? slash + 1 : b->dir);
    list_files(b, "");
    return n_bases++;
}

#ifndef LRC_LIBFUZZER
/* The base whose package.json or shape's package.json path is. */
static int base_of(const char *path, const char **rel)
{
    char abs[4096];
    if (!realpath(path, abs)) return -1;
    for (int i = 0; i < n_bases; i++) {
        size_t k = strlen(bases[i].dir);
        if (!strncmp(abs, bases[i].dir, k) && abs[k] == '/') return *rel = path + strlen(path) - strlen(abs + k + 1), i;
    }
    return -1;
}
#endif

static int find_base(const char *name)
{
    for (int i = 0; i < n_bases; i++)
        if (!strcmp(bases[i].name, name)) return i;
    return -1;
}

/* ---- the scratch package ----------------------------------------------- */

/* fuzz_dir/rel replaced by data (never written through a link into a seed). */
static void put(const char *rel, const void *data, size_t n)
{
    unlink(fuzz_path(rel));
    fuzz_write(rel, data, n);
}

/* fuzz_dir/rel a link to target; false when it cannot be made (a header's
 * file in a directory the package lacks). */
static bool put_link(const char *rel, const char *target)
{
    unlink(fuzz_path(rel));
    if (symlink(target, fuzz_path(rel))) return false;
    fuzz_scratch_also(rel);
    return true;
}

/* The scratch directory as package b: its directories made, its files linked. */
static void make_tree(const base *b)
{
    char target[4200];
    fuzz_scratch_empty("");
    for (int i = 0; i < b->n_files; i++) {
        const char *f = b->files[i];
        if (f[strlen(f) - 1] == '/') {
            if (mkdir(fuzz_path(f), 0755)) fprintf(stderr, "fuzz: cannot create %s: %s\n", fuzz_path(f), strerror(errno)), exit(2);
            fuzz_scratch_also(f);
            continue;
        }
        snprintf(target, sizeof target, "%s/%s", b->dir, f);
        if (!put_link(f, target)) fprintf(stderr, "fuzz: cannot link %s: %s\n", fuzz_path(f), strerror(errno)), exit(2);
    }
}

static uint8_t *read_all(const char *path, size_t *n)
{
    lrc_err err;
    uint8_t *d = (uint8_t *)lrc_read_file(path, n, &err);
    if (!d) fprintf(stderr, "fuzz_package: %s\n", err.msg), exit(2);
    return d;
}

static const char *last_part(const char *rel)
{
    const char *slash = strrchr(rel, '/');
    return slash ? slash + 1 : rel;
}

/* The k-th (mod their count) of the seed packages' files named like rel's
 * last part (for weights.safetensors, the weights to bind too), b's own
 * left out; NULL when there is none. */
static const char *other_file(int b, const char *rel, uint32_t k, char *out, size_t cap)
{
    char own[4200], cand[MAX_BASES * (MAX_BASE_FILES + 1)][2]; /* base, file (MAX_BASE_FILES: its weights to bind) */
    snprintf(own, sizeof own, "%s/%s", bases[b].dir, rel);
    int n = 0;
    for (int j = 0; j < n_bases; j++)
        for (int f = 0; f <= bases[j].n_files; f++) {
            bool bind = f == bases[j].n_files;
            if (bind ? bases[j].bind[0] && !strcmp(last_part(rel), "weights.safetensors") : !strcmp(last_part(bases[j].files[f]), last_part(rel)))
                cand[n][0] = (char)j, cand[n++][1] = (char)(bind ? MAX_BASE_FILES : f);
        }
    for (int tries = 0; tries < n; tries++, k++) {
        const base *o = &bases[(int)cand[k % (uint32_t)n][0]];
        int f = cand[k % (uint32_t)n][1];
        if (f == MAX_BASE_FILES) snprintf(out, cap, "%s", o->bind);
        else snprintf(out, cap, "%s/%s", o->dir, o->files[f]);
        if (strcmp(out, own)) return out;
    }
    return NULL;
}

/* text (a package.json) with its kernels' size and hash those of the file
 * at so; newly allocated. */
static char *with_digest(const char *text, size_t n, const char *so, size_t *out_n)
{
    size_t kn;
    uint8_t *k = read_all(so, &kn);
    char hex[32], num[32];
    snprintf(hex, sizeof hex, "\"%016llx\"", (unsigned long long)lrc_fnv1a(LRC_FNV_SEED, k, kn));
    snprintf(num, sizeof num, "%zu", kn);
    free(k);
    char *t = malloc(n + 128);
    memcpy(t, text, n);
    *out_n = n;
    const char *keys[] = {"\"kernels_bytes\":", "\"kernels_fnv1a\":"}, *vals[] = {num, hex};
    for (int i = 0; i < 2; i++) {
        t[*out_n] = 0;
        char *at = strstr(t, keys[i]);
        if (!at) continue;
        size_t a = (size_t)(at - t) + strlen(keys[i]), e;
        while (a < *out_n && (t[a] == ' ' || t[a] == '\t')) a++;
        e = a;
        if (e < *out_n && t[e] == '"') for (e++; e < *out_n && t[e] != '"';) e++;
        else while (e < *out_n && fuzz_is_word((uint8_t)t[e])) e++;
        if (e < *out_n && t[e] == '"') e++;
        size_t add = strlen(vals[i]);
        if (*out_n - (e - a) + add > n + 127) continue;
        memmove(t + a + add, t + e, *out_n - e);
        memcpy(t + a, vals[i], add);
        *out_n = *out_n - (e - a) + add;
    }
    return t;
}

/* package.json at rel (in the scratch package) saying the size and hash of
 * the kernels beside it, as they are there. */
static void refresh_digest(const char *rel)
{
    char so[300];
    for (int i = 0; i < 2; i++) {
        snprintf(so, sizeof so, "%.*s%s", (int)(last_part(rel) - rel), rel, i ? "kernels.cubin" : "kernels.so");
        if (access(fuzz_path(so), R_OK) == 0 && access(fuzz_path(rel), R_OK) == 0) {
            char kernels[600];
            snprintf(kernels, sizeof kernels, "%s", fuzz_path(so));
            size_t fn, m;
            uint8_t *d = read_all(fuzz_path(rel), &fn);
            char *t = with_digest((const char *)d, fn, kernels, &m);
            put(rel, t, m);
            free(d), free(t);
            return;
        }
    }
}

/* The change op makes to file rel of the scratch package (package b's). */
static void change(int b, char op, const char *rel, uint32_t arg)
{
    char other[4200];
    bool dir = rel[strlen(rel) - 1] == '/';
    if (op == 'm') {
        if (!dir) unlink(fuzz_path(rel));
        else {
            char sub[300];
            snprintf(sub, sizeof sub, "%.*s", (int)strlen(rel) - 1, rel);
            fuzz_scratch_empty(sub);
            rmdir(fuzz_path(sub));
        }
    } else if ((op == 't' || op == 'f') && !dir && access(fuzz_path(rel), R_OK) == 0) {
        size_t fn;
        uint8_t *d = read_all(fuzz_path(rel), &fn);
        if (op == 't') fn = arg % (fn + 1);
        else if (fn) d[arg % fn] ^= (uint8_t)(1u << (arg >> 29));
        put(rel, d, fn);
        free(d);
    } else if (op == 's' && !dir && other_file(b, rel, arg / 2, other, sizeof other)) {
        if (!put_link(rel, other) || !(arg & 1) || strcmp(last_part(rel), "kernels.so")) return;
        char beside[300]; /* the package.json beside it says the new kernels' size and hash */
        snprintf(beside, sizeof beside, "%.*spackage.json", (int)(last_part(rel) - rel), rel);
        refresh_digest(beside);
    }
}

/* ---- an input: the header, the package, the run ------------------------ */

#ifndef LRC_LIBFUZZER
/* fuzz_spec.start: the header for a seed (a change picked at random), then the seed's text. */
static size_t start(uint8_t *buf, size_t cap, const uint8_t *seed, size_t n, int group)
{
    (void)group;
    int s = 0;
    while (s < n_seeds && seeds[s].d != seed) s++;
    const base *b = &bases[seeds[s].base];
    static const char ops[] = ".mtfs";
    char op = pick(2) ? '.' : ops[1 + pick(4)];
    /* a file of the package, or one it lacks that another has */
    const char *extra[] = {"weights.safetensors", "tokenizer.json"}, *file = pick(8) ? b->files[pick((uint32_t)b->n_files)] : extra[pick(2)];
    char h[HEADER + 1];
    int k = snprintf(h, sizeof h, "lrc-fuzz-package base=%s json=%s op=%c file=%s arg=%u run=%x", b->name, seeds[s].json, op,
                     file, (uint32_t)fuzz_next(), pick(128));
    if (k >= HEADER) fprintf(stderr, "fuzz_package: %s: a name too long for the header\n", b->dir), exit(2);
    memset(h + k, ' ', HEADER - (size_t)k);
    h[HEADER - 1] = '\n';
    if (n + HEADER > cap) n = cap - HEADER;
    memcpy(buf, h, HEADER);
    memcpy(buf + HEADER, seed, n);
    return n + HEADER;
}
#endif

static void check_msg(lrc_session *s)
{
    lrc_err err;
    snprintf(err.msg, sizeof err.msg, "%s", lrc_session_error(s));
    fuzz_check_error(&err);
}

/* The inputs a run takes, each of the shape compiled (a shorter one where
 * the package allows it, with run & 1), filled with valid values; the
 * optional ones (iterations, h0) left out with run & 2. Returns how many,
 * or -1 when one would be too large to make. */
static int make_inputs(lrc_session *s, const lrc_session_info *info, int run, lrc_array *in, void **data)
{
    int n = 0;
    for (int i = 0; i < info->n_inputs && n < 8; i++) {
        lrc_array a;
        if (lrc_session_input(s, i, &a)) {
            check_msg(s);
            for (int k = 0; k < n; k++) free(data[k]);
            return -1;
        }
        if ((run & 2) && (!strcmp(a.name, "iterations") || !strcmp(a.name, "h0"))) continue;
        if ((run & 1) && !strcmp(a.name, "tokens") && a.ndim == 2) {
            if (info->shorter_batch && a.shape[0] > 1) a.shape[0] /= 2;
            if (info->shorter_seq && a.shape[1] > 1) a.shape[1] = (a.shape[1] + 1) / 2;
        }
        int64_t numel = 1;
        bool big = false;
        for (int d = 0; d < a.ndim; d++)
            if (a.shape[d] && numel > (1 << 22) / a.shape[d]) big = true;
            else numel *= a.shape[d];
        if (big) {
            for (int k = 0; k < n; k++) free(data[k]);
            return -1;
        }
        size_t es = a.elem == LRC_ELEM_BF16 || a.elem == LRC_ELEM_F16 ? 2 : 4;
        void *d = calloc((size_t)numel + 1, es);
        int64_t vocab = info->vocab > 0 && info->vocab < 256 ? info->vocab : 256;
        for (int64_t e = 0; e < numel; e++) {
            if (a.elem == LRC_ELEM_F32) ((float *)d)[e] = 0.1f * (float)(e % 7 - 3);
            else if (a.elem == LRC_ELEM_I32) ((int32_t *)d)[e] = !strcmp(a.name, "iterations") ? 1 + (int32_t)(e % 2) : (int32_t)((e * 37) % vocab);
        }
        a.data = data[n] = d;
        in[n++] = a;
    }
    return n;
}

/* n floats read, to the last (a sanitizer sees a short buffer) */
static void touch(const float *x, int64_t n)
{
    volatile float sum = 0;
    for (int64_t i = 0; i < n; i++) sum += x[i];
    (void)sum;
}

/* Every output of the last run read. */
static void read_outputs(lrc_session *s, const lrc_session_info *info)
{
    for (int o = 0; o < info->n_outputs; o++) {
        lrc_array a;
        if (lrc_session_output_at(s, o, &a)) {
            check_msg(s);
            continue;
        }
        int64_t numel = 1;
        for (int d = 0; d < a.ndim; d++) numel *= a.shape[d];
        if (a.elem == LRC_ELEM_F32) touch(a.data, numel);
    }
}

/* What a program does with an opened package: bind, run, step, tokenize. */
static void use(lrc_session *s, const base *b, int run)
{
    lrc_session_info info;
    if (lrc_session_describe(s, &info)) return check_msg(s);
    const char *w = b->bind[0] ? b->bind : fuzz_path("weights.safetensors");
    if ((!info.has_weights || (run & 16)) && lrc_session_bind_weights_file(s, w)) check_msg(s);
    lrc_array in[8];
    void *data[8];
    int n = make_inputs(s, &info, run, in, data);
    if (n < 0) FUZZ_COUNT(TOO_LARGE);
    else if (lrc_session_run(s, in, n)) check_msg(s), FUZZ_COUNT(REFUSED_RUN);
    else {
        FUZZ_COUNT(RAN);
        read_outputs(s, &info);
        double ms;
        if ((run & 4) && lrc_session_time(s, 1, &ms)) check_msg(s);
    }
    for (int i = 0; i < n; i++) free(data[i]);
    for (int k = 0; k < 4 && info.context > 0; k++) {
        const float *logits;
        int64_t vocab;
        if (k == 3 && lrc_session_reset(s)) check_msg(s);
        if (lrc_session_step(s, (int32_t)(k * 5 + 1), &logits, &vocab)) check_msg(s);
        else FUZZ_COUNT(STEPPED), touch(logits, vocab);
    }
    if (run & 8) {
        const int32_t *ids;
        int64_t k;
        const char *text;
        size_t len;
        if (lrc_session_tokenize(s, "Hello world", 11, 1, &ids, &k)) check_msg(s);
        else if (lrc_session_detokenize(s, ids, k, &text, &len)) check_msg(s);
    }
}

/* A header's path stays in the scratch package: a file at its top or in a shape's directory. */
static bool inside(const char *rel)
{
    const char *slash = strchr(rel, '/');
    return rel[0] && rel[0] != '/' && !strstr(rel, "..") && (!slash || !strchr(slash + 1, '/'));
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n)
{
    char h[HEADER + 1], name[32], json[64], file[64], op;
    unsigned arg, run;
    if (n < HEADER || memcmp(d, "lrc-fuzz-package ", 17)) return 0;
    memcpy(h, d, HEADER);
    h[HEADER] = 0;
    if (sscanf(h, "lrc-fuzz-package base=%31s json=%63s op=%c file=%63s arg=%u run=%x", name, json, &op, file, &arg, &run) != 6) return 0;
    int b = find_base(name);
    if (b < 0 || !inside(json) || !inside(file) || strcmp(last_part(json), "package.json")) return 0;
    make_tree(&bases[b]);
    if (strchr(json, '/')) { /* a shape's package.json: its directory */
        char sub[64];
        snprintf(sub, sizeof sub, "%.*s", (int)(strchr(json, '/') - json), json);
        if (mkdir(fuzz_path(sub), 0755) && errno != EEXIST) return 0;
        fuzz_scratch_also(sub);
    }
    put(json, d + HEADER, n - HEADER);
    if (run & 64) refresh_digest(json);
    change(b, op, file, arg);
    lrc_session_options o = lrc_session_default_options();
    o.threads = run & 32 ? 2 : 1;
    lrc_session *s;
    if (lrc_session_open(fuzz_dir, &o, &s)) check_msg(s), FUZZ_COUNT(REFUSED_OPEN);
    else FUZZ_COUNT(OPENED), use(s, &bases[b], (int)run);
    lrc_session_close(s);
    return 0;
}

#ifndef LRC_LIBFUZZER
/* Each seed opens, binds and runs as it is (a seed that does not is a mistake in the test). */
static int add_seed(const char *path, const uint8_t *d, size_t n, int group, lrc_err *err)
{
    (void)n, (void)group;
    const char *rel;
    int b = base_of(path, &rel);
    if (b < 0 || n_seeds == MAX_SEEDS) return lrc_err_set(err, "%s: not in a package given", path);
    seeds[n_seeds].d = d;
    seeds[n_seeds].base = b;
    snprintf(seeds[n_seeds++].json, sizeof seeds[0].json, "%s", rel);
    if (strcmp(rel, "package.json")) return LRC_OK; /* a shape's: opened with its package */
    lrc_session *s;
    lrc_session_options o = lrc_session_default_options();
    o.threads = 1;
    lrc_status st = lrc_session_open(bases[b].dir, &o, &s);
    lrc_session_info info;
    if (!st && !lrc_session_describe(s, &info) && !info.has_weights) st = lrc_session_bind_weights_file(s, bases[b].bind);
    lrc_array in[8];
    void *data[8];
    int k = st ? 0 : make_inputs(s, &info, 0, in, data);
    if (!st) st = k < 0 ? LRC_STATUS_INVALID : lrc_session_run(s, in, k);
    for (int i = 0; i < k; i++) free(data[i]);
    /* a cuda package where no GPU is: the loader's seed alone */
    int rc = st && st != LRC_STATUS_DEVICE ? lrc_err_set(err, "%s: %s", bases[b].dir, lrc_session_error(s)) : LRC_OK;
    lrc_session_close(s);
    return rc;
}

static void finish(void)
{
    for (int i = 0; i < n_bases; i++)
        for (int f = 0; f < bases[i].n_files; f++) free(bases[i].files[f]);
    n_bases = 0;
}

/* PKG[:WEIGHTS] arguments become their package.json files (the shapes' too). */
static char **expand(int argc, char **argv, int *out_argc)
{
    char **args = calloc((size_t)argc + MAX_SEEDS + 1, sizeof *args);
    int n = 0, i = 0;
    for (; i < argc && i < 3 && (i < 2 || !strcmp(argv[1], "--keep-going")); i++) args[n++] = argv[i];
    for (; i < argc && strcmp(argv[i], "--replay"); i++) {
        int b = add_base(argv[i]);
        if (b < 0) exit(2);
        for (int f = 0; f < bases[b].n_files && n < argc + MAX_SEEDS - 1; f++) {
            const char *rel = bases[b].files[f], *slash = strrchr(rel, '/');
            if (strcmp(slash ? slash + 1 : rel, "package.json")) continue;
            char path[4200];
            snprintf(path, sizeof path, "%s/%s", bases[b].dir, rel);
            args[n++] = lrc_strdup(path);
        }
    }
    for (; i < argc; i++) args[n++] = argv[i];
    *out_argc = n;
    return args;
}

int main(int argc, char **argv)
{
    static const char *const counts[] = {"opened", "refused by lrc_session_open", "ran", "runs refused", "decoder steps",
                                         "inputs too large to run", NULL};
    static const char *const dict[] = {"input", "param", "output", "arena", "persist", "state", "none", "F32", "I32", "BF16",
                                       "U8", "once", "steal", "loop_to", "items", "args", "shape", "offset", "bytes",
                                       "packed", "q8", "bf16", "true", "false", "null", "0", "1", "-1", "8", "65536", NULL};
    static const fuzz_spec spec = {.name = "package", .seeds = "PKG[:WEIGHTS]...", .count_names = counts, .dict = dict,
                                   .timeout_s = 10, .rounds = 3, .words = true, .prefix = HEADER, .add_seed = add_seed,
                                   .start = start, .mutate = mutate, .one = LLVMFuzzerTestOneInput, .finish = finish};
    fuzz_scratch("package");
    int n;
    char **args = expand(argc, argv, &n);
    int rc = fuzz_main(n, args, &spec);
    for (int i = 0; i < n; i++)
        if (args[i]) {
            bool given = false;
            for (int k = 0; k < argc && !given; k++) given = args[i] == argv[k];
            if (!given) free(args[i]);
        }
    free(args);
    return rc;
}
#else
/* libFuzzer's own mutations, and in one call of three this fuzzer's edit
 * of the document after the header. */
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max, unsigned seed);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max, unsigned seed)
{
    fuzz_sh->rng = (uint64_t)seed << 32 | 0x9e3779b9u;
    size_t body = size > HEADER ? size - HEADER : 0;
    if (body && max > size && pick(3) == 0 && mutate(data + HEADER, &body, max - HEADER)) return HEADER + body;
    return LLVMFuzzerMutate(data, size, max);
}

/* LRC_FUZZ_PACKAGES="PKG[:WEIGHTS] ...": the packages a corpus's headers name. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("package");
    char list[8192];
    snprintf(list, sizeof list, "%s", getenv("LRC_FUZZ_PACKAGES") ? getenv("LRC_FUZZ_PACKAGES") : "");
    for (char *p = strtok(list, " "); p; p = strtok(NULL, " "))
        if (add_base(p) < 0) exit(2);
    return 0;
}
#endif
