"""A saved run: what a run directory holds, read back.

`Run.open(workdir, overrides)` reads the run's `config.json` (with `--set` style overrides on
top); from it come the run's tokenizers, its data under those tokenizers (the corpus's token
store), its latest parameters (`restore`), a decoder of a language model (`lm_decoder`) and its
evaluation (`evaluation`; `evaluate`: the numbers `seqjax eval` prints). A trained run is
restored from its latest checkpoint; a counted run (the n-gram baseline) from its counts. The
command line, the experiments and anything else that loads a run go through here.

The modules that build and restore a run import JAX and the data pipeline; they are imported
where they are used, so that reading a run's config stays as quick as the command line's start.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from seqjax import config as config_lib

if TYPE_CHECKING:
    from jax.sharding import Mesh

    from seqjax.config import DataConfig
    from seqjax.data import LMData, ParallelData
    from seqjax.training.core.experiment import Experiment
    from seqjax.training.core.state import Checkpointer, TrainState
    from seqjax.training.features.continuation import LMDecoder
    from seqjax.training.features.generation import DecodeOptions


@dataclasses.dataclass(frozen=True)
class Restored:
    """A trained run's experiment (config, data, model, head, objective), its latest parameters
    (in `state`) and the mesh they sit on."""

    exp: Experiment
    state: TrainState
    mesh: Mesh


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """What evaluating one split of a run needs: the run's data, `scorer(batch) -> sums` of its
    batches (`seqjax.training.features.evaluation.evaluate`), and `extra(split) -> dict`, the measures
    beyond perplexity (a seq2seq run's BLEU and ROUGE, a synthetic task's own measure)."""

    data: LMData | ParallelData
    scorer: Callable[..., Any]
    extra: Callable[[str], dict[str, Any]]


@dataclasses.dataclass(frozen=True)
class Run:
    """The run in `workdir`, with `cfg` its saved config under the overrides it was opened with."""

    workdir: str
    cfg: config_lib.Config

    @classmethod
    def open(cls, workdir: str, overrides: Sequence[str] = ()) -> Run:
        """Raises ValueError when `workdir` holds no run or an override is refused."""
        from seqjax.training.core.run_dir import RunDir

        return cls(workdir, config_lib.override(RunDir(workdir).config, list(overrides)))

    @property
    def counted(self) -> bool:
        """Whether the run is counted (the n-gram), holding counts, not parameters."""
        from seqjax.models import is_trained

        return not is_trained(self.cfg.model)

    def tokenizers(self) -> Any:
        """The saved tokenizers, as `seqjax.data.load_data` takes them (a pair for seq2seq), or None."""
        from seqjax.training.core.run_dir import RunDir

        return RunDir(self.workdir).tokenizers()

    def data(self, splits: Sequence[str] | None = None) -> LMData | ParallelData:
        """The run's data under its own tokenizers, read from the corpus's token store; only
        `splits` (None: every one)."""
        from seqjax.data import load_data

        return load_data(self.cfg.data, self.tokenizers(), splits=splits)

    def restore(self, splits: Sequence[str] | None = None) -> Restored:
        """The experiment and the latest parameters of a trained run, with the mesh they sit on.
        The head is the plain one whatever the run's layout: decoding and evaluation need every
        word's probability. `splits`: the data splits read, none to decode; None: every one.

        Raises ValueError when the run has no checkpoint yet."""
        from seqjax import optimizers as optim
        from seqjax.training.core.experiment import build_experiment
        from seqjax.training.core.layout import make_mesh
        from seqjax.training.core.resume import open_run
        from seqjax.training.core.run_dir import RunDir
        from seqjax.training.core.state import restore_state

        cfg, run = self.cfg, RunDir(self.workdir)
        checkpointer = run.checkpointer(cfg.train.keep_checkpoints)
        try:
            # Evaluating or decoding does not follow the schedule: a changed one does not matter here.
            step, tokenizers, _ = open_run(cfg, self.workdir, checkpointer, extend_schedule=True, evaluating=True)
            if step is None:
                raise ValueError(f"--workdir {self.workdir} has no checkpoint yet")
            # The run's own store is found by its fingerprint where the corpus's paths now resolve elsewhere.
            fingerprint = self._own_store(run.config.data, cfg.data, checkpointer, step)
            exp = build_experiment(cfg, tokenizers=tokenizers, splits=splits, fingerprint=fingerprint)
            mesh = make_mesh(cfg.train.mesh)
            optimizer = optim.make_optimizer(cfg.optim, cfg.train.steps)
            state, _ = restore_state(exp, checkpointer, step, optimizer, mesh, exp.example_batch())
        finally:
            checkpointer.close()
        return Restored(exp, state, mesh)

    @staticmethod
    def _own_store(saved: DataConfig, cfg: DataConfig, checkpointer: Checkpointer, step: int) -> str | None:
        """The fingerprint of the token store the run trained on (its checkpoint at `step` records
        it) when `cfg` reads the run's own corpus (data.root, train, valid, test as `saved`; not
        another given with --set), else None."""
        if any(getattr(saved, key) != getattr(cfg, key) for key in ("root", "train", "valid", "test")):
            return None
        store: str | None = checkpointer.restore_meta(step).get("store")
        return store

    def lm_decoder(self, options: DecodeOptions) -> LMDecoder:
        """The decoder of the language model's prompts, trained or counted."""
        from seqjax.training.features.continuation import LMDecoder, model_decoder
        from seqjax.training.features.counted import counted_decoder, saved_counts

        if self.counted:
            decode = counted_decoder(saved_counts(self.cfg, self.workdir), options)
            return LMDecoder(self.tokenizers(), decode, self.cfg.train.batch_size, None)
        restored = self.restore([])
        return model_decoder(restored.exp, restored.state.params, options)

    def evaluation(self, split: str, options: DecodeOptions) -> Evaluation:
        """The data, scorer and extra measures of `split`; `options` decode a seq2seq split."""
        if self.counted:
            from seqjax.training.features.counted import counted_scorer, saved_counts

            return Evaluation(
                self.data([split]), counted_scorer(saved_counts(self.cfg, self.workdir)), lambda split: {}
            )
        from seqjax.training.core.steps import batch_scorer, make_eval_step
        from seqjax.training.features.generation import translate
        from seqjax.training.features.task_reports import task_report

        restored = self.restore([split])
        exp, params = restored.exp, restored.state.params

        def extra(split: str) -> dict[str, Any]:
            result: dict[str, Any] = (
                {"generation": translate(exp, params, split, options=options)} if exp.is_seq2seq else {}
            )
            report = task_report(exp.cfg)
            if report is not None:
                result[exp.cfg.data.task] = report(exp, params).numbers
            return result

        scorer = batch_scorer(make_eval_step(exp.model, exp.head, restored.mesh), params, restored.mesh)
        return Evaluation(exp.data, scorer, extra)

    def evaluate(self, split: str, options: DecodeOptions, *, echo: Callable[[str], None] = print) -> dict[str, Any]:
        """{split: exact perplexity and the rest of `evaluate`'s numbers, then the further measures
        (`Evaluation.extra`)}, as `seqjax eval` prints them; the numbers are echoed on one line
        (`describe_metrics`) before the further measures are decoded.

        Raises ValueError when `split` is not one of the run's splits."""
        from seqjax.data.corpora.sources import splits_of
        from seqjax.training.features.evaluation import describe_metrics, evaluate

        splits = splits_of(self.cfg.data)
        if split not in splits:
            raise ValueError(f"--split must be one of {', '.join(splits)}, got {split!r}")
        evaluation = self.evaluation(split, options)
        result = {split: evaluate(self.cfg, evaluation.data, split, evaluation.scorer)}
        echo(f"{split}: {describe_metrics(self.cfg, result[split])}")
        return {**result, **evaluation.extra(split)}
