"""Frame placements and Jacobians: finite differences and Pinocchio."""

import numpy as np
import pinocchio as pin
import pytest

import loopdyn as ld
from conftest import build_export, build_model, log3, random_state

EPS = 1e-6


def _frames_to_check(model, k=4):
    """A few frames spread over the model (the last one is usually deepest), plus a body."""
    frames = list(model.frames)
    picks = frames[:: max(1, len(frames) // k)][:k] + frames[-1:]
    return [*dict.fromkeys(picks), model.body_names[-1]]


def _fd_jacobian(model, q, frame, reference):
    """Central finite-difference Jacobian of a frame along every tangent direction."""
    R0, _ = ld.frame_placement(model, q, frame)
    J = np.empty((6, model.nv))
    for k in range(model.nv):
        dv = np.zeros(model.nv)
        dv[k] = EPS
        Rp, pp = ld.frame_placement(model, ld.integrate(model, q, dv), frame)
        Rm, pm = ld.frame_placement(model, ld.integrate(model, q, -dv), frame)
        if reference == "world":
            w = log3(Rp @ Rm.T) / (2 * EPS)
            lin = (pp - pm) / (2 * EPS)
        else:
            w = log3(Rm.T @ Rp) / (2 * EPS)
            lin = R0.T @ (pp - pm) / (2 * EPS)
        J[:3, k] = w
        J[3:, k] = lin
    return J


@pytest.mark.parametrize("reference", ["world", "local"])
def test_frame_jacobian_matches_finite_differences(small_case, reference):
    model = build_model(small_case)
    q, _, _ = random_state(model, 3)
    for frame in _frames_to_check(model, k=2):
        J = ld.frame_jacobian(model, q, frame, reference=reference)
        assert J.shape == (6, model.nv)
        np.testing.assert_allclose(
            J, _fd_jacobian(model, q, frame, reference), atol=1e-6, err_msg=str(frame)
        )


@pytest.mark.parametrize("reference", ["world", "local"])
def test_frame_jacobian_matches_pinocchio(case, reference):
    model, ex = build_model(case), build_export(case)
    pref = pin.LOCAL_WORLD_ALIGNED if reference == "world" else pin.LOCAL
    pd = ex.model.createData()
    for seed in (1, 2):
        q, _, _ = random_state(model, seed)
        pq = ex.q(q)
        pin.computeJointJacobians(ex.model, pd, pq)
        pin.framesForwardKinematics(ex.model, pd, pq)
        for frame in _frames_to_check(model):
            fid = (
                ex.frame_ids[frame]
                if frame in ex.frame_ids
                else ex.model.getFrameId(frame, pin.FrameType.BODY)
            )
            Jp = ex.jacobian_from(pin.getFrameJacobian(ex.model, pd, fid, pref))
            J = ld.frame_jacobian(model, q, frame, reference=reference)
            np.testing.assert_allclose(J, Jp, rtol=1e-10, atol=1e-10, err_msg=str(frame))
            # computeFrameJacobian (its own kinematics) agrees too
            Jc = pin.computeFrameJacobian(ex.model, ex.model.createData(), pq, fid, pref)
            np.testing.assert_allclose(J, ex.jacobian_from(Jc), atol=1e-10, err_msg=str(frame))


def test_reference_alias_and_bad_reference():
    model = build_model("random10-s2")
    q, _, _ = random_state(model, 4)
    np.testing.assert_array_equal(
        ld.frame_jacobian(model, q, "tip5", reference="local_world_aligned"),
        ld.frame_jacobian(model, q, "tip5", reference="world"),
    )
    with pytest.raises(ValueError, match="reference"):
        ld.frame_jacobian(model, q, "tip5", reference="global")


def test_local_jacobian_is_rotated_world_jacobian(case):
    model = build_model(case)
    q, _, _ = random_state(model, 8)
    frame = model.frames[-1]
    R, _ = ld.frame_placement(model, q, frame)
    Jw = ld.frame_jacobian(model, q, frame, reference="world")
    Jl = ld.frame_jacobian(model, q, frame, reference="local")
    np.testing.assert_allclose(Jl[:3], R.T @ Jw[:3], atol=1e-12)
    np.testing.assert_allclose(Jl[3:], R.T @ Jw[3:], atol=1e-12)


def test_frame_placement_matches_pinocchio(case):
    model, ex = build_model(case), build_export(case)
    pd = ex.model.createData()
    q, _, _ = random_state(model, 9)
    pin.framesForwardKinematics(ex.model, pd, ex.q(q))
    names = list(model.frames) + list(model.body_names)
    for name in names:
        fid = (
            ex.frame_ids[name]
            if name in ex.frame_ids
            else ex.model.getFrameId(name, pin.FrameType.BODY)
        )
        R, p = ld.frame_placement(model, q, name)
        oMf = pd.oMf[fid]
        np.testing.assert_allclose(R, oMf.rotation, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(p, oMf.translation, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(R @ R.T, np.eye(3), atol=1e-12)


def test_body_velocities_match_pinocchio(case):
    """forward_kinematics with v: body-frame spatial velocity [ω; v_origin]."""
    model, ex = build_model(case), build_export(case)
    q, v, _ = random_state(model, 10)
    pd = ex.model.createData()
    pin.forwardKinematics(ex.model, pd, ex.q(q), ex.v(v))
    pin.updateFramePlacements(ex.model, pd)
    d = ld.forward_kinematics(model, q, v)
    for i, name in enumerate(model.body_names):
        fid = ex.model.getFrameId(name, pin.FrameType.BODY)
        vp = pin.getFrameVelocity(ex.model, pd, fid, pin.LOCAL)
        np.testing.assert_allclose(d.V[i, :3], vp.angular, atol=1e-10, err_msg=name)
        np.testing.assert_allclose(d.V[i, 3:], vp.linear, atol=1e-10, err_msg=name)
        # consistent with the body's own local Jacobian
        np.testing.assert_allclose(
            d.V[i], ld.frame_jacobian(model, q, name, reference="local") @ v, atol=1e-10
        )


def test_serial_arm_tool_at_neutral():
    """Neutral arm stands straight up: tool at z = 0.3+0.4+0.35+0.1+0.1+0.08."""
    model = ld.examples.serial_arm()
    R, p = ld.frame_placement(model, model.neutral(), "tool")
    np.testing.assert_allclose(R, np.eye(3), atol=1e-15)
    np.testing.assert_allclose(p, [0.0, 0.0, 1.33], atol=1e-12)
    # the base yaw does not move the tool; the shoulder swings it about y
    J = ld.frame_jacobian(model, model.neutral(), "tool")
    np.testing.assert_allclose(J[:, 0], [0, 0, 1, 0, 0, 0], atol=1e-15)
    np.testing.assert_allclose(J[:, 1], [0, 1, 0, 1.03, 0, 0], atol=1e-12)


def test_ground_frame_and_unknown_frame():
    b = ld.ModelBuilder("m")
    b.add_body("link", joint=ld.Revolute("z"), com=(0.5, 0, 0))
    b.add_frame("site", "ground", xyz=(1.0, 2.0, 3.0))
    model = b.build()
    _, p = ld.frame_placement(model, [0.4], "site")
    np.testing.assert_array_equal(p, [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(ld.frame_jacobian(model, [0.4], "site"), np.zeros((6, 1)))
    with pytest.raises(ld.ModelError, match="nowhere"):
        ld.frame_jacobian(model, [0.4], "nowhere")
    with pytest.raises(ld.ModelError, match="nowhere"):
        ld.frame_placement(model, [0.4], "nowhere")
