"""Random closed-loop mechanisms over the public builder API, and an independent dense oracle.

A mechanism is a random spanning tree (3–25 bodies; revolute, prismatic, universal,
spherical, fixed and free joints; random placements; masses over six decades, so
mass ratios up to 1e6) with 1–5 loop closures of every kind that are satisfiable
by construction: a configuration ``q*`` of the tree is drawn first, then frame A of
each closure is placed at random on body a and frame B is *defined* as frame A's
world pose at ``q*`` expressed in body b, so Φ(q*) = 0 exactly.  About one
mechanism in five gets a deliberately redundant closure (a duplicate, the same
closure with its frames swapped, or a second closure between the same two bodies
whose rows the first already implies).  About one in three is planar (x–y plane,
hinges along z, the planar closure kinds).

Two front ends draw from the same generator:

- ``random_mechanism(seed)``: a plain seeded generator (numpy ``default_rng``) for
  the slow census and ``benchmarks/random_census.py``;
- ``mechanisms()``: a hypothesis strategy (its draws shrink towards fewer bodies,
  fewer closures, no redundancy and simple joints, so a failure is reported small).

Every builder call is recorded: ``Mechanism.code()`` prints a self-contained
script that rebuilds the model and the state, to paste into a bug report.

The oracle (``dense_oracle``) uses only the public tree and closure functions
(``ld.crba``, ``ld.nonlinear_effects``, ``ld.constraints``) and numpy: Gauss's
principle in mass-weighted coordinates solved by an SVD, so redundant rows need no
special treatment and the condition number comes for free.  Where M itself is so
ill-conditioned (mass ratios of 1e5 along a chain) that its rounded entries cannot
resolve ``REL_TOL`` (the oracle's ``noise``), a second reference that never forms M
decides (``tree_reference``: ``ld.aba`` on the spanning tree), where it agrees with
the oracle to the oracle's own resolution.
"""

import time
from dataclasses import dataclass, field

import numpy as np

import loopdyn as ld

METHODS = ("augmented", "slm", "sslm", "recursive_lambda", "embedding", "rcr")
SPATIAL_KINDS = ("ball", "revolute", "universal", "prismatic", "weld", "generic")
PLANAR_KINDS = ("revolute", "prismatic", "weld", "generic")
REDUNDANCIES = ("duplicate", "swapped", "implied")
# acceptance thresholds of issue 11
REL_TOL = 1e-8  # |q̈ - q̈_oracle| / |q̈_oracle|
COND_WELL = 1e8  # condition of J M⁻¹ Jᵀ on its range below which a SingularityError is a bug
RANK_RTOL = 1e-9  # singular values of J M^{-1/2} below RANK_RTOL · σ_max count as redundancy
GAP_RTOL = 1e-12  # ... and a clean redundancy has them below GAP_RTOL · σ_max
CONSISTENT_RTOL = 1e-9  # |J q̈ - γ| of the least-squares q̈ above this: no solution exists


# --------------------------------------------------------------------------- choosers
class _NumpyChooser:
    """Random choices from a numpy Generator."""

    def __init__(self, rng):
        self.rng = rng

    def integer(self, lo, hi):
        """An integer in [lo, hi]."""
        return int(self.rng.integers(lo, hi + 1))

    def uniform(self, lo, hi):
        return float(self.rng.uniform(lo, hi))

    def choice(self, options):
        return options[int(self.rng.integers(len(options)))]

    def chance(self, p):
        """True with probability p."""
        return bool(self.rng.uniform() < p)


class _HypothesisChooser:
    """The same choices drawn through hypothesis (``st.composite``'s ``draw``).

    Shrinking moves integers to their lower bound, floats towards 0 (clipped into
    the range) and ``chance`` towards False, choices towards the first option.
    """

    def __init__(self, draw):
        from hypothesis import strategies as st

        self.draw, self.st = draw, st

    def integer(self, lo, hi):
        return self.draw(self.st.integers(lo, hi))

    def uniform(self, lo, hi):
        return self.draw(self.st.floats(lo, hi, allow_nan=False, allow_infinity=False))

    def choice(self, options):
        return self.draw(self.st.sampled_from(options))

    def chance(self, p):
        return self.draw(self.st.integers(0, 999)) >= round(1000 * (1.0 - p))


# --------------------------------------------------------------------------- small geometry
def _rpy_matrix(r, p, y):
    """R = Rz(y) Ry(p) Rx(r), the builder's convention."""
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    Rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    Ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    Rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return Rz @ Ry @ Rx


def _unit(c, planar=False):
    """A random unit vector (in the x–y plane if ``planar``), or one of the named axes."""
    if c.chance(0.4):
        return c.choice(("z", "x", "y", "-y") if not planar else ("x", "y", "-x"))
    for _ in range(10):
        u = np.array([c.uniform(-1, 1), c.uniform(-1, 1), 0.0 if planar else c.uniform(-1, 1)])
        n = np.linalg.norm(u)
        if n > 0.2:
            return tuple(float(x) for x in u / n)
    return "x"


def _vec(a):
    if isinstance(a, str):
        s = -1.0 if a.startswith("-") else 1.0
        return s * np.eye(3)["xyz".index(a[-1])]
    return np.asarray(a, float)


def _rpy(c, planar):
    if planar:
        return (0.0, 0.0, c.uniform(-np.pi, np.pi))
    return (c.uniform(-np.pi, np.pi), c.uniform(-np.pi / 2, np.pi / 2), c.uniform(-np.pi, np.pi))


def _xyz(c, planar, scale=0.8):
    return (
        c.uniform(-scale, scale),
        c.uniform(-scale, scale),
        0.0 if planar else c.uniform(-scale, scale),
    )


def _quaternion(c):
    for _ in range(10):
        u = np.array([c.uniform(-1, 1) for _ in range(4)])
        n = np.linalg.norm(u)
        if n > 0.2:
            return u / n
    return np.array([1.0, 0.0, 0.0, 0.0])


# --------------------------------------------------------------------------- recording
class _Joint:
    """A joint as recorded: the loopdyn class name and its constructor arguments."""

    def __init__(self, cls, *args):
        self.cls, self.args = cls, args

    def make(self):
        return getattr(ld, self.cls)(*self.args)

    def __repr__(self):
        return f"ld.{self.cls}({', '.join(_src(a) for a in self.args)})"


def _src(x):
    """Python source of a recorded argument (floats round-trip exactly through repr)."""
    if isinstance(x, _Joint):
        return repr(x)
    if isinstance(x, np.ndarray):
        x = x.tolist()
    if isinstance(x, (tuple, list)):
        inner = ", ".join(_src(e) for e in x)
        return (
            f"({inner},)"
            if isinstance(x, tuple) and len(x) == 1
            else (f"({inner})" if isinstance(x, tuple) else f"[{inner}]")
        )
    if isinstance(x, (float, np.floating)):
        return repr(float(x))
    return repr(x)


@dataclass
class Mechanism:
    """A random consistent closed-loop state.

    ``model`` (frozen), ``q`` (q*, Φ(q) = 0 by construction), ``v`` (consistent:
    ``ld.complete_velocity``), ``tau`` (nv), ``calls`` (the builder calls, see
    ``code``), ``planar``, ``redundancy`` (what redundant closure was added, or
    None), ``label`` (seed or hypothesis), ``velocity_note`` (set if
    ``ld.complete_velocity`` failed and the generator projected v itself).
    """

    model: object
    q: np.ndarray
    v: np.ndarray
    tau: np.ndarray
    calls: list = field(repr=False)
    planar: bool = False
    redundancy: str | None = None
    label: object = None
    velocity_note: str | None = None

    def code(self):
        """A self-contained script rebuilding ``model``, ``q``, ``v`` and ``tau``."""
        lines = ["import numpy as np", "import loopdyn as ld", ""]
        for name, args, kwargs in self.calls:
            parts = [_src(a) for a in args] + [f"{k}={_src(v)}" for k, v in kwargs.items()]
            target = "b = ld.ModelBuilder" if name == "__init__" else f"b.{name}"
            lines.append(f"{target}({', '.join(parts)})")
        lines.append("model = b.build()")
        for name in ("q", "v", "tau"):
            lines.append(f"{name} = np.array({_src(getattr(self, name).tolist())})")
        return "\n".join(lines) + "\n"

    @property
    def summary(self):
        m = self.model
        kinds = ",".join(m.closure_kinds)
        joints = "".join(t[0] if t != "prismatic" else "P" for t in m.joint_types)
        red = f" +{self.redundancy}" if self.redundancy else ""
        return (
            f"{'planar' if self.planar else 'spatial'} nb={m.nbodies} nv={m.nv} m={m.m} "
            f"joints={joints} closures={kinds}{red}"
        )


def _replay(calls):
    b = None
    for name, args, kwargs in calls:
        args = [a.make() if isinstance(a, _Joint) else a for a in args]
        if name == "__init__":
            b = ld.ModelBuilder(*args, **kwargs)
        else:
            getattr(b, name)(*args, **kwargs)
    return b.build()


# --------------------------------------------------------------------------- the generator
def _inertia(c, planar):
    """(mass, com, 3×3 inertia about the com): a box of random size, mass over 6 decades."""
    mass = 10.0 ** c.uniform(-3.0, 3.0)
    a, b_, d = (c.uniform(0.02, 1.0) for _ in range(3))
    I = mass / 12.0 * np.diag([b_ * b_ + d * d, a * a + d * d, a * a + b_ * b_])
    R = _rpy_matrix(*_rpy(c, planar))
    I = R @ I @ R.T
    I = 0.5 * (I + I.T)
    com = _xyz(c, planar, 0.5)
    return mass, com, I.tolist()


def _joint(c, planar, parent_is_ground):
    """(recorded joint, kind) of a random tree joint."""
    if planar:
        kind = c.choice(("revolute", "revolute", "prismatic", "fixed"))
        if kind == "revolute":
            return _Joint("Revolute", "z"), kind
        if kind == "prismatic":
            return _Joint("Prismatic", _unit(c, planar=True)), kind
        return _Joint("Fixed"), kind
    kinds = ("revolute", "prismatic", "universal", "spherical", "fixed", "free")
    kind = c.choice(kinds if parent_is_ground else kinds[:5])
    if kind == "revolute":
        return _Joint("Revolute", _unit(c)), kind
    if kind == "prismatic":
        return _Joint("Prismatic", _unit(c)), kind
    if kind == "universal":
        R = _rpy_matrix(*_rpy(c, False))
        return _Joint("Universal", tuple(R[:, 0]), tuple(R[:, 1])), kind
    return _Joint(kind.capitalize()), kind


def _coordinates(c, kind):
    """Random q* entries of a joint of ``kind``."""
    if kind == "revolute":
        return [c.uniform(-np.pi, np.pi)]
    if kind == "prismatic":
        return [c.uniform(-0.5, 0.5)]
    if kind == "universal":
        return [c.uniform(-np.pi, np.pi), c.uniform(-np.pi, np.pi)]
    if kind == "spherical":
        return list(_quaternion(c))
    if kind == "free":
        return [c.uniform(-1, 1) for _ in range(3)] + list(_quaternion(c))
    return []


def _closure_kwargs(c, kind, planar):
    """Axes of a closure of ``kind`` (orthonormal where several, in frame A)."""
    if kind == "revolute":
        return {} if planar else {"axis": _unit(c)}
    if kind == "prismatic":
        return {"axis": _unit(c, planar)}
    if kind == "universal":
        R = _rpy_matrix(*_rpy(c, False))
        return {"axis": tuple(R[:, 0]), "axis2": tuple(R[:, 1])}
    if kind == "generic":
        R = _rpy_matrix(*_rpy(c, planar))
        axes = [tuple(R[:, k]) for k in range(2 if planar else 3)]
        nt = c.integer(0, len(axes))
        nr = c.integer(0 if nt else 1, 1 if planar else 3)
        rot = [(0.0, 0.0, 1.0)] * nr if planar else [tuple(R[:, (k + 1) % 3]) for k in range(nr)]
        return {"translation_axes": axes[:nt], "rotation_axes": rot}
    return {}


def _swap_equivalent(kind, kwargs, planar):
    """Whether the closure with frames A and B swapped has the same constraint set.

    Rows are written with axes fixed in A.  Swapped, they are fixed in B; the two sets
    agree when the relative rotation is locked (the axes coincide for ever: weld,
    prismatic, a generic with every rotation) or the rows only say "the origins
    coincide" (ball, revolute, a generic with every translation and no rotation);
    the revolute's two rotation rows say "R_AB is a rotation about a", which R_BA
    also is.  A universal's a1_A · a2_B = 0 is not a1_B · a2_A = 0: with both, q* is a
    singular configuration where J q̈ = γ has no solution, not a redundant one.
    """
    if kind in ("ball", "revolute", "prismatic", "weld"):
        return True
    if kind != "generic":
        return False
    nt, nr = len(kwargs["translation_axes"]), len(kwargs["rotation_axes"])
    full_t, full_r = (2, 1) if planar else (3, 3)
    return nr >= full_r or (nt == full_t and nr == 0)


def generate(c, *, min_bodies=3, max_bodies=25, max_closures=5, planar=None, label=None):
    """A random :class:`Mechanism` from the chooser ``c`` (numpy or hypothesis)."""
    planar = c.chance(0.3) if planar is None else planar
    gravity = (0.0, -9.81, 0.0) if planar else (0.0, 0.0, -9.81)
    calls = [("__init__", ("random",), {"gravity": gravity, "planar": planar})]
    n = c.integer(min_bodies, max_bodies)
    bodies, q_parts = [], []
    for i in range(n):
        # mostly chains with some branching; a few more roots
        if i == 0 or c.chance(0.15):
            parent = "ground"
        else:
            parent = bodies[i - 1 - c.integer(0, min(i - 1, 3))]
        joint, kind = _joint(c, planar, parent == "ground")
        mass, com, I = _inertia(c, planar)
        name = f"b{i}"
        kw = {"xyz": _xyz(c, planar), "rpy": _rpy(c, planar), "mass": mass, "com": com}
        kw["inertia"] = I
        calls.append(("add_body", (name, parent, joint), kw))
        bodies.append(name)
        q_parts.append(_coordinates(c, kind))
    tree = _replay(calls)
    q = np.zeros(tree.nq)  # bodies are numbered depth-first, not in the order added
    for name, part in zip(bodies, q_parts, strict=True):
        q[tree.q_slice(name)] = part

    def world(body):
        if body == "ground":
            return np.eye(3), np.zeros(3)
        return ld.frame_placement(tree, q, body)

    kinds = PLANAR_KINDS if planar else SPATIAL_KINDS
    closures = []  # (name, frame_a, frame_b, kind, kwargs, body_a, body_b, xyz_a)

    def add_closure(kind, body_a, body_b, kwargs, xyz_a=None, rpy_a=None, frames=None):
        k = len(closures)
        if frames is None:
            xyz_a = _xyz(c, planar) if xyz_a is None else xyz_a
            rpy_a = _rpy(c, planar) if rpy_a is None else rpy_a
            Ra, pa = world(body_a)
            RA = Ra @ _rpy_matrix(*rpy_a)
            pA = pa + Ra @ np.asarray(xyz_a)
            Rb, pb = world(body_b)
            fa, fb = f"c{k}_a", f"c{k}_b"
            calls.append(("add_frame", (fa, body_a), {"xyz": xyz_a, "rpy": rpy_a}))
            rot_b = Rb.T @ RA
            xyz_b = tuple(float(x) for x in Rb.T @ (pA - pb))
            calls.append(("add_frame", (fb, body_b), {"xyz": xyz_b, "rotation": rot_b.tolist()}))
        else:
            fa, fb = frames
        calls.append(("add_closure", (f"c{k}", fa, fb, kind), kwargs))
        closures.append((f"c{k}", fa, fb, kind, kwargs, body_a, body_b, xyz_a))

    nclos = c.integer(1, max_closures)
    redundancy = c.choice(REDUNDANCIES) if c.chance(0.2) else None
    n_plain = max(1, nclos - (1 if redundancy else 0))
    for _ in range(n_plain):
        body_a = "ground" if c.chance(0.2) else c.choice(bodies)
        body_b = c.choice([b for b in bodies if b != body_a])
        kind = c.choice(kinds)
        add_closure(kind, body_a, body_b, _closure_kwargs(c, kind, planar))
    if redundancy:
        name, fa, fb, kind, kwargs, body_a, body_b, xyz_a = closures[
            c.integer(0, len(closures) - 1)
        ]
        if redundancy == "swapped" and not _swap_equivalent(kind, kwargs, planar):
            redundancy = "duplicate"  # the swapped closure would constrain something else
        if redundancy == "duplicate":
            add_closure(kind, body_a, body_b, kwargs, frames=(fa, fb))
        elif redundancy == "swapped":
            add_closure(kind, body_b, body_a, kwargs, frames=(fb, fa))
        elif kind == "weld":  # implied: anything else between the two welded bodies
            other = c.choice(kinds)
            add_closure(other, body_a, body_b, _closure_kwargs(c, other, planar))
        elif kind in ("ball", "revolute", "universal"):  # the same point, another orientation
            add_closure("revolute" if planar else "ball", body_a, body_b, {}, xyz_a=xyz_a)
        elif kind == "prismatic":  # the relative rotation is already locked
            rot = {"rotation_axes": [(0.0, 0.0, 1.0)] if planar else [_unit(c)]}
            add_closure("generic", body_a, body_b, rot)
        else:  # generic: fall back to a duplicate
            redundancy = "duplicate"
            add_closure(kind, body_a, body_b, kwargs, frames=(fa, fb))
    model = _replay(calls)
    Phi = ld.closure_residual(model, q)
    if np.abs(Phi).max() > 1e-9:  # pragma: no cover - a generator bug, not a library bug
        raise AssertionError(f"generator: Φ(q*) = {np.abs(Phi).max():.3g} is not ~0")
    # a consistent velocity and random joint forces
    v_guess = np.array([c.uniform(-1.0, 1.0) for _ in range(model.nv)]) * 10.0 ** c.uniform(-1, 1)
    tau = np.array([c.uniform(-1.0, 1.0) for _ in range(model.nv)]) * 10.0 ** c.uniform(-1, 2)
    note = None
    try:
        v = ld.complete_velocity(model, q, v_guess, fixed=[])
    except Exception as e:  # recorded: the state is still wanted
        note = f"{type(e).__name__}: {e}"
        _, J, _ = ld.constraints(model, q)
        v = v_guess - np.linalg.pinv(J, rcond=1e-10) @ (J @ v_guess)
    mech = Mechanism(model, q, v, tau, calls, planar, redundancy, label, note)
    return mech


def random_mechanism(seed, **kw):
    """The seeded generator: ``seed`` is anything ``np.random.default_rng`` takes."""
    return generate(_NumpyChooser(np.random.default_rng(seed)), label=seed, **kw)


def mechanisms(**kw):
    """Hypothesis strategy of :class:`Mechanism` (keyword arguments as ``generate``)."""
    from hypothesis import strategies as st

    @st.composite
    def _strategy(draw):
        return generate(_HypothesisChooser(draw), label="hypothesis", **kw)

    return _strategy()


# --------------------------------------------------------------------------- the oracle
class _Gauss:
    """Gauss's principle for M q̈ = f + Jᵀλ, J q̈ = γ, factorized once.

    With M = L Lᵀ, y = Lᵀ q̈, A = J L⁻ᵀ and y₀ = L⁻¹ f, the constrained motion is
    the M-orthogonal projection y = y₀ - A⁺(A y₀ - γ), and λ = (A Aᵀ)⁺(γ - A y₀);
    A⁺ from an SVD truncated at RANK_RTOL·σ₁, so redundant rows add nothing and λ
    is the minimum-norm multiplier.  Equal to the KKT solution of eq. (10) whenever
    that is unique in q̈ (always: M is SPD).
    """

    def __init__(self, M, J):
        import scipy.linalg as sla

        self.sla = sla
        self.L = np.linalg.cholesky(M)
        A = sla.solve_triangular(self.L, J.T, lower=True).T  # J L⁻ᵀ
        U, s, Vt = np.linalg.svd(A, full_matrices=False)
        smax = s[0] if s.size else 0.0
        # and none below the normal range (subnormal rows: ``ld.constraint_rank``'s ABS_FLOOR)
        r = int(np.sum(s > max(RANK_RTOL * smax, np.finfo(float).tiny)))
        self.A, self.U, self.s, self.V = A, U[:, :r], s[:r], Vt[:r]
        self.rank = r
        self.cond = float((s[0] / s[r - 1]) ** 2) if r else 1.0
        self.gap = float(s[r] / smax) if r < s.size and smax > 0 else 0.0

    def solve(self, f, gamma):
        """(q̈, λ) for generalized force f (= τ - h) and bias γ."""
        y0 = self.sla.solve_triangular(self.L, f, lower=True)
        if self.rank:
            w = (self.U.T @ (gamma - self.A @ y0)) / self.s
            y = y0 + self.V.T @ w
            lam = self.U @ (w / self.s)
        else:
            y, lam = y0, np.zeros(self.A.shape[0])
        return self.sla.solve_triangular(self.L.T, y, lower=False), lam


def _refined(M, f, J, gamma, steps=3):
    """(q̈, factorization): Gauss's solve with iterative refinement, the residuals
    of M q̈ - Jᵀλ = f and J q̈ = γ summed in extended precision (np.longdouble), so
    q̈ is exact to float64 round-off for the given M, f, J, γ."""
    g = _Gauss(M, J)
    qdd, lam = g.solve(f, gamma)
    Ml, Jl = M.astype(np.longdouble), J.astype(np.longdouble)
    qx, lx = qdd.astype(np.longdouble), lam.astype(np.longdouble)
    for _ in range(steps):
        r1 = f.astype(np.longdouble) - Ml @ qx + Jl.T @ lx
        r2 = gamma.astype(np.longdouble) - Jl @ qx
        dq, dl = g.solve(r1.astype(float), r2.astype(float))
        qx, lx = qx + dq, lx + dl
    return qx.astype(float), g


@dataclass
class Oracle:
    """The dense reference solution of a state.

    ``qdd`` (nv); ``rank`` of J (numerical, see ``RANK_RTOL``); ``cond`` the condition
    number of J M⁻¹ Jᵀ on its range (σ₁/σ_r of J M^{-1/2}, squared; 1 without rows);
    ``gap`` σ_{r+1}/σ₁ (0 when J has full row rank); ``cond_M``; ``consistent`` whether
    J q̈ = γ holds (to 1e-9 relative) for the least-squares q̈: False at a singular
    configuration where γ leaves the range of J (then the only right answer is a
    ``SingularityError``); ``well`` True when consistent, cond < COND_WELL and the
    dropped directions are clean (gap < GAP_RTOL, and q̈ satisfies every row at the
    row's own scale): then every method must answer; ``scale`` the size of the
    accelerations in the problem, max(|q̈|∞, |M⁻¹(τ - h)|∞, |v|∞², |g|), that errors are
    measured against (q̈ itself is 0 on a rigid structure, the free acceleration is not;
    and where the velocity products or the gravity loads cancel, e.g. a spin about a
    principal axis or a weight on the line of a hinge, h is their round-off, which every
    method sums in its own order: |v|² and |g| are the acceleration scales of those
    terms, as |v|² in the consistency test below); ``noise`` how far q̈ moves (relative
    to ``scale``) when M, h, J, γ are perturbed entry by entry by 1e-15 relative, i.e.
    what the float64 data themselves can resolve (near cond(M) · eps; above 1e-9 only
    for cond(M) ≳ 1e8).
    """

    qdd: np.ndarray
    rank: int
    cond: float
    gap: float
    cond_M: float
    consistent: bool
    well: bool
    scale: float
    noise: float
    M: np.ndarray
    h: np.ndarray
    J: np.ndarray
    gamma: np.ndarray
    tree: np.ndarray | None = None  # ``tree_reference``'s q̈, once ``judge`` needed it


def tree_reference(model, q, v, tau, oracle):
    """q̈ of (q, v, τ) without forming M: for the states whose dense oracle cannot resolve
    REL_TOL (``oracle.noise``: cond(M) · eps above it, e.g. mass ratios of 1e5 on a chain).

    The tree's own recursion, ``ld.aba`` (tested against Pinocchio), works on the masses and
    placements, not on the rounded entries of M: the free accelerations q̈₀ = ABA(q, v, τ)
    of the spanning tree, and U = M⁻¹ Jᵀ column by column as ABA of the rows of J on the
    tree at rest without gravity.  Then (J U) λ = γ - J q̈₀ on J's range (J U = J M⁻¹ Jᵀ,
    its eigenvalues the squared singular values of J M^{-1/2}, truncated at the oracle's
    RANK_RTOL; the residual refined in extended precision) and q̈ = q̈₀ + U λ.  Then the
    equations of motion are refined as evaluated by the RNEA (never M): r = τ + Jᵀλ -
    RNEA(q, v, q̈), corrected by ABA of r at rest without gravity and projected on the
    closures again; ABA's own cancellations between articulated inertias cost up to
    ~1e-7 at mass ratios of 1e5 (hypothesis seed 20261142: 7.1e-8 unrefined, every method
    1e-16 from the refined answer).  The oracle's J and γ (``ld.constraints``: they do not
    go through M).  None if the result does not satisfy J q̈ = γ (to CONSISTENT_RTOL)."""
    J, gamma = oracle.J, oracle.gamma
    bodies, frames = model._specs
    tree = model.spanning_tree()
    still = ld.Model(f"{model.name}_still", bodies, frames, np.zeros(3), model.planar)
    zero = np.zeros(model.nv)
    qx = ld.aba(tree, q, v, tau).astype(np.longdouble)
    lam_all = np.zeros(J.shape[0])
    if J.shape[0]:
        U = np.column_stack([ld.aba(still, q, zero, row) for row in J])
        S = J @ U
        w, X = np.linalg.eigh(0.5 * (S + S.T))
        keep = w > RANK_RTOL**2 * max(w[-1], 1e-300)
        Xk, wk = X[:, keep], w[keep]
        Jl, Ul = J.astype(np.longdouble), U.astype(np.longdouble)
    for step in range(6):
        if step >= 3:  # the equations of motion by the RNEA, corrected by the ABA
            r = tau + J.T @ lam_all - ld.rnea(tree, q, v, qx.astype(float))
            qx = qx + ld.aba(still, q, zero, r).astype(np.longdouble)
        if J.shape[0]:
            r = gamma.astype(np.longdouble) - Jl @ qx
            lam = Xk @ ((Xk.T @ r.astype(float)) / wk)
            qx = qx + Ul @ lam.astype(np.longdouble)
            lam_all = lam_all + lam
    qdd = qx.astype(float)
    cscale = max(np.abs(J).max(initial=0.0) * oracle.scale, np.abs(gamma).max(initial=0.0))
    if np.abs(J @ qdd - gamma).max(initial=0.0) > CONSISTENT_RTOL * max(cscale, 1e-300):
        return None
    return qdd


def dense_oracle(model, q, v, tau, seed=0):
    """The reference q̈ of (q, v, τ) from ``ld.crba``, ``ld.nonlinear_effects`` and
    ``ld.constraints`` only: Gauss's principle (``_Gauss``) with extended-precision
    refinement, its condition numbers and its data noise (``seed``: of the
    perturbations)."""
    M = ld.crba(model, q)
    h = ld.nonlinear_effects(model, q, v)
    _, J, gamma = ld.constraints(model, q, v)
    gamma = np.zeros(0) if gamma is None else gamma
    if model.nv == 0:  # every joint fixed: nothing moves
        e = np.zeros(0)
        return Oracle(e, 0, 1.0, 0.0, 1.0, True, True, 1e-300, 0.0, M, h, J, gamma)
    f = tau - h
    qdd, g = _refined(M, f, J, gamma)
    ev = np.linalg.eigvalsh(M)
    free = np.abs(np.linalg.solve(M, f)).max(initial=0.0)
    vv = np.abs(v).max(initial=0.0) ** 2
    gg = float(np.linalg.norm(model.gravity))
    scale = max(np.abs(qdd).max(initial=0.0), free, vv, gg, 1e-300)
    rng = np.random.default_rng(seed)
    noise = 0.0
    for _ in range(2):

        def jiggle(x, rng=rng):
            return x * (1.0 + 1e-15 * rng.choice((-1.0, 1.0), size=x.shape))

        Mp = jiggle(M)
        Mp = 0.5 * (Mp + Mp.T)
        qp, _ = _refined(Mp, tau - jiggle(h), jiggle(J), jiggle(gamma), steps=1)
        noise = max(noise, float(np.abs(qp - qdd).max(initial=0.0) / scale))
    # the size of J q̈ and γ: velocity products |v|² set γ's round-off where J is ~0
    cscale = max(np.abs(J).max(initial=0.0) * scale, np.abs(gamma).max(initial=0.0), vv)
    consistent = np.abs(J @ qdd - gamma).max(initial=0.0) <= CONSISTENT_RTOL * max(cscale, 1e-300)
    # a clean redundancy: the answer also satisfies every row at the row's own scale (a row
    # of 7.7e-13 of J's scale whose entries are not rounding, seed 20261152, is violated
    # by 1.3 % of its own size: the state is ambiguous, not well conditioned)
    rscale = np.abs(J).max(axis=1, initial=0.0) * scale + np.abs(gamma) + vv
    clean = bool(np.all(np.abs(J @ qdd - gamma) <= CONSISTENT_RTOL * np.maximum(rscale, 1e-300)))
    well = bool(consistent and clean and g.cond < COND_WELL and g.gap < GAP_RTOL)
    return Oracle(
        qdd, g.rank, g.cond, g.gap, float(ev[-1] / ev[0]), bool(consistent), well, scale, noise,
        M, h, J, gamma,
    )  # fmt: skip


def relative_error(qdd, oracle):
    """‖q̈ - q̈_oracle‖∞ / oracle.scale."""
    return float(np.abs(np.asarray(qdd) - oracle.qdd).max(initial=0.0) / oracle.scale)


def residuals(oracle, qdd, tau):
    """(|J q̈ - γ|∞ relative, equations-of-motion residual off the closure forces).

    The second is |P (M q̈ + h - τ)| with P the projector onto the null space of J
    (the part no multiplier can explain), relative to |τ - h| + |M q̈|.
    """
    J, gamma = oracle.J, oracle.gamma
    cscale = max(
        np.abs(J).max(initial=0.0) * np.abs(qdd).max(initial=0.0), np.abs(gamma).max(initial=0.0)
    )
    rc = float(np.abs(J @ qdd - gamma).max(initial=0.0) / max(cscale, 1e-300))
    f = oracle.M @ qdd + oracle.h - tau
    if J.shape[0]:
        _, s, Vt = np.linalg.svd(J, full_matrices=True)
        r = int(np.sum(s > RANK_RTOL * s[0])) if s.size and s[0] > 0 else 0
        N = Vt[r:].T
        f = N @ (N.T @ f)
    escale = np.abs(tau - oracle.h).max(initial=0.0) + np.abs(oracle.M @ qdd).max(initial=0.0)
    return rc, float(np.abs(f).max(initial=0.0) / max(escale, 1e-300))


# --------------------------------------------------------------------------- classification
AGREES, NAMED, SINGULAR_WELL, SILENT, OTHER = (
    "agrees",
    "named error",
    "SingularityError on a well-conditioned case",
    "silent wrong answer",
    "other exception",
)
# ... and an answer exact for the rank the method reports, where that rank is above the
# oracle's and the oracle calls the state ambiguous (``judge``, ``_exact_at_rank``)
EXACT_AT_ITS_RANK = "exact at the method's rank"
# ... and a ModelError of a method for a class of mechanisms (``STRUCTURED``) naming why the
# model is outside it (e.g. DeNOC on a model that is no parallel mechanism)
OUTSIDE = "outside the method's class"
STRUCTURED = ("denoc",)


@dataclass
class Outcome:
    """The verdict on one method at one state: ``kind`` (one of the constants above),
    ``error`` (relative, when q̈ was returned), ``message`` (of an exception),
    ``method`` (the method that answered: ``res.method``, another than the one asked
    for where it fell back; empty without answer)."""

    kind: str
    error: float = np.nan
    message: str = ""
    method: str = ""

    @property
    def ok(self):
        return self.kind in (AGREES, NAMED, EXACT_AT_ITS_RANK, OUTSIDE)


def judge(mech, method, oracle, data=None):
    """Run ``ld.forward_dynamics`` and classify its answer against ``oracle``."""
    try:
        res = ld.forward_dynamics(mech.model, mech.q, mech.v, mech.tau, method=method, data=data)
    except ld.SingularityError as e:
        return Outcome(NAMED if not oracle.well else SINGULAR_WELL, message=str(e))
    except ld.ModelError as e:
        kind = OUTSIDE if method in STRUCTURED else OTHER
        return Outcome(kind, message=f"{type(e).__name__}: {e}")
    except Exception as e:  # classified, not hidden
        return Outcome(OTHER, message=f"{type(e).__name__}: {e}")
    out = classify(mech, res, oracle)
    out.method = res.method
    return out


def classify(mech, res, oracle):
    """The verdict on a returned result ``res`` (``qdd``, ``rank``, ``dropped``)."""
    err = relative_error(res.qdd, oracle)
    if oracle.consistent and err <= REL_TOL:
        return Outcome(AGREES, err)
    if oracle.well and oracle.noise > 0.1 * REL_TOL:
        # the dense oracle cannot resolve REL_TOL here: the tree recursion's reference
        # decides, where the oracle confirms it to its own resolution
        if oracle.tree is None:
            oracle.tree = tree_reference(mech.model, mech.q, mech.v, mech.tau, oracle)
        ref = oracle.tree
        if ref is not None and relative_error(ref, oracle) <= max(REL_TOL, 10.0 * oracle.noise):
            e = float(np.abs(res.qdd - ref).max(initial=0.0) / oracle.scale)
            if e <= REL_TOL:
                why = f"with the tree-recursion reference (the oracle's noise {oracle.noise:.1e})"
                return Outcome(AGREES, e, why)
    if not oracle.well and res.rank >= oracle.rank and _exact_at_rank(oracle, res, mech.tau):
        return Outcome(EXACT_AT_ITS_RANK, err, f"rank {res.rank}, the oracle's {oracle.rank}")
    if not oracle.consistent:  # no q̈ satisfies J q̈ = γ: any answer is wrong
        return Outcome(SILENT, err, "returned an answer where J q̈ = γ has no solution")
    return Outcome(SILENT, err)


def _exact_at_rank(oracle, res, tau):
    """True if ``res`` is the exact answer with ``res.rank`` rows of J kept, where the
    oracle's tolerance (``RANK_RTOL`` on singular values of J M^{-1/2}, rows unscaled)
    keeps fewer: a row of 1e-10 among rows of 1 (a closure 1e-10 m off a hinge) is an
    exact constraint of the model as written, which ``ld.constraint_rank``
    (10 max(m, nv) eps σ_max) keeps and the oracle drops, calling the state ambiguous.
    Also where the ranks are equal but the oracle is ill-conditioned: its float64 solve
    can itself be off (a ball closure 2.2e-13 m off a universal's centre: rows of 1e-13
    and 1e-18, multipliers of 1e16; the oracle 1.6e-6 from the exact answer, which five
    methods return to 1e-22).  The reference: the exact rational solution of the
    oracle's data with the method's rows (``_exact_rational``), which must satisfy every
    row; for systems too large for it, the oracle (Gauss's principle, extended-precision
    refinement) on J's rows equilibrated (each divided by its largest entry: the same
    constraints), which must have that rank and be well conditioned and consistent.
    Then q̈ must agree with it to ``REL_TOL`` of the oracle's scale."""
    J, gamma = oracle.J, oracle.gamma
    qdd = _exact_rational(oracle, res, tau)
    if qdd is not None:
        Js, gs = J, gamma  # the dropped rows must hold too
    else:  # too large for the rational solve
        size = np.abs(J).max(axis=1)
        keep = size > 0
        Js, gs = J[keep] / size[keep, None], gamma[keep] / size[keep]
        qdd, g = _refined(oracle.M, tau - oracle.h, Js, gs)
        if g.rank != res.rank or not g.cond < COND_WELL:
            return False
    cscale = max(oracle.scale, np.abs(qdd).max(initial=0.0)) + np.abs(gs).max(initial=0.0)
    if np.abs(Js @ qdd - gs).max(initial=0.0) > CONSISTENT_RTOL * cscale:
        return False
    return float(np.abs(res.qdd - qdd).max(initial=0.0) / oracle.scale) <= REL_TOL


EXACT_MAX = 60  # unknowns (nv + rows) of the judge's exact rational solve (41 took 1.5 s)


def _exact_rational(oracle, res, tau):
    """q̈ of M q̈ - J_kᵀ λ = τ - h, J_k q̈ = γ_k solved exactly, in rational arithmetic
    (``fractions``) on the oracle's float64 M, h, J, γ, with the rows J_k the method
    kept (all but ``res.dropped``); None if that system is singular or too large
    (``EXACT_MAX``).  No rounding: where two closure rows stay nearly parallel even
    equilibrated (σ_min/σ_max 7e-11) no float64 reference can tell the rank-2 answer
    from rounding, this one can; and where that answer is sensitive to the data's
    rounding, a method's own J differs from the oracle's in the last digits and the
    comparison fails, as it should (the method had to refuse)."""
    from fractions import Fraction

    dropped = set(np.asarray(res.dropped, dtype=int).tolist())
    rows = [a for a in range(oracle.J.shape[0]) if a not in dropped]
    n, r = oracle.M.shape[0], len(rows)
    size = n + r
    if size > EXACT_MAX:
        return None
    f = tau - oracle.h
    A = [[Fraction(0)] * (size + 1) for _ in range(size)]
    for i in range(n):
        A[i][:n] = [Fraction(float(x)) for x in oracle.M[i]]
        A[i][size] = Fraction(float(f[i]))
    for k, a in enumerate(rows):
        row = [Fraction(float(x)) for x in oracle.J[a]]
        A[n + k][:n] = row
        A[n + k][size] = Fraction(float(oracle.gamma[a]))
        for j in range(n):
            A[j][n + k] = -row[j]
    for c in range(size):  # Gauss-Jordan, exact: any non-zero pivot
        p = next((i for i in range(c, size) if A[i][c] != 0), None)
        if p is None:
            return None
        A[c], A[p] = A[p], A[c]
        pivot = A[c][c]
        for i in range(size):
            if i != c and A[i][c] != 0:
                t = A[i][c] / pivot
                A[i] = [x - t * y for x, y in zip(A[i], A[c], strict=True)]
    return np.array([float(A[i][size] / A[i][i]) for i in range(n)])


def perturbed_guess(model, q, rng, radius=0.1, fixed=()):
    """ld.integrate(q, δ) with every δ_i uniform in [-radius, radius] (0 at ``fixed``):
    angles and displacements moved, quaternions rotated on the manifold."""
    d = rng.uniform(-radius, radius, model.nv)
    d[list(fixed)] = 0.0
    return ld.integrate(model, q, d)


def scalar_coordinates(model):
    """Indices into v of revolute, prismatic and universal coordinates (nq_j == nv_j)."""
    out = []
    for i, t in enumerate(model.joint_types):
        if t in ("revolute", "prismatic", "universal"):
            s = model.v_slice(i)
            out.extend(range(s.start, s.stop))
    return np.array(out, dtype=np.int64)


# --------------------------------------------------------------------------- census
ASSEMBLY_TOL = 1e-9  # max |Φ| accepted of an assembled configuration (ld.assemble's own is 1e-12)


# an assembly from a guess near q* longer than this is a failure (issue 37: never minutes)
ASSEMBLY_MAX_S = 10.0


def check_assembly(mech, rng, guesses=2, held=1, radius=0.1, times=None):
    """Failures (list of str) of ``ld.assemble`` from guesses within ``radius`` of q*.

    ``guesses`` guesses with every coordinate free (``fixed=[]``), then ``held``
    guesses holding a random subset of the independent scalar coordinates of
    ``ld.partition(q*)`` at their q* values (so a solution exists for sure: q*).
    A success must return a configuration with max |Φ| <= ASSEMBLY_TOL and the
    held coordinates untouched, and every call must end within ``ASSEMBLY_MAX_S``
    (wall time, appended to ``times`` if given).
    """
    model, q = mech.model, mech.q
    out = []
    plans = [np.zeros(0, dtype=np.int64)] * guesses
    if held:
        ind = np.intersect1d(ld.partition(model, q).independent, scalar_coordinates(model))
        for _ in range(held):
            plans.append(ind[rng.uniform(size=ind.size) < 0.7] if ind.size else ind)
    for fixed in plans:
        guess = perturbed_guess(model, q, rng, radius, fixed)
        t0 = time.perf_counter()
        try:
            qa = ld.assemble(model, guess, fixed=fixed)
        except Exception as e:  # every failure is reported
            err = np.abs(ld.closure_residual(model, guess)).max()
            out.append(f"fixed={fixed.tolist()} guess |Φ|={err:.3g}: {type(e).__name__}: {e}")
            continue
        finally:
            took = time.perf_counter() - t0
            if times is not None:
                times.append(took)
            if took > ASSEMBLY_MAX_S:
                out.append(f"fixed={fixed.tolist()}: took {took:.1f} s > {ASSEMBLY_MAX_S} s")
        res = np.abs(ld.closure_residual(model, qa)).max()
        moved = np.abs(ld.difference(model, guess, qa)[fixed]).max(initial=0.0)
        if not res <= ASSEMBLY_TOL or moved > 1e-12:
            out.append(f"fixed={fixed.tolist()}: returned |Φ|={res:.3g}, held moved by {moved:.3g}")
    return out


def other_state(mech, rng):
    """A different state (q ⊕ δ, |δ| <= 0.1, random v, τ) to dirty a cached workspace."""
    model = mech.model
    return (
        perturbed_guess(model, mech.q, rng, 0.1),
        rng.normal(size=model.nv),
        rng.normal(size=model.nv),
    )


def same_answer(mech, method, oracle, fresh, rng):
    """'' if the model's cached workspace, after a call at another state, gives the
    same answer as a fresh ``model.create_data()`` (``fresh``: its Outcome); else why."""
    q1, v1, t1 = other_state(mech, rng)
    try:
        ld.forward_dynamics(mech.model, q1, v1, t1, method=method)
    except Exception:  # only dirties the workspace; judged elsewhere
        pass
    try:
        cached = ld.forward_dynamics(mech.model, mech.q, mech.v, mech.tau, method=method)
    except ld.SingularityError:
        return "" if fresh.kind in (NAMED, SINGULAR_WELL) else "cached data raised, fresh did not"
    except Exception as e:
        if fresh.kind in (OTHER, OUTSIDE):
            return ""
        return f"cached data raised {type(e).__name__}, fresh did not"
    if fresh.kind in (NAMED, SINGULAR_WELL, OTHER, OUTSIDE):
        return f"fresh data raised ({fresh.kind}), cached returned"
    try:
        res = ld.forward_dynamics(
            mech.model, mech.q, mech.v, mech.tau, method=method, data=mech.model.create_data()
        )
    except ld.LoopdynError as e:  # pragma: no cover - the fresh call just returned
        return f"fresh data raised on the second call: {e}"
    diff = float(np.abs(cached.qdd - res.qdd).max(initial=0.0) / oracle.scale)
    return f"cached and fresh differ by {diff:.3g}" if diff > REL_TOL else ""


def census_case(mech, rng, methods=METHODS, assembly=True):
    """Everything the census records of one mechanism: the oracle's numbers, per method
    the Outcome on fresh data and the cached-vs-fresh verdict, and assembly failures."""
    model = mech.model
    oracle = dense_oracle(model, mech.q, mech.v, mech.tau)
    rec = {
        "oracle": oracle,
        "outcomes": {},
        "cached": {},
        "assembly": [],
        "assembly_s": [],
    }
    for method in methods:
        fresh = judge(mech, method, oracle, data=model.create_data())
        rec["outcomes"][method] = fresh
        rec["cached"][method] = same_answer(mech, method, oracle, fresh, rng)
    if assembly:
        rec["assembly"] = check_assembly(mech, rng, times=rec["assembly_s"])
    return rec


def census(
    n, seed, *, max_bodies=25, assembly=True, methods=METHODS, progress=None, generator=None
):
    """Census records of mechanisms ``random_mechanism((seed, i))`` (or
    ``generator((seed, i))``, e.g. ``parallel_mechanisms.random_parallel_mechanism``),
    i < n: a list of (i, summary, record, redundancy, velocity_note), ``record`` as
    ``census_case`` plus its ``tag``.  ``progress(i)`` is called after each mechanism."""
    out = []
    for i in range(n):
        if generator is None:
            mech = random_mechanism((seed, i), max_bodies=max_bodies)
        else:
            mech = generator((seed, i))
        rng = np.random.default_rng((seed, i, 1))
        rec = census_case(mech, rng, methods=methods, assembly=assembly)
        rec["tag"] = tag(mech, rec["oracle"])
        out.append((i, mech.summary, rec, mech.redundancy, mech.velocity_note))
        if progress is not None:
            progress(i)
    return out


def census_failures(results):
    """Every failure of a census: (case, what) pairs, empty when all is well."""
    bad = []
    for i, _, rec, _, vnote in results:
        for m, o in rec["outcomes"].items():
            if not o.ok:
                bad.append((i, f"{m}: {o.kind} [{rec['tag']}] {o.error:.3g} {o.message[:120]}"))
            if rec["cached"][m]:
                bad.append((i, f"{m}: {rec['cached'][m]}"))
        bad.extend((i, f"assembly: {a[:160]}") for a in rec["assembly"])
        if vnote:
            bad.append((i, f"complete_velocity: {vnote[:160]}"))
    return bad


# --------------------------------------------------------------------------- shrinking
def _rebuild(mech, calls):
    """``mech`` with builder ``calls`` replaced: q, v, τ carried over body by body."""
    old = mech.model
    model = _replay(calls)
    q, v, tau = np.zeros(model.nq), np.zeros(model.nv), np.zeros(model.nv)
    for name in model.body_names:
        q[model.q_slice(name)] = mech.q[old.q_slice(name)]
        v[model.v_slice(name)] = mech.v[old.v_slice(name)]
        tau[model.v_slice(name)] = mech.tau[old.v_slice(name)]
    red = mech.redundancy if model.nc == old.nc else None
    return Mechanism(model, q, v, tau, calls, mech.planar, red, mech.label, mech.velocity_note)


def _candidates(calls):
    """Smaller call lists: one closure (and its now unused frames) or one unused leaf
    body (no children, no frames) removed."""
    closures = [c for c in calls if c[0] == "add_closure"]
    for c in closures:
        rest = [x for x in calls if x is not c]
        used = {f for x in rest if x[0] == "add_closure" for f in x[1][1:3]}
        yield [x for x in rest if x[0] != "add_frame" or x[1][0] in used]
    parents = {x[1][1] for x in calls if x[0] == "add_body"}
    framed = {x[1][1] for x in calls if x[0] == "add_frame"}
    for x in calls:
        if x[0] == "add_body" and x[1][0] not in parents and x[1][0] not in framed:
            yield [y for y in calls if y is not x]


def _round(x, digits=2):
    """x rounded to ``digits`` significant digits."""
    x = float(x)
    return 0.0 if x == 0.0 else float(f"{x:.{digits - 1}e}")


def _simpler(calls):
    """Calls with one body's inertial data made simpler (mass rounded, com at the
    origin, inertia diagonal and rounded): the kinematics, hence q* and v, unchanged."""
    for k, (name, args, kw) in enumerate(calls):
        if name != "add_body":
            continue
        I = np.asarray(kw["inertia"], float)
        options = [
            {"mass": _round(kw["mass"])},
            {"com": (0.0, 0.0, 0.0)},
            {"inertia": tuple(_round(x) for x in (np.diag(I) if I.ndim == 2 else I))},
        ]
        for change in options:
            if all(kw.get(key) == val for key, val in change.items()):
                continue
            yield [*calls[:k], (name, args, {**kw, **change}), *calls[k + 1 :]]


def shrink(mech, still_fails, max_rounds=500):
    """Greedy: drop closures and leaf bodies, then simplify masses, centres of mass,
    inertias and τ, while ``still_fails(mechanism)`` holds.

    Removing a closure keeps q* consistent and v consistent (J loses rows); removing
    an unused leaf body removes coordinates no closure sees; inertial data do not
    enter Φ or J.  Returns the smallest mechanism found (``mech`` itself if nothing
    could go).
    """

    def attempts(m):
        for calls in _candidates(m.calls):
            if any(x[0] == "add_body" for x in calls) and any(x[0] == "add_closure" for x in calls):
                yield lambda calls=calls: _rebuild(m, calls)
        for calls in _simpler(m.calls):
            yield lambda calls=calls: _rebuild(m, calls)
        tau = np.array([_round(x) for x in m.tau])
        if not np.array_equal(tau, m.tau):
            yield lambda: Mechanism(
                m.model, m.q, m.v, tau, m.calls, m.planar, m.redundancy, m.label, m.velocity_note
            )

    for _ in range(max_rounds):
        for make in attempts(mech):
            try:
                smaller = make()
            except ld.LoopdynError:
                continue
            if still_fails(smaller):
                mech = smaller
                break
        else:
            return mech
    return mech


def tag(mech, oracle):
    """A coarse cause of a failure: ``nv=0`` (nothing moves), ``rank 0`` (every closure
    row is zero), ``redundant`` (rank < m) or ``full rank``."""
    if mech.model.nv == 0:
        return "nv=0"
    if not oracle.consistent:
        return "inconsistent"
    if oracle.rank == 0:
        return "rank 0"
    return "redundant" if oracle.rank < mech.model.m else "full rank"
