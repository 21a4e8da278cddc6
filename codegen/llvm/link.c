/* link.c — the system linker turns the kernels' object file into a shared
 * library: LLVM emits relocatable code, and dlopen needs a library. */
#include "lrc_link.h"

#include <errno.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

int lrc_llvm_link_shared(const char *obj, const char *so, lrc_err *err)
{
    const char *cc = getenv("CC") ? getenv("CC") : "cc";
    char *argv[] = {(char *)cc, "-shared", "-o", (char *)so, (char *)obj, "-lm", NULL};
    pid_t pid;
    int rc = posix_spawnp(&pid, cc, NULL, NULL, argv, environ), status = 0;
    if (rc) return lrc_err_set(err, "cannot run the linker '%s' to make %s: %s (install build-essential)", cc, so, strerror(rc));
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
        return lrc_err_set(err, "the linker '%s' failed to make %s from %s", cc, so, obj);
    return LRC_OK;
}
