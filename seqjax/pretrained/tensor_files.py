"""Hugging Face checkpoint files on disk: `config.json` and safetensors weights, read and written
with numpy alone (bfloat16 through `ml_dtypes`, which JAX already needs).

A safetensors file is an 8-byte little-endian header length, a JSON header naming each
tensor's dtype, shape and byte range, then the raw little-endian bytes. A sharded checkpoint
has `model.safetensors.index.json`, whose `weight_map` names the shard of each tensor.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

import ml_dtypes
import numpy as np

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
DTYPES = {
    "F64": np.dtype(np.float64),
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "I64": np.dtype(np.int64),
    "I32": np.dtype(np.int32),
    "U8": np.dtype(np.uint8),
    "BOOL": np.dtype(np.bool_),
}
NAMES = {dtype: name for name, dtype in DTYPES.items()}


def read_json(path: str) -> dict[str, Any]:
    """The JSON object in `path`, or ValueError naming the file."""
    try:
        with open(path, encoding="utf-8") as file:
            value = json.load(file)
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} must be a readable JSON file, got: {error}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} must hold a JSON object, got {type(value).__name__}")
    return value


def read_safetensors(path: str) -> dict[str, np.ndarray]:
    """Every tensor of one safetensors file, as numpy arrays of the file's dtypes."""
    with open(path, "rb") as file:
        raw = file.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path} is not a safetensors file: shorter than its 8-byte header length")
        (length,) = struct.unpack("<Q", raw)
        try:
            header = json.loads(file.read(length))
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ValueError(f"{path} is not a safetensors file: its header is not JSON") from None
        data = file.read()
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if entry["dtype"] not in DTYPES:
            raise ValueError(f"tensor {name} in {path} has dtype {entry['dtype']}, not one of {', '.join(DTYPES)}")
        begin, end = entry["data_offsets"]
        dtype = DTYPES[entry["dtype"]].newbyteorder("<")
        tensors[name] = np.frombuffer(data[begin:end], dtype).reshape(entry["shape"]).astype(dtype.newbyteorder("="))
    return tensors


def write_safetensors(path: str, tensors: dict[str, np.ndarray]) -> None:
    """Writes `tensors` (name -> array of a dtype in `DTYPES`) as one safetensors file, in name
    order, with the `{"format": "pt"}` metadata `transformers` looks for."""
    header: dict[str, Any] = {"__metadata__": {"format": "pt"}}
    offset, blobs = 0, []
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name])
        blob = array.astype(array.dtype.newbyteorder("<")).tobytes()
        header[name] = {
            "dtype": NAMES[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        offset += len(blob)
        blobs.append(blob)
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as file:
        file.write(struct.pack("<Q", len(encoded)) + encoded)
        for blob in blobs:
            file.write(blob)


def read_checkpoint(directory: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(config.json, every weight) of a Hugging Face checkpoint directory: `model.safetensors`,
    or the shards its `model.safetensors.index.json` names."""
    if not os.path.isdir(directory):
        raise ValueError(f"checkpoint directory {directory!r} does not exist")
    config_path = os.path.join(directory, CONFIG_FILE)
    if not os.path.isfile(config_path):
        raise ValueError(f"checkpoint directory {directory!r} must hold {CONFIG_FILE}, missing")
    config = read_json(config_path)
    index_path, single = os.path.join(directory, INDEX_FILE), os.path.join(directory, WEIGHTS_FILE)
    if os.path.isfile(index_path):
        weight_map = read_json(index_path).get("weight_map")
        if not isinstance(weight_map, dict):
            raise ValueError(f"{index_path} must hold a 'weight_map' of tensor name -> shard file")
        tensors: dict[str, np.ndarray] = {}
        for shard in sorted(set(weight_map.values())):
            shard_path = os.path.join(directory, shard)
            if not os.path.isfile(shard_path):
                raise ValueError(f"shard {shard!r} named in {index_path} is missing")
            tensors.update(read_safetensors(shard_path))
        return config, tensors
    if os.path.isfile(single):
        return config, read_safetensors(single)
    found = sorted(os.listdir(directory))
    raise ValueError(
        f"checkpoint directory {directory!r} must hold {WEIGHTS_FILE} or {INDEX_FILE} with its shards (safetensors; "
        f"a torch .bin checkpoint is not read: save it with safe_serialization=True), found {found}"
    )
