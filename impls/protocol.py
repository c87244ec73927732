"""The algorithm protocol every distributed training method implements.

One method = one file ``impls/algorithms/<name>.py`` holding a config dataclass and
one :class:`Algorithm` subclass registered with ``@register("<name>")`` (the
algorithm registry's decorator, :mod:`impls.algorithms`) under its file name; the
config value ``algorithm.name`` selects it, and variants (1-peer vs 2-peer SGP, the
parameter-server update rules, ...) are config values, never subclasses.

How the runtime drives an algorithm (``impls.runtime``: the skeleton ``trainer``, the loops
``worker`` and ``server``), per rank::

    algo = Algorithm(cfg, ctx)           # ctx: rank, world, communicator, optimizer config
    algo.setup(model)                    # 1. make replicas consistent, allocate buffers
    if not algo.is_worker():             # 2. e.g. a parameter-server rank (Algorithm.roles):
        algo.serve(serve_ctx); return    #    serves every step of every epoch, then returns
    each epoch: algo.epoch_start(epoch, full_pass)     # optional: e.g. SVRG's snapshot
    for each step s (a StepContext: lr, step, epoch, batch, closure):
        algo.zero_grad()                 # 3. clear gradients (default: p.grad = None)
        with algo.computing(s):          #    forward + backward on this worker's batch, slowed by
            loss = task.loss(model, s.batch); loss.backward()  # 4. a straggler's factor (clock)
        algo.await_gradients()           #    communication started in backward, awaited
        extra = algo.step(s)             # 5. communicate + update the parameters
    each epoch: with algo.eval_params(): evaluate      # 6. the model to evaluate
                algo.epoch_end(epoch)                  #    extra metrics
    algo.close()                         # 7. flush async traffic, join threads

``s.step`` is the runtime's count of this worker's steps (it survives a resume), so an
algorithm keeps no step counter of its own; ``s.closure()`` recomputes the loss and the
gradients on ``s.batch`` at whatever parameters the model holds (``torch.optim``'s
closure idiom), for methods that need a second gradient (SVRG, Katyusha X).

Which step each family overrides:

* **All-reduce SGD** (``allreduce_sgd``): ``step`` averages gradients with one
  all-reduce per bucket, then runs the local optimizer.  Compressed methods
  (signSGD majority vote, blockwise sign with error feedback) have the same shape:
  ``step`` compresses ``grad + error``, exchanges with ``all_gather`` or a server,
  decompresses and keeps the residual as algorithm state (``state_dict``).
* **Gossip** (SGP, D-PSGD, D^2): ``step`` first takes the local optimizer step, then
  mixes parameters with this iteration's peers (``comm.isend/irecv``).  Methods whose
  evaluated model differs from the raw parameters (SGP's de-biased ``x / w``) return
  it from ``eval_params``; ``computing`` guarantees the forward pass sees it.
* **Asynchronous** (AD-PSGD, async parameter server): a background thread owned by
  the algorithm talks to peers; ``computing`` holds the lock that makes the pairwise
  average atomic, and ``close`` drains the thread.  No method may add a global
  barrier inside ``step``.  Such a class sets ``step_schedule = "shared_epochs"``
  (:mod:`impls.runtime.steps`), whose epoch-end policy changes three things in the runtime:

  - epochs are shared: epoch ``e`` ends when the workers *together* have taken
    ``(e + 1) * steps_per_epoch * world`` steps (an atomic counter in the process
    group's store, no barrier), so a fast worker takes more steps than a slow one;
    each worker then evaluates its own model and writes its own epoch record
    without waiting for the others (a worker that took no step in an epoch writes a
    record with ``loss/train`` empty);
  - ``consensus/distance`` is not measured per epoch (it needs a collective);
  - in the last epoch ``close`` is called *before* the final evaluation and
    checkpoint, so they see the drained models, and the consensus distance is then
    measured once (all workers have finished training) and logged in that record.
* **Parameter server** (sync, async, stale-synchronous, cyclic): the server rank
  returns ``False`` from ``is_worker`` and runs ``serve``; workers' ``step`` pushes
  gradients and pulls parameters.

``__init__(cfg, ctx)`` checks everything that depends on the world size or the
optimizer (graph peers, an even number of ranks, D^2's eigenvalue condition, ...) and
raises :class:`~impls.errors.ConfigError`, but must not communicate: the workflow
constructs every algorithm at every configured node count while it validates the
config, so such errors stop the pipeline before any job runs.

Communication goes through ``ctx.comm`` (:class:`impls.comm.communicator.Communicator`) so bytes and
waiting time are accounted the same way for every method.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterator, Mapping

import torch
from torch import nn

from .comm.communicator import Communicator
from .optim import LocalOptimizer, build_optimizer


@dataclass
class StepContext:
    """What the runtime hands :meth:`Algorithm.computing` and :meth:`Algorithm.step`."""

    lr: float  # this step's learning rate (the schedule's)
    step: int  # this worker's step count since the run began (continues after a resume)
    epoch: float  # fractional epoch
    batch: Any  # this worker's batch, on the device
    closure: Callable[[], torch.Tensor]  # zero the grads, recompute loss + grads on batch; returns the loss


@dataclass
class ServeContext:
    """What a server rank's :meth:`Algorithm.serve` needs: the step plan, and the runtime's
    epoch end (metrics record, divergence agreement with the workers, checkpoint)."""

    start_epoch: int
    epochs: int
    steps_per_epoch: int
    lr_at: Callable[[float], float]  # the schedule's learning rate at a fractional epoch
    end_epoch: Callable[[int, dict[str, float]], None]  # (epoch, extra metrics); call after each epoch
    #: (epoch, step, values): one ``push`` record of the server's own (an applied push of an
    #: asynchronous mode: worker, staleness, ...); ``step`` counts the server's pushes
    log: Callable[[int, int, dict[str, float]], None] = lambda epoch, step, values: None


@dataclass
class Context:
    """``world`` is the number of *workers* (``nodes``); ``roles`` lists every rank's role,
    workers first (``Algorithm.roles``), so servers are ranks ``world, world + 1, ...``."""

    rank: int
    world: int
    comm: Communicator
    optim: Any  # the config of ``workload.optimizer`` (impls.optim: sgd, adam, adamw, lars)
    seed: int
    device: torch.device = torch.device("cpu")
    roles: tuple[str, ...] = ()


class Algorithm:
    """Base class; see the module docstring for the protocol."""

    Config: ClassVar[type]
    #: which steps a worker takes in an epoch (impls.runtime.steps): "local_epochs", or
    #: "shared_epochs" for asynchronous methods (no per-epoch collective, module docstring)
    step_schedule: ClassVar[str] = "local_epochs"
    #: how the method composes with the workload's optimizer (impls.optim): "gradient"
    #: (transforms the gradient, then the optimizer steps), "local_then_mix" (steps
    #: locally, L2 at the gradient's point, then mixes) or "owns" (its own update)
    optimizer_use: ClassVar[str] = "gradient"
    #: optimizers the method accepts, {name: {hyperparameter: required value}}; None: all
    supported_optimizers: ClassVar[Mapping[str, Mapping[str, Any]] | None] = None
    #: named configurations of the method worth ranking side by side, {method name: hyperparameters}
    #: (e.g. SGP's 1- and 2-peer graphs); a plan (distrepro_wf.plan) ranks each by default.
    #: Empty: the method under its own name with its default config
    variants: ClassVar[Mapping[str, Mapping[str, Any]]] = {}

    # What the workflow asks about a method (never decided by its name elsewhere: tests/test_structure.py).
    #: every step ends in a collective over all workers (an all-reduce or all-gather, a synchronous
    #: server round): a fast worker waits there for the last one, and that wait is the straggler's
    #: (``distrepro_wf.pipeline.collect.collective_wait``).  Gossip (a rank waits for its in-peers
    #: only), asynchronous and barrier-free methods: False.
    sync_collective: ClassVar[bool] = False
    #: the steps it needs to reach a target depend on timing (an asynchronous method: staleness and
    #: who averages with whom follow the ranks' speeds), so a closed form that scales time per step
    #: cannot say where a time-to-target verdict flips (``distrepro_wf.claims.sensitivity``)
    timing_dependent: ClassVar[bool] = False
    #: its exchange runs across steps (a round sent at one step is absorbed at a later one, OSGP's)
    #: and an epoch's end drains it, so an epoch's first step waits for no exchange: an epoch of
    #: ``S`` steps is shorter than ``S`` steady steps by up to one exchange.  Its closed form
    #: (:meth:`step_cost`) is the steady step, and a short run is read at its steady steps
    #: (``distrepro_wf.claims.sweep.epoch_time``)
    pipelined: ClassVar[bool] = False
    #: configurations whose closed form has a name of its own, ``{name: config values}`` (e.g.
    #: ``signum_mv``'s all-gather: ``{"signum_mv_allgather": {"aggregation": "allgather"}}``):
    #: :meth:`step_cost` receives the values as options
    closed_form_variants: ClassVar[Mapping[str, Mapping[str, Any]]] = {}

    @classmethod
    def step_cost(cls, p: Any, peers: int = 1, **opts: Any) -> float | None:
        """The closed-form time (s) of one step at ``p`` (:class:`impls.comm.stepcost.Point`: compute,
        model bytes, bandwidth, latency, nodes and the perturbed parameters), ``peers`` its
        topology's peers, ``opts`` what :meth:`closed_form_options` read from its config; the
        prediction a simulated speed verdict is checked against.  None: no closed form (default)."""
        return None

    @classmethod
    def closed_form_options(cls, spec: Mapping[str, Any]) -> dict[str, Any] | None:
        """The options of a config's ``algorithm`` entry ``spec`` that :meth:`step_cost` reads
        ({} by default); None where this configuration has no closed form."""
        return {}

    def __init__(self, cfg: Any, ctx: Context):
        self.cfg = cfg
        self.ctx = ctx
        self.comm = ctx.comm
        self.model: nn.Module | None = None
        self.optimizer: LocalOptimizer | None = None

    # 1
    def setup(self, model: nn.Module) -> None:
        self.model = model
        self.optimizer = self.make_optimizer(model.parameters())

    # 2
    @classmethod
    def roles(cls, workers: int, cfg: Any) -> list[str]:
        """Every rank's role, workers first: ``nodes`` in configs counts the workers, and the
        launcher starts ``len(roles)`` processes (a parameter server adds its server ranks)."""
        return ["worker"] * workers

    def is_worker(self) -> bool:
        return self.ctx.rank < self.ctx.world

    def serve(self, sc: ServeContext) -> None:  # pragma: no cover - only non-worker ranks
        raise NotImplementedError

    # 3
    def zero_grad(self) -> None:
        for p in self.model.parameters():
            p.grad = None

    def computing(self, s: StepContext) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def epoch_start(self, epoch: int, full_pass: Callable[[], Iterator[Any]]) -> None:
        """Before epoch ``epoch``'s first step; ``full_pass()`` iterates over this worker's
        whole shard as ``(batch, closure)`` pairs, ``closure()`` computing the loss and the
        gradients on ``batch`` at the model's current parameters (e.g. for SVRG's full
        gradient at the snapshot).  Default: nothing."""

    def await_gradients(self) -> None:
        """After the (straggler-slowed) backward pass, before the runtime reads the
        gradients (fp16's overflow check unscales them in place): wait for communication
        started during backward (``allreduce_sgd``'s ``overlap_backward``).  Default: nothing."""

    def gradient_fault(self) -> str | None:
        """After :meth:`await_gradients`, before :meth:`step`: this rank's own gradient's first
        NaN or infinity (``"name (nan)"``), None if finite; the runtime then fails the run as
        diverged naming this rank and step, before a compressor can turn a NaN into a sign.
        Default: the model's gradients as they are now; an algorithm that has already mixed
        them with other ranks' (``allreduce_sgd``'s ``overlap_backward``) reports what it
        checked before sending."""
        from .comm.flat import nonfinite_grad

        return nonfinite_grad([(n, p.grad) for n, p in self.model.named_parameters()])

    # 5
    def step(self, s: StepContext) -> dict[str, float]:
        raise NotImplementedError

    # 6
    @contextlib.contextmanager
    def eval_params(self) -> Iterator[nn.Module]:
        """The model to evaluate, on every rank at each evaluation point.  It may run a
        collective under a synchronous schedule (all ranks reach a point together); under a
        barrier-free one (``shared_epochs``) it must stay local: workers evaluate mid-epoch
        (workload ``evals_per_epoch``) whenever each reaches a point."""
        yield self.model

    def epoch_end(self, epoch: int) -> dict[str, float]:
        return {}

    # 7
    def close(self) -> None:
        pass

    # checkpointing: optimizer state plus whatever the subclass adds
    def state_dict(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer.state_dict() if self.optimizer else None}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.optimizer is not None and state.get("optimizer") is not None:
            self.optimizer.load_state_dict(state["optimizer"])

    # helpers
    def broadcast_initial_state(self, model: nn.Module) -> None:
        """Start every replica from rank 0's parameters and buffers.

        Every rank seeds the same initialisation already; the broadcast makes a
        mis-seeded run fail loudly equal rather than silently train n different models.
        Set-up traffic is not a training step's, so the counters are reset.
        """
        for t in list(model.parameters()) + list(model.buffers()):
            self.comm.broadcast(t.data, src=0)
        self.comm.pop_counters()

    def make_optimizer(self, params) -> LocalOptimizer:
        """The workload's local optimizer, weight decay included (``optimizer_use: gradient``),
        charging its steps to the communicator's clock."""
        return build_optimizer(self.ctx.optim, params, clock=self.comm.clock)[0]

    def set_lr(self, lr: float) -> None:
        self.optimizer.lr = lr
