"""seqjax: sequence generation in JAX/Flax.

Models map tokens to hidden states, heads map hidden states to a loss or exact
log-probabilities, objectives decide what a model is fed, and decoders are compiled
programs over a step function. See DESIGN.md in the repository's shared folder.
"""

__version__ = "0.1.0"
