"""Choosing what to read: the highest-reward attempts every few updates, the lowest, one by id,
or those that raised a flag, each with its flags. Produces plain data for the views.

Only the attempts shown are held in memory (a bounded heap while a step file streams by);
every other attempt is read, flagged and dropped.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from typing import Any

from ..errors import RlvitalsError, UsageError
from ..model import RunData
from .flags import Hit, StepAnalyzer, flag_names, spec
from .rules import Rules
from .store import TranscriptAttempt, TranscriptStore

__all__ = ["ANY_FLAG", "browse", "pick_steps"]

ANY_FLAG = "*"  # --flag '*': the attempts that raised any flag
AUTO_STEPS = 8  # steps shown when --every is not given
SPARE = 4  # candidates kept per attempt shown (to pick them from different groups)


def pick_steps(have: list[int], every: int | None = None, step: int | None = None) -> list[int]:
    """The steps to read: ``step`` (or the nearest one with a file after it); else every
    ``every``-th update from the first (about AUTO_STEPS spread over the run when None),
    the last one always included."""
    if not have:
        return []
    if step is not None:
        later = [s for s in have if s >= step]
        return [later[0] if later else have[-1]]
    if every is None:
        every = max(1, math.ceil((have[-1] - have[0] + 1) / AUTO_STEPS))
    if every < 1:
        raise UsageError(f"--every: expected 1 or more (not {every})")
    chosen = [s for s in have if (s - have[0]) % every == 0]
    if chosen[-1] != have[-1]:
        chosen.append(have[-1])
    return chosen


def _key(a: TranscriptAttempt) -> float:
    r = a.reward
    return r if r is not None and math.isfinite(r) else -math.inf


def _rollout_info(data: RunData | None, step: int) -> dict[str, dict[str, Any]]:
    """attempt_id -> {discard_reason, truncated, lag, response_tokens} from rollouts.jsonl
    for one step (native runs only; empty otherwise)."""
    t = data.attempts if data is not None else None
    if t is None or not len(t) or not t.files:
        return {}
    from ..readers import load_attempt_record

    rows = t.rows_at(step)
    out = {}
    for i in range(rows.start, min(rows.stop, rows.start + 100_000)):
        try:
            rec = load_attempt_record(data, i)  # type: ignore[arg-type]
        except (RlvitalsError, OSError):  # extra detail only; the transcript is shown anyway
            continue
        aid = rec.get("attempt_id")
        if aid is not None:
            out[str(aid)] = {
                k: rec.get(k)
                for k in ("discard_reason", "truncated", "lag", "response_tokens", "policy_version")
            }
    return out


def attempt_view(
    a: TranscriptAttempt, hits: list[Hit], extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """One attempt as plain data: identity, reward, lengths, trained, flags, generations."""
    d = a.to_dict()
    d["flags"] = [h.to_dict() for h in hits]
    for k, v in (extra or {}).items():
        if d.get(k) is None:
            d[k] = v
    d["has_text"] = a.has_text
    return d


def _raised(hits: Iterable[Hit], flag: str) -> bool:
    """Whether ``hits`` hold ``flag`` (any flag for ``ANY_FLAG``)."""
    return any(flag in (ANY_FLAG, h.flag) for h in hits)


def _step_view(
    store: TranscriptStore,
    data: RunData | None,
    step: int,
    rules: Rules,
    *,
    top: int,
    lowest: bool,
    flag: str | None,
) -> dict[str, Any]:
    an = StepAnalyzer(step, rules)
    heap: list[tuple[float, int, int, TranscriptAttempt]] = []
    sign = -1.0 if lowest else 1.0
    with_flag: list[TranscriptAttempt] = []
    for a in store.iter_step(step):
        hits = an.add(a)
        if flag is not None:
            if _raised(hits, flag) and len(with_flag) < top:
                with_flag.append(a)
            continue
        # Among equal rewards, attempts with flags first; a few spare candidates so the
        # attempts shown can come from different groups.
        item = (sign * _key(a), 1 if hits else 0, -a.index, a)
        if len(heap) < SPARE * top:
            heapq.heappush(heap, item)
        elif item[:3] > heap[0][:3]:
            heapq.heapreplace(heap, item)
    res = an.finish()
    if flag is not None:
        shown = with_flag
        if len(shown) < top and any(
            _raised(hs, flag) for hs in res.hits.values()
        ):  # raised by the cross-attempt pass: read those again
            want = [i for i, hs in sorted(res.hits.items()) if _raised(hs, flag)]
            have = {a.index for a in shown}
            need = set(want[:top]) - have
            for a in store.iter_step(step) if need else ():
                if a.index in need:
                    shown.append(a)
            shown.sort(key=lambda a: a.index)
            shown = shown[:top]
    else:
        ranked = [t[3] for t in sorted(heap, key=lambda t: t[:3], reverse=True)]
        shown = []
        groups: set[str | None] = set()
        for a in ranked:  # one per group first
            if len(shown) < top and (a.group_id is None or a.group_id not in groups):
                shown.append(a)
                groups.add(a.group_id)
        for a in ranked:
            if len(shown) >= top:
                break
            if a not in shown:
                shown.append(a)
        order = {id(a): i for i, a in enumerate(ranked)}
        shown.sort(key=lambda a: order[id(a)])
    extra = _rollout_info(data, step) if shown else {}
    counts = res.counts(rules)
    return {
        "step": step,
        "attempts": res.attempts,
        "with_text": res.with_text,
        "flag_counts": {k: v for k, v in counts.items() if not k.startswith("family:")},
        "shown": [
            attempt_view(a, res.hits.get(a.index, []), extra.get(a.attempt_id)) for a in shown
        ],
    }


def _trace(data: RunData | None, store: TranscriptStore, steps: Iterable[int]) -> str | None:
    cfg = data.info.get("config") if data is not None else None
    out = cfg.get("output") if isinstance(cfg, dict) else None
    trace = out.get("trace") if isinstance(out, dict) else None
    if isinstance(trace, str):
        return trace
    for s in steps:  # sniff: text in the first attempt that has generations
        for a in store.iter_step(s):
            if a.generations:
                return "full" if a.has_text else "samples"
        break
    return None


SAMPLES_NOTE = (
    'This run keeps transcripts with trace = "samples": each attempt\'s identity, reward, '
    "policy version and lengths, without text. Shown: attempts ranked by reward, their lengths "
    "and whether they trained. Not available: prompts and replies, and the flags that read them "
    "(tampering, hard-coded outputs, answer formats, repetition); the reward-length "
    "correlation and held-out divergence in `rlvitals check` still work. Set [output] trace = "
    '"full" to record the text.'
)


def browse(
    store: TranscriptStore,
    rules: Rules,
    data: RunData | None = None,
    *,
    top: int = 3,
    every: int | None = None,
    step: int | None = None,
    attempt: str | None = None,
    lowest: bool = False,
    flag: str | None = None,
    max_steps: int = 50,
) -> dict[str, Any]:
    """What ``rlvitals transcripts`` shows, as plain data (see docs/transcripts.md)."""
    if top < 1:
        raise UsageError(f"--top: expected 1 or more (not {top})")
    known = flag_names(rules)
    if flag is not None and flag != ANY_FLAG and flag not in known:
        raise UsageError(f"--flag: unknown flag {flag!r}; expected one of: {', '.join(known)}")
    have = store.steps()
    payload: dict[str, Any] = {
        "run": str(store.run_dir),
        "transcripts": len(have),
        "first_step": have[0] if have else None,
        "last_step": have[-1] if have else None,
        "rules": rules.source,
        "notes": [],
        "steps": [],
    }
    trace = _trace(data, store, have[-1:] if have else [])
    payload["trace"] = trace
    if not have and getattr(store, "unreadable", None):
        payload["notes"].append(f"{store.dir}: {store.unreadable}; no transcript was read.")
        return payload
    if not have:
        payload["notes"].append(
            'This run has no transcripts (transcripts/step-*.json). Set [output] trace = "full" '
            "to record every attempt's prompts and replies."
        )
        return payload
    if trace == "samples":
        payload["notes"].append(SAMPLES_NOTE)
    if attempt is not None:
        hint = None
        if data is not None and data.attempts is not None and len(data.attempts):
            from ..readers import find_attempt

            try:
                row = find_attempt(data, attempt)
            except (RlvitalsError, OSError):  # fall back to scanning the transcripts
                row = None
            if row is not None:
                hint = int(data.attempts.step[row])
        a = store.find(attempt, hint)
        if a is None and hint is not None:
            a = store.find(attempt)
        if a is None:
            raise UsageError(f"--attempt: no attempt {attempt!r} in {store.dir}")
        an = StepAnalyzer(a.step, rules)
        for b in store.iter_step(a.step):
            an.add(b)
        res = an.finish()
        extra = _rollout_info(data, a.step).get(a.attempt_id)
        payload["attempt"] = attempt_view(a, res.hits.get(a.index, []), extra)
        payload["warnings"] = list(store.warnings)
        return payload
    steps = have if flag is not None and step is None else pick_steps(have, every, step)
    payload["mode"] = (
        ("attempts raising any flag" if flag == ANY_FLAG else f"attempts raising {flag}")
        if flag
        else ("lowest reward" if lowest else "highest reward")
    )
    shown_steps = 0
    for s in steps:
        view = _step_view(store, data, s, rules, top=top, lowest=lowest, flag=flag)
        if flag is not None and not view["shown"]:
            continue
        payload["steps"].append(view)
        shown_steps += 1
        if shown_steps >= max_steps:
            payload["notes"].append(f"stopped after {max_steps} steps; use --step to go further")
            break
    if flag is not None and not payload["steps"]:
        what = "any flag" if flag == ANY_FLAG else f"{flag} ({spec(flag, rules).title})"
        payload["notes"].append(f"no attempt raised {what}")
    payload["flags"] = {name: spec(name, rules).title for name in known}
    payload["warnings"] = list(store.warnings)
    return payload
