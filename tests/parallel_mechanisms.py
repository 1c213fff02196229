"""Random parallel mechanisms of the DeNOC class (Saha & Schiehlen, Fig. 3), some near singular.

A mechanism is a fixed base, one moving platform and 2–6 legs (planar or spatial):

- the platform hangs in the spanning tree from leg 1 (the "hanger", tree joints only);
- every other leg is a chain of tree joints and one cut joint (a closure): at the
  platform end (the chain grows from the ground, the closure joins its last body to
  the platform), at the base end (the chain hangs from the platform and closes on a
  ground frame) or in the middle (two chains, one from each end, closed between them);
- leg joints are revolute, prismatic, universal and spherical tree joints and
  revolute, prismatic, universal and ball closures (planar: revolute and prismatic);
  about one mechanism in twenty closes a leg with a weld instead (DeNOC refuses it by
  name); a leg body is sometimes two rigidly joined pieces, the platform sometimes
  carries a welded piece;
- one actuated revolute or prismatic tree joint per leg, a few passive legs (no
  actuator), and sometimes an extra loop through the ground that does not touch the
  platform (the four-bar of the paper's Sec. VI.A: 4 planar or 7 spatial 1-DOF joints);
- the numbers of 1-DOF joints per leg make DOF = number of actuators by Grübler's
  count (Σ_l (f - c_l) = f - n, f = 6 spatial or 3 planar, c_l the leg's 1-DOF joints),
  which generic geometry realises; a draw whose structure check fails (non-generic)
  is drawn again.

Geometry: placements, axes and a configuration q* of the tree are random, then each
closure's frame B is *defined* as frame A's world pose at q* (as in
``tests/mechanisms.py``), so every mechanism assembles exactly at q*, which is also
``model.q0`` (where ``ld.parallel_structure`` checks its ranks).  About one spatial
mechanism in three and one planar in two is brought near a singular pose (``near``): a
joint placed so that, at q*, its axis is within ε = 10^-U(1, 8) of an earlier joint's of
the same chain (coaxial revolute lines or parallel prismatic axes, a revolute line
through a spherical joint's centre; planar: a pivot on or on the line of two earlier
ones, a folded or straight elbow, also by a revolute cut joint), with a joint between
the two (always in the plane, where the chain allows it in space), so the
near-dependence is one of the pose, not of the design.  Depending on which columns
become dependent this is a leg singularity (DeNOC's unactuated joints of a leg nearly
dependent: small δ of eq. 11c), a serial singularity (the actuated twist nearly in
their span) or, through the platform, a parallel one.

Front ends as in ``tests/mechanisms.py``: ``random_parallel_mechanism(seed)`` (numpy)
and the hypothesis strategy ``parallel_mechanisms()``.  The result is a
``mechanisms.Mechanism`` (``code()`` prints a self-contained reproducer) with two more
attributes: ``near`` (the near-singular placement made, or None) and ``weld``.
"""

import numpy as np

import loopdyn as ld
from mechanisms import (
    Mechanism,
    _HypothesisChooser,
    _inertia,
    _Joint,
    _NumpyChooser,
    _replay,
    _rpy,
    _rpy_matrix,
    _unit,
    _vec,
    _xyz,
)

NEAR_MODES_SPATIAL = ("coaxial", "parallel", "through_centre")
NEAR_MODES_PLANAR = ("coincident", "collinear")


def _orthonormal(c):
    R = _rpy_matrix(*_rpy(c, False))
    return tuple(float(x) for x in R[:, 0]), tuple(float(x) for x in R[:, 1])


def _leg_budget(c, planar, max_legs):
    """(legs, extra_loop): per leg (columns, actuated, where), DOF by Grübler's count.

    ``where``: 'hanger' (leg 1), 'end', 'base', 'mid' (the closure's place); each leg's
    columns c_l (1-DOF joints) satisfy Σ_l (f - c_l) = f - n (f = 3 planar, 6 spatial)."""
    f = 3 if planar else 6
    extra = c.chance(0.15)
    L = c.integer(2, max_legs - (1 if extra else 0))
    passive = 1 if (L >= 3 and c.chance(0.2)) else 0
    n_act = min(L - passive, f)
    passive = L - n_act
    W = f - n_act  # constraint wrenches the legs impose on the platform
    acts = [True] * n_act + [False] * passive
    # the hanger: any leg; shuffle which legs are passive (not the hanger, mostly)
    order = list(range(L))
    for i in range(L - 1, 0, -1):
        j = c.integer(0, i)
        order[i], order[j] = order[j], order[i]
    acts = [acts[i] for i in order]
    w = [0] * L
    for _ in range(W):
        # a non-hanger leg needs its actuator (if any) and >= 1 closure column: c >= 2
        ok = [i for i in range(L) if f - w[i] - 1 >= (1 if i == 0 else (2 if acts[i] else 1))]
        if not ok:
            break
        w[c.choice(ok)] += 1
    legs = []
    for i in range(L):
        where = "hanger" if i == 0 else c.choice(("end", "end", "end", "base", "mid"))
        legs.append((f - w[i], acts[i], where))
    return legs, extra


def _split_columns(c, ncols, planar, need_actuator):
    """Tree joint kinds carrying ``ncols`` 1-DOF joints (at least one revolute or prismatic
    if ``need_actuator``), in chain order."""
    kinds = []
    left = ncols
    while left > 0:
        if planar:
            kinds.append(c.choice(("revolute", "revolute", "prismatic")))
            left -= 1
            continue
        opts = ["revolute", "revolute", "prismatic"]
        if left >= 2:
            opts.append("universal")
        if left >= 3:
            opts.append("spherical")
        k = c.choice(opts)
        kinds.append(k)
        left -= {"revolute": 1, "prismatic": 1, "universal": 2, "spherical": 3}[k]
    if need_actuator and not any(k in ("revolute", "prismatic") for k in kinds):
        # replace the first joint by a revolute and the rest of its columns by revolutes
        first = kinds[0]
        extra = {"universal": 1, "spherical": 2}[first]
        kinds = ["revolute"] * (extra + 1) + kinds[1:]
    return kinds


def _closure_kind(c, ncols, planar, weld):
    if weld:
        return "weld"
    if ncols == 1:
        return c.choice(("revolute", "revolute", "prismatic"))
    return "universal" if ncols == 2 else "ball"


def generate(c, *, planar=None, max_legs=6, near=None, label=None, max_tries=20):
    """A random parallel :class:`mechanisms.Mechanism` from the chooser ``c``."""
    last = None
    for _ in range(max_tries):
        mech = _generate(c, planar, max_legs, near, label)
        last = mech
        if mech.weld:
            return mech
        try:
            ld.parallel_structure(mech.model)
        except ld.ModelError:
            continue  # a non-generic draw (e.g. parallel planar sliders): draw again
        return mech
    return last


def _generate(c, planar, max_legs, near, label):
    planar = c.chance(0.35) if planar is None else planar
    gravity = (0.0, -9.81, 0.0) if planar else (0.0, 0.0, -9.81)
    calls = [("__init__", ("parallel",), {"gravity": gravity, "planar": planar})]
    legs, extra_loop = _leg_budget(c, planar, max_legs)
    weld = c.chance(0.05)
    near = c.chance(0.5 if planar else 0.35) if near is None else near
    eps = 10.0 ** -c.uniform(1.0, 8.0) if near else 0.0
    bodies = []  # (name, joint kind)
    q_parts = {}
    actuated = []
    frames = []
    closures = []
    counter = [0]
    st = {"near_done": None}

    def new_name(prefix):
        counter[0] += 1
        return f"{prefix}{counter[0]}"

    def tree_joint(kind):
        if kind == "revolute":
            return _Joint("Revolute", "z" if planar else _unit(c))
        if kind == "prismatic":
            return _Joint("Prismatic", _unit(c, planar))
        if kind == "universal":
            return _Joint("Universal", *_orthonormal(c))
        if kind == "spherical":
            return _Joint("Spherical")
        return _Joint("Fixed")

    def coordinates(kind):
        if kind == "revolute":
            return [c.uniform(-np.pi, np.pi)]
        if kind == "prismatic":
            return [c.uniform(-0.5, 0.5)]
        if kind == "universal":
            return [c.uniform(-np.pi, np.pi), c.uniform(-np.pi, np.pi)]
        if kind == "spherical":
            u = np.array([c.uniform(-1, 1) for _ in range(4)])
            n = np.linalg.norm(u)
            return list(u / n) if n > 0.2 else [1.0, 0.0, 0.0, 0.0]
        return []

    def body_kw(xyz=None, rpy=None):
        mass, com, I = _inertia(c, planar)
        return {
            "xyz": _xyz(c, planar) if xyz is None else xyz,
            "rpy": _rpy(c, planar) if rpy is None else rpy,
            "mass": mass,
            "com": com,
            "inertia": I,
        }

    def add_body(parent, kind, act=False, kw=None, joint=None):
        name = new_name("b")
        kw = body_kw() if kw is None else kw
        if act:
            kw = {**kw, "actuated": True}
            actuated.append(name)
        calls.append(("add_body", (name, parent, tree_joint(kind) if joint is None else joint), kw))
        bodies.append((name, kind))
        q_parts[name] = coordinates(kind)
        if c.chance(0.1):  # a leg body of two rigidly joined pieces
            piece = new_name("b")
            calls.append(("add_body", (piece, name, _Joint("Fixed")), body_kw()))
            bodies.append((piece, "fixed"))
            q_parts[piece] = []
            return piece, name
        return name, name

    def world(tree, q, body):
        if body == "ground":
            return np.eye(3), np.zeros(3)
        return ld.frame_placement(tree, q, body)

    def partial_tree():
        tree = _replay(calls)
        q = np.zeros(tree.nq)
        for name, part in q_parts.items():
            q[tree.q_slice(name)] = part
        return tree, q

    def near_joint(parent, kind, chain):
        """(joint, kw) of a ``kind`` joint on ``parent`` placed near an earlier joint of
        ``chain`` (a list of (joint body, kind), base side first) at q*, or None."""
        cands = [
            (i, b, k)
            for i, (b, k) in enumerate(chain)
            if k in ("revolute", "prismatic", "spherical")
        ]
        if not cands or kind not in ("revolute", "prismatic"):
            return None
        # prefer an earlier joint with another joint in between (a pose, not a design)
        far = [x for x in cands if x[0] < len(chain) - 1]
        i, jb, jk = c.choice(far) if far else cands[-1]
        tree, q = partial_tree()
        Rp, pp = world(tree, q, parent)
        Rj, pj = world(tree, q, jb)  # the joint's child frame: its axis through pj
        ax_local = _joint_axis(calls, jb)
        if planar:
            # a folded or straight elbow: a pose (a joint between), not a zero-length link
            if kind != "revolute" or jk != "revolute" or not far:
                return None
            n = np.array([c.uniform(-1, 1), c.uniform(-1, 1), 0.0])
            n /= max(np.linalg.norm(n), 1e-12)
            mode = c.choice(NEAR_MODES_PLANAR)
            if mode == "collinear" and i + 1 < len(chain) and chain[i + 1][1] == "revolute":
                _, p2 = world(tree, q, chain[i + 1][0])
                t = c.uniform(-1.5, 2.5)
                target = pj + t * (p2 - pj)
                d = p2 - pj
                nn = np.array([-d[1], d[0], 0.0]) / max(np.linalg.norm(d), 1e-12)
                target = target + eps * nn
            else:
                mode = "coincident"
                target = pj + eps * n
            xyz = Rp.T @ (target - pp)
            kw = body_kw(xyz=(float(xyz[0]), float(xyz[1]), 0.0))
            st["near_done"] = f"{mode} pivots, eps={eps:.1e}"
            return _Joint("Revolute", "z"), kw
        n1 = np.array([c.uniform(-1, 1) for _ in range(3)])
        n2 = np.array([c.uniform(-1, 1) for _ in range(3)])
        if jk == "spherical":
            if kind != "revolute":
                return None
            mode = "through_centre"
            a = np.array(_unit_vec(c))
            point = pj + eps * n1
        else:
            a = Rj @ ax_local
            if jk != kind:
                return None
            mode = "coaxial" if kind == "revolute" else "parallel"
            point = pj + c.uniform(-0.5, 0.5) * a + eps * n1
            a = a + eps * n2
        a /= np.linalg.norm(a)
        axis_local = Rp.T @ a
        xyz = Rp.T @ (point - pp) if kind == "revolute" else _xyz(c, planar)
        kw = body_kw(xyz=tuple(float(x) for x in xyz), rpy=(0.0, 0.0, 0.0))
        joint = _Joint(kind.capitalize(), tuple(float(x) for x in axis_local))
        st["near_done"] = f"{mode} axes, eps={eps:.1e}"
        return joint, kw

    def chain(parent, kinds, act_at, near_here):
        """Tree joints ``kinds`` from ``parent``; returns (last body, [(body, kind)])."""
        made = []
        cur = parent
        for j, kind in enumerate(kinds):
            joint = kw = None
            if near_here and st["near_done"] is None and made and c.chance(0.6):
                nj = near_joint(cur, kind, made)
                if nj is not None:
                    joint, kw = nj
            cur, jb = add_body(cur, kind, act=(j == act_at), kw=kw, joint=joint)
            made.append((jb, kind))
        return cur, made

    def actuator_index(kinds):
        one = [j for j, k in enumerate(kinds) if k in ("revolute", "prismatic")]
        return c.choice(one) if one else -1

    # leg 1: the hanger, carrying the platform
    ncols, act, _ = legs[0]
    kinds = _split_columns(c, ncols, planar, act)
    # the hanger's last joint carries the platform: its body (pieces) is the platform
    platform, _ = chain("ground", kinds, actuator_index(kinds) if act else -1, near)
    if c.chance(0.15):  # a welded piece on the platform
        piece = new_name("b")
        calls.append(("add_body", (piece, platform, _Joint("Fixed")), body_kw()))
        q_parts[piece] = []

    def add_closure(kind, body_a, body_b, chain_a=()):
        """A closure between frames at random places on ``body_a`` and ``body_b`` (frame B
        where frame A is at q*); planar and near: a revolute cut joint on the end of chain
        ``chain_a`` may be placed with its pivot near the line of, or on, the chain's last
        two pivots (a straight or folded elbow of the leg)."""
        k = len(closures)
        tree, q = partial_tree()
        xyz_a, rpy_a = _xyz(c, planar), _rpy(c, planar)
        Ra, pa = world(tree, q, body_a)
        pivots = [b for b, kd in chain_a if kd == "revolute"][-2:]
        if (
            planar and near and st["near_done"] is None and kind == "revolute"
            and len(pivots) == 2 and c.chance(0.6)
        ):  # fmt: skip
            p1, p2 = world(tree, q, pivots[0])[1], world(tree, q, pivots[1])[1]
            d = p2 - p1
            nn = np.array([-d[1], d[0], 0.0]) / max(np.linalg.norm(d), 1e-12)
            if c.chance(0.5):
                mode, target = "collinear", p1 + c.uniform(-1.5, 2.5) * d + eps * nn
            else:
                mode, target = "coincident", p1 + eps * nn
            x = Ra.T @ (target - pa)
            xyz_a = (float(x[0]), float(x[1]), 0.0)
            st["near_done"] = f"{mode} pivots (cut joint), eps={eps:.1e}"
        RA = Ra @ _rpy_matrix(*rpy_a)
        pA = pa + Ra @ np.asarray(xyz_a)
        Rb, pb = world(tree, q, body_b)
        fa, fb = f"c{k}_a", f"c{k}_b"
        calls.append(("add_frame", (fa, body_a), {"xyz": xyz_a, "rpy": rpy_a}))
        xyz_b = tuple(float(x) for x in Rb.T @ (pA - pb))
        calls.append(("add_frame", (fb, body_b), {"xyz": xyz_b, "rotation": (Rb.T @ RA).tolist()}))
        kwargs = {}
        if kind == "revolute" and not planar:
            kwargs = {"axis": _unit(c)}
        elif kind == "prismatic":
            kwargs = {"axis": _unit(c, planar)}
        elif kind == "universal":
            a1, a2 = _orthonormal(c)
            kwargs = {"axis": a1, "axis2": a2}
        calls.append(("add_closure", (f"c{k}", fa, fb, kind), kwargs))
        closures.append(kind)
        frames.append((fa, fb))

    weld_leg = c.integer(1, len(legs) - 1) if weld else -1
    for li in range(1, len(legs)):
        ncols, act, where = legs[li]
        is_weld = li == weld_leg
        if is_weld:
            where = "end"
            ccols = 0
        else:
            ccols = c.integer(1, min(3 if not planar else 1, ncols - (1 if act else 0)))
        kind = _closure_kind(c, ccols, planar, is_weld)
        kinds = _split_columns(c, ncols - ccols, planar, act) if ncols - ccols > 0 else []
        a_at = actuator_index(kinds) if act else -1
        here = near
        if where == "end" or not kinds:
            end, made = chain("ground", kinds, a_at, here)
            add_closure(kind, end, platform, made)
        elif where == "base":
            # the chain hangs from the platform (its joints in reverse leg order)
            end, made = chain(platform, kinds, a_at, here)
            add_closure(kind, end, "ground", made)
        else:
            cut = c.integer(1, len(kinds)) if len(kinds) > 1 else 1
            lo, hi = kinds[:cut], kinds[cut:]
            end1, _ = chain("ground", lo, a_at if a_at < cut else -1, here)
            end2, _ = chain(platform, hi, a_at - cut if a_at >= cut else -1, here)
            add_closure(kind, end1, end2 if hi else platform)
    if extra_loop:
        # a loop through the ground beside the platform: f + 1 one-DOF joints, one actuated
        f = 3 if planar else 6
        ccols = 1 if planar else c.integer(1, 3)
        kinds = _split_columns(c, f + 1 - ccols, planar, True)
        end, made = chain("ground", kinds, actuator_index(kinds), near)
        add_closure(_closure_kind(c, ccols, planar, False), end, "ground", made)
    model = _replay(calls)
    q = np.zeros(model.nq)
    for name, part in q_parts.items():
        q[model.q_slice(name)] = part
    calls.append(("set_q0", (q.tolist(),), {}))
    model = _replay(calls)
    Phi = ld.closure_residual(model, q)
    if np.abs(Phi).max() > 1e-9:  # pragma: no cover - a generator bug
        raise AssertionError(f"generator: Φ(q*) = {np.abs(Phi).max():.3g} is not ~0")
    v_guess = np.array([c.uniform(-1.0, 1.0) for _ in range(model.nv)]) * 10.0 ** c.uniform(-1, 1)
    tau = np.array([c.uniform(-1.0, 1.0) for _ in range(model.nv)]) * 10.0 ** c.uniform(-1, 2)
    note = None
    try:
        v = ld.complete_velocity(model, q, v_guess, fixed=[])
    except Exception as e:  # recorded: the state is still wanted
        note = f"{type(e).__name__}: {e}"
        _, J, _ = ld.constraints(model, q)
        v = v_guess - np.linalg.pinv(J, rcond=1e-10) @ (J @ v_guess)
    mech = Mechanism(model, q, v, tau, calls, planar, None, label, note)
    mech.near = st["near_done"]
    mech.weld = weld
    return mech


def _unit_vec(c):
    for _ in range(10):
        u = np.array([c.uniform(-1, 1) for _ in range(3)])
        n = np.linalg.norm(u)
        if n > 0.2:
            return u / n
    return np.array([1.0, 0.0, 0.0])


def _joint_axis(calls, body):
    """The axis (child frame) of the revolute or prismatic joint of ``body`` as recorded."""
    for name, args, _ in calls:
        if name == "add_body" and args[0] == body:
            j = args[2]
            if j.cls in ("Revolute", "Prismatic"):
                return _vec(j.args[0]) / np.linalg.norm(_vec(j.args[0]))
            return np.array([0.0, 0.0, 1.0])
    raise KeyError(body)  # pragma: no cover


def random_parallel_mechanism(seed, **kw):
    """The seeded generator: ``seed`` is anything ``np.random.default_rng`` takes."""
    return generate(_NumpyChooser(np.random.default_rng(seed)), label=seed, **kw)


def parallel_mechanisms(**kw):
    """Hypothesis strategy of random parallel mechanisms (keyword arguments as ``generate``)."""
    from hypothesis import strategies as st

    @st.composite
    def _strategy(draw):
        return generate(_HypothesisChooser(draw), label="hypothesis", **kw)

    return _strategy()
