"""Write the prime-rl trace-stream fixture exactly as prime-rl's file monitor writes it.

Run from the repository root: ``python tests/data/samples/make_primerl_stream.py`` (needs
orjson and pyzstd, the libraries prime-rl writes with). Newer prime-rl (after the 2026-08-21
snapshot) no longer writes ``rollouts/step_N/...``: every episode goes, once, as it arrives,
into one chunked stream, with an index beside it, and what is learnt later (the batch that
shipped it, the trainer's per-token streams) goes into one annotation stream per producer.
Each writer below is prime-rl's code as stored in the code index (PrimeIntellect-ai/prime-rl
file versions; the git snapshot @559b4477 predates them), kept as it is, with the
file and lines cited:

- ``src/prime_rl/monitors/file/traces/__init__.py`` (the whole file, 35 lines): the layout,
  ``<output_dir>/monitors/file/traces/{stream,annotations/<producer>}`` and each stream's
  index beside it, ``stream.index.jsonl``, ``annotations/<producer>.index.jsonl``;
- ``src/prime_rl/monitors/file/traces/chunks.py`` @551bfc39 (``chunk_path`` :28-29,
  ``seal`` :64-74, ``ChunkedJsonl.append``/``_roll`` :98-106,:124-130): ``NNNNN.jsonl``
  chunks, a full one sealed to ``NNNNN.jsonl.zst`` (zstd level 3 in 4 MiB seekable frames)
  and its plain file removed;
- ``src/prime_rl/monitors/file/monitor.py`` (``log_metrics`` :48-60, ``_stream`` :116-123,
  ``log_episodes`` :125-151, ``log_annotations`` :153-170): one stream line and one index row
  per episode, ``orjson.dumps(..., default=str, option=OPT_APPEND_NEWLINE |
  OPT_SERIALIZE_NUMPY)``; the ``effective`` subset writes nothing;
- ``src/prime_rl/monitors/file/traces/index.py`` @3979190d (``summarize_episode`` :53-130,
  ``index_row`` :145-153);
- ``src/prime_rl/monitors/file/traces/update.py`` (``make_update`` :32-41,
  ``update_index_row`` :23-29);
- the orchestrator's ``stamp_arrival``/``stamp_batch`` (``info.kind``, ``info.dispatch``,
  ``info.arrival``; the shipped cohort's ``{"effective": true, "ship": {step, time}}``
  update) and the trainer's ``AnnotationWriter.export`` (``trainer_logprobs``,
  ``entropies``, ``mismatch_kl`` = exp(d) - d - 1 per token, null off the loss mask and at
  each sample's first position; 4 decimals, 6 for the KL);
- ``packages/prime-rl-configs/.../configs/monitors.py`` ``FileMonitorConfig``: ``path =
  metrics.jsonl``, ``chunk_bytes = 5 GiB``, ``compress = True``, ``float_decimals = 4``.

Records are verifiers ``Episode.to_record(float_decimals)`` (``model_dump(mode="json",
exclude_none=True)``; verifiers ``verifiers/v1/episode.py``), traces and nodes shaped as in
the older fixture (``make_fixtures.py``'s ``_episode``). ``chunk_bytes`` is set to 8 kB so
the small run rolls: chunk 0 is sealed, chunk 1 is the live plain chunk of a run still going.
"""

from __future__ import annotations

import json
import math
import shutil
import threading
from pathlib import Path

import orjson
import pyzstd

HERE = Path(__file__).resolve().parent
OPTS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_SERIALIZE_NUMPY
T0 = 1780000000.0

# -- prime_rl/monitors/file/traces/__init__.py --------------------------------------------


def get_file_monitor_dir(output_dir: Path) -> Path:
    return output_dir / "monitors" / "file"


def get_trace_dir(output_dir: Path) -> Path:
    return get_file_monitor_dir(output_dir) / "traces"


def get_trace_stream(output_dir: Path) -> Path:
    return get_trace_dir(output_dir) / "stream"


def get_annotations_dir(output_dir: Path) -> Path:
    return get_trace_dir(output_dir) / "annotations"


def get_index_path(stream: Path) -> Path:
    return stream.with_name(stream.name.removesuffix(".jsonl") + ".index.jsonl")


# -- prime_rl/monitors/file/traces/chunks.py ----------------------------------------------

LEVEL = 3
FRAME_BYTES = 4 << 20


def chunk_path(directory: Path, number: int) -> Path:
    return directory / f"{number:05d}.jsonl"


def chunk_numbers(directory: Path) -> dict[int, bool]:
    numbers: dict[int, bool] = {}
    for path in directory.glob("*.jsonl*"):
        number = int(path.name.split(".", 1)[0])
        numbers[number] = numbers.get(number, False) or path.suffix == ".jsonl"
    return numbers


def seal(path: Path) -> None:
    target = path.with_name(path.name + ".zst")
    partial = target.with_name(target.name + ".tmp")
    with (
        open(path, "rb") as src,
        pyzstd.SeekableZstdFile(
            partial, "wb", level_or_option=LEVEL, max_frame_content_size=FRAME_BYTES
        ) as dst,
    ):
        shutil.copyfileobj(src, dst, 1 << 20)
    partial.replace(target)
    path.unlink()


class ChunkedJsonl:
    def __init__(self, directory: Path, max_bytes: int, compress: bool) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.max_bytes = max_bytes
        self.compress = compress
        self._sealing: list[threading.Thread] = []
        numbers = chunk_numbers(directory)
        last = max(numbers, default=-1)
        self.number = last if numbers.get(last) else last + 1
        for number, plain in numbers.items():
            if plain and number != self.number and compress:
                self._seal(number)
        self.file = open(chunk_path(directory, self.number), "ab")  # noqa: SIM115
        self.size = self.file.tell()

    def append(self, line: bytes) -> tuple[int, int]:
        if self.size and self.size + len(line) > self.max_bytes:
            self._roll()
        offset = self.size
        self.file.write(line)
        self.size += len(line)
        return self.number, offset

    def flush(self) -> None:
        self.file.flush()

    def wait(self) -> None:
        """The run is still going: the live chunk stays plain (no ``close``)."""
        self.file.flush()
        for thread in self._sealing:
            thread.join()

    def _roll(self) -> None:
        self.file.close()
        if self.compress:
            self._seal(self.number)
        self.number += 1
        self.file = open(chunk_path(self.directory, self.number), "ab")  # noqa: SIM115
        self.size = 0

    def _seal(self, number: int) -> None:
        thread = threading.Thread(target=seal, args=(chunk_path(self.directory, number),))
        thread.start()
        self._sealing.append(thread)


# -- prime_rl/monitors/file/traces/index.py @3979190d -------------------------------------

TRUNCATING_STOPS = frozenset(
    {"max_turns", "max_input_tokens", "max_output_tokens", "max_total_tokens", "compaction_failed"}
)


def walk_timing(obj: dict, prefix: str, out: dict[str, float]) -> None:
    if isinstance(obj.get("duration"), (int, float)):
        out[prefix] = out.get(prefix, 0.0) + obj["duration"]
    elif isinstance(obj.get("start"), (int, float)) and isinstance(obj.get("end"), (int, float)):
        out[prefix] = out.get(prefix, 0.0) + (obj["end"] - obj["start"])
    for key, value in obj.items():
        if isinstance(value, dict):
            walk_timing(value, f"{prefix}/{key}" if prefix else key, out)


def episode_kind(rec: dict) -> str:
    for trace in rec.get("traces") or []:
        if (kind := (trace.get("info") or {}).get("kind")) in ("train", "eval"):
            return kind
    run = rec.get("run") or {}
    return (run.get("work") or {}).get("type") or run.get("type") or "eval"


def trace_truncated(trace: dict) -> bool:
    if trace.get("stop_condition") in TRUNCATING_STOPS:
        return True
    last = next(
        (call for call in reversed(trace.get("calls") or []) if call.get("error") is None), None
    )
    return bool(last and last.get("finish_reason") == "length")


def _wire_tokens(rec: dict) -> tuple[int, int]:
    """``WireEpisode.num_input_tokens``/``num_output_tokens`` (verifiers ``episode.py``,
    ``trace.py`` ``Branch.num_output_tokens``/``num_input_tokens``): the calls' completion
    tokens, and the last call's total less them."""
    inp = out = 0
    for trace in rec.get("traces") or []:
        usage = [c["usage"] for c in trace.get("calls") or [] if c.get("usage")]
        o = sum(u.get("completion_tokens", 0) for u in usage)
        total = usage[-1].get("total_tokens", 0) if usage else 0
        out += o
        inp += total - o
    return inp, out


def _episode_duration(info: dict, timing: dict[str, float]) -> float | None:
    dispatched = (info.get("dispatch") or {}).get("time")
    arrived = (info.get("arrival") or {}).get("time")
    if isinstance(dispatched, (int, float)) and isinstance(arrived, (int, float)):
        return max(0.0, arrived - dispatched)
    phases = [value for key, value in timing.items() if "/" not in key]
    return sum(phases) if phases else None


def summarize_episode(line: int, rec: dict, offset: int | None = None) -> dict:
    rewards, advantages = [], []
    input_tokens, output_tokens = _wire_tokens(rec)
    turns = branches = 0
    stop_condition = None
    truncated = False
    reward_parts: dict[str, list[float]] = {}
    metric_parts: dict[str, list[float]] = {}
    timing: dict[str, float] = {}
    costs: list[float] = []
    for trace in rec.get("traces") or []:
        costs.extend(
            usage["cost"]
            for call in trace.get("calls") or []
            if isinstance(usage := call.get("usage") or {}, dict)
            and isinstance(usage.get("cost"), (int, float))
        )
        nodes = trace.get("nodes") or []
        parents = {node.get("parent") for node in nodes if "parent" in node}
        branches += max(0, len(nodes) - len(parents))
        if trace.get("rewards"):
            rewards.append(
                sum(
                    (r.get("score") or 0) * (r.get("weight") if r.get("weight") is not None else 1)
                    for r in trace["rewards"].values()
                    if isinstance(r, dict)
                )
            )
        for name, r in (trace.get("rewards") or {}).items():
            if isinstance(r, dict) and isinstance(r.get("score"), (int, float)):
                reward_parts.setdefault(name, []).append(r["score"])
        for name, value in (trace.get("metrics") or {}).items():
            if isinstance(value, (int, float)):
                metric_parts.setdefault(name, []).append(value)
        if isinstance(trace.get("timing"), dict):
            walk_timing(trace["timing"], "", timing)
        advantage = (trace.get("info") or {}).get("advantage")
        if advantage is not None:
            advantages.append(advantage)
        for node in nodes:
            if (node.get("message") or {}).get("role") == "assistant":
                turns += 1
        stop_condition = trace.get("stop_condition", stop_condition)
        truncated = truncated or trace_truncated(trace)
    first_info = ((rec.get("traces") or [{}])[0].get("info")) or {}
    return {
        "rewards": {name: sum(v) / len(v) for name, v in reward_parts.items()},
        "metrics": {name: sum(v) / len(v) for name, v in metric_parts.items()},
        "timing": timing,
        "cost": sum(costs) if costs else None,
        "line": line,
        "offset": offset,
        "id": rec.get("id"),
        "kind": episode_kind(rec),
        "trace_ids": [tid for trace in rec.get("traces") or [] if (tid := trace.get("id"))],
        "env": (rec.get("env") or {}).get("name") or (rec.get("env") or {}).get("id"),
        "group": (rec.get("group") or {}).get("id"),
        "ok": rec.get("ok"),
        "num_errors": len(rec.get("errors") or []),
        "reward": sum(rewards) / len(rewards) if rewards else None,
        "advantage": sum(advantages) / len(advantages) if advantages else None,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "turns": turns,
        "branches": branches,
        "stop_condition": stop_condition,
        "truncated": truncated,
        "dispatch": (first_info.get("dispatch") or {}).get("time"),
        "arrival": (first_info.get("arrival") or {}).get("time"),
        "duration": _episode_duration(first_info, timing),
    }


def index_row(line: int, rec: dict, chunk: int, offset: int) -> dict:
    row = summarize_episode(line, rec, offset)
    row["chunk"] = chunk
    for key in ("rewards", "metrics", "timing"):
        row.pop(key, None)
    return row


# -- prime_rl/monitors/file/traces/update.py ----------------------------------------------

UPDATE_VERSION = 1


def update_index_row(update: dict, chunk: int, offset: int) -> dict:
    return {
        "trace_id": update.get("trace_id"),
        "chunk": chunk,
        "offset": offset,
        "info": update.get("info") or {},
    }


def make_update(trace_id: str, *, info=None, branches=None) -> dict:
    return {
        "version": UPDATE_VERSION,
        "trace_id": trace_id,
        "info": info or {},
        "branches": [{"index": index, **streams} for index, streams in (branches or {}).items()],
    }


# -- prime_rl/monitors/file/monitor.py (FileMonitor) --------------------------------------


class FileMonitor:
    def __init__(self, output_dir: Path, producer: str, chunk_bytes: int, compress: bool):
        self.output_dir = output_dir
        self.producer = producer
        self.chunk_bytes = chunk_bytes
        self.compress = compress
        index = get_index_path(get_trace_stream(output_dir))
        self._logged = sum(1 for _ in index.open("rb")) if index.is_file() else 0
        self.path = get_file_monitor_dir(output_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(self.path, "a", buffering=1)  # noqa: SIM115
        self._streams: dict[Path, tuple[ChunkedJsonl, object]] = {}

    def log_metrics(self, metrics: dict, step: int | None, time: float) -> None:
        row = {"step": step, "time": time, **metrics}
        if self.producer is not None:
            row["producer"] = self.producer
        self.file.write(json.dumps(row) + "\n")

    def _stream(self, directory: Path):
        if directory not in self._streams:
            stream = ChunkedJsonl(directory, self.chunk_bytes, self.compress)
            self._streams[directory] = (stream, open(get_index_path(directory), "ab"))  # noqa: SIM115
        return self._streams[directory]

    def log_episodes(self, records: list[dict], subset: str) -> None:
        if subset == "effective":
            return
        stream, index = self._stream(get_trace_stream(self.output_dir))
        for record in records:
            chunk, offset = stream.append(orjson.dumps(record, default=str, option=OPTS))
            self._logged += 1
            index.write(
                orjson.dumps(
                    index_row(self._logged, record, chunk, offset), default=str, option=OPTS
                )
            )
        stream.flush()
        index.flush()

    def log_annotations(self, updates: list[dict]) -> None:
        if not updates:
            return
        stream, index = self._stream(get_annotations_dir(self.output_dir) / self.producer)
        for update in updates:
            chunk, offset = stream.append(orjson.dumps(update, option=OPTS))
            index.write(orjson.dumps(update_index_row(update, chunk, offset), option=OPTS))
        stream.flush()
        index.flush()

    def still_running(self) -> None:
        for stream, index in self._streams.values():
            stream.wait()
            index.flush()
        self.file.flush()


# -- the made-up run ------------------------------------------------------------------------


def _episode(eid, group, step, version, reward, logprobs, finish, kind="train"):
    """An ``Episode.to_record(float_decimals=4)`` with ``stamp_arrival``'s trace info."""
    n = len(logprobs)
    task = {"type": "gsm8k", "data": {"question": f"{group}: 1 + 2?", "answer": "3"}}
    answer = "3" if reward else " ".join(str(i) for i in range(n))
    trace = {
        "version": 1,
        "id": f"trace-{eid}",
        "verifiers": {"version": "0.4.0"},
        "task": task,
        "agent": {"config": {"type": "single_turn"}, "name": "agent", "trainable": True},
        "tools": [],
        "nodes": [
            {
                "message": {"role": "user", "content": task["data"]["question"]},
                "sampled": False,
                "timestamp": T0,
                "token_ids": [1, 2, 3],
                "mask": [False, False, False],
                "is_content": [],
                "logprobs": [],
            },
            {
                "parent": 0,
                "message": {"role": "assistant", "content": answer},
                "sampled": True,
                "timestamp": T0 + 1,
                "token_ids": list(range(10, 10 + n)),
                "mask": [True] * n,
                "is_content": [],
                "logprobs": [round(x, 4) for x in logprobs],
            },
        ],
        "calls": [
            {
                "node": 1,
                "model": "Qwen/Qwen3-0.6B",
                "finish_reason": finish,
                "usage": {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": 3 + n},
                "time": {"start": T0 + step, "end": T0 + step + 1},
            }
        ],
        "rewards": {"correct": {"score": reward, "weight": 1.0}},
        "metrics": {},
        # stamp_arrival: the kind, the dispatching step, the step it came back at
        "info": {
            "kind": kind,
            "dispatch": {"step": version, "time": T0 + step},
            "arrival": {"step": step, "time": T0 + step + 1},
        },
        "ok": True,
        "errors": [],
        "timing": {"start": T0 + step},
    }
    return {
        "id": eid,
        "env": {"id": "gsm8k", "name": "gsm8k"},
        "task": task,
        "group": {"id": group},
        "run": {
            "type": "train",
            "id": "run-1",
            "work": {"type": kind, "step": version, "policy": {"start": version, "end": version}},
        },
        "ok": True,
        "errors": [],
        "traces": [trace],
    }


def _failed(eid, group, step):
    """An episode whose rollout failed: no trace, its error kept (``Episode.errors``)."""
    return {
        "id": eid,
        "env": {"id": "gsm8k", "name": "gsm8k"},
        "task": {"type": "gsm8k", "data": {"question": f"{group}: 1 + 2?", "answer": "3"}},
        "group": {"id": group},
        "run": {
            "type": "train",
            "id": "run-1",
            "work": {"type": "train", "step": step, "policy": {"start": step, "end": step}},
        },
        "ok": False,
        "errors": [{"type": "SandboxTimeoutError", "message": "sandbox timed out"}],
        "traces": [],
    }


def _shipped(records: list[dict], step: int) -> list[dict]:
    """``stamp_batch``: membership, the step it ties to, the per-token advantages."""
    out = []
    for rec in records:
        for trace in rec["traces"]:
            adv = 0.5 if trace["rewards"]["correct"]["score"] else -0.5
            n = sum(len(node["token_ids"]) for node in trace["nodes"])
            info = {"effective": True, "ship": {"step": step, "time": T0 + step + 2}}
            info["advantage"] = adv
            out.append(make_update(trace["id"], info=info, branches={0: {"advantages": [adv] * n}}))
    return out


def _trained(records: list[dict], shift: dict[str, float]) -> list[dict]:
    """``AnnotationWriter.export``: the trainer's logprobs of every token of the branch (null
    off the loss mask and at the first position), entropies, and the per-token mismatch KL
    ``exp(d) - d - 1`` with d = trainer - sampler (4 decimals, 6 for the KL)."""
    out = []
    for rec in records:
        for trace in rec["traces"]:
            lp, ent, kl = [], [], []
            for node in trace["nodes"]:
                sampler = iter(node["logprobs"])
                for m in node["mask"]:
                    if not m:
                        lp.append(None)
                        ent.append(None)
                        kl.append(None)
                        continue
                    s = next(sampler)
                    t = round(s + shift.get(trace["id"], 0.0), 4)
                    d = t - s
                    lp.append(t)
                    ent.append(0.5)
                    kl.append(round(math.exp(d) - d - 1, 6))
            lp[0] = ent[0] = kl[0] = None
            streams = {"trainer_logprobs": lp, "entropies": ent, "mismatch_kl": kl}
            out.append(make_update(trace["id"], branches={0: streams}))
    return out


def make(root: Path) -> None:
    out = root / "prime-rl-stream" / "output"
    shutil.rmtree(out.parent, ignore_errors=True)
    out.mkdir(parents=True)
    chunk = 8 << 10  # FileMonitorConfig(chunk_bytes=8 kB), so the run rolls a chunk
    orch = FileMonitor(out, "orchestrator", chunk, compress=True)
    trainer = FileMonitor(out, "trainer", chunk, compress=True)
    lp = [-0.25, -0.5, -0.125, -1.0, -0.0625, -0.75]
    step1 = [
        _episode("e0", "g0", 1, 0, 1.0, lp[:4], "stop"),
        _episode("e1", "g0", 1, 0, 0.0, lp, "length"),
        _episode("e2", "g0", 1, 0, 1.0, lp[:3], "stop"),
        _episode("e3", "g0", 1, 0, 1.0, lp[:3], "stop"),
        _failed("e4", "g0", 1),
    ]
    step2 = [
        _episode("e5", "g1", 2, 1, 1.0, lp[:5], "stop"),
        _episode("e6", "g1", 2, 1, 0.0, lp, "stop"),
        _episode("v0", "h0", 2, 1, 1.0, lp[:2], "stop", kind="eval"),
        _episode("e7", "g1", 2, 1, 0.0, lp[:4], "stop"),
        _episode("e8", "g1", 2, 1, 1.0, lp[:2], "stop"),
    ]
    step3 = [
        _episode("e9", "g2", 3, 2, 1.0, lp[:4], "stop"),
        _episode("e10", "g2", 3, 2, 0.0, lp[:4], "stop"),
    ]
    for step, records in ((1, step1), (2, step2), (3, step3)):
        for rec in records:  # the "all" subset: each episode as it arrives
            orch.log_episodes([rec], "all")
        orch.log_episodes(records, "effective")  # writes no second copy
        trained = [r for r in records if r["traces"] and r["traces"][0]["info"]["kind"] == "train"]
        if step == 1:
            trained = trained[:3]  # e3 filtered out of the batch
        if step < 3:  # step 3's batch not shipped yet: the run is still going
            orch.log_annotations(_shipped(trained, step))
            # trainer - sampler: a small gap everywhere, one sequence far off at step 2
            shift = {f"trace-{r['id']}": -0.0125 for r in trained}
            if step == 2:
                shift["trace-e6"] = -2.0
            trainer.log_annotations(_trained(trained, shift))
            trainer.log_metrics({"mismatch_kl/all/mean": 0.002 * step}, step, T0 + step + 3)
        orch.log_metrics({"reward/all/mean": 0.5}, step, T0 + step + 2)
        orch.log_metrics({"inference/agg/kv_cache_usage_perc/mean": 0.25}, None, T0 + step + 2.5)
    orch.still_running()
    trainer.still_running()


if __name__ == "__main__":
    make(HERE)
    print("written under", HERE / "prime-rl-stream")
