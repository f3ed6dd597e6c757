"""Decoding as compiled programs over a step function `(state, tokens [B]) -> (log_probs [B, V], state)`.

greedy, sample (temperature / top-k / top-p) and beam_search know nothing of the model:
each is one `lax.while_loop` that stops early, for any pytree state whose leaves carry the
batch as their leading axis (one loop per phase when the state has parts that grow with the
steps, a KV cache: `seqjax.decoding.phases`).
"""

from seqjax.decoding.beam_search import beam_search
from seqjax.decoding.greedy import greedy, most_probable
from seqjax.decoding.sampling import sample, scale_temperature, truncate_top_k, truncate_top_p

__all__ = ["beam_search", "greedy", "most_probable", "sample", "scale_temperature", "truncate_top_k", "truncate_top_p"]
