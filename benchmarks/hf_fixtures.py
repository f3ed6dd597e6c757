"""Writes the pretrained-checkpoint fixtures of tests/pretrained/fixtures from `transformers`.

    python benchmarks/hf_fixtures.py [--output tests/pretrained/fixtures] [NAME ...]

Needs torch and transformers (`pip install -e '.[bench]'`); the tests that read the fixtures
need neither. Builds tiny random models (D = 32, 2 layers, 4 heads, d_ff 64) over a byte-level
BPE tokenizer trained on a few lines, and saves each with `save_pretrained` (safetensors):

- gpt2: GPT-2, tied output layer, float32, one file; `<|endoftext|>` is BOS, EOS and UNK.
- gpt2_untied: GPT-2 with its own `lm_head`, float32.
- llama_gqa: Llama, 4 query and 2 key/value heads, untied, float32, sharded (an index and
  several shards, by a tiny max_shard_size); `<unk>`, `<s>`, `</s>` at ids 0, 1, 2, and a
  post-processor that puts `<s>` before every text, as Llama's tokenizers do.
- llama_bf16: Llama, as many key/value heads as query heads, tied, weights in bfloat16.
- llama3_rope: llama_gqa's shapes with Llama 3.1's rope scaling ("llama3").
- llama_head_dim: llama_gqa with heads 16 wide (head_dim), not D / H = 8.
- qwen2_bias: Qwen2 (q, k, v biases, none on o_proj or the MLP), 2 key/value heads, tied.
- qwen3_qk_norm: Qwen3 (q and k RMSNorms), 2 key/value heads 16 wide.
- mistral_window: Mistral, a sliding window of 5 keys, 2 key/value heads (the inputs of 12 tokens
  and the greedy run of 4 + 16 are longer than the window).

Beside each checkpoint, `expected.npz` holds fixed inputs [2, 12] (HF ids), the model's float32
logits on them [2, 12, V] (the bfloat16 model's computed from its bfloat16 weights held in float32,
as seqjax holds them) and its greedy `generate` output after a prompt of 4 tokens (16 new
tokens, no early stop); and, for a text `prompt`, `prompt_ids` (`tokenizer(prompt)`, as a user
calls it: the post-processor's `<s>` first for Llama, nothing added for GPT-2), `continuation`
(greedy `generate` after them, up to `max_new_tokens` and stopping at EOS, which it keeps) and
`continuation_text` (prompt and continuation decoded together, special tokens skipped). Last,
each checkpoint is imported into seqjax, exported back with `seqjax export-hf`, loaded with
`AutoModelForCausalLM.from_pretrained`, and its logits compared; the outcome is written to
`export_check.json`.

A fixture is a name in FIXTURES and its family's branch of `build`: a new family (its config
class, model class, special tokens and post-processor) is one more branch there. The tests take
the fixtures' names from `export_check.json`, which lists every fixture written.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from tokenizers import Tokenizer

LINES = [
    "the cat sat on the mat.",
    "a dog ran in the park, and the cat watched it.",
    "sequence models read tokens one at a time.",
    "pretrained weights in, fine-tuned weights out!",
    "jax compiles the whole decoding loop.",
]
SHAPES = dict(d_model=32, layers=2, heads=4, d_ff=64, positions=64)
# Each family's config names of the SHAPES entries.
CONFIG_NAMES = {
    "gpt2": dict(d_model="n_embd", layers="n_layer", heads="n_head", d_ff="n_inner", positions="n_positions"),
    "llama": dict(
        d_model="hidden_size",
        layers="num_hidden_layers",
        heads="num_attention_heads",
        d_ff="intermediate_size",
        positions="max_position_embeddings",
    ),
}
NEW_TOKENS = 16
PROMPT = "the cat sat on the"  # the text prompt each fixture records transformers' continuation of
FIXTURES = (
    "gpt2",
    "gpt2_untied",
    "llama_gqa",
    "llama_bf16",
    "llama3_rope",
    "llama_head_dim",
    "qwen2_bias",
    "mistral_window",
    "qwen3_qk_norm",
)
# Each Llama fixture's config settings besides SHAPES. llama3_rope's scaling puts the four
# frequency pairs of its 8-wide heads (wavelengths 6, 30, 140 and 664 positions at θ 500) in all
# three of Llama 3.1's bands: kept (under 64 / 4), interpolated, divided by the factor (over 64).
LLAMA_SETTINGS: dict[str, dict[str, Any]] = {
    "llama_gqa": dict(num_key_value_heads=2),
    "llama_bf16": dict(tie_word_embeddings=True),
    "llama_head_dim": dict(num_key_value_heads=2, head_dim=16),  # 4 heads 16 wide at D = 32
    "qwen2_bias": dict(num_key_value_heads=2, tie_word_embeddings=True),
    "qwen3_qk_norm": dict(num_key_value_heads=2, head_dim=16),
    "mistral_window": dict(num_key_value_heads=2, sliding_window=5),  # inputs of 12 and 20 tokens: longer
    "llama3_rope": dict(
        num_key_value_heads=2,
        rope_parameters=dict(
            rope_type="llama3",
            rope_theta=500.0,
            factor=8.0,
            low_freq_factor=1.0,
            high_freq_factor=4.0,
            original_max_position_embeddings=64,
        ),
    ),
}


def train_tokenizer(specials: list[str], bos: str | None = None) -> Tokenizer:
    """A byte-level BPE `tokenizers.Tokenizer` of about 300 pieces with `specials` first; with
    `bos`, a post-processor that puts it before every text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(LINES, trainer)
    if bos is not None:
        special = [(bos, tokenizer.token_to_id(bos))]
        tokenizer.post_processor = processors.TemplateProcessing(
            single=f"{bos} $A", pair=f"{bos} $A {bos} $B", special_tokens=special
        )
    return tokenizer


def build(name: str) -> tuple[Any, Any, Any, dict[str, str]]:
    """(model, fast tokenizer, weight dtype, save options) of fixture `name` (torch and transformers
    objects: no types here)."""
    import torch
    import transformers

    torch.manual_seed(sum(map(ord, name)))
    family = "gpt2" if name.startswith("gpt2") else "llama"  # Qwen2's and Mistral's configs name shapes as Llama's
    shapes = {config_name: SHAPES[key] for key, config_name in CONFIG_NAMES[family].items()}
    if family == "gpt2":
        tokenizer = train_tokenizer(["<|endoftext|>"])
        special = dict(bos_token="<|endoftext|>", eos_token="<|endoftext|>", unk_token="<|endoftext|>")
        end = tokenizer.token_to_id("<|endoftext|>")
        config = transformers.GPT2Config(
            vocab_size=tokenizer.get_vocab_size(),
            bos_token_id=end,
            eos_token_id=end,
            tie_word_embeddings=name == "gpt2",
            **shapes,
        )
        model = transformers.GPT2LMHeadModel(config)
    else:
        tokenizer = train_tokenizer(["<unk>", "<s>", "</s>"], bos="<s>")
        special = dict(bos_token="<s>", eos_token="</s>", unk_token="<unk>")
        settings = dict(num_key_value_heads=SHAPES["heads"], rope_theta=500.0, tie_word_embeddings=False)
        config_class = {
            "qwen2": transformers.Qwen2Config,
            "qwen3": transformers.Qwen3Config,
            "mistral": transformers.MistralConfig,
        }.get(name.split("_")[0], transformers.LlamaConfig)
        config = config_class(
            vocab_size=tokenizer.get_vocab_size(),
            rms_norm_eps=1e-5,
            bos_token_id=1,
            eos_token_id=2,
            **shapes,
            **(settings | LLAMA_SETTINGS[name]),
        )
        model = transformers.AutoModelForCausalLM.from_config(config)
    with torch.no_grad():  # random weights of a useful size: transformers' init makes near-uniform outputs
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.3 if parameter.ndim > 1 else 0.1)
    dtype = torch.bfloat16 if name.endswith("bf16") else torch.float32
    model = model.to(dtype).to(torch.float32).eval()  # the bf16 model's weights, exactly, computing in float32
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, **special)
    options = {"max_shard_size": "40KB"} if name == "llama_gqa" else {}
    return model, fast, dtype, options


def record(name: str, output: str) -> None:
    import torch

    model, tokenizer, dtype, options = build(name)
    directory = os.path.join(output, name)
    shutil.rmtree(directory, ignore_errors=True)
    saved = model.to(dtype)
    saved.save_pretrained(directory, safe_serialization=True, **options)
    tokenizer.save_pretrained(directory)
    rows = model.config.vocab_size
    inputs = np.random.default_rng(0).integers(0, rows, (2, 12))
    model = model.to(torch.float32)
    with torch.no_grad():
        logits = model(torch.tensor(inputs)).logits.numpy()
        generated = model.generate(
            torch.tensor(inputs[:1, :4]),
            attention_mask=torch.ones((1, 4), dtype=torch.long),
            max_new_tokens=NEW_TOKENS,
            min_new_tokens=NEW_TOKENS,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=0,
        )[0, 4:].numpy()
        prompt_ids = tokenizer(PROMPT)["input_ids"]
        continuation = model.generate(
            torch.tensor([prompt_ids]),
            attention_mask=torch.ones((1, len(prompt_ids)), dtype=torch.long),
            max_new_tokens=NEW_TOKENS,
            do_sample=False,
            eos_token_id=model.config.eos_token_id,
            pad_token_id=model.config.eos_token_id,
        )[0, len(prompt_ids) :].tolist()
    np.savez(
        os.path.join(directory, "expected.npz"),
        inputs=inputs,
        logits=logits.astype(np.float32),
        greedy=generated,
        prompt=np.array(PROMPT),
        prompt_ids=np.array(prompt_ids),
        continuation=np.array(continuation),
        max_new_tokens=np.array(NEW_TOKENS),
        continuation_text=np.array(tokenizer.decode(prompt_ids + continuation, skip_special_tokens=True)),
    )
    print(f"{name}: {sum(p.numel() for p in model.parameters()):,} parameters, saved {sorted(os.listdir(directory))}")


def export_check(name: str, output: str) -> dict:
    """Imports fixture `name` into seqjax, exports it back, loads the export in transformers and
    compares its logits with the recorded ones."""
    import torch
    import transformers

    from seqjax.pretrained import export_run, import_checkpoint

    expected = np.load(os.path.join(output, name, "expected.npz"))
    with tempfile.TemporaryDirectory() as scratch:
        run, exported = os.path.join(scratch, "run"), os.path.join(scratch, "hf")
        import_checkpoint(os.path.join(output, name), run)
        export_run(run, exported)
        model = transformers.AutoModelForCausalLM.from_pretrained(exported, dtype=torch.float32).eval()
        tokenizer = transformers.AutoTokenizer.from_pretrained(exported)
        with torch.no_grad():
            logits = model(torch.tensor(expected["inputs"])).logits.numpy()
    difference = float(np.abs(logits - expected["logits"]).max())
    return {
        "loaded_by": f"transformers {transformers.__version__} AutoModelForCausalLM.from_pretrained",
        "class": type(model).__name__,
        "tokenizer_class": type(tokenizer).__name__,
        "max_abs_logit_difference": difference,
        "equal_to_1e-4": difference <= 1e-4,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "pretrained", "fixtures"
    )
    parser.add_argument("--output", default=default)
    parser.add_argument("names", nargs="*", help=f"the fixtures to write, of {', '.join(FIXTURES)} (default: all)")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(FIXTURES))
    if unknown:
        parser.error(f"no fixture {', '.join(unknown)}; the fixtures: {', '.join(FIXTURES)}")
    names = args.names or FIXTURES
    for name in names:
        record(name, args.output)
    path = os.path.join(args.output, "export_check.json")
    checks = {}
    if args.names and os.path.exists(path):  # the other fixtures' checks stay as recorded
        with open(path) as file:
            checks = json.load(file)
    checks |= {name: export_check(name, args.output) for name in names}
    with open(path, "w") as file:
        json.dump(checks, file, indent=2)
    print(json.dumps(checks, indent=2))


if __name__ == "__main__":
    main()
