"""Legs with closed-chain knees and ankles, in the parallel-robot community's convention.

tests/data/legs holds four legs of ours (``loopdyn.examples.legs``: Cassie-like,
Digit-like with a parallel ankle, a five-bar whose loop is a 6d weld between two revolute
joints' frames, Kangaroo-like with three coupled loops), each as a URDF of the spanning
tree and a YAML file of its closures, motors and joint overrides.  Each loads into the
catalog's model, assembles with every closure's frames coinciding (rotations compared
from ``ld.frame_placement``, not from the residual), every method agrees with
``augmented`` and with ``pin.constraintDynamics`` on the model Pinocchio's users build
from the same two files (their loader's way: joint overrides, RigidConstraintModel 6D /
3D between the named frames, LOCAL), and the motors' torques come back from
``ld.inverse_dynamics``.  Then the reader's errors, overrides and the native round trip.
"""

import warnings
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import loopdyn as ld
from loopdyn.examples import legs

DATA = Path(__file__).parent / "data" / "legs"
LEGS = sorted(legs.LEGS)
METHODS = ("augmented", "slm", "sslm", "recursive_lambda", "embedding", "rcr")


def _close(a, b, tol):
    """|aᵢ - bᵢ| <= tol · max(1, |bᵢ|) entry by entry (a passive spin's large q̈ does not
    loosen the test of the other coordinates)."""
    a, b = np.asarray(a), np.asarray(b)
    return bool(np.all(np.abs(a - b) <= tol * np.maximum(1.0, np.abs(b))))


@cache
def _loaded(name, closures="minimal"):
    return ld.load(DATA / f"{name}.yaml", closures=closures)


def _states(model, n, seed):
    """Random consistent states: every coordinate moved a little, the motors more
    (revolute 0.25 rad, prismatic 15 mm), the rest assembled; random velocities made
    consistent (motors kept), random τ."""
    rng = np.random.default_rng(seed)
    out = []
    act = model.actuated
    prismatic = {
        model.v_slice(j).start
        for j, t in zip(model.joint_names, model.joint_types, strict=True)
        if t == "prismatic"
    }
    while len(out) < n:
        q = ld.integrate(model, model.q0, rng.normal(scale=0.05, size=model.nv), 1.0)
        step = np.zeros(model.nv)
        for i in act:
            step[i] = rng.uniform(-0.015, 0.015) if i in prismatic else rng.uniform(-0.25, 0.25)
        q = ld.integrate(model, q, step, 1.0)
        try:
            q = ld.assemble(model, q)
        except ld.AssemblyError:  # pragma: no cover - a rare draw beyond the workspace
            continue
        v = ld.complete_velocity(model, q, rng.normal(size=model.nv))
        out.append((q, v, rng.normal(size=model.nv)))
    return out


def _rotation_error(Ra, Rb):
    """Angle (rad) of the relative rotation Raᵀ Rb (robust near 0 and π)."""
    R = Ra.T @ Rb
    s = 0.5 * np.linalg.norm([R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]])
    c = 0.5 * (np.trace(R) - 1.0)
    return float(np.arctan2(s, c))


def _closure_errors(model, q):
    """Per closure of the file: (type, position error, rotation error) of its two frames."""
    out = []
    for entry in model.metadata["loops"]["closures"]:
        name = model.metadata["renamed"].get(entry["name"], entry["name"])
        Ra, pa = ld.frame_placement(model, q, f"{name}_A")
        Rb, pb = ld.frame_placement(model, q, f"{name}_B")
        out.append((entry["type"], float(np.linalg.norm(pa - pb)), _rotation_error(Ra, Rb)))
    return out


# =========================================================================== the files
@pytest.mark.parametrize("name", LEGS)
def test_files_are_the_catalog_description(name):
    """The committed files are what ``legs.write_files`` writes (no drift)."""
    assert (DATA / f"{name}.urdf").read_text() == legs.urdf_text(name)
    assert (DATA / f"{name}.yaml").read_text() == legs.yaml_text(name)


@pytest.mark.parametrize("name", LEGS)
def test_file_loads_into_the_catalog_model(name):
    model = _loaded(name)
    cat = ld.examples.get(name)
    both = ld.load(DATA / f"{name}.urdf", loops=DATA / f"{name}.yaml")
    for other in (cat, both):
        assert other.joint_names == model.joint_names and other.body_names == model.body_names
        assert other.closure_kinds == model.closure_kinds and other.closures == model.closures
        for attr in ("topo", "actuated", "frame_body", "cl_body", "row_int"):
            assert np.array_equal(getattr(other, attr), getattr(model, attr)), attr
        for attr in ("jgeom", "inertia", "frame_X", "cl_X", "row_vec", "q0"):
            assert np.allclose(getattr(other, attr), getattr(model, attr), atol=1e-12), attr
    md = model.metadata
    assert md["assembly"]["assembled"] and md["assembly"]["residual_reference"] < 1e-12
    motors = legs.LEGS[name]().motors
    assert md["loops"]["name_mot"] == motors
    assert sorted(model.actuated) == sorted(model.v_slice(j).start for j in motors)


# =========================================================================== closed, exact
@pytest.mark.parametrize("closures", ["minimal", "as_file"])
@pytest.mark.parametrize("name", LEGS)
def test_leg_assembles_closed_and_every_method_agrees(name, closures):
    model = _loaded(name, closures)
    if closures == "as_file":  # the file's 6d / 3d rows, dependent ones included
        kinds = {"6d": "weld", "3d": "ball"}
        assert model.closure_kinds == tuple(
            kinds[c["type"]] for c in model.metadata["loops"]["closures"]
        )
    for q, v, tau in [(model.q0, np.zeros(model.nv), np.zeros(model.nv)), *_states(model, 3, 1)]:
        for kind, dp, dr in _closure_errors(model, q):
            assert dp < 1e-10, (kind, dp)
            if kind == "6d":
                assert dr < 1e-10, dr  # the welded frames coincide as rotations
        ref = ld.forward_dynamics(model, q, v, tau, method="augmented")
        _, J, gamma = ld.constraints(model, q, v)
        assert _close(J @ ref.qdd, gamma, 1e-10)
        for method in METHODS:
            got = ld.forward_dynamics(model, q, v, tau, method=method)
            assert got.method == method  # natively: no fallback to another method
            assert _close(got.qdd, ref.qdd, 1e-10), method


def test_five_bar_weld_between_two_hinges_has_three_dependent_rows():
    """The 6d weld of two revolute joints' frames on a loop that moves in planes: 6 rows of
    rank 3 at every pose; ``ld.load`` keeps the 3 independent ones by default."""
    full, minimal = _loaded("five_bar_leg", "as_file"), _loaded("five_bar_leg")
    assert full.m == 6 and minimal.m == 3 and minimal.closure_kinds == ("generic",)
    for q, _, _ in _states(full, 3, 5):
        assert ld.constraint_rank(full, q).rank == 3
        assert ld.constraint_rank(minimal, q).rank == 3
    assert full.nv - 3 == 4  # hip roll, two motors, the toe's spin


# =========================================================================== Pinocchio
@pytest.mark.parametrize(
    ("name", "floating"),
    [*((n, False) for n in LEGS), ("digit_leg", True), ("kangaroo_leg", True)],
)
def test_leg_matches_pinocchio_built_by_the_community_loader(name, floating):
    """``ConventionModel``: the model and constraints Pinocchio's parallel-robot users
    build from the same two files (their loader's way, no loopdyn reader involved)."""
    import pinocchio as pin

    from loopdyn.interop.pinocchio import ConventionModel

    urdf, yml = DATA / f"{name}.urdf", DATA / f"{name}.yaml"
    model = ld.load(yml, floating_base=True) if floating else _loaded(name)
    ref_model = ConventionModel(urdf, yml, floating_base=floating)
    pm, cms = ref_model.model, ref_model.constraints
    assert pm.nv == model.nv and len(cms) == len(model.metadata["loops"]["closures"])
    pd = pm.createData()
    cds = ref_model.constraint_datas()
    pin.initConstraintDynamics(pm, pd, cms, cds)
    prox = pin.ProximalSettings(1e-14, 1e-8, 20)
    for q, v, tau in _states(model, 3, 2):
        qp, vp, tp = ref_model.q(model, q), ref_model.v(model, v), ref_model.v(model, tau)
        # the same configuration: every closure's frames coincide in Pinocchio too
        pin.framesForwardKinematics(pm, pd, qp)
        for c in cms:
            Xa = pd.oMi[c.joint1_id] * c.joint1_placement
            Xb = pd.oMi[c.joint2_id] * c.joint2_placement
            assert np.linalg.norm(Xa.translation - Xb.translation) < 1e-10
        # the same mass matrix, then the same accelerations
        M = pin.crba(pm, pd, qp)
        M = np.triu(M) + np.triu(M, 1).T
        vmap = ref_model.v_from(model, np.arange(pm.nv))
        assert _close(M[np.ix_(vmap, vmap)], ld.crba(model, q), 1e-12)
        ref = ld.forward_dynamics(model, q, v, tau, method="augmented")
        a = pin.constraintDynamics(pm, pd, qp, vp, tp, cms, cds, prox)
        assert _close(ref_model.v_from(model, a), ref.qdd, 1e-9)


# =========================================================================== motors
@pytest.mark.parametrize("name", LEGS)
def test_inverse_dynamics_gives_the_motor_torques(name):
    model = _loaded(name)
    rng = np.random.default_rng(3)
    for q, v, _ in _states(model, 2, 3):
        u = rng.normal(size=model.actuated.size)
        tau = np.zeros(model.nv)
        tau[model.actuated] = u
        qdd = ld.forward_dynamics(model, q, v, tau).qdd
        res = ld.inverse_dynamics(model, q, v, qdd)
        assert _close(res.u, u, 1e-8) and not res.over_actuated


# =========================================================================== the reader
URDF_TWO = """<robot name="two">
  <link name="base"/>
  <link name="a"><inertial><mass value="1"/>
    <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
  <link name="b"><inertial><mass value="1"/><origin xyz="0 0 -0.5"/>
    <inertia ixx="0.1" ixy="0" ixz="0" iyy="0.1" iyz="0" izz="0.1"/></inertial></link>
  <link name="tip"/>
  <joint name="ja" type="revolute"><parent link="base"/><child link="a"/>
    <axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="jb" type="revolute"><parent link="a"/><child link="b"/>
    <origin xyz="0 0 -0.1"/><axis xyz="1 0 0"/>
    <limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <joint name="tip_fixed" type="fixed"><parent link="b"/><child link="tip"/>
    <origin xyz="0 0 -1"/></joint>
</robot>
"""


def _two(tmp_path, yaml_text):
    (tmp_path / "two.urdf").write_text(URDF_TWO)
    (tmp_path / "two.yaml").write_text(yaml_text)
    return tmp_path / "two.yaml"


@pytest.mark.parametrize(
    ("kind", "axes"),
    [
        ("UJOINT_XY", "xy"),
        ("UJOINT_YZ", "yz"),
        ("UJOINT_ZX", "zx"),
        ("UJOINT_ZY", "zy"),
        ("CARDAN", "xy"),
    ],
)
def test_universal_overrides_take_the_named_axes(tmp_path, kind, axes):
    path = _two(tmp_path, f"name_mot: ['ja']\njoint_name: ['jb']\njoint_type: ['{kind}']\n")
    model = ld.load(path)
    i = model.joint_index("jb")
    assert model.joint_types[i] == "universal"
    e = {"x": [1, 0, 0], "y": [0, 1, 0], "z": [0, 0, 1]}
    np.testing.assert_array_equal(model.jgeom[i, 4], e[axes[0]])
    np.testing.assert_array_equal(model.jgeom[i, 5], e[axes[1]])
    assert model.metadata["loops"]["overrides"]["jb"] == {"type": kind, "was": "revolute"}


def test_spherical_and_fixed_overrides_and_a_missing_joint_warns(tmp_path):
    path = _two(tmp_path, "joint_name: ['jb', 'elbow']\njoint_type: ['SPHERICAL', 'FIXED']\n")
    with pytest.warns(UserWarning, match=r"two.yaml line 1, joint_name\[1\]: joint 'elbow'"):
        model = ld.load(path)
    assert model.joint_types == ("revolute", "spherical")
    assert model.metadata["loops"]["skipped_overrides"] == ["elbow"]
    path = _two(tmp_path, "joint_name: ['jb']\njoint_type: ['fixed']\n")
    model = ld.load(path)
    assert model.joint_names == ("ja",) and model.body_names == ("a",)
    # the fixed link stays a frame
    assert np.allclose(ld.frame_placement(model, model.neutral(), "tip")[1], [0, 0, -1.1])


def test_python_list_of_closures_with_any_kind(tmp_path):
    (tmp_path / "two.urdf").write_text(URDF_TWO)
    urdf = tmp_path / "two.urdf"
    model = ld.load(urdf, loops=[("tip", "world", "ball")], closures="as_file")
    assert model.closure_kinds == ("ball",) and model.m == 3
    model = ld.load(
        urdf,
        loops=[("tip", "world", "revolute", {"axis": "x", "name": "hinge"})],
        closures="as_file",
        assemble=False,
    )
    assert model.closures == ("hinge",) and model.closure_kinds == ("revolute",)
    model = ld.load(
        urdf,
        loops=[("tip", "base", "generic", {"translation_axes": ["z"]})],
        closures="as_file",
        assemble=False,
    )
    assert model.closure_kinds == ("generic",) and model.m == 1
    model = ld.load(urdf, loops=[("jb", "base", "6d")], closures="as_file", assemble=False)
    assert model.closure_kinds == ("weld",)
    # the YAML's content as a dict
    model = ld.load(
        urdf, loops={"closed_loop": [["tip", "world"]], "type": ["3d"]}, closures="as_file"
    )
    assert model.closure_kinds == ("ball",)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("closed_loop: [['tip', 'world']\ntype: ['3d']\n", r"two.yaml line \d+: not valid YAML"),
        ("- a\n- b\n", "holds a list, not a mapping"),
        (
            "closed_loop: [['tip', 'nowhere']]\ntype: ['3d']\n",
            r"two.yaml line 1, closed_loop\[0\]: 'nowhere' is not a joint, link or frame of "
            "two.urdf",
        ),
        (
            "closed_loop: [['tip', 'world'], ['tip', 'a']]\ntype: ['3d']\n",
            r"two.yaml line 2, type: 1 type\(s\) for 2 closed_loop pair\(s\)",
        ),
        (
            "closed_loop: [['tip', 'world']]\ntype: ['4d']\n",
            r"two.yaml line 2, type\[0\]: unknown closure type '4d'.*use '6d'",
        ),
        ("closed_loop: [['tip']]\ntype: ['3d']\n", r"closed_loop\[0\]: \['tip'\] is not a pair"),
        (
            "joint_name: ['jb']\njoint_type: ['HINGE']\n",
            r"two.yaml line 2, joint_type\[0\]: unknown joint type 'HINGE' for joint 'jb'",
        ),
        (
            "joint_name: ['jb', 'ja']\njoint_type: ['SPHERICAL']\n",
            r"1 joint_type\(s\) for 2 joint_name\(s\)",
        ),
        ("name_mot: ['motor']\n", r"two.yaml line 1, name_mot: actuated joint 'motor' is not a"),
        ("name_mot: ['jb']\njoint_name: ['jb']\njoint_type: ['FIXED']\n", "'jb' is fixed"),
    ],
)
def test_bad_yaml_names_the_file_the_entry_and_the_fix(tmp_path, text, words):
    path = _two(tmp_path, text)
    with pytest.raises(ld.ModelError, match=words):
        ld.load(path)


def test_load_of_the_yaml_finds_its_urdf(tmp_path):
    import shutil

    shutil.copy(DATA / "cassie_leg.urdf", tmp_path / "robot.urdf")
    shutil.copy(DATA / "cassie_leg.yaml", tmp_path / "closures.yaml")
    model = ld.load(tmp_path / "closures.yaml")  # the folder's only URDF
    assert model.m == _loaded("cassie_leg").m
    (tmp_path / "other.urdf").write_text(URDF_TWO)
    with pytest.raises(ld.ModelError, match=r"closures.urdf.*loops='closures.yaml'"):
        ld.load(tmp_path / "closures.yaml")
    with pytest.raises(ld.ModelError, match="carries the loops itself"):
        ld.load(tmp_path / "closures.yaml", loops=[])
    with pytest.raises(ld.ModelError, match=r"loops= applies to URDF"):
        ld.load(Path(ld.save(ld.examples.four_bar(), tmp_path / "f.toml")), loops=[])


@pytest.mark.parametrize("name", LEGS)
def test_native_round_trip_keeps_closures_and_overrides(name, tmp_path):
    model = _loaded(name, "as_file")
    back = ld.load(ld.save(model, tmp_path / f"{name}.toml"))
    for attr in (
        "topo",
        "jgeom",
        "inertia",
        "frame_X",
        "cl_X",
        "row_int",
        "row_vec",
        "q0",
        "actuated",
    ):
        assert np.array_equal(getattr(model, attr), getattr(back, attr)), attr
    assert back.closures == model.closures and back.joint_types == model.joint_types
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q, v, tau = _states(model, 1, 9)[0]
    assert np.array_equal(
        ld.forward_dynamics(back, q, v, tau).qdd, ld.forward_dynamics(model, q, v, tau).qdd
    )


# =========================================================================== robots
ROBOTS = {
    "biped_digit": ["digit_leg"] * 2,
    "eight_legs": ["cassie_leg", "digit_leg", "kangaroo_leg", "five_bar_leg"] * 2,
}


@pytest.mark.parametrize(
    "name",
    ["biped_digit", pytest.param("eight_legs", marks=pytest.mark.slow)],  # 73 bodies: -m slow
)
def test_robot_files_load_close_agree_and_match_pinocchio(name):
    """Whole robots of these legs on a floating pelvis (a Digit-like biped; eight legs of
    the four kinds, 73 bodies): the committed files are ``legs.robot_texts``; every
    closure closes with its frames coinciding, every method agrees with ``augmented``
    natively, and Pinocchio's community-built model gives the same accelerations."""
    import pinocchio as pin

    from loopdyn.interop.pinocchio import ConventionModel

    urdf, yml = DATA / f"{name}.urdf", DATA / f"{name}.yaml"
    assert (urdf.read_text(), yml.read_text()) == legs.robot_texts(name, ROBOTS[name])
    model = ld.load(yml, floating_base=True)
    assert len(model.metadata["loops"]["closures"]) == sum(
        len(legs.LEGS[n]().loops) for n in ROBOTS[name]
    )
    ref_model = ConventionModel(urdf, yml, floating_base=True)
    pm, cms = ref_model.model, ref_model.constraints
    pd, cds = pm.createData(), ref_model.constraint_datas()
    pin.initConstraintDynamics(pm, pd, cms, cds)
    prox = pin.ProximalSettings(1e-14, 1e-8, 20)
    for q, v, tau in _states(model, 2, 4):
        for kind, dp, dr in _closure_errors(model, q):
            assert dp < 1e-10 and (kind != "6d" or dr < 1e-10), (kind, dp, dr)
        ref = ld.forward_dynamics(model, q, v, tau, method="augmented")
        for method in METHODS:
            got = ld.forward_dynamics(model, q, v, tau, method=method)
            assert got.method == method and _close(got.qdd, ref.qdd, 1e-10), method
        qp, vp, tp = ref_model.q(model, q), ref_model.v(model, v), ref_model.v(model, tau)
        a = pin.constraintDynamics(pm, pd, qp, vp, tp, cms, cds, prox)
        assert _close(ref_model.v_from(model, a), ref.qdd, 1e-9)
