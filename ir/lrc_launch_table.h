/* lrc_launch_table.h — the launch table a cpu package's kernels.so carries:
 * what the LLVM renderer (codegen/llvm/launch_table.c) compiled each launch
 * for, which the package loader (runtime/package_launches.c) checks
 * package.json's plan against before anything runs. package.json alone says
 * how many items a kernel runs and which buffers it reads and writes; an
 * edit there (items raised, arguments shifted or rotated) that the table in
 * the library does not repeat is refused, and changing the library breaks
 * the size and hash package.json records for it. Header only (no code to
 * link), so codegen/llvm may include it while runtime/ depends on ir/ alone.
 *
 * The table is one constant array of int64 words, LRC_LAUNCH_TABLE_SYMBOL:
 *   magic, total words, number of records, then per kernel description (in
 *   the program's order, pack launches and loops' back edges included):
 *     symbol hash (lrc_launch_table_hash of the function it runs; 0 for a
 *     back edge), items, flags (LRC_LT_ONCE, LRC_LT_STEAL), loop_to (the
 *     record a back edge returns to, or -1), number of arguments n,
 *     then n triples: buffer id, bytes, storage (LRC_LT_F32 ...). */
#ifndef LRC_LAUNCH_TABLE_H
#define LRC_LAUNCH_TABLE_H

#include <stdint.h>

#define LRC_LAUNCH_TABLE_SYMBOL "lrc_launch_table"
#define LRC_LAUNCH_TABLE_MAGIC 0x4c52434c54310001ll /* "LRCLT1", version 1 */
#define LRC_LT_HEADER 3                             /* magic, words, records */
#define LRC_LT_RECORD 5                             /* words of a record before its arguments */

enum { LRC_LT_ONCE = 1, LRC_LT_STEAL = 2 };
/* How a kernel reads an argument: f32 or i32 elements, or raw bytes (packed
 * weight panels and scratch, which a package may hold as u8 parameters). */
enum { LRC_LT_F32 = 1, LRC_LT_I32 = 2, LRC_LT_RAW = 3 };

/* FNV-1a of a kernel's symbol, as a table word. */
static inline int64_t lrc_launch_table_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return (int64_t)(h >> 1); /* non-negative: 0 is kept for back edges */
}

static inline const char *lrc_launch_table_storage_name(int64_t s)
{
    return s == LRC_LT_F32 ? "f32" : s == LRC_LT_I32 ? "i32" : s == LRC_LT_RAW ? "raw bytes" : "unknown";
}

#endif
