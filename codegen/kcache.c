/* kcache.c — the on-disk cache of compiled kernels that every renderer
 * shares (docs/architecture.md, rule 7): NVRTC's cubins and PTX, LLVM's
 * object code. An entry is named by a hash of everything its result
 * depends on (the renderer's source or IR, the architecture, the compiler's
 * version and options), so a changed input is a new name and entries are
 * never invalidated, only added. An entry holds a header (magic, the
 * segments' sizes, a hash of the payload) before its segments: a damaged
 * or truncated entry fails the check, is compiled again and replaced, and
 * is never used. Entries are written to a file of the writer's own and
 * renamed into place, so two processes filling the cache at once each
 * leave a whole entry. */
#include "lrc_codegen.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#define KCACHE_MAGIC "LRCKC001"
#define KCACHE_MAX_SEGS 4

const char *lrc_kcache_state_name(lrc_kcache_state s)
{
    static const char *names[] = {"no cache", "compiled, now cached", "from the cache",
                                  "a damaged cache entry, compiled again and replaced"};
    _Static_assert(sizeof names / sizeof names[0] == LRC_KCACHE_REBUILT + 1, "every state needs a name");
    return names[s];
}

bool lrc_kcache_root(char *out, size_t n)
{
    const char *dir = getenv("LRC_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (dir && *dir) snprintf(out, n, "%s", dir);
    else if (xdg && *xdg) snprintf(out, n, "%s/lrc", xdg);
    else if (home && *home) snprintf(out, n, "%s/.cache/lrc", home);
    else return false;
    return true;
}

bool lrc_kcache_enabled(const char *kind_var)
{
    return !lrc_env_is("LRC_CACHE", "off") && !(kind_var && lrc_env_is(kind_var, "off"));
}

/* mkdir -p, for the root's parents too: LRC_CACHE_DIR may name a new path */
static bool make_dirs(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        int rc = mkdir(path, 0755);
        *p = '/';
        if (rc && errno != EEXIST) return false;
    }
    return mkdir(path, 0755) == 0 || errno == EEXIST;
}

bool lrc_kcache_path(const char *kind, const lrc_kcache_blob *parts, int n, char *out, size_t cap)
{
    char dir[4000], root[3900];
    out[0] = 0;
    if (!lrc_kcache_root(root, sizeof root)) return false;
    snprintf(dir, sizeof dir, "%s/%s", root, kind);
    if (!make_dirs(dir)) return false;
    /* two FNV-1a streams of different seeds: 128 bits of name; each part's
     * length goes in first, so moving bytes between parts changes the key */
    uint64_t h1 = LRC_FNV_SEED, h2 = 0x84222325cbf29ce4ull;
    for (int i = 0; i < n; i++) {
        uint64_t len = parts[i].size;
        h1 = lrc_fnv1a(lrc_fnv1a(h1, &len, sizeof len), parts[i].data, parts[i].size);
        h2 = lrc_fnv1a(lrc_fnv1a(h2, &len, sizeof len), parts[i].data, parts[i].size);
    }
    snprintf(out, cap, "%s/%016llx%016llx.bin", dir, (unsigned long long)h1, (unsigned long long)h2);
    return true;
}

bool lrc_kcache_exists(const char *path)
{
    struct stat st;
    return path[0] && stat(path, &st) == 0;
}

static uint64_t payload_hash(const lrc_kcache_blob *segs, int n)
{
    uint64_t h = LRC_FNV_SEED;
    for (int i = 0; i < n; i++) h = lrc_fnv1a(h, segs[i].data, segs[i].size);
    return h;
}

bool lrc_kcache_read(const char *path, int n, lrc_kcache_blob *segs)
{
    if (n < 1 || n > KCACHE_MAX_SEGS) return false;
    FILE *f = path[0] ? fopen(path, "rb") : NULL;
    if (!f) return false;
    char magic[8];
    uint64_t hdr[KCACHE_MAX_SEGS + 1], total = 0; /* the segments' sizes, then the payload's hash */
    bool ok = fread(magic, 1, 8, f) == 8 && !memcmp(magic, KCACHE_MAGIC, 8) && fread(hdr, 8, (size_t)n + 1, f) == (size_t)n + 1;
    for (int i = 0; i < n && ok; i++) {
        ok = hdr[i] < ((uint64_t)1 << 34); /* a damaged size, not a 16 GB kernel */
        total += hdr[i];
    }
    for (int i = 0; i < n; i++) segs[i] = (lrc_kcache_blob){NULL, 0};
    for (int i = 0; i < n && ok; i++) {
        /* a terminating zero past each segment: PTX is text */
        void *p = malloc((size_t)hdr[i] + 1);
        ok = p && fread(p, 1, (size_t)hdr[i], f) == hdr[i];
        if (p) ((char *)p)[hdr[i]] = 0;
        segs[i] = (lrc_kcache_blob){p, (size_t)hdr[i]};
    }
    ok = ok && fgetc(f) == EOF && payload_hash(segs, n) == hdr[n];
    fclose(f);
    if (!ok)
        for (int i = 0; i < n; i++) free((void *)segs[i].data), segs[i] = (lrc_kcache_blob){NULL, 0};
    return ok;
}

void lrc_kcache_write(const char *path, const lrc_kcache_blob *segs, int n)
{
    if (!path[0] || n < 1 || n > KCACHE_MAX_SEGS) return;
    static unsigned serial; /* two writes of one process never share a file */
    char tmp[4300];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), serial++);
    uint64_t hdr[KCACHE_MAX_SEGS + 1];
    for (int i = 0; i < n; i++) hdr[i] = segs[i].size;
    hdr[n] = payload_hash(segs, n);
    FILE *f = fopen(tmp, "wb");
    bool ok = f && fwrite(KCACHE_MAGIC, 1, 8, f) == 8 && fwrite(hdr, 8, (size_t)n + 1, f) == (size_t)n + 1;
    for (int i = 0; i < n && ok; i++) ok = fwrite(segs[i].data, 1, segs[i].size, f) == segs[i].size;
    if (f && fclose(f)) ok = false;
    if (!ok || rename(tmp, path)) remove(tmp);
}

/* Every entry of one kind's folder: counted and, with clear, removed.
 * Writers' temporary files are left alone: another process may be
 * filling them right now. */
static void walk_kind(const char *root, const char *kind, bool clear, lrc_kcache_usage *u)
{
    char dir[4000], path[4300];
    snprintf(dir, sizeof dir, "%s/%s", root, kind);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (len < 5 || strcmp(de->d_name + len - 4, ".bin")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat st;
        if (stat(path, &st) || !S_ISREG(st.st_mode)) continue;
        if (clear && remove(path)) continue;
        u->entries++;
        u->bytes += (int64_t)st.st_size;
    }
    closedir(d);
}

bool lrc_kcache_usage_of(const char *kind, bool clear, lrc_kcache_usage *u)
{
    char root[3900];
    memset(u, 0, sizeof *u);
    if (!lrc_kcache_root(root, sizeof root)) return false;
    walk_kind(root, kind, clear, u);
    return true;
}
