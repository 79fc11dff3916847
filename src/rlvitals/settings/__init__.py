"""The run's own settings: what it wrote about how it sampled and trained (``RunSettings``).

``settings_of(data)`` reads them once per run and keeps them on ``data.settings``: the config a
reader already holds (``run.json``, a tracker's run config: ``data.info["config"]``), then the
config files the framework writes beside its logs (``files.py``), then a console log's own
head (verl prints its resolved config). Each setting keeps the first file that says it, with
the key; what none says stays None and is listed by ``missing()``. A file that cannot be read
is one line in ``problems``, never an error: the checks judge without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .model import FIELD_HELP, RunSettings, Setting, norm_dtype

if TYPE_CHECKING:
    from ..model import RunData

__all__ = ["FIELD_HELP", "RunSettings", "Setting", "norm_dtype", "read_settings", "settings_of"]

# Package names (as pip lists them) of each framework, for its version.
_PACKAGES = {
    "trl": "trl",
    "verl": "verl",
    "openrlhf": "openrlhf",
    "prime-rl": "prime-rl",
    "nemo-rl": "nemo-rl",
}


def _flat(doc: dict[str, Any]) -> dict[str, Any]:
    from ..readers.base import flatten

    # A tracker that flattens a nested config with "/" (MLflow params) reads as dots.
    return {k.replace("/", "."): v for k, v in flatten(_namespaces(doc), ".")}


def _namespaces(node: Any, depth: int = 0) -> Any:
    """``node`` with every ``namespace(a=1, b=namespace(...))`` string (how W&B stores a
    ``SimpleNamespace`` or ``argparse.Namespace`` nested in a run config: OpenRLHF's
    ``config=args.__dict__`` after ``hierarchize``) read back into a dict."""
    if isinstance(node, dict) and depth < 20:
        return {k: _namespaces(v, depth + 1) for k, v in node.items()}
    if (
        isinstance(node, str)
        and node.startswith(("Namespace(", "namespace("))
        and node.endswith(")")
    ):
        import ast

        try:
            tree = ast.parse(node, mode="eval").body
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return node
        got = _call(tree)
        return node if got is None else got
    return node


def _call(tree: Any) -> dict[str, Any] | None:
    import ast

    if not (
        isinstance(tree, ast.Call)
        and isinstance(tree.func, ast.Name)
        and tree.func.id in ("Namespace", "namespace")
        and not tree.args
    ):
        return None
    out: dict[str, Any] = {}
    for kw in tree.keywords:
        if kw.arg is None:
            return None
        sub = _call(kw.value)
        if sub is not None:
            out[kw.arg] = sub
            continue
        try:
            out[kw.arg] = ast.literal_eval(kw.value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            out[kw.arg] = None
    return out


def read_settings(
    config: dict[str, Any] | None,
    source: str | Path | None,
    versions: dict[str, str] | None = None,
) -> RunSettings:
    """Settings from a run's config (``config``: what its reader holds) and the files beside
    ``source`` (a log file or run folder); ``versions``: package versions the run recorded."""
    from . import files
    from .frameworks import apply

    s = RunSettings()
    framework: str | None = None
    if isinstance(config, dict) and config:
        framework = apply(s, _flat(config), "the run's config")
    path = Path(source) if source is not None else None
    packages: dict[str, str] = dict(versions or {})
    where: dict[str, str] = dict.fromkeys(packages, "the run's versions")
    if path is not None and path.exists():
        base = path if path.is_dir() else path.parent
        for d in (base, base.parent):
            card = files.card_versions(d / "README.md")
            where.update({k: str(d / "README.md") for k in card if k not in packages})
            packages = {**card, **packages}
        for f in files.candidate_files(path):
            if f.name == "config.yaml" and f.parent.name == "files":
                reqs = files.versions(f.parent / "requirements.txt")
                where.update(dict.fromkeys(reqs, str(f.parent / "requirements.txt")))
                packages.update(reqs)
            try:
                doc = files.load_config_file(f)
            except (OSError, ValueError) as exc:
                s.problems.append(f"{f}: not read ({exc})")
                continue
            got = apply(s, _flat(doc), str(f), None)
            if got is not None:
                s.files.append(str(f))
                framework = framework or got
        for log in files.console_logs(path):
            doc2 = files.console_config(log)
            if doc2 is not None:
                got = apply(s, _flat(doc2), f"{log} (the config it prints at start)")
                if got is not None:
                    s.files.append(str(log))
                    framework = framework or got
    if framework is not None:
        pkg = _PACKAGES.get(framework)
        if pkg and pkg in packages:
            s.set("framework_version", packages[pkg], pkg, where.get(pkg, "?"))
    s.packages = packages
    return s


def settings_of(data: RunData) -> RunSettings:
    """The settings of ``data``, read once and kept on ``data.settings`` (read again when the
    run's config grows, as a live tracker run's does)."""
    cfg = data.info.get("config")
    key = len(cfg) if isinstance(cfg, dict) else -1
    got = data.settings
    if got is not None and data.__dict__.get("_settings_key", key) == key:
        return got  # read already, or given by the reader or the caller
    versions = data.info.get("versions")
    vers = (
        {str(k).lower(): str(v) for k, v in versions.items()} if isinstance(versions, dict) else {}
    )
    source: str | None = data.source
    if source and "://" in source:
        source = None  # a remote run: its reader's mirror holds the logs only
    s = read_settings(cfg if isinstance(cfg, dict) else None, source, vers)
    data.settings = s
    data.__dict__["_settings_key"] = key
    return s
