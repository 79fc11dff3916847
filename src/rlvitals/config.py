"""The run config: TOML sections and keys from the seeds, typed, defaulted, validated.

Config is data: one dataclass per section, each field with its default and help text. Loading
checks every section and key and says, for a bad one, which section and key and what was
expected. The whole resolved config is written into ``run.json``.

A training loop with sections of its own (the reference trainer's ``[model]``, ``[task]``,
``[optim]``) passes them as ``sections=`` and gets them validated the same way.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import ConfigError

__all__ = [
    "Config",
    "OutputConfig",
    "RolloutConfig",
    "TrainingConfig",
    "load_config",
    "option",
    "reference",
    "reference_markdown",
]


def option(default: Any, help: str, *, minimum: float | None = None, **kw: Any) -> Any:
    """A config field: its default, its help text and an optional lower bound."""
    return field(default=default, metadata={"help": help, "minimum": minimum, **kw})


@dataclass
class OutputConfig:
    """Where and what the run writes."""

    output_dir: str = option("runs", "parent directory of run directories")
    name: str | None = option(
        None, "the run directory's name; a unique time-stamped name when unset"
    )
    trace: Literal["full", "samples"] = option(
        "full",
        'transcripts: "full" keeps every generation\'s text, "samples" only identity, '
        "policy version and lengths (about 1% of the size)",
    )
    wandb_project: str | None = option(
        None, "mirror every step record to this Weights & Biases project (needs the wandb extra)"
    )
    progress_every_seconds: float | None = option(
        None,
        "write a heartbeat to progress.jsonl and the log this often between updates, so a slow "
        "phase does not look like a stall",
        minimum=0.01,
    )
    sampler_checkpoint_every: int | None = option(
        None,
        "save a sampler checkpoint every this many updates, to be scored on held-out tasks",
        minimum=1,
    )


@dataclass
class TrainingConfig:
    """How updates consume attempts."""

    mode: Literal["sync", "async"] = option(
        "sync", '"sync": sample then train; "async": the sampler runs ahead on older weights'
    )
    max_steps_off_policy: int = option(
        2,
        "attempts sampled more than this many updates behind the trainer are dropped as stale",
        minimum=0,
    )
    max_consecutive_unusable_groups: int | None = option(
        100,
        "stop the run after this many rejected groups in a row (0: never)",
        minimum=0,
    )


@dataclass
class RolloutConfig:
    """How attempts and groups are judged usable."""

    max_group_losses: int = option(
        1,
        "a group that lost more than this many attempts (failed, unversioned, ungraded or "
        "stale) is rejected as group_too_small",
        minimum=0,
    )
    max_rollout_retries: int = option(
        2,
        "retries a loop may spend on one attempt before it counts as failed (the loop retries; "
        "log_attempt(retries=n) records them as rollouts/retries)",
        minimum=0,
    )
    max_consecutive_rollout_failures: int | None = option(
        50,
        "stop the run after this many failed attempts in a row (0: never)",
        minimum=0,
    )
    reward_range: list[float] | None = option(
        None,
        "[lowest, highest] reward the grader gives, to tell all-solved from none-solved groups; "
        "unset: the lowest and highest reward seen so far (0 and 1 until two differ)",
    )


WRITER_SECTIONS: dict[str, type] = {
    "output": OutputConfig,
    "training": TrainingConfig,
    "rollout": RolloutConfig,
}


@dataclass
class Config:
    """The resolved config: the writer's three sections plus any sections a loop adds."""

    output: OutputConfig = field(default_factory=OutputConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    extra: dict[str, Any] = field(default_factory=dict)
    source: str | None = None

    def section(self, name: str) -> Any:
        """A section by name, the writer's or a loop's own."""
        if name in WRITER_SECTIONS:
            return getattr(self, name)
        return self.extra[name]

    def to_dict(self) -> dict[str, Any]:
        """Every section and key, defaults filled in, as plain data (for run.json)."""
        out = {name: dataclasses.asdict(getattr(self, name)) for name in WRITER_SECTIONS}
        for name, value in self.extra.items():
            is_instance = dataclasses.is_dataclass(value) and not isinstance(value, type)
            out[name] = dataclasses.asdict(value) if is_instance else value
        return out


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " or ".join(f'"{a}"' if isinstance(a, str) else repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp) if a is not type(None))
    if origin is list:
        (inner,) = typing.get_args(tp) or (Any,)
        plural = {str: "strings", int: "integers", float: "numbers", bool: "booleans"}
        return f"a list of {plural.get(inner, _type_name(inner))}"
    return {str: "a string", int: "an integer", float: "a number", bool: "true or false"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )


def _coerce(value: Any, tp: Any, section: str, key: str) -> Any:
    """``value`` checked against the field type ``tp``; raises ConfigError naming the key."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, section, key)
            except ConfigError as exc:
                errors.append(exc)
        raise ConfigError(f"expected {_type_name(tp)} (not {value!r})", section=section, key=key)
    if origin is Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            raise ConfigError(
                f"expected {_type_name(tp)} (not {value!r})", section=section, key=key
            )
        return value
    if origin is list:
        (inner,) = typing.get_args(tp) or (Any,)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(
                f"expected {_type_name(tp)} (not {value!r})", section=section, key=key
            )
        return [_coerce(v, inner, section, key) for v in value]
    if tp is Any:
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"expected true or false (not {value!r})", section=section, key=key)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"expected an integer (not {value!r})", section=section, key=key)
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"expected a number (not {value!r})", section=section, key=key)
        value = float(value)
        if value != value or value in (float("inf"), float("-inf")):
            raise ConfigError(f"expected a finite number (not {value!r})", section=section, key=key)
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"expected a string (not {value!r})", section=section, key=key)
        return value
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    raise ConfigError(f"expected {_type_name(tp)} (not {value!r})", section=section, key=key)


def build_section(cls: type, name: str, raw: Mapping[str, Any] | Any) -> Any:
    """A section dataclass from a mapping, each key checked; unknown keys are errors."""
    if dataclasses.is_dataclass(raw) and not isinstance(raw, type):
        raw = dataclasses.asdict(raw)
    if not isinstance(raw, Mapping):
        raise ConfigError(f"expected a table of keys (not {raw!r})", section=name)
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(raw) - set(fields))
    if unknown:
        known = ", ".join(sorted(fields))
        raise ConfigError(
            f"unknown key {unknown[0]!r}; expected one of: {known}", section=name, key=unknown[0]
        )
    values = {}
    for key, f in fields.items():
        if key not in raw:
            continue
        value = _coerce(raw[key], hints[key], name, key)
        minimum = f.metadata.get("minimum")
        if minimum is not None and value is not None:
            items = value if isinstance(value, list) else [value]
            for v in items:
                if isinstance(v, (int, float)) and v < minimum:
                    raise ConfigError(
                        f"expected a value >= {minimum:g} (not {value!r})", section=name, key=key
                    )
        check = f.metadata.get("check")
        if check is not None and value is not None:
            problem = check(value)
            if problem:
                raise ConfigError(f"{problem} (not {value!r})", section=name, key=key)
        values[key] = value
    return cls(**values)


def _check_writer_config(cfg: Config) -> None:
    rr = cfg.rollout.reward_range
    if rr is not None and (len(rr) != 2 or not rr[0] < rr[1]):
        raise ConfigError(
            f"expected [lowest, highest] with lowest < highest (not {rr!r})",
            section="rollout",
            key="reward_range",
        )
    name = cfg.output.name
    if name is not None and (not name or "/" in name or "\\" in name or name in (".", "..")):
        raise ConfigError(
            f"expected a plain directory name (not {name!r})", section="output", key="name"
        )


def load_config(
    source: str | os.PathLike[str] | Mapping[str, Any] | Config | None = None,
    *,
    sections: Mapping[str, type] | None = None,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> Config:
    """Load and validate a config.

    Args:
        source: a TOML file's path, a dict shaped like the TOML, an existing Config, or None for
            every default.
        sections: extra section dataclasses a loop adds (name -> dataclass type).
        overrides: section -> key -> value, applied over ``source`` (e.g. from CLI flags).

    Raises:
        ConfigError: a file that is not TOML, an unknown section or key, a wrong type or value.
    """
    extra_types = dict(sections or {})
    raw: dict[str, Any]
    origin: str | None = None
    if source is None:
        raw = {}
    elif isinstance(source, Config):
        raw = source.to_dict()
        origin = source.source
    elif isinstance(source, Mapping):
        raw = {k: dict(v) if isinstance(v, Mapping) else v for k, v in source.items()}
    else:
        origin = os.fspath(source)
        try:
            with open(origin, "rb") as f:
                raw = tomllib.load(f)
        except FileNotFoundError:
            raise ConfigError(f"{origin}: no such file") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{origin}: not valid TOML: {exc}") from None
        except OSError as exc:
            raise ConfigError(f"{origin}: cannot read: {exc.strerror}") from None
    for section, values in (overrides or {}).items():
        raw.setdefault(section, {})
        raw[section] = {**raw[section], **values}

    known = {**WRITER_SECTIONS, **extra_types}
    for name in raw:
        if name not in known:
            raise ConfigError(
                f"unknown section; expected one of: {', '.join(f'[{k}]' for k in sorted(known))}",
                section=str(name),
            )
    built = {name: build_section(cls, name, raw.get(name, {})) for name, cls in known.items()}
    cfg = Config(
        output=built["output"],
        training=built["training"],
        rollout=built["rollout"],
        extra={name: built[name] for name in extra_types},
        source=origin,
    )
    _check_writer_config(cfg)
    return cfg


def reference(sections: Mapping[str, type] | None = None) -> list[dict[str, Any]]:
    """Every section and key with its type, default and help (for docs and ``--help``)."""
    rows = []
    for name, cls in {**WRITER_SECTIONS, **(sections or {})}.items():
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else None
            kind = _type_name(hints[f.name])
            minimum = f.metadata.get("minimum")
            if minimum is not None:
                kind += f" ≥ {minimum:g}"
            rows.append(
                {
                    "section": name,
                    "key": f.name,
                    "type": kind,
                    "default": default,
                    "help": f.metadata.get("help", ""),
                }
            )
    return rows


def _toml_value(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def reference_markdown(sections: Mapping[str, type] | None = None) -> str:
    """The config reference as a markdown table (``docs/config.md`` is this, tested)."""
    lines = [
        "# Config reference",
        "",
        "Generated from `rlvitals.config.reference()`; a test keeps this page and the code equal.",
        "Regenerate with `python -m rlvitals.config > docs/config.md`.",
        "",
        "Every key is optional. A TOML file (or a dict shaped like it) is validated when loaded:",
        "an unknown section or key, a wrong type or a bad value is a `ConfigError` that names",
        "the section, the key and what was expected. The whole resolved config, every default",
        "filled in, is written into `run.json`.",
        "",
    ]
    current = None
    for row in reference(sections):
        if row["section"] != current:
            current = row["section"]
            doc = (WRITER_SECTIONS.get(current) or (sections or {})[current]).__doc__ or ""
            lines += [
                f"## [{current}]",
                "",
                doc.strip().splitlines()[0] if doc.strip() else "",
                "",
                "| key | type | default | meaning |",
                "|---|---|---|---|",
            ]
        help_text = row["help"].replace("|", "\\|")
        lines.append(
            f"| `{row['key']}` | {row['type']} | {_toml_value(row['default'])} | {help_text} |"
        )
    out = []
    for i, line in enumerate(lines):
        # a blank line after each table
        out.append(line)
        if line.startswith("| `") and (i + 1 == len(lines) or lines[i + 1].startswith("## ")):
            out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.write(reference_markdown())
