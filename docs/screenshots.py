"""Take docs/report.png and docs/live.png with headless Chromium, from real demo runs.

    python docs/screenshots.py [--runs DIR]

Trains two short runs with the reference trainer (``rlvitals demo``: one with a stale
sampler, one healthy), writes the report of the broken one, then serves the folder while a
third run (entropy collapse) trains, and photographs the live page mid-run. Needs the
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
    if not (runs / "stale").exists():
        demo(runs, "stale", "--fault", "stale_sampler", "--steps", "30")
    if not (runs / "healthy").exists():
        demo(runs, "healthy", "--steps", "30")
    report = runs / "report.html"
    subprocess.run(
        [sys.executable, "-m", "rlvitals", "report", str(runs / "stale"), "-o", str(report)],
        check=True,
    )
    d = browser(1400, 1900)
    try:
        d.get(report.as_uri())
        time.sleep(1.5)
        d.save_screenshot(str(DOCS / "report.png"))
    finally:
        d.quit()

    from rlvitals.views.server import serve_in_background

    url, stop = serve_in_background([runs])
    trainer = demo(
        runs, f"live-{int(time.time())}", "--fault", "entropy_collapse", "--steps", "40", wait=False
    )
    d = browser(1400, 1500)
    try:
        time.sleep(60)  # the warm start, then a dozen updates
        d.get(url)
        time.sleep(20)
        d.save_screenshot(str(DOCS / "live.png"))
    finally:
        d.quit()
        trainer.terminate()
        stop()
    print(f"wrote {DOCS / 'report.png'} and {DOCS / 'live.png'}")


if __name__ == "__main__":
    main()
