"""The Fig. 9 spatial ladders with n = 4L + 2, m = 4L (``loopdyn.examples.fig9_ladders``):
counts, assembled q0, full rank, RCR's linear plan, and the pendulum ladders' Fig. 10
equivalence with one 2-DOF spatial pendulum.  (Every method against the oracle on
them: the catalog lists of ``closed_helpers`` and ``test_rcr``.)"""

import numpy as np
import pytest

import loopdyn as ld
from closed_helpers import consistent_state
from loopdyn.methods import rcr as R


@pytest.mark.parametrize("factory", [ld.examples.hooke_ladder, ld.examples.pendulum_ladder])
@pytest.mark.parametrize("L", [1, 2, 7])
def test_counts_q0_and_rank(factory, L):
    model = factory(L)
    bodies = 2 * L + 1
    assert model.nbodies == bodies and model.nv == 4 * L + 2 and model.m == 4 * L
    assert np.abs(ld.closure_residual(model, model.q0)).max() < 1e-12
    q, v, _ = consistent_state(model, np.random.default_rng(L))
    info = ld.constraint_rank(model, q)
    assert info.rank == 4 * L and info.condition < 1e3  # 2 DOF, well away from singular
    assert np.abs(ld.constraints(model, q)[1] @ v).max() < 1e-12


@pytest.mark.parametrize("factory", [ld.examples.hooke_ladder, ld.examples.pendulum_ladder])
def test_rcr_plan_is_the_ladder_chain(factory):
    """Post (pendulum) 0's Hooke's joint independent, every later loop all dependent
    and chained to the one before: the Sec. 4.3 structure, O(n + m) memory."""
    for L in (6, 48):
        model = factory(L)
        d = model.create_data()
        q, v, tau = consistent_state(model, np.random.default_rng(0))
        res = ld.forward_dynamics(model, q, v, tau, method="rcr", data=d)
        a = ld.forward_dynamics(model, q, v, tau, method="augmented")
        assert res.method == "rcr"
        assert np.abs(res.qdd - a.qdd).max() < 1e-10 * max(1.0, np.abs(a.qdd).max())
        plan = R.plan_for(model, d)
        assert len(plan.blocks) == (L if factory is ld.examples.hooke_ladder else 2 * L)
        assert plan.blocks[0][3] == (0, 1)
        assert all(b[3] == () for b in plan.blocks[1:])
        assert max(int(b[R.B_M]) * int(b[R.B_NP]) for b in plan.table) <= 24  # J_i: 4 × 6
        assert plan.fw.size < 200 * model.nv


def test_pendulum_ladders_move_like_the_equivalent_pendulum():
    """Fig. 10: with the mass divided among the pendulums, every L has the independent
    trajectories q1, q2 of ``fig9_pendulum`` (here to 1e-9 over 2 s, simulated with
    RCR in its independent coordinates)."""
    eq = ld.examples.fig9_pendulum()
    v0 = np.array([0.8, -0.5])
    kw = dict(t_end=2.0, t_eval=11, rtol=1e-11, atol=1e-11)
    ref = ld.simulate(eq, np.array([0.4, -0.2]), v0, **kw)
    for L in (1, 3):
        model = ld.examples.pendulum_ladder(L)
        q0 = ld.assemble(model, np.tile([0.4, -0.2], 2 * L + 1))
        v = ld.complete_velocity(model, q0, np.concatenate([v0, np.zeros(model.nv - 2)]))
        traj = ld.simulate(model, q0, v, method="rcr", stabilization="partitioning", **kw)
        assert traj.completed
        assert np.abs(traj.q[:, :2] - ref.q[:, :2]).max() < 1e-9
        assert np.abs(traj.q[:, :2] - traj.q[0, :2]).max() > 0.1  # it did move


def test_bad_sizes():
    for factory in (ld.examples.hooke_ladder, ld.examples.pendulum_ladder):
        with pytest.raises((ValueError, ld.ModelError)):
            factory(0)
