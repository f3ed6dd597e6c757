"""`seqjax prepare`: a text or parallel corpus tokenized once into a token store
(`token_store.py`), found where its config puts it and prepared again when missing or made
from sources that changed since.

A streaming pass encodes every split a block at a time into raw files, which are turned into
`.npy` arrays of the store's id type at the end (`arrays.py`); char and BPE tokenizers are
built in a pass over the train files before it, word level in it (`tokenizers.streaming`).
Two background threads find the pieces of the next blocks while one is numbered and written.
Memory holds a few blocks and the counts, whatever the corpus size. The store is written
into a temporary directory beside its place and renamed into place last, so a prepare that
is killed or fails (a full disk included) leaves no store that could be opened, and the
next prepare starts over. The temporary directory is named for its host and process; one a
killed prepare left behind (`kill -9` runs no cleanup) is removed by the next look-up of the
store, once its process is gone (same host) or nothing in it changed for `STALE_SECONDS`
(another host sharing the file system, whose processes this one cannot see).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
from tqdm import tqdm

from seqjax.config import DataConfig
from seqjax.data.corpora.formats import SideFile, shard_blocks
from seqjax.data.corpora.sources import (
    SOURCES,
    SPLITS,
    pretrained_tokenizer_dir,
    source_of,
    split_path,
    to_stderr,
    validate_data_config,
)
from seqjax.data.store.arrays import EOS_MARK, SplitFiles, to_npy
from seqjax.data.store.token_store import (
    FORMAT_VERSION,
    MANIFEST,
    TokenStore,
    cache_root,
    changed_sources,
    default_location,
    fingerprint,
    open_store,
    read_manifest,
    token_dtype,
    tokenization_config,
)
from seqjax.data.tokenizers.streaming import ahead, block_encoder, given_encoder, train_streaming
from seqjax.data.tokenizers.trained import CharTokenizer, load_tokenizer
from seqjax.data.tokenizers.vocab import EOS_ID, UNK_ID

STALE_SECONDS = 24 * 3600  # a temporary store untouched this long is no live prepare's


def source_files(cfg: DataConfig) -> dict[str, dict[str, SideFile]]:
    """split -> side -> where it is read (`formats.SideFile`): side '' for a text corpus, 'src'
    and 'tgt' for a parallel one, after checking `cfg` (`validate_data_config`) and that its
    corpus has files."""
    validate_data_config(cfg)
    source = source_of(cfg)
    if source.generated:
        kinds = " or ".join(kind for kind, s in SOURCES.items() if not s.generated)
        raise ValueError(f"data.kind must be {kinds} to prepare a token store, got {cfg.kind!r}")
    return {split: source.split_files(cfg, split) for split in SPLITS if getattr(cfg, split)}


def shards_of(files: dict[str, dict[str, SideFile]]) -> list[str]:
    """Every file `source_files` names (a pattern's shards), each once, in order."""
    return list(dict.fromkeys(shard for sides in files.values() for side in sides.values() for shard in side.shards))


def provisional_ids(cfg: DataConfig, model: Any) -> bool:
    """Whether `model` writes provisional ids that a table maps at the end (word, BPE), not its
    own (char level, a pretrained tokenizer)."""
    return cfg.tokenizer != "pretrained" and not isinstance(model, CharTokenizer)


def _write_store(cfg: DataConfig, directory: str, files: dict[str, dict[str, SideFile]], bar: tqdm) -> dict[str, Any]:
    """Writes every array and tokenizer of the store into `directory`; returns the manifest's
    `sources` and `splits` records."""
    paths = shards_of(files)
    digests: dict[str, str] = {}  # path -> sha256 of its content, from the first pass that read all of it

    def blocks(side: SideFile, split: str) -> Iterator[list[str]]:
        # Hashed by a pass that reads the file to its end, whichever comes first: the word tokenizer's
        # training pass reads nothing (its vocabulary comes from the encoding pass). A later pass hashes
        # nothing: a reader that seeks (Parquet) would have its file read again for the hash.
        hashed = None if all(shard in digests for shard in side.shards) else digests.setdefault
        records = shard_blocks(side, cfg.format, name=f"data.{split}", hashed=hashed, progress=bar.update)
        return (side.texts(block) for block in records)

    stats = {path: os.stat(path) for path in paths}
    lm = not source_of(cfg).pairs
    trained: dict[str, Any] = {}
    if cfg.tokenizer == "pretrained":  # given whole: nothing trained, its ids final
        trained[""] = load_tokenizer(pretrained_tokenizer_dir(cfg))
        encoders = {"": given_encoder(trained[""])}
    else:
        for side, file in files["train"].items():
            trained[side], _ = train_streaming(
                cfg.tokenizer, blocks(file, "train"), vocab_size=cfg.vocab_size, min_count=cfg.min_count
            )
        encoders = {side: block_encoder(model) for side, model in trained.items()}
    # side -> (tokenizer, table from the written provisional ids to its ids; None: they are its ids)
    final: dict[str, tuple[Any, np.ndarray | None]] = {
        side: (model, None) for side, model in trained.items() if not provisional_ids(cfg, model)
    }
    splits: dict[str, Any] = {}
    for split, sides in files.items():
        for side, file in sides.items():
            path, model = file.path, trained[side]
            provisional = provisional_ids(cfg, model)
            eos = (EOS_MARK if provisional else EOS_ID) if lm else None
            sink = SplitFiles(directory, f"{split}.{side}" if side else split, eos=eos, keep_text=not lm)
            counts = np.zeros(0, np.int64)
            unknown = 0  # a pretrained tokenizer's ids are final: its unknown tokens are counted as written
            try:
                for lines, staged in ahead(blocks(file, split), encoders[side].stage):
                    ids, lengths = encoders[side].finish(staged)
                    sink.add(lines, ids, lengths)
                    unknown += int(np.count_nonzero(ids == UNK_ID)) if cfg.tokenizer == "pretrained" else 0
                    if provisional and split == "train":
                        block = np.bincount(ids, minlength=model.size)
                        counts = np.pad(counts, (0, len(block) - len(counts))) + block
            finally:
                sink.close()
            if sink.lines == 0:
                raise ValueError(f"data.{split} must hold at least one line, got none in {path!r}")
            if split == "train" and sink.words == 0:
                raise ValueError(
                    f"data.train must hold some non-blank line, got {sink.lines} blank line(s) in {path!r}"
                )
            if provisional and split == "train":
                final[side] = model.tokenizer(np.pad(counts, (0, model.size - len(counts))), sink.lines)
            splits.setdefault(split, {})[side or "text"] = {
                "lines": sink.lines,
                "tokens": sink.tokens,
                "words": sink.words,
                "path": path,
                **({"unknown": unknown} if cfg.tokenizer == "pretrained" else {}),
            }
        if not lm:
            src, tgt = splits[split]["src"], splits[split]["tgt"]
            if src["lines"] != tgt["lines"]:
                raise ValueError(
                    f"parallel files must have equal line counts, got {src['lines']} lines in {src['path']!r} and "
                    f"{tgt['lines']} lines in {tgt['path']!r}"
                )
    for side, (tokenizer, table) in final.items():
        tokenizer.save(os.path.join(directory, "tokenizer_src" if side == "src" else "tokenizer"))
        if table is not None:  # a word first seen after the train split is <unk>
            table = np.pad(table, (0, trained[side].size - len(table)), constant_values=UNK_ID)
        dtype = token_dtype(tokenizer.vocab.size)
        for split in files:
            name = f"{split}.{side}" if side else split
            to_npy(directory, f"{name}.tokens.bin", f"{name}.tokens", np.uint32, dtype, table)
            to_npy(directory, f"{name}.offsets.bin", f"{name}.offsets", np.int64, np.int64)
            if not lm:
                to_npy(directory, f"{name}.lines.bin", f"{name}.lines", np.int64, np.int64)
    if not lm:
        for split in files:
            offsets = [
                np.load(os.path.join(directory, f"{split}.{s}.offsets.npy"), mmap_mode="r") for s in ("src", "tgt")
            ]
            np.save(
                os.path.join(directory, f"{split}.lengths.npy"),
                np.stack([np.diff(o) for o in offsets], 1).astype(np.int32),
            )
    sources = [
        {
            "path": os.path.abspath(p),
            "size": stats[p].st_size,
            "mtime_ns": stats[p].st_mtime_ns,
            "ctime_ns": stats[p].st_ctime_ns,
            "sha256": digests[p],
        }
        for p in paths
    ]
    return {"sources": sources, "splits": splits}


def prepare_store(cfg: DataConfig, directory: str, *, progress: bool = True) -> TokenStore:
    """Tokenizes the corpus of `cfg` into a new store at `directory` (replacing one there).

    Raises:
      ValueError: a bad config or source file (as `load_data`), an empty split, or a full disk
        (no store is left behind).
    """
    files = source_files(cfg)
    config = tokenization_config(cfg, {split: split_path(cfg, split) for split in files})
    parent = os.path.dirname(os.path.abspath(directory))
    os.makedirs(parent, exist_ok=True)
    owner = f"{socket.gethostname()}-{os.getpid()}-"
    temporary = tempfile.mkdtemp(prefix=f"{_temporary_prefix(directory)}{owner}", dir=parent)
    total = sum(os.path.getsize(shard) for sides in files.values() for side in sides.values() for shard in side.shards)
    if cfg.tokenizer in ("char", "bpe"):  # char counts, BPE trains in a first pass over the train files
        total += sum(os.path.getsize(shard) for side in files["train"].values() for shard in side.shards)
    try:
        with tqdm(
            total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="prepare", disable=not progress
        ) as bar:
            record = _write_store(cfg, temporary, files, bar)
        manifest = {
            "format": FORMAT_VERSION,
            "fingerprint": fingerprint(config, record["sources"]),
            "data": config,
            **record,
        }
        with open(os.path.join(temporary, MANIFEST), "w", encoding="utf-8") as file:
            json.dump(manifest, file, indent=2, ensure_ascii=False)
        _move_into_place(temporary, directory, manifest["fingerprint"])
    except OSError as error:
        shutil.rmtree(temporary, ignore_errors=True)
        if error.errno == errno.ENOSPC:
            raise ValueError(
                f"the disk under {parent!r} is full: the token store needs more space; none was left"
            ) from None
        raise
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    return open_store(directory)


def _temporary_prefix(directory: str) -> str:
    return f".{os.path.basename(os.path.abspath(directory))}.tmp-"


def _abandoned(path: str, owner: str) -> bool:
    """Whether the temporary store `path`, made by `owner` ('HOST-PID-random', '.old' after a
    replaced store), belongs to no live prepare: its process is gone (same host) or nothing in
    it changed for STALE_SECONDS."""
    host, _, pid = owner.removesuffix(".old").rpartition("-")[0].rpartition("-")
    if host == socket.gethostname() and pid.isdigit() and int(pid) != os.getpid():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # another user's live process
            pass
        return False
    with os.scandir(path) as entries:
        newest = max([os.stat(path).st_mtime, *(e.stat().st_mtime for e in entries)])
    return time.time() - newest > STALE_SECONDS


def remove_abandoned(directory: str) -> list[str]:
    """Removes the temporary stores of `directory` that killed prepares left (`_abandoned`);
    returns their paths."""
    parent, prefix = os.path.dirname(os.path.abspath(directory)), _temporary_prefix(directory)
    if not os.path.isdir(parent):
        return []
    removed = []
    for name in sorted(os.listdir(parent)):
        path = os.path.join(parent, name)
        try:
            if name.startswith(prefix) and _abandoned(path, name[len(prefix) :]):
                shutil.rmtree(path)
                removed.append(path)
        except FileNotFoundError:  # its own prepare finished or removed it meanwhile
            continue
    return removed


def _move_into_place(temporary: str, directory: str, fingerprint: str) -> None:
    """Renames `temporary` to `directory`. A store there with the same fingerprint (another
    process of the run prepared it meanwhile) is kept and ours dropped, so that a process
    reading it never sees it move; any other is replaced."""
    old = None
    if os.path.exists(directory):
        try:
            there = read_manifest(directory)
            same = there["format"] == FORMAT_VERSION and there.get("fingerprint") == fingerprint
        except ValueError:
            same = False
        if same:
            shutil.rmtree(temporary, ignore_errors=True)
            return
        old = f"{temporary}.old"
        os.rename(directory, old)
    try:
        os.rename(temporary, directory)
    except OSError as error:
        if error.errno not in (errno.ENOTEMPTY, errno.EEXIST):
            raise
        shutil.rmtree(temporary, ignore_errors=True)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def store_location(cfg: DataConfig) -> tuple[str, dict[str, Any]]:
    """Where the store of `cfg` lies (data.store, else in the cache) and the tokenization config
    its manifest must record; no file is read."""
    config = tokenization_config(cfg, {split: split_path(cfg, split) for split in SPLITS if getattr(cfg, split)})
    return (os.path.expanduser(cfg.store) if cfg.store else default_location(config)), config


def existing_store(cfg: DataConfig, fingerprint: str | None = None) -> TokenStore | None:
    """The finished store of `cfg` where `store_location` puts it, whatever became of its
    sources since (a trained run's evaluation reads it with the run's vocabulary); else, given
    a run's store `fingerprint`, the store of that fingerprint at data.store or among the
    cached ones: where the run's corpus went when its relative paths resolved elsewhere
    (another working directory or $SEQJAX_DATA) or its files are gone. None when neither is."""
    directory, config = store_location(cfg)
    store = _finished(directory)
    if store is not None and store.manifest["data"] == config:
        return store
    if fingerprint is None:
        return None
    root = cache_root()
    cached = [] if cfg.store or not os.path.isdir(root) else sorted(os.listdir(root))
    candidates = [directory] + [os.path.join(root, name) for name in cached if name.startswith("store-")]
    return next((s for s in map(_finished, candidates) if s is not None and s.fingerprint == fingerprint), None)


def _finished(directory: str) -> TokenStore | None:
    """The store in `directory` when it is a finished one of this format, else None."""
    try:
        manifest = read_manifest(directory)
    except ValueError:
        return None
    return TokenStore(directory, manifest) if manifest["format"] == FORMAT_VERSION else None


def ensure_store(
    cfg: DataConfig, *, expected: str | None = None, echo: Callable[[str], None] = to_stderr, progress: bool = True
) -> TokenStore:
    """The store of `cfg` (at data.store, else in the cache), prepared if missing, of an older
    format, or made from source files that changed since.

    expected: the fingerprint a resumed run recorded; its store must still hold those ids.

    Raises:
      ValueError: data.store holds something else (no manifest, another data config), or
        `expected` is given and a source file changed (named) or the store holds other ids.
    """
    files = source_files(cfg)
    directory, config = store_location(cfg)
    for path in remove_abandoned(directory):
        echo(f"removed {path}, left by a prepare that was killed")
    why = f"no token store at {directory}"
    if os.path.exists(directory):
        manifest = read_manifest(directory)
        changed = changed_sources(manifest, shards_of(files)) if manifest["format"] == FORMAT_VERSION else []
        if manifest["format"] != FORMAT_VERSION:
            why = f"the token store at {directory} has format {manifest['format']}, not {FORMAT_VERSION}"
        elif manifest["data"] != config:
            diffs = [
                f"{k}: store has {manifest['data'].get(k)!r}, now {v!r}"
                for k, v in config.items()
                if manifest["data"].get(k) != v
            ]
            raise ValueError(f"data.store={directory!r} holds the store of another data config ({'; '.join(diffs)})")
        elif changed and expected is not None:
            raise ValueError(
                f"source file {changed[0]} changed since this run's token store was prepared: the run's ids "
                "would change meaning. Restore the file, or start a new run in another workdir"
            )
        elif changed:
            why = f"source files changed since the token store at {directory} was prepared: {', '.join(changed)}"
        else:
            return _checked(open_store(directory), expected)
    echo(f"{why}: preparing it")
    return _checked(prepare_store(cfg, directory, progress=progress), expected)


def _checked(store: TokenStore, expected: str | None) -> TokenStore:
    if expected is not None and store.fingerprint != expected:
        changed = [s["path"] for s in store.manifest["sources"]]
        raise ValueError(
            f"the token store at {store.path} holds other ids than the ones this run was trained on (fingerprint "
            f"{store.fingerprint[:12]}, the checkpoint has {expected[:12]}): its sources {changed} changed. Restore "
            "them, or start a new run in another workdir"
        )
    return store


def describe_store(store: TokenStore, cfg: DataConfig) -> str:
    """`token store DIR: train 1,000 lines (52,000 tokens), ...; vocabulary 260; fingerprint ...`:
    what `seqjax prepare` prints of the store of `cfg`."""
    counts = ", ".join(
        f"{split} {sum(side['lines'] for side in sides.values()) // len(sides):,} lines "
        f"({sum(side['tokens'] for side in sides.values()):,} tokens)"
        for split, sides in store.manifest["splits"].items()
    )
    sizes = {side: store.tokenizer(side).vocab.size for side in source_of(cfg).sides}
    vocabulary = ", ".join(f"{side} {size:,}".strip() for side, size in sizes.items())
    return f"token store {store.path}: {counts}; vocabulary {vocabulary}; fingerprint {store.fingerprint[:12]}"
