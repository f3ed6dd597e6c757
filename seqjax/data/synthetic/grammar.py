"""An English-like grammar: seeded sentences for language models, and the exact judge of them.

The corpus is English-like on purpose: a model trained on it generates sentences a reader can
judge, and `is_grammatical` judges them exactly (agreement of the verb with the subject's head
noun across a prepositional phrase, "a"/"an", determiner number).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from seqjax.data.synthetic.seeds import Seed, seeded_rng

# Grammar:  S -> NP[n] VP[n] "."      NP[n] -> Det[n] Adj{0..2, distinct} Noun[n] PP?
#           PP -> Prep NP (no PP of its own)      VP[n] -> (Vi[n] | Vt[n] NP) Adv?
# n is singular or plural; "a" becomes "an" before a vowel (every word below is chosen so
# that this spelling rule is also the spoken one).
NOUNS = {
    "cat": "cats",
    "dog": "dogs",
    "bird": "birds",
    "child": "children",
    "teacher": "teachers",
    "farmer": "farmers",
    "owl": "owls",
    "mouse": "mice",
    "fox": "foxes",
    "girl": "girls",
    "boy": "boys",
    "man": "men",
    "woman": "women",
    "horse": "horses",
    "student": "students",
    "king": "kings",
    "queen": "queens",
    "elephant": "elephants",
    "artist": "artists",
    "eagle": "eagles",
}
INTRANSITIVE_VERBS = {
    "sleeps": "sleep",
    "runs": "run",
    "sings": "sing",
    "laughs": "laugh",
    "waits": "wait",
    "smiles": "smile",
    "dances": "dance",
    "cries": "cry",
}
TRANSITIVE_VERBS = {
    "sees": "see",
    "likes": "like",
    "chases": "chase",
    "follows": "follow",
    "watches": "watch",
    "finds": "find",
    "helps": "help",
    "knows": "know",
    "meets": "meet",
    "admires": "admire",
    "teaches": "teach",
    "carries": "carry",
}
ADJECTIVES = (
    "small",
    "big",
    "old",
    "young",
    "happy",
    "quiet",
    "clever",
    "angry",
    "brave",
    "lazy",
    "hungry",
    "gentle",
    "tall",
    "strange",
    "little",
    "curious",
    "proud",
    "sleepy",
    "eager",
    "ugly",
)
SINGULAR_DETERMINERS = ("a", "the", "this", "that", "every")
PLURAL_DETERMINERS = ("the", "these", "those", "some", "many", "two", "three")
PREPOSITIONS = ("near", "behind", "with", "under", "beside")
ADVERBS = ("today", "again", "quietly", "slowly", "happily")
MAX_ADJECTIVES = 2

_SINGULAR, _PLURAL = 0, 1
_SINGULAR_NOUNS = tuple(NOUNS)
_NOUN_NUMBER = {**{s: _SINGULAR for s in NOUNS}, **{p: _PLURAL for p in NOUNS.values()}}
_DETERMINERS = {
    number: set(words) for number, words in ((_SINGULAR, SINGULAR_DETERMINERS), (_PLURAL, PLURAL_DETERMINERS))
}
_VERB_NUMBER = {
    **{s: _SINGULAR for s in (*INTRANSITIVE_VERBS, *TRANSITIVE_VERBS)},
    **{p: _PLURAL for p in (*INTRANSITIVE_VERBS.values(), *TRANSITIVE_VERBS.values())},
}
_TRANSITIVE = set(TRANSITIVE_VERBS) | set(TRANSITIVE_VERBS.values())


def _article(next_word: str) -> str:
    return "an" if next_word[0] in "aeiou" else "a"


def _pick(rng: np.random.Generator, words: Sequence[str]) -> str:
    return words[int(rng.integers(len(words)))]


def _distinct_adjectives(rng: np.random.Generator) -> list[str]:
    """0, 1 or 2 distinct adjectives with probabilities 0.5, 0.35, 0.15."""
    draw = rng.random()
    first = int(rng.integers(len(ADJECTIVES)))
    if draw < 0.5:
        return []
    if draw < 0.85:
        return [ADJECTIVES[first]]
    second = int(rng.integers(len(ADJECTIVES) - 1))
    return [ADJECTIVES[first], ADJECTIVES[second + (second >= first)]]


def _noun_phrase(rng: np.random.Generator, allow_pp: bool) -> tuple[list[str], int]:
    number = int(rng.integers(2))
    determiner = _pick(rng, SINGULAR_DETERMINERS if number == _SINGULAR else PLURAL_DETERMINERS)
    singular = _pick(rng, _SINGULAR_NOUNS)
    words = _distinct_adjectives(rng) + [singular if number == _SINGULAR else NOUNS[singular]]
    if determiner == "a":
        determiner = _article(words[0])
    words = [determiner] + words
    if allow_pp and rng.random() < 0.3:
        inner, _ = _noun_phrase(rng, allow_pp=False)
        words += [_pick(rng, PREPOSITIONS)] + inner
    return words, number


def _sentence(rng: np.random.Generator) -> str:
    words, number = _noun_phrase(rng, allow_pp=True)
    verbs = TRANSITIVE_VERBS if rng.random() < 0.6 else INTRANSITIVE_VERBS
    singular = _pick(rng, tuple(verbs))
    words.append(singular if number == _SINGULAR else verbs[singular])
    if verbs is TRANSITIVE_VERBS:
        words += _noun_phrase(rng, allow_pp=True)[0]
    if rng.random() < 0.2:
        words.append(_pick(rng, ADVERBS))
    text = " ".join(words) + "."
    return text[0].upper() + text[1:]


def grammar_sentences(n: int, seed: Seed) -> list[str]:
    """n sentences of the grammar above, e.g. "The old cat near two foxes sees an owl."."""
    rng = seeded_rng(n, seed)
    return [_sentence(rng) for _ in range(n)]


def _parse_noun_phrase(words: list[str], i: int, allow_pp: bool) -> tuple[int, int] | None:
    """(number, index after the phrase) of a noun phrase starting at words[i], or None."""
    if i >= len(words):
        return None
    determiner = words[i]
    i += 1
    adjectives: list[str] = []
    while i < len(words) and words[i] in ADJECTIVES and len(adjectives) < MAX_ADJECTIVES:
        adjectives.append(words[i])
        i += 1
    if i >= len(words) or words[i] not in _NOUN_NUMBER or len(set(adjectives)) != len(adjectives):
        return None
    number = _NOUN_NUMBER[words[i]]
    if determiner in ("a", "an"):
        if number != _SINGULAR or determiner != _article(words[i - len(adjectives)]):
            return None
    elif determiner not in _DETERMINERS[number]:
        return None
    i += 1
    if allow_pp and i < len(words) and words[i] in PREPOSITIONS:
        inner = _parse_noun_phrase(words, i + 1, allow_pp=False)
        if inner is None:
            return None
        i = inner[1]
    return number, i


def is_grammatical(sentence: str) -> bool:
    """Whether `sentence` is exactly a sentence of the grammar: spelling, agreement,
    capitalized first letter, single spaces and the final "." included."""
    if not sentence.endswith(".") or not sentence[:1].isupper():
        return False
    words = sentence[:-1].split(" ")
    words[0] = words[0][0].lower() + words[0][1:]
    subject = _parse_noun_phrase(words, 0, allow_pp=True)
    if subject is None or subject[1] >= len(words):
        return False
    number, i = subject
    verb = words[i]
    if _VERB_NUMBER.get(verb) != number:
        return False
    i += 1
    if verb in _TRANSITIVE:
        obj = _parse_noun_phrase(words, i, allow_pp=True)
        if obj is None:
            return False
        i = obj[1]
    if i < len(words) and words[i] in ADVERBS:
        i += 1
    return i == len(words)
