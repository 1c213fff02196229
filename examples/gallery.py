"""The pictures of docs/gallery.md, made with loopdyn's own simulation and plotting.

Run from the repository root (needs the test extra ``example-robot-data`` for the
robot files)::

    python examples/gallery.py            # writes docs/gallery/*.png and *.gif

Each entry: a model (catalog or a real robot file), a short simulation, a strobe still
(``Trajectory.strobe``), an animation (``Trajectory.animate``), a still of the 3D scene
at the last instant (``loopdyn.viz.render.render_still``: meshes where the file has
them) and, where Chromium is on the PATH, a screenshot of the self-contained HTML page
(``ld.export_html``, ``loopdyn.viz.html.screenshot``).  ``--only-3d`` makes the 3D
pictures only.
"""

import argparse
from pathlib import Path

import numpy as np

import loopdyn as ld


def robot_file(*parts):
    """A file of the example-robot-data package (installed next to Pinocchio)."""
    import pinocchio

    for p in Path(pinocchio.__file__).resolve().parents:
        cand = p / "share" / "example-robot-data" / "robots" / Path(*parts)
        if cand.is_file():
            return cand
    raise SystemExit(f"example-robot-data is not installed: no {Path(*parts)}")


def four_bar():
    model = ld.examples.four_bar(theta1=np.pi / 2)
    return model, ld.simulate(model, t_end=2.0, t_eval=201), "coupler_tip"


def cassie():
    """Cassie (reduced SDF: pelvis on a vertical slider, both legs with their pushrod
    and plantar-rod loops) dropped with its hips swinging."""
    model = ld.load(robot_file("cassie_description", "robots", "cassie_reduced.sdf"))
    v = np.zeros(model.nv)
    for name, w in (("left-pitch-op", 4.0), ("right-pitch-op", -4.0),
                    ("left-knee-op", -3.0), ("right-knee-op", 3.0)):  # fmt: skip
        v[model.v_slice(name)] = w
    v = ld.complete_velocity(model, model.q0, v, fixed=[])
    return model, ld.simulate(model, model.q0, v, t_end=0.4, t_eval=81), None


def ur5():
    """A UR5 arm (URDF) released from a horizontal pose under gravity."""
    model = ld.load(robot_file("ur_description", "urdf", "ur5_robot.urdf"))
    q = np.array(model.q0)
    q[model.q_slice("shoulder_lift_joint")] = -np.pi / 6
    q[model.q_slice("elbow_joint")] = np.pi / 3
    return model, ld.simulate(model, q, t_end=1.0, t_eval=101), None


def stewart():
    """The 6-UPS Stewart platform falling under gravity, pistons free (DeNOC)."""
    model = ld.examples.stewart()
    traj = ld.simulate(model, t_end=0.5, t_eval=51, method="denoc", stabilization="partitioning")
    return model, traj, None


def spatial_ladder():
    """The spatial ladder (3 loops, 2 DOF) swinging from a push on its first post."""
    model = ld.examples.spatial_ladder()
    v = np.zeros(model.nv)
    v[:2] = (1.0, 0.6)
    v = ld.complete_velocity(model, model.q0, v, fixed=[0, 1])
    return model, ld.simulate(model, model.q0, v, t_end=2.0, t_eval=101), None


ENTRIES = {
    "four_bar": four_bar,
    "cassie": cassie,
    "ur5": ur5,
    "stewart": stewart,
    "spatial_ladder": spatial_ladder,
}


def pictures_3d(name, model, traj, out):
    """``{name}_3d.png`` (matplotlib) and, with Chromium, ``{name}_html.png``."""
    import tempfile

    from loopdyn.viz.html import find_browser, screenshot
    from loopdyn.viz.render import render_still

    render_still(traj, out / f"{name}_3d.png", frame=-1, model=model, dpi=90)
    if find_browser() is None:
        print(f"{name}: no Chromium on the PATH, no HTML screenshot")
        return
    with tempfile.TemporaryDirectory() as tmp:
        page = ld.export_html(traj, Path(tmp) / f"{name}.html", model=model, max_frames=100)
        screenshot(page, out / f"{name}_html.png", size=(900, 650))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="docs/gallery", help="output folder")
    ap.add_argument("names", nargs="*", default=list(ENTRIES), help="entries to make")
    ap.add_argument("--only-3d", action="store_true", help="the 3D pictures only")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in a.names:
        model, traj, trace = ENTRIES[name]()
        if not a.only_3d:
            traj.strobe(out / f"{name}.png", n=6, model=model, trace=trace)
            traj.animate(out / f"{name}.gif", model=model, fps=15, speed=traj.t[-1] / 3, dpi=60)
        pictures_3d(name, model, traj, out)
        print(
            f"{name}: {model.nbodies} bodies, nv = {model.nv}, closure rows = {model.m}, "
            f"{traj.stats['steps']} steps, max |Φ| = {traj.max_residual:.1e}, "
            f"energy drift {np.abs(traj.energy_drift).max():.1e} J"
        )


if __name__ == "__main__":
    main()
