"""Motor space ↔ serial-equivalent joints of a closed-loop mechanism (issue 39).

A legged robot with linkage knees and ankles (Cassie, Digit, Kangaroo) is driven by
motors whose coordinates are not the joints a controller reasons in: the knee's motor
turns a crank, a rod turns the knee.  Through the closures, the motors' coordinates
determine those joints' to first order, and virtual power maps the forces back:

* consistent velocities are v = N z (N a basis of the null space of J(q), z ∈ ℝᶠ);
  the motors' v_m = N_m z and the joints' v_j = N_j z.  When the joints' motion is
  determined by the motors' (the rows of N_j lie in the row space of N_m: no passive
  freedom, such as a rod spinning about its own axis, moves a joint without a motor
  moving), v_j = A v_m with A = N_j N_m⁺ (k_j × k_m);
* accelerations: J q̈ = γ, q̈ = N ż + q̈ₚ with q̈ₚ = J⁺ γ, so q̈_j = A q̈_m + b with
  b = q̈ₚ,j − A q̈ₚ,m (the velocity-product term; needs v);
* forces, by virtual power (τ_m · v_m = τ_j · v_j for every consistent motion): joint
  torques τ_j acting on the joints are balanced by motor torques τ_m = Aᵀ τ_j, and,
  where A is square and invertible, τ_j = A⁻ᵀ τ_m is the joint torque a motor torque
  τ_m produces (statically: the serial-equivalent torque a whole-body controller
  commands, converted to what the motors must give).

Every quantity is in loopdyn's coordinates (v-space: joint rates, in the joints' own
axes).  The map is local (A depends on q); across a singularity of the linkage (a
dead point, where A loses rank) the inverse directions raise
:class:`~loopdyn.SingularityError`.
"""

from dataclasses import dataclass

import numpy as np

from loopdyn.errors import ActuationError, ModelError, SingularityError
from loopdyn.kinematics.closures import constraints, rank_tolerance
from loopdyn.validation import model_arg, vector


def _ordered_coordinates(model, items, what):
    """v indices of joint names / indices in the order given (a joint: all its coordinates)."""
    if isinstance(items, str | int | np.integer):
        items = [items]
    out = []
    for x in items:
        if isinstance(x, str | np.str_):
            sl = model.v_slice(model.joint_index(str(x)))
            out.extend(range(sl.start, sl.stop))
        elif isinstance(x, int | np.integer) and not isinstance(x, bool | np.bool_):
            if not 0 <= int(x) < model.nv:
                raise ValueError(f"{model.name}: {what} index {x} outside 0..{model.nv - 1}")
            out.append(int(x))
        else:
            raise ValueError(f"{model.name}: {what} must be joint names or v indices, got {x!r}")
    if len(set(out)) != len(out):
        raise ValueError(f"{model.name}: {what} name a coordinate twice")
    if not out:
        raise ValueError(f"{model.name}: no {what} given")
    return np.asarray(out, dtype=np.int64)


def _names(model, idx):
    out = []
    for i in idx:
        b = int(np.searchsorted(model.topo[:, 3], i, side="right")) - 1
        nv = int(model.topo[b, 5])
        name = model.joint_names[b]
        out.append(name if nv == 1 else f"{name}[{i - int(model.topo[b, 3])}]")
    return out


@dataclass(frozen=True)
class ActuationMap:
    """The first-order map between motor and joint coordinates at one configuration.

    ``motors``, ``joints``: v indices (in the order asked); ``motor_names``,
    ``joint_names``: their coordinates' names; ``A`` (k_j × k_m): v_j = A v_m;
    ``bias`` (k_j,): q̈_j = A q̈_m + bias (None without v); ``dof``: the mechanism's
    degrees of freedom at q; ``condition``: σ_max/σ_min of A when square (inf when
    singular), else None; ``joint_sigma``: the smallest singular value of N_j (N's
    columns orthonormal: 1 when the joints move freely with the mechanism, → 0 where
    some motion of the motors leaves the joints still: a dead point of the map).
    """

    motors: np.ndarray
    joints: np.ndarray
    motor_names: list
    joint_names: list
    A: np.ndarray
    bias: np.ndarray | None
    dof: int
    condition: float | None
    joint_sigma: float

    # -- motors -> joints
    def joint_velocity(self, v_motor):
        """v_j = A v_m."""
        return self.A @ np.asarray(v_motor, dtype=float)

    def joint_acceleration(self, a_motor):
        """q̈_j = A q̈_m + bias (the map must have been built with v)."""
        if self.bias is None:
            raise ValueError("the acceleration map needs v: ld.actuation_map(model, q, v, ...)")
        return self.A @ np.asarray(a_motor, dtype=float) + self.bias

    def motor_torque(self, tau_joint):
        """τ_m = Aᵀ τ_j: the motor torques that balance joint torques τ_j (virtual power)."""
        return self.A.T @ np.asarray(tau_joint, dtype=float)

    # -- joints -> motors (A square and invertible)
    def _inverse(self, what):
        k_j, k_m = self.A.shape
        if k_j != k_m:
            raise ValueError(
                f"{what} needs as many joint as motor coordinates ({k_j} joints, {k_m} motors)"
            )
        if not np.isfinite(self.condition) or self.condition > 1e12 or self.joint_sigma < 1e-10:
            raise SingularityError(
                f"the motors {self.motor_names} do not determine the joints "
                f"{self.joint_names} here (cond(A) = {self.condition:.3g}, smallest "
                f"joint motion {self.joint_sigma:.3g}): a singular "
                "configuration of the linkage; move away from it"
            )
        return self.A

    def motor_velocity(self, v_joint):
        """v_m = A⁻¹ v_j."""
        return np.linalg.solve(self._inverse("motor_velocity"), np.asarray(v_joint, dtype=float))

    def motor_acceleration(self, a_joint):
        """q̈_m = A⁻¹ (q̈_j − bias)."""
        A = self._inverse("motor_acceleration")
        if self.bias is None:
            raise ValueError("the acceleration map needs v: ld.actuation_map(model, q, v, ...)")
        return np.linalg.solve(A, np.asarray(a_joint, dtype=float) - self.bias)

    def joint_torque(self, tau_motor):
        """τ_j = A⁻ᵀ τ_m: the serial-equivalent joint torques of motor torques τ_m."""
        A = self._inverse("joint_torque")
        return np.linalg.solve(A.T, np.asarray(tau_motor, dtype=float))


def actuation_map(model, q, v=None, *, joints, motors=None, closure_tol=1e-8):
    """The map between motor coordinates and serial-equivalent joints at ``q``.

    ``joints``: joint names (all their coordinates) or v indices, in the order wanted
    (e.g. ``["knee", "ankle"]``); ``motors``: the same, default ``model.actuated``
    (the ``name_mot`` of a loaded YAML).  ``v`` (optional, consistent): adds the
    acceleration bias.  ``q`` must close the loops (|Φ| ≤ ``closure_tol``, else
    :class:`~loopdyn.AssemblyError` via the residual check).  Raises
    :class:`~loopdyn.ActuationError` when the joints' motion is not determined by the
    motors' (a freedom that moves a joint leaves every motor still), naming the
    joints.  Returns an :class:`ActuationMap` (module docstring: the equations).
    """
    model = model_arg(model)
    q = vector(q, model.nq, "q", model)
    motors = _ordered_coordinates(model, model.actuated if motors is None else motors, "motors")
    joints = _ordered_coordinates(model, joints, "joints")
    if model.m == 0:
        N = np.eye(model.nv)
        Jfull = np.zeros((0, model.nv))
        gamma = np.zeros(0)
    else:
        Phi, Jfull, gamma = constraints(model, q, v)
        err = float(np.abs(Phi).max())
        if err > closure_tol:
            raise ModelError(
                f"{model.name}: q does not close the loops (|Φ| = {err:.3g} > "
                f"closure_tol = {closure_tol:g}); ld.assemble(model, q) first"
            )
        _U, s, Vt = np.linalg.svd(Jfull)
        r = int(np.sum(s > rank_tolerance(Jfull.shape, s))) if s.size else 0
        N = Vt[r:].T  # nv × f, orthonormal basis of ker J
    dof = N.shape[1]
    Nm, Nj = N[motors], N[joints]
    A = Nj @ np.linalg.pinv(Nm, rcond=1e-10)
    miss = np.abs(Nj - A @ Nm).max(axis=1) if dof else np.zeros(joints.size)
    if np.any(miss > 1e-8):
        bad = [n for n, e in zip(_names(model, joints), miss, strict=True) if e > 1e-8]
        raise ActuationError(
            f"{model.name}: the motors {_names(model, motors)} do not determine "
            f"{', '.join(bad)}: a freedom of the mechanism moves it with every motor still "
            "(add that joint's actuator to motors=, or choose joints the motors drive)"
        )
    bias = None
    if v is not None:
        v = vector(v, model.nv, "v", model)
        if model.m:
            qdd_p = np.linalg.lstsq(Jfull, gamma, rcond=None)[0]  # J⁺ γ
            bias = qdd_p[joints] - A @ qdd_p[motors]
        else:
            bias = np.zeros(joints.size)
    cond = None
    if A.shape[0] == A.shape[1]:
        sv = np.linalg.svd(A, compute_uv=False)
        cond = float(sv[0] / sv[-1]) if sv[-1] > 0 else float("inf")
    sj = np.linalg.svd(Nj, compute_uv=False) if dof else np.zeros(1)
    sigma = float(sj[-1]) if sj.size >= joints.size else 0.0
    return ActuationMap(
        motors, joints, _names(model, motors), _names(model, joints), A, bias, dof, cond, sigma
    )


__all__ = ["ActuationMap", "actuation_map"]
