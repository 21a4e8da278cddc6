/* json.c — cJSON's allocations through ir/util.c's checked allocators, so
 * that fault injection reaches them and a parse that ran out of memory is
 * told apart from bad JSON (cJSON returns NULL for both). */
#include "lrc_runtime.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdlib.h>

static void *json_malloc(size_t n) { return lrc_malloc(n); }

static void set_hooks(void)
{
    /* malloc and free underneath: cJSON's objects made before the hooks,
     * or by a host that uses cJSON itself, free alike */
    cJSON_Hooks hooks = {json_malloc, free};
    cJSON_InitHooks(&hooks);
}

void lrc_json_hooks(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, set_hooks);
}

cJSON *lrc_json_parse(const char *text, size_t len, const char **end, bool *nomem)
{
    lrc_json_hooks();
    int64_t failed = lrc_alloc_failures();
    const char *stop = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &stop, 0);
    *nomem = !root && lrc_alloc_failures() != failed;
    if (end) *end = stop;
    return root;
}
