"""The compiled simulation loop (``loopdyn.sim.compiled``) equals the Python loop."""

import itertools
import os
import signal

import numba
import numpy as np
import pytest

import loopdyn as ld


@pytest.mark.parametrize(
    "integrator, kw",
    [
        ("RK45", dict(rtol=1e-9, atol=1e-9)),
        ("DOP853", dict(rtol=1e-10, atol=1e-10)),
        ("RK4", dict(dt=2e-3)),
    ],
)
@pytest.mark.parametrize("stabilization", ["projection", "none", "baumgarte"])
def test_compiled_loop_equals_python_loop(integrator, kw, stabilization):
    model = ld.examples.four_bar()
    args = dict(t_end=1.0, integrator=integrator, stabilization=stabilization, t_eval=41, **kw)
    a = ld.simulate(model, tau=[0.5], compiled=True, **args)
    b = ld.simulate(model, tau=[0.5], compiled=False, **args)
    assert a.stats["compiled"] and not b.stats["compiled"]
    assert a.stats["steps"] == b.stats["steps"] and a.stats["nfev"] == b.stats["nfev"]
    np.testing.assert_array_equal(a.t, b.t)
    for name in ("q", "v", "energy", "residual_position"):
        np.testing.assert_allclose(getattr(a, name), getattr(b, name), rtol=0, atol=1e-9)
    np.testing.assert_allclose(a.qdd, b.qdd, rtol=0, atol=1e-7)
    np.testing.assert_allclose(a.lam, b.lam, rtol=0, atol=1e-7)
    np.testing.assert_array_equal(a.tau, b.tau)
    assert a.completed and isinstance(a, ld.Trajectory)


def test_compiled_loop_other_method_and_model():
    model = ld.examples.five_bar()
    args = dict(t_end=0.5, integrator="RK45", method="recursive_lambda", t_eval=11)
    a = ld.simulate(model, compiled=True, **args)
    b = ld.simulate(model, compiled=False, **args)
    np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-9)
    np.testing.assert_allclose(a.energy, b.energy, rtol=0, atol=1e-9)


def test_compiled_loop_applies_or_says_why():
    model = ld.examples.four_bar()
    with pytest.raises(ValueError, match="does not apply: tau is a Python controller"):
        ld.simulate(model, t_end=0.1, integrator="RK45", tau=lambda t, q, v: [0.0], compiled=True)
    with pytest.raises(ValueError, match="does not apply: integrator 'Radau'"):
        ld.simulate(model, t_end=0.1, integrator="Radau", compiled=True)


def _same_run(a, b, atol_q=1e-9, atol_v=1e-8):
    """Two runs of the same motion took the same steps and agree to the tolerances."""
    assert a.stats["compiled"] and not b.stats["compiled"]
    assert a.stats["steps"] == b.stats["steps"] and a.stats["nfev"] == b.stats["nfev"]
    assert a.stats["projections"] == b.stats["projections"]
    assert a.q.shape == b.q.shape and a.v.shape == b.v.shape
    np.testing.assert_allclose(a.q, b.q, rtol=0, atol=atol_q)
    np.testing.assert_allclose(a.v, b.v, rtol=0, atol=atol_v)
    np.testing.assert_allclose(a.energy, b.energy, rtol=0, atol=1e-9)
    np.testing.assert_allclose(a.residual_position, b.residual_position, rtol=0, atol=1e-12)


@pytest.mark.parametrize(
    "integrator, stabilization, kw",
    [
        ("DOP853", "projection", dict(rtol=1e-10, atol=1e-10)),
        ("DOP853", "none", dict(rtol=1e-10, atol=1e-10)),
        ("RK45", "baumgarte", {}),
        ("DOP853", "partitioning", dict(rtol=1e-10, atol=1e-10)),
        ("RK4", "projection", dict(dt=2e-3)),
    ],
)
def test_compiled_loop_with_quaternions_equals_python_loop(integrator, stabilization, kw):
    """The Stewart platform's spherical joints: the compiled loop integrates y = (δ, v) in
    a chart q = qa ⊕ δ re-anchored at every step, as the Python loop; the quaternions
    stay unit and the closures hold (partitioning repartitions at ~0.4 s here)."""
    model = ld.examples.stewart()
    args = dict(t_end=0.5, integrator=integrator, stabilization=stabilization, t_eval=11, **kw)
    a = ld.simulate(model, compiled=True, **args)
    b = ld.simulate(model, compiled=False, **args)
    _same_run(a, b)
    assert [r[1] for r in a.stats["repartitions"]] == [r[1] for r in b.stats["repartitions"]]
    spherical = [model.q_slice(i) for i, j in enumerate(model.joint_types) if j == "spherical"]
    assert spherical
    for s in spherical:
        np.testing.assert_allclose(np.linalg.norm(a.q[:, s], axis=1), 1.0, rtol=0, atol=1e-14)
    assert a.residual_position.max() < (
        1e-11 if stabilization in ("projection", "partitioning") else 1e-8
    )


@pytest.mark.parametrize(
    "integrator, kw", [("DOP853", dict(rtol=1e-10, atol=1e-10)), ("RK4", dict(dt=1e-3))]
)
def test_compiled_loop_runs_trees(integrator, kw):
    """A tree (no closure: the ABA, ``dynamics.tree_entry``) runs compiled, with free and
    spherical joints (random_tree) as without (the 6-DOF arm), and equals the Python loop;
    in free motion the energy is conserved."""
    tree = ld.examples.random_tree(8, 0)
    assert {"free", "spherical"} <= set(tree.joint_types)
    v0 = np.random.default_rng(1).normal(size=tree.nv)
    for model, v in ((tree, v0), (ld.examples.serial_arm(), np.ones(6))):
        args = dict(t_end=0.5, integrator=integrator, t_eval=11, **kw)
        a = ld.simulate(model, model.q0, v, compiled=True, **args)
        b = ld.simulate(model, model.q0, v, compiled=False, **args)
        _same_run(a, b)
        assert a.lam.shape == (11, 0)
        assert np.ptp(a.energy) < 1e-6 * max(1.0, np.abs(a.energy).max())


@pytest.mark.parametrize(
    "method, stabilization, integrator",
    [
        ("augmented", "projection", "DOP853"),
        ("augmented", "partitioning", "DOP853"),
        ("slm", "baumgarte", "RK45"),
        ("embedding", "none", "DOP853"),
        ("sslm", "projection", "RK4"),
    ],
)
def test_compiled_loop_with_redundant_closures_equals_python_loop(
    method, stabilization, integrator
):
    """The closed-knee leg's planar loop closed by a spatial hinge: 5 rows of rank 2.  The
    compiled loop solves on the independent rows, checks the dropped ones at every
    evaluation (``dynamics.dropped_rows_hold``) and reports the minimum-norm multipliers
    over all 5 rows, as ld.forward_dynamics and the Python loop."""
    model = ld.examples.closed_knee_leg()
    assert ld.constraint_rank(model, model.q0).dropped.size == 3
    kw = dict(dt=1e-3) if integrator == "RK4" else dict(rtol=1e-10, atol=1e-10)
    args = dict(t_end=0.5, method=method, stabilization=stabilization, integrator=integrator)
    a = ld.simulate(model, compiled=True, t_eval=11, **args, **kw)
    b = ld.simulate(model, compiled=False, t_eval=11, **args, **kw)
    _same_run(a, b)
    assert a.lam.shape == (11, 5)
    np.testing.assert_allclose(a.lam, b.lam, rtol=0, atol=1e-9 * np.abs(b.lam).max())
    k = 5
    ref = ld.forward_dynamics(model, a.q[k], a.v[k], a.tau[k], method=method)
    np.testing.assert_allclose(a.lam[k], ref.lam, rtol=0, atol=1e-9 * np.abs(ref.lam).max())


def test_the_compiled_dropped_row_test_is_never_laxer_than_the_checked_path():
    """``dropped_rows_hold`` (compiled, the simulation loop's) passes an answer only where
    ``_broken_rows`` (ld.forward_dynamics's) finds every dropped row held: on the
    hypothesis reproducers whose dropped rows are violated (seeds 20261172b, 20261178)
    it refuses the method's answer, on consistent states of the closed-knee leg it passes."""
    import runpy
    from pathlib import Path

    from loopdyn.methods import dynamics

    def judged(model, q, v, tau):
        d = model.create_data()
        info = ld.constraint_rank(model, q, data=d)
        assert info.dropped.size
        d.set_rows(info.independent)
        call = dynamics.BINDERS["augmented"](model, d)
        qdd, lam = np.empty(model.nv), np.empty(model.m)
        assert call(q, v, tau, qdd, lam) > 0.0
        broken = dynamics._broken_rows(d, info, q, v, tau, qdd)
        ctx, _ = dynamics.bound_buffers(call)
        size = dynamics.model_size(model)
        return broken.size == 0, dynamics.dropped_rows_hold(ctx, info.dropped, size, q, v, qdd)

    for name in ("hypothesis_20261172b.mech", "hypothesis_20261178.mech"):
        g = runpy.run_path(str(Path(__file__).parent / "data" / name))
        held, hold = judged(g["model"], g["q"], g["v"], g["tau"])
        assert not held and not hold, name
    model = ld.examples.closed_knee_leg()
    rng = np.random.default_rng(5)
    for _ in range(5):
        q = ld.assemble(model, model.q0 + 0.3 * rng.normal(size=model.nq))
        v = ld.complete_velocity(model, q, rng.normal(size=model.nv))
        held, hold = judged(model, q, v, rng.normal(size=model.nv))
        assert held and hold


def test_a_failed_solve_takes_the_augmented_fallback_inside_the_compiled_loop():
    """DeNOC on the Delta robot loses accuracy at 5 stages of this 0.5 s (J q̈ = γ off:
    INACCURATE), where ld.forward_dynamics answers with its dense fallback: the compiled
    loop does the same (it handed the whole run back to the Python loop) and ends where
    the Python loop does, to the integrator tolerance."""
    model = ld.examples.delta()
    args = dict(t_end=0.5, method="denoc", stabilization="partitioning", t_eval=11)
    # the fallback is visible: one FallbackWarning per model and method, and counted
    with pytest.warns(ld.FallbackWarning, match="'denoc'.*compiled simulation loop"):
        a = ld.simulate(model, compiled=True, **args)
    assert a.stats["fallbacks"] >= 1
    b = ld.simulate(model, compiled=False, **args)
    assert a.stats["compiled"] and a.stats["steps"] == b.stats["steps"]
    assert [r[1] for r in a.stats["repartitions"]] == [r[1] for r in b.stats["repartitions"]]
    np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-8)
    np.testing.assert_allclose(a.energy, b.energy, rtol=0, atol=1e-8)
    assert a.residual_position.max() < 1e-11


@pytest.mark.parametrize(
    "case, kw", [((18, 90), {}), ((20, 239), {"stabilization": "partitioning"})]
)
def test_the_compiled_monitor_reselects_degenerate_redundant_rows(case, kw):
    """Random mechanisms whose watched rows (redundant closures: the rows independent at
    the start) lose rank where J does not, at t ~ 0.01 s: the Python loop's monitor
    re-selects them (System.mobility_crossed) and so does the compiled one now (it handed
    the run back): the same steps and states.  (20, 239): with quaternions and
    partitioning."""
    import mechanisms as mx

    mech = mx.random_mechanism(case)
    args = (mech.model, mech.q, mech.v, 0.3)
    opts = dict(t_eval=31, rtol=1e-10, atol=1e-10, **kw)
    a = ld.simulate(*args, compiled=True, **opts)
    b = ld.simulate(*args, compiled=False, **opts)
    assert ld.constraint_rank(mech.model, mech.q).dropped.size
    _same_run(a, b)


@pytest.mark.parametrize("integrator", ["DOP853", "RK4"])
def test_a_mechanism_with_no_independent_coordinate_partitions_compiled(integrator):
    """Random mechanism (24, 13): 4 coordinates, closures of rank 4 (a structure).
    Partitioning integrates nothing: scipy's solver steps to t_end at once (the compiled
    loop divided by the empty state's size and handed the run back), RK4 takes its
    fixed steps; every output is the assembled state, as in the Python loop."""
    import mechanisms as mx

    mech = mx.random_mechanism((24, 13))
    assert mech.model.nv == ld.constraint_rank(mech.model, mech.q).rank == 4
    args = (mech.model, mech.q, mech.v, 0.3)
    opts = dict(t_eval=31, method="rcr", stabilization="partitioning", integrator=integrator)
    a = ld.simulate(*args, compiled=True, **opts)
    b = ld.simulate(*args, compiled=False, **opts)
    _same_run(a, b)
    np.testing.assert_allclose(a.q, np.tile(mech.q, (31, 1)), rtol=0, atol=1e-12)


def test_compiled_loop_equals_python_loop_on_random_mechanisms():
    """Hypothesis's random mechanisms (trees of every joint type, spherical and free ones
    too, closures of every kind, redundant ones ~20 %) from their consistent state, 0.1 s
    of free motion: the compiled loop (default) and the Python loop end in the same
    states to the integrator's tolerance, or raise the same error.  Not the same steps
    always: at rest on a spherical joint with a vacuous closure (hypothesis), q̈'s
    rounding (3e-14 on the universal joint) grows to 2e-11 in q within 0.2 s, and one
    loop took 6 steps where the other took 5.  Derandomized (the same 20 mechanisms
    every run); the simulation census runs thousands (benchmarks/random_sim_census.py)."""
    from hypothesis import HealthCheck, given, settings

    import mechanisms as mx

    compiled = []

    @given(mx.mechanisms(max_bodies=6, max_closures=2))
    @settings(max_examples=20, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    def check(mech):
        if mech.model.nv == 0:
            return
        args = (mech.model, mech.q, mech.v, 0.1)
        kw = dict(t_eval=6, rtol=1e-10, atol=1e-10)
        out = []
        for c in (None, False):
            try:
                out.append(ld.simulate(*args, compiled=c, **kw))
            except ld.SimulationError as e:
                out.append(e)
        a, b = out
        if isinstance(b, Exception):
            assert type(a) is type(b), (a, b)
            return
        compiled.append(a.stats["compiled"])
        scale = max(1.0, np.abs(b.q).max())
        np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-8 * scale)
        np.testing.assert_allclose(
            a.energy, b.energy, rtol=0, atol=1e-7 * max(1.0, np.abs(b.energy).max())
        )

    check()
    assert sum(compiled) >= 0.9 * len(compiled) > 0, compiled


@numba.njit
def _pd(t, q, v):
    """A compiled controller: PD on the crank towards 1 rad plus a time-varying torque."""
    return np.array([-5.0 * (q[0] - 1.0) - 1.0 * v[0] + np.sin(3.0 * t)])


def _pd_python(t, q, v):
    return [-5.0 * (q[0] - 1.0) - 1.0 * v[0] + np.sin(3.0 * t)]


@pytest.mark.parametrize(
    "integrator, kw",
    [("DOP853", dict(rtol=1e-10, atol=1e-10)), ("RK45", {}), ("RK4", dict(dt=2e-3))],
)
def test_compiled_controller_equals_the_python_controller(integrator, kw):
    """An njit controller τ(t, q, v) runs inside the compiled loop (time-dependent: the
    stages are evaluated at their own times) and gives the Python loop's motion."""
    model = ld.examples.four_bar()
    args = dict(t_end=1.0, integrator=integrator, t_eval=21, **kw)
    a = ld.simulate(model, tau=_pd, compiled=True, **args)
    b = ld.simulate(model, tau=_pd_python, compiled=False, **args)
    assert a.stats["compiled"] and a.stats["steps"] == b.stats["steps"]
    np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-9)
    np.testing.assert_allclose(a.tau, b.tau, rtol=0, atol=1e-9)
    assert np.ptp(a.tau[:, 0]) > 0.5  # the controller acted


@numba.njit
def _wrong_shape(t, q, v):
    return np.zeros(2)


@numba.njit
def _blows_up(t, q, v):
    """A number (one actuated coordinate: tau_function's rule), finite until 0.05 s.
    (One controller per case: the loop is compiled for each.)"""
    return np.inf if t > 0.05 else np.sin(t)


def test_compiled_controller_failures_are_the_python_loops_errors():
    """A controller with the wrong shape or a non-finite value: the compiled loop hands
    back, and the Python loop raises its documented error."""
    model = ld.examples.four_bar()
    with pytest.raises(ValueError, match="returned by the controller"):
        ld.simulate(model, t_end=0.1, tau=_wrong_shape)
    with pytest.raises(ld.SimulationError, match="non-finite tau") as e:
        ld.simulate(model, t_end=0.1, tau=_blows_up)
    assert e.value.trajectory is not None and not e.value.trajectory.completed
    # up to 0.05 s the compiled loop ran it (a number for the one actuator)
    a = ld.simulate(model, t_end=0.05, t_eval=6, tau=_blows_up, compiled=True)
    b = ld.simulate(model, t_end=0.05, t_eval=6, tau=lambda t, q, v: np.sin(t), compiled=False)
    assert a.stats["compiled"]
    np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a.tau, b.tau, rtol=0, atol=1e-15)


def test_simulate_batch_equals_simulate_element_by_element():
    model = ld.examples.four_bar()
    n = 6
    Q = np.tile(model.q0, (n, 1))
    Q[:, 0] = np.linspace(0.6, 1.8, n)
    V = np.zeros((n, model.nv))
    V[:, 0] = np.linspace(-1.0, 1.0, n)
    T = np.linspace(-1.0, 1.0, n)[:, None]
    for tau, stab in ((None, "projection"), (T, "baumgarte"), (_pd, "none")):
        args = dict(t_eval=11, stabilization=stab)
        batch = ld.simulate_batch(model, Q, V, 0.5, tau, threads=2, **args)
        assert len(batch) == n and all(t.stats["compiled"] for t in batch)
        for i in range(n):
            ti = T[i] if tau is T else tau
            one = ld.simulate(model, Q[i], V[i], 0.5, ti, **args)
            assert batch[i].stats["steps"] == one.stats["steps"]
            np.testing.assert_allclose(batch[i].q, one.q, rtol=0, atol=1e-12)
            np.testing.assert_allclose(batch[i].tau, one.tau, rtol=0, atol=1e-12)
    # one thread = two threads, and a Python controller (the Python loop, serially)
    a = ld.simulate_batch(model, Q, V, 0.5, threads=1, t_eval=11)
    b = ld.simulate_batch(model, Q, V, 0.5, threads=2, t_eval=11)
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x.q, y.q)
    c = ld.simulate_batch(model, Q[:2], V[:2], 0.5, _pd_python, t_eval=11)
    assert not any(t.stats["compiled"] for t in c)
    np.testing.assert_allclose(
        c[1].q, ld.simulate(model, Q[1], V[1], 0.5, _pd_python, t_eval=11).q, rtol=0, atol=0
    )


def test_simulate_batch_with_quaternions_runs_compiled():
    """The Stewart platform's elements run in the compiled loop's threads, each equal to
    its ld.simulate."""
    model = ld.examples.stewart()
    V = np.zeros((3, model.nv))
    V[:, 0] = [-0.5, 0.0, 0.5]  # completed to consistent velocities by both
    batch = ld.simulate_batch(model, np.tile(model.q0, (3, 1)), V, 0.2, threads=2, t_eval=5)
    assert all(t.stats["compiled"] for t in batch)
    for i in range(3):
        one = ld.simulate(model, model.q0, V[i], 0.2, t_eval=5)
        assert batch[i].stats["steps"] == one.stats["steps"]
        np.testing.assert_allclose(batch[i].q, one.q, rtol=0, atol=1e-12)


def test_simulate_batch_reports_the_failed_elements_and_keeps_the_rest():
    """The parallelogram driven through its flat configuration stops with a
    SimulationSingularityError (as ``ld.simulate``); the other elements finish."""
    from test_simulate import _parallelogram

    model = _parallelogram()
    q0, v0 = np.array([0.6, -0.6, 0.6]), np.array([-3.0, 3.0, -3.0])
    Q, V = np.array([q0, q0, q0]), np.array([-v0, v0, -0.5 * v0])
    match = r"1 of 3 elements .*indices \[1\]"
    with pytest.raises(ld.SimulationSingularityError, match=match) as e:
        ld.simulate_batch(model, Q, V, 0.3, t_eval=11)
    err = e.value
    assert err.failed == [1] and len(err.trajectories) == 3
    assert not err.trajectories[1].completed and err.trajectories[0].completed
    assert np.all(err.trajectories[1].q[:, 0] > 0.0)  # nothing past the flat configuration
    with pytest.raises(ld.SimulationSingularityError) as one:
        ld.simulate(model, q0, v0, 0.3, t_eval=11)
    assert err.t == one.value.t
    rep = ld.simulate_batch(model, Q, V, 0.3, t_eval=11, on_error="report")
    assert [t.completed for t in rep] == [True, False, True]
    np.testing.assert_array_equal(rep[2].q, err.trajectories[2].q)


def test_simulate_batch_bad_arguments():
    model = ld.examples.four_bar()
    Q = np.tile(model.q0, (2, 1))
    with pytest.raises(ValueError, match="Q0 must be an"):
        ld.simulate_batch(model, model.q0, t_end=0.1)
    with pytest.raises(ValueError, match="V0 must be an"):
        ld.simulate_batch(model, Q, np.zeros((3, model.nv)), 0.1)
    with pytest.raises(ValueError, match="tau has 3 rows for 2"):
        ld.simulate_batch(model, Q, None, 0.1, np.zeros((3, 1)))
    with pytest.raises(ValueError, match="threads must be"):
        ld.simulate_batch(model, Q, None, 0.1, threads=0)
    with pytest.raises(TypeError, match="unknown options"):
        ld.simulate_batch(model, Q, None, 0.1, progress=print)
    with pytest.raises(ValueError, match="t_end"):
        ld.simulate_batch(model, Q, None, -1.0)


@pytest.mark.parametrize("integrator, kw", [("DOP853", {}), ("RK4", dict(dt=2e-3))])
def test_compiled_partitioning_equals_python_loop(integrator, kw):
    """Partitioning in the compiled loop: the independent coordinates integrated, the
    dependent ones by Newton from the last solution, the same steps as the Python loop."""
    model = ld.examples.four_bar()
    args = dict(t_end=2.0, integrator=integrator, stabilization="partitioning", t_eval=21, **kw)
    a = ld.simulate(model, compiled=True, **args)
    b = ld.simulate(model, compiled=False, **args)
    assert a.stats["compiled"] and a.stats["steps"] == b.stats["steps"]
    assert a.stats["nfev"] == b.stats["nfev"]
    np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-10)
    np.testing.assert_allclose(a.v, b.v, rtol=0, atol=1e-9)
    assert a.residual_position.max() < 1e-11  # embedded: the closure holds at every output


def test_compiled_partitioning_repartitions_and_retries_like_the_python_loop():
    """The five-bar's free fall from the paper's 80°/70°: cond(J_d) passes the threshold
    and stages hit singular J_d; both loops take the same new partitions at the same
    times (ld.partition, called from the compiled loop) and restart the same way."""
    model = ld.examples.five_bar()
    args = dict(t_end=2.0, stabilization="partitioning", t_eval=21)
    a = ld.simulate(model, compiled=True, **args)
    b = ld.simulate(model, compiled=False, **args)
    assert a.stats["compiled"] and len(a.stats["repartitions"]) >= 3
    assert a.stats["steps"] == b.stats["steps"] and a.stats["restarts"] == b.stats["restarts"]
    assert [r[1] for r in a.stats["repartitions"]] == [r[1] for r in b.stats["repartitions"]]
    np.testing.assert_allclose(
        [r[0] for r in a.stats["repartitions"]], [r[0] for r in b.stats["repartitions"]], atol=1e-6
    )
    np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-6)
    # with the partition held, the paper's singular J_d stops the run (as the Python loop)
    with pytest.raises(ld.SimulationSingularityError, match="dependent coordinates") as e:
        ld.simulate(model, compiled=True, repartition=False, **args)
    assert 1.0 < e.value.t < 1.3 and not e.value.trajectory.completed


def test_compiled_partitioning_with_rcr_keeps_the_loop_closed():
    """RCR's velocity-level embedding in the compiled loop (issue 13 item 3)."""
    model = ld.examples.four_bar()
    args = dict(t_end=2.0, method="rcr", stabilization="partitioning", t_eval=21)
    a = ld.simulate(model, compiled=True, **args)
    b = ld.simulate(model, compiled=False, **args)
    assert a.stats["compiled"] and a.stats["steps"] == b.stats["steps"]
    np.testing.assert_allclose(a.q, b.q, rtol=0, atol=1e-10)
    assert a.residual_position.max() < 1e-11


@numba.njit
def _inf_at_an_output(t, q, v):
    """Finite everywhere but at the output time 0.05 s (no stage of the steps falls there)."""
    return np.inf if t == 0.05 else 0.0


def test_an_output_the_method_cannot_evaluate_is_recorded_by_the_python_loop():
    """An output whose forward dynamics fails in the compiled loop (here τ is not finite
    at that output only) is not passed on as it stands: the Python loop records every
    output (its rank re-detection and fallback), and the trajectory says so."""
    model = ld.examples.four_bar()
    kw = dict(t_end=0.1, t_eval=np.array([0.0, 0.05, 0.1]), integrator="DOP853")
    a = ld.simulate(model, tau=_inf_at_an_output, **kw)
    b = ld.simulate(model, tau=lambda t, q, v: np.inf if t == 0.05 else 0.0, compiled=False, **kw)
    assert not a.stats["compiled"] and a.completed
    assert np.isinf(a.condition[1]) and np.all(np.isfinite(a.condition[[0, 2]]))
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.condition, b.condition)


def test_progress_callbacks_run_in_the_compiled_loop():
    """A progress callback no longer sends ld.simulate to the Python loop: it is called
    every POLL_STEPS steps and at t_end, and changes nothing of the motion."""
    from loopdyn.sim.compiled import POLL_STEPS

    model = ld.examples.four_bar(theta1=np.pi / 2)
    kw = dict(t_end=2.0, t_eval=21, rtol=1e-10, atol=1e-10)
    seen = []
    a = ld.simulate(model, progress=lambda t, t_end: seen.append((t, t_end)), **kw)
    b = ld.simulate(model, **kw)
    assert a.stats["compiled"] and a.stats["steps"] == b.stats["steps"]
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.lam, b.lam)
    assert len(seen) == (a.stats["steps"] - 1) // POLL_STEPS + 1
    assert all(s[0] < r[0] for s, r in itertools.pairwise(seen))
    assert seen[-1] == (2.0, 2.0) and all(s[1] == 2.0 for s in seen)

    def fails(t, t_end):
        if t > 1.0:
            raise RuntimeError("the callback's own error")

    with pytest.raises(RuntimeError, match="the callback's own error"):
        ld.simulate(model, progress=fails, **kw)


# A process started in the background without job control (``cmd &`` in a script, as
# some CI runners do) inherits SIGINT ignored: Python then installs no handler and
# ``_thread.interrupt_main`` does nothing, so Ctrl-C cannot be simulated there.
needs_sigint = pytest.mark.skipif(
    signal.getsignal(signal.SIGINT) is signal.SIG_IGN,
    reason="SIGINT is ignored in this process (started in the background): no Ctrl-C to test",
)


def _interrupt_at(t_stop):
    """A progress callback that presses Ctrl-C (SIGINT, through Python's handler) once."""
    import _thread

    sent = []

    def progress(t, t_end):
        if t > t_stop and not sent:
            sent.append(t)
            _thread.interrupt_main()

    return progress


@needs_sigint
def test_ctrl_c_stops_the_compiled_loop_with_the_motion_so_far():
    """SIGINT during a compiled run: SimulationInterrupted at the last accepted step, the
    outputs before it those of the uninterrupted run, Python's SIGINT handler back."""

    model = ld.examples.four_bar(theta1=np.pi / 2)
    kw = dict(t_end=4.0, t_eval=41, rtol=1e-10, atol=1e-10)
    full = ld.simulate(model, **kw)
    try:
        ld.simulate(model, progress=_interrupt_at(1.0), **kw)
        caught = None
    except KeyboardInterrupt as e:  # a bare one would be a failure, not a stop of pytest
        caught = e
    assert isinstance(caught, ld.SimulationInterrupted), repr(caught)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    tr = caught.trajectory
    assert tr.stats["compiled"] and not tr.completed and "interrupted" in tr.message
    assert 1.0 < caught.t < 4.0 and tr.t[-1] == caught.t
    np.testing.assert_array_equal(tr.q[-1], caught.q)
    k = int(np.searchsorted(full.t, caught.t))  # outputs strictly before the stop
    assert k >= 10 and len(tr) in (k, k + 1)
    np.testing.assert_array_equal(tr.q[:k], full.q[:k])
    np.testing.assert_array_equal(tr.energy[:k], full.energy[:k])
    assert np.isfinite(tr.qdd[-1]).all() and tr.residual_position[-1] < 1e-10


@needs_sigint
def test_ctrl_c_reaches_a_compiled_run_without_a_callback():
    """An asynchronous SIGINT (another thread, as a terminal's Ctrl-C) stops a long
    compiled run within a few checkpoints."""
    import _thread
    import threading
    import time

    model = ld.examples.four_bar(theta1=np.pi / 2)
    kw = dict(t_eval=11, rtol=1e-10, atol=1e-10)
    ld.simulate(model, t_end=0.01, **kw)  # loaded: the long run starts at once
    timer = threading.Timer(0.3, _thread.interrupt_main)
    start = time.perf_counter()
    timer.start()
    try:
        ld.simulate(model, t_end=3000.0, **kw)  # ~600 x a 5 s run: seconds
        caught = None
    except KeyboardInterrupt as e:
        caught = e
    finally:
        timer.cancel()
        timer.join()
    assert isinstance(caught, ld.SimulationInterrupted), repr(caught)
    assert 0.0 < caught.t < 3000.0 and caught.trajectory.stats["compiled"]
    assert time.perf_counter() - start < 60.0  # not the whole run


def test_the_compiled_loop_frees_what_it_allocates():
    """numba's allocation counters (``NUMBA_NRT_STATS=1``, in a subprocess) balance over
    compiled runs in every stabilisation, with RK4 and RK45, a compiled controller, a
    batch of simulations, a forward-dynamics batch and the compiled inverse dynamics
    (single and batch): the right-hand side is compiled
    without reference counting (``_rhs``), its allocating callees with it (``counted``);
    a callee left to inherit the flag would leak at every stage."""
    import subprocess
    import sys

    script = """
import gc
import numpy as np
from numba import njit
from numba.core.runtime import rtsys
import loopdyn as ld

model = ld.examples.four_bar(theta1=np.pi / 2)
stewart, tree = ld.examples.stewart(), ld.examples.random_tree(6, 0)
knee = ld.examples.closed_knee_leg()
ctl = njit(lambda t, q, v: np.array([-0.1 * v[0]]))
runs = [dict(stabilization=s) for s in ("none", "projection", "baumgarte", "partitioning")]
runs += [dict(integrator="RK4", max_step=1e-2), dict(integrator="RK45"), dict(tau=ctl)]

def work():
    for kw in runs:
        tr = ld.simulate(model, t_end=0.3, t_eval=7, **kw)
        assert tr.stats["compiled"], kw
    for kw in (dict(stabilization="projection"), dict(stabilization="partitioning")):
        assert ld.simulate(stewart, t_end=0.05, t_eval=3, **kw).stats["compiled"], kw
    assert ld.simulate(tree, tree.q0, np.ones(tree.nv), t_end=0.05).stats["compiled"]
    assert ld.simulate(knee, t_end=0.05, t_eval=3).stats["compiled"]  # redundant rows
    Q = np.tile(model.q0, (3, 1))
    ld.simulate_batch(model, Q, t_end=0.2, t_eval=3)
    ld.forward_dynamics_batch(model, np.tile(model.q0, (50, 1)))
    z = np.zeros(model.nv)
    a = ld.forward_dynamics(model, model.q0, z).qdd
    ld.inverse_dynamics(model, model.q0, z, a)  # generic_inverse: LAPACK's workspaces
    ld.inverse_dynamics_batch(model, Q, np.tile(z, (3, 1)), np.tile(a, (3, 1)))

work()  # compiled or loaded, and every lazy buffer made
gc.collect()
s0 = rtsys.get_allocation_stats()
work()
gc.collect()
s1 = rtsys.get_allocation_stats()
made, freed = s1.alloc - s0.alloc, s1.free - s0.free
assert made > 100 and made == freed, (made, freed)
assert s1.mi_alloc - s0.mi_alloc == s1.mi_free - s0.mi_free
print("ok", made)
"""
    env = dict(os.environ, NUMBA_NRT_STATS="1")
    r = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env
    )
    assert r.returncode == 0 and r.stdout.strip().startswith("ok"), r.stderr[-3000:]
