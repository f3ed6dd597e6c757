"""`seqjax generate` and `eval` of saved runs: greedy unless asked to sample, prompts and
continuations detokenized together, a file of lines in and out (a few compiled widths, each
line as it decodes alone, each sampled line with its own key), prompts and --max-len that do not
fit refused by name, seq2seq without a source refused, and n-gram runs decoded and evaluated
from their saved counts."""

import dataclasses
import io
import json

import numpy as np
import pytest
from tiny_runs import tiny, tiny_config

from seqjax import config as config_lib
from seqjax.cli import main
from seqjax.data import WordTokenizer, build_tokenizer, load_data
from seqjax.models import ngram
from seqjax.training.core.state import dump_json
from seqjax.training.features.continuation import continuations, continue_lines
from seqjax.training.features.counted import counted_decoder
from seqjax.training.features.generation import DecodeOptions, decode_prompts, row_keys
from seqjax.training.saved.run import Run

LINES = [
    "He said to him, “I will go.”",
    "She said to her, “We will stay.”",
    "They went home (slowly).",
    'He said: "no!" and left.',
    "We will go home, she said.",
]
NGRAM = ["model.kind=ngram", "model.context=2"]


def samples(capsys, argv):
    assert main(argv) == 0
    return [line.split("sample: ", 1)[1] for line in capsys.readouterr().out.splitlines() if "sample: " in line]


@pytest.fixture(scope="module")
def word_run(tmp_path_factory):
    """A tiny word-level LM trained on LINES."""
    root = tmp_path_factory.mktemp("word")
    (root / "corpus.txt").write_text("\n".join(LINES * 20) + "\n")
    corpus = [f"data.{split}={root / 'corpus.txt'}" for split in ("train", "valid", "test")]
    settings = tiny("data.kind=text", "data.tokenizer=word", *corpus)
    assert main(["train", "--workdir", str(root / "run"), "--set", *settings]) == 0
    return root / "run"


def test_a_word_prompt_and_its_continuation_are_one_detokenized_text():
    tokenizer = WordTokenizer.train(LINES)
    ids = tokenizer.encode("to him, “I will")
    assert tokenizer.continue_text("He said", ids) == "He said to him, “I will"
    assert tokenizer.decode(tokenizer.encode('He said: "no!" and left.')) == 'He said: "no!" and left.'


@pytest.mark.parametrize("kind", ["char", "bpe"])
def test_char_and_bpe_continuations_are_the_prompt_then_the_decoded_text(kind):
    tokenizer = build_tokenizer(kind, LINES, vocab_size=300)
    assert tokenizer.continue_text("He sa", tokenizer.encode("id to him")) == "He said to him"


def test_without_a_sampling_flag_generation_is_greedy_whatever_num(word_run, capsys):
    generate = ["generate", "--workdir", str(word_run), "--prompt", "He said", "--max-len", "8"]
    four = samples(capsys, [*generate, "--num", "4"])
    assert len(four) == 4 and len(set(four)) == 1
    assert samples(capsys, generate) == four[:1]
    assert samples(capsys, [*generate, "--num", "4", "--seed", "3"]) == four
    # Sampling as test_word_samples_read_as_text samples: the same compiled program.
    sampled = samples(capsys, [*generate, "--num", "6", "--sample", "--max-len", "16"])
    assert len(set(sampled)) > 1


def test_word_samples_read_as_text(word_run, capsys):
    for text in samples(
        capsys,
        ["generate", "--workdir", str(word_run), "--prompt", "He said", "--num", "6", "--sample", "--max-len", "16"],
    ):
        assert text.startswith("He said") and not text[len("He said") :][:1].isalnum()  # never "He saidto"
        assert " ," not in text and " ." not in text


def test_input_file_gives_one_output_line_per_input_line(word_run, tmp_path, capsys):
    lines = ["He said", "", "They went", "   ", "She said to her,", "We will go"]
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    generate = ["generate", "--workdir", str(word_run), "--max-len", "6"]
    assert main([*generate, "--input", str(tmp_path / "in.txt"), "--output", str(tmp_path / "out.txt")]) == 0
    out = (tmp_path / "out.txt").read_text().split("\n")
    assert len(out) == len(lines) + 1 and out[-1] == ""
    assert [i for i, line in enumerate(out[:-1]) if not line] == [1, 3]
    assert all(o.startswith(i) for i, o in zip(lines, out) if i.strip())
    # One line alone gives what it gave among the others (greedy), and the prompt flag agrees.
    capsys.readouterr()
    single = samples(capsys, [*generate, "--prompt", "She said to her,"])
    assert single == [out[4]]


# Prompts of 2, 8 and 12 tokens with the `</s>` before them: padded to widths 8 and 16.
MANY_LENGTHS = ["He", "They went home (slowly).", LINES[1]]
SAMPLING = DecodeOptions(sample=True)


@pytest.fixture(scope="module")
def decoders(word_run):
    """options -> the word run's `LMDecoder` under those decoding options, restored once each."""
    made = {}

    def decoder(options):
        if options not in made:
            made[options] = Run.open(str(word_run)).lm_decoder(options)
        return made[options]

    return decoder


@pytest.mark.slow
def test_each_input_line_continues_as_it_does_alone_whatever_width_it_is_padded_to(decoders):
    decoder = decoders(DecodeOptions())
    together = continue_lines(decoder, MANY_LENGTHS, max_len=6)
    alone = [continuations(decoder, line, num=1, max_len=6).texts[0] for line in MANY_LENGTHS]
    assert together == alone


def test_a_file_of_prompts_of_many_lengths_compiles_one_program_per_padded_width(decoders):
    decoder = decoders(DecodeOptions())
    lines = ["He", "He said", "He said to", "He said to him", "He said to him ,"]  # 2 to 6 words: width 8
    continue_lines(decoder, lines[:1], max_len=6)
    compiled = decode_prompts._cache_size()
    continue_lines(decoder, lines, max_len=6)
    assert decode_prompts._cache_size() == compiled


@pytest.mark.slow
def test_sampled_lines_do_not_depend_on_the_batch_size_or_the_lines_beside_them(decoders):
    decoder = decoders(SAMPLING)
    lines = MANY_LENGTHS[:2] * 3  # all of width 8: one program per batch size
    by_eight = continue_lines(decoder, lines, max_len=8, seed=5)
    by_three = continue_lines(dataclasses.replace(decoder, batch_size=3), lines, max_len=8, seed=5)
    with_more = continue_lines(decoder, lines + ["We will"] * 9, max_len=8, seed=5)
    assert by_eight == by_three == with_more[: len(lines)]
    assert len(set(by_eight)) > 2  # the copies of a line draw apart


@pytest.mark.slow
def test_continuation_i_of_a_prompt_is_line_i_of_a_file_of_that_prompt(decoders):
    decoder = decoders(SAMPLING)
    drawn = continuations(decoder, "She said", num=6, max_len=8, seed=2).texts
    assert drawn == continue_lines(decoder, ["She said"] * 6, max_len=8, seed=2)
    assert continuations(decoder, "She said", num=6, max_len=8, seed=2).texts == drawn
    assert continuations(decoder, "She said", num=6, max_len=8, seed=3).texts != drawn


def test_a_max_len_beyond_the_models_positions_names_the_flag_and_its_limit_for_the_prompt(word_run, capsys):
    # "He said" is 3 tokens as the model reads it, `</s>` first; model.max_len=64 holds 61 more.
    generate = ["generate", "--workdir", str(word_run), "--prompt", "He said", "--max-len", "5000"]
    expect_one_line_error(
        capsys, generate, "--max-len must be <= 61 after the prompt of 3 tokens (model.max_len=64 holds both), got 5000"
    )


def test_a_prompt_longer_than_the_models_positions_is_named_with_its_token_count(word_run, tmp_path, capsys):
    long = " ".join(["He said"] * 40)  # 81 tokens with the `</s>` before them
    generate = ["generate", "--workdir", str(word_run), "--max-len", "5"]
    expect_one_line_error(
        capsys, [*generate, "--prompt", long], "the prompt is 81 tokens, more than model.max_len=64 leaves room for"
    )
    (tmp_path / "in.txt").write_text(f"He said\n{long}\n")
    expect_one_line_error(capsys, [*generate, "--input", str(tmp_path / "in.txt")], "line 2 of --input is 81 tokens")


def test_input_from_stdin_writes_to_stdout(word_run, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"He said\n\nWe will\n")))
    assert main(["generate", "--workdir", str(word_run), "--max-len", "6", "--input", "-"]) == 0
    captured = capsys.readouterr()
    out = captured.out.split("\n")
    assert len(out) == 4 and out[1] == "" and out[0].startswith("He said") and out[2].startswith("We will")
    assert "generate" in captured.err  # the progress bar


def test_an_input_with_a_byte_order_mark_is_continued_without_it(word_run, tmp_path, capsys):
    (tmp_path / "in.txt").write_bytes("\ufeffHe said\nWe will\n".encode())
    generate = ["generate", "--workdir", str(word_run), "--max-len", "6", "--input", str(tmp_path / "in.txt")]
    assert main(generate) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2 and out[0].startswith("He said") and "\ufeff" not in "".join(out)


def lm_config_only(workdir):
    """`workdir` holding a language model run's config and nothing else: what the checks of
    `generate`'s input see before any model is restored."""
    dump_json(str(workdir / "config.json"), config_lib.to_dict(tiny_config()))
    return str(workdir)


def expect_one_line_error(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.splitlines()) == 1 and "Errno" not in err


def test_an_input_that_is_a_directory_is_refused(tmp_path, capsys):
    generate = ["generate", "--workdir", lm_config_only(tmp_path), "--input", str(tmp_path)]
    expect_one_line_error(capsys, generate, f"--input must be a file, got '{tmp_path}', which is a directory")


def test_a_missing_input_file_is_named(tmp_path, capsys):
    generate = ["generate", "--workdir", lm_config_only(tmp_path), "--input", str(tmp_path / "nope.txt")]
    expect_one_line_error(capsys, generate, f"--input must be an existing file, got '{tmp_path / 'nope.txt'}'")


def test_an_undecodable_input_names_its_file_and_line(tmp_path, capsys):
    (tmp_path / "in.txt").write_bytes(b"fine\nbad \xff byte\n")
    generate = ["generate", "--workdir", lm_config_only(tmp_path), "--input", str(tmp_path / "in.txt")]
    expect_one_line_error(capsys, generate, f"undecodable bytes in '{tmp_path / 'in.txt'}' at line 2")


def test_undecodable_standard_input_names_its_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"fine\n\xff\n")))
    generate = ["generate", "--workdir", lm_config_only(tmp_path), "--input", "-"]
    expect_one_line_error(capsys, generate, "undecodable bytes in '<stdin>' at line 2")


def test_a_seq2seq_run_without_a_source_is_refused(tmp_path, capsys):
    cfg = tiny_config("data.task=reverse", "model.kind=transformer_seq2seq")
    dump_json(str(tmp_path / "config.json"), config_lib.to_dict(cfg))
    assert main(["generate", "--workdir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "sequence-to-sequence run" in err and "--prompt" in err and "--input" in err and "Traceback" not in err


def test_an_ngram_run_evaluates_to_its_training_summary_and_generates(tmp_path, capsys):
    assert main(["train", "--workdir", str(tmp_path), "--set", *tiny(*NGRAM)]) == 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    for split in ("valid", "test"):
        capsys.readouterr()
        assert main(["eval", "--workdir", str(tmp_path), "--split", split]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"{split}: per-token perplexity")
        assert json.loads(out[out.index("{") :])[split] == summary[split]
    generate = ["generate", "--workdir", str(tmp_path), "--prompt", "The ", "--max-len", "12"]
    greedy = samples(capsys, [*generate, "--num", "3"])
    assert len(set(greedy)) == 1 and greedy[0].startswith("The ")
    for flags in (["--sample", "--num", "3"], ["--top-k", "4", "--num", "2"], ["--beam", "3"]):
        assert all(s.startswith("The ") for s in samples(capsys, [*generate, *flags]))


@pytest.mark.parametrize("order", [1, 3])
def test_the_ngram_step_distribution_is_kneser_ney_for_every_token(order):
    data = load_data(tiny_config(*NGRAM).data)
    model = ngram.fit(data.splits["train"], order, vocab_size=data.tokenizer.vocab.size)
    stream = data.splits["valid"][:40].tolist()
    histories = np.array(
        [[-1] * (order - 1 - min(t, order - 1)) + stream[max(0, t - order + 1) : t] for t in range(len(stream))],
        np.int32,
    ).reshape(len(stream), order - 1)
    got = model.next_token_log_probs(histories)
    for history, row in zip(histories, got):
        context = [t for t in history.tolist() if t >= 0]
        want = [model.log_prob(context, w) for w in range(model.vocab_size)]
        np.testing.assert_allclose(row, want, rtol=1e-5)


def test_ngram_greedy_decoding_follows_the_most_probable_token():
    data = load_data(tiny_config(*NGRAM).data)
    model = ngram.fit(data.splits["train"], 3, vocab_size=data.tokenizer.vocab.size)
    prompts = np.array([[2, 5], [2, 9]], np.int32)
    tokens, _ = counted_decoder(model, DecodeOptions())(prompts, np.array([2, 2]), row_keys(0, range(2)), 5)
    for prompt, row in zip(prompts.tolist(), tokens.tolist()):
        context = prompt
        for token in row:
            best = max(range(model.vocab_size), key=lambda w: model.log_prob(context, w))
            assert token == best
            if token == 2:
                break
            context = context + [token]


def test_ngram_decoding_reads_each_rows_own_prompt_length_in_a_padded_batch():
    data = load_data(tiny_config(*NGRAM).data)
    model = ngram.fit(data.splits["train"], 3, vocab_size=data.tokenizer.vocab.size)
    decode = counted_decoder(model, DecodeOptions())
    padded = np.array([[2, 5, 0, 0], [2, 9, 7, 5]], np.int32)  # prompts of 2 and 4 tokens, padded to 4
    together, _ = decode(padded, np.array([2, 4]), row_keys(0, range(2)), 5)
    for row, length in ((0, 2), (1, 4)):
        alone, _ = decode(padded[row : row + 1, :length], np.array([length]), row_keys(0, [row]), 5)
        np.testing.assert_array_equal(together[row], alone[0])
