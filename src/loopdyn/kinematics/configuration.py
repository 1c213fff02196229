"""Integration and differences on the configuration manifold.

Revolute, prismatic and universal coordinates are Euclidean.  A spherical joint's
quaternion is integrated with the body-frame angular velocity, q ⊗ exp(ω dt / 2);
a free joint's pose on SE(3) with the body twist, M · exp(dt [ω; v]) (the same
convention as Pinocchio).  ``difference`` is the inverse: integrate(q0,
difference(q0, q1), 1) == q1.
"""

import numpy as np
from numba import njit

from loopdyn.kernels.tiers import kernel
from loopdyn.model.joints import FREE, SPHERICAL
from loopdyn.validation import configuration, scalar, vector


@njit(cache=True, inline="always")
def _quat_mul_exp(q, k, w0, w1, w2, out):
    """out[k:k+4] = q[k:k+4] ⊗ exp(ω / 2) for a rotation vector ω; result normalised."""
    th = np.sqrt(w0 * w0 + w1 * w1 + w2 * w2)
    if th < 1e-8:
        c = 1.0 - th * th / 8.0
        s = 0.5 - th * th / 48.0
    else:
        c = np.cos(0.5 * th)
        s = np.sin(0.5 * th) / th
    ew, ex, ey, ez = c, s * w0, s * w1, s * w2
    aw, ax, ay, az = q[k], q[k + 1], q[k + 2], q[k + 3]
    n = np.sqrt(aw * aw + ax * ax + ay * ay + az * az)
    aw, ax, ay, az = aw / n, ax / n, ay / n, az / n
    rw = aw * ew - ax * ex - ay * ey - az * ez
    rx = aw * ex + ax * ew + ay * ez - az * ey
    ry = aw * ey - ax * ez + ay * ew + az * ex
    rz = aw * ez + ax * ey - ay * ex + az * ew
    n = np.sqrt(rw * rw + rx * rx + ry * ry + rz * rz)
    out[k], out[k + 1], out[k + 2], out[k + 3] = rw / n, rx / n, ry / n, rz / n


@njit(cache=True)
def integrate_kernel(topo, q, v, dt, out):
    """out = q ⊕ v dt on the configuration manifold."""
    for i in range(topo.shape[0]):
        jt, iq, iv, nqj = topo[i, 1], topo[i, 2], topo[i, 3], topo[i, 4]
        if jt == SPHERICAL:
            _quat_mul_exp(q, iq, v[iv] * dt, v[iv + 1] * dt, v[iv + 2] * dt, out)
        elif jt == FREE:
            w0, w1, w2 = v[iv] * dt, v[iv + 1] * dt, v[iv + 2] * dt
            u0, u1, u2 = v[iv + 3] * dt, v[iv + 4] * dt, v[iv + 5] * dt
            # translation of exp([ω; u]) in the body frame: V(ω) u
            th2 = w0 * w0 + w1 * w1 + w2 * w2
            th = np.sqrt(th2)
            if th < 1e-6:
                A = 0.5 - th2 / 24.0
                B = 1.0 / 6.0 - th2 / 120.0
            else:
                A = (1.0 - np.cos(th)) / th2
                B = (th - np.sin(th)) / (th2 * th)
            c0 = w1 * u2 - w2 * u1
            c1 = w2 * u0 - w0 * u2
            c2 = w0 * u1 - w1 * u0
            e0 = w1 * c2 - w2 * c1
            e1 = w2 * c0 - w0 * c2
            e2 = w0 * c1 - w1 * c0
            d0 = u0 + A * c0 + B * e0
            d1 = u1 + A * c1 + B * e1
            d2 = u2 + A * c2 + B * e2
            # rotate by the current orientation (quaternion at iq+3) into the parent frame
            qw, qx, qy, qz = q[iq + 3], q[iq + 4], q[iq + 5], q[iq + 6]
            n2 = qw * qw + qx * qx + qy * qy + qz * qz
            s = 2.0 / n2
            out[iq] = (
                q[iq]
                + (1 - s * (qy * qy + qz * qz)) * d0
                + s * (qx * qy - qw * qz) * d1
                + s * (qx * qz + qw * qy) * d2
            )
            out[iq + 1] = (
                q[iq + 1]
                + s * (qx * qy + qw * qz) * d0
                + (1 - s * (qx * qx + qz * qz)) * d1
                + s * (qy * qz - qw * qx) * d2
            )
            out[iq + 2] = (
                q[iq + 2]
                + s * (qx * qz - qw * qy) * d0
                + s * (qy * qz + qw * qx) * d1
                + (1 - s * (qx * qx + qy * qy)) * d2
            )
            _quat_mul_exp(q, iq + 3, w0, w1, w2, out)
        else:
            for k in range(nqj):
                out[iq + k] = q[iq + k] + v[iv + k] * dt


def integrate_into(topo, q, v, dt, out):
    """``integrate_kernel`` called from Python, in the tier that runs
    (``loopdyn.kernels.tiers``)."""
    kernel(integrate_kernel)(topo, q, v, dt, out)


def integrate(model, q, v, dt=1.0):
    """The configuration reached from ``q`` moving with constant velocity ``v`` for ``dt``."""
    q = configuration(model, q)
    v = vector(v, model.nv, "v", model)
    dt = scalar(dt, "dt", model)
    out = np.empty(model.nq)
    integrate_into(model.topo, q, v, dt, out)
    if not np.all(np.isfinite(out)):
        raise ValueError(f"{model.name}: integrate overflowed (|v dt| too large: dt = {dt})")
    return out


def _quat_to_rot(qw, qx, qy, qz):
    n = np.sqrt(qw * qw + qx * qx + qy * qy + qz * qz)
    w, x, y, z = qw / n, qx / n, qy / n, qz / n
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def _log3(R):
    """Rotation vector of R (inverse of Rodrigues), robust near 0 and π."""
    c = np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0)
    th = np.arccos(c)
    w = np.array([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    if th < 1e-6:
        return 0.5 * w * (1.0 + th * th / 6.0)
    if np.pi - th < 1e-4:
        # axis from the symmetric part: R + I ≈ 2 a aᵀ near π
        B = 0.5 * (R + np.eye(3))
        k = int(np.argmax(np.diag(B)))
        a = B[:, k] / np.sqrt(max(B[k, k], 1e-300))
        if a @ w < 0:
            a = -a
        return th * a / np.linalg.norm(a)
    return th / (2.0 * np.sin(th)) * w


def difference(model, q0, q1):
    """The velocity v with integrate(q0, v, 1) == q1 (the tangent from q0 to q1)."""
    q0 = configuration(model, q0)
    q1 = configuration(model, q1)
    out = np.empty(model.nv)
    for i in range(model.nbodies):
        jt, iq, iv, nqj, nvj = (int(x) for x in model.topo[i, 1:6])
        if jt == SPHERICAL:
            R0 = _quat_to_rot(*q0[iq : iq + 4])
            R1 = _quat_to_rot(*q1[iq : iq + 4])
            out[iv : iv + 3] = _log3(R0.T @ R1)
        elif jt == FREE:
            R0 = _quat_to_rot(*q0[iq + 3 : iq + 7])
            R1 = _quat_to_rot(*q1[iq + 3 : iq + 7])
            w = _log3(R0.T @ R1)
            dp = R0.T @ (q1[iq : iq + 3] - q0[iq : iq + 3])
            # invert V(ω): u = V⁻¹ dp
            th = np.linalg.norm(w)
            W = np.array([[0, -w[2], w[1]], [w[2], 0, -w[0]], [-w[1], w[0], 0]])
            # V⁻¹ = I - W/2 + c W², c = (1 - θ sin θ / (2 (1 - cos θ))) / θ²; the closed
            # form cancels catastrophically for small θ, where its series is used
            if th < 1e-2:
                c = 1.0 / 12.0 + th**2 / 720.0 + th**4 / 30240.0
            else:
                c = (1.0 - th * np.sin(th) / (2.0 * (1.0 - np.cos(th)))) / th**2
            Vinv = np.eye(3) - 0.5 * W + c * (W @ W)
            out[iv : iv + 3] = w
            out[iv + 3 : iv + 6] = Vinv @ dp
        else:
            out[iv : iv + nvj] = q1[iq : iq + nqj] - q0[iq : iq + nqj]
    return out
