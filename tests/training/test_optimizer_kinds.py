"""Every optim.kind under the shared rules: which parameters weight decay shrinks and by how
much, and each kind's options group, refused under another kind and checked where it is set."""

import jax
import numpy as np
import optax
import pytest

from seqjax import config as config_lib
from seqjax.config import OPTIMIZERS, Config
from seqjax.optimizers import make_optimizer

LR, WEIGHT_DECAY = 0.1, 0.5
# One leaf of each sort the decay rule tells apart, named as the models name them.
PARAMS = {
    "dense": {"kernel": np.full((4, 3), 2.0, np.float32), "bias": np.full((3,), 2.0, np.float32)},
    "norm": {"scale": np.full((3,), 2.0, np.float32)},
    "embed": {"embedding": np.full((5, 3), 2.0, np.float32)},
    "qkv": {"kernel": np.full((3, 3, 2, 2), 2.0, np.float32), "bias": np.full((3, 2, 2), 2.0, np.float32)},
    "log_normalizer": np.array(2.0, np.float32),
}
MATRICES = {"['dense']['kernel']", "['embed']['embedding']", "['qkv']['kernel']"}


def optimizer(*settings):
    constant = ["optim.schedule=constant", "optim.warmup_steps=0", f"optim.learning_rate={LR}"]
    cfg = config_lib.override(Config(), [*constant, f"optim.weight_decay={WEIGHT_DECAY}", *settings])
    return make_optimizer(cfg.optim, 10)


@pytest.mark.parametrize("decay, decayed", [("all", None), ("matrices", MATRICES)])
@pytest.mark.parametrize("kind", list(OPTIMIZERS))
def test_with_zero_gradients_the_update_is_the_decay_of_the_leaves_the_rule_picks(kind, decay, decayed):
    """A zero gradient moves no kind's parameters, so the update is the decay alone:
    −learning rate × weight_decay × parameter on the decayed leaves, 0 on the others."""
    opt = optimizer(f"optim.kind={kind}", f"optim.decay={decay}")
    zeros = jax.tree.map(np.zeros_like, PARAMS)
    updates = jax.jit(lambda: opt.update(zeros, opt.init(PARAMS), PARAMS)[0])()
    for path, update in jax.tree_util.tree_leaves_with_path(updates):
        name = jax.tree_util.keystr(path)
        want = -LR * WEIGHT_DECAY * 2.0 if decayed is None or name in decayed else 0.0
        np.testing.assert_allclose(update, np.full(np.shape(update), want), rtol=1e-6, err_msg=name)


def trained(opt, steps=4):
    """PARAMS after `steps` updates of `opt` by random gradients (the same draws for every
    optimizer), as one compiled program."""
    rng = np.random.default_rng(0)
    draws = [
        jax.tree.map(lambda leaf: rng.normal(size=np.shape(leaf)).astype(np.float32), PARAMS) for _ in range(steps)
    ]

    @jax.jit
    def run(draws):
        params, state = PARAMS, opt.init(PARAMS)
        for grads in draws:
            updates, state = opt.update(grads, state, params)
            params = optax.apply_updates(params, updates)
        return params

    return run(draws)


ADAM = dict(b1=0.9, b2=0.98, weight_decay=WEIGHT_DECAY)
MUON_MATRICES = {"['dense']['kernel']", "['embed']['embedding']"}  # 2-D: Muon's; the rest, its AdamW's


def test_these_gradients_tell_nadamw_from_adamw():
    """What lets the test below fail: the two references part on every leaf."""
    for nadam, adam in zip(
        jax.tree.leaves(trained(optax.nadamw(LR, **ADAM))), jax.tree.leaves(trained(optax.adamw(LR, **ADAM)))
    ):
        assert not np.allclose(nadam, adam, rtol=1e-4)


@pytest.mark.parametrize(
    "settings, reference, skipped",
    [
        (["optim.kind=adamw"], optax.adamw(LR, **ADAM), set()),
        (["optim.kind=adamw", "optim.adamw.nesterov=true"], optax.nadamw(LR, **ADAM), set()),
        (["optim.kind=muon"], optax.nadamw(LR, **ADAM), MUON_MATRICES),
        (["optim.kind=muon", "optim.muon.nesterov=false"], optax.adamw(LR, **ADAM), MUON_MATRICES),
    ],
)
def test_adam_steps_are_optax_adamw_or_with_nesterov_its_nadamw(settings, reference, skipped):
    """optim.adamw.nesterov (and Muon's AdamW part, under optim.muon.nesterov) move the parameters
    as optax's NAdamW, otherwise as its AdamW, over steps of random gradients."""
    got, want = trained(optimizer("optim.clip_norm=0", *settings)), trained(reference)
    for (path, leaf), expected in zip(jax.tree_util.tree_leaves_with_path(got), jax.tree.leaves(want)):
        if jax.tree_util.keystr(path) not in skipped:
            np.testing.assert_allclose(leaf, expected, rtol=1e-6, err_msg=jax.tree_util.keystr(path))


def test_the_default_decays_every_parameter_as_adamw_always_did():
    assert Config().optim.decay == "all" and Config().optim.kind == "adamw"


@pytest.mark.parametrize("kind", list(OPTIMIZERS))
def test_an_option_of_another_kind_is_refused_naming_both_kinds(kind):
    other = next(k for k in OPTIMIZERS.options if k != kind)
    option = next(iter(config_lib.valid_keys(Config().optim.group(other), f"optim.{other}.")))
    default = getattr(Config().optim.group(other), option.rsplit(".", 1)[1])
    refusal = rf"^{option} applies to optim.kind={other}, not '{kind}': it would be ignored$"
    with pytest.raises(ValueError, match=refusal):
        config_lib.override(Config(), [f"optim.kind={kind}", f"{option}={str(default).lower()}"])


@pytest.mark.parametrize(
    "settings, message",
    [
        (["optim.kind=lion", "optim.lion.b2=1.0"], r"optim.lion.b2 must be in \[0, 1\), got 1.0"),
        (["optim.kind=sgd", "optim.sgd.momentum=-0.5"], r"optim.sgd.momentum must be a finite number in \[0.0"),
        (["optim.kind=sgd", "optim.sgd.momentum=0", "optim.sgd.nesterov=true"], "optim.sgd.nesterov needs momentum"),
        (["optim.kind=muon", "optim.muon.ns_steps=0"], "optim.muon.ns_steps must be an int >= 1, got 0"),
        (["optim.kind=adafactor", "optim.adafactor.min_dim_size_to_factor=0"], "min_dim_size_to_factor must be an int"),
        (["optim.decay=biases"], "optim.decay must be one of all, matrices, got 'biases'"),
    ],
)
def test_an_option_outside_its_rule_is_refused_naming_the_key(settings, message):
    with pytest.raises(ValueError, match=message):
        config_lib.override(Config(), settings)
