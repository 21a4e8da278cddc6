/* cli_session.h — lrc forward and lrc generate of a package run it through
 * the embedding API (runtime/lrc.h), so that a program embedding lrc gets
 * the command's messages (internal to frontend/). */
#ifndef LRC_CLI_SESSION_H
#define LRC_CLI_SESSION_H

#include "cli.h"
#include "../../runtime/lrc.h"

/* The package a->m.model opened with --threads and with the command's rule
 * for weights: those compiled in, or --weights, never both nor neither. On
 * failure *s may be set (close it) and err holds the one line to print. */
int cli_session_open(const cli_args *a, lrc_session **s, lrc_err *err);
/* The two halves of cli_session_open: --threads and the package, then the
 * weights (lrc generate checks the context between them). */
int cli_session_start(const cli_args *a, lrc_session **s, lrc_err *err);
int cli_session_weights(const cli_args *a, lrc_session *s, lrc_err *err);
/* err gets the session's message; returns LRC_EUSER. */
int cli_session_error(const lrc_session *s, lrc_err *err);
/* The I32/F32 tensors of set as arrays for lrc_session_run (malloc'd, set->n of them). */
lrc_array *cli_session_arrays(const lrc_tensor_set *set);

#endif
