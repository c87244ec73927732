"""One server base: every method whose roles include a server derives from
:class:`impls.families.ps.ServerBase`, and the base's one checkpoint form restores a server's state
(its parameters, version, optimizer momentum, compressor memory) and a worker's, for each
server method, in one process (a server rank alone: its set-up broadcast has no peer)."""

from __future__ import annotations

import io

import pytest
import torch
from torch import nn

from conftest import make_config
from impls.algorithms import algorithm_config, load_all
from impls.comm.communicator import Communicator
from impls.protocol import Context
from impls.families.ps import ServerBase
from impls.config.runconfig import resolve

W = 2
OPT = {"lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-4}
SERVER_METHODS = {name for name in load_all().names()
                  if "server" in load_all().get(name).roles(W, algorithm_config({"name": name})[1])}


def test_every_method_with_a_server_derives_from_the_one_base():
    assert SERVER_METHODS >= {"ps_sync", "ps_async", "ps_ssp", "ps_cyclic", "ddcgu", "signum_mv", "ef_blocksgdm"}
    for name in SERVER_METHODS:
        assert issubclass(load_all().get(name), ServerBase), name


def _algo(name: str, rank: int):
    cls = load_all().get(name)
    opt = {**OPT, **(cls.supported_optimizers or {}).get("sgd", {})}  # signum_mv: momentum 0
    res = resolve(make_config(name, W, workload={"optimizer": opt}))
    algo = res.algorithm_cls(res.algorithm, Context(rank, W, Communicator(), res.optim, 1))
    torch.manual_seed(0)
    algo.setup(nn.Sequential(nn.Linear(7, 5), nn.Tanh(), nn.Linear(5, 3)))
    return algo


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(map(_same, a, b))
    return a == b


def _through_a_file(state: dict) -> dict:
    buf = io.BytesIO()
    torch.save(state, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=False)


def _advance(srv, g: torch.Tensor) -> torch.Tensor | None:
    """One update of the server's state through its own parts: an optimizer step (momentum),
    or a compression (an error-feedback memory); returns the compressor's output."""
    if srv.optimizer is not None:
        srv.apply(g, 0.05, 0.5)
    out = srv.compressor.compress(g.clone()) if srv.compressor is not None else None
    return out


@pytest.mark.parametrize("name", sorted(SERVER_METHODS))
def test_the_checkpoint_round_trip_restores_the_server_state(name):
    srv_algo = _algo(name, W)  # the first server rank
    srv = srv_algo.server
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        srv.x.copy_(torch.randn(srv.x.shape, generator=gen))
    for _ in range(3):
        _advance(srv, torch.randn(srv.x.shape, generator=gen))
    srv.version = 7
    state = _through_a_file(srv_algo.state_dict())
    assert set(state["server"]) == {"params", "version", "optimizer", "compressor"} and state["worker"] is None
    assert state["server"]["optimizer"] is not None or state["server"]["compressor"] is not None, name

    fresh = _algo(name, W)
    assert not _same(fresh.state_dict(), state)  # the state above is not the initial one
    fresh.load_state_dict(state)
    assert _same(fresh.state_dict(), state) and fresh.server.version == 7
    g = torch.randn(srv.x.shape, generator=gen)  # the restored momentum / memory act as the original's
    a, b = _advance(srv, g), _advance(fresh.server, g)
    assert torch.equal(srv.x, fresh.server.x) and _same(a, b)
    fresh.server.commit()  # the epoch end writes x into the server's model (its checkpointed model)
    flat = torch.cat([p.detach().flatten() for p in fresh.model.parameters()])
    assert torch.equal(flat[srv.lo: srv.hi], srv.x.detach())

    worker = _algo(name, 0)
    wstate = _through_a_file(worker.state_dict())
    assert wstate["server"] is None and isinstance(wstate["worker"], dict)
    again = _algo(name, 0)
    again.load_state_dict(wstate)
    assert _same(again.state_dict(), wstate)


def test_a_checkpoint_of_the_old_per_method_form_is_refused_by_name():
    """signum_mv's and ef_blocksgdm's checkpoints before the one base: {"momentum": ..., ...}."""
    with pytest.raises(ValueError, match="another form than ServerBase's.*delete the run's checkpoint"):
        _algo("ef_blocksgdm", 0).load_state_dict({"momentum": torch.zeros(3), "error_feedback": {}})
    with pytest.raises(ValueError, match="another form than ServerBase's"):
        _algo("ps_sync", W).load_state_dict({"server": {"optimizer": {}, "version": 3}, "version": [3.0]})
