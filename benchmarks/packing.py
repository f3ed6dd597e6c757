"""The padding that `data.packing` removes: real tokens per token slot of one training epoch.

    SEQJAX_DATA=/path/to/corpora python benchmarks/packing.py [--config experiments/gettext_transformer.py]

Reads the config's parallel corpus through its data settings (the data root is
`$SEQJAX_DATA` or `--set data.root=DIR`), then walks one epoch of the train split's batches
twice: bucketed by length (`data.buckets`, the default) and packed (`data.packing=true`: whole
pairs, several to a row of the longest bucket's length, each a segment). For each side it
counts the real tokens (inside a segment when packed, mask 1 otherwise) and the slots the
batches hold; a slot that is not a real token is padding the model computes for nothing.
Writes benchmarks/results/packing.md.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import markdown_table, write_result  # noqa: E402

from seqjax.config import override  # noqa: E402
from seqjax.config.files import load_config  # noqa: E402
from seqjax.data import Seq2SeqBatches, load_data  # noqa: E402
from seqjax.data.batching.packing import PackedSeq2SeqBatches  # noqa: E402


def epoch_counts(batches: Seq2SeqBatches | PackedSeq2SeqBatches) -> dict[str, float]:
    """Real tokens and slots of each side over one epoch of `batches`."""
    counts = dict(batches=0, src_real=0.0, src_slots=0, tgt_real=0.0, tgt_slots=0)
    for index in range(batches.batches_per_epoch):
        batch = batches.batch(index)
        counts["batches"] += 1
        # Packed rows attend every source slot by position (src_mask 1): their real tokens are
        # the slots inside a segment.
        real_source = batch["src_segment_ids"] > 0 if "src_segment_ids" in batch else batch["src_mask"]
        counts["src_real"] += float(real_source.sum())
        counts["src_slots"] += batch["src_mask"].size
        counts["tgt_real"] += float(batch["mask"].sum())
        counts["tgt_slots"] += batch["mask"].size
    return counts


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--config", default=os.path.join(os.path.dirname(__file__), "..", "experiments", "gettext_transformer.py")
    )
    parser.add_argument("--set", action="append", default=[], help="config overrides, key=value")
    args = parser.parse_args(argv)
    cfg = override(load_config(args.config)[0], args.set)
    src, tgt = load_data(cfg.data).splits["train"]
    ways: dict[str, Seq2SeqBatches | PackedSeq2SeqBatches] = {
        f"bucketed by length {tuple(cfg.data.buckets)}": Seq2SeqBatches(
            src, tgt, cfg.train.batch_size, cfg.data.buckets, cfg.train.seed
        ),
        f"packed into rows of {cfg.data.buckets[-1]}": PackedSeq2SeqBatches(
            src, tgt, cfg.train.batch_size, cfg.data.buckets[-1], cfg.train.seed
        ),
    }
    rows, slots = [], {}
    for name, batches in ways.items():
        c = epoch_counts(batches)
        slots[name] = c["src_slots"] + c["tgt_slots"]
        rows.append(
            [
                name,
                f"{c['batches']:,}",
                f"{c['src_real']:,.0f} / {c['src_slots']:,}",
                f"{c['src_real'] / c['src_slots']:.1%}",
                f"{c['tgt_real']:,.0f} / {c['tgt_slots']:,}",
                f"{c['tgt_real'] / c['tgt_slots']:.1%}",
            ]
        )
        print(rows[-1], flush=True)
    bucketed, packed = slots.values()
    header = [
        "batches",
        "steps per epoch",
        "source real / slots",
        "source real share",
        "target real / slots",
        "target real share",
    ]
    body = (
        f"Config `{os.path.relpath(args.config)}` ({len(src):,} train pairs, batch {cfg.train.batch_size}); one epoch "
        f"of the train split, each way.\n\n" + markdown_table(header, rows) + "\n\n"
        f"Packing computes {bucketed / packed:.2f}x fewer token slots for the same pairs.\n"
    )
    print(body)
    print("wrote", write_result("packing", "Padding removed by data.packing", body))


if __name__ == "__main__":
    main()
