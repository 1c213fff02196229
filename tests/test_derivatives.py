"""Analytic derivatives (issue 40): ``ld.rnea_derivatives``, ``ld.aba_derivatives``,
``ld.forward_dynamics_derivatives``, ``ld.inverse_dynamics_derivatives``.

Every matrix is checked in full against central finite differences (fourth order,
Richardson) of the function it differentiates, perturbing q on the configuration
manifold (q ⊕ δ = ``ld.integrate``), on random consistent states of every catalog
mechanism, of seeded random mechanisms and of hypothesis' random mechanisms (all joint
types, every closure kind, couplings, redundant closures); the tangent-space projection
against finite differences along the constraint manifold (``ld.assemble`` with the
independent coordinates held, ``ld.complete_velocity``); and Pinocchio where it
expresses the model (its ``constraintDynamics``; see ``test_pinocchio``).
"""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings

import loopdyn as ld
import mechanisms as mx
from closed_helpers import CLOSED, closed_model, consistent_state, flat_four_bar

TOL = 1e-6  # relative to the matrix's size (and the finite differences' own noise)


def _fd(f, x0, step, plus, h):
    """Fourth-order central difference of f along plus(x0, step * e_j), every j."""
    cols = []
    for j in range(step):
        e = np.zeros(step)
        e[j] = 1.0
        fp1, fm1 = f(plus(x0, h * e)), f(plus(x0, -h * e))
        fp2, fm2 = f(plus(x0, 2 * h * e)), f(plus(x0, -2 * h * e))
        cols.append((8.0 * (fp1 - fm1) - (fp2 - fm2)) / (12.0 * h))
    return np.array(cols).T


def fd_qvx(model, f, q, v, x, h=1e-3):
    """(∂f/∂q, ∂f/∂v, ∂f/∂x) of f(q, v, x) by finite differences (q on the manifold)."""
    n = model.nv
    dq = _fd(lambda qq: f(qq, v, x), q, n, lambda a, d: ld.integrate(model, a, d), h)
    dv = _fd(lambda vv: f(q, vv, x), v, n, lambda a, d: a + d, h)
    dx = _fd(lambda xx: f(q, v, xx), x, n, lambda a, d: a + d, 1.0)  # linear in x
    return dq, dv, dx


def close(a, b, tol=TOL, floor=0.0):
    """|a - b| <= tol |b| + floor, the floor the finite differences' rounding."""
    err = np.abs(a - b).max(initial=0.0)
    return err <= tol * np.abs(b).max(initial=0.0) + floor, err


def _noise(*vectors, h=1e-3):
    """The rounding of a difference quotient with step h of values of these sizes (the
    solves' own accuracy, ~1e-13 of the accelerations on the random mechanisms' mass
    ratios of 1e6, divided by the step)."""
    return 1e-13 * max(1.0, *(np.abs(x).max(initial=0.0) for x in vectors)) / h


# --------------------------------------------------------------------------- trees
def _tree_cases():
    out = [("serial_arm", ld.examples.serial_arm())]
    for i in range(6):
        mech = mx.random_mechanism((40, i), max_bodies=8)
        out.append((f"random_tree_{i}", mech.model.spanning_tree()))
    return out


@pytest.mark.parametrize("name,model", _tree_cases(), ids=lambda x: x if isinstance(x, str) else "")
def test_tree_rnea_and_aba_derivatives_match_finite_differences(name, model):
    rng = np.random.default_rng(5)
    q = ld.integrate(model, model.q0, rng.normal(size=model.nv) * 0.5)
    v, a = rng.normal(size=model.nv), rng.normal(size=model.nv)
    dq, dv, da = ld.rnea_derivatives(model, q, v, a)
    F = fd_qvx(model, lambda q, v, a: ld.rnea(model, q, v, a), q, v, a)
    tau = ld.rnea(model, q, v, a)
    for got, ref in zip((dq, dv, da), F, strict=True):
        ok, err = close(got, ref, floor=_noise(tau))
        assert ok, f"{name}: rnea derivative off by {err:.3g}"
    assert np.allclose(da, ld.crba(model, q), rtol=1e-12, atol=1e-12)
    tau = rng.normal(size=model.nv)
    dq, dv, dt = ld.aba_derivatives(model, q, v, tau)
    qdd = ld.aba(model, q, v, tau)
    F = fd_qvx(model, lambda q, v, t: ld.aba(model, q, v, t), q, v, tau)
    for got, ref in zip((dq, dv, dt), F, strict=True):
        ok, err = close(got, ref, floor=_noise(qdd))
        assert ok, f"{name}: aba derivative off by {err:.3g}"


def test_tree_model_through_forward_dynamics_derivatives():
    model = ld.examples.serial_arm()
    q, v, tau = model.q0, np.full(model.nv, 0.3), np.ones(model.nv)
    d = ld.forward_dynamics_derivatives(model, q, v, tau)
    ref = ld.aba_derivatives(model, q, v, tau)
    for got, want in zip((d.dqdd_dq, d.dqdd_dv, d.dqdd_dtau), ref, strict=True):
        assert np.allclose(got, want, rtol=1e-12, atol=1e-12)


# --------------------------------------------------------------------------- closed loops
def check_forward(model, q, v, tau, where, tol=TOL):
    """Full matrices against finite differences of forward_dynamics(augmented)."""
    d = ld.forward_dynamics_derivatives(model, q, v, tau)
    fd = lambda q, v, t: ld.forward_dynamics(model, q, v, t, method="augmented").qdd  # noqa: E731
    F = fd_qvx(model, fd, q, v, tau)
    floor = _noise(d.qdd, model.gravity)
    for what, got, ref in zip(
        ("q", "v", "tau"), (d.dqdd_dq, d.dqdd_dv, d.dqdd_dtau), F, strict=True
    ):
        ok, err = close(got, ref, tol, floor)
        assert ok, f"{where}: dqdd_d{what} off by {err:.3g} (|ref| {np.abs(ref).max():.3g})"
    return d


@pytest.mark.parametrize("name", list(CLOSED))
def test_catalog_forward_derivatives_match_finite_differences(name):
    model = closed_model(name)
    rng = np.random.default_rng(11)
    q, v, tau = consistent_state(model, rng)
    d = check_forward(model, q, v, tau, name)
    assert d.rows.size == model.m  # the catalog's closures are independent
    fl = lambda q, v, t: ld.forward_dynamics(model, q, v, t).lam  # noqa: E731
    F = fd_qvx(model, fl, q, v, tau)
    for what, got, ref in zip(
        ("q", "v", "tau"), (d.dlam_dq, d.dlam_dv, d.dlam_dtau), F, strict=True
    ):
        ok, err = close(got, ref, floor=_noise(d.lam))
        assert ok, f"{name}: dlam_d{what} off by {err:.3g}"


def manifold_fd(model, d, q, v, tau, qdd_of, h=1e-3):
    """(∂q̈/∂y, ∂q̈/∂ẏ) along the constraint manifold: y = q[independent] moved and the
    loops closed again (``ld.assemble`` holding y), the velocity completed holding ẏ."""
    ind = d.independent
    G = d.G

    def at(dy, dyd):
        qq = ld.assemble(model, ld.integrate(model, q, G @ dy), fixed=list(ind), tol=1e-14)
        vv = v.copy()
        vv[ind] += dyd
        vv = ld.complete_velocity(model, qq, vv, fixed=list(ind))
        return qdd_of(qq, vv)

    f = ind.size
    dy = _fd(lambda y: at(y, np.zeros(f)), np.zeros(f), f, lambda a, e: a + e, h)
    dyd = _fd(lambda y: at(np.zeros(f), y), np.zeros(f), f, lambda a, e: a + e, h)
    return dy, dyd


@pytest.mark.parametrize("name", ["four_bar", "five_bar", "carpet_scraper", "stewart", "delta"])
def test_tangent_projection_is_the_derivative_along_the_manifold(name):
    model = closed_model(name)
    q, v, tau = consistent_state(model, np.random.default_rng(2))
    d = ld.forward_dynamics_derivatives(model, q, v, tau)
    assert d.G.shape == (model.nv, model.nv - d.rows.size)
    _, J, _ = ld.constraints(model, q)
    assert np.abs(J @ d.G).max() < 1e-10
    dy, dyd = manifold_fd(
        model, d, q, v, tau, lambda q, v: ld.forward_dynamics(model, q, v, tau).qdd
    )
    for what, got, ref in (("y", d.dqdd_dy, dy), ("ydot", d.dqdd_dydot, dyd)):
        ok, err = close(got, ref, floor=_noise(d.qdd))
        assert ok, f"{name}: dqdd_d{what} off by {err:.3g}"


FAST_SEED = 2040


@pytest.mark.parametrize("i", range(16))
def test_random_mechanisms_forward_derivatives(i):
    mech = mx.random_mechanism((FAST_SEED, i), max_bodies=12)
    _random_case(mech, f"random_mechanism(({FAST_SEED}, {i}))")


def _random_case(mech, where):
    model, q, v, tau = mech.model, mech.q, mech.v, mech.tau
    if mech.velocity_note:  # no consistent velocity: not a state the derivatives are defined at
        return
    try:
        check_forward(model, q, v, tau, where + "\n" + mech.code())
    except ld.SingularityError:  # then the forward dynamics refuses the state too
        with pytest.raises(ld.SingularityError):
            ld.forward_dynamics(model, q, v, tau, fallback=False)


@settings(
    max_examples=10,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=list(HealthCheck),
)
@given(mech=mx.mechanisms(max_bodies=8, max_closures=3))
def test_hypothesis_mechanisms_forward_derivatives(mech):
    _random_case(mech, "hypothesis")


def test_couplings_and_quaternion_joints_are_covered():
    """The random cases above include free and spherical joints, couplings, every
    closure kind: a guard that the generator's seeds still do."""
    joints, kinds = set(), set()
    for i in range(16):
        m = mx.random_mechanism((FAST_SEED, i), max_bodies=12).model
        joints.update(m.joint_types)
        kinds.update(m.closure_kinds)
    assert {"free", "spherical", "universal", "prismatic", "revolute"} <= joints
    assert {"ball", "revolute", "universal", "prismatic", "weld", "generic"} <= kinds


def test_geared_chain_coupling_rows():
    model = ld.examples.get("geared_chain", N=3)
    q, v, tau = consistent_state(model, np.random.default_rng(4))
    check_forward(model, q, v, tau, "geared_chain")


# --------------------------------------------------------------------------- errors
def test_singular_configuration_raises():
    model = flat_four_bar()
    q = ld.assemble(model, [0.0, 0.0, 0.0], fixed=[0])
    with pytest.raises(ld.SingularityError):
        ld.forward_dynamics_derivatives(model, q, np.zeros(3), np.zeros(3))


def _rotation_forms(model):
    """The residual forms (``ROT_DOT``, ``ROT_HINGE``, ``ROT_LOG``) of the model's rotation rows."""
    ri = np.asarray(model.row_int)
    return {int(f) for f in ri[ri[:, 1] == 1, 2]}


# random mechanisms with swing and log rows and no redundant row (off the manifold,
# rows redundant on it need not be, and which are dropped is a rank decision):
# (2040, 8) a weld and a generic closure with one rotation axis in 3D (a log row of a
# closure free to turn), (2040, 10) a revolute, (2040, 35) generic closures with two
# axes (hinges) and one, a free joint, (2040, 3) planar
ROTATION_SEEDS = (3, 8, 10, 35)


@pytest.mark.parametrize("name", ["pendulum_ladder", "slider_crank", *ROTATION_SEEDS])
def test_swing_and_log_rows_off_the_manifold(name):
    """The hinge's swing rows and the log rows are differentiated in their own form:
    exact off the constraint manifold too (q moved off it, v not consistent)."""
    if isinstance(name, str):
        model = closed_model(name)
        q, v, tau = consistent_state(model, np.random.default_rng(0))
    else:
        mech = mx.random_mechanism((FAST_SEED, name), max_bodies=8)
        model, q, v, tau = mech.model, mech.q, mech.v, mech.tau
    assert _rotation_forms(model) & {1, 2}, "the case lost its swing / log rows"
    rng = np.random.default_rng(1)
    q = ld.integrate(model, q, rng.normal(size=model.nv) * 1e-2)
    v = v + rng.normal(size=model.nv) * 0.1
    Phi, J, _ = ld.constraints(model, q)
    assert np.abs(Phi).max() > 1e-5 and np.abs(J @ v).max() > 1e-3  # off the manifold
    check_forward(model, q, v, tau, f"{name} off the manifold")


def test_half_turn_of_a_hinge_is_a_singularity_error():
    """A hinge whose axes are reversed (θ = π): h = θ/sin θ and the swing rows' Jacobian
    are undefined there, the derivative kernel says so (near it, it answers)."""
    from loopdyn.derivatives.closed import _run, _work

    b = ld.ModelBuilder("flip")
    body = dict(mass=1.0, com=(0.0, 0.1, 0.0), inertia=np.eye(3) * 0.01)
    b.add_body("b1", "ground", ld.Revolute((1.0, 0.0, 0.0)), **body)
    b.add_body("b2", "b1", ld.Revolute((0.0, 1.0, 0.0)), **body)
    b.add_frame("fa", "b2")
    b.add_frame("fb", "ground")
    b.add_closure("c", "fa", "fb", "revolute", axis=(0.0, 0.0, 1.0))
    model = b.build()
    wk, zero = _work(model), np.zeros(2)
    B = _run(model, wk, np.array([np.pi - 1e-3, 0.0]), zero, zero, wk.all_rows, np.zeros(5), False)
    assert np.all(np.isfinite(B))
    with pytest.raises(ld.SingularityError, match="half-turn"):
        _run(model, wk, np.array([np.pi, 0.0]), zero, zero, wk.all_rows, np.zeros(5), False)


# --------------------------------------------------------------------------- inverse dynamics
def _inverse_fd(model, q, v, qdd, act):
    def tau_of(q, v, a):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ld.NonUniqueWarning)
            return ld.inverse_dynamics(model, q, v, a, actuated=act, closure_tol=1e3, tol=1e3).tau

    return fd_qvx(model, tau_of, q, v, qdd)


@pytest.mark.parametrize(
    "name,act",
    [
        ("four_bar", None),
        ("five_bar", None),
        ("stewart", None),
        ("four_bar", [0, 2]),
        ("five_bar", [0, 1, 3]),
    ],
)
def test_inverse_dynamics_derivatives(name, act):
    """Exactly actuated (the catalog's actuators) and over-actuated (minimum norm)."""
    model = closed_model(name)
    q, v, tau = consistent_state(model, np.random.default_rng(6))
    qdd = ld.forward_dynamics(model, q, v, tau).qdd
    act = None if act is None else np.array(act)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ld.NonUniqueWarning)
        d = ld.inverse_dynamics_derivatives(model, q, v, qdd, actuated=act)
    F = _inverse_fd(model, q, v, qdd, act)
    for what, got, ref in zip(
        ("q", "v", "qdd"), (d.dtau_dq, d.dtau_dv, d.dtau_dqdd), F, strict=True
    ):
        ok, err = close(got, ref, floor=_noise(d.tau))
        assert ok, f"{name} {act}: dtau_d{what} off by {err:.3g}"


# --------------------------------------------------------------------------- Pinocchio
PIN_CASES = [("four_bar", {}), ("five_bar", {}), ("stewart", {}), ("spatial_ladder", {"L": 8})]


@pytest.mark.parametrize("name,kw", PIN_CASES, ids=[c[0] for c in PIN_CASES])
def test_pinocchio(name, kw):
    """Against Pinocchio's ``constraintDynamics`` (3D contacts in LOCAL frames).

    ∂q̈/∂τ equals Pinocchio's analytic one.  Its q and v derivatives come from another
    acceleration-level form of the ball constraint (module doc of
    ``loopdyn.derivatives.closed``), so the full ∂/∂q, ∂/∂v differ off the manifold;
    along it (the tangent-space projection) they must agree: checked against finite
    differences of ``pin.constraintDynamics`` along the manifold.
    (``pin.computeConstraintDynamicsDerivatives`` itself disagrees with finite
    differences of ``pin.constraintDynamics`` on these loops, docs/derivatives.md.)"""
    pin = pytest.importorskip("pinocchio")
    from loopdyn.interop.pinocchio import PinocchioExport

    model = ld.examples.get(name, **kw)
    q, v, tau = consistent_state(model, np.random.default_rng(3))
    ex = PinocchioExport(model)
    pm, pd = ex.model, ex.model.createData()
    cms, cds = ex.constraints, ex.constraint_datas()
    pin.initConstraintDynamics(pm, pd, cms, cds)
    prox = pin.ProximalSettings(1e-14, 1e-12, 50)

    def pin_qdd(qq, vv, tt=tau):
        return ex.v_from(
            pin.constraintDynamics(pm, pd, ex.q(qq), ex.v(vv), ex.v(tt), cms, cds, prox)
        ).copy()

    d = ld.forward_dynamics_derivatives(model, q, v, tau)
    assert np.allclose(pin_qdd(q, v), d.qdd, rtol=1e-10, atol=1e-10 * np.abs(d.qdd).max())
    pin_qdd(q, v)
    pin.computeConstraintDynamicsDerivatives(pm, pd, cms, cds, prox)
    ok, err = close(d.dqdd_dtau, ex.matrix_from(pd.ddq_dtau), 1e-8)
    assert ok, f"{name}: dqdd_dtau off Pinocchio's by {err:.3g}"
    dy, dyd = manifold_fd(model, d, q, v, tau, pin_qdd, h=1e-3)
    for what, got, ref in (("y", d.dqdd_dy, dy), ("ydot", d.dqdd_dydot, dyd)):
        ok, err = close(got, ref, floor=_noise(d.qdd, h=1e-3))
        assert ok, f"{name}: dqdd_d{what} off Pinocchio's finite differences by {err:.3g}"


# --------------------------------------------------------------------------- compiled paths
@pytest.mark.parametrize("name", ["four_bar", "stewart", "carpet_scraper", "geared_chain"])
def test_fast_path_equals_checked_path(name):
    """The first call takes the checked path (ld.forward_dynamics, then the kernel on its
    q̈ and λ); later ones the one compiled call with the augmented kernel inside: the same
    q̈ and λ as ld.forward_dynamics, the same derivatives."""
    model = ld.examples.get(name) if name != "geared_chain" else ld.examples.get(name, N=3)
    model.__dict__.pop("_derivative_work", None)
    q, v, tau = consistent_state(model, np.random.default_rng(8))
    d1 = ld.forward_dynamics_derivatives(model, q, v, tau)
    assert model._derivative_work.fast
    d2 = ld.forward_dynamics_derivatives(model, q, v, tau)
    res = ld.forward_dynamics(model, q, v, tau)
    assert np.array_equal(d2.qdd, res.qdd) and np.array_equal(d2.lam, res.lam)
    for f in ("dqdd_dq", "dqdd_dv", "dqdd_dtau", "dlam_dq", "dlam_dv", "dlam_dtau", "dqdd_dy"):
        a, b = getattr(d1, f), getattr(d2, f)
        assert np.allclose(a, b, rtol=1e-12, atol=1e-12 * np.abs(b).max(initial=1.0)), f


def test_larger_ladder_matches_finite_differences():
    """spatial_ladder(6): 20 coordinates, 18 rows, the KKT factored in order (sparse
    factors) and solved for 60 right-hand sides."""
    model = ld.examples.get("spatial_ladder", L=6)
    q, v, tau = consistent_state(model, np.random.default_rng(12))
    check_forward(model, q, v, tau, "spatial_ladder(6)")


def test_inputs_as_lists_and_bad_inputs():
    model = ld.examples.get("four_bar")
    q, v, tau = consistent_state(model, np.random.default_rng(1))
    d = ld.forward_dynamics_derivatives(model, q, v, tau)
    d2 = ld.forward_dynamics_derivatives(model, list(q), list(v), list(tau))
    assert np.allclose(d.dqdd_dq, d2.dqdd_dq, rtol=1e-13, atol=1e-13)
    with pytest.raises(ValueError):
        ld.forward_dynamics_derivatives(model, q, v, np.full(model.nv, np.nan))
    with pytest.raises(ValueError):
        ld.forward_dynamics_derivatives(model, q[:2], v, tau)


# --------------------------------------------------------------------------- one simulation step
def _step_fd(model, q, v, tau, dt, stab, h=1e-5, tol=1e-15):
    """[A B] of ``step_system`` (the step of ld.simulate) by fourth-order central
    differences: inputs q ⊕ ε, v + ν, τ + dτ; outputs in the tangent space at x_{k+1}."""
    from loopdyn.derivatives.step import step_system
    from loopdyn.kinematics.configuration import difference

    n = model.nv
    q1, _ = step_system(model, q, v, tau, dt, stab, tol)

    def f(x):
        qq, vv = step_system(
            model, ld.integrate(model, q, x[:n]), v + x[n : 2 * n], tau + x[2 * n :], dt, stab, tol
        )
        return np.concatenate([difference(model, q1, qq), vv])

    return _fd(f, np.zeros(3 * n), 3 * n, lambda a, d: a + d, h)


def _step_cases():
    rng = np.random.default_rng(1)
    out = []
    for name in ("four_bar", "five_bar", "stewart"):
        model = ld.examples.get(name)
        out.append((name, model, *consistent_state(model, rng), 1e-3))
    for i in range(16):  # a tree with free and spherical joints, a longer step
        tree = mx.random_mechanism((FAST_SEED, i), max_bodies=12).model.spanning_tree()
        if "free" in tree.joint_types:
            q = ld.integrate(tree, tree.q0, rng.normal(size=tree.nv) * 0.3)
            v, tau = rng.normal(size=tree.nv), rng.normal(size=tree.nv)
            out.append((f"tree_{i}", tree, q, v, tau, 1e-2))
            break
    for name in ("pendulum_ladder", "slider_crank"):  # swing rows; log rows
        model = closed_model(name)
        out.append((name, model, *consistent_state(model, rng), 1e-3))
    # random closed mechanisms: universal, ball, free, spherical, generic; swing and log rows
    for i in (17, 23, 28, *ROTATION_SEEDS):
        mech = mx.random_mechanism((FAST_SEED, i), max_bodies=8)
        out.append((f"random_{i}", mech.model, mech.q, mech.v, mech.tau, 1e-3))
    return out


@pytest.mark.parametrize("case", _step_cases(), ids=lambda c: c[0])
@pytest.mark.parametrize("stab", ["projection", "none"])
def test_step_derivatives_match_finite_differences_of_the_step(case, stab):
    name, model, q, v, tau, dt = case
    d = ld.step_derivatives(model, q, v, tau, dt, stabilization=stab, tol=1e-15)
    n = model.nv
    assert d.A.shape == (2 * n, 2 * n) and d.B.shape == (2 * n, n)
    F = _step_fd(model, q, v, tau, dt, stab)
    ok, err = close(np.hstack([d.A, d.B]), F)
    assert ok, f"{name} ({stab}): step derivatives off by {err:.3g}"


def test_step_system_is_the_step_of_simulate():
    """The step differentiated (and finite-differenced) is ld.simulate's: Python and
    compiled loops, RK4 with projection, one step."""
    from loopdyn.derivatives.step import step_system

    for name in ("four_bar", "stewart"):
        model = ld.examples.get(name)
        q, v, tau = consistent_state(model, np.random.default_rng(3))
        for compiled in (False, None):
            tr = ld.simulate(
                model, q, v, 1e-3, tau, integrator="RK4", dt=1e-3, t_eval=[0.0, 1e-3],
                consistent=False, compiled=compiled,
            )  # fmt: skip
            q1, v1 = step_system(model, q, v, tau, 1e-3)
            d = ld.step_derivatives(model, q, v, tau, 1e-3)
            assert np.abs(tr.q[-1] - q1).max() < 1e-13 and np.abs(tr.v[-1] - v1).max() < 1e-11
            assert np.abs(d.q - q1).max() < 1e-13 and np.abs(d.v - v1).max() < 1e-11


@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    database=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=list(HealthCheck),
)
@given(mech=mx.mechanisms(max_bodies=5, max_closures=2))
def test_hypothesis_mechanisms_step_derivatives(mech):
    """Every closure kind (swing and log rows included) through one RK4 step with its
    projection, against finite differences of the step."""
    if mech.velocity_note:
        return
    model, q, v, tau = mech.model, mech.q, mech.v, mech.tau
    try:
        d = ld.step_derivatives(model, q, v, tau, 1e-3, tol=1e-15)
    except ld.SingularityError:  # a stage's KKT matrix singular: the forward dynamics too
        return
    F = _step_fd(model, q, v, tau, 1e-3, "projection")
    # the differences' rounding (step 1e-5) where the step's derivatives are ~0 (a
    # mechanism its closures lock: A = B = 0)
    ok, err = close(np.hstack([d.A, d.B]), F, floor=_noise(v, tau, h=1e-5))
    assert ok, f"step derivatives off by {err:.3g}\n{mech.code()}"


def test_step_derivatives_bad_arguments():
    four = ld.examples.get("four_bar")
    with pytest.raises(ValueError):
        ld.step_derivatives(four, four.q0, np.zeros(3), None, -1.0)
    with pytest.raises(ValueError):
        ld.step_derivatives(four, four.q0, np.zeros(3), None, 1e-3, integrator="euler")


# --------------------------------------------------------------------------- batch, out=
@pytest.mark.parametrize(
    "name,method",
    [
        ("four_bar", "augmented"),
        ("stewart", "augmented"),
        ("five_bar", "rcr"),
        ("tree", "augmented"),
    ],
)
def test_derivatives_batch_equals_single_calls(name, method):
    if name == "tree":
        model = mx.random_mechanism((FAST_SEED, 3), max_bodies=8).model.spanning_tree()
    else:
        model = ld.examples.get(name)
    rng = np.random.default_rng(7)
    states = [consistent_state(model, rng) for _ in range(70)] if model.m else [
        (ld.integrate(model, model.q0, rng.normal(size=model.nv)), rng.normal(size=model.nv),
         rng.normal(size=model.nv)) for _ in range(70)]  # fmt: skip
    Q, V, TAU = (np.array(x) for x in zip(*states, strict=True))
    V[5, 0] = np.nan  # a bad element: reported, the others answered
    res = ld.forward_dynamics_derivatives_batch(
        model, Q, V, TAU, method=method, on_error="report", threads=2
    )
    assert res.failed.tolist() == [5] and np.isnan(res.dqdd_dq[5]).all()
    for i in (0, 1, 33, 69):
        d = ld.forward_dynamics_derivatives(model, Q[i], V[i], TAU[i], tangent=False)
        for f in ("qdd", "dqdd_dq", "dqdd_dv", "dqdd_dtau", "dlam_dq", "dlam_dv", "dlam_dtau"):
            ok, err = close(getattr(res, f)[i], getattr(d, f), tol=1e-10, floor=1e-12)
            assert ok, f"{name} {method}: element {i} {f} off by {err:.3g}"
    with pytest.raises(ValueError):
        ld.forward_dynamics_derivatives_batch(model, Q, V, TAU, method=method)


def test_out_argument_reuses_the_result():
    model = ld.examples.get("stewart")
    rng = np.random.default_rng(2)
    (q1, v1, t1), (q2, v2, t2) = consistent_state(model, rng), consistent_state(model, rng)
    d = ld.forward_dynamics_derivatives(model, q1, v1, t1, tangent=False)
    d = ld.forward_dynamics_derivatives(model, q1, v1, t1, tangent=False)  # the fast path
    ref = ld.forward_dynamics_derivatives(model, q2, v2, t2, tangent=False)
    ref = {f: np.array(getattr(ref, f)) for f in ("qdd", "lam", "dqdd_dq", "dlam_dv")}
    same = ld.forward_dynamics_derivatives(model, q2, v2, t2, tangent=False, out=d)
    assert same is d
    for f, x in ref.items():
        assert np.array_equal(getattr(d, f), x), f
    tree = ld.examples.serial_arm()
    dt = ld.forward_dynamics_derivatives(tree, tree.q0, np.zeros(tree.nv), None)
    out = ld.forward_dynamics_derivatives(tree, tree.q0, np.ones(tree.nv), None, out=dt)
    ref = ld.aba(tree, tree.q0, np.ones(tree.nv), np.zeros(tree.nv))
    assert out is dt and np.array_equal(out.qdd, ref)


def test_result_says_which_method_and_out_keeps_nothing_stale():
    """``method`` names whose q̈ was differentiated; a result reused with ``out=`` and
    ``tangent=False`` drops the projection an earlier call left on it."""
    model = ld.examples.get("four_bar")
    q, v, tau = consistent_state(model, np.random.default_rng(3))
    assert ld.forward_dynamics_derivatives(model, q, v, tau, method="slm").method == "slm"
    d = ld.forward_dynamics_derivatives(model, q, v, tau)
    d = ld.forward_dynamics_derivatives(model, q, v, tau, out=d)  # the compiled path
    assert d.method == "augmented" and d.dqdd_dy is not None
    d2 = ld.forward_dynamics_derivatives(model, q, v, tau, tangent=False, out=d)
    assert d2 is d and d.dqdd_dy is None and d.G is None
    d3 = ld.forward_dynamics_derivatives(model, q, v, tau, method="slm", tangent=False, out=d)
    assert d3.method == "slm" and d3.dqdd_dy is None


_PROJECTED = ("independent", "dependent", "G", "dqdd_dy", "dqdd_dydot")


def _projection_of(d):
    return {f: np.array(getattr(d, f)) for f in _PROJECTED}


@pytest.mark.parametrize("name", ["four_bar", "stewart"])
def test_lazy_projection_is_the_calls_own(name):
    """On the compiled path the projection is computed at the first read of one of its
    fields, from what the call kept in its result: a result read after later calls (other
    states, other results, ``out=`` on another result) holds its own state's numbers, the
    same as one read at once and as the checked path's (its own partition and QR)."""
    model = ld.examples.get(name)
    model.__dict__.pop("_derivative_work", None)
    rng = np.random.default_rng(11)
    (q1, v1, t1), (q2, v2, t2) = consistent_state(model, rng), consistent_state(model, rng)
    checked = _projection_of(ld.forward_dynamics_derivatives(model, q1, v1, t1))
    assert model._derivative_work.fast
    now = _projection_of(ld.forward_dynamics_derivatives(model, q1, v1, t1))
    late = ld.forward_dynamics_derivatives(model, q1, v1, t1)
    assert "G" not in late.__dict__  # nothing computed yet
    other = ld.forward_dynamics_derivatives(model, q2, v2, t2)
    ld.forward_dynamics_derivatives(model, q2, v2, t2, out=other)
    ref2 = _projection_of(other)
    for f in _PROJECTED:
        assert np.array_equal(getattr(late, f), now[f]), f
        b = checked[f]
        assert np.allclose(now[f], b, rtol=1e-12, atol=1e-12 * np.abs(b).max(initial=1.0)), f
    assert not np.allclose(ref2["dqdd_dy"], now["dqdd_dy"])  # the states differ


@pytest.mark.parametrize("name", ["planar_ladder", "pendulum_ladder", "stewart", "delta"])
def test_projection_partition_is_ld_partition(name):
    """The compiled projection's pivoted QR chooses ``ld.partition``'s coordinates, also
    where columns tie in norm by symmetry (the ladders' states 2 and 1 here: there the
    kernel leaves the pivots to SciPy's geqp3, whose rounding decides)."""
    model = closed_model(name)
    rng = np.random.default_rng(5)
    ld.forward_dynamics_derivatives(model, *consistent_state(model, rng))
    for _ in range(4):
        q, v, tau = consistent_state(model, rng)
        d = ld.forward_dynamics_derivatives(model, q, v, tau)
        part = ld.partition(model, q)
        assert np.array_equal(d.independent, part.independent)
        assert np.array_equal(d.dependent, part.dependent)


def test_out_recomputes_the_projection():
    """A result reused with ``out=`` never keeps a projection computed from its earlier
    numbers: read before the reuse or not, it is the new state's afterwards (exactly a
    fresh result's), while arrays read from it earlier keep their values."""
    model = ld.examples.get("stewart")
    rng = np.random.default_rng(12)
    (q1, v1, t1), (q2, v2, t2) = consistent_state(model, rng), consistent_state(model, rng)
    ld.forward_dynamics_derivatives(model, q1, v1, t1)  # the checked path, once
    ref1 = _projection_of(ld.forward_dynamics_derivatives(model, q1, v1, t1))
    ref2 = _projection_of(ld.forward_dynamics_derivatives(model, q2, v2, t2))
    d = ld.forward_dynamics_derivatives(model, q1, v1, t1)
    held = d.dqdd_dy
    for read_before in (True, False):
        d = ld.forward_dynamics_derivatives(model, q1, v1, t1, out=d)
        if read_before:
            assert np.array_equal(d.dqdd_dy, ref1["dqdd_dy"])
        same = ld.forward_dynamics_derivatives(model, q2, v2, t2, out=d)
        assert same is d
        for f in _PROJECTED:
            assert np.array_equal(getattr(d, f), ref2[f]), f
    assert np.array_equal(held, ref1["dqdd_dy"])
    d = ld.forward_dynamics_derivatives(model, q1, v1, t1, method="slm", out=d)  # checked
    assert np.allclose(d.dqdd_dy, ref1["dqdd_dy"], rtol=1e-10, atol=1e-10)
    # the next augmented call takes the checked path (slm's rows may differ), then the
    # compiled one drops the fields the checked path set in d
    d = ld.forward_dynamics_derivatives(model, q2, v2, t2, out=d)
    assert model._derivative_work.fast
    for q, v, t, ref in ((q1, v1, t1, ref1), (q2, v2, t2, ref2)):
        d = ld.forward_dynamics_derivatives(model, q, v, t, out=d)
        for f in _PROJECTED:
            assert np.array_equal(getattr(d, f), ref[f]), f
