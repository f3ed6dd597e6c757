"""The one table a model family gives (`Tensor`s) and what is done with it in both directions:
checking a checkpoint's tensors against it, building seqjax's parameters, and writing them back.

A `Tensor` names one Hugging Face tensor, its shape, and where it lives in seqjax's parameter
tree `{"model": ..., "head": ...}`: a whole leaf, or one part of a leaf that stacks several
(Llama's separate q, k and v projections are parts of one fused kernel [D, 3, H, Dh]). `load`
turns the HF array into seqjax's layout (or part), `save` the reverse; each is a transpose
and/or reshape, so both directions are exact. Tensors with `vocab_rows` (the embedding, the
output layer) are laid out in the pretrained vocabulary's row order; `run.py` moves their
rows among seqjax's ids (`VocabMap`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

Path = tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Tensor:
    """One HF tensor: `name`, `shape`, and its seqjax leaf at `path` (`part`: (index, axis) of
    a leaf stacking several tensors along `axis`; None: the whole leaf)."""

    name: str
    shape: tuple[int, ...]
    path: Path
    load: Callable[[np.ndarray], np.ndarray]
    save: Callable[[np.ndarray], np.ndarray]
    part: tuple[int, int] | None = None
    vocab_rows: bool = False


def vocabulary_table(name: str, shape: tuple[int, int], path: Path) -> Tensor:
    """An embedding or output table [R, D], one row per pretrained vocabulary row, as it is."""
    return Tensor(name, shape, path, np.asarray, np.asarray, vocab_rows=True)


def linear(
    name: str, out_in: tuple[int, int], path: Path, seqjax_shape: tuple[int, ...], part: tuple[int, int] | None = None
) -> Tensor:
    """A torch `Linear` weight [out, in] stored as a Flax kernel: transposed to [in, out], then
    reshaped to `seqjax_shape` (e.g. [D, H, Dh])."""
    return Tensor(
        name,
        out_in,
        path,
        lambda w: w.T.reshape(seqjax_shape),
        lambda k: k.reshape(out_in[1], out_in[0]).T,
        part,
    )


def reshaped(
    name: str, shape: tuple[int, ...], path: Path, seqjax_shape: tuple[int, ...], part: tuple[int, int] | None = None
) -> Tensor:
    """A tensor seqjax holds in the same memory order, reshaped (a GPT-2 `Conv1D` weight is
    already [in, out]; biases are flat)."""
    return Tensor(name, shape, path, lambda w: w.reshape(seqjax_shape), lambda k: k.reshape(shape), part)


def check_tensors(table: Sequence[Tensor], found: dict[str, np.ndarray], family: str) -> None:
    """Raises ValueError naming every tensor that is missing, of another shape, or unexpected,
    each with the expected and found shape."""
    problems = []
    for tensor in table:
        if tensor.name not in found:
            problems.append(f"{tensor.name} missing (expected {list(tensor.shape)})")
        elif tuple(found[tensor.name].shape) != tensor.shape:
            problems.append(f"{tensor.name} expected {list(tensor.shape)}, found {list(found[tensor.name].shape)}")
    expected = {tensor.name for tensor in table}
    problems += [f"{name} unexpected (found {list(found[name].shape)})" for name in sorted(set(found) - expected)]
    if problems:
        raise ValueError(f"the checkpoint's tensors do not match its {family} config.json: " + "; ".join(problems))


def _set(tree: dict, path: Path, value: Any) -> None:
    for key in path[:-1]:
        tree = tree.setdefault(key, {})
    tree[path[-1]] = value


def _get(tree: dict, path: Path) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def to_seqjax(table: Sequence[Tensor], tensors: dict[str, np.ndarray], rows: Callable) -> dict:
    """seqjax's parameter tree (float32 leaves) from checked HF `tensors`; `rows` lays a
    `vocab_rows` table's rows out in seqjax's vocabulary order."""
    tree: dict = {}
    parts: dict[Path, list[tuple[int, int, np.ndarray]]] = {}
    for tensor in table:
        value = tensor.load(np.asarray(tensors[tensor.name], np.float32))
        if tensor.vocab_rows:
            value = rows(value)
        if tensor.part is None:
            _set(tree, tensor.path, value)
        else:
            parts.setdefault(tensor.path, []).append((*tensor.part, value))
    for path, pieces in parts.items():
        axis = pieces[0][1]
        _set(tree, path, np.stack([value for _, _, value in sorted(pieces, key=lambda p: p[0])], axis=axis))
    return tree


def to_hf(table: Sequence[Tensor], params: dict, rows: Callable, dtype: Any) -> dict[str, np.ndarray]:
    """The HF tensors (of `dtype`) of seqjax's parameter tree; `rows` lays a `vocab_rows` table
    back out in the pretrained vocabulary's order."""
    out = {}
    for tensor in table:
        value = np.asarray(_get(params, tensor.path), np.float32)
        if tensor.part is not None:
            index, axis = tensor.part
            value = np.take(value, index, axis=axis)
        if tensor.vocab_rows:
            value = rows(value)
        out[tensor.name] = np.ascontiguousarray(tensor.save(value)).astype(dtype)
    return out
