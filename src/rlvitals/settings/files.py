"""Finding and reading the files a run wrote about its own settings.

Where each framework puts them, relative to the logs rlvitals reads (a log file's folder and
the one above it; a run folder and the one above it):

- ``.hydra/config.yaml`` (Hydra, verl), ``config.yaml`` beside the log;
- ``configs/{trainer,orchestrator,inference}.toml`` and ``rl.toml`` (prime-rl's output dir);
- ``checkpoint-*/training_args.bin`` and ``training_args.bin`` (HF Trainer, TRL), the newest;
- ``step_*/config.yaml`` and ``checkpoints/step_*/config.yaml`` (NeMo-RL), the newest;
- ``files/config.yaml`` and ``files/requirements.txt`` (a W&B run folder);
- a console log's own head: verl prints its resolved config as a Python dict at start
  (``verl/trainer/main_ppo.py``: ``pprint(OmegaConf.to_container(config, resolve=True))``).

YAML interpolations (``${a.b}``, ``${.x}``, ``${oc.select:a.b,default}``) are resolved within
the file; one that cannot be (``${oc.env:...}``, a custom resolver) stays unresolved and its
setting unsaid. ``training_args.bin`` is a pickle: it is read by ``argsbin.py`` without
importing or running anything it names.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path
from typing import Any

from ..readers.base import flatten, head_bytes

__all__ = [
    "candidate_files",
    "card_versions",
    "console_config",
    "console_logs",
    "load_config_file",
    "resolve",
    "versions",
]

MAX_CONFIG_BYTES = 8 << 20  # a config file past this is not one
CONSOLE_HEAD = 4 << 20  # a console log's config dict is printed at its start
_SUBCONFIGS = ("trainer", "orchestrator", "inference")


def _newest(paths: list[Path]) -> Path | None:
    """The path of the highest step number in its name (checkpoint-250 after checkpoint-40)."""

    def num(p: Path) -> int:
        digits = re.findall(r"\d+", p.parent.name if p.parent.name else p.name)
        return int(digits[-1]) if digits else -1

    return max(paths, key=num) if paths else None


def candidate_files(source: Path) -> list[Path]:
    """Config files the run at ``source`` (a file or folder) may have written, nearest
    first: the folder itself before the one above."""
    base = source if source.is_dir() else source.parent
    out: list[Path] = []
    for d in (base, base.parent):
        if not d.is_dir():
            continue
        for rel in (
            ".hydra/config.yaml",
            "config.yaml",
            "rl.toml",
            "training_args.bin",
            "files/config.yaml",
        ):
            p = d / rel
            if p.is_file():
                out.append(p)
        for sub in ("configs", "."):
            for name in _SUBCONFIGS:
                p = d / sub / f"{name}.toml"
                if p.is_file():
                    out.append(p)
        for pattern in (
            "checkpoint-*/training_args.bin",
            "step_*/config.yaml",
            "checkpoints/step_*/config.yaml",
        ):
            got = _newest(sorted(d.glob(pattern)))
            if got is not None:
                out.append(got)
    seen: set[Path] = set()
    return [p for p in out if not (p.resolve() in seen or seen.add(p.resolve()))]  # type: ignore[func-returns-value]


def load_config_file(path: Path) -> dict[str, Any]:
    """The config a file holds, as a nested dict: YAML (interpolations resolved), TOML (a
    prime-rl sub-config nested under its name), a W&B ``config.yaml`` (each key's
    ``value``), HF's ``training_args.bin``. Raises ValueError with what was wrong."""
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise ValueError(f"{size} bytes, more than a config holds")
    if path.suffix == ".bin":
        from .argsbin import read_training_args

        return read_training_args(path)
    text = path.read_bytes().decode("utf-8", errors="replace")
    if path.suffix == ".toml":
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"not TOML ({exc})") from None
        if path.stem in _SUBCONFIGS:
            return {path.stem: doc}
        return doc
    doc = _yaml(text)
    if path.parent.name == "files" and isinstance(doc, dict):
        doc = {
            k: v.get("value") if isinstance(v, dict) and "value" in v else v
            for k, v in doc.items()
            if k != "_wandb"
        }
    return resolve(doc)


def _yaml(text: str) -> dict[str, Any]:
    try:
        import yaml
    except ImportError:  # pragma: no cover - pyyaml is a dependency
        raise ValueError("PyYAML is not installed (pip install pyyaml)") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ValueError(f"not YAML{where}") from None
    if not isinstance(doc, dict):
        raise ValueError("expected a mapping at its top level")
    return doc


_INTERP = re.compile(r"\$\{([^${}]*)\}")


def resolve(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with OmegaConf interpolations resolved where they name keys of ``doc``:
    ``${a.b}``, ``${.sibling}``, ``${oc.select:a.b,default}``; others left as written."""
    flat = dict(flatten(doc, "."))

    def lookup(expr: str, here: str, depth: int) -> tuple[bool, Any]:
        expr = expr.strip()
        default: Any = None
        has_default = False
        if expr.startswith("oc.select:"):
            expr, _, d = expr[len("oc.select:") :].partition(",")
            has_default = bool(_)
            default = _literal(d.strip())
        elif ":" in expr:
            return False, None
        if expr.startswith("."):
            parent = here.rsplit(".", 1)[0] if "." in here else ""
            dots = len(expr) - len(expr.lstrip("."))
            for _ in range(dots - 1):
                parent = parent.rsplit(".", 1)[0] if "." in parent else ""
            expr = f"{parent}.{expr.lstrip('.')}" if parent else expr.lstrip(".")
        if expr in flat:
            return True, value(flat[expr], expr, depth + 1)
        return (True, default) if has_default else (False, None)

    def value(v: Any, here: str, depth: int) -> Any:
        if not isinstance(v, str) or "${" not in v or depth > 8:
            return v
        whole = _INTERP.fullmatch(v.strip())
        if whole:
            ok, got = lookup(whole.group(1), here, depth)
            return got if ok else v
        return v

    return _nest({k: value(v, k, 0) for k, v in flat.items()})


def _literal(text: str) -> Any:
    if text in ("null", "None", ""):
        return None
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, v in flat.items():
        node = out
        parts = key.split(".")
        for p in parts[:-1]:
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):
                break
            node = nxt
        else:
            node[parts[-1]] = v
    return out


# A console line's prefix: Ray's actor tag, ANSI colours.
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_RAY = re.compile(r"^\s*\([A-Za-z_][\w.]*(?: pid=\d+[^)]*)?\)\s?")
_START = re.compile(r"^\{'(actor_rollout_ref|algorithm|data)':")


_LOG_SUFFIXES = (".log", ".txt", ".out", ".err")


def console_logs(source: Path, most: int = 8) -> list[Path]:
    """The console logs whose head may print the run's config: ``source`` itself (a file),
    else the logs directly in the folder (at most ``most``, by name)."""
    if source.is_file():
        return [source]
    try:
        found = sorted(p for p in source.iterdir() if p.suffix in _LOG_SUFFIXES and p.is_file())
    except OSError:
        return []
    return found[:most]


def console_config(path: Path) -> dict[str, Any] | None:
    """The config dict a console log prints at its start (verl's ``main_ppo.py``: the
    resolved config, ``pprint``-ed, each line under Ray's actor prefix), or None."""
    head = head_bytes(path, CONSOLE_HEAD)
    if b"{'" not in head:
        return None
    lines = head.decode("utf-8", errors="replace").splitlines()
    for i, raw in enumerate(lines):
        line = _RAY.sub("", _ANSI.sub("", raw))
        if not _START.match(line):
            continue
        parts = [line]
        for more in lines[i + 1 : i + 20000]:
            parts.append(_RAY.sub("", _ANSI.sub("", more)))
            text = "\n".join(parts)
            if parts[-1].rstrip().endswith("}"):
                try:
                    got = ast.literal_eval(text)
                except (ValueError, SyntaxError, MemoryError, RecursionError):
                    continue
                return got if isinstance(got, dict) else None
        return None
    return None


_CARD = re.compile(r"^- (TRL|Transformers|Pytorch): (\S+)\s*$", re.M)


def card_versions(path: Path) -> dict[str, str]:
    """The versions a TRL model card lists (``README.md`` beside the checkpoints, TRL's
    ``templates/lm_model_card.md``: "### Framework versions", ``- TRL: 0.27.2``)."""
    try:
        text = head_bytes(path, 1 << 16).decode("utf-8", errors="replace")
    except OSError:
        return {}
    if "### Framework versions" not in text:
        return {}
    return {
        m.group(1).lower().replace("pytorch", "torch"): m.group(2) for m in _CARD.finditer(text)
    }


def versions(path: Path) -> dict[str, str]:
    """Package versions a W&B run folder lists (``files/requirements.txt``: ``name==x.y``),
    lower-cased names, ``_`` as ``-``."""
    out: dict[str, str] = {}
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return out
    for line in text.splitlines()[:5000]:
        name, sep, ver = line.strip().partition("==")
        if sep and name and ver:
            out[name.strip().lower().replace("_", "-")] = ver.strip()
    return out
