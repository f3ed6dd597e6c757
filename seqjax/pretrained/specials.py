"""Which tokens of a Hugging Face checkpoint play seqjax's PAD, BOS, EOS and UNK, read from its
tokenizer files, and the tokenizer built from them.

Each role's token comes from the first of: `tokenizer_config.json`, then
`special_tokens_map.json` (`bos_token`, ... as a string or an added-token object), then
`config.json` (`bos_token_id`, ...; a list of EOS ids gives its first). A role none of them
declares is the token spelled as seqjax's own (`<pad>`, `<s>`, `</s>`, `<unk>`) where the
vocabulary has one; BOS with no token of its own is EOS's (GPT-2's convention); PAD and UNK may
have none. EOS is required: seqjax ends every line with it.
"""

from __future__ import annotations

import os
from typing import Any

from tokenizers import Tokenizer as HfTokenizer

from seqjax.data.tokenizers.pretrained import ROLES, PretrainedTokenizer, VocabMap
from seqjax.data.tokenizers.vocab import SPECIAL_TOKENS
from seqjax.pretrained.tensor_files import read_json

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def _declared(value: Any) -> str | None:
    """A declared special token's text: a string, or an added-token object's "content"."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def special_roles(directory: str, model: HfTokenizer, config: dict[str, Any]) -> tuple[dict[str, int | None], str]:
    """The HF id playing each of `ROLES` (or None) and a one-line statement of the mapping.

    Raises:
      ValueError: a declared token the vocabulary lacks (named with its file), or no EOS.
    """
    present = [name for name in TOKENIZER_FILES[1:] if os.path.isfile(os.path.join(directory, name))]
    sources = [(name, read_json(os.path.join(directory, name))) for name in present] + [("config.json", config)]
    roles: dict[str, int | None] = {}
    where: dict[str, str] = {}
    for role, own_name in zip(ROLES, SPECIAL_TOKENS):
        roles[role] = None
        for name, values in sources:
            text = _declared(values.get(f"{role}_token"))
            hf_id = values.get(f"{role}_token_id")
            if isinstance(hf_id, list):
                hf_id = hf_id[0] if hf_id else None
            if text is not None:
                roles[role] = model.token_to_id(text)
                if roles[role] is None:
                    raise ValueError(
                        f"{role}_token {text!r} declared in {name} is not in the vocabulary of tokenizer.json"
                    )
                where[role] = f"{text!r} (id {roles[role]}, from {name})"
                break
            if isinstance(hf_id, int) and not isinstance(hf_id, bool):
                roles[role] = hf_id
                where[role] = f"{model.id_to_token(hf_id)!r} (id {hf_id}, from {name})"
                break
        if roles[role] is None and model.token_to_id(own_name) is not None:
            roles[role] = model.token_to_id(own_name)
            where[role] = f"{own_name!r} (id {roles[role]}, by name)"
    if roles["eos"] is None:
        raise ValueError(
            "the checkpoint's tokenizer declares no end-of-sequence token (eos_token in tokenizer_config.json or "
            "special_tokens_map.json, eos_token_id in config.json), and has no '</s>': seqjax ends every line with one"
        )
    if roles["bos"] is None:
        roles["bos"] = roles["eos"]
        where["bos"] = f"{where['eos']} shared with EOS: fed, never predicted"
    parts = [f"{role.upper()} <- {where[role]}" if role in where else f"{role.upper()}: none" for role in ROLES]
    shared = [r.upper() for r in ROLES if roles[r] is not None and r != "eos" and roles[r] == roles["eos"]]
    missing = [r.upper() for r in ROLES if roles[r] is None]
    notes = []
    if shared:
        notes.append(f"{' and '.join(shared)} {'read' if len(shared) > 1 else 'reads'} EOS's row, never predicted")
    if missing:
        own = "ids" if len(missing) > 1 else "an id"
        notes.append(f"{' and '.join(missing)}: no counterpart, {own} of seqjax's own, never predicted")
    return roles, "special tokens: " + "; ".join(parts) + ("" if not notes else " (" + "; ".join(notes) + ")")


def checkpoint_tokenizer(directory: str, config: dict[str, Any], rows: int) -> tuple[PretrainedTokenizer, str]:
    """The tokenizer of a checkpoint directory whose embedding has `rows` rows, and the
    statement of its special tokens (`special_roles`)."""
    path = os.path.join(directory, TOKENIZER_FILES[0])
    if not os.path.isfile(path):
        raise ValueError(f"checkpoint directory {directory!r} must hold tokenizer.json (HF tokenizers), missing")
    files = {}
    for name in TOKENIZER_FILES:
        if os.path.isfile(os.path.join(directory, name)):
            with open(os.path.join(directory, name), "rb") as file:
                files[name] = file.read()
    try:
        model = HfTokenizer.from_str(files[TOKENIZER_FILES[0]].decode("utf-8"))
    except Exception as error:  # tokenizers raises its own exception type for a malformed file
        raise ValueError(f"{path} is not a tokenizers file: {error}") from None
    if model.get_vocab_size(with_added_tokens=True) > rows:
        raise ValueError(
            f"tokenizer.json has {model.get_vocab_size(with_added_tokens=True)} tokens, more than the "
            f"{rows} rows of the model's embedding (config.json vocab_size)"
        )
    roles, statement = special_roles(directory, model, config)
    return PretrainedTokenizer(files, VocabMap.build(rows, roles)), statement
