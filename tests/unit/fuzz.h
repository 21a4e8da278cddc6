/* fuzz.h — what the fuzzers (tests/unit/fuzz_*.c) share: the check that a
 * refused input ended in one line, the seeded mutation loop that CI runs,
 * the per-input time limit, and reports of a crash or a hang that keep the
 * input that caused it.
 *
 * A fuzzer is one file. LLVMFuzzerTestOneInput(data, size) runs one input:
 * libFuzzer's entry (build the file with clang -fsanitize=fuzzer
 * -DLRC_LIBFUZZER, its LLVMFuzzerInitialize doing the setup, to run it
 * open-ended). Otherwise its main() hands a fuzz_spec to fuzz_main:
 *
 *   fuzz_NAME [--keep-going] ITERATIONS SEED... [-- SEED...] [--replay INPUT...]
 *
 * runs each INPUT as it is (a saved failure, a regression input), each seed
 * unmutated, then ITERATIONS inputs made from a seed picked at random by 1 to
 * 8 mutations: the same arguments give the same inputs. Every input must end
 * in a result or a one-line error, within spec->timeout_s seconds (three
 * times that in a sanitizer build, which is that much slower); a crash,
 * a sanitizer report or a hang ends the run with the input saved as
 * fuzz_NAME-INDEX.in in the working directory. --keep-going runs the inputs
 * in a child process and, when one fails, saves it and goes on with the next
 * in a new child: the summary then counts the crashes and hangs (for long
 * runs by hand; ctest runs without it). LRC_FUZZ_TIMEOUT=S sets another
 * time limit, LRC_FUZZ_VERBOSE=1 prints every error message.
 *
 * The parsers of untrusted input and their fuzzers:
 *   tokenizer.json      fuzz_tokenizer.c    runtime/tokenizer_load.c, tokenizer.c
 *   safetensors         fuzz_safetensors.c  runtime/safetensors.c, safetensors_dir.c
 *   checkpoints         fuzz_checkpoint.c   runtime/checkpoint.c
 *   config.json         fuzz_hf_config.c    frontend/lua/hf.c, frontend/lua/hf.lua
 *   model files (Lua)   fuzz_model_lua.c    frontend/lua/model.c, lua_api.c
 *   package.json and    fuzz_package.c      runtime/package.c, package_cuda.c,
 *   a package directory                     package_launches.c, api.c, plan.c */
#ifndef LRC_TEST_FUZZ_H
#define LRC_TEST_FUZZ_H

#include "runtime/lrc_runtime.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define FUZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FUZZ_ASAN 1
#endif
#endif
#ifdef FUZZ_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

/* Aborts unless err holds one line, not empty: how every refused input
 * ends. With LRC_FUZZ_VERBOSE set, each message is printed: what the
 * mutations reach. */
static inline void fuzz_check_error(const lrc_err *err)
{
    static int verbose = -1;
    if (verbose < 0) verbose = getenv("LRC_FUZZ_VERBOSE") != NULL;
    if (verbose) fprintf(stderr, "%s\n", err->msg);
    if (!err->msg[0] || strpbrk(err->msg, "\r\n")) {
        fprintf(stderr, "fuzz: a message that is not one line: \"%s\"\n", err->msg);
        abort();
    }
}

/* What the fuzzer's inputs reached ("loaded", "refused"), by the names its
 * spec gives; shared with the children under --keep-going. */
#define FUZZ_MAX_COUNTS 8
typedef struct fuzz_shared {
    uint64_t rng;                    /* the generator: a new child goes on from here */
    long next, done;                 /* the next input's index; inputs run */
    long counts[FUZZ_MAX_COUNTS];
    double slowest_s;                /* the slowest input, and its index */
    long slowest, slow;              /* and how many took over half the limit (each saved) */
    int failed;                      /* what the last input did: FUZZ_CRASH or FUZZ_HANG, else 0 */
} fuzz_shared;
enum { FUZZ_CRASH = 1, FUZZ_HANG = 2 };
static fuzz_shared fuzz_local = {.rng = 0x9e3779b97f4a7c15ull};
static fuzz_shared *fuzz_sh = &fuzz_local;
#define FUZZ_COUNT(i) (fuzz_sh->counts[i]++)

static inline uint64_t fuzz_next(void)
{
    uint64_t r = fuzz_sh->rng;
    r ^= r << 13, r ^= r >> 7, r ^= r << 17;
    return fuzz_sh->rng = r;
}

/* Scratch files for the parsers that read a path: a new directory, on
 * tmpfs where there is one (a checkpoint's save syncs its file), removed by
 * fuzz_scratch_remove with what fuzz_write and fuzz_link put in it (and
 * the names given to fuzz_scratch_also: "shape-1x4/" a subdirectory, before
 * the files in it). */
#define FUZZ_MAX_FILES 64
static char fuzz_dir[256];
static char *fuzz_files[FUZZ_MAX_FILES];
static int fuzz_n_files;

static inline const char *fuzz_scratch(const char *name)
{
    const char *base = getenv("TMPDIR");
    struct stat st;
    if (!base || !*base) base = stat("/dev/shm", &st) == 0 && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fuzz_dir, sizeof fuzz_dir, "%s/fuzz_%s.XXXXXX", base, name);
    if (!mkdtemp(fuzz_dir)) {
        fprintf(stderr, "fuzz: cannot create %s: %s\n", fuzz_dir, strerror(errno));
        exit(2);
    }
    return fuzz_dir;
}

/* fuzz_dir/name; the path's buffer is static. */
static inline const char *fuzz_path(const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%.255s/%.250s", fuzz_dir, name);
    return path;
}

/* A file in fuzz_dir that fuzz_scratch_remove removes. */
static inline void fuzz_scratch_also(const char *name)
{
    for (int i = 0; i < fuzz_n_files; i++)
        if (!strcmp(fuzz_files[i], name)) return;
    if (fuzz_n_files < FUZZ_MAX_FILES) fuzz_files[fuzz_n_files++] = strdup(name);
}

/* Writes d[0..n) as fuzz_dir/name (not atomically: the fuzzer is its only reader). */
static inline void fuzz_write(const char *name, const void *d, size_t n)
{
    const char *path = fuzz_path(name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(d, 1, n, f) != n || fclose(f)) {
        fprintf(stderr, "fuzz: cannot write %s: %s\n", path, strerror(errno));
        exit(2);
    }
    fuzz_scratch_also(name);
}

/* fuzz_dir/name, a link to target (a seed's neighbour: a shard). */
static inline void fuzz_link(const char *name, const char *target)
{
    char abs[4096];
    if (!realpath(target, abs) || (symlink(abs, fuzz_path(name)) && errno != EEXIST)) {
        fprintf(stderr, "fuzz: cannot link %s to %s: %s\n", fuzz_path(name), target, strerror(errno));
        exit(2);
    }
    fuzz_scratch_also(name);
}

/* The scratch files go with the process that fails, but not with a child
 * of --keep-going's, whose parent goes on with them. (unlink and rmdir are
 * async-signal-safe.) */
static bool fuzz_child;
static inline void fuzz_scratch_unlink(void)
{
    if (fuzz_child || !fuzz_dir[0]) return;
    for (int i = 0; i < fuzz_n_files; i++)
        if (fuzz_files[i]) unlink(fuzz_path(fuzz_files[i]));
    for (int i = fuzz_n_files - 1; i >= 0; i--) /* subdirectories, once their files are gone */
        if (fuzz_files[i]) rmdir(fuzz_path(fuzz_files[i]));
    rmdir(fuzz_dir);
}

/* Files, links and (one level deep) subdirectories of fuzz_dir/sub ("" for
 * fuzz_dir itself) removed, the subdirectories too. */
static inline void fuzz_scratch_empty(const char *sub)
{
    char here[512], path[1024];
    snprintf(here, sizeof here, "%.255s%s%.200s", fuzz_dir, *sub ? "/" : "", sub);
    DIR *d = opendir(here);
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(path, sizeof path, "%s/%s", here, e->d_name);
        if (unlink(path) && errno == EISDIR && !*sub) {
            char inner[256];
            snprintf(inner, sizeof inner, "%.200s", e->d_name);
            fuzz_scratch_empty(inner);
            rmdir(path);
        }
    }
    if (d) closedir(d);
}

/* The directory and all in it (files, links and the subdirectories of a
 * package's shapes: a fuzzer's writes, its children's under --keep-going
 * included). */
static inline void fuzz_scratch_remove(void)
{
    for (int i = 0; i < fuzz_n_files; i++) free(fuzz_files[i]);
    fuzz_n_files = 0;
    if (fuzz_dir[0]) fuzz_scratch_empty("");
    if (fuzz_dir[0] && rmdir(fuzz_dir)) fprintf(stderr, "fuzz: cannot remove %s: %s\n", fuzz_dir, strerror(errno));
    fuzz_dir[0] = 0;
}

/* ---- the seeded loop --------------------------------------------------- */

typedef struct fuzz_spec {
    const char *name;                 /* "safetensors": messages, fuzz_NAME-INDEX.in */
    const char *seeds;                /* the seed arguments, for the usage line */
    const char *const *count_names;   /* FUZZ_COUNT(i)'s names, NULL-terminated */
    const char *special;              /* bytes the format cares about (mutations set and insert them) */
    const char *const *dict;          /* words (numbers, keywords) put in or swapped for a token; NULL-terminated, or NULL */
    unsigned timeout_s;               /* an input running longer is a hang; 0: no limit */
    int rounds;                       /* mutations an input, at most (1 to rounds); 0: 8 */
    bool words;                       /* three mutations in four swap a number or a word (a strict format's values) */
    size_t prefix;                    /* leading bytes that start sets and mutations leave alone */
    /* seeds the fuzzer writes itself (in fuzz_scratch's directory): their
     * paths, newly allocated, into paths[0..cap); returns how many. They
     * come before the command line's, in group 0. NULL: none */
    int (*make_seeds)(char **paths, int cap);
    /* each seed once, before any input (group: how many "--" came before
     * it); an error ends the run with status 2 */
    int (*add_seed)(const char *path, const uint8_t *d, size_t n, int group, lrc_err *err);
    /* an input from a seed into buf (cap bytes), before mutations; returns
     * its length. NULL: the seed as it is. */
    size_t (*start)(uint8_t *buf, size_t cap, const uint8_t *seed, size_t n, int group);
    /* after the mutations: repairs what the parser would refuse at once
     * (a safetensors header's length); may change *n up to cap. NULL: none */
    void (*fix)(uint8_t *buf, size_t *n, size_t cap);
    /* a mutation of the fuzzer's own that knows the format (a JSON
     * document's launches, buffers, keys), tried for three mutations in
     * four on buf[prefix..): false when it did nothing (the text no longer
     * parses), and a byte mutation is made instead. NULL: none */
    bool (*mutate)(uint8_t *buf, size_t *n, size_t cap);
    int (*one)(const uint8_t *d, size_t n); /* LLVMFuzzerTestOneInput */
    void (*finish)(void);             /* frees what add_seed kept (fuzz_main removes the scratch files); NULL: nothing */
} fuzz_spec;

static const char fuzz_json_special[] = "\"\\{}[],:0-\xC3\xE4\xF0\x80\xBF\xFF \n";

static inline bool fuzz_is_word(uint8_t c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' || c == '+' || c == '-';
}

/* Replaces buf[a..b) with w, when it fits. */
static inline void fuzz_splice(uint8_t *buf, size_t *n, size_t cap, size_t a, size_t b, const char *w)
{
    size_t k = strlen(w);
    if (*n - (b - a) + k > cap) return;
    memmove(buf + a + k, buf + b, *n - b);
    memcpy(buf + a, w, k);
    *n = *n - (b - a) + k;
}

/* Numbers at the edges of what a size, a count or an offset can be. */
static const char *const fuzz_numbers[] = {"0", "1", "-1", "2", "3", "7", "8", "16", "255", "256", "4096", "65535", "65536",
                                           "1000000", "2147483647", "2147483648", "-2147483648", "4294967295",
                                           "4294967296", "1099511627776", "9007199254740992", "9007199254740993",
                                           "9223372036854775807", "9223372036854775808", "1e18", "1e308", "1e-308", "0.5",
                                           "-0", NULL};

/* The token (letters, digits, _ . + -) at or after buf[at], as [*a, *b). */
static inline void fuzz_token(const uint8_t *buf, size_t n, size_t at, size_t *a, size_t *b)
{
    while (at < n && !fuzz_is_word(buf[at])) at++;
    while (at > 0 && fuzz_is_word(buf[at - 1])) at--;
    for (*a = *b = at; *b < n && fuzz_is_word(buf[*b]);) ++*b;
}

/* One mutation of buf[0..*n) (capacity cap): flip a bit, set or insert a
 * special byte, delete, duplicate a span, truncate, a random byte, swap a
 * number for one of fuzz_numbers (which turns "num_hidden_layers": 2 into
 * 9007199254740992); with a dictionary also insert a word or swap one for
 * the token at (or after) a random place. */
static inline void fuzz_mutate(uint8_t *buf, size_t *n, size_t cap, const fuzz_spec *sp)
{
    const char *special = sp->special ? sp->special : fuzz_json_special;
    size_t n_special = strlen(special) + 1; /* its 0 too */
    size_t at = *n ? fuzz_next() % *n : 0, n_dict = 0, n_num = sizeof fuzz_numbers / sizeof *fuzz_numbers - 1, a, b;
    while (sp->dict && sp->dict[n_dict]) n_dict++;
    uint64_t kind = fuzz_next() % (n_dict ? 11 : 8);
    if (sp->words && fuzz_next() % 4) kind = n_dict && fuzz_next() % 2 ? 10 : 7;
    switch (kind) {
    case 0: if (*n) buf[at] ^= (uint8_t)(1u << (fuzz_next() % 8)); break;
    case 1: if (*n) buf[at] = (uint8_t)special[fuzz_next() % n_special]; break;
    case 2:
        if (*n < cap) memmove(buf + at + 1, buf + at, *n - at), buf[at] = (uint8_t)special[fuzz_next() % n_special], (*n)++;
        break;
    case 3: {
        size_t k = *n - at < 8 ? *n - at : 1 + fuzz_next() % 8;
        memmove(buf + at, buf + at + k, *n - at - k), *n -= k;
        break;
    }
    case 4: {
        size_t k = 1 + fuzz_next() % 16;
        if (*n + k <= cap && at + k <= *n) memmove(buf + at + k, buf + at, *n - at), *n += k; /* a span twice */
        break;
    }
    case 5: *n = at; break;
    case 6:
        if (*n) buf[at] = (uint8_t)fuzz_next();
        break;
    case 7: /* a number (a token that starts with a digit) */
        for (size_t tries = 0; tries < 4; tries++, at = *n ? fuzz_next() % *n : 0) {
            fuzz_token(buf, *n, at, &a, &b);
            if (a < b && ((buf[a] >= '0' && buf[a] <= '9') || (buf[a] == '-' && b > a + 1))) {
                fuzz_splice(buf, n, cap, a, b, fuzz_numbers[fuzz_next() % n_num]);
                break;
            }
        }
        break;
    case 8: fuzz_splice(buf, n, cap, at, at, sp->dict[fuzz_next() % n_dict]); break;
    default: /* swaps are the likelier: a value changed keeps the rest valid */
        fuzz_token(buf, *n, at, &a, &b);
        fuzz_splice(buf, n, cap, a, b, sp->dict[fuzz_next() % n_dict]);
        break;
    }
}

/* A spec's fix for safetensors files (safetensors, checkpoints): the
 * 8-byte length again, from where the mutated header's JSON object
 * ends (and the spaces after it): most mutations of the header would
 * otherwise be refused at offset 0. One input in eight keeps its length. */
static inline void fuzz_fix_safetensors_length(uint8_t *buf, size_t *n, size_t cap)
{
    (void)cap;
    if (*n < 10 || buf[8] != '{' || fuzz_next() % 8 == 0) return;
    size_t i = 8;
    int depth = 0;
    bool in_str = false;
    for (; i < *n; i++) {
        if (in_str) {
            if (buf[i] == '\\') i++;
            else if (buf[i] == '"') in_str = false;
        } else if (buf[i] == '"') in_str = true;
        else if (buf[i] == '{' || buf[i] == '[') depth++;
        else if ((buf[i] == '}' || buf[i] == ']') && --depth == 0) break;
    }
    if (i >= *n) return;
    for (i++; i < *n && buf[i] == ' '; i++) {}
    uint64_t h = (uint64_t)(i - 8);
    for (int k = 0; k < 8; k++) buf[k] = (uint8_t)(h >> (8 * k));
}

/* ---- failures: the input kept, the kind said --------------------------- */

static const uint8_t *fuzz_cur;
static size_t fuzz_cur_n;
static char fuzz_saved[300], fuzz_what[300];

static inline void fuzz_say(const char *s) { (void)!write(2, s, strlen(s)); }

/* async-signal-safe: open, write, close */
static inline void fuzz_save_input(int kind)
{
    fuzz_sh->failed = kind;
    if (fuzz_cur && fuzz_saved[0]) {
        int fd = open(fuzz_saved, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            (void)!write(fd, fuzz_cur, fuzz_cur_n);
            close(fd);
        }
        fuzz_say(fuzz_what);
        fuzz_say(kind == FUZZ_HANG ? "ran over its time limit" : "crashed");
        fuzz_say(": saved as ");
        fuzz_say(fuzz_saved);
        fuzz_say(" (run it again with --replay FILE)\n");
    }
    fuzz_scratch_unlink();
}

static inline void fuzz_on_alarm(int sig)
{
    (void)sig;
    fuzz_save_input(FUZZ_HANG);
    signal(SIGABRT, SIG_DFL);
    abort();
}

static inline void fuzz_on_fault(int sig)
{
    fuzz_save_input(FUZZ_CRASH);
    signal(sig, SIG_DFL);
    raise(sig);
}

#ifdef FUZZ_ASAN
static inline void fuzz_on_sanitizer_death(void) { fuzz_save_input(FUZZ_CRASH); }
/* GCC's UBSan runs beside ASan's runtime and calls no death callback: it
 * aborts instead (fuzz_on_fault keeps the input). UBSAN_OPTIONS still
 * overrides it. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "abort_on_error=1"; }
#endif

static inline void fuzz_handlers(void)
{
    signal(SIGALRM, fuzz_on_alarm);
    signal(SIGABRT, fuzz_on_fault); /* fuzz_check_error, assert */
#ifdef FUZZ_ASAN
    __sanitizer_set_death_callback(fuzz_on_sanitizer_death); /* the sanitizers keep their own SEGV handler */
#else
    signal(SIGSEGV, fuzz_on_fault);
    signal(SIGBUS, fuzz_on_fault);
    signal(SIGFPE, fuzz_on_fault);
    signal(SIGILL, fuzz_on_fault);
#endif
}

static inline double fuzz_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- the driver -------------------------------------------------------- */

typedef struct fuzz_run {
    const fuzz_spec *sp;
    long iters, n_replay;
    int ns;
    char **replay;
    uint8_t **seed;
    size_t *seed_n;
    int *group;
} fuzz_run;

/* Input i (replays, then the seeds as they are, then mutated ones) into *buf. */
static inline size_t fuzz_make(const fuzz_run *r, long i, uint8_t **buf)
{
    const fuzz_spec *sp = r->sp;
    if (i < r->n_replay) {
        lrc_err err;
        size_t n;
        if (!(*buf = (uint8_t *)lrc_read_file(r->replay[i], &n, &err))) {
            fprintf(stderr, "fuzz_%s: %s\n", sp->name, err.msg);
            exit(2);
        }
        return n;
    }
    bool mutated = i >= r->n_replay + r->ns;
    int s = mutated ? (int)(fuzz_next() % (uint64_t)r->ns) : (int)(i - r->n_replay);
    size_t cap = r->seed_n[s] + sp->prefix + 4096, n;
    uint8_t *b = malloc(cap);
    if (sp->start) n = sp->start(b, cap, r->seed[s], r->seed_n[s], r->group[s]);
    else memcpy(b, r->seed[s], r->seed_n[s]), n = r->seed_n[s];
    for (int k = mutated ? 1 + (int)(fuzz_next() % (uint64_t)(sp->rounds ? sp->rounds : 8)) : 0; k > 0; k--) {
        size_t body = n - sp->prefix;
        if (!sp->mutate || fuzz_next() % 4 == 0 || !sp->mutate(b + sp->prefix, &body, cap - sp->prefix))
            fuzz_mutate(b + sp->prefix, &body, cap - sp->prefix, sp);
        n = body + sp->prefix;
    }
    if (mutated && sp->fix) sp->fix(b, &n, cap);
    *buf = b;
    return n;
}

/* Runs inputs fuzz_sh->next .. total-1. */
static inline void fuzz_loop(const fuzz_run *r, long total)
{
    const fuzz_spec *sp = r->sp;
    while (fuzz_sh->next < total) {
        long i = fuzz_sh->next++;
        uint8_t *b;
        size_t n = fuzz_make(r, i, &b);
        /* exactly n bytes, so that reading past the input is a sanitizer report */
        uint8_t *in = malloc(n ? n : 1);
        memcpy(in, b, n);
        free(b);
        snprintf(fuzz_saved, sizeof fuzz_saved, "fuzz_%s-%ld.in", sp->name, i);
        snprintf(fuzz_what, sizeof fuzz_what, "fuzz_%s: input %ld (%s, %zu bytes) ", sp->name, i,
                 i < r->n_replay ? r->replay[i] : i < r->n_replay + r->ns ? "a seed" : "mutated", n);
        fuzz_cur = in, fuzz_cur_n = n;
        double t0 = fuzz_now();
        alarm(sp->timeout_s);
        sp->one(in, n);
        alarm(0);
        double dt = fuzz_now() - t0;
        fuzz_cur = NULL;
        if (dt > fuzz_sh->slowest_s) fuzz_sh->slowest_s = dt, fuzz_sh->slowest = i;
        if (sp->timeout_s && dt > 0.5 * sp->timeout_s) { /* near a hang: kept to look at, not a failure */
            char slow[320];
            snprintf(slow, sizeof slow, "fuzz_%s-%ld.slow", sp->name, i);
            FILE *f = fopen(slow, "wb");
            if (f) fwrite(in, 1, n, f), fclose(f);
            fuzz_sh->slow++;
        }
        free(in);
        fuzz_sh->done++;
    }
}

/* --keep-going: children run the inputs; each failure is saved (by the
 * child's handler) and counted, and a new child goes on after it. Returns
 * the failures. */
static inline long fuzz_keep_going(const fuzz_run *r, long total, long *crashes, long *hangs)
{
    fuzz_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) return fprintf(stderr, "fuzz: mmap: %s\n", strerror(errno)), exit(2), 0;
    *sh = *fuzz_sh;
    fuzz_sh = sh;
    long other = 0;
    while (sh->next < total) {
        sh->failed = 0;
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) return fprintf(stderr, "fuzz: fork: %s\n", strerror(errno)), exit(2), 0;
        if (!pid) {
            fuzz_child = true;
            fuzz_loop(r, total);
            if (r->sp->finish) r->sp->finish();
            exit(0); /* the leak check, in a sanitizer build */
        }
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
        if (WIFEXITED(status) && !WEXITSTATUS(status)) break;
        if (sh->failed == FUZZ_HANG) ++*hangs;
        else if (sh->failed == FUZZ_CRASH) ++*crashes;
        else { /* a leak report at the child's exit, or an exit() in the library: no one input to blame */
            fprintf(stderr, "fuzz_%s: a child ended with status %d after input %ld\n", r->sp->name, status, sh->next - 1);
            other++;
            if (sh->next >= total) break;
        }
    }
    return *crashes + *hangs + other;
}

static inline int fuzz_main(int argc, char **argv, const fuzz_spec *spec)
{
    fuzz_spec own = *spec, *sp = &own; /* LRC_FUZZ_TIMEOUT=S: another limit, for runs by hand */
#ifdef FUZZ_ASAN
    /* the same work as the plain build's limit: ASan and UBSan run lrc 2 to
     * 4 times slower (a model file that ends at the graph's node limit in
     * 5-8 s plain took 11-12 s, and over 20 s on a loaded machine) */
    own.timeout_s *= 3;
#endif
    if (getenv("LRC_FUZZ_TIMEOUT")) own.timeout_s = (unsigned)atoi(getenv("LRC_FUZZ_TIMEOUT"));
    bool keep_going = argc > 1 && !strcmp(argv[1], "--keep-going");
    if (keep_going) argc--, argv++;
    if (argc < 2 || atol(argv[1]) < 0) {
        fprintf(stderr, "usage: fuzz_%s [--keep-going] ITERATIONS %s [--replay INPUT...]\n", sp->name, sp->seeds);
        return 2;
    }
    fuzz_run r = {.sp = sp, .iters = atol(argv[1])};
    /* the fuzzer's own seeds, then the command line's */
    char **args = calloc((size_t)argc + 16, sizeof *args);
    int n_made = sp->make_seeds ? sp->make_seeds(args, 16) : 0, group = 0, n_args = n_made;
    for (int i = 2; i < argc; i++) args[n_args++] = argv[i];
    r.seed = calloc((size_t)n_args + 1, sizeof *r.seed);
    r.seed_n = calloc((size_t)n_args + 1, sizeof *r.seed_n);
    r.group = calloc((size_t)n_args + 1, sizeof *r.group);
    for (int i = 0; i < n_args; i++) {
        lrc_err err;
        if (!strcmp(args[i], "--")) group++;
        else if (!strcmp(args[i], "--replay")) r.replay = args + i + 1, r.n_replay = n_args - i - 1, i = n_args;
        else if (!(r.seed[r.ns] = (uint8_t *)lrc_read_file(args[i], &r.seed_n[r.ns], &err)) ||
                 (sp->add_seed && sp->add_seed(args[i], r.seed[r.ns], r.seed_n[r.ns], group, &err)))
            return fprintf(stderr, "fuzz_%s: a seed: %s\n", sp->name, err.msg), 2;
        else r.group[r.ns++] = group;
    }
    if (!r.ns && r.iters) return fprintf(stderr, "fuzz_%s: mutations need a seed\n", sp->name), 2;
    fuzz_handlers();
    long total = r.n_replay + r.ns + r.iters, crashes = 0, hangs = 0, failures = 0;
    double t0 = fuzz_now();
    if (keep_going) failures = fuzz_keep_going(&r, total, &crashes, &hangs);
    else fuzz_loop(&r, total);
    printf("fuzz_%s: %ld inputs (%ld replayed, %d seeds, %ld mutated) in %.1f s, the slowest %.3f s (input %ld):",
           sp->name, total, r.n_replay, r.ns, r.iters, fuzz_now() - t0, fuzz_sh->slowest_s, fuzz_sh->slowest);
    for (int k = 0; sp->count_names && sp->count_names[k]; k++)
        printf("%s %ld %s", k ? "," : "", fuzz_sh->counts[k], sp->count_names[k]);
    if (fuzz_sh->slow) printf("; %ld over half the time limit (saved as fuzz_%s-INDEX.slow)", fuzz_sh->slow, sp->name);
    if (keep_going) printf("; %ld crashes, %ld hangs (each saved as fuzz_%s-INDEX.in)\n", crashes, hangs, sp->name);
    else printf("; no crash, no hang, every error one line\n");
    if (sp->finish) sp->finish();
    fuzz_scratch_remove();
    for (int i = 0; i < r.ns; i++) free(r.seed[i]);
    for (int i = 0; i < n_made; i++) free(args[i]);
    free(r.seed), free(r.seed_n), free(r.group), free(args);
    return failures ? 1 : 0;
}

#endif
