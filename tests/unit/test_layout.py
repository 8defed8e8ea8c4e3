"""Layout rules: dependency direction (DESIGN §5) and the docker compose wiring."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _modules_after_import(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize("module", ["er.cluster", "er.evaluation"])
def test_cores_import_only_numpy_scipy_and_stdlib(module: str) -> None:
    loaded = {m.split(".")[0] for m in _modules_after_import(module)}
    third_party = {
        m
        for m in loaded - set(sys.stdlib_module_names) - {"er", "numpy", "scipy"}
        if not m.startswith("_") and m != "cython_runtime"  # interpreter / extension internals
    }
    assert not third_party
    assert not any(m.startswith("er.stores") for m in _modules_after_import(module))


def test_stores_never_import_the_cores() -> None:
    loaded = _modules_after_import("er.stores.graph._falkordb") | _modules_after_import(
        "er.stores.sql"
    )
    assert not any(m.startswith("er.cluster") for m in loaded)


@pytest.mark.parametrize(
    "module", ["er.match", "er.featurize", "er.ann", "er.entities", "er.evaluation", "er.reports"]
)
def test_only_the_pipeline_meets_both_sides(module: str) -> None:
    # DESIGN §5: er.pipeline is the one place where the cores and the stores meet; every
    # other library package stays on one side (the CLI and workers go through er.pipeline).
    loaded = _modules_after_import(module)
    cores = any(m.startswith(("er.cluster", "er.match")) for m in loaded)
    stores = any(m.startswith("er.stores") for m in loaded)
    assert not (cores and stores)
    assert not any(m.startswith("er.pipeline") for m in loaded)


def test_pipeline_and_cli_modules_stay_small() -> None:
    # issue #28: no module in er/ over 600 lines
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for path in (ROOT / "er").rglob("*.py")
    }
    assert {name: n for name, n in sizes.items() if n > 600} == {}


def test_compose_wires_every_service_with_er_variables() -> None:
    doc = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    services = doc["services"]
    assert {"neo4j", "postgres", "redis", "worker", "beat"} <= set(services)
    assert services["neo4j"]["image"].startswith("neo4j:5")
    for name in ("worker", "beat", "init"):
        env = services[name]["environment"]
        assert env["ER_GRAPH_URL"].startswith("neo4j://neo4j:")
        assert env["ER_DATABASE_URL"].startswith("postgresql+psycopg://")
        assert env["ER_BROKER_URL"].startswith("redis://redis:")
        assert services[name]["build"]["dockerfile"] == "docker/Dockerfile"
    for name, svc in services.items():
        for dep in svc.get("depends_on", {}):
            assert dep in services, f"{name} depends on unknown service {dep}"
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    for path in ("er", "workers", "migrations", "schema"):
        assert f"COPY {path} ./{path}" in dockerfile


def _secrets_in(value: object) -> list[str]:
    """Literal passwords in a compose value: a password-like key or a URL's password
    that is not a ${VAR} reference."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            secret = any(w in str(key).upper() for w in ("PASSWORD", "AUTH", "SECRET"))
            if secret and isinstance(item, str) and "${" not in item:
                found.append(f"{key}={item}")
            found += _secrets_in(item)
    elif isinstance(value, list):
        for item in value:
            found += _secrets_in(item)
    elif isinstance(value, str):
        found += [value for m in re.finditer(r"://[^:/@]+:([^@]+)@", value) if "${" not in m[1]]
    return found


def test_compose_holds_no_secret_publishes_on_loopback_and_keeps_redis() -> None:
    # issue #54: the passwords come from docker/.env (env.example names them), every
    # published port is bound to an address (loopback by default), Redis has an
    # append-only file on a volume (queued records ride in its messages)
    doc = yaml.safe_load((ROOT / "docker" / "compose.yaml").read_text())
    assert _secrets_in(doc) == []
    for name, svc in doc["services"].items():
        for port in svc.get("ports", []):
            assert str(port).startswith("${ER_PUBLISH_ADDR:-127.0.0.1}:"), (name, port)
    redis = doc["services"]["redis"]
    assert "--appendonly" in redis["command"] and "yes" in redis["command"]
    assert any(v.endswith(":/data") for v in redis["volumes"])
    example = (ROOT / "docker" / "env.example").read_text()
    named = set(re.findall(r"\$\{(ER_[A-Z0-9_]+)", (ROOT / "docker" / "compose.yaml").read_text()))
    assert named <= set(re.findall(r"^(ER_[A-Z0-9_]+)=", example, re.M))
    assert "docker/.env" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_secret_check_finds_literal_passwords() -> None:
    assert _secrets_in({"a": {"NEO4J_AUTH": "neo4j/x", "B": ["redis://u:pw@h"]}}) == [
        "NEO4J_AUTH=neo4j/x",
        "redis://u:pw@h",
    ]
    assert _secrets_in({"P_PASSWORD": "${P:?set}", "U": "pg://er:${P}@h"}) == []


def test_readme_opens_with_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = [b.split("```")[0] for b in readme.split("```bash\n")[1:3]]
    assert "er demo" in blocks[0]
    assert "scripts/test.sh" in blocks[1]
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("bash scripts/test.sh")


def _er_imports() -> dict[str, set[str]]:
    """Module -> the er modules it imports anywhere in its source (typing-only imports
    and imports inside functions included: a circle hidden there is still a circle)."""
    files = {}
    for path in (ROOT / "er").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                graph[name] |= {a.name for a in node.names if a.name in files}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*package[: len(package) - node.level + 1], base]).strip(".")
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    graph[name] |= {full} if full in files else {base} & files.keys()
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected sets of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            if len(part) > 1:
                found.append(sorted(part))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_import_circle_in_er() -> None:
    # issue #55: the writer and its lane imported each other; a package's modules import
    # down, never round (a package's __init__ re-exporting its own modules is no circle:
    # its modules import each other by full name).
    assert _circles(_er_imports()) == []


def test_the_circle_check_finds_a_circle() -> None:
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


_FIGURE = re.compile(r"\b\d\.\d{3,}\b|\d\s*->\s*\d|→|\bF1\b\D{0,40}\d?\.\d")


def _comment_blocks(source: str) -> list[tuple[int, str]]:
    """(first line, text) of each run of comments on consecutive lines."""
    blocks: list[tuple[int, str]] = []
    last = -2
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        line = token.start[0]
        if blocks and line == last + 1:
            blocks[-1] = (blocks[-1][0], blocks[-1][1] + "\n" + token.string)
        else:
            blocks.append((line, token.string))
        last = line
    return blocks


def _uncited_figures(source: str) -> list[tuple[int, str]]:
    """Comment blocks that quote a measured figure but cite no bench/RESULTS.md section."""
    return [
        (n, b) for n, b in _comment_blocks(source) if _FIGURE.search(b) and "RESULTS.md" not in b
    ]


def test_no_comment_quotes_a_tuning_figure_without_its_results_section() -> None:
    # issue #55: a comment states the rule and cites where it was measured; the story of
    # how a value was chosen (figures, alternatives tried) lives in bench/HISTORY.md.
    found = [
        f"{path.relative_to(ROOT)}:{line}: {block.splitlines()[0]}"
        for path in sorted((ROOT / "er").rglob("*.py"))
        for line, block in _uncited_figures(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_the_figure_check_flags_an_uncited_block_and_passes_a_cited_one() -> None:
    source = (
        "X = 1  # a plain rule, no figure\n"
        "\n"
        "# pairwise F1 rose from 0.49 to 0.93\n"
        "Y = 2\n"
        "# the cut: 0.870 -> 0.896 on the held-out set\n"
        '# (bench/RESULTS.md, "Stores")\n'
        "Z = 3\n"
        "# precision 0.8123\n"
        "W = 4\n"
    )
    assert [line for line, _ in _uncited_figures(source)] == [3, 8]


def test_every_cited_results_heading_exists() -> None:
    # A citation names a bench/RESULTS.md section by its heading (or the heading's start).
    headings = re.findall(r"^## (.+)$", (ROOT / "bench" / "RESULTS.md").read_text(), re.M)
    missing = []
    for path in sorted((ROOT / "er").rglob("*.py")):
        text = re.sub(r"\s*\n\s*#?\s*", " ", path.read_text(encoding="utf-8"))
        for cited in re.findall(r'RESULTS\.md,?\s*"([^"]+)"', text):
            if not any(h.startswith(cited) for h in headings):
                missing.append(f"{path.relative_to(ROOT)}: {cited}")
    assert missing == []
