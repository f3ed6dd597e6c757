"""A checkpoint's own tokenizer in a run: its special tokens laid out at seqjax's ids, its
encoding unchanged, its files kept byte for byte."""

import json

import numpy as np
import pytest
from pretrained_helpers import FIXTURES
from tokenizers import Tokenizer as HfTokenizer

from seqjax.data import BOS_ID, EOS_ID, PAD_ID, UNK_ID, load_tokenizer
from seqjax.data.tokenizers.pretrained import VocabMap

TEXT = "the cat sat on the park's mat, and jax watched!"


def test_a_token_playing_several_roles_is_predicted_once_and_a_missing_role_never():
    # HF rows 0..4; row 3 is BOS and EOS (GPT-2's convention); no PAD; UNK is row 0.
    layout = VocabMap.build(5, {"pad": None, "bos": 3, "eos": 3, "unk": 0})
    assert layout.seqjax_of.tolist() == [UNK_ID, 4, 5, EOS_ID, 6]
    assert layout.hf_of.tolist() == [-1, 3, 3, 0, 1, 2, 4]
    assert layout.predicted.tolist() == [False, False, True, True, True, True, True]
    table = np.arange(5.0)[:, None]
    np.testing.assert_array_equal(layout.to_seqjax_rows(table)[:, 0], [0, 3, 3, 0, 1, 2, 4])
    np.testing.assert_array_equal(layout.to_hf_rows(layout.to_seqjax_rows(table)), table)


def test_imported_gpt2_tokenizer_maps_endoftext_to_eos_and_bos_and_names_the_rest(imported):
    tokenizer = load_tokenizer(imported("gpt2") / "tokenizer")
    end = HfTokenizer.from_file(str(FIXTURES / "gpt2" / "tokenizer.json")).token_to_id("<|endoftext|>")
    assert tokenizer.layout.roles == {"pad": None, "bos": end, "eos": end, "unk": end}
    assert tokenizer.layout.hf_of[[PAD_ID, BOS_ID, EOS_ID, UNK_ID]].tolist() == [-1, end, end, end]
    assert tokenizer.vocab.size == 300 + 3  # PAD, and BOS and UNK reading EOS's row


@pytest.mark.parametrize("name", ["gpt2", "llama_gqa"])
def test_encoding_is_the_checkpoint_tokenizers_and_decoding_gives_the_text_back(name, imported):
    tokenizer = load_tokenizer(imported(name) / "tokenizer")
    hf = HfTokenizer.from_file(str(FIXTURES / name / "tokenizer.json"))
    ids = tokenizer.encode(TEXT)
    assert tokenizer.layout.hf_of[ids].tolist() == hf.encode(TEXT, add_special_tokens=False).ids
    assert tokenizer.decode(ids + [EOS_ID, 7]) == TEXT  # decoding stops at EOS
    assert tokenizer.continue_text("the cat", tokenizer.encode(" sat")) == "the cat sat"


def test_the_run_keeps_the_checkpoints_tokenizer_files_byte_for_byte(imported):
    saved = imported("llama_gqa") / "tokenizer"
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (saved / f"hf_{name}").read_bytes() == (FIXTURES / "llama_gqa" / name).read_bytes()
    assert json.loads((saved / "tokenizer.json").read_text())["kind"] == "pretrained"
