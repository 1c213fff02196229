"""Closed-loop forward dynamics: ``ld.forward_dynamics(model, q, v, tau, method=...)``.

Every method returns q̈ for every tree coordinate so that methods can be compared
number for number.  Redundant closures: the rank of J is detected (pivoted QR at
the first call, re-checked whenever a dropped row is violated or the solve is
singular), only an independent set of rows enters the solve, and the reported
multipliers are the minimum-norm ones over all rows.
"""

import numpy as np

from loopdyn.errors import SingularityError
from loopdyn.kinematics.closures import closure_work, constraint_rank
from loopdyn.methods import augmented, recursive_lambda, slm, sslm
from loopdyn.methods.common import NONFINITE_INPUT, NONFINITE_OUTPUT, ForwardDynamicsResult
from loopdyn.model import Data
from loopdyn.tree import aba
from loopdyn.validation import configuration, vector, workspace, writable

# method name -> runner(model, q, v, tau, rows, data) -> (qdd, lam on rows, pivot ratio);
# a ratio <= 0 means the solve was singular.  rows: the independent closure rows.
RUNNERS = {
    "augmented": augmented.run,
    "slm": slm.run,
    "sslm": sslm.run,
    "recursive_lambda": recursive_lambda.run,
}
METHODS = tuple(RUNNERS)


def _rank(model, q, d, refresh=False):
    info = d.rank_info
    if info is None or refresh:
        info = d.rank_info = constraint_rank(model, q, data=d)
    return info


def forward_dynamics(model, q, v, tau=None, method="augmented", data=None):
    """Accelerations and closure multipliers of a closed-loop model.

    In: a consistent state ``q`` (nq), ``v`` (nv) and joint forces ``tau`` (nv;
    None for zero).  ``method``: ``"augmented"`` (eq. 10, one KKT solve),
    ``"slm"`` (eqs. 11–12), ``"sslm"`` (subsystem-level multipliers) or
    ``"recursive_lambda"`` (q̈ = η + ζλ, Anderson & Critchley's eqs. 13–32).
    Out: :class:`ForwardDynamicsResult` with ``qdd``, ``lam`` (see its docstring
    for their meaning and frames), ``rank``, ``dropped`` and ``condition``.
    Raises :class:`SingularityError` if M or J M⁻¹ Jᵀ is singular even after
    re-detecting the independent closure rows at ``q``.
    """
    runner = RUNNERS.get(method)
    if runner is None:
        raise ValueError(f"unknown method {method!r}; available: {', '.join(METHODS)}")
    d = (model._data or model.data) if data is None else data
    info = d.rank_info if type(d) is Data and d.model is model else None
    if info is not None and not info.dropped.size:
        # fast path: rows known, none dropped, the method's entry bound; its dispatcher
        # checks the input types (TypeError: the checked path converts them) and its
        # kernel lengths, finiteness and quaternions (status < 0: the checked path explains)
        b = d.bound_kernels.get(method)
        if b is not None and b.rows is info.independent:
            qdd = np.empty(model.nv)
            lam = np.empty(model.m)
            try:
                ratio = b(q, v, d.dyn.zeros_nv if tau is None else tau, qdd, lam)
            except TypeError:
                ratio = -1.0
            if ratio > 0.0:
                return ForwardDynamicsResult(qdd, lam, method, info.rank, info.dropped, 1.0 / ratio)
    d = workspace(model, data)
    nv = model.nv
    q = writable(configuration(model, q))
    v = writable(vector(v, nv, "v", model))
    tau = np.zeros(nv) if tau is None else writable(vector(tau, nv, "tau", model))
    if model.m == 0:
        return ForwardDynamicsResult(aba(model, q, v, tau, data=d), None, method, 0)
    info = d.rank_info
    if info is None:
        closure_work(model, d)
        info = _rank(model, q, d)
    for attempt in range(2):
        qdd, lam, ratio = runner(model, q, v, tau, info.independent, d)
        if ratio == NONFINITE_INPUT:
            raise ValueError(f"{model.name}: q, v or tau holds NaN or inf")
        ok = ratio > 0.0
        if ok and info.dropped.size:
            w = d.closure
            Jd = w.J[info.dropped]
            res = Jd @ qdd - w.gamma[info.dropped]
            ok = np.abs(res).max() <= 1e-8 * (1.0 + np.abs(Jd).max() * np.abs(qdd).max())
        if ok:
            break
        if attempt == 0:
            info = _rank(model, q, d, refresh=True)
    else:
        what = "produced non-finite values" if ratio == NONFINITE_OUTPUT else "is singular"
        raise SingularityError(
            f"{model.name}: the {method} solve {what} at this configuration "
            f"(pivot ratio {ratio:.3g}, rank of J {info.rank} of {model.m} rows); the closures "
            "lose independence here (a singular configuration of the mechanism)"
        )
    if info.dropped.size:
        # minimum-norm multipliers over all rows with the same generalized force Jᵀλ
        J = d.closure.J
        lam = np.linalg.lstsq(J.T, J[info.independent].T @ lam, rcond=None)[0]
    return ForwardDynamicsResult(qdd, lam, method, info.rank, info.dropped, 1.0 / ratio)


def closure_wrenches(model, q, lam, data=None):
    """Body wrenches (nb, 6) of closure multipliers ``lam`` (m,).

    Row-wise as in :class:`ForwardDynamicsResult`; each wrench ``[n; f]`` is in its
    body's frame about the body origin, the format of ``fext`` in ``ld.rnea`` /
    ``ld.aba``: so ``rnea(q, v, qdd, fext=closure_wrenches(q, lam))`` returns τ.
    """
    from loopdyn.kinematics.closures import _evaluate
    from loopdyn.methods.common import closure_body_wrenches

    d = model.data if data is None else data
    lam = vector(lam, model.m, "lam", model)
    w = _evaluate(model, q, None, False, d)
    out = np.zeros((model.nbodies, 6))
    rows = np.arange(model.m, dtype=np.int64)
    closure_body_wrenches(
        model.topo, d.Xw, model.cl_body, model.row_int, w.rw, w.cw, rows, lam, out
    )
    return out


def closure_forces(model, q, lam, data=None):
    """Per closure: ``{name: (force, moment)}`` on body B at frame B's origin, world frame.

    Body A receives the opposite force and moment (Newton's third law).
    """
    from loopdyn.kinematics.closures import _evaluate

    d = model.data if data is None else data
    lam = vector(lam, model.m, "lam", model)
    w = _evaluate(model, q, None, False, d)
    out = {}
    for k, name in enumerate(model.closures):
        f = np.zeros(3)
        mo = np.zeros(3)
        for r in range(model.closure_rows[k].start, model.closure_rows[k].stop):
            if model.row_int[r, 1] == 0:
                f += lam[r] * w.rw[r, 0]
            else:
                mo += lam[r] * w.rw[r, 2]
        out[name] = (f, mo)
    return out
