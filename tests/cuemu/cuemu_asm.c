/* cuemu_asm.c — a kernel source's inline PTX, for the host compile: every
 * asm statement (asm, __asm__ or __asm, volatile or not) becomes a call of
 * the model prelude.h has of its instruction, its operands' expressions in
 * the order the template names them. The host cannot run PTX, and an asm
 * statement it only dropped would leave its outputs as they were: so an
 * instruction the table below does not hold, or operand syntax the rewrite
 * does not read (named operands, %%, asm goto), fails the compile, naming
 * the statement. Comments and string literals are skipped; line numbers are
 * kept (a statement over several lines is followed by as many newlines), so
 * the host compiler's messages point into the registered source. */
#include "cuemu.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Instructions with a model: the template's opcode, its operand groups
 * ({%0,%1,%2,%3} a group of 4, %5 one of 1) and the model's name. The first
 * group is the destination: output operands, passed by reference. */
static const struct {
    const char *opcode;
    int groups, sizes[4];
    const char *model;
} known[] = {
    {"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", 4, {4, 4, 2, 4}, "cuemu_mma_m16n8k16_row_col_f32_bf16_bf16_f32"},
};

enum { MAX_OPERANDS = 32 };

typedef struct {
    const char *p, *name; /* where the scan is; the source's name, for messages */
    int line;
} scan;

typedef struct {
    char *text; /* the rewritten source */
    size_t n, cap;
} buf;

static void put(buf *b, const char *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = 2 * (b->n + n + 1);
        char *grown = realloc(b->text, b->cap);
        if (!grown) abort();
        b->text = grown;
    }
    memcpy(b->text + b->n, s, n);
    b->text[b->n += n] = 0;
}

static void skip_space(scan *s)
{
    for (;;) {
        if (*s->p == '\n') s->line++, s->p++;
        else if (*s->p == ' ' || *s->p == '\t' || *s->p == '\r') s->p++;
        else if (s->p[0] == '/' && s->p[1] == '/')
            while (*s->p && *s->p != '\n') s->p++;
        else if (s->p[0] == '/' && s->p[1] == '*') {
            const char *end = strstr(s->p + 2, "*/");
            for (const char *q = s->p; q < (end ? end : s->p + strlen(s->p)); q++) s->line += *q == '\n';
            s->p = end ? end + 2 : s->p + strlen(s->p);
        } else return;
    }
}

/* the string literal at s->p (quote q), decoded into out when out is not
 * NULL; the scan past it; nonzero when it does not end */
static int literal(scan *s, char q, buf *out)
{
    for (s->p++; *s->p && *s->p != q && *s->p != '\n'; s->p++) {
        char c = *s->p;
        if (c == '\\' && s->p[1]) {
            c = *++s->p;
            c = c == 'n' ? '\n' : c == 't' ? '\t' : c;
        }
        if (out) put(out, &c, 1);
    }
    if (*s->p != q) return 1;
    s->p++;
    return 0;
}

static bool word(const scan *s, const char *w)
{
    const size_t n = strlen(w);
    const char c = s->p[n];
    return !strncmp(s->p, w, n) && !(c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'));
}

static int fail(const scan *s, const char *what, const char *tmpl)
{
    fprintf(stderr, "cuemu: %s:%d: %s%s%s%s\n", s->name, s->line, what, tmpl ? " \"" : "", tmpl ? tmpl : "", tmpl ? "\"" : "");
    return 1;
}

/* One operand list (outputs or inputs) up to the next ':' or ')': each
 * "constraint"(expression), the expressions' [start, end) into ops */
static int operands(scan *s, const char **ops, int *n, bool *output, bool outputs)
{
    skip_space(s);
    while (*s->p && *s->p != ':' && *s->p != ')') {
        if (*n == MAX_OPERANDS) return fail(s, "an asm statement with too many operands", NULL);
        if (*s->p == '[') return fail(s, "a named asm operand, which the emulator does not read", NULL);
        buf c = {0};
        if (*s->p != '"' || literal(s, '"', &c)) return free(c.text), fail(s, "an asm operand without its constraint string", NULL);
        output[*n] = outputs && c.text && (strchr(c.text, '=') || strchr(c.text, '+'));
        free(c.text);
        skip_space(s);
        if (*s->p != '(') return fail(s, "an asm operand without its (expression)", NULL);
        const char *start = ++s->p;
        for (int depth = 1; depth; s->p++) {
            if (!*s->p) return fail(s, "an asm operand's expression does not end", NULL);
            depth += *s->p == '(' || *s->p == '[';
            depth -= *s->p == ')' || *s->p == ']';
            s->line += *s->p == '\n';
        }
        ops[2 * *n] = start, ops[2 * *n + 1] = s->p - 1;
        ++*n;
        skip_space(s);
        if (*s->p == ',') s->p++, skip_space(s);
    }
    return 0;
}

/* The call of the model of template tmpl (its opcode, then its operand
 * groups) with the operands ops into out; nonzero with a message when no
 * model matches or the template names an operand that is not there. */
static int call(const scan *s, const char *tmpl, const char **ops, const bool *output, int n, buf *out)
{
    const char *p = tmpl;
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    const char *op_end = p + strcspn(p, " \t\n");
    size_t k = 0;
    while (k < sizeof known / sizeof *known && (strlen(known[k].opcode) != (size_t)(op_end - p) || strncmp(known[k].opcode, p, (size_t)(op_end - p))))
        k++;
    if (k == sizeof known / sizeof *known) return fail(s, "no model of the inline PTX", tmpl);
    put(out, known[k].model, strlen(known[k].model));
    put(out, "(", 1);
    p = op_end;
    int args = 0;
    for (int g = 0; g < known[k].groups; g++) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || (g && *p == ',')) p++;
        const bool braced = *p == '{';
        p += braced;
        for (int e = 0; e < known[k].sizes[g]; e++) {
            while (*p == ' ' || (e && *p == ',')) p++;
            char *end = NULL;
            const long i = *p == '%' && p[1] >= '0' && p[1] <= '9' ? strtol(p + 1, &end, 10) : -1;
            if (i < 0 || i >= n) return fail(s, "an operand the template names is not %N of the statement's operands", tmpl);
            if (!g && !output[i]) return fail(s, "a destination that is not an output operand (\"=\" or \"+\")", tmpl);
            put(out, args ? ", (" : "(", args ? 3 : 1);
            args++;
            put(out, ops[2 * i], (size_t)(ops[2 * i + 1] - ops[2 * i]));
            put(out, ")", 1);
            p = end;
        }
        while (*p == ' ') p++;
        if (braced && *p++ != '}') return fail(s, "the template's operand groups are not the instruction's", tmpl);
    }
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == ';') p++;
    if (*p) return fail(s, "the template's operand groups are not the instruction's", tmpl);
    put(out, ")", 1);
    return 0;
}

/* The asm statement at s->p (its keyword) into out; the scan past its ')' */
static int statement(scan *s, buf *out)
{
    const int first = s->line;
    s->p += strcspn(s->p, " \t\n(");
    skip_space(s);
    while (word(s, "volatile") || word(s, "__volatile__") || word(s, "inline") || word(s, "goto")) {
        if (word(s, "goto")) return fail(s, "asm goto, which the emulator does not model", NULL);
        s->p += strcspn(s->p, " \t\n(");
        skip_space(s);
    }
    if (*s->p != '(') return fail(s, "an asm statement without its (", NULL);
    s->p++;
    skip_space(s);
    buf tmpl = {0};
    while (*s->p == '"') {
        if (literal(s, '"', &tmpl)) return free(tmpl.text), fail(s, "an asm template that does not end", NULL);
        skip_space(s);
    }
    if (!tmpl.text) return fail(s, "an asm statement without its template string", NULL);
    const char *ops[2 * MAX_OPERANDS];
    bool output[MAX_OPERANDS];
    int n = 0, rc = 0;
    for (int list = 0; !rc && list < 2 && *s->p == ':'; list++) s->p++, rc = operands(s, ops, &n, output, list == 0);
    if (!rc && *s->p == ':') /* clobbers: the model has no registers to clobber */
        for (s->p++; *s->p && *s->p != ')'; s->p++) s->line += *s->p == '\n';
    if (!rc && *s->p != ')') rc = fail(s, "an asm statement that does not end with )", tmpl.text);
    if (!rc && strstr(tmpl.text, "%%")) rc = fail(s, "a %% in an asm template, which the emulator does not read", tmpl.text);
    if (!rc) rc = call(s, tmpl.text, ops, output, n, out);
    free(tmpl.text);
    if (rc) return rc;
    s->p++;
    for (int l = first; l < s->line; l++) put(out, "\n", 1); /* the lines after stay where they were */
    return 0;
}

char *cuemu_asm_rewrite(const char *src, const char *name)
{
    scan s = {src, name, 1};
    buf out = {0};
    char head[4200];
    snprintf(head, sizeof head, "#line 1 \"%s\"\n", name);
    put(&out, head, strlen(head));
    while (*s.p) {
        const char *from = s.p;
        const char c = *s.p;
        if (c == '"' || c == '\'') {
            if (literal(&s, c, NULL)) s.p = from + 1; /* not a literal the scan reads: the host compiler judges it */
        } else if ((c == '/' && (s.p[1] == '/' || s.p[1] == '*')) || c == '\n') skip_space(&s);
        else if (c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            if (word(&s, "asm") || word(&s, "__asm__") || word(&s, "__asm")) {
                if (statement(&s, &out)) {
                    free(out.text);
                    return NULL;
                }
                continue;
            }
            while (*s.p == '_' || (*s.p >= '0' && *s.p <= '9') || (*s.p >= 'a' && *s.p <= 'z') || (*s.p >= 'A' && *s.p <= 'Z')) s.p++;
        } else s.p++;
        put(&out, from, (size_t)(s.p - from));
    }
    return out.text;
}
