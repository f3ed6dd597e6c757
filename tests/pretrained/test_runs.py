"""An imported checkpoint is an ordinary run from the command line: it decodes (greedy, sampling,
beam), evaluates and fine-tunes on a corpus whose lines its own tokenizer encodes as it encodes
any text (its post-processor's `<s>` first for Llama), each then ended by `</s>`, fine-tunes under
any objective from its parameters, and exports back."""

import re

import jax
import numpy as np
import pytest
from pretrained_helpers import FIXTURES, loaded, seqjax_logits
from tokenizers import Tokenizer as HfTokenizer

from seqjax.cli import main, parser
from seqjax.data import EOS_ID, load_tokenizer
from seqjax.pretrained.importing import MASKED_BIAS
from seqjax.pretrained.runs import read_run

LINES = ["the cat sat on the mat.", "jax compiles the whole decoding loop."]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("".join(line + "\n" for line in LINES * 4))
    return path


def test_help_lists_the_import_and_export_commands():
    assert {"import-hf", "export-hf"} <= set(parser()._subparsers._group_actions[0].choices)


def test_import_hf_states_the_special_tokens_and_the_run_generates_by_every_decoder(tmp_path, capsys):
    run = str(tmp_path / "run")
    assert main(["import-hf", str(FIXTURES / "gpt2"), "--workdir", run]) == 0
    out = capsys.readouterr().out
    assert "EOS <- '<|endoftext|>'" in out and "PAD: none" in out
    for flags in ([], ["--beam", "3"], ["--sample", "--top-k", "5"]):
        assert main(["generate", "--workdir", run, "--prompt", "the cat", "--max-len", "6", *flags]) == 0
        samples = [line for line in capsys.readouterr().out.splitlines() if "sample:" in line]
        assert samples and all(s.split("sample: ")[1].startswith("the cat") for s in samples), flags


def stream_of(name, run, lines):
    """The LM stream of `lines` for fixture `name`'s run: each line as its tokenizer.json encodes
    a text (special tokens added), in seqjax's ids, then `</s>`."""
    hf = HfTokenizer.from_file(str(FIXTURES / name / "tokenizer.json"))
    seqjax_of = load_tokenizer(run / "tokenizer").layout.seqjax_of
    return [i for line in lines for i in (*seqjax_of[hf.encode(line).ids].tolist(), EOS_ID)]


@pytest.mark.parametrize("name", ["gpt2", "llama_gqa"])
def test_eval_of_a_corpus_is_the_pretrained_models_exact_negative_log_likelihood(name, imported, tmp_path, capsys):
    path = tmp_path / "two_lines.txt"
    path.write_text("".join(line + "\n" for line in LINES))
    run = imported(name)
    assert main(["eval", "--workdir", str(run), "--split", "test", "--set", f"data.test={path}"]) == 0
    nll = float(capsys.readouterr().out.split("nll ")[1].split(" nats")[0])
    tokenizer = load_tokenizer(run / "tokenizer")
    stream = np.array(stream_of(name, run, LINES))
    inputs, targets = tokenizer.layout.hf_of[np.append(EOS_ID, stream[:-1])], tokenizer.layout.hf_of[stream]
    logits = seqjax_logits(run, inputs[None])[0]  # [T, R]: the checkpoint's own rows
    log_probs = (
        logits
        - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True))
        - logits.max(-1, keepdims=True)
    )
    assert nll == pytest.approx(-log_probs[np.arange(len(targets)), targets].mean(), abs=1e-3)


def fine_tune(source, workdir, corpus, *overrides):
    return main(
        [
            "train",
            "--config",
            str(source / "config.json"),
            "--workdir",
            str(workdir),
            "--set",
            f"train.init_from={source}",
            f"data.train={corpus}",
            "data.seq_len=16",
            "train.batch_size=8",
            "train.steps=1",
            "train.log_every=1",
            "train.eval_every=0",
            "train.num_printed_samples=0",
            "optim.warmup_steps=0",
            *overrides,
        ]
    )


@pytest.mark.parametrize(
    "name, objective", [("gpt2", "objective.kind=mixer"), ("llama_gqa", "objective.kind=scheduled_sampling")]
)
def test_fine_tuning_starts_from_the_imported_parameters_under_any_objective(
    name, objective, imported, corpus, tmp_path
):
    """One update at a learning rate of 1e-12 moves no parameter by more than 1e-12: the step-1
    checkpoint holds the parameters the run started from."""
    source = imported(name)
    assert fine_tune(source, tmp_path / "ft", corpus, objective, "optim.learning_rate=1e-12", "model.dropout=0.1") == 0
    started, want = loaded(tmp_path / "ft")[2], loaded(source)[2]
    for (path, got), expected in zip(jax.tree_util.tree_leaves_with_path(started), jax.tree.leaves(want)):
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9, err_msg=jax.tree_util.keystr(path))


def test_a_fine_tuned_run_exports_and_reimports_to_its_own_parameters(imported, corpus, tmp_path):
    """Every parameter comes back bit for bit; the biases of the ids without a pretrained row
    (decayed by AdamW from MASKED_BIAS, but far below any score) come back as MASKED_BIAS."""
    assert fine_tune(imported("llama_gqa"), tmp_path / "ft", corpus, "train.steps=2") == 0
    assert main(["export-hf", "--workdir", str(tmp_path / "ft"), "--output", str(tmp_path / "hf")]) == 0
    assert main(["import-hf", str(tmp_path / "hf"), "--workdir", str(tmp_path / "again")]) == 0
    tuned, again = read_run(str(tmp_path / "ft"))[2], read_run(str(tmp_path / "again"))[2]
    start = loaded(imported("llama_gqa"))[2]
    assert not np.array_equal(tuned["model"]["final_norm"]["scale"], start["model"]["final_norm"]["scale"])
    predicted = load_tokenizer(tmp_path / "ft" / "tokenizer").layout.predicted
    for tree in (tuned, again):
        assert np.all(tree["head"]["biases"][~predicted] < 0.99 * MASKED_BIAS)
        tree["head"]["biases"] = tree["head"]["biases"][predicted]
    for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(tuned), jax.tree.leaves(again)):
        assert a.tobytes() == b.tobytes(), jax.tree_util.keystr(path)


def test_a_sampled_softmax_head_starts_from_the_imported_output_layer_and_a_class_head_is_refused(
    imported, corpus, tmp_path, capsys
):
    source = imported("gpt2")
    sampled = ["head.kind=sampled", "head.num_samples=16", "head.proposal=uniform", "optim.learning_rate=1e-12"]
    assert fine_tune(source, tmp_path / "sampled", corpus, *sampled) == 0
    got, want = loaded(tmp_path / "sampled")[2]["head"], loaded(source)[2]["head"]
    np.testing.assert_allclose(got["biases"], want["biases"], rtol=0, atol=1e-9)
    assert fine_tune(source, tmp_path / "class", corpus, "head.kind=class") == 2
    assert "head.kind=class (tied=True) cannot start from the source's head.kind=full" in capsys.readouterr().err


def test_prepare_encodes_a_corpus_with_the_runs_own_tokenizer(imported, corpus, tmp_path, capsys):
    run = imported("llama_gqa")
    settings = ["data.kind=text", "data.tokenizer=pretrained", f"data.tokenizer_from={run}", f"data.train={corpus}"]
    assert main(["prepare", "--set", *settings, f"data.store={tmp_path / 'store'}"]) == 0
    stream = np.load(tmp_path / "store" / "train.tokens.npy")
    assert stream.tolist() == stream_of("llama_gqa", run, LINES * 4)  # `<s>` first on every line


@pytest.mark.parametrize(
    "settings, message",
    [
        (["data.tokenizer=pretrained"], "data.tokenizer=pretrained and data.tokenizer_from .* go together"),
        (["data.tokenizer_from=somewhere"], "go together, got data.tokenizer='char'"),
        (["data.tokenizer=pretrained", "data.tokenizer_from=/nowhere"], "must be a run directory holding tokenizer/"),
    ],
)
def test_a_pretrained_tokenizer_setting_that_cannot_hold_is_refused(settings, message, corpus, capsys):
    assert main(["prepare", "--set", "data.kind=text", f"data.train={corpus}", *settings]) == 2
    err = capsys.readouterr().err
    assert re.search(message, err), err
