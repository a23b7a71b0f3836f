"""What a real browser shows of a forward's HTML: headless Chromium (Debian's ``chromium``, installed by
scripts/host-deps.sh) loads the page with a probe script added and writes what the probe measured into
the DOM it dumps (``--dump-dom``; no DevTools connection). The probe reports, for the system's block
and each element in it, the box on screen, the computed styles that decide whether it is seen, and
whether the element at the centre of its box (``elementFromPoint``) is the system's: nothing drawn
over it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path
from typing import Any

WIDTH, HEIGHT = 1280, 800
# The computed styles that decide whether an element is seen as it was written.
STYLES = (
    "display",
    "visibility",
    "opacity",
    "transform",
    "scale",
    "translate",
    "rotate",
    "zoom",
    "filter",
    "clip-path",
    "mask-image",
    "-webkit-text-fill-color",
    "color",
    "font-size",
    "line-height",
    "position",
    "z-index",
    "content-visibility",
    "height",
    "overflow",
    "text-shadow",
    "mix-blend-mode",
)
_PROBE = """
<script>
(function () {
  const system = document.getElementById("ehs-system");
  const names = %s;
  const els = system ? [system, ...system.querySelectorAll("*")] : [];
  const out = els.map(function (el) {
    const r = el.getBoundingClientRect();
    const cs = getComputedStyle(el);
    const styles = {};
    names.forEach(function (n) { styles[n] = cs.getPropertyValue(n); });
    const hit = document.elementFromPoint(r.left + Math.min(r.width, 40) / 2, r.top + r.height / 2);
    return {tag: el.tagName, text: el.textContent.slice(0, 60),
            rect: [r.left, r.top, r.width, r.height], styles: styles,
            on_top: !!hit && system.contains(hit)};
  });
  const pre = document.createElement("pre");
  pre.id = "ehs-probe";
  pre.textContent = JSON.stringify({found: !!system, elements: out,
                                    shown: system ? system.innerText : ""});
  document.documentElement.appendChild(pre);
})();
</script>
"""
_RESULT = re.compile(r'<pre id="ehs-probe">(.*?)</pre>', re.S)


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def render(html: str, timeout: float = 90.0) -> dict[str, Any]:
    """The probe's report on ``html`` as Chromium lays it out at WIDTH x HEIGHT."""
    binary = chromium()
    assert binary, "chromium is not installed (scripts/host-deps.sh installs it)"
    probe = _PROBE % json.dumps(STYLES)
    page = (
        html.replace("</body></html>", probe + "</body></html>") if "</body></html>" in html else html + probe
    )
    with tempfile.TemporaryDirectory(prefix="ehs-browser-") as tmp:
        path = Path(tmp, "forward.html")
        path.write_text(page, encoding="utf-8")
        cmd = [
            binary,
            "--headless",
            "--no-sandbox",  # as root in CI; the page is our own file, no network
            "--disable-gpu",
            "--hide-scrollbars",  # a long mail must not narrow the page it is compared on
            "--no-first-run",
            f"--user-data-dir={tmp}/profile",
            f"--window-size={WIDTH},{HEIGHT}",
            "--run-all-compositor-stages-before-draw",
            "--virtual-time-budget=2000",
            "--dump-dom",
            path.as_uri(),
        ]
        # Its own process group, killed whole on a timeout or an error: no browser outlives the test.
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True
        )
        try:
            dom, _ = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    m = _RESULT.search(dom)
    assert m, f"the probe wrote nothing (chromium exit {proc.returncode})"
    import html as htmllib

    report: dict[str, Any] = json.loads(htmllib.unescape(m.group(1)))
    return report
