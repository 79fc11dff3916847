"""The package's shape, held to DESIGN.md's rules: no module over 800 lines, no function over 100,
no import cycle (imports inside functions counted, ``if TYPE_CHECKING:`` ones not), no
definition that nothing names.

Each test lists what breaks its rule, so a failure says where to look. The same figures print
with ``python tests/test_structure.py``.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "src" / "rlvitals"
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 100


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    out: dict[str, Path] = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def long_modules() -> list[str]:
    found = []
    for path in _modules().values():
        lines = path.read_text(encoding="utf-8").count("\n")
        if lines > MAX_MODULE_LINES:
            found.append(f"{path.relative_to(ROOT)}: {lines} lines")
    return found


def long_functions() -> list[str]:
    found = []
    for path in _modules().values():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {n} lines")
    return found


def _type_checking_only(tree: ast.Module) -> set[int]:
    """Line numbers of imports under ``if TYPE_CHECKING:`` (they never run)."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                for sub in ast.walk(inner):
                    if isinstance(sub, (ast.Import, ast.ImportFrom)):
                        lines.add(sub.lineno)
    return lines


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, at import time or inside a function."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _type_checking_only(tree)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    stem = ".".join(base + ([node.module] if node.module else []))
                else:
                    stem = node.module or ""
                for alias in node.names:
                    sub = f"{stem}.{alias.name}"
                    targets.append(sub if sub in modules else stem)
            for t in targets:
                while t and t not in modules and "." in t:
                    t = t.rpartition(".")[0]
                if t in modules and t != name:
                    graph[name].add(t)
    return graph


def import_cycles() -> list[str]:
    """Each strongly connected group of two or more modules (Tarjan), as one line."""
    graph = import_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    # ~200 modules deep at most: a deeper recursion than the default, restored after (a raised
    # limit left behind lets other tests' deeply nested JSON decode instead of being caught).
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 10_000))
    try:
        for v in sorted(graph):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(old)
    return [" <-> ".join(g) for g in groups]


def _definitions(path: Path) -> list[tuple[str, int]]:
    """Top-level functions, classes and constants, and methods, as (name, line)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[tuple[str, int]] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.append((node.name, node.lineno))
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        out.append((item.name, item.lineno))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    out.append((t.id, node.lineno))
    return [(n, ln) for n, ln in out if not (n.startswith("__") and n.endswith("__"))]


def _code_text(path: Path) -> str:
    """A Python file's text without its comments and docstrings: a name that only a docstring
    mentions is not used. Other strings stay (``getattr(module, "name")``, lazy tables)."""
    import io
    import tokenize

    source = path.read_text(encoding="utf-8", errors="replace")
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return source
    docstrings: set[tuple[int, int]] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            value = first.value if isinstance(first, ast.Expr) else None
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                docstrings.add((value.lineno, value.col_offset))
    kept = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            continue
        if tok.type == tokenize.STRING and tok.start in docstrings:
            continue
        kept.append(tok.string)
    return " ".join(kept)


def dead_definitions() -> list[str]:
    """Definitions whose name appears nowhere else: not in the code of src, tests, benchmarks,
    examples and scripts (comments and docstrings left out), nor in docs, the README or
    pyproject.toml (entry points). A name that is only listed in ``__all__`` counts as dead."""
    texts: list[str] = []
    for folder in ("src", "tests", "benchmarks", "docs", "examples", "scripts"):
        for path in sorted((ROOT / folder).rglob("*")):
            wanted = path.suffix in {".py", ".md", ".toml", ".js", ".html", ".txt"}
            if wanted and path.is_file() and path.resolve() != Path(__file__).resolve():
                if path.suffix == ".py":
                    texts.append(_code_text(path))
                else:
                    texts.append(path.read_text(encoding="utf-8", errors="replace"))
    texts.append((ROOT / "README.md").read_text(encoding="utf-8"))
    texts.append((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    corpus = "\n".join(texts)
    # A name listed in __all__ is written, not used: take those lists out before counting.
    corpus = re.sub(r"__all__\s*=\s*\[[^\]]*\]", "", corpus)
    counts: dict[str, int] = {}
    for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", corpus):
        counts[word] = counts.get(word, 0) + 1
    found = []
    for path in _modules().values():
        for name, line in _definitions(path):
            if name.startswith("test_") or name in {"main", "setUp", "tearDown"}:
                continue
            if counts.get(name, 0) <= 1 and name not in _CALLED_BY_OTHERS:  # only its definition
                found.append(f"{path.relative_to(ROOT)}:{line} {name}")
    return found


# Names other libraries call (TRL's callback, uvicorn's server, starlette's router, Python's
# module __getattr__ and __exit__, pickle's Unpickler hooks), not dead though nothing of ours
# names them.
_CALLED_BY_OTHERS = {
    "__getattr__",
    "find_class",
    "persistent_load",
    "on_step_begin",
    "should_training_stop",
    "redirect_slashes",
    "should_exit",
    "exc_type",
    "exc",
    "tb",
}


def unused_by_vulture() -> list[str]:
    """What vulture (60% confidence and up) finds unused in src/, reading tests, benchmarks and
    examples as users of it."""
    import vulture

    v = vulture.Vulture(ignore_names=sorted(_CALLED_BY_OTHERS))
    v.scavenge([str(ROOT / d) for d in ("src", "tests", "benchmarks", "examples")])
    found = []
    for item in v.get_unused_code(min_confidence=60):
        path = Path(item.filename).resolve()
        if PKG in path.parents:
            found.append(f"{path.relative_to(ROOT)}:{item.first_lineno} {item.name}")
    return found


def dead() -> list[str]:
    """Both measures together, each definition once."""
    return sorted(set(dead_definitions()) | set(unused_by_vulture()))


def test_no_module_over_800_lines() -> None:
    assert long_modules() == []


def test_no_function_over_100_lines() -> None:
    assert long_functions() == []


def test_no_import_cycle() -> None:
    assert import_cycles() == []


def test_no_dead_definition() -> None:
    assert dead() == []


if __name__ == "__main__":
    for title, found in (
        ("modules over 800 lines", long_modules()),
        ("functions over 100 lines", long_functions()),
        ("import cycles", import_cycles()),
        ("dead definitions", dead()),
    ):
        print(f"{title}: {len(found)}")
        for line in found:
            print(f"  {line}")
