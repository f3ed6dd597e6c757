"""A Transformer encoder–decoder whose encoder starts from a pre-trained encoder-only run (masked
LM or ELECTRA, the BERT recipe of pre-training then fine-tuning): train.init_encoder_from.

The encoder-only models and the encoder-decoders that take their encoder build it from the same
blocks and say where each part of it is in their parameters (`encoder_parts`: blocks, norm,
inputs, embedding), so the weights carry over one to one from part to part; ELECTRA's
discriminator is its encoder (its generator and classifier are left behind). The source
embedding is copied word by word: every word of this run's source vocabulary that the
pre-trained vocabulary also holds gets its pre-trained row, the others keep their fresh
initialization, so the two runs need not share a tokenizer build. The decoder, the target
embedding and the head stay as initialized.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np
from flax import traverse_util
from jax.sharding import Mesh

from seqjax import optimizers as optim
from seqjax.data.tokenizers.vocab import Vocabulary
from seqjax.models import ENCODER_KINDS, ENCODER_PARTS
from seqjax.training.core.experiment import Experiment, build_experiment
from seqjax.training.core.run_dir import RunDir
from seqjax.training.core.state import restore_state

STACK_PARTS = ("blocks", "norm", "inputs")  # the encoder's parts carried over whole; the embedding by word


def pretrained_encoder(source: str, mesh: Mesh) -> tuple[dict[str, np.ndarray], Vocabulary, dict[str, str]]:
    """The latest parameters of the encoder-only run in `source`, flattened ("a/b/c" ->
    float32 array) and on the host, with its vocabulary (the embedding's first V rows) and
    where its encoder's parts are (`encoder_parts`)."""
    run = RunDir(source, f"train.init_encoder_from={source!r}")
    saved = run.config
    if saved.model.kind not in ENCODER_KINDS:
        raise ValueError(
            f"train.init_encoder_from={source!r} must be an encoder-only run "
            f"(model.kind one of {', '.join(ENCODER_KINDS)}), "
            f"got model.kind={saved.model.kind!r}"
        )
    checkpointer = run.checkpointer(saved.train.keep_checkpoints)
    try:
        step = checkpointer.latest_step()
        if step is None:
            raise ValueError(f"train.init_encoder_from={source!r} has no checkpoint")
        exp = build_experiment(saved, tokenizers=run.tokenizers(), echo=lambda _: None)
        optimizer = optim.make_optimizer(saved.optim, saved.train.steps)
        state, _ = restore_state(exp, checkpointer, step, optimizer, mesh, exp.train_batches().batch(0), "data")
    finally:
        checkpointer.close()
    flat = traverse_util.flatten_dict(jax.device_get(state.params["model"]), sep="/")
    parts = ENCODER_PARTS[saved.model.kind]
    return {name: np.asarray(value) for name, value in flat.items()}, exp.tokenizer.vocab, parts


def _in_part(name: str, prefix: str) -> bool:
    """Whether the parameter `name` belongs to the part at `prefix` (its unscanned layers are
    `prefix_0`, `prefix_1`, ...)."""
    return name == prefix or name.startswith(prefix + "/") or name.startswith(prefix + "_")


def encoder_weights(
    pretrained: dict[str, np.ndarray], theirs: dict[str, str], ours: dict[str, str]
) -> dict[str, np.ndarray]:
    """The pre-trained weights of the encoder's stack (`STACK_PARTS`) renamed from their parts'
    paths (`theirs`, part -> path) to this model's (`ours`); the embedding and everything outside
    the stack are not among them."""
    out = {}
    for name, value in pretrained.items():
        for part in STACK_PARTS:
            if _in_part(name, theirs[part]):
                out[ours[part] + name[len(theirs[part]) :]] = value
    return out


def transplant_embedding(
    fresh: np.ndarray, source_vocab: Vocabulary, pretrained: np.ndarray, pretrained_vocab: Vocabulary
) -> tuple[np.ndarray, int]:
    """fresh: [V_src, D] this run's source embedding; pretrained: [V_pre (+1 for [MASK]), D].
    Returns the table with each word of `source_vocab` found in `pretrained_vocab` replaced by
    its pre-trained row, and how many were."""
    rows = np.array(fresh, copy=True)
    found = 0
    for i, token in enumerate(source_vocab.tokens):
        if token in pretrained_vocab:
            rows[i] = pretrained[pretrained_vocab.id(token)]
            found += 1
    return rows, found


def with_pretrained_encoder(
    exp: Experiment, params: dict, source: str, mesh: Mesh, *, echo: Callable[[str], None]
) -> dict:
    """`params` ({"model", "head"} of a transformer_seq2seq run, placed on `mesh`) with the
    encoder of the run in `source`: every encoder weight replaced (same shapes required) and
    the shared words' source embedding rows; each new leaf keeps the sharding of the one it
    replaces."""
    pretrained, pretrained_vocab, theirs = pretrained_encoder(source, mesh)
    ours = ENCODER_PARTS[exp.cfg.model.kind]
    weights = encoder_weights(pretrained, theirs, ours)
    model = traverse_util.flatten_dict(params["model"], sep="/")
    encoder_names = [n for n in model if any(_in_part(n, ours[part]) for part in STACK_PARTS)]
    for name in encoder_names:
        if name not in weights:
            raise ValueError(
                f"train.init_encoder_from={source!r} has no weight for this run's {name}: the encoders differ"
            )
        if weights[name].shape != model[name].shape:
            raise ValueError(
                f"train.init_encoder_from={source!r}: {name} is {weights[name].shape} there, "
                f"{model[name].shape} here "
                "(model.d_model, layers, num_heads, kv_heads, d_ff, mlp, bias and scan_layers must match)"
            )
    source_vocab = exp.pairs.src_tokenizer.vocab
    embedding, found = transplant_embedding(
        np.asarray(jax.device_get(model[ours["embedding"]])),
        source_vocab,
        pretrained[theirs["embedding"]],
        pretrained_vocab,
    )
    updates = {name: weights[name] for name in encoder_names} | {ours["embedding"]: embedding}
    for name, value in updates.items():
        model[name] = jax.device_put(value.astype(model[name].dtype), model[name].sharding)
    echo(
        f"encoder initialized from {source}: {len(encoder_names)} weights, "
        f"{found:,} of {source_vocab.size:,} source words' embeddings"
    )
    return {**params, "model": traverse_util.unflatten_dict(model, sep="/")}
