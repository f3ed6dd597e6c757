"""`seqjax prepare` on one corpus in each format: the same text as lines, as JSON Lines (plain
and zstd), and as Parquet, word-level, measured one after another in rounds.

    python benchmarks/corpus_formats.py [--quick] [--mb 1024] [--rounds 2] [--formats lines,jsonl,...]

The JSON Lines file is `--mb` MB (the size the target names), one object a line, `{"id": N,
"text": LINE}`; the text file holds the same lines, so it is smaller by the JSON around each text.
The text is data.py's Zipfian words (≈ 800k types, lines of 5–40 words). Each prepare runs in a
fresh process under `/usr/bin/time -v` at `nice -n 19` (the machine is shared; JAX on the CPU), which gives its
wall time and peak RSS; the formats run back to back within a round, and each figure is the
median over the rounds. Corpora and stores are written under a temporary directory (or
--workdir) and deleted after.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import markdown_table, publish  # noqa: E402
from data import write_text  # noqa: E402

FORMATS = ("lines", "jsonl", "jsonl.zst", "parquet")
ROWS_PER_GROUP = 100_000  # a Parquet row group: some 13 MB of text, what `datasets` writes by default is close


def write_formats(root: str, megabytes: float, formats: list[str]) -> dict[str, str]:
    """The corpus of every format in `formats` under `root`: format -> path. The text is generated
    to make the JSON Lines file about `megabytes` MB."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    text = os.path.join(root, "corpus.txt")
    overhead = len(json.dumps({"id": 10**6, "text": ""})) / 80  # JSON's bytes around a line of ≈ 80 bytes
    write_text(text, megabytes / (1 + overhead), seed=0)
    paths = {"lines": text, "jsonl": os.path.join(root, "corpus.jsonl")}
    with open(text, encoding="utf-8") as lines, open(paths["jsonl"], "w", encoding="utf-8") as out:
        for i, line in enumerate(lines):
            out.write(json.dumps({"id": i, "text": line.rstrip("\n")}, ensure_ascii=False) + "\n")
    if "jsonl.zst" in formats:
        paths["jsonl.zst"] = paths["jsonl"] + ".zst"
        with open(paths["jsonl"], "rb") as source, open(paths["jsonl.zst"], "wb") as out:
            zstandard.ZstdCompressor().copy_stream(source, out)
    if "parquet" in formats:
        paths["parquet"] = os.path.join(root, "corpus.parquet")
        schema = pa.schema([("id", pa.int64()), ("text", pa.string())])
        with open(text, encoding="utf-8") as lines, pq.ParquetWriter(paths["parquet"], schema) as writer:
            first, batch = 0, []
            for line in lines:
                batch.append(line.rstrip("\n"))
                if len(batch) == ROWS_PER_GROUP:
                    writer.write_table(pa.table({"id": range(first, first + len(batch)), "text": batch}, schema))
                    first, batch = first + len(batch), []
            if batch:
                writer.write_table(pa.table({"id": range(first, first + len(batch)), "text": batch}, schema))
    return {name: paths[name] for name in formats}


def prepare(path: str, format: str, store: str) -> tuple[float, float, int]:
    """Prepares the word-level store of the corpus `path` in a fresh process at `nice -n 19`:
    (wall seconds, peak RSS bytes, tokens in the store)."""
    keys = {"kind": "text", "format": format.split(".")[0], "tokenizer": "word", "train": path, "store": store}
    code = (
        "import json; from seqjax.config import DataConfig; from seqjax.data.store.prepare import prepare_store\n"
        f"store = prepare_store(DataConfig(**{keys!r}), {store!r}, progress=False)\n"
        "print(json.dumps({'tokens': store.manifest['splits']['train']['text']['tokens']}))\n"
    )
    command = ["/usr/bin/time", "-v", "nice", "-n", "19", sys.executable, "-c", code]
    # JAX_PLATFORMS=cpu: preparing uses no accelerator, and probing for one's plugins costs seconds.
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    if result.returncode:
        raise RuntimeError(f"prepare of {path} failed:\n{result.stderr[-3000:]}")
    clock = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", result.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", result.stderr)
    assert clock and rss, result.stderr
    seconds = sum(float(part) * 60**i for i, part in enumerate(reversed(clock.group(1).split(":"))))
    shutil.rmtree(store)
    return seconds, int(rss.group(1)) * 1024, json.loads(result.stdout.strip().splitlines()[-1])["tokens"]


def versions() -> str:
    import pyarrow
    import zstandard

    return f"pyarrow {pyarrow.__version__}; zstandard {zstandard.__version__}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a small corpus (seconds): checks the program runs")
    parser.add_argument("--mb", type=float, default=1024, help="size of the JSON Lines corpus, MB")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--formats", default=",".join(FORMATS), help=f"some of {', '.join(FORMATS)}; lines first")
    parser.add_argument("--workdir", default=None, help="where the corpora and stores go (default: a temporary dir)")
    args = parser.parse_args()
    formats = args.formats.split(",")
    if formats[0] != "lines" or not set(formats) <= set(FORMATS):
        raise ValueError(f"--formats must be lines, then some of {', '.join(FORMATS[1:])}, got {args.formats!r}")
    megabytes = 8 if args.quick else args.mb
    root = tempfile.mkdtemp(prefix="seqjax_formats_bench_", dir=args.workdir)
    try:
        t = time.perf_counter()
        paths = write_formats(root, megabytes, formats)
        generated = time.perf_counter() - t
        runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in formats}
        for round in range(args.rounds):
            for name in formats:
                runs[name].append(prepare(paths[name], name, os.path.join(root, "store")))
                print(f"round {round + 1} {name}: {runs[name][-1][0]:.1f} s", flush=True)
        sizes = {name: os.path.getsize(path) for name, path in paths.items()}
    finally:
        shutil.rmtree(root)
    tokens = {name: {run[2] for run in runs[name]} for name in formats}
    if len(set().union(*tokens.values())) != 1:
        raise RuntimeError(f"every format must give the same store, got token counts {tokens}")
    wall = {name: statistics.median(run[0] for run in runs[name]) for name in formats}
    rss = {name: statistics.median(run[1] for run in runs[name]) for name in formats}
    rows = [
        [
            name,
            f"{sizes[name] / 2**20:,.0f} MB",
            f"{wall[name]:.1f} s",
            " / ".join(f"{run[0]:.1f}" for run in runs[name]),
            f"{wall[name] / wall['lines']:.2f}x",
            f"{sizes['jsonl'] / 2**20 / wall[name]:.1f} MB/s",
            f"{rss[name] / 2**30:.2f} GiB",
        ]
        for name in formats
    ]
    header = ["format", "file", "prepare (median)", "each round (s)", "time / lines", "JSONL MB/s", "peak RSS"]
    body = (
        f"{versions()}. Corpora generated in {generated:.0f} s; the same "
        f"{runs['lines'][0][2]:,} tokens in every store.\n\n"
        f"## Word-level prepare of a {sizes['jsonl'] / 2**20:,.0f} MB JSON Lines corpus and the same text in the "
        f"other formats ({args.rounds} rounds, back to back, `nice -n 19`)\n\n"
        + markdown_table(header, rows)
        + "\n\n`JSONL MB/s` is the JSON Lines corpus's size over each prepare's time: the same text, so "
        "comparable across rows. Targets: JSON Lines ≤ 1.5x the time of lines, ≤ 2 GiB peak RSS.\n"
    )
    publish("corpus_formats", args.quick, "Corpus formats: prepare's time and memory per format", body)


if __name__ == "__main__":
    main()
