"""Saha & Schiehlen's DeNOC method: structure detection, kinematics, inverse and forward dynamics.

``ld.forward_dynamics(..., method="denoc")`` and ``ld.inverse_dynamics(...,
method="denoc")``, and the minimal-coordinate ``denoc.run`` / ``denoc.inverse``.  The
oracles are the dense augmented (KKT) solve (q̈ and λ) and the generic closed-loop
inverse dynamics; the dense DeNOC matrices and the tree's own kinematics
(``ld.forward_kinematics``, ``ld.crba``) check the recursions.
"""

import numpy as np
import pytest

import loopdyn as ld
from closed_helpers import consistent_state
from loopdyn.examples.shapes import rod
from loopdyn.methods import denoc

# the parallel mechanisms of the catalog, and the shape of their structure
# (platform, number of legs, legs closing on the ground)
PARALLEL = {
    "four_bar": (None, 1, 1),
    "slider_crank": (None, 1, 1),
    "five_bar": ("leg1_distal", 2, 0),
    "three_rrr": ("link3", 3, 0),
    "stewart": ("platform", 6, 0),
    "delta": ("platform", 3, 0),
}
SPREAD = {"stewart": 0.05}


def _model(name):
    return ld.examples.get(name)


def _states(model, n, seed):
    rng = np.random.default_rng(seed)
    return [consistent_state(model, rng, spread=SPREAD.get(model.name, 0.3)) for _ in range(n)]


@pytest.mark.parametrize("name", list(PARALLEL))
def test_structure_of_the_catalog(name):
    model = _model(name)
    ps = ld.parallel_structure(model)
    platform, nlegs, closed = PARALLEL[name]
    assert ps.platform == platform
    assert len(ps.legs) == nlegs
    assert sum(g.closes_on_base for g in ps.legs) == closed
    assert ps.dof == ps.n == model.actuated.size
    np.testing.assert_array_equal(ps.actuated, model.actuated)
    for leg in ps.legs:
        assert leg.k is not None
        assert leg.columns[leg.k_column].v == leg.actuated
        assert leg.joints[leg.k] == leg.columns[leg.k_column].joint
    # every coordinate is on exactly one leg
    vs = sorted(c.v for g in ps.legs for c in g.columns if not c.closure)
    assert vs == list(range(model.nv))
    assert "leg 1" in str(ps)


def test_structure_legs_of_the_spatial_models():
    ps = ld.parallel_structure(ld.examples.stewart())
    for i, leg in enumerate(ps.legs):
        assert leg.kinds == ("universal", "prismatic", "spherical" if i == 0 else "closure:ball")
        assert leg.k == 1 and leg.k_column == 2 and len(leg.columns) == 6
    ps = ld.parallel_structure(ld.examples.delta())
    for i, leg in enumerate(ps.legs):
        assert leg.kinds == (
            "revolute",
            "universal",
            "universal" if i == 0 else "closure:universal",
        )
        assert leg.k == 0 and len(leg.columns) == 5


def _fd(model, q, v, tau, data=None):
    """DeNOC's forward dynamics, checked to be DeNOC's own result (no fallback)."""
    res = ld.forward_dynamics(model, q, v, tau, method="denoc", data=data)
    assert res.method == "denoc"
    return res


def _assert_same(res, ref, tol=1e-10):
    """q̈ and λ of ``res`` equal the augmented oracle's, relative to their largest entries."""
    np.testing.assert_allclose(res.qdd, ref.qdd, rtol=0, atol=tol * np.abs(ref.qdd).max())
    np.testing.assert_allclose(res.lam, ref.lam, rtol=0, atol=tol * max(1.0, np.abs(ref.lam).max()))


@pytest.mark.parametrize("name", list(PARALLEL))
def test_forward_dynamics_equals_augmented(name):
    """q̈ of every tree coordinate and λ of every closure row equal the augmented oracle's to
    1e-10 (τ on every joint)."""
    model = _model(name)
    for q, v, tau in _states(model, 4, 0):
        ref = ld.forward_dynamics(model, q, v, tau, method="augmented")
        res = _fd(model, q, v, tau)
        _assert_same(res, ref)
        assert res.rank == ref.rank and res.condition >= 1.0
        _, J, gamma = ld.constraints(model, q, v)
        np.testing.assert_allclose(J @ res.qdd, gamma, atol=1e-9 * (1 + np.abs(res.qdd).max()))
        # the strict call gives the same accelerations
        np.testing.assert_array_equal(denoc.run(model, q, v, tau), res.qdd)


@pytest.mark.parametrize("name", list(PARALLEL))
def test_inverse_dynamics(name):
    """IDA equals the generic inverse dynamics (u and λ) and inverts the forward dynamics."""
    model = _model(name)
    rng = np.random.default_rng(1)
    for q, v, _ in _states(model, 3, 1):
        tau = np.zeros(model.nv)
        tau[model.actuated] = rng.normal(size=model.actuated.size)
        fd = _fd(model, q, v, tau)
        inv = ld.inverse_dynamics(model, q, v, fd.qdd, method="denoc")
        np.testing.assert_allclose(inv.u, tau[model.actuated], rtol=0, atol=1e-10)
        np.testing.assert_allclose(inv.tau, tau, rtol=0, atol=1e-10)
        np.testing.assert_allclose(inv.lam, fd.lam, rtol=0, atol=1e-10 * np.abs(fd.lam).max())
        # the generic closed-loop inverse dynamics, at the scale of the generalized forces
        scale = max(1.0, np.abs(ld.rnea(model, q, v, fd.qdd)).max())
        ref = ld.inverse_dynamics(model, q, v, fd.qdd)
        np.testing.assert_allclose(inv.u, ref.u, rtol=0, atol=1e-10 * scale)
        np.testing.assert_allclose(inv.lam, ref.lam, rtol=0, atol=1e-10 * scale)
        assert inv.residual < 1e-10 * scale and inv.constraint_error < 1e-10 * scale
        assert not inv.over_actuated
        again = _fd(model, q, v, inv.tau)
        np.testing.assert_allclose(again.qdd, fd.qdd, rtol=0, atol=1e-10 * np.abs(fd.qdd).max())


def test_inverse_dynamics_of_a_motion_that_violates_the_closures():
    model = _model("five_bar")
    (q, v, tau), *_ = _states(model, 1, 8)
    qdd = _fd(model, q, v, tau).qdd
    bad = qdd.copy()
    bad[1] += 1.0  # an unactuated acceleration off the closures
    with pytest.raises(ld.ActuationError, match="violates the closures"):
        ld.inverse_dynamics(model, q, v, bad, method="denoc")
    with pytest.raises(ValueError, match="model's own actuated"):
        ld.inverse_dynamics(model, q, v, qdd, actuated=[0], method="denoc")
    with pytest.raises(ValueError, match="unknown method"):
        ld.inverse_dynamics(model, q, v, qdd, method="dense")


@pytest.mark.parametrize("name", list(PARALLEL))
def test_projections_idempotent_and_symmetric(name):
    """Φ_i of (11d)/(12d), built from the kernel's p̃_i, δ_i: eq. (10b), and Φ_i s_j = 0."""
    model = _model(name)
    (q, v, _), *_ = _states(model, 1, 2)
    K = denoc.kinematics(model, q, v)
    ps = ld.parallel_structure(model)
    for l, leg in enumerate(ps.legs):
        Phis = K.projectors(l)
        for i, Phi in enumerate(Phis):
            np.testing.assert_allclose(Phi @ Phi, Phi, atol=1e-12)  # idempotent
            np.testing.assert_allclose(Phi, Phi.T, atol=1e-14)  # symmetric
            np.testing.assert_allclose(Phi.T @ Phi, Phi, atol=1e-12)  # (10b)
            for j in range(i, len(leg.columns)):
                if j != leg.k_column:  # removes the later unactuated twists
                    np.testing.assert_allclose(Phi @ K.s[l][j], 0.0, atol=1e-12)
        # and nothing else: rank = 6 - number of unactuated joints
        r = len(leg.columns) - (leg.k_column is not None)
        assert np.linalg.matrix_rank(Phis[0], tol=1e-9) == 6 - r
        np.testing.assert_allclose(K.Phi2[l], Phis[0], atol=1e-14)
    if ps.platform is not None:
        np.testing.assert_allclose(K.Phi, sum(K.Phi2[l] for l in range(len(ps.legs))), atol=1e-12)


@pytest.mark.parametrize("name", list(PARALLEL))
def test_rates_and_platform_twist(name):
    """Unactuated rates (11b)/(12b) from the actuated ones; t_e = J θ̇ (14b)."""
    model = _model(name)
    for q, v, _ in _states(model, 2, 3):
        K = denoc.kinematics(model, q, v)
        ps = K.layout.ps
        for l, leg in enumerate(ps.legs):
            for c, col in enumerate(leg.columns):
                if not col.closure:
                    assert K.rates[l][c] == pytest.approx(v[col.v], abs=1e-10)
        np.testing.assert_allclose(K.te, K.J @ v[model.actuated], atol=1e-14)
        if ps.platform is not None:
            d = ld.forward_kinematics(model, q, v, data=model.create_data())
            b = model.body_index(ps.platform)
            R, o = d.Xw[b, :3], d.Xw[b, 3]
            w = R @ d.V[b, :3]
            ve = R @ d.V[b, 3:] + np.cross(w, K.E - o)
            np.testing.assert_allclose(K.te, np.r_[w, ve], atol=1e-10)


@pytest.mark.parametrize("name", list(PARALLEL))
def test_denoc_matrices(name):
    """t = Nl Nc Nd θ̇ (17a) gives the bodies' twists; Nᵀ M N (26) is the kernel's GIM and the
    tree's inertia reduced to the actuated rates."""
    model = _model(name)
    (q, v, _), *_ = _states(model, 1, 4)
    D = denoc.denoc_matrices(model, q)
    st = denoc.layout(model)
    t = D.N @ v[model.actuated]
    d = ld.forward_kinematics(model, q, v, data=model.create_data())
    for c in range(len(st.columns)):
        sl = st.slot_after[c]
        if sl < 0:
            continue
        b = model.body_index(st.ps.slots[sl][0])
        R, o = d.Xw[b, :3], d.Xw[b, 3]
        w = R @ d.V[b, :3]
        np.testing.assert_allclose(
            t[6 * c : 6 * c + 6], np.r_[w, R @ d.V[b, 3:] + np.cross(w, D.E - o)], atol=1e-10
        )
    I = denoc.generalized_inertia_matrix(model, q)
    np.testing.assert_allclose(D.N.T @ D.M @ D.N, I, atol=1e-12 * np.abs(I).max())
    G = np.column_stack(
        [ld.complete_velocity(model, q, np.eye(model.nv)[a]) for a in model.actuated]
    )
    np.testing.assert_allclose(G.T @ ld.crba(model, q) @ G, I, atol=1e-10 * np.abs(I).max())
    # N_l is block lower triangular with identity diagonal blocks (17b)
    assert np.allclose(np.triu(D.Nl, 6), 0.0) and np.allclose(np.diag(D.Nl), 1.0)


def test_segmented_legs_and_welded_bodies():
    """Legs of rigidly joined pieces (fixed joints) are one body each."""
    for model in (ld.examples.stewart(segments=3), ld.examples.delta(segments=2)):
        ps = ld.parallel_structure(model)
        assert all(isinstance(b, tuple) and len(b) > 1 for g in ps.legs for b in g.bodies)
        for q, v, tau in _states(model, 2, 5):
            ref = ld.forward_dynamics(model, q, v, tau, method="augmented")
            _assert_same(_fd(model, q, v, tau), ref)


def _passive_leg_mechanism(extra_actuated=False):
    """A planar platform on two actuated R-R-R legs and one passive R-R leg (2 DOF)."""
    b = ld.ModelBuilder("passive_leg", gravity=(0, -9.81, 0), planar=True)
    base = [(0.0, 0.0), (1.2, 0.0), (0.6, 1.4)]
    # platform on leg 1: links of 0.5 m, the platform a 0.4 m bar
    b.add_body("a1", "ground", ld.Revolute("z"), actuated=True, **rod(1.0, 0.5))
    b.add_body("b1", "a1", ld.Revolute("z"), xyz=(0.5, 0, 0), actuated=extra_actuated,
               **rod(1.0, 0.5))  # fmt: skip
    b.add_body("platform", "b1", ld.Revolute("z"), xyz=(0.5, 0, 0), **rod(2.0, 0.4))
    b.add_body("a2", "ground", ld.Revolute("z"), xyz=(*base[1], 0), actuated=True, **rod(1.0, 0.5))
    b.add_body("b2", "a2", ld.Revolute("z"), xyz=(0.5, 0, 0), **rod(1.0, 0.5))
    b.add_body("c3", "ground", ld.Revolute("z"), xyz=(*base[2], 0), **rod(1.5, 0.9))
    b.add_frame("p_end", "platform", xyz=(0.4, 0, 0))
    b.add_frame("p_mid", "platform", xyz=(0.2, 0, 0))
    b.add_frame("b2_tip", "b2", xyz=(0.5, 0, 0))
    b.add_frame("c3_tip", "c3", xyz=(0.9, 0, 0))
    b.add_closure("leg2", "b2_tip", "p_end", "revolute")
    b.add_closure("leg3", "c3_tip", "p_mid", "revolute")
    model = b.build()
    guess = [1.2, -1.6, 0.6, 2.2, 1.4, -1.9]
    q0 = ld.assemble(model, guess, fixed=[])
    model.q0 = q0
    return model


def test_leg_without_actuator():
    model = _passive_leg_mechanism()
    ps = ld.parallel_structure(model)
    assert ps.platform == "platform" and len(ps.legs) == 3 and ps.dof == 2
    assert ps.legs[2].k is None and ps.legs[2].actuated is None
    for q, v, tau in _states(model, 3, 6):
        ref = ld.forward_dynamics(model, q, v, tau, method="augmented")
        _assert_same(_fd(model, q, v, tau), ref)
        inv = ld.inverse_dynamics(model, q, v, ref.qdd, method="denoc")
        gen = ld.inverse_dynamics(model, q, v, ref.qdd)
        scale = max(1.0, np.abs(ld.rnea(model, q, v, ref.qdd)).max())
        # τ on the unactuated joints is part of the motion: the actuators alone differ
        np.testing.assert_allclose(inv.u, gen.u, rtol=0, atol=1e-10 * scale)
        np.testing.assert_allclose(inv.lam, gen.lam, rtol=0, atol=1e-10 * scale)
        assert inv.u.shape == tau[model.actuated].shape


def test_an_inconsistent_velocity_is_not_accepted():
    """DeNOC computes the unactuated rates from the actuated ones (11b)/(12b); with
    inconsistent unactuated entries of v its q̈ fails the acceptance check J q̈ = γ(q, v),
    so ld.forward_dynamics falls back to the augmented solve of the given state and
    the minimal-coordinate ``denoc.run`` reads the actuated rates only."""
    model = _model("three_rrr")
    (q, v, tau), *_ = _states(model, 1, 7)
    w = np.array(v)
    free = np.setdiff1d(np.arange(model.nv), model.actuated)
    w[free] += 1.0
    res = ld.forward_dynamics(model, q, w, tau, method="denoc")
    assert res.method == "augmented"
    ref = ld.forward_dynamics(model, q, w, tau, method="augmented")
    np.testing.assert_array_equal(res.qdd, ref.qdd)
    # the next consistent call is DeNOC's again (actuator forces only, for the inverse)
    tau = np.where(np.isin(np.arange(model.nv), model.actuated), tau, 0.0)
    good = _fd(model, q, v, tau)
    np.testing.assert_allclose(denoc.complete_rates(model, q, w), v, rtol=0, atol=1e-12)
    np.testing.assert_allclose(denoc.run(model, q, w, tau), good.qdd, rtol=0, atol=1e-12)
    np.testing.assert_allclose(
        denoc.inverse(model, q, w, good.qdd), tau[model.actuated], rtol=0, atol=1e-10
    )


def _four_bar_3d():
    """The four-bar with spatial closure rows (3 translations, 2 rotations): planar motion,
    so three of its five rows are redundant and dropped by the rank detection."""
    b = ld.ModelBuilder("four_bar_3d", gravity=(0, -9.81, 0))
    b.add_body("crank", "ground", ld.Revolute("z"), actuated=True, **rod(1.5, 0.3))
    b.add_body("coupler", "crank", ld.Revolute("z"), xyz=(0.3, 0, 0), **rod(5.0, 1.0))
    b.add_body("rocker", "ground", ld.Revolute("z"), xyz=(1.0, 0, 0), **rod(3.0, 0.6))
    b.add_frame("coupler_tip", "coupler", xyz=(1.0, 0, 0))
    b.add_frame("rocker_tip", "rocker", xyz=(0.6, 0, 0))
    b.add_closure("coupler_rocker", "coupler_tip", "rocker_tip", "revolute")
    model = b.build()
    model.q0 = ld.examples.four_bar().q0
    return model


def test_redundant_rows():
    model = _four_bar_3d()
    assert model.m == 5 and ld.parallel_structure(model).dof == 1
    for q, v, tau in _states(model, 3, 9):
        ref = ld.forward_dynamics(model, q, v, tau, method="augmented")
        res = _fd(model, q, v, tau)
        assert res.rank == 2 and res.dropped.size == 3
        _assert_same(res, ref)
        inv = ld.inverse_dynamics(model, q, v, ref.qdd, method="denoc")
        gen = ld.inverse_dynamics(model, q, v, ref.qdd)
        np.testing.assert_allclose(inv.lam, gen.lam, rtol=0, atol=1e-10 * np.abs(gen.lam).max())
        np.testing.assert_allclose(inv.u, gen.u, rtol=0, atol=1e-10 * np.abs(gen.u).max())


# ----------------------------------------------------------------------------- errors
def _four_bar_with(actuated=("crank",)):
    b = ld.ModelBuilder("four_bar_variant", gravity=(0, -9.81, 0), planar=True)
    b.add_body("crank", "ground", ld.Revolute("z"), actuated="crank" in actuated,
               **rod(1.5, 0.3))  # fmt: skip
    b.add_body("coupler", "crank", ld.Revolute("z"), xyz=(0.3, 0, 0),
               actuated="coupler" in actuated, **rod(5.0, 1.0))  # fmt: skip
    b.add_body("rocker", "ground", ld.Revolute("z"), xyz=(1.0, 0, 0),
               actuated="rocker" in actuated, **rod(3.0, 0.6))  # fmt: skip
    b.add_frame("coupler_tip", "coupler", xyz=(1.0, 0, 0))
    b.add_frame("rocker_tip", "rocker", xyz=(0.6, 0, 0))
    b.add_closure("coupler_rocker", "coupler_tip", "rocker_tip", "revolute")
    model = b.build()
    model.q0 = ld.examples.four_bar().q0
    return model


@pytest.mark.parametrize(
    ("build", "assumption"),
    [
        (lambda: ld.examples.carpet_scraper(), "one moving platform"),
        (lambda: ld.examples.planar_ladder(3), "one moving platform"),
        (lambda: ld.examples.serial_arm(), "closed loops"),
        (lambda: _four_bar_with(("crank", "coupler")), "no actuation redundancy"),
    ],
)
def test_error_names_the_failing_assumption(build, assumption):
    model = build()
    with pytest.raises(ld.ModelError, match=assumption) as err:
        ld.parallel_structure(model)
    assert "augmented" in str(err.value) and "sslm" in str(err.value)
    z = np.zeros(model.nv)
    with pytest.raises(ld.ModelError, match=assumption):
        denoc.run(model, model.q0, z, z)
    with pytest.raises(ld.ModelError, match=assumption):
        ld.inverse_dynamics(model, model.q0, z, z, method="denoc")
    if model.m:  # a tree's forward dynamics is ABA whatever the method
        with pytest.raises(ld.ModelError, match=assumption):
            ld.forward_dynamics(model, model.q0, z, z, method="denoc")


def test_a_weld_closure_is_refused_by_name():
    """A five-bar whose distal link is made of two bodies, each on its own leg, welded by a
    closure: in the class (one rigid link) but the weld's multipliers are no leg's
    transmitted wrench, so DeNOC refuses it and names the other methods."""
    b = ld.ModelBuilder("welded_platform", gravity=(0, -9.81, 0), planar=True)
    b.add_body("a1", "ground", ld.Revolute("z"), actuated=True, **rod(1.0, 0.5))
    b.add_body("b1", "a1", ld.Revolute("z"), xyz=(0.5, 0, 0), **rod(1.0, 0.5))
    b.add_body("half1", "b1", ld.Fixed(), xyz=(0.5, 0, 0), **rod(1.0, 0.2))
    b.add_body("a2", "ground", ld.Revolute("z"), xyz=(1.2, 0, 0), actuated=True, **rod(1.0, 0.5))
    b.add_body("b2", "a2", ld.Revolute("z"), xyz=(0.5, 0, 0), **rod(1.0, 0.5))
    b.add_body("half2", "b2", ld.Revolute("z"), xyz=(0.5, 0, 0), **rod(1.0, 0.2))
    b.add_frame("h1", "half1", xyz=(0.2, 0, 0))
    b.add_frame("h2", "half2")
    b.add_closure("weld", "h1", "h2", "weld")
    model = b.build()
    model.q0 = ld.assemble(model, [1.2, -0.9, 1.8, 0.9, 0.4], fixed=[])
    assert ld.parallel_structure(model).dof == 2
    z = np.zeros(model.nv)
    with pytest.raises(ld.ModelError, match=r"'weld' is a weld.*augmented"):
        ld.forward_dynamics(model, model.q0, z, z, method="denoc")


def test_error_paths_of_the_other_assumptions():
    # a floating body
    b = ld.ModelBuilder("floating")
    b.add_body("a", "ground", ld.Free(), mass=1.0)
    b.add_body("c", "ground", ld.Revolute("z"), actuated=True, mass=1.0)
    b.add_frame("fa", "a")
    b.add_frame("fc", "c", xyz=(1, 0, 0))
    b.add_closure("k", "fa", "fc", "ball")
    with pytest.raises(ld.ModelError, match="fixed base"):
        ld.parallel_structure(b.build())
    # two actuated joints on one leg
    with pytest.raises(ld.ModelError, match="one actuated joint per leg"):
        ld.parallel_structure(_passive_leg_mechanism(extra_actuated=True))
    # the five-bar with one actuator: a leg with an unactuated mobility
    with pytest.raises(ld.ModelError, match="DOF = number of actuated joints"):
        ld.parallel_structure(_five_bar_one_actuator())
    # an open branch hanging from the platform
    b = ld.ModelBuilder("branch", gravity=(0, -9.81, 0), planar=True)
    b.add_body("crank", "ground", ld.Revolute("z"), actuated=True, **rod(1.5, 0.3))
    b.add_body("coupler", "crank", ld.Revolute("z"), xyz=(0.3, 0, 0), **rod(5.0, 1.0))
    b.add_body("flap", "coupler", ld.Revolute("z"), xyz=(0.5, 0, 0), **rod(1.0, 0.2))
    b.add_body("rocker", "ground", ld.Revolute("z"), xyz=(1.0, 0, 0), **rod(3.0, 0.6))
    b.add_frame("ct", "coupler", xyz=(1.0, 0, 0))
    b.add_frame("rt", "rocker", xyz=(0.6, 0, 0))
    b.add_closure("cr", "ct", "rt", "revolute")
    with pytest.raises(ld.ModelError, match="'flap' ends an open branch"):
        ld.parallel_structure(b.build())


def _five_bar_one_actuator():
    b = ld.ModelBuilder("five_bar_1", gravity=(0, -9.81, 0), planar=True)
    b.add_body("p1", "ground", ld.Revolute("z"), actuated=True, **rod(3.0, 0.6))
    b.add_body("d1", "p1", ld.Revolute("z"), xyz=(0.6, 0, 0), **rod(1.6, 1.1))
    b.add_body("p2", "ground", ld.Revolute("z"), xyz=(1.2, 0, 0), **rod(2.0, 0.7))
    b.add_body("d2", "p2", ld.Revolute("z"), xyz=(0.7, 0, 0), **rod(1.1, 0.8))
    b.add_frame("t1", "d1", xyz=(1.1, 0, 0))
    b.add_frame("t2", "d2", xyz=(0.8, 0, 0))
    b.add_closure("ee", "t1", "t2", "revolute")
    model = b.build()
    model.q0 = ld.examples.five_bar().q0
    return model


def test_singular_configurations_raise():
    # the five-bar with both distal links aligned: the end-effector moves with the
    # actuators locked, Φ of eq. (14a) is singular
    model = _model("five_bar")
    t1 = np.pi
    A1 = 0.6 * np.array([np.cos(t1), np.sin(t1)])
    t2 = np.arccos((1.9**2 - 1.8**2 - 0.7**2) / (2 * 1.8 * 0.7))
    A2 = np.array([1.2, 0.0]) + 0.7 * np.array([np.cos(t2), np.sin(t2)])
    P = A1 + 1.1 * (A2 - A1) / np.linalg.norm(A2 - A1)
    ang = np.arctan2(*(P - A1)[::-1]), np.arctan2(*(P - A2)[::-1])
    q = np.array([t1, ang[0] - t1, t2, ang[1] - t2])
    assert np.abs(ld.closure_residual(model, q)).max() < 1e-12
    with pytest.raises(ld.SingularityError, match="condition number"):
        denoc.run(model, q, np.zeros(4), np.zeros(4))
    # ld.forward_dynamics falls back to the augmented solve, which is regular there
    tau = np.array([1.0, 0.0, -0.5, 0.0])
    res = ld.forward_dynamics(model, q, np.zeros(4), tau, method="denoc")
    assert res.method == "augmented"
    ref = ld.forward_dynamics(model, q, np.zeros(4), tau, method="augmented")
    np.testing.assert_array_equal(res.qdd, ref.qdd)


def test_leg_singularity_raises():
    """A rocker-driven four-bar at its dead point: crank and coupler aligned, the leg's
    unactuated joints (crank, coupler, cut) are dependent, δ of eq. (11c) vanishes."""
    model = _four_bar_with(actuated="rocker")
    ps = ld.parallel_structure(model)
    assert ps.legs[0].columns[ps.legs[0].k_column].joint == "rocker"
    phi = np.arccos((1.3**2 + 1.0 - 0.6**2) / 2.6)
    B = 1.3 * np.array([np.cos(phi), np.sin(phi)])
    q = np.array([phi, 0.0, np.arctan2(B[1], B[0] - 1.0)])
    assert np.abs(ld.closure_residual(model, q)).max() < 1e-12
    with pytest.raises(ld.SingularityError, match=r"leg 1: .* joint 'crank' is dependent"):
        denoc.run(model, q, np.zeros(3), np.zeros(3))


def test_bad_input():
    model = _model("five_bar")
    q = np.array(model.q0)
    with pytest.raises(ValueError, match="shape"):
        ld.forward_dynamics(model, q[:3], np.zeros(4), np.zeros(4), method="denoc")
    with pytest.raises(ValueError, match="NaN"):
        ld.forward_dynamics(model, q, np.full(4, np.nan), np.zeros(4), method="denoc")
    with pytest.raises(ValueError, match="NaN"):
        denoc.run(model, q, np.full(4, np.nan), np.zeros(4))
    # lists, read-only and strided arrays give the same answer as the fast path
    v = np.zeros(4)
    ref = _fd(model, q, v, np.ones(4))
    np.testing.assert_array_equal(
        ld.forward_dynamics(model, list(q), list(v), [1.0] * 4, method="denoc").qdd, ref.qdd
    )
    tau = np.ones(8)[::2]
    q.setflags(write=False)
    np.testing.assert_array_equal(_fd(model, q, v, tau).qdd, ref.qdd)
    # a workspace of its own
    np.testing.assert_array_equal(_fd(model, q, v, tau, data=model.create_data()).qdd, ref.qdd)


@pytest.mark.parametrize("name", ["four_bar", "five_bar", "three_rrr", "stewart"])
def test_cut_leg_multipliers_equal_the_transmitted_wrench_fit(name):
    """λ from the cut legs' tree columns (``cut_multipliers``, the plans that allow it)
    equals the general path (transmitted wrenches, platform balance, fit) on the same
    state, and both equal the augmented oracle; the Delta takes the general path."""
    model = _model(name)
    for q, v, tau in _states(model, 5, 7):
        fast = ld.forward_dynamics(model, q, v, tau, method="denoc")
        assert fast.method == "denoc"
        plan = denoc.plan_for(model, model._data)
        head = plan.buf[:8].view(np.int64)
        assert head[7] == 1
        head[7] = 0  # force the general path
        try:
            slow = ld.forward_dynamics(model, q, v, tau, method="denoc")
        finally:
            head[7] = 1
        assert slow.method == "denoc"
        exact = ld.forward_dynamics(model, q, v, tau, method="augmented")
        scale = max(1.0, np.abs(exact.lam).max())
        assert np.abs(fast.lam - slow.lam).max() <= 1e-10 * scale
        assert np.abs(fast.lam - exact.lam).max() <= 1e-10 * scale
        np.testing.assert_array_equal(fast.qdd, slow.qdd)
    delta = _model("delta")
    ld.forward_dynamics(delta, delta.q0, np.zeros(delta.nv), method="denoc")
    assert denoc.plan_for(delta, delta._data).buf[:8].view(np.int64)[7] == 0
