"""Garbage in, no name out (issue 37, item 6): each input below gets a loopdyn error (or a
``ValueError`` / ``TypeError``) naming the argument or element at fault and the limit or
what to do; the command line exits 2 with one line on stderr and no traceback.

1. a URDF whose joints form a cycle with no root link;
2. URDF mimic joints that mimic each other in a cycle;
3. a native TOML file nested deeper than the reader's limit (was a RecursionError);
4. something other than a ``Model`` where a model is expected (was an AttributeError);
5. ``ModelBuilder(planar=True)`` given a joint that leaves the x–y plane;
6. unbounded sizes (sweep grids, output times) refused before any work, with an estimate;
7. a non-positive or non-finite ``t_end`` (``--t-end`` on the command line).
"""

import re
import signal
from contextlib import contextmanager
from functools import cache

import numpy as np
import pytest
from typer.testing import CliRunner

import loopdyn as ld
from loopdyn.cli import app

NAN, INF = float("nan"), float("inf")
runner = CliRunner()
ENV = {"COLUMNS": "2000"}  # no wrapping by the console: "one line" is the message's own
LIMIT_S = 10  # a refusal comes at once; the inputs below ran for minutes (or forever)


@contextmanager
def time_limit(seconds=LIMIT_S):
    def handler(signum, frame):
        raise TimeoutError(f"no answer within {seconds} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@cache
def fb():
    return ld.examples.four_bar()


def _cli(*args):
    """Run the command line as a user does; the result of ``CliRunner.invoke``."""
    with time_limit():
        return runner.invoke(app, list(args), env=ENV)


def _assert_cli_refuses(r, culprit):
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output
    assert r.exit_code == 2, r.output
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1, err
    assert re.search(culprit, err, re.I), err
    return err


# --------------------------------------------------------------------------- 1. URDF cycles
_INERTIAL = (
    '<inertial><mass value="1"/>'
    '<inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial>'
)


def _urdf(links, joints, mimic=None):
    """URDF text: ``links`` names, ``joints`` (name, parent, child) revolute about z;
    ``mimic``: {joint: joint it mimics}."""
    mimic = mimic or {}
    out = ['<robot name="bad">']
    for name in links:
        inertial = "" if name == "base" else _INERTIAL
        out.append(f'<link name="{name}">{inertial}</link>')
    for name, parent, child in joints:
        m = f'<mimic joint="{mimic[name]}" multiplier="2"/>' if name in mimic else ""
        out.append(
            f'<joint name="{name}" type="continuous"><parent link="{parent}"/>'
            f'<child link="{child}"/><origin xyz="1 0 0"/><axis xyz="0 0 1"/>{m}</joint>'
        )
    out.append("</robot>")
    return "\n".join(out)


def _load_urdf(text):
    with time_limit():
        return ld.io.loads(text, "urdf", name="bad.urdf")


@pytest.mark.parametrize(
    "links, joints, cycle",
    [
        (["a", "b", "c"], [("ab", "a", "b"), ("bc", "b", "c"), ("ca", "c", "a")], "abc"),
        (["a", "b"], [("ab", "a", "b"), ("ba", "b", "a")], "ab"),
        # a rooted arm beside the cycle, and a link hanging from the cycle
        (
            ["base", "arm", "a", "b", "c", "d"],
            [
                ("arm", "base", "arm"),
                ("ab", "a", "b"),
                ("bc", "b", "c"),
                ("cd", "c", "d"),
                ("ca", "c", "a"),
            ],
            "abc",
        ),
    ],
    ids=["three-links", "two-links", "beside-a-rooted-arm"],
)
def test_a_urdf_joint_cycle_without_a_root_names_its_joints_and_links(links, joints, cycle):
    with pytest.raises(ld.ModelError) as e:
        _load_urdf(_urdf(links, joints))
    msg = str(e.value)
    assert "bad.urdf" in msg and re.search(r"cycle", msg) and re.search(r"root", msg), msg
    names = {j: (p, c) for j, p, c in joints}
    in_cycle = [j for j, (p, c) in names.items() if p in cycle and c in cycle]
    for j in in_cycle:
        assert repr(j) in msg, msg
    for link in cycle:
        assert re.search(rf"\b{link}\b", msg), msg
    assert "'cd'" not in msg and "'arm'" not in msg, msg


def test_a_urdf_loop_that_hangs_from_a_root_still_loads():
    """A link that is the child of two joints closes a loop (URDF+): not a rootless cycle."""
    text = _urdf(
        ["base", "a", "b", "c"],
        [("base_a", "base", "a"), ("ab", "a", "b"), ("bc", "b", "c"), ("ca", "c", "a")],
    )
    model = ld.io.loads(text, "urdf", name="loop.urdf", assemble=False)
    assert model.m > 0


# --------------------------------------------------------------------------- 2. mimic cycles
_CHAIN = (
    ["base", "l1", "l2", "l3"],
    [("j1", "base", "l1"), ("j2", "l1", "l2"), ("j3", "l2", "l3")],
)


@pytest.mark.parametrize(
    "mimic, cycle",
    [
        ({"j1": "j2", "j2": "j1"}, ["j1", "j2"]),
        ({"j1": "j2", "j2": "j3", "j3": "j1"}, ["j1", "j2", "j3"]),
        ({"j1": "j2", "j2": "j3", "j3": "j2"}, ["j2", "j3"]),  # j1 mimics into a cycle
        ({"j2": "j2"}, ["j2"]),
    ],
    ids=["two", "three", "tail-into-two", "itself"],
)
def test_urdf_mimic_joints_in_a_cycle_are_refused_naming_the_cycle(mimic, cycle):
    with pytest.raises(ld.ModelError) as e:
        _load_urdf(_urdf(*_CHAIN, mimic=mimic))
    msg = str(e.value)
    assert "bad.urdf" in msg and "mimic" in msg and "cycle" in msg, msg
    for j in cycle:
        assert repr(j) in msg, msg


def test_a_mimic_chain_without_a_cycle_still_loads():
    model = ld.io.loads(_urdf(*_CHAIN, mimic={"j1": "j2", "j2": "j3"}), "urdf", name="ok.urdf")
    assert len(model.metadata["couplings"]) == 2


# --------------------------------------------------------------------------- 3. deep TOML
@pytest.mark.parametrize(
    "value",
    ["[" * 50_000 + "]" * 50_000, "{a = " * 5_000 + "1" + "}" * 5_000],
    ids=["arrays", "inline-tables"],
)
def test_a_toml_file_nested_too_deep_is_a_file_error_naming_the_limit(tmp_path, value):
    from loopdyn.io.native import MAX_NESTING

    path = tmp_path / "deep.toml"
    path.write_text(f'format = "loopdyn-model"\nversion = 1\nx = {value}\n')
    with pytest.raises(ld.ModelError) as e, time_limit():
        ld.load(path)
    msg = str(e.value)
    assert "deep.toml" in msg and str(MAX_NESTING) in msg and "nest" in msg, msg


def test_brackets_inside_toml_strings_do_not_count_as_nesting(tmp_path):
    path = tmp_path / "m.toml"
    ld.save(fb(), path)
    text = path.read_text()
    deep = "[" * 500 + "{" * 500
    text = re.sub(r"(?m)^description = .*$", f"description = '{deep}'", text, count=1)
    path.write_text(text + f"# {deep}\n")
    model = ld.load(path)
    assert model.description.startswith("[[[")


# --------------------------------------------------------------------------- 4. not a Model
def _q():
    return np.array(fb().q0)


_Z = np.zeros(3)
NOT_A_MODEL = {
    "forward_dynamics": lambda m: ld.forward_dynamics(m, _q(), _Z),
    "forward_dynamics-rcr": lambda m: ld.forward_dynamics(m, _q(), _Z, method="rcr"),
    "rnea": lambda m: ld.rnea(m, _q(), _Z, _Z),
    "aba": lambda m: ld.aba(m, _q(), _Z, _Z),
    "crba": lambda m: ld.crba(m, _q()),
    "nonlinear_effects": lambda m: ld.nonlinear_effects(m, _q(), _Z),
    "assemble": lambda m: ld.assemble(m, _q()),
    "simulate": lambda m: ld.simulate(m, t_end=0.1),
    "constraints": lambda m: ld.constraints(m, _q(), _Z),
    "closure_residual": lambda m: ld.closure_residual(m, _q()),
    "constraint_jacobian": lambda m: ld.constraint_jacobian(m, _q()),
    "integrate": lambda m: ld.integrate(m, _q(), _Z, 0.1),
    "forward_kinematics": lambda m: ld.forward_kinematics(m, _q()),
    "kinetic_energy": lambda m: ld.kinetic_energy(m, _q(), _Z),
    "potential_energy": lambda m: ld.potential_energy(m, _q()),
    "forward_dynamics_batch": lambda m: ld.forward_dynamics_batch(m, [_q()], [_Z]),
    "rnea_batch": lambda m: ld.rnea_batch(m, [_q()], [_Z], [_Z]),
    "simulate_batch": lambda m: ld.simulate_batch(m, [_q()], [_Z], t_end=0.1),
    "gicm": lambda m: ld.gicm(m, _q()),
    "parallel_structure": lambda m: ld.parallel_structure(m),
    "aggregation": lambda m: ld.aggregation(m),
    "save": lambda m: ld.save(m, "/nonexistent-dir/x.toml"),
    "inverse_dynamics": lambda m: ld.inverse_dynamics(m, _q(), _Z, _Z),
    "degrees_of_freedom": lambda m: ld.degrees_of_freedom(m),
    "closure_forces": lambda m: ld.closure_forces(m, _q(), [0.0, 0.0]),
    "complete_velocity": lambda m: ld.complete_velocity(m, _q(), _Z),
}
_CASES = [pytest.param(f, id=k) for k, f in NOT_A_MODEL.items()]


@pytest.mark.parametrize("given, shown", [(None, "None"), ("four_bar", "str")], ids=["None", "str"])
@pytest.mark.parametrize("call", _CASES)
def test_a_function_given_something_else_than_a_model_says_a_model_is_expected(call, given, shown):
    fb()
    with pytest.raises(TypeError) as e:
        call(given)
    assert isinstance(e.value, ld.ModelError), repr(e.value)
    msg = str(e.value)
    assert "loopdyn Model" in msg and shown in msg, msg


def test_a_data_given_as_the_model_is_named():
    with pytest.raises(ld.ModelError, match=r"loopdyn Model.*Data"):
        ld.forward_dynamics(fb().create_data(), _q(), _Z)


# --------------------------------------------------------------------------- 5. planar
def _planar(joint, parent_kw=None, **kw):
    """A planar model: body 'a' (a hinge about z from the ground, or ``parent_kw``), then
    body 'b' on ``joint`` (named 'jb') placed by ``kw``."""
    b = ld.ModelBuilder("flat", gravity=(0, -9.81, 0), planar=True)
    pkw = dict(joint=ld.Revolute("z"), inertia=(0.1, 0.1, 0.1))
    pkw.update(parent_kw or {})
    b.add_body("a", "ground", **pkw)
    kw = dict(dict(xyz=(1.0, 0.0, 0.0), inertia=(0.1, 0.1, 0.1)), **kw)
    b.add_body("b", "a", joint, joint_name="jb", **kw)
    return b.build()


@pytest.mark.parametrize(
    "joint, kw, parent_kw, why",
    [
        (ld.Revolute("x"), {}, None, r"axis"),
        (ld.Revolute((0, 1, 1)), {}, None, r"axis"),
        (ld.Prismatic("z"), {}, None, r"axis"),
        (ld.Spherical(), {}, None, r"spherical"),
        (ld.Free(), {}, None, r"free"),
        (ld.Universal("x", "y"), {}, None, r"universal"),
        (ld.Revolute("z"), {"rpy": (0.3, 0.0, 0.0)}, None, r"axis"),
        (ld.Revolute("z"), {"xyz": (1.0, 0.0, 0.2)}, None, r"\bz\b.*plane|plane.*\bz\b"),
        # a fixed parent placed tilted tilts the hinge of b
        (ld.Revolute("z"), {}, {"joint": ld.Fixed(), "rpy": (0.0, 0.5, 0.0)}, r"axis"),
    ],
    ids=[
        "revolute-x",
        "revolute-yz",
        "prismatic-z",
        "ball",
        "free",
        "universal",
        "placement-rotated",
        "placement-off-plane",
        "parent-rotated",
    ],
)
def test_a_planar_model_refuses_a_joint_that_leaves_the_plane(joint, kw, parent_kw, why):
    with pytest.raises(ld.ModelError) as e:
        _planar(joint, parent_kw, **kw)
    msg = str(e.value)
    assert "'jb'" in msg and re.search(r"planar", msg) and re.search(why, msg, re.I), msg
    assert "planar=False" in msg, msg


@pytest.mark.parametrize(
    "joint, kw",
    [
        (ld.Revolute("-z"), {}),
        (ld.Prismatic((1.0, 1.0, 0.0)), {}),
        (ld.Fixed(), {}),
        (ld.Revolute("z"), {"rpy": (0.0, 0.0, 1.0)}),  # about z: stays in the plane
        (ld.Revolute("z"), {"rpy": (np.pi, 0.0, 0.0)}),  # flipped: the hinge is about -z
        (ld.Revolute("y"), {"rpy": (np.pi / 2, 0.0, 0.0)}),  # y turned onto z
    ],
    ids=["revolute-minus-z", "prismatic-xy", "fixed", "rotated-about-z", "flipped", "y-onto-z"],
)
def test_a_planar_model_accepts_joints_that_stay_in_the_plane(joint, kw):
    assert _planar(joint, **kw).nbodies == 2


# --------------------------------------------------------------------------- 6. sizes
def test_cli_sweep_with_a_billion_values_is_refused_at_once_with_the_estimate(tmp_path):
    pytest.importorskip("pandas")
    r = _cli("sweep", "four_bar", "-p", "theta1=0deg:1deg:1000000000", "--out",
             str(tmp_path / "s.parquet"), "--workers", "0", "-q")  # fmt: skip
    err = _assert_cli_refuses(r, r"theta1")
    assert re.search(r"1,?000,?000,?000", err) and re.search(r"[GTM]B", err), err
    assert "--max-cases" in err, err


def test_sweep_of_a_huge_grid_is_refused_before_building_it():
    pytest.importorskip("pandas")
    from loopdyn.sweeps import MAX_CASES

    grid = {"theta1": np.linspace(0.5, 1.5, 100_000), "tau": np.linspace(-1, 1, 100_000)}
    with pytest.raises(ValueError) as e, time_limit():
        ld.sweep("four_bar", grid, n_workers=0, progress=False)
    msg = str(e.value)
    assert "max_cases" in msg and f"{MAX_CASES:,}" in msg and re.search(r"[GTM]B", msg), msg


def test_sweep_max_cases_bounds_the_grid():
    pytest.importorskip("pandas")
    with pytest.raises(ValueError, match="max_cases"):
        ld.sweep("four_bar", {"tau": [0.0, 1.0, 2.0]}, n_workers=0, progress=False, max_cases=2)


def test_cli_simulate_with_ten_million_points_is_refused_at_once():
    r = _cli("simulate", "four_bar", "--t-end", "1", "--points", "10000000", "-q")
    err = _assert_cli_refuses(r, r"--points")
    assert re.search(r"10,?000,?000", err) and re.search(r"[GM]B", err), err


@pytest.mark.parametrize("kind", ["count", "array"])
def test_simulate_with_ten_million_output_times_is_refused_with_the_estimate(kind):
    from loopdyn.sim.simulate import MAX_OUTPUTS

    t_eval = 10**7 if kind == "count" else np.linspace(0.0, 1.0, 10**7)
    with pytest.raises(ValueError) as e, time_limit():
        ld.simulate(fb(), t_end=1.0, t_eval=t_eval)
    msg = str(e.value)
    assert "t_eval" in msg and "max_outputs" in msg and f"{MAX_OUTPUTS:,}" in msg, msg
    assert re.search(r"[GM]B", msg), msg


def test_simulate_max_outputs_bounds_the_output_times():
    with pytest.raises(ValueError, match="max_outputs"):
        ld.simulate(fb(), t_end=1e-3, t_eval=11, max_outputs=10)
    assert len(ld.simulate(fb(), t_end=1e-3, t_eval=10, max_outputs=10).t) == 10


# --------------------------------------------------------------------------- 7. t_end
@pytest.mark.parametrize("t_end", [0.0, -1.0, NAN, INF, "abc"])
def test_simulate_refuses_a_t_end_that_is_not_positive_and_finite(t_end):
    with pytest.raises(ValueError, match="t_end"):
        ld.simulate(fb(), t_end=t_end)


@pytest.mark.parametrize("value", ["-1", "nan", "0", "inf"])
@pytest.mark.parametrize("option", ["-T", "--t-end"])
def test_cli_simulate_refuses_a_bad_t_end_naming_the_option(option, value):
    _assert_cli_refuses(_cli("simulate", "four_bar", option, value, "-q"), r"--t-end")


@pytest.mark.parametrize("value", ["-1", "nan"])
def test_cli_sweep_refuses_a_bad_t_end_naming_the_option(tmp_path, value):
    pytest.importorskip("pandas")
    r = _cli("sweep", "four_bar", "-p", "theta1=30deg", "-T", value, "--out",
             str(tmp_path / "s.parquet"), "--workers", "0", "-q")  # fmt: skip
    _assert_cli_refuses(r, r"--t-end")
    assert not (tmp_path / "s.parquet").exists()


def test_sweep_refuses_a_bad_shared_option_before_running_any_case():
    pytest.importorskip("pandas")
    with pytest.raises(ValueError, match="t_end"):
        ld.sweep("four_bar", {"tau": [0.0, 1.0]}, n_workers=0, progress=False, t_end=-1.0)
