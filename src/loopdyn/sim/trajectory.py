"""The result of ``ld.simulate``: states and derived quantities at the output times."""

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

_ARRAYS = (
    "t",
    "q",
    "v",
    "qdd",
    "lam",
    "tau",
    "residual_position",
    "residual_velocity",
    "energy",
    "condition",
)
_META = (
    "model_name",
    "method",
    "integrator",
    "stabilization",
    "rtol",
    "atol",
    "stats",
    "completed",
    "message",
)


@dataclass(eq=False)
class Trajectory:
    """States of a simulation at its N output times.

    Arrays (row k is time ``t[k]``): ``t`` (N,), ``q`` (N, nq), ``v`` (N, nv),
    ``qdd`` (N, nv) the accelerations used by the integrator, ``lam`` (N, m) the
    closure multipliers (``ForwardDynamicsResult`` convention; NaN where the
    method has none), ``tau`` (N, nv) the joint forces applied,
    ``residual_position`` max |Φ(q)|, ``residual_velocity`` max |J(q) v|,
    ``energy`` T + V (J), ``condition`` of the constraint solve.
    ``energy_drift`` = energy - energy[0].  ``stats``: steps, nfev, wall_time (s),
    projections, repartitions [(t, independent)], restarts.  ``completed`` is
    False for the partial trajectory carried by a ``SimulationError``.
    """

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    qdd: np.ndarray
    lam: np.ndarray
    tau: np.ndarray
    residual_position: np.ndarray
    residual_velocity: np.ndarray
    energy: np.ndarray
    condition: np.ndarray
    model_name: str = ""
    method: str = ""
    integrator: str = ""
    stabilization: str = ""
    rtol: float = float("nan")
    atol: float = float("nan")
    stats: dict = field(default_factory=dict)
    completed: bool = True
    message: str = ""
    model: object = field(default=None, repr=False)

    def __len__(self):
        return self.t.shape[0]

    def __repr__(self):
        span = f"t = {self.t[0]:.4g} … {self.t[-1]:.4g} s" if len(self) else "empty"
        state = "completed" if self.completed else "stopped early"
        return (
            f"<loopdyn.Trajectory {self.model_name!r}: {len(self)} points, {span}, "
            f"{self.method}/{self.integrator}/{self.stabilization}, {state}>"
        )

    # ------------------------------------------------------------ summaries
    @property
    def energy_drift(self):
        """E(t) - E(0) (J)."""
        return self.energy - self.energy[0] if len(self) else self.energy

    @property
    def max_residual(self):
        """Largest closure residual over the trajectory, positions and velocities."""
        if not len(self):
            return 0.0
        return float(max(np.nanmax(self.residual_position), np.nanmax(self.residual_velocity)))

    def summary(self):
        """A dict of the headline numbers (steps, wall time, residuals, energy drift)."""
        drift = self.energy_drift
        return {
            "model": self.model_name,
            "method": self.method,
            "integrator": self.integrator,
            "stabilization": self.stabilization,
            "t_end": float(self.t[-1]) if len(self) else 0.0,
            "points": len(self),
            "steps": int(self.stats.get("steps", 0)),
            "nfev": int(self.stats.get("nfev", 0)),
            "wall_time": float(self.stats.get("wall_time", 0.0)),
            "max_residual_position": float(np.nanmax(self.residual_position)) if len(self) else 0.0,
            "max_residual_velocity": float(np.nanmax(self.residual_velocity)) if len(self) else 0.0,
            "max_energy_drift": float(np.nanmax(np.abs(drift))) if len(self) else 0.0,
            "repartitions": len(self.stats.get("repartitions", [])),
            "completed": bool(self.completed),
        }

    # -------------------------------------------------------------- columns
    def columns(self):
        """(names, N × k table) of every per-time quantity, as written by ``to_csv``."""
        nq, nv = self.q.shape[1], self.v.shape[1]
        m = self.lam.shape[1]
        names = ["t"]
        names += [f"q{i}" for i in range(nq)]
        names += [f"v{i}" for i in range(nv)]
        names += [f"qdd{i}" for i in range(nv)]
        names += [f"lam{i}" for i in range(m)]
        names += [f"tau{i}" for i in range(nv)]
        names += ["residual_position", "residual_velocity", "energy", "energy_drift", "condition"]
        table = np.column_stack(
            [
                self.t,
                self.q,
                self.v,
                self.qdd,
                self.lam,
                self.tau,
                self.residual_position,
                self.residual_velocity,
                self.energy,
                self.energy_drift,
                self.condition,
            ]
        )
        return names, table

    def to_csv(self, path):
        """Write one row per output time (header: t, q0…, v0…, qdd0…, lam0…, tau0…, …)."""
        names, table = self.columns()
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savetxt(path, table, delimiter=",", header=",".join(names), comments="", fmt="%.17g")
        return path

    # ------------------------------------------------------------ save/load
    def save(self, path):
        """Write every array and the metadata to an ``.npz`` file (the model is not stored)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {k: getattr(self, k) for k in _META}
        arrays = {k: getattr(self, k) for k in _ARRAYS}
        with open(path, "wb") as fh:
            np.savez(fh, meta=np.array(json.dumps(meta)), **arrays)
        return path

    @classmethod
    def load(cls, path, model=None):
        """Read a trajectory written by :meth:`save`; ``model`` re-attaches the model
        (needed by :meth:`animate`; catalog models are found by name otherwise)."""
        with np.load(Path(path), allow_pickle=False) as f:
            meta = json.loads(str(f["meta"]))
            arrays = {k: np.array(f[k]) for k in _ARRAYS}
        stats = meta.pop("stats", {})
        stats["repartitions"] = [tuple(r) for r in stats.get("repartitions", [])]
        return cls(**arrays, **meta, stats=stats, model=model)

    # ------------------------------------------------------------- graphics
    def plot(self, path=None, what=("q", "residuals", "energy"), title=None):
        """Matplotlib figure of coordinates, closure residuals and energy drift.

        ``what``: panels among ``"q"``, ``"v"``, ``"tau"``, ``"residuals"``,
        ``"energy"``.  Saved to ``path`` (PNG, PDF, SVG …) when given.  Returns
        the figure.
        """
        from loopdyn.viz.plotting import plot_trajectory

        return plot_trajectory(self, path, what, title)

    def animate(self, path, model=None, fps=30, speed=1.0, trace=None, dpi=80):
        """Write a GIF (or MP4, with ffmpeg) of the mechanism moving.

        Planar models are drawn in the x–y plane, others in 3D.  ``speed``:
        simulated seconds per second of video; ``trace``: a frame name whose path
        is drawn.  Needs the model: ``model`` or the one the trajectory came with.
        """
        from loopdyn.viz.plotting import animate_trajectory

        return animate_trajectory(self, path, model, fps, speed, trace, dpi)

    def strobe(self, path=None, n=6, model=None, trace=None, dpi=100):
        """A still of the motion: ``n`` configurations evenly spaced in time drawn over
        each other, earlier ones fainter (``loopdyn.viz.plotting.strobe_trajectory``).
        Saved to ``path`` when given; returns the figure."""
        from loopdyn.viz.plotting import strobe_trajectory

        return strobe_trajectory(self, path, n=n, model=model, trace=trace, dpi=dpi)

    def resolve_model(self, model=None):
        """The model to draw with: ``model``, the attached one, or a catalog lookup by name."""
        model = model if model is not None else self.model
        if model is None:
            from loopdyn import examples

            name = self.model_name
            if name in examples.names():
                model = examples.get(name)
            else:
                raise ValueError(
                    f"trajectory of {name!r}: pass the model (it is not stored in the file)"
                )
        if model.nq != self.q.shape[1]:
            raise ValueError(
                f"model {model.name!r} has nq = {model.nq}, the trajectory {self.q.shape[1]}"
            )
        return model
