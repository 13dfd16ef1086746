"""A real multi-process Ray cluster on 127.0.0.1 for the tests: `ray start --head` and more nodes as
subprocesses, on free loopback ports, in a private temp dir, stopped by killing only their own
process groups (never `ray stop`, which stops every Ray on the machine, other users' included).

Each node's processes see ``TMPDIR`` = ``<root>/tmp``: what the sandboxes on its workers leave (or
do not leave) is counted there, apart from whatever other programs on the machine put in /tmp.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from tasks.base import Verdict

RAY = str(Path(sys.executable).parent / "ray")


_GIVEN: set[int] = set()


def free_port() -> int:
    """A loopback port free now and not handed out before in this process: the kernel may give a
    just-closed port again, and Ray refuses two components on one port (it happened in CI:
    dashboard_agent_grpc and dashboard_agent_http both got 46897)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port


def pids_with(text: str) -> list[int]:
    """Processes whose command line contains ``text``."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmd:
                found.append(int(entry))
    return found


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def is_template(pid: int) -> bool:
    """A sandbox template process (rewards/zygote.py): it forks the runners, runs no program."""
    try:
        return b"--zygote" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False


def sandbox_owner(runner: int) -> int:
    """The process whose sandbox ``runner`` is: the runner's parent, or its template's parent."""
    parent = parent_of(runner)
    return parent_of(parent) if is_template(parent) else parent


def session_of(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])
    except (OSError, ValueError, IndexError):
        return None


def in_session(sid: int) -> list[int]:
    """Processes of session ``sid``: a node's `ray start`, its raylet, agents and Ray workers (which
    leave its process group but not its session); sandboxed programs start sessions of their own."""
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and session_of(int(e)) == sid]


class Node:
    def __init__(self, name: str, proc: subprocess.Popen, log: Path):
        self.name, self.proc, self.log = name, proc, log

    def pids(self) -> list[int]:
        return in_session(self.proc.pid)

    def kill(self) -> None:
        """SIGKILL every process of the node's session (`ray start --block`, raylet, agents, workers)."""
        for _ in range(5):
            left = self.pids()
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if not left:
                break
            time.sleep(0.1)
        self.proc.wait()


class LoopbackCluster:
    """``head_cpus`` on the head; ``add_node(cpus)`` joins another node (a separate raylet)."""

    def __init__(self, head_cpus: int = 2, env: dict | None = None):
        # short: Ray's socket paths must fit in 107 bytes
        self.root = Path(tempfile.mkdtemp(prefix="hr-", dir="/tmp"))
        self.tmp = self.root / "tmp"
        self.tmp.mkdir()
        os.chmod(self.root, 0o755)  # sandboxed programs run as nobody under it
        os.chmod(self.tmp, 0o1777)
        self.env = dict(os.environ, TMPDIR=str(self.tmp), RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="1",
                        RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled", **(env or {}))
        self.nodes: list[Node] = []
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.nodes.append(self._start("head", ["--head", "--port", str(self.port), "--num-cpus", str(head_cpus),
                                               "--include-dashboard", "false",
                                               "--ray-client-server-port", str(free_port())]))
        self.wait_for_cpus(head_cpus)

    def _start(self, name: str, args: list[str]) -> Node:
        log = self.root / f"{name}.log"
        with open(log, "w") as fh:
            proc = subprocess.Popen([RAY, "start", "--block", "--node-ip-address", "127.0.0.1", "--temp-dir", str(self.root),
                                     "--min-worker-port", "0", "--max-worker-port", "0",
                                     "--node-manager-port", str(free_port()), "--object-manager-port", str(free_port()),
                                     "--dashboard-agent-listen-port", str(free_port()),
                                     "--dashboard-agent-grpc-port", str(free_port()),
                                     "--runtime-env-agent-port", str(free_port()),
                                     "--metrics-export-port", str(free_port()),
                                     "--object-store-memory", str(100 << 20), "--disable-usage-stats", *args],
                                    stdout=fh, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        return Node(name, proc, log)

    def add_node(self, cpus: int, name: str | None = None) -> Node:
        before = self.cpus()
        node = self._start(name or f"node{len(self.nodes)}", ["--address", self.address, "--num-cpus", str(cpus)])
        self.nodes.append(node)
        self.wait_for_cpus(before + cpus)
        return node

    def cpus(self) -> int:
        """The CPUs of the alive nodes, as the head's GCS lists them."""
        from ray._private.gcs_utils import create_gcs_channel
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(create_gcs_channel(self.address))
        reply = stub.GetAllNodeInfo(gcs_service_pb2.GetAllNodeInfoRequest(), timeout=5)
        return int(sum(n.resources_total.get("CPU", 0) for n in reply.node_info_list if n.state == 0))

    def wait_for_cpus(self, n: int, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if self.cpus() == n:
                    return
            except Exception:  # not up yet
                pass
            dead = [node for node in self.nodes if node.proc.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "\n".join(f"--- {n.name}\n" + n.log.read_text()[-2000:] for n in self.nodes)
                raise RuntimeError(f"the loopback Ray cluster did not reach {n} CPUs:\n{logs}")
            time.sleep(0.3)

    def stop(self) -> None:
        """Kill every process this cluster started (its process groups, then anything else that
        names its private temp dir), leaving every other Ray on the machine alone."""
        for node in reversed(self.nodes):
            node.kill()
        for _ in range(3):
            left = [pid for pid in pids_with(str(self.root)) if pid != os.getpid()]
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)


def sleepy(seconds: float, timeout_s: float):
    """A bare task: main() sleeps, then returns k + 0.5, which is the reward."""
    return SimpleNamespace(name="sleepy", timeout_s=timeout_s, memory_mb=1024, cascade_entry=None, harness=None,
                           data_files=(), run_entry="main", entry_function="main",
                           verify=lambda value: Verdict(float(value), True, f"returned {value}", {}),
                           code=lambda k: f"import time\ndef main():\n    time.sleep({seconds})\n    return {k}.5\n")
