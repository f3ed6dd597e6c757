"""The contracts between the parts: what a model, a head, an objective and a decoder promise.

Every model works with every head, objective and decoder because each side speaks only
through these interfaces (`typing.Protocol`s, checked structurally, never inherited; the
objective's is a base class each objective subclasses):

- a **model** (a Flax Linen module used through `init`/`apply`) maps tokens to hidden
  states [B, T, D] and has a decode step;
- a **head** (also Linen) maps hidden states [N, D] to a training loss or to exact
  normalized log-probabilities [N, V];
- an **objective** decides what the model is fed in training and returns a scalar loss;
- a **step function** is all a decoder sees: `(state, tokens [B]) -> (log_probs [B, V], state)`.

`seqjax.model_head` is the glue that calls a model and a head together through these
contracts. The special token ids are defined here once (`SPECIAL_IDS`); pure code takes them
as arguments rather than importing them.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol, TypeVar

import jax
import numpy as np

Params = Any  # a pytree of arrays: {"model": ..., "head": ...} for the glue's functions
Batch = Mapping[str, jax.Array]  # inputs/targets [B, T] int32, mask [B, T] float32 (+ src, src_mask [B, S])
# What an evaluation step sums over a batch: (NLL [] float32, tokens [] float32, {name: further sum []}).
EvalSums = tuple[jax.Array, jax.Array, dict[str, jax.Array]]
State = TypeVar("State")  # a decode state: any pytree whose leaves have the batch B as leading axis
# (`SharedByBeams` marks the parts a beam search's beams share, `GrowsWithSteps` the parts laid
# out along the positions)


@dataclasses.dataclass(frozen=True)
class SpecialIds:
    """The ids every vocabulary reserves, in this order at its start.

    pad fills batches past a row's end; bos starts a target; eos ends a line (and, in LM
    streams, separates lines); unk stands for a token outside the vocabulary.
    """

    pad: int = 0
    bos: int = 1
    eos: int = 2
    unk: int = 3

    @property
    def count(self) -> int:
        """How many ids the specials take: the first ordinary token's id."""
        return len(dataclasses.fields(self))

    def mask_id(self, vocab_size: int) -> int:
        """[MASK] of the masked-LM encoders: the id right after a vocabulary of `vocab_size`,
        which only their inputs use (their embedding has V + 1 rows; nothing predicts it).

        It is not reserved at the start as the ids above are: that would shift every ordinary
        id, and the vocabularies and checkpoints saved so far hold those ids.
        """
        return vocab_size


SPECIAL_IDS = SpecialIds()


class Model(Protocol):
    """A language model, or an encoder-decoder when `has_encoder`: a Flax Linen module used
    through `init`/`apply`. `apply` reaches these methods (`method="..."`); for an
    encoder-decoder each also takes `src [B, S] int32` and `src_mask [B, S] bool` keywords:

      __call__(tokens [B, T] int32, *, embedded=None, train=False) -> hidden [B, T, D] float32;
        `embedded` [B, T, D] replaces the token lookup (gradient penalty, soft feeding).
      embed(tokens [...] int32) -> [..., D] float32, the target-side lookup.
      target_embedding() -> [V, D] float32, the table a tied head scores with.
      init_decode_state(batch_size, max_len) -> state, every leaf with leading axis B; the
        parts laid out along max_len positions marked `GrowsWithSteps`.
      decode_step(state, token [B] int32) -> (hidden [B, D] float32, state); given a beam
        search's B·K rows when the state holds `SharedByBeams` parts.

    Facts the objectives and the training code read from the module itself:
      vocab_size: V, the target vocabulary the hidden states predict.
      has_encoder: whether the model reads a source sequence.
      recurrent: whether its decode state is a recurrent carry (a decode step costs one
        layer pass, so feeding its own predictions inside `lax.scan` is cheap); False for
        models whose teacher-forced pass is parallel over time (Transformers, windows).
    Facts only some models state (read with getattr, absent means the default):
      objective: the one objective kind that trains the model (the VAE LM, the BiLM, the
        masked-LM encoders), which `build_experiment` pairs with it (None).
      latent: a latent-variable model, scored by its bound and decoded given z (False);
        latent_size: Z, the size of its z [B, Z].
      generates: whether it has a decode step at all; False for encoder-only models (True).
      check_config(cfg: ModelConfig): a static method raising ValueError for the kind's own
        options outside their rules (checked with the shared options, before anything is built).
      encoder_parts: a Transformer encoder that carries over between kinds
        (`train.init_encoder_from`): part ("blocks", "norm", "inputs", "embedding") -> the path
        of that part in the model's parameters ("encoder/blocks"); absent: none.
    """

    vocab_size: int

    @property
    def has_encoder(self) -> bool: ...

    @property
    def recurrent(self) -> bool: ...

    def init(self, rngs: Any, *args: Any, **kwargs: Any) -> Any: ...

    def apply(self, variables: Any, *args: Any, **kwargs: Any) -> Any: ...


class LatentModel(Model, Protocol):
    """A latent-variable language model (the VAE LM, `latent` True), what the `vae` objective and
    latent interpolation call through `apply(..., method=...)`:

      encode(tokens [B, T] int32, mask [B, T] bool | None) -> (mean, log_variance), each
        [B, Z] float32: the posterior q(z | tokens), padded steps ignored;
      decode(tokens [B, T] int32, latent [B, Z] float32, *, mask=None, embedded=None,
        train=False) -> hidden [B, T, D] float32: the teacher-forced decoder given z;
      init_decode_state(batch_size, max_len, latent [B, Z]) -> state: decoding given z.
    """

    def encode(self, *args: Any, **kwargs: Any) -> Any: ...

    def decode(self, *args: Any, **kwargs: Any) -> Any: ...


class BidirectionalModel(Model, Protocol):
    """A language model read in both directions (the BiLM), what `bidirectional_lm` calls:

    backward(tokens [B, T] int32, *, mask [B, T] bool | None, train) -> hidden [B, T, D]
      float32, row t having read tokens[t:] (the forward direction is `__call__`).
    """

    def backward(self, *args: Any, **kwargs: Any) -> Any: ...


class ReplacedTokenModel(Model, Protocol):
    """An encoder with a generator and a replaced-token discriminator (ELECTRA), what the
    `electra` objective calls besides the encoder's `__call__(tokens, *, mask, train)`:

      generator(tokens [B, T] int32, *, mask [B, T] bool | None, train) -> hidden [B, T, D]
        float32, which the head turns into the generator's masked-LM distribution;
      discriminate(tokens [B, T] int32, *, mask, train) -> [B, T] float32, the log-odds that
        each token was replaced.
    """

    def generator(self, *args: Any, **kwargs: Any) -> Any: ...

    def discriminate(self, *args: Any, **kwargs: Any) -> Any: ...


def missing_methods(cls: type, contract: type) -> list[str]:
    """The methods `contract` (one of the protocols above) adds to `Model` that the model class
    `cls` lacks: what pairing it with an objective that needs `contract` would miss."""
    wanted = [
        name
        for klass in contract.__mro__
        if klass not in (Model, Protocol, object) and klass not in Model.__mro__
        for name, value in vars(klass).items()
        if callable(value) and not name.startswith("_")
    ]
    return sorted({name for name in wanted if not callable(getattr(cls, name, None))})


class CountedModel(Protocol):
    """A model counted on the host from the train stream instead of trained by gradient steps
    (the n-gram; `seqjax.models.is_trained` False): no parameters, devices or checkpoints. Its
    class is what the kind registers; training, evaluation and generation reach it through:

      count(cfg: ModelConfig, stream [N] int, vocab_size) -> the model (a classmethod);
      load(path) -> the model `save(path)` wrote (a classmethod); `counts_file`, the name of
        that file in a run directory;
      context_size: how many tokens before a position its distribution reads;
      size: the number of stored counts, what a run reports as its parameters;
      title: one line saying what was counted ("3-gram Kneser–Ney");
      nll_sum(stream [N] int, history [H] int) -> Σ −log P in nats over `stream`, each token
        given the tokens before it, `history` preceding the stream unscored;
      next_token_log_probs(histories [B, context_size] int, −1 for none) -> [B, V] float32.
    """

    counts_file: ClassVar[str]
    vocab_size: int

    @property
    def context_size(self) -> int: ...

    @property
    def size(self) -> int: ...

    @property
    def title(self) -> str: ...

    def save(self, path: str) -> None: ...

    def nll_sum(self, stream: Any, history: Any = ()) -> float: ...

    def next_token_log_probs(self, histories: np.ndarray) -> np.ndarray: ...


class Head(Protocol):
    """An output layer with exact log-probabilities: a Linen module whose `apply` reaches

      loss(hidden [N, D], targets [N] int32, key, mask [N] float32 | None, embedding)
        -> (scalar float32 masked mean of the per-row loss, {"tokens": sum(mask)});
      log_probs(hidden [N, D], embedding) -> [N, V] float32, normalized (for every head,
        the sampling ones included);
      target_log_probs(hidden [N, D], targets [N] int32, embedding) -> [N] float32, log_probs
        at the targets without an [N, V] value (what exact evaluation scores).

    tied: whether the head scores with the model's target embedding table, passed as
      `embedding` [V, D] (None when untied).
    """

    vocab_size: int

    @property
    def tied(self) -> bool: ...

    def matmul_weights(self, features: int, frequencies: np.ndarray) -> float:
        """Output weights multiplied per trained target token, expected over the target
        frequencies [V]: what the model FLOPs count of the head that trains."""
        ...

    def init(self, rngs: Any, *args: Any, **kwargs: Any) -> Any: ...

    def apply(self, variables: Any, *args: Any, **kwargs: Any) -> Any: ...


StepFn = Callable[[State, jax.Array], tuple[jax.Array, State]]
"""What decoders call: (state, tokens [B] int32) -> (log_probs [B, V] float32, state)."""


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class SharedByBeams:
    """Decode state that the beams of one batch row share instead of each holding a copy.

    Beam search repeats every other state leaf once per beam and reorders those rows after
    each step; it does neither to `value`, whose leaves keep the batch B as leading axis while
    the step function is called with B·K rows (row b·K + k is beam k of batch row b). A step
    function whose state holds one reads the beams' rows per batch row (K = rows / B).

    value: a pytree of arrays [B, ...].
    grow_axis (static): None for what the beams only read (an encoder's memory); else the axis
      along which each leaf makes room for every beam's writes: beam search zero-pads that axis
      to K times its size, the original in block 0 (a KV cache's slots: beam k writes block k,
      and the state's own per-row record says which block holds each slot of a beam's history).
    """

    value: Any
    grow_axis: int | None = dataclasses.field(default=None, metadata={"static": True})

    def for_beams(self, beam_size: int) -> SharedByBeams:
        """The state as beam search holds it for `beam_size` beams per batch row."""
        axis = self.grow_axis
        if axis is None or beam_size == 1:
            return self

        def grow(leaf: jax.Array) -> jax.Array:
            widths = [(0, 0)] * leaf.ndim
            widths[axis] = (0, (beam_size - 1) * leaf.shape[axis])
            return jax.numpy.pad(leaf, widths)

        return SharedByBeams(jax.tree.map(grow, self.value), self.grow_axis)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class GrowsWithSteps:
    """Decode state laid out along an axis of positions (a KV cache's slots, a per-position
    record) that a decoder may hold shorter while few positions are filled.

    The state is built for its full capacity C; the decoders hold `value` cut to the slots
    the steps so far can reach and zero-pad it back in stages as decoding proceeds, so that a
    step reads a cache about as long as what it holds rather than C. The axis holds whole
    blocks of the capacity: one, or beam search's K blocks of a shared cache.

    value: a pytree of arrays [B, ...].
    axis (static): the positions axis of every leaf.
    """

    value: Any
    axis: int = dataclasses.field(metadata={"static": True})

    def resized(self, capacity: int, new_capacity: int) -> GrowsWithSteps:
        """Every block of `capacity` positions cut or zero-padded at its end to `new_capacity`."""

        def resize(leaf: jax.Array) -> jax.Array:
            axis = self.axis % leaf.ndim
            blocks = leaf.reshape(*leaf.shape[:axis], -1, capacity, *leaf.shape[axis + 1 :])
            if new_capacity < capacity:
                blocks = jax.lax.slice_in_dim(blocks, 0, new_capacity, axis=axis + 1)
            else:
                widths = [(0, 0)] * blocks.ndim
                widths[axis + 1] = (0, new_capacity - capacity)
                blocks = jax.numpy.pad(blocks, widths)
            return blocks.reshape(*leaf.shape[:axis], -1, *leaf.shape[axis + 1 :])

        return GrowsWithSteps(jax.tree.map(resize, self.value), self.axis)


class Objective(abc.ABC):
    """A training objective: a frozen dataclass whose fields are its options, validated when
    it is built (`seqjax.objectives`). Unlike the other contracts it is a base class, which
    each objective subclasses, so that the type checker holds every `__call__` to this one.

    Called as objective(model, head, params, batch, key, step, *, ids) -> (loss, metrics):
    params {"model": ..., "head": ...}; batch as `Batch`; key a PRNG key; step [] int32, the
    update being computed (schedules read it); ids (keyword-only) the vocabulary's special
    ids. Returns a scalar float32 loss to minimize and a dict of scalar float32 metrics (at
    least "tokens", the number of target tokens the loss averages over).

    An objective whose model is scored otherwise than by the exact NLL of the targets (a bound,
    masked positions, a second direction) also has `eval_sums(model, head, params, batch, key,
    *, ids) -> EvalSums`, which the eval step asks for (`seqjax.objectives.eval_sums_of`);
    without it the eval step sums the head's exact NLL of the targets. Its further sums are turned
    into named numbers on the host by `eval_report`, given the split's totals, and a few of those
    into a clause of the one-line summary by `describe_eval` (`seqjax.objectives.objective_of`
    finds the objective of a model).
    """

    # Whether it feeds the model only gold tokens, so that a packed row's segments stay independent.
    feeds_gold_only: ClassVar[bool] = False
    # The protocol above its model must also meet (its methods reached through `apply`); None: `Model`.
    model_contract: ClassVar[type | None] = None
    # Whether its eval NLL covers every target token (not a sample of positions), so that it can be
    # spread over the split's words as a per-word perplexity.
    scores_every_target: ClassVar[bool] = True

    @staticmethod
    def eval_report(nll: float, tokens: float, sums: Mapping[str, Any]) -> dict[str, float]:
        """What a split's evaluation reports beyond its NLL: nll, the split's Σ NLL (nats) of
        `eval_sums`, over `tokens` scored tokens, and `sums` its further sums totalled over the
        split (floats, or arrays where a further sum is one). None here."""
        del nll, tokens, sums
        return {}

    @staticmethod
    def describe_eval(result: Mapping[str, float]) -> str:
        """A clause (`"; ..."`) added to the one-line summary of an evaluation `result` that holds
        `eval_report`'s numbers; "" for none."""
        del result
        return ""

    @abc.abstractmethod
    def __call__(
        self,
        model: Model,
        head: Head,
        params: Params,
        batch: Batch,
        key: jax.Array,
        step: jax.Array,
        *,
        ids: SpecialIds,
    ) -> tuple[jax.Array, dict[str, jax.Array]]: ...
