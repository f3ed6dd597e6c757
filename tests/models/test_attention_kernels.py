"""An attention kernel is one module that registers its declaration (`AttentionKernel`): a kernel
registered at run time trains a Transformer through `seqjax train`; what it does not express runs
on XLA and the run says why; `auto` picks among the registered kernels by their declarations; a
kernel named for devices, dtypes or heads it does not take is refused; and no module but a
kernel's own names it."""

from __future__ import annotations

import ast
import dataclasses
import json
import pathlib

import jax.numpy as jnp
import pytest
from tiny_runs import tiny

import seqjax
from seqjax.cli import main
from seqjax.config import ATTENTION_KERNELS, ModelConfig
from seqjax.models import WHY_PADDED, SelfAttentionRows, build_model, kernel_choice
from seqjax.models.attention_kernels.kernel import MASK_PARTS, AttentionKernel
from seqjax.models.attention_kernels.xla import xla_attention

TINY_MODEL = ModelConfig(kind="transformer", d_model=16, num_heads=2, d_ff=32, layers=1, max_len=32)


@pytest.fixture
def toy_kernel():
    """register(**declaration) -> the list of masks it was called with: an XLA-backed kernel named
    "toy", registered for this test only."""
    calls: list = []

    def register(**declaration):
        def attend(q, k, v, mask):
            calls.append(mask)
            return xla_attention(q, k, v, mask)

        ATTENTION_KERNELS.register("toy", AttentionKernel(attend, title="the toy kernel", **declaration))
        return calls

    yield register
    if "toy" in ATTENTION_KERNELS:
        ATTENTION_KERNELS.remove("toy")


@pytest.mark.slow
def test_a_kernel_registered_at_run_time_trains_a_transformer_through_the_cli(toy_kernel, tmp_path, capsys):
    """A kernel that pads heads narrower than its multiple: the run says it does, and why."""
    calls = toy_kernel(head_multiple=32, pads_heads=True)
    assert main(["train", "--workdir", str(tmp_path), "--set", *tiny("model.attention_kernel=toy")]) == 0
    assert calls  # traced into the train step
    losses = [json.loads(line)["loss"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()[:2]]
    assert len(losses) == 2 and all(loss > 0 for loss in losses)
    out = capsys.readouterr().out
    assert f"attention: toy (heads padded from 16 to 32 features): {WHY_PADDED}\n" in out
    assert "notice:" not in out


@pytest.mark.slow
def test_packed_rows_a_kernel_cannot_segment_run_on_xla_and_the_run_says_why(toy_kernel, tmp_path, capsys):
    calls = toy_kernel(masks=frozenset(MASK_PARTS) - {"segments"})
    overrides = tiny("model.attention_kernel=toy", "data.packing=true")
    assert main(["train", "--workdir", str(tmp_path), "--set", *overrides]) == 0
    assert calls and all(mask.segments is None for mask in calls)  # packed rows went to XLA, eval's rows not
    out = capsys.readouterr().out
    assert "notice: the toy kernel takes no segment ids: packed rows (data.packing) attend on XLA" in out


def test_auto_takes_the_fitting_kernel_of_the_highest_priority(toy_kernel):
    toy_kernel(platforms=("cpu",), dtypes=("bfloat16",), auto_priority=5)
    assert kernel_choice(build_model(TINY_MODEL, 10, dtype=jnp.bfloat16, platform="cpu")).kernel == "toy"
    assert kernel_choice(build_model(TINY_MODEL, 10, dtype=jnp.float32, platform="cpu")).kernel == "xla"
    assert kernel_choice(build_model(TINY_MODEL, 10, dtype=jnp.bfloat16, platform="gpu")).kernel == "cudnn"


def test_a_kernel_without_an_auto_priority_is_only_taken_by_name(toy_kernel):
    toy_kernel()
    assert kernel_choice(build_model(TINY_MODEL, 10, platform="cpu")).kernel == "xla"


@pytest.mark.parametrize(
    "declaration, message",
    [
        (dict(platforms=("tpu",)), "model.attention_kernel=toy needs a TPU, but the run's devices are 'cpu'"),
        (dict(dtypes=("float16",)), r"attention_kernel=toy takes float16 operands \(train.precision\), got float32"),
        (dict(head_multiple=16), "model.attention_kernel=toy takes heads .* of a multiple of 16 features, got 8"),
        (dict(max_head=4), "model.attention_kernel=toy takes heads .* of at most 4 features, got 8"),
    ],
)
def test_a_kernel_named_for_what_it_does_not_take_is_refused(toy_kernel, declaration, message):
    toy_kernel(**declaration)
    with pytest.raises(ValueError, match=message):
        build_model(dataclasses.replace(TINY_MODEL, attention_kernel="toy"), 10, platform="cpu")


@pytest.mark.parametrize("requested", ["splash", "auto"])
def test_the_splash_kernel_pads_heads_narrower_than_its_tiles_named_or_chosen_by_auto(requested):
    cfg = dataclasses.replace(TINY_MODEL, d_model=128, attention_kernel=requested)
    choice = kernel_choice(build_model(cfg, 10, platform="tpu"))
    assert (choice.kernel, choice.padded_heads) == ("splash", (128 // TINY_MODEL.num_heads, 128))


def test_each_reason_a_kernel_leaves_attention_to_xla_is_one_clause_of_the_fallback(toy_kernel):
    toy_kernel(masks=frozenset({"causal"}), row_multiple=8)
    cfg = dataclasses.replace(TINY_MODEL, attention_kernel="toy", window=4)
    choice = kernel_choice(build_model(cfg, 10, rows=SelfAttentionRows((16, 20), packed=True)))
    assert choice.fallback == (
        "the toy kernel has no sliding window (model.window > 0): self-attention runs on XLA; "
        "the toy kernel takes no segment ids: packed rows (data.packing) attend on XLA; "
        "the toy kernel tiles rows by 8 tokens: rows of 20 tokens attend on XLA"
    )


def _docstrings(tree: ast.AST) -> set[int]:
    bodies = [n for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef))]
    return {id(n.body[0].value) for n in bodies if n.body and isinstance(n.body[0], ast.Expr)}


def test_no_module_but_a_kernels_own_writes_its_name():
    """Platforms, masks and compiled calls are declared once, in the kernel's module: no other
    module of seqjax compares with or lists a kernel's name (docstrings may name it)."""
    root = pathlib.Path(seqjax.__file__).parent
    kernels = set(ATTENTION_KERNELS)
    leaks = []
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        docstrings = _docstrings(tree)
        own = path.stem if path.parent.name == "attention_kernels" else None
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant) or node.value not in kernels or node.value == own:
                continue
            if id(node) not in docstrings:
                leaks.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
    assert leaks == []
