/* test_images — the IDX image loader (runtime/images.c) on tiny files written
 * here (gzipped and plain): sizes, the validation split, statistics,
 * normalization and padding, batches that depend only on (seed, index),
 * every epoch a permutation, crops and flips, and a located error for every
 * kind of damaged file. Then Fashion-MNIST itself when it is installed. */
#define _GNU_SOURCE
#include "check.h"
#include "runtime/lrc_runtime.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define N_TRAIN 5010 /* 10 training images, then 5000 validation ones */
#define N_TEST 7
#define H 4
#define W 4
#define HW (H * W)

static char dir[64];
static const char *NAMES[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
                               "t10k-labels-idx1-ubyte"};

/* Image i of a file: pixels 0 and 1 hold its id (so a batch tells which
 * image it holds), the rest a pattern that differs from pixel to pixel. */
static uint8_t pixel(int64_t i, int p)
{
    if (p == 0) return (uint8_t)(i & 255);
    if (p == 1) return (uint8_t)(i >> 8);
    return (uint8_t)((i * 7 + p * 29) % 256);
}
static uint8_t train_label(int64_t i) { return (uint8_t)(i % 3); }
static uint8_t test_label(int64_t i) { return i == 6 ? 4 : (uint8_t)(i % 3); } /* n_classes comes from all files */

/* An IDX file: magic, then sizes, then data, gzipped or plain. The other
 * spelling of the name is removed so that only this one is found. */
static void write_file(const char *name, bool gz, const uint8_t *bytes, size_t len)
{
    char path[256], other[256];
    snprintf(path, sizeof path, "%s/%s%s", dir, name, gz ? ".gz" : "");
    snprintf(other, sizeof other, "%s/%s%s", dir, name, gz ? "" : ".gz");
    unlink(other);
    if (gz) {
        gzFile f = gzopen(path, "wb");
        if (!f || gzwrite(f, bytes, (unsigned)len) != (int)len || gzclose(f) != Z_OK) {
            printf("cannot write %s\n", path);
            exit(2);
        }
    } else {
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(bytes, 1, len, f) != len || fclose(f)) {
            printf("cannot write %s\n", path);
            exit(2);
        }
    }
}

static size_t put_header(uint8_t *b, uint32_t magic, const uint32_t *dims, int rank)
{
    size_t o = 0;
    uint32_t words[4] = {magic, dims[0], rank > 1 ? dims[1] : 0, rank > 2 ? dims[2] : 0};
    for (int i = 0; i <= rank; i++)
        for (int s = 24; s >= 0; s -= 8) b[o++] = (uint8_t)(words[i] >> s);
    return o;
}

/* images with a header of n x h x w but `have` images of data (h*w bytes each) */
static void write_images(const char *name, bool gz, uint32_t magic, uint32_t n, uint32_t h, uint32_t w, int64_t have,
                         int64_t extra)
{
    size_t len = 16 + (size_t)have * h * w + (size_t)extra;
    uint8_t *b = calloc(len, 1);
    uint32_t dims[3] = {n, h, w};
    size_t o = put_header(b, magic, dims, 3);
    for (int64_t i = 0; i < have; i++)
        for (uint32_t p = 0; p < h * w; p++) b[o++] = pixel(i, (int)p);
    write_file(name, gz, b, len);
    free(b);
}

static void write_labels(const char *name, bool gz, uint32_t n, int64_t have, bool test)
{
    size_t len = 8 + (size_t)have;
    uint8_t *b = calloc(len, 1);
    size_t o = put_header(b, 0x801, &n, 1);
    for (int64_t i = 0; i < have; i++) b[o++] = test ? test_label(i) : train_label(i);
    write_file(name, gz, b, len);
    free(b);
}

/* The good set: gzipped except the training labels (plain). */
static void write_good(void)
{
    write_images(NAMES[0], true, 0x803, N_TRAIN, H, W, N_TRAIN, 0);
    write_labels(NAMES[1], false, N_TRAIN, N_TRAIN, false);
    write_images(NAMES[2], true, 0x803, N_TEST, H, W, N_TEST, 0);
    write_labels(NAMES[3], true, N_TEST, N_TEST, true);
}

static void remove_all(void)
{
    char path[256];
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, NAMES[i]);
        unlink(path);
        snprintf(path, sizeof path, "%s/%s.gz", dir, NAMES[i]);
        unlink(path);
    }
}

static void file_path(char *out, size_t n, int which, bool gz)
{
    snprintf(out, n, "%s/%s%s", dir, NAMES[which], gz ? ".gz" : "");
}

/* Loading must fail with LRC_EUSER, one line naming the file and containing
 * `what`, and leave nothing allocated. */
static void expect_error(const char *label, const char *path, const char *what)
{
    lrc_images im;
    lrc_err err = {0};
    int rc = lrc_images_load(&im, dir, &err);
    CHECK(rc == LRC_EUSER, "%s: load returned %d, expected LRC_EUSER", label, rc);
    CHECK(strstr(err.msg, path) != NULL, "%s: message does not name %s: %s", label, path, err.msg);
    CHECK(strstr(err.msg, what) != NULL, "%s: message lacks \"%s\": %s", label, what, err.msg);
    CHECK(!strchr(err.msg, '\n'), "%s: message is not one line: %s", label, err.msg);
    CHECK(!im.pixels[0] && !im.pixels[1] && !im.pixels[2] && !im.labels[0] && !im.perm,
          "%s: buffers left after the error", label);
    printf("  %-22s %s\n", label, err.msg);
    lrc_images_free(&im);
    write_good();
}

static float norm(const lrc_images *im, uint8_t v) { return (float)(((double)v / 255.0 - im->mean) / im->std); }

/* the id a normalized, unaugmented image encodes in its first two pixels */
static int64_t image_id(const lrc_images *im, const float *x)
{
    long lo = lround((x[0] * im->std + im->mean) * 255.0), hi = lround((x[1] * im->std + im->mean) * 255.0);
    return hi * 256 + lo;
}

static void test_good(void)
{
    lrc_images im;
    lrc_err err = {0};
    int rc = lrc_images_load(&im, dir, &err);
    CHECK(rc == LRC_OK, "load: %s", err.msg);
    if (rc) return;
    CHECK(im.channels == 1 && im.height == H && im.width == W, "sizes %lld %lld %lld", (long long)im.channels,
          (long long)im.height, (long long)im.width);
    CHECK(im.n[LRC_SPLIT_TRAIN] == 10 && im.n[LRC_SPLIT_VAL] == 5000 && im.n[LRC_SPLIT_TEST] == N_TEST,
          "n = %lld %lld %lld", (long long)im.n[0], (long long)im.n[1], (long long)im.n[2]);
    CHECK(im.n_classes == 5, "n_classes %lld, expected 5 (a test label of 4)", (long long)im.n_classes);

    /* the split: the first 10 images train, the last 5000 validate */
    int bad = 0;
    for (int s = 0; s < 3; s++) {
        int64_t first = s == LRC_SPLIT_VAL ? 10 : 0;
        for (int64_t i = 0; i < im.n[s]; i++) {
            for (int p = 0; p < HW; p++) bad += im.pixels[s][i * HW + p] != pixel(first + i, p);
            bad += im.labels[s][i] != (s == LRC_SPLIT_TEST ? test_label(i) : train_label(first + i));
        }
    }
    CHECK(bad == 0, "%d pixels or labels differ from the files'", bad);

    /* mean and std of the 10 training images' pixels in [0, 1] */
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < 10; i++)
        for (int p = 0; p < HW; p++) sum += pixel(i, p) / 255.0, sq += (pixel(i, p) / 255.0) * (pixel(i, p) / 255.0);
    double mean = sum / (10 * HW), std = sqrt(sq / (10 * HW) - mean * mean);
    CHECK(fabs(im.mean - mean) < 1e-12 && fabs(im.std - std) < 1e-12, "mean %.15f std %.15f, expected %.15f %.15f",
          im.mean, im.std, mean, std);

    /* lrc_images_range: normalized images, then zeros and -100 past the end */
    float x[8 * HW + 1];
    int32_t lab[8];
    x[4 * HW] = 12345.0f; /* a sentinel after a batch of 4 */
    int64_t real = lrc_images_range(&im, LRC_SPLIT_TEST, 5, 4, x, lab);
    CHECK(real == 2, "range returned %lld, expected 2", (long long)real);
    bad = 0;
    for (int b = 0; b < 4; b++)
        for (int p = 0; p < HW; p++) {
            float want = b < 2 ? norm(&im, pixel(5 + b, p)) : 0.0f;
            bad += fabsf(x[b * HW + p] - want) > 1e-6f;
        }
    CHECK(bad == 0, "range: %d values wrong", bad);
    CHECK(lab[0] == test_label(5) && lab[1] == test_label(6) && lab[2] == -100 && lab[3] == -100,
          "range labels %d %d %d %d", lab[0], lab[1], lab[2], lab[3]);
    CHECK(x[4 * HW] == 12345.0f, "range wrote past its batch");
    real = lrc_images_range(&im, LRC_SPLIT_VAL, 4990, 8, x, lab);
    CHECK(real == 8 && lab[0] == train_label(5000) && image_id(&im, x + 7 * HW) == 5007,
          "validation range: %lld, label %d, id %lld", (long long)real, lab[0], (long long)image_id(&im, x + 7 * HW));

    /* the same (seed, index) gives the same bytes; another index or seed other ones */
    lrc_augment aug = {.pad = 1, .flip = true};
    enum { B = 3 };
    float a[B * HW], b2[B * HW];
    int32_t la[B], lb[B];
    lrc_images_batch(&im, 7, 3, B, &aug, a, la);
    lrc_images_batch(&im, 7, 11, B, &aug, b2, lb); /* another epoch in between: the cache is rebuilt */
    lrc_images_batch(&im, 7, 3, B, &aug, b2, lb);
    CHECK(!memcmp(a, b2, sizeof a) && !memcmp(la, lb, sizeof la), "same seed and index, different batches");
    lrc_images_batch(&im, 7, 4, B, &aug, b2, lb);
    CHECK(memcmp(a, b2, sizeof a) != 0, "indices 3 and 4 gave the same batch");
    lrc_images_batch(&im, 8, 3, B, &aug, b2, lb);
    CHECK(memcmp(a, b2, sizeof a) != 0, "seeds 7 and 8 gave the same batch");

    /* sample k = index*B + i: batch 5 of 3 is samples 15..17, as batches 15..17 of 1 */
    lrc_images_batch(&im, 7, 5, B, &aug, a, la);
    for (int i = 0; i < B; i++) lrc_images_batch(&im, 7, 15 + i, 1, &aug, b2 + i * HW, lb + i);
    CHECK(!memcmp(a, b2, sizeof a) && !memcmp(la, lb, sizeof la), "batch 5 of 3 differs from samples 15..17");

    /* without augmentation: every epoch visits each training image once, as
     * lrc_images_range writes it; epochs are shuffled differently */
    lrc_augment none = {0};
    int64_t order[4][10];
    bad = 0;
    for (int64_t k = 0; k < 40; k++) {
        float one[HW], ref[HW];
        int32_t l, lr;
        lrc_images_batch(&im, 99, k, 1, k % 2 ? &none : NULL, one, &l);
        int64_t id = image_id(&im, one);
        order[k / 10][k % 10] = id;
        if (id < 0 || id >= 10) {
            bad++;
            continue;
        }
        lrc_images_range(&im, LRC_SPLIT_TRAIN, id, 1, ref, &lr);
        bad += memcmp(one, ref, sizeof one) != 0 || l != lr || l != train_label(id);
    }
    CHECK(bad == 0, "%d unaugmented samples differ from their images", bad);
    int dup = 0, same_order = 0;
    for (int e = 0; e < 4; e++) {
        int seen[10] = {0};
        for (int i = 0; i < 10; i++)
            if (order[e][i] >= 0 && order[e][i] < 10) seen[order[e][i]]++;
        for (int i = 0; i < 10; i++) dup += seen[i] != 1;
        if (e) same_order += !memcmp(order[e], order[e - 1], sizeof order[e]);
    }
    CHECK(dup == 0, "an epoch missed or repeated %d images", dup);
    CHECK(same_order == 0, "%d epochs kept the previous epoch's order", same_order);

    /* crops and flips: each sample is one of its image's 9 shifts x 2 mirrors,
     * the batch's shape untouched, and augmentation does change samples */
    enum { BA = 64 };
    static float xa[BA * HW + 1];
    int32_t la2[BA];
    xa[BA * HW] = 12345.0f;
    int unmatched = 0, changed = 0, flipped = 0;
    for (int64_t index = 0; index < 10; index++) {
        lrc_images_batch(&im, 3, index, BA, &aug, xa, la2);
        for (int s = 0; s < BA; s++) {
            const float *o = xa + s * HW;
            bool found = false, plain = false;
            for (int id = 0; id < 10 && !found; id++) {
                if (train_label(id) != la2[s]) continue;
                for (int f = 0; f < 2 && !found; f++)
                    for (int dy = -1; dy <= 1 && !found; dy++)
                        for (int dx = -1; dx <= 1 && !found; dx++) {
                            int diff = 0;
                            for (int y = 0; y < H; y++)
                                for (int xo = 0; xo < W; xo++) {
                                    int sy = y + dy, sx = (f ? W - 1 - xo : xo) + dx;
                                    uint8_t v = sy >= 0 && sy < H && sx >= 0 && sx < W ? pixel(id, sy * W + sx) : 0;
                                    diff += o[y * W + xo] != norm(&im, v);
                                }
                            if (!diff) {
                                found = true;
                                plain = !f && !dy && !dx;
                                flipped += f;
                            }
                        }
            }
            unmatched += !found;
            changed += found && !plain;
        }
    }
    CHECK(unmatched == 0, "%d augmented samples are no crop or flip of a training image", unmatched);
    CHECK(changed > 10 * BA / 2 && flipped > 10 * BA / 4 && flipped < 10 * BA * 3 / 4,
          "augmentation changed %d and flipped %d of %d samples", changed, flipped, 10 * BA);
    CHECK(xa[BA * HW] == 12345.0f, "batch wrote past its end");

    lrc_images_free(&im);
    CHECK(!im.perm && !im.pixels[0], "free left pointers");
}

/* Which crop (dy, dx within +-pad) and mirror f of the unaugmented sample
 * p the augmented sample o is: *f = -1 when none is. Shifting and
 * mirroring commute up to the sign of dx, so every order of the two is
 * found; the padding is the background, a raw 0. */
static void find_shift(const lrc_images *im, const float *p, const float *o, int pad, int *f, int *dy, int *dx)
{
    float bg = norm(im, 0);
    for (*f = 0; *f < 2; ++*f)
        for (*dy = -pad; *dy <= pad; ++*dy)
            for (*dx = -pad; *dx <= pad; ++*dx) {
                int diff = 0;
                for (int y = 0; y < H; y++)
                    for (int x = 0; x < W; x++) {
                        int sy = y + *dy, sx = (*f ? W - 1 - x : x) + *dx;
                        diff += o[y * W + x] != (sy >= 0 && sy < H && sx >= 0 && sx < W ? p[sy * W + sx] : bg);
                    }
                if (!diff) return;
            }
    *f = -1;
}

/* --flip and --crop-pad one at a time, against the same samples without
 * augmentation (the order of samples depends on seed and index alone):
 * a flip is the exact mirror of its image, never shifted, about half the
 * time; a crop of pad 2 keeps the size, shifts by at most 2 (the extremes
 * and the identity all happen) and never mirrors; and turning crops on
 * leaves each sample's flip as it was (images.c draws both always). */
static void test_augment(void)
{
    lrc_images im;
    lrc_err err = {0};
    int rc = lrc_images_load(&im, dir, &err);
    CHECK(rc == LRC_OK, "load: %s", err.msg);
    if (rc) return;
    enum { BA = 64, N = 10 * BA };
    static float plain[BA * HW], o[BA * HW + 1], o2[BA * HW];
    int32_t lp[BA], lo[BA];
    lrc_augment flip = {.pad = 0, .flip = true}, crop = {.pad = 2, .flip = false}, both = {.pad = 2, .flip = true};
    int not_mirror = 0, mirrored = 0, bad_crop = 0, crop_mirrored = 0, extreme = 0, identity = 0, flip_changed = 0;
    int wrong_labels = 0;
    o[BA * HW] = 12345.0f;
    for (int64_t index = 0; index < 10; index++) {
        lrc_images_batch(&im, 5, index, BA, NULL, plain, lp);
        lrc_images_batch(&im, 5, index, BA, &flip, o, lo);
        int fl[BA];
        for (int s = 0; s < BA; s++) {
            const float *p = plain + s * HW, *q = o + s * HW;
            int same = 0, mirror = 0;
            for (int y = 0; y < H; y++)
                for (int x = 0; x < W; x++) {
                    same += q[y * W + x] == p[y * W + x];
                    mirror += q[y * W + x] == p[y * W + (W - 1 - x)];
                }
            fl[s] = mirror == HW && same != HW;
            mirrored += fl[s];
            not_mirror += same != HW && mirror != HW;
            wrong_labels += lo[s] != lp[s];
        }
        lrc_images_batch(&im, 5, index, BA, &crop, o, lo);
        for (int s = 0; s < BA; s++) {
            int f, dy, dx;
            find_shift(&im, plain + s * HW, o + s * HW, 2, &f, &dy, &dx);
            bad_crop += f < 0;
            crop_mirrored += f == 1;
            extreme += f == 0 && (abs(dy) == 2 || abs(dx) == 2);
            identity += f == 0 && !dy && !dx;
            wrong_labels += lo[s] != lp[s];
        }
        lrc_images_batch(&im, 5, index, BA, &both, o2, lo);
        for (int s = 0; s < BA; s++) {
            int f, dy, dx;
            find_shift(&im, plain + s * HW, o2 + s * HW, 2, &f, &dy, &dx);
            flip_changed += f != fl[s];
        }
    }
    CHECK(not_mirror == 0, "--flip: %d samples are neither their image nor its mirror", not_mirror);
    CHECK(mirrored > N / 4 && mirrored < 3 * N / 4, "--flip: %d of %d samples mirrored, expected about half", mirrored, N);
    CHECK(bad_crop == 0, "--crop-pad 2: %d samples are no shift of their image by at most 2", bad_crop);
    CHECK(crop_mirrored == 0, "--crop-pad 2 without --flip mirrored %d samples", crop_mirrored);
    CHECK(extreme > N / 4 && identity > 0 && identity < N / 10,
          "--crop-pad 2: %d samples shifted by 2, %d not shifted, of %d (expected 16/25 and 1/25)", extreme, identity, N);
    CHECK(flip_changed == 0, "%d samples flipped otherwise once crops are on", flip_changed);
    CHECK(wrong_labels == 0, "augmentation changed %d labels", wrong_labels);
    CHECK(o[BA * HW] == 12345.0f, "an augmented batch wrote past its end");
    printf("augmentation: %d of %d flipped (exact mirrors), %d shifted by 2, %d not shifted\n", mirrored, N, extreme,
           identity);
    lrc_images_free(&im);
}

static void test_errors(void)
{
    char p[4][256], pgz[4][256];
    for (int i = 0; i < 4; i++) file_path(p[i], sizeof p[i], i, false), file_path(pgz[i], sizeof pgz[i], i, true);
    printf("errors:\n");

    /* a missing file names both spellings it looked for */
    file_path(p[3], sizeof p[3], 3, true);
    unlink(p[3]);
    file_path(p[3], sizeof p[3], 3, false);
    expect_error("missing", p[3], "t10k-labels-idx1-ubyte.gz: not found");

    /* a damaged gzip stream: bytes in the middle of the deflate data flipped */
    {
        FILE *f = fopen(pgz[0], "r+b");
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        for (long o = len / 3; o < len / 3 + 16; o++) {
            fseek(f, o, SEEK_SET);
            int c = fgetc(f);
            fseek(f, o, SEEK_SET);
            fputc(c ^ 0x5a, f);
        }
        fclose(f);
        expect_error("damaged gzip", pgz[0], "damaged gzip data");
    }
    /* a gzip file cut in half, a plain one cut short, a missing gzip trailer */
    {
        FILE *f = fopen(pgz[0], "rb");
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fclose(f);
        if (truncate(pgz[0], len / 2)) perror("truncate");
        expect_error("truncated gzip", pgz[0], "ends after");
        if (truncate(pgz[0], len - 4)) perror("truncate");
        expect_error("gzip without trailer", pgz[0], "damaged gzip data after 80176 bytes");
    }
    write_labels(NAMES[1], false, N_TRAIN, N_TRAIN - 3, false);
    expect_error("truncated plain", p[1], "ends after 5015 bytes, expected 5018");

    /* headers: magic, zero and absurd sizes, counts, sizes between files */
    write_images(NAMES[0], true, 0x801, N_TRAIN, H, W, N_TRAIN, 0);
    expect_error("images magic", pgz[0], "expected 0x00000803");
    write_labels(NAMES[3], true, N_TEST, N_TEST, true);
    {
        uint8_t b[8 + N_TEST];
        uint32_t n = N_TEST;
        put_header(b, 0x803, &n, 1); /* an images magic on the labels */
        write_file(NAMES[3], true, b, sizeof b);
        expect_error("labels magic", pgz[3], "expected 0x00000801");
    }
    write_images(NAMES[2], true, 0x803, 0, H, W, 0, 0);
    expect_error("zero images", pgz[2], "expected nonzero sizes");
    write_images(NAMES[0], true, 0x803, N_TRAIN, 0, W, 0, 0);
    expect_error("zero height", pgz[0], "expected nonzero sizes");
    write_images(NAMES[0], true, 0x803, 100000, 1000, 1000, 0, 0);
    expect_error("absurd size", pgz[0], "over the limit");
    write_images(NAMES[0], true, 0x803, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0, 0);
    expect_error("overflowing size", pgz[0], "over the limit");
    write_labels(NAMES[1], false, N_TRAIN - 1, N_TRAIN - 1, false);
    expect_error("count mismatch", p[1], "5009 labels, but");
    write_labels(NAMES[3], true, N_TEST + 1, N_TEST + 1, true);
    expect_error("test count mismatch", pgz[3], "8 labels, but");
    write_images(NAMES[2], true, 0x803, N_TEST, 5, W, N_TEST, 0);
    expect_error("test size differs", pgz[2], "images of 5x4, but the training images");
    write_images(NAMES[0], true, 0x803, 5000, H, W, 5000, 0);
    write_labels(NAMES[1], false, 5000, 5000, false);
    expect_error("no room for val", pgz[0], "5000 training images, expected more than 5000");
    write_images(NAMES[2], false, 0x803, N_TEST, H, W, N_TEST, 1);
    expect_error("trailing data", p[2], "data continues past the 128 bytes");
    write_file(NAMES[1], false, (const uint8_t *)"", 0);
    expect_error("empty file", p[1], "ends after 0 bytes, expected 4");
}

/* Fashion-MNIST itself, as Debian installs it; false where it is missing
 * (a failure under CI=true, which installs it; a skip elsewhere) */
static bool test_real(void)
{
    const char *real = "/usr/share/datasets/fashion-mnist";
    if (access(real, F_OK) != 0) {
        printf("skip: %s not found (apt-get install dataset-fashion-mnist): the real data set is not checked\n", real);
        const char *ci = getenv("CI");
        CHECK(!ci || strcmp(ci, "true"), "CI=true and Fashion-MNIST is not installed at %s", real);
        return false;
    }
    lrc_images im;
    lrc_err err = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = lrc_images_load(&im, NULL, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK(rc == LRC_OK, "Fashion-MNIST: %s", err.msg);
    if (rc) return true; /* a failure, not a skip */
    CHECK(im.n[0] == 55000 && im.n[1] == 5000 && im.n[2] == 10000, "Fashion-MNIST n = %lld %lld %lld",
          (long long)im.n[0], (long long)im.n[1], (long long)im.n[2]);
    CHECK(im.channels == 1 && im.height == 28 && im.width == 28 && im.n_classes == 10,
          "Fashion-MNIST %lldx%lldx%lld, %lld classes", (long long)im.channels, (long long)im.height,
          (long long)im.width, (long long)im.n_classes);
    CHECK(fabs(im.mean - 0.286) < 0.01 && fabs(im.std - 0.353) < 0.01, "Fashion-MNIST mean %f std %f", im.mean,
          im.std);
    printf("Fashion-MNIST: %lld/%lld/%lld images of %lldx%lld, %lld classes, training mean %.6f std %.6f "
           "(loaded in %.2f s)\n",
           (long long)im.n[0], (long long)im.n[1], (long long)im.n[2], (long long)im.height, (long long)im.width,
           (long long)im.n_classes, im.mean, im.std,
           (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    enum { B = 128 };
    static float x[B * 28 * 28];
    int32_t lab[B];
    lrc_augment aug = {.pad = 2, .flip = true};
    lrc_images_batch(&im, 1, 429, B, &aug, x, lab); /* 429 * 128 < 55000 <= 430 * 128: crosses into epoch 1 */
    int bad = 0;
    double s = 0;
    for (int i = 0; i < B * 28 * 28; i++) bad += !isfinite(x[i]), s += x[i];
    for (int i = 0; i < B; i++) bad += lab[i] < 0 || lab[i] >= 10;
    CHECK(bad == 0, "Fashion-MNIST batch: %d bad values", bad);
    printf("Fashion-MNIST: batch 429 of 128 (augmented) has mean %.3f after normalization\n", s / (B * 28 * 28));
    lrc_images_free(&im);
    return true;
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/lrc_images_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    write_good();
    test_good();
    test_augment();
    test_errors();
    remove_all();
    if (rmdir(dir)) perror(dir);
    bool real = test_real();
    int rc = check_summary();
    return rc || real ? rc : 77; /* ctest's skip: the real data set was not checked */
}
