/* lrc_link.h — the last step of compiling a cpu package: the object file
 * LLVM wrote, linked into the shared library the runtime dlopens. */
#ifndef LRC_LINK_H
#define LRC_LINK_H

#include "../../ir/lrc_ir.h"

/* cc -shared (or $CC) makes so from obj with libm; a one-line error naming
 * the linker when it cannot run or fails. */
int lrc_llvm_link_shared(const char *obj, const char *so, lrc_err *err);

#endif
