"""Every experiment file's `get_config()` loads as `seqjax train --config FILE` loads it and
passes every check `build_experiment` makes before it reads data: a config that no longer
builds fails here. The corpora are not needed: each file the data config names exists, empty,
under a temporary data.root."""

import dataclasses

import jax
import numpy as np
import pytest
from project_scripts import ROOT

from seqjax import config as config_lib
from seqjax.config.files import load_config
from seqjax.data import holds_pairs
from seqjax.data.corpora.sources import SPLITS, split_files, validate_data_config
from seqjax.models import build_model, is_seq2seq, is_trained
from seqjax.objectives import build_objective
from seqjax.training.core.experiment import PRECISIONS, output_head, validate_train
from seqjax.training.core.layout import make_mesh, validate_layout

EXPERIMENTS = sorted(path for path in (ROOT / "experiments").glob("*.py") if "def get_config(" in path.read_text())


def test_the_experiments_with_a_config_are_found():
    assert {"default", "shakespeare_lstm", "shakespeare_transformer", "gettext_transformer"} <= {
        path.stem for path in EXPERIMENTS
    }


def smallest_mesh(spec):
    """The mesh `spec` asks for on the fewest devices it allows: an axis of size -1 (the
    machine's devices) gets one."""
    sizes = [int(part.split(":")[1]) for part in spec.split(",")]
    return make_mesh(spec, jax.devices()[: int(np.prod([size for size in sizes if size > 0]))])


def with_present_corpora(data, root):
    """`data` read under `root`, where every split file it names exists (empty)."""
    data = dataclasses.replace(data, root=str(root))
    for split in SPLITS:
        for side in split_files(data, split).values():
            (root / side.path).parent.mkdir(parents=True, exist_ok=True)
            (root / side.path).touch()
    return data


@pytest.mark.parametrize("path", EXPERIMENTS, ids=lambda path: path.stem)
def test_the_experiment_config_passes_every_check_made_before_reading_data(path, tmp_path):
    cfg, _ = load_config(str(path))
    assert config_lib.from_dict(config_lib.to_dict(cfg)) == cfg  # the run's config.json reads back
    cfg = dataclasses.replace(cfg, data=with_present_corpora(cfg.data, tmp_path))
    validate_train(cfg)
    validate_data_config(cfg.data)
    assert holds_pairs(cfg.data) == is_seq2seq(cfg.model)
    vocab = cfg.data.vocab_size or 32_768  # the data decides it; any size the model config must accept
    if not is_trained(cfg.model):
        build_model(cfg.model, vocab)
        return
    mesh = smallest_mesh(cfg.train.mesh)
    validate_layout(cfg, mesh, vocab)
    source = {"src_vocab_size": vocab} if is_seq2seq(cfg.model) else {}
    build_model(cfg.model, vocab, dtype=PRECISIONS[cfg.train.precision], **source)
    output_head(cfg, vocab, np.arange(vocab, 0, -1), mesh)
    build_objective(cfg.objective)
