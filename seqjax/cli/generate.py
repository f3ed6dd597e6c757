"""`seqjax generate | backtranslate`: a run's continuations, translations or interpolations, and a
back-translated corpus (optionally with the forward run trained on it)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from seqjax import config as config_lib
from seqjax.cli.arguments import add_config_arguments, add_overrides, command
from seqjax.cli.decoding_flags import add_decoding_arguments, decode_options
from seqjax.config.files import load_config

if TYPE_CHECKING:
    from seqjax.training.features.generation import DecodeOptions


def interpolate(args: argparse.Namespace, options: DecodeOptions) -> None:
    """`seqjax generate --interpolate FIRST SECOND`: sentences decoded between two latents."""
    from seqjax.training.features.interpolation import interpolate_texts
    from seqjax.training.saved.run import Run

    if args.prompt is not None or args.input is not None:
        raise ValueError("--interpolate decodes from latents alone: it takes neither --prompt nor --input")
    if args.points < 2:
        raise ValueError(f"--points must be >= 2 (both sentences' own points are included), got {args.points}")
    restored = Run.open(args.workdir, args.set).restore([])
    first, second = args.interpolate
    for fraction, text in interpolate_texts(
        restored.exp,
        restored.state.params,
        first,
        second,
        num=args.points,
        max_len=args.max_len,
        options=options,
        seed=args.seed,
    ):
        print(f"  {fraction:.2f}: {text}")


def cmd_generate(args: argparse.Namespace) -> None:
    """continue a prompt (LM; a VAE LM decodes from z drawn from its prior) or translate a source (seq2seq)"""
    from seqjax.data.corpora.readers import read_input
    from seqjax.training.features.run_generation import check_generates, line_outputs, prompt_outputs
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
    check_generates(run, prompted=args.prompt is not None or args.input is not None)
    if args.input is None:
        for line in prompt_outputs(run, args.prompt, options, num=args.num, max_len=args.max_len, seed=args.seed):
            print(line)
        return
    lines = read_input(args.input, "--input", run.cfg.data)
    text = "".join(line + "\n" for line in line_outputs(run, lines, options, max_len=args.max_len, seed=args.seed))
    if args.output is None:
        sys.stdout.write(text)
    else:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)


def cmd_backtranslate(args: argparse.Namespace) -> None:
    """translate monolingual target-side text with a target->source run into synthetic pairs, write them with the
    real pairs as a parallel corpus, and optionally train the forward run on it"""
    from seqjax.training.features.back_translation import back_translated_corpus, refuse_corpus_overrides
    from seqjax.training.saved.run import Run

    options = decode_options(args)
    if args.upsample < 0:
        raise ValueError(f"--upsample must be >= 0 (copies of the real pairs), got {args.upsample}")
    if args.train_workdir is None and (args.config is not None or args.set):
        raise ValueError("--config and --set configure the forward run: they need --train-workdir")
    refuse_corpus_overrides(args.set)
    written, corpus = back_translated_corpus(
        Run.open(args.workdir),
        args.monolingual,
        args.output,
        options,
        real=args.real,
        upsample=args.upsample,
        tag=args.tag,
        seed=args.seed,
    )
    print(written)
    if args.train_workdir is not None:
        from seqjax.training.loop import train

        cfg, _ = load_config(args.config)
        train(config_lib.override(cfg, [*corpus, *args.set]), args.train_workdir)


def add_commands(sub: Any) -> None:
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
    add_overrides(g)
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
