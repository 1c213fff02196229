"""ld.actuation_map: motor space <-> serial-equivalent joints of the legs (issue 39),
held to the velocities the closures give, the accelerations forward dynamics gives and
the torques inverse dynamics gives with either set actuated (virtual power)."""

import numpy as np
import pytest

import loopdyn as ld
from closed_helpers import consistent_state

LEGS = {
    "cassie_leg": ["hip_roll", "hip_yaw", "hip_pitch", "knee", "toe"],
    "kangaroo_leg": ["hip_roll", "hip_pitch", "knee", "ankle"],
    "digit_leg": ["hip_roll", "hip_yaw", "hip_pitch", "knee", "ankle"],  # ankle: universal
}


@pytest.mark.parametrize("name", sorted(LEGS))
@pytest.mark.parametrize("seed", [0, 1])
def test_map_matches_the_closures_and_the_dynamics(name, seed):
    m = ld.examples.get(name)
    rng = np.random.default_rng(seed)
    q, v, _ = consistent_state(m, rng)
    am = ld.actuation_map(m, q, v, joints=LEGS[name])
    assert am.A.shape == (am.joints.size, am.motors.size) == (m.actuated.size,) * 2
    assert list(am.motors) == list(m.actuated)
    # velocities: every consistent v
    assert np.allclose(am.joint_velocity(v[am.motors]), v[am.joints], atol=1e-12, rtol=0)
    assert np.allclose(am.motor_velocity(v[am.joints]), v[am.motors], atol=1e-11, rtol=0)
    # accelerations of forward dynamics under motor torques
    tau = np.zeros(m.nv)
    tau[am.motors] = rng.normal(size=am.motors.size)
    qdd = ld.forward_dynamics(m, q, v, tau).qdd
    scale = 1.0 + np.abs(qdd).max()
    assert np.abs(am.joint_acceleration(qdd[am.motors]) - qdd[am.joints]).max() < 1e-11 * scale
    assert np.abs(am.motor_acceleration(qdd[am.joints]) - qdd[am.motors]).max() < 1e-10 * scale
    # torques: the same motion driven by the motors or by the serial joints
    u_m = ld.inverse_dynamics(m, q, v, qdd, actuated=am.motors).u
    u_j = ld.inverse_dynamics(m, q, v, qdd, actuated=am.joints).u
    assert np.allclose(u_m, tau[am.motors], atol=1e-10 * (1 + np.abs(tau).max()))
    tscale = 1e-11 * (1.0 + np.abs(u_j).max() + np.abs(u_m).max())
    assert np.abs(am.motor_torque(u_j) - u_m).max() < tscale
    assert np.abs(am.joint_torque(u_m) - u_j).max() < tscale * max(1.0, am.condition)


def test_a_joint_the_motors_do_not_drive_is_named():
    m = ld.examples.get("five_bar_leg")  # the toe is passive: DOF 4, three motors
    q, _v, _ = consistent_state(m, np.random.default_rng(0))
    with pytest.raises(ld.ActuationError, match="do not determine toe_a"):
        ld.actuation_map(m, q, joints=["hip_roll", "knee_front", "toe_a"])
    am = ld.actuation_map(m, q, joints=["hip_roll", "knee_front", "knee_rear"])
    assert am.dof == 4 and am.A.shape == (3, 3)


def test_dead_point_and_bad_arguments():
    m = ld.examples.get("four_bar")
    q = m.q0
    am = ld.actuation_map(m, q, joints=["rocker"])
    assert am.bias is None
    with pytest.raises(ValueError, match="needs v"):
        am.joint_acceleration([1.0])
    with pytest.raises(ValueError, match="twice"):
        ld.actuation_map(m, q, joints=["rocker", "rocker"])
    with pytest.raises(ld.ModelError, match="does not close the loops"):
        ld.actuation_map(m, q + 0.1, joints=["rocker"])
    with pytest.raises(ld.ModelError, match="nope"):
        ld.actuation_map(m, q, joints=["nope"])
    with pytest.raises(ValueError, match="as many joint as motor"):
        ld.actuation_map(m, q, joints=["rocker", "coupler"]).motor_velocity([1.0, 2.0])
    # the four-bar's rocker at its extreme: the crank turns, the rocker stands still
    # (A -> 0), so the rocker's rate cannot give the crank's: a SingularityError there,
    # not a huge number

    def rate(theta, near):  # assembled by continuation from a nearby pose: one branch
        qq = ld.assemble(m, np.r_[theta, near[1:]], fixed="crank")
        return qq, ld.actuation_map(m, qq, joints=["rocker"]).A[0, 0]

    poses, rates = [q], [rate(q[0], q)[1]]
    for t in np.linspace(q[0], q[0] + 2 * np.pi, 145)[1:]:
        qq, a = rate(t, poses[-1])
        poses.append(qq)
        rates.append(a)
    k = next(i for i in range(144) if rates[i] * rates[i + 1] < 0)
    lo, hi, near = poses[k][0], poses[k + 1][0], poses[k]
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        qm, a = rate(mid, near)
        if a * rates[k] > 0:
            lo, near = mid, qm
        else:
            hi = mid
    qd, a = rate(0.5 * (lo + hi), near)
    dead = ld.actuation_map(m, qd, joints=["rocker"])
    assert abs(a) < 1e-9 and dead.joint_sigma < 1e-10
    with pytest.raises(ld.SingularityError, match="singular configuration of the linkage"):
        dead.motor_velocity([1.0])
    assert dead.motor_torque([2.0]).shape == (1,)  # the forward direction stays defined
