/* cli_targets.h — what the command line does differently on each target
 * (internal to frontend/cli/). The targets themselves are the compile
 * half's table (frontend/compile/lrc_compile.h: compiling, packages, a
 * graph prepared on its executor) and runtime/'s executors; an entry here
 * holds only what the commands print and the options they accept. A
 * command looks its target up by name (--target) or by a package's target
 * and reaches these hooks through cli_target_of. */
#ifndef LRC_CLI_TARGETS_H
#define LRC_CLI_TARGETS_H

#include "cli.h"
#include "../compile/lrc_compile.h"

#include "cli_session.h"

typedef struct cli_target {
    const lrc_target *t;
    /* Whether command cmd's options suit this target, and for a command
     * that runs on it now, whether it can run here (cuda: the device
     * probed): 0, or EXIT_USAGE / EXIT_USER with the message in err. */
    int (*check)(const char *cmd, const cli_args *a, lrc_err *err);
    /* lrc devices: whether this machine has it (to compile for, to run on), and if not, why */
    void (*report)(void);
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
    /* the first line of lrc compile's summary */
    void (*compile_report)(const lrc_model *m, const cli_args *a, const lrc_compiled *c);
} cli_target;

/* The command line's entry of t (every target has one). */
const cli_target *cli_target_of(const lrc_target *t);

/* What a target can be asked to do, for the lists in messages. */
typedef enum { LRC_TARGET_ANY, LRC_TARGET_FORWARD_MODEL, LRC_TARGET_PREPARE, LRC_TARGET_TRAIN, LRC_TARGET_COMPILE } lrc_target_can;
/* The names of the targets that can do `can`, "a, b<last>c": last is " or ", " and " or ", ". */
const char *cli_target_names(lrc_target_can can, const char *last, char *buf, size_t n);
/* The compile options of a's flags (--arch, --precision, --weights-dtype, checked before). */
lrc_compile_opts cli_compile_opts(const cli_args *a);

/* The forward timing line of --repeat runs ms[0..repeat) (sorted here). */
void cli_print_times(const cli_args *a, double *ms, const lrc_tensor_set *in, int threads);

/* The entries (cli_targets.c, cli_target_cpu.c, cli_target_cuda.c). */
extern const cli_target cli_target_ref, cli_target_cpu, cli_target_cuda;

/* lrc backward's options on a target that computes in f32 on the host (ref, cpu). */
int cli_target_f32_check(const char *cmd, const cli_args *a, lrc_err *err);
/* cpu's lrc profile, which ref's (the default target) is too. */
int cli_target_cpu_profile(const cli_args *a, bool pkg, int64_t repeat, const char *trace);
/* The host's lrc forward --repeat of a package (session s; cpu). */
int cli_target_host_time_session(const cli_args *a, lrc_session *s, const lrc_array *arr, const lrc_tensor_set *in, lrc_err *err);

#endif
