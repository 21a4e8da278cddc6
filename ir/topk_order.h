/* topk_order.h — which k of n values torch.topk returns, and in which
 * order, ties included: the same permutation as PyTorch's CPU kernel
 * (aten's TopKImpl.h), which runs libstdc++'s std::nth_element and then
 * std::sort over the first k - 1 (std::partial_sort where k * 64 <= n) with
 * the order "NaN first, then larger". Transformers' Mixtral routes with
 * torch.topk, so routing ties break the same way only with the same
 * algorithm step for step: introselect with a median-of-three pivot and
 * the heap select it falls back to, insertion sort below 4 elements.
 *
 * Written once as a macro so that the reference (ir/ref_route.c, over its
 * `real`) and the CUDA prelude (codegen/cuda/prelude.c, the text of the
 * same expansion over float) compile the same code; the LLVM kernel
 * (codegen/llvm/topk.c) builds these functions instruction for instruction.
 * std::sort beyond 16 elements (introsort) is not written: the shape rule
 * allows k <= LRC_TOPK_MAX_SORTED unless k * 64 <= n. */
#ifndef LRC_TOPK_ORDER_H
#define LRC_TOPK_ORDER_H

#define LRC_TOPK_MAX_SORTED 17 /* std::sort of k - 1 <= 16 elements is an insertion sort */

/* FN: the functions' qualifiers; T: the value type. v[0..n) values,
 * ix[0..n) their indices, permuted together. */
#define LRC_TOPK_ALGORITHM(FN, T)                                                                                    \
    FN int lrc_topk_before(T a, T b) { return (a != a && b == b) || a > b; }                                         \
    FN void lrc_topk_swap(T *v, int *ix, long a, long b)                                                             \
    {                                                                                                                \
        T t = v[a];                                                                                                  \
        int j = ix[a];                                                                                               \
        v[a] = v[b], ix[a] = ix[b], v[b] = t, ix[b] = j;                                                             \
    }                                                                                                                \
    FN void lrc_topk_push_heap(T *v, int *ix, long f, long hole, long top, T val, int vi)                            \
    {                                                                                                                \
        long parent = (hole - 1) / 2;                                                                                \
        while (hole > top && lrc_topk_before(v[f + parent], val)) {                                                  \
            v[f + hole] = v[f + parent], ix[f + hole] = ix[f + parent];                                              \
            hole = parent;                                                                                           \
            parent = (hole - 1) / 2;                                                                                 \
        }                                                                                                            \
        v[f + hole] = val, ix[f + hole] = vi;                                                                        \
    }                                                                                                                \
    FN void lrc_topk_adjust_heap(T *v, int *ix, long f, long hole, long len, T val, int vi)                          \
    {                                                                                                                \
        long top = hole, second = hole;                                                                              \
        while (second < (len - 1) / 2) {                                                                             \
            second = 2 * (second + 1);                                                                               \
            if (lrc_topk_before(v[f + second], v[f + second - 1])) second--;                                         \
            v[f + hole] = v[f + second], ix[f + hole] = ix[f + second];                                              \
            hole = second;                                                                                           \
        }                                                                                                            \
        if ((len & 1) == 0 && second == (len - 2) / 2) {                                                             \
            second = 2 * (second + 1);                                                                               \
            v[f + hole] = v[f + second - 1], ix[f + hole] = ix[f + second - 1];                                      \
            hole = second - 1;                                                                                       \
        }                                                                                                            \
        lrc_topk_push_heap(v, ix, f, hole, top, val, vi);                                                            \
    }                                                                                                                \
    FN void lrc_topk_pop_heap(T *v, int *ix, long f, long len, long result)                                          \
    {                                                                                                                \
        T val = v[result];                                                                                           \
        int vi = ix[result];                                                                                         \
        v[result] = v[f], ix[result] = ix[f];                                                                        \
        lrc_topk_adjust_heap(v, ix, f, 0, len, val, vi);                                                             \
    }                                                                                                                \
    FN void lrc_topk_heap_select(T *v, int *ix, long f, long mid, long last)                                         \
    {                                                                                                                \
        long len = mid - f;                                                                                          \
        if (len >= 2)                                                                                                \
            for (long parent = (len - 2) / 2;; parent--) {                                                           \
                lrc_topk_adjust_heap(v, ix, f, parent, len, v[f + parent], ix[f + parent]);                          \
                if (parent == 0) break;                                                                              \
            }                                                                                                        \
        for (long i = mid; i < last; i++)                                                                            \
            if (lrc_topk_before(v[i], v[f])) lrc_topk_pop_heap(v, ix, f, len, i);                                    \
    }                                                                                                                \
    FN void lrc_topk_insertion_sort(T *v, int *ix, long f, long last)                                                \
    {                                                                                                                \
        for (long i = f + 1; i < last; i++) {                                                                        \
            T val = v[i];                                                                                            \
            int vi = ix[i];                                                                                          \
            long j = i;                                                                                              \
            if (lrc_topk_before(val, v[f]))                                                                          \
                for (; j > f; j--) v[j] = v[j - 1], ix[j] = ix[j - 1];                                               \
            else                                                                                                     \
                for (; lrc_topk_before(val, v[j - 1]); j--) v[j] = v[j - 1], ix[j] = ix[j - 1];                      \
            v[j] = val, ix[j] = vi;                                                                                  \
        }                                                                                                            \
    }                                                                                                                \
    FN void lrc_topk_median_to_first(T *v, int *ix, long r, long a, long b, long c)                                  \
    {                                                                                                                \
        long m;                                                                                                      \
        if (lrc_topk_before(v[a], v[b]))                                                                             \
            m = lrc_topk_before(v[b], v[c]) ? b : lrc_topk_before(v[a], v[c]) ? c : a;                               \
        else                                                                                                         \
            m = lrc_topk_before(v[a], v[c]) ? a : lrc_topk_before(v[b], v[c]) ? c : b;                               \
        lrc_topk_swap(v, ix, r, m);                                                                                  \
    }                                                                                                                \
    FN long lrc_topk_partition(T *v, int *ix, long f, long last, long pivot)                                         \
    {                                                                                                                \
        for (;; f++) {                                                                                               \
            while (lrc_topk_before(v[f], v[pivot])) f++;                                                             \
            last--;                                                                                                  \
            while (lrc_topk_before(v[pivot], v[last])) last--;                                                       \
            if (!(f < last)) return f;                                                                               \
            lrc_topk_swap(v, ix, f, last);                                                                           \
        }                                                                                                            \
    }                                                                                                                \
    FN void lrc_topk_order(T *v, int *ix, long n, long k)                                                            \
    {                                                                                                                \
        if (k <= 0 || n <= 0) return;                                                                                \
        if (k * 64 <= n) {                                                                                           \
            lrc_topk_heap_select(v, ix, 0, k, n);                                                                    \
            for (long last = k; last > 1;) {                                                                         \
                last--;                                                                                              \
                lrc_topk_pop_heap(v, ix, 0, last, last);                                                             \
            }                                                                                                        \
            return;                                                                                                  \
        }                                                                                                            \
        long f = 0, last = n, nth = k - 1, depth = 0;                                                                \
        for (long m = n; m > 1; m >>= 1) depth += 2;                                                                 \
        while (last - f > 3) {                                                                                       \
            if (depth == 0) {                                                                                        \
                lrc_topk_heap_select(v, ix, f, nth + 1, last);                                                       \
                lrc_topk_swap(v, ix, f, nth);                                                                        \
                f = last = 0;                                                                                        \
                break;                                                                                               \
            }                                                                                                        \
            depth--;                                                                                                 \
            lrc_topk_median_to_first(v, ix, f, f + 1, f + (last - f) / 2, last - 1);                                 \
            long cut = lrc_topk_partition(v, ix, f + 1, last, f);                                                    \
            if (cut <= nth) f = cut;                                                                                 \
            else last = cut;                                                                                         \
        }                                                                                                            \
        lrc_topk_insertion_sort(v, ix, f, last);                                                                     \
        lrc_topk_insertion_sort(v, ix, 0, k - 1);                                                                    \
    }

#endif
