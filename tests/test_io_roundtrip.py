"""MJCF written by ``ld.save`` reads back as the same model (issue 42): the same q0
(the keyframe ``q0``), joint names and dynamics; and reading MJCF without MuJoCo
installed is one line naming the extra that installs it."""

import builtins
import sys

import numpy as np
import pytest

import loopdyn as ld

# every catalog model that MuJoCo can express (delta's universal closures, the
# slider-crank's prismatic one, free joints and couplings have no MJCF equality)
MJCF_MODELS = ["four_bar", "five_bar", "stewart", "three_rrr", "carpet_scraper", "spatial_ladder"]


def _rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a - b).max() / max(1.0, float(np.abs(b).max())))


def _same_dynamics(model, back, seed=0):
    """q̈ of ``back`` equals q̈ of ``model`` at q0 and at a nearby assembled state,
    coordinates matched by joint name."""
    assert back.nq == model.nq and back.nv == model.nv
    perm = np.concatenate(
        [np.arange(model.nv)[model.v_slice(jn)] for jn in back.joint_names]
    ).astype(int)
    permq = np.concatenate(
        [np.arange(model.nq)[model.q_slice(jn)] for jn in back.joint_names]
    ).astype(int)
    rng = np.random.default_rng(seed)
    qs = [np.asarray(model.q0)]
    if model.m:
        dq = np.zeros(model.nv)
        dq[list(model.actuated)] = rng.normal(scale=0.05, size=len(model.actuated))
        qs.append(ld.assemble(model, ld.integrate(model, model.q0, dq, 1.0)))
    for q in qs:
        v = ld.complete_velocity(model, q, rng.normal(size=model.nv))
        tau = rng.normal(size=model.nv)
        a = ld.forward_dynamics(model, q, v, tau).qdd
        b = ld.forward_dynamics(back, q[permq], v[perm], tau[perm]).qdd
        assert _rel(b, a[perm]) < 1e-10


@pytest.mark.parametrize("name", MJCF_MODELS)
def test_mjcf_round_trip_keeps_q0_names_and_dynamics(name, tmp_path):
    model = ld.examples.get(name)
    path = ld.save(model, tmp_path / f"{name}.xml")
    assert '<key name="q0"' in path.read_text()
    for planar in (False, True) if model.planar else (False,):
        back = ld.load(path, planar=planar)
        assert back.joint_names == model.joint_names
        # the four-bar's crank was read back at -31.6° instead of 30°
        assert np.abs(np.asarray(back.q0) - model.q0).max() < 1e-12
        _same_dynamics(model, back)


def test_mjcf_round_trip_q0_with_quaternions_and_universal_joints(tmp_path):
    """A ball joint's quaternion (w, x, y, z) and a universal joint's two angles (the
    hinges U_1, U_2 in the file) come back as they were; bodies in two branches."""
    b = ld.ModelBuilder("branches")
    b.add_body("a", "ground", ld.Revolute("z"), mass=1.0, com=(0.2, 0, 0), inertia=(0.1, 0.2, 0.3))
    b.add_body("s", "ground", ld.Spherical(), xyz=(0, 1, 0), mass=2.0, com=(0, 0, -0.3),
               inertia=(0.2, 0.3, 0.4))  # fmt: skip
    b.add_body("c", "a", ld.Prismatic("x"), xyz=(0.4, 0, 0), mass=0.5, inertia=(0.1, 0.1, 0.1))
    b.add_body("u", "s", ld.Universal("x", "y"), xyz=(0, 0, -0.6), mass=1.0, com=(0, 0, -0.2),
               inertia=(0.1, 0.1, 0.05))  # fmt: skip
    model = b.build()
    quat = np.array([0.9, 0.1, -0.3, 0.2])
    q0 = model.neutral()
    for jn, val in (("a", [0.7]), ("s", quat / np.linalg.norm(quat)), ("c", [0.15]),
                    ("u", [-0.4, 0.25])):  # fmt: skip
        q0[model.q_slice(jn)] = val
    b.set_q0(q0)
    model = b.build()
    back = ld.load(ld.save(model, tmp_path / "m.xml"))
    assert sorted(back.joint_names) == sorted(model.joint_names)
    assert back.joint_types == model.joint_types
    for jn in model.joint_names:
        assert np.abs(back.q0[back.q_slice(jn)] - model.q0[model.q_slice(jn)]).max() < 1e-12
    _same_dynamics(model, back)


def test_mjcf_keyframe_q0_is_read_from_hand_written_files():
    xml = """<mujoco><compiler angle="radian"/><worldbody>
      <body name="a"><joint name="ja" type="hinge" axis="0 0 1" ref="0.25"/>
        <geom size="0.1"/></body>
      <body name="b" pos="1 0 0"><joint name="jb" type="ball"/><geom size="0.1"/></body>
      </worldbody>
      <keyframe><key name="home" qpos="9 1 0 0 0"/>
        <key name="q0" qpos="1.25 0 1 0 0"/></keyframe></mujoco>"""
    model = ld.io.loads(xml, "mjcf", name="k.xml")
    # hinge: q = qpos − qpos0 (measured from ref); ball: the quaternion (w, x, y, z)
    assert np.allclose(model.q0, [1.0, 0, 1, 0, 0], atol=1e-15)
    without = ld.io.loads(xml.replace('name="q0"', 'name="other"'), "mjcf", name="k.xml")
    assert np.allclose(without.q0, [0, 1, 0, 0, 0])


# ------------------------------------------------------------ MuJoCo not installed
@pytest.mark.parametrize("how", ["sys.modules", "import"])
def test_mjcf_without_mujoco_is_one_line_naming_the_extra(how, tmp_path, monkeypatch):
    path = ld.save(ld.examples.four_bar(), tmp_path / "four_bar.xml")  # needs no MuJoCo
    if how == "sys.modules":
        monkeypatch.setitem(sys.modules, "mujoco", None)
    else:
        real = builtins.__import__

        def fake(name, *args, **kwargs):
            if name == "mujoco" or name.startswith("mujoco."):
                raise ModuleNotFoundError("No module named 'mujoco'", name="mujoco")
            return real(name, *args, **kwargs)

        monkeypatch.delitem(sys.modules, "mujoco", raising=False)
        monkeypatch.setattr(builtins, "__import__", fake)
    with pytest.raises(ld.ModelError) as err:
        ld.load(path)
    msg = str(err.value)
    assert "\n" not in msg and "four_bar.xml" in msg
    assert "pip install 'loopdyn[mjcf]'" in msg
    assert err.value.__cause__ is None and err.value.__suppress_context__
    # a file that is not MJCF at all still says that first
    bad = tmp_path / "bad.xml"
    bad.write_text("<robot/>")
    with pytest.raises(ld.ModelError, match="not <mujoco>"):
        ld.load(bad)


def test_mjcf_without_mujoco_cli_is_one_line(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from loopdyn.cli import app

    path = ld.save(ld.examples.four_bar(), tmp_path / "four_bar.xml")
    monkeypatch.setitem(sys.modules, "mujoco", None)
    res = CliRunner().invoke(app, ["info", str(path)])
    assert res.exit_code == 2
    lines = [x for x in res.output.splitlines() if x.strip()]
    assert len(lines) == 1 and "loopdyn[mjcf]" in lines[0], res.output


def test_pyproject_has_the_mjcf_extra():
    import tomllib
    from pathlib import Path

    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    extras = project["project"]["optional-dependencies"]
    assert extras["mjcf"] == ["mujoco>=3.1"]
