/* images.c — Fashion-MNIST as IDX files (gzipped or not) read through zlib:
 * every structural problem reported with the file's path, a fixed
 * train/validation split, training batches whose order and augmentation
 * depend only on (seed, batch number), so that a resumed run needs no saved
 * random state, and in-order batches of any split for evaluation. */
#include "lrc_runtime.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#define N_VAL 5000 /* the last training images: the validation split */
/* Fashion-MNIST's training pixels are 47 MB: a header that claims more than
 * 2 GiB is damaged, and refusing it early avoids a huge allocation. */
#define MAX_PIXEL_BYTES ((int64_t)1 << 31)
#define MAGIC_IMAGES 0x00000803u /* unsigned bytes, 3 dimensions (n, rows, columns) */
#define MAGIC_LABELS 0x00000801u /* unsigned bytes, 1 dimension (n) */

static const char *const FILE_NAMES[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                                          "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};

typedef struct idx_file {
    gzFile gz;
    char path[4200];
    int64_t dim[3];
    int64_t pos, size; /* bytes read so far; bytes the file should hold so far as known */
} idx_file;

static void idx_close(idx_file *f)
{
    if (f->gz) gzclose(f->gz);
    f->gz = NULL;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static int gz_failed(idx_file *f, lrc_err *err)
{
    int code = Z_OK;
    const char *msg = gzerror(f->gz, &code);
    if (code == Z_ERRNO)
        return lrc_err_set(err, "%s: read error after %lld bytes: %s", f->path, (long long)f->pos, strerror(errno));
    /* zlib's message starts with the path we gave it: said once is enough */
    size_t n = strlen(f->path);
    if (!strncmp(msg, f->path, n) && !strncmp(msg + n, ": ", 2)) msg += n + 2;
    return lrc_err_set(err, "%s: damaged gzip data after %lld bytes: %s", f->path, (long long)f->pos, msg);
}

/* Exactly len bytes, or an error saying how far the file got: a truncated
 * download or a damaged gzip stream must not become a partial data set. */
static int idx_read(idx_file *f, void *buf, int64_t len, lrc_err *err)
{
    uint8_t *p = buf;
    while (len > 0) {
        unsigned chunk = len > (1 << 30) ? 1u << 30 : (unsigned)len; /* gzread counts in int */
        int r = gzread(f->gz, p, chunk);
        if (r < 0) return gz_failed(f, err);
        if (r == 0)
            return lrc_err_set(err, "%s: ends after %lld bytes, expected %lld", f->path, (long long)f->pos,
                               (long long)f->size);
        p += r;
        len -= r;
        f->pos += r;
    }
    return LRC_OK;
}

/* Opens DIR/NAME.gz as Debian ships it, else DIR/NAME (gunzipped: gzread
 * reads plain files as they are), and reads the header: the magic number,
 * then one big-endian 32-bit size per dimension. */
static int idx_open(idx_file *f, const char *dir, const char *name, uint32_t magic, bool default_dir, lrc_err *err)
{
    memset(f, 0, sizeof *f);
    char plain[sizeof f->path];
    if ((size_t)snprintf(f->path, sizeof f->path, "%s/%s.gz", dir, name) >= sizeof f->path ||
        (size_t)snprintf(plain, sizeof plain, "%s/%s", dir, name) >= sizeof plain)
        return lrc_err_set(err, "%.200s...: directory name too long for %s", dir, name);
    errno = 0;
    f->gz = gzopen(f->path, "rb");
    if (!f->gz && errno == ENOENT) {
        char gz[sizeof f->path];
        memcpy(gz, f->path, sizeof gz);
        memcpy(f->path, plain, sizeof plain);
        errno = 0;
        f->gz = gzopen(f->path, "rb");
        if (!f->gz && errno == ENOENT)
            return lrc_err_set(err, "%s: not found (nor %s)%s", gz, plain,
                               default_dir ? "; install Fashion-MNIST with `apt-get install dataset-fashion-mnist`"
                                           : "");
    }
    if (!f->gz) return lrc_err_set(err, "%s: cannot open: %s", f->path, errno ? strerror(errno) : "out of memory");
    gzbuffer(f->gz, 1 << 17); /* fewer, larger reads than zlib's 8 KiB default */

    int rank = (int)(magic & 0xff);
    uint8_t h[12];
    f->size = 4;
    if (idx_read(f, h, 4, err)) goto fail;
    if (be32(h) != magic) {
        lrc_err_set(err, "%s: magic number 0x%08x, expected 0x%08x (IDX %s: unsigned bytes, %d dimension%s)",
                    f->path, be32(h), magic, rank == 3 ? "images" : "labels", rank, rank == 1 ? "" : "s");
        goto fail;
    }
    f->size = 4 + 4 * rank;
    if (idx_read(f, h, 4 * rank, err)) goto fail;
    for (int i = 0; i < rank; i++) f->dim[i] = be32(h + 4 * i);
    return LRC_OK;
fail:
    idx_close(f);
    return LRC_EUSER;
}

/* Reading past the data: anything there means the header and the data
 * disagree, and the attempt makes zlib check the gzip trailer's CRC. */
static int idx_finish(idx_file *f, lrc_err *err)
{
    uint8_t extra;
    int r = gzread(f->gz, &extra, 1);
    int code = Z_OK;
    gzerror(f->gz, &code);
    if (r < 0 || (r == 0 && code != Z_OK)) return gz_failed(f, err);
    if (r > 0)
        return lrc_err_set(err, "%s: data continues past the %lld bytes its header describes", f->path,
                           (long long)f->size);
    idx_close(f);
    return LRC_OK;
}

void lrc_images_free(lrc_images *im)
{
    for (int s = 0; s < 3; s++) {
        free(im->pixels[s]);
        free(im->labels[s]);
    }
    free(im->perm);
    memset(im, 0, sizeof *im);
}

int lrc_images_load(lrc_images *im, const char *dir, lrc_err *err)
{
    memset(im, 0, sizeof *im);
    bool default_dir = !dir;
    if (!dir) dir = DEFAULT_DIR;
    idx_file fi = {0}, fl = {0};
    uint8_t *raw = NULL;
    char train_path[sizeof fi.path] = "";
    im->channels = 1; /* IDX images are greyscale */
    /* part 0: the training file, split into train and validation; part 1: test */
    for (int part = 0; part < 2; part++) {
        if (idx_open(&fi, dir, FILE_NAMES[2 * part], MAGIC_IMAGES, default_dir, err) ||
            idx_open(&fl, dir, FILE_NAMES[2 * part + 1], MAGIC_LABELS, default_dir, err))
            goto fail;
        int64_t n = fi.dim[0], h = fi.dim[1], w = fi.dim[2];
        if (n == 0 || h == 0 || w == 0) {
            lrc_err_set(err, "%s: header gives %lld images of %lldx%lld, expected nonzero sizes", fi.path,
                        (long long)n, (long long)h, (long long)w);
            goto fail;
        }
        /* each size < 2^32, so h * w fits 64 bits; n * h * w is compared by division */
        if ((uint64_t)h * (uint64_t)w > (uint64_t)(MAX_PIXEL_BYTES / n)) {
            lrc_err_set(err, "%s: header gives %lld images of %lldx%lld, over the limit of 2^31 bytes of pixels",
                        fi.path, (long long)n, (long long)h, (long long)w);
            goto fail;
        }
        if (part == 0) {
            im->height = h;
            im->width = w;
            memcpy(train_path, fi.path, sizeof train_path);
        } else if (h != im->height || w != im->width) {
            lrc_err_set(err, "%s: images of %lldx%lld, but the training images (%s) are %lldx%lld", fi.path,
                        (long long)h, (long long)w, train_path, (long long)im->height, (long long)im->width);
            goto fail;
        }
        if (fl.dim[0] != n) {
            lrc_err_set(err, "%s: %lld labels, but %s holds %lld images", fl.path, (long long)fl.dim[0], fi.path,
                        (long long)n);
            goto fail;
        }
        if (part == 0 && n <= N_VAL) {
            lrc_err_set(err, "%s: %lld training images, expected more than %d (the last %d are the validation split)",
                        fi.path, (long long)n, N_VAL, N_VAL);
            goto fail;
        }
        int64_t hw = h * w;
        fi.size += n * hw;
        fl.size += n;
        int first = part == 0 ? LRC_SPLIT_TRAIN : LRC_SPLIT_TEST, last = part == 0 ? LRC_SPLIT_VAL : LRC_SPLIT_TEST;
        im->n[first] = part == 0 ? n - N_VAL : n;
        if (part == 0) im->n[LRC_SPLIT_VAL] = N_VAL;
        for (int s = first; s <= last; s++) {
            if (!(im->pixels[s] = lrc_malloc((size_t)(im->n[s] * hw)))) {
                lrc_err_nomem(err, "%s: for %lld images", fi.path, (long long)im->n[s]);
                goto fail;
            }
            if (idx_read(&fi, im->pixels[s], im->n[s] * hw, err)) goto fail;
        }
        if (idx_finish(&fi, err)) goto fail;
        if (!(raw = lrc_malloc((size_t)n))) {
            lrc_err_nomem(err, "%s: for %lld labels", fl.path, (long long)n);
            goto fail;
        }
        if (idx_read(&fl, raw, n, err) || idx_finish(&fl, err)) goto fail;
        /* bytes, so at most 256 classes: any label is valid */
        const uint8_t *r = raw;
        for (int s = first; s <= last; s++) {
            if (!(im->labels[s] = lrc_malloc((size_t)im->n[s] * sizeof(int32_t)))) {
                lrc_err_nomem(err, "%s: for %lld labels", fl.path, (long long)im->n[s]);
                goto fail;
            }
            for (int64_t i = 0; i < im->n[s]; i++) {
                im->labels[s][i] = *r++;
                if (im->labels[s][i] >= im->n_classes) im->n_classes = im->labels[s][i] + 1;
            }
        }
        free(raw);
        raw = NULL;
    }
    /* the training split's order, shuffled per epoch (epoch_perm) in place */
    if (!(im->perm = lrc_malloc((size_t)im->n[LRC_SPLIT_TRAIN] * sizeof(int64_t) + 8))) {
        lrc_err_nomem(err, "%s: for the order of %lld images", fi.path, (long long)im->n[LRC_SPLIT_TRAIN]);
        goto fail;
    }
    im->perm_epoch = -1; /* none shuffled yet */

    /* exact integer sums, so the statistics do not depend on summation order */
    uint64_t sum = 0, sq = 0;
    int64_t count = im->n[LRC_SPLIT_TRAIN] * im->height * im->width;
    for (int64_t i = 0; i < count; i++) {
        uint64_t v = im->pixels[LRC_SPLIT_TRAIN][i];
        sum += v;
        sq += v * v;
    }
    im->mean = (double)sum / (double)count / 255.0;
    double var = (double)sq / (double)count / (255.0 * 255.0) - im->mean * im->mean;
    im->std = var > 0 ? sqrt(var) : 0;
    /* constant images would divide by zero: they normalize to zero instead */
    if (!(im->std > 1e-12)) im->std = 1;
    return LRC_OK;

fail:
    idx_close(&fi);
    idx_close(&fl);
    free(raw);
    lrc_images_free(im);
    return LRC_EUSER;
}

/* x / 255 normalized, for every byte value */
static void norm_table(const lrc_images *im, float t[256])
{
    for (int v = 0; v < 256; v++) t[v] = (float)(((double)v / 255.0 - im->mean) / im->std);
}

/* splitmix64's finalizer: a bijection, so distinct i give distinct seeds
 * for one (seed, tag), and the tags keep shuffles and augmentation apart. */
static uint64_t fmix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint64_t stream_seed(uint64_t seed, uint64_t tag, uint64_t i) { return fmix(fmix(seed ^ tag) ^ i); }
#define TAG_SHUFFLE 0x53485546464c45ull /* "SHUFFLE" */
#define TAG_AUGMENT 0x4155474d454e54ull /* "AUGMENT" */

/* The training split's order in epoch e: rebuilt only when the epoch or the
 * seed changes, so consecutive batches cost one shuffle per epoch. */
static const int64_t *epoch_perm(lrc_images *im, uint64_t seed, int64_t e)
{
    int64_t n = im->n[LRC_SPLIT_TRAIN];
    if (im->perm_epoch == e && im->perm_seed == seed) return im->perm; /* lrc_images_load made perm */
    for (int64_t i = 0; i < n; i++) im->perm[i] = i;
    lrc_rng r;
    lrc_rng_seed(&r, stream_seed(seed, TAG_SHUFFLE, (uint64_t)e));
    for (int64_t i = n - 1; i > 0; i--) { /* Fisher-Yates; the modulo's bias is below 2^-32 */
        int64_t j = (int64_t)(lrc_rng_next(&r) % (uint64_t)(i + 1)), t = im->perm[i];
        im->perm[i] = im->perm[j];
        im->perm[j] = t;
    }
    im->perm_epoch = e;
    im->perm_seed = seed;
    return im->perm;
}

void lrc_images_batch(lrc_images *im, uint64_t seed, int64_t index, int64_t B, const lrc_augment *aug, float *x,
                      int32_t *labels)
{
    int64_t n = im->n[LRC_SPLIT_TRAIN], C = im->channels, H = im->height, W = im->width, chw = C * H * W;
    float t[256];
    norm_table(im, t);
    for (int64_t b = 0; b < B; b++) {
        int64_t k = index * B + b, src = epoch_perm(im, seed, k / n)[k % n];
        const uint8_t *img = im->pixels[LRC_SPLIT_TRAIN] + src * chw;
        float *out = x + b * chw;
        labels[b] = im->labels[LRC_SPLIT_TRAIN][src];
        int64_t dy = 0, dx = 0;
        bool flip = false;
        if (aug) {
            /* three draws always, so that turning crops on or off leaves the flips as they were */
            lrc_rng r;
            lrc_rng_seed(&r, stream_seed(seed, TAG_AUGMENT, (uint64_t)k));
            uint64_t ry = lrc_rng_next(&r), rx = lrc_rng_next(&r), rf = lrc_rng_next(&r);
            if (aug->pad > 0) {
                uint64_t span = 2 * (uint64_t)aug->pad + 1;
                dy = (int64_t)(ry % span) - aug->pad;
                dx = (int64_t)(rx % span) - aug->pad;
            }
            flip = aug->flip && (rf >> 63);
        }
        if (!dy && !dx && !flip) {
            for (int64_t p = 0; p < chw; p++) out[p] = t[img[p]];
            continue;
        }
        /* the window at (dy, dx) of the image padded with zeros, then mirrored */
        for (int64_t c = 0; c < C; c++)
            for (int64_t y = 0; y < H; y++)
                for (int64_t xo = 0; xo < W; xo++) {
                    int64_t sy = y + dy, sx = (flip ? W - 1 - xo : xo) + dx;
                    uint8_t v = sy >= 0 && sy < H && sx >= 0 && sx < W ? img[(c * H + sy) * W + sx] : 0;
                    out[(c * H + y) * W + xo] = t[v];
                }
    }
}

int64_t lrc_images_range(const lrc_images *im, int split, int64_t start, int64_t B, float *x, int32_t *labels)
{
    int64_t chw = im->channels * im->height * im->width, real = 0;
    int64_t n = split >= 0 && split < 3 ? im->n[split] : 0;
    float t[256];
    norm_table(im, t);
    for (int64_t b = 0; b < B; b++) {
        int64_t j = start + b;
        float *out = x + b * chw;
        if (j < 0 || j >= n) { /* padding of a last, partial batch */
            memset(out, 0, (size_t)chw * sizeof(float));
            labels[b] = -100;
            continue;
        }
        const uint8_t *img = im->pixels[split] + j * chw;
        for (int64_t p = 0; p < chw; p++) out[p] = t[img[p]];
        labels[b] = im->labels[split][j];
        real++;
    }
    return real;
}
