"""Closed-form alpha-beta step times: what a simulated speed verdict predicts without a simulation.

Every simulated speed claim (``backend: simgrid``) is a model prediction.  This module gives the
same prediction in closed form, from the quantities the simulation is built on (:class:`Point`):
compute per step ``C``, model bytes ``B``, per-direction NIC bandwidth ``bw`` (the platform's
beta, :meth:`impls.sim.platforms.Platform.alpha_beta`), end-to-end latency ``alpha``, node
count ``n``, and the uncertain parameters the sensitivity analysis varies
(:mod:`distrepro_wf.claims.sensitivity`).  The claims table shows it beside every simulated speed
result (``closed_form``), so a reader sees that e.g. SGP/AR = 0.826 simulated is 0.833 closed-form.

Step time of each method (one message ``m(S) = alpha + o + S / bw'`` with ``o`` the per-message
software overhead and ``bw' = bw * efficiency * (1 - background)``):

1. compute of a synchronous step: the slowest of ``k`` lognormal draws of mean ``C`` and
   coefficient of variation ``jitter`` (``k = n`` for a global barrier, 2 for a method that waits
   on one in-neighbour), approximated by ``C * exp(sigma z_k - sigma^2/2)`` with ``z_k`` Blom's
   expected maximum of ``k`` standard normals; a straggler (``slowNxF``) multiplies the
   slowest worker's compute by ``F``;
2. ``allreduce_sgd``: ``C_n + max(0, R - overlap * (2/3) C)``, ``R = 2 (n-1) (alpha + o + B /
   (n bw' e_AR))`` the ring all-reduce (``e_AR``: the platform's ``allreduce_efficiency``;
   ``overlap``: the fraction of the backward pass, 2/3 of the step, the all-reduce hides, as
   DDP's bucketed all-reduce does); where the profile knows the model's parameter layout
   (``model_layout``: ResNet-50's, the point's ``layout``) the buckets are DDP's cut of it and
   each one's ring starts when the slowest worker's backward pass completes it (a straggler's
   ``F`` times longer backward hides ``F`` times more) and the previous ring is done
   (:func:`impls.comm.stepcost.bucket_pipeline_s`: the step is ``C_n`` plus about the last
   bucket's ring when the rest hides);
3. ``sgp`` (push-sum, ``p`` peers, not overlapped): ``C_2 + p m(B)``: one message per peer;
4. ``osgp`` and ``dpsgd`` (D-PSGD's default order, Lian et al.'s, overlaps its exchange):
   ``max(C_2, comm)``, ``comm = m(B)`` (OSGP, 1 peer) or ``alpha + o + k B/bw'`` (D-PSGD, ``k``
   neighbours a step: 2 on its default ``ring``, 1 on ``bipartite_exponential``; on racks at least
   one ring-boundary flow sharing an uplink with one other); D-PSGD with ``order:
   step_then_mix`` (SGP's order: step, then exchange and wait for its ``k`` neighbours) overlaps
   nothing: ``C_{k+1} + comm``;
5. ``adpsgd`` (asynchronous pairwise averaging, overlapped): the workers' summed rate,
   ``n / sum_i 1/t_i`` a step of every worker: a passive worker (half of them) only computes,
   ``t = C``; an active one waits for its request and the reply, ``t = max(C f_i, 2 m(B) + w)``
   (the straggler, the last rank, is active), ``w`` the wait of a random pick that finds its
   passive worker busy with another active one's exchange (its ``step_cost``);
6. the server-aggregated sign methods (``signum_mv`` with ``aggregation: server``,
   ``ef_blocksgdm``): ``C_n + 2 (alpha + o + n S / bw')``: the server's one
   NIC receives and sends ``n`` messages of ``S = B/32`` (packed signs), one phase after the
   other (``ps_sync``'s form when staging is free, item 7); ``signum_mv``
   with ``aggregation: allgather``: ``C_n + (n-1) m(B/32)``, a ring all-gather.

   Op costs (:mod:`impls.sim.opcost`): a simulated rank sleeps each of its local operations on
   its own timeline, before its next interaction with the simulation, so they lengthen its step
   unless something it waits for anyway is longer.  Each closed form above adds those its method
   pays, in passes over the model at the point's op bandwidths (:func:`impls.comm.stepcost.ops_s`;
   free where the point leaves a bandwidth infinite, a ``fixed`` profile): the staging of every
   message, one pass each way (``sigma = B / stage_bw``, :data:`impls.comm.communicator.STAGE_PASSES`;
   by far the largest, 8.5 ms a 102 MB message at 12 GB/s, 10-20 % of a paper step on the fast
   network), the gossip round's share and sum (:func:`impls.families.gossip.round_ops_s`), the
   PushSum vector, the L2 term and the local optimizer step (the point's ``optim_passes`` and
   ``weight_decay``: the workload's optimizer).  Where they sit: SGP and D-PSGD in SGP's order pay
   them in series with the compute and the wire (``+ ops``); OSGP's are the rank's own work beside
   the wire carrying the last round (``max(C_2 + ops, m(B))``); D-PSGD in Lian et al.'s order stages
   its messages before its compute and sums after its wait (``ops + max(C_2, comm)``); AR-SGD
   stages each bucket before its ring leaves, between the pieces of its backward pass (the compute
   ends ``2 sigma`` later, each bucket leaves its share of that later) and steps after the last
   ring; AD-PSGD's exchange pays the staging of the request and of the reply and both sides'
   averages, each worker its own copies and local step.

   Every closed form is the steady step, what a long epoch is made of.  OSGP's exchange runs
   across steps and an epoch's end drains it (``pipelined``), so an epoch's first step waits for
   no exchange and a short epoch is faster than its steady steps (3 steps: 12-19 %); the
   sensitivity sweep, and the test that holds this module to the simulator, read such a run at
   its steady steps (:func:`distrepro_wf.claims.sweep.epoch_time`).

7. the parameter-server family (``ps_sync``, ``ps_async``, ``ps_ssp``, ``ps_cyclic``, ``ddcgu``;
   derivations below): a "step" is one *round*, ``n`` gradients applied (a
   shared epoch of ``S`` steps is ``S`` rounds, as a synchronous epoch is ``S`` steps), and the
   server's own costs are first-order there, so these closed forms keep the two op costs the
   simulated server pays per message: the host/device staging of every payload
   (``sigma = B / stage_bandwidth``, :mod:`impls.comm.communicator`) and the optimizer apply (``apply_s``).

   Derivations of the parameter-server rounds (each mode's ``step_cost``):

   Quantities (per message of a model, ``B`` bytes; ``k`` = ``servers``, each owning ``B/k``):
   ``sigma = B / stage_bandwidth`` the host/device staging of a payload (the simulated ranks
   stage every send before it leaves and every receive when it is posted, :mod:`impls.comm.communicator`),
   ``o`` the per-message overhead (slept by the sender), ``delta = sigma + o``, ``D = B / bw'``
   a model on the wire, ``alpha`` the latency, ``a`` the server's apply (``apply_s``), ``C f_i``
   worker ``i``'s compute (one straggler ``f = slow_factor``, the others 1).

   1. A server applies pushes one at a time; per push it sleeps the staging of the receive
      and of the reply, the apply and the reply's overhead: ``s = 2 sigma/k + a/k + o``, and its
      NIC carries ``D/k`` in and ``D/k`` out.  A push's transfer is a rendezvous that starts
      when the server posts its receive, which it does only once it has applied the last push
      and staged its reply; the receive's own staging is slept while the push is on the wire.
      So a push takes the server ``s_D = max(sigma, D)/k + sigma/k + a/k + o``
      (:func:`impls.comm.stepcost.server_pushes_s`; ``ps_bottleneck`` at 4 workers and a
      bandwidth efficiency of 0.9: 108 ms a push, simulated 108.3, where ``max(s, D/k)``, the
      staging hidden behind the wire, gave 98).  A blocking worker's cycle when nobody queues is
      ``t_i`` (:func:`impls.comm.stepcost.worker_cycle_s`).
   2. ``ps_async`` (no barrier): throughput is the smaller of the workers' and the server's,
      ``T = max(n s_D, n / sum_i 1/t_i)``; the slow worker only removes its own share
      of the rate.  With ``inflight b > 1`` a worker waits only for its ``b``-th oldest reply,
      but still sleeps the staging of its push and of each reply it installs:
      ``t_i -> max(C f_i + 2 sigma + k o, t_i / b)``.  The server's receive from any worker is
      a rendezvous with one sender at a time (gloo's, and the simulated backend's,
      :mod:`impls.backends.sim`): pushes arrive one after another at the link's full rate
      while the reply to the worker just served leaves on the other direction, so pushes in
      and replies out pipeline and equal, jitter-free workers reach this steady state from
      the first round (2 and 4 workers on the netns testbed's link, within 1 %: tested; real
      ranks within 3-10 %, README, sim_vs_netns).  (An eager transport, every push flowing
      at once and shared max-min fairly, landed equal workers' pushes together and then
      their replies: a lockstep as slow as ``ps_sync``.)  With ``k > 1`` servers on a
      link-bound setting ``T`` is a lower bound: every server takes the workers in the same
      announcement order, so the servers tend to take the same worker's parts at once and
      those share that worker's link (ps_bottleneck, 32 workers on 10 GbE at line rate, ``k = 4``:
      ``T`` 0.79 s, simulated 1.38 s a steady round; one server: 3.14 s, simulated 3.15 s).
   3. ``ps_sync`` (``k = 1``): after the last push arrives the server applies (``a``), then
      stages the ``n`` replies one after another (``delta`` each) onto its link; the last
      reply lands ``a + delta + max(n D, (n-1) delta + D)`` later (the replies).  Then the
      pushes: the last worker served (the straggler, rank -1) computes (the slowest of ``n``
      draws, ``C_n = C max(f, z_n)``), stages and sends its push: ``C_n + delta + D``; where
      ``delta < D`` the replies share the link and the workers finish together, so their
      pushes share it too and the last lands ``C + delta + D + (n-1)(D - delta)`` after the
      replies, whichever is later (a slow worker's compute hides behind the others' pushes on
      a busy link), and at least the server's ``n max(sigma, D)/k`` of receiving them one at a
      time (each receive staged while its push is on the wire: where staging is slower than the
      wire, the pushes wait for it).  So ``T = replies + pushes + 2 alpha``: the two-phase
      ``C + 2 (alpha + o + n B/bw')`` when staging is free (``delta = o``, ``a = 0``), and
      pipelined (``C_n + a + (n+1) delta + 2 D``) when staging is slower than the wire.
   4. ``ps_cyclic`` (fixed order, one push per worker per round): the server waits for each
      worker in turn, so a round is at least the slowest cycle (compute ``C max(f, z_n)``) and
      at least the server's and its link's ``n`` pushes: ``T = max(n s_D, max_i t_i)``.
      (The per-epoch fetch, ``n`` more replies an epoch, is left out: ``1/S`` of a round each.)
   5. ``ps_ssp`` (staleness bound ``s_b``): without a straggler the bound never binds (equal
      workers stay within a step of each other): ``ps_async``.  With one, in steady state the
      fast workers are ``s_b`` steps ahead and each takes one step per slow step, so a round
      lasts the slow worker's cycle, whose reply the server sends *after* the ``n - 1`` replies
      it releases with it (they pushed first): ``t_ssp = C f + delta + alpha + D + a +
      max(n delta + D, delta + n D) + alpha``; ``T = max(T_async, t_ssp)``.  The head start of
      ``(n-1) s_b`` pushes saves ``(n-1) s_b / n`` rounds once per run: given the run's
      ``rounds`` ``R``, ``T = max(T_async, t_ssp (1 - (n-1) s_b / (n R)))``: between ``ps_async``
      (``s_b -> inf``) and the synchronous wait for the straggler (``s_b = 0``, which binds on
      every round, straggler or not: ``t_ssp`` with ``C_n``, ``ps_sync``'s round when the
      replies pipeline).  (Sharded ``ps_ssp`` is charged as one server.)
   6. ``ddcgu`` (a token, gradients accumulated meanwhile): a worker's main loop never waits
      (its background activity pushes the accumulation at its turn), so the gradient rate is
      the workers' compute rate: ``T = n / sum_i 1/(C f_i)``; the token's pace changes how
      many gradients a push sums and their staleness, not the rate.
   Checked against short simulations (tests/test_ps_family.py, steady-state rounds).

Each formula is its algorithm's own fact: the classmethod ``step_cost`` of its class
(``impls/algorithms/<name>.py``, the terms in :mod:`impls.comm.stepcost`), asked by
:func:`step_s`; the options of a method's config it reads, ``closed_form_options``, and a
configuration with a closed form of its own name (``signum_mv_allgather``),
``closed_form_variants``.  Adding a method with a closed form is its one file.

What it leaves out: op costs that wait on no one's critical path or that the methods without
them above pay (a synchronous method's optimizer step other than AR-SGD's, the parameter-server
workers' flatten; ``ef_blocksgdm`` and ``signum_mv`` count their compression and the server's
aggregation, :func:`impls.comm.stepcost.ops_s`), a passive AD-PSGD worker's lock held while its
main thread and its background activity take turns, TCP slow start beyond the platform's
latency factor, and flow contention other than the rack uplinks of ``shared_hpc``
(``uplink_flows``).  Other jobs' traffic on racks (``shared_hpc``'s on/off bursts crossing the
uplinks) is only its mean share of an uplink here, which misses the simulator by 10-78 % at the
range ends (the ``sensitivity_sweep`` benchmark): :func:`unmodelled` says so, and such a row's
sensitivity is simulated (:mod:`distrepro_wf.claims.simends`).  Checked against short simulations at every default claim setting
(``tests/test_closedform_vs_sim_claims.py``, within 10 %).  A method whose class declares no ``step_cost`` has no
closed form (None).
"""

from __future__ import annotations

from typing import Any

from impls.comm.stepcost import (BACKWARD_SHARE, Point, expected_max_factor,  # noqa: F401  (the model's terms)
                                 ring_allreduce_s)


def _algorithms():
    from impls.algorithms import ALGORITHMS

    return ALGORITHMS


def closed_form(name: str) -> tuple[type, dict[str, Any]] | None:
    """(the algorithm class, the config values it implies) of a closed form's name: an
    algorithm's, or a variant one declares (``closed_form_variants``); None: unknown."""
    algos = _algorithms()
    if name in algos:
        return algos.get(name), {}
    for known in algos.names():
        cls = algos.get(known)
        if name in cls.closed_form_variants:
            return cls, dict(cls.closed_form_variants[name])
    return None


def unmodelled(p: Point) -> str | None:
    """Why the closed form does not model ``p`` (its sensitivity is then simulated:
    :mod:`distrepro_wf.claims.simends`), or None."""
    if p.rack_size and p.background > 0:
        return (f"other jobs' bursts cross the rack uplinks (background load {p.background:g}): the closed form "
                "has only their mean share of an uplink")
    return None


def step_s(algorithm: str, p: Point, peers: int = 1, **opts: Any) -> float | None:
    """Closed-form time of one step (s) of ``algorithm`` at ``p`` (module docstring): its class's
    ``step_cost``; None for an algorithm without one.  ``opts``: what its ``closed_form_options``
    read from the config (a parameter-server method's servers, staleness, inflight and the run's
    ``rounds``; D-PSGD's order and neighbours)."""
    form = closed_form(algorithm)
    if form is None:
        return None
    cls, implied = form
    return cls.step_cost(p, peers, **implied, **opts)


def method_algorithm(method_spec: dict[str, Any] | None, method: str) -> tuple[str, int]:
    """(closed form's name, peers) of a config method entry (``sgp_1peer: {algorithm: {name: sgp,
    topology: {peers: 1}}}`` -> ("sgp", 1); ``allreduce_sgd: {}`` -> ("allreduce_sgd", 1)); a
    configuration an algorithm names apart (``closed_form_variants``) -> that name."""
    alg = (method_spec or {}).get("algorithm", method)
    if isinstance(alg, str):
        return alg, 1
    topo = alg.get("topology") or {}
    name = alg.get("name", method)
    if name in _algorithms():
        for variant, values in _algorithms().get(name).closed_form_variants.items():
            if all(alg.get(k) == v for k, v in values.items()):
                name = variant
    return name, int(topo.get("peers", 1)) if isinstance(topo, dict) else 1


def method_options(method_spec: dict[str, Any] | None) -> dict[str, Any] | None:
    """The options of a method's config entry its closed form reads, as its algorithm declares
    them (``closed_form_options``): a parameter-server method's (``{algorithm: {name: ps_async,
    servers: 4}}`` -> ``{"servers": 4}``), D-PSGD's order and neighbours a step (``{algorithm:
    {name: dpsgd, order: step_then_mix}}`` -> ``{"order": "step_then_mix", "neighbours": 2}``);
    {} otherwise; None for a configuration without a closed form (a D-PSGD topology it has none for)."""
    alg = (method_spec or {}).get("algorithm")
    if not isinstance(alg, dict) or alg.get("name") not in _algorithms():
        return {}
    return _algorithms().get(alg["name"]).closed_form_options(alg)


def timing_dependent(method_spec: dict[str, Any] | None, method: str) -> bool:
    """Whether a method's steps to a target depend on timing (its algorithm's class says)."""
    form = closed_form(method_algorithm(method_spec, method)[0])
    return form is not None and form[0].timing_dependent


def overlap_default(algorithm: str) -> bool | None:
    """The default of ``algorithm``'s ``overlap_backward`` (its all-reduce hidden behind the
    backward pass), as its config declares it; None where its config has no such key (the
    algorithm all-reduces nothing to hide)."""
    import dataclasses  # noqa: PLC0415

    if algorithm not in _algorithms():
        return None
    f = {f.name: f for f in dataclasses.fields(_algorithms().get(algorithm).Config)}.get("overlap_backward")
    return None if f is None else f.default


def method_overlap(method_spec: dict[str, Any] | None, method: str) -> float:
    """The nominal AR/backward overlap of a config method entry, the method's own (the closed
    form's ``overlap``, :mod:`impls.sim.nominal`): 1 where its algorithm hides its all-reduce behind
    the backward pass (``overlap_backward``, as set or its default), else 0."""
    alg = (method_spec or {}).get("algorithm", method)
    name, values = (alg, {}) if isinstance(alg, str) else (alg.get("name", method), alg)
    default = overlap_default(name)
    return 0.0 if default is None else float(bool(values.get("overlap_backward", default)))
