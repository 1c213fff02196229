"""Parameter sweeps (``ld.sweep``, issue 16 items 3-5): a LocalCluster equals a serial
loop, a killed sweep resumes with every case stored once, a killed worker loses no case,
a failing case is recorded, the command line refuses bad parameters with one line."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

import cloudpickle  # noqa: E402 - after the skips
from typer.testing import CliRunner  # noqa: E402

import loopdyn as ld  # noqa: E402
from loopdyn.cli import app  # noqa: E402
from loopdyn.sweeps import read_manifest, run_simulate  # noqa: E402

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/
runner = CliRunner()
SRC = str(Path(ld.__file__).resolve().parents[1])


def _slow_counted(model, case, counter, delay):
    """A run that appends its case id to the file ``counter`` (one line per execution)."""
    time.sleep(delay)
    with open(counter, "a") as f:
        f.write(f"{case['case']}\n")
    return {"x2": case["x"] ** 2, "nq": model.nq}


def _counted(counter):
    return [int(s) for s in Path(counter).read_text().split()] if Path(counter).exists() else []


def test_local_cluster_of_two_workers_equals_a_serial_loop():
    grid = {"theta1": np.deg2rad([40.0, 75.0]), "tau": [-2.0, 0.0, 2.0], "v0": [0.0, 1.0]}
    opts = dict(t_end=0.5, rtol=1e-9, atol=1e-9)
    df = ld.sweep("four_bar", grid, "simulate", client=None, n_workers=2, progress=False, **opts)
    assert df["case"].tolist() == list(range(12)) and df["error"].isna().all()
    assert (df["status"] == "completed").all()
    cols = [c for c in df.columns if c not in ("case", "theta1", "tau", "v0", "wall_time", "error")]
    assert {"energy_drift", "max_residual", "max_abs_lambda", "t_final", "steps"} <= set(cols)
    for row in df.itertuples():
        model = ld.examples.four_bar(theta1=row.theta1)
        case = {"case": row.case, "theta1": row.theta1, "tau": row.tau, "v0": row.v0}
        ref = run_simulate(model, case, **opts)
        assert set(ref) == set(cols)
        for k, v in ref.items():
            want = v if isinstance(v, str) else pytest.approx(v, rel=1e-12, abs=1e-15)
            assert getattr(row, k) == want, (row.case, k)
    # the physics: energy conserved to the tolerance (work of τ removed), closures held
    assert df["energy_drift"].max() < 1e-5 and df["max_residual"].max() < 1e-10
    assert df.loc[df["tau"] == 0.0, "energy_drift"].max() < 1e-5


def test_a_failing_case_is_recorded_not_fatal(tmp_path):
    def run(model, case):
        if case["x"] == 2:
            raise ValueError(f"case {case['case']} refuses x = 2")
        return {"y": 10 * case["x"]}

    store = tmp_path / "r.parquet"
    df = ld.sweep("four_bar", {"x": [1, 2, 3]}, run, n_workers=0, store=store, progress=False)
    assert df["error"].tolist() == [None, "ValueError: case 1 refuses x = 2", None]
    assert df["y"].iloc[[0, 2]].tolist() == [10, 30] and np.isnan(df["y"].iloc[1])
    stored = ld.read_sweep(store)
    pd.testing.assert_frame_equal(stored, df)

    # a model that cannot be built is recorded per case too
    def factory(n):
        if n == 2:
            raise ld.ModelError("no model for n = 2")
        return ld.examples.four_bar_chain(N=n)

    df = ld.sweep(factory, {"n": [1, 2, 3]}, "singularity_map", n_workers=0, progress=False)
    assert df["error"].tolist() == [None, "ModelError: no model for n = 2", None]
    dof = [ld.degrees_of_freedom(ld.examples.four_bar_chain(N=n)) for n in (1, 3)]
    assert df["dof"].iloc[[0, 2]].tolist() == dof and (df["status"].iloc[[0, 2]] == "regular").all()


def test_singularity_map_finds_the_five_bar_singular_configurations():
    grid = {"theta1": np.deg2rad([30.0, 60.0]), "theta2": np.deg2rad([30.0, 60.0, 120.0])}
    df = ld.sweep("five_bar", grid, "singularity_map", n_workers=0, progress=False)
    ok = df["error"].isna()
    assert ok.any() and (df.loc[ok, "dof"] == 2).all()
    assert (df.loc[ok, "max_residual"] < 1e-10).all()
    # sigma_min of J's passive columns against an independent SVD
    for row in df[ok].itertuples():
        m = ld.examples.five_bar(theta1=row.theta1, theta2=row.theta2)
        J = ld.constraint_jacobian(m, m.q0)
        passive = np.setdiff1d(np.arange(m.nv), m.actuated)
        s = np.linalg.svd(J[:, passive], compute_uv=False)
        assert row.sigma_min_passive == pytest.approx(s[-1] / np.linalg.norm(J, 2), rel=1e-12)


def test_forward_dynamics_run_matches_the_oracle():
    df = ld.sweep(
        "four_bar", {"theta1": np.deg2rad([45.0, 100.0])}, "forward_dynamics", n_workers=0,
        progress=False, n_states=20, method="embedding",
    )  # fmt: skip
    assert df["error"].isna().all() and (df["n_failed"] == 0).all()
    assert (df["max_rel_error"] < 1e-10).all() and (df["min_quality"] > 0).all()


_SCRIPT = textwrap.dedent(
    """
    import sys, time
    sys.path[:0] = [{src!r}, {here!r}]
    import loopdyn as ld
    from test_sweep import _slow_counted
    ld.sweep("four_bar", {{"x": list(range(40))}}, _slow_counted, n_workers=0, chunk=4,
             store=sys.argv[1], resume=sys.argv[2] == "resume", progress=False,
             counter=sys.argv[3], delay=0.03)
    """
)


def test_a_killed_sweep_resumes_with_no_case_lost_or_run_twice(tmp_path):
    store, counter = tmp_path / "r.parquet", tmp_path / "counter.txt"
    script = tmp_path / "sweep_script.py"
    script.write_text(_SCRIPT.format(src=SRC, here=str(Path(__file__).parent)))
    env = os.environ | {"PYTHONPATH": SRC}
    p = subprocess.Popen([sys.executable, str(script), str(store), "new", str(counter)], env=env)
    deadline = time.time() + 120
    while len(list(store.glob("part-*.parquet"))) < 3 and p.poll() is None:
        assert time.time() < deadline, "the sweep stored nothing"
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL)
    p.wait()
    first = set(ld.read_sweep(store)["case"])
    ran_before = _counted(counter)
    assert 12 <= len(first) < 40, "killed half-way"
    assert first <= set(ran_before)
    n_before = len(ran_before)
    r = subprocess.run([sys.executable, str(script), str(store), "resume", str(counter)], env=env)
    assert r.returncode == 0
    df = ld.read_sweep(store)
    assert df["case"].tolist() == list(range(40)) and df["error"].isna().all()
    assert df["x2"].tolist() == [x * x for x in range(40)]
    ran_after = _counted(counter)[n_before:]
    assert not set(ran_after) & first, "a stored case was run again"
    assert sorted(ran_after) == sorted(set(range(40)) - first), "each missing case ran once"
    manifest, cases = read_manifest(store)
    assert manifest["cases"] == 40 and not manifest["cli_resumable"]
    assert cases["x"].tolist() == list(range(40))


def test_a_killed_worker_loses_no_case(tmp_path):
    from distributed import Client, LocalCluster

    store, counter = tmp_path / "r.parquet", tmp_path / "counter.txt"
    killed = []
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as client,
    ):

        def kill_one():
            while len(list(store.glob("part-*.parquet"))) < 2:
                time.sleep(0.01)
            pid = next(iter(client.run(os.getpid).values()))
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

        t = threading.Thread(target=kill_one, daemon=True)
        t.start()
        df = ld.sweep(
            "four_bar", {"x": list(range(40))}, _slow_counted, client=client, chunk=2,
            store=store, progress=False, counter=str(counter), delay=0.1,
        )  # fmt: skip
        t.join(5)
    assert killed, "no worker was killed"
    assert df["case"].tolist() == list(range(40)) and df["error"].isna().all()
    assert df["x2"].tolist() == [x * x for x in range(40)]
    pd.testing.assert_frame_equal(ld.read_sweep(store), df)
    assert set(_counted(counter)) == set(range(40))


def test_store_refuses_another_sweep_and_resume_of_a_finished_one_runs_nothing(tmp_path):
    store = tmp_path / "r.parquet"
    kw = dict(n_workers=0, store=store, progress=False, t_end=0.1)
    df = ld.sweep("four_bar", {"tau": [0.0, 1.0]}, **kw)
    with pytest.raises(ld.LoopdynError, match="exists: resume it"):
        ld.sweep("four_bar", {"tau": [0.0, 1.0]}, **kw)
    with pytest.raises(ld.LoopdynError, match="another sweep"):
        ld.sweep("four_bar", {"tau": [0.0, 2.0]}, resume=True, **kw)
    with pytest.raises(ld.LoopdynError, match="options"):
        ld.sweep("four_bar", {"tau": [0.0, 1.0]}, resume=True, **(kw | {"t_end": 0.2}))
    parts = sorted(store.glob("part-*"))
    again = ld.sweep("four_bar", {"tau": [0.0, 1.0]}, resume=True, **kw)
    pd.testing.assert_frame_equal(again, df)
    assert sorted(store.glob("part-*")) == parts
    assert pd.read_parquet(store).shape[0] == 2  # pandas reads the parts, not the _files


def test_bad_arguments_are_refused_before_any_work():
    with pytest.raises(ld.ModelError, match="unknown parameter 'a2'"):
        ld.sweep("four_bar", {"a2": [1.0]}, n_workers=0)
    with pytest.raises(ValueError, match="no option 'dtt'"):
        ld.sweep("four_bar", {"tau": [1.0]}, n_workers=0, dtt=1)
    with pytest.raises(ValueError, match="unknown run"):
        ld.sweep("four_bar", {"tau": [1.0]}, "simulat", n_workers=0)
    with pytest.raises(ValueError, match="unknown method 'nope'; available: augmented"):
        ld.sweep("four_bar", {"method": ["augmented", "nope"]}, n_workers=0)
    with pytest.raises(ValueError, match="result column"):
        ld.sweep("four_bar", {"error": [1.0]}, n_workers=0)


def test_missing_dask_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ld.LoopdynError, match=r'pip install "loopdyn\[sweep\]"'):
        ld.sweep("four_bar", {"tau": [1.0]}, n_workers=1, progress=False)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("theta1=30:90:4", "is an angle: give its unit"),
        ("theta1=30deg:90deg", "a range is START:STOP:NUM"),
        ("theta1=30deg:90deg:x", "NUM must be an integer"),
        ("theta1=30deg:90deg:0", "NUM must be at least 1"),
        ("a2=0.9:1.1:50", "unknown parameter 'a2'"),
        ("tau", "expected NAME=START:STOP:NUM"),
        ("tau=abc", "must be a number"),
    ],
)
def test_cli_bad_param_one_line_and_exit_2(tmp_path, spec, message):
    out = tmp_path / "r.parquet"
    result = runner.invoke(app, ["sweep", "four_bar", "--param", spec, "--out", str(out)])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], lines
    assert not out.exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--method", "nope", "-p", "rtol=1e-6,1e-8"], "unknown method 'nope'; available: aug"),
        (["--run", "forward_dynamics", "--method", "nope", "-p", "theta1=10deg:20deg:2"],
         "unknown method 'nope'; available: augmented"),
        (["--integrator", "RK5", "-p", "rtol=1e-6,1e-8"], "unknown integrator 'RK5'; available:"),
        (["--stabilization", "x", "-p", "rtol=1e-6,1e-8"], "unknown stabilization 'x'; available"),
    ],
)  # fmt: skip
def test_cli_sweep_refuses_an_unknown_choice_before_any_case(tmp_path, args, message):
    out = tmp_path / "r.parquet"
    result = runner.invoke(app, ["sweep", "four_bar", *args, "--out", str(out), "--workers", "0"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], lines
    assert not out.exists()


def test_cli_sweep_resume_and_heat_map(tmp_path):
    out, png = tmp_path / "r.parquet", tmp_path / "map.png"
    args = ["sweep", "four_bar", "-p", "theta1=40deg:80deg:3", "-p", "tau=-1,1", "--t-end",
            "0.2", "--out", str(out), "--workers", "0", "-q"]  # fmt: skip
    result = runner.invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "6 cases (0 failed)" in result.output
    df = ld.read_sweep(out)
    np.testing.assert_allclose(df["theta1"], np.repeat(np.deg2rad([40.0, 60.0, 80.0]), 2))
    assert read_manifest(out)[0]["options"] == {"t_end": 0.2}
    result = runner.invoke(app, ["sweep", "--resume", "--out", str(out), "--workers", "0", "-q"])
    assert result.exit_code == 0 and "6 cases" in result.output, result.output
    result = runner.invoke(app, ["sweep", "--resume", "four_bar", "--out", str(out)])
    assert result.exit_code == 2 and "--resume finishes" in result.output
    args = ["sweep-plot", str(out), "--x", "theta1", "--y", "tau", "--value", "energy_drift",
            "--out", str(png)]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert png.stat().st_size > 5_000
    result = runner.invoke(app, [*args[:6], "--value", "nope", "--out", str(png)])
    assert result.exit_code == 2 and "no column 'nope'" in result.output


def test_plot_sweep_text_outcome_and_aggregation(tmp_path):
    import matplotlib.pyplot as plt

    df = pd.DataFrame(
        {"case": range(8), "a": [1.0, 1.0, 2.0, 2.0] * 2, "b": ["x", "y"] * 4,
         "c": [0] * 4 + [1] * 4, "v": np.arange(8.0), "status": ["ok", "bad"] * 4,
         "error": [None] * 7 + ["ValueError: no"]}
    )  # fmt: skip
    with pytest.raises(ValueError, match="share the cell"):
        ld.plot_sweep(df, "a", "b", "v")
    fig = ld.plot_sweep(df, "a", "b", "v", tmp_path / "m.png", agg="max")
    mesh = fig.axes[0].collections[0]
    # cells (b, a): max over c of v, the failed case (7) left out
    np.testing.assert_array_equal(mesh.get_array().reshape(2, 2), [[4, 6], [5, 3]])
    plt.close(fig)
    fig = ld.plot_sweep(df[df["c"] == 0], "a", "b", "status", tmp_path / "s.png")
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["bad", "ok"]
    plt.close(fig)


def test_cli_sweep_plot_without_pandas_names_the_extra(tmp_path, monkeypatch):
    """Issue 42: no traceback when pandas is missing: one line naming loopdyn[sweep]."""
    out = tmp_path / "r.parquet"
    ld.sweep("four_bar", {"theta1": [0.5, 1.0]}, "singularity_map", store=out, n_workers=0,
             progress=False)  # fmt: skip
    monkeypatch.setitem(sys.modules, "pandas", None)
    args = ["sweep-plot", str(out), "--x", "theta1", "--y", "case", "--value", "rank", "--out",
            str(tmp_path / "m.png")]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), lines
    assert 'pip install "loopdyn[sweep]"' in lines[0] and "pandas" in lines[0]
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_cli_sweep_ctrl_c_says_how_to_resume(tmp_path, monkeypatch):
    """Issue 42: Ctrl-C during loopdyn sweep: exit 130, one line with the cases done, the
    store and the exact --resume command (no traceback); that command finishes it."""
    import loopdyn.sweeps as sweeps

    out = tmp_path / "r.parquet"
    real = sweeps._run_chunk
    calls = []

    def interrupted(spec, rows):
        calls.append(len(rows))
        if len(calls) > 1:
            raise KeyboardInterrupt
        return real(spec, rows)

    monkeypatch.setattr(sweeps, "_run_chunk", interrupted)
    args = ["sweep", "four_bar", "--run", "singularity_map", "-p", "theta1=30deg:60deg:4",
            "--chunk", "2", "--out", str(out), "--workers", "0", "-q"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 130, result.output
    lines = result.output.strip().splitlines()
    command = f"loopdyn sweep --resume --out {out}"
    assert lines == [f"interrupted: 2 of 4 cases done, stored in {out}; continue with: {command}"]
    monkeypatch.setattr(sweeps, "_run_chunk", real)
    result = runner.invoke(app, command.split()[1:])
    assert result.exit_code == 0 and "4 cases (0 failed)" in result.output, result.output


def test_sweep_plot_axes_in_the_unit_the_sweep_was_given(tmp_path):
    """Issue 42: -p theta1=...deg: the store's manifest keeps the unit, sweep-plot labels
    the axis 'theta1 (deg)' and draws it in degrees; a radian parameter stays in rad."""
    import matplotlib.pyplot as plt

    out = tmp_path / "r.parquet"
    args = ["sweep", "five_bar", "--run", "singularity_map", "-p", "theta1=30deg:90deg:3",
            "-p", "theta2=0.5rad:1rad:2", "--out", str(out), "--workers", "0", "-q"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert read_manifest(out)[0]["units"] == {"theta1": "deg", "theta2": "rad"}
    fig = ld.plot_sweep(out, "theta1", "theta2", "rank")
    ax = fig.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("theta1 (deg)", "theta2 (rad)")
    lo, hi = ax.get_xlim()
    assert lo == pytest.approx(15.0) and hi == pytest.approx(105.0)  # cell edges, degrees
    assert ax.get_ylim() == pytest.approx((0.25, 1.25))
    plt.close(fig)
    png = tmp_path / "m.png"
    result = runner.invoke(app, ["sweep-plot", str(out), "--x", "theta1", "--y", "theta2",
                                 "--value", "rank", "--out", str(png)])  # fmt: skip
    assert result.exit_code == 0 and png.stat().st_size > 5_000, result.output
