"""The integrators ``ld.simulate`` drives step by step: scipy's adaptive solvers and a
fixed-step RK4 whose steps end on the output times."""

import numpy as np

INTEGRATORS = ("RK45", "DOP853", "Radau", "BDF", "LSODA", "RK4")


class IntegratorFailure(Exception):
    pass


class ScipyStepper:
    """One of scipy's OdeSolver classes driven step by step.

    ``cheap``: the state can be changed without restarting (all but LSODA, whose
    state lives in Fortran).
    """

    def __init__(self, name, fun, t0, y0, t_end, rtol, atol, max_step, first_step):
        self.name = name
        self.opts = dict(rtol=rtol, atol=atol, max_step=max_step)
        self.t_end = t_end
        self.nfev = 0
        self.restarts = 0
        self.cheap = name != "LSODA"
        self._new(fun, t0, y0, first_step)

    def _new(self, fun, t0, y0, first_step):
        self.fun = fun
        if first_step is not None:
            first_step = min(first_step, self.t_end - t0)
            first_step = first_step if first_step > 0 else None
        import scipy.integrate  # lazily: it costs ~0.1 s at import

        self.solver = getattr(scipy.integrate, self.name)(
            fun, t0, np.array(y0, dtype=float), self.t_end, first_step=first_step, **self.opts
        )
        self._dense = None

    @property
    def t(self):
        return self.solver.t

    @property
    def y(self):
        return self.solver.y

    @property
    def h(self):
        h = getattr(self.solver, "h_abs", None)
        return h if h else self.solver.step_size

    def step(self):
        self._dense = None
        msg = self.solver.step()
        if self.solver.status == "failed":
            raise IntegratorFailure(msg or "integrator failure")

    def dense(self, t):
        if self._dense is None:
            self._dense = self.solver.dense_output()
        return self._dense(t)

    def modify(self, y):
        """Replace the current state (projection, re-anchoring) keeping the history.

        y = [positions; velocities] with position rates equal to the velocities
        (Euclidean coordinates or a fresh chart).  The one-step methods keep the
        last accelerations in f: they were evaluated at the unprojected state, a
        difference of the order of the projection, far below the tolerances.
        """
        s = self.solver
        y = np.array(y, dtype=float)
        if self.name in ("RK45", "DOP853", "Radau"):
            k = y.size // 2
            f = s.f.copy()
            f[:k] = y[k:]
            s.y = y
            s.f = f
        elif self.name == "BDF":
            # D[0] is the current value; the differences (history) are kept
            s.D[0] = y
            s.y = y
        else:
            self.restart(self.fun, s.t, y, 0.0)

    def restart(self, fun, t, y, h=None):
        """A fresh solver from (t, y) with first step ``h`` (default: the last one;
        0: the solver's own choice)."""
        h = self.h if h is None else (h or None)
        self.nfev += self.solver.nfev
        self.restarts += 1
        self._new(fun, t, y, h)

    @property
    def total_nfev(self):
        return self.nfev + self.solver.nfev


class RK4Stepper:
    """Classical fixed-step RK4 whose steps end exactly on the output times."""

    def __init__(self, fun, t0, y0, t_end, dt, stops):
        self.fun = fun
        self.t = t0
        self.y = np.array(y0, dtype=float)
        self.t_end = t_end
        self.dt = dt
        self.stops = np.unique(np.append(stops[stops > t0], t_end))
        self.k = 0
        self.total_nfev = 0
        self.restarts = 0
        self.h = dt
        self.cheap = True

    def step(self):
        while self.stops[self.k] <= self.t:
            self.k += 1
        stop = self.stops[self.k]
        t, y, h, f = self.t, self.y, self.dt, self.fun
        if t + h >= stop - 1e-9 * h:
            h = stop - t
            t_new = stop
        else:
            t_new = t + h
        k1 = f(t, y)
        k2 = f(t + 0.5 * h, y + 0.5 * h * k1)
        k3 = f(t + 0.5 * h, y + 0.5 * h * k2)
        k4 = f(t + h, y + h * k3)
        self.total_nfev += 4
        self.y = y + (h / 6.0) * (k1 + 2.0 * k2 + 2.0 * k3 + k4)
        self.t = t_new

    def dense(self, t):  # pragma: no cover - steps always end on the output times
        raise AssertionError("RK4 steps end on the output times")

    def modify(self, y):
        self.y = np.array(y, dtype=float)

    def restart(self, fun, t, y, h=None):
        self.fun = fun
        self.t = t
        self.y = np.array(y, dtype=float)
        self.restarts += 1
