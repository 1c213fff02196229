"""6D spatial algebra kernels (Featherstone's notation, vectors ``[angular; linear]``).

A rigid transform between a parent frame λ and a child frame i is stored as the
pair ``(R, p)``: ``R`` (3×3) is the orientation of frame i expressed in λ and
``p`` (3,) the origin of i expressed in λ.  The Plücker motion transform
``X = iXλ`` is never formed as a 6×6 matrix; the kernels below apply it directly:

    motion  parent -> child:  ω_i = Rᵀ ω_λ,              v_i = Rᵀ (v_λ + ω_λ × p)
    force   child  -> parent: f_λ = R f_i,                n_λ = R n_i + p × (R f_i)
    inertia child  -> parent: I_λ = Xᵀ I_i X

All kernels write into preallocated outputs; none allocates.
"""

from numba import njit


@njit(cache=True)
def motion_to_child(R, p, m, out):
    """out = iXλ m: a motion vector in λ coordinates expressed at the child origin, in i."""
    w0, w1, w2 = m[0], m[1], m[2]
    # v_λ + ω_λ × p
    u0 = m[3] + w1 * p[2] - w2 * p[1]
    u1 = m[4] + w2 * p[0] - w0 * p[2]
    u2 = m[5] + w0 * p[1] - w1 * p[0]
    for r in range(3):
        out[r] = R[0, r] * w0 + R[1, r] * w1 + R[2, r] * w2
        out[3 + r] = R[0, r] * u0 + R[1, r] * u1 + R[2, r] * u2


@njit(cache=True)
def _rotate_block(I, ro, co, R, tmp, upper):
    """tmp[ro:ro+3, co:co+3] = R M Rᵀ, M = I[ro:ro+3, co:co+3] (only r <= c if ``upper``).

    Uses tmp[3:6, 0:3] as scratch for M Rᵀ, so the block must not be that one.
    """
    for k in range(3):
        for c in range(3):
            tmp[3 + k, c] = (
                I[ro + k, co] * R[c, 0] + I[ro + k, co + 1] * R[c, 1] + I[ro + k, co + 2] * R[c, 2]
            )
    for r in range(3):
        for c in range(r if upper else 0, 3):
            tmp[ro + r, co + c] = R[r, 0] * tmp[3, c] + R[r, 1] * tmp[4, c] + R[r, 2] * tmp[5, c]


@njit(cache=True)
def inertia_to_parent_add(R, p, I, out, tmp):
    """out += iXλᵀ I iXλ for a symmetric 6×6 inertia ``I`` in child coordinates.

    With blocks I = [[A, B], [Bᵀ, C]] rotated to λ's orientation (A' = R A Rᵀ, ...),
    the shift by p (P = [p]×) gives
    [[A' + P B'ᵀ - (B' + P C') P, B' + P C'], [B'ᵀ - C' P, C']].
    Only the upper triangles of the result's symmetric diagonal blocks are computed
    (about half the work of the full product) and the result is added to ``out``
    symmetrically, so ``out`` stays exactly symmetric.  ``tmp`` is a (6, 6) scratch.
    """
    _rotate_block(I, 0, 0, R, tmp, True)
    _rotate_block(I, 0, 3, R, tmp, False)
    _rotate_block(I, 3, 3, R, tmp, True)
    px, py, pz = p[0], p[1], p[2]
    # A' += P B'ᵀ: column c of B'ᵀ is row c of B' (upper triangle of A only)
    for c in range(3):
        b0, b1, b2 = tmp[c, 3], tmp[c, 4], tmp[c, 5]
        tmp[0, c] += py * b2 - pz * b1
        if c >= 1:
            tmp[1, c] += pz * b0 - px * b2
        if c >= 2:
            tmp[2, c] += px * b1 - py * b0
    # B'' = B' + P C' (C' symmetric, read from its upper triangle)
    for c in range(3):
        c0 = tmp[3, 3 + c]
        c1 = tmp[4, 3 + c] if c >= 1 else tmp[3, 4]
        c2 = tmp[5, 3 + c] if c >= 2 else tmp[3 + c, 5]
        tmp[0, 3 + c] += py * c2 - pz * c1
        tmp[1, 3 + c] += pz * c0 - px * c2
        tmp[2, 3 + c] += px * c1 - py * c0
    # A'' = A' + P B'ᵀ - B'' P (upper triangle): (row · P) = row @ [p]×
    for r in range(3):
        t0, t1, t2 = tmp[r, 3], tmp[r, 4], tmp[r, 5]
        if r == 0:
            tmp[0, 0] -= t1 * pz - t2 * py
        if r <= 1:
            tmp[r, 1] -= t2 * px - t0 * pz
        tmp[r, 2] -= t0 * py - t1 * px
    for r in range(3):
        for c in range(3):
            a = tmp[r, c] if r <= c else tmp[c, r]
            out[r, c] += a
            b = tmp[r, 3 + c]
            out[r, 3 + c] += b
            out[3 + c, r] += b
            cc = tmp[3 + r, 3 + c] if r <= c else tmp[3 + c, 3 + r]
            out[3 + r, 3 + c] += cc


@njit(cache=True)
def rigid_inertia_to_parent_add(R, p, I, out):
    """out += iXλᵀ I iXλ for a *rigid-body* spatial inertia I (a body's, or a sum of them).

    Such an inertia about the body origin is I = [[Ī, [h]×], [[h]×ᵀ, m 1]] (mass m,
    first moment h = m c, rotational inertia Ī about the origin): 10 numbers, read
    from I.  Moved to λ (c' = R c + p, g = R h):
    h' = g + m p,   Ī' = R Ī Rᵀ + (2 p·g + m p·p) 1 - g pᵀ - p gᵀ - m p pᵀ,
    about a quarter of the work of the general ``inertia_to_parent_add`` (which
    articulated inertias need).  Only the structural non-zeros of ``out`` are
    updated, so its exact zeros and symmetry are kept.
    """
    m = I[3, 3]
    hx, hy, hz = I[2, 4], I[0, 5], I[1, 3]
    r00, r01, r02 = R[0, 0], R[0, 1], R[0, 2]
    r10, r11, r12 = R[1, 0], R[1, 1], R[1, 2]
    r20, r21, r22 = R[2, 0], R[2, 1], R[2, 2]
    px, py, pz = p[0], p[1], p[2]
    # R Ī Rᵀ (Ī symmetric): T = Ī Rᵀ, then R T (upper triangle)
    b00, b01, b02, b11, b12, b22 = I[0, 0], I[0, 1], I[0, 2], I[1, 1], I[1, 2], I[2, 2]
    t00 = b00 * r00 + b01 * r01 + b02 * r02
    t01 = b00 * r10 + b01 * r11 + b02 * r12
    t02 = b00 * r20 + b01 * r21 + b02 * r22
    t10 = b01 * r00 + b11 * r01 + b12 * r02
    t11 = b01 * r10 + b11 * r11 + b12 * r12
    t12 = b01 * r20 + b11 * r21 + b12 * r22
    t20 = b02 * r00 + b12 * r01 + b22 * r02
    t21 = b02 * r10 + b12 * r11 + b22 * r12
    t22 = b02 * r20 + b12 * r21 + b22 * r22
    gx = r00 * hx + r01 * hy + r02 * hz
    gy = r10 * hx + r11 * hy + r12 * hz
    gz = r20 * hx + r21 * hy + r22 * hz
    s = 2.0 * (px * gx + py * gy + pz * gz) + m * (px * px + py * py + pz * pz)
    a00 = r00 * t00 + r01 * t10 + r02 * t20 + s - 2.0 * gx * px - m * px * px
    a01 = r00 * t01 + r01 * t11 + r02 * t21 - (gx * py + px * gy) - m * px * py
    a02 = r00 * t02 + r01 * t12 + r02 * t22 - (gx * pz + px * gz) - m * px * pz
    a11 = r10 * t01 + r11 * t11 + r12 * t21 + s - 2.0 * gy * py - m * py * py
    a12 = r10 * t02 + r11 * t12 + r12 * t22 - (gy * pz + py * gz) - m * py * pz
    a22 = r20 * t02 + r21 * t12 + r22 * t22 + s - 2.0 * gz * pz - m * pz * pz
    hx, hy, hz = gx + m * px, gy + m * py, gz + m * pz
    out[0, 0] += a00
    out[1, 1] += a11
    out[2, 2] += a22
    out[0, 1] += a01
    out[1, 0] += a01
    out[0, 2] += a02
    out[2, 0] += a02
    out[1, 2] += a12
    out[2, 1] += a12
    out[3, 3] += m
    out[4, 4] += m
    out[5, 5] += m
    # [h']× in the upper-right block, its transpose in the lower-left
    out[0, 4] -= hz
    out[4, 0] -= hz
    out[0, 5] += hy
    out[5, 0] += hy
    out[1, 3] += hz
    out[3, 1] += hz
    out[1, 5] -= hx
    out[5, 1] -= hx
    out[2, 3] -= hy
    out[3, 2] -= hy
    out[2, 4] += hx
    out[4, 2] += hx


@njit(cache=True)
def motion_to_child_at(Xrel, i, m0, m1, m2, m3, m4, m5):
    """iXλ m as a 6-tuple, for the pose ``Xrel[i]`` of body i in its parent."""
    p0, p1, p2 = Xrel[i, 3, 0], Xrel[i, 3, 1], Xrel[i, 3, 2]
    # v_λ + ω_λ × p
    u0 = m3 + m1 * p2 - m2 * p1
    u1 = m4 + m2 * p0 - m0 * p2
    u2 = m5 + m0 * p1 - m1 * p0
    return (
        Xrel[i, 0, 0] * m0 + Xrel[i, 1, 0] * m1 + Xrel[i, 2, 0] * m2,
        Xrel[i, 0, 1] * m0 + Xrel[i, 1, 1] * m1 + Xrel[i, 2, 1] * m2,
        Xrel[i, 0, 2] * m0 + Xrel[i, 1, 2] * m1 + Xrel[i, 2, 2] * m2,
        Xrel[i, 0, 0] * u0 + Xrel[i, 1, 0] * u1 + Xrel[i, 2, 0] * u2,
        Xrel[i, 0, 1] * u0 + Xrel[i, 1, 1] * u1 + Xrel[i, 2, 1] * u2,
        Xrel[i, 0, 2] * u0 + Xrel[i, 1, 2] * u1 + Xrel[i, 2, 2] * u2,
    )


@njit(cache=True)
def force_to_parent_at(Xrel, i, f0, f1, f2, f3, f4, f5):
    """iXλᵀ f as a 6-tuple: a wrench on body i moved to its parent's origin and frame."""
    n0 = Xrel[i, 0, 0] * f0 + Xrel[i, 0, 1] * f1 + Xrel[i, 0, 2] * f2
    n1 = Xrel[i, 1, 0] * f0 + Xrel[i, 1, 1] * f1 + Xrel[i, 1, 2] * f2
    n2 = Xrel[i, 2, 0] * f0 + Xrel[i, 2, 1] * f1 + Xrel[i, 2, 2] * f2
    g0 = Xrel[i, 0, 0] * f3 + Xrel[i, 0, 1] * f4 + Xrel[i, 0, 2] * f5
    g1 = Xrel[i, 1, 0] * f3 + Xrel[i, 1, 1] * f4 + Xrel[i, 1, 2] * f5
    g2 = Xrel[i, 2, 0] * f3 + Xrel[i, 2, 1] * f4 + Xrel[i, 2, 2] * f5
    p0, p1, p2 = Xrel[i, 3, 0], Xrel[i, 3, 1], Xrel[i, 3, 2]
    return (
        n0 + p1 * g2 - p2 * g1,
        n1 + p2 * g0 - p0 * g2,
        n2 + p0 * g1 - p1 * g0,
        g0,
        g1,
        g2,
    )


@njit(cache=True, inline="always")
def rigid_inertia_times_at(I, i, x0, x1, x2, x3, x4, x5):
    """``I[i] @ x`` as a 6-tuple for the *rigid-body* inertias ``I`` (n, 6, 6) of the
    model: I = [[Ī, [h]×], [[h]×ᵀ, m 1]] (``rigid_inertia_to_parent_add``), so
    I [ω; u] = [Ī ω + h × u; m u + ω × h] from its 10 numbers: 21 products where
    ``mat6_vec_at`` takes 36, the same sums in the same order (its products with the
    structural zeros dropped)."""
    m = I[i, 3, 3]
    hx, hy, hz = I[i, 2, 4], I[i, 0, 5], I[i, 1, 3]
    b00, b01, b02 = I[i, 0, 0], I[i, 0, 1], I[i, 0, 2]
    b11, b12, b22 = I[i, 1, 1], I[i, 1, 2], I[i, 2, 2]
    y0 = b00 * x0 + b01 * x1 + b02 * x2
    y0 += -hz * x4 + hy * x5
    y1 = b01 * x0 + b11 * x1 + b12 * x2
    y1 += hz * x3 + -hx * x5
    y2 = b02 * x0 + b12 * x1 + b22 * x2
    y2 += -hy * x3 + hx * x4
    y3 = hz * x1 + -hy * x2
    y3 += m * x3
    y4 = -hz * x0 + hx * x2
    y4 += m * x4
    y5 = hy * x0 + -hx * x1
    y5 += m * x5
    return y0, y1, y2, y3, y4, y5


@njit(cache=True)
def mat6_vec_at(M, i, x0, x1, x2, x3, x4, x5):
    """``M[i] @ x`` as a 6-tuple for an (n, 6, 6) array ``M`` (no view of ``M[i]``)."""
    y0 = M[i, 0, 0] * x0 + M[i, 0, 1] * x1 + M[i, 0, 2] * x2
    y0 += M[i, 0, 3] * x3 + M[i, 0, 4] * x4 + M[i, 0, 5] * x5
    y1 = M[i, 1, 0] * x0 + M[i, 1, 1] * x1 + M[i, 1, 2] * x2
    y1 += M[i, 1, 3] * x3 + M[i, 1, 4] * x4 + M[i, 1, 5] * x5
    y2 = M[i, 2, 0] * x0 + M[i, 2, 1] * x1 + M[i, 2, 2] * x2
    y2 += M[i, 2, 3] * x3 + M[i, 2, 4] * x4 + M[i, 2, 5] * x5
    y3 = M[i, 3, 0] * x0 + M[i, 3, 1] * x1 + M[i, 3, 2] * x2
    y3 += M[i, 3, 3] * x3 + M[i, 3, 4] * x4 + M[i, 3, 5] * x5
    y4 = M[i, 4, 0] * x0 + M[i, 4, 1] * x1 + M[i, 4, 2] * x2
    y4 += M[i, 4, 3] * x3 + M[i, 4, 4] * x4 + M[i, 4, 5] * x5
    y5 = M[i, 5, 0] * x0 + M[i, 5, 1] * x1 + M[i, 5, 2] * x2
    y5 += M[i, 5, 3] * x3 + M[i, 5, 4] * x4 + M[i, 5, 5] * x5
    return y0, y1, y2, y3, y4, y5
