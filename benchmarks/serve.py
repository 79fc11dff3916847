"""The live dashboard under load: step-to-page latency, idle event streams, memory.

Starts the real ``rlvitals serve`` on a folder of live runs (20 runs of 10,000 steps by
default, each still appending a step every half second), then measures:

- latency: from a step record written to ``steps.jsonl`` to its arrival at a page over
  server-sent events, and (with Chromium and selenium present) to its showing on the page;
- idle event streams: ``--streams`` (1,000) pages left open from 127.0.0.1, each stream
  served its first event, then ``--probes`` alternate GETs of ``/healthz`` and ``/``, each
  on a new connection: how many were answered, and how fast;
- memory: the server process's resident set size once every run is loaded, and its peak.

Baselines measured in the same run: the latency with one small live run (how fast the
server is with nothing else to do) and the memory of reading the same runs into the canonical
model without the server (what the data costs by itself).

    python benchmarks/serve.py [--runs 20] [--steps 10000] [--samples 100] [--streams 1000]
                               [--probes 200] [--no-browser]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import math
import os
import random
import re
import resource
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


def record(step: int, t: float) -> dict[str, Any]:
    """A step record with the metrics a GRPO run logs (25 of them)."""
    p = min(0.9, 0.2 + 0.00008 * step)
    return {
        "step": step,
        "time": t,
        "policy_version": step + 1,
        "reward/mean": p + 0.03 * math.sin(step),
        "reward/mean_with_unusable": p * 0.95,
        "reward/std": 0.45,
        "reward/group_std_mean": 0.4 - 0.00002 * step,
        "groups/trained": 12,
        "groups/rejected": 4,
        "groups/all_solved": 2,
        "groups/none_solved": 2,
        "groups/signal_fraction": 0.75,
        "discard/groups/no_variance": 4,
        "response/length_mean": 300 + 20 * math.sin(step / 50),
        "response/truncated_rate": 0.02,
        "train/mismatch_kl": 0.0007 + 0.0001 * math.sin(step / 7),
        "train/logprob_abs_diff": 0.015,
        "train/mismatch_ess": 0.99,
        "sampling/entropy_estimate": 0.7 * math.exp(-step / 20000),
        "train/loss": 0.1 * math.cos(step / 3),
        "train/grad_norm": 1.0 + 0.1 * math.cos(step),
        "train/lr": 1e-5,
        "train/clip_frac": 0.01,
        "perf/step_seconds": 0.5,
        "perf/tokens_per_second": 900.0,
    }


def make_runs(root: Path, n: int, steps: int) -> list[Path]:
    now = time.time()
    dirs = []
    for i in range(n):
        d = root / f"run-{i:02d}"
        d.mkdir(parents=True)
        info = {"format": "rlvitals-run/1", "name": d.name, "status": "running", "config": {}}
        (d / "run.json").write_text(json.dumps(info))
        t0 = now - 0.5 * steps
        with open(d / "steps.jsonl", "w") as f:
            f.writelines(json.dumps(record(s, t0 + 0.5 * s)) + "\n" for s in range(steps))
        dirs.append(d)
    return dirs


def append(d: Path, step: int) -> float:
    t = time.time()
    with open(d / "steps.jsonl", "a") as f:
        f.write(json.dumps(record(step, t)) + "\n")
    return t


def rss_kib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in KiB."""
    text = Path(f"/proc/{pid}/status").read_text()
    get = lambda key: int(re.search(rf"^{key}:\s+(\d+) kB", text, re.M).group(1))  # noqa: E731
    return get("VmRSS"), get("VmHWM")


def reader_only_rss(dirs: list[Path]) -> tuple[int, int]:
    """Memory of the same runs read into the canonical model, without the server."""
    code = (
        "import sys, re\n"
        "from rlvitals.readers import read\n"
        "runs = [read(p) for p in sys.argv[1:]]\n"
        "for r in runs:\n"
        "    for n in r.names(): r.series(n)\n"
        "t = open('/proc/self/status').read()\n"
        "print(re.search(r'VmRSS:\\s+(\\d+)', t).group(1), re.search(r'VmHWM:\\s+(\\d+)', t).group(1))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *map(str, dirs)], capture_output=True, text=True, check=True
    )
    rss, hwm = out.stdout.split()
    return int(rss), int(hwm)


class Server:
    """``rlvitals serve ROOT --port 0`` in a child process."""

    def __init__(self, root: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "rlvitals", "serve", str(root), "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        m = re.search(r"at (http://\S+/)", line)
        if not m:
            self.proc.kill()
            raise SystemExit(f"rlvitals serve did not start: {line}")
        self.url = m.group(1)
        u = urlsplit(self.url)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 80
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def get(self, path: str) -> Any:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        conn.request("GET", path)
        body = conn.getresponse().read()
        conn.close()
        return json.loads(body)

    def wait_loaded(self, n: int, last_step: int, timeout: float = 600) -> float:
        t0 = time.time()
        while time.time() - t0 < timeout:
            runs = self.get("/api/runs")["runs"]
            if len(runs) == n and all(
                r["last_step"] is not None and r["last_step"] >= last_step and r["verdict"]
                for r in runs
            ):
                return time.time() - t0
            time.sleep(0.2)
        raise SystemExit("the server did not load the runs in time")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


class Listener:
    """A page's event stream for one run: the arrival time of each step."""

    def __init__(self, server: Server, run_id: str) -> None:
        self.arrived: dict[int, float] = {}
        self.conn = http.client.HTTPConnection(server.host, server.port, timeout=120)
        self.conn.request("GET", f"/events?runs={run_id}")
        self.resp = self.conn.getresponse()
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        kind = ""
        try:
            while True:
                line = self.resp.fp.readline()
                if not line:
                    return
                if line.startswith(b"event: "):
                    kind = line[7:].strip().decode()
                elif line.startswith(b"data: "):
                    now = time.time()
                    if kind == "snapshot":
                        self.ready.set()
                    elif kind == "delta":
                        data = json.loads(line[6:])
                        for s in data["series"].get("reward/mean", {}).get("s", []):
                            self.arrived.setdefault(s, now)
        except OSError:
            return


def sse_latency(server: Server, dirs: list[Path], steps: int, samples: int) -> list[float]:
    """Append a step to every run every half second; the measured run's step latency."""
    runs = {r["name"]: r["id"] for r in server.get("/api/runs")["runs"]}
    listener = Listener(server, runs[dirs[0].name])
    if not listener.ready.wait(60):
        raise SystemExit("no snapshot over SSE")
    written: dict[int, float] = {}
    for k in range(samples):
        step = steps + k
        for d in dirs[1:]:
            append(d, step)
        written[step] = append(dirs[0], step)
        time.sleep(random.uniform(0.3, 0.7))  # no lock-step with the server's polling
    time.sleep(2)
    lat = [listener.arrived[s] - t for s, t in written.items() if s in listener.arrived]
    if len(lat) < samples:
        print(f"  warning: {samples - len(lat)} of {samples} steps never arrived")
    return lat


# Stamps, in the page, when each step first shows in its run's verdict card (a
# MutationObserver's callback runs as the DOM changes, before the frame that paints it; a step
# passed over because a later one came in the same event shows with that one), and when its
# event arrived (a listener on the page's own event stream). The page and this script read the
# same clock, so no WebDriver round trip is counted in the figures.
STAMP = """
var run = arguments[0];
window.__arrived = {}; window.__shown = {}; window.__last = arguments[1];
window.RLV.state.es.addEventListener('delta', function (m) {
  var t = Date.now(), d = JSON.parse(m.data);
  if (d.id !== run) return;
  ((d.series['reward/mean'] || {}).s || []).forEach(function (s) {
    if (!(s in window.__arrived)) window.__arrived[s] = t;
  });
});
new MutationObserver(function () {
  var e = document.querySelector('[data-testid=last-step]');
  var m = e && /^step (\\d+)$/.exec(e.textContent), t = Date.now();
  for (var s = window.__last + 1; m && s <= +m[1]; s++) window.__shown[s] = t;
  if (m) window.__last = Math.max(window.__last, +m[1]);
}).observe(document.body, {subtree: true, childList: true, characterData: true});
"""


def page_latency(
    server: Server, dirs: list[Path], first_step: int, samples: int
) -> tuple[list[float], list[float]]:
    """The same, measured on the live page in headless Chromium (skipped without one):
    (step written -> shown, its event arrived in the page -> shown)."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        return [], []
    if not (os.path.exists("/usr/bin/chromium") and os.path.exists("/usr/bin/chromedriver")):
        return [], []
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for flag in [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",  # a desktop window: a dozen plots on screen
    ]:
        opts.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    runs = {r["name"]: r["id"] for r in server.get("/api/runs")["runs"]}
    written: dict[int, float] = {}
    try:
        driver.get(f"{server.url}#runs={runs[dirs[0].name]}")
        shown = "return (document.querySelector('[data-testid=last-step]') || {}).textContent"
        deadline = time.time() + 60
        while driver.execute_script(shown) != f"step {first_step - 1}" and time.time() < deadline:
            time.sleep(0.05)
        driver.execute_script(STAMP, runs[dirs[0].name], first_step - 1)
        for k in range(samples):
            step = first_step + k
            for d in dirs[1:]:
                append(d, step)
            written[step] = append(dirs[0], step)
            time.sleep(random.uniform(0.3, 0.7))
        time.sleep(3)
        shown_at = driver.execute_script("return window.__shown")
        arrived = driver.execute_script("return window.__arrived")
    finally:
        driver.quit()
    lat = [shown_at[str(s)] / 1000 - t for s, t in written.items() if str(s) in shown_at]
    if len(lat) < samples:
        print(f"  warning: {samples - len(lat)} of {samples} steps never shown on the page")
    drawn = [(shown_at[k] - arrived[k]) / 1000 for k in shown_at if k in arrived]
    return lat, drawn


def read_pass(dirs: list[Path], first_step: int, passes: int = 30) -> list[float]:
    """The server's pass without judging, in this process: a new step appended to every run,
    then the time of one ``Hub.poll`` reading them all and sending their deltas to a page."""
    from rlvitals.follow.hub import Hub

    hub = Hub([dirs[0].parent])
    hub.poll()
    for run in hub.runs.values():
        run.due = lambda now=None: False  # type: ignore[method-assign]
    page = hub.subscribe([next(iter(hub.runs))])
    took = []
    for k in range(passes):
        for d in dirs:
            append(d, first_step + k)
        t = time.perf_counter()
        hub.poll()
        took.append(time.perf_counter() - t)
        page.take()
    return took


def probe(server: Server, probes: int) -> dict[str, list[float | None]]:
    """``probes`` GETs of ``/healthz`` and ``/`` in turn, each on a new connection, 50 ms
    apart: each path's latencies (None: not answered with 200 within 10 s)."""
    took: dict[str, list[float | None]] = {"/healthz": [], "/": []}
    for i in range(probes):
        path = "/healthz" if i % 2 == 0 else "/"
        t = time.perf_counter()
        try:
            c = http.client.HTTPConnection(server.host, server.port, timeout=10)
            c.request("GET", path)
            ok = c.getresponse().status == 200
            c.close()
        except OSError:
            ok = False
        took[path].append(time.perf_counter() - t if ok else None)
        time.sleep(0.05)
    return took


def idle_streams(
    server: Server, streams: int, probes: int
) -> tuple[float, dict[str, list[float | None]]]:
    """Open ``streams`` idle event streams, each served its first event, then ``probe``.
    Returns (seconds to open them, the probes)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = streams + 256
    if soft != resource.RLIM_INFINITY and soft < want:  # a socket per stream
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    t0 = time.time()
    socks = []
    try:
        for _ in range(streams):
            s = socket.create_connection((server.host, server.port), timeout=30)
            s.sendall(f"GET /events HTTP/1.1\r\nHost: {server.host}:{server.port}\r\n\r\n".encode())
            socks.append(s)
        for s in socks:
            got = b""
            while b"event: index" not in got:
                chunk = s.recv(65536)
                if not chunk:
                    raise SystemExit(f"an event stream was closed after {len(socks)} opened")
                got += chunk
        opened = time.time() - t0
        # The pages read what they are sent, as a browser does, from one thread.
        stop = threading.Event()

        def drain() -> None:
            sel = selectors.DefaultSelector()
            for s in socks:
                s.setblocking(False)
                sel.register(s, selectors.EVENT_READ)
            while not stop.is_set():
                for key, _ in sel.select(0.2):
                    with contextlib.suppress(OSError):
                        key.fileobj.recv(1 << 16)  # type: ignore[union-attr]
            sel.close()

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        try:
            return opened, probe(server, probes)
        finally:
            stop.set()
            reader.join(5)
    finally:
        for s in socks:
            s.close()


def stats(xs: list[float]) -> str:
    if not xs:
        return "n/a"
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, int(0.9 * len(xs)))]
    p99 = xs[min(len(xs) - 1, int(0.99 * len(xs)))]
    return (
        f"p50 {statistics.median(xs) * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms, "
        f"p99 {p99 * 1000:.0f} ms, max {xs[-1] * 1000:.0f} ms (n={len(xs)})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--steps", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=100)
    ap.add_argument("--streams", type=int, default=1000, help="idle event streams (0: skip)")
    ap.add_argument("--probes", type=int, default=200)
    ap.add_argument("--page-samples", type=int, default=None, help="default: --samples / 2")
    ap.add_argument("--no-browser", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="rlvitals-serve-bench-"))
    try:
        print(f"rlvitals serve benchmark: {args.runs} live runs of {args.steps} steps")
        # Baseline: one small live run.
        small = make_runs(tmp / "small", 1, 20)
        server = Server(tmp / "small")
        server.wait_loaded(1, 19)
        base = sse_latency(server, small, 20, args.samples)
        server.close()

        t0 = time.time()
        dirs = make_runs(tmp / "big", args.runs, args.steps)
        size = sum((d / "steps.jsonl").stat().st_size for d in dirs)
        print(f"  wrote {size / 2**20:.0f} MiB of step records in {time.time() - t0:.1f} s")
        model_rss, model_hwm = reader_only_rss(dirs)

        server = Server(tmp / "big")
        load = server.wait_loaded(args.runs, args.steps - 1)
        lat = sse_latency(server, dirs, args.steps, args.samples)
        n_page = args.page_samples or max(10, args.samples // 2)
        page, drawn = (
            ([], [])
            if args.no_browser
            else page_latency(server, dirs, args.steps + args.samples, n_page)
        )
        rss, hwm = rss_kib(server.proc.pid)
        if args.streams:
            quiet = probe(server, args.probes)  # the same probes with no stream open
            opened, probes = idle_streams(server, args.streams, args.probes)
            s_rss, _ = rss_kib(server.proc.pid)
        server.close()
        passes = read_pass(dirs, args.steps + args.samples + n_page)

        mib = lambda k: k / 1024  # noqa: E731
        print(f"  server loaded and judged every run in {load:.1f} s")
        print(f"  step written -> arrived over SSE, 1 small run (baseline): {stats(base)}")
        print(f"  step written -> arrived over SSE, {args.runs} live runs:  {stats(lat)}")
        if base and lat:
            print(f"    ratio of medians: {statistics.median(lat) / statistics.median(base):.2f}x")
        if page:
            print(f"  step written -> shown on the page (Chromium):        {stats(page)}")
            print(f"    of which its event arrived in the page -> shown:   {stats(drawn)}")
        else:
            print("  page latency: skipped (no Chromium/selenium, or --no-browser)")
        if args.streams:
            print(
                f"  {args.streams} idle event streams from 127.0.0.1 opened and served in "
                f"{opened:.1f} s; server {mib(s_rss):.0f} MiB with them open"
            )
            for label, got in (("with none open", quiet), ("with them open", probes)):
                for path, xs in got.items():
                    done = [x for x in xs if x is not None]
                    print(f"  GET {path} {label}: {len(done)} of {len(xs)} answered, {stats(done)}")
        print(f"  a pass reading a new step of every run, no judging: {stats(passes)}")
        print(f"  server memory: {mib(rss):.0f} MiB resident, peak {mib(hwm):.0f} MiB")
        print(
            f"  the same runs read without the server (baseline): {mib(model_rss):.0f} MiB, "
            f"peak {mib(model_hwm):.0f} MiB; server/baseline {rss / model_rss:.2f}x"
        )
        per_step = (rss - model_rss) * 1024 / (args.runs * args.steps)
        print(f"  server overhead beyond the data: {per_step:.0f} bytes per step per run")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
