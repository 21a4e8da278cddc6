/* rope.c — sequence RoPE's frequencies, once for every target: the reference
 * kernels and both renderers' angle tables call lrc_rope_inv_freq, so a
 * scaled RoPE (Llama 3's, linear) means the same everywhere. */
#include <math.h>
#include <stdio.h>

#include "lrc_ir.h"

/* Where n's float attributes hold its rope: rope and rope_grad, base then
 * the scaling; kv_attention, scale, base, softcap, then the scaling */
static void rope_slots(const lrc_node *n, int *base, int *scaling)
{
    bool kv = n->op == LRC_OP_KV_ATTENTION;
    *base = kv ? 1 : 0, *scaling = kv ? 3 : 1;
}

lrc_rope lrc_rope_of(const lrc_node *n)
{
    int b, s;
    rope_slots(n, &b, &s);
    const double *f = n->fattr;
    lrc_rope r = {f[b], f[s], f[s + 1], f[s + 2], f[s + 3]};
    return r;
}

void lrc_rope_set(lrc_node *n, const lrc_rope *r)
{
    int b, s;
    rope_slots(n, &b, &s);
    n->fattr[b] = r->base, n->fattr[s] = r->factor, n->fattr[s + 1] = r->low_freq;
    n->fattr[s + 2] = r->high_freq, n->fattr[s + 3] = r->orig_ctx;
}

bool lrc_rope_scaled(const lrc_rope *r) { return r->factor != 0 && r->factor != 1; }

/* transformers' _compute_llama3_parameters, per frequency: wavelengths
 * shorter than orig_ctx / high_freq keep their frequency, those longer than
 * orig_ctx / low_freq are divided by the factor, and those between move
 * smoothly from one to the other; orig_ctx 0 is linear scaling (every
 * frequency divided, as positions / factor) */
double lrc_rope_inv_freq(const lrc_rope *r, int64_t i, int64_t D)
{
    if (!(r->base > 0)) return 0; /* no RoPE */
    double f = pow(r->base, -2.0 * (double)i / (double)D);
    if (!lrc_rope_scaled(r)) return f;
    if (!(r->orig_ctx > 0)) return f / r->factor;
    double wavelen = 2.0 * M_PI / f, low_wavelen = r->orig_ctx / r->low_freq, high_wavelen = r->orig_ctx / r->high_freq;
    if (wavelen < high_wavelen) return f;
    if (wavelen > low_wavelen) return f / r->factor;
    double smooth = (r->orig_ctx / wavelen - r->low_freq) / (r->high_freq - r->low_freq);
    return (1 - smooth) * f / r->factor + smooth * f;
}

int lrc_rope_check(const lrc_rope *r, const char *op, lrc_err *err)
{
    if (!(r->factor >= 0) || isinf(r->factor))
        return lrc_err_set(err, "%s: the RoPE scaling factor must be positive (0 or 1: none), got %g", op, r->factor);
    if (!lrc_rope_scaled(r)) {
        if (r->low_freq != 0 || r->high_freq != 0 || r->orig_ctx != 0)
            return lrc_err_set(err, "%s: low_freq, high_freq and orig_ctx scale RoPE only with a factor other than 1", op);
        return LRC_OK;
    }
    if (r->orig_ctx == 0 && r->low_freq == 0 && r->high_freq == 0) return LRC_OK; /* linear */
    if (!(r->orig_ctx > 0) || !(r->low_freq > 0) || !(r->high_freq > r->low_freq) || isinf(r->orig_ctx) || isinf(r->high_freq))
        return lrc_err_set(err, "%s: Llama 3 RoPE scaling needs orig_ctx > 0 and 0 < low_freq < high_freq, got %g, %g, %g", op,
                           r->orig_ctx, r->low_freq, r->high_freq);
    return LRC_OK;
}

void lrc_rope_name(const lrc_rope *r, char *buf, size_t n)
{
    /* %a: exact, so tables of different scalings never share a name */
    snprintf(buf, n, "%a_%a_%a_%a_%a", r->base, r->factor, r->low_freq, r->high_freq, r->orig_ctx);
    for (char *p = buf; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) *p = '_';
}
