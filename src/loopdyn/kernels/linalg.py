"""Small dense linear algebra kernels without allocation (numba).

Hand-written because LAPACK calls cost more than the arithmetic on the small
systems of closed-loop dynamics (DESIGN.md, Conventions).  All act on the leading
n×n block of preallocated arrays.
"""

import numpy as np
from numba import njit

from loopdyn.kernels.numba_internals import block, block_int


@njit(cache=True)
def cholesky_inplace(A, n):
    """A = L Lᵀ, L in the lower triangle of A.  Returns min/max pivot² (0: not PD; 1 for
    n = 0: nothing to factor)."""
    dmin = 1e300
    dmax = 0.0
    for j in range(n):
        s = A[j, j]
        for k in range(j):
            s -= A[j, k] * A[j, k]
        if not s > 0.0:
            return 0.0
        d = s**0.5
        A[j, j] = d
        dmin = min(dmin, s)
        dmax = max(dmax, s)
        inv = 1.0 / d
        for i in range(j + 1, n):
            t = A[i, j]
            for k in range(j):
                t -= A[i, k] * A[j, k]
            A[i, j] = t * inv
    if n == 0:
        return 1.0
    return dmin / dmax if dmax > 0.0 else 0.0


@njit(cache=True)
def forward_subst(L, n, b):
    """b ← L⁻¹ b (L lower triangular).

    Multiplies by 1/L_ii: the reciprocal does not wait for the substitution, so the
    chain from one unknown to the next holds a multiplication, not a division (~4
    against ~14 cycles; on the four-bar's SLM about 20 such steps a call)."""
    for i in range(n):
        inv = 1.0 / L[i, i]
        s = b[i]
        for k in range(i):
            s -= L[i, k] * b[k]
        b[i] = s * inv


@njit(cache=True)
def backward_subst_t(L, n, b):
    """b ← L⁻ᵀ b (L lower triangular, so Lᵀ upper); 1/L_ii as ``forward_subst``."""
    for i in range(n - 1, -1, -1):
        inv = 1.0 / L[i, i]
        s = b[i]
        for k in range(i + 1, n):
            s -= L[k, i] * b[k]
        b[i] = s * inv


@njit(cache=True)
def cholesky_solve(L, n, b):
    """b ← (L Lᵀ)⁻¹ b."""
    forward_subst(L, n, b)
    backward_subst_t(L, n, b)


@njit(cache=True)
def cholesky_scaled(A, n, di):
    """A = L Lᵀ in place (L in the lower triangle) for small SPD systems (DeNOC's Φ, GIM
    and multiplier fits; n ≤ 6 for the catalog), with di[j] = 1/L_jj so
    that ``cholesky_solve_scaled`` multiplies: in these tiny solves the chain of divisions, not
    the arithmetic, sets the time.  Returns ρ = min_j L_jj²/A_jj, each pivot² relative
    to its diagonal entry (0.0: not positive definite; 1.0 for n = 0): 1/ρ estimates the
    condition number of A with its unknowns scaled to a unit diagonal (the last pivot
    is 1/(A⁻¹)_nn), which sets the accuracy of the solve (van der Sluis), whatever the
    units of the unknowns.  (The ratio of the smallest to the largest pivot is no such
    estimate: the normal equations of two nearly equal rows [0.0021, 0.79313] gave
    pivots 8.8e-6 and 5.4e-11, a ratio of 6e-6 at a condition number of 3e15.)"""
    rho = 1.0
    for j in range(n):
        s = A[j, j]
        a = s
        for k in range(j):
            s -= A[j, k] * A[j, k]
        if not s > 0.0:
            return 0.0
        rho = min(rho, s / a)
        d = s**0.5
        A[j, j] = d
        inv = 1.0 / d
        di[j] = inv
        for i in range(j + 1, n):
            t = A[i, j]
            for k in range(j):
                t -= A[i, k] * A[j, k]
            A[i, j] = t * inv
    return rho


@njit(cache=True)
def cholesky_inverse_trace6(L, di, X):
    """tr (L Lᵀ)⁻¹ = ‖L⁻¹‖_F² of a 6×6 factor of ``cholesky_scaled`` (inverse pivots ``di``), with
    ``X`` (6, 6) as scratch: L⁻¹ column by column by forward substitution (56 products).
    With tr A it bounds cond₂(A) = λ_max/λ_min of an SPD A: λ_max ≤ tr A ≤ 6 λ_max and
    1/λ_min ≤ tr A⁻¹ ≤ 6/λ_min."""
    t = 0.0
    for j in range(6):
        for i in range(j, 6):
            x = 1.0 if i == j else 0.0
            for k in range(j, i):
                x -= L[i, k] * X[k, j]
            x *= di[i]
            X[i, j] = x
            t += x * x
    return t


@njit(cache=True)
def cholesky_solve_scaled(L, n, di, b):
    """b ← (L Lᵀ)⁻¹ b with the factor and inverse pivots of ``cholesky_scaled``."""
    for i in range(n):
        t = b[i]
        for k in range(i):
            t -= L[i, k] * b[k]
        b[i] = t * di[i]
    for i in range(n - 1, -1, -1):
        t = b[i]
        for k in range(i + 1, n):
            t -= L[k, i] * b[k]
        b[i] = t * di[i]


@njit(cache=True)
def cholesky_semidefinite_solve6(A, x, di, null_tol):
    """x ← a solution y of A y = x for a symmetric positive semi-definite 6×6 A and a
    consistent x: Cholesky in place, columns whose pivot is below ``null_tol`` times the
    largest diagonal entry taken as null (their y entries 0).  ``di`` (6): scratch for
    the inverse pivots (0 on the null columns).  DeNOC's multiplier fits
    (``methods/denoc_multipliers.py``, ``null_tol`` = ``NULL_TOL``)."""
    dmax = 0.0
    for j in range(6):
        dmax = max(dmax, A[j, j])
    tol = null_tol * dmax
    for j in range(6):
        s = A[j, j]
        for c in range(j):
            s -= A[j, c] * A[j, c]
        if not s > tol:
            for r in range(j, 6):
                A[r, j] = 0.0
            di[j] = 0.0
            continue
        dj = s**0.5
        A[j, j] = dj
        inv = 1.0 / dj
        di[j] = inv
        for r in range(j + 1, 6):
            t = A[r, j]
            for c in range(j):
                t -= A[r, c] * A[j, c]
            A[r, j] = t * inv
    for j in range(6):
        s = x[j]
        for c in range(j):
            s -= A[j, c] * x[c]
        x[j] = s * di[j] if di[j] != 0.0 else 0.0
    for j in range(5, -1, -1):
        s = x[j]
        for r in range(j + 1, 6):
            s -= A[r, j] * x[r]
        x[j] = s * di[j] if di[j] != 0.0 else 0.0


@njit(cache=True)
def cholesky_solve_rows6(L, di, X, nrows):
    """X[a] ← (L Lᵀ)⁻¹ X[a] for the rows a < ``nrows`` of X (·, 6), L 6×6 from ``cholesky_scaled``:
    the substitutions of all right-hand sides advance together (independent chains)."""
    for i in range(6):
        for a in range(nrows):
            t = X[a, i]
            for k in range(i):
                t -= L[i, k] * X[a, k]
            X[a, i] = t * di[i]
    for i in range(5, -1, -1):
        for a in range(nrows):
            t = X[a, i]
            for k in range(i + 1, 6):
                t -= L[k, i] * X[a, k]
            X[a, i] = t * di[i]


@njit(cache=True, inline="always")
def _eliminate(A, n, k):
    """Gaussian elimination below the pivot A[k, k] of the leading n × n block: the
    multipliers l_ik = a_ik / a_kk stored in place of a_ik, row i -= l_ik row k (rows
    with an exact-zero multiplier untouched, so the factors keep the sparsity)."""
    inv = 1.0 / A[k, k]
    for i in range(k + 1, n):
        f = A[i, k]
        if f != 0.0:
            f *= inv
            A[i, k] = f
            for j in range(k + 1, n):
                A[i, j] -= f * A[k, j]


@njit(cache=True, inline="always")
def _pivot_ratio(n, umin, umax):
    """|u|_min / |u|_max of the pivots (0: a zero pivot; 1 for n = 0)."""
    if n == 0:
        return 1.0
    return umin / umax if umax > 0.0 else 0.0


@njit(cache=True)
def lu_inplace(A, n, piv):
    """PA = LU with partial pivoting, in place.  Returns |u|_min / |u|_max (0: singular;
    1 for n = 0)."""
    umin = 1e300
    umax = 0.0
    for k in range(n):
        p = k
        big = abs(A[k, k])
        for i in range(k + 1, n):
            if abs(A[i, k]) > big:
                big = abs(A[i, k])
                p = i
        piv[k] = p
        if big == 0.0:
            return 0.0
        if p != k:
            for j in range(n):
                A[k, j], A[p, j] = A[p, j], A[k, j]
        umin = min(umin, big)
        umax = max(umax, big)
        _eliminate(A, n, k)
    return _pivot_ratio(n, umin, umax)


@njit(cache=True)
def lu_nopivot_inplace(A, n, piv):
    """A = LU in place without row exchanges (``piv`` set to the identity, for
    ``lu_solve`` / ``lu_solve_rows``); multipliers that are exact zeros are skipped, so
    the factors keep the sparsity of the elimination graph: O(nnz(L) · n) work.  For
    matrices whose pivots in order are safe, as a KKT matrix [M, -Jᵀ; J, 0] with M
    symmetric positive definite and J of full rank ordered q first (its pivots are those
    of M's factorization, then of -J M⁻¹ Jᵀ), where partial pivoting would fill the
    factors.  Returns |u|_min / |u|_max (0: a zero pivot; 1 for n = 0); callers judge it
    and refactor with ``lu_inplace`` where it is poor."""
    umin = 1e300
    umax = 0.0
    for k in range(n):
        piv[k] = k
        d = A[k, k]
        if d == 0.0:
            return 0.0
        umin = min(umin, abs(d))
        umax = max(umax, abs(d))
        _eliminate(A, n, k)
    return _pivot_ratio(n, umin, umax)


@njit(cache=True)
def lu_solve(A, n, piv, b):
    """b ← A⁻¹ b from ``lu_inplace``'s factors."""
    for k in range(n):
        p = piv[k]
        if p != k:
            b[k], b[p] = b[p], b[k]
    for i in range(n):
        s = b[i]
        for k in range(i):
            s -= A[i, k] * b[k]
        b[i] = s
    for i in range(n - 1, -1, -1):
        s = b[i]
        for k in range(i + 1, n):
            s -= A[i, k] * b[k]
        b[i] = s / A[i, i]


@njit(cache=True)
def lu_solve_transpose(A, n, piv, b):
    """b ← A⁻ᵀ b from ``lu_inplace``'s factors (P A = L U, so Aᵀ = Uᵀ Lᵀ P): Uᵀ w = b,
    Lᵀ z = w (unit diagonal), then the row swaps undone in reverse order."""
    for i in range(n):  # Uᵀ w = b
        t = b[i]
        for k in range(i):
            t -= A[k, i] * b[k]
        b[i] = t / A[i, i]
    for i in range(n - 1, -1, -1):  # Lᵀ z = w
        t = b[i]
        for k in range(i + 1, n):
            t -= A[k, i] * b[k]
        b[i] = t
    for k in range(n - 1, -1, -1):  # Pᵀ z
        p = piv[k]
        if p != k:
            b[k], b[p] = b[p], b[k]


@njit(cache=True)
def lu_solve_rows(A, n, piv, B):
    """B ← A⁻¹ B for the k right-hand sides in the columns of B (n × k, C order) from
    ``lu_inplace``'s factors, row by row: each step updates a whole contiguous row of B,
    and the factors' exact zeros are skipped, so the solve costs O(nnz(L + U) · k) (the
    KKT systems of trees with loops keep their factors sparse: O(n · k) on a ladder)
    plus O(n²) for the scan.  The same operations as ``lu_solve`` column by column."""
    k = B.shape[1]
    for i in range(n):
        p = piv[i]
        if p != i:
            for c in range(k):
                B[i, c], B[p, c] = B[p, c], B[i, c]
    for i in range(n):
        for j in range(i):
            f = A[i, j]
            if f != 0.0:
                for c in range(k):
                    B[i, c] -= f * B[j, c]
    for i in range(n - 1, -1, -1):
        for j in range(i + 1, n):
            f = A[i, j]
            if f != 0.0:
                for c in range(k):
                    B[i, c] -= f * B[j, c]
        d = A[i, i]
        for c in range(k):
            B[i, c] = B[i, c] / d


@njit(cache=True)
def lu_inverse_norm_exact(A, n, piv, y):
    """‖A⁻¹‖₁ exactly, from ``lu_inplace``'s factors: the largest column sum of A⁻¹ by n
    solves (O(n³); for the small blocks whose pivots already look poor), ``y`` (n)
    scratch."""
    inorm = 0.0
    for c in range(n):
        for i in range(n):
            y[i] = 1.0 if i == c else 0.0
        lu_solve(A, n, piv, y)
        t = 0.0
        for i in range(n):
            t += abs(y[i])
        inorm = max(inorm, t)
    return inorm


@njit(cache=True)
def lu_inverse_norm(A, n, w):
    """An estimate of ‖U⁻¹‖₁ for the U factor of ``lu_inplace`` (upper triangle of A),
    O(n²), ``w`` (n) scratch: LINPACK's (``dtrco``) lower bound ‖z‖₁ / ‖y‖₁ with
    Uᵀ y = e, each e_k = ±1 chosen to make |y_k| grow, then U z = y.

    With partial pivoting ‖L⁻¹‖ is small (|l_ij| <= 1), so ‖A‖₁ times this tracks
    cond₁(A) (within a factor ~10 on the closure systems of the random census; the
    estimate is a lower bound, within 19 of ‖U⁻¹‖₁ on 500 random 40×40 matrices), where
    U's pivot ratio may miss it by orders of magnitude (a KKT matrix's condition goes
    with σ_min(J)², its pivots with σ_min(J))."""
    if n == 0:
        return 0.0
    ynorm = 0.0
    for k in range(n):  # Uᵀ y = e, Uᵀ lower triangular
        s = 0.0
        for i in range(k):
            s += A[i, k] * w[i]
        e = -1.0 if s > 0.0 else 1.0
        w[k] = (e - s) / A[k, k]
        ynorm += abs(w[k])
    znorm = 0.0
    for i in range(n - 1, -1, -1):  # U z = y
        s = w[i]
        for k in range(i + 1, n):
            s -= A[i, k] * w[k]
        w[i] = s / A[i, i]
        znorm += abs(w[i])
    return znorm / ynorm


@njit(cache=True, inline="always")
def _reflect(A, j, vv, X, c):
    """X[j:, c] ← (I - 2 v vᵀ / vv) X[j:, c] for the Householder vector v in A[j:, j]."""
    t = 0.0
    for i in range(j, A.shape[0]):
        t += A[i, j] * X[i, c]
    t *= 2.0 / vv
    for i in range(j, A.shape[0]):
        X[i, c] -= t * A[i, j]


@njit(cache=True)
def qr_lstsq(A, B):
    """Least squares of A X = B for A (n × r) of full column rank (r <= n) by Householder
    QR: A and B (n × k) are overwritten (R in A's upper triangle), X in B[:r].  Returns
    min/max |R_ii| (0: A is rank deficient).  For the dependence of redundant closure
    rows, J_dᵀ = J_kᵀ C (the compiled simulation loop: numpy's lstsq compiled there cost
    seconds of its cold start; the kept rows are independent, so no rank cut is needed)."""
    n, r = A.shape[0], A.shape[1]
    k = B.shape[1]
    rmin, rmax = 1e300, 0.0
    for j in range(r):
        s = 0.0
        for i in range(j, n):
            s += A[i, j] * A[i, j]
        norm = s**0.5
        if norm == 0.0:
            return 0.0
        alpha = -norm if A[j, j] >= 0.0 else norm
        # v = x - alpha e1 (in A[j:, j]), vᵀv = 2 norm (norm + |x_j|)
        A[j, j] -= alpha
        vv = 2.0 * norm * (norm + abs(A[j, j] + alpha))
        for c in range(j + 1, r):
            _reflect(A, j, vv, A, c)
        for c in range(k):
            _reflect(A, j, vv, B, c)
        A[j, j] = alpha
        rmin = min(rmin, abs(alpha))
        rmax = max(rmax, abs(alpha))
    for c in range(k):  # R X = (Qᵀ B)[:r]
        for j in range(r - 1, -1, -1):
            t = B[j, c]
            for i in range(j + 1, r):
                t -= A[j, i] * B[i, c]
            B[j, c] = t / A[j, j]
    if r == 0:
        return 1.0
    return rmin / rmax


_EPS = np.finfo(np.float64).eps


@njit(cache=True)
def min_norm_lstsq(A, B, x, w):
    """x = A⁺ b, the minimum-norm least-squares solution of A x = b for A (n × k) of any
    shape and rank, b = B[:, 0] (B: n × 1; n × 0 for the rank alone): numpy's
    ``lstsq(A, b, rcond=None)`` to rounding.  Returns the numerical rank r.  ``w``:
    scratch of at least 3k float64 (a vector, the RZ vectors' heads, the pivots).

    Householder QR with column pivoting, A P = Q R (at step j the remaining column of
    largest norm), stopped where |R_jj| <= eps·max(n, k)·|R_00| (numpy's cut-off with R's
    diagonal standing in for the singular values); for r < k the RZ factorization
    [R11 R12] = [T 0] Z of R's first r rows (LAPACK's xGELSY), x = P Zᵀ [T⁻¹ (Qᵀb)_1; 0].
    A and B are overwritten."""
    n, k = A.shape[0], A.shape[1]
    y, vi, piv = block(w, 0, k), block(w, k, k), block_int(w, 2 * k, k)
    for j in range(k):
        piv[j] = j
    r = 0
    cut = 0.0
    for j in range(min(n, k)):
        best, bc = -1.0, j
        for c in range(j, k):  # norms recomputed: the matrices here are small
            t = 0.0
            for i in range(j, n):
                t += A[i, c] * A[i, c]
            if t > best:
                best, bc = t, c
        if bc != j:
            for i in range(n):
                A[i, j], A[i, bc] = A[i, bc], A[i, j]
            piv[j], piv[bc] = piv[bc], piv[j]
        norm = best**0.5
        if j == 0:
            cut = _EPS * max(n, k) * norm
        if not norm > cut:
            break
        alpha = -norm if A[j, j] >= 0.0 else norm
        A[j, j] -= alpha
        vv = 2.0 * norm * (norm + abs(A[j, j] + alpha))
        for c in range(j + 1, k):
            _reflect(A, j, vv, A, c)
        for c in range(B.shape[1]):
            _reflect(A, j, vv, B, c)
        A[j, j] = alpha
        r = j + 1
    if B.shape[1] == 0:
        return r
    # RZ: row i's reflector (acting on columns i and r..k-1) zeroes A[i, r:], applied from
    # the right to the rows above; its vector is (vi[i], A[i, r:])
    for i in range(r - 1 if r < k else -1, -1, -1):
        t = 0.0
        for c in range(r, k):
            t += A[i, c] * A[i, c]
        norm = (A[i, i] * A[i, i] + t) ** 0.5
        alpha = -norm if A[i, i] >= 0.0 else norm
        vi[i] = A[i, i] - alpha
        f = 2.0 / (vi[i] * vi[i] + t)
        for row in range(i):
            t2 = A[row, i] * vi[i]
            for c in range(r, k):
                t2 += A[row, c] * A[i, c]
            t2 *= f
            A[row, i] -= t2 * vi[i]
            for c in range(r, k):
                A[row, c] -= t2 * A[i, c]
        A[i, i] = alpha
    # T w = (Qᵀ b)[:r], then y = Zᵀ [w; 0] = H_{r-1} … H_0 [w; 0], x = P y
    for j in range(r, k):
        y[j] = 0.0
    for j in range(r - 1, -1, -1):
        t = B[j, 0]
        for i in range(j + 1, r):
            t -= A[j, i] * y[i]
        y[j] = t / A[j, j]
    if r < k:
        for i in range(r):
            t = vi[i] * y[i]
            for c in range(r, k):
                t += A[i, c] * y[c]
            nv2 = vi[i] * vi[i]
            for c in range(r, k):
                nv2 += A[i, c] * A[i, c]
            t *= 2.0 / nv2
            y[i] -= t * vi[i]
            for c in range(r, k):
                y[c] -= t * A[i, c]
    for j in range(k):
        x[piv[j]] = y[j]
    return r
