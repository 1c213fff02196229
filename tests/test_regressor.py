"""Inverse-dynamics regressors and base parameters (issue 40, identification).

- the tree regressor Y: rnea = Y π for random physical parameters, and column by column
  Pinocchio's ``computeJointTorqueRegressor`` on the trees it can express;
- the closed-loop regressor Y_a: ``ld.inverse_dynamics``' actuator forces = Y_a π on
  random consistent states of the catalog's closed mechanisms and of random
  mechanisms (exactly actuated and over-actuated, the minimum-norm answer);
- base parameters: the base regressor times the base parameters reproduces the forces
  at states outside the sample, and the rank does not depend on the sample;
- examples/identification.py run as a user runs it.
"""

import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from hypothesis import HealthCheck, given, settings

import loopdyn as ld
import mechanisms as mx
from closed_helpers import CLOSED, closed_model, consistent_state
from conftest import TREE_CASES, build_model, random_state
from loopdyn.analysis.assembly import partition
from loopdyn.analysis.motion import consistent_acceleration
from loopdyn.analysis.regressor import (
    PARAMETERS,
    parameter_names,
    random_states,
    stacked_regressor,
)
from loopdyn.interop.pinocchio import PinocchioExport

ROOT = Path(__file__).resolve().parents[1]
TOL = 1e-10


def random_parameters(model, rng, spread=0.5):
    """Physical random π: each body's mass times 10^U(-spread, spread), a centre of mass
    moved by up to 0.3 m, and I_c = tr(Σ) 1 - Σ for a random second moment Σ (positive
    definite, triangle inequality by construction)."""
    out = []
    for i in range(model.nbodies):
        m = model.masses[i] * 10.0 ** rng.uniform(-spread, spread)
        c = model.inertia[i, [2, 0, 1], [4, 5, 3]] / model.masses[i] + rng.uniform(-0.3, 0.3, 3)
        if model.planar:
            c[2] = 0.0
        B = rng.normal(size=(3, 3)) * 0.2
        sigma = m * (B @ B.T + 0.01 * np.eye(3))
        Ic = np.trace(sigma) * np.eye(3) - sigma
        Io = Ic + m * (c @ c * np.eye(3) - np.outer(c, c))
        h = m * c
        out.append([m, *h, Io[0, 0], Io[0, 1], Io[1, 1], Io[0, 2], Io[1, 2], Io[2, 2]])
    return np.concatenate(out)


def assert_rel(actual, desired, tol=TOL, what=""):
    scale = max(1.0, float(np.abs(desired).max(initial=0.0)))
    err = float(np.abs(np.asarray(actual) - desired).max(initial=0.0))
    assert err <= tol * scale, f"{what}: error {err:.3g} > {tol:g} x {scale:.3g}"


# --------------------------------------------------------------------------- parameters
def test_parameters_round_trip_and_order():
    model = ld.examples.five_bar()
    pi = ld.inertial_parameters(model)
    assert pi.shape == (40,)
    # a rod of mass m, length a along x: m, m c = (m a/2, 0, 0), Izz about the origin m a²/3
    m, a = 3.0, 0.6
    np.testing.assert_allclose(pi[:4], [m, m * a / 2, 0, 0], atol=1e-15)
    np.testing.assert_allclose(pi[9], m * a * a / 3, rtol=1e-12)
    rng = np.random.default_rng(1)
    new = random_parameters(model, rng)
    m2 = ld.with_inertial_parameters(model, new)
    np.testing.assert_allclose(ld.inertial_parameters(m2), new, rtol=1e-13, atol=1e-15)
    assert m2.q0 is model.q0 and m2.description == model.description
    assert np.array_equal(m2.actuated, model.actuated) and m2.closures == model.closures
    names = ["leg1_proximal.m", "leg1_proximal.mcx", "leg1_proximal.mcy"]
    assert parameter_names(model)[:3] == names


def test_parameters_match_pinocchio_order():
    model = ld.examples.serial_arm()
    ex = PinocchioExport(model)
    pin_pi = np.concatenate([ex.model.inertias[j].toDynamicParameters() for j in range(1, 7)])
    np.testing.assert_allclose(ld.inertial_parameters(model), pin_pi, rtol=1e-13, atol=1e-15)
    assert PARAMETERS == ("m", "mcx", "mcy", "mcz", "Ixx", "Ixy", "Iyy", "Ixz", "Iyz", "Izz")


@pytest.mark.parametrize(
    "edit, match",
    [
        (lambda p: p.__setitem__(0, -1.0), "mass must be positive"),
        (lambda p: p.__setitem__(9, -5.0), "not positive definite"),
        (lambda p: p.__setitem__(slice(4, 10), [1.0, 0.0, 1.0, 0.0, 0.0, 5.0]), "triangle"),
    ],
)
def test_unphysical_parameters_are_named(edit, match):
    model = ld.examples.four_bar()
    pi = ld.inertial_parameters(model).copy()
    pi[1:4] = 0.0  # centre of mass at the origin: the inertia about it is I itself
    edit(pi)
    with pytest.raises(ld.ModelError, match=match) as e:
        ld.with_inertial_parameters(model, pi)
    assert "crank" in str(e.value)


# --------------------------------------------------------------------------- tree regressor
@pytest.mark.parametrize("case", sorted(TREE_CASES) + [f"closed:{n}" for n in sorted(CLOSED)])
def test_tree_regressor_matches_pinocchio(case):
    """Column by column against ``pin.computeJointTorqueRegressor`` (rows in loopdyn's
    layout) on the test-suite's trees and the closed catalog's spanning trees; for
    bodies on fixed joints, which Pinocchio merges into the parent joint, the forces Y π
    of random parameters."""
    model = closed_model(case[7:]) if case.startswith("closed:") else build_model(case)
    rng = np.random.default_rng(3)
    model = ld.with_inertial_parameters(model, random_parameters(model, rng))
    ex = PinocchioExport(model)
    pm, pd = ex.model, ex.model.createData()
    for seed in range(2):
        q, v, a = random_state(model, seed)
        Y = ld.joint_torque_regressor(model, q, v, a)
        Yp = pin.computeJointTorqueRegressor(pm, pd, ex.q(q), ex.v(v), ex.v(a))
        Yp = np.asarray(Yp)[ex.vmap]
        shared = {}
        for j in ex.joint_of_body:
            shared[j] = shared.get(j, 0) + 1
        checked = 0
        for i, j in enumerate(ex.joint_of_body):
            if j and shared[j] == 1:
                cols = Yp[:, 10 * (j - 1) : 10 * j]
                assert_rel(Y[:, 10 * i : 10 * i + 10], cols, what=f"{case} body {i}")
                checked += 1
        assert checked >= 1
        pin_pi = np.concatenate(
            [pm.inertias[j].toDynamicParameters() for j in range(1, pm.njoints)]
        )
        tau = Y @ ld.inertial_parameters(model)
        assert_rel(tau, Yp @ pin_pi, what=case)
        assert_rel(tau, ld.rnea(model, q, v, a), what=case)


@pytest.mark.parametrize("name", sorted(CLOSED))
def test_tree_regressor_is_rnea(name):
    """Y π = rnea of the model carrying π, for the catalog's closed mechanisms' trees."""
    model = closed_model(name)
    rng = np.random.default_rng(5)
    for k in range(2):
        pi = random_parameters(model, rng)
        other = ld.with_inertial_parameters(model, pi)
        q, v, a = random_state(model, k)
        Y = ld.joint_torque_regressor(model, q, v, a)
        assert_rel(Y @ pi, ld.rnea(other, q, v, a), what=name)


def test_tree_regressor_inputs():
    model = ld.examples.four_bar()
    q, v, a = [0.1, 0.2, 0.3], [1, 2, 3], np.zeros(3, dtype=np.float32)
    Y = ld.joint_torque_regressor(model, q, v, a)
    assert Y.shape == (3, 30)
    assert_rel(Y @ ld.inertial_parameters(model), ld.rnea(model, q, v, a))
    data = model.create_data()
    np.testing.assert_array_equal(ld.joint_torque_regressor(model, q, v, a, data=data), Y)
    with pytest.raises(ValueError, match="NaN"):
        ld.joint_torque_regressor(model, [np.nan, 0, 0], v, a)
    with pytest.raises(ValueError, match="shape"):
        ld.joint_torque_regressor(model, q, v, [1.0])
    with pytest.raises(ld.ModelError):
        ld.joint_torque_regressor("four_bar", q, v, a)


# --------------------------------------------------------------------------- closed loops
def _consistent(model, rng):
    q, v, tau = consistent_state(model, rng)
    qdd = ld.forward_dynamics(model, q, v, tau).qdd  # a consistent acceleration
    return q, v, qdd


@pytest.mark.parametrize("name", sorted(CLOSED))
def test_closed_loop_regressor_is_inverse_dynamics(name):
    model = closed_model(name)
    rng = np.random.default_rng(7)
    for _ in range(3):
        q, v, qdd = _consistent(model, rng)
        reg = ld.closed_loop_regressor(model, q, v, qdd)
        assert reg.Y.shape == (model.actuated.size, 10 * model.nbodies)
        for pi in (ld.inertial_parameters(model), random_parameters(model, rng)):
            other = ld.with_inertial_parameters(model, pi)
            ref = ld.inverse_dynamics(other, q, v, qdd)
            assert_rel(reg.Y @ pi, ref.u, what=name)
            assert_rel(reg.Y_lam @ pi, ref.lam, what=f"{name} λ")
            assert (reg.rank, reg.nullity, reg.unique, reg.tau_unique, reg.over_actuated) == (
                ref.rank, ref.nullity, ref.unique, ref.tau_unique, ref.over_actuated,
            )  # fmt: skip
            assert np.abs(reg.residual @ pi).max() <= 1e-9 * max(1.0, np.abs(reg.Y_tree @ pi).max())


OTHER = ["cassie_leg", "closed_knee_leg", "digit_leg", "five_bar_leg", "four_bar_chain",
         "geared_chain", "kangaroo_leg", "serial_arm"]  # fmt: skip


@pytest.mark.parametrize("name", OTHER)
def test_closed_loop_regressor_other_catalog(name):
    """Legs (some under-actuated: passive toes), couplings, redundant rows (the closed
    knee: λ not unique, u unique), a tree: the motion the motors make with the model's
    own parameters, reproduced with them; flags as ``ld.inverse_dynamics``'."""
    model = ld.examples.get(name)
    rng = np.random.default_rng(8)
    q, v, tau = consistent_state(model, rng)
    driven = np.zeros(model.nv)
    driven[model.actuated] = tau[model.actuated]
    qdd = ld.forward_dynamics(model, q, v, driven).qdd
    pi = ld.inertial_parameters(model)
    reg = ld.closed_loop_regressor(model, q, v, qdd)
    ref = ld.inverse_dynamics(model, q, v, qdd)
    assert_rel(reg.Y @ pi, ref.u, what=name)
    assert_rel(reg.Y @ pi, driven[model.actuated], tol=1e-8, what=name)
    assert np.abs(reg.residual @ pi).max() <= 1e-9 * max(1.0, np.abs(reg.Y_tree @ pi).max())
    assert (reg.rank, reg.unique, reg.tau_unique, reg.over_actuated) == (
        ref.rank, ref.unique, ref.tau_unique, ref.over_actuated,
    )  # fmt: skip
    if name == "closed_knee_leg":
        assert reg.tau_unique and not reg.unique


def test_over_actuated_minimum_norm():
    """Every coordinate of the five-bar driven: the minimum-norm answer, warned as
    ``ld.inverse_dynamics`` warns it."""
    model = closed_model("five_bar")
    rng = np.random.default_rng(2)
    q, v, qdd = _consistent(model, rng)
    act = np.arange(model.nv)
    pi = random_parameters(model, rng)
    with pytest.warns(ld.NonUniqueWarning, match="not unique"):
        reg = ld.closed_loop_regressor(model, q, v, qdd, actuated=act)
    with pytest.warns(ld.NonUniqueWarning):
        ref = ld.inverse_dynamics(ld.with_inertial_parameters(model, pi), q, v, qdd, actuated=act)
    assert reg.over_actuated and not reg.tau_unique
    assert (reg.rank, reg.nullity) == (ref.rank, ref.nullity)
    assert_rel(reg.Y @ pi, ref.u)
    assert_rel(reg.Y_lam @ pi, ref.lam)


def test_under_actuated_residual():
    """A passive coordinate of the five-bar left unactuated (one motor): the motion is
    producible only by parameters with residual π = 0 (the model's own, whose forward
    dynamics made it), not by others."""
    model = closed_model("five_bar")
    rng = np.random.default_rng(4)
    q, v, _ = consistent_state(model, rng)
    tau = np.zeros(model.nv)
    tau[0] = 1.3
    qdd = ld.forward_dynamics(model, q, v, tau).qdd
    reg = ld.closed_loop_regressor(model, q, v, qdd, actuated=[0])
    pi = ld.inertial_parameters(model)
    assert np.abs(reg.residual @ pi).max() < 1e-9
    assert_rel(reg.Y @ pi, [1.3])
    assert np.abs(reg.residual @ random_parameters(model, rng)).max() > 1e-3


def test_closed_loop_regressor_refuses_inconsistent_motion():
    model = closed_model("four_bar")
    q = model.q0
    with pytest.raises(ld.ActuationError, match="velocity"):
        ld.closed_loop_regressor(model, q, [1.0, 0.0, 0.0], np.zeros(3))
    v = ld.complete_velocity(model, q, [1.0, 0.0, 0.0])
    with pytest.raises(ld.ActuationError, match="acceleration"):
        ld.closed_loop_regressor(model, q, v, [0.0, 5.0, 0.0])


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(mx.mechanisms(max_bodies=10, max_closures=3))
def test_random_mechanisms(mech):
    """Random mechanisms, driven at the independent coordinates (exactly actuated) and
    at every coordinate (over-actuated, minimum norm)."""
    model = mech.model
    rng = np.random.default_rng(0)
    q, v = mech.q, mech.v
    ind = partition(model, q).independent
    qdd = consistent_acceleration(model, q, v, rng.normal(size=ind.size), ind)
    pi = random_parameters(model, rng)
    other = ld.with_inertial_parameters(model, pi)
    for act in (ind, np.arange(model.nv)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ld.NonUniqueWarning)
            try:
                ref = ld.inverse_dynamics(other, q, v, qdd, actuated=act)
            except ld.ActuationError:  # the generator's state is off the closures: skip
                continue
            reg = ld.closed_loop_regressor(model, q, v, qdd, actuated=act)
        if reg.rank != ref.rank:  # the two solvers' rank decisions differ: a near-singular A
            continue
        A = reg._A
        s = np.linalg.svd(A, compute_uv=False)
        cond = s[0] / s[reg.rank - 1] if reg.rank else 1.0
        tol = TOL * max(1.0, cond / 1e3)  # both least-squares solves are backward stable
        assert_rel(reg.Y @ pi, ref.u, tol=tol, what=mech.code())


# --------------------------------------------------------------------------- base parameters
FIVE_BAR_TREE_RANK = 12  # two planar 2R arms under gravity: ZZ1R, MX1R, MY1R, ZZ2, MX2, MY2 each


def test_base_parameters_five_bar():
    model = closed_model("five_bar")
    tree = ld.base_parameters(model, tree=True)
    assert tree.rank == FIVE_BAR_TREE_RANK
    # independent of our QR: the rank of the stacked tree regressor by an SVD
    W = stacked_regressor(model, random_states(model, 30, seed=9), tree=True)
    assert np.linalg.matrix_rank(W) == FIVE_BAR_TREE_RANK
    base = ld.base_parameters(model)
    # the loop ties the two arms' tips: one combination fewer is seen by the motors
    assert base.rank == FIVE_BAR_TREE_RANK - 1
    assert base.gap[0] > 1e-6 and base.gap[1] < 1e-11
    assert len(base.describe()) == base.rank


@pytest.mark.parametrize("name", ["four_bar", "five_bar", "three_rrr", "spatial_ladder", "delta"])
def test_base_regressor_reproduces_forces(name):
    """β = K π and Y_b = Y[:, independent] reproduce Y_a π at states outside the sample
    (the true and random parameters); the rank is the same for other samples."""
    model = closed_model(name)
    base = ld.base_parameters(model, seed=0)
    assert 0 < base.rank < 10 * model.nbodies
    assert base.K.shape == (base.rank, 10 * model.nbodies)
    for seed in (1, 2):
        assert ld.base_parameters(model, seed=seed).rank == base.rank
    assert ld.base_parameters(model, seed=3, n_states=3 * base.rows).rank == base.rank
    rng = np.random.default_rng(11)
    for q, v, qdd in random_states(model, 4, seed=123):
        Y = ld.closed_loop_regressor(model, q, v, qdd).Y
        for pi in (ld.inertial_parameters(model), random_parameters(model, rng)):
            assert_rel(base.regressor(Y) @ base.values(pi), Y @ pi, tol=1e-9, what=name)


def test_base_parameters_of_given_states():
    """States given explicitly (a trajectory) and an unexcited one: a mechanism at rest
    in one pose sees only gravity, so fewer parameters."""
    model = closed_model("four_bar")
    states = random_states(model, 20, seed=4)
    full = ld.base_parameters(model, states)
    assert full.rows == 20 and full.rank == ld.base_parameters(model).rank
    q = model.q0
    z = np.zeros(model.nv)
    still = ld.base_parameters(model, [(q, z, z)] * 5)
    assert still.rank == 1 < full.rank


# --------------------------------------------------------------------------- the example
def test_identification_example_runs():
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "identification.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("relative error")]
    assert len(lines) == 2, out.stdout
    exact, noisy = (float(ln.split()[-1]) for ln in lines)
    assert exact < 1e-6, out.stdout
    assert noisy < 0.05, out.stdout


@pytest.mark.parametrize(
    "name,act",
    [("four_bar", None), ("stewart", None), ("five_bar", "all"), ("five_bar", [0]),
     ("closed_knee_leg", None), ("serial_arm", None)],
)  # fmt: skip
def test_compiled_regressor_equals_numpy(name, act):
    """The compiled regressor (one QR for every column where [B Jᵀ] has full column
    rank, the minimum-norm solve column by column otherwise) against the NumPy path
    (``lstsq``): Y, Y_lam, the residual to 1e-10 relative, the same ranks and flags."""
    from loopdyn.analysis.inverse import _indices
    from loopdyn.analysis.regressor import _compiled_regressor, _numpy_regressor

    model = closed_model(name) if name in CLOSED else ld.examples.get(name)
    q, v, qdd = _consistent(model, np.random.default_rng(5))
    if act is not None:
        act = _indices(model, list(range(model.nv)) if act == "all" else act)
    else:
        act = model.actuated
    a = _compiled_regressor(model, q, v, qdd, act, 1e-6, None)
    b = _numpy_regressor(model, q, v, qdd, act, 1e-6, None)
    assert a is not None
    for x, y, what in ((a.Y, b.Y, "Y"), (a.Y_lam, b.Y_lam, "Y_lam"), (a.residual, b.residual, "R")):
        assert np.abs(x - y).max(initial=0.0) <= 1e-10 * max(1.0, np.abs(y).max(initial=0.0)), what
    assert (a.rank, a.nullity, a.unique, a.tau_unique, a.over_actuated) == (
        b.rank, b.nullity, b.unique, b.tau_unique, b.over_actuated,
    )  # fmt: skip
