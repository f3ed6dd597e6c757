"""Bad arguments and broken step functions raise a clear ValueError before the decoding loop is traced."""

import jax
import jax.numpy as jnp
import pytest

from seqjax.decoding import beam_search, greedy, sample

VOCAB = 5


def uniform_step(state, tokens):
    return jnp.full((tokens.shape[0], VOCAB), -jnp.log(VOCAB)), state


STATE = {"position": jnp.zeros((2,), jnp.int32)}
GOOD = {"bos_id": 1, "eos_id": 2, "pad_id": 0, "max_len": 4}


def decode_with(decoder, step_fn=uniform_step, state=STATE, **overrides):
    kwargs = {**GOOD, **overrides}
    if decoder == "greedy":
        return greedy(step_fn, state, **kwargs)
    if decoder == "sample":
        return sample(step_fn, state, jax.random.split(jax.random.key(0), 2), **kwargs)
    return beam_search(step_fn, state, **{"beam_size": 2, **kwargs})


@pytest.mark.parametrize("decoder", ["greedy", "sample", "beam"])
@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"max_len": 0}, "max_len must be a positive int, got 0"),
        ({"max_len": 2.5}, "max_len must be a positive int, got 2.5"),
        ({"bos_id": VOCAB}, f"bos_id must be an int in \\[0, vocab_size={VOCAB}\\), got {VOCAB}"),
        ({"eos_id": -1}, f"eos_id must be an int in \\[0, vocab_size={VOCAB}\\), got -1"),
        ({"pad_id": VOCAB}, f"pad_id must be an int in \\[0, vocab_size={VOCAB}\\), got {VOCAB}"),
    ],
)
def test_shared_arguments_outside_their_range_raise(decoder, overrides, message):
    with pytest.raises(ValueError, match=message):
        decode_with(decoder, **overrides)


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"temperature": 0.0}, "temperature must be a finite number > 0, got 0.0"),
        ({"temperature": -1.0}, "temperature must be a finite number > 0, got -1.0"),
        ({"top_k": 0}, f"top_k must be None or an int in \\[1, vocab_size={VOCAB}\\], got 0"),
        ({"top_k": VOCAB + 1}, f"top_k must be None or an int in \\[1, vocab_size={VOCAB}\\], got {VOCAB + 1}"),
        ({"top_p": 0.0}, "top_p must be None or a number in \\(0, 1\\], got 0.0"),
        ({"top_p": 1.5}, "top_p must be None or a number in \\(0, 1\\], got 1.5"),
    ],
)
def test_sampling_arguments_outside_their_range_raise(overrides, message):
    with pytest.raises(ValueError, match=message):
        decode_with("sample", **overrides)


@pytest.mark.parametrize(
    "keys",
    [jax.random.key(0), jax.random.split(jax.random.key(0), 3), jax.random.PRNGKey(0), jnp.zeros((2, 2), jnp.int32)],
)
def test_sampling_keys_that_are_not_one_per_row_raise(keys):
    with pytest.raises(ValueError, match=r"keys must be one jax.random key per row: \[B=2\] typed keys"):
        sample(uniform_step, STATE, keys, **GOOD)


@pytest.mark.parametrize(
    "overrides,message",
    [
        ({"beam_size": 0}, "beam_size must be a positive int, got 0"),
        ({"beam_size": -3}, "beam_size must be a positive int, got -3"),
        ({"min_len": 5}, "min_len must be an int in \\[0, max_len=4\\], got 5"),
        ({"min_len": -1}, "min_len must be an int in \\[0, max_len=4\\], got -1"),
        ({"length_penalty": float("nan")}, "length_penalty must be a finite number, got nan"),
    ],
)
def test_beam_arguments_outside_their_range_raise(overrides, message):
    with pytest.raises(ValueError, match=message):
        decode_with("beam", **overrides)


@pytest.mark.parametrize("decoder", ["greedy", "sample", "beam"])
def test_out_of_vocabulary_eos_is_caught_from_the_step_shapes_alone(decoder):
    traced = []

    def recording_step(state, tokens):
        traced.append(tokens.shape)
        return uniform_step(state, tokens)

    with pytest.raises(ValueError, match="eos_id must be an int"):
        decode_with(decoder, step_fn=recording_step, eos_id=VOCAB)
    assert traced == [(2,)]  # one abstract evaluation; the loop was never traced


@pytest.mark.parametrize(
    "step_fn,state,message",
    [
        (uniform_step, {}, "state must have at least one array leaf"),
        (
            uniform_step,
            (jnp.zeros((2,)), jnp.zeros((3, 1))),
            "every state leaf must have the batch as its leading axis",
        ),
        (uniform_step, jnp.float32(0.0), "every state leaf must have the batch as its leading axis"),
        (lambda s, t: (jnp.zeros((t.shape[0],)), s), STATE, "step_fn must return log_probs of shape"),
        (lambda s, t: (uniform_step(s, t)[0], {"position": s["position"] + 0.5}), STATE, "step_fn must return a state"),
    ],
)
def test_step_functions_breaking_the_contract_raise(step_fn, state, message):
    with pytest.raises(ValueError, match=message):
        greedy(step_fn, state, **GOOD)
