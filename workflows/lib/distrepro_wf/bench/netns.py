"""A shaped real network on one machine: every rank a "host" in its own Linux network namespace.

The simulated platform (:mod:`impls.sim`) is validated against this tier
(``results/bench/sim_vs_netns.csv``, :mod:`distrepro_wf.bench.netnsbench`).  A *testbed* of ``n``
hosts is (all of it inside namespaces this module creates; the root namespace gets no
address, no interface, no route):

1. a switch namespace ``drn-<pid>-<k>-sw`` holding a Linux bridge ``br0``;
2. per host ``i`` a namespace ``drn-<pid>-<k>-h<i>`` whose ``eth0`` is one end of a veth
   pair, the other end (``p<i>``) a port of the bridge; ``eth0`` has ``<subnet>.<i+1>/24``
   (default subnet ``10.231.0``: a private /24 that exists only inside these namespaces;
   parallel testbeds reuse it, each on its own bridge, isolated from one another);
3. shaping: a ``tc qdisc ... tbf`` of ``rate_mbit`` on **both** ends, so each host's NIC
   sends and receives at most ``rate_mbit`` (egress of ``eth0``: the host's upload; egress
   of ``p<i>``: its download, so incast to a parameter server is limited as a NIC would
   limit it).  This kernel has ``tbf`` but not ``netem``: bandwidth only, **no added
   delay and no loss**; the links' latency is the veth's own (microseconds), measured by
   :func:`tcp_latency_us` rather than set.

Launch (:func:`launch`): one ``torchrun`` per host, ``ip netns exec``'d into it with
``GLOO_SOCKET_IFNAME=eth0``, rendezvousing (c10d) on the first host: the multi-node path
of a Slurm launch (:func:`distrepro_wf.pipeline.launch.multinode_args`), which this tier is the
first real multi-host test of.  Two differences to a Slurm launch, both because every
namespace shares the machine's hostname: the first host is told it hosts the store
(``--rdzv-conf=is_host=1``; Slurm's first node finds out by its hostname) and each host
gives its address (``--local-addr``).

Clean-up: :func:`testbed` deletes everything on exit (an exception included);
:func:`start_reaper` starts a watchdog (its own session, so a ``killpg`` of the launcher
does not reach it) that deletes the testbed once its owner is gone, ``kill -9``
included; and :func:`cleanup_stale` (run before every set-up) deletes the testbeds of any
owner pid that no longer exists.  The processes inside a namespace are killed before it
is deleted.  :func:`preflight` refuses, before any job, where namespaces cannot be made
(not root, no ``ip`` / ``tc``, no ``tbf``), with what is missing.

CLI (root)::

    python -m distrepro_wf.bench.netns check              # can testbeds be made here?
    python -m distrepro_wf.bench.netns cleanup            # delete stale testbeds (dead owners)
    python -m distrepro_wf.bench.netns run --hosts 2 --rate-mbit 100 --plan plan.json
    python -m distrepro_wf.bench.netns run --hosts 2 --rate-mbit 100 --config run.json --out DIR

No torch here (the workflow library imports it).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

PREFIX = "drn"
IFNAME = "eth0"
DEFAULT_SUBNET = "10.231.0"
RDZV_PORT = 29400
_NAME = re.compile(rf"^{PREFIX}-(\d+)-(\d+)-(sw|h\d+)$")
_counter = itertools.count()

# the TCP ping-pong and bulk transfer run inside namespaces (python -c), stdlib only
_PINGPONG = r"""
import json, socket, sys, time
role, host, port, n, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def recvn(c, k):
    got = 0
    while got < k:
        b = c.recv(min(k - got, 1 << 20))
        if not b: raise EOFError
        got += len(b)
if role == "server":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((host, port)); s.listen(1)
    print("ready", flush=True)
    c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for _ in range(n): recvn(c, 1); c.sendall(b"p")
    recvn(c, size); c.sendall(b"d")
else:
    for _ in range(100):
        try: c = socket.create_connection((host, port)); break
        except OSError: time.sleep(0.05)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rtt = []
    for _ in range(n):
        t = time.perf_counter(); c.sendall(b"p"); recvn(c, 1); rtt.append(time.perf_counter() - t)
    buf = b"x" * size; t = time.perf_counter(); c.sendall(buf); recvn(c, 1); bulk = time.perf_counter() - t
    print(json.dumps({"rtt_s": rtt, "bulk_s": bulk}))
"""


class NetnsError(RuntimeError):
    """Testbeds cannot be made (or a command of the set-up failed): the message says why."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    p = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise NetnsError(f"`ip {' '.join(args)}` failed: {p.stderr.strip() or p.stdout.strip()}")
    return p


def preflight() -> None:
    """Raise :class:`NetnsError` naming every missing requirement (root, ``ip``, ``tc``)."""
    missing = []
    if os.geteuid() != 0:
        missing.append(f"root (this process runs as uid {os.geteuid()})")
    for tool, pkg in (("ip", "iproute2"), ("tc", "iproute2")):
        if shutil.which(tool) is None:
            missing.append(f"`{tool}` ({pkg})")
    if missing:
        raise NetnsError("network namespaces cannot be made here: needs " + ", ".join(missing))


def namespaces() -> list[str]:
    """Names of every network namespace of ``ip netns list``."""
    p = _ip("netns", "list", check=False)
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_inside(ns: str) -> None:
    p = _ip("netns", "pids", ns, check=False)
    for pid in (int(x) for x in p.stdout.split() if x.strip().isdigit()):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def delete(names: Sequence[str]) -> None:
    """Kill every process inside each namespace, then delete it (its veth ends go with it)."""
    for ns in names:
        _kill_inside(ns)
    for ns in names:
        for _ in range(50):  # a killed process may still hold it for a moment; deletion itself is an unmount
            if _ip("netns", "del", ns, check=False).returncode == 0 or ns not in namespaces():
                break
            time.sleep(0.05)


def cleanup_stale() -> list[str]:
    """Delete the testbeds (namespaces ``drn-<pid>-...``) whose owner pid is gone; their names."""
    stale = [ns for ns in namespaces() if (m := _NAME.match(ns)) and not _alive(int(m.group(1)))]
    delete(stale)
    return stale


@dataclass
class Testbed:
    """``hosts`` namespaces on one bridge, each NIC shaped to ``rate_mbit`` both ways."""

    owner: int
    k: int
    hosts: int
    rate_mbit: float
    subnet: str = DEFAULT_SUBNET
    burst_kb: int = 16

    def __post_init__(self) -> None:
        # tc wraps a negative rate to an unshaped link: the "shaped" rows would be measured on it
        if isinstance(self.rate_mbit, bool) or not isinstance(self.rate_mbit, (int, float)) or not (
                math.isfinite(self.rate_mbit) and self.rate_mbit > 0):
            raise ValueError(f"rate_mbit: expected a positive finite number of Mbit/s, got {self.rate_mbit!r}")
        if isinstance(self.hosts, bool) or not isinstance(self.hosts, int) or self.hosts < 1:
            raise ValueError(f"hosts: expected an integer >= 1, got {self.hosts!r}")

    @property
    def tag(self) -> str:
        return f"{PREFIX}-{self.owner}-{self.k}"

    @property
    def switch(self) -> str:
        return f"{self.tag}-sw"

    def ns(self, i: int) -> str:
        return f"{self.tag}-h{i}"

    def addr(self, i: int) -> str:
        return f"{self.subnet}.{i + 1}"

    def names(self) -> list[str]:
        return [self.ns(i) for i in range(self.hosts)] + [self.switch]

    def exec_prefix(self, i: int) -> list[str]:
        """Run a command as host ``i``: inside its namespace, gloo on its veth."""
        return ["ip", "netns", "exec", self.ns(i), "env", f"GLOO_SOCKET_IFNAME={IFNAME}"]

    def _tbf(self, ns: str, dev: str) -> None:
        # burst: 16 KB (larger GSO segments are split by tbf); latency: the queue a flow may build
        # (generous: a tail drop costs TCP a retransmission that a NIC would not cause)
        cmd = ["netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate",
               f"{self.rate_mbit}mbit", "burst", f"{self.burst_kb}kb", "latency", "500ms"]
        try:
            _ip(*cmd)
        except NetnsError as e:
            raise NetnsError(f"{e} (this kernel needs the tbf qdisc, sch_tbf)") from None

    def up(self) -> "Testbed":
        if not 1 <= self.hosts <= 250:
            raise NetnsError(f"hosts: {self.hosts} does not fit a /24 (1..250)")
        try:
            _ip("netns", "add", self.switch)
            _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
            _ip("-n", self.switch, "link", "set", "br0", "up")
            for i in range(self.hosts):
                ns = self.ns(i)
                _ip("netns", "add", ns)
                _ip("-n", self.switch, "link", "add", f"p{i}", "type", "veth", "peer", "name", IFNAME, "netns", ns)
                _ip("-n", self.switch, "link", "set", f"p{i}", "master", "br0", "up")
                _ip("-n", ns, "addr", "add", f"{self.addr(i)}/24", "dev", IFNAME)
                _ip("-n", ns, "link", "set", IFNAME, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                self._tbf(ns, IFNAME)  # the host's upload
                self._tbf(self.switch, f"p{i}")  # its download
        except BaseException:
            self.down()
            raise
        return self

    def down(self) -> None:
        delete([n for n in self.names() if n in set(namespaces())])


def start_reaper(tb: Testbed) -> subprocess.Popen:
    """A watchdog in its own session: deletes ``tb`` once its owner process is gone (any
    kill), and ends by itself once the testbed is gone."""
    cmd = [sys.executable, "-m", "distrepro_wf.bench.netns", "reap", "--owner", str(tb.owner), "--tag", tb.tag,
           *itertools.chain.from_iterable(("--name", n) for n in tb.names())]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                                        os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(cmd, start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env)


def _reap(owner: int, names: list[str], poll_s: float = 0.2) -> None:
    while True:
        present = [n for n in names if n in set(namespaces())]
        if not present:
            return
        if not _alive(owner):
            delete(present)
            return
        time.sleep(poll_s)


@contextlib.contextmanager
def testbed(hosts: int, rate_mbit: float, subnet: str = DEFAULT_SUBNET, reaper: bool = True) -> Iterator[Testbed]:
    """Set up a testbed (after :func:`preflight` and :func:`cleanup_stale`), yield it, tear it down."""
    preflight()
    cleanup_stale()
    tb = Testbed(os.getpid(), next(_counter), hosts, rate_mbit, subnet)
    while any(n in set(namespaces()) for n in tb.names()):  # another thread/launcher of this pid
        tb = Testbed(os.getpid(), next(_counter), hosts, rate_mbit, subnet)
    tb.up()
    watchdog = start_reaper(tb) if reaper else None
    try:
        yield tb
    finally:
        tb.down()
        if watchdog is not None:  # it ends by itself once the testbed is gone
            try:
                watchdog.wait(timeout=10)
            except subprocess.TimeoutExpired:
                watchdog.kill()
                watchdog.wait()


# -- measurements ---------------------------------------------------------------------------
def tcp_latency_us(tb: Testbed, a: int = 0, b: int = 1, n: int = 2000, bulk_bytes: int = 4_000_000,
                   port: int = 5599) -> dict[str, float]:
    """A 1-byte TCP ping-pong between hosts ``a`` and ``b`` (``n`` round trips, NODELAY):
    ``tcp_one_way_us`` = half the median round trip; and a bulk transfer of ``bulk_bytes``
    from ``a`` to ``b``: ``bulk_mbit`` (payload rate, the tbf rate counts frames)."""
    server = subprocess.Popen([*tb.exec_prefix(b), sys.executable, "-c", _PINGPONG, "server", tb.addr(b), str(port),
                               str(n), str(bulk_bytes)], stdout=subprocess.PIPE, text=True)
    try:
        server.stdout.readline()  # "ready"
        out = subprocess.run([*tb.exec_prefix(a), sys.executable, "-c", _PINGPONG, "client", tb.addr(b), str(port),
                              str(n), str(bulk_bytes)], capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise NetnsError(f"TCP ping-pong failed: {out.stderr[-2000:]}")
        res = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        server.kill()
        server.wait()
    rtt = sorted(res["rtt_s"][n // 10:])  # after a warm-up tenth
    return {"tcp_one_way_us": rtt[len(rtt) // 2] / 2 * 1e6, "tcp_rtt_min_us": rtt[0] * 1e6,
            "bulk_mbit": bulk_bytes * 8 / res["bulk_s"] / 1e6}


# -- launch ---------------------------------------------------------------------------------
def host_commands(tb: Testbed, entry: Sequence[str], ranks_per_host: int = 1, python: str | None = None,
                  rdzv_id: str | None = None, port: int = RDZV_PORT) -> list[list[str]]:
    """One torchrun per host (``entry``: the module and its arguments, e.g. ``-m impls.run
    --plan P``), rendezvousing (c10d) on host 0 (:func:`distrepro_wf.pipeline.launch.multinode_args`)."""
    from ..pipeline.launch import multinode_args, torchrun

    python = python or sys.executable
    rdzv_id = rdzv_id or tb.tag
    cmds = []
    for i in range(tb.hosts):
        args = multinode_args(tb.hosts, ranks_per_host, f"{tb.addr(0)}:{port}", rdzv_id)
        own = ["--rdzv-conf=is_host=1" if i == 0 else "--rdzv-conf=is_host=0", f"--local-addr={tb.addr(i)}"]
        cmds.append([*tb.exec_prefix(i), *torchrun(*args, *own, *entry, python=python)])
    return cmds


def launch(tb: Testbed, entry: Sequence[str], log: str | os.PathLike | None = None, timeout_s: float = 1800,
           cwd: str | os.PathLike | None = None) -> int:
    """Run :func:`host_commands` (one process group per host, each dying with this process);
    the first non-zero exit status stops the others.  Returns 0 or that status (124: timeout)."""
    from impls.runtime.procs import preexec_die_with_parent

    out = open(log, "a") if log is not None else subprocess.DEVNULL
    procs = []
    try:
        for cmd in host_commands(tb, entry):
            if log is not None:
                out.write(f"$ {' '.join(cmd)}\n")
                out.flush()
            procs.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                                          start_new_session=True, preexec_fn=preexec_die_with_parent()))
        deadline, rc = time.monotonic() + timeout_s, 0
        while rc == 0 and any(p.poll() is None for p in procs):
            rc = next((p.returncode for p in procs if p.returncode not in (None, 0)), 0)
            if time.monotonic() > deadline:
                rc = 124
            time.sleep(0.05)
        return rc or next((p.returncode for p in procs if p.returncode), 0)
    finally:
        for p in procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if log is not None:
            out.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("check", help="can testbeds be made here?")
    sub.add_parser("cleanup", help="delete testbeds whose owner is gone")
    r = sub.add_parser("run", help="a launch of impls.run, one host per rank")
    r.add_argument("--hosts", type=int, required=True)
    r.add_argument("--rate-mbit", type=float, required=True)
    r.add_argument("--plan")
    r.add_argument("--config")
    r.add_argument("--out")
    r.add_argument("--timeout-s", type=float, default=1800)
    r.add_argument("--log", default=None)
    rp = sub.add_parser("reap", help=argparse.SUPPRESS)
    rp.add_argument("--owner", type=int, required=True)
    rp.add_argument("--tag", required=True)
    rp.add_argument("--name", action="append", default=[])
    args = ap.parse_args(argv)
    if args.cmd == "reap":
        _reap(args.owner, args.name)
        return 0
    try:
        preflight()
    except NetnsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.cmd == "check":
        print("ok: root, ip and tc found")
        return 0
    if args.cmd == "cleanup":
        print("\n".join(cleanup_stale()))
        return 0
    if bool(args.plan) == bool(args.config and args.out):
        ap.error("give either --plan, or --config and --out")
    entry = ["-m", "impls.run", "--backend", "gloo"]
    entry += ["--plan", str(Path(args.plan).resolve())] if args.plan else \
        ["--config", str(Path(args.config).resolve()), "--out", str(Path(args.out).resolve())]

    def stop(signum, frame):  # SIGTERM / SIGINT: unwind, so the testbed is torn down
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    with testbed(args.hosts, args.rate_mbit) as tb:
        return launch(tb, entry, args.log, args.timeout_s)


if __name__ == "__main__":
    sys.exit(main())
