"""`seqjax export-hf --workdir RUN --output DIR`: a run as a Hugging Face checkpoint directory that
`AutoModelForCausalLM.from_pretrained(DIR)` loads.

The run must be a twin of a family (`families.twin_of_run`): its model one of theirs, its head
a softmax over h·w + b whose biases are one constant over the pretrained rows (a shift no
probability sees; the imported ones are 0 and stay so under head.learn_bias=false). The
pretrained rows come back in their own order; ids of roles the checkpoint had no token for,
and the input rows of roles sharing a token (GPT-2's BOS), are left out. An imported run writes
its tokenizer files back as they came; a run with seqjax's byte-level BPE gets a
`tokenizer.json` whose ids are the run's, whose post-processor puts `</s>` before a text, where
the run reads every line from (`framing.OWN`); char and word tokenizers have no such file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np
from tokenizers import Tokenizer as HfTokenizer
from tokenizers import processors

from seqjax.config import ModelConfig
from seqjax.data.tokenizers.pretrained import ROLES, PretrainedTokenizer, VocabMap
from seqjax.data.tokenizers.trained import BpeTokenizer
from seqjax.data.tokenizers.vocab import EOS_ID, SPECIAL_TOKENS
from seqjax.pretrained.families import twin_of_run
from seqjax.pretrained.mapping import to_hf
from seqjax.pretrained.runs import read_run
from seqjax.pretrained.tensor_files import CONFIG_FILE, WEIGHTS_FILE, write_safetensors

EXPORT_DTYPES = {"float32": np.dtype(np.float32), "bfloat16": np.dtype(ml_dtypes.bfloat16)}


def unrolled(model_params: dict, cfg: ModelConfig) -> dict:
    """A scanned stack's `blocks` (leaves [L, ...]) as `blocks_0` ... `blocks_{L-1}`; others as they are."""
    if "blocks" not in model_params:
        return model_params
    out = {k: v for k, v in model_params.items() if k != "blocks"}
    for layer in range(cfg.layers):
        out[f"blocks_{layer}"] = _take(model_params["blocks"], layer)
    return out


def _take(tree: dict[str, Any], index: int) -> dict[str, Any]:
    return {k: _take(v, index) if isinstance(v, dict) else v[index] for k, v in tree.items()}


def bpe_tokenizer_json(tokenizer: BpeTokenizer) -> bytes:
    """seqjax's byte-level BPE as a `tokenizer.json` whose ids are the run's: the BPE vocabulary
    renumbered by the run's ids, the specials at 0..3 (special added tokens, never merged), and a
    post-processor that puts `</s>` before a text, so that `transformers`' `tokenizer(prompt)`
    reads a prompt as the run does and importing the export frames lines as the run did."""
    settings = json.loads(tokenizer.model.to_str())
    vocab = {piece: tokenizer.vocab.id(piece) for piece in settings["model"]["vocab"]}
    # In the model's vocabulary too: tokenizers numbers an added token it lacks after the model's.
    settings["model"]["vocab"] = {token: i for i, token in enumerate(SPECIAL_TOKENS)} | vocab
    settings["added_tokens"] = [
        {
            "id": i,
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, t in enumerate(SPECIAL_TOKENS)
    ]
    model = HfTokenizer.from_str(json.dumps(settings))
    end = SPECIAL_TOKENS[EOS_ID]
    model.post_processor = processors.TemplateProcessing(
        single=f"{end} $A", pair=f"{end} $A {end} $B", special_tokens=[(end, EOS_ID)]
    )
    return model.to_str().encode("utf-8")


def export_run(workdir: str, output: str, *, dtype: str = "float32", echo: Callable[[str], None] = print) -> str:
    """Writes the latest parameters of the run in `workdir` as a checkpoint directory `output`
    (new or empty), weights in `dtype` ("float32" | "bfloat16"); returns the family's name.

    Raises:
      ValueError: `output` holds something, the run has no twin (what differs, per family), or
        its output biases differ across words. Nothing is written then.
    """
    if dtype not in EXPORT_DTYPES:
        raise ValueError(f"--dtype must be one of {', '.join(EXPORT_DTYPES)}, got {dtype!r}")
    if os.path.exists(output) and (not os.path.isdir(output) or os.listdir(output)):
        raise ValueError(f"--output {output} must be a new or empty directory")
    cfg, tokenizer, params, step = read_run(workdir)
    family = twin_of_run(cfg)
    if isinstance(tokenizer, PretrainedTokenizer):
        layout, files = tokenizer.layout, dict(tokenizer.files)
    else:
        layout = VocabMap.build(tokenizer.vocab.size, {role: i for i, role in enumerate(ROLES)})
        files = {"tokenizer.json": bpe_tokenizer_json(tokenizer)} if isinstance(tokenizer, BpeTokenizer) else {}
    biases = params["head"]["biases"][layout.predicted]
    if np.any(biases != biases[0]):
        raise ValueError(
            f"the run's output biases differ across words (from {biases.min():.4g} to {biases.max():.4g}): a "
            f"{family.NAME} output layer has none. Train with head.learn_bias=false (as imported runs are) to keep them"
        )
    params = {**params, "model": unrolled(params["model"], cfg.model)}
    table = family.table(cfg.model, layout.rows, cfg.head.tied)
    tensors = to_hf(table, params, layout.to_hf_rows, EXPORT_DTYPES[dtype])
    config = family.hf_config(cfg.model, layout.rows, cfg.head.tied)
    config |= {f"{role}_token_id": layout.roles[role] for role in ("bos", "eos", "pad")}
    config |= {"dtype": dtype, "torch_dtype": dtype}
    os.makedirs(output, exist_ok=True)
    write_safetensors(os.path.join(output, WEIGHTS_FILE), tensors)
    with open(os.path.join(output, CONFIG_FILE), "w", encoding="utf-8") as file:
        json.dump(config, file, indent=2)
    for name, content in files.items():
        with open(os.path.join(output, name), "wb") as file:
            file.write(content)
    note = "" if files else f"; no tokenizer file: a {tokenizer.kind} tokenizer has no Hugging Face form"
    echo(f"exported {workdir} (step {step}) as {family.NAME} to {output}: {len(tensors)} tensors in {dtype}{note}")
    return str(family.NAME)
