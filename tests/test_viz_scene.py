"""The 3D scene as data (loopdyn.viz.scene): bodies, meshes, markers, loops, frames."""

import glob
from pathlib import Path

import numpy as np
import pytest

import loopdyn as ld
from loopdyn.viz.scene import build_scene, capsule, inertia_box, loop_bodies


def _erd_cassie():
    try:
        import pinocchio
    except ImportError:  # pragma: no cover
        return None
    for p in Path(pinocchio.__file__).resolve().parents:
        cand = p / "share" / "example-robot-data" / "robots" / "cassie_description" / "robots"
        if cand.is_dir():
            files = glob.glob(str(cand / "cassie_v2.sdf"))
            return files[0] if files else None
    return None


CASSIE = _erd_cassie()


def test_four_bar_scene_bodies_markers_loop():
    m = ld.examples.four_bar()
    s = build_scene(m)
    assert s.n_frames == 1 and s.poses.shape == (1, 3, 4, 4)
    # one capsule per link (crank→coupler joint, coupler→closure, rocker→closure)
    assert {v.body for v in s.visuals} == {0, 1, 2}
    assert all(v.kind == "capsule" and v.source == "skeleton" for v in s.visuals)
    # three joint markers and both ends of the one closure
    kinds = [mk.kind for mk in s.markers]
    assert kinds.count("joint") == 3 and kinds.count("closure") == 2
    # the closure's two ends coincide in an assembled configuration
    P = s.marker_positions(0)
    ends = [i for i, mk in enumerate(s.markers) if mk.kind == "closure"]
    assert np.linalg.norm(P[ends[0]] - P[ends[1]]) < 1e-12
    # every link of the four-bar is on its loop
    assert s.loops == [("coupler_rocker", (0, 1, 2))]
    assert all(v.in_loop for v in s.visuals)
    assert s.residual[0] < 1e-12
    np.testing.assert_allclose(s.energy[0], ld.total_energy(m, m.q0, np.zeros(m.nv)))
    # the crank (0.3 m) spans from its ground pivot: the scene's box holds it
    lo, hi = s.bounds()
    assert hi[0] - lo[0] > 1.0 and np.all(hi >= lo)


def test_capsule_reaches_both_ends_and_world_vertices_follow_pose():
    V, F = capsule([0, 0, 0], [1, 0, 0], 0.1)
    assert F.max() < len(V)
    np.testing.assert_allclose([V[:, 0].min(), V[:, 0].max()], [-0.1, 1.1], atol=1e-12)
    m = ld.examples.four_bar()
    s = build_scene(m)
    v = s.visuals[0]
    X = s.poses[0, v.body]
    np.testing.assert_allclose(s.world_vertices(0), v.vertices @ X[:3, :3].T + X[:3, 3])


def test_inertia_box_of_a_uniform_box():
    m, a = 2.0, np.array([0.3, 0.2, 0.1])
    I = m / 12 * np.diag([a[1] ** 2 + a[2] ** 2, a[0] ** 2 + a[2] ** 2, a[0] ** 2 + a[1] ** 2])
    size, _ = inertia_box(m, np.zeros(3), I)
    np.testing.assert_allclose(np.sort(size), np.sort(a), rtol=1e-12)


def test_trajectory_frames_residual_energy():
    m = ld.examples.four_bar()
    traj = ld.simulate(m, m.q0, np.zeros(m.nv), 0.5, t_eval=np.linspace(0, 0.5, 31))
    s = build_scene(traj)
    assert s.n_frames == 31
    np.testing.assert_array_equal(s.t, traj.t)
    np.testing.assert_array_equal(s.energy, traj.energy)
    # poses are forward kinematics of each frame
    Xw = ld.forward_kinematics(m, traj.q[17]).Xw
    np.testing.assert_allclose(s.poses[17, :, :3, 3], Xw[:, 3])
    # at most max_frames, first and last kept
    s10 = build_scene(traj, max_frames=10)
    assert s10.n_frames == 10 and s10.t[0] == traj.t[0] and s10.t[-1] == traj.t[-1]


def test_spatial_ladder_loops_and_empty_trajectory():
    m = ld.examples.spatial_ladder()
    loops = loop_bodies(m)
    assert len(loops) == m.nc
    s = build_scene(m)
    assert sum(mk.kind == "closure" for mk in s.markers) == 2 * m.nc
    traj = ld.simulate(m, m.q0, np.zeros(m.nv), 0.1, t_eval=np.linspace(0, 0.1, 3))
    empty = ld.Trajectory(**{k: getattr(traj, k)[:0] for k in ld.sim.trajectory._ARRAYS},
                          model_name=traj.model_name, model=m)  # fmt: skip
    with pytest.raises(ValueError, match="empty"):
        build_scene(empty)


def test_body_without_points_is_its_inertia_box():
    b = ld.ModelBuilder("box", gravity=(0, 0, -9.81))
    I = 3.0 / 12 * np.diag([0.2**2 + 0.1**2, 0.4**2 + 0.1**2, 0.4**2 + 0.2**2])
    b.add_body("slab", ld.GROUND, ld.Revolute([0, 0, 1]), mass=3.0, com=[0, 0, 0], inertia=I)
    s = build_scene(b.build())
    (v,) = s.visuals
    assert v.source == "inertia" and v.kind == "box"
    np.testing.assert_allclose(np.sort(np.ptp(v.vertices, axis=0)), [0.1, 0.2, 0.4], rtol=1e-9)


@pytest.mark.skipif(CASSIE is None, reason="example-robot-data is not installed")
def test_cassie_meshes_from_the_file():
    pytest.importorskip("trimesh", reason="meshes need trimesh (pip install loopdyn[viz])")
    m = ld.load(CASSIE)
    s = build_scene(m)
    meshes = [v for v in s.visuals if v.kind == "mesh"]
    assert len(meshes) == 23 and not s.notes
    assert all(Path(v.source).suffix == ".stl" for v in meshes)
    assert sum(v.faces.shape[0] for v in meshes) > 10_000
    # the pelvis mesh follows the pelvis
    assert any(v.name == "pelvis_visual" and v.body == m.body_index("pelvis") for v in meshes)
    assert len(s.loops) == 4 and sum(mk.kind == "closure" for mk in s.markers) == 8
    # sticks on request
    assert all(v.kind != "mesh" for v in build_scene(m, meshes=False).visuals)
