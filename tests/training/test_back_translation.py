"""Back-translation: the corpus layout (real pairs upsampled, synthetic pairs line-aligned with
the monolingual text, tags), each sampled line drawn with its own key (from --seed and its line
number, whatever batch it is decoded in), and the command from a backward run to a trained
forward run."""

import dataclasses
import json

import numpy as np
import pytest
from tiny_runs import tiny, tiny_config

from seqjax import config as config_lib
from seqjax.cli import main
from seqjax.training.core.state import dump_json
from seqjax.training.features.back_translation import combine_pairs
from seqjax.training.features.generation import DecodeOptions, translate_lines
from seqjax.training.saved.run import Run


def test_real_pairs_come_upsampled_before_the_tagged_synthetic_pairs():
    real = (["a", "b"], ["A", "B"])
    synthetic = (["x", "", "z"], ["X", "Y", "Z"])  # the backward model wrote nothing for "Y"
    sources, targets = combine_pairs(real, synthetic, upsample=3, tag="<bt>")
    assert sources == ["a", "b"] * 3 + ["<bt> x", "<bt> z"]
    assert targets == ["A", "B"] * 3 + ["X", "Z"]
    assert combine_pairs(real, synthetic, upsample=0) == (["x", "z"], ["X", "Z"])


def test_bad_layouts_are_refused():
    with pytest.raises(ValueError, match="upsample must be an int >= 0"):
        combine_pairs(([], []), ([], []), upsample=-1)
    with pytest.raises(ValueError, match="synthetic sources and targets must be line-aligned"):
        combine_pairs(([], []), (["x"], []), upsample=1)
    with pytest.raises(ValueError, match="single lines"):
        combine_pairs(([], []), (["x"], ["X"]), upsample=1, tag="a\nb")


WORDS = ["ab", "ba", "abc", "cab", "b", "ca"]


def write_split(directory, name, count, seed):
    rng = np.random.default_rng(seed)
    lines = [" ".join(rng.choice(WORDS, size=rng.integers(1, 4))) for _ in range(count)]
    (directory / f"{name}.en").write_text("".join(line + "\n" for line in lines))
    (directory / f"{name}.de").write_text("".join(line[::-1] + "\n" for line in lines))
    return lines


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    directory = tmp_path_factory.mktemp("corpus")
    for name, count, seed in (("train", 40, 0), ("valid", 8, 1), ("test", 8, 2)):
        write_split(directory, name, count, seed)
    return directory


def parallel(corpus, *overrides):
    return tiny(
        "data.kind=parallel",
        f"data.train={corpus / 'train'}",
        f"data.valid={corpus / 'valid'}",
        f"data.test={corpus / 'test'}",
        "model.kind=rnn_seq2seq",
        "model.bidirectional=false",
        *overrides,
    )


@pytest.fixture(scope="module")
def backward_run(corpus, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("de-en")
    assert main(["train", "--workdir", str(workdir), "--set", *parallel(corpus, "data.src=de", "data.tgt=en")]) == 0
    return workdir


def backtranslate(corpus, backward_run, tmp_path, *options) -> int:
    """`seqjax backtranslate` of tmp_path/mono.de with `backward_run`, beside the real pairs
    corpus/train, into tmp_path/bt.{en,de}; `options` follow."""
    return main(
        ["backtranslate", "--workdir", str(backward_run), "--monolingual", str(tmp_path / "mono.de")]
        + ["--output", str(tmp_path / "bt"), "--real", str(corpus / "train"), *options]
    )


@pytest.mark.slow
def test_the_synthetic_corpus_is_line_aligned_with_the_monolingual_text_tagged_and_upsampled(
    corpus, backward_run, tmp_path
):
    monolingual = ["ba ab", "", "bac", "ab ab"]
    (tmp_path / "mono.de").write_text("".join(line + "\n" for line in monolingual))
    assert backtranslate(corpus, backward_run, tmp_path, "--upsample", "2", "--tag", "<bt>", "--beam", "2") == 0
    sources = (tmp_path / "bt.en").read_text().splitlines()  # the forward direction: en -> de
    targets = (tmp_path / "bt.de").read_text().splitlines()
    real_en = (corpus / "train.en").read_text().splitlines()
    real_de = (corpus / "train.de").read_text().splitlines()
    assert sources[:80] == real_en * 2 and targets[:80] == real_de * 2
    assert targets[80:] == [line for line in monolingual if line]  # the blank line has no pair
    assert len(sources) == len(targets) == 83 and all(s.startswith("<bt> ") for s in sources[80:])


@pytest.mark.slow
def test_the_forward_run_trains_on_real_and_sampled_synthetic_pairs(corpus, backward_run, tmp_path):
    (tmp_path / "mono.de").write_text("ba ab\nbac\n")
    overrides = [a for a in parallel(corpus) if not a.startswith(("data.kind", "data.train"))]
    options = ["--sample", "--train-workdir", str(tmp_path / "en-de"), "--set", *overrides]
    assert backtranslate(corpus, backward_run, tmp_path, *options) == 0
    config = json.loads((tmp_path / "en-de" / "config.json").read_text())["data"]
    assert (config["src"], config["tgt"], config["train"]) == ("en", "de", str(tmp_path / "bt"))
    assert json.loads((tmp_path / "en-de" / "summary.json").read_text())["test"]["token_perplexity"] > 1


def test_sampling_gives_each_copy_of_a_line_its_own_draw_and_a_seed_the_same_draws(corpus, backward_run, tmp_path):
    """64 copies of one line, 8 to a batch: one key per batch gave at most 8 sources."""
    (tmp_path / "mono.de").write_text("ba ab bac\n" * 64)

    def synthetic(*flags):
        assert backtranslate(corpus, backward_run, tmp_path, "--upsample", "0", "--sample", *flags) == 0
        return (tmp_path / "bt.en").read_text().splitlines()

    drawn = synthetic("--seed", "4")
    assert len(set(drawn)) > 32
    assert synthetic("--seed", "4") == drawn
    assert synthetic("--seed", "5") != drawn


def test_a_sampled_lines_translation_does_not_depend_on_the_batch_it_is_in(backward_run):
    restored = Run.open(str(backward_run)).restore([])
    exp, params = restored.exp, restored.state.params
    lines = ["ba ab", "", "bac ab ca", "b", "cab"] * 3  # sources of several buckets, a blank line among them

    def translated(batch_size):
        cfg = dataclasses.replace(exp.cfg, train=dataclasses.replace(exp.cfg.train, batch_size=batch_size))
        return translate_lines(dataclasses.replace(exp, cfg=cfg), params, lines, DecodeOptions(sample=True), seed=1)

    assert translated(8) == translated(3)


def test_backtranslate_options_are_checked(tmp_path, capsys):
    base = ["backtranslate", "--workdir", str(tmp_path), "--monolingual", "m", "--output", "o"]
    assert main([*base, "--upsample", "-1"]) == 2
    assert "--upsample must be >= 0" in capsys.readouterr().err
    assert main([*base, "--set", "train.steps=2"]) == 2
    assert "need --train-workdir" in capsys.readouterr().err
    assert main([*base, "--train-workdir", str(tmp_path / "f"), "--set", "data.train=x"]) == 2
    assert "sets the forward run's data.kind, data.format, data.train" in capsys.readouterr().err


def seq2seq_config_only(workdir):
    """`workdir` holding a backward (en -> de) run's config and nothing else: what the checks of
    `backtranslate`'s files see before any model is restored. The forward files are .de / .en."""
    cfg = tiny_config("data.task=reverse", "model.kind=rnn_seq2seq")
    dump_json(str(workdir / "config.json"), config_lib.to_dict(cfg))
    return ["backtranslate", "--workdir", str(workdir)]


def test_an_output_that_is_the_real_corpus_is_refused_and_the_corpus_kept(tmp_path, capsys):
    (tmp_path / "mono.en").write_text("x y\n")
    for side in ("en", "de"):
        (tmp_path / f"real.{side}").write_text(f"real {side}\n")
    same = str(tmp_path / "sub" / ".." / "real")  # another spelling of the real prefix
    argv = [
        *seq2seq_config_only(tmp_path),
        "--monolingual",
        str(tmp_path / "mono.en"),
        "--real",
        str(tmp_path / "real"),
    ]
    assert main([*argv, "--output", same]) == 2
    assert "--output must name new files" in capsys.readouterr().err
    assert [(tmp_path / f"real.{side}").read_text() for side in ("en", "de")] == ["real en\n", "real de\n"]


@pytest.mark.parametrize("text", [b"", b" \n\n\t\n"])
def test_an_empty_or_blank_monolingual_file_is_refused_and_nothing_written(tmp_path, capsys, text):
    (tmp_path / "mono.en").write_bytes(text)
    argv = [*seq2seq_config_only(tmp_path), "--monolingual", str(tmp_path / "mono.en"), "--output", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--monolingual must" in err and str(tmp_path / "mono.en") in err and len(err.splitlines()) == 1
    assert not list(tmp_path.glob("o.*"))


def test_an_undecodable_monolingual_file_names_its_line(tmp_path, capsys):
    (tmp_path / "mono.en").write_bytes(b"fine\n\xff\n")
    argv = [*seq2seq_config_only(tmp_path), "--monolingual", str(tmp_path / "mono.en"), "--output", str(tmp_path / "o")]
    assert main(argv) == 2
    assert f"undecodable bytes in '{tmp_path / 'mono.en'}' at line 2" in capsys.readouterr().err


def test_a_relative_real_prefix_is_read_under_seqjax_data(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SEQJAX_DATA", str(tmp_path / "corpora"))
    (tmp_path / "mono.en").write_text("x y\n")
    argv = [*seq2seq_config_only(tmp_path), "--monolingual", str(tmp_path / "mono.en"), "--output", str(tmp_path / "o")]
    assert main([*argv, "--real", "real"]) == 2
    assert f"--real must be an existing file, got '{tmp_path / 'corpora' / 'real.de'}'" in capsys.readouterr().err
