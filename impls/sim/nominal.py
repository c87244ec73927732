"""One nominal value per uncertain parameter of the simulated platform: the table.

The simulator's time rests on numbers that no data sheet fixes.  Each of them has, here, one
entry (:data:`PARAMETERS`): where its **nominal** value lives (one place: a platform preset's
number, a profile's, an op cost's constant, or the method's own configuration), the
**range** the sensitivity analysis sweeps (:mod:`distrepro_wf.claims.sensitivity` ``RANGES``
is this table), its **kind** and its **source**:

* ``uncertainty``: what the papers' cluster could have been, by a measurement someone
  published (``source``); a verdict that flips inside the range is at most inconclusive;
* ``scenario``: no paper reports it (background load, jitter, latency, the staging path): a
  property of *a* cluster, never demoting a verdict; the row says whether it holds.

Readers of the nominal values, all from here or from the place an entry names:

* the simulator: a preset's numbers (:mod:`impls.sim.platforms`, each with its source; e.g.
  ``msg_efficiency``, every message at that share of the flow's rate: :func:`msg_efficiencies`),
  a profile's op costs (:mod:`impls.sim.opcost`: ``TCP_MSG_US``), the method's config
  (``overlap_backward``);
* the closed form's nominal point (``distrepro_wf.claims.sensitivity.nominal_point``);
* the sensitivity ranges and the sweep (``distrepro_wf.claims.sensitivity``, ``.sweep``);
* the docs: the table of ``docs/sim-parameter-sources.md`` is :func:`markdown` (``python -m
  impls.sim.nominal``; ``tests/test_nominal.py`` checks the page shows it).

Pure data: nothing here imports torch or SimGrid.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

UNCERTAINTY, SCENARIO = "uncertainty", "scenario"


@dataclass(frozen=True)
class Parameter:
    """One uncertain parameter: ``name`` is the closed form's :class:`impls.comm.stepcost.Point`
    field; ``how`` "scale" multiplies the nominal value, "value" is absolute (the range is widened
    to include the nominal value); ``nominal``: where the nominal value lives, in words."""

    name: str
    label: str
    how: str
    low: float
    high: float
    kind: str
    nominal: str
    reason: str
    source: str | None = None

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if d["source"] is None:
            del d["source"]
        return d


def msg_efficiencies() -> dict[str, tuple[float, str | None]]:
    """{platform preset: (its nominal ``msg_efficiency``, its source or None)}: the presets'
    own numbers (:mod:`impls.sim.platforms`; a preset without one runs at 1, unsourced)."""
    from .platforms import PRESETS, SOURCES  # noqa: PLC0415

    return {k: (float(PRESETS[k].get("msg_efficiency", 1.0)), SOURCES[k].get("msg_efficiency")) for k in PRESETS}


PARAMETERS: tuple[Parameter, ...] = (
    Parameter("compute_s", "compute per step", "scale", 0.5, 3.0, UNCERTAINTY,
              "the profile's step_ms (impls/sim/profiles.py: NVIDIA's published throughput)",
              "nominal compute is NVIDIA's tuned device throughput; the papers' own rows on the same cluster imply "
              "slower steps (SlowMo Table 2a OSGP 271 ms with its exchange hidden, i.e. about 3x the 89.7 ms), "
              "mixed precision or DALI halve it",
              "SlowMo Table 2a (OSGP 271 ms a step with its exchange hidden: about 3x the 89.7 ms nominal)"),
    Parameter("efficiency", "bandwidth efficiency", "value", 0.3, 0.9, UNCERTAINTY,
              "the platform's msg_efficiency (each preset's: the table below)",
              "achieved fraction of the NIC's rate for every message: NCCL over TCP sockets measured 32-60 % of "
              "line rate at 25-100 Gb/s (NVIDIA/nccl #209, #398, #450, nccl-tests #83), one 10 GbE TCP stream "
              "~94 % (unverified): 0.30 the worst measured point, 0.90 one stream's goodput",
              "NVIDIA/nccl #209, #398, #450, nccl-tests #83 (docs/sim-parameter-sources.md)"),
    Parameter("msg_overhead_s", "per-message overhead (s)", "value", 0.0, 50e-6, UNCERTAINTY,
              "the paper profiles' op cost msg_us (impls/sim/opcost.py TCP_MSG_US)",
              "a socket transport's software cost per message on top of the platform's latency: NCCL's own "
              "model charges 9.6 us per inter-node ring step; 0 if the platform's 50 us latency already holds "
              "it all; up to 50 us, an 8-byte NCCL broadcast over sockets end to end (38-46 us) and gloo on this "
              "machine's loopback (34-45 us, python -m distrepro_wf.bench.netns) charged on top",
              "NVIDIA/nccl src/graph/tuning.cc (9.6 us a ring step), nccl-tests #82 (38-46 us a broadcast)"),
    Parameter("latency_s", "latency", "scale", 0.2, 5.0, SCENARIO, "the platform's latency_us (no paper's)",
              "the presets' latencies are typical figures, not the papers' (50 us on 10 GbE): kernel TCP on "
              "switched Ethernet measures 10-250 us end to end"),
    Parameter("background", "background load", "value", 0.0, 0.75, SCENARIO,
              "the platform's background_load (shared_hpc's, unsourced; 0 elsewhere)",
              "no paper reports the share of its network other jobs used: from a dedicated cluster (0) to a "
              "heavily shared one (75 %); shared_hpc's 50 % has no source"),
    Parameter("jitter", "compute jitter (CV)", "value", 0.0, 0.15, SCENARIO, "the profile's jitter (the config's; 0 when not given)",
              "3 % is assumed; step-time variation on GPU clusters is 1-15 % (input pipeline, OS noise, "
              "thermal throttling), and a synchronous step waits for the slowest draw"),
    Parameter("stage_bandwidth", "host/device staging bandwidth", "scale", 0.25, 4.0, SCENARIO,
              "the paper profiles' op cost stage_gbps (impls/sim/opcost.py PCIE3_X16_EFFECTIVE_GBPS, ASSUMED)",
              "opcost's 12 GB/s per staged message is ASSUMED (PCIe 3.0 x16 pinned copies); pageable copies reach "
              "3-6 GB/s, GPUDirect RDMA skips the copy; it moves only the parameter-server family's closed "
              "forms, whose server stages every push and reply"),
    Parameter("overlap", "AR/backward overlap", "value", 0.0, 1.0, UNCERTAINTY,
              "the method's own: 1 for allreduce_sgd with overlap_backward (its default, as DDP), 0 without",
              "DDP's bucketed all-reduce hides behind the backward pass (1); the SGP reference's AR-SGD of the v1 "
              "paper's time does not (0: parameters averaged after the step, its commit 33c362c), its "
              "PyTorch-1.0 version is DDP (commit 1230036); the papers do not say which rows used which",
              "facebookresearch/stochastic_gradient_push commits 33c362c (no overlap), 1230036 (DDP)"),
)


def parameter(name: str) -> Parameter:
    """The entry of ``name``; an unknown name is a ``KeyError`` naming the known ones."""
    for p in PARAMETERS:
        if p.name == name:
            return p
    raise KeyError(f"unknown parameter {name!r}; known: {', '.join(p.name for p in PARAMETERS)}")


def _fmt(p: Parameter, v: float) -> str:
    if p.how == "scale":
        return f"{v:g}x"
    if p.name == "msg_overhead_s":
        return f"{v * 1e6:g} us"
    return f"{v:g}"


def markdown() -> str:
    """The table of every parameter (docs/sim-parameter-sources.md shows it verbatim)."""
    rows = ["| parameter | nominal (where it lives) | range | kind | source |", "|---|---|---|---|---|"]
    for p in PARAMETERS:
        rows.append(f"| {p.label} (`{p.name}`) | {p.nominal} | {_fmt(p, p.low)} - {_fmt(p, p.high)} | {p.kind} "
                    f"| {p.source or 'none: a scenario axis'} |")
    from .opcost import TCP_MSG_SOURCE, TCP_MSG_US  # noqa: PLC0415

    rows += ["", "Nominal every-message efficiency per platform preset (`platform.msg_efficiency`):", "",
             "| platform | nominal | source |", "|---|---|---|"]
    rows += [f"| {k} | {v:g} | {s or 'none: line rate assumed'} |" for k, (v, s) in msg_efficiencies().items()]
    rows += ["", f"Per-message overhead of the paper profiles (`msg_us`, impls/sim/opcost.py `TCP_MSG_US`): "
                 f"{TCP_MSG_US:g} us; {TCP_MSG_SOURCE}."]
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
