"""All-reduce SGD: synchronous data-parallel SGD, the baseline of every paper here.

Paper: Goyal et al., "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour"
(2017) for the recipe; the algorithm is plain mini-batch SGD whose gradient is
averaged over all workers every step, which is what PyTorch DDP does.

Communication per step, on every rank: the full gradient (``4 * #params`` bytes in
fp32) is all-reduced (sum, then divided by the world size).  With a ring all-reduce
each rank sends and receives ``2 (n-1)/n`` times the gradient size; nothing else is
exchanged, so all replicas stay bit-identical.

Steps, per training step:

1. The gradients already sit in flat buckets of about ``bucket_mb`` megabytes
   (reverse parameter order, as DDP does): each ``p.grad`` is a view into its
   bucket, so backward writes straight into the buffer that is sent
   (DDP's ``gradient_as_bucket_view``); no packing or unpacking copies.
2. With ``overlap_backward`` (the default), during the backward pass: a hook on each
   parameter (``register_post_accumulate_grad_hook``) moves the fresh gradient into its
   bucket view divided by ``n`` (one pass, as DDP's reducer copies and divides; the
   buckets are not zeroed first and backward does not accumulate into them) and counts
   the bucket's gradients still to come; when a bucket is complete, its asynchronous
   all-reduce starts at once, buckets in order (a later bucket completed first waits for
   the earlier ones, so every rank issues the collectives in the same order), as DDP's
   reducer does.  A bucket whose parameters got no gradient this step (unused parameters:
   zeros) starts when backward ends.  Without overlap, the buckets are zeroed before the
   step's backward pass accumulates into them, and :meth:`step` launches every bucket's
   all-reduce.
3. :meth:`step` waits for the all-reduces (without overlap it then divides by ``n``).
4. Take the local optimizer step (SGD with momentum / Nesterov and weight decay, the
   same on every rank, so the replicas stay equal).

Hyperparameters:

* ``overlap_backward`` (default true): step 2. The parameters are the same either way (the
  same sums in the same order, divided by ``n`` before rather than after them: for ``n`` a
  power of two the very same numbers, else within a rounding of each other; tested to 1e-6
  on real and simulated ranks); only when the messages leave differs. Turn it off to measure
  what the overlap hides. The step records carry ``overlap/buckets_in_backward``: how many
  buckets left during the backward pass (all of them unless some parameters got no
  gradient).
* ``bucket_mb`` (default 25, DDP's default): bucket size.  Larger buckets mean fewer
  messages (less latency, better bandwidth use); smaller ones start sending earlier,
  which is what the overlap needs: a model in one bucket overlaps nothing.
* ``first_bucket_mb`` (default 1, DDP's ``_DEFAULT_FIRST_BUCKET_BYTES``): the size of the
  first bucket (the last layers' gradients, ready first), so that communication starts
  early in the backward pass; ``bucket_mb`` applies to the rest.  Both count the bytes
  the messages weigh: under a simulated paper profile, which weighs the stand-in's
  messages as the paper's model (:mod:`impls.sim.profiles`), a 25 MB bucket is 25 MB of
  that model, so the stand-in is cut into as many buckets as the paper's model would be
  (their ready times then follow the stand-in's parameter shares).
* ``broadcast_buffers`` (default true, DDP's default): every forward pass starts from
  rank 0's buffers (BatchNorm running statistics), so the replicas evaluate identically;
  without it each rank's statistics drift on its own batches (parameters stay equal
  either way); every evaluation sees rank 0's too, so every rank evaluates rank 0's
  model.  Models without buffers send nothing, and only state buffers are sent
  (:func:`impls.comm.flat.state_buffers`: a non-persistent buffer, e.g. fairseq's sinusoidal
  position table, is a constant every rank computes itself; sending it each step would
  cost the tiny Transformer 0.7x its gradient's bytes).  How, at DDP's cost or below:
  the buffers travel as one byte vector (:class:`impls.comm.flat.BufferVector`: one ``cat``
  in, one ``_foreach_copy_`` out), so one broadcast moves them all whatever their dtypes
  (BatchNorm's float statistics and int64 batch counter; DDP's coalesced broadcast sends
  one message per dtype); and it leaves *after* the backward pass, asynchronously, to be
  awaited before the next forward pass (or evaluation): rank 0's buffers do not change
  between its backward pass and its next forward pass, so every rank starts its forward
  pass from the same values as DDP's broadcast at the start of the forward pass gives,
  without a blocking collective on the way in.  Only the first forward pass (and one
  after a resume) waits for a blocking broadcast, as nothing is in flight yet.

Interplay with the runtime (:mod:`impls.runtime.trainer`):

* **Straggler.**  A straggler's forward and backward pass take ``factor`` times as long
  (:mod:`impls.runtime.straggler`, on both backends), so each of its buckets is complete,
  and its all-reduce leaves, when a slow device would have produced it: the clock's
  :meth:`~impls.backends.Clock.backward_point` before each launch charges (simulated) or
  sleeps (real ranks) the slowed backward pass up to that bucket.  Every rank's all-reduce
  of a bucket finishes after the straggler's bucket is ready: the overlap hides only what
  fits behind the straggler's own (slowed) backward pass.
* **fp16 loss scaling** (:mod:`impls.runtime.precision`).  With overlap the buckets carry
  the *scaled* gradients (divided by ``n``); the runtime calls :meth:`await_gradients`
  before its overflow check, which then unscales the averaged gradient.  With a scale
  that is a power of two (torch's defaults: initial value, growth and backoff factors),
  unscaling before or after the sum gives the same numbers, and an overflow on any rank
  (an infinite or NaN gradient) makes the sum non-finite on every rank: the skip is agreed
  even before the runtime's own agreement (which still runs).  A skipped step has sent
  its gradients (as DDP's has); without overlap it sends none.
* A backward pass outside ``computing()`` (the runtime's one-batch calibration, a
  closure) leaves the hooks idle; two backward passes inside one ``computing()``
  (gradient accumulation) are refused: a bucket's all-reduce would have left with half
  of its sum (DDP refuses the same; turn ``overlap_backward`` off for that).

Equivalence: with ``n`` ranks on batch ``b`` this produces the same parameters as
``serial_sgd`` on batch ``n * b`` over the same samples (tested to 1e-6).  Where it
differs from torch DDP: gradients are bucket views from the start (DDP copies them unless
``gradient_as_bucket_view``; with overlap the hooks copy each gradient into its bucket
once, dividing in the same pass, where DDP copies it in, divides the bucket and copies it
back), the buckets keep their order (DDP rebuilds them
after the first step in the order the gradients arrived), and the buffers travel as one
message.  ``results/bench/allreduce_vs_ddp.csv`` measures the two side by side.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

from ..comm.flat import BackwardOverlap, BufferVector, GradientBuckets, WireLayout, state_buffers
from ..comm import stepcost as sc
from ..comm.communicator import STAGE_PASSES
from ..protocol import Algorithm, StepContext
from . import register


@dataclass
class AllreduceSGDConfig:
    bucket_mb: float = field(default=25.0, metadata={"gt": 0})
    first_bucket_mb: float = field(default=1.0, metadata={"gt": 0})
    broadcast_buffers: bool = True
    overlap_backward: bool = True


@register("allreduce_sgd")
class AllreduceSGD(Algorithm):
    Config = AllreduceSGDConfig
    sync_collective = True  # its all-reduce waits for every worker

    @classmethod
    def closed_form_options(cls, spec) -> dict:
        """The bucket sizes :meth:`step_cost` cuts a known layout by (DDP's defaults)."""
        return {k: float(spec[k]) for k in ("bucket_mb", "first_bucket_mb") if k in spec}

    @classmethod
    def step_cost(cls, p: sc.Point, peers: int = 1, bucket_mb: float = 25.0, first_bucket_mb: float = 1.0,
                  **opts) -> float | None:
        """``C_n + max(0, R - overlap (2/3) C)``: the slowest worker's compute, then the ring
        all-reduce ``R = 2 (n-1) (alpha + o + B / (n bw' e_AR))`` (``e_AR``: the platform's
        ``allreduce_efficiency``; on racks a ring boundary shares an uplink), less the share of
        the backward pass (2/3 of the step) it hides behind (``overlap``, as DDP's buckets do).
        Where the point knows the model's layout (a profile's ``model_layout``), DDP's buckets of
        it (``bucket_mb``, ``first_bucket_mb``) each leave when the slowest worker's backward
        pass completes them: :func:`~impls.comm.stepcost.bucket_pipeline_s`.

        Op costs: every bucket is staged to the transport and back before its all-reduce leaves
        (``sigma = 2 B / stage_bw`` a step, :data:`impls.comm.communicator.STAGE_PASSES`), by the
        rank itself, between its backward pass's pieces: the compute ends ``sigma`` later and the
        buckets leave later by their share of it; the optimizer step follows the last ring."""
        bw = sc.flow_bandwidth(p, 1.0 if sc.crosses_racks(p) else 0.0) * p.allreduce_efficiency
        compute = sc.sync_compute(p, p.nodes)
        stage = sc.ops_s(p, stage=STAGE_PASSES["all_reduce"])
        if p.layout:  # the model's layout known: each bucket leaves when the slowest backward pass completes it
            sizes = sc.ddp_buckets(p.layout, bucket_mb * 2**20, first_bucket_mb * 2**20)
            return sc.bucket_pipeline_s(
                p, [x / sum(sizes) for x in sizes], compute,
                lambda nbytes: sc.ring_allreduce_s(p.nodes, nbytes, p.latency_s + p.msg_overhead_s, bw),
                stage) + sc.optimizer_s(p)
        ring = sc.ring_allreduce_s(p.nodes, p.model_bytes, p.latency_s + p.msg_overhead_s, bw)
        return compute + stage + max(0.0, ring - p.overlap * sc.BACKWARD_SHARE * p.compute_s) + sc.optimizer_s(p)

    def setup(self, model):
        super().setup(model)
        self.broadcast_initial_state(model)
        self.buckets = self._gradient_buckets(model)  # 1
        self.overlap = self._backward_overlap(model)  # 2
        self._waiting: list | None = None  # this step's handles, until step() has used them
        self._bvec: BufferVector | None = None  # the state buffers as one byte vector, once built
        self._buffers_in_flight = None  # its broadcast, launched after a backward pass
        self._buffers_equal = False  # every rank holds rank 0's buffers (nothing to send before a forward)

    def _gradient_buckets(self, model) -> GradientBuckets:
        """Step 1's buckets.  Their sizes count the bytes the messages weigh: where a simulated
        clock scales them to a paper's model (impls.sim.profiles), a 25 MB bucket is 25 MB of
        that model (real ranks: 1).  Where the clock times the overlap by the paper model's own
        layout (``profile.model_layout``), the stand-in's gradient is one flat bucket, cut into the
        paper model's buckets at launch (:class:`~impls.comm.flat.WireLayout`, step 2)."""
        params = list(model.parameters())
        scale = self.comm.clock.wire_scale(sum(p.numel() * p.element_size() for p in params))
        layout = self.comm.clock.gradient_layout()
        self.wire: WireLayout | None = None
        if layout is not None and self.cfg.overlap_backward and self.ctx.world > 1:
            buckets = GradientBuckets(params, float("inf"))
            self.wire = WireLayout(layout, buckets.flats[0].numel(), self.cfg.bucket_mb * 2**20,
                                   self.cfg.first_bucket_mb * 2**20)
            buckets.ready_at = [self.wire.ready_at[0]]  # the one bucket leaves from the paper's first point
            return buckets
        return GradientBuckets(params, self.cfg.bucket_mb / scale, self.cfg.first_bucket_mb / scale)

    def _backward_overlap(self, model) -> BackwardOverlap | None:
        """Step 2's hooks (None: every bucket leaves from :meth:`step`)."""
        if not (self.cfg.overlap_backward and self.ctx.world > 1):
            return None
        names = {id(p): n for n, p in model.named_parameters()}
        return BackwardOverlap(self.buckets, self._launch, self.comm.clock, self.ctx.world, names)

    def _launch(self, i: int):
        if self.wire is not None:  # the paper model's buckets, each at its point of the backward pass
            return self.wire.launch(self.buckets.flats[i], lambda v: self.comm.all_reduce(v, async_op=True),
                                    self.comm.clock)
        return self.comm.all_reduce(self.buckets.flats[i], async_op=True)

    @contextlib.contextmanager
    def computing(self, s: StepContext):
        self._buffers_before_forward()
        if self.overlap is None:
            yield
        else:
            with self.overlap.armed():
                yield
            self._waiting = self.overlap.take_handles()
        self._buffers_after_backward()

    @contextlib.contextmanager
    def eval_params(self):
        self._buffers_before_forward()  # rank 0's statistics as they are now, on every rank
        yield self.model

    def close(self) -> None:
        if self._buffers_in_flight is not None:
            self._buffers_in_flight.wait()
            self._buffers_in_flight = None

    # -- buffers: one message of every state buffer, in flight from backward to the next forward
    def _buffer_vector(self) -> BufferVector | None:
        if not (self.cfg.broadcast_buffers and self.ctx.world > 1):
            return None
        if self._bvec is None:  # the same tensors all run long (a checkpoint loads into them)
            self._bvec = BufferVector(state_buffers(self.model))
        return self._bvec if self._bvec.bufs else None

    def _sync_buffers(self) -> None:
        """Rank 0's buffers on every rank now (one blocking broadcast)."""
        vec = self._buffer_vector()
        if vec is not None:
            self.comm.broadcast(vec.pack(), src=0)
            if self.ctx.rank != 0:
                vec.unpack()
            self._buffers_equal = True

    def _buffers_before_forward(self) -> None:
        if self._buffers_in_flight is not None:  # sent after the last backward pass: rank 0's buffers since
            self._buffers_in_flight.wait()
            if self.ctx.rank != 0:
                self._bvec.unpack()
            self._buffers_in_flight, self._buffers_equal = None, True
        elif not self._buffers_equal:
            self._sync_buffers()

    def _buffers_after_backward(self) -> None:
        """The forward pass changed each rank's statistics; rank 0's stay as they are until its
        next forward pass, so they leave now, overlapping the rest of the step."""
        vec = self._buffer_vector()
        self._buffers_equal = vec is None
        if vec is not None:
            self._buffers_in_flight = self.comm.broadcast(vec.pack() if self.ctx.rank == 0 else vec.flat, src=0,
                                                          async_op=True)

    def zero_grad(self) -> None:
        if self.overlap is not None:
            self.buckets.unbind()  # the hooks copy each fresh gradient in: no zeroing, no accumulation
        else:
            self.buckets.zero_and_bind()
        self._waiting = None

    def await_gradients(self) -> None:
        """Wait for the all-reduces started during backward (the averaged gradients)."""
        if self._waiting is not None:
            for h in self._waiting:
                h.wait()

    def gradient_fault(self) -> str | None:
        if self._waiting is not None:  # averaged already: what each bucket held when it left
            return self.overlap.nonfinite
        return super().gradient_fault()

    def step(self, s: StepContext) -> dict[str, float]:
        world, extra = self.ctx.world, {}
        if world > 1:
            if self._waiting is not None:  # 2 happened during backward, on gradients divided by n
                per = len(self.wire.slices) if self.wire is not None else 1  # paper buckets per flat bucket
                handles, extra = self._waiting, {"overlap/buckets_in_backward": float(self.overlap.in_backward * per)}
                for h in handles:  # 3
                    h.wait()
            else:
                self.buckets.gather()  # gradients a backward pass outside computing() left outside the buckets
                handles = [self._launch(i) for i in range(len(self.buckets.flats))]  # 2, without overlap
                for flat, h in zip(self.buckets.flats, handles):  # 3
                    h.wait()
                    flat.div_(world)
            self._waiting = None
        self.set_lr(s.lr)
        self.optimizer.step()  # 4
        return extra
