"""The language-model kinds, each registered by its module: rnn, transformer, bilm, rnn_vae.

Importing the package registers them in that order, ahead of the other kinds (`seqjax.models`
imports it first), so that lists of kinds start with the plain language models."""

from seqjax.models.language_models import rnn, transformer  # noqa: F401  (registered in this order)

from seqjax.models.language_models import bilm, vae  # noqa: F401  # isort: skip
