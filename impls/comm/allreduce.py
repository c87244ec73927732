"""All-reduce (sum) built from point-to-point messages: the algorithms of the survey's
all-reduce section (Chahal, Grover & Dey, "A Hitchhiker's Guide On Distributed Training of
Deep Neural Networks", arXiv:1810.11787), one code for real ranks and simulated ones.

Every function here takes a tensor and a *peer* object with ``rank``, ``world``,
``isend(t, dst)`` and ``irecv(t, src)`` (each returning a handle with ``wait()``): a
:class:`~impls.backends.Backend` (``torch.distributed`` gloo on real ranks, a SimGrid actor's
:class:`~impls.backends.sim.SimBackend`) or the instrumented :class:`~impls.comm.communicator.Communicator`,
which counts the bytes.  Nothing else is used, so the same lines run as processes under
torchrun and as actors of a simulation, where their time is the platform's flow model.

Cost of an all-reduce of ``S`` bytes per rank on ``n`` ranks in the alpha-beta model (a
message of ``m`` bytes costs ``alpha + m / beta``; ``k = log2 n`` for a power of two), the
formulas of :func:`impls.comm.costmodel.collective_cost`:

===================  ==============================  ====================  ====================
algorithm            time                            bytes sent per rank   wins
===================  ==============================  ====================  ====================
ring                 2(n-1) alpha + 2(n-1)/n S/beta  2(n-1)/n S            large S (bandwidth)
tree (binomial)      2k (alpha + S/beta)             <= 2 S (root: kS)     never on a star (*)
recursive_doubling   k (alpha + S/beta)              k S                   small S (latency)
rabenseifner         2k alpha + 2(n-1)/n S/beta      2(n-1)/n S            small to large S
ps (reduce + bcast)  2 alpha + 2(n-1) S/beta (root)  S (root: (n-1) S)     n = 2 only
===================  ==============================  ====================  ====================

(*) the binomial tree moves the whole vector in every round: it pays the latency of
recursive doubling twice and more bandwidth than the ring; it is the classic reduce +
broadcast, and a tree's depth wins over the ring's 2(n-1) hops only with small messages.
The ring's bandwidth term ``2(n-1)/n S`` is the lower bound for all-reduce (every byte must
leave and reach every rank once: "bandwidth-optimal"), independent of n; its latency term
grows linearly with n.  Recursive doubling has the fewest rounds (log2 n) but sends the whole
vector in each.  Rabenseifner (recursive halving reduce-scatter + recursive doubling
all-gather) has both the log2 n latency and the ring's bytes: it is what MPI libraries pick
for medium and large messages on power-of-two worlds.  The parameter-server pattern funnels
every vector through one rank: its link carries ``2 (n - 1) S``, a bottleneck growing with n.

Non-power-of-two worlds (``n = p + e``, ``p`` the largest power of two below ``n``):
recursive doubling and Rabenseifner first fold the ``e`` extra ranks in (rank ``p + i`` sends
its whole vector to rank ``i``, which adds it), run on the ``p`` ranks, then send the result
back: two more messages of ``S`` on the critical path, ``+2 (alpha + S / beta)``.  The ring
and the trees need no power of two.  Sizes not divisible by ``n`` (or by the halvings):
chunks are ``tensor_split``'s, differing by at most one element; both ends of a message
compute the same chunk, so an empty chunk (fewer elements than ranks) is simply not sent.

Schedules: who sends what to whom in each algorithm is defined once, here
(:func:`ring_steps`, :func:`fold`, :func:`binomial_reduce_steps`, :func:`binomial_broadcast_steps`),
and run by two executors: the functions below (over any peer object, sums) and the simulated
backend's built-in collectives (:class:`impls.backends.sim.SimBackend`: messages that carry
their payload and weigh a paper model's bytes, ``sum``/``max``/``min``, any root).  Where the
two differ is the execution, not the schedule: the simulator's ring weighs every chunk
``S / n`` even when a tiny stand-in has fewer elements than ranks (here an empty chunk is not
sent), and its tree broadcast posts a rank's sends to its children at once (here one after
another, so the child on the critical path gets the full link).

Exactness: every element of the result is summed at exactly one rank and copied to the
others (recursive doubling: both partners add the same two operands, and IEEE addition is
commutative), so all ranks hold bit-identical sums; integer-valued floats are exact.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

ALGORITHMS = ("ring", "tree", "recursive_doubling", "rabenseifner", "ps")
#: whether every step sends and receives at once (a full-duplex exchange); the one-way
#: patterns (a tree's rounds, the server's phases) leave each link's other direction free,
#: which a TCP-like network model gives them as a little more bandwidth
#: (:func:`impls.sim.platforms.alpha_beta`)
DUPLEX = {"ring": True, "tree": False, "recursive_doubling": True, "rabenseifner": True, "ps": False}


def all_reduce(t: torch.Tensor, peers: Any, algorithm: str = "ring") -> torch.Tensor:
    """Sum ``t`` over all ranks of ``peers`` in place with ``algorithm``; returns ``t``."""
    if algorithm not in IMPLS:
        raise ValueError(f"algorithm: unknown all-reduce algorithm {algorithm!r}; allowed: {', '.join(ALGORITHMS)}")
    if not t.is_contiguous():
        raise ValueError("t: all_reduce needs a contiguous tensor (its chunks are sent as views)")
    if peers.world > 1 and t.numel() > 0:
        IMPLS[algorithm](t.view(-1), peers)
    return t


def ring_steps(n: int, r: int) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The ring's schedule for rank ``r`` of ``n``: its reduce-scatter steps, then its
    all-gather steps, each ``(chunk sent to r + 1, chunk received from r - 1)`` (:func:`ring`).
    The received chunk is added to ours in the first phase, copied into place in the second."""
    return ([((r - s) % n, (r - s - 1) % n) for s in range(n - 1)],
            [((r + 1 - s) % n, (r - s) % n) for s in range(n - 1)])


def fold(n: int, r: int) -> tuple[int, int | None, bool]:
    """How recursive doubling and Rabenseifner fold a non-power-of-two world: ``(p, partner,
    active)``, ``p`` the largest power of two <= ``n``; an extra rank (``r >= p``, inactive)
    hands its vector to ``partner = r - p`` and gets the result back; an active rank with an
    extra one (``partner = r + p``) adds its vector first and sends it the result last."""
    p = 1 << (n.bit_length() - 1)
    if r >= p:
        return p, r - p, False
    return p, (r + p if r + p < n else None), True


def binomial_reduce_steps(n: int, vr: int) -> list[tuple[str, int]]:
    """A binomial-tree reduce to virtual rank 0 (``vr``: the rank counted from the root):
    ``("recv", v)``: add ``v``'s partial sum; ``("send", v)``: send ours to ``v``, and done.
    In round ``j`` a rank whose bit ``j`` is set sends to ``vr - 2^j``; the others receive
    from ``vr + 2^j`` if it exists."""
    steps, mask = [], 1
    while mask < n:
        if vr & mask:
            steps.append(("send", vr - mask))
            return steps
        if vr + mask < n:
            steps.append(("recv", vr + mask))
        mask <<= 1
    return steps


def binomial_broadcast_steps(n: int, vr: int) -> tuple[int | None, list[int]]:
    """A binomial-tree broadcast from virtual rank 0: ``(parent, children)``; a rank receives
    from ``vr - 2^j`` (``2^j`` its lowest set bit; the root has no parent), then sends to
    ``vr + 2^i`` for ``i < j``, the farthest first."""
    parent, mask = None, 1
    while mask < n:
        if vr & mask:
            parent = vr - mask
            break
        mask <<= 1
    children = []
    mask >>= 1
    while mask > 0:
        if vr + mask < n:
            children.append(vr + mask)
        mask >>= 1
    return parent, children


def _exchange(peers: Any, send: torch.Tensor, dst: int, recv: torch.Tensor, src: int) -> None:
    """Send ``send`` to ``dst`` while receiving ``recv`` from ``src`` (empty parts: no message)."""
    hs = peers.isend(send, dst) if send.numel() else None
    hr = peers.irecv(recv, src) if recv.numel() else None
    if hr is not None:
        hr.wait()
    if hs is not None:
        hs.wait()


def ring(flat: torch.Tensor, peers: Any) -> None:
    """Ring: reduce-scatter then all-gather, each ``n - 1`` steps around ``r -> r + 1``.

    1. Split the vector into ``n`` chunks.  Step ``s`` (0..n-2): send chunk ``r - s`` to the
       right, receive chunk ``r - s - 1`` from the left and add it to ours.  Rank ``r`` then
       holds chunk ``r + 1`` summed over all ranks.
    2. Step ``s``: send chunk ``r + 1 - s`` (complete) right, receive chunk ``r - s`` from the
       left into place.  Every step every rank sends and receives ``S / n`` bytes at once."""
    n, r = peers.world, peers.rank
    chunks = list(flat.tensor_split(n))
    right, left = (r + 1) % n, (r - 1) % n
    scatter, gather = ring_steps(n, r)
    for send, recv in scatter:
        mine = chunks[recv]
        buf = torch.empty_like(mine)
        _exchange(peers, chunks[send], right, buf, left)
        mine.add_(buf)
    for send, recv in gather:
        _exchange(peers, chunks[send], right, chunks[recv], left)


def _fold_in(flat: torch.Tensor, peers: Any) -> tuple[int, bool]:
    """Non-power-of-two worlds: rank ``p + i`` hands its vector to rank ``i``.  Returns
    ``(p, active)``; an inactive (extra) rank has received the result when the call returns."""
    p, partner, active = fold(peers.world, peers.rank)
    if not active:
        peers.isend(flat, partner).wait()
        peers.irecv(flat, partner).wait()  # the result, sent by _fold_out
        return p, False
    if partner is not None:
        buf = torch.empty_like(flat)
        peers.irecv(buf, partner).wait()
        flat.add_(buf)
    return p, True


def _fold_out(flat: torch.Tensor, peers: Any, p: int) -> None:
    partner = fold(peers.world, peers.rank)[1]
    if partner is not None:
        peers.isend(flat, partner).wait()


def recursive_doubling(flat: torch.Tensor, peers: Any) -> None:
    """Recursive doubling ("butterfly"): in round ``j`` (0..k-1) rank ``r`` swaps its whole
    partial sum with rank ``r xor 2^j`` and adds; after ``k = log2 p`` rounds every rank has
    the total.  Extra ranks of a non-power-of-two world are folded in (module docstring)."""
    p, active = _fold_in(flat, peers)
    if not active:
        return
    buf = torch.empty_like(flat)
    k = 1
    while k < p:
        partner = peers.rank ^ k
        _exchange(peers, flat, partner, buf, partner)
        flat.add_(buf)  # a + b == b + a exactly: both partners hold the same bits
        k <<= 1
    _fold_out(flat, peers, p)


def rabenseifner(flat: torch.Tensor, peers: Any) -> None:
    """Rabenseifner: reduce-scatter by recursive halving, then all-gather by recursive doubling.

    1. Rounds at distance ``d = p/2, p/4, ..., 1``: partners ``r`` and ``r xor d`` split their
       current range in two halves; each sends the half the other keeps and adds the half it
       receives.  The range halves every round: ``S/2 + S/4 + ... = (p-1)/p S`` bytes sent.
    2. The same rounds in reverse: each sends its completed range and receives the partner's,
       so the ranges double back to the whole vector.
    Extra ranks of a non-power-of-two world are folded in (module docstring)."""
    p, active = _fold_in(flat, peers)
    if not active:
        return
    r, lo, hi = peers.rank, 0, flat.numel()
    rounds = []
    d = p >> 1
    while d >= 1:
        mid = (lo + hi) // 2
        keep, give = ((mid, hi), (lo, mid)) if r & d else ((lo, mid), (mid, hi))
        mine = flat[keep[0]:keep[1]]
        buf = torch.empty_like(mine)
        _exchange(peers, flat[give[0]:give[1]], r ^ d, buf, r ^ d)
        mine.add_(buf)
        rounds.append((keep, give, r ^ d))
        lo, hi = keep
        d >>= 1
    for keep, give, partner in reversed(rounds):
        _exchange(peers, flat[keep[0]:keep[1]], partner, flat[give[0]:give[1]], partner)
    _fold_out(flat, peers, p)


def _binomial_reduce(flat: torch.Tensor, peers: Any) -> None:
    """To rank 0: in round ``j`` a rank whose bit ``j`` is set sends its partial sum to
    ``r - 2^j`` and is done; the others receive from ``r + 2^j`` (if it exists) and add."""
    buf = None
    for kind, v in binomial_reduce_steps(peers.world, peers.rank):
        if kind == "send":
            peers.isend(flat, v).wait()
            return
        buf = torch.empty_like(flat) if buf is None else buf
        peers.irecv(buf, v).wait()
        flat.add_(buf)


def _binomial_broadcast(flat: torch.Tensor, peers: Any) -> None:
    """From rank 0: a rank receives from ``r - 2^j`` (``2^j`` its lowest set bit), then sends to
    ``r + 2^i`` for ``i < j``, the farthest first, one after another (each send completes
    before the next starts, so the child on the critical path gets the full link)."""
    parent, children = binomial_broadcast_steps(peers.world, peers.rank)
    if parent is not None:
        peers.irecv(flat, parent).wait()
    for child in children:
        peers.isend(flat, child).wait()


def tree(flat: torch.Tensor, peers: Any) -> None:
    """Binomial tree: reduce to rank 0 in ``ceil(log2 n)`` rounds, then broadcast back in as
    many.  Every message is the whole vector; the rounds of a power-of-two world never
    share a link (on a star), a non-power-of-two world's early senders may."""
    _binomial_reduce(flat, peers)
    _binomial_broadcast(flat, peers)


def ps(flat: torch.Tensor, peers: Any) -> None:
    """Parameter-server style: every rank sends its vector to rank 0 (the "server"; here one
    of the n ranks, as a worker co-located with its server), which adds them in rank order
    and sends the sum back to each.  The ``n - 1`` messages of each phase are posted at once:
    their latencies overlap, their bytes queue on rank 0's link (``2 (n - 1) S`` in all)."""
    n, r = peers.world, peers.rank
    if r != 0:
        peers.isend(flat, 0).wait()
        peers.irecv(flat, 0).wait()
        return
    bufs = [torch.empty_like(flat) for _ in range(n - 1)]
    handles = [peers.irecv(b, src) for src, b in enumerate(bufs, start=1)]
    for h, b in zip(handles, bufs):
        h.wait()
        flat.add_(b)
    for h in [peers.isend(flat, dst) for dst in range(1, n)]:
        h.wait()


IMPLS: dict[str, Callable[[torch.Tensor, Any], None]] = {
    "ring": ring, "tree": tree, "recursive_doubling": recursive_doubling, "rabenseifner": rabenseifner, "ps": ps}
