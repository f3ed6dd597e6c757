"""Output heads: exact and approximate softmax losses, exact log-probabilities, Flax heads.

Pure functions (import one without the rest): `full_softmax_loss`, `sampled_softmax_loss`,
`nce_loss`, `negative_sampling_loss`, `tree_softmax_loss` / `tree_log_probs` with
`balanced_tree` / `huffman_tree`, `class_softmax_loss` / `class_log_probs` with
`frequency_classes`, `adaptive_softmax_loss` / `adaptive_log_probs`; proposal distributions in
`seqjax.heads.samplers`; row-sparse table gradients for the sampling losses with
`seqjax.heads.rows.read_rows` and their `gathered=True` form, and for the tree loss with a dense
top and gathered deep nodes with `seqjax.heads.tree_rows`. Flax heads under the head contract,
and `build_head(cfg, V, counts)`.
"""

from seqjax.heads import samplers
from seqjax.heads.adaptive import (
    adaptive_log_probs,
    adaptive_softmax_loss,
    expected_tail_capacities,
    tail_capacities,
    tail_dimensions,
)
from seqjax.heads.build import build_head
from seqjax.heads.classes import Classes, class_log_probs, class_softmax_loss, frequency_classes
from seqjax.heads.full import full_softmax_loss
from seqjax.heads.full_head import FullSoftmax, VocabParallelSoftmax
from seqjax.heads.modules import (
    NCE,
    AdaptiveSoftmax,
    ClassSoftmax,
    HierarchicalSoftmax,
    NegativeSampling,
    SampledSoftmax,
    masked_mean,
)
from seqjax.heads.sampled import nce_loss, negative_sampling_loss, sampled_softmax_loss
from seqjax.heads.tree import (
    Tree,
    balanced_tree,
    huffman_tree,
    tree_log_probs,
    tree_path_loss,
    tree_paths,
    tree_softmax_loss,
)

__all__ = [
    "NCE",
    "AdaptiveSoftmax",
    "ClassSoftmax",
    "Classes",
    "FullSoftmax",
    "VocabParallelSoftmax",
    "HierarchicalSoftmax",
    "NegativeSampling",
    "SampledSoftmax",
    "Tree",
    "adaptive_log_probs",
    "adaptive_softmax_loss",
    "balanced_tree",
    "build_head",
    "class_log_probs",
    "class_softmax_loss",
    "frequency_classes",
    "full_softmax_loss",
    "huffman_tree",
    "masked_mean",
    "nce_loss",
    "negative_sampling_loss",
    "sampled_softmax_loss",
    "samplers",
    "expected_tail_capacities",
    "tail_capacities",
    "tail_dimensions",
    "tree_log_probs",
    "tree_path_loss",
    "tree_paths",
    "tree_softmax_loss",
]
