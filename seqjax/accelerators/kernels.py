"""The kernels a compiled GPU program launches, read from its HLO text: what each computes and
moves, and how many times one execution runs it — what the per-kernel time model
(`seqjax.accelerators.estimate`) is made of.

A kernel is an instruction of a computation the device executes (the entry, a loop's body and
condition, a conditional's branches, what a command buffer's `call` or an `async-start` wraps),
not of a fused computation: a fusion (one kernel whatever it fuses), a custom call (cuBLAS's
`__cublas$gemm` / `__cublas$lt$matmul`, cuDNN's fused attention `__cudnn$fmha…`), a collective
(its `-start` half when asynchronous; the `-done` half launches nothing), or a lone copy,
transpose, reduce. Parameters, constants, tuples, bitcasts, calls and the loop instructions
themselves launch nothing. A kernel in a loop body runs the loop's known trip count
times (`program.computations`); where the trip count depends on the data, once per entry unless
told otherwise. A kernel inside a conditional's branch is marked with the branch
(`Kernel.branch`), as only one branch runs. A conditional, and each trip of a loop whose trip
count depends on the data, also costs a round trip to the host: XLA's GPU
runtime copies the branch index or the loop's condition to the host and waits for the stream
to drain before it goes on (`WhileThunk`, `ConditionalThunk`); a loop of known trip count runs
from the host without waiting.

What a kernel computes: a matmul's FLOPs (a dot, in a fusion — Triton's GEMM fusions — or alone,
or a cuBLAS call) are 2 x its output's elements x its contraction, at the dtype of its operands; a
fused attention call's are its two (forward) or five (backward) [Sq, Sk] x D products per batch
row and head, halved under a causal mask (the kernel skips the masked tiles). Any other fusion's
work is its elementwise instructions, one per element each, by the unit that executes them
(floating-point, integer and logic, special functions). What a kernel moves: its operands read
and its result written once, except an operand the fusion only slices (a scanned layer's weights
from their stack: the slice is read) and the buffer a dynamic-update-slice or scatter updates in
place (only the update is read and written). A collective's bytes are what each device sends over
the links in a ring, for a replica group of n devices: n-1 times an all-gather's operand (each
device's shard to every other), (n-1)/n of a reduce-scatter's or all-to-all's, twice that of an
all-reduce's, a permute's whole operand.
"""

from __future__ import annotations

import dataclasses
import math
import re

from seqjax.accelerators import program

_LINE = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*?)\s+([a-z][a-z0-9\-]*)\((.*)$")
_ARRAY = re.compile(r"\b([a-z]+[0-9]*[a-z0-9]*)\[([0-9,]*)\]")
_CONTROL = re.compile(r"(?:body|condition)=%?([\w.\-]+)")
_BRANCH = re.compile(r"(?:true_computation|false_computation)=%?([\w.\-]+)")
_FREE = {
    "parameter", "constant", "get-tuple-element", "tuple", "bitcast", "while", "conditional", "call",
    "async-start", "after-all", "partition-id", "replica-id", "opt-barrier", "add-dependency",
}  # fmt: skip
_SLICING = ("dynamic-slice", "slice", "gather")
_IN_PLACE = {"dynamic-update-slice": 1, "scatter": 2}  # op: its update's operand index
# Elementwise instructions by the unit that runs them: (float, integer and logic, special function).
VECTOR_OPS = (
    {
        "add", "subtract", "multiply", "maximum", "minimum", "negate", "abs", "clamp", "floor", "ceil",
        "sign", "round-nearest-even", "round-nearest-afz",
    },
    {
        "and", "or", "xor", "not", "shift-left", "shift-right-logical", "shift-right-arithmetic",
        "compare", "select", "convert", "remainder", "popcnt", "clz",
    },
    {
        "exponential", "exponential-minus-one", "log", "log-plus-one", "rsqrt", "sqrt", "cbrt", "tanh",
        "logistic", "power", "divide", "sine", "cosine", "atan2", "erf",
    },
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One kernel of a program and how many times one execution launches it.

    kind: "matmul" (a GEMM, alone or fused), "attention" (a fused attention call), "memory" (any
      other fusion, copy or lone op), "collective", or "round_trip": the host waiting for the
      device, which XLA's GPU runtime does to read a conditional's branch index and, before each
      trip and to stop, the condition of a loop whose trip count depends on the data.
    flops: matrix FLOPs per launch (matmul and attention kernels).
    dtype: the matrix operands' dtype ("bf16", "f32", ...; "" for the others).
    bytes: bytes read and written in device memory per launch; a collective's: what each device
      sends over the links.
    vector: elementwise instructions per launch by unit, (float, integer, special).
    count: launches per execution of the program (fractional where a loop's trips per entry are
      a mean over its entries).
    branch: "" outside conditionals; inside one, "<conditional>/<branch index>" of the outermost
      conditional holding it (one branch runs: `estimate.step_seconds` takes the costliest).
    """

    kind: str
    flops: float
    dtype: str
    bytes: int
    vector: tuple[int, int, int] = (0, 0, 0)
    count: float = 1
    branch: str = ""


@dataclasses.dataclass(frozen=True)
class _Instruction:
    name: str
    shape: str  # the result's shape text: one array or a tuple of them
    op: str
    operands: tuple[str, ...]
    arguments: str  # the text between the call's parentheses
    attributes: str  # the rest of the line after them
    root: bool


def _parse(text: str) -> list[_Instruction]:
    found = []
    for line in text.splitlines():
        matched = _LINE.match(line)
        if matched is None:
            continue
        root, name, shape, op, rest = matched.groups()
        depth, end = 1, len(rest)
        for position, char in enumerate(rest):  # the arguments end at the parenthesis closing the call
            depth += {"(": 1, ")": -1}.get(char, 0)
            if depth == 0:
                end = position
                break
        arguments = rest[:end]
        operands = tuple(re.findall(r"%([\w.\-]+)", arguments))
        found.append(_Instruction(name, shape, op, operands, arguments, rest[end + 1 :], root is not None))
    return found


def _dims(shape: str) -> tuple[str, list[int]]:
    """The dtype and dimensions of the first array in `shape`."""
    matched = _ARRAY.search(shape)
    if matched is None:
        return "", []
    return matched.group(1), [int(d) for d in matched.group(2).split(",") if d]


def _bytes(shape: str) -> int:
    return sum(program.array_bytes(shape))


def _numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", text)]


def _target(call: _Instruction) -> str:
    found = re.search(r'custom_call_target="([^"]+)"', call.attributes)
    return "" if found is None else found.group(1)


def _dot_flops(dot: _Instruction, shapes: dict[str, str]) -> tuple[float, str]:
    """FLOPs and operand dtype of a dot or cuBLAS call: 2 x output elements x the contracted size."""
    dtype, lhs = _dims(shapes.get(dot.operands[0], ""))
    contracting = re.search(r"lhs_contracting_dims=\{([0-9,]*)\}", dot.attributes)
    if contracting is None:  # a cuBLAS call names them in its backend config
        contracting = re.search(r'"lhs_contracting_dimensions":\[([^\]]*)\]', dot.attributes)
    axes = _numbers(contracting.group(1)) if contracting else []
    contracted = math.prod(lhs[a] for a in axes if a < len(lhs))
    return 2.0 * math.prod(_dims(dot.shape)[1]) * contracted, dtype


def _attention_flops(call: _Instruction, shapes: dict[str, str]) -> float:
    """A cuDNN fused attention call's matrix FLOPs: 2·B·H·Sq·Sk·D per product, two products
    forward, five backward (S again, dV, dP, dQ, dK), half of them under a causal mask."""
    config = call.attributes.replace(" ", "")
    scores = re.search(r'"intermediate_tensor_shape":\{[^}]*?"dimensions":\[([^\]]*)\]', config)
    contracting = re.search(r'"bmm1_dot_dimension_numbers":\{"lhs_contracting_dimensions":\["(\d+)"\]', config)
    if scores is None or contracting is None:
        return 0.0
    query = _dims(shapes.get(call.operands[0], ""))[1]
    head = query[int(contracting.group(1))] if int(contracting.group(1)) < len(query) else 0
    products = 5 if "Backward" in _target(call) else 2
    causal = 0.5 if '"mask_type":"CAUSAL"' in config else 1.0
    return products * 2.0 * math.prod(_numbers(scores.group(1))) * head * causal


def _fusion_bytes(fusion: _Instruction, fused: list[_Instruction], shapes: dict[str, str]) -> int:
    """Bytes a fusion reads and writes (the module docstring says which operands count less)."""
    users: dict[str, list[tuple[_Instruction, int]]] = {}
    for inst in fused:
        for position, operand in enumerate(inst.operands):
            users.setdefault(operand, []).append((inst, position))

    def read(name: str, whole: int) -> int:
        """Bytes read of value `name` (`whole` bytes): its slices where only slices read it."""
        total = 0
        for user, position in users.get(name, []):
            if user.op == "bitcast":
                total += read(user.name, whole)
            elif user.op in _SLICING and position == 0:
                total += _bytes(user.shape)
            elif user.op in _IN_PLACE and position == 0:
                continue  # the buffer updated in place: not read
            else:
                return whole
        return min(total, whole)

    parameters = {int(inst.arguments): inst.name for inst in fused if inst.op == "parameter"}
    reads = 0
    for index, operand in enumerate(fusion.operands):
        whole = _bytes(shapes.get(operand, ""))
        reads += read(parameters[index], whole) if index in parameters else whole
    by_name = {inst.name: inst for inst in fused}
    root = next((inst for inst in fused if inst.root), fused[-1])
    outputs = [by_name[name] for name in root.operands if name in by_name] if root.op == "tuple" else [root]
    writes = 0
    for out in outputs:
        while out.op == "bitcast" and out.operands[0] in by_name:
            out = by_name[out.operands[0]]
        if out.op in _IN_PLACE:
            update = by_name.get(out.operands[_IN_PLACE[out.op]])
            writes += 0 if update is None else _bytes(update.shape)
        else:
            writes += _bytes(out.shape)
    return reads + writes


def _vector(fused: list[_Instruction]) -> tuple[int, int, int]:
    """Elementwise instructions of a fused computation by unit (a reduce: one add per input)."""
    shapes = {inst.name: inst.shape for inst in fused}
    counts = [0, 0, 0]
    for inst in fused:
        if inst.op == "reduce":
            counts[0] += math.prod(_dims(shapes.get(inst.operands[0], ""))[1])
            continue
        for unit, ops in enumerate(VECTOR_OPS):
            if inst.op in ops:
                counts[unit] += math.prod(_dims(inst.shape)[1])
    return counts[0], counts[1], counts[2]


def _group_size(inst: _Instruction, devices: int) -> int:
    """Devices in the collective's replica group: `{{0,1},{2,3}}`, `[2,4]<=[8]` (2 groups of 4),
    `mesh['data'=2,'model'=4] {'model'}` (the named axes), or all `devices` when none are named."""
    text = inst.attributes
    listed = re.search(r"replica_groups=\{\{([0-9,]*)\}", text)
    if listed:
        return len(_numbers(listed.group(1)))
    iota = re.search(r"replica_groups=\[([0-9,]+)\]<=", text)
    if iota:
        return _numbers(iota.group(1))[-1]
    mesh = re.search(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}", text)
    if mesh:
        sizes = dict(re.findall(r"'([^']+)'=(\d+)", mesh.group(1)))
        return math.prod(int(sizes.get(axis, 1)) for axis in re.findall(r"'([^']+)'", mesh.group(2)))
    return devices


def _sent_bytes(inst: _Instruction, shapes: dict[str, str], devices: int) -> int:
    """What each device sends over the links in a ring for one collective of its operands."""
    n = _group_size(inst, devices)
    inputs = sum(_bytes(shapes.get(operand, "")) for operand in inst.operands)
    share = {"all-gather": n - 1, "reduce-scatter": (n - 1) / n, "all-to-all": (n - 1) / n}
    share.update({"all-reduce": 2 * (n - 1) / n, "collective-permute": 1.0})
    return int(share[inst.op.removesuffix("-start")] * inputs)


def _executed(hlo: str, parsed: dict[str, list[_Instruction]]) -> dict[str, str]:
    """The computations the device executes — the entry, what its loops and branches run, and
    what a `call` (a command buffer) or an `async-start` wraps — each with its `Kernel.branch`."""
    entry = re.search(r"^ENTRY\s+%?([\w.\-]+)", hlo, re.M)
    if entry is None:  # a fragment of instructions
        return dict.fromkeys(parsed, "")
    found, pending = {entry.group(1): ""}, [entry.group(1)]
    while pending:
        caller = pending.pop()
        for inst in parsed[caller]:
            branches = _BRANCH.findall(inst.attributes) + program.branches(inst.attributes)
            called = _CONTROL.findall(inst.attributes)
            wrapped = {"call": r"to_apply=%?([\w.\-]+)", "async-start": r"calls=%?([\w.\-]+)"}.get(inst.op)
            called += re.findall(wrapped, inst.attributes) if wrapped else []
            tagged = [(name, found[caller]) for name in called]
            tagged += [(name, found[caller] or f"{inst.name}/{index}") for index, name in enumerate(branches)]
            for name, branch in tagged:
                if name in parsed and name not in found:
                    found[name] = branch
                    pending.append(name)
    return found


def kernels(hlo: str, devices: int = 1, trips: program.Trips | None = None) -> list[Kernel]:
    """The kernels one execution of the program `hlo` (GPU HLO text, `Compiled.as_text()`)
    launches on each of its `devices`, the body of a loop whose trip count depends on the data
    run `trips` of its `while` line times per entry (once without `trips`)."""
    texts = program.computations(hlo, trips)
    parsed = {name: _parse(text) for name, (text, _) in texts.items()}
    found = []
    for name, branch in _executed(hlo, parsed).items():
        shapes = {inst.name: inst.shape for inst in parsed[name]}
        runs = texts[name][1]
        for inst in parsed[name]:
            kernel = _kernel(inst, shapes, parsed, devices)
            if kernel is None and inst.op == "conditional":
                kernel = Kernel("round_trip", 0.0, "", 0)
            elif kernel is None and inst.op == "while" and not program.knows_trips(inst.attributes):
                # the condition is read on the host before each trip and once more to stop
                kernel = Kernel("round_trip", 0.0, "", 0, count=program.unknown_trips(inst.attributes, trips) + 1)
            if kernel is not None:
                found.append(dataclasses.replace(kernel, count=runs * kernel.count, branch=branch))
    return found


def _kernel(
    inst: _Instruction, shapes: dict[str, str], parsed: dict[str, list[_Instruction]], devices: int
) -> Kernel | None:
    op = inst.op
    if op in _FREE or op.endswith("-done"):
        return None
    if op.removesuffix("-start") in program.COLLECTIVES:
        return Kernel("collective", 0.0, "", _sent_bytes(inst, shapes, devices))
    moved = sum(_bytes(shapes.get(operand, "")) for operand in inst.operands) + _bytes(inst.shape)
    if op == "fusion":
        called = re.search(r"calls=%?([\w.\-]+)", inst.attributes)
        fused = parsed.get(called.group(1), []) if called else []
        if not fused:
            return Kernel("memory", 0.0, "", moved)
        fused_shapes = {i.name: i.shape for i in fused}
        dots = [_dot_flops(i, fused_shapes) for i in fused if i.op == "dot"]
        moved = _fusion_bytes(inst, fused, shapes)
        if dots:
            return Kernel("matmul", sum(flops for flops, _ in dots), dots[0][1], moved)
        return Kernel("memory", 0.0, "", moved, _vector(fused))
    if op == "dot":
        return Kernel("matmul", *_dot_flops(inst, shapes), moved)
    target = _target(inst) if op == "custom-call" else ""
    if target:  # a library call's result ends with its scratch space, which it neither reads nor keeps
        results = program.array_bytes(inst.shape)
        if len(results) > 1 and re.search(r"\b[su]8\[[0-9,]*\][^,]*\)\s*$", inst.shape):
            moved -= results[-1]
    if target.startswith("__cublas"):
        return Kernel("matmul", *_dot_flops(inst, shapes), moved)
    if target.startswith("__cudnn$fmha"):
        return Kernel("attention", _attention_flops(inst, shapes), _dims(shapes.get(inst.operands[0], ""))[0], moved)
    return Kernel("memory", 0.0, "", moved)


def summary(found: list[Kernel]) -> list[list]:
    """The kernels as a compact JSON-able list, identical kernels merged (their counts added):
    [kind, flops, dtype, bytes, [float, integer, special], count] each, and its branch after that
    where it has one."""
    merged: dict[tuple, float] = {}
    for k in found:
        key = (k.kind, k.flops, k.dtype, k.bytes, k.vector, k.branch)
        merged[key] = merged.get(key, 0) + k.count
    ordered = sorted(merged.items(), key=lambda item: (item[0][0], -item[0][1], -item[0][3], item[0][4], item[0][5]))
    return [
        [kind, flops, dtype, moved, list(vector), count, *([branch] if branch else [])]
        for (kind, flops, dtype, moved, vector, branch), count in ordered
    ]


def from_summary(rows: list[list]) -> list[Kernel]:
    """The kernels of a `summary`."""
    return [
        Kernel(k, float(f), d, int(b), (int(v[0]), int(v[1]), int(v[2])), c, *branch)
        for k, f, d, b, v, c, *branch in rows
    ]
