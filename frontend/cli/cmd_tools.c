/* cmd_tools.c — the commands of the research tools (frontend/tools/):
 * analyze, diagnose, sweep and plot. Each parses its options, prints its
 * --help and its usage errors, fills the tool's options and prints the
 * tool's one-line error; the tool prints its results. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The tools' lrc_run_model_fn: the model, preset and sets of a run
 * directory's run.json (cli_run_load, lrc train's reader of it). */
static int run_model(const char *dir, lrc_model *m, lrc_err *err)
{
    cli_args a;
    memset(&a, 0, sizeof a);
    cJSON *keep = NULL;
    int rc = cli_run_load(dir, &a, &keep, err) ? LRC_EUSER : lrc_model_load(m, a.m.model, a.m.preset, a.m.sets, a.m.n_sets, err);
    cli_model_opts_free(&a.m);
    cJSON_Delete(keep);
    return rc;
}

/* ---- analyze --------------------------------------------------------------- */

int cmd_analyze(int argc, char **argv)
{
    static const struct option opts[] = {{"layers", required_argument, 0, 'L'}, {"fit-layerrope", required_argument, 0, 'F'},
                                         {"layerrope-base", required_argument, 0, 'B'}, {"plot", required_argument, 0, 'P'},
                                         {"head-dim", required_argument, 0, 'D'}, {"trajectory-tol", required_argument, 0, 'T'},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc analyze CHECKPOINT [--layers N] [--head-dim N] [--trajectory-tol T]\n"
        "                   [--fit-layerrope OUT.safetensors [--layerrope-base B]] [--plot PREFIX] [-o OUT.json]\n"
        "\n"
        "What a checkpoint's normalisation gains say about depth. CHECKPOINT is a\n"
        "safetensors file, a run directory or a Hugging Face model directory. For\n"
        "every site of per-layer norm weights: per layer the mean and the 50th, 90th\n"
        "and 99th percentiles of gamma, its cosine to the layer before and to layer 0,\n"
        "and a 2-D classical MDS of gamma / |gamma| with the arc the layers trace (the\n"
        "LayerRoPE paper's Fig. 2); and the fraction of dimensions that follow their\n"
        "head's shared trajectory (Fig. 3, Appendix C: a multiple of the head's mean\n"
        "gain across layers within T relative error). For LayerRoPE weights: per\n"
        "site the slopes, and\n"
        "per layer e^r, the rotation of the highest-frequency pair and\n"
        "|gamma_eff_L| / |gamma_eff_0| beside Layer-Norm Scaling's 1 / sqrt(L + 1)\n"
        "(Figs. 19-21).\n"
        "\n"
        "  --layers N        the depth, for LayerRoPE weights in a bare file\n"
        "  --head-dim N      the head size that splits gamma (default: the run's or\n"
        "                    config.json's; a bare file: the whole vector)\n"
        "  --trajectory-tol T\n"
        "                    a dimension follows its head's trajectory when a multiple\n"
        "                    of it leaves at most T of its norm (default 0.1)\n"
        "  --fit-layerrope OUT\n"
        "                    fit LayerRoPE's shared gamma and depth scalars per site to\n"
        "                    the per-layer gains (least squares over its complex form;\n"
        "                    alpha 0), print each fit's relative error, and write OUT:\n"
        "                    the checkpoint with LayerRoPE's tensors for those gains;\n"
        "                    for a Hugging Face model, its logits before and after\n"
        "  --layerrope-base B\n"
        "                    the rotation's base frequency of the fit (default 100)\n"
        "  --plot PREFIX     PNGs by gnuplot: PREFIX_SITE.png (percentiles and MDS of\n"
        "                    each site), PREFIX_layerrope.png (e^r against LNS)\n"
        "  -o OUT.json       the numbers as JSON\n";
    lrc_analyze_opts o = {.tol = 0.1, .base = 100, .run_model = run_model};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "o:", opts, NULL)) != -1) {
        if (c == 'h') return cli_help("analyze", opts, "o", help);
        char *end = NULL;
        if (c == 'o') o.json_out = optarg;
        else if (c == 'F') o.fit_out = optarg;
        else if (c == 'P') o.plot = optarg;
        else if (c == 'B') {
            o.base = strtod(optarg, &end);
            if (end == optarg || *end || !(o.base > 1) || !isfinite(o.base))
                return cli_usage_error("analyze", "--layerrope-base %s: expected a number above 1", optarg);
        } else if (c == 'T') {
            o.tol = strtod(optarg, &end);
            if (end == optarg || *end || !(o.tol > 0) || !isfinite(o.tol))
                return cli_usage_error("analyze", "--trajectory-tol %s: expected a positive number", optarg);
        } else if (c == 'L') {
            if (cli_parse_int(optarg, 1, &o.layers) < 0) return cli_usage_error("analyze", "--layers %s: expected a positive integer", optarg);
        } else if (c == 'D') {
            if (cli_parse_int(optarg, 1, &o.head) < 0) return cli_usage_error("analyze", "--head-dim %s: expected a positive integer", optarg);
        } else return cli_usage_error("analyze", "unknown option '%s'", argv[optind - 1]);
    }
    if (optind != argc - 1) return cli_usage_error("analyze", "expected one CHECKPOINT");
    o.checkpoint = argv[optind];
    lrc_err err;
    return lrc_analyze_run(&o, &err) ? cli_user_error(&err) : 0;
}

/* ---- diagnose -------------------------------------------------------------- */

int cmd_diagnose(int argc, char **argv)
{
    static const struct option opts[] = {MODEL_OPTS,
                                         {"weights", required_argument, 0, OPT_WEIGHTS},
                                         {"prompt", required_argument, 0, OPT_PROMPT},
                                         {"steps", required_argument, 0, OPT_STEPS},
                                         {"input", required_argument, 0, OPT_INPUT},
                                         {"data", required_argument, 0, OPT_DATA},
                                         {"batch", required_argument, 0, OPT_BATCH},
                                         {"seq", required_argument, 0, OPT_SEQ},
                                         {0, 0, 0, 0}};
    static const char *help =
        "usage: lrc diagnose MODEL [--preset P] [--set KEY=VALUE]... --weights W.safetensors\n"
        "                    [--prompt TEXT] [--steps N] [--input IN | --data FILE] [--batch N] [--seq T] [-o OUT.json]\n"
        "\n"
        "For a model without a loop (llama and what builds on it, vit), in f64: the\n"
        "variance of the residual stream after each layer over N sequences (--input's\n"
        "tokens or images, or\n"
        "N validation windows of T bytes of --data, the King James Bible by default;\n"
        "N 8, T 128), position 0 left out as the LayerRoPE paper does, and beside it the\n"
        "root mean square of the multipliers each block reads and writes the stream\n"
        "with (the model's lrc.tap names: residual.L, read.attn.L, write.mlp.L, ...);\n"
        "-o writes them as JSON.\n"
        "\n"
        "For a looped model (parcae) on the prompt's bytes, in f64: per iteration t of\n"
        "the recurrent block (the config's T), the mean norm of the state leaving it and\n"
        "the mean pairwise cosine similarity of its centred token states; then the\n"
        "fixed point of h -> G(h) (at most N iterations, default 1000, to a relative\n"
        "residual of 1e-9), and at it the spectral radius of the Jacobian dG/dh, its\n"
        "operator norm and their gap (the Jacobian from central differences, so keep the\n"
        "prompt short: at most 4096 state values).\n"
        "\n" MODEL_HELP
        "  --weights FILE    trained parameters\n"
        "  --prompt TEXT     the input (default \"In the beginning God created\")\n"
        "  --steps N         fixed-point iterations at most (default 1000)\n"
        "  --input IN        not looped: tokens I32 [N, T] (safetensors)\n"
        "  --data FILE       not looped: text whose validation windows are the input\n"
        "  --batch N         not looped: sequences of --data (default 8)\n"
        "  --seq T           not looped: positions a sequence (default 128)\n"
        "  -o OUT.json       not looped: the numbers as JSON\n";
    cli_args a;
    int rc = cli_parse_args("diagnose", argc, argv, opts, help, true, &a);
    if (rc >= 0) goto out;
    if (!a.weights) {
        rc = cli_usage_error("diagnose", "needs --weights");
        goto out;
    }
    lrc_diagnose_opts o = {.model = a.m.model, .preset = a.m.preset, .sets = a.m.sets, .n_sets = a.m.n_sets, .weights = a.weights,
                           .prompt = a.prompt, .steps = a.steps, .input = a.input, .data = a.data, .batch = a.batch,
                           .seq = a.seq, .out = a.out};
    lrc_err err;
    rc = lrc_diagnose_run(&o, &err) ? cli_user_error(&err) : 0;
out:
    cli_model_opts_free(&a.m);
    return rc;
}

/* ---- sweep ----------------------------------------------------------------- */

/* lrc sweep's arguments: the tool's options and the --grid values as given */
typedef struct {
    lrc_sweep_opts o;
    const char **specs;
    int n_specs;
} sweep_cmd;

static const char *sweep_help =
    "usage: lrc sweep MODEL [--preset P] [--set KEY=VALUE]... --grid KEY=V1,V2,... [--grid ...]\n"
    "                 --steps N [lrc train's options] [--jobs N] [--plot-key KEY] -o SWEEP_DIR\n"
    "                 [--point I | --slurm | --gather]\n"
    "       lrc sweep --table SWEEP_DIR [--plot-key KEY]\n"
    "\n"
    "Trains every point of a grid: --grid lr=1e-3,3e-3,1e-2 --grid norm=pre,layerrope\n"
    "--grid seed=1,2 makes 12 runs. KEY is lr, seed or any config key (as --set);\n"
    "the other options go to every lrc train as they are (--lr or --seed alone fix\n"
    "one for all). Each point is a run directory SWEEP_DIR/KEY=V,KEY=V,...\n"
    "(its output in the same name with .log), --jobs at a time (default 1), the\n"
    "cores divided between them (--threads). An arm is a point's values other\n"
    "than lr and seed.\n"
    "\n"
    "SWEEP_DIR/sweep.jsonl gets a line per finished run: its last validation loss,\n"
    "or diverged (a loss or gradient not finite). Started again, the sweep skips\n"
    "those, resumes a stopped run (Ctrl-C stops them all, each with its\n"
    "checkpoint) and restarts one that stopped before its first checkpoint.\n"
    "\n"
    "SWEEP_DIR/sweep.md (printed too), per arm: eta*, the rate of the lowest\n"
    "L(rate) (the mean over seeds of min(loss, ln V), a diverged run counting as\n"
    "ln V); L*, that loss; the seeds' spread at eta*; the largest rate none of\n"
    "whose runs failed (diverged, or more than 1 nat above L*); the failed runs;\n"
    "and the sensitivity S of the LayerRoPE paper's Table 9, the mean of\n"
    "L(rate) - L* over the rates that every arm swept. Then L(rate) per rate and\n"
    "arm. SWEEP_DIR/sweep.png: the loss against the rate, a curve per arm; with\n"
    "--plot-key KEY (a grid key) also sweep-KEY.png: L* against KEY, a curve per\n"
    "arm less KEY. --table rewrites both from sweep.jsonl alone.\n"
    "\n"
    "Under mpirun -np N, rank r runs the points p with p mod N = r (each with its\n"
    "--jobs) and rank 0 writes the table, the one process's. --point I runs\n"
    "point I alone (0 .. points - 1; no table). --slurm writes\n"
    "SWEEP_DIR/sweep.sbatch, a Slurm job array whose task I runs --point I, and\n"
    "runs nothing; once every task has finished, --gather writes the table (one\n"
    "line naming a point that has not).\n";

/* The sweep's own options that take a value (as "--grid V" or "--grid=V") */
static bool own_option(const char *s, size_t len)
{
    static const char *own[] = {"--grid", "--jobs", "-o", "--table", "--plot-key", "--point"};
    for (size_t k = 0; k < sizeof own / sizeof *own; k++)
        if (strlen(own[k]) == len && !strncmp(s, own[k], len)) return true;
    return false;
}

static int sweep_parse(int argc, char **argv, sweep_cmd *c, lrc_err *err)
{
    lrc_sweep_opts *a = &c->o;
    a->jobs = 1, a->point = -1;
    a->train = lrc_xcalloc((size_t)argc + 1, sizeof *a->train);
    c->specs = lrc_xcalloc((size_t)argc + 1, sizeof *c->specs);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i], *eq = strncmp(s, "--", 2) ? NULL : strchr(s, '='), *v;
        size_t len = eq ? (size_t)(eq - s) : strlen(s);
        if (!strcmp(s, "--help") || !strcmp(s, "-h")) {
            fputs(sweep_help, stdout);
            return -1;
        } else if (!strcmp(s, "--gather") || !strcmp(s, "--slurm")) {
            *(s[2] == 'g' ? &a->gather : &a->slurm) = true;
        } else if (own_option(s, len)) {
            if (!eq && i + 1 == argc) return cli_usage_error("sweep", "%s needs a value", s);
            v = eq ? eq + 1 : argv[++i];
            int64_t j;
            if (!strncmp(s, "--grid", len)) c->specs[c->n_specs++] = v; /* read after --help had its chance */
            if (!strncmp(s, "--jobs", len) && cli_parse_int(v, 1, &j)) return cli_usage_error("sweep", "--jobs %s: expected an integer >= 1", v);
            if (!strncmp(s, "--jobs", len)) a->jobs = (int)(j > LRC_SWEEP_MAX_JOBS ? LRC_SWEEP_MAX_JOBS : j);
            if (!strncmp(s, "-o", len) || !strncmp(s, "--table", len)) a->out = v, a->table_only = !strncmp(s, "--table", len);
            if (!strncmp(s, "--plot-key", len)) a->plot_key = v;
            if (!strncmp(s, "--point", len) && cli_parse_int(v, 0, &j)) return cli_usage_error("sweep", "--point %s: expected an integer >= 0", v);
            if (!strncmp(s, "--point", len)) a->point = (int)(j > INT32_MAX ? INT32_MAX : j);
        } else if (!strncmp(s, "--threads", len) || !strncmp(s, "--resume", len)) {
            return cli_usage_error("sweep", "%.*s is the sweep's own to give each run", (int)len, s);
        } else {
            a->train[a->n_train++] = argv[i];
        }
    }
    for (int k = 0; k < c->n_specs; k++)
        if (lrc_sweep_grid_add(a, c->specs[k], err)) return cli_user_error(err);
    if (!a->out) return cli_usage_error("sweep", "needs -o SWEEP_DIR (or --table SWEEP_DIR)");
    if (a->table_only) return a->n_train || a->n_axes || a->gather || a->slurm || a->point >= 0 ? cli_usage_error("sweep", "--table takes only --plot-key") : 0;
    if ((a->point >= 0) + a->gather + a->slurm > 1) return cli_usage_error("sweep", "--point, --slurm and --gather: one at most");
    if (!a->n_axes) return cli_usage_error("sweep", "needs at least one --grid KEY=V1,V2,...");
    for (int i = 0; i < a->n_train; i++)
        for (int k = 0; k < a->n_axes; k++)
            if ((!strcmp(a->train[i], "--lr") && !strcmp(a->axes[k].key, "lr")) ||
                (!strcmp(a->train[i], "--seed") && !strcmp(a->axes[k].key, "seed")))
                return cli_usage_error("sweep", "%s and --grid %s both", a->train[i], a->axes[k].key);
    if (a->plot_key) {
        bool found = false;
        for (int k = 0; k < a->n_axes; k++) found |= !strcmp(a->axes[k].key, a->plot_key);
        if (!found || !strcmp(a->plot_key, "lr") || !strcmp(a->plot_key, "seed"))
            return cli_usage_error("sweep", "--plot-key %s: expected a --grid key other than lr and seed", a->plot_key);
    }
    return 0;
}

int cmd_sweep(int argc, char **argv)
{
    sweep_cmd c = {.o = {.run_model = run_model}};
    lrc_err err = {0};
    bool interrupted = false;
    int st = sweep_parse(argc, argv, &c, &err);
    if (!st) st = lrc_sweep_run(&c.o, &interrupted, &err) ? cli_user_error(&err) : interrupted ? 130 : 0;
    lrc_sweep_opts_free(&c.o);
    free(c.o.train), free(c.specs);
    return st < 0 ? 0 : st;
}

/* ---- plot ------------------------------------------------------------------ */

int cmd_plot(int argc, char **argv)
{
    static const char *help = "usage: lrc plot RUN_DIR... [-o PLOT.png]\n"
                              "\n"
                              "Train and validation loss of the runs, overlaid in one PNG (default\n"
                              "loss.png), drawn by gnuplot from each RUN_DIR/metrics.jsonl.\n";
    const char *out = "loss.png";
    char **runs = lrc_xmalloc((size_t)argc * sizeof *runs);
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            static const struct option opts[] = {{"help", no_argument, 0, OPT_HELP}, {0, 0, 0, 0}};
            free(runs);
            return cli_help("plot", opts, "o", help);
        }
        if (!strcmp(argv[i], "-o")) {
            if (i + 1 >= argc) {
                free(runs);
                return cli_usage_error("plot", "-o needs a value");
            }
            out = argv[++i];
        } else if (argv[i][0] == '-') {
            free(runs);
            return cli_usage_error("plot", "unknown option %s", argv[i]);
        } else {
            runs[n++] = argv[i];
        }
    }
    lrc_err err;
    int rc = n == 0 ? cli_usage_error("plot", "give at least one RUN_DIR")
                    : lrc_plot_runs(&(lrc_plot_opts){runs, n, out}, &err) ? cli_user_error(&err) : 0;
    if (n && !rc) printf("wrote %s (%d run%s)\n", out, n, n > 1 ? "s" : "");
    free(runs);
    return rc;
}
