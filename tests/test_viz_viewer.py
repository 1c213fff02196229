"""The interactive viewer (loopdyn.viz.viewer, viser) and ``loopdyn view``."""

import socket
import time
import urllib.request

import numpy as np
import pytest
from typer.testing import CliRunner

import loopdyn as ld
from loopdyn.cli import app

runner = CliRunner()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def viser():
    return pytest.importorskip("viser", reason="the viewer needs viser (pip install loopdyn[viz])")


def test_server_serves_the_client_and_holds_the_model(viser):
    m = ld.examples.four_bar()
    with ld.view(m, port=_free_port(), block=False) as v:
        html = urllib.request.urlopen(v.url, timeout=20).read().decode()
        assert "<html" in html.lower()  # the web client, served from the package
        assert len(v.bodies) == m.nbodies
        # the crank is actuated and a valid independent coordinate: one slider
        np.testing.assert_array_equal(v.independent, [0])
        assert len(v.sliders) == 1
        np.testing.assert_allclose(v.bodies[1].position, v.scene.poses[0, 1, :3, 3])


def test_dragging_the_crank_reassembles_the_loop(viser):
    m = ld.examples.four_bar()
    with ld.view(m, port=_free_port(), block=False) as v:
        for offset in (0.4, 2.5, -1.0):  # the crank turns; the loop follows on its branch
            q = v.set_offsets([offset])
            assert abs(q[0] - (m.q0[0] + offset)) < 1e-12
            assert np.abs(ld.closure_residual(m, q)).max() < 1e-10
            Xw = ld.forward_kinematics(m, q).Xw
            np.testing.assert_allclose(v.bodies[2].position, Xw[2, 3], atol=1e-12)
        assert "max \\|Φ\\|" in v.info.content


def test_trajectory_scrub_and_play(viser):
    m = ld.examples.four_bar()
    traj = ld.simulate(m, m.q0, np.zeros(m.nv), 2.0, t_eval=np.linspace(0, 2, 101))
    with ld.view(traj, port=_free_port(), block=False) as v:
        assert v.scene.n_frames == 101
        v.slider.value = 40  # scrubbing shows that frame
        assert v.frame == 40
        np.testing.assert_allclose(v.bodies[1].position, v.scene.poses[40, 1, :3, 3])
        assert f"{traj.t[40]:.3f} s" in v.info.content
        v.slider.value = 0
        v.speed.value = 2.0
        v.play()
        deadline = time.time() + 10
        while v.frame == 0 and time.time() < deadline:
            time.sleep(0.05)
        v.pause()
        assert v.frame > 0


def test_cli_view_html(tmp_path):
    pytest.importorskip("plotly", reason="the HTML export needs plotly")
    out = tmp_path / "fb.html"
    r = runner.invoke(app, ["view", "four_bar", "--t-end", "0.5", "--html", str(out)])
    assert r.exit_code == 0, r.output
    assert out.stat().st_size > 1_000_000  # plotly.js inlined
    traj = ld.simulate(ld.examples.four_bar(), t_end=0.2)
    traj.save(tmp_path / "t.npz")
    r = runner.invoke(app, ["view", str(tmp_path / "t.npz"), "--html", str(tmp_path / "t.html")])
    assert r.exit_code == 0, r.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["view", "nosuch", "--html", "x.html"], "unknown catalog model"),
        (["view", "four_bar", "--html", "x.png"], "unknown file type"),
        (["view", "missing.npz"], "not found"),
        (["view", "four_bar", "--model", "four_bar"], "--model"),
    ],
)
def test_cli_view_errors_are_one_line_exit_2(args, message):
    r = runner.invoke(app, args)
    assert r.exit_code == 2
    assert message in r.output and len(r.output.strip().splitlines()) == 1
