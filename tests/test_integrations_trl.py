"""The TRL callback on the real TRL trainers (trl 1.16) on CPU: a tiny random-init Llama and a
character-level tokenizer built here (no downloads), ``log_completions=True``.

Three runs, each trained once for the module: a healthy-ish run (a reward for varied replies,
a low learning rate), a run whose auxiliary reward dominates (a bonus for short replies worth
three times the task's reward, a high learning rate: the policy learns to stop at once), and
an RLOO run.
"""

from __future__ import annotations

import io
import json
import math
import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("trl")
torch = pytest.importorskip("torch")

from datasets import Dataset  # noqa: E402
from tokenizers import Tokenizer, decoders, models, pre_tokenizers  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast  # noqa: E402
from trl import GRPOConfig, GRPOTrainer, RLOOConfig, RLOOTrainer  # noqa: E402

from rlvitals.checks import run_checks, severity_rank  # noqa: E402
from rlvitals.errors import UsageError  # noqa: E402
from rlvitals.integrations.trl import RLVitalsCallback  # noqa: E402
from rlvitals.readers import read  # noqa: E402

CHARS = "abcdefghijklmnopqrstuvwxyz0123456789 +=?."
MAX_LEN = 8


def tokenizer() -> PreTrainedTokenizerFast:
    vocab = {"<pad>": 0, "<eos>": 1, "<bos>": 2}
    for c in CHARS:
        vocab[c] = len(vocab)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<pad>"))
    tok.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tok.decoder = decoders.Fuse()
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>"
    )
    hf.padding_side = "left"
    return hf


def model(vocab: int, eos_bias: float = 0.0) -> LlamaForCausalLM:
    torch.manual_seed(0)
    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=2,
    )
    m = LlamaForCausalLM(cfg)
    if eos_bias:
        # A model that ends its replies (as a pretrained one does): a bias on <eos>.
        head = torch.nn.Linear(32, vocab, bias=True)
        with torch.no_grad():
            head.weight.copy_(m.lm_head.weight)
            head.bias.zero_()
            head.bias[1] = eos_bias
        m.lm_head = head
    return m


def task(completions: list[str], **kw: Any) -> list[float]:
    return [1.0 if "7" in c else 0.0 for c in completions]


def short(completions: list[str], **kw: Any) -> list[float]:
    return [3.0 * (1 - len(c) / MAX_LEN) for c in completions]


def nothing(completions: list[str], **kw: Any) -> list[float]:
    return [0.0 for _ in completions]


def varied(completions: list[str], **kw: Any) -> list[float]:
    return [len(set(c)) / MAX_LEN for c in completions]


def train(
    tmp: Path,
    funcs: list[Any],
    *,
    steps: int,
    lr: float,
    halt_on: str | None = None,
    eos_bias: float = 0.0,
    rloo: bool = False,
    outputs: tuple[str, ...] = (),
    report_to: str = "none",
) -> dict[str, Any]:
    tok = tokenizer()
    ds = Dataset.from_dict({"prompt": [f"{i}+{i}=?" for i in range(200)]})
    common = dict(
        output_dir=str(tmp / "trainer_out"),
        per_device_train_batch_size=20,  # 5 prompts x 4 completions per step
        num_generations=4,
        max_completion_length=MAX_LEN,
        max_steps=steps,
        logging_steps=1,
        log_completions=True,
        num_completions_to_print=0,
        report_to=report_to,
        use_cpu=True,
        save_strategy="no",
        learning_rate=lr,
        seed=0,
        disable_tqdm=True,
    )
    args = RLOOConfig(beta=0.0, **common) if rloo else GRPOConfig(**common)  # no reference model
    out = io.StringIO()
    cb = RLVitalsCallback(
        output_dir=str(tmp / "runs"), halt_on=halt_on, check_every=0, stream=out, outputs=outputs
    )
    cls = RLOOTrainer if rloo else GRPOTrainer
    trainer = cls(
        model=model(len(tok), eos_bias),
        reward_funcs=funcs,
        args=args,
        train_dataset=ds,
        processing_class=tok,
        callbacks=[cb],
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    ours = [w for w in caught if "rlvitals" in str(w.message)]
    run_dir = tmp / "runs" / "trainer_out"
    return {
        "dir": run_dir,
        "run": read(run_dir),
        "printed": out.getvalue(),
        "history": [h for h in trainer.state.log_history if "train_runtime" not in h],
        "state": trainer.state,
        "callback": cb,
        "warnings": ours,
        "args": args,
    }


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return train(tmp_path_factory.mktemp("healthy"), [varied], steps=8, lr=1e-4, eos_bias=2.5)


@pytest.fixture(scope="module")
def exploited(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return train(
        tmp_path_factory.mktemp("exploit"),
        [task, short],
        steps=14,
        lr=0.05,
        halt_on="warn",
        eos_bias=2.5,
    )


@pytest.fixture(scope="module")
def rloo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return train(tmp_path_factory.mktemp("rloo"), [task, short], steps=3, lr=1e-3, rloo=True)


def test_bad_halt_on_is_a_usage_error():
    with pytest.raises(UsageError, match="halt_on"):
        RLVitalsCallback(halt_on="sometimes")


@pytest.mark.slow
def test_every_logged_step_is_recorded_with_its_keys(healthy):
    run, history = healthy["run"], healthy["history"]
    steps = [h["step"] for h in history]
    assert steps == list(range(1, 9))
    assert run.series("loss").steps.tolist() == steps
    for h in history:
        s = h["step"]
        # every logged key kept under its own name, and mapped where it has a meaning
        for k, v in h.items():
            if k == "step" or not isinstance(v, (int, float)):
                continue
            assert run.series(k).at(s) == pytest.approx(v), k
        assert run.series("reward/mean").at(s) == pytest.approx(h["reward"])
        assert run.series("train/entropy").at(s) == pytest.approx(h["entropy"])
        assert run.series("groups/signal_fraction").at(s) == pytest.approx(
            1 - h["frac_reward_zero_std"]
        )
    assert run.info["status"] == "finished"
    assert not healthy["warnings"]


@pytest.mark.slow
def test_completions_are_attempts_and_transcripts(healthy):
    run, d = healthy["run"], healthy["dir"]
    a = run.attempts
    assert a is not None and len(a) == 8 * 20
    assert sorted(set(a.step.tolist())) == list(range(1, 9))
    # 5 prompts of 4 completions per step: 5 groups of 4
    rows = a.rows_at(3)
    groups = a.group_code[rows]
    assert len(set(groups.tolist())) == 5
    assert sorted({int((groups == g).sum()) for g in set(groups.tolist())}) == [4]
    # each attempt's reward is the one TRL wrote in its completions parquet for that step
    import pyarrow.parquet as pq

    table = pq.read_table(
        d.parent.parent / "trainer_out" / "completions" / "completions_00003.parquet"
    )
    assert a.reward[rows].tolist() == pytest.approx(table.column("varied").to_pylist())
    transcript = json.loads((d / "transcripts" / "step-000003.json").read_text())
    assert [t["generations"][0]["completion"] for t in transcript] == table.column(
        "completion"
    ).to_pylist()
    assert a.response_tokens[rows].max() <= MAX_LEN
    assert run.has("reward/group_std_mean") and run.has("reward/mean_with_unusable")


@pytest.mark.slow
def test_the_trainers_own_output_dir_reads_as_the_same_attempts(healthy):
    # Without the callback: TRL's own completions parquet files, read as a dump.
    out = read(healthy["dir"].parent.parent / "trainer_out")
    assert out.format == "samples"
    mine, theirs = healthy["run"].attempts, out.attempts
    assert theirs.step.tolist() == mine.step.tolist()
    assert theirs.reward.tolist() == pytest.approx(mine.reward.tolist())
    assert out.series("reward/group_std_mean").values.tolist() == pytest.approx(
        healthy["run"].series("reward/group_std_mean").values.tolist()
    )


@pytest.mark.slow
def test_a_healthy_run_is_clean_of_warnings(healthy):
    report = run_checks(healthy["run"])
    bad = report.at_least("warn")
    assert not bad, [f.title for f in bad]
    assert "WARN" not in healthy["printed"] and "FAIL" not in healthy["printed"]
    assert healthy["callback"].stopped is None


@pytest.mark.slow
def test_a_dominating_auxiliary_reward_is_judged_live_and_halts_training(exploited):
    printed = exploited["printed"]
    cb = exploited["callback"]
    # judged while training, not after: a finding printed before the last step
    assert cb.stopped is not None, printed
    assert cb.stopped.verdict in ("collapse", "exploit_suspected"), cb.stopped
    assert severity_rank(cb.stopped.severity) >= severity_rank("warn")
    last = exploited["state"].global_step
    assert last < 14  # halt_on="warn" stopped it
    run = exploited["run"]
    assert run.info["status"] == "stopped"
    assert "halt_on=warn" in run.info["stop_reason"]
    assert "stopping training" in printed and "verdict:" in printed
    report = run_checks(run)
    assert report.verdict in ("collapse", "exploit_suspected")
    # the replies collapsed to nothing while the total reward rose
    lengths = run.series("response/length_mean").values
    assert lengths[-1] < lengths[0] / 2


def test_rloo_completions_are_recorded_too(rloo):
    run = rloo["run"]
    assert [h["step"] for h in rloo["history"]] == [1, 2, 3]
    a = run.attempts
    assert a is not None and len(a) == 3 * 20
    # total reward = task + short (weights 1), as RLOO computed it
    t = json.loads((rloo["dir"] / "transcripts" / "step-000001.json").read_text())
    for rec in t:
        text = rec["generations"][0]["completion"]
        want = (1.0 if "7" in text else 0.0) + 3.0 * (1 - len(text) / MAX_LEN)
        assert rec["reward"] == pytest.approx(want)
    assert run.series("rollout/short").at(1) is not None
    assert not rloo["warnings"]


def test_a_failure_inside_the_callback_never_reaches_training(tmp_path):
    cb = RLVitalsCallback(output_dir=str(tmp_path / "runs"), check_every=0, stream=io.StringIO())

    class State:
        is_world_process_zero = True
        global_step = 1

    class Control:
        should_training_stop = False

    class Args:
        output_dir = str(tmp_path / "out")
        log_completions = True
        max_completion_length = 8

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cb.on_train_begin(Args(), State(), Control())
        cb.run.log_step = None  # the writer breaks
        cb.on_log(Args(), State(), Control(), logs={"loss": 1.0, "reward": math.nan})
        cb.on_train_end(Args(), State(), Control())
    assert any("rlvitals" in str(w.message) for w in caught)


def test_only_the_main_process_writes(tmp_path):
    cb = RLVitalsCallback(output_dir=str(tmp_path / "runs"))

    class State:
        is_world_process_zero = False
        global_step = 1

    class Args:
        output_dir = str(tmp_path / "out")

    cb.on_train_begin(Args(), State(), object())
    cb.on_log(Args(), State(), object(), logs={"loss": 1.0})
    assert cb.run is None and not (tmp_path / "runs").exists()


def test_a_missing_completions_file_does_not_hold_steps_back(tmp_path):
    cb = RLVitalsCallback(output_dir=str(tmp_path / "runs"), check_every=0, stream=io.StringIO())

    class Args:
        output_dir = str(tmp_path / "out")
        log_completions = True
        max_completion_length = 8

    class State:
        is_world_process_zero = True
        global_step = 1

    class Control:
        should_training_stop = False

    state, control = State(), Control()
    cb.on_train_begin(Args(), state, control)
    cb.on_log(Args(), state, control, logs={"loss": 1.0, "reward": 0.5})
    assert cb.run.last_step is None  # waits one tick for the parquet of step 1
    state.global_step = 2
    cb.on_log(Args(), state, control, logs={"loss": 0.9, "reward": None})
    assert cb.run.last_step == 1  # written without attempts: no parquet came
    run_dir = cb.run.dir
    cb.on_train_end(Args(), state, control)
    run = read(run_dir)
    assert run.series("loss").steps.tolist() == [1, 2]
    assert math.isnan(run.series("reward").at(2))  # TRL's None: NaN at every sample
    assert run.info["status"] == "finished"


def test_a_packages_output_gets_the_same_alerts_from_the_callback_watch_and_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # One file registered by an entry point (a test package, not installed), named as the
    # CLI's --to names it: live in training, then `watch` and `serve` on the same run.
    from output_plugin import install, recorded, serve_once
    from rlvitals.cli import main
    from rlvitals.outputs import load_output

    monkeypatch.syspath_prepend(str(install(tmp_path / "site")))
    by_trl, by_watch, by_serve = (tmp_path / f"{n}.jsonl" for n in ("trl", "watch", "serve"))
    # A reward that is always 0: no group has a signal, which the groups check fails live.
    got = train(
        tmp_path, [nothing], steps=4, lr=1e-3, eos_bias=2.5, outputs=(f"recorder={by_trl}",)
    )
    alerts = recorded(by_trl)
    assert [(a["check"], a["severity"]) for a in alerts] == [("groups", "fail")], got["printed"]
    assert "FAIL groups:" in got["printed"]
    main(["watch", str(got["dir"]), "--json", "--to", f"recorder={by_watch}"])
    serve_once([got["dir"]], [load_output(f"recorder={by_serve}")])
    assert recorded(by_watch) == alerts and recorded(by_serve) == alerts
