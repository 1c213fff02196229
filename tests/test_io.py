"""Models in and out of files (loopdyn.io): URDF, SDFormat, MJCF, native TOML.

Real files: every URDF of example-robot-data against Pinocchio's own URDF parser;
every Cassie SDFormat variant (assembled standing, closures of full rank, every
method against ``augmented``, ``pin.constraintDynamics`` where Pinocchio can
express the closures).  Hand-written files in tests/data/io for the loop elements
(URDF+ ``<loop>``, ``<drake:ball_constraint>``, MJCF equalities, SDFormat frames,
nested models, includes, gearbox), and the native format's exact round trip.
"""

import glob
import json
import os
import tomllib
from pathlib import Path

import numpy as np
import pytest

import loopdyn as ld
from closed_helpers import erd_root
from loopdyn.io import native
from loopdyn.methods.dynamics import GENERAL_METHODS as METHODS

DATA = Path(__file__).parent / "data" / "io"

try:
    import example_robot_data  # noqa: F401  (the cmeel package has no Python module)
except ImportError:  # pragma: no cover
    pass


_KERNEL_ARRAYS = ("topo", "jgeom", "inertia", "gravity", "cl_body", "cl_X", "row_int", "row_vec")


def _same_arrays(a, b):
    """The two models hand the kernels the same arrays, bit for bit."""
    return all(np.array_equal(getattr(a, n), getattr(b, n)) for n in _KERNEL_ARRAYS)


ERD = erd_root()
URDFS = sorted(glob.glob(str(ERD / "**" / "*.urdf"), recursive=True)) if ERD else []
CASSIE = sorted(glob.glob(str(ERD / "cassie_description" / "robots" / "*.sdf"))) if ERD else []
needs_erd = pytest.mark.skipif(not URDFS, reason="example-robot-data is not installed")


def _close(a, b, tol):
    """|a - b| <= tol · max(1, |b|)."""
    a, b = np.asarray(a), np.asarray(b)
    scale = max(1.0, float(np.abs(b).max())) if b.size else 1.0
    return float(np.abs(a - b).max() if a.size else 0.0) <= tol * scale


# =========================================================================== URDF
def _pin_layout(model, pm):
    """(pin q of a loopdyn q, v index map) matching joints by name (metadata renames)."""
    renamed = {v: k for k, v in model.metadata["renamed"].items()}
    qparts, vmap = [], np.zeros(model.nv, dtype=np.int64)
    for i, jn in enumerate(model.joint_names):
        t = model.topo[i]
        jt, iq, iv, nq, nv = (int(x) for x in t[1:6])
        J = pm.joints[pm.getJointId(renamed.get(jn, jn))]
        qparts.append((jt, iq, nq, J.idx_q, J.nq))
        if jt == 5:  # free: [ω; v] -> pin [v; ω]
            vmap[iv : iv + 6] = [
                J.idx_v + 3,
                J.idx_v + 4,
                J.idx_v + 5,
                *range(J.idx_v, J.idx_v + 3),
            ]
        else:
            vmap[iv : iv + nv] = range(J.idx_v, J.idx_v + nv)

    def qpin(q):
        import pinocchio as pin

        out = pin.neutral(pm)
        for jt, iq, nq, pq, pnq in qparts:
            if jt == 5:
                w, x, y, z = q[iq + 3 : iq + 7]
                out[pq : pq + 7] = [*q[iq : iq + 3], x, y, z, w]
            elif pnq == 2 and nq == 1:  # continuous joint: (cos, sin)
                out[pq : pq + 2] = [np.cos(q[iq]), np.sin(q[iq])]
            else:
                out[pq : pq + nq] = q[iq : iq + nq]
        return out

    return qpin, vmap


def _regularize_pin(model, pm):
    """Give Pinocchio's bodies the regularising masses loopdyn's reader added."""
    import pinocchio as pin

    for body, reg in model.metadata["regularized"].items():
        i = model.body_index(body)
        jid = pm.getJointId(model.joint_names[i])
        I = pm.inertias[jid]
        c = I.lever if I.mass > 0 else np.asarray(reg.get("com", np.zeros(3)))
        extra = pin.Inertia(reg["mass"], c, np.eye(3) * reg["inertia"])
        pm.inertias[jid] = I + extra


def _triangle_violations(pm):
    bad = []
    for k in range(1, pm.njoints):
        ev = np.linalg.eigvalsh(pm.inertias[k].inertia)
        if ev[0] + ev[1] < ev[2] * (1 - 1e-9):
            bad.append(pm.names[k])
    return bad


@needs_erd
@pytest.mark.parametrize("path", URDFS, ids=lambda p: os.path.relpath(p, ERD) if ERD else p)
def test_urdf_matches_pinocchio(path):
    """aba, rnea and crba of every example-robot-data URDF equal Pinocchio's own parse."""
    import pinocchio as pin

    for floating in (False, True):
        try:
            pm = (pin.buildModelFromUrdf(path, pin.JointModelFreeFlyer()) if floating
                  else pin.buildModelFromUrdf(path))  # fmt: skip
        except ValueError:  # not a model (an empty <robot>): loopdyn must refuse it too
            with pytest.raises(ld.ModelError, match=Path(path).name):
                ld.load(path, floating_base=floating)
            return
        kw = {"floating_base": floating, "couplings": "ignore"}
        try:
            model = ld.load(path, **kw)
        except ld.ModelError as e:
            msg = str(e)
            assert Path(path).name in msg and " line " in msg
            if "triangle inequality" in msg:
                # a non-physical inertia in the file, which loopdyn's builder refuses
                assert _triangle_violations(pm), msg
                return
            assert "no mass" in msg or "singular rotational inertia" in msg, msg
            model = ld.load(path, massless=1e-6, **kw)
            _regularize_pin(model, pm)
        assert model.nv == pm.nv
        qpin, vmap = _pin_layout(model, pm)
        pd = pm.createData()
        rng = np.random.default_rng(0)
        for _ in range(2):
            q = model.random_configuration(rng, scale=1.0)
            v, a, tau = (rng.normal(size=model.nv) for _ in range(3))
            vp, ap, tp = np.zeros(pm.nv), np.zeros(pm.nv), np.zeros(pm.nv)
            vp[vmap], ap[vmap], tp[vmap] = v, a, tau
            qp = qpin(q)
            assert _close(ld.rnea(model, q, v, a), pin.rnea(pm, pd, qp, vp, ap)[vmap], 1e-10)
            M = pin.crba(pm, pd, qp)
            M = np.triu(M) + np.triu(M, 1).T
            assert _close(ld.crba(model, q), M[np.ix_(vmap, vmap)], 1e-10)
            assert _close(ld.aba(model, q, v, tau), pin.aba(pm, pd, qp, vp, tp)[vmap], 1e-10)


@needs_erd
def test_urdf_metadata_limits_meshes_and_mimic():
    path = str(ERD / "panda_description" / "urdf" / "panda.urdf")
    model = ld.load(path, couplings="ignore", package_dirs=[ERD.parent.parent])
    md = model.metadata
    assert md["format"] == "urdf" and md["file"] == path
    assert md["limits"]["panda_joint1"]["upper"] == pytest.approx(2.8973)
    meshes = [g for g in md["geometry"] if g.get("type") == "mesh"]
    assert meshes and all(g["uri"].startswith("package://") for g in meshes)
    # package://example-robot-data/robots/... resolves under the share/ root given
    assert any(g["path"] and Path(g["path"]).is_file() for g in meshes)
    (mimic,) = md["couplings"]
    assert mimic["joint_b"] == "panda_finger_joint2" and mimic["joint_a"] == "panda_finger_joint1"
    # without a coupling closure in the builder, mimic is an error naming the joint
    if not hasattr(ld.ModelBuilder, "add_coupling"):
        with pytest.raises(
            ld.ModelError,
            match=r"panda\.urdf line \d+, mimic joint "
            r"'panda_finger_joint2'.*add_coupling",
        ):
            ld.load(path)
    # the same file without package_dirs: meshes unresolved, the load still succeeds
    model = ld.load(path, couplings="ignore")
    assert all(g["path"] is None for g in model.metadata["geometry"] if g.get("type") == "mesh")


def test_urdf_plus_loop_four_bar_matches_catalog():
    """The URDF+ ``<loop>`` four-bar equals ld.examples.four_bar (same q̈)."""
    ref = ld.examples.four_bar()
    for planar in (True, False):
        model = ld.load(DATA / "four_bar_loop.urdf", planar=planar, gravity=(0, -9.81, 0))
        assert model.joint_names == ref.joint_names
        # in 3D the planar loop's revolute closure keeps its 2 independent rows only
        assert model.closure_kinds == (("revolute",) if planar else ("generic",))
        assert model.m == 2
        assert list(model.actuated) == [0]  # the <transmission>
        assert model.metadata["independent"] == {"rocker": False}
        rng = np.random.default_rng(3)
        for _ in range(3):
            q = ld.assemble(ref, ref.q0 + np.array([rng.normal(scale=0.3), 0, 0]))
            v = ld.complete_velocity(ref, q, [rng.normal(), 0, 0])
            tau = rng.normal(size=3)
            a = ld.forward_dynamics(ref, q, v, tau).qdd
            b = ld.forward_dynamics(model, q, v, tau).qdd
            assert _close(b, a, 1e-10)


def test_drake_ball_constraint_and_planar_floating_joints():
    model = ld.load(DATA / "drake_ball.urdf")
    assert model.closure_kinds == ("ball",)
    q = model.q0
    assert np.abs(ld.closure_residual(model, q)).max() < 1e-12
    v = ld.complete_velocity(model, q, np.ones(model.nv), fixed=[])
    r = ld.forward_dynamics(model, q, v, np.zeros(model.nv))
    assert np.isfinite(r.qdd).all()

    # planar joint -> prismatic, prismatic, revolute; floating joint -> free joint
    model = ld.load(DATA / "planar.urdf")
    assert model.joint_types == ("prismatic", "prismatic", "revolute", "free")
    assert model.metadata["planar_joints"]["slide"] == ["slide_x", "slide_y", "slide_theta"]
    q = model.neutral()
    tau = np.zeros(model.nv)
    tau[:3] = [1.0, -2.0, 0.5]
    # puck + flyer translate together; compare with the rigid equivalent (flyer at rest
    # relative to the puck is not a constraint, so use the puck alone: flyer gets g)
    qdd = ld.aba(model, q, np.zeros(model.nv), tau)
    assert np.isfinite(qdd).all()
    # the planar block of M of the puck: its mass on the two slides (+ the flyer coupling)
    M = ld.crba(model, q)
    M_total = 2.0 + 0.5  # puck + flyer translate with the slides
    assert M[0, 0] == pytest.approx(M_total, rel=1e-8)
    assert M[1, 1] == pytest.approx(M_total, rel=1e-8)
    assert model.metadata["regularized"]  # the two intermediate bodies (1e-9 of the puck)


# =========================================================================== SDFormat
CUT_AT_BALLS = ("left-pitch-rod-joint", "right-pitch-rod-joint")


def _cassie(path, **kw):
    """Cassie with the pushrod loops cut at their ball joints (Pinocchio can express
    those closures), every variant with its own couplings left independent."""
    base = Path(path).name
    cut = CUT_AT_BALLS if base in ("cassie_simple.sdf", "cassie_wo_gearbox_spring.sdf") else ()
    return ld.load(path, couplings="ignore", cut_joints=cut, **kw)


@needs_erd
@pytest.mark.parametrize("path", CASSIE, ids=lambda p: Path(p).name)
def test_cassie_loads_assembles_full_rank_and_methods_agree(path):
    import pinocchio as pin

    from loopdyn.interop.pinocchio import PinocchioExport

    if Path(path).name == "cassie.sdf":
        pytest.skip("spring loops and rotors: test_cassie_with_rotors_and_gearboxes")
    model = _cassie(path)
    assert model.joint_types[0] in ("free", "prismatic")  # floating or slider pelvis
    assert model.nc == 4 and model.metadata["assembly"]["assembled"]
    # standing: the file's reference pose, assembled; the pelvis stays above the feet
    q = ld.assemble(model, model.q0, fixed=[])
    _, p_pelvis = ld.frame_placement(model, q, "pelvis")
    _, p_foot = ld.frame_placement(model, q, "left-foot")
    assert p_pelvis[2] - p_foot[2] > 0.7
    # closures of full rank, here and at nearby assembled poses (no singular standing pose)
    info = ld.constraint_rank(model, q)
    assert info.rank == model.m and info.condition < 1e6
    rng = np.random.default_rng(7)
    for _ in range(2):
        qn = ld.assemble(model, ld.integrate(model, q, 0.02 * rng.normal(size=model.nv), 1.0),
                         fixed=[])  # fmt: skip
        assert ld.constraint_rank(model, qn).rank == model.m
    v = ld.complete_velocity(model, q, rng.normal(size=model.nv), fixed=[])
    tau = rng.normal(size=model.nv)
    ref = ld.forward_dynamics(model, q, v, tau, method="augmented")
    _, J, gamma = ld.constraints(model, q, v)
    assert _close(J @ ref.qdd, gamma, 1e-9)
    for method in METHODS:
        if method == "denoc":  # parallel mechanisms only: it must say why not
            with pytest.raises(ld.ModelError, match="not a parallel mechanism of the DeNOC"):
                ld.forward_dynamics(model, q, v, tau, method=method)
            continue
        assert _close(ld.forward_dynamics(model, q, v, tau, method=method).qdd, ref.qdd, 1e-10), (
            method
        )
    # Pinocchio on the file's own closures (all balls here; redundant rows are fine for
    # its proximal solver), with StdVec containers
    file_model = _cassie(path, closures="as_file")
    exp = PinocchioExport(file_model)
    assert not exp.unexported and set(file_model.closure_kinds) == {"ball"}
    cms = pin.StdVec_RigidConstraintModel()
    for c in exp.constraints:
        cms.append(c)
    cds = pin.StdVec_RigidConstraintData()
    for c in exp.constraints:
        cds.append(c.createData())
    pd = exp.model.createData()
    pin.initConstraintDynamics(exp.model, pd, cms, cds)
    prox = pin.ProximalSettings(1e-14, 1e-8, 20)
    a = pin.constraintDynamics(exp.model, pd, exp.q(q), exp.v(v), exp.v(tau), cms, cds, prox)
    assert _close(exp.v_from(a), ref.qdd, 1e-8)


@needs_erd
def test_cassie_with_rotors_and_gearboxes(tmp_path):
    """cassie.sdf in full: rotor reference links on gearbox couplings, spring loops.
    Two links' inertias break the triangle inequality: refused by default with the
    option named, accepted and listed on request.  Ill-conditioned (M ~1e7, the closure
    rows ~1e6): every method still matches the dense solve, SLM and recursive_lambda
    by iterative refinement, and the model survives the native format."""
    path = str(ERD / "cassie_description" / "robots" / "cassie.sdf")
    with pytest.raises(ld.ModelError, match=r"triangle inequality.*nonphysical_inertia='accept'"):
        ld.load(path)
    model = ld.load(path, nonphysical_inertia="accept")
    odd = model.metadata["nonphysical_inertia"]
    assert odd and all("reference" in b for b in odd)
    couplings = [k for k in model.closure_kinds if k == "coupling"]
    assert len(couplings) == 10 and model.metadata["assembly"]["assembled"]
    q = model.q0
    info = ld.constraint_rank(model, q)
    assert info.rank < model.m and info.condition > 1e5  # redundant rows, ill-conditioned
    rng = np.random.default_rng(3)
    v = ld.complete_velocity(model, q, rng.normal(size=model.nv), fixed=[])
    tau = rng.normal(size=model.nv)
    ref = ld.forward_dynamics(model, q, v, tau, method="augmented")
    _, J, gamma = ld.constraints(model, q, v)
    assert _close(J @ ref.qdd, gamma, 1e-10)
    for method in METHODS:
        got = ld.forward_dynamics(model, q, v, tau, method=method)
        assert _close(got.qdd, ref.qdd, 1e-10), method
    ld.io.save(model, tmp_path / "cassie.toml")
    assert "physical = false" in (tmp_path / "cassie.toml").read_text()
    back = ld.load(tmp_path / "cassie.toml")
    assert _close(ld.forward_dynamics(back, q, v, tau).qdd, ref.qdd, 1e-12)


@needs_erd
def test_cassie_default_spanning_tree_and_reduced_closures():
    """The file's own order: cut where a link gets its second parent joint; the planar
    plantar four-bar closed by a ball keeps its two in-plane rows only."""
    path = str(ERD / "cassie_description" / "robots" / "cassie_wo_gearbox_spring.sdf")
    model = ld.load(path)
    md = model.metadata
    assert set(md["cut_joints"]) == {
        "left-achilles-spring-joint", "right-achilles-spring-joint",
        "left-plantar-foot-joint", "right-plantar-foot-joint",
    }  # fmt: skip
    assert model.closure_kinds == ("revolute", "generic", "revolute", "generic")
    assert md["reduced_closures"]["left-plantar-foot-joint"]["from"] == "ball"
    as_file = ld.load(path, closures="as_file")
    assert as_file.m == model.m + 2
    q = model.q0
    assert ld.constraint_rank(model, q).rank == model.m
    assert ld.constraint_rank(as_file, q).rank == model.m  # the two dropped rows: zero
    rng = np.random.default_rng(2)
    v = ld.complete_velocity(model, q, rng.normal(size=model.nv), fixed=[])
    tau = rng.normal(size=model.nv)
    ref = ld.forward_dynamics(model, q, v, tau).qdd
    for method in ("slm", "recursive_lambda"):
        assert _close(ld.forward_dynamics(model, q, v, tau, method=method).qdd, ref, 1e-10)
    # tree_joints overrides the order: the pushrod ball becomes the cut
    other = ld.load(path, tree_joints=("left-achilles-spring-joint",))
    assert "left-achilles-spring-joint" not in other.metadata["cut_joints"]


def test_sdf_features_frames_nested_include():
    model = ld.load(DATA / "features.sdf", package_dirs=[DATA / "models"])
    assert model.body_names == ("arm", "tool::tip", "grip::finger")
    assert model.joint_types == ("revolute", "universal", "revolute")
    q = model.q0
    R, p = ld.frame_placement(model, q, "mount")
    assert np.allclose(p, [1, 0.2, 0.5]) and np.allclose(R[:, 0], [0, 1, 0], atol=1e-12)
    assert np.allclose(ld.frame_placement(model, q, "tool::tcp")[1], [1, 0.9, 0.6])
    R, p = ld.frame_placement(model, q, "tool::flag")  # quat_xyzw pose: 90° more about z
    assert np.allclose(p, [1, 0.9, 0.55]) and np.allclose(R[:, 0], [-1, 0, 0], atol=1e-12)
    assert np.allclose(ld.frame_placement(model, q, "grip::finger")[1], [1, 0.9, 0.75])
    # the hinge axis was given in the model frame: world z
    J = ld.frame_jacobian(model, q, "arm")
    assert np.allclose(J[:3, 0], [0, 0, 1])
    assert model.metadata["limits"]["hinge"] == {"lower": -1.0, "upper": 1.0}
    assert model.metadata["links"]["base"]["body"] == "ground"
    # the include needs its root
    with pytest.raises(ld.ModelError, match=r"features\.sdf line \d+, include: cannot resolve"):
        ld.load(DATA / "features.sdf")


def test_sdf_loop_of_ordinary_joints_matches_catalog_four_bar():
    """A four-bar written as SDFormat links posed at the catalog's q0 and four revolute
    joints: the fourth closes the loop and becomes a (planar) revolute closure."""
    ref = ld.examples.four_bar()
    q0 = np.asarray(ref.q0)
    poses = {b: ld.frame_placement(ref, q0, b) for b in ref.body_names}

    def pose(b):
        R, p = poses[b]
        yaw = np.arctan2(R[1, 0], R[0, 0])
        return " ".join(repr(float(x)) for x in (*p, 0, 0, yaw))

    inert = {
        "crank": (0.15, 1.5, "1.35e-5", 0.01125),
        "coupler": (0.5, 5.0, "5e-4", 0.4166666666666667),
        "rocker": (0.3, 3.0, "1.08e-4", 0.09),
    }
    links = "".join(
        f"<link name='{b}'><pose>{pose(b)}</pose><inertial><pose>{c} 0 0 0 0 0</pose>"
        f"<mass>{m}</mass><inertia><ixx>{ix}</ixx><iyy>{iy}</iyy><izz>{iy}</izz></inertia>"
        "</inertial></link>"
        for b, (c, m, ix, iy) in inert.items()
    )
    joints = (
        "<joint name='crank_joint' type='revolute'><parent>world</parent><child>crank</child>"
        "<axis><xyz>0 0 1</xyz></axis></joint>"
        "<joint name='coupler_joint' type='revolute'><parent>crank</parent><child>coupler</child>"
        "<axis><xyz>0 0 1</xyz></axis></joint>"
        "<joint name='rocker_joint' type='revolute'><parent>world</parent><child>rocker</child>"
        "<axis><xyz>0 0 1</xyz></axis></joint>"
        "<joint name='pin' type='revolute'><pose relative_to='rocker'>0.6 0 0 0 0 0</pose>"
        "<parent>coupler</parent><child>rocker</child><axis><xyz>0 0 1</xyz></axis></joint>"
    )
    text = (f"<sdf version='1.8'><world name='w'><gravity>0 -9.81 0</gravity>"
            f"<model name='four_bar'>{links}{joints}</model></world></sdf>")  # fmt: skip
    model = ld.io.loads(text, "sdf", name="four_bar.sdf", planar=True)
    assert model.metadata["cut_joints"] == {"pin": "pin"}
    assert model.joint_names == ("crank_joint", "coupler_joint", "rocker_joint")
    assert model.closure_kinds == ("revolute",)
    rng = np.random.default_rng(5)
    for _ in range(3):
        q = ld.assemble(ref, q0 + np.array([rng.normal(scale=0.2), 0, 0]))
        v = ld.complete_velocity(ref, q, [rng.normal(), 0, 0])
        tau = rng.normal(size=3)
        a = ld.forward_dynamics(ref, q, v, tau).qdd
        b = ld.forward_dynamics(model, q - q0, v, tau).qdd  # SDF q = 0 at the catalog q0
        assert _close(b, a, 1e-10)


def test_sdf_joints_traversed_child_to_parent():
    """A joint whose file parent is the moving link: the tree runs it backwards (axis
    reversed, same coordinate), so the model equals the forward file with q → −q."""

    def sdf(parent, child, jtype, axes=("0.3 0.4 1",)):
        axis = f"<axis><xyz>{axes[0]}</xyz></axis>"
        if len(axes) > 1:
            axis += f"<axis2><xyz>{axes[1]}</xyz></axis2>"
        return (
            "<sdf version='1.9'><model name='m'>"
            "<link name='base'><pose>0 0 1 0 0 0</pose><inertial><mass>1</mass></inertial></link>"
            "<link name='arm'><pose>0.2 0.1 1.1 0.3 0.2 0.1</pose><inertial><pose>0.3 0 0.1 0 0 0"
            "</pose><mass>2</mass><inertia><ixx>0.01</ixx><ixy>0.002</ixy><iyy>0.03</iyy>"
            "<izz>0.04</izz></inertia></inertial></link>"
            "<joint name='fix' type='fixed'><parent>world</parent><child>base</child></joint>"
            f"<joint name='j' type='{jtype}'><pose relative_to='base'>0.1 0 0.05 0 0 0</pose>"
            f"<parent>{parent}</parent><child>{child}</child>{axis}</joint>"
            "</model></sdf>"
        )

    rng = np.random.default_rng(4)
    for jtype in ("revolute", "prismatic"):
        fwd = ld.io.loads(sdf("base", "arm", jtype), "sdf", name="fwd.sdf")
        rev = ld.io.loads(sdf("arm", "base", jtype), "sdf", name="rev.sdf")
        assert rev.metadata["reversed_joints"] == ["j"] and not fwd.metadata["reversed_joints"]
        for _ in range(3):
            q, v, tau = rng.normal(size=(3, 1))
            assert _close(ld.crba(rev, -q), ld.crba(fwd, q), 1e-12)
            assert _close(-ld.aba(rev, -q, -v, -tau), ld.aba(fwd, q, v, tau), 1e-12)
            # the arm link sits where the file says at q = 0, and moves the same way
            Tf = np.asarray(fwd.metadata["links"]["arm"]["pose"])
            Tr = np.asarray(rev.metadata["links"]["arm"]["pose"])
            Rf, pf = ld.frame_placement(fwd, q, "arm")
            Rr, pr = ld.frame_placement(rev, -q, "arm")
            assert np.allclose(Rf @ Tf[:3, 3] + pf, Rr @ Tr[:3, 3] + pr, atol=1e-12)
    # a ball joint backwards: the tree's quaternion is the arm's relative to the base,
    # as in the forward file (the file's own would be its conjugate)
    fwd = ld.io.loads(sdf("base", "arm", "ball"), "sdf", name="fwd.sdf")
    rev = ld.io.loads(sdf("arm", "base", "ball"), "sdf", name="rev.sdf")
    for _ in range(3):
        q = fwd.random_configuration(rng)
        v, tau = rng.normal(size=(2, 3))
        assert _close(ld.aba(rev, q, v, tau), ld.aba(fwd, q, v, tau), 1e-12)
    # a universal joint backwards (its first axis on the file's parent, the arm) is the
    # forward file with the axes swapped; the model's coordinates are the file's
    # (q1, q2) swapped (noted in metadata), so here q → −q again
    a, b = "0.3 0.4 1", "1 0 0"
    rev = ld.io.loads(sdf("arm", "base", "universal", (a, b)), "sdf", name="rev.sdf")
    fwd = ld.io.loads(sdf("base", "arm", "universal", (b, a)), "sdf", name="fwd.sdf")
    assert any("coordinates are swapped" in n for n in rev.metadata["notes"])
    for _ in range(3):
        q, v, tau = rng.normal(size=(3, 2))
        assert _close(ld.crba(rev, -q), ld.crba(fwd, q), 1e-12)
        assert _close(-ld.aba(rev, -q, -v, -tau), ld.aba(fwd, q, v, tau), 1e-12)


def test_sdf_gearbox_is_a_coupling():
    model = ld.load(DATA / "gearbox.sdf", couplings="ignore")
    (c,) = model.metadata["couplings"]
    # θ_out = −0.25 θ_rotor with the output joint's axis reversed: q_out = +0.25 q_rotor
    assert (c["joint_a"], c["joint_b"], c["ratio"]) == ("rotor_joint", "output_joint", 0.25)
    if not hasattr(ld.ModelBuilder, "add_coupling"):
        with pytest.raises(ld.ModelError, match=r"gearbox\.sdf line \d+, gearbox joint 'gear'"):
            ld.load(DATA / "gearbox.sdf")


# =========================================================================== MJCF
def test_mjcf_four_bar_matches_catalog():
    ref = ld.examples.four_bar()
    for planar in (True, False):
        model = ld.load(DATA / "four_bar.xml", planar=planar)
        assert model.joint_names == ref.joint_names and list(model.actuated) == [0]
        assert np.array_equal(model.gravity, ref.gravity)
        assert np.abs(model.inertia - ref.inertia).max() < 1e-15
        rng = np.random.default_rng(11)
        for _ in range(3):
            q = ld.assemble(ref, ref.q0 + np.array([rng.normal(scale=0.3), 0, 0]))
            v = ld.complete_velocity(ref, q, [rng.normal(), 0, 0])
            tau = rng.normal(size=3)
            a = ld.forward_dynamics(ref, q, v, tau).qdd
            assert _close(ld.forward_dynamics(model, q, v, tau).qdd, a, 1e-10)


def test_mjcf_equalities_weld_joint_and_ref():
    xml = """<mujoco model="eq"><compiler angle="radian"/><worldbody>
      <body name="a" pos="0 0 1"><joint name="ja" type="hinge" axis="0 1 0" ref="0.3"/>
        <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.02"/>
        <body name="b" pos="0.5 0 0"><joint name="jb" type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.02"/></body></body>
      <body name="c" pos="0 1 1"><joint name="jc" type="slide" axis="1 0 0"/>
        <geom size="0.05"/></body>
      <body name="d" pos="2 0 0"><freejoint name="free"/><geom size="0.1"/></body>
      </worldbody>
      <equality><connect body1="b" body2="c" anchor="0.5 0 0"/>
        <weld body1="a" body2="d"/>
        <joint joint1="jc" joint2="jb" polycoef="0.1 2 0 0 0"/></equality></mujoco>"""
    model = ld.io.loads(xml, "mjcf", name="eq.xml", couplings="ignore", assemble=False)
    assert model.closure_kinds == ("ball", "weld")
    assert model.joint_types == ("revolute", "revolute", "prismatic", "free")
    # the free body starts where the file puts it; hinges measured from ref
    assert np.allclose(model.q0[model.q_slice("free")], [2, 0, 0, 1, 0, 0, 0])
    assert model.metadata["mujoco"]["qpos0_offset"]["ja"] == pytest.approx(0.3)
    assert np.abs(ld.closure_residual(model, model.q0)).max() < 1e-12
    (c,) = model.metadata["couplings"]
    assert (c["joint_a"], c["joint_b"], c["ratio"], c["offset"]) == ("jb", "jc", 2.0, 0.1)
    if not hasattr(ld.ModelBuilder, "add_coupling"):
        with pytest.raises(ld.ModelError, match=r"eq\.xml line \d+, joint equality"):
            ld.io.loads(xml, "mjcf", name="eq.xml")
    bad = xml.replace('<joint name="jb" type="hinge" axis="0 1 0"/>',
                      '<joint name="jb" type="hinge" axis="0 1 0" pos="0.1 0 0"/>'
                      '<joint name="jb2" type="slide" axis="1 0 0"/>')  # fmt: skip
    with pytest.raises(ld.ModelError, match=r"eq\.xml line \d+, body 'b': 2 joints"):
        ld.io.loads(bad, "mjcf", name="eq.xml", couplings="ignore")


def test_mjcf_export_revolute_closure_as_two_connects():
    def rod(m, L):
        return {"mass": m, "com": (L / 2, 0, 0), "inertia": (1e-3 * m * L * L, m * L * L / 12,
                                                             m * L * L / 12)}  # fmt: skip

    b = ld.ModelBuilder("spatial_four_bar")
    b.add_body("crank", "ground", ld.Revolute("z"), **rod(1.0, 0.3))
    b.add_body("coupler", "crank", ld.Revolute("z"), xyz=(0.3, 0, 0), **rod(2.0, 1.0))
    b.add_body("rocker", "ground", ld.Revolute("z"), xyz=(1, 0, 0), **rod(1.5, 0.6))
    b.add_frame("ct", "coupler", xyz=(1, 0, 0))
    b.add_frame("rt", "rocker", xyz=(0.6, 0, 0))
    b.add_closure("loop", "ct", "rt", "revolute", axis="z")
    model = b.build()
    from loopdyn.interop.mujoco import MujocoExport

    ex = MujocoExport(model, solref=(-1e6, -2e3), solimp=(0.9999, 0.9999, 0.001, 0.5, 2))
    assert ex.xml.count("<connect") == 2
    q = ld.assemble(model, [0.5, 1.5, 1.5], fixed=[0])
    v = ld.complete_velocity(model, q, [0.3, 0, 0])
    tau = np.array([0.5, 0.0, 0.0])
    exact = ld.forward_dynamics(model, q, v, tau).qdd
    assert np.abs(ex.forward(q, v, tau) - exact).max() < 1e-4 * np.abs(exact).max()
    # and the saved MJCF reads back as the same mechanism (a ball pair, reduced)
    back = ld.io.loads(ex.xml, "mjcf", name="sp4.xml")
    # each connect of a planar loop keeps its 2 in-plane rows; the pair repeats them
    assert back.nv == 3 and back.m == 4 and ld.constraint_rank(back, q).rank == 2
    assert _close(ld.forward_dynamics(back, q, v, tau).qdd, exact, 1e-9)


# =========================================================================== native
@pytest.mark.parametrize("name", ld.examples.names())
def test_native_round_trip_is_exact(name, tmp_path):
    import jsonschema

    model = ld.examples.get(name)
    path = ld.save(model, tmp_path / f"{name}.toml")
    back = ld.load(path)
    for attr in ("topo", "jgeom", "inertia", "gravity", "frame_body", "frame_X", "cl_body",
                 "cl_X", "row_int", "row_vec", "q0", "actuated"):  # fmt: skip
        assert np.array_equal(getattr(model, attr), getattr(back, attr)), attr
    for attr in ("name", "description", "planar", "body_names", "joint_names", "frames",
                 "closures", "closure_kinds"):  # fmt: skip
        assert getattr(model, attr) == getattr(back, attr), attr
    assert native.dumps(back) == path.read_text()
    schema = json.loads(native.SCHEMA.read_text())
    jsonschema.validate(tomllib.loads(path.read_text()), schema)


def test_native_round_trip_every_closure_kind(tmp_path):
    """Closures of every kind (raw axes as given: strings, vectors, generic axis lists),
    every joint type, frames with rotations, a non-default gravity: bit for bit."""
    b = ld.ModelBuilder("kinds", gravity=(0.1, -0.2, -9.7))
    inertia = np.array([[0.3, 0.01, -0.02], [0.01, 0.4, 0.03], [-0.02, 0.03, 0.5]])
    joints = [ld.Revolute([0.3, 0.4, 1.0]), ld.Prismatic("-y"), ld.Universal("x", [0, 1, 1]),
              ld.Spherical(), ld.Free(), ld.Fixed()]  # fmt: skip
    for k, joint in enumerate(joints):
        b.add_body(f"b{k}", "ground" if k == 0 else f"b{k - 1}", joint, xyz=(0.1 * k, 0.2, 0.3),
                   rpy=(0.1, 0.2 * k, 0.3), mass=1.0 + k / 3, com=(0.1, -0.2 / 3, 0.05),
                   inertia=inertia, actuated=k % 2 == 0, joint_name=f"j{k}")  # fmt: skip
    for k in range(6):
        b.add_frame(f"f{k}", f"b{k}", xyz=(1 / 3, 0.0, -k / 7), rpy=(k / 5, 0.3, -0.2))
    b.add_frame("g", "ground", xyz=(0.5, 0.5, 0.5))
    b.add_closure("c_ball", "f0", "g", "ball")
    b.add_coupling("j0", "j1", 0.25, offset=0.1, name="gear")  # between closures: rows after
    b.add_closure("c_rev", "f1", "f3", "revolute", axis=[0, 0.6, 0.8])
    b.add_closure("c_uni", "f2", "f4", "universal", axis="z", axis2=[1, 0, 0])
    b.add_closure("c_pri", "g", "f5", "prismatic", axis="-z")
    b.add_closure("c_weld", "f1", "f5", "weld")
    b.add_closure("c_gen", "f0", "f4", "generic", rotation_axes=("x", [0, 1 / 3, 1]),
                  translation_axes=([1, 1, 0],))  # fmt: skip
    model = b.build()
    path = ld.save(model, tmp_path / "kinds.toml")
    back = ld.load(path)
    assert _same_arrays(model, back)
    assert back.closure_kinds == model.closure_kinds and back.joint_types == model.joint_types
    assert model.closure_kinds[-1] == "coupling" and back.closures == model.closures
    assert np.array_equal(back.actuated, model.actuated)
    assert native.dumps(back) == path.read_text()


@needs_erd
def test_native_round_trip_of_loaded_files(tmp_path):
    for path in (ERD / "cassie_description" / "robots" / "cassie_v2.sdf",
                 ERD / "solo_description" / "robots" / "solo12.urdf"):  # fmt: skip
        model = ld.load(path, floating_base=True)
        back = ld.load(ld.save(model, tmp_path / "m.toml"))
        assert _same_arrays(model, back) and np.array_equal(model.q0, back.q0)
        assert back.closure_kinds == model.closure_kinds


def test_native_parameters_units_and_errors(tmp_path):
    text = """format = "loopdyn-model"
version = 1
name = "pendulum"
gravity = [0.0, 0.0, "-g"]

[parameters]
L = { value = 500, unit = "mm" }
g = 9.81
m = { value = 2000, unit = "g" }

[[bodies]]
name = "rod"
type = "revolute"
axis = "y"
mass = "m"
com = [0, 0, "-L / 2"]
inertia = ["m * L**2 / 12", "m * L**2 / 12", 1e-4]
"""
    p = tmp_path / "pendulum.toml"
    p.write_text(text)
    model = ld.load(p)
    assert model.masses[0] == 2.0 and model.gravity[2] == -9.81
    assert model.metadata["parameters"]["L"] == {"value": 0.5, "unit": "mm"}
    M = ld.crba(model, model.q0)[0, 0]
    assert M == pytest.approx(2.0 * 0.25 / 12 + 2.0 * 0.25**2)
    longer = ld.load(p, parameters={"L": 1.0})
    assert ld.crba(longer, longer.q0)[0, 0] == pytest.approx(2.0 / 12 + 2.0 * 0.25)
    # errors: file, line, element
    bad = (
        text + '\n[[frames]]\nname = "tip"\nbody = "rod"\n\n[[closures]]\nname = "knee_loop"\n'
        'frame_a = "tip"\nframe_b = "shin_tip"\n'
    )
    p.write_text(bad)
    line = bad.splitlines().index('frame_b = "shin_tip"') + 1
    with pytest.raises(
        ld.ModelError,
        match=rf"pendulum\.toml line {line}, closure 'knee_loop': "
        r"frame 'shin_tip' does not exist",
    ):
        ld.load(p)
    lines = text.splitlines()
    p.write_text(text.replace('mass = "m"', 'mass = "m +"'))
    n = lines.index('mass = "m"') + 1
    with pytest.raises(ld.ModelError, match=rf"pendulum\.toml line {n}, body 'rod': cannot read"):
        ld.load(p)
    p.write_text(text.replace("[[bodies]]", "[[bodies]\n"))
    n = lines.index("[[bodies]]") + 1
    with pytest.raises(ld.ModelError, match=rf"pendulum\.toml line {n}: not valid TOML"):
        ld.load(p)
    p.write_text(text.replace('unit = "g"', 'unit = "lb"'))
    n = next(k for k, t in enumerate(lines) if t.startswith("m = ")) + 1
    with pytest.raises(ld.ModelError, match=rf"line {n}, parameter 'm': unknown unit 'lb'"):
        ld.load(p)


# =========================================================================== safety
def test_xml_bombs_external_entities_size_and_uris(tmp_path):
    bomb = (
        '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa">'
        '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><robot name="x">&b;</robot>'
    )
    with pytest.raises(ld.ModelError, match=r"bomb\.urdf line 1: refused EntitiesForbidden"):
        ld.io.loads(bomb, "urdf", name="bomb.urdf")
    ext = (
        '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        '<sdf version="1.6"><model name="m">&x;</model></sdf>'
    )
    with pytest.raises(ld.ModelError, match=r"ext\.sdf line 1: refused"):
        ld.io.loads(ext, "sdf", name="ext.sdf")
    big = tmp_path / "big.urdf"
    big.write_text('<robot name="big">' + " " * 2000 + "</robot>")
    with pytest.raises(
        ld.ModelError,
        match=r"big\.urdf: the file is \d+ bytes, over the limit "
        r"of 1000 bytes; pass max_bytes=",
    ):
        ld.load(big, max_bytes=1000)
    # URIs resolve only under the roots
    (tmp_path / "pkg" / "meshes").mkdir(parents=True)
    (tmp_path / "pkg" / "meshes" / "a.stl").write_text("solid a")
    (tmp_path / "secret.stl").write_text("solid s")
    urdf = ('<robot name="r"><link name="l"><inertial><mass value="1"/><inertia ixx="1" ixy="0" '
            'ixz="0" iyy="1" iyz="0" izz="1"/></inertial>'
            '<visual><geometry><mesh filename="package://pkg/meshes/a.stl"/></geometry></visual>'
            '<visual><geometry><mesh filename="package://pkg/../secret.stl"/></geometry></visual>'
            '<visual><geometry><mesh filename="package://pkg/missing.stl"/></geometry></visual>'
            "</link></robot>")  # fmt: skip
    roots = [tmp_path / "pkg"]
    model = ld.io.loads(urdf, "urdf", name="r.urdf", package_dirs=[tmp_path])
    paths = [g["path"] for g in model.metadata["geometry"]]
    assert paths[0] == str((tmp_path / "pkg" / "meshes" / "a.stl").resolve())
    assert paths[1] == str((tmp_path / "secret.stl").resolve())  # inside the root tmp_path
    model = ld.io.loads(urdf, "urdf", name="r.urdf", package_dirs=roots)
    paths = [g["path"] for g in model.metadata["geometry"]]
    assert paths[0] is not None and paths[1] is None and paths[2] is None
    # MJCF: files named by the model must lie under the roots
    (tmp_path / "m").mkdir()
    mj = tmp_path / "m" / "model.xml"
    mj.write_text('<mujoco><asset><mesh name="s" file="../secret.stl"/></asset>'
                  '<worldbody><body><joint type="hinge"/><geom size=".1"/></body></worldbody>'
                  "</mujoco>")  # fmt: skip
    with pytest.raises(
        ld.ModelError,
        match=r"model\.xml line 1, <mesh>: file '\.\./secret\.stl' "
        r"lies outside the roots",
    ):
        ld.load(mj, package_dirs=[tmp_path / "m"])


# =========================================================================== CLI helpers
def test_describe_and_convert(tmp_path):
    info = ld.io.describe(ld.examples.four_bar())
    assert (info["nq"], info["m"], info["rank"], info["dof"]) == (3, 2, 2, 1)
    assert info["loops"][0]["kind"] == "revolute" and info["actuated"] == ["crank"]
    assert info["closure_residual"] < 1e-12
    assert all(info["methods"][m] == "ok" for m in METHODS)
    json.dumps(info)  # plain data
    out = tmp_path / "four_bar.toml"
    model = ld.io.convert(DATA / "four_bar_loop.urdf", out, planar=True, gravity=(0, -9.81, 0))
    back = ld.load(out)
    assert _same_arrays(back, model)
    xml = tmp_path / "four_bar.xml"
    ld.io.convert(out, xml)
    again = ld.load(xml, planar=True)
    assert again.joint_names == model.joint_names
    with pytest.raises(ld.ModelError, match="free joint"):
        ld.io.convert(DATA / "planar.urdf", tmp_path / "planar.xml")
    with pytest.raises(ld.ModelError, match=r"unknown file type '\.obj'"):
        ld.load(tmp_path / "x.obj")
