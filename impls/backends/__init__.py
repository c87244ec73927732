"""Backends: where the ranks' communication and time come from, behind one interface.

Every process-group operation of the runtime, the communicator and the algorithms goes
through a :class:`Backend` (one per rank), and every reading of time or sleep through a
:class:`Clock`, both handed around in the algorithm's context.  That is the seam behind
which the same algorithm code runs on real ranks (``torch``: ``torch.distributed`` with
gloo or NCCL, the wall clock) or, later, as actors of a simulated platform whose clock
is simulated time.  Nothing in ``impls/`` outside :mod:`impls.backends.torch_dist`
imports ``torch.distributed`` (a test checks it).

The interface (``op`` is ``"sum"``, ``"max"`` or ``"min"``; ``async_op`` returns a work
object with ``wait()`` and ``is_completed()``):

* point to point: ``isend(t, dst)``, ``irecv(t, src)`` (``src=None``: from any rank);
* collectives: ``all_reduce``, ``all_gather``, ``broadcast``, ``reduce``, ``gather``,
  ``scatter``, ``reduce_scatter``; ``barrier()``; ``agree``-style helpers use
  ``all_reduce`` on small tensors; ``all_gather_object`` for a few Python values;
* ``counter_add(key, n)``: an atomic counter shared by all ranks (no barrier);
* ``subgroup(ranks)`` / ``side_group(kind)``: a backend over some ranks, or over all ranks
  on another transport; ``any_source_group()``: the one whose ``irecv`` takes ``src=None``
  (a gloo group beside NCCL; ``Communicator.receive_from_any`` switches to it);
* ``scaled(factor)``: the same group, its messages weighing ``factor`` times their bytes
  where time is simulated (a paper profile's model size; real ranks ignore it);
* ``start_background(fn, name)``: a background activity (AD-PSGD's gossip thread), with
  ``join(timeout)`` and ``is_alive()``; ``lock()``, ``event()``, ``queue()``: the
  synchronisation such activities use (``threading``'s on real ranks, the simulator's on
  simulated ones: an algorithm never imports ``threading`` or ``queue`` itself);
* ``next_run_id()``: the same sequence on every rank of a launch (runs of a plan).

Backends: :class:`Backend` (one process), :mod:`.torch_dist` (real ranks),
:mod:`.sim` (actors of a SimGrid simulation, :mod:`impls.sim`).

The registry :data:`BACKENDS` holds one :class:`BackendSpec` per backend, under its name
(``torch``, ``simgrid``): what the rest of the house asks of a backend instead of comparing
its name: where its time comes from (``runs_on``, ``time_kind``), whether its ranks share one
process, the device of a rank (:meth:`BackendSpec.device`), how a run is launched
(``entry_module``: torchrun's ``impls.run`` or the SimGrid engine's ``impls.sim``), its
provenance fields and the validation of its own run-config keys (``platform``, ``profile``).
:func:`backend_of` maps a config's ``backend`` value (``auto``, ``gloo``, ``nccl``,
``simgrid``, or the name itself) to its spec; :func:`is_simulated` is the one question the
workflow asks of where a run runs, and what a value means on real ranks is the spec's too
(:meth:`BackendSpec.process_group`: ``auto`` -> ``gloo`` or ``nccl``;
:meth:`~BackendSpec.needs_gpu`: a local launch checks the machine's GPUs;
:meth:`~BackendSpec.may_use_gpu`: a cluster job asks for a GPU per rank), so no caller
outside this package compares these names (a test checks it).  A spec imports its implementation module only when a rank of it is made, so a
simulated run never imports ``torch.distributed`` (a test checks it).  Adding a backend: a
module here implementing :class:`Backend` and :class:`Clock`, and a registered spec naming it.
"""

from __future__ import annotations

import importlib
import itertools
import queue
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

from ..errors import ConfigError
from ..registry import Registry

BACKENDS: Registry = Registry("backend", "backend")


class Clock:
    """Wall-clock time: ``now()`` in seconds, ``sleep(s)``, and ``compute()`` around the
    forward/backward pass (a simulated clock charges it to the host; the wall clock just
    lets it run), with ``forward_done()`` marking the end of the forward pass and
    ``backward_point(fraction)`` progress through backward.

    A straggler (``compute(..., slowdown=)``, :class:`impls.runtime.straggler.Slowdown`):
    the wall clock lets the real passes run and sleeps what a device ``factor`` times slower
    would have taken more, in pieces: at :meth:`forward_done` ``(factor - 1)`` times the
    forward pass's measured time, at each :meth:`backward_point` (before a bucket's
    all-reduce leaves) up to ``(factor - 1)`` times the backward time measured so far, the
    rest when ``compute`` ends; a ``slowdown.extra_s`` is spread by the backward share of a
    step (:data:`impls.sim.profiles.BACKWARD_FRACTION`).  Every piece sleeps up to the total
    owed so far, so an oversleep is owed less later.  ``since``: when the step began (the
    runtime's ``t0``: what the algorithm does before the forward pass counts as forward);
    ``slowed_s``: the seconds the last ``compute`` added (slept)."""

    slowed_s = 0.0
    _slowing: "_WallSlowing | None" = None
    _settling: "_WallSlowing | None" = None

    def now(self) -> float:
        return time.perf_counter()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    @contextmanager
    def compute(self, *what: Any, slowdown: Any = None, since: float | None = None) -> Iterator[None]:
        if slowdown is None or not slowdown.active:
            self._slowing, self.slowed_s = None, 0.0
            yield
            return
        from ..sim.profiles import BACKWARD_FRACTION

        self._slowing = sl = _WallSlowing(slowdown, BACKWARD_FRACTION, self.now() if since is None else since)
        try:
            yield
        finally:
            self._slowing = None
        self.slowed_s = sl.finish()
        self._settling = sl

    def settle(self) -> None:
        """After the step's compute and what the algorithm does when it ends (launching the last
        buckets): the wall clock sleeps what the slowdown still owes on that too, so the rank
        has slept at least ``slowdown.added`` of its whole compute (:meth:`straggler_delay`)."""
        sl, self._settling = self._settling, None
        if sl is not None:
            self.slowed_s = sl.finish()

    def healthy_compute_s(self, elapsed_s: float, slowdown: Any) -> float:
        """A step's compute at the healthy speed, from ``elapsed_s`` (its start to the end of
        :meth:`settle`): minus what the slowdown slept, and on the wall clock at most what the
        slept seconds account for, ``(slept - extra_s) / (factor - 1)``: the microseconds of
        healthy work after the clock's last reckoning in :meth:`settle` count as the
        slowdown's, so the delay it implies (:meth:`straggler_delay`) was really slept."""
        healthy = elapsed_s - self.slowed_s
        if slowdown is not None and slowdown.factor > 1.0:
            healthy = min(healthy, max(0.0, self.slowed_s - slowdown.extra_s) / (slowdown.factor - 1.0))
        return healthy

    def straggler_delay(self, slowdown: Any, compute_s: float) -> float:
        """The seconds a straggler's slowdown added to a step whose healthy compute was
        ``compute_s``: the wall clock's, ``slowdown.added(compute_s)`` (it slept at least that,
        a sleep only overshoots); a charging clock's, what it charged."""
        return slowdown.added(compute_s) if slowdown is not None else 0.0

    def forward_done(self) -> None:
        """Inside :meth:`compute`: the forward pass has ended (the backward pass starts)."""
        if self._slowing is not None:
            self._slowing.forward_done()

    def backward_point(self, fraction: float) -> None:
        """Inside :meth:`compute`: the backward pass has computed ``fraction`` of the
        gradient (counted in parameters), e.g. a bucket is complete and its all-reduce is
        about to start.  The wall clock is already there (a straggler's slowdown sleeps its
        share of the backward pass so far first); a simulated clock charges the host up to
        that point of the step (:class:`impls.backends.sim.SimClock`)."""
        if self._slowing is not None:
            self._slowing.backward_point(fraction)

    def wire_scale(self, model_bytes: int) -> float:
        """How many times its bytes a message of the algorithm weighs (1: as measured)."""
        return 1.0

    def gradient_layout(self) -> tuple[int, ...] | None:
        """The parameter sizes (bytes, backward order) of the model whose gradient readiness
        times an overlapped method's buckets, where it is not the run's own model (a simulated
        paper profile's: :meth:`impls.sim.profiles.Profile.gradient_layout`); None: the model's own."""
        return None

    def resume(self, elapsed_s: float, saved: dict[str, float] | None) -> float:
        """The start time (on this clock) of a run resumed ``elapsed_s`` seconds into its
        training; ``saved``: the ``{"t_start", "now"}`` this clock read when the checkpoint
        was written (None for a fresh start or an older checkpoint).  A wall clock goes on
        from now: the time between the kill and the restart is not counted."""
        return self.now() - elapsed_s

    def charge_op(self, kind: str, nbytes: float) -> None:
        """A local operation of ``kind`` touching ``nbytes`` bytes has just run (kinds:
        :data:`impls.sim.opcost.KINDS`: ``arith``, ``optim``, ``copy``, ``stage``,
        ``compress``).  The wall clock has already spent its real time: nothing to do; a
        simulated clock charges the host the op-cost model's time for it."""

    def pop_costs(self) -> dict[str, float]:
        """Seconds charged per op kind since the last call (``time/arith_s``, ...); the wall
        clock charges nothing separately (the ops' time is in the step's own)."""
        return {}

    def describe(self) -> dict[str, Any]:
        return {"kind": "wall clock"}


class ChargedClock(Clock):
    """Wall-clock time whose compute is charged by a ``fixed`` timing profile, as the
    simulated clock charges it (:class:`impls.backends.sim.SimClock`): the real
    forward/backward still runs, then the rank sleeps ``max(0, step_s - elapsed)``, so a
    step's compute lasts ``max(step_s, real compute)``.  With the profile's time above
    the real one (the intent) every rank's compute is exactly the profile's, however
    many ranks share the cores, and the network (a shaped one, :mod:`distrepro_wf.bench.netns`)
    is what is measured.  Where the real compute exceeds ``step_s`` the step takes the
    real time (a sign the profile is too small for this machine; ``time/compute_s``
    shows it).  Only the forward/backward is charged; the rest of a step (optimizer,
    gossip arithmetic, compression) runs at this machine's real speed, which the
    simulator does not charge.

    Overlap with backward (``allreduce_sgd``'s ``overlap_backward``): as on the simulated
    clock, the step is its forward pass, ``1 - backward_fraction`` of ``step_s``, then its
    backward pass; :meth:`backward_point` sleeps up to a bucket's point of the step before
    its all-reduce starts, so the real and the simulated all-reduce start at the same point
    of a step (without it the all-reduce would start after the real backward and hide
    behind the charged sleep).

    A straggler's slowdown (``compute(..., slowdown=)``) charges ``factor x step_s + extra_s``,
    the same split: every backward point moves out with it (as on the simulated clock).

    ``step_s(batch)``: the profile's compute of one step (:meth:`impls.sim.profiles.Profile.step_time`)."""

    def __init__(self, step_s: Callable[[Any], float], description: dict[str, Any] | None = None,
                 backward_fraction: float = 2 / 3):
        self._step_s = step_s
        self._description = description or {}
        self._backward_fraction = backward_fraction
        self._open: tuple[float, float] | None = None  # (step seconds, start) while compute() runs

    @contextmanager
    def compute(self, *what: Any, slowdown: Any = None, since: float | None = None) -> Iterator[None]:
        t0 = time.perf_counter()
        batch = what[1] if len(what) > 1 else None
        healthy = self._step_s(batch)  # one draw per step (jitter)
        self._open = (healthy if slowdown is None else healthy * slowdown.factor + slowdown.extra_s, t0)
        try:
            yield
        finally:
            step, _ = self._open
            self._open = None
        self.slowed_s = step - healthy
        self.sleep(step - (time.perf_counter() - t0))

    def forward_done(self) -> None:
        """The profile's step says when forward ends: nothing to mark."""

    def settle(self) -> None:
        """The slowdown was charged with the step: nothing owed."""

    def healthy_compute_s(self, elapsed_s: float, slowdown: Any) -> float:
        return elapsed_s - self.slowed_s  # charged, not slept: exact

    def straggler_delay(self, slowdown: Any, compute_s: float) -> float:
        return self.slowed_s

    def backward_point(self, fraction: float) -> None:
        if self._open is None:
            return
        step, t0 = self._open
        at = step * ((1.0 - self._backward_fraction) + self._backward_fraction * min(max(fraction, 0.0), 1.0))
        self.sleep(at - (time.perf_counter() - t0))

    def describe(self) -> dict[str, Any]:
        return {**self._description, "kind": "wall clock, compute charged by a fixed profile (sleep to step_ms)"}


class _WallSlowing:
    """A straggler's slowdown of one real step (:class:`Clock`): sleeps in pieces so the
    forward pass ends, and each backward point is reached, when a device ``factor`` times
    slower would have reached it.  Every sleep is measured, so an oversleep is owed less
    later."""

    def __init__(self, slowdown: Any, backward_fraction: float, t0: float):
        self.factor, self.extra, self.b = slowdown.factor, slowdown.extra_s, backward_fraction
        self.t0, self.forward = t0, None  # the forward pass's real seconds, once it has ended
        self.t_bwd = self.slept = 0.0

    def _sleep_to(self, owed: float) -> None:
        """Sleep until ``owed`` seconds have been slept in all (an earlier oversleep counts)."""
        if owed > self.slept:
            t = time.perf_counter()
            time.sleep(owed - self.slept)
            self.slept += time.perf_counter() - t

    def forward_done(self) -> None:
        if self.forward is None:
            self.forward = time.perf_counter() - self.t0
            self._sleep_to((self.factor - 1.0) * self.forward + self.extra * (1.0 - self.b))
            self.t_bwd, self.slept_fwd = time.perf_counter(), self.slept

    def backward_point(self, fraction: float) -> None:
        if self.forward is None:  # no forward mark (a custom loop): nothing to say about backward yet
            return
        done = time.perf_counter() - self.t_bwd - (self.slept - self.slept_fwd)  # the real backward so far
        share = (1.0 - self.b) + self.b * min(max(fraction, 0.0), 1.0)
        self._sleep_to((self.factor - 1.0) * (self.forward + done) + self.extra * share)

    def finish(self) -> float:
        """The rest of the step's slowdown, slept now; returns every second slept."""
        if self.forward is None:  # never marked: the whole compute as one phase
            self._sleep_to((self.factor - 1.0) * (time.perf_counter() - self.t0 - self.slept) + self.extra)
        else:
            self.backward_point(1.0)
        return self.slept


class Backend:
    """A single process, no peers: what the runtime uses outside torchrun (and validation).

    ``name``: the transport (``gloo``, ``nccl``, ``simgrid``, ``none``); ``registered``: the
    registry name of the backend it is a rank of (:attr:`spec`)."""

    name = "none"
    registered = "torch"  # one process on real time: the torch backend's degenerate case

    @property
    def spec(self) -> "BackendSpec":
        """The registered :class:`BackendSpec` of this rank's backend."""
        return BACKENDS.get(self.registered)()

    def __init__(self) -> None:
        self.rank, self.world = 0, 1
        self._counters: dict[str, int] = {}
        self._runs = itertools.count()

    # a single rank: collectives are identities, there is no one to send to
    def all_reduce(self, t, op: str = "sum", async_op: bool = False):
        return _Done() if async_op else None

    def all_gather(self, outs, t, async_op: bool = False):
        outs[0].copy_(t)
        return _Done() if async_op else None

    def broadcast(self, t, src: int, async_op: bool = False):
        return _Done() if async_op else None

    def reduce(self, t, dst: int, op: str = "sum", async_op: bool = False):
        return _Done() if async_op else None

    def gather(self, t, outs, dst: int, async_op: bool = False):
        outs[0].copy_(t)
        return _Done() if async_op else None

    def scatter(self, t, ins, src: int, async_op: bool = False):
        t.copy_(ins[0])
        return _Done() if async_op else None

    def reduce_scatter(self, out, ins, op: str = "sum", async_op: bool = False):
        out.copy_(ins[0])
        return _Done() if async_op else None

    def barrier(self) -> None:
        pass

    def all_gather_object(self, obj: Any) -> list[Any]:
        return [obj]

    def isend(self, t, dst: int):
        raise RuntimeError("a single process has no peer to send to")

    def irecv(self, t, src: int | None):
        raise RuntimeError("a single process has no peer to receive from")

    def counter_add(self, key: str, n: int = 1) -> int:
        self._counters[key] = self._counters.get(key, 0) + n
        return self._counters[key]

    def subgroup(self, ranks: list[int]) -> "Backend":
        return self

    def side_group(self, kind: str) -> "Backend":
        return self

    def any_source_group(self) -> "Backend":
        """A backend over the same ranks whose ``irecv`` takes ``src=None`` (receive from any
        rank): the gloo side group (NCCL cannot; gloo is itself).  Every rank calls it."""
        return self.side_group("gloo")

    def scaled(self, factor: float) -> "Backend":
        return self

    def allreduce_algorithm_for(self, nbytes: int, configured: str) -> str:
        """The algorithm an all-reduce of ``nbytes`` runs (for counting its bytes)."""
        return configured

    def next_run_id(self) -> int:
        return next(self._runs)

    def start_background(self, fn: Callable[[], None], name: str) -> threading.Thread:
        th = threading.Thread(target=fn, name=name, daemon=True)
        th.start()
        return th

    def lock(self) -> Any:
        return threading.Lock()

    def event(self) -> Any:
        return threading.Event()

    def queue(self) -> Any:
        return queue.Queue()

    def close(self) -> None:
        pass


class NotAMember(Backend):
    """What a rank outside a subgroup holds for it: any use is a bug, and says so."""

    def __init__(self, ranks: list[int]):
        super().__init__()
        self.rank, self.world, self.name = -1, len(ranks), f"not a member of ranks {list(ranks)}"

    def __getattribute__(self, name: str) -> Any:
        if name in ("rank", "world", "name") or name.startswith("__"):
            return object.__getattribute__(self, name)
        raise RuntimeError(f"this rank is {object.__getattribute__(self, 'name')}: it cannot call {name}()")


class _Done:
    def wait(self) -> None:
        pass

    def is_completed(self) -> bool:
        return True


class BackendSpec:
    """A backend as a registered component: everything callers decide about a backend.

    ``name``: its registry name; ``module``: its implementation under ``impls/backends``
    (imported only by :meth:`join` / :meth:`module_`); ``run_values``: the values of a run
    config's ``backend`` key that select it; ``runs_on``: ``real`` (measured time) or
    ``simulated``; ``time_kind``: what its times are (the report's column); ``one_process``:
    all its ranks live in one process (no per-rank loader processes, one placement, a
    launch of one process); ``entry_module``: what ``python -m`` runs one config of it."""

    name = ""
    module = ""
    run_values: tuple[str, ...] = ()
    runs_on = "real"
    time_kind = "wall clock"
    one_process = False
    entry_module = ""

    @property
    def simulated(self) -> bool:
        return self.runs_on == "simulated"

    def module_(self) -> Any:
        """The implementation module (imported now, on first use)."""
        return importlib.import_module(f"{__name__}.{self.module}")

    def use_cuda(self, kind: str) -> bool:
        return False

    def process_group(self, kind: str, gpu: bool | None = None) -> str:
        """The transport ranks of the run-config value ``kind`` use (a simulated backend: its own
        name); ``gpu``: whether the ranks have a GPU (None: this process's)."""
        return self.name

    def needs_gpu(self, kind: str) -> bool:
        """Whether ranks of ``kind`` cannot run without a GPU each (a local launch checks the machine)."""
        return False

    def may_use_gpu(self, kind: str) -> bool:
        """Whether ranks of ``kind`` use a GPU where there is one (a cluster job asks for one per rank)."""
        return False

    def cpu_values(self) -> tuple[str, ...]:
        """The values of :attr:`run_values` that run without a GPU (for messages)."""
        return tuple(v for v in self.run_values if not self.needs_gpu(v))

    def device(self, kind: str) -> Any:
        """The device of this process's rank for a run config's ``backend`` value ``kind``."""
        import os

        import torch

        if self.use_cuda(kind):
            return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        return torch.device("cpu")

    def join(self, kind: str) -> Backend | None:
        """This process's rank of the backend, or None where this process is not one of its ranks."""
        return None

    def validate(self, run: Any) -> dict[str, Any]:
        """Check the run config keys this backend owns (``platform``, ``profile``), naming the key;
        return them parsed (``{key: config object}``), kept as ``run.parsed`` so that nothing
        parses them again in this process."""
        return {}

    def provenance(self, backend: Backend) -> dict[str, Any]:
        """This backend's fields of a run's ``provenance.json``."""
        return {"backend": backend.name, "runs_on": self.runs_on}


def _fixed_profile_only(run: Any) -> dict[str, Any]:
    """Real ranks: no platform; a profile only ``fixed`` (their compute charged as a sleep)."""
    if run.platform is not None:
        raise ConfigError("platform", f"only simulated runs (backend: {', '.join(simulated_names())}) have a "
                                      f"platform; this run's backend is {run.backend!r}")
    if run.profile is not None:
        from ..sim.profiles import profile_config

        prof = profile_config(run.profile)
        if prof.name != "fixed" or prof.model_mb is not None:
            raise ConfigError("profile", f"real ranks (backend {run.backend!r}) take only a profile "
                                         f"{{name: fixed, step_ms: ..., jitter: ...}} (their compute charged "
                                         f"as a sleep; messages weigh their real bytes, no model_mb); got "
                                         f"{run.profile!r}; other profiles need backend: "
                                         f"{', '.join(simulated_names())}")
        return {"profile": prof}
    return {}


@BACKENDS.register("torch")
class TorchSpec(BackendSpec):
    """Real ranks under torchrun (:mod:`.torch_dist`): gloo on CPU, NCCL on GPU; the wall clock.

    Its run-config values (the config's ``launcher.backend``, ``impls.run --backend``) are
    requests for a ``torch.distributed`` process group: ``gloo`` (CPU tensors, anywhere),
    ``nccl`` (a CUDA GPU per rank) and ``auto`` (:attr:`default_value`: NCCL where the ranks
    have a GPU, else gloo).  What they mean is asked of this spec (:meth:`process_group`,
    :meth:`needs_gpu`, :meth:`may_use_gpu`), never compared by name outside this package."""

    name, module = "torch", "torch_dist"
    #: the process groups, then the request that picks one by the ranks' hardware
    process_groups, default_value = ("gloo", "nccl"), "auto"
    run_values = ("auto", "gloo", "nccl")
    runs_on, time_kind, one_process, entry_module = "real", "wall clock", False, "impls.run"
    #: the collectives one rank runs at once in one process group, the rest queued in the order
    #: they were issued: NCCL runs a communicator's collectives one after another on its stream
    #: (torch's ProcessGroupNCCL: one NCCL stream per device and group); gloo on 2 worker threads
    #: (ProcessGroupGloo: ``threads = 2 x devices``, one device by default).  DDP's bucketed
    #: all-reduces queue this way; the simulator's ``platform.collective_streams`` is the same fact
    #: for the transport a simulated cluster runs (1: NCCL, the papers' GPU clusters)
    collective_streams = {"gloo": 2, "nccl": 1}

    def streams(self, kind: str, gpu: bool | None = None) -> int:
        """:attr:`collective_streams` of the process group ``kind`` resolves to (:meth:`process_group`)."""
        return self.collective_streams[self.process_group(kind, gpu)]

    def process_group(self, kind: str, gpu: bool | None = None) -> str:
        """``gloo`` or ``nccl`` for the request ``kind``; ``auto`` (or the registry name,
        ``torch``): ``nccl`` where the ranks have a GPU (``gpu``; None: whether this process
        sees one), else ``gloo``."""
        if kind in self.process_groups:
            return kind
        if kind not in (self.default_value, self.name):
            raise ConfigError("backend", f"unknown process group {kind!r}; allowed: {', '.join(self.run_values)}")
        if gpu is None:
            import torch

            gpu = torch.cuda.is_available()
        return "nccl" if gpu else "gloo"

    def use_cuda(self, kind: str) -> bool:
        return self.process_group(kind) == "nccl"

    def needs_gpu(self, kind: str) -> bool:
        return self.process_group(kind, gpu=False) == "nccl"

    def may_use_gpu(self, kind: str) -> bool:
        return self.process_group(kind, gpu=True) == "nccl"

    def gpus_here(self, kind: str) -> int:
        """The GPUs this machine gives ranks of ``kind`` (CUDA devices usable by NCCL; 0 without)."""
        return self.module_().usable_gpus()

    def join(self, kind: str) -> Backend | None:
        return self.module_().join(kind)

    def validate(self, run: Any) -> dict[str, Any]:
        return _fixed_profile_only(run)


@BACKENDS.register("simgrid")
class SimGridSpec(BackendSpec):
    """Actors of one SimGrid simulation in one process (:mod:`.sim`, :mod:`impls.sim`);
    simulated time; CPU tensors.  Its ranks are made by the engine
    (:func:`impls.sim.engine.simulate`), never joined."""

    name, module, run_values = "simgrid", "sim", ("simgrid",)
    runs_on, time_kind, one_process, entry_module = "simulated", "simulated", True, "impls.sim"

    def validate(self, run: Any) -> dict[str, Any]:
        from ..sim.platforms import platform_config
        from ..sim.profiles import profile_config

        return {"platform": platform_config(run.platform if run.platform is not None else "ethernet_10g"),
                "profile": profile_config(run.profile if run.profile is not None else "measured")}


#: the default of a run config's ``backend`` (real ranks: gloo, or NCCL where there is a GPU)
DEFAULT = TorchSpec.default_value


def backend_of(value: str | None) -> BackendSpec:
    """The spec of a config's ``backend`` value: a registry name (``torch``, ``simgrid``) or a
    value a backend serves (``auto``, ``gloo``, ``nccl``); None (or a missing value in a
    table): the default, ``auto``.  An unknown value raises :class:`ConfigError` naming
    ``backend`` and every allowed value."""
    if not isinstance(value, str):
        value = DEFAULT
    if value in BACKENDS:
        return BACKENDS.get(value)()
    for name in BACKENDS.names():
        spec = BACKENDS.get(name)
        if value in spec.run_values:
            return spec()
    raise ConfigError("backend", f"unknown backend {value!r}; allowed: {', '.join(backend_values())}")


def run_values() -> tuple[str, ...]:
    """Every value a run config's ``backend`` may take (sorted)."""
    return tuple(sorted(v for n in BACKENDS.names() for v in BACKENDS.get(n).run_values))


def backend_values() -> tuple[str, ...]:
    """Every value :func:`backend_of` accepts: the registry names and the run-config values."""
    return tuple(sorted({*BACKENDS.names(), *run_values()}))


def is_simulated(value: str | None) -> bool:
    """Whether a config's ``backend`` value runs on simulated time (its spec's ``runs_on``)."""
    return backend_of(value).simulated


def simulated_names() -> list[str]:
    """The registry names of the simulated backends (for messages)."""
    return [n for n in BACKENDS.names() if BACKENDS.get(n).runs_on == "simulated"]


def current_backend(kind: str = DEFAULT) -> Backend:
    """The backend of this process: its backend's rank (torchrun's process group for ``auto``,
    ``gloo``, ``nccl``), else the single-process one."""
    return backend_of(kind).join(kind) or Backend()
