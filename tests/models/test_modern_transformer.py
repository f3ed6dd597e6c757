"""The modern Transformer options: rotary positions, RMSNorm, SwiGLU, grouped-query attention,
no biases, packed rows, scanned layers and remat (what they refuse: test_modern_transformer_refusals)."""

import dataclasses
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from seqjax.config import ModelConfig
from seqjax.heads import full_softmax_loss
from seqjax.models import build_model
from seqjax.models.transformer.positions import Llama3Scaling, inverse_frequencies, rotary

V, V_SRC, B, T, S = 13, 9, 2, 6, 5
TINY = ModelConfig(kind="transformer", d_model=16, layers=2, num_heads=4, d_ff=32, dropout=0.0, max_len=8)
MODERN = dataclasses.replace(TINY, positions="rope", norm_type="rmsnorm", mlp="swiglu", kv_heads=2, bias=False)
LM_CONFIGS = {
    "rope": dataclasses.replace(TINY, positions="rope"),
    "rmsnorm_post": dataclasses.replace(TINY, norm_type="rmsnorm", norm="post"),
    "relu": dataclasses.replace(TINY, mlp="relu"),
    "swiglu": dataclasses.replace(TINY, mlp="swiglu"),
    "gqa": dataclasses.replace(TINY, kv_heads=2),
    "mqa": dataclasses.replace(TINY, kv_heads=1),
    "no_bias": dataclasses.replace(TINY, bias=False),
    "modern": MODERN,
    "modern_head_dim": dataclasses.replace(MODERN, head_dim=6),  # heads 6 wide, not D / H = 4
    "modern_qk_norm": dataclasses.replace(MODERN, qk_norm=True),
    "modern_scan_remat_window": dataclasses.replace(MODERN, scan_layers=True, remat="dots", window=3),
    "modern_scan_dilated_learned": dataclasses.replace(
        MODERN, scan_layers=True, remat="full", window=2, dilation=2, positions="learned"
    ),
}
SEQ2SEQ_CONFIGS = {
    "modern": dataclasses.replace(MODERN, kind="transformer_seq2seq"),
    "modern_scan_remat": dataclasses.replace(MODERN, kind="transformer_seq2seq", scan_layers=True, remat="dots"),
    "mqa_post_relu": dataclasses.replace(TINY, kind="transformer_seq2seq", kv_heads=1, norm="post", mlp="relu"),
}
TOKENS = jax.random.randint(jax.random.key(0), (B, T), 0, V)
SRC = jax.random.randint(jax.random.key(1), (B, S), 0, V_SRC)
SRC_MASK = jnp.arange(S)[None, :] < jnp.array([S, 3])[:, None]


def lm(cfg, draw):
    """The LM of `cfg` and random variables drawn by the `random_variables` fixture."""
    model = build_model(cfg, V)
    return model, draw(model, TOKENS)


def seq2seq(cfg, draw):
    model = build_model(cfg, V, src_vocab_size=V_SRC)
    return model, draw(model, TOKENS, src=SRC, src_mask=SRC_MASK)


def jitted(model):
    """model.apply(variables, tokens, **arrays) under jit: a tiny model compiles faster than it
    runs op by op."""
    return jax.jit(lambda variables, tokens, **arrays: model.apply(variables, tokens, **arrays))


def decode_all(model, variables, tokens, **source):
    """Feeds tokens one at a time through decode_step inside one scan; returns [B, T, D]."""
    state = model.apply(variables, tokens.shape[0], tokens.shape[1], method="init_decode_state", **source)

    def step(state, token):
        hidden, state = model.apply(variables, state, token, method="decode_step")
        return state, hidden

    _, hidden = jax.lax.scan(step, state, tokens.T)
    return jnp.swapaxes(hidden, 0, 1)


def stack_layers(params, prefix, layers):
    """Unrolled parameters (prefix_0, prefix_1, ...) re-laid out as one scanned stack `prefix`."""
    params = dict(params)
    blocks = [params.pop(f"{prefix}_{i}") for i in range(layers)]
    params[prefix] = jax.tree.map(lambda *xs: jnp.stack(xs), *blocks)
    return params


# --- decoding reproduces the teacher-forced pass ---------------------------------------------


@pytest.mark.parametrize("name", LM_CONFIGS)
def test_lm_decode_steps_reproduce_teacher_forced_hidden(name, random_variables):
    model, variables = lm(LM_CONFIGS[name], random_variables)
    expected = jitted(model)(variables, TOKENS)  # the program other tests of this config compile
    got = jax.jit(functools.partial(decode_all, model))(variables, TOKENS)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", SEQ2SEQ_CONFIGS)
def test_seq2seq_decode_steps_reproduce_teacher_forced_hidden(name, random_variables):
    model, variables = seq2seq(SEQ2SEQ_CONFIGS[name], random_variables)
    expected = jitted(model)(variables, TOKENS, src=SRC, src_mask=SRC_MASK)
    got = jax.jit(lambda v, t: decode_all(model, v, t, src=SRC, src_mask=SRC_MASK))(variables, TOKENS)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


# --- rotary positions ------------------------------------------------------------------------


def test_rotary_scores_depend_only_on_the_difference_of_positions():
    q, k = jax.random.normal(jax.random.key(2), (2, 1, 5, 1, 8))
    positions = jnp.array([0, 1, 3, 4, 7])

    def scores(shift):
        turned = rotary(q, positions + shift, 10000.0, 32), rotary(k, positions + shift, 10000.0, 32)
        return jnp.einsum("bqhd,bkhd->bqk", *turned)

    np.testing.assert_allclose(scores(11), scores(0), rtol=1e-4, atol=1e-4)
    assert not np.allclose(rotary(q, positions, 10000.0, 32), q)


def test_rotary_turns_each_pair_by_position_times_frequency():
    x = np.asarray(jax.random.normal(jax.random.key(3), (2, 3, 4, 8)), np.float64)
    positions = np.array([[0, 5, 63], [1, 2, 40]])
    angles = positions[..., None, None] * 500.0 ** (-np.arange(4) / 4)  # [B, T, 1, Dh/2]
    first, second = x[..., :4], x[..., 4:]
    expected = np.concatenate(
        [first * np.cos(angles) - second * np.sin(angles), second * np.cos(angles) + first * np.sin(angles)], -1
    )
    got = rotary(jnp.asarray(x, jnp.float32), jnp.asarray(positions), 500.0, 64)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_llama3_scaling_keeps_high_frequencies_divides_low_ones_and_interpolates_between():
    """Heads 8 wide at θ 500: wavelengths 2π·500^(i/4) = 6.3, 29.8, 140.5, 664.3 positions;
    bands at 64 / 4 = 16 and 64 / 1 = 64 (original context 64, factors 1 and 4, factor 8)."""
    plain = 500.0 ** (-np.arange(4) / 4)
    smooth = (64 / (2 * np.pi / plain[1]) - 1) / (4 - 1)  # pair 1 lies between the bands
    expected = [plain[0], (1 - smooth) * plain[1] / 8 + smooth * plain[1], plain[2] / 8, plain[3] / 8]
    np.testing.assert_allclose(inverse_frequencies(4, 500.0, Llama3Scaling(8.0, 1.0, 4.0, 64)), expected, rtol=1e-12)


def test_rope_model_is_unchanged_when_every_position_shifts(random_variables):
    model, variables = lm(dataclasses.replace(MODERN, max_len=64), random_variables)
    forward = jax.jit(lambda positions: model.apply(variables, TOKENS, positions=positions))
    base = jnp.broadcast_to(jnp.arange(T, dtype=jnp.int32), (B, T))
    np.testing.assert_allclose(forward(base + 40), forward(base), rtol=1e-4, atol=1e-4)


# --- grouped-query attention -------------------------------------------------------------------


def test_kv_heads_equal_to_num_heads_is_standard_multi_head_attention(random_variables):
    model, variables = lm(TINY, random_variables)
    explicit = build_model(dataclasses.replace(TINY, kv_heads=TINY.num_heads), V)
    np.testing.assert_array_equal(jitted(explicit)(variables, TOKENS), jitted(model)(variables, TOKENS))


def test_grouped_query_attention_is_multi_head_attention_with_each_kv_head_repeated_over_its_group(random_variables):
    gqa, variables = lm(LM_CONFIGS["gqa"], random_variables)
    mha = build_model(TINY, V)
    groups = TINY.num_heads // 2
    params = dict(variables["params"])
    for name in ("blocks_0", "blocks_1"):
        block = dict(params[name])
        attention = dict(block["self_attention"])
        query, kv = attention.pop("query"), attention.pop("kv")
        repeated = {key: jnp.repeat(value, groups, axis=-2) for key, value in kv.items()}  # [.., 2, K, Dh] -> H
        attention["qkv"] = {
            key: jnp.concatenate([query[key][..., None, :, :], repeated[key]], axis=-3) for key in query
        }
        block["self_attention"] = attention
        params[name] = block
    np.testing.assert_allclose(
        jitted(mha)({"params": params}, TOKENS), jitted(gqa)(variables, TOKENS), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("kv_heads", [1, 2])
def test_grouped_query_projections_and_kv_cache_hold_only_the_kv_heads(kv_heads, random_variables):
    cfg = dataclasses.replace(TINY, kv_heads=kv_heads)
    model, variables = lm(cfg, random_variables)
    attention = variables["params"]["blocks_0"]["self_attention"]
    assert attention["query"]["kernel"].shape == (16, 4, 4)
    assert attention["kv"]["kernel"].shape == (16, 2, kv_heads, 4)
    state = model.apply(variables, B, 8, method="init_decode_state")
    assert [c["k"].shape for c in state["cache"].value.value] == [(B, kv_heads, 8, 4)] * 2
    scanned = build_model(dataclasses.replace(cfg, scan_layers=True), V)
    scanned_state = jax.eval_shape(lambda: scanned.init_decode_state(B, 8))
    assert scanned_state["cache"].value.value["v"].shape == (B, 2, kv_heads, 8, 4)


def test_head_dim_sets_the_width_of_the_projections_heads_and_kv_cache(random_variables):
    model, variables = lm(dataclasses.replace(MODERN, head_dim=6), random_variables)
    attention = variables["params"]["blocks_0"]["self_attention"]
    assert attention["query"]["kernel"].shape == (16, 4, 6)
    assert attention["kv"]["kernel"].shape == (16, 2, 2, 6)
    assert attention["out"]["kernel"].shape == (4, 6, 16)
    state = model.apply(variables, B, 8, method="init_decode_state")
    assert state["cache"].value.value[0]["k"].shape == (B, 2, 8, 6)


def test_qkv_bias_biases_query_key_and_value_but_not_the_output_or_feed_forward(random_variables):
    _, variables = lm(dataclasses.replace(MODERN, qkv_bias=True), random_variables)
    block = variables["params"]["blocks_0"]
    assert block["self_attention"]["query"]["bias"].shape == (4, 4)
    assert block["self_attention"]["kv"]["bias"].shape == (2, 2, 4)
    assert "bias" not in block["self_attention"]["out"] and "bias" not in block["ff_in"]


def test_qk_norm_rms_normalizes_each_query_and_key_head_with_one_scale_per_feature(random_variables):
    _, variables = lm(dataclasses.replace(MODERN, qk_norm=True, head_dim=6), random_variables)
    attention = variables["params"]["blocks_0"]["self_attention"]
    assert attention["query_norm"]["scale"].shape == attention["key_norm"]["scale"].shape == (6,)


def test_seq2seq_cross_attention_memory_holds_only_the_kv_heads(random_variables):
    model, variables = seq2seq(SEQ2SEQ_CONFIGS["mqa_post_relu"], random_variables)
    # The memory's shapes, traced without running the encoder.
    state = jax.eval_shape(
        lambda v: model.apply(v, B, T, src=SRC, src_mask=SRC_MASK, method="init_decode_state"), variables
    )
    assert [m["k"].shape for m in state["memory"].value] == [(B, 1, S, 4)] * 2


# --- packed rows ---------------------------------------------------------------------------------

PACKED_TOKENS = jnp.array([[5, 6, 7, 8, 9, 10, 11, 0]], jnp.int32)
PACKED_SEGMENTS = jnp.array([[1, 1, 1, 2, 2, 2, 2, 0]], jnp.int32)
PACKED_POSITIONS = jnp.array([[0, 1, 2, 0, 1, 2, 3, 0]], jnp.int32)
ALONE = {1: slice(0, 3), 2: slice(3, 7)}


@pytest.mark.parametrize("positions", ["sinusoidal", "learned", "rope"])
def test_packed_row_per_token_losses_equal_each_segment_computed_alone(positions, random_variables):
    cfg = dataclasses.replace(MODERN, positions=positions, window=3, scan_layers=positions == "rope")
    model, variables = lm(cfg, random_variables)
    output = jax.random.normal(jax.random.key(5), (V, cfg.d_model))
    losses = jax.jit(lambda hidden, targets: full_softmax_loss(hidden[0], output, None, targets[0]))
    targets = jnp.roll(PACKED_TOKENS, -1, axis=1)
    apply = jitted(model)
    packed = apply(variables, PACKED_TOKENS, segment_ids=PACKED_SEGMENTS, positions=PACKED_POSITIONS)
    packed_losses = losses(packed, targets)
    for where in ALONE.values():
        alone = apply(variables, PACKED_TOKENS[:, where])
        np.testing.assert_allclose(packed[:, where], alone, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(packed_losses[where], losses(alone, targets[:, where]), rtol=1e-5, atol=1e-5)


def test_no_gradient_flows_across_segments(random_variables):
    model, variables = lm(LM_CONFIGS["modern_scan_remat_window"], random_variables)
    embedded = model.apply(variables, PACKED_TOKENS, method="embed")

    def second_segment_output(embedded):
        hidden = model.apply(
            variables, PACKED_TOKENS, embedded=embedded, segment_ids=PACKED_SEGMENTS, positions=PACKED_POSITIONS
        )
        return hidden[:, ALONE[2]].sum()

    grads = jax.jit(jax.grad(second_segment_output))(embedded)
    assert np.all(np.asarray(grads[:, ALONE[1]]) == 0.0) and np.all(np.asarray(grads[:, 7]) == 0.0)
    assert np.all(np.abs(np.asarray(grads[:, ALONE[2]])).sum(-1) > 0)


def test_packed_seq2seq_segments_see_only_their_own_source_and_prefix(random_variables):
    model, variables = seq2seq(SEQ2SEQ_CONFIGS["modern"], random_variables)
    src = jnp.array([[3, 4, 2, 5, 6]], jnp.int32)
    src_segments, src_positions = jnp.array([[1, 1, 1, 2, 2]]), jnp.array([[0, 1, 2, 0, 1]])
    tokens = jnp.array([[1, 7, 8, 1, 9, 0]], jnp.int32)
    segments, positions = jnp.array([[1, 1, 1, 2, 2, 0]]), jnp.array([[0, 1, 2, 0, 1, 0]])
    apply = jitted(model)
    packed = apply(
        variables,
        tokens,
        src=src,
        segment_ids=segments,
        positions=positions,
        src_segment_ids=src_segments,
        src_positions=src_positions,
    )
    first = apply(variables, tokens[:, :3], src=src[:, :3])
    second = apply(variables, tokens[:, 3:5], src=src[:, 3:])
    np.testing.assert_allclose(packed[:, :3], first, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(packed[:, 3:5], second, rtol=1e-5, atol=1e-5)


# --- scanned layers and remat --------------------------------------------------------------------


def test_scanned_lm_equals_the_unrolled_stack_on_the_same_parameters(random_variables):
    model, variables = lm(MODERN, random_variables)
    scanned = build_model(dataclasses.replace(MODERN, scan_layers=True), V)
    params = stack_layers(variables["params"], "blocks", MODERN.layers)
    assert jax.tree.map(jnp.shape, params) == jax.tree.map(
        jnp.shape, nn.meta.unbox(jax.eval_shape(scanned.init, jax.random.key(0), TOKENS))["params"]
    )
    np.testing.assert_allclose(
        jitted(scanned)({"params": params}, TOKENS), jitted(model)(variables, TOKENS), rtol=1e-5, atol=1e-5
    )


def test_scanned_seq2seq_equals_the_unrolled_stacks_on_the_same_parameters(random_variables):
    model, variables = seq2seq(SEQ2SEQ_CONFIGS["modern"], random_variables)
    scanned = build_model(dataclasses.replace(SEQ2SEQ_CONFIGS["modern"], scan_layers=True), V, src_vocab_size=V_SRC)
    params = stack_layers(variables["params"], "encoder_blocks", 2)
    params = stack_layers(params, "decoder_blocks", 2)
    np.testing.assert_allclose(
        jitted(scanned)({"params": params}, TOKENS, src=SRC, src_mask=SRC_MASK),
        jitted(model)(variables, TOKENS, src=SRC, src_mask=SRC_MASK),
        rtol=1e-5,
        atol=1e-5,
    )


@pytest.mark.parametrize("scan_layers", [False, True])
def test_remat_leaves_loss_and_gradients_unchanged(scan_layers, random_variables):
    # Unrolled, each block is rematerialized on its own: one block shows it; scanned, two layers
    # make the stack the scan runs over.
    cfg = dataclasses.replace(MODERN, scan_layers=scan_layers, dropout=0.1, layers=2 if scan_layers else 1)
    _, variables = lm(cfg, random_variables)

    def loss_and_grads(remat):
        model = build_model(dataclasses.replace(cfg, remat=remat), V)

        def loss(v):
            return (model.apply(v, TOKENS, train=True, rngs={"dropout": jax.random.key(6)}) ** 2).mean()

        return jax.jit(jax.value_and_grad(loss))(variables)

    expected_loss, expected_grads = loss_and_grads("none")
    for remat in ("dots", "full"):
        loss, grads = loss_and_grads(remat)
        np.testing.assert_allclose(loss, expected_loss, rtol=1e-6)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), grads, expected_grads)


def test_bfloat16_modern_model_gives_the_float32_models_hidden_to_bfloat16_precision(random_variables):
    cfg = LM_CONFIGS["modern_scan_remat_window"]
    model = build_model(cfg, V, dtype=jnp.bfloat16)
    variables = random_variables(model, TOKENS)
    hidden = jitted(model)(variables, TOKENS)
    expected = np.asarray(jitted(build_model(cfg, V))(variables, TOKENS))
    assert hidden.dtype == jnp.float32
    # Hidden values of order 1, bfloat16's 8-bit significand: a few units in its last place.
    np.testing.assert_allclose(hidden, expected, rtol=0, atol=2e-2)
    assert np.abs(hidden - expected).max() > 0  # the matmuls did run in bfloat16


def test_segment_ids_without_positions_and_positions_out_of_range_are_refused(random_variables):
    model, variables = lm(TINY, random_variables)
    with pytest.raises(ValueError, match="segment_ids need positions"):
        model.apply(variables, PACKED_TOKENS, segment_ids=PACKED_SEGMENTS)
    with pytest.raises(ValueError, match="positions must be an integer array of shape \\(1, 8\\)"):
        model.apply(variables, PACKED_TOKENS, positions=PACKED_POSITIONS[:, :4])
    # Position tables (rope's, learned ones) are gathered, and a gather clamps silently.
    with pytest.raises(
        ValueError,
        match=f"positions must lie in \\[0, model.max_len={TINY.max_len}\\), got values in \\[0, {TINY.max_len}\\]",
    ):
        model.apply(variables, PACKED_TOKENS, positions=PACKED_POSITIONS.at[0, 3].set(TINY.max_len))
