"""The ``simgrid`` backend: every rank an actor of one SimGrid simulation, time simulated.

All ranks run in one process, each as a SimGrid actor on its own simulated host
(:mod:`impls.sim.engine` builds the platform and starts them), executing the same
runtime and algorithm code as real ranks on real tensors.  Only time and the wire
are simulated:

* **Point to point** (``isend`` / ``irecv``) is gloo's protocol for them (an *unbound
  buffer* over TCP, ``gloo/transport/tcp/pair.cc``), a **rendezvous**: ``isend`` sends
  a "send ready" notification (:data:`NOTIFY_BYTES`) at once, and the data, a SimGrid
  communication carrying a copy of the tensor of ``nbytes x scale`` simulated bytes
  (``scale``: :meth:`SimBackend.scaled`, the paper profile's model bytes over the
  stand-in's), leaves only once the receiver has **posted** a matching ``irecv`` (on a
  mailbox per (group, source, destination) without a permanent receiver: SimGrid
  starts the transfer when both sides have posted).  ``irecv`` from a named source
  posts at once (and consumes that source's notification, gloo's "expected send
  notification"); ``irecv(t, None)`` (from any source) takes the first sender whose
  notification has arrived (arrival order, as gloo's ``recvFromAny`` takes the first
  pending send) and posts that one transfer only: the other senders' data waits for
  the receiver's next receive.  So a server receiving from any worker takes the pushes
  one at a time, each at its link's full rate, while its replies to the workers it has
  served leave on the other direction of its link: pushes in and replies out overlap,
  as on real ranks (an *eager* model, every push flowing at once, shared max-min
  fairly, lands equal workers' pushes together and then their replies together: a
  lockstep as slow as the synchronous server; ``tests/test_ps_family.py``).  Not
  modelled: the notification's answer (one latency) before the data of a send posted
  before its receive, and the completion of a send once its last bytes are in the
  kernel's socket buffer (here: once they have arrived).
* **Collectives** are their algorithms over point-to-point messages (ring all-reduce
  and all-gather; binomial trees for broadcast and reduce; recursive doubling; linear
  gather / scatter; the ring's, the trees' and recursive doubling's schedules are
  :mod:`impls.comm.allreduce`'s), each instance on its own mailboxes, so their cost is the
  platform's flow model (latency, bandwidth sharing, contention on shared links), not
  a formula.  ``async_op=True`` runs the collective in a helper actor on the rank's
  host, overlapping whatever the rank does meanwhile.  A rank's collectives in one group
  queue on its **stream** in the order issued (``platform.collective_streams`` at once: 1, as
  NCCL runs a communicator's collectives on one CUDA stream; a twin of gloo ranks, 2, its
  worker threads): AR-SGD's bucket all-reduces run one after another, each paying its
  ring's latency, as DDP's do (concurrent, 5x the latency cost a 32-node step 4 ms where the
  serial closed form said 62).
* **Compute**: :class:`SimClock` lets the real forward/backward run in zero simulated
  time, then charges the host the profile's compute time for the step
  (:mod:`impls.sim.profiles`); ``sleep`` and ``now`` are simulated.
* **Local operations** (``clock.charge_op(kind, nbytes)``: mixing, optimizer, copies,
  staging, compression) cost the op-cost model's time (:mod:`impls.sim.opcost`), and
  every wire message costs its sender the profile's per-message overhead (``_put``).
* **All-reduce bus efficiency** (``platform.allreduce_efficiency``, default 1): every
  message of an all-reduce weighs 1/efficiency times its bytes.
* **Background activities** (``start_background``) are actors on the same host; the
  synchronisation they need (``lock``, ``event``, ``queue``) is SimGrid's, so the
  order of asynchronous events follows simulated time and is deterministic.

Determinism: SimGrid schedules actors one at a time in a deterministic order, and
every blocking call saves and restores torch's process-wide random generator for the
actor (what model initialisation, dropout and torchvision's transforms draw from), so
each rank draws from its own stream exactly as a process of its own would (a collective's
schedule, which draws nothing, keeps it once around the whole schedule instead).  (The
global generators of numpy and ``random`` are shared by the ranks of a simulation:
saving them costs 20-140 us per call, and neither the runtime nor any method draws
from them while training; everything seeded draws from its own generator.)
Same seed, same platform: identical numbers, simulated times included.

All-reduce of fewer than ``small_bytes`` (64 KiB; the platform's ``small_allreduce_bytes``) wire bytes (flags, scalars, the runtime's
agreement) uses recursive doubling whatever the configured algorithm, as MPI
libraries do for short messages: log2(n) rounds instead of the ring's 2(n - 1).
"""

from __future__ import annotations

import collections
import itertools
import pickle
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch

from ..comm.allreduce import binomial_broadcast_steps, binomial_reduce_steps, fold, ring_steps
from . import Backend, Clock, NotAMember

SPEED = 1e9  # every simulated host's nominal speed (flop/s): compute is charged as seconds x SPEED
#: the wire size of gloo's "send ready" notification: a TCP preamble of 6 size_t
#: (gloo/transport/tcp/pair.h, ``Op::preamble``)
NOTIFY_BYTES = 48


def _rng_state() -> torch.Tensor:
    return torch.get_rng_state()


def _set_rng_state(s: torch.Tensor) -> None:
    torch.set_rng_state(s)


#: delays charged to an actor (op costs, :meth:`SimClock.charge_op`) and not slept yet, by
#: actor pid: slept at the actor's next interaction with the simulation (a blocking call,
#: a poll, reading the clock), which is the same simulated time as sleeping at once, with
#: one context switch per interaction instead of one per operation
_PENDING: dict[int, float] = {}


def _defer(seconds: float) -> None:
    import simgrid

    pid = simgrid.this_actor.get_pid()
    _PENDING[pid] = _PENDING.get(pid, 0.0) + seconds


def flush_pending() -> None:
    """Sleep this actor's deferred delays now (before it interacts with the simulation)."""
    if _PENDING:
        import simgrid

        s = _PENDING.pop(simgrid.this_actor.get_pid(), 0.0)
        if s > 0:
            _switch(simgrid.this_actor.sleep_for, s)


#: actors running a collective's schedule (by pid), which draws no random number: their blocking
#: calls need not keep the actor's random stream (:func:`_stream_kept`)
_KEPT: set[int] = set()


def _switch(fn: Callable, *args: Any) -> Any:
    """``fn(*args)``, which may switch actors, keeping this actor's random stream (module
    docstring) unless the actor is inside :func:`_stream_kept`."""
    if _KEPT:
        import simgrid

        if simgrid.this_actor.get_pid() in _KEPT:
            return fn(*args)
    state = _rng_state()
    try:
        return fn(*args)
    finally:
        _set_rng_state(state)


def blocking(fn: Callable, *args: Any) -> Any:
    """Call a SimGrid operation that may switch actors, keeping this actor's random streams
    (after sleeping the actor's deferred op-cost delays)."""
    flush_pending()
    return _switch(fn, *args)


@contextmanager
def _stream_kept() -> Iterator[None]:
    """Around a collective's schedule (:meth:`SimBackend._collective`), which draws no random
    number: the actor's random stream is kept once, here, rather than around each of its
    blocking calls (a 64-node ring all-reduce makes 126 messages a rank and four blocking calls a
    message).  Other actors keep theirs as ever, so none sees a difference."""
    import simgrid

    pid = simgrid.this_actor.get_pid()
    if pid in _KEPT:  # nested: the outer one keeps it
        yield
        return
    state = _rng_state()
    _KEPT.add(pid)
    try:
        yield
    finally:
        _KEPT.discard(pid)
        _set_rng_state(state)


class World:
    """What the ranks of one simulation share: their hosts and actors, the store's
    counters, the receive buffers of the eager mailboxes (``stash``: the collectives'
    messages, the point-to-point "send ready" notifications) and the notifications owed to
    receives from a named source (``owed``)."""

    def __init__(self, hosts: list, allreduce_algorithm: str = "ring", small_bytes: int = 65536):
        self.hosts, self.small_bytes = hosts, small_bytes
        self.actors: dict[int, Any] = {}  # global rank -> its main actor (the mailboxes' receiver)
        self.counters: dict[str, int] = {}
        self.allreduce_algorithm = allreduce_algorithm
        self.allreduce_efficiency = 1.0  # the platform's all-reduce bus efficiency (wire bytes / it)
        self.collective_streams = 1  # collectives a rank runs at once in a group (the platform's)
        self._streams: dict[str, Any] = {}
        self.clocks: dict[int, Any] = {}  # global rank -> its SimClock (per-message overhead), if any
        self._boxes: dict[str, Any] = {}
        self.stash: dict[str, collections.deque] = collections.defaultdict(collections.deque)
        self.owed: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)

    def mailbox(self, name: str, dst_global: int):
        mb = self._boxes.get(name)
        if mb is None:  # first use: create it, eager (the receiver is the destination's main actor)
            import simgrid

            # both may switch actors (SimGrid answers them in its kernel): the stream is kept
            mb = self._boxes[name] = _switch(simgrid.Mailbox.by_name, name)
            _switch(mb.set_receiver, self.actors[dst_global])
        return mb

    def stream(self, key: str):
        """The collective stream of one rank in one group (``key``): a SimGrid semaphore of
        :attr:`collective_streams` slots, which hands them out in the order asked."""
        sem = self._streams.get(key)
        if sem is None:
            import simgrid

            sem = self._streams[key] = simgrid.Semaphore(self.collective_streams)
        return sem

    def rendezvous(self, name: str):
        """A mailbox without a permanent receiver: a transfer starts once both its
        ``put_async`` and a ``get_async`` are posted (SimGrid's default matching)."""
        mb = self._boxes.get(name)
        if mb is None:
            import simgrid

            mb = self._boxes[name] = _switch(simgrid.Mailbox.by_name, name)  # may switch actors
        return mb


class _Sent:
    def __init__(self, comm):
        self._comm = comm

    def wait(self) -> None:
        if self._comm is not None:
            blocking(self._comm.wait)
            self._comm = None

    def is_completed(self) -> bool:
        flush_pending()
        return self._comm is None or bool(self._comm.test())


class _SentRendezvous:
    """A point-to-point ``isend``: its "send ready" notification and its data transfer."""

    def __init__(self, note, data):
        self._comms = [note, data]

    def wait(self) -> None:
        for c in self._comms:
            blocking(c.wait)
        self._comms = []

    def is_completed(self) -> bool:
        flush_pending()
        self._comms = [c for c in self._comms if not c.test()]
        return not self._comms


class _Posted:
    """A point-to-point ``irecv``, posted as gloo posts it (:meth:`SimBackend.irecv`): from a
    named source its data transfer is posted at once; from any source (``src=None``) it takes
    the first sender whose "send ready" notification has arrived, and posts that sender's
    transfer (at once if one has, else when it arrives, the receiver waiting for it)."""

    def __init__(self, backend: "SimBackend", t: torch.Tensor, src: int | None):
        self._b, self._t, self._src, self._done = backend, t, src, False
        self._comm = self._data = None
        if src is not None:
            backend._owe_note(src)
            self._post(src)
        else:
            got = backend._note(block=False)
            if got is not None:
                self._post(got)

    def _post(self, src: int) -> None:
        self._src = src
        self._comm, self._data = blocking(self._b._data_box(src, self._b.rank).get_async)

    def wait(self) -> None:
        if self._done:
            return
        if self._comm is None:  # from any source, none ready when posted: the first to announce itself
            self._post(self._b._note(block=True))
        blocking(self._comm.wait)
        _, payload = self._data.get()
        if payload.numel() != self._t.numel():
            raise RuntimeError(f"simgrid rank {self._b.rank}: received {payload.numel()} elements from "
                               f"{self._src}, expected {self._t.numel()} (mismatched send/recv)")
        self._t.copy_(payload.view_as(self._t))
        self._done = True

    def is_completed(self) -> bool:
        if self._done:
            return True
        if self._comm is None:
            got = self._b._note(block=False)
            if got is None:
                return False
            self._post(got)
        flush_pending()
        return bool(self._comm.test())


class _InActor:
    """An asynchronous collective, running in a helper actor on the rank's host.

    Resources: SimGrid gives every actor a context with its own stack (8 MiB of address
    space, two memory mappings), freed when the last reference to the actor goes.  The
    actor's body must therefore never reference this handle: the handle holds the actor,
    the actor holds its body, and a body that closed over ``self`` would make a cycle
    through C++ that Python's collector cannot see, leaking one stack per collective
    (AR-SGD's overlapped all-reduce: one per bucket and step, until ``vm.max_map_count``
    stops the simulation).  The body writes to a plain dict; the handle lets go of the
    actor (and of the collective's closure, and so its tensors) once it has finished.
    """

    def __init__(self, fn: Callable[[], None], name: str):
        import simgrid

        flush_pending()  # the caller's deferred delays come before what it starts
        box: dict[str, Any] = {}
        self._box = box
        state = _rng_state()

        def body() -> None:  # closes over box and fn only (class docstring)
            _set_rng_state(state)
            try:
                with _stream_kept():  # a collective's schedule: no random draw
                    fn()
                    flush_pending()
            except BaseException as e:  # noqa: BLE001 - re-raised by wait()
                box["error"] = e
            box["done"] = True

        self._actor = simgrid.Actor.create(name, simgrid.this_actor.get_host(), body)

    def wait(self) -> None:
        if not self._box.get("done"):
            blocking(self._actor.join)
        self._actor = None  # finished: its context and stack can go
        if "error" in self._box:
            raise self._box["error"]

    def is_completed(self) -> bool:
        flush_pending()
        if self._box.get("done"):
            self._actor = None
            return True
        return False


_COMBINE = {"sum": lambda a, b: a.add_(b), "max": lambda a, b: a.copy_(torch.maximum(a, b)),
            "min": lambda a, b: a.copy_(torch.minimum(a, b))}


class SimBackend(Backend):
    """One rank's view of a group of simulated ranks (see the module docstring)."""

    name = registered = "simgrid"

    def __init__(self, world: World, me: int, ranks: list[int], gid: str = "w", scale: float = 1.0):
        super().__init__()
        self._w, self._me, self._ranks, self._gid, self._scale = world, me, list(ranks), gid, scale
        self.rank, self.world = self._ranks.index(me), len(self._ranks)
        self._seq = itertools.count()  # collectives of this group, in the order every member calls them
        self._made: collections.Counter = collections.Counter()  # groups created from this one

    # -- groups ------------------------------------------------------------------------
    def scaled(self, factor: float) -> "SimBackend":
        """The same group whose algorithm traffic weighs ``factor`` times its bytes."""
        b = SimBackend(self._w, self._me, self._ranks, self._gid, self._scale * factor)
        b._seq, b._made = self._seq, self._made
        return b

    def subgroup(self, ranks: list[int]) -> Backend:
        key = "s" + ".".join(str(self._ranks[r]) for r in ranks)
        gid = self._child(key)
        if self.rank not in ranks:
            return NotAMember(list(ranks))
        return SimBackend(self._w, self._me, [self._ranks[r] for r in ranks], gid, self._scale)

    def side_group(self, kind: str) -> Backend:
        return SimBackend(self._w, self._me, self._ranks, self._child("side-" + kind), self._scale)

    def _child(self, key: str) -> str:
        self._made[key] += 1
        return f"{self._gid}/{key}#{self._made[key]}"

    # -- messages ----------------------------------------------------------------------
    def _box(self, kind: str, dst: int) -> tuple[str, Any]:
        g = self._ranks[dst]
        name = f"{self._gid}|{kind}|{g}"
        return name, self._w.mailbox(name, g)

    def _put(self, kind: str, dst: int, payload: Any, nbytes: float, scale: float | None = None):
        clock = self._w.clocks.get(self._me)
        if clock is not None:  # the transport's per-message software overhead, on the sender
            clock.charge_message()
        _, mb = self._box(kind, dst)
        size = max(1, int(round(nbytes * (self._scale if scale is None else scale))))
        return blocking(mb.put_async, (self.rank, payload), size)

    def _isend(self, kind: str, dst: int, t: torch.Tensor, wire: float | None = None) -> _Sent:
        """Send a copy of ``t``; ``wire``: its simulated size if not its bytes x scale."""
        if wire is None:
            return _Sent(self._put(kind, dst, t.detach().clone(), t.numel() * t.element_size()))
        return _Sent(self._put(kind, dst, t.detach().clone(), wire, scale=1.0))

    def _recv(self, kind: str, src: int | None) -> Any:
        return self._recv_item(kind, src)[1]

    def _recv_item(self, kind: str, src: int | None) -> tuple[int, Any]:
        """The first message from ``src`` (any source: ``None``), waiting for it if needed."""
        name, mb = self._box(kind, self.rank)
        stash = self._w.stash[name]
        while True:
            for i, item in enumerate(stash):
                if src is None or item[0] == src:
                    del stash[i]
                    return item
            stash.append(blocking(mb.get))

    def isend(self, t, dst: int):
        """gloo's point-to-point send (an unbound buffer over TCP): a "send ready"
        notification (:data:`NOTIFY_BYTES`) leaves at once; the data leaves only once the
        receiver has posted a matching receive (module docstring)."""
        clock = self._w.clocks.get(self._me)
        if clock is not None:  # the transport's per-message software overhead, on the sender
            clock.charge_message()
        _, box = self._box("n", dst)
        note = blocking(box.put_async, self.rank, NOTIFY_BYTES)
        size = max(1, int(round(t.numel() * t.element_size() * self._scale)))
        data = blocking(self._data_box(self.rank, dst).put_async, (self.rank, t.detach().clone()), size)
        return _SentRendezvous(note, data)

    def irecv(self, t, src: int | None):
        return _Posted(self, t, src)

    def _data_box(self, src: int, dst: int):
        return self._w.rendezvous(f"{self._gid}|p|{self._ranks[dst]}<{self._ranks[src]}")

    def _owe_note(self, src: int) -> None:
        """A receive from ``src`` consumes ``src``'s next notification (gloo's "expected send
        notification"): the one already here, else the next to arrive."""
        name, _ = self._box("n", self.rank)
        self._pull_notes(name)
        stash = self._w.stash[name]
        if src in stash:
            stash.remove(src)  # the first from src
        else:
            self._w.owed[name][src] += 1

    def _pull_notes(self, name: str, block: bool = False) -> None:
        _, mb = self._box("n", self.rank)
        stash, owed = self._w.stash[name], self._w.owed[name]
        while mb.ready or (block and not stash):
            src = blocking(mb.get)
            if owed[src]:
                owed[src] -= 1
            else:
                stash.append(src)

    def _note(self, block: bool) -> int | None:
        """The source of the first notification not owed to a named receive (arrival
        order), removed; None if there is none yet and not ``block``."""
        flush_pending()
        name, _ = self._box("n", self.rank)
        self._pull_notes(name, block)
        stash = self._w.stash[name]
        return stash.popleft() if stash else None

    # -- collectives ---------------------------------------------------------------------
    def _collective(self, body: Callable[[str], None], async_op: bool):
        """Run ``body`` (a collective's schedule) on this rank's stream of this group: it starts
        once the collectives issued before it have left a slot (``platform.collective_streams``:
        NCCL's 1, one after another), in this actor (``async_op`` False) or in a helper actor."""
        kind = f"c{next(self._seq) % 4096}"
        stream = self._w.stream(f"{self._gid}@{self._me}")

        def queued() -> None:
            flush_pending()
            _switch(stream.acquire)
            try:
                body(kind)
                flush_pending()
            finally:
                stream.release()

        if not async_op:
            with _stream_kept():  # a collective's schedule: no random draw
                queued()
            return None
        return _InActor(queued, f"{self._gid}:{kind}@{self._me}")

    def _exchange(self, kind: str, dst: int, out: torch.Tensor, src: int, wire: float | None = None) -> torch.Tensor:
        h = self._isend(kind, dst, out, wire)
        data = self._recv(kind, src)
        h.wait()
        return data

    def allreduce_algorithm_for(self, nbytes: int, configured: str) -> str:
        small = nbytes * self._scale < self._w.small_bytes
        return "recursive_doubling" if small else self._w.allreduce_algorithm

    def all_reduce(self, t, op: str = "sum", async_op: bool = False):
        if self.world == 1:
            return _Done() if async_op else None
        algo = self.allreduce_algorithm_for(t.numel() * t.element_size(), self._w.allreduce_algorithm)
        me = self if self._w.allreduce_efficiency == 1.0 else self.scaled(1.0 / self._w.allreduce_efficiency)
        body = {"ring": me._ring_all_reduce, "tree": me._tree_all_reduce,
                "recursive_doubling": me._rd_all_reduce}[algo]
        return self._collective(lambda k: body(k, t, op), async_op)

    def _ring_all_reduce(self, kind: str, t: torch.Tensor, op: str) -> None:
        n, r = self.world, self.rank
        flat = t.view(-1)
        chunks = list(flat.tensor_split(n))
        # every chunk weighs 1/n of the (scaled) tensor, even where a tiny stand-in has
        # fewer elements than ranks: the ring the paper's model would run
        wire = flat.numel() * flat.element_size() * self._scale / n
        right, left = (r + 1) % n, (r - 1) % n
        scatter, gather = ring_steps(n, r)  # impls.comm.allreduce's schedule
        for send, recv in scatter:  # reduce-scatter: rank r ends with chunk r+1 reduced
            data = self._exchange(kind, right, chunks[send], left, wire)
            _COMBINE[op](chunks[recv], data)
        for send, recv in gather:  # all-gather of the reduced chunks
            data = self._exchange(kind, right, chunks[send], left, wire)
            chunks[recv].copy_(data)

    def _tree_all_reduce(self, kind: str, t: torch.Tensor, op: str) -> None:
        self._tree_reduce(kind, t, 0, op)
        self._tree_broadcast(kind, t, 0)

    def _rd_all_reduce(self, kind: str, t: torch.Tensor, op: str) -> None:
        """Recursive doubling; with n not a power of two the extra ranks first hand their
        data to a partner and get the result back at the end."""
        r = self.rank
        p, extra, active = fold(self.world, r)  # impls.comm.allreduce's schedule
        if not active:
            self._isend(kind, extra, t).wait()
            t.copy_(self._recv(kind, extra).view_as(t))
            return
        if extra is not None:
            _COMBINE[op](t, self._recv(kind, extra).view_as(t))
        k = 1
        while k < p:
            partner = r ^ k
            data = self._exchange(kind, partner, t, partner).view_as(t)
            # the same operand order on both sides, so both hold bit-identical sums
            lo, hi = (t.clone(), data) if r < partner else (data, t.clone())
            t.copy_(_COMBINE[op](lo, hi))
            k <<= 1
        if extra is not None:
            self._isend(kind, extra, t).wait()

    def _tree_reduce(self, kind: str, t: torch.Tensor, dst: int, op: str) -> None:
        n = self.world
        for step, v in binomial_reduce_steps(n, (self.rank - dst) % n):  # impls.comm.allreduce's schedule
            if step == "send":
                self._isend(kind, (v + dst) % n, t).wait()
                return
            _COMBINE[op](t, self._recv(kind, (v + dst) % n).view_as(t))

    def _tree_broadcast(self, kind: str, t: torch.Tensor, src: int) -> None:
        n = self.world
        parent, children = binomial_broadcast_steps(n, (self.rank - src) % n)  # impls.comm.allreduce's schedule
        if parent is not None:
            t.copy_(self._recv(kind, (parent + src) % n).view_as(t))
        # posted at once (impls.comm.allreduce.tree sends one after another: the schedule is the same)
        sends = [self._isend(kind, (v + src) % n, t) for v in children]
        for h in sends:
            h.wait()

    def broadcast(self, t, src: int, async_op: bool = False):
        if self.world == 1:
            return _Done() if async_op else None
        return self._collective(lambda k: self._tree_broadcast(k, t, src), async_op)

    def reduce(self, t, dst: int, op: str = "sum", async_op: bool = False):
        if self.world == 1:
            return _Done() if async_op else None
        return self._collective(lambda k: self._tree_reduce(k, t, dst, op), async_op)

    def all_gather(self, outs, t, async_op: bool = False):
        def body(kind: str) -> None:
            n, r = self.world, self.rank
            outs[r].copy_(t)
            for s in range(n - 1):
                data = self._exchange(kind, (r + 1) % n, outs[(r - s) % n], (r - 1) % n)
                outs[(r - s - 1) % n].copy_(data.view_as(outs[0]))
        return self._collective(body, async_op)

    def gather(self, t, outs, dst: int, async_op: bool = False):
        def body(kind: str) -> None:
            if self.rank != dst:
                self._isend(kind, dst, t).wait()
                return
            outs[dst].copy_(t)
            for _ in range(self.world - 1):
                s, data = self._recv_item(kind, None)
                outs[s].copy_(data.view_as(t))
        return self._collective(body, async_op)

    def scatter(self, t, ins, src: int, async_op: bool = False):
        def body(kind: str) -> None:
            if self.rank == src:
                sends = [self._isend(kind, d, ins[d]) for d in range(self.world) if d != src]
                t.copy_(ins[src])
                for h in sends:
                    h.wait()
            else:
                t.copy_(self._recv(kind, src).view_as(t))
        return self._collective(body, async_op)

    def reduce_scatter(self, out, ins, op: str = "sum", async_op: bool = False):
        def body(kind: str) -> None:
            n, r = self.world, self.rank
            parts = [p.detach().clone() for p in ins]
            for s in range(n - 1):  # ring: rank r ends with part r reduced
                data = self._exchange(kind, (r + 1) % n, parts[(r - s - 1) % n], (r - 1) % n)
                _COMBINE[op](parts[(r - s - 2) % n], data.view_as(parts[0]))
            out.copy_(parts[r])
        return self._collective(body, async_op)

    def barrier(self) -> None:
        """Dissemination barrier: log2(n) rounds of 1-byte messages."""
        if self.world == 1:
            return
        kind, n, r, k = f"c{next(self._seq) % 4096}", self.world, self.rank, 1
        while k < n:
            h = _Sent(self._put(kind, (r + k) % n, None, 1, scale=1.0))
            self._recv(kind, (r - k) % n)
            h.wait()
            k <<= 1

    def all_gather_object(self, obj: Any) -> list[Any]:
        n, r = self.world, self.rank
        out: list[Any] = [None] * n
        out[r] = obj
        if n == 1:
            return out
        kind = f"c{next(self._seq) % 4096}"
        for s in range(n - 1):
            item = out[(r - s) % n]
            h = _Sent(self._put(kind, (r + 1) % n, item, len(pickle.dumps(item)), scale=1.0))
            out[(r - s - 1) % n] = self._recv(kind, (r - 1) % n)
            h.wait()
        return out

    # -- shared state, background activities, synchronisation ----------------------------
    def counter_add(self, key: str, n: int = 1) -> int:
        flush_pending()
        c = self._w.counters
        c[key] = c.get(key, 0) + n
        return c[key]

    def start_background(self, fn: Callable[[], None], name: str) -> "_Background":
        return _Background(fn, f"{name}@{self._me}")

    def lock(self) -> "_Lock":
        return _Lock()

    def event(self) -> "_Event":
        return _Event()

    def queue(self) -> "_Queue":
        return _Queue()


class _Done:
    def wait(self) -> None:
        pass

    def is_completed(self) -> bool:
        return True


class _Background:
    """A background activity: an actor on the caller's host (``join``/``is_alive`` as a thread).
    Its body closes over a plain dict, never over this handle (see :class:`_InActor`)."""

    def __init__(self, fn: Callable[[], None], name: str):
        import simgrid

        flush_pending()
        box = {"alive": True}
        self._box = box
        state = _rng_state()

        def body() -> None:
            _set_rng_state(state)
            try:
                fn()  # the activity records its own errors (as a thread's target does)
                flush_pending()
            finally:
                box["alive"] = False

        self._actor = simgrid.Actor.create(name, simgrid.this_actor.get_host(), body)

    def join(self, timeout: float | None = None) -> None:
        if self._box["alive"]:
            blocking(self._actor.join, -1.0 if timeout is None else float(timeout))
        if not self._box["alive"]:
            self._actor = None

    def is_alive(self) -> bool:
        return self._box["alive"]


class _Lock:
    def __init__(self):
        import simgrid

        self._m = simgrid.Mutex()

    def acquire(self) -> bool:
        blocking(self._m.lock)
        return True

    def release(self) -> None:
        flush_pending()
        self._m.unlock()

    def __enter__(self) -> "_Lock":
        return self.acquire() and self

    def __exit__(self, *exc: Any) -> None:
        self.release()


class _Event:
    """``threading.Event`` on simulated time."""

    def __init__(self):
        import simgrid

        self._flag, self._waiting, self._sem = False, 0, simgrid.Semaphore(0)

    def is_set(self) -> bool:
        return self._flag

    def set(self) -> None:
        flush_pending()
        self._flag = True
        while self._waiting:
            self._waiting -= 1
            self._sem.release()

    def clear(self) -> None:
        self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        if self._flag:
            return True
        self._waiting += 1
        timed_out = blocking(self._sem.acquire_timeout, -1.0 if timeout is None else float(timeout))
        if timed_out:
            self._waiting -= 1
        return self._flag


class _Queue:
    """``queue.Queue`` (``put``/``get``) on simulated time."""

    def __init__(self):
        import simgrid

        self._items: collections.deque = collections.deque()
        self._sem = simgrid.Semaphore(0)

    def put(self, item: Any) -> None:
        flush_pending()
        self._items.append(item)
        self._sem.release()

    def get(self) -> Any:
        blocking(self._sem.acquire)
        return self._items.popleft()


class SimClock(Clock):
    """Simulated time: ``now`` is SimGrid's clock, ``sleep`` an actor sleep, and
    ``compute(model, batch)`` charges the host ``step_s(batch)`` seconds of work after
    the real forward/backward has run (in zero simulated time).

    ``opcost`` (:class:`impls.sim.opcost.OpCost`): what ``charge_op(kind, nbytes)``
    charges (``nbytes`` x the wire scale / the kind's bandwidth, a delay of the calling
    actor: a copy engine or another stream, not shared host speed), and the
    per-message overhead the backend charges the sender of every wire message
    (:meth:`charge_message`, a sleep: the transport's CPU thread, not the device's
    compute).  The seconds are summed per kind for the step's ``time/<kind>_s``.

    Overlap with backward: the step's compute is its forward pass, ``1 - backward_fraction``
    of it, then its backward pass (:mod:`impls.sim.profiles`).  ``backward_point(f)``, called
    inside ``compute`` where the real backward pass has produced the fraction ``f`` of the
    gradient (a bucket complete, counted in parameters), charges the host up to
    ``step_s x ((1 - backward_fraction) + backward_fraction x f)`` first, so whatever the
    caller starts then (a bucket's all-reduce) starts at that simulated time, while the rest
    of the step is charged when ``compute`` ends.  Without such calls the step is one charge,
    as before.

    A straggler (``compute(..., slowdown=)``, :mod:`impls.runtime.straggler`): the step is
    charged ``factor x step + extra_s`` with the same split, so its forward pass, and each
    bucket's point in its backward pass, come ``factor`` times later (``slowed_s``: the
    seconds added)."""

    def __init__(self, step_s: Callable[[Any], float], wire_scale: Callable[[int], float] = lambda b: 1.0,
                 description: dict[str, Any] | None = None, opcost: Any = None,
                 backward_fraction: float = 2 / 3, gradient_layout: tuple[int, ...] | None = None):
        from ..sim.opcost import FREE, KINDS

        self._step_s, self._wire_scale = step_s, wire_scale
        self._description = description or {"kind": "simulated (SimGrid)"}
        self.opcost = opcost if opcost is not None else FREE
        self._op_scale = 1.0  # the run's wire scale (set when the runtime asks for it)
        self._costs = dict.fromkeys(KINDS, 0.0)
        self._backward_fraction = backward_fraction
        self._layout = gradient_layout  # the paper model's parameter bytes in backward order (profile)
        self._open: list[float] | None = None  # [step seconds, seconds charged] while compute() runs

    def charge_op(self, kind: str, nbytes: float) -> None:
        s = self.opcost.seconds(kind, nbytes * self._op_scale)
        if s > 0:  # a delay of the calling actor, not host work: a background activity's ops
            self._costs[kind] += s  # (AD-PSGD's gossip) must not slow the compute down by sharing the host
            _defer(s)  # slept at the actor's next interaction with the simulation

    def charge_message(self) -> None:
        s = self.opcost.msg_us * 1e-6
        if s > 0:
            self._costs["msg"] += s
            self.sleep(s)

    def pop_costs(self) -> dict[str, float]:
        from ..sim.opcost import METRICS

        out = {METRICS[k]: v for k, v in self._costs.items()}
        self._costs = dict.fromkeys(self._costs, 0.0)
        return out

    def describe(self) -> dict[str, Any]:
        return dict(self._description)

    def now(self) -> float:
        import simgrid

        flush_pending()
        return simgrid.Engine.clock

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            import simgrid

            blocking(simgrid.this_actor.sleep_for, float(seconds))

    def sleep_until(self, t: float) -> None:
        """Sleep until simulated time ``t`` exactly (bit for bit), if it is still ahead.

        ``sleep_for(t - now)`` ends at ``now + (t - now)``, which rounds to a neighbour of
        ``t`` when ``now`` is far below it; from ``now >= t / 2`` the difference ``t - now``
        is exact (Sterbenz's lemma), and so is the sum: the first sleep gets there."""
        import simgrid

        now = simgrid.Engine.clock
        if now < t / 2:
            blocking(simgrid.this_actor.sleep_for, 0.75 * t - now)
            now = simgrid.Engine.clock
        if now < t:
            blocking(simgrid.this_actor.sleep_for, t - now)

    def resume(self, elapsed_s: float, saved: dict[str, float] | None) -> float:
        """A resumed simulation continues at the simulated time its checkpoint was written
        (``saved["now"]``, reached by sleeping once the ranks have agreed to resume) with the
        uninterrupted run's start time, so every later time is computed from the same
        clock values and equals the uninterrupted run's exactly.  (On a platform with
        background traffic the network's load at that time is not restored: there the
        resumed times are close, not equal.)"""
        import simgrid

        if not saved or simgrid.Engine.clock > saved["now"]:  # an older checkpoint: go on from now
            return super().resume(elapsed_s, saved)
        self.sleep_until(saved["now"])
        return saved["t_start"]

    def charge(self, seconds: float) -> None:
        if seconds > 0:
            import simgrid

            blocking(simgrid.this_actor.execute, float(seconds) * SPEED)

    @contextmanager
    def compute(self, *what: Any, slowdown: Any = None, since: float | None = None) -> Iterator[None]:
        batch = what[1] if len(what) > 1 else None
        healthy = self._step_s(batch)  # one draw per step, as before (jitter)
        step = healthy if slowdown is None else healthy * slowdown.factor + slowdown.extra_s
        self.slowed_s = step - healthy
        self._open = [step, 0.0]
        try:
            yield
        finally:
            step, charged = self._open
            self._open = None
        self.charge(step - charged)

    def forward_done(self) -> None:
        """The profile's split says when forward ends: nothing to mark."""

    def settle(self) -> None:
        """The slowdown was charged with the step: nothing owed."""

    def healthy_compute_s(self, elapsed_s: float, slowdown: Any) -> float:
        return elapsed_s - self.slowed_s  # charged, not slept: exact

    def straggler_delay(self, slowdown: Any, compute_s: float) -> float:
        return self.slowed_s  # exactly what was charged

    def backward_point(self, fraction: float) -> None:
        if self._open is None:
            return
        step, charged = self._open
        at = step * ((1.0 - self._backward_fraction) + self._backward_fraction * min(max(fraction, 0.0), 1.0))
        if at > charged:
            self.charge(at - charged)
            self._open[1] = at

    def gradient_layout(self) -> tuple[int, ...] | None:
        return self._layout

    def wire_scale(self, model_bytes: int) -> float:
        self._op_scale = self._wire_scale(model_bytes)  # ops on the model's vectors weigh as its messages do
        return self._op_scale
