"""Take docs/report.png and docs/live.png with headless Chromium, from real demo runs.

    python docs/screenshots.py [--runs DIR]

Trains two runs with the reference trainer (``rlvitals demo``: one whose grader accepts any
prefix of the answer, one healthy), writes the report of the broken one, then serves the
folder while a third run (the same exploit, another seed) trains, and photographs the live
page once it is 25 updates in. Needs the
``train`` extra (torch), Debian's chromium + chromium-driver, and selenium (``dev`` extra).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

DOCS = Path(__file__).resolve().parent


def demo(runs: Path, name: str, *extra: str, wait: bool = True) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "rlvitals", "demo", "--output-dir", str(runs), "--name", name]
    proc = subprocess.Popen([*cmd, *extra], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if wait:
        proc.wait()
    return proc


def browser(width: int, height: int):  # type: ignore[no-untyped-def]
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless --no-sandbox --disable-gpu --disable-background-networking "
        f"--disable-component-update --disable-sync --no-first-run --window-size={width},{height}"
    ).split():
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", default="/tmp/rlvitals-screenshots", help="where the runs go")
    args = ap.parse_args()
    runs = Path(args.runs)
    if not (runs / "grader-exploit").exists():
        demo(runs, "grader-exploit", "--fault", "grader_exploit", "--steps", "40")
    if not (runs / "healthy").exists():
        demo(runs, "healthy", "--steps", "40")
    report = runs / "report.html"
    subprocess.run(
        [sys.executable, "-m", "rlvitals", "report", str(runs / "grader-exploit"), "-o",
         str(report)],
        check=True,
    )  # fmt: skip
    d = browser(1400, 1900)
    try:
        d.get(report.as_uri())
        time.sleep(1.5)
        d.save_screenshot(str(DOCS / "report.png"))
    finally:
        d.quit()

    from rlvitals.follow.hub import serve_in_background

    url, stop = serve_in_background([runs])
    name = f"live-{int(time.time())}"
    trainer = demo(runs, name, "--fault", "grader_exploit", "--seed", "1", "--steps", "60",
                   wait=False)  # fmt: skip
    d = browser(1400, 1500)
    try:
        steps = runs / name / "steps.jsonl"
        deadline = time.time() + 600
        while time.time() < deadline and (
            not steps.exists() or steps.read_bytes().count(b"\n") < 20
        ):
            time.sleep(0.5)
        d.get(url)
        time.sleep(8)  # five more updates arrive over the event stream
        d.save_screenshot(str(DOCS / "live.png"))
    finally:
        d.quit()
        trainer.terminate()
        stop()
    print(f"wrote {DOCS / 'report.png'} and {DOCS / 'live.png'}")


if __name__ == "__main__":
    main()
