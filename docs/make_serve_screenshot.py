"""Regenerate docs/serve.png: the service's page watching scenarios/research_demo.yaml live.

Run with ``.venv/bin/python docs/make_serve_screenshot.py`` (needs Debian's chromium).
It starts ``fanout serve`` on a free loopback port with a throwaway store and token,
signs in, submits the flagship scenario through the form at ``--speed 4``, and takes the
picture mid-run: some rows done, some running or retrying, the first gaps listed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "serve.png"
TOKEN = "screenshot-token-0123456789"


def main() -> int:
    """Serve, submit, watch, shoot; 1 when chromium is missing."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.stderr.write("chromium not found: nothing written\n")
        return 1
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "serve.log"
        with open(log, "wb") as sink:
            proc = subprocess.Popen(
                [sys.executable, "-m", "coordinator.cli", "serve", "--port", "0",
                 "--store", str(Path(tmp) / "runs.sqlite")],
                stdout=subprocess.DEVNULL, stderr=sink, cwd=ROOT,
                env=os.environ | {"FANOUT_TOKEN": TOKEN},
            )
        try:
            url = _wait_for_url(log)
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1280, "height": 1500})
                page.goto(url + "/")
                page.fill("#token", TOKEN)
                page.click("#login-form button")
                page.wait_for_selector("#job-form", state="visible")
                page.fill("#job-text", (ROOT / "scenarios" / "research_demo.yaml").read_text())
                page.fill("#speed", "4")
                page.click("#submit-btn")
                page.wait_for_selector("#gaps tbody tr", timeout=60_000)
                done = page.locator("#subagents tr[data-state=done]")
                deadline = time.monotonic() + 60
                while done.count() < 5 and time.monotonic() < deadline:
                    time.sleep(0.05)
                page.screenshot(path=str(OUT))
                browser.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    sys.stdout.write(f"wrote {OUT}\n")
    return 0


def _wait_for_url(log: Path) -> str:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        text = log.read_text(errors="replace")
        match = re.search(r"listening on (http://\S+?)/ ", text)
        if match and "Application startup complete" in text:
            return match.group(1)
        time.sleep(0.1)
    raise SystemExit(f"fanout serve did not start:\n{log.read_text()}")


if __name__ == "__main__":
    raise SystemExit(main())
