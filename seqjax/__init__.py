"""seqjax: sequence generation in JAX/Flax.

Models map tokens to hidden states, heads map hidden states to a loss or exact
log-probabilities, objectives decide what a model is fed, and decoders are compiled
programs over a step function; `seqjax.contracts` states what each promises the others.
The architecture, the data flow and how to add a part are in docs/design.md.
"""

# The packages of the built-in kinds: importing them registers every model, head, objective,
# attention kernel, optimizer and corpus format (`seqjax.config.kinds`), whichever module of seqjax a
# user imports first.
from seqjax import data, heads, models, objectives, optimizers  # noqa: E402, F401

__version__ = "0.1.0"
