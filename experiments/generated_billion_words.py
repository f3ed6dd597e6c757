"""A One-Billion-Word-shaped LM run: 1 GB of generated words, the full ≈ 800k vocabulary.

The corpus is read under the data root, `$SEQJAX_DATA` (or `--set data.root=DIR`), from
`lm/generated_words/{train,valid,test}.txt`; `python experiments/generated_billion_words.py DIR`
writes it there from fixed seeds with the generator of `benchmarks/data.py` (Zipf–Mandelbrot
words over 800k types in lines of 5–40 words): 1 GB of train text, and the first
VALID_LINES lines of two other seeds' text as valid and test, small enough that exact
evaluation over the whole vocabulary takes minutes on a CPU core. Its quality means nothing;
the run checks that the whole path holds at this size: `seqjax prepare` into a token store,
training with a sampled softmax over every word type, and exact perplexity in vocabulary
blocks.

Word level with no vocabulary bound (every train type), a 1-layer LSTM of 128 units whose
embedding the head shares (head.tied: one [V, 128] table), the importance-sampled softmax
with K = 8,192 log-uniform samples per step (Jean et al. 2015; Jozefowicz et al. 2016),
batches of 32 × 64 words, 300 AdamW steps:

    SEQJAX_DATA=DIR seqjax prepare --config experiments/generated_billion_words.py
    SEQJAX_DATA=DIR seqjax train --config experiments/generated_billion_words.py
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from corpora import split_paths  # noqa: E402

from seqjax.config import Config, DataConfig, HeadConfig, ModelConfig, OptimConfig, TrainConfig  # noqa: E402

VALID_LINES = 600  # 13,622 valid words


def get_config() -> Config:
    return Config(
        data=DataConfig(kind="text", **split_paths("lm/generated_words", ".txt"), tokenizer="word", seq_len=64),
        model=ModelConfig(kind="rnn", cell="lstm", d_model=128, layers=1, dropout=0.0),
        head=HeadConfig(kind="sampled", num_samples=8192, proposal="log_uniform", tied=True),
        optim=OptimConfig(learning_rate=3e-3, warmup_steps=30, schedule="cosine"),
        train=TrainConfig(
            steps=300, batch_size=32, eval_every=0, checkpoint_every=0, num_printed_samples=2, printed_sample_len=20
        ),
    )


def write_corpus(root: str) -> None:
    """The corpus of this config under `root`: train 1 GB (seed 0), valid and test VALID_LINES
    lines (seeds 10 and 11)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks"))
    from data import write_text

    directory = os.path.join(root, "lm", "generated_words")
    os.makedirs(directory, exist_ok=True)
    write_text(os.path.join(directory, "train.txt"), 1024, seed=0)
    for split, seed in (("valid", 10), ("test", 11)):
        path = os.path.join(directory, f"{split}.txt")
        write_text(path, 0.1, seed=seed)  # one chunk of a million words, cut to its first lines
        with open(path) as file:
            lines = [next(file) for _ in range(VALID_LINES)]
        with open(path, "w") as file:
            file.writelines(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(f"usage: python {sys.argv[0]} DATA_ROOT")
    write_corpus(sys.argv[1])
