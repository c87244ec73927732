"""All-reduce SGD: synchronous data-parallel SGD, the baseline of every paper here.

Paper: Goyal et al., "Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour"
(2017) for the recipe; the algorithm is plain mini-batch SGD whose gradient is
averaged over all workers every step, which is what PyTorch DDP does.

Communication per step, on every rank: the full gradient (``4 * #params`` bytes in
fp32) is all-reduced (sum, then divided by the world size).  With a ring all-reduce
each rank sends and receives ``2 (n-1)/n`` times the gradient size; nothing else is
exchanged, so all replicas stay bit-identical.

Steps of :meth:`AllreduceSGD.step`:

1. The gradients already sit in flat buckets of about ``bucket_mb`` megabytes
   (reverse parameter order, as DDP does): each ``p.grad`` is a view into its
   bucket, so backward writes straight into the buffer that is sent
   (DDP's ``gradient_as_bucket_view``); no packing or unpacking copies.
2. Launch one asynchronous all-reduce per bucket, then wait for all of them.
3. Divide by the world size, in place.
4. Take the local optimizer step (SGD with momentum / Nesterov and weight decay, the
   same on every rank, so the replicas stay equal).

Hyperparameters:

* ``bucket_mb`` (default 25, DDP's default): bucket size.  Larger buckets mean fewer
  messages (less latency, better bandwidth use); smaller ones start sending earlier.
  Only latency-bound (tiny) models care.
* ``broadcast_buffers`` (default true, DDP's default): before each forward pass, rank
  0's buffers (BatchNorm running statistics) are broadcast to all ranks, so the replicas
  evaluate identically; without it each rank's statistics drift on its own batches
  (parameters stay equal either way); they are also broadcast before each evaluation,
  so every rank evaluates rank 0's model.  Models without buffers send nothing, and
  only state buffers are sent (:func:`impls.flat.state_buffers`: a non-persistent buffer,
  e.g. fairseq's sinusoidal position table, is a constant every rank computes itself;
  sending it each step would cost the tiny Transformer 0.7x its gradient's bytes).

Equivalence: with ``n`` ranks on batch ``b`` this produces the same parameters as
``serial_sgd`` on batch ``n * b`` over the same samples (tested to 1e-6).  Unlike
torch DDP it does not overlap the all-reduce with the backward pass: the runtime
applies the straggler delay between backward and communication, and the benchmark
``results/bench/allreduce_vs_ddp.csv`` measures what that costs against DDP.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

from ..flat import GradientBuckets, state_buffers
from ..protocol import Algorithm, StepContext
from . import register


@dataclass
class AllreduceSGDConfig:
    bucket_mb: float = field(default=25.0, metadata={"gt": 0})
    broadcast_buffers: bool = True


@register("allreduce_sgd")
class AllreduceSGD(Algorithm):
    Config = AllreduceSGDConfig

    def setup(self, model):
        super().setup(model)
        self.broadcast_initial_state(model)
        self.buckets = GradientBuckets(list(model.parameters()), self.cfg.bucket_mb)  # 1

    def computing(self, s: StepContext):
        self._sync_buffers()
        return super().computing(s)

    @contextlib.contextmanager
    def eval_params(self):
        self._sync_buffers()  # the last forward pass updated each rank's statistics on its own batch
        yield self.model

    def _sync_buffers(self) -> None:
        if self.cfg.broadcast_buffers and self.ctx.world > 1:
            by_dtype: dict[torch.dtype, list[torch.Tensor]] = {}
            for b in state_buffers(self.model):
                by_dtype.setdefault(b.dtype, []).append(b)
            for bufs in by_dtype.values():  # one coalesced broadcast per dtype, as DDP's buffer sync
                flat = torch.cat([b.detach().reshape(-1) for b in bufs])
                self.comm.broadcast(flat, src=0)
                with torch.no_grad():
                    for b, v in zip(bufs, flat.split([b.numel() for b in bufs])):
                        b.copy_(v.view_as(b))

    def zero_grad(self) -> None:
        self.buckets.zero_and_bind()

    def step(self, s: StepContext) -> dict[str, float]:
        world = self.ctx.world
        if world > 1:
            handles = [self.comm.all_reduce(flat, async_op=True) for flat in self.buckets.flats]  # 2
            for flat, h in zip(self.buckets.flats, handles):  # 3
                h.wait()
                flat.div_(world)
        self.set_lr(s.lr)
        self.optimizer.step()  # 4
        return {}
