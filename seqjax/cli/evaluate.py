"""`seqjax eval`: a run's exact perplexity (and BLEU for seq2seq) on a split."""

from __future__ import annotations

import argparse
import json
from typing import Any

from seqjax.cli.arguments import add_overrides, command
from seqjax.cli.decoding_flags import add_decoding_arguments, decode_options, decoding_flags


def cmd_eval(args: argparse.Namespace) -> None:
    """exact perplexity (and BLEU for seq2seq) of a run on a split"""
    from seqjax.models import is_seq2seq
    from seqjax.training.saved.run import Run

    run = Run.open(args.workdir, args.set)
    given = decoding_flags(args)
    if given and not is_seq2seq(run.cfg.model):
        raise ValueError(
            f"{given[0]}: eval decodes only an encoder-decoder's translations (for BLEU), but --workdir "
            f"{args.workdir} holds model.kind={run.cfg.model.kind}, whose evaluation decodes nothing"
        )
    print(json.dumps(run.evaluate(args.split, decode_options(args)), indent=2))


def add_commands(sub: Any) -> None:
    e = command(sub, cmd_eval, "eval")
    e.add_argument("--workdir", required=True)
    e.add_argument("--split", default="test")
    add_overrides(e)
    add_decoding_arguments(e)
