"""BLEU on ids against sacrebleu on the space-joined ids (tokenize="none"), and the text wrapper."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sacrebleu
from sacrebleu.metrics import BLEU

from seqjax.metrics import corpus_bleu, corpus_bleu_ids, sentence_bleu_ids

SMOOTHING = ["none", "floor", "add-k", "exp"]


def random_batch(seed, rows, vocab, max_len=8):
    """Rows of random ids with random lengths, empty and one-token rows included."""
    rng = np.random.default_rng(seed)
    hyp = rng.integers(0, vocab, (rows, max_len)).astype(np.int32)
    ref = rng.integers(0, vocab, (rows, max_len + 2)).astype(np.int32)
    hyp_len = rng.integers(0, max_len + 1, rows).astype(np.int32)
    ref_len = rng.integers(0, max_len + 3, rows).astype(np.int32)
    hyp_len[:3], ref_len[:3] = [0, 0, 1], [0, 4, 3]
    return hyp, hyp_len, ref, ref_len


def joined(ids, length):
    return " ".join(str(i) for i in ids[:length])


@pytest.mark.parametrize("smooth", SMOOTHING)
@pytest.mark.parametrize("vocab", [4, 30])
def test_sentence_bleu_ids_equals_sacrebleu_sentence_bleu(smooth, vocab):
    hyp, hyp_len, ref, ref_len = random_batch(vocab, 300, vocab)
    ours = sentence_bleu_ids(hyp, hyp_len, ref, ref_len, smooth=smooth)
    theirs = [
        sacrebleu.sentence_bleu(joined(h, hl), [joined(r, rl)], tokenize="none", smooth_method=smooth).score
        for h, hl, r, rl in zip(hyp, hyp_len, ref, ref_len)
    ]
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("smooth", SMOOTHING)
def test_corpus_bleu_ids_equals_sacrebleu_corpus_bleu_on_small_corpora(smooth):
    # Three-sentence corpora are short enough that whole orders go unmatched.
    for seed in range(60):
        hyp, hyp_len, ref, ref_len = random_batch(seed, 3, 6, max_len=5)
        ours = corpus_bleu_ids(hyp, hyp_len, ref, ref_len, smooth=smooth)
        theirs = sacrebleu.corpus_bleu(
            [joined(h, n) for h, n in zip(hyp, hyp_len)],
            [[joined(r, n) for r, n in zip(ref, ref_len)]],
            tokenize="none",
            smooth_method=smooth,
        ).score
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("smooth,value", [("floor", 0.3), ("add-k", 0.5)])
def test_smooth_value_and_max_order_follow_sacrebleu(smooth, value):
    hyp, hyp_len, ref, ref_len = random_batch(1, 100, 5)
    metric = BLEU(tokenize="none", smooth_method=smooth, smooth_value=value, max_ngram_order=2, effective_order=True)
    ours = sentence_bleu_ids(hyp, hyp_len, ref, ref_len, max_order=2, smooth=smooth, smooth_value=value)
    theirs = [
        metric.sentence_score(joined(h, hl), [joined(r, rl)]).score for h, hl, r, rl in zip(hyp, hyp_len, ref, ref_len)
    ]
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-4)


def test_ids_past_each_rows_length_do_not_change_the_score():
    hyp, hyp_len, ref, ref_len = random_batch(2, 50, 5)
    other_padding = np.where(np.arange(hyp.shape[1]) < hyp_len[:, None], hyp, 99)
    np.testing.assert_array_equal(
        sentence_bleu_ids(hyp, hyp_len, ref, ref_len), sentence_bleu_ids(other_padding, hyp_len, ref, ref_len)
    )


def test_bleu_ids_run_inside_jit_as_a_reward():
    hyp, hyp_len, ref, ref_len = random_batch(3, 20, 5)
    reward = jax.jit(lambda h, hl: sentence_bleu_ids(h, hl, jnp.asarray(ref), jnp.asarray(ref_len)))
    np.testing.assert_allclose(reward(hyp, hyp_len), sentence_bleu_ids(hyp, hyp_len, ref, ref_len), rtol=1e-6)


def test_identical_sentences_score_100():
    ids = np.array([[5, 6, 7, 8, 9]], np.int32)
    np.testing.assert_allclose(sentence_bleu_ids(ids, np.array([5]), ids, np.array([5])), [100.0], rtol=1e-6)


def test_corpus_bleu_tokenizes_punctuation_and_follows_the_bleu_formula():
    hypotheses = ["the cat sat on the mat.", "hello, world!"]
    references = ["the cat is on the mat.", "hello there, world!"]
    # 13a splits the punctuation: "the cat sat on the mat ." and "hello , world !" (7 + 4 words)
    # against "the cat is on the mat ." and "hello there , world !" (7 + 5). Clipped n-gram matches:
    # 1-grams 6/7 + 4/4, 2-grams 4/6 + 2/3, 3-grams 2/5 + 1/2, 4-grams 1/4 + 0/1.
    precisions = np.array([10 / 11, 6 / 9, 3 / 7, 1 / 5])
    brevity_penalty = np.exp(1 - 12 / 11)
    expected = 100 * brevity_penalty * np.exp(np.mean(np.log(precisions)))
    assert corpus_bleu(hypotheses, references) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"smooth": "add-one"}, "smooth must be one of"),
        ({"max_order": 0}, "max_order must be a positive int, got 0"),
        ({"smooth": "floor", "smooth_value": -0.1}, "smooth_value must be None or a finite number >= 0, got -0.1"),
    ],
)
def test_bad_options_raise(kwargs, message):
    hyp, hyp_len, ref, ref_len = random_batch(0, 4, 5)
    with pytest.raises(ValueError, match=message):
        sentence_bleu_ids(hyp, hyp_len, ref, ref_len, **kwargs)


def test_bad_shapes_and_lengths_raise():
    hyp, hyp_len, ref, ref_len = random_batch(0, 4, 5)
    with pytest.raises(ValueError, match="must share B"):
        corpus_bleu_ids(hyp, hyp_len[:3], ref, ref_len)
    with pytest.raises(ValueError, match="hyp must be a 2-D integer array"):
        corpus_bleu_ids(hyp[0], hyp_len, ref, ref_len)
    with pytest.raises(ValueError, match="hyp_len must lie in \\[0, 8\\], got values in"):
        corpus_bleu_ids(hyp, hyp_len + 9, ref, ref_len)
    with pytest.raises(ValueError, match="hypotheses and references must have equal length, got 1 and 2"):
        corpus_bleu(["a"], ["a", "b"])
    with pytest.raises(ValueError, match="tokenize must be one of .*, got 'moses'"):
        corpus_bleu(["a"], ["a"], tokenize="moses")


def test_an_unknown_bleu_option_is_refused_naming_the_options():
    ids, lengths = np.array([[5, 6]]), np.array([2])
    with pytest.raises(TypeError, match="unexpected BLEU option\\(s\\) max_n; the options are max_order, smooth"):
        sentence_bleu_ids(ids, lengths, ids, lengths, max_n=2)
