"""What earlier versions of the config called its keys: `RENAMED` keys are refused with their new
name; `MOVED` keys (an option that was flat in its section and is now in the group of the one kind
that reads it) are refused at `--set` with their new name, and still read from a saved config."""

from __future__ import annotations

from typing import Any

RENAMED = {
    "model.heads": "model.num_heads",
    "data.max_len": "data.max_pair_len",
    "train.samples": "train.num_printed_samples",
    "train.sample_len": "train.printed_sample_len",
    # objective options were one flat section; now a group per objective
    "objective.schedule": "objective.scheduled_sampling.schedule",
    "objective.k": "objective.scheduled_sampling.k",
    "objective.c": "objective.scheduled_sampling.c",
    "objective.eps_min": "objective.scheduled_sampling.eps_min",
    "objective.feed": "objective.scheduled_sampling.feed",
    "objective.mode": "objective.scheduled_sampling.mode",
    "objective.passes": "objective.scheduled_sampling.passes",
    "objective.first_pass_grad": "objective.scheduled_sampling.first_pass_grad",
    "objective.sequence_rate": "objective.random_replacement.sequence_rate",
    "objective.token_rate": "objective.random_replacement.token_rate",
    "objective.pool": "objective.random_replacement.pool",
    "objective.penalty": "objective.gradient_penalty.penalty",
    "objective.samples": (
        "objective.reinforce.sequences_per_source (objective.mixer.sequences_per_source, "
        "objective.minimum_risk.num_candidates)"
    ),
    # the sequences REINFORCE samples per source, not a sampling head's head.num_samples
    "objective.reinforce.num_samples": "objective.reinforce.sequences_per_source",
    "objective.mixer.num_samples": "objective.mixer.sequences_per_source",
    "objective.baseline": "objective.reinforce.baseline (or objective.mixer.baseline)",
    "objective.mle_weight": (
        "objective.reinforce.mle_weight (or objective.mixer.mle_weight, objective.minimum_risk.mle_weight)"
    ),
    "objective.delta_start": "objective.mixer.delta_start",
    "objective.delta_growth": "objective.mixer.delta_growth",
    "objective.delta_every": "objective.mixer.delta_every",
    "objective.candidates": "objective.minimum_risk.search",
    "objective.alpha": "objective.minimum_risk.alpha",
}
_GROUPED: dict[str, dict[str, tuple[str, ...]]] = {  # section -> kind -> its options that were flat
    "model": {
        "rnn_vae": ("latent_size", "feed_latent"),
        "electra": ("generator_layers", "generator_width"),
        "nnlm": ("direct",),
        "attention_seq2seq": ("attention",),
    },
    "head": {
        "full": ("chunk_size", "block_residuals", "z_loss"),
        "sampled": ("remove_accidental_hits",),
        "nce": ("log_normalizer", "learn_normalizer"),
        "tree": ("tree",),
        "class": ("num_classes",),
        "adaptive": ("cutoffs", "div_value", "head_bias"),
    },
    "optim": {"adamw": ("b1", "b2")},
}
MOVED = {
    f"{section}.{name}": f"{section}.{kind}.{name}"
    for section, moves in _GROUPED.items()
    for kind, names in moves.items()
    for name in names
}


def moved_into_groups(values: dict[str, Any]) -> dict[str, Any]:
    """A saved config's `values` with each key of `MOVED` moved to its key in its kind's group."""
    moved = {section: dict(keys) if isinstance(keys, dict) else keys for section, keys in values.items()}
    for old, new in MOVED.items():
        section, name = old.split(".")
        keys = moved.get(section)
        # head.tree was the tree's option and is now the tree head's group: only a value moves
        if isinstance(keys, dict) and name in keys and not isinstance(keys[name], dict):
            kind = new.split(".")[1]
            value = keys.pop(name)
            keys[kind] = {**keys.get(kind, {}), name: value}
    return moved
