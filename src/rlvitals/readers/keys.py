"""Keys by meaning: the vocabulary of synonyms and normalised tokens behind every reader.

Every reader's ``Mapper`` resolves a source key through one chain, and records which step
mapped it (``RunData.resolved``, shown by ``rlvitals formats --explain FILE``):

1. ``user mapping``: rules from ``--mapping FILE``;
2. ``table``: the framework's own table (a key it lists as not mapped stops here);
3. ``synonym``: a key another framework or peer logs the metric under, exactly as declared
   in ``schema.py`` (``MetricSpec.aliases``), or a family pattern (reward components, data
   sources);
4. ``tokens``: the same synonyms after ``normalise``: case, camelCase, separators, split
   prefixes (``train/``, ``actor/``...) and mean suffixes (``_mean``, ``/mean``);
5. ``canonical``: a key that already is a canonical name (generic formats only).

Keys of held-out splits never fall back to a training metric, and a KL-like key that no step
maps stays unmapped under its own name (``unmapped_reason`` says why): the three KLs (to the
reference, PPO old-vs-new, sampler/trainer mismatch) are never guessed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from ..schema import KEPT, METRICS, PATTERNS, Alias, is_canonical

__all__ = [
    "KINDS",
    "Candidate",
    "blocker",
    "declared",
    "fallback",
    "is_eval_key",
    "is_kl_like",
    "normalise",
    "require_metrics",
    "token_index",
    "unmapped_numeric",
    "unmapped_reason",
]

# The steps of the chain, in order; each resolved key records one of them.
KINDS = ("user mapping", "table", "synonym", "tokens", "canonical")

# Leading path segments that say where a number was computed, not what it is.
SPLIT_PREFIXES = frozenset(
    {
        "train",
        "training",
        "trainer",
        "actor",
        "policy",
        "optim",
        "optimizer",
        "metrics",
        "stats",
        "charts",
        "batch",
        "objective",
        "loss",
        "losses",
    }
)
# Words for "the mean of": dropped as a last segment or a first/last token.
MEAN_WORDS = frozenset({"mean", "avg", "average"})
# Prefixes of held-out splits: such a key never maps to a training metric by synonym.
EVAL_WORDS = frozenset(
    {
        "eval",
        "evaluation",
        "val",
        "valid",
        "validation",
        "test",
        "heldout",
        "holdout",
        "dev",
        "val-core",
        "val-aux",
    }
)
_EVAL_RE = re.compile(
    r"^(?:eval|evaluation|val|valid|validation|test|heldout|holdout|dev)(?:[_\-/.\s]|$)", re.I
)
# A held-out split named last: ``success_rate/eval``, ``acc/val``; as a last token of a plain
# name only the unambiguous words (``reward_eval``, ``acc_test``: ``_val`` may be a value).
_EVAL_LAST_TOKENS = frozenset({"eval", "evaluation", "test", "heldout", "holdout", "validation"})
# A training split named last (``success_rate/train``, ``loss_train``): dropped like a prefix.
TRAIN_TAILS = frozenset({"train", "training"})
_CAMEL = re.compile(r"([a-z0-9])([A-Z])")
_SEG = re.compile(r"[/.]+")
_TOK = re.compile(r"[\s_\-:()\[\]]+")
_KL = re.compile(r"(?:^|_)(?:kl|kld|kl\d|k[123]_kl|kldiv|kl_div\w*|kullback\w*)(?:_|$)")

# Short names and abbreviations people give metrics in their own loops, token by token (both
# the synonyms declared in schema.py and the keys read go through the same table, so
# ``resp_len``, ``Avg Response Len`` and ``response_length`` meet in one form).
TOKEN_SYNONYMS = {
    "rew": "reward",
    "rews": "reward",
    "rwd": "reward",
    "rwds": "reward",
    "rewards": "reward",
    "ent": "entropy",
    "entr": "entropy",
    "gn": "grad_norm",
    "gnorm": "grad_norm",
    "gradnorm": "grad_norm",
    "len": "length",
    "lens": "length",
    "resp": "response",
    "responses": "response",
    "completions": "completion",
    "adv": "advantage",
    "advs": "advantage",
    "advantages": "advantage",
    "acc": "accuracy",
    "trunc": "truncated",
    "truncation": "truncated",
    "frac": "fraction",
    "stddev": "std",
    "stdev": "std",
    "tok": "tokens",
    "toks": "tokens",
    # plurals a loop names its lists by (``response_lengths``, ``train_accuracies``)
    "lengths": "length",
    "accuracies": "accuracy",
    "scores": "score",
    "entropies": "entropy",
    "grp": "group",
    "nonstop": "truncated",
}
# Phrases of several tokens with one meaning (on the joined form): a response that did not
# stop by itself hit the token limit; an accuracy rate is an accuracy.
PHRASE_SYNONYMS = (
    (re.compile(r"(?:(?<=_)|^)(?:non|no|not)_(?:stop|stopped|eos|eos_token)(?=_|$)"), "truncated"),
    (re.compile(r"(?:(?<=_)|^)accuracy_(?:rate|ratio)(?=_|$)"), "accuracy"),
)
# A whole key (normalised) that is one short word of its own.
WORD_SYNONYMS = {
    "grad": "grad_norm",
    "length": "response_length",
    "grad_norm_mean": "grad_norm",
    "r": "reward",  # a whole key ``R``/``r``: the reward (``[it 40] R=0.5``)
}
# Tokens that say a value is a percent (0-100) where the canonical metric is a fraction.
PERCENT_TOKENS = frozenset({"pct", "percent", "percentage", "perc"})
# Canonical metrics that are fractions in [0, 1]: a percent of one is read as value / 100.
FRACTIONS = frozenset(
    {
        "response/truncated_rate",
        "train/clip_frac",
        "groups/signal_fraction",
        "train/mismatch_ess",
        "train/mismatch_ess_seq",
    }
)
# Leading tokens that say where a number was computed (``Actor Loss``, ``policy_entropy``):
# dropped as a last try when the whole key matches nothing.
_LEAD_WORDS = frozenset({"actor", "policy", "train", "training", "trainer", "batch", "rollout"})
# What a held-out split reports as its score (after normalising): eval_reward, val/acc...
SCORE_WORDS = frozenset(
    {
        "reward",
        "score",
        "accuracy",
        "success",
        "success_rate",
        "solve_rate",
        "pass_rate",
        "pass@1",
        "correct",
        "correctness",
        "test_score",
        "val_score",
        "eval_score",
        "mean_reward",
        "reward_mean",
        "total_reward",
    }
)

# Normalised forms that name some KL without saying which: never indexed, never guessed.
AMBIGUOUS_KL = frozenset({"kl", "kld", "kl_div", "kl_value", "kl_metric", "k3_kl", "k1_kl"})
_STATS = frozenset(
    {"max", "min", "std", "var", "sum", "count", "median", "p10", "p50", "p90", "p99"}
)

# (canonical target, priority within the fallback chain, Rule-like fields)
Candidate = tuple[str, int, str, Alias]  # target, priority, kind, alias


def normalise(key: str, *, keep_prefixes: bool = False) -> str:
    """A key reduced to its meaning-bearing tokens: ``Train/Reward_Mean`` -> ``reward``.

    Lower case (camelCase split first), ``/`` and ``.`` as path separators, ``_ - :`` and
    spaces as token separators; a last ``mean``/``avg``/``train`` segment and leading split
    prefixes (``train/``, ``actor/``..., unless ``keep_prefixes``) are dropped, then a first or
    last ``mean`` token; abbreviations, plurals and phrases (``non_stop``) as one word.
    """
    k = _CAMEL.sub(r"\1_\2", key.strip()).lower().replace("%", "_pct")
    segs = [s for s in (_TOK.sub("_", s).strip("_") for s in _SEG.split(k)) if s]
    while len(segs) > 1 and (segs[-1] in MEAN_WORDS or segs[-1] in TRAIN_TAILS):
        segs.pop()
    while not keep_prefixes and len(segs) > 1 and segs[0] in SPLIT_PREFIXES:
        segs.pop(0)
    toks = "_".join(segs).split("_")
    while len(toks) > 1 and (toks[-1] in MEAN_WORDS or toks[-1] in TRAIN_TAILS):
        toks.pop()
    if len(toks) > 1 and toks[0] in MEAN_WORDS:
        toks.pop(0)
    out = "_".join(TOKEN_SYNONYMS.get(t, t) for t in toks if t)
    for rx, word in PHRASE_SYNONYMS:
        out = rx.sub(word, out)
    return WORD_SYNONYMS.get(out, out)


def is_eval_key(key: str) -> bool:
    """Whether ``key`` belongs to a held-out split (``eval/``, ``val-core/``, ``eval_``, or
    named last: ``success_rate/eval``, ``reward_test``)."""
    first = _SEG.split(key.strip().lower(), maxsplit=1)[0]
    return first in EVAL_WORDS or bool(_EVAL_RE.match(key.strip())) or _eval_tail(key) is not None


def _eval_tail(key: str) -> tuple[str, str] | None:
    """(split word, the rest) of a key that names its held-out split last, else None."""
    segs = [x for x in _SEG.split(key.strip()) if x]
    if len(segs) > 1 and segs[-1].lower() in EVAL_WORDS:
        return segs[-1].lower(), "/".join(segs[:-1])
    if len(segs) == 1:
        toks = [t for t in _TOK.split(_CAMEL.sub(r"\1_\2", segs[0]).lower()) if t]
        if len(toks) > 1 and toks[-1] in _EVAL_LAST_TOKENS:
            return toks[-1], "_".join(toks[:-1])
    return None


def is_kl_like(key: str) -> bool:
    """Whether ``key`` names some KL (``kl``, ``kl_div``, ``k3_kl``, ``KLD``...)."""
    k = _CAMEL.sub(r"\1_\2", key).lower()
    return any(_KL.search(_TOK.sub("_", seg)) for seg in _SEG.split(k) if seg)


@lru_cache(maxsize=1)
def _exact() -> dict[str, tuple[int, str, Alias]]:
    out: dict[str, tuple[int, str, Alias]] = {}
    i = 0
    for spec in METRICS.values():
        for a in spec.aliases:
            if not a.source.startswith("^") and a.source not in out:
                out[a.source] = (i, spec.name, a)
                i += 1
    return out


def declared(source: str) -> tuple[str, Alias] | None:
    """(canonical name, synonym) where ``schema.py`` declares ``source`` as an exact synonym."""
    hit = _exact().get(source)
    return None if hit is None else (hit[1], hit[2])


@lru_cache(maxsize=1)
def _patterns() -> tuple[tuple[int, re.Pattern[str], Alias], ...]:
    out = []
    i = len(_exact())
    # Regular-expression synonyms of fixed names too (a key a version renamed, whose plain
    # form would read as another metric's: PipelineRL's old ``stats/lag``).
    specs = [*(spec for _, spec in PATTERNS), *METRICS.values()]
    for spec in specs:
        for a in spec.aliases:
            if a.source.startswith("^"):
                out.append((i, re.compile(a.source), a))
                i += 1
    return tuple(out)


@lru_cache(maxsize=1)
def token_index() -> dict[str, tuple[str, Alias]]:
    """Normalised form -> (canonical name, the synonym it comes from).

    Built from every canonical name and every exact synonym; a form that two different
    canonical names normalise to is left out (the exact synonyms still tell them apart).
    """
    seen: dict[str, set[str]] = {}
    first: dict[str, tuple[str, Alias]] = {}
    for spec in METRICS.values():
        for a in (Alias(spec.name), *spec.aliases):
            if a.source.startswith("^"):
                continue
            n = normalise(a.source)
            if not n or n in AMBIGUOUS_KL:
                continue
            seen.setdefault(n, set()).add(spec.name)
            first.setdefault(n, (spec.name, a))
    return {n: first[n] for n, targets in seen.items() if len(targets) == 1}


def token_conflicts() -> dict[str, set[str]]:
    """Normalised forms claimed by more than one canonical name (left out of the index)."""
    seen: dict[str, set[str]] = {}
    for spec in METRICS.values():
        for a in (Alias(spec.name), *spec.aliases):
            if not a.source.startswith("^"):
                seen.setdefault(normalise(a.source), set()).add(spec.name)
    return {n: t for n, t in seen.items() if len(t) > 1}


def fallback(key: str) -> list[Candidate]:
    """The synonym and token candidates for ``key``, best first (after a table found none)."""
    out: list[Candidate] = []
    for prio, pat, a in _patterns():
        m = pat.match(key)
        if m:
            try:
                target = m.expand(a.target)
            except (re.error, IndexError):
                continue
            if is_canonical(target) and not target.endswith("/"):
                out.append((target, prio, "synonym", a))
    if out:
        return out
    base = len(_exact()) + len(_patterns())
    if is_eval_key(key):
        score = eval_score(key)
        return [] if score is None else [(score[0], base, "tokens", score[1])]
    hit = _exact().get(key)
    if hit is not None:
        prio, target, a = hit
        return [(target, prio, "synonym", a)]
    n = normalise(key)
    tok = _token_hit(n)
    if tok is None:  # the split word may be part of the name: ``loss/total``, ``Loss/policy``
        full = normalise(key, keep_prefixes=True)
        tok = _token_hit(full) if full != n else None
    if tok is not None:
        target, a = tok
        return [(target, base, "tokens", a)]
    unit = _unit(key)
    if unit is not None:
        return [(unit[0], base + 1, "tokens", unit[1])]
    pct = _percent(key)
    if pct is not None:
        return [(pct[0], base + 1, "tokens", pct[1])]
    comp = _component(key, n)
    if comp is not None:
        return [(comp[0], base + 2, "tokens", comp[1])]
    return out


def _component(key: str, n: str) -> tuple[str, Alias] | None:
    """A loop's own part of its reward, named ``<what>_reward`` (``format_reward``,
    ``noop_penalty``, ``length_bonus``, under split prefixes or a group of reward parts:
    ``train/format_reward``, ``reward_metrics/format_reward``, ``train/extrinsic_reward_mean``)
    beside its total: ``reward/component/<name>/mean``. A <what> that names an aggregate
    (``episode_reward``, ``total_reward``) or another quantity (``kl_penalty``,
    ``entropy_bonus``) is not a part."""
    segs = [x for x in _SEG.split(key.strip()) if x]
    if not segs:
        return None
    for seg in segs[:-1]:
        word = _TOK.sub("_", _CAMEL.sub(r"\1_\2", seg)).lower()
        if word not in SPLIT_PREFIXES and word not in _PART_GROUPS:
            return None
    toks = normalise(segs[-1]).split("_")
    if len(toks) < 2 or toks[-1] not in _COMPONENT_WORDS:
        return None
    if any(t in _STATS or t in _NOT_PART for t in toks):
        return None
    last = re.sub(r"(?i)[_\-\s]*(?:mean|avg|average)$", "", segs[-1].strip())
    name = re.sub(r"[^\w.-]+", "_", last).strip("_")
    target = f"reward/component/{name}/mean"
    note = "a part of the reward, by its name (<what>_reward, _penalty, _bonus)"
    return target, Alias(key, target, 1.0, 0.0, note)


def _token_hit(n: str) -> tuple[str, Alias] | None:
    """The index entry of a normalised form, else of the form without a leading word that
    says where it was computed (``actor_loss`` -> ``loss``), else of the same words in
    another order (``reward_total`` -> ``total_reward``, ``kl_ref`` -> ``ref_kl``)."""
    idx = token_index()
    tok = idx.get(n)
    toks = n.split("_")
    rest = "_".join(toks[1:]) if len(toks) > 1 and toks[0] in _LEAD_WORDS else ""
    if tok is None and rest:
        tok = idx.get(rest)
    if tok is None:
        bags = _bag_index()
        tok = bags.get(_bag(n)) or (bags.get(_bag(rest)) if rest else None)
    return tok


def _bag(n: str) -> tuple[str, ...]:
    return tuple(sorted(t for t in n.split("_") if t))


@lru_cache(maxsize=1)
def _bag_index() -> dict[tuple[str, ...], tuple[str, Alias]]:
    """The token index by its words in any order; a bag two canonical names share is left out."""
    seen: dict[tuple[str, ...], set[str]] = {}
    first: dict[tuple[str, ...], tuple[str, Alias]] = {}
    for n, (target, a) in token_index().items():
        b = _bag(n)
        seen.setdefault(b, set()).add(target)
        first.setdefault(b, (target, a))
    for n, targets in token_conflicts().items():
        seen.setdefault(_bag(n), set()).update(targets)
    return {b: first[b] for b, targets in seen.items() if len(targets) == 1 and b in first}


# Synonyms of reward/mean that are fractions (right/wrong, success/failure): a percent of one
# is the reward / 100.
_FRACTION_SCORES = frozenset({"accuracy", "success_rate", "solve_rate", "pass_rate", "success"})
_MS_TOKENS = frozenset({"ms", "msec", "msecs", "millis", "milliseconds"})
_SEC_TOKENS = frozenset({"s", "sec", "secs", "second", "seconds"})


def _unit(key: str) -> tuple[str, Alias] | None:
    """A time in milliseconds or seconds by its last word (``step_time_ms``, ``gen time
    (s)``) of a canonical figure in seconds: the figure, milliseconds divided by 1,000."""
    toks = normalise(re.sub(r"[()\[\]]", " ", key)).split("_")
    if len(toks) < 2 or toks[-1] not in _MS_TOKENS | _SEC_TOKENS:
        return None
    tok = _token_hit("_".join(toks[:-1]))
    if tok is None or not tok[0].endswith("_seconds"):
        return None
    target, a = tok
    if toks[-1] in _SEC_TOKENS:
        return target, Alias(key, target, a.scale, a.offset, "seconds, by its unit")
    return target, Alias(key, target, a.scale * 0.001, a.offset, "milliseconds: value / 1000")


def _percent(key: str) -> tuple[str, Alias] | None:
    """A key that says it is a percent (``truncated_pct``, ``clip %``) of a fraction metric:
    the metric, with the value divided by 100."""
    k = key.strip()
    marked = k.endswith("%") or k.endswith("(%)")
    k = re.sub(r"\s*\(?%\)?$", "", k)
    toks = normalise(k).split("_")
    kept = [t for t in toks if t not in PERCENT_TOKENS]
    if not marked and len(kept) == len(toks):
        return None
    base = "_".join(kept)
    tok = None
    for form in (base, *(f"{base}_{w}" for w in ("rate", "fraction", "ratio"))):
        tok = _token_hit(form)
        if tok is not None:
            break
    if tok is None:
        return None
    # a fraction metric, or a right/wrong reward (``acc %``, ``success_pct``)
    if tok[0] not in FRACTIONS and not (tok[0] == "reward/mean" and base in _FRACTION_SCORES):
        return None
    target, a = tok
    note = "a percent (0-100) read as a fraction: value / 100"
    return target, Alias(a.source, target, a.scale * 0.01, a.offset, note)


def eval_score(key: str) -> tuple[str, Alias] | None:
    """A held-out split's score (``eval_reward``, ``val/acc``, ``test/score``,
    ``val/test_score/<suite>``, ``heldout_accuracy``) as ``eval/<suite>/score``: the suite is
    the key's other segments, else the split's own word. A loss, a std or a length is not a
    score: None."""
    k = key.strip()
    m = re.match(r"^(val-core|val-aux)(?:[_\-/.]|$)", k, re.I) or _EVAL_RE.match(k)
    if m is None:
        tail = _eval_tail(k)
        hit = eval_score(f"{tail[0]}/{tail[1]}") if tail is not None else None
        if hit is None:
            return None
        return hit[0], Alias(key, hit[0], hit[1].scale, hit[1].offset, hit[1].note)
    word = m.group(0).rstrip("_-/.").lower()
    rest = k[m.end() :]
    segs = [s for s in _SEG.split(rest) if s]
    while segs and re.fullmatch(r"(?:mean|avg|average)(?:@\d+)?", segs[-1], re.I):
        segs.pop()
    if not segs:
        return None
    for seg in segs:  # a spread, an extreme or another aggregate of the score is not it
        n = normalise(seg)
        if re.fullmatch(r"[a-z]+@\d+", n) or any(t in _STATS for t in n.split("_")):
            return None
    scale = 1.0
    metric = None
    suite: list[str] = []
    for seg in segs:
        n = normalise(seg)
        toks = n.split("_")
        kept = [t for t in toks if t not in PERCENT_TOKENS]
        n2 = "_".join(kept)
        if metric is None and (
            n2 in SCORE_WORDS or (token_index().get(n2) or ("",))[0] == "reward/mean"
        ):
            metric = seg
            scale = 0.01 if len(kept) < len(toks) or seg.endswith("%") else 1.0
        else:
            suite.append(seg)
    if metric is None:  # ``eval/gsm8k_acc``, ``test_aime24_accuracy``: a benchmark's score
        toks = normalise(segs[-1]).split("_")
        if len(toks) > 1 and toks[-1] in ("accuracy", "score") and _DIGIT_RE.search(toks[-2]):
            metric, suite = segs[-1], [*segs[:-1], "_".join(toks[:-1])]
    if metric is None:
        return None
    name = "/".join(suite) if suite else word
    name = re.sub(r"[^\w.@-]+", "_", name).strip("_") or word
    target = f"eval/{name}/score"
    note = f"a held-out split's {metric!r}: held-out score of suite {name!r}"
    if scale != 1.0:
        note += " (a percent, value / 100)"
    return target, Alias(key, target, scale, 0.0, note)


def unmapped_reason(key: str) -> str:
    """Why ``key`` stays under its own name, for ``formats --explain``."""
    if is_eval_key(key):
        return "a held-out split's key: never read as a training metric"
    for rx, why in KEPT:
        if rx.search(key):
            return f"{why}; no canonical name, kept as logged"
    last = normalise(key).rsplit("_", 1)[-1]
    if last in _STATS:
        return f"a {last} of a metric, not its mean; map it with --mapping"
    if is_kl_like(key) and any(w in normalise(key) for w in ("coef", "beta", "target")):
        return "a KL coefficient or target, not a KL; map it with --mapping"
    if is_kl_like(key):
        return (
            "KL-like, but which KL (to the reference, PPO old-vs-new, sampler/trainer "
            "mismatch) cannot be told from the name; map it with --mapping"
        )
    toks = normalise(key, keep_prefixes=True).split("_")
    for test, why in _AMBIGUOUS:
        if test(toks):
            return f"{_NO_MATCH}: {why}; map it with --mapping"
    return f"{_NO_MATCH}; map it with --mapping"


# Names a loop gives that look like a canonical metric and are not, or cannot be told apart
# from several: why each stays under its own name (``formats --explain``).
_AMBIGUOUS: tuple[tuple[Any, str], ...] = (
    (
        lambda t: "loss" in t and bool({"value", "vf", "critic", "v"} & set(t)),
        "a value (critic) loss, not the policy loss",
    ),
    (
        lambda t: bool({"coef", "coeff", "coefficient", "beta", "alpha", "weight"} & set(t)),
        "a coefficient or weight, not a measurement",
    ),
    (
        lambda t: bool({"return", "returns"} & set(t)),
        "a return sums rewards (over an episode or a batch): not the mean reward",
    ),
    (
        lambda t: "advantage" in t,
        "an advantage other than its std (advantages are centred): no canonical name",
    ),
    (
        lambda t: (
            bool({"episode", "ep", "epi", "episodic"} & set(t))
            and bool({"length", "len", "steps"} & set(t))
        ),
        "an episode's length in environment steps, not a response length",
    ),
    (
        lambda t: "reward" in t[:2] and t[-1] not in {"reward", *PERCENT_TOKENS} and len(t) > 1,
        "reward_<what>: a part of the reward or the total under another name, the name cannot tell",
    ),
    (
        lambda t: bool({"duration", "time", "seconds"} & set(t)),
        "a time of some part of the loop: which part, the name does not say",
    ),
)


# A benchmark's name has a digit (gsm8k, math500, aime24): ``<name>_acc`` is its score, where
# ``format_acc`` may be a part of the reward.
_DIGIT_RE = re.compile(r"\d")
_NO_MATCH = "no table rule, synonym or token match"
_COMPONENT_WORDS = frozenset({"reward", "penalty", "bonus"})
# Segments that group a loop's reward parts (``train/reward_metrics/format_reward``).
_PART_GROUPS = frozenset(
    {
        "reward",
        "rewards",
        "reward_metrics",
        "reward_components",
        "reward_component",
        "reward_parts",
        "reward_breakdown",
        "components",
    }
)
# Words that make a <what>_reward an aggregate or another quantity, not a part of the reward.
_NOT_PART = frozenset(
    {
        "total",
        "episode",
        "episodic",
        "ep",
        "epi",
        "batch",
        "overall",
        "final",
        "sum",
        "all",
        "raw",
        "scalar",
        "combined",
        "cumulative",
        "cum",
        "running",
        "best",
        "kl",
        "entropy",
        "loss",
        "value",
        "clip",
        "grad",
    }
)


def _suggest(key: str) -> tuple[str, str]:
    """(canonical name, why) a ``--mapping`` line for ``key`` would most likely use; the name
    is a placeholder (``<canonical name>``) where nothing in the key points to one."""
    toks = set(normalise(key).split("_"))
    if is_kl_like(key):
        return "train/ref_kl", "if it is the KL to the reference policy"
    if toks & _COMPONENT_WORDS:
        name = re.sub(r"[^\w.-]+", "_", key.strip()).strip("_") or "component"
        return f"reward/component/{name}/mean", "if it is one part of the reward"
    return "<canonical name>", "see `rlvitals formats` and docs/metrics.md for the names"


def unmapped_numeric(data: Any) -> list[dict[str, str]]:
    """The numeric keys of a run that no step of the chain maps and nothing explains (not a
    table's deliberate leave-out, a spread or a held-out split's), each with the one
    ``--mapping`` line (TOML) that would map it. Shown under the verdict of ``check``."""
    out = []
    for key, why in sorted(data.unmapped.items()):
        if not (why.startswith(_NO_MATCH) or why.startswith("KL-like")):
            continue
        if key not in data.metrics or key in ("time", "step", "policy_version", "epoch"):
            continue
        target, hint = _suggest(key)
        line = f"{json.dumps(target)} = {json.dumps(key)}"
        out.append({"key": key, "mapping": line, "hint": hint})
    return out


def _unmapped_regex(text: str) -> re.Pattern[str] | None:
    parts = [p.strip() for p in text.split(", ") if p.strip()]
    if not parts:
        return None
    alts = []
    head = parts[0].rsplit("/", 1)[0] + "/" if "/" in parts[0] else ""
    for i, part in enumerate(parts):
        if part.startswith("^"):
            alts.append(part[1:].rstrip("$"))
            continue
        if i and "/" not in part and head:
            part = head + part
        rx = re.escape(part)
        rx = re.sub(r"\\\{([^}]*)\\\}", lambda m: "(?:" + m.group(1).replace(",", "|") + ")", rx)
        rx = re.sub(r"<[^>]+>", "[^/]+", rx).replace(r"\*", ".*")
        alts.append(rx)
    try:
        return re.compile("^(?:" + "|".join(alts) + ")$")
    except re.error:
        return None


def blocker(unmapped: Iterable[tuple[str, str]]) -> list[tuple[re.Pattern[str], str]]:
    """A table's "not mapped" entries as patterns with their reasons (``a/*``, ``a/<f>/b``)."""
    out = []
    for source, why in unmapped:
        rx = _unmapped_regex(source)
        if rx is not None:
            out.append((rx, why))
    return out


_WANDB_COLUMN = re.compile(r"^(?P<run>.+?) - (?P<key>.+)$")


def header_keys(cells: list[str], run: Any = None) -> list[str]:
    """CSV column names as metric keys: a W&B export's ``<run> - <key>`` becomes ``<key>``.

    W&B's CSV export names each column ``<run name> - <key>``, with ``<key>__MIN`` and
    ``<key>__MAX`` beside sampled series (kept under those names). With more than one run in
    the file, the first run's columns are read as the run and the others keep their full
    names (a warning says so, when ``run`` is given).
    """
    runs: list[str] = []
    out = []
    for c in cells:
        m = _WANDB_COLUMN.match(c)
        if m is None:
            out.append(c)
            continue
        name = m.group("run")
        if name not in runs:
            runs.append(name)
        out.append(m.group("key") if name == runs[0] else c)
    if len(runs) > 1 and run is not None:
        run.warnings.append(
            f"{run.source}: the CSV holds {len(runs)} runs ({', '.join(runs[:5])}); "
            f"read {runs[0]!r}, the others kept under their full column names"
        )
    if runs and run is not None:
        run.info.setdefault("name", runs[0])
    return out


_EXPECTED = {
    "rlvitals": 'JSON step records, one per line ({"step": N, ...}; docs/format.md)',
    "jsonl": 'JSON lines with a step field ({"step": N, ...})',
    "csv": "a CSV header row with a step column, then one row per step",
    "json": 'a JSON list of step records ([{"step": N, ...}, ...])',
    "trl": "a trainer state: a JSON object with a log_history list",
}


def _require_something(data: Any, path: str) -> None:
    """Refuse a run from whose files nothing at all could be read: every line skipped (a
    ``steps.jsonl`` of binary junk) is an input error, not a run that has just started."""
    from ..errors import ReadError

    if data.steps().size or data.evals or (data.attempts is not None and len(data.attempts)):
        return
    skipped = [w for w in data.warnings if "skipped" in w or "not read" in w]
    if not skipped:
        return  # nothing written yet: a live run that has just started
    from pathlib import Path

    from .base import describe_path

    p = Path(path)
    target = p / "steps.jsonl" if p.is_dir() and (p / "steps.jsonl").is_file() else p
    looks = describe_path(target) if target.is_file() else "files"
    expected = _EXPECTED.get(
        data.format, f"records of the {data.format} format (`rlvitals formats {data.format}`)"
    )
    first = skipped[0]
    first = first if len(first) <= 160 else first[:157] + "..."
    raise ReadError(
        f"nothing could be read: {target.name} holds {looks}, expected {expected}; "
        f"{len(skipped)} record(s) skipped (first: {first})",
        path=path,
    )


def require_metrics(data: Any, path: str) -> None:
    """Refuse a run (``RunData``) that has keys but not one canonical metric among them.

    Such a run would otherwise read as "too early to tell" and pass a CI gate. The error
    names the keys left unmapped and ``--mapping``. A run with no record yet (a live run that
    has just started) is not refused.
    """
    from ..errors import ReadError

    if data.canonical_names():
        return
    names = [n for n in data.names() if n not in ("time", "step", "policy_version")]
    if not names:
        _require_something(data, path)
        return
    keys = sorted(data.unmapped) or sorted(data.source_keys) or names
    shown = ", ".join(keys[:8]) + (f", ... ({len(keys)} in all)" if len(keys) > 8 else "")
    hint = " or read it as generic JSONL with --from jsonl" if data.format == "rlvitals" else ""
    raise ReadError(
        f"no canonical metric could be read (format {data.format}); keys left unmapped: "
        f"{shown}. Map them with --mapping FILE{hint} (`rlvitals formats --explain {path}` "
        "shows each key and its rule)",
        path=path,
    )
