/* targets.h — the one table of targets (ref, cpu, cuda) the commands use
 * (internal to frontend/; docs/architecture.md, rule 6). An entry says
 * which options its target takes, prepares a graph into a plan ready to
 * run (ref: the interpreter; cpu: LLVM and the thread pool; cuda: NVRTC and
 * GPU 0), binds parameters, runs, times and profiles it, says what it
 * supports, writes a package and trains. A command looks its target up by
 * name (--target) or by a package's target and calls through the entry:
 * the per-target knowledge lives in targets.c, target_cpu.c and
 * target_cuda.c, never in the commands. */
#ifndef LRC_TARGETS_H
#define LRC_TARGETS_H

#include "cli.h"
#include "compile.h"

#include "cli_session.h"

typedef struct lrc_target lrc_target;
struct cJSON;

/* What prepare takes besides the graph. */
typedef struct lrc_target_opts {
    lrc_tensor_set *consts; /* frozen parameters (taken over as lrc_compile_graph takes them), or NULL */
    lrc_pool *pool;         /* cpu: the threads to run on (borrowed), or NULL: a pool of `threads` */
    int64_t threads;        /* cpu: --threads, <= 0 all cores */
    const char *precision;  /* cuda: "bf16" (or NULL) or "f32" storage */
} lrc_target_opts;

/* A graph prepared on a target: ready to bind parameters and run. The
 * fields are the entries' (each uses its own); commands read only
 * device_name, device_sm and plan. */
typedef struct lrc_target_plan {
    const lrc_target *target;
    lrc_graph *g;                 /* ref: the graph it interprets (owned) */
    lrc_backend *be;              /* ref */
    const lrc_tensor_set *params; /* ref: the bound parameters (borrowed) */
    lrc_compiled c;               /* cpu, cuda: the compiled graph */
    bool have_c;
    lrc_pool *pool;               /* cpu */
    bool own_pool;
    lrc_exec *x;                  /* cpu */
    lrc_cuda_exec *cx;            /* cuda */
    lrc_cuda_device dev;          /* cuda */
    const lrc_plan *plan;         /* the plan it runs, NULL for ref */
    char device_name[128];        /* the device it runs on, "" for this CPU */
    int device_sm;
} lrc_target_plan;

/* The forward timing line of --repeat runs ms[0..repeat) (sorted here). */
void cli_print_times(const cli_args *a, double *ms, const lrc_tensor_set *in, int threads);
/* The model input of an input file, checked: `tokens` I32 [B, T] with ids
 * < vocab, or `images` F32 [B, C, H, W] (commands.c). */
int cli_check_tokens(const lrc_tensor_set *in, const char *path, int64_t vocab, const lrc_tensor **out, lrc_err *err);

struct lrc_target {
    const char *name;
    /* Whether command cmd's options suit this target, and for a command
     * that runs on it now, whether it can run here (cuda: the device
     * probed): 0, or EXIT_USAGE / EXIT_USER with the message in err. */
    int (*check)(const char *cmd, const cli_args *a, lrc_err *err);
    /* what its schedule asks of the passes (pad_hidden's multiple, fuse rules
     * 8-10; compile.h), as its compile function sets them, or NULL: none */
    void (*pass_rules)(lrc_pass_ctx *ctx);
    bool (*supports_op)(lrc_op op);
    /* lrc devices: whether this machine has it (to compile for, to run on), and if not, why */
    void (*report)(void);

    /* ---- plans: g is taken over, on failure too; release frees what prepare made */
    int (*prepare)(lrc_graph *g, const lrc_target_opts *o, lrc_target_plan *p, lrc_err *err);
    int (*bind)(lrc_target_plan *p, const lrc_tensor_set *params, lrc_err *err);
    int (*run)(lrc_target_plan *p, const lrc_tensor_set *in, lrc_tensor_set *out, lrc_err *err);
    /* the median of repeat runs on the inputs of the last run (device time), or NULL: not timed alone */
    int (*time)(lrc_target_plan *p, int64_t repeat, double *median_ms, lrc_err *err);
    /* from now on each run adds every launch's time to ns[launch] and counts it in calls */
    void (*profile)(lrc_target_plan *p, double *ns, int64_t *calls);
    /* the trainer's device over the plan (NULL: this target does not train) */
    int (*train)(lrc_target_plan *p, lrc_trainer *tr, lrc_err *err);
    void (*release)(lrc_target_plan *p);

    /* ---- what the commands do differently on it */
    /* lrc forward of a MODEL on it (NULL: it runs only packages) */
    int (*forward_model)(const cli_args *a);
    /* lrc forward of a package compiled for it: its rule for the options
     * (-1 to go on, else the exit status), whether the inputs are checked
     * and LRC_PROFILE looked at on the host, its --repeat timing, and a
     * line naming the output */
    int (*package_args)(const cli_args *a);
    bool package_host;
    int (*time_session)(const cli_args *a, lrc_session *s, const lrc_array *arr, const lrc_tensor_set *in, lrc_err *err);
    bool says_wrote;
    /* lrc profile of MODEL or (pkg) a package; the exit status */
    int (*profile_command)(const cli_args *a, bool pkg, int64_t repeat, const char *trace);
    /* ---- lrc compile: the kernels its package holds run on a device (the writer's file names) */
    bool device_package;
    /* g (taken over) compiled with consts (or NULL) into c, the kernels written into w */
    int (*compile_package)(lrc_graph *g, lrc_tensor_set *consts, const cli_args *a, lrc_package_writer *w, lrc_compiled *c,
                           lrc_err *err);
    /* its part of package.json's meta (added after "target") */
    void (*package_meta)(struct cJSON *o, const lrc_compiled *c);
    /* a frozen weight as the package stores it for plan buffer b (NULL: as
     * it is), changed in place; a tensor the file adds beside it (q8's
     * scales) in *extra, else NULL */
    int (*package_weight)(const lrc_compiled *c, int b, lrc_tensor *t, lrc_tensor **extra, lrc_err *err);
    /* the first line of lrc compile's summary, and the distinct kernel functions */
    void (*compile_report)(const lrc_model *m, const cli_args *a, const lrc_compiled *c);
    int (*functions)(const lrc_compiled *c);
    /* the target that runs compiled code in its place (the default ref: cpu), or NULL: itself */
    const char *compiled_by;
};

/* What a target can be asked to do, for the lists in messages. */
typedef enum { LRC_TARGET_ANY, LRC_TARGET_FORWARD_MODEL, LRC_TARGET_PREPARE, LRC_TARGET_TRAIN, LRC_TARGET_COMPILE } lrc_target_can;

extern const lrc_target *const lrc_targets[];
extern const int lrc_n_targets;
/* The entry named name, or NULL. */
const lrc_target *lrc_target_find(const char *name);
/* The entry that runs compiled code for t (ref's is cpu's), or NULL for NULL. */
const lrc_target *lrc_target_compiled(const lrc_target *t);
/* The names of the targets that can do `can`, "a, b<last>c": last is " or ", " and " or ", ". */
const char *lrc_target_names(lrc_target_can can, const char *last, char *buf, size_t n);
/* The entry of a package's target ("cpu" when it cannot be read). */
const lrc_target *lrc_target_of_package(const char *dir);
/* release, and the plan zeroed; a plan never prepared is fine */
void lrc_target_plan_free(lrc_target_plan *p);

/* The entries (targets.c, target_cpu.c, target_cuda.c). */
extern const lrc_target lrc_target_ref, lrc_target_cpu, lrc_target_cuda;

/* lrc backward's options on a target that computes in f32 on the host (ref, cpu). */
int lrc_target_f32_check(const char *cmd, const cli_args *a, lrc_err *err);
/* cpu's lrc profile, which ref's (the default target) is too. */
int lrc_target_cpu_profile(const cli_args *a, bool pkg, int64_t repeat, const char *trace);
/* The host's lrc forward --repeat of a package (session s; cpu). */
int lrc_target_host_time_session(const cli_args *a, lrc_session *s, const lrc_array *arr, const lrc_tensor_set *in, lrc_err *err);

#endif
