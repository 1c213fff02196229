"""The command line: ``loopdyn models`` and ``loopdyn simulate`` end to end."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import loopdyn as ld
from loopdyn.cli import app

runner = CliRunner()


def test_models_lists_the_catalog_with_dof():
    result = runner.invoke(app, ["models"], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    for name in ld.examples.names():
        assert name in result.output
    line = next(ln for ln in result.output.splitlines() if "four_bar" in ln)
    # bodies 3, nq 3, nv 3, loops 1, rows 2, DOF 1
    assert [c.strip() for c in line.split("│")[2:8]] == ["3", "3", "3", "1", "2", "1"]


def test_simulate_writes_csv_plot_and_animation(tmp_path):
    csv, png, gif = tmp_path / "traj.csv", tmp_path / "traj.png", tmp_path / "traj.gif"
    args = [
        "simulate", "four_bar", "-p", "theta1=90deg", "--t-end", "0.5", "--points", "51",
        "--method", "augmented", "--integrator", "DOP853", "--stabilization", "projection",
        "--out", str(csv), "--plot", str(png), "--animate", str(gif), "--fps", "10", "-q",
    ]  # fmt: skip
    result = runner.invoke(app, args, env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    for word in ("steps", "wall time", "max closure residual", "max |E(t) - E(0)|"):
        assert word in result.output
    table = np.loadtxt(csv, delimiter=",", skiprows=1)
    header = csv.read_text().splitlines()[0].split(",")
    assert table.shape == (51, len(header))
    assert table[0, header.index("q0")] == pytest.approx(np.pi / 2)
    assert np.abs(table[:, header.index("residual_position")]).max() < 1e-11
    assert png.stat().st_size > 10_000 and gif.stat().st_size > 1_000


def test_simulate_reports_the_energy_drift_relative_to_e0_only_where_e0_is_not_zero(tmp_path):
    """The four-bar from 90 deg: E(0) = 33 J, the drift relative to it.  A model of nothing
    that moves (nv = 0, E = 0 throughout; it also simulates now): no relative measure
    (a drift of 1e-9 J was reported as 8.6e+290 relative, divided by 1e-300)."""
    args = ["simulate", "four_bar", "-p", "theta1=90deg", "--t-end", "0.2", "-q"]
    result = runner.invoke(app, args, env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    line = next(ln for ln in result.output.splitlines() if "max |E(t) - E(0)|" in ln)
    assert "relative)" in line and "e+" not in line.split("(")[1]
    frozen = tmp_path / "frozen.toml"
    b = ld.ModelBuilder("frozen")
    b.add_body("a", "ground", ld.Fixed(), xyz=(1, 0, 0))
    b.add_body("c", "a", ld.Fixed(), xyz=(0, 1, 0))
    b.add_frame("fa", "a", xyz=(0, 1, 0))
    b.add_frame("fc", "c")
    b.add_closure("ball", "fa", "fc", "ball")
    ld.io.save(b.build(), frozen)
    result = runner.invoke(app, ["simulate", str(frozen), "--t-end", "0.1", "-q"],
                           env={"COLUMNS": "160"})  # fmt: skip
    assert result.exit_code == 0, result.output
    line = next(ln for ln in result.output.splitlines() if "max |E(t) - E(0)|" in ln)
    assert "no relative measure" in line, line


def test_simulate_npz_round_trip_and_options(tmp_path):
    out = tmp_path / "traj.npz"
    args = [
        "simulate", "five_bar", "--t-end", "0.2", "--points", "11", "--integrator", "RK4",
        "--dt", "0.005", "--stabilization", "partitioning", "--tau", "1,-1", "--out", str(out),
    ]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    traj = ld.Trajectory.load(out)
    assert traj.model_name == "five_bar" and traj.integrator == "RK4"
    assert traj.stabilization == "partitioning" and len(traj) == 11
    np.testing.assert_array_equal(traj.tau[:, [0, 2]], np.tile([1.0, -1.0], (11, 1)))


def test_simulate_stops_at_a_singularity_and_writes_the_partial_trajectory(tmp_path):
    out = tmp_path / "partial.npz"
    args = [
        "simulate", "five_bar", "-p", "theta1=80deg", "-p", "theta2=70deg", "--t-end", "1",
        "--stabilization", "partitioning", "--independent", "0,2", "--no-repartition",
        "--out", str(out),
    ]  # fmt: skip
    result = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 1
    assert "simulation stopped" in result.output and "(stopped)" in result.output
    traj = ld.Trajectory.load(out)
    assert not traj.completed and 0.4 < traj.t[-1] < 0.55
    # the step that jumped over the fold (det J_d changed sign) left nothing behind:
    # every recorded state is on the motion.  Past the fold the energy fell by 34 %;
    # approaching it the partition's conditioning (and so the accuracy of the last
    # states) degrades, by an amount that depends on where rounding lands, so the
    # bound is the one that tells the two apart; far from the fold the energy is kept.
    assert "changed sign" in traj.message or "did not converge" in traj.message
    drift = np.abs(traj.energy_drift) / abs(traj.energy[0])
    assert drift.max() < 1e-3
    assert drift[: int(0.8 * len(drift))].max() < 1e-6


def test_simulate_reports_bad_input():
    result = runner.invoke(app, ["simulate", "no_such_model"])
    assert result.exit_code == 2 and "unknown catalog model" in result.output
    result = runner.invoke(app, ["simulate", "four_bar", "--method", "nope", "--t-end", "0.1"])
    assert result.exit_code == 2 and "unknown method" in result.output
    result = runner.invoke(app, ["simulate", "four_bar", "-p", "theta1"])
    assert result.exit_code != 0
    result = runner.invoke(app, ["simulate", "four_bar", "--tau", "nan"])
    assert result.exit_code == 2 and "[nan" in result.output


def test_installed_entry_point_and_python_m(tmp_path):
    """The real console script (pyproject [project.scripts]) and ``python -m loopdyn``."""
    csv = tmp_path / "t.csv"
    cmd = [sys.executable, "-m", "loopdyn", "simulate", "four_bar", "--t-end", "0.1"]
    done = subprocess.run(
        [*cmd, "--points", "5", "--out", str(csv), "-q"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert csv.exists() and "wrote" in done.stdout
    exe = shutil.which("loopdyn")
    if exe is None:
        pytest.skip("the loopdyn console script is not installed (pip install -e .)")
    done = subprocess.run([exe, "--help"], capture_output=True, text=True)
    assert done.returncode == 0 and "simulate" in done.stdout and "models" in done.stdout


def test_bench_times_every_method_against_the_oracle():
    result = runner.invoke(app, ["bench", "four_bar", "--seconds", "0.01"], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    for name in ld.methods.dynamics.METHODS:
        line = next(ln for ln in result.output.splitlines() if f"loopdyn {name}" in ln)
        assert float(line.split("│")[-2]) < 1e-10  # relative error against augmented
    assert "pin.constraintDynamics" in result.output


def test_every_catalog_parameter_is_declared_and_typed_on_the_command_line():
    """Each factory's numeric/flag/text arguments are in its table (``models --params``);
    the command line reads each unit and names a bad value."""
    import inspect

    for name in ld.examples.names():
        factory = ld.examples._factory(name)
        declared = {p.name for p in ld.examples.parameters(name)}
        args = set(inspect.signature(factory).parameters) - {"joint_types"}
        assert args == declared, name
    result = runner.invoke(app, ["models", "--params"], env={"COLUMNS": "200"})
    assert result.exit_code == 0 and "knee_angle" in result.output and "flag" in result.output
    ok = runner.invoke(app, ["info", "closed_knee_leg", "-p", "geared=true"])
    assert ok.exit_code == 0 and "knee_rotor" in ok.output, ok.output
    for bad, words in [
        (["info", "closed_knee_leg", "-p", "geared=maybe"], "flag"),
        (["info", "four_bar_cut", "-p", "cut=sideways"], "internal"),
        (["info", "four_bar_chain", "-p", "N=2.5"], "integer"),
        (["info", "geared_chain", "-p", "link_length=-1"], "positive"),
    ]:
        result = runner.invoke(app, bad)
        assert result.exit_code == 2 and words in result.output, (bad, result.output)
    with pytest.raises(ld.ModelError, match="geared"):
        ld.examples.get("closed_knee_leg", geared="yes")


def test_outputs_go_into_new_folders_and_unwritable_places_are_refused(tmp_path):
    """The README's first command writes into out/, which a fresh clone does not have."""
    out = tmp_path / "new" / "deeper" / "traj.csv"
    result = runner.invoke(app, ["simulate", "four_bar", "--t-end", "0.05", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert out.is_file()
    blocker = tmp_path / "file.txt"
    blocker.write_text("x")
    bad = runner.invoke(
        app, ["simulate", "four_bar", "--t-end", "0.05", "--out", str(blocker / "t.csv")]
    )
    assert bad.exit_code == 2 and "is a file" in bad.output


@pytest.mark.parametrize("command", ["simulate", "sweep", "view", "bench", "info", "convert"])
def test_help_lists_method_choices_tau_units_and_model_suffixes(command):
    """Issue 42: --method's help names its choices, --tau's its units, MODEL's .xml."""
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "400", "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    if command in ("simulate", "sweep", "view", "bench"):
        for name in ld.methods.dynamics.METHODS:
            assert name in text, (command, name)
    if command == "simulate":
        assert "N·m per revolute and N per prismatic coordinate" in text
    if command != "sweep":  # a sweep takes catalog names only
        assert ".xml" in text and ".urdf" in text


# modules only some commands use (0.1-0.35 s each at import): not on the path every
# command takes, ``import loopdyn.cli``
_LAZY = (
    "networkx", "matplotlib", "scipy.linalg", "scipy.optimize", "scipy.integrate",
    "scipy.sparse", "pinocchio", "mujoco", "PIL",
)  # fmt: skip
_SRC = str(Path(ld.__file__).resolve().parents[1])


def _python(code, cwd):
    env = dict(os.environ, PYTHONPATH=_SRC)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env,
        timeout=300,
    )  # fmt: skip


def test_starting_the_command_line_imports_no_optional_heavy_module(tmp_path):
    r = _python("import sys, loopdyn.cli; print(' '.join(sorted(sys.modules)))", tmp_path)
    assert r.returncode == 0, r.stderr
    loaded = set(r.stdout.split())
    assert "loopdyn.cli" in loaded
    assert [m for m in _LAZY if m in loaded] == []


def test_console_script_exits_after_the_exit_handlers_with_the_command_status(tmp_path):
    """``loopdyn.cli.run`` (the console script) ends the process without the
    interpreter's teardown: the command's output and files are complete, the exit
    handlers ran (a background build starts there), the status is the command's."""
    code = (
        "import atexit, sys\n"
        "atexit.register(lambda: print('handler ran'))\n"
        "from loopdyn.cli import run\n"
        "sys.argv[1:] = sys.argv[1:] or {argv!r}\n"
        "run()\n"
        "print('run returned')\n"
    )
    ok = _python(code.format(argv=["convert", "four_bar", "m.toml"]), tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout == "wrote m.toml\nhandler ran\n", ok.stdout  # not 'run returned'
    assert ld.load(tmp_path / "m.toml").nq == ld.examples.four_bar().nq
    bad = _python(code.format(argv=["convert", "four_bar", "m.txt"]), tmp_path)
    assert bad.returncode == 2 and "unknown file type" in bad.stderr, bad.stderr
    assert bad.stdout == "handler ran\n"
