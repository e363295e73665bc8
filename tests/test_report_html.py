"""``tilecert explain FILE --html OUT``: one self-contained page, rendered by headless Chromium.

The file is the GEMM example with two schedules, one proved and one whose K pipeline is bound to
the cores (its ``noninterference`` obligation is disproved): the page must show both, with the
disproved schedule's witness picture, and load with no script error and nothing from the network.
"""
from __future__ import annotations

import base64
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

import tilecert as tc
from tilecert.cli import main

from examples import EXAMPLES

pytest.importorskip("matplotlib", reason="the report's pictures need the plot extra (matplotlib)")

GEMM_FILE = Path(EXAMPLES["gemm"].kernel.fn.__code__.co_filename)
SCHEDULES = '''

proved = tc.schedule(gemm, M=8, N=8, K=8, bm=4, bn=4, bk=4)
racy = tc.schedule(gemm, M=8, N=8, K=8, bm=4, bn=4, bk=4)
racy.bind("k", "core")
'''


class Page(HTMLParser):
    """The parts of a page the test looks at: section ids, images, scripts and external references."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.images: list[dict[str, str]] = []
        self.scripts = 0
        self.external: list[str] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        if tag == "section":
            self.sections.append(a.get("id", ""))
        if tag == "img":
            self.images.append(a)
        if tag == "script":
            self.scripts += 1
        for key in ("src", "href"):
            if a.get(key) and not a[key].startswith(("data:", "#")):
                self.external.append(a[key])


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[int, Path, str]:
    folder = tmp_path_factory.mktemp("report")
    source = folder / "gemm_schedules.py"
    source.write_text(GEMM_FILE.read_text() + SCHEDULES)
    out = folder / "gemm.html"
    status = main(["explain", str(source), "--html", str(out)])
    return status, out, out.read_text()


def test_the_page_has_a_section_per_schedule_and_is_self_contained(report):
    status, _, text = report
    assert status == 1  # one schedule is not proved
    page = Page()
    page.feed(text)
    assert page.sections == ["summary", "s-gemm-proved", "s-gemm-racy"]
    assert page.scripts == 0 and page.external == []
    for img in page.images:
        data = img["src"].removeprefix("data:image/png;base64,")
        assert base64.b64decode(data).startswith(b"\x89PNG\r\n\x1a\n")
    witnesses = [img for img in page.images if img["alt"].startswith("witness of")]
    assert [img["alt"] for img in witnesses] == ["witness of noninterference at op 0: bind(loop='k', kind='core') "
                                                 "(gemm/racy)"]


def test_the_page_shows_what_the_checker_decided(report):
    _, _, text = report
    racy = text[text.index("id='s-gemm-racy'"):]
    proved = text[text.index("id='s-gemm-proved'"):text.index("id='s-gemm-racy'")]
    expected = tc.check(_racy())
    statuses = re.findall(r"<td class='(proved|disproved|unknown)'>", racy)
    assert statuses == [r.status for r in expected]
    assert "NOT OK: 1 disproved" in racy and "NOT A CERTIFICATE" in racy and "NOT PROVED" in racy
    assert "cell: acc[0, 0]" in racy and "replay: CONFIRMED" in racy
    assert "bind(loop=&#x27;k&#x27;, kind=&#x27;core&#x27;)" in racy  # the ops, escaped
    assert "class='verdict ok'>OK<" in proved and "NOT OK" not in proved and "<td class='disproved'>" not in proved
    assert "no witness" in proved and "NOT A CERTIFICATE" not in proved
    assert "void tc_kernel(" in proved


def _racy() -> tc.Schedule:
    s = tc.schedule(EXAMPLES["gemm"].kernel, M=8, N=8, K=8, bm=4, bn=4, bk=4)
    s.bind("k", "core")
    return s


@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium is not installed (.ci/run installs it)")
def test_chromium_renders_the_page_without_script_errors(report, tmp_path):
    _, out, _ = report
    done = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--disable-component-update", "--disable-sync", "--no-first-run",
                           f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr", "--v=0",
                           "--dump-dom", out.resolve().as_uri()], capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Uncaught" not in done.stderr
    dom = Page()
    dom.feed(done.stdout)
    assert dom.sections == ["summary", "s-gemm-proved", "s-gemm-racy"]
    assert any(img["alt"].startswith("witness of noninterference") for img in dom.images)
    for heading in ("ops", "iteration space", "obligations", "witnesses", "emitted code (c)"):
        assert done.stdout.count(f"<h3>{heading}</h3>") == 2, heading
