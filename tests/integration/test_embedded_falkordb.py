"""Lifecycle of the embedded FalkorDB: ports, restarts, two owners, orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest
from falkordb import FalkorDB

from er.exceptions import DataDirLockedError
from er.stores.graph import EmbeddedFalkorDB

pytestmark = pytest.mark.graph

# An "er process": starts the embedded server, reports pids and port, then waits.
OWNER = textwrap.dedent(
    """
    import sys, time
    from er.stores.graph import EmbeddedFalkorDB
    server = EmbeddedFalkorDB(sys.argv[1]).start()
    print(server.pid, server.port, flush=True)
    if sys.argv[2] == "wait":
        time.sleep(600)
    """
)


def _spawn_owner(data_dir: Path, mode: str) -> tuple[subprocess.Popen[str], int, int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(data_dir), mode], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    server_pid, port = (int(x) for x in proc.stdout.readline().split())
    return proc, server_pid, port


def _gone(pid: int, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def _servers_for(data_dir: Path) -> list[psutil.Process]:
    """Live redis-servers serving ``data_dir`` (redis rewrites its title, but chdirs to --dir)."""
    wanted = str((data_dir / "falkordb").resolve())
    found = []
    for p in psutil.process_iter(["name"]):
        try:
            if (
                "redis" in (p.info["name"] or "")
                and p.status() != psutil.STATUS_ZOMBIE
                and p.cwd() == wanted
            ):
                found.append(p)
        except psutil.Error:
            continue
    return found


def test_starts_on_a_free_loopback_port(tmp_path: Path) -> None:
    with EmbeddedFalkorDB(tmp_path) as a, EmbeddedFalkorDB(tmp_path / "other") as b:
        assert a.port != b.port and 6379 not in (a.port, b.port)
        assert FalkorDB(host="127.0.0.1", port=a.port).connection.ping()
        conns = psutil.Process(a.pid).net_connections(kind="inet")
        listening = {c.laddr for c in conns if c.status == psutil.CONN_LISTEN}
        assert {addr.ip for addr in listening} == {"127.0.0.1"}


def test_data_survives_a_restart(tmp_path: Path) -> None:
    with EmbeddedFalkorDB(tmp_path) as server:
        g = FalkorDB(host="127.0.0.1", port=server.port).select_graph("g")
        g.query("UNWIND range(1, 100) AS i CREATE (:Node {id: i})")
    with EmbeddedFalkorDB(tmp_path) as server:
        g = FalkorDB(host="127.0.0.1", port=server.port).select_graph("g")
        assert g.query("MATCH (n:Node) RETURN count(n)").result_set == [[100]]


def test_data_survives_an_unclean_end_of_er(tmp_path: Path) -> None:
    proc, server_pid, port = _spawn_owner(tmp_path, "wait")
    g = FalkorDB(host="127.0.0.1", port=port).select_graph("g")
    g.query("CREATE (:Node {id: 7})")
    time.sleep(1.5)  # appendfsync everysec
    proc.kill()  # SIGKILL: no atexit, no handler
    assert _gone(server_pid)
    with EmbeddedFalkorDB(tmp_path) as server:
        g = FalkorDB(host="127.0.0.1", port=server.port).select_graph("g")
        assert g.query("MATCH (n:Node) RETURN n.id").result_set == [[7]]


def test_a_second_owner_gets_a_clear_error_not_a_second_server(tmp_path: Path) -> None:
    proc, server_pid, port = _spawn_owner(tmp_path, "wait")
    assert [p.pid for p in _servers_for(tmp_path)] == [server_pid]
    try:
        with pytest.raises(DataDirLockedError, match=rf"in use by another er process.*{port}"):
            EmbeddedFalkorDB(tmp_path).start()
        assert [p.pid for p in _servers_for(tmp_path)] == [server_pid]
    finally:
        proc.terminate()
        proc.wait()
    assert _gone(server_pid)
    with EmbeddedFalkorDB(tmp_path):  # the lock went with its owner
        pass


@pytest.mark.parametrize("ending", ["exit", "SIGTERM", "SIGKILL"])
def test_no_orphan_server_after_er_ends(tmp_path: Path, ending: str) -> None:
    proc, server_pid, _ = _spawn_owner(tmp_path, "exit" if ending == "exit" else "wait")
    if ending != "exit":
        assert [p.pid for p in _servers_for(tmp_path)] == [server_pid]
    if ending != "exit":
        os.kill(proc.pid, getattr(signal, ending))
    proc.wait(timeout=30)
    assert _gone(server_pid), f"redis-server {server_pid} outlived er ({ending})"
    assert _servers_for(tmp_path) == []
