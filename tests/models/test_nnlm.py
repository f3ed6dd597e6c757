"""Fixed-window LM against its equation.

hidden_t = tanh(e_t H + d) + e_t W with e_t = [x_t; x_{t-1}; ...; x_{t-k+1}].
"""

import jax
import numpy as np

from seqjax.config import ModelConfig
from seqjax.models import build_model
from seqjax.models.classic.nnlm import NNLMOptions

V, B, T, K, D = 11, 2, 6, 3, 8
CFG = ModelConfig(kind="nnlm", d_model=D, context=K, dropout=0.0, groups=(NNLMOptions(direct=True),))


def test_hidden_follows_the_windowed_equation_with_zeros_before_the_start(random_variables):
    model = build_model(CFG, V)
    tokens = jax.random.randint(jax.random.key(0), (B, T), 0, V)
    params = random_variables(model, tokens)["params"]
    table = np.asarray(params["embed"]["embedding"], np.float64)
    h, d = np.asarray(params["hidden"]["kernel"]), np.asarray(params["hidden"]["bias"])
    w = np.asarray(params["direct"]["kernel"])
    expected = np.zeros((B, T, D))
    for b in range(B):
        for t in range(T):
            window = [table[tokens[b, t - j]] if t - j >= 0 else np.zeros(D) for j in range(K)]
            e = np.concatenate(window)
            expected[b, t] = np.tanh(e @ h + d) + e @ w
    got = model.apply({"params": params}, tokens)
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_tokens_older_than_the_window_do_not_matter(random_variables):
    model = build_model(CFG.with_options(NNLMOptions(direct=False)), V)
    tokens = jax.random.randint(jax.random.key(0), (B, T), 0, V)
    variables = random_variables(model, tokens)
    changed = tokens.at[:, 0].set((tokens[:, 0] + 1) % V)
    before, after = model.apply(variables, tokens), model.apply(variables, changed)
    np.testing.assert_allclose(before[:, K:], after[:, K:], rtol=1e-6)
    assert not np.allclose(before[:, :K], after[:, :K])
