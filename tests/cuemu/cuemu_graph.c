/* cuemu_graph.c — streams, stream capture and CUDA graphs, as the cuda
 * executor uses them to run a plan as one graph launch.
 *
 * A stream runs what is put on it at once (the emulator is synchronous), so
 * a stream is only a name, until a capture begins on it: then every call on
 * that stream (a kernel launch, a cuBLAS or cuBLASLt GEMM on a handle bound
 * to it, an asynchronous copy) is recorded, with its arguments as they are
 * at the call, and runs only when a graph instantiated from the capture is
 * launched; each launch runs the recorded calls in their order. As on a
 * GPU, a capture in progress refuses what would wait for the device or run
 * on the legacy stream (a synchronous copy, a synchronize, a launch on
 * stream 0): the call fails and the capture is invalidated, so its end
 * returns CUDA_ERROR_STREAM_CAPTURE_INVALIDATED. LRC_CUEMU_TRACE prints a
 * line at each capture's end and each graph launch. */
#include "cuemu.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { OK = 0, INVALID_VALUE = 1, CAPTURE_UNSUPPORTED = 900, CAPTURE_INVALIDATED = 901, CAPTURE_IMPLICIT = 906 };

typedef struct {
    cuemu_replay_fn replay;
    void *payload; /* the call's arguments, copied */
    size_t size;
} node;

typedef struct {
    node *nodes;
    int n, cap;
} graph;

typedef struct {
    int magic;
} stream;
#define STREAM_MAGIC 0x5EA7

static stream *capturing; /* the stream a capture is in progress on, or NULL */
static graph *capture;
static bool invalidated;

static bool valid(void *s) { return s && ((stream *)s)->magic == STREAM_MAGIC; }

int cuemu_stream_use(void *s, cuemu_replay_fn replay, const void *payload, size_t size)
{
    if (s && !valid(s)) return INVALID_VALUE;
    if (!capturing) return OK;
    if (s != capturing) { /* the legacy stream, or another, while this thread captures */
        invalidated = true;
        return CAPTURE_IMPLICIT;
    }
    if (capture->n == capture->cap) capture->nodes = realloc(capture->nodes, (size_t)(capture->cap = capture->cap ? 2 * capture->cap : 64) * sizeof(node));
    void *copy = malloc(size);
    memcpy(copy, payload, size);
    capture->nodes[capture->n++] = (node){replay, copy, size};
    return CUEMU_CAPTURED;
}

int cuemu_capture_refuses(void)
{
    if (!capturing) return OK;
    invalidated = true;
    return CAPTURE_UNSUPPORTED;
}

int cuStreamCreate(void **out, unsigned flags)
{
    if (!out || flags > 1) return INVALID_VALUE;
    stream *s = malloc(sizeof *s);
    s->magic = STREAM_MAGIC;
    *out = s;
    return OK;
}

int cuStreamDestroy_v2(void *s)
{
    if (!valid(s) || s == capturing) return INVALID_VALUE;
    ((stream *)s)->magic = 0;
    free(s);
    return OK;
}

int cuStreamBeginCapture_v2(void *s, int mode)
{
    if (!valid(s) || capturing || mode < 0 || mode > 2) return INVALID_VALUE;
    capturing = s;
    capture = calloc(1, sizeof *capture);
    invalidated = false;
    return OK;
}

static void graph_free(graph *g)
{
    for (int i = 0; g && i < g->n; i++) free(g->nodes[i].payload);
    if (g) free(g->nodes);
    free(g);
}

int cuStreamEndCapture(void *s, void **out)
{
    if (!valid(s) || s != capturing || !out) return INVALID_VALUE;
    capturing = NULL;
    /* LRC_CUEMU_CAPTURE_REFUSE=1: every capture invalidated, as a library
     * that cannot be captured leaves it */
    const char *refuse = getenv("LRC_CUEMU_CAPTURE_REFUSE");
    invalidated |= refuse && *refuse == '1';
    if (getenv("LRC_CUEMU_TRACE")) fprintf(stderr, "graph: captured %d calls%s\n", capture->n, invalidated ? ", invalidated" : "");
    if (invalidated) {
        graph_free(capture);
        capture = NULL, *out = NULL;
        return CAPTURE_INVALIDATED;
    }
    *out = capture;
    capture = NULL;
    return OK;
}

int cuGraphInstantiateWithFlags(void **out, void *g, unsigned long long flags)
{
    const graph *from = g;
    if (!out || !from || flags) return INVALID_VALUE;
    graph *x = calloc(1, sizeof *x);
    x->nodes = malloc((size_t)(from->n ? from->n : 1) * sizeof(node));
    x->n = x->cap = from->n;
    for (int i = 0; i < from->n; i++) { /* the payloads copied: the graph may be destroyed first */
        x->nodes[i] = from->nodes[i];
        x->nodes[i].payload = malloc(from->nodes[i].size);
        memcpy(x->nodes[i].payload, from->nodes[i].payload, from->nodes[i].size);
    }
    *out = x;
    return OK;
}

int cuGraphLaunch(void *exec, void *s)
{
    graph *x = exec;
    if (!x || (s && !valid(s))) return INVALID_VALUE;
    if (capturing) return cuemu_capture_refuses();
    if (getenv("LRC_CUEMU_TRACE")) fprintf(stderr, "graph launch: %d calls\n", x->n);
    for (int i = 0; i < x->n; i++) {
        int r = x->nodes[i].replay(x->nodes[i].payload);
        if (r) return r;
    }
    return OK;
}

int cuGraphExecDestroy(void *exec) { graph_free(exec); return OK; }
int cuGraphDestroy(void *g) { graph_free(g); return OK; }
