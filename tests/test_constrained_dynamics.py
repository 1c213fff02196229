"""augmented, SLM and recursive-λ forward dynamics, inverse dynamics and multipliers."""

import numpy as np
import pytest

import loopdyn as ld
from closed_helpers import CLOSED, catalog_states, closed_model, consistent_state
from loopdyn.examples.shapes import rod

METHODS = ["augmented", "slm", "recursive_lambda"]


@pytest.mark.parametrize("name", list(CLOSED))
@pytest.mark.parametrize("method", ["slm", "recursive_lambda"])
def test_multiplier_methods_equal_augmented(name, method):
    model, states = catalog_states(name)
    for q, v, tau in states:
        a = ld.forward_dynamics(model, q, v, tau, method="augmented")
        s = ld.forward_dynamics(model, q, v, tau, method=method)
        scale = np.abs(a.qdd).max()
        np.testing.assert_allclose(s.qdd, a.qdd, rtol=0, atol=1e-10 * scale)
        np.testing.assert_allclose(s.lam, a.lam, rtol=0, atol=1e-10 * np.abs(a.lam).max())
        # the constraint holds at acceleration level
        _, J, gamma = ld.constraints(model, q, v)
        np.testing.assert_allclose(J @ a.qdd, gamma, atol=1e-10 * scale)


@pytest.mark.parametrize("name", list(CLOSED))
@pytest.mark.parametrize("method", METHODS)
def test_against_pinocchio_constraint_dynamics(name, method):
    pytest.importorskip("pinocchio")
    from loopdyn.interop.pinocchio import PinocchioExport

    model, states = catalog_states(name, n=3, seed=1)
    ex = PinocchioExport(model)
    if ex.unexported:
        pytest.skip(f"Pinocchio cannot express {ex.unexported}")
    for q, v, tau in states:
        a = ld.forward_dynamics(model, q, v, tau, method=method)
        np.testing.assert_allclose(
            ex.constraint_dynamics(q, v, tau), a.qdd, rtol=0, atol=1e-9 * np.abs(a.qdd).max()
        )


@pytest.mark.parametrize("name", ld.examples.names())
def test_the_catalog_needs_no_augmented_refinement(name):
    """augmented refines only below ``REFINE_LU_RATIO`` (J M⁻¹ Jᵀ conditioned ~1e11) or
    above ``REFINE_LU_COND`` (its estimate of K's condition): never on the catalog, whose
    lowest LU pivot ratio is the excavator's ~7e-8 (where the estimate is made)."""
    from loopdyn.methods.common import DIAG_QUALITY, DIAG_REFINED, REFINE_LU_RATIO

    model = ld.examples.get(name)
    d = model.create_data()
    rng = np.random.default_rng(7)
    for _ in range(4):
        q, v, tau = consistent_state(model, rng)
        res = ld.forward_dynamics(model, q, v, tau, method="augmented", data=d)
        assert res.method == "augmented"
        assert d.diag[DIAG_REFINED] == 0, name
        if model.m:
            assert d.diag[DIAG_QUALITY] > 10 * REFINE_LU_RATIO, name


@pytest.mark.parametrize("name", list(CLOSED))
def test_power_balance(name):
    """d/dt (T + V) = τ·q̇: closure forces do no work."""
    model, states = catalog_states(name, n=2, seed=2)
    h = 1e-5
    for q, v, tau in states:
        qdd = ld.forward_dynamics(model, q, v, tau).qdd

        def energy(t, q=q, v=v, qdd=qdd):
            qt = ld.integrate(model, q, v * t + 0.5 * qdd * t * t)
            return ld.total_energy(model, qt, v + qdd * t)

        dE = (energy(h) - energy(-h)) / (2 * h)
        assert dE == pytest.approx(tau @ v, abs=1e-6 * (1 + abs(energy(0.0))))


@pytest.mark.parametrize("name", list(CLOSED))
@pytest.mark.parametrize("method", METHODS)
def test_inverse_then_forward_dynamics(name, method):
    model, states = catalog_states(name, n=2, seed=3)
    rng = np.random.default_rng(0)
    for q, v, _ in states:
        tau = np.zeros(model.nv)
        tau[model.actuated] = rng.normal(size=model.actuated.size)
        fd = ld.forward_dynamics(model, q, v, tau, method=method)
        inv = ld.inverse_dynamics(model, q, v, fd.qdd)
        np.testing.assert_allclose(inv.tau, tau, atol=1e-9)
        np.testing.assert_allclose(inv.lam, fd.lam, atol=1e-9 * (1 + np.abs(fd.lam).max()))
        assert not inv.over_actuated and inv.residual < 1e-9
        again = ld.forward_dynamics(model, q, v, inv.tau, method=method)
        np.testing.assert_allclose(again.qdd, fd.qdd, atol=1e-9 * np.abs(fd.qdd).max())


@pytest.mark.parametrize("name", list(CLOSED))
def test_multipliers_are_the_cut_joint_reactions(name):
    """The RNEA of the cut (open) system with the closure wrenches applied returns τ."""
    model, states = catalog_states(name, n=2, seed=4)
    for q, v, tau in states:
        fd = ld.forward_dynamics(model, q, v, tau)
        fext = ld.closure_wrenches(model, q, fd.lam)
        np.testing.assert_allclose(ld.rnea(model, q, v, fd.qdd, fext=fext), tau, atol=1e-9)


def test_four_bar_multiplier_is_the_hinge_force_on_the_rocker():
    """λ of the planar revolute cut = the coupler's force on the rocker, in coupler-tip axes."""
    model = closed_model("four_bar")
    q = np.array(model.q0)
    fd = ld.forward_dynamics(model, q, np.zeros(3), np.zeros(3))
    force, _ = ld.closure_forces(model, q, fd.lam)["coupler_rocker"]
    R_A, _ = ld.frame_placement(model, q, "coupler_tip")
    np.testing.assert_allclose(force, R_A[:, :2] @ fd.lam, atol=1e-12)
    # rocker statics at rest: moment about its pivot of hinge force + gravity = I α
    _, tip = ld.frame_placement(model, q, "rocker_tip")
    arm = tip - np.array([1.0, 0.0, 0.0])
    I_pivot = 3.0 * 0.6**2 / 3
    torque = arm[0] * force[1] - arm[1] * force[0] + np.cross(arm / 2, [0, -9.81 * 3.0, 0])[2]
    assert torque == pytest.approx(I_pivot * fd.qdd[2], rel=1e-9)


def _four_bar_3d(kind):
    b = ld.ModelBuilder(f"four_bar_3d_{kind}", gravity=(0, -9.81, 0), planar=False)
    b.add_body("crank", "ground", ld.Revolute("z"), actuated=True, **rod(1.5, 0.3))
    b.add_body("coupler", "crank", ld.Revolute("z"), xyz=(0.3, 0, 0), **rod(5.0, 1.0))
    b.add_body("rocker", "ground", ld.Revolute("z"), xyz=(1, 0, 0), **rod(3.0, 0.6))
    b.add_frame("coupler_tip", "coupler", xyz=(1, 0, 0))
    b.add_frame("rocker_tip", "rocker", xyz=(0.6, 0, 0))
    b.add_closure("coupler_rocker", "coupler_tip", "rocker_tip", kind)
    return b.build()


@pytest.mark.parametrize(("kind", "dropped"), [("ball", 1), ("revolute", 3)])
@pytest.mark.parametrize("method", METHODS)
def test_redundant_closures(kind, dropped, method):
    """A 3D closure on a planar loop: rank 2, redundant rows dropped, exact q̈, min-norm λ."""
    planar = closed_model("four_bar")
    model = _four_bar_3d(kind)
    rng = np.random.default_rng(6)
    for q, v, tau in [consistent_state(planar, rng) for _ in range(3)]:
        ref = ld.forward_dynamics(planar, q, v, tau)
        res = ld.forward_dynamics(model, q, v, tau, method=method)
        assert res.rank == 2 and res.dropped.size == dropped
        np.testing.assert_allclose(res.qdd, ref.qdd, atol=1e-10 * np.abs(ref.qdd).max())
        J = ld.constraint_jacobian(model, q)
        # minimum norm: λ lies in the row space of J (orthogonal to null(Jᵀ))
        null = np.linalg.svd(J.T)[2][2:]
        np.testing.assert_allclose(null @ res.lam, 0, atol=1e-9)
        np.testing.assert_allclose(
            J.T @ res.lam, ref.lam @ ld.constraint_jacobian(planar, q), atol=1e-9
        )


def test_redundant_closure_against_pinocchio():
    pytest.importorskip("pinocchio")
    from loopdyn.interop.pinocchio import PinocchioExport

    model = _four_bar_3d("ball")
    q, v, tau = consistent_state(closed_model("four_bar"), np.random.default_rng(7))
    a = ld.forward_dynamics(model, q, v, tau).qdd
    np.testing.assert_allclose(
        PinocchioExport(model).constraint_dynamics(q, v, tau), a, atol=1e-9 * np.abs(a).max()
    )


@pytest.mark.filterwarnings("ignore::loopdyn.NonUniqueWarning")  # drives every coordinate
@pytest.mark.parametrize("name", list(CLOSED))
def test_inverse_dynamics_compiled_solve_equals_the_checked_path(name, monkeypatch):
    """ld.inverse_dynamics' compiled generic solve (``generic_inverse``) gives the NumPy
    path's τ, λ, residual, closure error and over-actuation flag, exactly actuated and
    with every coordinate driven (over-actuated: the minimum-norm forces)."""
    from loopdyn.analysis import inverse

    model, states = catalog_states(name, n=2, seed=12)
    rng = np.random.default_rng(12)
    checked = inverse.generic_checked

    def refused(*args, **kw):
        raise AssertionError("the compiled solve refused a consistent motion")

    for q, v, _ in states:
        tau = np.zeros(model.nv)
        tau[model.actuated] = rng.normal(size=model.actuated.size)
        qdd = ld.forward_dynamics(model, q, v, tau).qdd
        for act in (None, np.arange(model.nv)):
            monkeypatch.setattr(inverse, "generic_checked", refused)
            fast = ld.inverse_dynamics(model, q, v, qdd, actuated=act)
            monkeypatch.undo()
            a = model.actuated if act is None else act
            ref = checked(model, q, v, qdd, a, 1e-8, 1e-6)
            scale = 1.0 + np.abs(ref.tau).max() + np.abs(ref.lam).max()
            np.testing.assert_allclose(fast.tau, ref.tau, rtol=0, atol=1e-12 * scale)
            np.testing.assert_allclose(fast.u, ref.u, rtol=0, atol=1e-12 * scale)
            np.testing.assert_allclose(fast.lam, ref.lam, rtol=0, atol=1e-12 * scale)
            assert fast.over_actuated == ref.over_actuated == (act is not None)
            assert fast.residual == pytest.approx(ref.residual, abs=1e-12 * scale)
            assert fast.constraint_error == pytest.approx(ref.constraint_error, abs=1e-12 * scale)


def test_min_norm_lstsq_equals_numpy_lstsq():
    """The compiled least squares of the inverse dynamics (QR with column pivoting and
    RZ) gives numpy's lstsq(A, b, rcond=None) and its rank: tall, wide and square A,
    rank deficient, scaled by 1e-3 .. 1e3, zero columns, consistent or not."""
    from loopdyn.kernels.linalg import min_norm_lstsq

    rng = np.random.default_rng(14)
    for _ in range(600):
        n, k = rng.integers(1, 12, size=2)
        r = rng.integers(0, min(n, k) + 1)
        A = rng.normal(size=(n, r)) @ rng.normal(size=(r, k))
        if r == min(n, k) and rng.random() < 0.5:
            A = rng.normal(size=(n, k))
        A *= 10.0 ** rng.uniform(-3, 3)
        if rng.random() < 0.1:
            A[:, rng.integers(0, k)] = 0.0
        b = A @ rng.normal(size=k) if rng.random() < 0.5 else rng.normal(size=n)
        ref, _, rank, _ = np.linalg.lstsq(A, b, rcond=None)
        x, w = np.full(k, np.nan), np.full(3 * k, np.nan)
        assert min_norm_lstsq(A.copy(), b.reshape(n, 1).copy(), x, w) == rank
        np.testing.assert_allclose(x, ref, rtol=0, atol=1e-11 * max(np.abs(ref).max(), 1e-300))
        assert min_norm_lstsq(A.copy(), np.empty((n, 0)), x, w) == np.linalg.matrix_rank(A)


def test_inverse_dynamics_takes_every_input_kind_as_the_c_path():
    """Read-only, strided and float32 arrays and lists give the C float64 answer."""
    model = closed_model("four_bar")
    q, v, _ = consistent_state(model, np.random.default_rng(13))
    qdd = ld.forward_dynamics(model, q, v, np.array([1.0, 0.0, 0.0])).qdd
    ref = ld.inverse_dynamics(model, q, v, qdd)
    ro = q.copy()
    ro.flags.writeable = False
    strided = np.repeat(qdd, 2)[::2]
    for args in ((ro, v, qdd), (q, v, strided), (q.tolist(), list(v), qdd)):
        res = ld.inverse_dynamics(model, *args)
        np.testing.assert_array_equal(res.tau, ref.tau)
        np.testing.assert_array_equal(res.lam, ref.lam)
    res = ld.inverse_dynamics(model, q, v.astype(np.float32), qdd)
    # float32 v is v rounded: a motion within the closure tolerance, forces to ~1e-6
    np.testing.assert_allclose(res.tau, ref.tau, rtol=0, atol=1e-5 * np.abs(ref.tau).max())


@pytest.mark.parametrize("method", ["augmented", "slm", "sslm", "recursive_lambda"])
def test_redundant_rows_take_the_compiled_check(method, monkeypatch):
    """A model with dropped (redundant) closure rows: after a checked call, the next ones
    run the method's entry and the compiled dropped-row test and minimum-norm λ
    (``dynamics.DROPPED``), not the NumPy checked path (patched here to fail the test),
    with the checked path's q̈, λ and rank."""
    from loopdyn.methods import dynamics

    model = ld.examples.closed_knee_leg()
    rng = np.random.default_rng(15)

    def checked(*args, **kw):
        raise AssertionError("the checked path ran")

    ld.forward_dynamics(model, *consistent_state(model, rng), method=method)
    for _ in range(3):
        q, v, tau = consistent_state(model, rng)
        ref = ld.forward_dynamics(model, q, v, tau, method=method, data=model.create_data())
        assert ref.dropped.size
        monkeypatch.setattr(dynamics, "_broken_rows", checked)
        res = ld.forward_dynamics(model, q, v, tau, method=method)
        monkeypatch.undo()
        assert res.rank == ref.rank and res.dropped.tolist() == ref.dropped.tolist()
        scale = np.abs(ref.qdd).max()
        np.testing.assert_allclose(res.qdd, ref.qdd, rtol=0, atol=1e-12 * scale)
        np.testing.assert_allclose(res.lam, ref.lam, rtol=0, atol=1e-12 * np.abs(ref.lam).max())


def test_over_actuated_inverse_dynamics_is_least_squares():
    model = closed_model("four_bar")
    q, v, _ = consistent_state(model, np.random.default_rng(8))
    qdd = ld.forward_dynamics(model, q, v, np.array([1.0, 0.0, 0.0])).qdd
    with pytest.warns(ld.NonUniqueWarning, match="over-actuated"):
        inv = ld.inverse_dynamics(model, q, v, qdd, actuated=[0, 2])
    assert inv.over_actuated and inv.residual < 1e-9
    np.testing.assert_allclose(ld.forward_dynamics(model, q, v, inv.tau).qdd, qdd, atol=1e-9)


def test_inverse_dynamics_rejects_motion_the_actuators_cannot_produce():
    model = closed_model("four_bar")
    q, v, _ = consistent_state(model, np.random.default_rng(9))
    free = ld.forward_dynamics(model, q, v).qdd
    # a consistent acceleration other than the free one (J t = 0): no force without actuators
    t = np.linalg.svd(ld.constraint_jacobian(model, q))[2][-1]
    with pytest.raises(ld.ActuationError, match="cannot produce"):
        ld.inverse_dynamics(model, q, v, free + 0.5 * t, actuated=[])
    # and an acceleration off the closures is refused as such
    with pytest.raises(ld.ActuationError, match="violates the closures"):
        ld.inverse_dynamics(model, q, v, free * 1.5, actuated=[])


def test_recursive_lambda_zeta_columns_are_tree_responses_to_closure_loads():
    """Eq. (13): q̈ = η + ζ λ with η = ABA (closures ignored) and ζ = M⁻¹ Jᵀ."""
    model, states = catalog_states("spatial_ladder", n=2, seed=11)
    for q, v, tau in states:
        res = ld.forward_dynamics(model, q, v, tau, method="recursive_lambda")
        eta = ld.aba(model, q, v, tau)
        J = ld.constraint_jacobian(model, q)
        zeta = np.linalg.solve(ld.crba(model, q), J.T)
        np.testing.assert_allclose(
            res.qdd, eta + zeta @ res.lam, atol=1e-10 * np.abs(res.qdd).max()
        )
        # ζ's columns as computed by the recursion: the tree's response to each row's load
        d = model.create_data()
        ld.forward_dynamics(model, q, v, tau, method="recursive_lambda", data=d)
        rows = d.rows[: d.nrows]
        np.testing.assert_allclose(
            d.Y[:, : rows.size], zeta[:, rows], atol=1e-10 * np.abs(zeta).max()
        )


def test_tree_models_fall_back_to_aba():
    model = ld.examples.serial_arm()
    rng = np.random.default_rng(0)
    q, v, tau = model.random_configuration(rng), rng.normal(size=6), rng.normal(size=6)
    res = ld.forward_dynamics(model, q, v, tau, method="slm")
    assert res.lam is None
    np.testing.assert_allclose(res.qdd, ld.aba(model, q, v, tau))


def test_bad_method_and_shapes():
    model = closed_model("four_bar")
    with pytest.raises(ValueError, match="unknown method"):
        ld.forward_dynamics(model, model.q0, np.zeros(3), method="magic")
    with pytest.raises(ValueError, match="shape"):
        ld.forward_dynamics(model, model.q0, np.zeros(4))


@pytest.mark.parametrize("method", ld.methods.dynamics.METHODS)
def test_forward_dynamics_input_conversion_and_errors(method):
    """The fast path hands inputs to a single-signature entry, which converts lists,
    tuples, float32 and columns itself (same result), bad input is a ValueError naming it, and no
    second signature is ever compiled."""
    model, states = catalog_states("four_bar", n=1, seed=12)
    q, v, tau = states[0]
    ld.forward_dynamics(model, q, v, tau, method=method)  # bind the fast path
    ref = ld.forward_dynamics(model, q, v, tau, method=method)
    frozen = [x.copy() for x in (q, v, tau)]
    for x in frozen:
        x.setflags(write=False)
    variants = [
        (np.repeat(q, 2)[::2], v, tau),
        tuple(frozen),
        (list(q), list(v), list(tau)),
        (q, v.astype(np.float32).astype(np.float64), tau.astype(np.float32)),
        (np.asfortranarray(q.reshape(-1, 1)), tuple(v), tau),
    ]
    for qs, vs, ts in variants:
        res = ld.forward_dynamics(model, qs, vs, ts, method=method)
        np.testing.assert_allclose(res.qdd, ref.qdd, rtol=1e-6)
    np.testing.assert_array_equal(
        ld.forward_dynamics(model, q, v, None, method=method).qdd,
        ld.forward_dynamics(model, q, v, np.zeros(model.nv), method=method).qdd,
    )
    for args, what in (
        ((q[:-1], v, tau), "q"),
        ((q, np.append(v, 0.0), tau), "v"),
        ((q, v, tau[:1]), "tau"),
    ):
        with pytest.raises(ValueError, match=rf"\b{what}\b"):
            ld.forward_dynamics(model, *args, method=method)
    bad = v.copy()
    bad[1] = np.inf
    with pytest.raises(ValueError, match="NaN or inf"):
        ld.forward_dynamics(model, q, bad, tau, method=method)
    with pytest.raises(ValueError, match="create_data"):
        ld.forward_dynamics(model, q, v, tau, method=method, data=ld.examples.five_bar().data)
    kernel = getattr(ld.methods, method).ENTRY.kernel
    assert len(kernel.overloads) == 1


@pytest.mark.parametrize("method", ld.methods.dynamics.METHODS)
@pytest.mark.parametrize("name", ["four_bar", "carpet_scraper"])
def test_the_fast_path_serves_every_new_state(name, method, monkeypatch):
    """After the first call, consistent states of the same model never leave the fast
    path (SSLM's check read a stale J and sent every new state to the slow path)."""
    model, states = catalog_states(name, n=5, seed=21)
    d = model.create_data()
    try:
        ld.forward_dynamics(model, *states[0], method=method, data=d)
    except ld.ModelError:
        pytest.skip(f"{method} does not apply to {name}")
    slow = []
    monkeypatch.setattr(
        ld.methods.dynamics, "_forward_dynamics", lambda *a: slow.append(a[4]) or None
    )
    for q, v, tau in states[1:]:
        assert ld.forward_dynamics(model, q, v, tau, method=method, data=d).qdd.shape
    assert not slow
