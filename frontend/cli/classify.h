/* classify.h — image classification helpers shared by lrc train and lrc
 * eval (internal to frontend/). */
#ifndef LRC_CLASSIFY_H
#define LRC_CLASSIFY_H

#include "cli.h"
#include "../compile/lrc_compile.h"

/* Loads the image data set (dir NULL: Debian's Fashion-MNIST) and checks
 * that model m takes its images and predicts at least its classes. */
int cli_images_open(lrc_model *m, const char *dir, lrc_images *im, lrc_err *err);

/* The model's forward graph for batches of B images, compiled for this
 * CPU, with parameters bound from params (not copied: an optimizer that
 * updates them in place calls cli_classifier_params_changed). */
typedef struct cli_classifier {
    lrc_compiled c;
    bool have_comp;
    lrc_exec *x;
    int64_t B;
    lrc_tensor_set in, outs;
    lrc_tensor *images, *labels;
} cli_classifier;
int cli_classifier_open(lrc_model *m, int64_t B, lrc_pool *pool, const lrc_tensor_set *params, cli_classifier *cl,
                        lrc_err *err);
void cli_classifier_params_changed(cli_classifier *cl);
/* Mean cross-entropy and accuracy over every image of a split. */
int cli_classifier_eval(cli_classifier *cl, const lrc_images *im, int split, double *loss, double *acc, lrc_err *err);
void cli_classifier_close(cli_classifier *cl);

#endif
