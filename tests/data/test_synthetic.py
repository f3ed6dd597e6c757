"""Synthetic data: deterministic per seed, correct answers, an exactly checkable grammar."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqjax.data import SEQ2SEQ_TASKS, addition_task, copy_task, reverse_task, sort_task
from seqjax.data.synthetic.grammar import INTRANSITIVE_VERBS, TRANSITIVE_VERBS, grammar_sentences, is_grammatical
from seqjax.data.synthetic.tasks import SYMBOLS

_OTHER_NUMBER = {
    **{s: p for verbs in (INTRANSITIVE_VERBS, TRANSITIVE_VERBS) for s, p in verbs.items()},
    **{p: s for verbs in (INTRANSITIVE_VERBS, TRANSITIVE_VERBS) for s, p in verbs.items()},
}


@pytest.mark.parametrize("task", sorted(SEQ2SEQ_TASKS))
def test_seq2seq_task_is_deterministic_per_seed(task):
    generate = SEQ2SEQ_TASKS[task]
    assert generate(50, 3) == generate(50, 3)
    assert generate(50, (3, 1)) == generate(50, (3, 1))
    assert generate(50, 3) != generate(50, 4)


def test_copy_targets_equal_sources_within_length_range_and_alphabet():
    sources, targets = copy_task(200, 0, min_len=3, max_len=7)
    assert sources == targets
    assert all(3 <= len(s) <= 7 and set(s) <= set(SYMBOLS) for s in sources)


def test_reverse_targets_are_reversed_sources():
    sources, targets = reverse_task(200, 0)
    assert all(t == "".join(reversed(s)) for s, t in zip(sources, targets))


def test_sort_targets_are_sorted_permutations_of_sources():
    sources, targets = sort_task(200, 0)
    assert all(list(t) == sorted(t) and sorted(s) == sorted(t) for s, t in zip(sources, targets))


def test_addition_targets_are_the_sums():
    sources, targets = addition_task(500, 0, max_digits=4)
    for source, target in zip(sources, targets):
        assert re.fullmatch(r"(0|[1-9]\d{0,3})\+(0|[1-9]\d{0,3})", source)
        a, b = source.split("+")
        assert int(target) == int(a) + int(b) and target == str(int(target))


def test_addition_draws_short_and_long_operands():
    sources, _ = addition_task(500, 0, max_digits=4)
    lengths = {len(a) for s in sources for a in s.split("+")}
    assert lengths == {1, 2, 3, 4}


def test_negative_seed_is_refused():
    with pytest.raises(ValueError, match="seed must be an int >= 0"):
        copy_task(3, -1)


def test_grammar_sentences_are_deterministic_per_seed():
    assert grammar_sentences(30, 7) == grammar_sentences(30, 7)
    assert grammar_sentences(30, 7) != grammar_sentences(30, 8)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31))
def test_every_generated_sentence_is_grammatical(seed):
    assert all(is_grammatical(s) for s in grammar_sentences(50, seed))


def test_verb_agrees_with_subject_head_across_prepositional_phrase():
    assert is_grammatical("The cat near the dogs sleeps.")
    assert not is_grammatical("The cat near the dogs sleep.")
    assert is_grammatical("Some owls with an eagle watch every old fox today.")


@pytest.mark.parametrize(
    "sentence",
    [
        "The cat sleep.",  # agreement
        "These cat sleeps.",  # determiner number
        "A owl sleeps.",  # a/an
        "An small owl sleeps.",
        "A cats sleep.",
        "The cat sleeps",  # final period
        "the cat sleeps.",  # capital letter
        "The  cat sleeps.",  # single spaces
        "The cat sleeps .",
        "The big big cat sleeps.",  # repeated adjective
        "The big old small cat sleeps.",  # at most two adjectives
        "The cat sees.",  # transitive verb without object
        "The cat sleeps the dog.",  # intransitive verb with object
        "Cat the sleeps.",  # word order
        "The cat near the dog near the bird sleeps.",  # one level of PP
        "The cat sleeps today again.",
        "The cat purrs.",  # unknown word
        "",
        ".",
    ],
)
def test_corrupted_sentence_is_not_grammatical(sentence):
    assert not is_grammatical(sentence)


def test_flipping_the_main_verb_number_breaks_every_sentence():
    for sentence in grammar_sentences(200, 1):
        words = sentence[:-1].split(" ")
        verb = next(i for i, w in enumerate(words) if w in _OTHER_NUMBER)
        words[verb] = _OTHER_NUMBER[words[verb]]
        assert not is_grammatical(" ".join(words) + "."), sentence


def test_swapping_the_first_two_words_breaks_every_sentence():
    for sentence in grammar_sentences(200, 2):
        first, second, *rest = sentence.split(" ")
        swapped = " ".join([second.capitalize(), first.lower(), *rest])
        assert not is_grammatical(swapped), sentence
