"""Checkpoint files as data: saving and loading state so that loading a file never runs code from it.

Why: a checkpoint written with plain ``torch.save`` pickles whatever the state holds (numpy arrays and
RNG states, dataclasses, whole objects), so loading it needs ``torch.load(weights_only=False)``, which
runs any callable the file names, as the user, on ``wmrl train --resume`` or ``wmrl eval``. A file in a
run directory is not to be trusted that far: it may come from someone else's machine, or have been
written by the code being trained. Here every file is loaded with ``torch.load(weights_only=True)``
and must hold plain containers only: tensors, numbers, strings, bools, ``None``, lists and dicts.

What else a state holds is turned into that form on save and back on load, by tagged dicts: a numpy
array becomes ``{"__wmrl_type__": "numpy.ndarray", "dtype": ..., "shape": ..., "data": tensor or list}``
(numpy's legacy RNG state is a tuple holding one), a numpy scalar keeps its dtype, a tuple (Python's
``random`` state, Adam's ``betas``) stays a tuple. Nothing else is saved: an object that is none of these
is refused on save with :class:`~wmrl_algos.errors.CheckpointError` naming where it sits, so the class
that owns it gives a plain ``state_dict()`` (as every wmrl component does).

A file that holds anything beyond that is refused on load with :class:`CheckpointError`, naming the
file and the code it would have run. Checkpoints of an older wmrl (a format without the
:data:`FORMAT_KEY` marker, which pickled numpy objects) are refused the same way, with a message that
says so and how to go on: they cannot be told apart from a tampered file without running them.
"""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch

from wmrl_algos.errors import CheckpointError

__all__ = [
    "FORMAT_KEY",
    "STATE_FORMAT",
    "from_plain",
    "load_state",
    "save_state",
    "state_bytes",
    "to_plain",
    "write_atomic",
]

FORMAT_KEY = "wmrl_checkpoint_format"
"""The key of the top-level dict of every file :func:`save_state` writes (beside ``"state"``)."""

STATE_FORMAT = 2
"""The file format :func:`save_state` writes (1 was the pickled format of older wmrl versions)."""

_TAG = "__wmrl_type__"
_TAGGED_FIELDS = {
    "tuple": {"items"},
    "numpy.ndarray": {"dtype", "shape", "data"},
    "numpy.scalar": {"dtype", "value"},
}
_PLAIN_SCALARS = (bool, int, float, str)
_NUMPY_KINDS = "biufU"  # bools, signed and unsigned ints, floats, unicode strings
_TENSOR_DTYPES = frozenset(
    np.dtype(name)
    for name in ("bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64")
)
_OLDER_WMRL_MODULES = ("numpy.", "torch.nn.modules.", "wmrl_envs.", "wmrl_algos.", "wmrl_adapters.")
_CONTENTS = "tensors, numbers, strings, bools, None, lists, tuples, dicts and numpy arrays"


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and a rename: a failure leaves the old file intact."""
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(temporary, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    finally:
        if temporary.exists():
            temporary.unlink()


def to_plain(value: Any, where: str = "state") -> Any:
    """``value`` in the plain form a checkpoint holds (see the module doc); :func:`from_plain` inverts it.

    Args:
        value: a state: nested dicts (str or int keys), lists, tuples, tensors, numpy arrays and scalars,
            Python scalars and ``None``.
        where: how to name ``value`` in an error (the key path so far).

    Returns:
        The same state with only tensors, Python scalars, ``None``, lists and dicts in it.

    Raises:
        CheckpointError: something in ``value`` is none of those (the message names where it sits).

    Example:
        >>> plain = to_plain({"rng": ("MT19937", np.arange(2, dtype=np.uint32))})
        >>> restored = from_plain(plain)
        >>> restored["rng"][0], restored["rng"][1].dtype
        ('MT19937', dtype('uint32'))
    """
    if value is None or type(value) in _PLAIN_SCALARS:
        return value
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, np.ndarray) and value.dtype.kind in _NUMPY_KINDS:
        as_tensor = value.dtype in _TENSOR_DTYPES and value.dtype.isnative
        data = torch.from_numpy(np.array(value)) if as_tensor else value.tolist()
        return {_TAG: "numpy.ndarray", "dtype": value.dtype.str, "shape": list(value.shape), "data": data}
    if isinstance(value, np.generic) and value.dtype.kind in _NUMPY_KINDS:
        return {_TAG: "numpy.scalar", "dtype": value.dtype.str, "value": value.item()}
    if type(value) is tuple:  # a named tuple or torch.Size would come back as a bare tuple: refused
        return {_TAG: "tuple", "items": [to_plain(item, f"{where}[{i}]") for i, item in enumerate(value)]}
    if type(value) is list:
        return [to_plain(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, Mapping):
        for key in value:
            if type(key) not in (str, int) or key == _TAG:
                raise CheckpointError(
                    f"cannot save {where}: its key {key!r} is not a str or int (or is the reserved "
                    f"{_TAG!r}); give the object a state_dict() with str or int keys"
                )
        return {key: to_plain(item, f"{where}[{key!r}]") for key, item in value.items()}
    raise CheckpointError(
        f"cannot save {where}: it is a {type(value).__module__}.{type(value).__qualname__}, and a checkpoint "
        f"holds only {_CONTENTS} (so that loading it can run no code); save its state_dict() instead"
    )


def from_plain(value: Any, where: str = "state") -> Any:
    """Invert :func:`to_plain`, checking that ``value`` holds nothing else.

    Raises:
        CheckpointError: ``value`` holds a type or a tagged dict that :func:`to_plain` never writes.
    """
    if value is None or type(value) in _PLAIN_SCALARS or isinstance(value, torch.Tensor):
        return value
    if type(value) is list:
        return [from_plain(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if type(value) is not dict:
        raise CheckpointError(f"{where} is a {type(value).__qualname__}, which a wmrl checkpoint never holds")
    if _TAG in value:
        return _from_tagged(value, where)
    for key in value:
        if type(key) not in (str, int):
            raise CheckpointError(f"{where} has the key {key!r}; a wmrl checkpoint has only str and int keys")
    return {key: from_plain(item, f"{where}[{key!r}]") for key, item in value.items()}


def _from_tagged(value: dict[Any, Any], where: str) -> Any:
    tag = value[_TAG]
    if tag not in _TAGGED_FIELDS or set(value) != {_TAG, *_TAGGED_FIELDS[tag]}:
        raise CheckpointError(
            f"{where} is a tagged value {sorted(value, key=str)} of type {tag!r} that wmrl never writes"
        )
    if tag == "tuple":
        if type(value["items"]) is not list:
            raise CheckpointError(
                f"{where}: a tuple's items must be a list, not {type(value['items']).__qualname__}"
            )
        return tuple(from_plain(value["items"], where))
    try:
        dtype = np.dtype(value["dtype"])
        if dtype.kind not in _NUMPY_KINDS:
            raise TypeError(f"dtype {dtype} is not one of the kinds {_NUMPY_KINDS!r}")
        if tag == "numpy.scalar":
            if type(value["value"]) not in _PLAIN_SCALARS:
                raise TypeError(f"the value is a {type(value['value']).__qualname__}")
            return dtype.type(value["value"])
        data, shape = value["data"], value["shape"]
        if type(shape) is not list or any(type(size) is not int for size in shape):
            raise TypeError(f"the shape {shape!r} is not a list of ints")
        values = data.numpy() if isinstance(data, torch.Tensor) else from_plain(data, where)
        return np.array(values, dtype=dtype).reshape(shape)
    except (TypeError, ValueError) as error:
        raise CheckpointError(f"{where} is not a valid saved numpy value ({error})") from error


def state_bytes(state: Mapping[str, Any]) -> bytes:
    """The bytes of a checkpoint file holding ``state`` (what :func:`save_state` writes).

    Raises:
        CheckpointError: ``state`` holds an object that is not plain data (see :func:`to_plain`).
    """
    buffer = io.BytesIO()
    torch.save({FORMAT_KEY: STATE_FORMAT, "state": to_plain(state)}, buffer)
    return buffer.getvalue()


def save_state(path: Path, state: Mapping[str, Any]) -> None:
    """Write ``state`` to ``path`` atomically, in the format :func:`load_state` reads.

    Raises:
        CheckpointError: ``state`` holds an object that is not plain data (see :func:`to_plain`).
    """
    write_atomic(Path(path), state_bytes(state))


def load_state(path: Path, *, if_older: str) -> dict[str, Any]:
    """Load the state :func:`save_state` wrote to ``path``, running no code from the file.

    Args:
        path: the checkpoint file.
        if_older: what the user can do when the file is a checkpoint of an older wmrl (it is refused).

    Returns:
        The state as it was saved (numpy arrays, numpy scalars and tuples restored).

    Raises:
        CheckpointError: the file is torn or not a checkpoint, holds objects beyond plain data (the
            message names them: an older wmrl's checkpoint, or a tampered file), or torch is too old to
            load it safely.
    """
    path = Path(path)
    if torch.__version__ < "2.6":
        raise CheckpointError(
            f"torch {torch.__version__} cannot load {path} safely: before torch 2.6, weights_only loading "
            "could still run code from the file (CVE-2025-32434); upgrade with pip install 'torch>=2.6'"
        )
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        raise CheckpointError(_refusal(path, error, if_older)) from None
    except Exception as error:  # a torn or foreign file: say which, never guess
        raise CheckpointError(
            f"cannot read checkpoint {path} ({error}); it is torn or not a checkpoint"
        ) from error
    if (
        type(saved) is not dict
        or saved.get(FORMAT_KEY) != STATE_FORMAT
        or set(saved) != {FORMAT_KEY, "state"}
    ):
        found = saved.get(FORMAT_KEY) if type(saved) is dict else None
        raise CheckpointError(
            f"refusing {path}: it is not a wmrl checkpoint of format {STATE_FORMAT} (its {FORMAT_KEY} is "
            f"{found!r}); if an older wmrl wrote it, it cannot be loaded safely: {if_older}"
        )
    state = from_plain(saved["state"], f"{path}: state")
    if type(state) is not dict:
        raise CheckpointError(f"refusing {path}: its state is a {type(state).__qualname__}, not a dict")
    return state


def _refusal(path: Path, error: pickle.UnpicklingError, if_older: str) -> str:
    """Why ``torch.load(weights_only=True)`` refused ``path``, found without running anything in it."""
    try:
        names = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception:  # not a zip checkpoint: a torn file, or a bare pickle
        return f"cannot read checkpoint {path}: it is torn or not a torch checkpoint ({str(error)[:200]})"
    if names and all(name.startswith(_OLDER_WMRL_MODULES) for name in names):
        return (
            f"refusing {path}: it pickles Python objects ({', '.join(names)}), as checkpoints of older wmrl "
            f"versions did, and loading it would run code stored in the file; {if_older}"
        )
    named = ", ".join(names) if names else "objects built while loading"
    return (
        f"refusing {path}: loading it would call {named}, code that a wmrl checkpoint never holds; the file "
        "was not written by wmrl or has been tampered with (nothing from it was run)"
    )
