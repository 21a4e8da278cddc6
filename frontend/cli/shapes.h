/* shapes.h — the shorter shapes a package runs (internal to frontend/). */
#ifndef LRC_SHAPES_H
#define LRC_SHAPES_H

#include "../lua/lrc_lua.h"

/* A package compiled for [B, T] runs a batch of B' <= B rows and a
 * sequence of T' <= T positions, padded to the smallest compiled shape that
 * holds it, where the model computes the shorter one as a prefix of the
 * longer (lrc_graph_track_axis). So that the cost follows the work, the
 * batch halves down to 1 and the sequence down to min_seq: [Bv, Tv] below
 * are those shapes besides [B, T]. */
#define CLI_SHAPES_MAX_NAMED 32

typedef struct cli_shapes {
    bool batch_prefix, seq_prefix;
    bool seq_axis_none; /* no input has a sequence axis (an image model) */
    char batch_fixed[256], seq_fixed[256]; /* why an axis runs only its compiled size */
    int n;
    int64_t batch[LRC_PACKAGE_MAX_SHAPES], seq[LRC_PACKAGE_MAX_SHAPES];
    /* where each input and output holds the batch and the sequence (-1:
     * nowhere, or the axis is fixed): what a run pads and cuts */
    int n_named;
    char name[CLI_SHAPES_MAX_NAMED][64];
    int batch_axis[CLI_SHAPES_MAX_NAMED], seq_axis[CLI_SHAPES_MAX_NAMED];
} cli_shapes;

/* g is m built for [B, T]. A model that is not causal along the sequence
 * (or mixes its batch rows, or does not build at half the size) keeps that
 * axis fixed, with the reason; that is not an error. */
void cli_shapes_plan(lrc_model *m, const lrc_graph *g, int64_t B, int64_t T, int64_t min_seq, cli_shapes *out);
/* Removes shape i from the list (one the model does not build for). */
void cli_shapes_drop(cli_shapes *sh, int i);

#endif
