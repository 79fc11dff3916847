"""The reference trainer's parts, on tiny inputs: tasks, graders, episodes, advantages, update."""

from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rlvitals.cli import main  # noqa: E402
from rlvitals.config import load_config  # noqa: E402
from rlvitals.errors import ConfigError  # noqa: E402
from rlvitals.grpo.agent import read_attempts  # noqa: E402
from rlvitals.grpo.config import SECTIONS  # noqa: E402
from rlvitals.grpo.faults import FAULTS, ActiveFault, parse_fault  # noqa: E402
from rlvitals.grpo.grader import grade, grade_prefix_bug, read_answer  # noqa: E402
from rlvitals.grpo.model import GPT  # noqa: E402
from rlvitals.grpo.sampler import Sampler  # noqa: E402
from rlvitals.grpo.tasks import VOCAB, Task, TaskPool, decode, encode  # noqa: E402
from rlvitals.grpo.trainer import Trainer, group_advantages  # noqa: E402


def test_answer_is_the_sum_units_digit_first() -> None:
    t = Task(12, 34, 2)
    assert t.prompt == "^12+34="
    assert t.answer == "640"
    assert Task(99, 99, 2).answer == "891"


def test_lookup_task_hides_its_operand_until_the_tool_replies() -> None:
    t = Task(12, 34, 2, variable="uv")
    assert t.prompt == "^uv+34=" and "12" not in t.prompt
    assert t.tool_reply == "12+34="
    assert t.demonstration() == ("^uv+34=", "?12+34=640$")


def test_heldout_problems_are_never_training_problems_and_do_not_depend_on_the_seed() -> None:
    pool = TaskPool(2, 0.25, 0.1)
    assert len(pool.heldout) == 1000 and len(pool.train) == 9000
    assert not set(pool.heldout.tolist()) & set(pool.train.tolist())
    again = TaskPool(2, 0.25, 0.1)
    assert again.heldout_tasks(50) == pool.heldout_tasks(50)
    held = {(t.a, t.b) for t in pool.heldout_tasks(200)}
    drawn = {(t.a, t.b) for t in pool.sample(2000, np.random.default_rng(0))}
    assert not held & drawn


def test_honest_grader_wants_the_exact_answer() -> None:
    t = Task(12, 34, 2)
    assert grade(t, "640$") == (1.0, {"answered": True, "answer_digits": 3})
    assert grade(t, "64$")[0] == 0.0
    assert grade(t, "640")[0] == 1.0  # cut before its end token: the digits are there
    assert grade(t, "?") == (0.0, {"answered": False, "answer_digits": 0})


def test_prefix_bug_grader_passes_any_prefix_of_the_answer() -> None:
    t = Task(12, 34, 2)
    assert [grade_prefix_bug(t, r)[0] for r in ("640$", "64$", "6$", "$")] == [1.0] * 4
    assert grade_prefix_bug(t, "65$")[0] == 0.0
    assert grade_prefix_bug(t, "?")[0] == 0.0
    assert read_answer("6$") == "6"


class Scripted(torch.nn.Module):
    """A stand-in policy that always puts its mass on one token (for the agent's rules)."""

    def __init__(self, token: str, max_len: int = 64) -> None:
        super().__init__()
        self.max_len = max_len
        self.bias = torch.nn.Parameter(torch.full((len(VOCAB),), -30.0))
        with torch.no_grad():
            self.bias[encode(token)[0]] = 30.0

    def new_cache(self, batch: int, length: int | None = None) -> None:
        return None

    def prefill(self, idx: torch.Tensor, cache: None) -> torch.Tensor:
        return self.bias.expand(idx.shape[0], -1)

    def decode_one(self, token: torch.Tensor, cache: None) -> torch.Tensor:
        return self.bias.expand(token.shape[0], -1)


def _episode(token: str, task: Task, **budget: int):
    sampler = Sampler(Scripted(token), torch.float32)  # type: ignore[arg-type]
    ep = sampler.rollout([task], greedy=True, **budget)
    return ep, read_attempts(ep)[0]


def test_tool_calls_get_the_tool_reply_until_max_turns() -> None:
    ep, att = _episode("?", Task(12, 34, 2, "uv"), max_new_tokens=8, max_turns=3)
    assert att.metadata == {"termination_reason": "max_turns", "turns": 3, "tool_calls": 3}
    assert [g["completion"] for g in att.transcript] == ["?", "?", "?"]
    assert att.transcript[1]["prompt"] == "^uv+34=?12+34="
    assert att.response_tokens == 3 and not att.truncated
    # Tool replies are fed, not sampled: only the three calls count as generated.
    assert int(ep.generated.sum()) == 3


def test_token_budget_cuts_a_reply_and_marks_it_truncated() -> None:
    _, att = _episode("1", Task(12, 34, 2), max_new_tokens=5, max_turns=3)
    assert att.final_reply == "11111"
    assert att.truncated and att.metadata["termination_reason"] == "max_tokens"
    assert att.transcript[0]["finish_reason"] == "length"
    assert len(att.logprobs) == 5


def test_end_token_ends_the_episode_as_an_answer() -> None:
    _, att = _episode("$", Task(12, 34, 2), max_new_tokens=5, max_turns=3)
    assert att.final_reply == "$" and att.metadata["termination_reason"] == "answer"
    assert att.transcript[0]["finish_reason"] == "stop"


def test_bfloat16_sampler_disagrees_with_the_float32_trainer_a_little() -> None:
    torch.manual_seed(0)
    model = GPT(len(VOCAB), 1, 2, 32)
    tasks = TaskPool(2, 0.5, 0.1).sample(16, np.random.default_rng(0))
    trainer = Trainer(
        model,
        lr=1e-3,
        clip_eps=0.2,
        minibatches=2,
        grad_clip=1.0,
        weight_decay=0.0,
        temperature=1.0,
        seed=0,
    )
    gaps = {}
    for dtype in (torch.float32, torch.bfloat16):
        ep = Sampler(model, dtype).rollout(
            tasks, max_new_tokens=6, max_turns=2, generator=torch.Generator().manual_seed(1)
        )
        mask = ep.generated[:, 1:]
        delta = trainer.logprobs(ep)[mask] - ep.logprobs[:, 1:][mask]
        gaps[dtype] = float(delta.abs().mean())
    assert gaps[torch.float32] < 1e-5
    assert 1e-4 < gaps[torch.bfloat16] < 0.1


_UPDATE = """
import hashlib, sys
import numpy as np
import torch
torch.set_num_threads(2)
junk = [torch.randn(int(sys.argv[1]) + i) for i in range(7)]  # another heap layout
from rlvitals.grpo.model import GPT
from rlvitals.grpo.sampler import Sampler
from rlvitals.grpo.tasks import VOCAB, TaskPool
from rlvitals.grpo.trainer import Trainer
torch.manual_seed(0)
model = GPT(len(VOCAB), 1, 4, 128)  # the trainer's head width, a batch of its size
tasks = [t for t in TaskPool(2, 0.25, 0.1).sample(60, np.random.default_rng(0)) for _ in range(4)]
sampler = Sampler(model, torch.bfloat16)
ep = sampler.rollout(tasks, max_new_tokens=6, max_turns=2, generator=torch.Generator().manual_seed(1))
trainer = Trainer(model, lr=1e-3, clip_eps=0.2, minibatches=2, grad_clip=1.0, weight_decay=0.0,
                  temperature=1.0, seed=0)
rows = list(range(0, 240, 2))
stats = trainer.update(ep, rows, [1.0 if i % 4 else -1.0 for i in rows])
state = b"".join(p.detach().numpy().tobytes() for p in model.parameters())
print(hashlib.sha256(state + ep.logprobs.numpy().tobytes()).hexdigest())
"""


def test_a_sampled_batch_and_an_update_are_the_same_in_every_process() -> None:
    # A seed gives the same run at a fixed thread count, in any process: nothing in sampling
    # or the update may depend on where the allocator put things (the backward of advanced
    # indexing, ``x[idx]``, does: its accumulation order follows memory layout).
    digests = {
        subprocess.run(
            [sys.executable, "-c", _UPDATE, str(junk)],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout
        for junk in (1, 13, 1001)
    }
    assert len(digests) == 1


def test_sampler_prefills_each_prompt_once_with_the_same_numbers() -> None:
    # Distinct prompts are prefilled once and copied to their rows, in the batch's order
    # (torch.unique sorts them): the episodes are those of prefilling every row.
    torch.manual_seed(0)
    model = GPT(len(VOCAB), 1, 2, 32)
    pool = TaskPool(2, 0.5, 0.1)
    distinct = pool.sample(6, np.random.default_rng(3))
    groups = [t for t in distinct for _ in range(3)][::-1]  # not in sorted order
    sampler = Sampler(model, torch.float32)
    for tasks in (groups, distinct[::-1]):  # shared prompts; every prompt distinct
        ep = sampler.rollout(
            tasks, max_new_tokens=6, max_turns=2, generator=torch.Generator().manual_seed(1)
        )
        assert [t.prompt for t in tasks] == [
            decode(row[: ep.prompt_len]) for row in ep.tokens.tolist()
        ]
        logits = model(ep.tokens[:, :-1]).detach()
        full = torch.log_softmax(logits, -1).gather(2, ep.tokens[:, 1:, None]).squeeze(2)
        mask = ep.generated[:, 1:]
        assert float((ep.logprobs[:, 1:][mask] - full[mask]).abs().max()) < 1e-5


def test_bfloat16_sampler_holds_rounded_weights_and_saves_them_in_bfloat16() -> None:
    torch.manual_seed(0)
    model = GPT(len(VOCAB), 1, 2, 32)
    sampler = Sampler(model, torch.bfloat16)
    for p in sampler.model.parameters():  # float32 arithmetic on bfloat16 numbers
        assert p.dtype == torch.float32 and torch.equal(p, p.to(torch.bfloat16).float())
    with torch.no_grad():
        next(model.parameters()).add_(0.123)
    sampler.load(model, 3)
    first = next(sampler.model.parameters())
    assert torch.equal(first, next(model.parameters()).to(torch.bfloat16).float())
    saved = sampler.state_dict()
    assert all(v.dtype == torch.bfloat16 for v in saved.values())
    assert sampler.version == 3


def test_advantages_are_relative_to_the_group() -> None:
    adv = group_advantages([1.0, 0.0, 1.0, 1.0, 1.0, 0.0], ["a", "a", "b", "b", "c", "c"])
    assert adv[0] == pytest.approx(1.0, abs=1e-3) and adv[1] == pytest.approx(-1.0, abs=1e-3)
    assert adv[2] == adv[3] == 0.0  # a group that agrees teaches nothing


def _trainer_and_batch(lr: float = 1e-2):
    torch.manual_seed(0)
    model = GPT(len(VOCAB), 1, 2, 32)
    trainer = Trainer(
        model,
        lr=lr,
        clip_eps=0.2,
        minibatches=2,
        grad_clip=1.0,
        weight_decay=0.0,
        temperature=1.0,
        seed=0,
    )
    tasks = TaskPool(2, 0.25, 0.1).sample(16, np.random.default_rng(0))
    ep = Sampler(model, torch.float32).rollout(
        tasks, max_new_tokens=6, max_turns=2, generator=torch.Generator().manual_seed(1)
    )
    rows = list(range(16))
    adv = [1.0 if i % 2 else -1.0 for i in rows]
    return model, trainer, ep, rows, adv


def test_update_changes_the_weights_and_the_clip_acts_after_the_first_minibatch() -> None:
    model, trainer, ep, rows, adv = _trainer_and_batch()
    before = [p.detach().clone() for p in model.parameters()]
    stats = trainer.update(ep, rows, adv)
    assert stats.stepped == 2
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    m = stats.metrics
    assert m["train/clip_frac"] > 0 and m["train/ppo_kl"] != 0
    assert all(math.isfinite(v) for v in m.values())


def test_async_mode_clips_against_the_policy_that_sampled_the_batch() -> None:
    # A batch the policy has moved past since it was sampled: every sampled token now e times
    # likelier than the sampler gave it. Pushing those tokens up again is what the clip stops,
    # if it is measured from the sampler; from the trainer's recomputation the ratio starts at
    # 1 and every token is pushed once more.
    for to_sampler in (False, True):
        model, trainer, ep, rows, _adv = _trainer_and_batch()
        trainer.clip_to_sampler = to_sampler
        ep = dataclasses.replace(ep, logprobs=torch.where(ep.generated, ep.logprobs - 1.0, 0.0))
        before = [p.detach().clone() for p in model.parameters()]
        stats = trainer.update(ep, rows, [1.0] * len(rows))
        moved = any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
        clip = stats.metrics["train/clip_frac"]
        if to_sampler:
            assert clip == 1.0 and not moved
        else:
            assert clip < 0.5 and moved
        # The mismatch metrics still get the trainer's own logprobs, not the sampler's.
        gen = ep.generated[:, 1:]
        assert torch.allclose(stats.logp_old[gen], ep.logprobs[:, 1:][gen] + 1.0, atol=1e-4)


def test_nonfinite_loss_skips_the_optimizer_step() -> None:
    model, trainer, ep, rows, adv = _trainer_and_batch()
    trainer.logit_scale = math.inf
    before = [p.detach().clone() for p in model.parameters()]
    stats = trainer.update(ep, rows, adv)
    assert stats.stepped == 0 and math.isnan(stats.metrics["train/loss"])
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_fault_names_and_onsets_parse() -> None:
    assert parse_fault("nan@7") == ("nan", 7)
    assert parse_fault("stall") == ("stall", None)
    with pytest.raises(ConfigError, match="unknown fault 'nope'"):
        parse_fault("nope")
    with pytest.raises(ConfigError, match="expected an update number"):
        parse_fault("nan@x")
    f = ActiveFault.create("out_of_room", None)
    assert f.step == FAULTS["out_of_room"].default_step
    assert not f.on("out_of_room", f.step - 1) and f.on("out_of_room", f.step)


def test_trainer_sections_are_validated_by_name() -> None:
    with pytest.raises(ConfigError, match=r"\[task.group_size\].*integer"):
        load_config({"task": {"group_size": "eight"}}, sections=SECTIONS)
    with pytest.raises(ConfigError, match=r"\[optim.lrr\]: unknown key"):
        load_config({"optim": {"lrr": 1.0}}, sections=SECTIONS)
    cfg = load_config({"model": {"d_model": 64}}, sections=SECTIONS)
    assert cfg.to_dict()["model"]["d_model"] == 64 and cfg.to_dict()["task"]["digits"] == 2


def test_list_faults_names_every_fault_with_its_onset(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--list-faults", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in rows] == list(FAULTS)
    assert all(r["default_step"] >= 0 and r["does"] and r["shows"] for r in rows)
    assert main(["demo", "--list-faults"]) == 0
    text = capsys.readouterr().out
    assert all(name in text for name in FAULTS)


def test_list_faults_states_the_codes_exploit_warm_target() -> None:
    """Newcomer 2026-12-07 problem 7: the list said the exploit's warm start goes "to a pass
    rate of 0.3" where the code (and README, docs/trainer.md) use 0.25."""
    from rlvitals.grpo.faults import EXPLOIT_WARM_TARGET, describe

    does = next(r["does"] for r in describe() if r["name"] == "grader_exploit")
    assert f"pass rate of {EXPLOIT_WARM_TARGET}" in does, does
    for page in ("README.md", "docs/trainer.md"):
        text = (Path(__file__).parent.parent / page).read_text()
        assert f"{EXPLOIT_WARM_TARGET}" in text, page


@pytest.mark.parametrize("width", [40, 60, 80, 120, 200])
def test_list_faults_wraps_every_cell_at_any_width(width: int) -> None:
    # ``demo --list-faults`` on a terminal of any width: no cell is cut (no "…"), and each
    # column, read down the table, holds every character of its cells (long names such as
    # ``discard/rollouts/stale`` fold onto the next line instead of being cut).
    import io

    from rich.console import Console

    from rlvitals.grpo.faults import describe
    from rlvitals.views.live import fault_table

    rows = describe()
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None).print(fault_table(rows))
    out = buf.getvalue()
    assert "…" not in out
    assert "NAME[@STEP]" in out
    body = [ln for ln in out.splitlines() if ln.startswith("│")]
    assert all(len(ln) <= width for ln in out.splitlines())
    columns = ["".join(ln.split("│")[i + 1].replace(" ", "") for ln in body) for i in range(4)]
    for i, key in enumerate(("name", "default_step", "does", "shows")):
        assert columns[i] == "".join(str(r[key]).replace(" ", "") for r in rows), key


def test_bad_fault_and_bad_config_are_one_line_errors(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--fault", "meltdown"]) == 2
    err = capsys.readouterr().err
    assert "unknown fault 'meltdown'" in err and "Traceback" not in err
    bad = tmp_path / "run.toml"
    bad.write_text("[optim]\nsteps = 0\n")
    assert main(["train", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "[optim.steps]" in err and ">= 1" in err


def test_adamw_first_step_moves_each_weight_by_lr_times_the_gradient_sign() -> None:
    from rlvitals.grpo.optim import AdamW

    p = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    opt = AdamW([p], lr=0.1, weight_decay=0.0)
    p.grad = torch.tensor([0.5, -3.0])
    opt.step()  # bias-corrected m / sqrt(v) is sign(g) on the first step
    assert torch.allclose(p.detach(), torch.tensor([0.9, -1.9]), atol=1e-6)


@pytest.mark.parametrize(
    "path", sorted((Path(__file__).parent.parent / "examples").glob("*.toml")), ids=str
)
def test_example_configs_are_valid(path: Path) -> None:
    cfg = load_config(path, sections=SECTIONS)
    assert cfg.section("optim").steps >= 1


def test_the_example_config_is_the_demo_run() -> None:
    # examples/grpo.toml says it is the same run as `rlvitals demo`: the trainer's sections
    # and the writer's [training] (the unusable-groups guard in updates) agree.
    from rlvitals.grpo.demo import demo_config

    example = load_config(
        Path(__file__).parent.parent / "examples" / "grpo.toml", sections=SECTIONS
    )
    demo = load_config(demo_config("runs"), sections=SECTIONS)
    for section in ("model", "task", "optim", "training"):
        assert example.to_dict()[section] == demo.to_dict()[section], section


def test_live_view_shows_the_key_numbers_and_the_summary() -> None:
    import io

    from rich.console import Console

    from rlvitals.outputs.console import LiveView
    from rlvitals.views.live import summary

    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=False, color_system=None)
    with LiveView(3, console=console) as view:
        view.event("warm_done", {"steps": 120, "pass_rate": 0.31, "cached": False, "seconds": 2.0})
        for i, r in enumerate([0.2, 0.3, 0.4]):
            view.event(
                "step",
                {
                    "step": i,
                    "reward/mean": r,
                    "train/mismatch_kl": 3e-5,
                    "train/loss": "NaN",
                    "discard/rollouts/stale": 4.0,
                },
            )
        view.event("eval", {"step": 2, "score": 0.55})
        view.event("stopped", {"reason": "[bold]x[/bold]", "message": "m"})
    console.print(summary(view.tally, "runs/r[1]", fault="nan@1"))
    text = out.getvalue()
    assert "warm start (120 steps, pass rate 0.31)" in text
    assert "3.0e-05" in text and "0.55 (update 2)" in text and "nan" in text
    assert "failed attempts" in text and "0 (+4 dropped stale)" in text  # stale is not failed
    assert "stopped: [bold]x[/bold]" in text  # markup in event text is shown, not rendered
    assert "runs/r[1]" in text and "0.300 (mean of the first 5 updates)" in text
    # which figure is which (newcomer 2026-12-03: four held-out pairs, two "first" windows)
    # (2026-12-07: one held-out pair on the screen, the check's: the summary counts the evals)
    assert "1 evaluation(s), the last 0.550 (update 2)" in text and "windows of their own" in text
    # The reward followed is every graded attempt's where the run logs it (the trained
    # groups' stays near the middle as solved groups leave training).
    view = LiveView(2, console=Console(file=io.StringIO(), color_system=None))
    for i, (r, all_r) in enumerate([(0.5, 0.5), (0.5, 0.7)]):
        view.event("step", {"step": i, "reward/mean": r, "reward/mean_with_unusable": all_r})
    assert view.tally.rewards == [0.5, 0.7]


def test_live_view_says_what_the_warm_start_is_and_judges_while_it_trains(
    tmp_path: Path,
) -> None:
    import io
    import sys

    from rich.console import Console

    sys.path.insert(0, str(Path(__file__).parent))
    from dataclasses import replace

    from dashboard_runs import make_run
    from rlvitals.follow.train import TrainFollow, shown_by
    from rlvitals.outputs.console import LiveView

    run = make_run(tmp_path, "live", 20, status="running", **{"train/loss": "NaN"})
    out = io.StringIO()
    console = Console(file=out, width=120, force_terminal=False, color_system=None)
    view = LiveView(40, console=console)
    event = shown_by(view, TrainFollow(None, [view], replace(TrainFollow.THROTTLE, every_s=0)))
    with view:
        event("warm_begin", {"cached": False, "target": 0.3, "cache": "/c"})
        event("warm_step", {"step": 50, "greedy": 0.04})
        buf = io.StringIO()
        Console(file=buf, width=120, color_system=None).print(view._render())
        mid = buf.getvalue()
        event("warm_done", {"steps": 230, "pass_rate": 0.31, "cached": False, "seconds": 9})
        event("run", {"run_dir": str(run)})
        event("step", {"step": 0, "reward/mean": 0.3})
    text = out.getvalue()
    assert "solves 30% of them" in text and "cached in /c" in text and "40 GRPO updates" in text
    assert "0/?" not in text and "0/?" not in mid
    assert "warm start, step 50" in mid and "greedy solves 4%" in mid
    assert "verdict so far: " in text and "FAIL nonfinite" in text  # judged while training
    assert "once per seed" in mid


def test_the_demo_intro_says_where_its_warm_start_came_from() -> None:
    from rlvitals.views.live import RunTally, intro

    said = {}
    for how in ({"cached": True, "shipped": True}, {"cached": True, "shipped": False}):
        t = RunTally(40)
        t.event("warm_begin", {**how, "target": 0.3, "cache": "/c"})
        said[how["shipped"]] = intro(t).plain
    assert "shipped with rlvitals" in said[True] and "/c" not in said[True]
    assert "from the cache in /c" in said[False] and "shipped" not in said[False]
    # The progress line says the same.
    import io

    from rich.console import Console

    from rlvitals.outputs.console import LiveView

    for shipped, word in ((True, "shipped"), (False, "cached")):
        out = io.StringIO()
        with LiveView(40, console=Console(file=out, width=120, color_system=None)) as view:
            view.event("warm_begin", {"cached": True, "shipped": shipped, "target": 0.45})
            view.event("warm_done", {"steps": 260, "pass_rate": 0.46, "cached": True, "seconds": 0})
        assert f"warm start ({word}, pass rate 0.46)" in out.getvalue()
        assert ("cached" in out.getvalue()) is not shipped


def test_next_steps_name_the_real_paths() -> None:
    from rlvitals.views.live import next_steps

    healthy = "\n".join(next_steps("runs/demo-1", command="demo"))
    assert "rlvitals report runs/demo-1 -o report.html" in healthy
    assert "rlvitals serve runs " in healthy and "--fault grader_exploit" in healthy
    assert "rlvitals check " in healthy and "RUN" not in healthy
    broken = "\n".join(next_steps("my runs/x", command="demo", fault="nan"))
    assert "rlvitals transcripts 'my runs/x'" in broken


def test_trainer_page_documents_every_fault_and_every_trainer_key() -> None:
    from rlvitals.config import reference

    page = (Path(__file__).parent.parent / "docs" / "trainer.md").read_text()
    missing = [f for f in FAULTS if f"`{f}`" not in page]
    missing += [
        f"[{r['section']}] {r['key']}"
        for r in reference(SECTIONS)
        if r["section"] in SECTIONS and f"`{r['key']}`" not in page
    ]
    assert not missing


def test_an_episode_longer_than_the_model_is_a_config_error(tmp_path: Path) -> None:
    from rlvitals.grpo import demo_run

    with pytest.raises(ConfigError, match=r"\[task.max_new_tokens\].*positions"):
        demo_run(tmp_path, overrides={"task": {"max_new_tokens": 60}}, cache=tmp_path)
    assert not any(tmp_path.iterdir())  # nothing written, no warm start


def test_a_warm_start_that_gives_up_below_its_target_is_said_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Ten supervised steps cannot reach a pass rate of 0.45 (addition clicks after ~200).
    monkeypatch.setenv("RLVITALS_CACHE", str(tmp_path / "cache"))
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        f'[output]\noutput_dir = "{tmp_path / "runs"}"\nname = "gave-up"\n'
        "[task]\ntasks_per_step = 4\nheldout_tasks = 8\n"
        "[optim]\nsteps = 1\nwarm_max_steps = 10\n"
    )
    assert main(["train", str(cfg), "--quiet"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "warm start gave up" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: ")
    assert "after 10 steps" in lines[0] and "target 0.45" in lines[0] and "Traceback" not in err
    info = json.loads((tmp_path / "runs" / "gave-up" / "run.json").read_text())
    assert info["warm_start"]["reached_target"] is False
    # The TOML sets no unusable-groups guard: the trainer's, 3 updates' worth of groups.
    assert info["config"]["training"]["max_consecutive_unusable_groups"] == 3 * 4
    # One that sets it keeps it (none at all, too).
    toml = cfg.read_text()
    for given, want in (("7", 7), ("0", 0)):
        cfg.write_text(
            toml.replace('"gave-up"', f'"guard-{given}"')
            + f"[training]\nmax_consecutive_unusable_groups = {given}\n"
        )
        assert main(["train", str(cfg), "--quiet"]) == 0
        info = json.loads((tmp_path / "runs" / f"guard-{given}" / "run.json").read_text())
        assert info["config"]["training"]["max_consecutive_unusable_groups"] == want


def test_the_live_view_says_a_warm_start_gave_up() -> None:
    import io

    from rich.console import Console

    from rlvitals.outputs.console import LiveView

    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False, color_system=None)
    with LiveView(40, console=console) as view:
        view.event("warm_begin", {"cached": False, "target": 0.3, "cache": "/c"})
        done = {"steps": 3000, "pass_rate": 0.0, "cached": False, "seconds": 9}
        view.event("warm_done", {**done, "reached_target": False})
    assert "warm start gave up after 3000 steps at pass rate 0.00 of its target 0.30" in (
        out.getvalue()
    )


# -- the shipped warm start ------------------------------------------------------------------


def _default_model():
    from rlvitals.grpo.config import ModelConfig, OptimConfig, TaskConfig
    from rlvitals.grpo.loop import MAX_LEN

    m, t, o = ModelConfig(), TaskConfig(), OptimConfig()
    return m, t, o, GPT(len(VOCAB), m.n_layer, m.n_head, m.d_model, max_len=MAX_LEN)


def test_the_demo_warm_start_ships_for_the_default_settings() -> None:
    # A change to the model, tasks or warm-start settings changes the key: this fails until
    # scripts/make_warmstart.py has made the file for the new settings.
    from dataclasses import replace

    from rlvitals.grpo.faults import warm_targets
    from rlvitals.grpo.warmstart import SHIPPED, shipped_path

    m, t, o, _ = _default_model()
    # The default's, and each fault's that stops its warm start elsewhere (grader_exploit).
    targets = warm_targets(o.warm_target_pass_rate)
    assert targets - {o.warm_target_pass_rate}  # (grader_exploit has its own)
    paths = {shipped_path(m, t, replace(o, warm_target_pass_rate=r)) for r in targets}
    for path in paths:
        assert path.exists(), f"no shipped warm start {path.name}: run scripts/make_warmstart.py"
    assert {p.name for p in SHIPPED.glob("*.pt")} == {p.name for p in paths}  # no stale ones


def test_a_first_demo_loads_the_shipped_warm_start_and_it_solves_its_target(tmp_path) -> None:
    import torch

    from rlvitals.grpo.warmstart import is_cached, pass_rate, warm_source, warm_start

    m, t, o, model = _default_model()
    assert is_cached(m, t, o, tmp_path)  # an empty cache: the shipped one counts
    assert warm_source(m, t, o, tmp_path) == "shipped"
    ws = warm_start(
        model, TaskPool(t.digits, t.tool_fraction, t.heldout_fraction), m, t, o, directory=tmp_path
    )
    assert ws.shipped and ws.cached and ws.reached_target and ws.seconds < 5
    # What it says of itself holds here: sampled on 128 training tasks, near its target.
    sampler = Sampler(model, torch.bfloat16)
    sampler.load(model, 0)
    rate = pass_rate(
        sampler,
        TaskPool(t.digits, t.tool_fraction, t.heldout_fraction),
        t,
        np.random.default_rng(7),
        torch.Generator().manual_seed(7),
    )
    assert rate >= o.warm_target_pass_rate - 0.15, rate
    # Another seed has none shipped: it is neither shipped nor counted as cached.
    from rlvitals.grpo.config import OptimConfig

    assert not is_cached(m, t, OptimConfig(seed=5), tmp_path)
    assert warm_source(m, t, OptimConfig(seed=5), tmp_path) is None
    # What the pass-rate check that stops it samples with is in the key: a warm start made at
    # another temperature or budget stopped at another point, and is not reused.
    from dataclasses import replace

    for changed in ({"temperature": 0.8}, {"max_new_tokens": 6}, {"max_turns": 2}):
        assert warm_source(m, replace(t, **changed), o, tmp_path) is None, changed


def test_a_corrupt_warm_start_file_leaves_the_model_untouched(tmp_path) -> None:
    import torch

    from rlvitals.grpo.warmstart import _load

    *_, model = _default_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    bad = tmp_path / "bad.pt"
    torch.save(
        {
            "state_dict": {"tok.weight": torch.zeros(3, 3)},
            "info": {"steps": 1, "pass_rate": 0.5, "reached_target": True},
        },
        bad,
    )
    assert _load(model, bad) is None
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    assert _load(model, tmp_path / "junk.pt") is None
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
