"""Tree dynamics (rnea, crba, aba, nonlinear_effects) against Pinocchio and themselves."""

import numpy as np
import pinocchio as pin
import pytest

import loopdyn as ld
from conftest import assert_close, build_export, build_model, quaternion_slices, random_state

SEEDS = (11, 12, 13)


def _pin_crba(ex, q):
    """Pinocchio's mass matrix (upper triangle symmetrised), in loopdyn's layout."""
    M = pin.crba(ex.model, ex.model.createData(), ex.q(q))
    M = np.triu(M) + np.triu(M, 1).T
    return ex.matrix_from(M)


# ------------------------------------------------------------------ vs Pinocchio
@pytest.mark.parametrize("seed", SEEDS)
def test_aba_matches_pinocchio(case, seed):
    model, ex = build_model(case), build_export(case)
    q, v, tau = random_state(model, seed)
    expected = ex.v_from(pin.aba(ex.model, ex.model.createData(), ex.q(q), ex.v(v), ex.v(tau)))
    assert_close(ld.aba(model, q, v, tau), expected)


@pytest.mark.parametrize("seed", SEEDS)
def test_rnea_matches_pinocchio(case, seed):
    model, ex = build_model(case), build_export(case)
    q, v, a = random_state(model, seed)
    expected = ex.v_from(pin.rnea(ex.model, ex.model.createData(), ex.q(q), ex.v(v), ex.v(a)))
    assert_close(ld.rnea(model, q, v, a), expected)


@pytest.mark.parametrize("seed", SEEDS)
def test_crba_matches_pinocchio(case, seed):
    model, ex = build_model(case), build_export(case)
    q, _, _ = random_state(model, seed)
    assert_close(ld.crba(model, q), _pin_crba(ex, q))


@pytest.mark.parametrize("seed", SEEDS)
def test_nonlinear_effects_match_pinocchio(case, seed):
    model, ex = build_model(case), build_export(case)
    q, v, _ = random_state(model, seed)
    expected = ex.v_from(pin.nonLinearEffects(ex.model, ex.model.createData(), ex.q(q), ex.v(v)))
    assert_close(ld.nonlinear_effects(model, q, v), expected)


@pytest.mark.parametrize("neutral", [False, True], ids=["random", "neutral"])
def test_gravity_matches_pinocchio(case, neutral):
    """At rest (pure gravity, v = 0), in a random and in the neutral configuration."""
    model, ex = build_model(case), build_export(case)
    q = model.neutral() if neutral else random_state(model, 14)[0]
    zero = np.zeros(model.nv)
    g = ex.v_from(pin.computeGeneralizedGravity(ex.model, ex.model.createData(), ex.q(q)))
    if not neutral:
        assert np.linalg.norm(g) > 1.0
    assert_close(ld.rnea(model, q, zero, zero), g)
    assert_close(ld.nonlinear_effects(model, q, zero), g)
    # at rest, the torque g holds the tree still
    assert_close(ld.aba(model, q, zero, g), zero)


# ------------------------------------------------------------- external wrenches
@pytest.mark.parametrize("seed", SEEDS[:2])
def test_external_wrenches_match_pinocchio(case, seed):
    model, ex = build_model(case), build_export(case)
    q, v, u = random_state(model, seed)
    fext = np.random.default_rng(seed + 100).normal(size=(model.nbodies, 6))
    pd = ex.model.createData()
    pq, pv, pu, pf = ex.q(q), ex.v(v), ex.v(u), ex.fext(fext)
    tau = ld.rnea(model, q, v, u, fext=fext)
    assert_close(tau, ex.v_from(pin.rnea(ex.model, pd, pq, pv, pu, pf)))
    qdd = ld.aba(model, q, v, u, fext=fext)
    assert_close(qdd, ex.v_from(pin.aba(ex.model, pd, pq, pv, pu, pf)))
    # the wrenches really change the answer
    assert not np.allclose(tau, ld.rnea(model, q, v, u))


def test_external_wrench_dict_equals_array():
    model, ex = build_model("random30-s0"), build_export("random30-s0")
    q, v, u = random_state(model, 5)
    rng = np.random.default_rng(6)
    names = [model.body_names[3], model.body_names[17], model.body_names[-1]]
    fdict = {name: rng.normal(size=6) for name in names}
    farr = np.zeros((model.nbodies, 6))
    for name, w in fdict.items():
        farr[model.body_index(name)] = w
    # a body index works as a key too
    fdict_idx = {model.body_index(name): w for name, w in fdict.items()}
    for f in (fdict, fdict_idx):
        for fn in (ld.rnea, ld.aba):
            np.testing.assert_array_equal(fn(model, q, v, u, fext=f), fn(model, q, v, u, farr))
    pd = ex.model.createData()
    expected = pin.aba(ex.model, pd, ex.q(q), ex.v(v), ex.v(u), ex.fext(farr))
    assert_close(ld.aba(model, q, v, u, fext=fdict), ex.v_from(expected))


def test_external_wrench_is_body_frame_about_origin():
    """A world-vertical force m g on a free body's origin cancels gravity exactly."""
    b = ld.ModelBuilder("floating", gravity=(0.0, 0.0, -9.81))
    b.add_body("box", joint=ld.Free(), mass=2.0, com=(0.1, -0.2, 0.3), inertia=(0.3, 0.4, 0.5))
    model = b.build()
    rng = np.random.default_rng(3)
    q = model.random_configuration(rng)
    R = ld.frame_placement(model, q, "box")[0]
    m, c = 2.0, np.array([0.1, -0.2, 0.3])
    f_body = R.T @ np.array([0.0, 0.0, m * 9.81])  # world +z force, in body axes
    # applied at the centre of mass: torque about the body origin is c × f
    w = np.r_[np.cross(c, f_body), f_body]
    qdd = ld.aba(model, q, np.zeros(6), np.zeros(6), fext={"box": w})
    np.testing.assert_allclose(qdd, 0.0, atol=1e-12)
    # without the wrench: free fall, ω̇ = 0 and the origin accelerates at g (body axes)
    qdd = ld.aba(model, q, np.zeros(6), np.zeros(6))
    np.testing.assert_allclose(qdd[:3], 0.0, atol=1e-12)
    np.testing.assert_allclose(qdd[3:], R.T @ model.gravity, atol=1e-12)


# ------------------------------------------------------------ self-consistency
@pytest.mark.parametrize("seed", SEEDS[:2])
def test_aba_inverts_rnea(case, seed):
    model = build_model(case)
    q, v, a = random_state(model, seed)
    assert_close(ld.aba(model, q, v, ld.rnea(model, q, v, a)), a, rtol=1e-9)
    tau = np.random.default_rng(seed).normal(size=model.nv)
    assert_close(ld.rnea(model, q, v, ld.aba(model, q, v, tau)), tau, rtol=1e-9)


def test_aba_inverts_rnea_with_fext(case):
    model = build_model(case)
    q, v, a = random_state(model, 21)
    fext = np.random.default_rng(22).normal(size=(model.nbodies, 6))
    tau = ld.rnea(model, q, v, a, fext=fext)
    assert_close(ld.aba(model, q, v, tau, fext=fext), a, rtol=1e-9)


def test_crba_symmetric_positive_definite(case):
    model = build_model(case)
    for seed in SEEDS:
        q, _, _ = random_state(model, seed)
        M = ld.crba(model, q)
        assert M.shape == (model.nv, model.nv)
        np.testing.assert_array_equal(M, M.T)
        np.linalg.cholesky(M)  # raises LinAlgError unless positive definite
        assert np.linalg.eigvalsh(M)[0] > 0.0


def test_crba_columns_from_rnea(case):
    """M e_k = rnea(q, 0, e_k) - rnea(q, 0, 0)."""
    model = build_model(case)
    q, _, _ = random_state(model, 31)
    zero = np.zeros(model.nv)
    g = ld.rnea(model, q, zero, zero)
    cols = np.empty((model.nv, model.nv))
    for k in range(model.nv):
        e = np.zeros(model.nv)
        e[k] = 1.0
        cols[:, k] = ld.rnea(model, q, zero, e) - g
    assert_close(ld.crba(model, q), cols, rtol=1e-10)


def test_aba_equals_mass_matrix_solve(case):
    """q̈ = M⁻¹ (τ - h)."""
    model = build_model(case)
    q, v, tau = random_state(model, 41)
    M = ld.crba(model, q)
    h = ld.nonlinear_effects(model, q, v)
    assert_close(ld.aba(model, q, v, tau), np.linalg.solve(M, tau - h), rtol=1e-8)


def test_nonlinear_effects_equal_rnea_zero_acceleration(case):
    model = build_model(case)
    q, v, _ = random_state(model, 51)
    np.testing.assert_array_equal(
        ld.nonlinear_effects(model, q, v), ld.rnea(model, q, v, np.zeros(model.nv))
    )


def test_explicit_data_workspace_gives_same_result():
    model = build_model("random30-s1")
    data = model.create_data()
    q, v, tau = random_state(model, 61)
    expected = ld.aba(model, q, v, tau)
    np.testing.assert_array_equal(ld.aba(model, q, v, tau, data=data), expected)
    np.testing.assert_array_equal(ld.crba(model, q, data=data), ld.crba(model, q))
    np.testing.assert_array_equal(ld.rnea(model, q, v, tau, data=data), ld.rnea(model, q, v, tau))
    # the default workspace is not polluted by another model's call
    other = build_model("random10-s1")
    ld.aba(other, *random_state(other, 1))
    np.testing.assert_array_equal(ld.aba(model, q, v, tau), expected)


def test_explicit_data_takes_the_compiled_path(monkeypatch):
    """A caller's own Data (Pinocchio's ``algo(model, data, ...)`` habit) is as fast as the
    default workspace: no checked-path conversion on valid input (it cost 6 µs vs 0.9)."""
    model = ld.examples.serial_arm()
    data = model.create_data()
    q, v, tau = random_state(model, 7)
    expected = ld.aba(model, q, v, tau), ld.rnea(model, q, v, tau), ld.crba(model, q)

    def checked(*args, **kws):
        raise AssertionError("the checked path was taken")

    # the checked path's first step, in the module that defines ld.aba, ld.rnea, ld.crba
    monkeypatch.setattr(ld.tree.algorithms, "configuration", checked)
    np.testing.assert_array_equal(ld.aba(model, q, v, tau, data=data), expected[0])
    np.testing.assert_array_equal(ld.rnea(model, q, v, tau, data=data), expected[1])
    np.testing.assert_array_equal(ld.crba(model, q, data=data), expected[2])


def test_simple_pendulum_analytic():
    """Point-like pendulum of length L about y: θ̈ = -(g / L) sin θ (com along -z)."""
    L, m, g = 0.7, 1.3, 9.81
    b = ld.ModelBuilder("pendulum", gravity=(0.0, 0.0, -g))
    b.add_body("bob", joint=ld.Revolute("y"), mass=m, com=(0.0, 0.0, -L), inertia=(1e-9,) * 3)
    model = b.build()
    for th in (0.0, 0.3, -1.2, 2.5):
        qdd = ld.aba(model, [th], [0.0], [0.0])
        np.testing.assert_allclose(qdd[0], -(g / L) * np.sin(th), rtol=1e-7, atol=1e-12)
        tau = ld.rnea(model, [th], [0.0], [0.0])
        np.testing.assert_allclose(tau[0], m * g * L * np.sin(th), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(ld.crba(model, [th]), [[m * L * L + 1e-9]], rtol=1e-12)


# ------------------------------------------------------------ input at the edge
def test_wrong_shapes_raise_value_error():
    model = build_model("random10-s1")
    q, v, u = random_state(model, 1)
    bad_q = np.zeros(model.nq + 1)
    bad_v = np.zeros(model.nv - 1)
    calls = [
        (lambda: ld.aba(model, bad_q, v, u), "q"),
        (lambda: ld.aba(model, q, bad_v, u), "v"),
        (lambda: ld.aba(model, q, v, bad_v), "tau"),
        (lambda: ld.aba(model, q[:, None][:3], v, u), "q"),
        (lambda: ld.rnea(model, bad_q, v, u), "q"),
        (lambda: ld.rnea(model, q, bad_v, u), "v"),
        (lambda: ld.rnea(model, q, v, bad_v), "a"),
        (lambda: ld.rnea(model, q, v, np.zeros((model.nv, 2))), "a"),
        (lambda: ld.crba(model, bad_q), "q"),
        (lambda: ld.crba(model, np.zeros((2, model.nq))), "q"),
        (lambda: ld.nonlinear_effects(model, q, bad_v), "v"),
        (lambda: ld.aba(model, q, v, "abc"), "tau"),
        (lambda: ld.frame_jacobian(model, bad_q, "tip0"), "q"),
        (lambda: ld.frame_placement(model, bad_q, "tip0"), "q"),
        (lambda: ld.integrate(model, q, bad_v), "v"),
        (lambda: ld.difference(model, q, bad_q), "q"),
    ]
    for call, what in calls:
        with pytest.raises(ValueError, match=rf"\b{what}\b") as info:
            call()
        assert not isinstance(info.value, ld.ModelError)
        assert type(info.value).__module__.split(".")[0] != "numba"


def test_integer_and_list_inputs_are_converted():
    model = ld.examples.serial_arm()
    qi = np.array([1, -2, 0, 3, 1, -1])
    vi = np.array([0, 1, 2, -1, 0, 1])
    ti = [1, 0, -3, 0, 2, 1]
    qf, vf, tf = qi.astype(float), vi.astype(float), np.array(ti, dtype=float)
    np.testing.assert_array_equal(ld.aba(model, qi, vi, ti), ld.aba(model, qf, vf, tf))
    np.testing.assert_array_equal(ld.rnea(model, list(qi), vi, ti), ld.rnea(model, qf, vf, tf))
    np.testing.assert_array_equal(ld.crba(model, qi), ld.crba(model, qf))
    np.testing.assert_array_equal(
        ld.frame_jacobian(model, qi, "tool"), ld.frame_jacobian(model, qf, "tool")
    )
    np.testing.assert_array_equal(ld.integrate(model, qi, vi), ld.integrate(model, qf, vf))
    # float32 and non-contiguous views as well
    q32 = qf.astype(np.float32)
    np.testing.assert_allclose(ld.aba(model, q32, vf, tf), ld.aba(model, q32.astype(float), vf, tf))
    wide = np.repeat(vf, 2)[::2]
    assert not wide.flags.c_contiguous
    np.testing.assert_array_equal(ld.aba(model, qf, wide, tf), ld.aba(model, qf, vf, tf))


def test_integer_fext_is_converted():
    model = ld.examples.serial_arm()
    q, v, u = random_state(model, 3)
    fi = np.arange(36).reshape(6, 6) % 5 - 2
    np.testing.assert_array_equal(
        ld.aba(model, q, v, u, fext=fi), ld.aba(model, q, v, u, fext=fi.astype(float))
    )


def test_zero_quaternion_rejected():
    model = build_model("random10-s0")
    q, v, u = random_state(model, 1)
    s = quaternion_slices(model)[0]
    q[s] = 0.0
    for call in (
        lambda: ld.aba(model, q, v, u),
        lambda: ld.rnea(model, q, v, u),
        lambda: ld.crba(model, q),
        lambda: ld.frame_jacobian(model, q, "tip3"),
        lambda: ld.integrate(model, q, v),
    ):
        with pytest.raises(ValueError, match="quaternion"):
            call()
    q[s] = np.nan
    with pytest.raises(ValueError, match=r"quaternion|q holds NaN"):
        ld.aba(model, q, v, u)


def test_non_unit_quaternion_is_normalised(quat_case):
    model = build_model(quat_case)
    slices = quaternion_slices(model)
    q, v, u = random_state(model, 71)
    qs = q.copy()
    for k, s in enumerate(slices):
        qs[s] *= 0.3 + 0.9 * k  # scales 0.3, 1.2, 2.1, ...
    q_before = qs.copy()
    assert_close(ld.aba(model, qs, v, u), ld.aba(model, q, v, u), rtol=1e-12)
    assert_close(ld.rnea(model, qs, v, u), ld.rnea(model, q, v, u), rtol=1e-12)
    assert_close(ld.crba(model, qs), ld.crba(model, q), rtol=1e-12)
    frame = model.frames[-1]
    assert_close(
        ld.frame_jacobian(model, qs, frame), ld.frame_jacobian(model, q, frame), rtol=1e-12
    )
    # the caller's array is not modified
    np.testing.assert_array_equal(qs, q_before)


def test_fext_wrong_shape_raises_value_error():
    model = build_model("random10-s1")
    q, v, u = random_state(model, 1)
    for bad in (
        np.zeros((model.nbodies + 1, 6)),
        np.zeros((model.nbodies, 3)),
        np.zeros(model.nbodies * 6),
    ):
        with pytest.raises(ValueError, match="fext"):
            ld.aba(model, q, v, u, fext=bad)
        with pytest.raises(ValueError, match="fext"):
            ld.rnea(model, q, v, u, fext=bad)
    with pytest.raises(ValueError, match="b3"):
        ld.aba(model, q, v, u, fext={"b3": np.zeros(5)})


def test_fext_unknown_body_raises_model_error():
    model = build_model("random10-s1")
    q, v, u = random_state(model, 1)
    with pytest.raises(ld.ModelError, match="no_such_body"):
        ld.aba(model, q, v, u, fext={"no_such_body": np.zeros(6)})
    with pytest.raises(ld.ModelError, match="no_such_body"):
        ld.rnea(model, q, v, u, fext={"b1": np.zeros(6), "no_such_body": np.zeros(6)})
    with pytest.raises(ld.ModelError, match="out of range"):
        ld.rnea(model, q, v, u, fext={model.nbodies: np.zeros(6)})


@pytest.mark.parametrize("where", ["q", "v", "tau", "fext"])
def test_non_finite_inputs_raise_instead_of_returning_nan(where):
    model = ld.examples.serial_arm()
    q, v, tau = np.zeros(6), np.zeros(6), np.zeros(6)
    fext = np.zeros((6, 6))
    {"q": q, "v": v, "tau": tau}.get(where, fext.reshape(-1))[2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        ld.aba(model, q, v, tau, fext=fext)
    with pytest.raises(ValueError, match="NaN"):
        ld.rnea(model, q, v, tau, fext=fext)
    if where != "fext":  # the fast path (no fext): the entry kernel's check
        with pytest.raises(ValueError, match="NaN"):
            ld.aba(model, q, v, tau)
        with pytest.raises(ValueError, match="NaN"):
            ld.rnea(model, q, v, tau)
    if where == "q":
        with pytest.raises(ValueError, match="NaN"):
            ld.crba(model, q)


def test_data_of_another_model_is_rejected():
    arm, other = ld.examples.serial_arm(), ld.examples.random_tree(3, seed=0)
    z = np.zeros(6)
    with pytest.raises(ValueError, match="create_data"):
        ld.aba(arm, z, z, z, data=object())
    for call in (
        lambda: ld.aba(arm, z, z, z, data=other.create_data()),
        lambda: ld.rnea(arm, z, z, z, data=other.create_data()),
        lambda: ld.crba(arm, z, data=other.create_data()),
    ):
        with pytest.raises(ValueError, match="create_data"):
            call()
    # a second Data of the same model is fine and gives the same result
    q, v, u = random_state(arm, 5)
    fresh = arm.create_data()
    np.testing.assert_array_equal(ld.aba(arm, q, v, u, data=fresh), ld.aba(arm, q, v, u))


def test_read_only_inputs_are_accepted():
    """model.q0 is read-only: every entry point must compile for it too."""
    model = ld.examples.serial_arm()
    z = np.zeros(6)
    z.setflags(write=False)
    assert not model.q0.flags.writeable
    np.testing.assert_array_equal(
        ld.aba(model, model.q0, z, z), ld.aba(model, np.array(model.q0), 0 * z, 0 * z)
    )
    np.testing.assert_array_equal(
        ld.rnea(model, model.q0, z, z), ld.rnea(model, np.array(model.q0), 0 * z, 0 * z)
    )
    np.testing.assert_array_equal(ld.crba(model, model.q0), ld.crba(model, np.array(model.q0)))
    closed = ld.examples.four_bar()
    zc = np.zeros(3)
    zc.setflags(write=False)
    for method in ld.methods.dynamics.METHODS:
        res = ld.forward_dynamics(closed, closed.q0, zc, zc, method=method)
        ref = ld.forward_dynamics(
            closed, np.array(closed.q0), np.zeros(3), np.zeros(3), method=method
        )
        np.testing.assert_allclose(res.qdd, ref.qdd, rtol=1e-14)


def test_every_input_kind_gives_the_same_answer_and_compiles_nothing_new():
    """Strided, reversed, read-only, int and list inputs give the fast path's answer; no
    kernel is compiled for them (one compiled signature per entry kernel)."""
    from loopdyn.tree import ABA, CRBA, RNEA

    model = ld.examples.serial_arm()
    q, v, u = random_state(model, 9)
    wide = [np.repeat(x, 2)[::2] for x in (q, v, u)]
    back = [np.ascontiguousarray(x[::-1])[::-1] for x in (q, v, u)]
    frozen = [x.copy() for x in (q, v, u)]
    for x in frozen:
        x.setflags(write=False)
    for qs, vs, us in (wide, back, (q, wide[1], u), frozen, (q, list(v), u)):
        np.testing.assert_array_equal(ld.aba(model, qs, vs, us), ld.aba(model, q, v, u))
        np.testing.assert_array_equal(ld.rnea(model, qs, vs, us), ld.rnea(model, q, v, u))
        np.testing.assert_array_equal(ld.crba(model, qs), ld.crba(model, q))
    for e in (ABA, RNEA, CRBA):  # one signature each
        (sig,) = e.kernel.overloads
        assert sig == e.signature.args


@pytest.mark.parametrize("axis", ["x", "z", (0.3, -0.4, 0.866)])
def test_aba_with_a_prismatic_root_equals_the_mass_matrix_solve(axis):
    """A prismatic first body (its S block starts at row 3) followed by a revolute one."""
    b = ld.ModelBuilder("slider_arm", gravity=(0.0, -9.81, -3.0))
    b.add_body("slider", joint=ld.Prismatic(axis), mass=2.0, com=(0.1, 0.2, 0.0),
               inertia=(0.5, 2.5, 2.7))  # fmt: skip
    b.add_body("arm", "slider", ld.Revolute("y"), xyz=(0.3, 0.0, 0.1), mass=1.0,
               com=(0.0, 0.0, -0.4), inertia=(0.1, 0.1, 0.02))  # fmt: skip
    model = b.build()
    q, v, tau = np.array([0.3, 0.5]), np.array([0.7, -1.1]), np.array([1.0, -0.2])
    M = ld.crba(model, q)
    h = ld.nonlinear_effects(model, q, v)
    np.testing.assert_allclose(ld.aba(model, q, v, tau), np.linalg.solve(M, tau - h), rtol=1e-12)
