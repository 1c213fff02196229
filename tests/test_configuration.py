"""Integration and differences on the configuration manifold."""

import numpy as np
import pinocchio as pin
import pytest

import loopdyn as ld
from conftest import (
    assert_same_configuration,
    build_export,
    build_model,
    quat_to_rot,
    quaternion_slices,
    random_state,
)


def _quat_norms(model, q):
    return np.array([np.linalg.norm(q[s]) for s in quaternion_slices(model)])


@pytest.mark.parametrize("seed", [0, 1])
def test_integrate_difference_round_trip(case, seed):
    model = build_model(case)
    rng = np.random.default_rng(seed)
    q0 = model.random_configuration(rng)
    q1 = model.random_configuration(rng)
    dq = ld.difference(model, q0, q1)
    assert dq.shape == (model.nv,)
    assert_same_configuration(model, ld.integrate(model, q0, dq), q1, atol=1e-9)
    # difference of a configuration with itself is zero
    np.testing.assert_allclose(ld.difference(model, q1, q1), 0.0, atol=1e-12)


def test_difference_inverts_integrate(case):
    """difference(q, integrate(q, v)) == v while every rotation stays below π."""
    model = build_model(case)
    rng = np.random.default_rng(7)
    q = model.random_configuration(rng)
    v = rng.uniform(-1.0, 1.0, model.nv)  # rotation vectors of norm < √3 < π
    np.testing.assert_allclose(ld.difference(model, q, ld.integrate(model, q, v)), v, atol=1e-9)
    # tiny steps (series branches of exp / log)
    v_small = 1e-9 * rng.normal(size=model.nv)
    np.testing.assert_allclose(
        ld.difference(model, q, ld.integrate(model, q, v_small)), v_small, atol=1e-15
    )


def test_integrate_dt_scales_velocity(case):
    model = build_model(case)
    q, v, _ = random_state(model, 12)
    assert_same_configuration(
        model, ld.integrate(model, q, v, 0.37), ld.integrate(model, q, 0.37 * v), atol=1e-12
    )
    assert_same_configuration(model, ld.integrate(model, q, v, 0.0), q, atol=1e-14)


@pytest.mark.parametrize("seed", [0, 1])
def test_integrate_matches_pinocchio(case, seed):
    model, ex = build_model(case), build_export(case)
    q, v, _ = random_state(model, seed)
    q1 = ld.integrate(model, q, v)
    q1_pin = ex.q_from(pin.integrate(ex.model, ex.q(q), ex.v(v)))
    assert_same_configuration(model, q1, q1_pin, atol=1e-10)


@pytest.mark.parametrize("seed", [0, 1])
def test_difference_matches_pinocchio(case, seed):
    model, ex = build_model(case), build_export(case)
    rng = np.random.default_rng(seed + 50)
    q0 = model.random_configuration(rng)
    q1 = model.random_configuration(rng)
    dq_pin = ex.v_from(pin.difference(ex.model, ex.q(q0), ex.q(q1)))
    np.testing.assert_allclose(ld.difference(model, q0, q1), dq_pin, atol=1e-9)


def test_quaternions_stay_unit(quat_case):
    model = build_model(quat_case)
    q, v, _ = random_state(model, 13)
    for _ in range(20):
        q = ld.integrate(model, q, 3.0 * v, 0.1)
        np.testing.assert_allclose(_quat_norms(model, q), 1.0, atol=1e-14)
    # a non-unit input quaternion comes out unit, with the same rotation
    qs = q.copy()
    for s in quaternion_slices(model):
        qs[s] *= 2.5
    out = ld.integrate(model, qs, v, 0.01)
    np.testing.assert_allclose(_quat_norms(model, out), 1.0, atol=1e-14)
    assert_same_configuration(model, out, ld.integrate(model, q, v, 0.01), atol=1e-12)


def test_free_joint_integrates_body_twist():
    """A free body moving with body twist [0; u]: origin moves by R u (parent frame)."""
    b = ld.ModelBuilder("free")
    b.add_body("body", joint=ld.Free())
    model = b.build()
    rng = np.random.default_rng(2)
    q = model.random_configuration(rng)
    R = quat_to_rot(q[3:])
    u = np.array([0.2, -0.5, 1.0])
    q1 = ld.integrate(model, q, np.r_[0.0, 0.0, 0.0, u])
    np.testing.assert_allclose(q1[:3], q[:3] + R @ u, atol=1e-14)
    np.testing.assert_allclose(quat_to_rot(q1[3:]), R, atol=1e-14)
    # a pure spin ω (body frame): R1 = R exp([ω]×), origin fixed
    w = np.array([0.0, 0.0, np.pi / 2])
    q2 = ld.integrate(model, q, np.r_[w, 0.0, 0.0, 0.0])
    Rz = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    np.testing.assert_allclose(q2[:3], q[:3], atol=1e-14)
    np.testing.assert_allclose(quat_to_rot(q2[3:]), R @ Rz, atol=1e-14)


def test_euclidean_coordinates_integrate_linearly():
    model = ld.examples.serial_arm()
    q, v, _ = random_state(model, 4)
    np.testing.assert_allclose(ld.integrate(model, q, v, 0.5), q + 0.5 * v, atol=1e-15)
    np.testing.assert_allclose(ld.difference(model, q, q + v), v, atol=1e-14)


def test_neutral_and_random_configuration():
    model = build_model("random30-s0")
    q = model.neutral()
    assert q.shape == (model.nq,)
    np.testing.assert_array_equal(_quat_norms(model, q), 1.0)
    for s in quaternion_slices(model):
        np.testing.assert_array_equal(q[s], [1.0, 0.0, 0.0, 0.0])
    np.testing.assert_array_equal(np.delete(q, [s.start for s in quaternion_slices(model)]), 0.0)
    # random configurations are reproducible and have unit quaternions
    qa = model.random_configuration(np.random.default_rng(5))
    qb = model.random_configuration(np.random.default_rng(5))
    np.testing.assert_array_equal(qa, qb)
    np.testing.assert_allclose(_quat_norms(model, qa), 1.0, atol=1e-14)
