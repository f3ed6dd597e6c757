"""Imported checkpoints compute what transformers computed: logits to 1e-4 and the same greedy
tokens (recorded in the fixtures), a text prompt read as transformers' `tokenizer(prompt)` reads
it and continued as its `generate` continues it, and export then re-import changes no bit."""

import jax
import numpy as np
import pytest
from pretrained_helpers import FIXTURES, GREEDY, NAMES, expected, loaded, seqjax_greedy, seqjax_logits

from seqjax.cli import main
from seqjax.pretrained import export_run, import_checkpoint
from seqjax.pretrained.tensor_files import read_checkpoint
from seqjax.training.features.continuation import continuations
from seqjax.training.saved.run import Run


@pytest.mark.parametrize("name", NAMES)
def test_imported_logits_equal_the_transformers_logits(name, imported):
    want = expected(name)
    np.testing.assert_allclose(seqjax_logits(imported(name), want["inputs"]), want["logits"], atol=1e-4, rtol=0)


@pytest.mark.parametrize("name", NAMES)
def test_imported_greedy_tokens_equal_transformers_generate(name, imported):
    want = expected(name)
    got = seqjax_greedy(imported(name), want["inputs"][0, :4], len(want["greedy"]))
    np.testing.assert_array_equal(got, want["greedy"])


@pytest.mark.parametrize("name", NAMES)
def test_generate_reads_a_text_prompt_as_transformers_tokenizer_and_continues_it_as_its_generate(name, imported):
    """The prompt's ids, Llama's `<s>` first and nothing before GPT-2's, then the greedy
    continuation, its `</s>` included when transformers stopped at one, in the checkpoint's ids."""
    want = expected(name)
    decoder = Run.open(str(imported(name))).lm_decoder(GREEDY)
    drawn = continuations(decoder, str(want["prompt"]), num=1, max_len=int(want["max_new_tokens"]))
    hf_of = decoder.tokenizer.layout.hf_of
    assert hf_of[drawn.prompt_ids].tolist() == want["prompt_ids"].tolist()
    assert hf_of[drawn.ids[0]].tolist() == want["continuation"].tolist()


@pytest.mark.parametrize("name", ["gpt2", "llama_gqa"])
def test_generate_prints_the_text_transformers_decodes_from_its_continuation(name, imported, capsys):
    want = expected(name)
    run = str(imported(name))
    flags = ["--prompt", str(want["prompt"]), "--max-len", str(want["max_new_tokens"])]
    assert main(["generate", "--workdir", run, *flags]) == 0
    assert capsys.readouterr().out == f"  sample: {want['continuation_text']}\n"


@pytest.mark.parametrize("name", NAMES)
def test_export_writes_back_the_checkpoints_own_tensors_bit_for_bit(name, imported, tmp_path):
    _, original = read_checkpoint(str(FIXTURES / name))
    dtype = "bfloat16" if name.endswith("bf16") else "float32"
    export_run(str(imported(name)), str(tmp_path / "hf"), dtype=dtype, echo=lambda _: None)
    _, exported = read_checkpoint(str(tmp_path / "hf"))
    assert sorted(exported) == sorted(original)
    for key, value in original.items():
        assert exported[key].dtype == value.dtype and exported[key].tobytes() == value.tobytes(), key


@pytest.mark.parametrize(
    "name", ["gpt2", "llama_bf16", "llama3_rope", "llama_head_dim", "qwen2_bias", "mistral_window", "qwen3_qk_norm"]
)
def test_export_then_import_gives_the_same_parameters_bit_for_bit(name, imported, tmp_path):
    export_run(str(imported(name)), str(tmp_path / "hf"), echo=lambda _: None)
    import_checkpoint(str(tmp_path / "hf"), str(tmp_path / "again"), echo=lambda _: None)
    first, second = loaded(imported(name))[2], loaded(tmp_path / "again")[2]
    assert jax.tree.structure(first) == jax.tree.structure(second)
    for a, b in zip(jax.tree.leaves(first), jax.tree.leaves(second)):
        assert a.tobytes() == b.tobytes()
