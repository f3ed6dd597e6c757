"""Masks of teacher-forced self-attention over B = 2 rows of T = 6 tokens, every structured
part with and without padding and segments, and their reference by loops."""

import numpy as np

B, T = 2, 6


def reference_mask(causal, window=0, dilation=1, valid=None, segments=None, batch=B, length=T):
    """[batch, 1, length, length] bool by loops over (query, key) pairs."""
    allowed = np.ones((batch, 1, length, length), bool)
    for b in range(batch):
        for q in range(length):
            for k in range(length):
                if causal:
                    distance = q - k
                    near = window == 0 or (distance < window * dilation and distance % dilation == 0)
                    allowed[b, 0, q, k] &= distance >= 0 and near
                if valid is not None:
                    allowed[b, 0, q, k] &= bool(valid[b, k])
                if segments is not None:
                    allowed[b, 0, q, k] &= segments[b, q] == segments[b, k]
    return allowed


VALID = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]], bool)
SEGMENTS = np.array([[1, 1, 2, 2, 2, 0], [1, 2, 2, 2, 3, 3]], np.int32)
MASKS = {
    "causal": dict(causal=True),
    "window": dict(causal=True, window=3),
    "dilated_window": dict(causal=True, window=2, dilation=2),
    "causal_padding": dict(causal=True, valid=VALID),
    "segments": dict(causal=True, segments=SEGMENTS),
    "window_segments_padding": dict(causal=True, window=2, valid=VALID, segments=SEGMENTS),
    "bidirectional": dict(causal=False),
    "bidirectional_padding": dict(causal=False, valid=VALID),
    "bidirectional_padding_segments": dict(causal=False, valid=VALID, segments=SEGMENTS),
}
