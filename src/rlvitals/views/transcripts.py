"""Transcripts in the terminal (and as JSON).

Transcript text is untrusted. It is printed only as rich ``Text`` (never parsed as markup),
after ``escape`` has made every control character, terminal escape sequence and bidirectional
override visible (``\\x1b``, ``\\u202e``), so a reply cannot restyle, move or hide anything on
the screen. Long texts are cut to a head and a tail; ``full`` shows them whole.
"""

from __future__ import annotations

from typing import IO, Any

from ..jsonio import dumps
from ..transcripts.text import TERMINAL_UNSAFE, escape

__all__ = ["render_json", "render_text"]

_FLAG_STYLE = "bold yellow"


def render_json(payload: dict[str, Any]) -> str:
    """The payload as JSON. The texts are the true texts; characters a terminal would act on
    (controls, bidirectional overrides) are written as ``\\uXXXX`` escapes, so printing the
    JSON is as safe as printing the text view, and decoding it gives the text back."""
    return TERMINAL_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", dumps(payload, indent=2))


def _cut(text: str, chars: int | None, tail: bool = False) -> str:
    if chars is None or len(text) <= chars:
        return text
    if tail:
        return f"[… {len(text) - chars} earlier characters]" + text[-chars:]
    head = chars * 2 // 3
    back = chars - head
    return text[:head] + f"\n[… {len(text) - chars} characters …]\n" + text[-back:]


def _num(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _attempt(console: Any, a: dict[str, Any], chars: int | None, prompts: bool) -> None:
    from rich.text import Text

    head = Text("  ")
    head.append(f"attempt {escape(str(a['attempt_id']), multiline=False)}", style="bold")
    head.append(f"  step {a['step']}", style="dim")
    if a.get("task_id") is not None:
        head.append(f"  task {escape(str(a['task_id']), multiline=False)}", style="dim")
    if a.get("group_id") is not None:
        head.append(f"  group {escape(str(a['group_id']), multiline=False)}", style="dim")
    console.print(head)
    line = Text("    ")
    line.append(f"reward {_num(a.get('reward'))}", style="bold")
    line.append(f"  policy v{_num(a.get('policy_version'))}")
    toks = [
        f"{_num(a.get('prompt_tokens'))} prompt",
        f"{_num(a.get('completion_tokens') or a.get('response_tokens'))} completion tokens",
    ]
    line.append("  " + " + ".join(toks))
    if a.get("truncated"):
        line.append("  truncated", style="yellow")
    trained = a.get("trained")
    if trained is True:
        line.append("  trained", style="green")
    elif trained is False:
        why = a.get("discard_reason")
        line.append(
            "  not trained" + (f" ({escape(str(why), multiline=False)})" if why else ""),
            style="yellow",
        )
    if a.get("lag") not in (None, 0):
        line.append(f"  lag {a['lag']}", style="dim")
    console.print(line)
    for h in a.get("flags", []):
        f = Text("    flag ", style="dim")
        f.append(str(h["flag"]), style=_FLAG_STYLE)
        f.append(": " + escape(str(h.get("excerpt", "")), multiline=False))
        console.print(f)
    if a.get("text_cut_bytes"):
        console.print(
            Text(f"    ({a['text_cut_bytes']} bytes of over-long text not read)", style="dim")
        )
    gens = a.get("generations") or []
    for i, g in enumerate(gens):
        if g.get("completion") is None and g.get("prompt") is None:
            continue
        label = Text(f"    reply {i + 1}/{len(gens)}", style="cyan")
        bits = []
        if g.get("policy_version") is not None:
            bits.append(f"policy v{g['policy_version']}")
        if g.get("finish_reason"):
            bits.append(escape(str(g["finish_reason"]), multiline=False))
        if g.get("trains") is False:
            bits.append("not trained")
        if bits:
            label.append(" (" + ", ".join(bits) + ")", style="dim")
        console.print(label)
        if prompts and g.get("prompt") is not None:
            _body(console, "prompt", _cut(str(g["prompt"]), chars, tail=True), "dim")
        if g.get("completion") is not None:
            _body(console, "completion", _cut(str(g["completion"]), chars), "")


def _body(console: Any, label: str, text: str, style: str) -> None:
    """A text under its label, or beside it when it is one short line."""
    from rich.text import Text

    shown = escape(text)
    if "\n" not in shown and len(shown) <= 72:
        line = Text(f"      {label}: ", style="dim")
        line.append(shown, style=style)
        console.print(line)
        return
    console.print(Text(f"      {label}:", style="dim"))
    console.print(Text(_indent(shown, 8), style=style))


def _indent(text: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + ln for ln in text.split("\n"))


def render_text(
    payload: dict[str, Any],
    file: IO[str],
    *,
    width: int | None = None,
    color: bool | None = None,
    chars: int | None = 600,
    prompts: bool = True,
) -> None:
    """The attempts ``browse`` chose, readably: a header per step with its flag counts, then
    each attempt's numbers, flags and (escaped) text."""
    from rich.text import Text

    from .console import plain_console

    console = plain_console(file, width=width or 100, color=color)
    head = Text("run ", style="dim")
    head.append(escape(str(payload["run"]), multiline=False), style="bold")
    trace = payload.get("trace")
    bits = [f"trace = {trace}" if trace else None]
    if payload.get("transcripts"):
        bits.append(
            f"{payload['transcripts']} transcript files, steps {payload['first_step']}"
            f"-{payload['last_step']}"
        )
    if payload.get("rules"):
        bits.append(f"rules {escape(str(payload['rules']), multiline=False)}")
    head.append("  " + "  ".join(b for b in bits if b), style="dim")
    console.print(head)
    for note in payload.get("notes", []):
        console.print(Text("note: " + escape(note, multiline=False), style="yellow"))
    if "attempt" in payload:
        _attempt(console, payload["attempt"], None if chars is None else chars * 10, prompts)
    else:
        mode = payload.get("mode")
        for sv in payload.get("steps", []):
            console.print()
            line = Text(f"step {sv['step']}", style="bold")
            line.append(f"  {sv['attempts']} attempts", style="dim")
            if mode:
                line.append(f"  showing {len(sv['shown'])} by {mode}", style="dim")
            console.print(line)
            counts = sv.get("flag_counts") or {}
            if counts:
                fl = Text("  flags this step: ", style="dim")
                fl.append(
                    ", ".join(
                        f"{k} {v}/{sv['attempts']}"
                        for k, v in sorted(counts.items(), key=lambda kv: -kv[1])
                    ),
                    style=_FLAG_STYLE,
                )
                console.print(fl)
            elif sv.get("with_text"):
                console.print(Text("  no flags this step", style="dim"))
            for a in sv["shown"]:
                _attempt(console, a, chars, prompts)
    for w in payload.get("warnings", [])[:20]:
        console.print(Text("warning: " + escape(w, multiline=False), style="yellow"))
