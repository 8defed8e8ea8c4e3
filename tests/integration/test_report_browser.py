"""The HTML evaluation report, opened in headless Chromium as a person would.

Chromium (Debian package ``chromium``) is installed by ``scripts/test.sh``. The page
must load with no console message and no failed request (it fetches nothing), every
plot must be an inline SVG with drawn paths, and a screenshot is kept under
``.pytest-artifacts/`` for a person to look at.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from er.cluster import SCC
from er.evaluation import coreference_report
from er.reports import render_report

ARTIFACTS = Path(__file__).resolve().parents[2] / ".pytest-artifacts"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]


def _chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail("Chromium is required (apt-get install chromium; scripts/test.sh does)")
    return path


def _report(tmp_path: Path) -> Path:
    rng = np.random.default_rng(4)
    y = rng.integers(0, 12, size=150)
    X = (rng.normal(size=(12, 16))[y] * 1.5 + rng.normal(size=(150, 16))).astype(np.float32)
    h = SCC(k=10).fit(X).hierarchy_
    runs = []
    for run_id, t in ((1, 0.35), (2, 0.5)):
        runs.append(
            {
                "id": run_id,
                "collection": "people <&> test",
                "created_at": "2026-11-22T12:00",
                "as_of_seq": run_id,
                "algorithm": "scc",
                "metrics": coreference_report(h, y, threshold=t),
            }
        )
    excerpts = {i: (f"rec-{i}", f"name {i} <b>not bold</b>") for i in range(150)}
    lineage = {i: f":param id => {i};\nMATCH ... // ancestors.cypher" for i in range(150)}
    page = tmp_path / "report.html"
    page.write_text(render_report(runs[1], runs, excerpts=excerpts, lineage=lineage))
    return page


def test_report_opens_in_chromium(tmp_path: Path) -> None:
    page = _report(tmp_path)
    done = subprocess.run(
        [
            _chromium(),
            *FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    console = [line for line in done.stderr.splitlines() if "CONSOLE" in line]
    assert console == [], console
    assert "Failed to load" not in done.stderr and "ERR_" not in done.stderr
    dom = done.stdout
    for plot in ("sweep", "sizes", "trend"):
        match = re.search(rf'<figure id="plot-{plot}">(.*?)</figure>', dom, re.S)
        assert match, f"plot {plot} missing"
        assert "<svg" in match.group(1) and match.group(1).count("<path") >= 3, plot
    assert "&lt;b&gt;not bold&lt;/b&gt;" in dom  # record text is escaped, never markup
    assert re.search(r'<table id="headline">.*pairwise F1.*</table>', dom, re.S)
    text = page.read_text()  # nothing to fetch: no remote src/href, no script, no link
    assert not re.search(r"""(?:src|href)\s*=\s*["'](?:https?:)?//""", text)
    assert "<script" not in text and "<link" not in text

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report.png"
    subprocess.run(
        [
            _chromium(),
            *FLAGS,
            f"--user-data-dir={tmp_path / 'profile2'}",
            "--window-size=1280,2400",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert shot.stat().st_size > 20_000
