"""Muon (Jordan et al. 2024), optax's (`optax.contrib.muon`): the momentum of a weight matrix
orthogonalized by Newton-Schulz iterations, so that every direction of the matrix moves alike.

Muon is defined for matrices only. Here its matrices are the parameters of exactly two
dimensions that `optim.decay=matrices` would call weights (embeddings and output vectors
included, as optax does; not the norm scales a `model.scan_layers` stack makes [L, D]); every
other parameter — biases, norm scales, and the 3- and 4-dimensional attention kernels and scanned
stacks, which Muon would need told how to flatten — is trained by AdamW. Both parts decay the
parameters `optim.decay` picks, by learning rate x weight_decay x parameter per step, and share
the learning rate (Muon's usual 0.02 is several times AdamW's).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import optax
import optax.contrib

from seqjax.checks import check_rate, integer
from seqjax.config import OPTIMIZERS, Options, option
from seqjax.optimizers.adamw import AdamWOptions, adamw
from seqjax.optimizers.decay import is_matrix
from seqjax.optimizers.settings import SharedSettings


@dataclasses.dataclass(frozen=True)
class MuonOptions(Options):
    """Muon's momentum and orthogonalization, and the moments of the AdamW beside it."""

    beta: float = option(0.95, "decay rate of the matrices' momentum", check=check_rate)
    nesterov: bool = option(True, "Nesterov momentum (for the matrices and the AdamW part)")
    ns_steps: int = option(5, "Newton-Schulz iterations orthogonalizing each matrix's momentum", check=integer())
    adam_b1: float = option(
        0.9, "AdamW's first-moment decay rate, for the parameters that are not matrices", check=check_rate
    )
    adam_b2: float = option(
        0.98, "AdamW's second-moment decay rate, for the parameters that are not matrices", check=check_rate
    )


def muon(options: MuonOptions, shared: SharedSettings) -> optax.GradientTransformation:
    """optax's Muon for the matrices, AdamW for the rest, under `shared`'s schedule, decaying the
    parameters its mask picks."""

    def labels(params: Any) -> Any:
        def label(path: Any, leaf: Any) -> str:
            return "muon" if len(leaf.shape) == 2 and is_matrix(path, leaf) else "adamw"

        return jax.tree_util.tree_map_with_path(label, params)

    # optax's muon sends what is not 2-D to its own AdamW, whose decay takes no mask: it is given
    # the matrices alone, and the rest goes to the adamw kind's optimizer, which takes `mask`.
    return optax.partition(
        {
            "muon": optax.contrib.muon(
                shared.learning_rate,
                ns_steps=options.ns_steps,
                beta=options.beta,
                weight_decay=shared.weight_decay,
                weight_decay_mask=shared.mask,
                nesterov=options.nesterov,
            ),
            "adamw": adamw(AdamWOptions(b1=options.adam_b1, b2=options.adam_b2, nesterov=options.nesterov), shared),
        },
        labels,
    )


OPTIMIZERS.register("muon", muon, options=MuonOptions)
