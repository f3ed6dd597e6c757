"""`seqjax import-hf | export-hf`: a Hugging Face checkpoint directory as a run, and back."""

from __future__ import annotations

import argparse
from typing import Any

from seqjax.cli.arguments import command


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


def add_commands(sub: Any) -> None:
    im = command(sub, cmd_import_hf, "import-hf")
    im.add_argument("checkpoint", metavar="CHECKPOINT_DIR")
    im.add_argument("--workdir", required=True, help="the new run directory (missing or empty)")
    ex = command(sub, cmd_export_hf, "export-hf")
    ex.add_argument("--workdir", required=True)
    ex.add_argument("--output", required=True, metavar="DIR", help="the new checkpoint directory (missing or empty)")
    ex.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="of the written weights")
