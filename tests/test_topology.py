"""Tier 1: communication graphs, their mixing matrices, and the gossip methods' graph checks."""

import math

import pytest
import torch

from impls.algorithms import algorithm_config
from impls.errors import ConfigError
from impls.optim import SGDConfig
from impls.protocol import Context
from impls.comm.topology import TOPOLOGIES, build_topology, period_spectral_gap, spectral_gap

SPECS = [
    ("complete", {}), ("ring", {}), ("exponential", {"peers": 1}), ("exponential", {"peers": 2}),
    ("bipartite_exponential", {}),
]
WORLDS = [2, 3, 4, 5, 6, 8, 16]


def graphs():
    for name, kw in SPECS:
        for n in WORLDS:
            if name == "bipartite_exponential" and n % 2:
                continue
            if kw.get("peers", 1) > max(1, math.ceil(math.log2(n))):
                continue
            yield name, kw, n


@pytest.mark.parametrize("name,kw,n", list(graphs()))
def test_every_mixing_matrix_is_column_stochastic_and_peers_agree(name, kw, n):
    g = build_topology({"name": name, **kw}, n)
    for t in range(2 * g.period + 1):
        W = g.mixing_matrix(t)
        assert torch.all(W >= 0)
        # PushSum needs column sums 1: every rank hands out exactly all of its mass
        assert torch.allclose(W.sum(0), torch.ones(n, dtype=W.dtype), atol=1e-12, rtol=0)
        for i in range(n):  # i sends to j  <=>  j hears from i
            for j in g.out_peers(i, t):
                assert i in g.in_peers(j, t) and j != i
            assert len(set(g.out_peers(i, t))) == len(g.out_peers(i, t))


@pytest.mark.parametrize("name,kw,n", [s for s in graphs() if TOPOLOGIES.get(s[0]).symmetric])
def test_symmetric_graphs_give_symmetric_doubly_stochastic_matrices(name, kw, n):
    """What D-PSGD and D^2 assume of W (Lian et al. 2017; Tang et al. 2018)."""
    g = build_topology({"name": name, **kw}, n)
    for t in range(2 * g.period + 1):
        W = g.mixing_matrix(t)
        assert torch.equal(W, W.T)
        assert torch.allclose(W.sum(1), torch.ones(n, dtype=W.dtype), atol=1e-12, rtol=0)


@pytest.mark.parametrize("n", [2, 4, 8, 16, 32])
def test_one_peer_exponential_graph_averages_exactly_in_log2_n_steps(n):
    """Assran et al. 2019: the product of log2(n) consecutive 1-peer matrices is 11^T/n."""
    g = build_topology({"name": "exponential", "peers": 1}, n)
    assert g.period == int(math.log2(n))
    for start in range(g.period):  # any window of log2(n) steps, not only from 0
        P = torch.eye(n, dtype=torch.float64)
        for t in range(start, start + g.period):
            P = g.mixing_matrix(t) @ P
        assert torch.equal(P, torch.full((n, n), 1.0 / n, dtype=torch.float64))
    assert period_spectral_gap(g) == pytest.approx(1.0, abs=1e-12)
    if n > 2:  # one step alone does not average
        assert spectral_gap(g.mixing_matrix(0)) < 1 - 1e-6


def test_one_peer_exponential_graph_does_not_average_exactly_for_6_ranks():
    g = build_topology({"name": "exponential", "peers": 1}, 6)
    P = torch.eye(6, dtype=torch.float64)
    for t in range(g.period):
        P = g.mixing_matrix(t) @ P
    assert not torch.allclose(P, torch.full((6, 6), 1 / 6, dtype=torch.float64), atol=1e-3)
    assert 0 < period_spectral_gap(g) < 1


@pytest.mark.parametrize("n", [3, 4, 5, 8, 16])
def test_spectral_gap_of_ring_matches_the_closed_form(n):
    """Uniform ring: eigenvalues 1/3 + 2/3 cos(2 pi k / n); gap = 1 - max_{k>0} |lambda_k|."""
    W = build_topology("ring", n).mixing_matrix(0)
    expect = 1 - max(abs(1 / 3 + 2 / 3 * math.cos(2 * math.pi * k / n)) for k in range(1, n))
    assert spectral_gap(W) == pytest.approx(expect, abs=1e-12)


def test_spectral_gap_extremes():
    assert spectral_gap(build_topology("complete", 5).mixing_matrix(0)) == pytest.approx(1.0, abs=1e-12)
    assert spectral_gap(torch.eye(4, dtype=torch.float64)) == pytest.approx(0.0, abs=1e-12)
    # pairwise averaging on a perfect matching leaves the pairs' disagreement: gap 0 for one step
    assert spectral_gap(build_topology("bipartite_exponential", 4).mixing_matrix(0)) == pytest.approx(0, abs=1e-12)


@pytest.mark.parametrize("n", [2, 4, 6, 8])
def test_bipartite_exponential_pairs_active_with_passive_ranks(n):
    g = build_topology("bipartite_exponential", n)
    for t in range(g.period):
        partners = [g.partner(i, t) for i in range(n)]
        for i, p in enumerate(partners):
            assert partners[p] == i and (i % 2) != (p % 2)


# -- bad input -------------------------------------------------------------------------------------

def test_unknown_topology_lists_the_known_ones():
    with pytest.raises(ConfigError) as e:
        build_topology("torus", 4)
    for name in ("bipartite_exponential", "complete", "exponential", "ring"):
        assert name in str(e.value)


@pytest.mark.parametrize("peers", [0, 3, -1])
def test_exponential_peers_out_of_range(peers):
    with pytest.raises(ConfigError, match=r"algorithm.topology.peers: must be between 1 and 2 for 4 ranks"):
        build_topology({"name": "exponential", "peers": peers}, 4)


def test_bipartite_needs_an_even_number_of_ranks():
    with pytest.raises(ConfigError, match="even number of ranks, got 5"):
        build_topology("bipartite_exponential", 5)


def test_unknown_topology_argument():
    with pytest.raises(ConfigError) as e:
        build_topology({"name": "ring", "peers": 2}, 4)
    assert e.value.key == "algorithm.topology.peers"
    assert "unknown key for topology 'ring'; allowed keys: name" in str(e.value)
    with pytest.raises(ConfigError) as e:
        build_topology({"name": "exponential", "peer": 2}, 4)
    assert e.value.key == "algorithm.topology.peer" and "allowed keys: name, peers" in str(e.value)


def _algo(spec, world=4, momentum=0.0):
    cls, cfg = algorithm_config(spec)
    return cls(cfg, Context(0, world, None, SGDConfig(lr=0.1, momentum=momentum, nesterov=False), 1))


@pytest.mark.parametrize("method", ["sgp", "osgp", "dpsgd", "d2"])
def test_gossip_methods_reject_unknown_topology_at_config_time(method):
    with pytest.raises(ConfigError, match=r"algorithm.topology.name: unknown topology 'star'; known: "
                                          r"bipartite_exponential, complete, exponential, ring"):
        algorithm_config({"name": method, "topology": "star"})


@pytest.mark.parametrize("method", ["dpsgd", "d2"])
def test_doubly_stochastic_methods_reject_a_directed_graph(method):
    with pytest.raises(ConfigError, match=r"algorithm.topology.name: 'exponential' is directed .*"
                                          r"bipartite_exponential, complete, ring"):
        algorithm_config({"name": method, "topology": {"name": "exponential", "peers": 1}})


def test_sgp_peers_out_of_range_at_start_up():
    with pytest.raises(ConfigError, match="algorithm.topology.peers"):
        _algo({"name": "sgp", "topology": {"name": "exponential", "peers": 2}}, world=2)


def test_d2_eigenvalue_condition():
    """Uniform ring, even n >= 4: lambda_min(W) = -1/3 exactly, outside D^2's assumption."""
    with pytest.raises(ConfigError, match=r"algorithm.mixing: smallest eigenvalue of W is -0.3333"):
        _algo({"name": "d2", "topology": "ring", "mixing": "plain"}, world=4)
    auto = _algo({"name": "d2", "topology": "ring"}, world=4)
    assert auto.lazy  # auto falls back to (W + I) / 2 ...
    W = auto.graph.mixing_matrix(0)
    assert torch.linalg.eigvalsh((W + torch.eye(4, dtype=W.dtype)) / 2).min() >= -1e-12
    assert not _algo({"name": "d2", "topology": "ring"}, world=5).lazy  # ... only where needed
    assert not _algo({"name": "d2", "topology": "ring", "mixing": "plain"}, world=3).lazy
    assert _algo({"name": "d2", "topology": "complete", "mixing": "lazy"}, world=3).lazy


def test_d2_needs_a_fixed_graph_and_plain_sgd():
    with pytest.raises(ConfigError, match="d2 needs a fixed W; 'bipartite_exponential' changes every iteration"):
        _algo({"name": "d2", "topology": "bipartite_exponential"}, world=4)
    _algo({"name": "d2", "topology": "bipartite_exponential"}, world=2)  # one pairing: fixed
    # the optimizer is checked centrally, for every algorithm, when a run's config is resolved
    from impls.config.runconfig import resolve

    raw = {"experiment": "e", "method": "d2", "nodes": 4, "seed": 1, "algorithm": {"name": "d2"},
           "workload": {"dataset": {"name": "digits"}, "model": {"name": "mlp"},
                        "optimizer": {"lr": 0.1, "momentum": 0.9}}}
    with pytest.raises(ConfigError) as e:
        resolve(raw)
    assert e.value.key == "workload.optimizer.momentum"
    assert "d2 needs sgd with momentum: 0.0 (got 0.9)" in str(e.value)
    raw["workload"]["optimizer"] = {"name": "adam"}
    with pytest.raises(ConfigError, match=r"workload.optimizer.name: d2 implements its own update and accepts "
                                          r"the optimizer\(s\) sgd, not 'adam'"):
        resolve(raw)
    raw["workload"]["optimizer"] = {"lr": 0.1, "momentum": 0.0}
    assert resolve(raw).optim.momentum == 0.0


def test_osgp_tau_must_be_non_negative():
    with pytest.raises(ConfigError, match="algorithm.tau: must be >= 0"):
        algorithm_config({"name": "osgp", "tau": -1})


def test_dpsgd_order_choices():
    with pytest.raises(ConfigError, match="allowed values: mix_then_step, step_then_mix"):
        algorithm_config({"name": "dpsgd", "order": "whenever"})


@pytest.mark.parametrize("name", ["ring", "complete"])
def test_closed_form_smallest_eigenvalue_matches_the_matrix(name):
    """D^2's check at validation uses the closed form (no n x n matrix, issue 26 row 2)."""
    for n in range(1, 26):
        g = build_topology(name, n)
        assert g.min_eigenvalue(0) == pytest.approx(float(torch.linalg.eigvalsh(g.mixing_matrix(0)).min()), abs=1e-12)
