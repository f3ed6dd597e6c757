"""What the pretrained tests share: the fixtures' place and names, and seqjax's logits and greedy
tokens of an imported run, in the checkpoint's own ids."""

import functools
import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np

from seqjax.heads import build_head
from seqjax.models import build_model
from seqjax.pretrained.runs import read_run
from seqjax.training.features.generation import DecodeOptions, decode_prompts

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
GREEDY = DecodeOptions()
# The fixtures, in the order benchmarks/hf_fixtures.py wrote them: it records each one's export check.
NAMES = tuple(json.loads((FIXTURES / "export_check.json").read_text()))


def expected(name: str) -> dict[str, np.ndarray]:
    """The fixture's recorded inputs [2, 12], transformers' logits [2, 12, R] and greedy tokens [16]."""
    return dict(np.load(FIXTURES / name / "expected.npz"))


@functools.cache  # a run is read once: its directory does not change once written
def _loaded(workdir: str):
    cfg, tokenizer, params, _ = read_run(workdir)
    size = tokenizer.vocab.size
    return build_model(cfg.model, size), build_head(cfg.head, size, np.zeros(size)), params, tokenizer.layout


def loaded(workdir):
    """(model, head, params, layout) of the finished run in `workdir`, read on first use; the
    params are shared by the callers, which must not change them."""
    return _loaded(str(workdir))


def seqjax_logits(workdir, inputs: np.ndarray) -> np.ndarray:
    """The scores h·w + b [B, T, R] of the run for HF ids `inputs` [B, T], in HF row order."""
    model, _, params, layout = loaded(workdir)
    forward = jax.jit(lambda p, tokens: model.apply({"params": p}, tokens))  # one program, not op by op
    hidden = forward(params["model"], jnp.asarray(layout.seqjax_of[inputs], jnp.int32))
    table = params["model"]["embed"]["embedding"] if "weights" not in params["head"] else params["head"]["weights"]
    return (np.asarray(hidden) @ table.T + params["head"]["biases"])[..., layout.seqjax_of]


def seqjax_greedy(workdir, prompt: np.ndarray, steps: int, options=GREEDY) -> np.ndarray:
    """HF ids [steps] the run decodes after the HF ids `prompt` [P] (greedy by default)."""
    model, head, params, layout = loaded(workdir)
    prompts = jnp.asarray(layout.seqjax_of[prompt][None], jnp.int32)
    lengths = jnp.asarray([len(prompt)], jnp.int32)
    keys = jax.random.split(jax.random.key(0), 1)
    tokens, _ = decode_prompts(model, head, params, keys, prompts, lengths, max_len=steps, options=options)
    return layout.hf_of[np.asarray(tokens[0])]
