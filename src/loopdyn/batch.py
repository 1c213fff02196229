"""Batched dynamics: one model, many states, every core.

``ld.forward_dynamics_batch(model, Q, V, TAU, method=...)``, ``ld.aba_batch``,
``ld.rnea_batch`` and ``ld.inverse_dynamics_batch`` evaluate N states given as the
rows of (N, nq) / (N, nv) arrays.  The states are split into one contiguous chunk
per thread; each chunk runs the method's own compiled entry (the very kernel
``ld.forward_dynamics`` calls, ``Data.bound``) on its own copy of the workspace
buffer ``ctx`` (and of the method's plan buffer), inside a numba ``prange`` loop
compiled with ``nogil=True``: the threads run in parallel and other Python threads
keep running meanwhile.

A result is exact or reported: every element has a ``status``.  An element whose
compiled fast path does not finish with an accepted result (a status < 0: singular,
inaccurate, not finite) is recomputed by the single-call path of
``ld.forward_dynamics`` (rank re-detection, the dense fallback), so the batch equals
the single calls element by element; an element that still fails keeps a negative
status and its rows of ``qdd`` / ``lam`` are NaN.  By default a
:class:`loopdyn.SingularityError` (or ``ValueError`` for non-finite inputs) then
lists the failing indices; ``on_error="report"`` returns the result instead.

The rows run in blocks of ``BLOCK`` states, one compiled call each, so that Ctrl-C
(which compiled code does not see) stops a long batch between two blocks: a
:class:`loopdyn.BatchInterrupted` (a ``KeyboardInterrupt``) then carries the
``BatchResult`` with every finished element and ``INTERRUPTED`` for the others.
"""

import warnings
import weakref
from dataclasses import dataclass

import numba
import numpy as np
from numba import njit, prange

from loopdyn.analysis import inverse as _inverse
from loopdyn.analysis.inverse import _indices, generic_inverse, work_size
from loopdyn.derivatives.closed import derivatives_entry
from loopdyn.errors import BatchInterrupted, LoopdynError, NonUniqueWarning, SingularityError
from loopdyn.kernels.numba_internals import as_input, row, unliteral
from loopdyn.methods import dynamics
from loopdyn.methods.common import NONFINITE_INPUT, SINGULAR
from loopdyn.methods.dynamics import method_call
from loopdyn.tree import aba, aba0_entry, rnea, rnea0_entry
from loopdyn.validation import model_arg, scalar

# statuses of aba_batch / rnea_batch / inverse_dynamics_batch elements (fd: the method's own)
OK = 0.0
FAILED = -1.0  # singular (aba: an articulated inertia; inverse: the actuators cannot do it)
NOT_FINITE = -3.0  # the inputs hold NaN/inf (or the element's result is not finite)
INTERRUPTED = -9.0  # every batch: Ctrl-C stopped the batch before this element was done
BLOCK = 1 << 14  # states per compiled call (~10-50 ms): Ctrl-C is seen between two


class _Statuses:
    """``failed`` (the indices of the elements whose ``status`` < 0) and ``ok`` (none)."""

    @property
    def failed(self):
        return np.flatnonzero(self.status < 0.0)

    @property
    def ok(self):
        return bool(np.all(self.status >= 0.0))


@dataclass
class BatchResult(_Statuses):
    """The result of a batched call over N states.

    ``qdd`` (N, nv) accelerations or ``tau`` (N, nv) joint forces (the batch function's
    output; NaN in failed rows), ``lam`` (N, m) closure multipliers (None where there
    are none; ``ForwardDynamicsResult``'s convention), ``status`` (N,) per element:
    > 0 (forward dynamics: the quality, 1 / ``ForwardDynamicsResult.condition``) or 0
    (the others) when the row is a result, < 0 when it failed (``methods.common``'s
    statuses for forward dynamics; ``FAILED`` / ``NOT_FINITE`` otherwise; ``INTERRUPTED``
    for the elements a Ctrl-C left undone, see :class:`loopdyn.BatchInterrupted`).
    ``failed``: the indices of the failed elements; ``fallbacks``: how many elements
    took the single-call path.  ``inverse_dynamics_batch`` only (None otherwise):
    ``unique`` and ``tau_unique`` (N,) bool, per element the flags of
    ``ld.inverse_dynamics``' result (the whole answer, the actuator forces unique;
    False in failed rows), and ``rank`` (N,) int, rank [B Jᵀ] (-1 in failed rows).
    """

    out: np.ndarray
    lam: np.ndarray | None
    status: np.ndarray
    fallbacks: int = 0
    unique: np.ndarray | None = None
    tau_unique: np.ndarray | None = None
    rank: np.ndarray | None = None

    @property
    def qdd(self):
        return self.out

    @property
    def tau(self):
        return self.out


# ------------------------------------------------------------------ compiled loops
@njit(cache=True, inline="always")
def _chunk(c, nchunks, n):
    """[start, stop) of chunk c of n elements split into nchunks."""
    return c * n // nchunks, (c + 1) * n // nchunks


@njit(cache=True, inline="always")
def _fd_rows(fn, ctx, pb, Q, V, TAU, QDD, LAM, ST, lo, hi):
    """Forward dynamics of rows [lo, hi) with the method ``fn``
    (``dynamics.method_pointer``) on one workspace."""
    for i in range(lo, hi):
        # row(): views without reference counts (numba_internals, item 3)
        q, v, tau = as_input(row(Q, i)), as_input(row(V, i)), as_input(row(TAU, i))
        ST[i] = method_call(fn, ctx, pb, q, v, tau, row(QDD, i), row(LAM, i))


@njit(cache=True, parallel=True, nogil=True)
def _fd_parallel(fn, CTX, PB, Q, V, TAU, QDD, LAM, ST):
    """The forward dynamics of method ``fn`` over all rows, chunk c on CTX[c], PB[c] in a
    ``prange`` loop.  The method is a runtime address: compiled once for all methods."""
    nc = CTX.shape[0]
    for c in prange(nc):
        lo, hi = _chunk(c, nc, Q.shape[0])
        _fd_rows(fn, row(CTX, c), row(PB, c), Q, V, TAU, QDD, LAM, ST, lo, hi)


@njit(cache=True, nogil=True)
def _fd_serial(fn, CTX, PB, Q, V, TAU, QDD, LAM, ST):
    """``_fd_parallel`` in the calling thread on CTX[0], PB[0] (one chunk: no thread
    team to start and join)."""
    _fd_rows(fn, row(CTX, 0), row(PB, 0), Q, V, TAU, QDD, LAM, ST, 0, Q.shape[0])


@njit(cache=True, parallel=True, nogil=True)
def _tree_chunks(inverse, CTX, Q, V, X, OUTS, ST):
    """``aba0_entry`` (q, v, τ -> q̈) or ``rnea0_entry`` (q, v, a -> τ) on every row."""
    nc = CTX.shape[0]
    for c in prange(nc):
        ctx = row(CTX, c)
        lo, hi = _chunk(c, nc, Q.shape[0])
        for i in range(lo, hi):
            q, v, x = as_input(row(Q, i)), as_input(row(V, i)), as_input(row(X, i))
            if inverse:
                ST[i] = rnea0_entry(ctx, q, v, x, row(OUTS, i))
            else:
                ST[i] = aba0_entry(ctx, q, v, x, row(OUTS, i))


@njit(cache=True, parallel=True, nogil=True)
def _inverse_chunks(CTX, Q, V, QDD, act, tol, closure_tol, TAU, LAM, ST):
    """``ld.inverse_dynamics`` (generic: ``analysis.inverse.generic_inverse``) of every
    row.  ST (3, N): ST[0] the status, 0 (a result), -1 (the motion violates the
    closures or the actuators cannot produce it), -2 (the inputs failed the entry's
    checks); for a result ST[1] = rank [B Jᵀ] and ST[2] = rank J (``generic_inverse``
    computes the latter only where [B Jᵀ] is rank deficient, else it is m)."""
    nc = CTX.shape[0]
    W = np.empty((nc, work_size(QDD.shape[1], act.shape[0] + LAM.shape[1])))  # scratch
    no_rank = unliteral(False)
    for c in prange(nc):
        ctx, w = row(CTX, c), row(W, c)
        lo, hi = _chunk(c, nc, Q.shape[0])
        for i in range(lo, hi):
            q, v, a = as_input(row(Q, i)), as_input(row(V, i)), as_input(row(QDD, i))
            tau, lam = row(TAU, i), row(LAM, i)
            st = generic_inverse(ctx, q, v, a, act, tol, closure_tol, no_rank, tau, lam, w)
            ST[0, i] = st
            ST[1, i] = w[4] if st == 0.0 else -1.0
            ST[2, i] = w[3] if st == 0.0 else -1.0


# ------------------------------------------------------------------ helpers
def _ready(X, shape):
    """True if ``X`` is already what the compiled loops take: a writeable C-contiguous
    float64 ndarray of ``shape`` (checked without numpy's slower ``require``)."""
    return (
        type(X) is np.ndarray
        and X.shape == shape
        and X.dtype == np.float64
        and X.flags.c_contiguous
        and X.flags.writeable
    )


def _rows(model, X, n, width, what):
    """``X`` as a C-contiguous float64 (n, width) array; None -> zeros, (width,) -> tiled."""
    if X is None:
        return np.zeros((n, width))
    if _ready(X, (n, width)):
        return X
    X = np.asarray(X, dtype=np.float64)
    if X.shape == (width,):
        X = np.tile(X, (n, 1))
    if X.shape != (n, width):
        raise ValueError(
            f"{model.name}: {what} must have shape ({n}, {width}) (one row per state), "
            f"got {X.shape}"
        )
    return np.require(X, np.float64, ["C", "W"])  # one compiled type for every input


def _states(model, Q, V):
    """Q (N, nq) and V (N, nv) checked; V None -> zeros."""
    model_arg(model)
    if type(Q) is np.ndarray and Q.ndim == 2 and _ready(Q, (Q.shape[0], model.nq)):
        return Q, _rows(model, V, Q.shape[0], model.nv, "V")
    Q = np.asarray(Q, dtype=np.float64)
    if Q.ndim != 2 or Q.shape[1] != model.nq:
        raise ValueError(f"{model.name}: Q must have shape (N, {model.nq}), got {Q.shape}")
    Q = np.require(Q, np.float64, ["C", "W"])
    return Q, _rows(model, V, Q.shape[0], model.nv, "V")


def _copies(buf, n):
    """``n`` copies of a buffer, one per chunk (thread)."""
    out = np.empty((n, buf.shape[0]))
    out[:] = buf
    return out


MIN_CHUNK = 32  # elements per chunk at least: a thread team costs ~10 µs to start and join


def _nchunks(n, threads):
    """Chunks: one per thread, each of ``MIN_CHUNK`` elements at least."""
    t = numba.get_num_threads() if threads is None else int(threads)
    if t < 1:
        raise ValueError(f"threads must be >= 1, got {threads!r}")
    return max(1, min(t, n // MIN_CHUNK))


def _blocks(n, run):
    """``run(lo, hi)`` over [0, n) in blocks of ``BLOCK`` rows.  Returns (rows done,
    interrupted): a ``KeyboardInterrupt`` (Ctrl-C) between two blocks stops it, the
    block in flight counted as not done."""
    done = 0
    try:
        while done < n:
            hi = min(n, done + BLOCK)
            run(done, hi)
            done = hi
    except KeyboardInterrupt:
        return done, True
    return n, False


def _complete(model, res, redo, one, done, stopped, on_error, what):
    """``one(i)`` (the single-call path) on the ``redo`` indices, then ``res`` through
    ``_finish``; ``BatchInterrupted`` if a Ctrl-C stopped the blocks (``stopped``, at row
    ``done``) or comes during ``one``."""
    undone = redo[:0]
    for k, i in enumerate(redo):
        try:
            one(i)
        except KeyboardInterrupt:
            undone, stopped = redo[k:], True
            break
    if stopped:
        raise _interrupted(
            model, res, np.concatenate([undone, np.arange(done, res.status.size)]), what
        )
    return _finish(model, res, on_error, what)


def _interrupted(model, res, undone, what):
    """``BatchInterrupted`` carrying ``res`` with the ``undone`` rows marked."""
    res.status[undone] = INTERRUPTED
    res.out[undone] = np.nan
    if res.lam is not None:
        res.lam[undone] = np.nan
    n = res.status.size
    k = n - int(np.count_nonzero(res.status == INTERRUPTED))
    return BatchInterrupted(
        f"{model.name}: {what} interrupted (Ctrl-C) with {k} of {n} states done", result=res
    )


def _check_on_error(on_error):
    if on_error not in ("raise", "report"):
        raise ValueError(f"on_error must be 'raise' or 'report', got {on_error!r}")


def _finish(model, res, on_error, what):
    """Raise for failed elements unless ``on_error == "report"``."""
    _check_on_error(on_error)
    bad = res.failed
    if bad.size and on_error == "raise":
        shown = ", ".join(str(i) for i in bad[:20]) + (" …" if bad.size > 20 else "")
        if np.all(res.status[bad] == NONFINITE_INPUT) or np.all(res.status[bad] == NOT_FINITE):
            raise ValueError(f"{model.name}: {what}: {bad.size} states hold NaN or inf: {shown}")
        raise SingularityError(
            f"{model.name}: {what}: {bad.size} of {res.status.size} states failed (singular "
            f"or not finite) at indices {shown}; pass on_error='report' for the status array"
        )
    return res


# ------------------------------------------------------------------ public API
def forward_dynamics_batch(
    model, Q, V=None, TAU=None, method="augmented", on_error="raise", threads=None
):
    """``ld.forward_dynamics`` of every row: Q (N, nq), V (N, nv; None: zeros), TAU
    (N, nv, or one (nv,) row for all; None: zeros).

    Out: :class:`BatchResult` with ``qdd`` (N, nv), ``lam`` (N, m; None for a tree),
    ``status`` (N,): the quality (> 0) of each element, as ``ld.forward_dynamics``
    reports it (1 / ``condition``), or a negative status of ``loopdyn.methods.common``.
    Element i equals ``ld.forward_dynamics(model, Q[i], V[i], TAU[i], method)``.
    ``on_error="raise"`` (default): a :class:`SingularityError` listing the failed
    indices (``ValueError`` if they all hold NaN/inf); ``"report"``: the result,
    failed rows NaN.  ``threads``: default numba's thread count.
    """
    if method not in dynamics.BINDERS:
        raise ValueError(f"unknown method {method!r}; available: {', '.join(dynamics.METHODS)}")
    Q, V = _states(model, Q, V)
    n, nv, m = Q.shape[0], model.nv, model.m
    TAU = _rows(model, TAU, n, nv, "TAU")
    if model.m == 0:  # a tree: every method is the ABA
        res = aba_batch(model, Q, V, TAU, on_error=on_error, threads=threads)
        res.status[res.status == OK] = 1.0
        return res
    _check_on_error(on_error)
    call = _bound(model, method, Q, V, TAU)
    if call is None or not n:
        QDD, LAM, ST = np.full((n, nv), np.nan), np.full((n, m), np.nan), np.full(n, SINGULAR)
    else:
        # every row the blocks reach is written (ST always; q̈ and λ where ST > 0, the
        # others are redone below), the rows a Ctrl-C leaves are marked by _interrupted
        QDD, LAM, ST = np.empty((n, nv)), np.empty((n, m)), np.empty(n)
    done, stopped = n, False
    if call is not None and n:
        ctx, pb = dynamics.bound_buffers(call)
        nc = _nchunks(min(n, BLOCK), threads)
        run = _fd_serial if nc == 1 else _fd_parallel
        fn = dynamics.method_pointer(method)
        CTX, PB = _copies(ctx, nc), _copies(pb, nc)

        def block(lo, hi):
            run(fn, CTX, PB, Q[lo:hi], V[lo:hi], TAU[lo:hi], QDD[lo:hi], LAM[lo:hi], ST[lo:hi])

        done, stopped = _blocks(n, block)
        if not stopped and ST.min() > 0.0:  # every element accepted (a NaN fails the test)
            return BatchResult(QDD, LAM, ST, 0)
    redo = np.flatnonzero(~(ST[:done] > 0.0))

    def one(i):
        # the single-call path (rank re-detection, fallback, its errors), each on a fresh
        # Data so that no element depends on another's rank detection
        try:
            r = dynamics.forward_dynamics(
                model, Q[i], V[i], TAU[i], method=method, data=model.create_data()
            )
        except SingularityError:
            ST[i] = SINGULAR
        except ValueError:
            ST[i] = NONFINITE_INPUT
        else:
            QDD[i] = r.qdd
            LAM[i] = r.lam
            ST[i] = 1.0 / r.condition  # the quality
            return
        QDD[i] = np.nan
        LAM[i] = np.nan

    res = BatchResult(QDD, LAM, ST, redo.size)
    return _complete(model, res, redo, one, done, stopped, on_error, "forward dynamics")


def _bound(model, method, Q, V, TAU):
    """The fast path of ``method`` (``Data.bound``'s call: the entry on its workspace and
    plan buffers, every closure row taken as independent): the model's template from an
    earlier batch, else bound to a fresh Data by a first single call at one of the first
    three states and kept as the template; None if none succeeds with all closure rows
    independent (redundant rows: every element then takes the single-call path).  A
    fresh Data: the model's own may hold a rank re-detected at an earlier singular
    state.  The template is the same for every batch (each chunk works on copies of its
    buffers, and an element its kernel does not accept takes the single-call path), so
    a batch of 64 four-bar states cost 370 µs, ~300 of them making it (two Data, a rank
    detection)."""
    templates = _TEMPLATES.setdefault(model, {})
    call = templates.get(method)
    if call is not None:
        return call
    if model.m and method not in dynamics.GENERAL_METHODS:
        dynamics.check_method(model, method, model.create_data())  # ModelError: why not
    for i in range(min(3, Q.shape[0])):
        d = model.create_data()
        try:
            dynamics.forward_dynamics(model, Q[i], V[i], TAU[i], method=method, data=d)
        except (LoopdynError, ValueError):
            continue
        b, info = d.bound.get(method), d.rank_info  # None: every row (embedding, denoc)
        if b is not None and (info is None or not info.dropped.size):
            templates[method] = b[0]  # the call only: it holds no reference to the model
            return b[0]
    return None


# model -> {method: the batch's template call} (``_bound``); weak: dropped with the model
_TEMPLATES = weakref.WeakKeyDictionary()


def aba_batch(model, Q, V=None, TAU=None, on_error="raise", threads=None):
    """``ld.aba`` (tree forward dynamics, closures ignored) of every row.

    Q (N, nq), V (N, nv), TAU (N, nv or (nv,)); None: zeros.  Out: :class:`BatchResult`
    with ``qdd`` (N, nv), ``lam`` None, ``status`` 0 or ``FAILED`` (a singular
    articulated inertia) / ``NOT_FINITE``.
    """
    return _tree(model, Q, V, TAU, False, on_error, threads)


def rnea_batch(model, Q, V=None, A=None, on_error="raise", threads=None):
    """``ld.rnea`` (tree inverse dynamics τ = M a + h) of every row; as ``aba_batch``,
    with ``tau`` (N, nv) as the result."""
    return _tree(model, Q, V, A, True, on_error, threads)


def _tree(model, Q, V, X, inverse, on_error, threads):
    Q, V = _states(model, Q, V)
    n, nv = Q.shape[0], model.nv
    X = _rows(model, X, n, nv, "A" if inverse else "TAU")
    out = np.full((n, nv), np.nan)
    st = np.full(n, -2, dtype=np.int64)
    done, stopped = n, False
    if n:
        CTX = _copies(model.data.ctx, _nchunks(min(n, BLOCK), threads))

        def block(lo, hi):
            _tree_chunks(inverse, CTX, Q[lo:hi], V[lo:hi], X[lo:hi], out[lo:hi], st[lo:hi])

        done, stopped = _blocks(n, block)
    status = np.where(st == -1, OK, FAILED)
    redo = np.flatnonzero(st[:done] != -1)

    def one(i):  # the checked path says why
        try:
            out[i] = (rnea if inverse else aba)(model, Q[i], V[i], X[i])
            status[i] = OK
        except ValueError:
            status[i] = NOT_FINITE
        except SingularityError:
            status[i] = FAILED
        if status[i] != OK:
            out[i] = np.nan

    res = BatchResult(out, None, status, redo.size)
    return _complete(model, res, redo, one, done, stopped, on_error, "rnea" if inverse else "aba")


def inverse_dynamics_batch(
    model, Q, V, QDD, actuated=None, tol=1e-8, closure_tol=1e-6, on_error="raise", threads=None
):
    """``ld.inverse_dynamics`` (method "generic") of every row: the actuator forces
    producing QDD (N, nv) at (Q, V) (N, nq), (N, nv).

    Compiled in parallel: rnea, the closure checks and the least-squares solve
    ``[B Jᵀ] [u; λ] = M q̈ + h`` of ``ld.inverse_dynamics`` (``actuated``, ``tol``,
    ``closure_tol`` as there).  Out: :class:`BatchResult` with ``tau`` (N, nv, zero
    off the actuated coordinates), ``lam`` (N, m), ``status`` 0, ``FAILED`` (the
    motion violates the closures or the actuators cannot produce it: the single call
    raises ``ActuationError``) or ``NOT_FINITE``, and per element the uniqueness flags
    ``unique``, ``tau_unique`` and ``rank`` of the single call's result (False / -1 in
    failed rows).  Elements whose actuator forces are not unique give one
    :class:`loopdyn.NonUniqueWarning` for the batch (their count, their first indices
    and, at the first, what is undetermined); each answer is the minimum-norm one.
    """
    Q, V = _states(model, Q, V)
    n, nv, m = Q.shape[0], model.nv, model.m
    QDD = _rows(model, QDD, n, nv, "QDD")
    act = model.actuated if actuated is None else _indices(model, actuated)
    tol = scalar(tol, "tol", model, positive=True)
    closure_tol = scalar(closure_tol, "closure_tol", model, positive=True)
    tau = np.full((n, nv), np.nan)
    lam = np.full((n, m), np.nan)
    ST = np.full((3, n), FAILED)  # status, rank [B Jᵀ], rank J (_inverse_chunks)
    st = ST[0]
    done, stopped = n, False
    if n:
        ctx = model.data.ensure_dense().ctx if m else model.data.ctx
        CTX = _copies(ctx, _nchunks(min(n, BLOCK), threads))

        def block(lo, hi):
            _inverse_chunks(
                CTX, Q[lo:hi], V[lo:hi], QDD[lo:hi], act, tol, closure_tol, tau[lo:hi],
                lam[lo:hi], ST[:, lo:hi],
            )  # fmt: skip

        done, stopped = _blocks(n, block)
    ok = st == OK
    na, k = act.size, act.size + m
    unique = ok & (ST[1] >= k)
    tau_unique = unique | (ok & (ST[1] - ST[2] >= na))  # as InverseDynamicsResult's
    rank = np.where(ok, ST[1], -1.0).astype(np.int64)
    if not stopped and not np.all(tau_unique[ok]):
        _warn_non_unique(model, Q, act, ST, np.flatnonzero(ok & ~tau_unique))
    redo = np.flatnonzero(st[:done] == -2.0)

    def one(i):  # the checked path says why
        try:
            rnea(model, Q[i], V[i], QDD[i])
        except ValueError:
            st[i] = NOT_FINITE
        else:
            st[i] = FAILED

    res = BatchResult(tau, lam, st, redo.size, unique, tau_unique, rank)
    return _complete(model, res, redo, one, done, stopped, on_error, "inverse dynamics")


def _warn_non_unique(model, Q, act, ST, rows):
    """One :class:`NonUniqueWarning` for the batch elements ``rows`` whose actuator
    forces are not unique (``ST``: ``_inverse_chunks``' statuses and ranks); what is
    undetermined is named at the first of them."""
    i = int(rows[0])
    rank, rank_j = int(ST[1, i]), int(ST[2, i])
    over = act.size > model.nv - rank_j
    null = _inverse._Undetermined(model, act, _inverse.matrix_at(model, Q[i], act), rank)
    shown = ", ".join(str(j) for j in rows[:10].tolist()) + (" …" if rows.size > 10 else "")
    where = f" at {rows.size} of {Q.shape[0]} states (indices {shown}), named at state {i}"
    msg = _inverse.non_unique_message(model, act.size, rank, over, null, where)
    warnings.warn(msg, NonUniqueWarning, stacklevel=3)


__all__ = [
    "BatchResult",
    "aba_batch",
    "forward_dynamics_batch",
    "inverse_dynamics_batch",
    "rnea_batch",
]


# ------------------------------------------------------------------ derivatives
@njit(cache=True, parallel=True, nogil=True)
def _deriv_chunks(CTX, WB, Q, V, TAU, QDD, LAM, BB, ST, mode):
    """``derivatives_entry`` (``loopdyn.derivatives.closed``) on every row: chunk c on the
    model's dense Data buffer CTX[c] and the derivatives' workspace WB[c]; row i's
    [∂q̈/∂(q, v, τ); ∂μ/∂(q, v, τ)] into BB[i] ((nv + m) × 3nv), its status into ST[i]."""
    nc = CTX.shape[0]
    for c in prange(nc):
        ctx, wb = row(CTX, c), row(WB, c)
        lo, hi = _chunk(c, nc, Q.shape[0])
        for i in range(lo, hi):
            q, v, tau = as_input(row(Q, i)), as_input(row(V, i)), as_input(row(TAU, i))
            ST[i] = derivatives_entry(ctx, wb, q, v, tau, row(QDD, i), row(LAM, i), mode, BB[i])


@dataclass
class DerivativesBatchResult(_Statuses):
    """``ld.forward_dynamics_derivatives_batch`` over N states.

    ``qdd`` (N, nv), ``lam`` (N, m); ``dqdd_dq``, ``dqdd_dv``, ``dqdd_dtau`` (N, nv, nv)
    and ``dlam_dq``, ``dlam_dv``, ``dlam_dtau`` (N, m, nv): element i is what
    ``ld.forward_dynamics_derivatives(model, Q[i], V[i], TAU[i], tangent=False)`` returns
    (strided views of one (N, nv + m, 3nv) buffer ``B``; a dropped redundant row's
    multiplier derivatives are 0, as there).  ``status`` (N,): > 0 a result (the compiled
    path: the KKT matrix's estimated reciprocal condition; 1.0 where the single-call path
    answered), < 0 failed (``SINGULAR`` -1 of ``loopdyn.derivatives.closed``,
    ``NONFINITE_INPUT`` of ``loopdyn.methods.common``),
    its rows NaN.  ``fallbacks``: how many elements took the single-call path."""

    qdd: np.ndarray
    lam: np.ndarray
    B: np.ndarray
    status: np.ndarray
    fallbacks: int = 0

    @property
    def out(self):  # _complete / _interrupted's name for the main output
        return self.qdd

    def _part(self, rows, cols):
        n = self.qdd.shape[1]
        r = slice(0, n) if rows == 0 else slice(n, None)
        return self.B[:, r, cols * n : (cols + 1) * n]

    dqdd_dq = property(lambda s: s._part(0, 0))
    dqdd_dv = property(lambda s: s._part(0, 1))
    dqdd_dtau = property(lambda s: s._part(0, 2))
    dlam_dq = property(lambda s: s._part(1, 0))
    dlam_dv = property(lambda s: s._part(1, 1))
    dlam_dtau = property(lambda s: s._part(1, 2))


def forward_dynamics_derivatives_batch(
    model, Q, V=None, TAU=None, method="augmented", on_error="raise", threads=None
):
    """``ld.forward_dynamics_derivatives(..., tangent=False)`` of every row: Q (N, nq),
    V (N, nv; None: zeros), TAU (N, nv, or one (nv,) row for all; None: zeros), on all
    cores (one workspace per thread, numba ``prange``).  Out:
    :class:`DerivativesBatchResult`.  ``method="augmented"``: q̈ and λ computed in the
    derivative kernel itself; another method: by ``forward_dynamics_batch`` first, the
    derivatives at its q̈ and λ.  Elements the compiled path does not accept (redundant
    rows, singular) take the single call, which answers or fails with its status.
    ``on_error="raise"``: a ``SingularityError`` listing the failed indices
    (``ValueError`` if they all hold NaN/inf); ``"report"``: the result, failed rows NaN."""
    from loopdyn.derivatives import closed as dc
    from loopdyn.methods.common import NONFINITE_INPUT as BAD
    from loopdyn.validation import configuration

    if method not in dynamics.BINDERS:
        raise ValueError(f"unknown method {method!r}; available: {', '.join(dynamics.METHODS)}")
    _check_on_error(on_error)
    Q, V = _states(model, Q, V)
    n, nv, m = Q.shape[0], model.nv, model.m
    TAU = _rows(model, TAU, n, nv, "TAU")
    wk = dc._work(model)
    wk.use(wk.all_rows)
    QDD, LAM, ST = np.empty((n, nv)), np.empty((n, m)), np.full(n, dc.SINGULAR)
    BB = np.empty((n, nv + m, 3 * nv))
    mode = dc.AUGMENTED_SOLVE
    if method != "augmented" and m:
        fd = forward_dynamics_batch(model, Q, V, TAU, method=method, on_error="report",
                                    threads=threads)  # fmt: skip
        QDD[:], LAM[:] = fd.qdd, fd.lam
        mode = dc.GIVEN_SOLVE
    done, stopped = n, False
    if n:
        nc = _nchunks(min(n, BLOCK), threads)
        CTX, WB = _copies(wk.data.ctx, nc), _copies(wk.buf, nc)

        def block(lo, hi):
            _deriv_chunks(
                CTX, WB, Q[lo:hi], V[lo:hi], TAU[lo:hi], QDD[lo:hi], LAM[lo:hi], BB[lo:hi],
                ST[lo:hi], mode,
            )  # fmt: skip

        done, stopped = _blocks(n, block)
    redo = np.flatnonzero(~(ST[:done] > 0.0))

    def one(i):
        try:
            d = dc.forward_dynamics_derivatives(
                model, configuration(model, Q[i]), V[i], TAU[i], method=method, tangent=False
            )
        except SingularityError:
            ST[i] = dc.SINGULAR
        except ValueError:
            ST[i] = BAD
        else:
            QDD[i] = d.qdd
            LAM[i] = d.lam if m else 0.0
            BB[i, :nv] = np.hstack([d.dqdd_dq, d.dqdd_dv, d.dqdd_dtau])
            BB[i, nv:] = np.hstack([d.dlam_dq, d.dlam_dv, d.dlam_dtau])
            ST[i] = 1.0
            return
        QDD[i] = LAM[i] = BB[i] = np.nan

    res = DerivativesBatchResult(QDD, LAM, BB, ST, redo.size)
    return _complete(model, res, redo, one, done, stopped, on_error, "derivatives")
