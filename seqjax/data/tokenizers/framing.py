"""How a language model reads a line of text: the ids its tokenizer puts around the line's own.

Every tokenizer has a `Framing`: `before`, the ids a line's own follow, and `after`, the ids
that follow them. seqjax's own tokenizers (char, word, BPE) read each line after the `</s>`
that ends the line before it (`OWN`), as their streams hold lines. A pretrained tokenizer's
framing is its post-processor's (`pretrained_tokenizer.post_processor_framing`): Llama's
`<s>` before, nothing around a GPT-2 line, so that a prompt is encoded as `transformers`
encodes it.

An LM stream (`LMData`, the token store) holds each line as `in_stream(ids)` followed by the
`</s>` that ends every line there; a continuation is decoded after `prompt(ids)`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from seqjax.data.tokenizers.vocab import EOS_ID


@dataclasses.dataclass(frozen=True)
class Framing:
    """The ids before and after a line's own, in seqjax's ids."""

    before: tuple[int, ...]
    after: tuple[int, ...]

    def prompt(self, ids: Sequence[int]) -> list[int]:
        """The ids a continuation of a text of `ids` is decoded after: before + ids + after, or
        `</s>` alone when that is empty (an empty GPT-2 prompt), where every stream line starts."""
        return [*self.before, *ids, *self.after] or [EOS_ID]

    def in_stream(self, ids: Sequence[int]) -> list[int]:
        """A line of `ids` as an LM stream holds it, but for the `</s>` that ends it there:
        before + ids + after, without a leading `</s>` (a line of a stream is read after the
        line before's `</s>`, or after the one the stream starts from) and without a trailing
        one (the stream puts it)."""
        before = self.before[1:] if self.before[:1] == (EOS_ID,) else self.before
        after = self.after[:-1] if self.after[-1:] == (EOS_ID,) else self.after
        return [*before, *ids, *after]

    def to_json(self) -> dict[str, list[int]]:
        return {"before": list(self.before), "after": list(self.after)}


OWN = Framing(before=(EOS_ID,), after=())
