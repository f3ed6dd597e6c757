"""One-line messages where a pretrained run meets what it cannot use: a corpus its tokenizer
mostly cannot spell (warned, with the share and the file), a Hugging Face checkpoint given where
a run is expected (to be imported first), and a run to start from whose model differs (the
differing keys alone)."""

import shutil

import pytest
from pretrained_helpers import FIXTURES
from tokenizers import Tokenizer as HfTokenizer
from tokenizers import models, pre_tokenizers

from seqjax.cli import main
from seqjax.pretrained import import_checkpoint


def error_line(capsys, argv) -> str:
    """The one error line of `argv` refused (after any progress bar of the data prepared first)."""
    assert main(argv) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(errors) == 1, errors
    return errors[0]


@pytest.fixture(scope="module")
def word_level_run(tmp_path_factory):
    """(run, words it knows): llama_gqa imported with a word-level tokenizer over the same
    vocabulary, which writes `<unk>` for any word outside it (its post-processor still puts `<s>`
    first)."""
    root = tmp_path_factory.mktemp("word_level")
    checkpoint = root / "checkpoint"
    shutil.copytree(FIXTURES / "llama_gqa", checkpoint)
    pieces = HfTokenizer.from_file(str(checkpoint / "tokenizer.json"))
    words = HfTokenizer(models.WordLevel(pieces.get_vocab(), unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    words.post_processor = pieces.post_processor
    words.save(str(checkpoint / "tokenizer.json"))
    import_checkpoint(str(checkpoint), str(root / "run"), echo=lambda _: None)
    return root / "run", sorted(w for w in pieces.get_vocab() if w.isalpha())[:3]


@pytest.mark.parametrize("command", ["eval", pytest.param("train", marks=pytest.mark.slow)])
def test_a_corpus_the_tokenizer_writes_mostly_as_unknown_is_warned_about_with_its_share(
    command, word_level_run, tmp_path, capsys
):
    corpus = tmp_path / "foreign.txt"
    corpus.write_text("zzz qqq xxx\n" * 40)  # each line: <s>, three <unk>, </s>
    run = str(word_level_run[0])
    if command == "eval":
        argv = ["eval", "--workdir", run, "--split", "test", "--set", f"data.test={corpus}"]
    else:
        argv = ["train", "--config", f"{run}/config.json", "--workdir", str(tmp_path / "ft"), "--set"]
        argv += [f"train.init_from={run}", f"data.train={corpus}", "data.seq_len=8", "train.batch_size=8"]
        argv += ["train.steps=1", "train.eval_every=0", "train.num_printed_samples=0"]
    assert main(argv) == 0
    split = "test" if command == "eval" else "train"
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert warnings == [
        f"warning: 60.0% of the 200 tokens of data.{split} ({corpus}) are the pretrained tokenizer's unknown token: "
        "it cannot spell most of this text, so perplexity and samples on it say little"
    ]


def test_a_corpus_with_under_one_percent_unknown_tokens_is_not_warned_about(word_level_run, tmp_path, capsys):
    run, known = word_level_run
    corpus = tmp_path / "known.txt"
    corpus.write_text((" ".join(known) + "\n") * 40 + "zzz\n")  # one <unk> among 203 tokens
    run = str(run)
    assert main(["eval", "--workdir", run, "--split", "test", "--set", f"data.test={corpus}"]) == 0
    assert "warning:" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["eval", "--workdir", "{checkpoint}"],
        ["generate", "--workdir", "{checkpoint}", "--prompt", "the cat"],
        ["train", "--config", "{checkpoint}/config.json"],
        ["export-hf", "--workdir", "{checkpoint}", "--output", "{output}"],
    ],
)
def test_a_hugging_face_checkpoint_given_as_a_run_says_to_import_it_first(argv, tmp_path, capsys):
    checkpoint = FIXTURES / "gpt2"
    err = error_line(capsys, [a.format(checkpoint=checkpoint, output=tmp_path / "hf") for a in argv])
    assert "looks like a Hugging Face checkpoint (config.json with model_type='gpt2'), not a seqjax run" in err
    assert f"`seqjax import-hf {checkpoint} --workdir RUN`" in err


def fine_tune(imported, tmp_path, *overrides):
    source = imported("gpt2")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat.\n" * 8)
    settings = [f"train.init_from={source}", f"data.train={corpus}", "data.seq_len=8", "train.batch_size=8"]
    settings += ["train.steps=1", "train.eval_every=0", "train.num_printed_samples=0", *overrides]
    argv = ["train", "--config", f"{source}/config.json", "--workdir", str(tmp_path / "ft"), "--set", *settings]
    return argv, source


def test_starting_from_a_hugging_face_checkpoint_says_to_import_it_first(imported, tmp_path, capsys):
    argv, _ = fine_tune(imported, tmp_path, f"train.init_from={FIXTURES / 'gpt2'}")
    err = error_line(capsys, argv)
    assert f"train.init_from='{FIXTURES / 'gpt2'}' looks like a Hugging Face checkpoint" in err


def test_starting_from_a_run_of_another_model_names_only_the_keys_that_differ(imported, tmp_path, capsys):
    argv, source = fine_tune(imported, tmp_path, "model.layers=3", "model.norm_eps=1e-6")
    assert error_line(capsys, argv) == (
        f"seqjax: error: train.init_from='{source}' has another model: model.layers: the source's 2, this run's 3; "
        "model.norm_eps: the source's 1e-05, this run's 1e-06"
    )
