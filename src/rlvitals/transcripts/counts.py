"""Flag counts of a step file, each distinct reply looked at once.

What flags an attempt on its own is decided by its texts, whether it was rewarded and, for some
rules, its prompts (``StepAnalyzer.assess``); a policy answers its tasks the same way again and
again, so most attempts of a run repeat one seen before. ``count_step`` decodes a step file
into the few fields the flags read (msgspec structs, no per-attempt objects), looks each
attempt up by those fields as written, and analyses only the ones it has not met: a *kind*,
remembered for the whole scan. The cross-attempt flags (``flags.cross_hits``) then run on the
kinds' answers and replies, and the counts are summed per kind.

The key is the attempt's replies as decoded, whether it was rewarded and, when a rule reads
them (``StepAnalyzer.reads_prompts``: a custom rule on prompts, or a reply that could hard-code
an output), its prompts as decoded: every input of every rule, so the counts are those of
``StepAnalyzer`` attempt by attempt (tests/test_transcripts.py holds the two equal). A file this
path cannot take as it is (not a list of attempt objects, a generation that is not an object,
too big to decode at once) returns None, and the caller reads it attempt by attempt.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

import msgspec

from .flags import FAMILY_KEY, TEXT_LIMIT, Columns, StepAnalyzer, cross_hits, spec
from .rules import Rules
from .store import FAST_LIMIT, Generation, TranscriptAttempt, reward_number

__all__ = ["Kinds", "count_step"]

# Characters of the texts the kinds remember, in all, with ENTRY_CHARS for each kind's own
# objects (about 40 MB at most); past it they are forgotten and found again.
KINDS_CHARS = 16 << 20
ENTRY_CHARS = 100


# gc=False: decoded JSON never holds a reference cycle, and these are never changed after;
# left to the cyclic collector, a big step file's thousands of them cost it its passes.
class _Gen(msgspec.Struct, gc=False):
    prompt: Any = None
    completion: Any = None


class _Attempt(msgspec.Struct, gc=False):
    task_id: Any = None
    reward: Any = None
    generations: list[_Gen] | None = None


_DECODER = msgspec.json.Decoder(list[_Attempt])


class _Kind:
    """An attempt as its own flags see it: the flags it raises, and what the cross-attempt
    flags read of it."""

    __slots__ = ("answer", "families", "names", "reply", "reply_shown", "shown")

    def __init__(self, names: frozenset[str], families: frozenset[str], light: tuple) -> None:
        self.names = names
        self.families = families
        self.answer, self.shown, self.reply, self.reply_shown = light


class Kinds:
    """The kinds met by one scan (one run, one set of rules), bounded by ``KINDS_CHARS``."""

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        # (rewarded, replies) -> a kind, or (when a rule reads prompts) prompts -> kind
        self.table: dict[tuple[Any, ...], _Kind | dict[tuple[Any, ...], _Kind]] = {}
        self.chars = 0
        self.analysed = 0  # attempts analysed (each a distinct kind while remembered)

    def _room(self, chars: int) -> None:
        chars += ENTRY_CHARS
        self.chars += chars
        if self.chars > KINDS_CHARS:
            self.table.clear()
            self.chars = chars


def _text_size(v: Any) -> int:
    return len(v) if type(v) is str else 64


def count_step(
    path: str, size: int, step: int, kinds: Kinds
) -> tuple[int, int, dict[str, int]] | None:
    """(attempts, attempts with text, flag -> attempts raising it, ``family:<f>`` -> at least
    one of the family) of update ``step``'s file at ``path`` (``size`` bytes), or None when
    the file needs the attempt-by-attempt reader (see the module's docstring)."""
    if size > FAST_LIMIT:
        return None
    try:
        with open(path, "rb") as f:
            doc = _DECODER.decode(f.read())
    except (OSError, msgspec.DecodeError):
        return None  # the reader names the problem
    rules = kinds.rules
    table = kinds.table
    get = table.get
    an = StepAnalyzer(step, rules)
    above = rules.rewarded_above
    # (kind, task, reward) -> attempts: the cross-attempt flags read nothing else of an
    # attempt, so attempts alike in all three are one row for them.
    rows: list[tuple[_Kind, str | None, float | None]] = []
    add = rows.append
    for e in doc:
        gens = e.generations
        if not gens:
            continue
        r = e.reward
        if type(r) is not float and r is not None:
            r = reward_number(r)
        rewarded = r is not None and r > above
        if len(gens) == 1:
            g = gens[0]
            replies: Any = g.completion
            if replies is None and g.prompt is None:
                continue
        else:
            replies = tuple([g.completion for g in gens])
            if replies.count(None) == len(replies) and all(g.prompt is None for g in gens):
                continue
        key: tuple[Any, ...] | None = (rewarded, replies)
        got: Any
        try:
            got = get(key)  # type: ignore[arg-type]
        except TypeError:  # chat messages or tool calls: no hash; analysed on their own
            got, key = None, None
        if got is None or type(got) is dict:
            got = _kind_of(an, kinds, key, got, gens, r, rewarded)
        t = e.task_id
        if t is not None and type(t) is not str:
            t = str(t)
        add((got, t, r))
    alike = Counter(rows)
    counts: dict[str, int] = defaultdict(int)
    for (k, _t, _r), m in alike.items():
        for name in k.names:
            counts[name] += m
        for fam in k.families:
            counts[FAMILY_KEY + fam] += m
    of = list(alike)
    cols = Columns(
        [row[1] for row in of],
        [row[2] for row in of],
        [row[0].answer for row in of],
        [row[0].shown for row in of],
        [row[0].reply for row in of],
        [row[0].reply_shown for row in of],
    )
    extra: dict[int, set[str]] = defaultdict(set)
    for j, name, _ex in cross_hits(rules, an.on, cols):
        extra[j].add(name)
    for j, names in extra.items():
        k = of[j][0]
        m = alike[of[j]]
        for name in names - k.names:
            counts[name] += m
        for fam in {spec(n, rules).family for n in names} - k.families:
            counts[FAMILY_KEY + fam] += m
    return len(doc), len(rows), dict(counts)


def _kind_of(
    an: StepAnalyzer,
    kinds: Kinds,
    key: tuple[Any, ...] | None,
    got: dict[tuple[Any, ...], _Kind] | None,
    gens: list[_Gen],
    reward: float | None,
    rewarded: bool,
) -> _Kind:
    """The kind of an attempt whose replies alone do not say it: met with other prompts
    (``got``: prompts -> kind), or not met."""
    if got is not None:
        try:
            k = got.get(tuple([g.prompt for g in gens]))
        except TypeError:
            k = None
        if k is not None:
            return k
    return _analyse(an, kinds, key, gens, reward, rewarded)


def _analyse(
    an: StepAnalyzer,
    kinds: Kinds,
    key: tuple[Any, ...] | None,
    gens: list[_Gen],
    reward: float | None,
    rewarded: bool,
) -> _Kind:
    """Analyse an attempt not met before, and remember its kind under ``key``."""
    a = TranscriptAttempt(
        an.result.step, 0, "", None, None, reward, None,
        [Generation(g.prompt, g.completion) for g in gens],
    )  # fmt: skip
    final = a.final_text()[:TEXT_LIMIT]
    wrote = a.completions_text()[:TEXT_LIMIT]
    own, light = an.assess(a, final, wrote, rewarded)
    names = frozenset(h.flag for h in own)
    kind = _Kind(names, frozenset(spec(n, kinds.rules).family for n in names), light)
    kinds.analysed += 1
    if key is None:
        return kind
    size = sum(_text_size(g.completion) for g in gens)
    if not an.reads_prompts(wrote):
        kinds._room(size)
        kinds.table[key] = kind
        return kind
    prompts = tuple(g.prompt for g in gens)
    try:
        hash(prompts)
    except TypeError:
        return kind
    kinds._room(size + sum(_text_size(g.prompt) for g in gens))
    sub = kinds.table.get(key)
    if type(sub) is not dict:
        sub = kinds.table[key] = {}
    sub[prompts] = kind
    return kind
