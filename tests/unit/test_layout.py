"""Layout rules: dependency direction (DESIGN §5) and the docker compose wiring."""

from __future__ import annotations

import subprocess
import sys
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


def test_readme_opens_with_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = [b.split("```")[0] for b in readme.split("```bash\n")[1:3]]
    assert "er demo" in blocks[0]
    assert "scripts/test.sh" in blocks[1]
    assert (ROOT / ".ci" / "run").read_text().strip().endswith("bash scripts/test.sh")
