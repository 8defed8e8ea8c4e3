"""The HTML evaluation report, opened in headless Chromium as a person would.

Chromium (Debian package ``chromium``) is installed by ``scripts/test.sh``. The page
must load with no console message and no failed request (it fetches nothing), every
plot must be an inline SVG with drawn paths, and a screenshot is kept under
``.pytest-artifacts/`` for a person to look at. The report of a collection with false
merges and splits (made by `er ingest` and `er eval`) must show every record of every
error with its gold and predicted entity, and the deciding link, within 1,400 px.
"""

from __future__ import annotations

import json
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
    errors = {
        kind: [
            {
                "title": f"entity {err['group']}",
                "size": len(err["mentions"]),
                "parts": err["parts"],
                "records": [
                    {"id": f"rec-{i}", "gold": str(y[i]), "entity": 0, "excerpt": "<b>not bold</b>"}
                    for i in err["mentions"]
                ],
                "link": None,
                "lineage": ":param id => 1;\nMATCH ... // ancestors.cypher",
            }
            for err in runs[1]["metrics"][kind]
        ]
        for kind in ("false_merges", "splits")
    }
    page = tmp_path / "report.html"
    page.write_text(render_report(runs[1], runs, errors=errors))
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


def _dom(page: Path, profile: Path, width: int = 1400) -> str:
    """The page's DOM after Chromium laid it out ``width`` px wide; the page gets, in a
    copy, one line of script that records how wide its content came out."""
    probe = page.with_name("probe-" + page.name)
    measure = "<script>document.body.dataset.width=document.documentElement.scrollWidth</script>"
    probe.write_text(page.read_text().replace("</body>", measure + "</body>"))
    done = subprocess.run(
        [
            *(_chromium(), *FLAGS, f"--user-data-dir={profile}"),
            *(f"--window-size={width},1000", "--dump-dom", probe.as_uri()),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _sections(dom: str, anchor: str) -> list[str]:
    part = dom[dom.index(f'<div id="{anchor}">') :]
    part = part[: part.index("</div>")]
    return re.findall(r'<section class="error".*?</section>', part, re.S)


def test_report_errors_show_every_record_and_the_deciding_link(tmp_path: Path) -> None:
    """Issue #55: every record of every error, with its gold and predicted entity, in
    pages of 20; the deciding link's two records among them, field by field; the page
    no wider than 1,400 px; "none" under an empty heading. The oracle is the input's
    gold labels and `er export entities`, not the report's own figures."""
    import csv
    import io

    from er.demo import febrl_records

    from ._cli import er, ingest_and_eval

    records = febrl_records()[:300]
    # one record copied 24 times under 24 other gold entities: a false merge of 25
    crowd = [dict(records[0], rec_id=f"crowd-{k}", entity=f"crowd-{k}") for k in range(24)]
    # another person's values under records[1]'s gold entity: a split
    stray = dict(febrl_records()[400], rec_id="stray-1", entity=records[1]["entity"])
    data, doc = ingest_and_eval(tmp_path, [*records, *crowd, stray])
    exported = er(data, "export", "entities", "--collection", "c")
    entity_of = {
        r["external_id"]: r["entity_id"] for r in csv.DictReader(io.StringIO(exported.stdout))
    }
    gold_of = {r["rec_id"]: r["entity"] for r in [*records, *crowd, stray]}
    page = Path(doc["report_path"])
    metrics = json.loads(page.with_suffix(".json").read_text())["metrics"]
    dom = _dom(page, tmp_path / "profile")
    assert int(re.search(r'data-width="(\d+)"', dom).group(1)) <= 1400

    seen = {}
    for anchor, kind in (("false-merges", "false_merges"), ("splits", "splits")):
        sections = _sections(dom, anchor)
        assert len(sections) == len(metrics[kind]) > 0
        for section, err in zip(sections, metrics[kind], strict=True):
            rows = re.findall(
                r"<tr[^>]*>\s*<td>([^<]*)</td><td>([^<]*)</td><td>([^<]*)</td><td>", section
            )
            assert len(rows) == len(err["mentions"])  # every record, past the first page
            assert len(re.findall(r"<details><summary>records ", section)) == (len(rows) - 1) // 20
            for rec, gold, entity in rows:
                assert (gold, entity) == (gold_of[rec], entity_of[rec])
            golds = {g for _, g, _ in rows}
            entities = {e for _, _, e in rows}
            assert len(golds if kind == "false_merges" else entities) == err["parts"]
            link = re.search(r"Deciding link: <b>([^<]+)</b> and <b>([^<]+)</b>", section)
            assert link, section[:500]
            a, b = link.groups()
            assert {a, b} <= {rec for rec, _, _ in rows}
            assert section.count('class="in-link"') == 2
            side = gold_of if kind == "false_merges" else entity_of
            assert side[a] != side[b]  # a link across the error's two sides
            assert re.search(r'<table class="link-fields">.*<th>surname</th>', section, re.S)
            seen[kind] = [*seen.get(kind, []), {a, b}]
    crowd_ids = {r["rec_id"] for r in crowd} | {records[0]["rec_id"]}
    assert seen["false_merges"][0] <= crowd_ids  # copies: the likeliest link of all
    assert any("stray-1" in pair for pair in seen["splits"])

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report-errors.png"
    subprocess.run(
        [
            *(_chromium(), *FLAGS, f"--user-data-dir={tmp_path / 'profile2'}"),
            *("--window-size=1400,5000", f"--screenshot={shot}", page.as_uri()),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert shot.stat().st_size > 20_000


def test_an_empty_error_table_says_none(tmp_path: Path) -> None:
    run = {
        "id": 1,
        "collection": "c",
        "created_at": "2026-11-28T12:00",
        "as_of_seq": 1,
        "algorithm": "mbscc",
        "metrics": coreference_report(
            SCC(k=3).fit(np.eye(4, dtype=np.float32)).hierarchy_, [0, 1, 2, 3], threshold=0.5
        ),
    }
    page = render_report(run, [run], errors={"false_merges": [], "splits": []})
    for anchor in ("false-merges", "splits"):
        part = page[page.index(f'<div id="{anchor}">') :]
        assert re.match(r'<div id="[a-z-]+">\s*<p class="none">none</p>\s*</div>', part), anchor
