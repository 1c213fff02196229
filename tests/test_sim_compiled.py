"""The compiled simulation loop (``loopdyn.sim.compiled``) equals the Python loop."""

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
    with pytest.raises(ValueError, match="does not apply: the model has spherical or free"):
        ld.simulate(ld.examples.stewart(), t_end=0.1, compiled=True)


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
