"""The decoding grid (experiments/decoding_grid.py): its table and the figures it publishes, from
given decoding reports, without a model."""

import pytest
from project_scripts import load_script

from seqjax.training.features.generation import DecodeOptions

experiment = load_script("experiments/decoding_grid.py", "decoding_grid_experiment")


def report(bleu):
    return {"bleu": bleu, "rougeL": 0.3, "exact_match": 0.02, "copy_bleu": 18.52, "copy_rougeL": 0.184}


ROWS = [(DecodeOptions(), report(16.0), 35.2), (DecodeOptions(beam=4, length_penalty=0.6), report(17.4), 145.0)]


def test_the_table_puts_copy_the_source_first_then_each_setting():
    assert experiment.table(ROWS).splitlines()[2:] == [
        "| copy the source | - | 18.52 | 0.184 | - | - |",
        "| greedy | - | 16.00 | 0.300 | 2.0% | 35 |",
        "| beam 4 | 0.6 | 17.40 | 0.300 | 2.0% | 145 |",
    ]


def test_the_figures_keep_each_setting_s_scores_and_seconds():
    greedy, beam = experiment.figures(ROWS)
    assert (greedy["beam"], greedy["seconds"], greedy["copy_bleu"]) == (1, 35.2, 18.52)
    assert (beam["beam"], beam["length_penalty"], beam["bleu"]) == (4, 0.6, 17.4)


def test_the_grid_is_greedy_then_each_width_and_penalty_and_greedy_alone_without_widths():
    assert [(o.beam, o.length_penalty) for o in experiment.grid("2,4", "0,1")] == [
        (1, DecodeOptions().length_penalty),
        (2, 0.0),
        (2, 1.0),
        (4, 0.0),
        (4, 1.0),
    ]
    assert [o.beam for o in experiment.grid("", "0")] == [1]


def test_a_beam_narrower_than_two_is_refused():
    with pytest.raises(ValueError, match="--beams"):
        experiment.grid("1", "0")
