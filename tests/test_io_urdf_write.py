"""ld.save(model, "m.urdf"): URDF with URDF+ <loop> closures (issue 42), read back by
loopdyn to the same dynamics, its tree read by Pinocchio's URDF parser, and named errors
for what URDF cannot say."""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import loopdyn as ld
from loopdyn.model.closures import CouplingSpec
from mechanisms import mechanisms

WRITABLE = ["four_bar", "five_bar", "slider_crank", "geared_chain", "closed_knee_leg",
            "carpet_scraper", "three_rrr", "serial_arm"]  # fmt: skip


def _round_trip(model, path):
    ld.save(model, path)
    return ld.load(path, planar=model.planar, gravity=tuple(model.gravity))


def _moving_joints(model):
    return [n for i, n in enumerate(model.joint_names) if model.topo[i, 5] > 0]


def _same_dynamics(m, m2, q, v, tau):
    # a body on a fixed joint is merged into its parent when read (its link a frame)
    assert _moving_joints(m2) == _moving_joints(m)
    assert (m2.nq, m2.nv) == (m.nq, m.nv)
    a = ld.forward_dynamics(m, q, v, tau, method="augmented")
    b = ld.forward_dynamics(m2, q, v, tau, method="augmented")
    scale = max(1.0, np.abs(a.qdd).max(initial=0.0))
    assert np.abs(a.qdd - b.qdd).max(initial=0.0) <= 1e-10 * scale  # rotations written as rpy
    assert np.abs(ld.closure_residual(m2, q)).max(initial=0.0) <= 1e-10


@pytest.mark.parametrize("name", WRITABLE)
def test_catalog_round_trip(name, tmp_path):
    m = ld.examples.get(name)
    m2 = _round_trip(m, tmp_path / f"{name}.urdf")
    rng = np.random.default_rng(3)
    v = ld.complete_velocity(m, m.q0, rng.normal(size=m.nv))
    _same_dynamics(m, m2, m.q0, v, rng.normal(size=m.nv))
    assert sorted(m2.actuated.tolist()) == sorted(m.actuated.tolist())

    def described(model):  # closures by name; couplings (URDF <mimic> has no name) by joints
        return [
            (c.joint_a, c.joint_b, c.ratio, c.offset) if isinstance(c, CouplingSpec) else c.name
            for c in model._closure_specs
        ]

    assert described(m2) == described(m)


@pytest.mark.parametrize("fixed", [False, True])
def test_depth_first_bodies_keep_their_order(fixed, tmp_path):
    """Hypothesis (fresh venv): b0 <- b1 <- b2, b3 <- b0 came back as b0, b3, b2 (the
    reader walked the tree breadth-first); the file's order is kept when it is a
    tree order, so the coordinates are the model's."""
    b = ld.ModelBuilder("dfs", gravity=(0.0, -9.81, 0.0), planar=True)
    kw = {"mass": 1.0, "com": (0.1, 0.0, 0.0), "inertia": np.eye(3) / 6}
    b.add_body("b0", "ground", ld.Revolute("z"), **kw)
    b.add_body("b1", "b0", ld.Fixed() if fixed else ld.Revolute("z"), xyz=(0.5, 0, 0), **kw)
    b.add_body("b2", "b1", ld.Revolute("z"), xyz=(0.4, 0, 0), **kw)
    b.add_body("b3", "b0", ld.Revolute("z"), xyz=(0.3, 0, 0), **kw)
    m = b.build()
    m2 = _round_trip(m, tmp_path / "dfs.urdf")
    rng = np.random.default_rng(1)
    _same_dynamics(m, m2, rng.normal(size=m.nq), rng.normal(size=m.nv), rng.normal(size=m.nv))


def test_header_names_the_load_options(tmp_path):
    p = tmp_path / "four_bar.urdf"
    ld.save(ld.examples.get("four_bar"), p)
    assert "ld.load(path, planar=True, gravity=(0, -9.8100000000000005, 0))" in p.read_text()


@pytest.mark.parametrize(
    "name, culprit",
    [("stewart", "joint 'U1' is universal"), ("five_bar_leg", "closure 'toe_aCtoe_b' is generic")],
)
def test_what_urdf_cannot_say_is_named(name, culprit, tmp_path):
    with pytest.raises(ld.ModelError, match=culprit) as e:
        ld.save(ld.examples.get(name), tmp_path / "m.urdf")
    assert "save as .toml" in str(e.value)
    assert not (tmp_path / "m.urdf").exists()


def test_pinocchio_reads_the_tree(tmp_path):
    pin = pytest.importorskip("pinocchio")
    m = ld.examples.get("closed_knee_leg")
    p = tmp_path / "leg.urdf"
    ld.save(m, p)
    pm = pin.buildModelFromUrdf(str(p))
    assert pm.nv == m.nv and [pm.names[j] for j in range(1, pm.njoints)] == list(m.joint_names)
    q = np.random.default_rng(0).uniform(-1, 1, m.nq)
    # every joint revolute: continuous in the file, (cos θ, sin θ) for Pinocchio
    qp = np.ravel(np.column_stack([np.cos(q), np.sin(q)]))
    M = pin.crba(pm, pm.createData(), qp)
    assert np.allclose(np.triu(M), np.triu(ld.crba(m, q)), atol=1e-12, rtol=0)


def test_cli_convert_to_urdf(tmp_path):
    out = tmp_path / "fb.urdf"
    r = subprocess.run(
        [sys.executable, "-m", "loopdyn", "convert", "four_bar", str(out)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert "<loop" in out.read_text()
    r = subprocess.run(
        [sys.executable, "-m", "loopdyn", "convert", "stewart", str(tmp_path / "s.urdf")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "universal" in r.stderr


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(mech=mechanisms(max_bodies=10, max_closures=3))
def test_random_mechanisms_round_trip_or_named(mech, tmp_path_factory):
    m = mech.model
    path = tmp_path_factory.mktemp("urdf") / "m.urdf"
    try:
        m2 = _round_trip(m, path)
    except ld.ModelError as e:
        assert any(w in str(e) for w in ("universal", "spherical", "generic")), str(e)
        return
    _same_dynamics(m, m2, mech.q, mech.v, mech.tau)
