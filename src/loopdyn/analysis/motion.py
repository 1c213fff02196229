"""Prescribed motions of the actuated coordinates, and controllers built on them.

Used by the Saha & Schiehlen reproductions (``examples/saha_schiehlen.py``):

- :func:`cycloidal`: the normalised cycloidal motion of eq. (35),
  θ(t) = θ(0) + [θ(T) - θ(0)] s(t/T), s(τ) = τ - sin(2πτ) / 2π;
- :class:`PrescribedMotion`: consistent (q, q̇, q̈) of a closed-loop model whose
  actuated coordinates follow a motion, and the actuator forces that produce it
  (closed-loop inverse dynamics);
- :meth:`PrescribedMotion.feedforward` and :meth:`PrescribedMotion.computed_torque`:
  controllers ``tau(t, q, v)`` for ``ld.simulate`` (open loop; eq. (37)).

Models whose actuated coordinates are Euclidean (revolute, prismatic) only.
"""

import numpy as np

from loopdyn.analysis.assembly import assemble, complete_velocity
from loopdyn.analysis.inverse import inverse_dynamics
from loopdyn.kinematics.closures import constraints


def cycloidal(t, T, start, end):
    """(θ, θ̇, θ̈) of eq. (35) at time t (clamped to [0, T]); start/end scalars or arrays."""
    start, end = np.asarray(start, dtype=float), np.asarray(end, dtype=float)
    tau = min(max(float(t) / T, 0.0), 1.0)
    inside = 0.0 < float(t) < T
    s = tau - np.sin(2.0 * np.pi * tau) / (2.0 * np.pi)
    ds = (1.0 - np.cos(2.0 * np.pi * tau)) / T if inside else 0.0
    dds = 2.0 * np.pi * np.sin(2.0 * np.pi * tau) / T**2 if inside else 0.0
    d = end - start
    return start + d * s, d * ds, d * dds


def consistent_acceleration(model, q, v, qdd_actuated, actuated=None, data=None):
    """q̈ (nv) with the actuated entries given and J q̈ = γ (minimum-norm for the rest)."""
    act = model.actuated if actuated is None else np.asarray(actuated, dtype=np.int64)
    qdd = np.zeros(model.nv)
    qdd[act] = qdd_actuated
    if model.m == 0:
        return qdd
    _, J, gamma = constraints(model, q, v, data=data)
    free = np.setdiff1d(np.arange(model.nv), act)
    qdd[free] = np.linalg.lstsq(J[:, free], gamma - J[:, act] @ qdd[act], rcond=None)[0]
    return qdd


class PrescribedMotion:
    """The actuated coordinates of ``model`` following ``motion(t) -> (θ, θ̇, θ̈)``.

    ``q_start``: a configuration on the wanted assembly branch (default
    ``model.q0``); each state is assembled from the previous one, so call
    :meth:`state` with increasing times for the branch to be followed.
    """

    def __init__(self, model, motion, q_start=None, data=None):
        self.model = model
        self.motion = motion
        self.act = model.actuated
        self.data = data
        self._q = np.array(model.q0 if q_start is None else q_start, dtype=float)

    def state(self, t):
        """Consistent (q, v, q̈) at time t."""
        th, dth, ddth = self.motion(t)
        guess = self._q.copy()
        guess[self.act] = th
        q = assemble(self.model, guess, data=self.data)
        self._q = q
        v = np.zeros(self.model.nv)
        v[self.act] = dth
        v = complete_velocity(self.model, q, v, data=self.data)
        qdd = consistent_acceleration(self.model, q, v, ddth, data=self.data)
        return q, v, qdd

    def torque(self, t):
        """Actuator forces (nv, zero off the actuated coordinates) producing the motion at t."""
        q, v, qdd = self.state(t)
        return inverse_dynamics(self.model, q, v, qdd, data=self.data).tau

    def feedforward(self):
        """Open-loop controller: the inverse-dynamics torque of the motion, whatever the state."""
        return lambda t, q, v: self.torque(t)

    def computed_torque(self, lam=1.0):
        """Eq. (37): τ = I τ_e + C θ̇ (+ gravity), τ_e = θ̈_d - 2λ(θ̇ - θ̇_d) - λ²(θ - θ_d).

        I θ̈ + C θ̇ are the minimal-order equations (25) in the actuated coordinates:
        the closed-loop inverse dynamics at the actual (q, v) with the actuated
        accelerations τ_e; the tracking error then obeys ë + 2λė + λ²e = 0.
        """
        act = self.act

        def controller(t, q, v):
            th, dth, ddth = self.motion(t)
            tau_e = ddth - 2.0 * lam * (v[act] - dth) - lam**2 * (q[act] - th)
            qdd = consistent_acceleration(self.model, q, v, tau_e, data=self.data)
            return inverse_dynamics(self.model, q, v, qdd, data=self.data).tau

        return controller
