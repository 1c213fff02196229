"""Stills: the skeleton's camera and style (viz.plotting) and the rendered 3D scene
(viz.render)."""

import numpy as np
import pytest
from PIL import Image

import loopdyn as ld
from loopdyn.viz.plotting import _segment_colors, skeleton
from loopdyn.viz.render import render_still


def test_spatial_stills_use_an_isometric_camera_fitted_to_the_motion():
    m = ld.examples.spatial_ladder()
    v0 = ld.complete_velocity(m, m.q0, [0.5, 0.3] + [0.0] * (m.nv - 2), fixed=[0, 1])
    traj = ld.simulate(m, m.q0, v0, 0.5, t_eval=np.linspace(0, 0.5, 11))
    fig = traj.strobe(n=3)
    ax = fig.axes[0]
    assert (ax.elev, ax.azim) == (35.26, -45.0)
    # the box holds every body origin of every drawn instant
    P = np.concatenate([ld.forward_kinematics(m, q).Xw[:, 3] for q in traj.q])
    for lim, k in ((ax.get_xlim(), 0), (ax.get_ylim(), 1), (ax.get_zlim(), 2)):
        assert lim[0] <= P[:, k].min() and P[:, k].max() <= lim[1]


def test_planar_stills_stay_in_the_plane_one_colour_per_body():
    m = ld.examples.four_bar()
    traj = ld.simulate(m, m.q0, np.zeros(m.nv), 0.2, t_eval=np.linspace(0, 0.2, 5))
    fig = traj.strobe(n=2)
    assert not hasattr(fig.axes[0], "elev")  # a 2D axes: the x–y plane
    colors = _segment_colors(skeleton(m))
    assert colors == ["C0", "C1", "C2"]


def test_render_still_draws_the_scene(tmp_path):
    png = tmp_path / "stewart.png"
    fig = render_still(ld.examples.stewart(), png)
    assert fig.axes[0].elev == 35.26
    img = np.asarray(Image.open(png).convert("RGB")).astype(int)
    r, g, b = img[..., 0], img[..., 1], img[..., 2]
    assert ((r > g + 20) & (g > b + 20)).sum() > 2000  # the legs, on loops: orange


def test_animate_scene_writes_one_image_per_video_frame(tmp_path):
    from loopdyn.viz.render import animate_scene

    m = ld.examples.four_bar()
    traj = ld.simulate(m, m.q0, np.zeros(m.nv), 0.4, t_eval=np.linspace(0, 0.4, 21))
    gif = animate_scene(traj, tmp_path / "fb.gif", fps=10, dpi=40)
    with Image.open(gif) as im:
        assert im.n_frames == 5  # 0.4 s at 10 frames per second, both ends
    with pytest.raises(ValueError, match="gif"):
        animate_scene(traj, tmp_path / "fb.avi")
