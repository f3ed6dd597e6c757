"""What a compiled program holds, read from the compiler's own output: its memory per device,
the fused attention kernels in it, its collectives and its cost.

The HLO text of `Compiled.as_text()` is the program one device runs. A fused attention kernel
is a custom call, which its registration describes (`AttentionKernel.hlo`: cuDNN's
`__cudnn$fmha…` on a GPU, a Pallas `tpu_custom_call` named for the splash kernel on a TPU). A
collective is an instruction named for its kind (`all-reduce`, `all-gather`, `reduce-scatter`,
`all-to-all`, `collective-permute`, or their `-start` halves when asynchronous); its bytes are
its outputs': its result's, or, for an asynchronous start whose result holds its operands then
its outputs (every kind but all-reduce), the outputs part of it. A TPU program
of several slices sends what crosses the data-center network as host transfers to the
megascale runtime (`send` with `_xla_megascale_transfer_type`): those are the DCN collectives,
counted apart (`dcn_collectives`). An instruction inside a loop counts as many times as the
loop runs where the compiler knows its trip count (`known_trip_count`: a scanned layer stack,
gradient accumulation), once where it does not (a loop whose trip count depends on the data: a
walk over the rows of each class or tail cluster; `data_dependent_loops` counts them).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np

from seqjax.config import ATTENTION_KERNELS
from seqjax.models.attention_kernels.kernel import CustomCall

COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_DTYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1, "s16": 2, "u16": 2, "bf16": 2, "f16": 2}
_DTYPE_BYTES.update({"s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16})
_SHAPE = re.compile(r"\b([a-z]+[0-9]*[a-z0-9]*)\[([0-9,]*)\]")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(.*?)\s+([a-z][a-z0-9\-]*)\((.*)$", re.M)
# Groups of one device each: a collective over no mesh axis (a psum that shard_map's transpose
# writes for an input split over every axis), which moves nothing.
_ALONE = re.compile(r"replica_groups=\{\{\d+\}(?:,\{\d+\})*\}")


def array_bytes(text: str) -> list[int]:
    """Bytes of each array shape written in `text` (one shape or a tuple of them), in order."""
    sizes = []
    for dtype, dims in _SHAPE.findall(text):
        if dtype in _DTYPE_BYTES:
            sizes.append(_DTYPE_BYTES[dtype] * int(np.prod([int(d) for d in dims.split(",") if d] or [1])))
    return sizes


_COMPUTATION = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_WHILE = re.compile(r"^(.*\bwhile\(.*?body=%?([\w.\-]+).*)$", re.M)
# Trips per entry of a loop whose trip count depends on the data, from its `while` instruction's
# line (its metadata names the scopes it was traced in).
Trips = Callable[[str], float]
_KNOWN_TRIPS = re.compile(r"known_trip_count\":\{\"n\":\"(\d+)\"")
_CALLED = re.compile(r"(?:body|condition|to_apply|calls|true_computation|false_computation)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")


def branches(text: str) -> list[str]:
    """The computations that the conditionals in `text` branch to, each branch of each."""
    return [name.strip().lstrip("%") for listed in _BRANCHES.findall(text) for name in listed.split(",")]


def computations(hlo: str, trips: Trips | None = None) -> dict[str, tuple[str, float]]:
    """{name: (text, runs)} of the program's computations: how many times each runs per
    execution, the entry's once, a loop body's its caller's times its known trip count or,
    where the compiler knows none, times `trips` of its line (one without `trips`)."""
    texts: dict[str, list[str]] = {}
    entry, current = None, None
    for line in hlo.splitlines():
        opened = _COMPUTATION.match(line)
        if opened and not line.startswith(" "):
            current = opened.group(2)
            texts[current] = []
            if opened.group(1):
                entry = current
        elif current is not None:
            texts[current].append(line)
    if not texts:  # instructions without their computation (a fragment): one that runs once
        return {"": (hlo, 1)}
    bodies = {name: "\n".join(lines) for name, lines in texts.items()}
    runs: dict[str, float] = {entry: 1} if entry is not None else {name: 1 for name in bodies}
    pending = list(runs)
    while pending:
        name = pending.pop()
        loops = {body: _trips(line, trips) for line, body in _WHILE.findall(bodies.get(name, ""))}
        for called in _CALLED.findall(bodies.get(name, "")) + branches(bodies.get(name, "")):
            if called in bodies and called not in runs:
                runs[called] = runs[name] * loops.get(called, 1)
                pending.append(called)
    return {name: (bodies[name], runs.get(name, 1)) for name in bodies}


def _trips(line: str, trips: Trips | None) -> float:
    known = _KNOWN_TRIPS.search(line)
    return int(known.group(1)) if known is not None else unknown_trips(line, trips)


def unknown_trips(line: str, trips: Trips | None) -> float:
    """Trips per entry of the loop of `line` whose trip count depends on the data: `trips` of
    it, or one."""
    return 1 if trips is None else trips(line)


def knows_trips(line: str) -> bool:
    """Whether the compiler knows the trip count of the loop of `line` (its `while` instruction)."""
    return _KNOWN_TRIPS.search(line) is not None


def data_dependent_loops(hlo: str) -> int:
    """The loops in the program whose trip count the compiler does not know (each loop
    instruction once, however often its caller runs)."""
    return sum(not knows_trips(line) for text, _ in computations(hlo).values() for line, _ in _WHILE.findall(text))


def collectives(hlo: str) -> dict[str, dict[str, int]]:
    """{kind: {"count", "bytes"}} of the collectives one execution runs within a slice or host
    (result bytes; `-start` halves counted for asynchronous ones, their `-done` halves not;
    loop bodies times their known trip counts; none over groups of one device)."""
    found: dict[str, dict[str, int]] = {}
    for text, runs in computations(hlo).values():
        for result, op, rest in _INSTRUCTION.findall(text):
            kind = op.removesuffix("-start")
            if kind not in COLLECTIVES or _ALONE.search(rest):
                continue
            entry = found.setdefault(kind, {"count": 0, "bytes": 0})
            entry["count"] += int(runs)
            holds_operands = op.endswith("-start") and kind != "all-reduce"
            entry["bytes"] += int(runs) * sum(array_bytes(_tuple_elements(result)[1] if holds_operands else result))
    return found


def _tuple_elements(text: str) -> list[str]:
    """The top-level elements of a result's tuple shape `(a, (b, c), ...)` as text (the text
    itself, unsplit, when it is no tuple); commas inside dimensions `[..]` and layouts `{..}`
    (a TPU layout holds parentheses too) do not split."""
    text = text.strip()
    if not text.startswith("("):
        return [text]
    elements, depth, nested, start = [], 0, 0, 1
    for index, char in enumerate(text):
        if char in "[{":
            nested += 1
        elif char in "]}":
            nested -= 1
        elif nested == 0 and char == "(":
            depth += 1
        elif nested == 0 and char == ")":
            depth -= 1
            if depth == 0:
                elements.append(text[start:index])
                break
        elif nested == 0 and depth == 1 and char == ",":
            elements.append(text[start:index])
            start = index + 1
    return [element.strip() for element in elements]


_DCN_SEND = re.compile(r"^\s*%?[\w.\-]+\s*=\s*\((.*?)\)\s+send\(.*?_xla_megascale_transfer_type=\"(\w+)\"", re.M)


def dcn_collectives(hlo: str) -> dict[str, dict[str, int]]:
    """{kind: {"count", "bytes"}} of what one execution sends across the data-center network
    between TPU slices: each megascale send's kind (`ALL_REDUCE` as all-reduce, ...) and bytes."""
    found: dict[str, dict[str, int]] = {}
    for text, runs in computations(hlo).values():
        for result, kind in _DCN_SEND.findall(text):
            entry = found.setdefault(kind.lower().replace("_", "-"), {"count": 0, "bytes": 0})
            entry["count"] += int(runs)
            entry["bytes"] += int(runs) * next(iter(array_bytes(result)), 0)  # the data, before the count and token
    return found


_CUSTOM_CALL = re.compile(r'^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=[^\n]*custom_call_target="([^"]*)"', re.M)


def custom_calls(hlo: str, call: CustomCall) -> int:
    """The custom calls in the program that `call` describes: target starting with its target,
    and named with one of its names where it gives any."""
    return sum(
        target.startswith(call.target) and (not call.names or any(part in name for part in call.names))
        for name, target in _CUSTOM_CALL.findall(hlo)
    )


def fused_attention_kernels() -> dict[str, CustomCall]:
    """The registered attention kernels a compiled program shows as custom calls, by name, with
    how their calls look (`AttentionKernel.hlo`; XLA's own kernel compiles to ordinary
    instructions)."""
    return {kind.name: kind.build.hlo for kind in ATTENTION_KERNELS.kinds() if kind.build.hlo is not None}


def fused_attention_calls(hlo: str) -> dict[str, int]:
    """The calls of each of `fused_attention_kernels` in the program, forward and backward counted."""
    return {name: custom_calls(hlo, call) for name, call in fused_attention_kernels().items()}


def memory(compiled: Any) -> dict[str, int]:
    """Per-device bytes of the compiled program: arguments, outputs, outputs aliased to donated
    arguments, temporaries, and the peak they add up to."""
    stats = compiled.memory_analysis()

    def figure(name: str) -> int:
        return int(getattr(stats, name, 0) or 0)

    arguments, outputs = figure("argument_size_in_bytes"), figure("output_size_in_bytes")
    aliased, temporaries = figure("alias_size_in_bytes"), figure("temp_size_in_bytes")
    return {
        "arguments": arguments,
        "outputs": outputs,
        "aliased": aliased,
        "temporaries": temporaries,
        "peak": arguments + outputs - aliased + temporaries,
    }


def compiler_cost(compiled: Any) -> dict[str, float] | None:
    """The compiler's FLOPs and bytes accessed per device (`Compiled.cost_analysis`), or None
    where the backend gives none."""
    try:
        cost = compiled.cost_analysis()
    except Exception:  # backends without a cost model raise rather than return nothing
        return None
    if isinstance(cost, list):
        cost = cost[0] if cost else None
    if not cost or "flops" not in cost:
        return None
    return {"flops": float(cost["flops"]), "bytes_accessed": float(cost.get("bytes accessed", 0.0))}
