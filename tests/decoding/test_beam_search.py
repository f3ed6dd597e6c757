"""Beam search against exhaustive enumeration, a step-by-step numpy beam search, greedy and hand cases."""

import itertools
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.decoding import beam_search, greedy


def gnmt_penalty(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha


def exhaustive_search(table_row, lm, *, bos_id, eos_id, max_len, alpha, min_len):
    """Every hypothesis (ended by EOS, or max_len tokens without it), best score first."""
    vocab = table_row.shape[-1]
    scored = {}
    for tokens in itertools.product(range(vocab), repeat=max_len):
        ends = [t for t, tok in enumerate(tokens) if tok == eos_id]
        hypothesis = tokens[: ends[0] + 1] if ends else tokens
        if ends and ends[0] < min_len:
            continue
        log_prob = lm.sequence_log_prob(table_row, bos_id, hypothesis)
        scored[hypothesis] = log_prob / gnmt_penalty(len(hypothesis), alpha)
    return sorted(scored.items(), key=lambda item: -item[1])


def reference_beam_search(table_row, lm, *, bos_id, eos_id, beam_size, max_len, alpha, min_len):
    """The algorithm as specified, run for all max_len steps (no early stop)."""
    live, finished = [((), 0.0)], []
    for t in range(max_len):
        extensions = []
        for prefix, log_prob in live:
            step = lm.next_log_probs(table_row, bos_id, prefix)
            for tok in range(len(step)):
                forbidden = tok == eos_id and t < min_len
                extensions.append((prefix + (tok,), -math.inf if forbidden else log_prob + float(step[tok])))
        extensions.sort(key=lambda item: -item[1])
        for hypothesis, log_prob in extensions[:beam_size]:
            if hypothesis[-1] == eos_id or t == max_len - 1:
                finished.append((hypothesis, log_prob / gnmt_penalty(t + 1, alpha)))
        live = [item for item in extensions if item[0][-1] != eos_id][:beam_size]
    finished.sort(key=lambda item: -item[1])
    return finished[:beam_size]


def assert_matches(sequences, scores, expected, max_len):
    """sequences [K, T], scores [K] against a best-first list of (hypothesis, score)."""
    expected = [(h, s) for h, s in expected if s > -math.inf]
    assert int(np.sum(np.isfinite(scores))) == len(expected)
    for k, (hypothesis, score) in enumerate(expected):
        np.testing.assert_allclose(scores[k], score, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(sequences[k], list(hypothesis) + [0] * (max_len - len(hypothesis)))
    assert np.all(np.isneginf(scores[len(expected) :]))


def search_rows(lm, table, *, beam_size, bos_id, eos_id, max_len, alpha, min_len):
    """beam_search over the rows of `table` [B, ...]: sequences [B, K, T] and scores [B, K] in numpy."""
    state = lm.init_state(table, max_len)
    options = dict(bos_id=bos_id, eos_id=eos_id, pad_id=0, max_len=max_len, length_penalty=alpha, min_len=min_len)
    sequences, scores = beam_search(lm.step_fn, state, beam_size=beam_size, **options)
    return np.asarray(sequences), np.asarray(scores)


def assert_matches_reference(lm, table, beam_size, **options):
    """beam_search over the rows of `table` against `reference_beam_search` of each row;
    `options`: bos_id, eos_id, max_len, alpha, min_len."""
    sequences, scores = search_rows(lm, table, beam_size=beam_size, **options)
    for row in range(len(table)):
        expected = reference_beam_search(table[row], lm, beam_size=beam_size, **options)
        assert_matches(sequences[row], scores[row], expected, options["max_len"])


@pytest.mark.parametrize("alpha,min_len", [(0.0, 0), (0.6, 0), (1.0, 2), (-0.5, 1)])
def test_beam_at_least_v_to_the_l_equals_exhaustive_search(prefix_lm, alpha, min_len):
    vocab, max_len = 3, 3
    table = prefix_lm.random_table(np.random.default_rng(7), 2, vocab, max_len)
    options = dict(bos_id=1, eos_id=0, max_len=max_len, alpha=alpha, min_len=min_len)
    sequences, scores = search_rows(prefix_lm, table, beam_size=vocab**max_len, **options)
    for row in range(2):
        assert_matches(sequences[row], scores[row], exhaustive_search(table[row], prefix_lm, **options), max_len)


@pytest.mark.parametrize("beam_size,alpha,min_len", [(2, 0.0, 0), (3, 0.6, 0), (2, 1.0, 2), (3, -0.5, 0)])
def test_early_stopping_returns_what_running_all_steps_returns(prefix_lm, beam_size, alpha, min_len):
    vocab, max_len, eos_id = 4, 5, 2
    table = prefix_lm.random_table(np.random.default_rng(3), 3, vocab, max_len, eos_id=eos_id, eos_bias=1.5)
    assert_matches_reference(
        prefix_lm, table, beam_size, bos_id=1, eos_id=eos_id, max_len=max_len, alpha=alpha, min_len=min_len
    )


@pytest.mark.parametrize("beam_size,min_len", [(2, 0), (3, 0), (3, 2), (5, 0)])
def test_ties_rank_as_one_stable_ranking_of_all_extensions(prefix_lm, beam_size, min_len):
    # Small integer log-probs: sums are exact, so many extensions tie, and the search must break
    # every tie as a stable sort of all K x V extensions does (lower beam, then lower token).
    vocab, max_len = 4, 5
    rng = np.random.default_rng(5)
    table = -rng.integers(1, 4, size=(3, (vocab + 1) ** max_len, vocab)).astype(np.float32)
    assert_matches_reference(
        prefix_lm, table, beam_size, bos_id=1, eos_id=2, max_len=max_len, alpha=0.0, min_len=min_len
    )


def test_beam_one_equals_greedy(prefix_lm):
    vocab, max_len, bos_id, eos_id = 4, 5, 0, 3
    table = prefix_lm.random_table(np.random.default_rng(11), 6, vocab, max_len, eos_id=eos_id, eos_bias=1.0)
    state = prefix_lm.init_state(table, max_len)
    tokens, lengths = greedy(prefix_lm.step_fn, state, bos_id=bos_id, eos_id=eos_id, pad_id=0, max_len=max_len)
    sequences, scores = beam_search(
        prefix_lm.step_fn, state, bos_id=bos_id, eos_id=eos_id, pad_id=0, beam_size=1, max_len=max_len
    )
    np.testing.assert_array_equal(sequences[:, 0], tokens)
    greedy_log_probs = [
        prefix_lm.sequence_log_prob(table[row], bos_id, tokens[row, : lengths[row]].tolist()) for row in range(6)
    ]
    np.testing.assert_allclose(scores[:, 0], greedy_log_probs, rtol=1e-5)


def seed_example_step(state, tokens):
    """The exposure-bias seed's two-step model over {EOS=0, a=1, b=2, c=3, d=4}, BOS = EOS."""
    never = -jnp.inf
    first = jnp.array([never, jnp.log(0.6), never, jnp.log(0.4), never])
    after_a = jnp.array([never, never, jnp.log(0.55), never, jnp.log(0.45)])
    after_c = jnp.array([never, never, jnp.log(0.1), never, jnp.log(0.9)])
    table = jnp.stack([first, after_a, first, after_c, first])
    return table[tokens], state


@pytest.mark.parametrize("beam_size,expected,probability", [(1, [1, 2], 0.6 * 0.55), (2, [3, 4], 0.4 * 0.9)])
def test_seed_two_step_example_beam_one_takes_a_b_beam_two_finds_c_d(beam_size, expected, probability):
    sequences, scores = beam_search(
        seed_example_step, jnp.zeros((1,)), bos_id=0, eos_id=0, pad_id=0, beam_size=beam_size, max_len=2
    )
    np.testing.assert_array_equal(sequences[0, 0], expected)
    np.testing.assert_allclose(scores[0, 0], np.log(probability), rtol=1e-6)


def hand_built_step(state, tokens):
    """{a=0, b=1, EOS=2}: first EOS or a (1/2 each); after a: EOS 0.9, a 0.05, b 0.05; after b or EOS: uniform."""
    first = jnp.log(jnp.array([0.5, 0.0, 0.5]))
    after_a = jnp.log(jnp.array([0.05, 0.05, 0.9]))
    uniform = jnp.log(jnp.full((3,), 1 / 3))
    position = state
    rows = jnp.where(position[:, None] == 0, first, jnp.where(tokens[:, None] == 0, after_a, uniform))
    return rows, position + 1


@pytest.mark.parametrize(
    "alpha,best,second",
    [
        (0.0, ([2, 0, 0], math.log(0.5)), ([0, 2, 0], math.log(0.45))),
        (1.0, ([0, 2, 0], math.log(0.45) / (7 / 6)), ([2, 0, 0], math.log(0.5))),
    ],
)
def test_length_penalty_turns_the_ranking_towards_the_longer_hypothesis(alpha, best, second):
    sequences, scores = beam_search(
        hand_built_step,
        jnp.zeros((1,), jnp.int32),
        bos_id=2,
        eos_id=2,
        pad_id=0,
        beam_size=2,
        max_len=3,
        length_penalty=alpha,
    )
    np.testing.assert_array_equal(sequences[0], [best[0], second[0]])
    np.testing.assert_allclose(scores[0], [best[1], second[1]], rtol=1e-5)


def test_min_len_forbids_eos_before_position_min_len():
    sequences, scores = beam_search(
        hand_built_step, jnp.zeros((1,), jnp.int32), bos_id=2, eos_id=2, pad_id=0, beam_size=2, max_len=3, min_len=1
    )
    np.testing.assert_array_equal(sequences[0, 0], [0, 2, 0])
    np.testing.assert_allclose(scores[0, 0], math.log(0.45), rtol=1e-5)
    assert np.all(sequences[0, :, 0] != 2)


def test_sequences_are_padded_after_eos_and_rows_without_hypotheses_score_minus_inf():
    sequences, scores = beam_search(
        hand_built_step, jnp.zeros((1,), jnp.int32), bos_id=2, eos_id=2, pad_id=0, beam_size=30, max_len=2
    )
    finite = np.isfinite(np.asarray(scores[0]))
    # The possible hypotheses: (EOS), (a, a), (a, b), (a, EOS); b never comes first.
    assert finite.sum() == 4
    np.testing.assert_array_equal(sequences[0, ~finite], 0)
    eos_first = np.asarray(sequences[0, :, 0]) == 2
    np.testing.assert_array_equal(sequences[0, eos_first & finite, 1], 0)


def test_loop_stops_once_no_live_beam_can_beat_the_finished_ones(count_steps):
    def eos_likely(state, tokens):
        return jnp.broadcast_to(jnp.log(jnp.array([0.98, 0.01, 0.01])), (tokens.shape[0], 3)), state

    counted, calls = count_steps(eos_likely)
    beam_search(counted, jnp.zeros((2,)), bos_id=1, eos_id=0, pad_id=0, beam_size=2, max_len=40, length_penalty=0.6)
    jax.effects_barrier()
    assert 0 < len(calls) < 10


def test_beam_search_compiles_inside_a_user_jit_with_traced_state(prefix_lm):
    vocab, max_len = 3, 3
    table = prefix_lm.random_table(np.random.default_rng(5), 2, vocab, max_len)
    state = prefix_lm.init_state(table, max_len)

    @jax.jit
    def decode(state):
        return beam_search(prefix_lm.step_fn, state, bos_id=1, eos_id=0, pad_id=0, beam_size=2, max_len=max_len)

    eager = beam_search(prefix_lm.step_fn, state, bos_id=1, eos_id=0, pad_id=0, beam_size=2, max_len=max_len)
    jitted = decode(state)
    np.testing.assert_array_equal(jitted[0], eager[0])
    np.testing.assert_allclose(jitted[1], eager[1])


def bigram_step(state, tokens):
    """log p(next | previous token) from a per-row table: state {"table": [B, V, V]}."""
    return state["table"][jnp.arange(tokens.shape[0]), tokens], state


def bigram_state(transitions, vocab):
    """transitions: {previous: {next: probability}}; unlisted rows are uniform."""
    table = np.full((vocab, vocab), 1.0 / vocab)
    for previous, row in transitions.items():
        table[previous] = 0.0
        for token, probability in row.items():
            table[previous, token] = probability
    with np.errstate(divide="ignore"):
        return {"table": jnp.asarray(np.log(table)[None], jnp.float32)}


def test_positive_length_penalty_keeps_searching_while_a_longer_hypothesis_can_still_win():
    # {EOS=0, a..e=1..5, BOS=6}: (EOS) scores log 0.6 = -0.511 at once; the only other
    # hypothesis (a, b, c, d, e, EOS) has log 0.4 / (11/6) = -0.4998 and ends 5 steps later.
    eos, a, b, c, d, e, bos = range(7)
    state = bigram_state(
        {bos: {eos: 0.6, a: 0.4}, a: {b: 1.0}, b: {c: 1.0}, c: {d: 1.0}, d: {e: 1.0}, e: {eos: 1.0}}, 7
    )
    sequences, scores = beam_search(
        bigram_step, state, bos_id=bos, eos_id=eos, pad_id=0, beam_size=1, max_len=8, length_penalty=1.0
    )
    np.testing.assert_array_equal(sequences[0, 0], [a, b, c, d, e, eos, 0, 0])
    np.testing.assert_allclose(scores[0, 0], math.log(0.4) / (11 / 6), rtol=1e-5)


def test_negative_length_penalty_keeps_searching_while_a_shorter_finish_can_still_win():
    # alpha = -1 multiplies log-probs by (5 + n) / 6. After two steps the finished pair is
    # (EOS) = log 0.4 and (a, EOS) = log 0.198 * 7/6 = -1.889; the live (b, c) = log 0.27
    # can still finish at length 3 with -1.746, though not at max_len (-3.27).
    eos, a, b, c, bos = range(5)
    state = bigram_state({bos: {eos: 0.4, a: 0.33, b: 0.27}, a: {eos: 0.6, c: 0.4}, b: {c: 1.0}, c: {eos: 1.0}}, 5)
    sequences, scores = beam_search(
        bigram_step, state, bos_id=bos, eos_id=eos, pad_id=0, beam_size=2, max_len=10, length_penalty=-1.0
    )
    np.testing.assert_array_equal(sequences[0, :, :3], [[eos, 0, 0], [b, c, eos]])
    np.testing.assert_allclose(scores[0], [math.log(0.4), math.log(0.27) * 8 / 6], rtol=1e-5)
