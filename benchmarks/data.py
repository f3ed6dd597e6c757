"""The data pipeline at corpus scale: token store preparation, launch and resume on a prepared
store, and the Grain loader's throughput, on corpora generated here from a seed.

    python benchmarks/data.py [--quick] [--word-mb 1024] [--bpe-mb 1024] [--pairs 4500000]

Corpora (never committed; written under --workdir and deleted after): word-level text of
Zipfian words over ≈ 800k types in lines of 5–40 words, the same text for BPE, and a parallel
corpus whose target side is the source's words reversed in another spelling. Each measured
command runs in a fresh process, whose peak RSS is read from the kernel (`ru_maxrss`).
Reported beside the store: today's in-memory path (read every line, build the tokenizer,
encode) on a corpus it fits, and the LSTM LM train step's tokens/s from lm_train.md, which the
loader must outrun by 20×.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import markdown_table, publish  # noqa: E402

TYPES = 800_000
LSTM_STEP_TOKENS_PER_SEC = 2_777  # lm_train.md: the 1-layer LSTM LM train step (B=32 T=64 D=512), this machine


def spellings(count: int, alphabet: str) -> np.ndarray:
    """[count] object: distinct lowercase words, shorter for lower ids (frequent words are short)."""
    out: list[str] = []
    length, base = 1, len(alphabet)
    while len(out) < count:
        for n in range(min(base**length, count - len(out))):
            word = []
            for _ in range(length):
                n, r = divmod(n, base)
                word.append(alphabet[r])
            out.append("".join(word))
        length += 1
    return np.array(out, dtype=object)


def zipf_lines(rng: np.random.Generator, words: int) -> tuple[np.ndarray, np.ndarray]:
    """Word ids [words] (Zipf–Mandelbrot over TYPES) and line lengths (5–40) covering them."""
    ranks = np.arange(1, TYPES + 1, dtype=np.float64)
    cdf = np.cumsum(1.0 / (ranks + 2.7))
    ids = np.searchsorted(cdf, rng.random(words) * cdf[-1])
    lengths = rng.integers(5, 41, size=words // 5 + 1)
    lengths = lengths[: np.searchsorted(np.cumsum(lengths), words) + 1]
    lengths[-1] -= lengths.sum() - words
    return ids, lengths[lengths > 0]


def text_of(table: np.ndarray, ids: np.ndarray, lengths: np.ndarray, reverse: bool = False) -> str:
    pieces = np.empty(2 * len(ids), dtype=object)
    words = table[ids]
    if reverse:
        ends = np.cumsum(lengths)
        words = np.concatenate([words[e - n : e][::-1] for e, n in zip(ends, lengths)])
    pieces[0::2] = words
    separators = np.full(len(ids), " ", dtype=object)
    separators[np.cumsum(lengths) - 1] = "\n"
    pieces[1::2] = separators
    return "".join(pieces)


def write_text(path: str, megabytes: float, seed: int) -> None:
    """A word-level corpus of about `megabytes` MB at `path`."""
    rng, table = np.random.default_rng(seed), spellings(TYPES, "abcdefghijklmnopqrstuvwxyz")
    with open(path, "w") as file:
        while file.tell() < megabytes * 2**20:
            file.write(text_of(table, *zipf_lines(rng, 1_000_000)))


def write_pairs(prefix: str, pairs: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    source, target = spellings(TYPES, "abcdefghijklmnopqrstuvwxyz"), spellings(TYPES, "zyxwvutsrqponmlkjihgfedcba")
    with open(f"{prefix}.en", "w") as src, open(f"{prefix}.de", "w") as tgt:
        done = 0
        while done < pairs:
            ids, lengths = zipf_lines(rng, 2_000_000)
            lengths = lengths[: pairs - done]
            ids = ids[: lengths.sum()]
            src.write(text_of(source, ids, lengths))
            tgt.write(text_of(target, ids, lengths, reverse=True))
            done += len(lengths)


def measured(code: str, env: dict[str, str] | None = None, first_record: str | None = None) -> dict[str, Any]:
    """Runs Python `code` in a fresh process; its JSON output plus wall seconds and peak RSS,
    and with `first_record` (a file the code appends to, as a run's metrics.jsonl) the seconds
    from launch until that file first grows (a logged first step)."""
    wrapper = (
        "import json, os, resource, subprocess, sys, time\n"
        "t = time.perf_counter(); first = None; watched = sys.argv[2]\n"
        "size = lambda: os.path.getsize(watched) if watched and os.path.exists(watched) else 0\n"
        "start = size()\n"
        "p = subprocess.Popen([sys.executable, '-c', sys.argv[1]], stdout=subprocess.PIPE, stderr=subprocess.PIPE,"
        " text=True)\n"
        "while p.poll() is None:\n"
        "    if first is None and watched and size() > start:\n"
        "        first = time.perf_counter() - t\n"
        "    time.sleep(0.05)\n"
        "stdout, stderr = p.communicate()\n"
        "wall = time.perf_counter() - t\n"
        "sys.stderr.write(stderr[-3000:] if p.returncode else '')\n"
        "out = json.loads(stdout.strip().splitlines()[-1]) if p.returncode == 0 else {'failed': p.returncode}\n"
        "out.update(wall=wall, first=first, rss=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)\n"
        "print(json.dumps(out))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", wrapper, code, first_record or ""], capture_output=True, text=True, env=env
    )
    sys.stderr.write(result.stderr)
    record: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return record


def prepare_code(keys: dict[str, Any]) -> str:
    return (
        "import json; from seqjax.config import DataConfig; from seqjax.data.store.prepare import prepare_store\n"
        f"store = prepare_store(DataConfig(**{keys!r}), {keys['store']!r}, progress=False)\n"
        "print(json.dumps({'splits': store.manifest['splits']}))\n"
    )


def today_code(path: str, tokenizer: str, vocab_size: int) -> str:
    return (
        "import json; from seqjax.data import read_texts, build_tokenizer\n"
        "from seqjax.data.datasets import encode_stream\n"
        f"lines = read_texts({path!r}); t = build_tokenizer({tokenizer!r}, lines, vocab_size={vocab_size})\n"
        "print(json.dumps({'tokens': int(len(encode_stream(t, lines)))}))\n"
    )


def loader_code(store: str, steps: int) -> str:
    return (
        "import json, time; from seqjax.data import LMBatches; from seqjax.data.batching.loader import Loader\n"
        f"from seqjax.data.store.token_store import open_store; s = open_store({store!r})\n"
        f"b = LMBatches(s.stream('train'), 32, 64, 0); loader = Loader(b, {steps}); next(loader)\n"
        f"t = time.perf_counter()\nfor _ in range({steps} - 1): next(loader)\n"
        f"print(json.dumps({{'tokens_per_sec': 32 * 64 * ({steps} - 1) / (time.perf_counter() - t)}}))\n"
    )


def train_argv(keys: dict[str, Any], workdir: str, steps: int) -> list[str]:
    settings = [f"data.{k}={v}" for k, v in keys.items()]
    settings += [
        "model.kind=rnn", "model.layers=1", "model.d_model=128", "model.dropout=0.0", "head.kind=sampled",
        "head.num_samples=8192", "head.proposal=log_uniform", "data.seq_len=35", "train.batch_size=32",
        f"train.steps={steps}", "train.log_every=1", "train.eval_every=0", "train.num_printed_samples=0",
        "optim.warmup_steps=0",
    ]  # fmt: skip
    return ["train", "--workdir", workdir, "--extend-schedule", "--set", *settings]


def train_code(argv: list[str]) -> str:
    return f"import json; from seqjax.cli import main; main({argv!r}); print(json.dumps({{}}))\n"


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small corpora (seconds): checks the program runs")
    parser.add_argument("--word-mb", type=float, default=1024)
    parser.add_argument("--bpe-mb", type=float, default=1024)
    parser.add_argument("--pairs", type=int, default=4_500_000)
    parser.add_argument("--today-mb", type=float, default=100, help="size of the corpus the in-memory path reads")
    parser.add_argument(
        "--workdir", default=None, help="where the corpora and stores go, kept after (default: a temporary dir)"
    )
    args = parser.parse_args()
    if args.quick:
        args.word_mb, args.bpe_mb, args.pairs, args.today_mb = 8, 4, 20_000, 8
    root = args.workdir or tempfile.mkdtemp(prefix="seqjax_data_bench_")
    os.makedirs(root, exist_ok=True)
    rows: list[list[str]] = []
    notes: list[str] = []
    try:
        t, generated = time.perf_counter(), 0
        for path, write in (
            ("word.txt", lambda p: write_text(p, args.word_mb, seed=0)),
            ("bpe.txt", lambda p: write_text(p, args.bpe_mb, seed=1)),
            ("today.txt", lambda p: write_text(p, args.today_mb, seed=2)),
            ("pairs.en", lambda p: write_pairs(p[: -len(".en")], args.pairs, seed=3)),
        ):
            if not os.path.exists(f"{root}/{path}"):  # a --workdir keeps the corpora of an earlier run
                write(f"{root}/{path}")
                generated += 1
        if generated:
            notes.append(f"Corpora generated in {time.perf_counter() - t:.0f} s.")
        else:
            notes.append("Corpora reused from --workdir (generated by an earlier run of this program, same seeds).")
        cases: list[tuple[str, dict[str, Any], str | None]] = [
            ("word", {"kind": "text", "train": f"{root}/word.txt", "tokenizer": "word"}, f"{root}/word.txt"),
            ("bpe 32k", {"kind": "text", "train": f"{root}/bpe.txt", "tokenizer": "bpe", "vocab_size": 32_000}, None),
            (
                f"parallel bpe 32k, {args.pairs:,} pairs",
                {
                    "kind": "parallel",
                    "train": f"{root}/pairs",
                    "src": "en",
                    "tgt": "de",
                    "tokenizer": "bpe",
                    "vocab_size": 32_000,
                },  # fmt: skip
                None,
            ),
        ]
        for name, keys, _ in cases:
            keys["store"] = f"{root}/store_{len(rows)}"
            size = sum(os.path.getsize(p) for p in ([keys["train"]] if keys["kind"] == "text" else
                                                    [f"{keys['train']}.en", f"{keys['train']}.de"]))  # fmt: skip
            result = measured(prepare_code(keys))
            rows.append([
                name, f"{size / 2**20:,.0f} MB", f"{result['wall']:.1f} s", f"{size / 2**20 / result['wall']:.1f} MB/s",
                gib(result["rss"]),
            ])  # fmt: skip
            print(rows[-1], flush=True)
        body = "## Prepare (one process, pinned to what taskset gives it)\n\n"
        body += markdown_table(["corpus", "size", "prepare", "throughput", "peak RSS"], rows) + "\n\n"

        today = measured(today_code(f"{root}/today.txt", "word", 0))
        stored = measured(prepare_code({"kind": "text", "train": f"{root}/today.txt", "tokenizer": "word",
                                        "store": f"{root}/store_today"}))  # fmt: skip
        body += f"## Today's in-memory path against the store, word level, {args.today_mb:,.0f} MB\n\n"
        body += (
            markdown_table(
                ["path", "time", "peak RSS"],
                [
                    ["read, build, encode in memory (before the store)", f"{today['wall']:.1f} s", gib(today["rss"])],
                    ["prepare the store", f"{stored['wall']:.1f} s", gib(stored["rss"])],
                ],  # fmt: skip
            )
            + "\n\n"
        )

        word = {"kind": "text", "train": f"{root}/word.txt", "tokenizer": "word", "store": f"{root}/store_0"}
        run = f"{root}/run"
        first = measured(train_code(train_argv(word, run, 1)), first_record=f"{run}/metrics.jsonl")
        resume = measured(train_code(train_argv(word, run, 2)), first_record=f"{run}/metrics.jsonl")
        loader = measured(loader_code(f"{root}/store_0", 3000))
        vocab = json.load(open(f"{root}/store_0/tokenizer/vocab.json"))["tokens"]
        body += f"## Training on the prepared word store (V = {len(vocab):,}, 1-layer LSTM D=128, "
        body += "sampled softmax K=8192)\n\n"
        body += (
            markdown_table(
                ["measure", "value"],
                [
                    ["launch → first step logged (wall)", f"{first['first']:.1f} s"],
                    ["launch → 1 step → checkpoint written → exit (wall)", f"{first['wall']:.1f} s"],
                    ["resume: launch → restore → first step logged (wall)", f"{resume['first']:.1f} s"],
                    ["resume: launch → restore → 1 step → checkpoint → exit (wall)", f"{resume['wall']:.1f} s"],
                    ["trainer peak RSS (first run)", gib(first["rss"])],
                    ["trainer peak RSS (resume)", gib(resume["rss"])],
                    ["Grain loader alone, B=32 T=64 (tokens/s)", f"{loader['tokens_per_sec']:,.0f}"],
                    ["LSTM LM train step consumes (lm_train.md, tokens/s)", f"{LSTM_STEP_TOKENS_PER_SEC:,}"],
                    ["loader / train step", f"{loader['tokens_per_sec'] / LSTM_STEP_TOKENS_PER_SEC:,.0f}×"],
                ],  # fmt: skip
            )
            + "\n"
        )
        body = "\n".join(notes) + "\n\n" + body
        publish("data", args.quick, "Data pipeline: token store, launch, resume, Grain loader", body)
    finally:
        if args.workdir is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
