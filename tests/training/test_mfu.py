"""MFU: the PaLM FLOP count from the config, the peak lookup, and the logged interval figures."""

import dataclasses
import json
import math
import os

import jax
import numpy as np
import pytest
from tiny_runs import tiny_config

from seqjax.accelerators.targets import CHIPS
from seqjax.config import HEADS as KINDS
from seqjax.config import Config, HeadConfig, ModelConfig, TrainConfig
from seqjax.heads import AdaptiveOptions, build_head
from seqjax.training.core import mfu
from seqjax.training.core.experiment import validate_train
from seqjax.training.loop import train

D, F, L, H, T, V = 64, 256, 2, 4, 32, 500


def config(**changes):
    return Config(model=ModelConfig(d_model=D, d_ff=F, layers=L, num_heads=H, **changes))


def test_transformer_count_is_palms_six_n_plus_twelve_l_h_q_t():
    per_layer = 4 * D * D + 2 * D * F  # q, k, v, out; two MLP matrices
    expected = 6 * (L * per_layer + D * V) + 12 * L * H * (D // H) * T
    assert mfu.train_flops_per_token(config(), D * V, T) == expected


def test_grouped_query_swiglu_count_has_the_smaller_kv_and_the_third_mlp_matrix():
    per_layer = 2 * D * D + 2 * D * 2 * (D // H) + 3 * D * F  # q and out; K=2 kv heads; gate, up, down
    expected = 6 * (L * per_layer + D * V) + 12 * L * D * T
    assert mfu.train_flops_per_token(config(kv_heads=2, mlp="swiglu"), D * V, T) == expected


def test_encoder_decoder_and_rnn_counts_and_kinds_not_counted():
    attention, mlp = 4 * D * D, 2 * D * F
    seq2seq = 6 * (L * (attention + mlp) + L * (2 * attention + mlp) + D * V) + 3 * 12 * L * D * T
    assert mfu.train_flops_per_token(config(kind="transformer_seq2seq"), D * V, T) == seq2seq
    assert mfu.train_flops_per_token(config(kind="rnn", cell="gru"), D * V, T) == 6 * (L * 3 * 2 * D * D + D * V)
    assert mfu.train_flops_per_token(config(kind="nnlm"), D * V, T) is None


def test_each_head_counts_the_output_rows_its_training_loss_reads():
    counts = np.arange(V, 0, -1)  # frequency-sorted, as vocabularies are
    share = (counts + 1.0) / (counts + 1.0).sum()
    heads = {
        kind: build_head(HeadConfig(kind=kind, num_samples=64, groups=(AdaptiveOptions(cutoffs=(50, 200)),)), V, counts)
        for kind in KINDS
    }
    assert heads["full"].matmul_weights(D, counts) == D * V
    for kind in ("sampled", "nce", "negative"):
        assert heads[kind].matmul_weights(D, counts) == D * 65
    tree = heads["tree"].tree
    assert heads["tree"].matmul_weights(D, counts) == pytest.approx(D * np.dot(share, tree.mask.sum(1)))
    classes = heads["class"].classes
    expected_class = D * (len(classes.sizes) + np.dot(share, classes.sizes[classes.class_of]))
    assert heads["class"].matmul_weights(D, counts) == pytest.approx(expected_class)
    # Adaptive: the head's 50 + 2 rows; targets in [50, 200) also a D -> 16 projection and its
    # 150 words, targets in [200, V) a D -> 4 projection and its 300.
    adaptive = D * 52 + share[50:200].sum() * 16 * (D + 150) + share[200:].sum() * 4 * (D + 300)
    assert heads["adaptive"].matmul_weights(D, counts) == pytest.approx(adaptive)
    assert all(heads[kind].matmul_weights(D, counts) < D * V for kind in KINDS if kind != "full")


@pytest.mark.parametrize(
    "kind, peak",
    [("NVIDIA H100 80GB HBM3", 989.0), ("NVIDIA A100-SXM4-40GB", 312.0), ("TPU v4", 275.0), ("TPU v5 lite", 197.0)],
)
def test_known_devices_have_their_bf16_peak(kind, peak):
    assert mfu.known_peak_tflops(kind) == peak
    assert mfu.peak_tflops(0.0, kind) == peak
    assert mfu.peak_tflops(123.0, kind) == 123.0


# device_kind as the devices of each `seqjax compile` target report it (jax.experimental.topologies).
TARGET_DEVICE_KINDS = {
    "h100": "NVIDIA H100 80GB HBM3",
    "h200": "NVIDIA H200 141GB HBM3e",
    "a100": "NVIDIA A100-SXM4-80GB",
    "v4": "TPU v4",
    "v5e": "TPU v5 lite",
    "v5p": "TPU v5",
}


@pytest.mark.parametrize("target, device_kind", list(TARGET_DEVICE_KINDS.items()))
def test_a_run_on_each_compile_targets_devices_is_measured_against_the_targets_peak(target, device_kind):
    """What `seqjax compile` predicts MFU against is what a run there logs it against."""
    assert set(TARGET_DEVICE_KINDS) == set(CHIPS)
    assert mfu.known_peak_tflops(device_kind) == CHIPS[target].peak_tflops


def test_global_throughput_is_shared_by_the_devices_of_every_process(monkeypatch):
    """tokens_per_sec counts every process's tokens: each of the 16 devices of two hosts of 8 has
    a sixteenth of it."""
    monkeypatch.setattr(jax, "device_count", lambda: 16)
    monkeypatch.setattr(jax, "local_device_count", lambda: 8)
    cfg = dataclasses.replace(config(), train=TrainConfig(peak_tflops=2.0))
    metrics = mfu.interval_metrics(cfg, tokens_per_sec=1600.0, flops_per_token=1e9)
    assert metrics["tokens_per_sec_per_device"] == 100.0
    assert metrics["mfu"] == pytest.approx(100.0 * 1e9 / 1e12 / 2.0)


def test_an_unknown_device_measures_a_float32_matmul_once():
    assert mfu.known_peak_tflops("cpu") is None
    measured = mfu.peak_tflops(0.0, "cpu")
    assert 0 < measured < 1000 and mfu.peak_tflops(0.0, "cpu") == measured  # cached: the same figure


def test_interval_metrics_divide_by_the_devices_and_the_peak():
    cfg = dataclasses.replace(config(), train=TrainConfig(peak_tflops=2.0))
    flops = mfu.train_flops_per_token(cfg, D * V, T)
    metrics = mfu.interval_metrics(cfg, tokens_per_sec=8000.0, flops_per_token=flops)
    per_device = 8000.0 / jax.device_count()
    assert metrics["tokens_per_sec_per_device"] == per_device
    assert math.isclose(metrics["model_tflops_per_device"], per_device * flops / 1e12)
    assert math.isclose(metrics["mfu"], metrics["model_tflops_per_device"] / 2.0)
    counted_not = mfu.interval_metrics(config(kind="nnlm"), 8000.0, None)
    assert set(counted_not) == {"tokens_per_sec_per_device"}


def trained_records(cfg, workdir):
    """The `train` records of metrics.jsonl after training `cfg` in `workdir`."""
    train(cfg, str(workdir), echo=lambda _: None)
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if '"train"' in line]


def test_every_logged_training_interval_reports_throughput_per_device_and_mfu(tmp_path):
    cfg = tiny_config("train.steps=2", "train.log_every=1", "train.peak_tflops=1.0")
    records = trained_records(cfg, tmp_path)
    assert len(records) == 2
    for record in records:
        assert record["tokens_per_sec_per_device"] > 0 and record["model_tflops_per_device"] > 0
        assert math.isclose(record["mfu"], record["model_tflops_per_device"] / 1.0)


def test_a_negative_peak_is_refused():
    with pytest.raises(ValueError, match="train.peak_tflops must be >= 0"):
        validate_train(tiny_config("train.peak_tflops=-1"))


@pytest.mark.slow
def test_a_token_budget_run_counts_the_flops_of_each_steps_own_row_length(tmp_path):
    buckets = (16, 24)  # both hold many of the reverse task's pairs: the first steps draw both
    cfg = tiny_config(
        "data.task=reverse",
        "model.kind=transformer_seq2seq",
        f"data.buckets={','.join(map(str, buckets))}",
        "data.max_pair_len=20",
        "data.max_tokens=384",
        "train.steps=4",
        "train.log_every=1",
        "train.checkpoint_every=0",
        "train.eval_batches=1",
        "train.peak_tflops=1.0",
    )
    records = trained_records(cfg, tmp_path)
    # FLOPs per token: 6 N + 3 * 12 * layers * d_model * L for the step's row length L.
    per_token = [r["model_tflops_per_device"] * 1e12 / r["tokens_per_sec_per_device"] for r in records]
    attention_per_position = 3 * 12 * cfg.model.layers * cfg.model.d_model
    lengths = {round((p - min(per_token)) / attention_per_position) for p in per_token}
    assert lengths == {0, buckets[1] - buckets[0]}


def test_a_sampled_head_run_logs_the_flops_of_its_k_plus_one_rows_not_the_vocabulary(tmp_path):
    cfg = tiny_config(
        "model.kind=rnn",
        "head.kind=sampled",
        "head.num_samples=8",
        "train.steps=1",
        "train.log_every=1",
        "train.peak_tflops=1.0",
    )
    (record,) = trained_records(cfg, tmp_path)
    per_token = record["model_tflops_per_device"] * 1e12 / record["tokens_per_sec_per_device"]
    m = cfg.model
    assert per_token == pytest.approx(6 * (m.layers * 4 * 2 * m.d_model**2 + m.d_model * 9), rel=1e-6)
