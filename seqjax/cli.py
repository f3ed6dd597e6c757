"""`seqjax train | prepare | eval | generate | backtranslate | import-hf | export-hf | config | compile | plot |
bench`: the command line over the training package."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from seqjax import config as config_lib
from seqjax.config import text as config_text
from seqjax.config.files import FORMS, load_config
from seqjax.decoding_flags import add_decoding_arguments, decode_options, decoding_flags
from seqjax.output_paths import check_output_file, check_outputs

if TYPE_CHECKING:
    from seqjax.training.features.generation import DecodeOptions

T = TypeVar("T")

DEFAULT_WORKDIR = "runs"


def cmd_train(args: argparse.Namespace) -> None:
    """train (or resume) a run; no arguments: the default experiment"""
    from seqjax.training.loop import train

    cfg, name = load_config(args.config)
    cfg = config_lib.override(cfg, args.set)
    train(cfg, args.workdir or os.path.join(DEFAULT_WORKDIR, name), extend_schedule=args.extend_schedule)


def cmd_prepare(args: argparse.Namespace) -> None:
    """tokenize a text or parallel corpus once into its token store (data.store) and print where"""
    from seqjax.data.corpora.sources import source_of
    from seqjax.data.store.prepare import ensure_store

    cfg, _ = load_config(args.config)
    data = config_lib.override(cfg, args.set).data
    store = ensure_store(data)
    counts = ", ".join(
        f"{split} {sum(side['lines'] for side in sides.values()) // len(sides):,} lines "
        f"({sum(side['tokens'] for side in sides.values()):,} tokens)"
        for split, sides in store.manifest["splits"].items()
    )
    sizes = {side: store.tokenizer(side).vocab.size for side in source_of(data).sides}
    vocabulary = ", ".join(f"{side} {size:,}".strip() for side, size in sizes.items())
    print(f"token store {store.path}: {counts}; vocabulary {vocabulary}; fingerprint {store.fingerprint[:12]}")


def cmd_config(args: argparse.Namespace) -> None:
    """print the resolved config, TOML: each key's type, default and description"""
    cfg, _ = load_config(args.config)
    print(config_text.to_toml(config_lib.override(cfg, args.set)), end="")


def cmd_eval(args: argparse.Namespace) -> None:
    """exact perplexity (and BLEU for seq2seq) of a run on a split"""
    from seqjax.data.corpora.sources import splits_of
    from seqjax.models import is_seq2seq
    from seqjax.training.features.evaluation import describe_metrics, evaluate
    from seqjax.training.saved.run import Run

    run = Run.open(args.workdir, args.set)
    given = decoding_flags(args)
    if given and not is_seq2seq(run.cfg.model):
        raise ValueError(
            f"{given[0]}: eval decodes only an encoder-decoder's translations (for BLEU), but --workdir "
            f"{args.workdir} holds model.kind={run.cfg.model.kind}, whose evaluation decodes nothing"
        )
    splits = splits_of(run.cfg.data)
    if args.split not in splits:
        raise ValueError(f"--split must be one of {', '.join(splits)}, got {args.split!r}")
    evaluation = run.evaluation(args.split, decode_options(args))
    result = {args.split: evaluate(run.cfg, evaluation.data, args.split, evaluation.scorer)}
    print(f"{args.split}: {describe_metrics(run.cfg, result[args.split])}")
    result.update(evaluation.extra(args.split))
    print(json.dumps(result, indent=2))


def read_input(path: str, flag: str, data: config_lib.DataConfig) -> list[str]:
    """The text records of `path` (`-`: standard input) as a run's corpus is read (`data`: its
    data.format and data.text_field): for `lines`, its lines without line ends or a byte-order
    mark; a bad path or record refused naming `flag`, the file and the line or row."""
    from seqjax.data.corpora import readers

    if path == "-":
        return readers.read_file_texts(sys.stdin.buffer, "<stdin>", format=data.format, field=data.text_field)
    return readers.read_texts(path, format=data.format, field=data.text_field, name=flag)


def with_progress(total: int, run: Callable[[Callable[[int], object]], T]) -> T:
    """run(progress) under a progress bar of `total` lines on stderr, shown from the first
    progress on: a refusal of the input before any (a prompt too long) is its one line alone."""
    from tqdm import tqdm

    bars: list[tqdm] = []

    def progress(lines: int) -> None:
        if not bars:
            bars.append(tqdm(total=total, desc="generate", unit="line", file=sys.stderr, dynamic_ncols=True))
        bars[0].update(lines)

    try:
        return run(progress)
    finally:
        for bar in bars:
            bar.close()


def interpolate(args: argparse.Namespace, options: DecodeOptions) -> None:
    """`seqjax generate --interpolate FIRST SECOND`: sentences decoded between two latents."""
    from seqjax.training.features.interpolation import interpolate_texts
    from seqjax.training.saved.run import Run

    if args.prompt is not None or args.input is not None:
        raise ValueError("--interpolate decodes from latents alone: it takes neither --prompt nor --input")
    if args.points < 2:
        raise ValueError(f"--points must be >= 2 (both sentences' own points are included), got {args.points}")
    restored = Run.open(args.workdir, args.set).restore([])
    exp, state = restored.exp, restored.state
    first, second = args.interpolate
    for fraction, text in interpolate_texts(
        exp, state.params, first, second, num=args.points, max_len=args.max_len, options=options, seed=args.seed
    ):
        print(f"  {fraction:.2f}: {text}")


def cmd_generate(args: argparse.Namespace) -> None:
    """continue a prompt (LM; a VAE LM decodes from z drawn from its prior) or translate a source (seq2seq)"""
    from seqjax.models import generates, is_seq2seq
    from seqjax.training.features.continuation import continuations, continue_lines
    from seqjax.training.features.generation import translate_lines
    from seqjax.training.saved.run import Run

    options = decode_options(args)
    if args.max_len < 1 or args.num < 1:
        raise ValueError(f"--max-len and --num must be >= 1, got {args.max_len} and {args.num}")
    if args.output is not None and args.input is None:
        raise ValueError("--output holds the lines written for --input FILE: it needs --input")
    if args.interpolate is not None:
        interpolate(args, options)
        return
    if args.input is not None and (args.prompt is not None or args.num != 1):
        raise ValueError("--input writes one line per input line: it takes neither --prompt nor --num")
    run = Run.open(args.workdir, args.set)
    if not generates(run.cfg.model):
        raise ValueError(
            f"--workdir {args.workdir} holds an encoder (model.kind={run.cfg.model.kind}), "
            "which has no decode step: nothing to generate"
        )
    seq2seq = is_seq2seq(run.cfg.model)
    if seq2seq and args.prompt is None and args.input is None:
        raise ValueError(
            f"--workdir {args.workdir} is a sequence-to-sequence run: give the source to translate with "
            "--prompt TEXT, or a file of sources, one a line, with --input FILE (- for standard input)"
        )
    lines = None if args.input is None else read_input(args.input, "--input", run.cfg.data)
    if seq2seq:
        restored = run.restore([])
        exp, state = restored.exp, restored.state
        if lines is None:
            print(f"{args.prompt} -> {translate_lines(exp, state.params, [args.prompt], options, seed=args.seed)[0]}")
            return
        outputs = with_progress(
            len(lines), lambda progress: translate_lines(exp, state.params, lines, options, progress, seed=args.seed)
        )
    else:
        decoder = run.lm_decoder(options)
        if lines is None:
            prompt = args.prompt or ""
            for text in continuations(decoder, prompt, num=args.num, max_len=args.max_len, seed=args.seed):
                print(f"  sample: {text}")
            return
        outputs = with_progress(
            len(lines),
            lambda progress: continue_lines(decoder, lines, max_len=args.max_len, seed=args.seed, progress=progress),
        )
    text = "".join(line + "\n" for line in outputs)
    if args.output is None:
        sys.stdout.write(text)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)


def cmd_backtranslate(args: argparse.Namespace) -> None:
    """translate monolingual target-side text with a target->source run into synthetic pairs, write them with the
    real pairs as a parallel corpus, and optionally train the forward run on it"""
    from seqjax.data.corpora.formats import parallel_files
    from seqjax.data.corpora.readers import read_parallel
    from seqjax.data.corpora.sources import SPLITS, data_path, side_names, split_files
    from seqjax.models import is_seq2seq
    from seqjax.training.features.back_translation import back_translate, combine_pairs, refuse_overwrites, write_corpus
    from seqjax.training.saved.run import Run

    options = decode_options(args)
    if args.upsample < 0:
        raise ValueError(f"--upsample must be >= 0 (copies of the real pairs), got {args.upsample}")
    if args.train_workdir is None and (args.config is not None or args.set):
        raise ValueError("--config and --set configure the forward run: they need --train-workdir")
    corpus_keys = ("data.kind", "data.format", "data.train", "data.src", "data.tgt")
    owned = [a for a in args.set if a.partition("=")[0].strip() in corpus_keys]
    if owned:
        raise ValueError(f"--set {owned[0]}: backtranslate sets the forward run's {', '.join(corpus_keys)}")
    run = Run.open(args.workdir)
    backward = run.cfg
    if not is_seq2seq(backward.model):
        raise ValueError(
            f"--workdir {args.workdir} must hold an encoder-decoder run, got model.kind={backward.model.kind}"
        )
    src, tgt = backward.data.tgt, backward.data.src  # the forward direction reads what the backward one wrote
    real_prefix = data_path(backward.data, args.real) if args.real else None  # as the run's own corpus
    corpus_format = backward.data.format  # --real and --monolingual are read as the run's own corpus
    real_files = parallel_files(real_prefix, src, tgt, corpus_format).values() if real_prefix else []
    # the backward run's corpus is not to be lost either
    run_files = [side for s in SPLITS for side in split_files(backward.data, s).values()]
    read = [args.monolingual, *dict.fromkeys(side.path for side in (*real_files, *run_files))]
    for path in (f"{args.output}.{src}", f"{args.output}.{tgt}"):
        check_output_file(path, "--output")
    refuse_overwrites([f"{args.output}.{src}", f"{args.output}.{tgt}"], read)
    real_sides = side_names(backward.data)[::-1]  # for pairs in records, the fields, else the suffixes src, tgt
    real = read_parallel(real_prefix, *real_sides, format=corpus_format, name="--real") if real_prefix else ([], [])
    lines = read_input(args.monolingual, "--monolingual", backward.data)
    if not any(line.strip() for line in lines):
        raise ValueError(
            f"--monolingual must hold some non-blank line to back-translate, got {len(lines)} blank line(s) "
            f"in {args.monolingual!r}"
        )
    restored = run.restore([])
    synthetic = with_progress(
        len(lines),
        lambda progress: back_translate(restored.exp, restored.state.params, lines, options, progress, seed=args.seed),
    )
    pairs = combine_pairs(real, (synthetic, lines), upsample=args.upsample, tag=args.tag)
    paths = write_corpus(args.output, src, tgt, pairs)
    print(
        f"wrote {len(pairs[0]):,} pairs to {' and '.join(paths)}: {len(real[0]):,} real x {args.upsample}, "
        f"{len(pairs[0]) - len(real[0]) * args.upsample:,} synthetic ({options.describe()})"
    )
    if args.train_workdir is not None:
        from seqjax.training.loop import train

        cfg, _ = load_config(args.config)
        corpus = [
            "data.kind=parallel",
            "data.format=lines",  # what write_corpus wrote
            f"data.train={os.path.abspath(args.output)}",
            f"data.src={src}",
            f"data.tgt={tgt}",
        ]
        train(config_lib.override(cfg, [*corpus, *args.set]), args.train_workdir)


def cmd_import_hf(args: argparse.Namespace) -> None:
    """a Hugging Face GPT-2, Llama, Qwen2, Qwen3 or Mistral checkpoint directory (config.json, safetensors weights,
    tokenizer.json) as a run: generate, eval and train.init_from then work on it"""
    from seqjax.pretrained import import_checkpoint

    import_checkpoint(args.checkpoint, args.workdir)


def cmd_export_hf(args: argparse.Namespace) -> None:
    """a run whose model has a Hugging Face twin (GPT-2, Llama) as a checkpoint directory that transformers'
    AutoModelForCausalLM.from_pretrained loads"""
    from seqjax.pretrained import export_run

    export_run(args.workdir, args.output, dtype=args.dtype)


def cmd_plot(args: argparse.Namespace) -> None:
    """training loss, validation perplexity and tokens/s against steps"""
    from seqjax.training.core.curves import plot_runs

    print(f"wrote {plot_runs(args.workdir, args.output)}")


def benchmarks_folder(start: str) -> str:
    """The `benchmarks/` folder of the repository that holds `start`: the nearest one in `start` or a
    folder above it. Raises ValueError when there is none."""
    folder = os.path.abspath(start)
    while not os.path.isdir(os.path.join(folder, "benchmarks")):
        parent = os.path.dirname(folder)
        if parent == folder:
            raise ValueError(
                f"seqjax bench runs a repository's benchmarks/, but neither {os.path.abspath(start)} nor a folder "
                "above it holds one: run it from inside the seqjax repository"
            )
        folder = parent
    return os.path.join(folder, "benchmarks")


def cmd_bench(args: argparse.Namespace) -> None:
    """run a benchmark from benchmarks/ (e.g. softmax, lm_train)"""
    import runpy

    root = benchmarks_folder(os.getcwd())
    path = os.path.join(root, f"{args.name}.py")
    if not os.path.isfile(path):
        available = sorted(f[:-3] for f in os.listdir(root) if f.endswith(".py"))
        raise ValueError(f"unknown benchmark {args.name!r}; available: {available}")
    sys.argv = [path, *args.rest]
    runpy.run_path(path, run_name="__main__")


def cmd_compile(args: argparse.Namespace) -> int:
    """compile the run's train, eval and decode steps for a GPU or TPU target without one: memory per device
    (fits?), attention kernel, collectives, FLOPs, step time and MFU (estimated on a calibrated GPU, else bounded)"""
    from seqjax.accelerators.targets import parse_target, use_target_compiler

    target = parse_target(args.target, args.slices)
    use_target_compiler()  # before anything starts a JAX backend
    from jax.errors import JaxRuntimeError

    from seqjax.accelerators import report as report_lib

    cfg, _ = load_config(args.config)
    cfg = config_lib.override(cfg, args.set)
    print(f"compiling for {target.describe()} on this machine's CPU", file=sys.stderr)
    try:
        report = report_lib.compile_report(cfg, target, args.vocab_size, echo=lambda m: print(m, file=sys.stderr))
    except JaxRuntimeError as err:
        first = next((line for line in str(err).splitlines() if line.strip()), str(err))
        raise ValueError(f"the compiler for {target.name} refused this run: {first}") from None
    print(report_lib.describe(report))
    if args.json:
        report_lib.write_json(args.json, report)
    problems = report_lib.problems(report)
    for problem in problems:
        print(f"seqjax: {problem}", file=sys.stderr)
    return 1 if problems else 0


def add_config_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help=FORMS)
    p.add_argument(
        "--set",
        nargs="+",
        action="extend",
        default=[],
        metavar="KEY=VALUE",
        help="config overrides, e.g. train.steps=200",
    )


def command(
    sub: Any, func: Callable[[argparse.Namespace], object], name: str, **kwargs: Any
) -> argparse.ArgumentParser:
    """The subcommand `name`, run by `func`, whose docstring is its help."""
    p: argparse.ArgumentParser = sub.add_parser(name, help=func.__doc__, **kwargs)
    p.set_defaults(func=func)
    return p


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="seqjax", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    t = command(
        sub,
        cmd_train,
        "train",
        epilog="config keys, name: type = default (`seqjax config` describes each one):\n" + config_text.reference(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_config_arguments(t)
    t.add_argument("--workdir", help=f"run directory (default {DEFAULT_WORKDIR}/<config name>)")
    t.add_argument(
        "--extend-schedule",
        action="store_true",
        help="resume although train.steps or the learning-rate schedule (optim.learning_rate, schedule, "
        "warmup_steps, end_lr_fraction) changed: go on from the checkpoint under the new schedule",
    )
    pr = command(sub, cmd_prepare, "prepare")
    add_config_arguments(pr)
    c = command(sub, cmd_config, "config")
    add_config_arguments(c)
    e = command(sub, cmd_eval, "eval")
    e.add_argument("--workdir", required=True)
    e.add_argument("--split", default="test")
    e.add_argument("--set", nargs="+", action="extend", default=[], metavar="KEY=VALUE")
    add_decoding_arguments(e)
    g = command(sub, cmd_generate, "generate")
    g.add_argument("--workdir", required=True)
    g.add_argument("--prompt", help="text to continue or translate (LM default: start a new line)")
    g.add_argument("--input", metavar="FILE", help="continue or translate each line of FILE (- for stdin)")
    g.add_argument("--output", metavar="FILE", help="with --input: write the lines here (default stdout)")
    g.add_argument("--max-len", type=int, default=64, help="LM: tokens generated after the prompt")
    g.add_argument("--num", type=int, default=1, help="LM --prompt: continuations printed")
    g.add_argument(
        "--seed", type=int, default=0, help="sampling: continuation (or line) i draws with a key from the seed and i"
    )
    g.add_argument(
        "--interpolate",
        nargs=2,
        metavar=("FIRST", "SECOND"),
        help="VAE LM (model.kind=rnn_vae): decode from points between the two sentences' posterior means",
    )
    g.add_argument("--points", type=int, default=5, help="--interpolate: points decoded, both ends included")
    g.add_argument("--set", nargs="+", action="extend", default=[], metavar="KEY=VALUE")
    add_decoding_arguments(g)
    bt = command(sub, cmd_backtranslate, "backtranslate")
    bt.add_argument("--workdir", required=True, help="the backward (target -> source) encoder-decoder run")
    bt.add_argument("--monolingual", required=True, metavar="FILE", help="target-side text, one sentence a line")
    bt.add_argument("--output", required=True, metavar="PREFIX", help="writes PREFIX.SRC and PREFIX.TGT (forward)")
    bt.add_argument(
        "--real",
        metavar="PREFIX",
        help="real pairs PREFIX.SRC / PREFIX.TGT put before the synthetic (relative: under the run's data.root, "
        "else $SEQJAX_DATA, as data.* paths)",
    )
    bt.add_argument("--upsample", type=int, default=1, help="copies of the real pairs in the corpus")
    bt.add_argument("--tag", default="", help="text put before every synthetic source, e.g. <bt> (tagged BT)")
    bt.add_argument("--train-workdir", help="train the forward run here on the corpus (--config / --set for it)")
    bt.add_argument("--seed", type=int, default=0, help="sampling: line i draws with a key from the seed and i")
    add_config_arguments(bt)
    add_decoding_arguments(bt)
    im = command(sub, cmd_import_hf, "import-hf")
    im.add_argument("checkpoint", metavar="CHECKPOINT_DIR")
    im.add_argument("--workdir", required=True, help="the new run directory (missing or empty)")
    ex = command(sub, cmd_export_hf, "export-hf")
    ex.add_argument("--workdir", required=True)
    ex.add_argument("--output", required=True, metavar="DIR", help="the new checkpoint directory (missing or empty)")
    ex.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="of the written weights")
    pl = command(sub, cmd_plot, "plot")
    pl.add_argument("--workdir", nargs="+", required=True, metavar="DIR", help="one or more run directories")
    pl.add_argument("--output", metavar="FILE.png", help="default: metrics.png in the first run directory")
    co = command(sub, cmd_compile, "compile")
    co.add_argument("--target", required=True, help="h100:8, h200:8, a100:8 (GPUs) or v5e:2x2, v5p:4x4x4 (TPU)")
    co.add_argument("--slices", type=int, default=1, help="TPU slices joined by the data-center network")
    co.add_argument(
        "--vocab-size", type=int, help="read no data: a vocabulary of this size (Zipfian counts for the tree heads)"
    )
    co.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    add_config_arguments(co)
    b = command(sub, cmd_bench, "bench")
    b.add_argument("name")
    b.add_argument("rest", nargs=argparse.REMAINDER)
    return p


def main(argv: list[str] | None = None) -> int:
    from seqjax.gpu_flags import use_gpu_flags
    from seqjax.platforms import use_machine_platforms

    use_machine_platforms()  # before JAX starts a backend: no plugin started for a device the machine lacks
    use_gpu_flags()  # XLA reads its flags when the first backend starts
    from seqjax.training.core.signals import TrainingStopped
    from seqjax.training.loop import NonFiniteLoss

    args = parser().parse_args(argv)
    try:
        check_outputs(args)
        code = args.func(args)
    except (ValueError, FileNotFoundError) as err:
        print(f"seqjax: error: {err}", file=sys.stderr)
        return 2
    except NonFiniteLoss as err:
        print(f"seqjax: training stopped: {err}", file=sys.stderr)
        return 1
    except TrainingStopped as stopped:
        return stopped.exit_code  # the run printed where it stopped
    except KeyboardInterrupt:
        print("seqjax: interrupted", file=sys.stderr)
        return 130
    return code or 0


def entry() -> int:
    """The `seqjax` executable: a process of its own, so before any computation it restarts
    itself with transparent huge pages for XLA's host buffers where that applies
    (`seqjax.training.core.host_heap`), then runs `main`."""
    from seqjax.training.core.host_heap import restart_with_huge_pages

    restart_with_huge_pages()
    return main()


if __name__ == "__main__":
    sys.exit(entry())
