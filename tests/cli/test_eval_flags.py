"""`seqjax eval` refuses the decoding flags on a run whose evaluation decodes nothing (a language
model's: perplexity only), naming the flag, before any work; an encoder-decoder takes them (BLEU)."""

import pytest

from seqjax.cli import main, parser
from seqjax.cli.decoding_flags import decoding_flags
from seqjax.config import Config, dumps, override


@pytest.fixture
def lm_run(tmp_path):
    """A run directory as far as eval first reads it: its config.json."""
    (tmp_path / "config.json").write_text(dumps(Config()))
    return tmp_path


@pytest.mark.parametrize(
    "flags", [["--beam", "3"], ["--length-penalty", "0.6"], ["--sample"], ["--top-k", "5"], ["--top-p", "0.9"]]
)
def test_eval_of_a_language_model_refuses_decoding_flags_naming_the_flag(lm_run, capsys, flags):
    assert main(["eval", "--workdir", str(lm_run), "--split", "valid", *flags]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"seqjax: error: {flags[0]}: eval decodes only an encoder-decoder's translations (for BLEU), but --workdir "
        f"{lm_run} holds model.kind=transformer, whose evaluation decodes nothing\n"
    )


def test_the_flags_given_are_those_set_to_other_than_their_defaults():
    args = parser().parse_args(["eval", "--workdir", "x", "--beam", "1", "--temperature", "0.5", "--top-p", "0.9"])
    assert decoding_flags(args) == ["--temperature", "--top-p"]


def test_eval_of_an_encoder_decoder_takes_a_beam(tmp_path, capsys):
    """The flag passes the check: what refuses this run is its missing data, later."""
    (tmp_path / "config.json").write_text(dumps(override(Config(), ["model.kind=transformer_seq2seq"])))
    main(["eval", "--workdir", str(tmp_path), "--split", "valid", "--beam", "3"])
    assert "--beam" not in capsys.readouterr().err
