"""The command line's decoding flags (`--beam`, `--length-penalty`, `--sample`, `--temperature`,
`--top-k`, `--top-p`): their arguments, the `DecodeOptions` they give, and which of them were given
(refused where the command decodes nothing)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from seqjax.training.features.generation import DecodeOptions

# The flags' defaults: greedy decoding.
DECODING: dict[str, Any] = {
    "beam": 1,
    "length_penalty": 0.0,
    "sample": False,
    "temperature": None,
    "top_k": None,
    "top_p": None,
}


def add_decoding_arguments(p: argparse.ArgumentParser) -> None:
    d = p.add_argument_group("decoding (default greedy; any sampling flag samples; --beam N > 1 is beam search)")
    d.add_argument("--beam", type=int, default=DECODING["beam"])
    d.add_argument(
        "--length-penalty", type=float, default=DECODING["length_penalty"], help="GNMT alpha for beam search"
    )
    d.add_argument("--sample", action="store_true", help="sample (temperature 1, no truncation unless set below)")
    d.add_argument("--temperature", type=float, default=DECODING["temperature"])
    d.add_argument("--top-k", type=int, default=DECODING["top_k"])
    d.add_argument("--top-p", type=float, default=DECODING["top_p"])


def decode_options(args: argparse.Namespace) -> DecodeOptions:
    from seqjax.training.features.generation import DecodeOptions

    sample = args.sample or args.temperature is not None or args.top_k is not None or args.top_p is not None
    return DecodeOptions(
        beam=args.beam,
        length_penalty=args.length_penalty,
        sample=sample,
        temperature=1.0 if args.temperature is None else args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
    )


def decoding_flags(args: argparse.Namespace) -> list[str]:
    """The decoding flags given a value other than their default, as written (`--top-k`)."""
    return [f"--{name.replace('_', '-')}" for name, default in DECODING.items() if getattr(args, name) != default]
