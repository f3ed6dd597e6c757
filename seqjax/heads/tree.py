"""Binary-tree (hierarchical) softmax, `head.kind=tree`: balanced and Huffman trees, the loss, exact
log-probs, the Linen head and its options.

A word's probability is the product of the logistic decisions along its root-to-leaf path
(Morin & Bengio 2005; Mikolov et al. 2013): at internal node n with vector u_n and bias b_n,
P(right | n, h) = σ(h·u_n + b_n), so log p(w | h) = Σ_l log σ(±(h·u_{n_l} + b_{n_l})).

A `Tree` is static host data. Its V − 1 internal nodes are numbered breadth-first (root 0),
so each depth is a contiguous block of ids; a word's path is a padded row of the [V, L]
matrices, L being the maximum depth.
"""

from __future__ import annotations

import dataclasses
import heapq
from typing import ClassVar, Literal

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
from jax import Array
from jax.typing import ArrayLike

from seqjax.checks import check_int
from seqjax.config import HEADS, HeadConfig, Options, option
from seqjax.heads import checks
from seqjax.heads.base import LinenHead, normal_init, smoothed_counts, smoothed_shares
from seqjax.placement import logical_param

TreeShape = Literal["huffman", "balanced"]


@dataclasses.dataclass(frozen=True, eq=False)
class Tree:
    """Paths of a binary tree over V leaves (numpy, host side).

    nodes: [V, L] int32 internal-node ids along each word's path from the root (padded with 0).
    codes: [V, L] int8 branch taken at each step, 1 = right.
    mask: [V, L] bool, True on the real steps of the path.
    parents: [V − 1] int32 parent of each internal node (the root's entry is 0, unused).
    parent_codes: [V − 1] int8 branch from the parent to each internal node.
    level_starts: ids where each depth begins, plus V − 1 at the end.
    """

    nodes: np.ndarray
    codes: np.ndarray
    mask: np.ndarray
    parents: np.ndarray
    parent_codes: np.ndarray
    level_starts: tuple[int, ...]

    @property
    def vocab_size(self) -> int:
        return int(self.nodes.shape[0])

    @property
    def depths(self) -> np.ndarray:
        """[V] int path length (code length) of every word."""
        result: np.ndarray = self.mask.sum(axis=1)
        return result


def balanced_tree(vocab_size: int) -> Tree:
    """The tree that halves the id range at every node: every depth is ⌈log2 V⌉ or one less.

    vocab_size: V >= 2. Returns a `Tree` (numpy arrays, host side).

    Example:
      >>> from seqjax.heads import balanced_tree
      >>> balanced_tree(5).depths.tolist()
      [3, 3, 2, 2, 2]
    """
    vocab_size = check_int("vocab_size", vocab_size)
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be >= 2 for a tree, got {vocab_size}")
    left, right = [], []
    ranges = [(0, vocab_size)]  # breadth-first queue of the id ranges under internal nodes

    def child(low: int, high: int) -> int:
        if high - low == 1:
            return -low - 1
        ranges.append((low, high))
        return len(ranges) - 1

    for index in range(vocab_size - 1):
        low, high = ranges[index]
        middle = low + (high - low + 1) // 2
        left.append(child(low, middle))
        right.append(child(middle, high))
    return _from_children(np.array(left), np.array(right), root=0)


def huffman_tree(counts: ArrayLike) -> Tree:
    """The Huffman tree of `counts` [V] (> 0, host side): minimal expected code length Σ counts·depth.

    Returns a `Tree` (numpy arrays, host side).

    Example:
      >>> from seqjax.heads import huffman_tree
      >>> huffman_tree([8, 4, 2, 1, 1]).depths.tolist()  # frequent words get short paths
      [1, 2, 3, 4, 4]
    """
    values = checks.require_counts("counts", counts)
    if values.size < 2:
        raise ValueError(f"counts must have >= 2 entries for a tree, got {values.size}")
    # Leaves are encoded -id-1, internal nodes by creation order; the insertion index breaks
    # ties so that the heap never compares children.
    heap = [(float(count), index, -index - 1) for index, count in enumerate(values)]
    heapq.heapify(heap)
    left, right = [], []
    while len(heap) > 1:
        count_a, _, node_a = heapq.heappop(heap)
        count_b, _, node_b = heapq.heappop(heap)
        left.append(node_a)
        right.append(node_b)
        heapq.heappush(heap, (count_a + count_b, values.size + len(left), len(left) - 1))
    return _from_children(np.array(left), np.array(right), root=len(left) - 1)


def tree_softmax_loss(
    hidden: ArrayLike, node_weights: ArrayLike, node_biases: ArrayLike | None, targets: ArrayLike, tree: Tree
) -> Array:
    """Per-row −log p(target | h) along the target's path.

    Args:
      hidden: [N, D] float (computed in float32).
      node_weights: [V − 1, D] float; node_biases: [V − 1] float or None.
      targets: [N] int32 ids in [0, V).
      tree: a `Tree` over V words.

    Returns:
      [N] float32 losses. Gathers [N, L, D] node vectors, L the maximum depth.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.heads import huffman_tree, tree_log_probs, tree_softmax_loss
      >>> tree = huffman_tree(np.arange(12, 0, -1))
      >>> rng = np.random.default_rng(0)
      >>> hidden, nodes, targets = rng.normal(size=(3, 8)), rng.normal(size=(11, 8)), np.array([0, 4, 11])
      >>> loss = tree_softmax_loss(hidden, nodes, None, targets, tree)
      >>> exact = -tree_log_probs(hidden, nodes, None, tree)[np.arange(3), targets]
      >>> loss.shape, loss.dtype, bool(jnp.allclose(loss, exact, rtol=1e-5))
      ((3,), dtype('float32'), True)
    """
    _validate(hidden, node_weights, node_biases, tree)
    checks.require_hidden_and_targets(hidden, targets, tree.vocab_size)
    nodes, codes, mask = _gather_paths(tree, targets)
    path_biases = None if node_biases is None else jnp.asarray(node_biases, jnp.float32)[nodes]
    return tree_path_loss(hidden, jnp.asarray(node_weights, jnp.float32)[nodes], path_biases, codes, mask)


def tree_paths(tree: Tree, targets: ArrayLike) -> tuple[Array, Array, Array]:
    """The targets' root-to-leaf paths: node ids [N, L] int32 (0 on padding), codes [N, L] int8
    (1 = right) and mask [N, L] bool, for targets [N] int in [0, V).

    With `tree_path_loss` this gives the tree loss a row gradient (`seqjax.heads.rows`):
    differentiate with respect to the gathered node rows `node_weights[nodes]` instead of the
    [V − 1, D] node table; `nodes` indexes that gradient.

    Example:
      >>> import jax.numpy as jnp
      >>> from seqjax.heads import balanced_tree, tree_paths
      >>> nodes, codes, mask = tree_paths(balanced_tree(4), jnp.array([0, 3]))
      >>> nodes.tolist(), codes.tolist(), mask.tolist()
      ([[0, 1], [0, 2]], [[0, 0], [1, 1]], [[True, True], [True, True]])
    """
    checks.require_rank("targets", targets, 1)
    checks.require_ids("targets", targets, tree.vocab_size)
    return _gather_paths(tree, targets)


def _gather_paths(tree: Tree, targets: ArrayLike) -> tuple[Array, Array, Array]:
    """`tree_paths` for targets already checked on the host."""
    targets = jnp.asarray(targets)
    return jnp.asarray(tree.nodes)[targets], jnp.asarray(tree.codes)[targets], jnp.asarray(tree.mask)[targets]


def tree_path_loss(
    hidden: ArrayLike, path_weights: ArrayLike, path_biases: ArrayLike | None, codes: ArrayLike, mask: ArrayLike
) -> Array:
    """Per-row −Σ_l log σ(±(h·u_l + b_l)) over the real steps of each row's path.

    Args:
      hidden: [N, D] float (computed in float32).
      path_weights: [N, L, D] float node vectors along each path; path_biases: [N, L] or None.
      codes, mask: [N, L] from `tree_paths`.

    Returns:
      [N] float32 losses.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.heads import balanced_tree, tree_path_loss, tree_paths
      >>> nodes, codes, mask = tree_paths(balanced_tree(4), jnp.array([0, 3]))
      >>> node_weights = jnp.zeros((3, 2))  # every decision σ(0) = 1/2: p = 1/4
      >>> loss = tree_path_loss(jnp.ones((2, 2)), node_weights[nodes], None, codes, mask)
      >>> print(np.asarray(loss).round(4))  # log 4
      [1.3863 1.3863]
    """
    checks.require_rank("hidden", hidden, 2)
    checks.require_rank("path_weights", path_weights, 3)
    n, length, features = np.shape(path_weights)
    for name, value in (("codes", codes), ("mask", mask), ("path_biases", path_biases)):
        if value is not None and np.shape(value) != (n, length):
            raise ValueError(f"{name} must have shape {(n, length)} to match path_weights, got {np.shape(value)}")
    if np.shape(hidden) != (n, features):
        raise ValueError(f"hidden must have shape {(n, features)} to match path_weights, got {np.shape(hidden)}")
    signs = 2.0 * jnp.asarray(codes).astype(jnp.float32) - 1.0
    scores = jnp.einsum("nd,nld->nl", jnp.asarray(hidden, jnp.float32), jnp.asarray(path_weights, jnp.float32))
    if path_biases is not None:
        scores = scores + jnp.asarray(path_biases, jnp.float32)
    return -(jnp.asarray(mask).astype(jnp.float32) * jax.nn.log_sigmoid(signs * scores)).sum(axis=1)


def tree_log_probs(hidden: ArrayLike, node_weights: ArrayLike, node_biases: ArrayLike | None, tree: Tree) -> Array:
    """Exact normalized log p(w | h) for every word: [N, V] float32.

    hidden: [N, D] float; node_weights: [V − 1, D] float; node_biases: [V − 1] float or None.

    Walks the tree top-down one depth at a time, so the work is O(N·V) rather than the
    O(N·V·L) of summing every word's path; depths have different widths, so the walk is an
    unrolled loop over the (static, <= L) depths rather than a scan over padded levels.

    Example:
      >>> import jax.numpy as jnp, numpy as np
      >>> from seqjax.heads import huffman_tree, tree_log_probs
      >>> log_probs = tree_log_probs(jnp.zeros((1, 2)), jnp.zeros((2, 2)), None, huffman_tree([2, 1, 1]))
      >>> print(np.asarray(jnp.exp(log_probs)).round(4))  # depths 1, 2, 2
      [[0.5  0.25 0.25]]
    """
    _validate(hidden, node_weights, node_biases, tree)
    checks.require_rank("hidden", hidden, 2)
    hidden = jnp.asarray(hidden, jnp.float32)
    scores = hidden @ jnp.asarray(node_weights, jnp.float32).T
    if node_biases is not None:
        scores = scores + jnp.asarray(node_biases, jnp.float32)
    log_right, log_left = jax.nn.log_sigmoid(scores), jax.nn.log_sigmoid(-scores)

    def branch(parent_ids: np.ndarray, codes: np.ndarray) -> Array:
        return jnp.where(codes == 1, log_right[:, parent_ids], log_left[:, parent_ids])

    starts = tree.level_starts
    levels = [jnp.zeros((hidden.shape[0], 1), jnp.float32)]  # the root: log 1
    for start, stop in zip(starts[1:-1], starts[2:]):
        parents = tree.parents[start:stop]
        previous = levels[-1]
        local = parents - (start - previous.shape[1])
        levels.append(previous[:, local] + branch(parents, tree.parent_codes[start:stop]))
    node_log_probs = jnp.concatenate(levels, axis=1)
    last = tree.depths - 1
    words = np.arange(tree.vocab_size)
    leaf_parents, leaf_codes = tree.nodes[words, last], tree.codes[words, last]
    return node_log_probs[:, leaf_parents] + branch(leaf_parents, leaf_codes)


def _validate(hidden: ArrayLike, node_weights: ArrayLike, node_biases: ArrayLike | None, tree: Tree) -> None:
    if not isinstance(tree, Tree):
        raise ValueError(f"tree must be a Tree from balanced_tree or huffman_tree, got {type(tree).__name__}")
    checks.require_rank("node_weights", node_weights, 2)
    checks.require_table("node_weights", node_weights, tree.vocab_size - 1, np.shape(node_weights)[1])
    checks.require_table("hidden", hidden, None, np.shape(node_weights)[1])
    checks.require_vector("node_biases", node_biases, tree.vocab_size - 1)


def _from_children(left: np.ndarray, right: np.ndarray, root: int) -> Tree:
    """Renumbers internal nodes breadth-first and builds the padded path matrices.

    left, right: [V − 1] children of each internal node, >= 0 internal ids, < 0 leaf -id-1.
    """
    num_internal = left.size
    vocab_size = num_internal + 1
    order, depth_of = [root], {root: 0}
    level_starts = [0]
    for node in order:  # breadth-first; `order` grows while it is walked
        for next_node in (left[node], right[node]):
            if next_node >= 0:
                depth_of[next_node] = depth_of[node] + 1
                if depth_of[next_node] == len(level_starts):
                    level_starts.append(len(order))
                order.append(next_node)
    level_starts.append(num_internal)
    new_id = np.empty(num_internal, np.int64)
    new_id[np.array(order)] = np.arange(num_internal)
    depth = np.array([depth_of[node] for node in order])
    new_left, new_right = left[order], right[order]

    parents = np.zeros(num_internal, np.int32)
    parent_codes = np.zeros(num_internal, np.int8)
    leaf_parent = np.empty(vocab_size, np.int64)
    leaf_code = np.empty(vocab_size, np.int8)
    for code, children in ((0, new_left), (1, new_right)):
        internal = children >= 0
        parents[new_id[children[internal]]] = np.nonzero(internal)[0]
        parent_codes[new_id[children[internal]]] = code
        leaf_parent[-children[~internal] - 1] = np.nonzero(~internal)[0]
        leaf_code[-children[~internal] - 1] = code

    max_depth = int(depth.max()) + 1  # leaves sit one below their parent
    ancestors = np.zeros((num_internal, max_depth), np.int32)
    ancestor_codes = np.zeros((num_internal, max_depth), np.int8)
    for start, stop in zip(level_starts[:-1], level_starts[1:]):
        ids = np.arange(start, stop)
        if start > 0:
            ancestors[ids] = ancestors[parents[ids]]
            ancestor_codes[ids] = ancestor_codes[parents[ids]]
            ancestor_codes[ids, depth[ids] - 1] = parent_codes[ids]
        ancestors[ids, depth[ids]] = ids

    leaf_depth = depth[leaf_parent]
    nodes = ancestors[leaf_parent]
    codes = ancestor_codes[leaf_parent]
    codes[np.arange(vocab_size), leaf_depth] = leaf_code
    mask = np.arange(max_depth)[None, :] <= leaf_depth[:, None]
    nodes = np.where(mask, nodes, 0).astype(np.int32)
    codes = np.where(mask, codes, 0).astype(np.int8)
    return Tree(nodes, codes, mask, parents, parent_codes, tuple(level_starts))


@dataclasses.dataclass(frozen=True)
class TreeOptions(Options):
    """The hierarchical softmax's tree."""

    tree: TreeShape = option("huffman", "huffman | balanced")


class HierarchicalSoftmax(LinenHead):
    """Binary-tree softmax over `tree` (balanced or Huffman); V − 1 node vectors, never tied."""

    vocab_size: int
    tree: Tree
    tied: ClassVar[bool] = False  # tree nodes are not words: nothing to tie to

    def matmul_weights(self, features: int, frequencies: np.ndarray) -> float:
        """The nodes on the target's path, expected over `frequencies` [V]."""
        return float(features * np.dot(smoothed_shares(frequencies), np.asarray(self.tree.mask).sum(axis=1)))

    @nn.compact
    def parameters(self, features: int) -> dict:
        nodes = self.vocab_size - 1
        return {
            "node_weights": logical_param(
                self, "node_weights", normal_init(features), ("nodes", "embed"), (nodes, features)
            ),
            "node_biases": logical_param(self, "node_biases", nn.initializers.zeros, ("nodes",), (nodes,)),
        }

    def log_probs(self, hidden: Array, embedding: Array | None = None) -> Array:
        p = self.parameters(hidden.shape[-1])
        return tree_log_probs(hidden, p["node_weights"], p["node_biases"], self.tree)

    def target_log_probs(self, hidden: Array, targets: Array, embedding: Array | None = None) -> Array:
        p = self.parameters(hidden.shape[-1])
        return -tree_softmax_loss(hidden, p["node_weights"], p["node_biases"], targets, self.tree)


def _build(cfg: HeadConfig, vocab_size: int, counts: np.ndarray, precision: str) -> HierarchicalSoftmax:
    if cfg.tied:
        raise ValueError("head.tied must be false for head.kind=tree: tree nodes are not words, got true")
    huffman = cfg.options_of(TreeOptions).tree == "huffman"
    built = huffman_tree(smoothed_counts(counts)) if huffman else balanced_tree(vocab_size)
    return HierarchicalSoftmax(vocab_size, tree=built)


HEADS.register("tree", _build, options=TreeOptions)
