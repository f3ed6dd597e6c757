"""Output heads: exact and approximate softmax losses, exact log-probabilities, Flax heads.

Pure functions (import one without the rest): `full_softmax_loss`, `sampled_softmax_loss`,
`nce_loss`, `negative_sampling_loss`, `tree_softmax_loss` / `tree_log_probs` with
`balanced_tree` / `huffman_tree`, `class_softmax_loss` / `class_log_probs` with
`frequency_classes`, `adaptive_softmax_loss` / `adaptive_log_probs`; proposal distributions in
`seqjax.heads.samplers`; row-sparse table gradients for the sampling losses with
`seqjax.heads.rows.read_rows` and their `gathered=True` form, and for the tree loss with a dense
top and gathered deep nodes with `seqjax.heads.tree_rows`. Flax heads under the head contract
(`seqjax.heads.base`), and `build_head(cfg, V, counts)`.

Each `head.kind` is one module holding its Linen head, its options (the group `head.<kind>`),
its builder and its `HEADS.register` call, beside the pure loss it trains on: `full_head`
(full; its blocked loss, which every word-scoring head evaluates with, is `full`, its training
loss over blocks of rows `full_mean`), `sampled`
(sampled, and what every sampling head shares), `nce` (nce, negative), `classes` (class), `tree`
and `adaptive`. Importing this package registers them.
"""

# The kinds' modules in the order `head.kind` lists its kinds: importing one registers it.
# isort: off
from seqjax.heads.full_head import FullOptions, FullSoftmax, VocabParallelSoftmax
from seqjax.heads.sampled import SampledOptions, SampledSoftmax, sampled_softmax_loss
from seqjax.heads.nce import NCE, NCEOptions, NegativeSampling, nce_loss, negative_sampling_loss
from seqjax.heads.classes import (
    ClassOptions,
    Classes,
    ClassSoftmax,
    class_log_probs,
    class_softmax_loss,
    frequency_classes,
)
from seqjax.heads.tree import (
    HierarchicalSoftmax,
    Tree,
    TreeOptions,
    balanced_tree,
    huffman_tree,
    tree_log_probs,
    tree_path_loss,
    tree_paths,
    tree_softmax_loss,
)
from seqjax.heads.adaptive import (
    AdaptiveOptions,
    AdaptiveSoftmax,
    adaptive_log_probs,
    adaptive_softmax_loss,
    tail_dimensions,
)

# isort: on
from seqjax.heads import samplers
from seqjax.heads.adaptive_tails import expected_tail_capacities, tail_capacities
from seqjax.heads.base import masked_mean
from seqjax.heads.build import build_head
from seqjax.heads.full import full_softmax_loss

__all__ = [
    "NCE",
    "AdaptiveOptions",
    "AdaptiveSoftmax",
    "ClassOptions",
    "ClassSoftmax",
    "Classes",
    "FullOptions",
    "FullSoftmax",
    "VocabParallelSoftmax",
    "HierarchicalSoftmax",
    "NCEOptions",
    "NegativeSampling",
    "SampledOptions",
    "SampledSoftmax",
    "Tree",
    "TreeOptions",
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
