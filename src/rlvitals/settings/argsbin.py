"""HF Trainer's ``training_args.bin`` read as data, without running anything in it.

``Trainer._save`` writes ``torch.save(self.args, ...)``: a zip holding ``<name>/data.pkl``, a
pickle of the ``TrainingArguments`` subclass (TRL's ``GRPOConfig``...): the class by name,
its fields as a dict, enums rebuilt from their value (``IntervalStrategy("steps")``), nested
dataclasses (``AcceleratorConfig``), a ``torch.device``. Unpickling it with ``pickle`` or
``torch.load`` would import those classes and call them. Here every class the pickle names is
replaced by an inert stand-in that only records what it was given, so the file yields a plain
dict of its fields and nothing it names is imported or called; a pickle asking for anything
else (a persistent id, an extension code) is refused.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path
from typing import Any

__all__ = ["read_training_args"]

MAX_PICKLE_BYTES = 4 << 20


class _Inert:
    """An object the pickle built: its class name, call arguments and state."""

    __slots__ = ("args", "kind", "state")

    def __init__(self, kind: str, args: tuple[Any, ...] = ()) -> None:
        self.kind = kind
        self.args = args
        self.state: Any = None

    def __setstate__(self, state: Any) -> None:
        self.state = state


def _stand_in(module: str, name: str) -> type:
    """A class named like ``module.name`` whose construction and calls record, never run."""
    kind = f"{module}.{name}"

    def make(cls: type, *args: Any, **kwargs: Any) -> _Inert:
        return _Inert(kind, args)

    return type(name, (), {"__new__": make})


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        return _stand_in(module, name)

    def persistent_load(self, pid: Any) -> Any:
        raise pickle.UnpicklingError("a tensor storage, not training arguments")


def _plain(obj: Any, depth: int = 0) -> Any:
    """The stand-ins as plain values: an enum its value, an object its state dict."""
    if depth > 20:
        return None
    if isinstance(obj, _Inert):
        if isinstance(obj.state, dict):
            return {str(k): _plain(v, depth + 1) for k, v in obj.state.items()}
        if len(obj.args) == 1 and isinstance(obj.args[0], (str, int, float, bool)):
            return obj.args[0]  # an enum member or a device, rebuilt from its value
        return obj.kind
    if isinstance(obj, dict):
        return {str(k): _plain(v, depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v, depth + 1) for v in obj]
    if obj is None or isinstance(obj, (str, int, float, bool)):
        return obj
    return str(obj)


def read_training_args(path: Path) -> dict[str, Any]:
    """The fields of the ``TrainingArguments`` pickled in ``path`` (a ``torch.save`` zip or a
    bare pickle), as a plain dict, plus ``_class`` (the class it was). Raises ValueError."""
    raw = path.read_bytes()
    if zipfile.is_zipfile(io.BytesIO(raw)):
        with zipfile.ZipFile(io.BytesIO(raw)) as z:
            names = [n for n in z.namelist() if n.endswith("data.pkl")]
            if not names:
                raise ValueError("a zip without data.pkl: not torch.save output")
            info = z.getinfo(names[0])
            if info.file_size > MAX_PICKLE_BYTES:
                raise ValueError(f"data.pkl of {info.file_size} bytes: not training arguments")
            raw = z.read(names[0])
    if len(raw) > MAX_PICKLE_BYTES:
        raise ValueError(f"{len(raw)} bytes: not training arguments")
    try:
        obj = _SafeUnpickler(io.BytesIO(raw)).load()
    except (
        pickle.UnpicklingError,
        EOFError,
        ValueError,
        TypeError,
        AttributeError,
        IndexError,
        KeyError,
        MemoryError,
        RecursionError,
    ) as exc:
        raise ValueError(f"not a pickle of training arguments ({exc})") from None
    if not isinstance(obj, _Inert) or not isinstance(obj.state, dict):
        raise ValueError("the pickle holds no training arguments")
    out = _plain(obj)
    out["_class"] = obj.kind
    return out
