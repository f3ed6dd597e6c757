"""What the training tests share beyond the tiny runs (`tiny_runs`): the environment of a child
run, the check that two layouts train alike, a split's summed NLL."""

import os

import jax
import numpy as np

from seqjax.data.tokenizers.vocab import EOS_ID, PAD_ID

# Settings under which two layouts of one run must train alike, update by update: no dropout
# (the shard_map step draws it per device) and no warmup, whose first learning rate is 0 (the
# first update would change nothing and the first two losses would both be the initial state's).
EXACT_UPDATES = ("model.dropout=0.0", "optim.warmup_steps=0")


def child_environment(devices: int) -> dict[str, str]:
    """The environment of a run started as a child process on `devices` CPU devices, compiling as
    the suite does (tests/conftest.py: without LLVM's optimizations, with the flags that shorten
    compilation where this XLA has them) and reaching no proxy."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    flags = ["--xla_backend_optimization_level=0", os.environ.get("SEQJAX_TEST_XLA_FLAGS", "")]
    env.update(XLA_FLAGS=" ".join([*flags, f"--xla_force_host_platform_device_count={devices}"]), JAX_PLATFORMS="cpu")
    return env


def assert_trains_alike(got, want, *, learning_rate: float, steps: int) -> None:
    """`got` and `want`: (params, [(loss, grad_norm) of each step]) of the same `steps` updates
    under two layouts. Losses and gradient norms must agree to float32 summation noise, and so
    must every parameter but one slice: the self-attention key bias gets an analytically zero
    gradient (softmax ignores a shift shared by all keys), and Adam turns its float noise, which
    depends on the reduction order, into steps of up to the learning rate. Elsewhere Adam
    amplifies that noise less, but not to nothing where a gradient is small: parameters agree to
    a hundredth of a step (one of 1,152 output weights of a recurrent LM differed by 1.7e-6
    after 4 steps at 1e-3 on one CPU)."""
    (got_params, got_records), (want_params, want_records) = got, want
    assert len(got_records) == len(want_records) == steps
    np.testing.assert_allclose(got_records, want_records, rtol=1e-5, err_msg="(loss, grad_norm) per step")
    for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(got_params), jax.tree.leaves(want_params)):
        name, x, y = jax.tree_util.keystr(path), np.asarray(x), np.asarray(y)
        if name.endswith("['self_attention']['qkv']['bias']"):  # [3 (query, key, value), heads, head_dim]
            np.testing.assert_allclose(x[1], y[1], atol=steps * learning_rate, err_msg=name)
            x, y = x[[0, 2]], y[[0, 2]]
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-2 * learning_rate, err_msg=name)


def split_nll(exp, params, split: str) -> tuple[float, int]:
    """Σ −log p of every token of the LM split `split` under `params`, and their count: the head's
    log-probs on the stream read in consecutive chunks of data.seq_len, each token predicted from
    the ones before it in its chunk, the first chunk's context `</s>`; all chunks in one batch."""
    stream, seq_len = np.asarray(exp.data.splits[split], np.int32), exp.cfg.data.seq_len
    chunks = -(-len(stream) // seq_len)
    inputs = np.concatenate([[EOS_ID], stream[:-1], np.full(chunks * seq_len - len(stream), PAD_ID)])
    hidden = exp.model.apply({"params": params["model"]}, inputs.reshape(chunks, seq_len), train=False)
    log_probs = exp.head.apply({"params": params["head"]}, hidden.reshape(-1, hidden.shape[-1]), method="log_probs")
    return float(-np.sum(np.asarray(log_probs, np.float64)[np.arange(len(stream)), stream])), len(stream)
