"""Uniqueness of the closed-loop inverse dynamics (issue 37, item 5).

[B Jᵀ] [u; λ] = M q̈ + h has a unique solution iff rank [B Jᵀ] = na + m; the actuator
forces u alone are unique iff rank [B Jᵀ] = na + rank J.  Redundant closure rows
(rank J < m) leave λ undetermined but not u: flags, no warning.  More actuators than
degrees of freedom, or actuators tied to each other by a closure, leave u undetermined:
``NonUniqueWarning`` naming the actuators and closures, the minimum-norm answer.
"""

import warnings

import numpy as np
import pytest

import loopdyn as ld
import mechanisms as mx
from loopdyn.analysis import inverse
from loopdyn.examples.shapes import rod
from loopdyn.model import ModelBuilder, Revolute


def _motion(model, act=None, scale=0.7, q=None):
    """(q, v, q̈) of the motion the actuators ``act`` (default the model's) produce
    with forces ``scale`` at rest, and the forces."""
    act = model.actuated if act is None else np.asarray(act)
    q = model.q0 if q is None else q
    v = np.zeros(model.nv)
    tau = np.zeros(model.nv)
    tau[act] = scale * (1.0 + np.arange(act.size))
    return q, v, ld.forward_dynamics(model, q, v, tau).qdd, tau


def _quiet(call):
    """``call()`` with any NonUniqueWarning turned into an error."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ld.NonUniqueWarning)
        return call()


def _parallel_four_bar():
    """The catalog four-bar closed twice at the same hinge (closures ``hinge_a`` and
    ``hinge_b``, 2 planar rows each, 4 rows of rank 2): two closures in parallel."""
    a1, a2, a3, a4 = 0.3, 1.0, 0.6, 1.0
    b = ModelBuilder("parallel_four_bar", gravity=(0.0, -9.81, 0.0), planar=True)
    b.add_body("crank", "ground", Revolute("z"), actuated=True, **rod(1.5, a1))
    b.add_body("coupler", "crank", Revolute("z"), xyz=(a1, 0, 0), **rod(5.0, a2))
    b.add_body("rocker", "ground", Revolute("z"), xyz=(a4, 0, 0), **rod(3.0, a3))
    b.add_frame("coupler_tip", "coupler", xyz=(a2, 0, 0))
    b.add_frame("rocker_tip", "rocker", xyz=(a3, 0, 0))
    b.add_closure("hinge_a", "coupler_tip", "rocker_tip", "revolute")
    b.add_closure("hinge_b", "rocker_tip", "coupler_tip", "revolute")
    model = b.build()
    model.q0 = ld.assemble(model, ld.examples.four_bar().q0)
    return model


def _spatial_five_bar():
    """The catalog five-bar built spatial: its revolute closure has 5 rows, 2
    independent (the loop is planar); DeNOC applies."""
    a11, a21, a12, a22, a0 = 0.6, 1.1, 0.7, 0.8, 1.2
    b = ModelBuilder("five_bar_spatial", gravity=(0.0, -9.81, 0.0))
    b.add_body("leg1_proximal", "ground", Revolute("z"), actuated=True, **rod(3.0, a11))
    b.add_body("leg1_distal", "leg1_proximal", Revolute("z"), xyz=(a11, 0, 0), **rod(1.6, a21))
    b.add_body(
        "leg2_proximal", "ground", Revolute("z"), xyz=(a0, 0, 0), actuated=True, **rod(2.0, a12)
    )
    b.add_body("leg2_distal", "leg2_proximal", Revolute("z"), xyz=(a12, 0, 0), **rod(1.1, a22))
    b.add_frame("leg1_tip", "leg1_distal", xyz=(a21, 0, 0))
    b.add_frame("leg2_tip", "leg2_distal", xyz=(a22, 0, 0))
    b.add_closure("end_effector", "leg1_tip", "leg2_tip", "revolute", axis="z")
    model = b.build()
    model.q0 = ld.assemble(model, ld.examples.five_bar().q0)
    return model


def _flags(r):
    return (
        r.unique, r.tau_unique, r.rank, r.nullity, r.over_actuated,
        r.undetermined_actuators.tolist(), r.undetermined_closures,
    )  # fmt: skip


def test_redundant_closure_rows_leave_lam_undetermined_but_not_the_torques():
    """closed_knee_leg: the knee four-bar's revolute closure has 5 rows of rank 2, so 3
    directions of λ are free; the 3 motor torques are unique (the forward dynamics'
    own) and nothing warns."""
    model = ld.examples.closed_knee_leg()
    q, v, qdd, tau = _motion(model)
    res = _quiet(lambda: ld.inverse_dynamics(model, q, v, qdd))
    assert not res.unique and res.tau_unique and not res.over_actuated
    assert (res.rank, res.nullity) == (3 + 2, 3)
    assert res.undetermined_closures == ("knee_link",)
    assert res.undetermined_actuators.size == 0
    np.testing.assert_allclose(res.tau, tau, atol=1e-9)
    # the generalized closure force Jᵀλ is unique even though λ is not
    J = ld.constraint_jacobian(model, q)
    lam = ld.forward_dynamics(model, q, v, tau).lam
    np.testing.assert_allclose(J.T @ res.lam, J.T @ lam, atol=1e-9)


def test_two_closures_in_parallel_are_both_named():
    model = _parallel_four_bar()
    q, v, qdd, tau = _motion(model)
    res = _quiet(lambda: ld.inverse_dynamics(model, q, v, qdd))
    assert not res.unique and res.tau_unique
    assert (res.rank, res.nullity) == (3, 2)
    assert res.undetermined_closures == ("hinge_a", "hinge_b")
    np.testing.assert_allclose(res.u, tau[model.actuated], atol=1e-9)


@pytest.mark.parametrize(
    "name, act, free, closures",
    [
        ("four_bar", [0, 1, 2], [0, 1, 2], ("coupler_rocker",)),
        ("closed_knee_leg", [0, 1, 2, 3, 4], [2, 3, 4], ("knee_link",)),
    ],
)
def test_over_actuated_warns_naming_the_undetermined_actuators_and_closures(
    name, act, free, closures
):
    """Every coordinate driven: u is not unique (over_actuated); the warning names the
    actuators the null space moves (not closed_knee_leg's hip and thigh, outside the
    loop) and the closures, and says the answer is the minimum-norm one."""
    model = getattr(ld.examples, name)()
    q, v, qdd, _ = _motion(model)
    with pytest.warns(ld.NonUniqueWarning) as rec:
        res = ld.inverse_dynamics(model, q, v, qdd, actuated=act)
    assert len(rec) == 1 and rec[0].filename == __file__  # points at the caller
    msg = str(rec[0].message)
    assert "over-actuated" in msg and "minimum-norm" in msg
    for j in free:
        assert f"{j} ({model.joint_names[j]})" in msg
    for j in set(act) - set(free):
        assert model.joint_names[j] not in msg
    for c in closures:
        assert repr(c) in msg
    assert res.over_actuated and not res.tau_unique and not res.unique
    assert res.undetermined_actuators.tolist() == free
    assert res.undetermined_closures == closures
    assert res.nullity == len(act) + model.m - res.rank > 0
    # the minimum-norm answer, and it produces the motion
    np.testing.assert_allclose(ld.forward_dynamics(model, q, v, res.tau).qdd, qdd, atol=1e-8)
    A = np.zeros((model.nv, len(act) + model.m))
    A[act, np.arange(len(act))] = 1.0
    A[:, len(act) :] = ld.constraint_jacobian(model, q).T
    x = np.linalg.pinv(A) @ ld.rnea(model, q, v, qdd)
    np.testing.assert_allclose(np.r_[res.u, res.lam], x, atol=1e-9)


def test_dependent_actuators_warn_without_over_actuation():
    """closed_knee_leg driven at the hip, the knee crank and the shank: as many
    actuators as degrees of freedom, but crank and shank are tied by the knee four-bar
    (and the thigh is not driven).  A motion the hip and crank alone produce is
    produced with any split of the knee torque between crank and shank: tau_unique
    False while over_actuated is False."""
    model = ld.examples.closed_knee_leg()
    q, v, qdd, _ = _motion(model, act=[0, 2])
    with pytest.warns(ld.NonUniqueWarning, match="dependent") as rec:
        res = ld.inverse_dynamics(model, q, v, qdd, actuated=[0, 2, 4])
    assert "over-actuated" not in str(rec[0].message)
    assert not res.over_actuated and not res.tau_unique and not res.unique
    assert res.undetermined_actuators.tolist() == [2, 4]
    assert res.undetermined_closures == ("knee_link",)
    np.testing.assert_allclose(ld.forward_dynamics(model, q, v, res.tau).qdd, qdd, atol=1e-8)


@pytest.mark.parametrize("name", ["four_bar", "five_bar", "stewart", "delta"])
def test_exact_cases_are_unique_and_quiet(name):
    model = getattr(ld.examples, name)()
    q, v, qdd, tau = _motion(model)
    methods = ["generic"] + (["denoc"] if name != "four_bar" else [])
    for method in methods:
        res = _quiet(lambda m=method: ld.inverse_dynamics(model, q, v, qdd, method=m))
        assert res.unique and res.tau_unique and not res.over_actuated, method
        assert (res.rank, res.nullity) == (model.actuated.size + model.m, 0), method
        assert res.undetermined_actuators.size == 0 and res.undetermined_closures == ()
        np.testing.assert_allclose(res.tau, tau, atol=1e-8 * (1 + np.abs(tau).max()))


def test_denoc_reports_the_rows_it_dropped():
    """method="denoc" on a parallel mechanism with redundant closure rows: u unique,
    λ not, the same flags as the generic solve, no warning."""
    model = _spatial_five_bar()
    q, v, qdd, _ = _motion(model)
    got = [
        _quiet(lambda m=m: ld.inverse_dynamics(model, q, v, qdd, method=m))
        for m in ("generic", "denoc")
    ]
    for res in got:
        assert not res.unique and res.tau_unique and (res.rank, res.nullity) == (4, 3)
        assert res.undetermined_closures == ("end_effector",)
    assert _flags(got[0]) == _flags(got[1])


def _both_paths(model, q, v, qdd, act, monkeypatch):
    """(compiled result, checked result) of the generic solve."""
    real = inverse.generic_checked

    def refused(*args, **kw):
        raise AssertionError("the compiled solve refused a consistent motion")

    monkeypatch.setattr(inverse, "generic_checked", refused)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ld.NonUniqueWarning)
        fast = ld.inverse_dynamics(model, q, v, qdd, actuated=act)
    monkeypatch.undo()
    a = model.actuated if act is None else np.asarray(act)
    return fast, real(model, q, v, qdd, a, 1e-8, 1e-6)


@pytest.mark.parametrize(
    "name, act",
    [
        ("four_bar", None), ("four_bar", [0, 1, 2]), ("five_bar", None),
        ("five_bar", [0, 1, 2, 3]), ("closed_knee_leg", None),
        ("closed_knee_leg", [0, 1, 2, 3, 4]), ("closed_knee_leg", [0, 2, 4]),
        ("stewart", None), ("delta", None), ("parallel", None), ("parallel", [0, 2]),
    ],
)  # fmt: skip
def test_compiled_and_checked_paths_agree_on_the_flags(name, act, monkeypatch):
    model = _parallel_four_bar() if name == "parallel" else getattr(ld.examples, name)()
    q, v, qdd, _ = _motion(model, act=[0, 2] if act == [0, 2, 4] else None)
    fast, ref = _both_paths(model, q, v, qdd, act, monkeypatch)
    assert _flags(fast) == _flags(ref)


def test_compiled_and_checked_paths_agree_on_random_mechanisms(monkeypatch):
    """Seeded random mechanisms (some with redundant closures), driven at as many
    independent coordinates as degrees of freedom and at every coordinate: the same
    flags on both paths, and the flags' relations (unique => tau_unique,
    over_actuated => not tau_unique)."""
    from scipy.linalg import qr

    seen = set()
    for i in range(24):
        mech = mx.random_mechanism((37, i))
        m, q, v = mech.model, mech.q, mech.v
        J = ld.constraint_jacobian(m, q)
        s = np.linalg.svd(J, compute_uv=False)
        rank_j = int(np.sum(s > s.max(initial=0.0) * 1e-9))
        N = np.linalg.svd(J)[2][rank_j:] if m.m else np.eye(m.nv)  # null space of J
        exact = np.sort(qr(N, pivoting=True)[2][: m.nv - rank_j])  # independent coordinates
        for act in (exact, np.arange(m.nv)):
            tau = np.zeros(m.nv)
            tau[exact] = mech.tau[exact]
            try:
                qdd = ld.forward_dynamics(m, q, v, tau).qdd
                fast, ref = _both_paths(m, q, v, qdd, act, monkeypatch)
            except (AssertionError, ld.ActuationError, ld.SingularityError):
                monkeypatch.undo()
                continue
            assert _flags(fast) == _flags(ref), mech.code()
            assert fast.tau_unique or not fast.unique
            assert not (fast.over_actuated and fast.tau_unique)
            seen.add((fast.unique, fast.tau_unique))
    assert seen == {(True, True), (False, True), (False, False)}


def test_batch_reports_per_row_flags():
    model = ld.examples.closed_knee_leg()
    rng = np.random.default_rng(5)
    n = 12
    Q = np.tile(model.q0, (n, 1))
    V = np.zeros((n, model.nv))
    TAU = np.zeros((n, model.nv))
    TAU[:, model.actuated] = rng.normal(size=(n, model.actuated.size))
    QDD = ld.forward_dynamics_batch(model, Q, V, TAU).qdd
    res = _quiet(lambda: ld.inverse_dynamics_batch(model, Q, V, QDD))
    assert res.ok and res.unique.dtype == bool and res.unique.shape == (n,)
    assert not res.unique.any() and res.tau_unique.all() and (res.rank == 5).all()
    one = ld.inverse_dynamics(model, Q[3], V[3], QDD[3])
    assert (res.unique[3], res.tau_unique[3], res.rank[3]) == (one.unique, one.tau_unique, one.rank)
    # over-actuated: one warning for the batch, naming the states and the unknowns
    with pytest.warns(ld.NonUniqueWarning, match=r"12 of 12 states.*knee_crank.*knee_link"):
        res = ld.inverse_dynamics_batch(model, Q, V, QDD, actuated=np.arange(model.nv))
    assert not res.unique.any() and not res.tau_unique.any()
    # exact: unique; a failed row: False, rank -1
    four = ld.examples.four_bar()
    Q4 = np.tile(four.q0, (3, 1))
    QDD4 = ld.forward_dynamics_batch(four, Q4, np.zeros((3, 3))).qdd
    QDD4[1] += 1.0  # off the closures
    res = _quiet(lambda: ld.inverse_dynamics_batch(four, Q4, None, QDD4, on_error="report"))
    assert res.unique.tolist() == [True, False, True]
    assert res.tau_unique.tolist() == [True, False, True]
    assert res.rank.tolist() == [3, -1, 3]
