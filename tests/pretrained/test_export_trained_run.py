"""A run trained in seqjax whose model is a GPT-2 twin exports too: its byte-level BPE becomes a
`tokenizer.json` with the run's own ids that reads a text after `</s>`, as the run reads its lines,
and the export imports back to the run's parameters and framing."""

import jax
import numpy as np
from tokenizers import Tokenizer as HfTokenizer

from seqjax.cli import main
from seqjax.data import EOS_ID, load_tokenizer
from seqjax.pretrained.runs import read_run

LINES = ["the cat sat on the mat.", "a dog ran in the park, and the cat watched it."] * 8
GPT2_TWIN = [
    "model.positions=learned",
    "model.scale_embeddings=false",
    "model.d_model=32",
    "model.num_heads=4",
    "model.d_ff=64",
    "model.layers=1",
    "model.max_len=32",
    "head.learn_bias=false",
]


def test_a_gpt2_shaped_seqjax_run_exports_its_bpe_and_imports_back_to_its_parameters(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(line + "\n" for line in LINES))
    data = ["data.kind=text", f"data.train={corpus}", "data.tokenizer=bpe", "data.vocab_size=270", "data.seq_len=16"]
    run = ["train.steps=2", "train.batch_size=8", "train.eval_every=0", "train.num_printed_samples=0"]
    assert main(["train", "--workdir", str(tmp_path / "run"), "--set", *data, *GPT2_TWIN, *run]) == 0
    assert main(["export-hf", "--workdir", str(tmp_path / "run"), "--output", str(tmp_path / "hf")]) == 0
    tokenizer = load_tokenizer(tmp_path / "run" / "tokenizer")
    exported = HfTokenizer.from_file(str(tmp_path / "hf" / "tokenizer.json"))
    assert exported.encode(LINES[1]).ids == [EOS_ID, *tokenizer.encode(LINES[1])]  # as transformers' tokenizer(text)
    assert main(["import-hf", str(tmp_path / "hf"), "--workdir", str(tmp_path / "again")]) == 0
    assert load_tokenizer(tmp_path / "again" / "tokenizer").framing == tokenizer.framing
    trained, again = read_run(str(tmp_path / "run"))[2], read_run(str(tmp_path / "again"))[2]
    assert jax.tree.structure(trained) == jax.tree.structure(again)
    for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(trained), jax.tree.leaves(again)):
        np.testing.assert_array_equal(a, b, err_msg=jax.tree_util.keystr(path))
