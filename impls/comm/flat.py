"""Flat views of a model's tensors, shared by every method that moves them as one vector.

* :func:`flat_params`, :func:`write_params`, :func:`flat_grads`: the parameters (or
  gradients) as one contiguous vector, in ``model.parameters()`` order (one copy, charged to
  ``clock`` when the caller passes the run's: op kind ``copy``), and back (no copy: the
  parameters become views of the vector).
* :class:`GradientBuckets`: gradients that live in flat buckets of about ``bucket_mb``
  megabytes (reverse parameter order, as DDP builds them), each ``p.grad`` a view into
  its bucket, so backward writes straight into the buffer a collective sends (DDP's
  ``gradient_as_bucket_view``): no packing or unpacking copies.
* :class:`BackwardOverlap`: per-parameter gradient hooks that move each gradient into its
  bucket and start a bucket's collective as soon as the backward pass has completed it.
* :class:`BufferVector`: the state buffers packed into one byte vector and back, so one
  collective moves them all whatever their dtypes.
* :func:`state_buffers`: the buffers that are model state (what a method synchronises,
  e.g. BatchNorm statistics), without the derived constant tables a module registers as
  non-persistent buffers (fairseq's sinusoidal positions: as large as the tiny
  Transformer's parameters, identical on every rank, never worth a message).
"""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from .stepcost import ddp_buckets


def _copied(clock, vec: torch.Tensor) -> None:
    if clock is not None:  # one copy of the vector's bytes (op-cost model, impls.sim.opcost)
        clock.charge_op("copy", vec.numel() * vec.element_size())


@torch.no_grad()
def flat_params(model: nn.Module, clock=None) -> torch.Tensor:
    """The parameters as one new vector (one copy; ``clock``: the run's clock, charged a ``copy``)."""
    vec = torch.nn.utils.parameters_to_vector(model.parameters())  # a new tensor: cat copies
    _copied(clock, vec)
    return vec


@torch.no_grad()
def write_params(model: nn.Module, vec: torch.Tensor) -> None:
    """``vec`` into the parameters: no copy, nothing to charge (each parameter's data becomes a
    view of ``vec``, ``torch.nn.utils.vector_to_parameters``; later in-place updates of the
    parameters write into ``vec``)."""
    torch.nn.utils.vector_to_parameters(vec, model.parameters())


def state_buffers(model: nn.Module) -> list[torch.Tensor]:
    """``model.buffers()`` that are in ``model.state_dict()`` (persistent buffers), in order.

    A non-persistent buffer (``register_buffer(..., persistent=False)``) is derived from the
    module's configuration and recomputed on every rank (a cache, a constant table); torch
    leaves it out of checkpoints for that reason, and a method need not send it either."""
    ids = {id(v) for v in model.state_dict(keep_vars=True).values()}
    return [b for b in model.buffers() if id(b) in ids]


class BufferVector:
    """``bufs`` (a model's state buffers) as one ``uint8`` vector, for one collective whatever
    their dtypes: :meth:`pack` copies them in (one ``cat``), :meth:`unpack` copies them back
    (one ``_foreach_copy_``), through byte views of each buffer made once.  (The buffers keep
    their own storage: views of one shared vector would share autograd's version counter,
    and BatchNorm's in-place update of one layer's statistics would then invalidate the
    statistics another layer saved for its backward pass.)"""

    def __init__(self, bufs: list[torch.Tensor]):
        self.bufs = list(bufs)
        self.views = [b.view(-1).view(torch.uint8) if b.is_contiguous() else None for b in self.bufs]
        self.sizes = [b.numel() * b.element_size() for b in self.bufs]
        device = self.bufs[0].device if self.bufs else "cpu"
        self.flat = torch.empty(sum(self.sizes), dtype=torch.uint8, device=device)

    @torch.no_grad()
    def pack(self) -> torch.Tensor:
        torch.cat([v if v is not None else b.reshape(-1).view(torch.uint8) for b, v in zip(self.bufs, self.views)],
                  out=self.flat)
        return self.flat

    @torch.no_grad()
    def unpack(self) -> None:
        parts = list(self.flat.split(self.sizes))
        if all(v is not None for v in self.views):
            torch._foreach_copy_(self.views, parts)
            return
        for b, v, part in zip(self.bufs, self.views, parts):
            if v is not None:
                v.copy_(part)
            else:
                b.copy_(part.clone().view(b.dtype).view_as(b))  # clone: storage aligned for the dtype


def flat_grads(model: nn.Module, clock=None) -> torch.Tensor:
    """The gradients as one new vector, zeros for a parameter without one (one copy; ``clock``:
    charged a ``copy``)."""
    vec = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                     for p in model.parameters()])
    _copied(clock, vec)
    return vec


class GradientBuckets:
    """``flats``: the bucket buffers; :meth:`zero_and_bind` (re)points every ``p.grad`` at its
    view.  ``members[i]``: bucket ``i``'s parameters; ``ready_at[i]``: the fraction of all
    parameters in buckets ``0..i`` (the point of the backward pass, counted in parameters, at
    which bucket ``i`` is complete: a simulated clock's bucket-ready time)."""

    def __init__(self, params: list[nn.Parameter], bucket_mb: float, first_bucket_mb: float | None = None):
        limit = bucket_mb * 2**20
        first = limit if first_bucket_mb is None else first_bucket_mb * 2**20  # DDP: a small first bucket
        buckets: list[list[nn.Parameter]] = [[]]
        size = 0
        for p in reversed([p for p in params if p.requires_grad]):
            if buckets[-1] and size + p.numel() * p.element_size() > (first if len(buckets) == 1 else limit):
                buckets.append([])
                size = 0
            buckets[-1].append(p)
            size += p.numel() * p.element_size()
        self.flats: list[torch.Tensor] = []
        self.views: list[tuple[nn.Parameter, torch.Tensor]] = []
        self.members: list[list[nn.Parameter]] = buckets  # each bucket's parameters, in backward order
        total = sum(p.numel() for b in buckets for p in b)
        done, self.ready_at = 0, []  # the share of the gradient computed once bucket i is complete
        for b in buckets:
            done += sum(p.numel() for p in b)
            self.ready_at.append(done / total if total else 1.0)
        for bucket in buckets:
            flat = torch.zeros(sum(p.numel() for p in bucket), dtype=bucket[0].dtype, device=bucket[0].device)
            offset = 0
            for p in bucket:
                self.views.append((p, flat[offset: offset + p.numel()].view_as(p)))
                offset += p.numel()
            self.flats.append(flat)

    def unbind(self) -> None:
        """``p.grad = None`` for every bucketed parameter: backward then hands each gradient over
        as a fresh tensor (no zeroing of the buckets, no accumulation pass), and whoever fills
        the buckets copies it in (:meth:`fill`)."""
        for p, _ in self.views:
            p.grad = None

    def fill(self, p: nn.Parameter, view: torch.Tensor, divisor: float = 1.0) -> None:
        """Put ``p``'s gradient (divided by ``divisor``; zeros if it has none) into its bucket
        view, one pass, and make the view its ``.grad``.  (No ``torch.no_grad()``: the buckets
        and gradients do not require grad, and a gradient hook runs once per parameter and
        step, where the decorator's own cost is not negligible.)"""
        if p.grad is view:
            if divisor != 1.0:
                view.div_(divisor)
        elif p.grad is None:
            view.zero_()
        elif divisor != 1.0:
            torch.div(p.grad, divisor, out=view)
        else:
            view.copy_(p.grad)
        p.grad = view

    def gather(self) -> None:
        """Every gradient that is not in its bucket yet (after :meth:`unbind`) copied in."""
        for p, view in self.views:
            if p.grad is not view:
                self.fill(p, view)

    def zero_and_bind(self) -> None:
        """Zero the buckets and make each ``p.grad`` its view again (a calibration pass or
        ``p.grad = None`` elsewhere may have detached it); backward then accumulates there."""
        for flat in self.flats:
            flat.zero_()
        for p, view in self.views:
            if p.grad is not view:
                p.grad = view


class WireLayout:
    """Another model's buckets, carried by this model's one flat gradient: where a simulated
    paper profile times the stand-in's all-reduce as the paper model's
    (:meth:`impls.backends.Clock.gradient_layout`, :mod:`impls.sim.profiles` ``model_layout``).

    ``layout``: the paper model's parameter sizes (bytes) in backward order, cut into buckets by
    DDP's rule as :class:`GradientBuckets` cuts parameters (``first_bytes`` for the first bucket,
    then ``bucket_bytes``: a bucket closes before a parameter that would overflow it).
    ``ready_at[k]``: the share of the paper model's parameters in buckets ``0..k`` (where in the
    backward pass bucket ``k`` is complete); ``slices[k]``: bucket ``k``'s ``(start, end)`` in the
    stand-in's flat gradient of ``numel`` elements, in the same proportions of bytes (rounded to
    whole elements: a slice's wire bytes are its elements x the wire scale, within one element of
    the paper bucket's; a bucket that rounds to no element is merged into the next)."""

    def __init__(self, layout: tuple[int, ...], numel: int, bucket_bytes: float, first_bytes: float):
        sizes = ddp_buckets(layout, bucket_bytes, first_bytes)
        total, done, start = sum(sizes), 0, 0
        self.slices: list[tuple[int, int]] = []
        self.ready_at: list[float] = []
        self.paper_bytes: list[int] = []
        pending = 0
        for b in sizes:
            done += b
            pending += b
            end = round(numel * done / total)
            if end > start:
                self.slices.append((start, end))
                self.ready_at.append(done / total)
                self.paper_bytes.append(pending)
                start, pending = end, 0

    def launch(self, flat: torch.Tensor, launch_slice, clock) -> "AllOf":
        """Each bucket's collective (``launch_slice(view)``), at its point of the backward pass
        (``clock.backward_point``: a simulated clock charges the compute up to it first)."""
        handles = []
        for (a, b), at in zip(self.slices, self.ready_at):
            clock.backward_point(at)
            handles.append(launch_slice(flat[a:b]))
        return AllOf(handles)


class AllOf:
    """Several handles as one: ``wait`` waits for every one."""

    def __init__(self, handles: list):
        self.handles = handles

    def wait(self) -> None:
        for h in self.handles:
            h.wait()

    def is_completed(self) -> bool:
        return all(h.is_completed() for h in self.handles)


@torch.no_grad()
def nonfinite_grad(named: list[tuple[str, torch.Tensor]]) -> str | None:
    """The first ``(name, gradient)`` pair holding a NaN or an infinity, as ``"name (nan)"``;
    None when every gradient is finite.

    One pass over the gradients and one host sync: a NaN or an infinity makes a sum
    non-finite, so finite sums prove every entry finite (a sum can also overflow, rarely:
    then the entries themselves are checked)."""
    named = [(n, g) for n, g in named if g is not None]
    if not named or bool(torch.stack([g.sum().float() for _, g in named]).isfinite().all()):
        return None
    for n, g in named:
        if not bool(g.isfinite().all()):
            return f"{n} ({'nan' if bool(g.isnan().any()) else 'inf'})"
    return None


class BackwardOverlap:
    """Start each bucket's collective from
    the backward pass, as soon as the bucket is complete, buckets in order (step 2 of
    :mod:`impls.algorithms.allreduce_sgd`, as DDP's reducer).

    Each parameter's hook moves its fresh gradient into its bucket view, divided by
    ``divisor`` in the same pass (:meth:`impls.comm.flat.GradientBuckets.fill`), and makes the view
    its ``.grad``; ``launch(i)`` starts bucket ``i``'s communication and returns its handle.
    Armed by :meth:`armed` (around the forward/backward pass of a step); a backward pass
    outside it (a calibration pass, a closure) leaves every hook idle."""

    def __init__(self, buckets: GradientBuckets, launch, clock, divisor: float = 1.0,
                 names: dict[int, str] | None = None):
        self.buckets, self.launch, self.clock, self.divisor = buckets, launch, clock, divisor
        self.names = names or {}  # id(parameter) -> its name, for :attr:`nonfinite`
        self.nonfinite: str | None = None  # this step's first bucket sent with a NaN/inf ("name (nan)")
        self.handles: list = []
        self.in_backward = 0  # buckets of the last step launched from the backward pass
        self._armed = False
        self._pending: list[int] = []
        views = iter(buckets.views)
        self._views: list[list[tuple]] = [[next(views) for _ in members] for members in buckets.members]
        for i, pairs in enumerate(self._views):
            for p, view in pairs:
                p.register_post_accumulate_grad_hook(lambda p, i=i, view=view: self._ready(i, p, view))

    @contextlib.contextmanager
    def armed(self):
        self.handles, self.in_backward, self.nonfinite = [], 0, None
        self._pending = [len(m) for m in self.buckets.members]
        self._armed = True
        try:
            yield
        finally:
            self._armed = False
        self.launch_rest()  # buckets with unused parameters (no hook fired): now that backward ended

    def _ready(self, i: int, p, view) -> None:
        if not self._armed:
            return
        if self._pending[i] <= 0:
            raise RuntimeError("allreduce_sgd (overlap_backward): a second backward pass in one step; its "
                               "bucket's all-reduce has already left (gradient accumulation needs "
                               "overlap_backward: false)")
        self.buckets.fill(p, view, self.divisor)
        self._pending[i] -= 1
        while len(self.handles) < len(self._pending) and self._pending[len(self.handles)] == 0:
            k = len(self.handles)
            self.clock.backward_point(self.buckets.ready_at[k])  # simulated: the bucket's time in backward
            self._check(k)
            self.handles.append(self.launch(k))
            self.in_backward += 1

    def launch_rest(self) -> None:
        for k in range(len(self.handles), len(self.buckets.flats)):
            for p, view in self._views[k]:
                if p.grad is not view:  # no gradient this step (zeros), or one no hook saw
                    self.buckets.fill(p, view, self.divisor)
            self._check(k)
            self.handles.append(self.launch(k))

    def _check(self, k: int) -> None:
        """This rank's own gradient, before the all-reduce mixes it with the others': a NaN
        or an infinity is recorded (the runtime fails the run naming this rank and step,
        :meth:`impls.protocol.Algorithm.gradient_fault`).  One sum of the whole bucket (its
        flat buffer): finite proves every entry finite; otherwise (or on the rare overflow of
        the sum) each gradient is looked at to name the first bad one."""
        if self.nonfinite is None and not bool(self.buckets.flats[k].sum().isfinite()):  # one op: all finite
            self.nonfinite = nonfinite_grad([(self.names.get(id(p), "?"), v) for p, v in self._views[k]])

    def take_handles(self) -> list:
        """This step's handles (launching what has not left yet), once; then none."""
        self.launch_rest()
        handles, self.handles = self.handles, [None] * len(self.buckets.flats)
        return handles
