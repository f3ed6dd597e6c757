"""`RunDir`: a run directory and the files in it, named in this one place.

A run directory holds `config.json` (every key of the run's config), the vocabulary its model
was trained on (`tokenizer/`, and `tokenizer_src/` for a source side of its own), `checkpoints/`
(Orbax), `data.json` (what the data was), `metrics.jsonl`, `tensorboard/`, `summary.json` and
`memory.json` (the train step's compiled memory), and for a counted model its counts in place of
checkpoints. Every command that reads or writes a run goes through
a `RunDir`: `seqjax train` (a fresh or resumed run, and the runs `train.init_from` and
`train.init_encoder_from` start from), `eval`, `generate`, `import-hf` and `export-hf`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import ClassVar

from seqjax import config as config_lib
from seqjax.config import Config
from seqjax.config.files import read_run_config
from seqjax.data import load_tokenizer
from seqjax.data.datasets import Tokenizers
from seqjax.data.tokenizers.trained import Tokenizer, tokenizer_fingerprint
from seqjax.training.core.state import Checkpointer, dump_json


@dataclasses.dataclass(frozen=True)
class RunDir:
    """The run directory at `path`; `given` names it in errors as the user gave it (default
    `--workdir PATH`)."""

    path: str
    given: str = ""

    CONFIG: ClassVar[str] = "config.json"
    TOKENIZERS: ClassVar[tuple[str, str]] = ("tokenizer", "tokenizer_src")  # target (or LM) side, source side
    CHECKPOINTS: ClassVar[str] = "checkpoints"
    DATA: ClassVar[str] = "data.json"
    METRICS: ClassVar[str] = "metrics.jsonl"
    SUMMARY: ClassVar[str] = "summary.json"
    TENSORBOARD: ClassVar[str] = "tensorboard"
    MEMORY: ClassVar[str] = "memory.json"

    def file(self, name: str) -> str:
        """The path of `name` in the run directory."""
        return os.path.join(self.path, name)

    @property
    def name(self) -> str:
        return self.given or f"--workdir {self.path}"

    @property
    def has_config(self) -> bool:
        return os.path.isfile(self.file(self.CONFIG))

    @functools.cached_property
    def config(self) -> Config:
        """The config the run saved, read once.

        Raises:
          ValueError: the directory holds no run, or a Hugging Face checkpoint (its config.json
            has `model_type`), which is to be imported as a run first.
        """
        if not self.has_config:
            raise ValueError(f"{self.name} holds no run (no {self.CONFIG})")
        return read_run_config(self.file(self.CONFIG), self.name)

    def write_config(self, cfg: Config) -> None:
        dump_json(self.file(self.CONFIG), config_lib.to_dict(cfg))

    @property
    def tokenizer_dir(self) -> str:
        """Where the target (or language-model) side's vocabulary is."""
        return self.file(self.TOKENIZERS[0])

    def tokenizers(self) -> Tokenizers:
        """The tokenizers the run saved, as `load_data` takes them ((source, target) for a source
        side of its own), or None when it saved none."""
        target, source = (self.file(name) for name in self.TOKENIZERS)
        if not os.path.isdir(target):
            return None
        return (load_tokenizer(source), load_tokenizer(target)) if os.path.isdir(source) else load_tokenizer(target)

    def save_tokenizers(self, target: Tokenizer, source: Tokenizer | None = None) -> None:
        target.save(self.tokenizer_dir)
        if source is not None:
            source.save(self.file(self.TOKENIZERS[1]))

    def tokenizer_fingerprint(self) -> str:
        """The fingerprint of the saved target vocabulary, which a checkpoint records."""
        return tokenizer_fingerprint(self.tokenizer_dir)

    def checkpointer(self, keep: int) -> Checkpointer:
        """The run's checkpoints, keeping the newest `keep`."""
        return Checkpointer(self.file(self.CHECKPOINTS), keep)
