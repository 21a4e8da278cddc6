/* cmd_cache.c — lrc cache: the on-disk cache of compiled kernels
 * (codegen/kcache.c), its folder, entries and size per compiler, and
 * --clear to empty it. */
#include "cli.h"

#include "../../codegen/lrc_codegen.h"

#include <getopt.h>
#include <stdio.h>

enum { OPT_CLEAR = 2000 }; /* after cli.h's OPT_* */

int cmd_cache(int argc, char **argv)
{
    static const struct option opts[] = {{"clear", no_argument, 0, OPT_CLEAR}, {"help", no_argument, 0, OPT_HELP}, {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc cache [--clear]\n"
        "\n"
        "The cache of compiled kernels: its folder, and per compiler (llvm: the cpu\n"
        "target's object code; nvrtc: cuda's cubins and PTX) its entries and bytes.\n"
        "An entry is named by a hash of what the result depends on (the kernels'\n"
        "IR or source, the CPU or GPU architecture, the compiler's version and\n"
        "options), so an unchanged model compiles from it.\n"
        "The folder is $LRC_CACHE_DIR, else $XDG_CACHE_HOME/lrc, else ~/.cache/lrc.\n"
        "LRC_CACHE=off compiles without it (LRC_LLVM_CACHE=off, LRC_NVRTC_CACHE=off:\n"
        "one compiler's).\n"
        "\n"
        "  --clear   remove every entry (what it removed is printed)\n";
    opterr = 0;
    optind = 1;
    bool clear = false;
    for (int c; (c = getopt_long(argc, argv, ":", opts, NULL)) != -1;) {
        if (c == OPT_HELP) return cli_help("cache", opts, "", help);
        if (c == OPT_CLEAR) clear = true;
        else return cli_usage_error("cache", "unknown option %s", argv[optind - 1]);
    }
    if (optind < argc) return cli_usage_error("cache", "unexpected argument '%s'", argv[optind]);
    char root[3900];
    if (!lrc_kcache_root(root, sizeof root)) {
        lrc_err err;
        lrc_err_set(&err, "cache: no cache folder: set LRC_CACHE_DIR, XDG_CACHE_HOME or HOME");
        return cli_user_error(&err);
    }
    printf("cache: %s%s\n", root, lrc_kcache_enabled(NULL) ? "" : " (LRC_CACHE=off: not used)");
    static const char *kinds[] = {"llvm", "nvrtc"};
    lrc_kcache_usage total = {0};
    for (int i = 0; i < 2; i++) {
        lrc_kcache_usage u;
        lrc_kcache_usage_of(kinds[i], clear, &u);
        printf("  %-6s %lld entries, %.1f MB%s\n", kinds[i], (long long)u.entries, (double)u.bytes / 1e6, clear ? " removed" : "");
        total.entries += u.entries;
        total.bytes += u.bytes;
    }
    printf("  total  %lld entries, %.1f MB%s\n", (long long)total.entries, (double)total.bytes / 1e6, clear ? " removed" : "");
    return 0;
}
