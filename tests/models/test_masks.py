"""Attention masks against their definitions, written as loops over (query, key) pairs."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjax.models.transformer.masks import causal_mask, decode_mask, padding_mask, window_mask


def window_reference(length, window, dilation):
    allowed = np.zeros((length, length), bool)
    for q in range(length):
        keys = range(q + 1) if window == 0 else [q - i * dilation for i in range(window)]
        for k in keys:
            if k >= 0:
                allowed[q, k] = True
    return allowed


# window_mask is plain arithmetic, so numpy positions keep these examples free of compiles.
@settings(max_examples=40, deadline=None)
@given(length=st.integers(1, 12), window=st.integers(0, 5), dilation=st.integers(1, 3))
def test_window_mask_sees_the_window_of_past_keys_spaced_by_dilation(length, window, dilation):
    positions = np.arange(length)
    got = window_mask(positions, positions, window, dilation)
    np.testing.assert_array_equal(got, window_reference(length, window, dilation))


def test_causal_mask_is_the_window_mask_over_one_sequence_with_head_axes():
    got = np.asarray(causal_mask(7, 3, 2))
    assert got.shape == (1, 1, 7, 7)
    np.testing.assert_array_equal(got[0, 0], window_reference(7, 3, 2))


@pytest.mark.parametrize("window, dilation", [(0, 1), (3, 1), (2, 3)])
def test_decode_mask_row_equals_the_causal_mask_row_at_that_position(window, dilation):
    positions = np.array([0, 4, 7], np.int32)
    got = np.asarray(decode_mask(positions, 8, window, dilation))
    assert got.shape == (3, 1, 1, 8)
    expected = np.asarray(causal_mask(8, window, dilation))[0, 0][positions]
    np.testing.assert_array_equal(got[:, 0, 0], expected)


def test_padding_mask_hides_padded_keys_from_every_query():
    mask = np.array([[True, True, False], [True, False, False]])
    got = np.asarray(padding_mask(mask))
    assert got.shape == (2, 1, 1, 3)
    np.testing.assert_array_equal(got[:, 0, 0], mask)
