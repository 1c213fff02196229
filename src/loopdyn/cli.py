"""The ``loopdyn`` command line: ``loopdyn models``, ``loopdyn simulate MODEL ...``,
``loopdyn bench MODEL``.

    loopdyn simulate four_bar -p theta1=90deg --t-end 5 --out traj.csv \\
        --plot traj.png --animate traj.gif
"""

import sys
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import numpy as np
import typer

from loopdyn.cli_common import (  # noqa: F401 - the commands' shared helpers
    _FILE_SUFFIXES,
    LOAD_OPTIONS,
    MODEL_FILES,
    MODEL_HELP,
    SIMULATE_OPTIONS,
    LoadOption,
    LoopsOption,
    _check_output,
    _console,
    _errors,
    _esc,
    _is_model_file,
    _load_model,
    _parse_load_options,
    _parse_params,
    _parse_value,
    _parse_vector,
    _Usage,
)
from loopdyn.methods import dynamics as _dynamics  # the package is imported already

app = typer.Typer(
    name="loopdyn",
    help="Exact, fast dynamics of closed-loop multibody systems.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


#: --method's help: the choices, from the dispatcher
METHOD_HELP = "forward dynamics: " + " ".join(_dynamics.METHODS)
#: --tau's help: what a value means
TAU_HELP = (
    "constant joint forces, comma-separated: nv values or one per actuator, "
    "N·m per revolute and N per prismatic coordinate"
)


def _note_compiling(entries):
    """One line on stderr when the first call will compile kernels (not cached yet), or,
    under the ``auto`` tier policy (``loopdyn.kernels.tiers``), when it runs eagerly while
    they are compiled in the background."""
    from loopdyn.kernels import tiers

    if all(e.is_cached() for e in entries) or tiers.policy() == "eager":
        return
    if tiers.policy() == "auto":
        _console(stderr=True).print(
            "first run with this loopdyn: running the eager (Python) tier while numba "
            "compiles the kernels in the background for the next run"
        )
    else:
        _console(stderr=True).print("compiling kernels, once per machine (up to a minute) ...")


def _tier_line(console):
    """``tier: compiled`` / ``tier: eager`` / both: which tier ran the kernels."""
    from loopdyn.kernels import tiers

    used = tiers.used()
    console.print(f"tier: {' + '.join(used) if used else 'none (no kernel ran)'}")


@contextmanager
def _no_compiling(policy="auto"):
    """``info`` and ``models`` never compile a kernel: while they run the ``compiled``
    policy is ``policy`` (``auto``: what is not on disk runs eagerly; ``eager``: all,
    and no background build is started).  ``info``, ``models`` and ``convert`` of a
    catalog model run eagerly: their few calls on small models cost less in Python than
    loading compiled code from the disk cache, which first loads all of numba's
    lowering registries and scipy.linalg (~0.35 s of CPU per process; ``loopdyn
    convert four_bar x.toml``: 1.35 -> 0.75 s CPU, ``loopdyn models`` 1.7 -> 1.4 s)."""
    from loopdyn.kernels import tiers

    old = tiers.set_policy(policy) if tiers.policy() in ("compiled", "auto") else None
    try:
        yield
    finally:
        if old is not None:
            tiers.set_policy(old)


@app.command()
def models(
    params: Annotated[
        bool, typer.Option("--params", help="list each model's parameters (units, defaults)")
    ] = False,
):
    """List the mechanism catalog: bodies, coordinates, loops, degrees of freedom."""
    with _no_compiling("eager"), _errors():
        _models(params)


def _models(params):
    from rich.table import Table

    import loopdyn as ld

    if params:
        table = Table(title="catalog parameters (loopdyn simulate MODEL -p KEY=VALUE)")
        for col in ("model", "parameter", "unit", "default", "meaning"):
            table.add_column(col)
        for name in ld.examples.names():
            for p in ld.examples.parameters(name):
                table.add_row(name, p.name, p.unit, _default(p), p.meaning)
        _console().print(table)
        return
    table = Table(title="loopdyn catalog (ld.examples.get(name))")
    table.add_column("name", no_wrap=True)
    for col in ("bodies", "nq", "nv", "loops", "rows", "DOF", "actuated"):
        table.add_column(col, justify="right")
    table.add_column("description", min_width=20)
    for name in ld.examples.names():
        m = ld.examples.get(name)
        table.add_row(
            name,
            str(m.nbodies),
            str(m.nq),
            str(m.nv),
            str(m.nc),
            str(m.m),
            str(ld.degrees_of_freedom(m)),
            str(m.actuated.size),
            m.description,
        )
    _console().print(table)


def _default(p):
    if p.default is None:
        return "-"
    if p.unit in ("text", "flag"):
        return str(p.default).lower() if p.unit == "flag" else p.default
    d = np.asarray(p.default, dtype=float)
    if p.unit == "rad":
        return ", ".join(f"{x:.4g}deg" for x in np.atleast_1d(np.rad2deg(d)))
    return ", ".join(f"{x:.6g}" for x in np.atleast_1d(d))


@app.command()
def info(
    model: Annotated[str, typer.Argument(help=MODEL_HELP)],
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="catalog parameter KEY=VALUE")
    ] = None,
    loops: LoopsOption = None,
    load_option: LoadOption = None,
):
    """Describe a model: bodies, joints, loops, DOF, rank of the closures at q0, methods."""
    from rich.table import Table

    with _no_compiling("eager"), _errors():
        import loopdyn as ld

        mdl = _load_model(model, param, loops, load_option)
        d = ld.io.describe(mdl)
    con = _console()
    con.print(
        f"[bold]{_esc(d['name'])}[/]: {_esc(d['description'])}\n"
        f"nq = {d['nq']}, nv = {d['nv']}, closure rows m = {d['m']}, rank at q0 = {d['rank']}, "
        f"DOF = {d['dof']}, max |Φ(q0)| = {d['closure_residual']:.2e}, "
        f"actuated: {', '.join(d['actuated']) or 'none'}"
    )
    joints = Table(title="joints")
    for col in ("joint", "type", "body", "q", "v", "actuated"):
        joints.add_column(col)
    for j in d["joints"]:
        joints.add_row(j["name"], j["type"], j["body"], str(j["q"]), str(j["v"]),
                       "yes" if j["actuated"] else "")  # fmt: skip
    con.print(joints)
    if d["loops"]:
        loops = Table(title="loops (closures)")
        for col in ("closure", "kind", "body A", "body B", "rows"):
            loops.add_column(col)
        for c in d["loops"]:
            loops.add_row(c["name"], c["kind"], c["body_a"], c["body_b"], str(c["rows"]))
        con.print(loops)
    if d.get("methods"):
        con.print("methods: " + "; ".join(f"{k}: {_esc(v)}" for k, v in d["methods"].items()))


@app.command()
def convert(
    source: Annotated[str, typer.Argument(help=MODEL_HELP)],
    target: Annotated[
        Path, typer.Argument(help="output file (.toml native, .xml MJCF, .urdf with <loop>)")
    ],
    loops: LoopsOption = None,
    load_option: LoadOption = None,
):
    """Convert a catalog model or a model file to native TOML, MJCF or URDF (URDF+ loops)."""
    with _no_compiling("auto" if _is_model_file(source) else "eager"), _errors():
        import loopdyn as ld

        _check_output(target, (".toml", ".xml", ".urdf"), "output")
        ld.save(_load_model(source, None, loops, load_option), target)
    _console().print(f"wrote {target}")


@app.command()
def simulate(
    model: Annotated[str, typer.Argument(help=MODEL_HELP)],
    t_end: Annotated[float, typer.Option("--t-end", "-T", help="simulated time (s)")] = 5.0,
    method: Annotated[str, typer.Option("--method", "-m", help=METHOD_HELP)] = "augmented",
    integrator: Annotated[
        str, typer.Option("--integrator", "-i", help="RK45 DOP853 Radau BDF LSODA RK4")
    ] = "DOP853",
    stabilization: Annotated[
        str,
        typer.Option("--stabilization", "-s", help="none baumgarte projection partitioning"),
    ] = "projection",
    rtol: Annotated[float, typer.Option(help="relative tolerance (adaptive)")] = 1e-8,
    atol: Annotated[float, typer.Option(help="absolute tolerance (adaptive)")] = 1e-8,
    dt: Annotated[float | None, typer.Option(help="RK4 step (s)")] = None,
    points: Annotated[int, typer.Option(help="number of output times")] = 501,
    loops: LoopsOption = None,
    load_option: LoadOption = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param", "-p", help="catalog parameter KEY=VALUE (angles with a unit: 90deg)"
        ),
    ] = None,
    q0: Annotated[str | None, typer.Option(help="initial q, comma-separated")] = None,
    v0: Annotated[str | None, typer.Option(help="initial v, comma-separated")] = None,
    tau: Annotated[str | None, typer.Option(help=TAU_HELP)] = None,
    independent: Annotated[
        str | None, typer.Option(help="partitioning: initial independent coordinates, e.g. 0,2")
    ] = None,
    repartition: Annotated[
        bool, typer.Option(help="partitioning: re-choose them when ill-conditioned")
    ] = True,
    singularities: Annotated[
        str, typer.Option(help="at a change of mobility: stop or pass")
    ] = "stop",
    out: Annotated[Path | None, typer.Option(help="write the trajectory (.csv or .npz)")] = None,
    plot: Annotated[Path | None, typer.Option(help="write a figure (.png, .pdf, .svg)")] = None,
    animate: Annotated[Path | None, typer.Option(help="write an animation (.gif or .mp4)")] = None,
    fps: Annotated[int, typer.Option(help="animation frames per second")] = 30,
    speed: Annotated[float, typer.Option(help="animation: simulated s per video s")] = 1.0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bar")] = False,
):
    """Simulate a model and write the trajectory, a plot and an animation."""
    import loopdyn as ld
    from loopdyn.kinematics.closures import CONSTRAINTS
    from loopdyn.sim.simulate import check_arguments

    con, err = _console(), _console(stderr=True)
    with _errors():
        _check_output(out, (".csv", ".npz"), "--out")
        _check_output(plot, (".png", ".pdf", ".svg", ".jpg", ".jpeg"), "--plot")
        _check_output(animate, (".gif", ".mp4"), "--animate")
        # the arguments, checked before any compilation or work
        check_arguments(
            method=method, integrator=integrator, stabilization=stabilization, t_end=t_end,
            rtol=rtol, atol=atol, dt=dt, singularities=singularities, t_eval=int(points),
            names=SIMULATE_OPTIONS,
        )  # fmt: skip
        _note_compiling([CONSTRAINTS, ld.methods.dynamics.entry_of(method)])
        mdl = _load_model(model, param, loops, load_option)
        ind = _parse_vector(independent, "--independent")
        kw = dict(
            independent=None if ind is None else ind.astype(int),
            repartition=repartition,
            integrator=integrator,
            stabilization=stabilization,
            rtol=rtol,
            atol=atol,
            dt=dt,
            t_eval=int(points),
            singularities=singularities,
        )
        tau_v = _parse_vector(tau, "--tau")
        q_init, v_init = _parse_vector(q0, "--q0"), _parse_vector(v0, "--v0")
    traj, failure = None, None
    start = time.perf_counter()
    # fallbacks to augmented: one line after the summary (the warnings are collected here)
    with warnings.catch_warnings(record=True) as fell:
        warnings.simplefilter("always", ld.FallbackWarning)
        with _errors():
            try:  # load the compiled kernels first, so that the integration time is the run's own
                ld.simulate(mdl, t_end=1e-6, t_eval=2, method=method)
            except (ValueError, ld.LoopdynError):
                pass
        with _progress(quiet, err) as progress:
            task = progress.add_task(
                f"{mdl.name} {method}/{integrator}/{stabilization}", total=t_end
            )
            last = [0.0]

            def report(t, t_total):
                now = time.perf_counter()
                if now - last[0] > 0.05 or t >= t_total:
                    last[0] = now
                    progress.update(task, completed=t)

            interrupted = False
            with _errors():
                try:
                    traj = ld.simulate(
                        mdl, q_init, v_init, t_end, tau=tau_v, method=method, progress=report, **kw
                    )
                except ld.SimulationError as e:
                    traj, failure = e.trajectory, e
                except ld.SimulationInterrupted as e:
                    traj, failure, interrupted = e.trajectory, e, True
        total = time.perf_counter() - start
    for w in fell:  # the other warnings as they would have shown
        if not issubclass(w.category, ld.FallbackWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    _summary(con, traj, total)
    n_fb = (traj.stats.get("fallbacks", 0) if traj is not None else 0) or 0
    if n_fb or any(issubclass(w.category, ld.FallbackWarning) for w in fell):
        count = f" at {n_fb} evaluations" if n_fb else ""
        con.print(f"note: {method} fell back to the dense augmented solve{count} "
                  "(a singular or inaccurate state; the answers are augmented's)",
                  soft_wrap=True)  # fmt: skip
    _tier_line(err)
    if failure is not None:
        what = "interrupted" if interrupted else "simulation stopped"
        err.print(f"[red]{what}:[/] {_esc(' '.join(str(failure).split()))}", soft_wrap=True)
    written = []
    with _errors():
        if out is not None:
            if out.suffix.lower() == ".npz":
                traj.save(out)
            else:
                traj.to_csv(out)
            written.append(out)
        if plot is not None:
            import matplotlib.pyplot as plt

            fig = traj.plot(plot)
            plt.close(fig)
            written.append(plot)
        if animate is not None:
            traj.animate(animate, model=mdl, fps=fps, speed=speed)
            written.append(animate)
    for p in written:
        con.print(f"wrote {p}")
    if interrupted:
        raise typer.Exit(130)
    if failure is not None:
        raise typer.Exit(1)


class _NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def add_task(self, *a, **k):
        return 0

    def update(self, *a, **k):
        pass


def _progress(quiet, console):
    if quiet or not console.is_terminal:
        return _NoProgress()
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("t = {task.completed:.3g} / {task.total:.3g} s"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def _summary(con, traj, total):
    from rich.table import Table

    s = traj.summary()
    e0 = float(traj.energy[0]) if len(traj) else 0.0
    drift = f"{s['max_energy_drift']:.2e} J"
    if e0 != 0.0:
        drift += f" ({s['max_energy_drift'] / abs(e0):.1e} relative)"
    elif len(traj):  # e.g. released at rest where the potential is zero
        drift += " (E(0) = 0: no relative measure)"
    table = Table(title=f"{s['model']}: {s['method']} / {s['integrator']} / {s['stabilization']}")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    rows = [
        ("simulated time", f"{s['t_end']:.6g} s" + ("" if s["completed"] else " (stopped)")),
        ("steps", f"{s['steps']}"),
        ("right-hand sides", f"{s['nfev']}"),
        ("wall time (integration)", f"{s['wall_time']:.3f} s"),
        ("wall time (total)", f"{total:.3f} s"),
        ("max closure residual |Φ|", f"{s['max_residual_position']:.2e}"),
        ("max velocity residual |J v|", f"{s['max_residual_velocity']:.2e}"),
        ("energy E(0)", f"{e0:.10g} J"),
        ("max |E(t) - E(0)|", drift),
    ]
    if s["repartitions"]:
        rows.append(("re-partitions", f"{s['repartitions']}"))
    for k, v in rows:
        table.add_row(k, v)
    con.print(table)


@app.command()
def bench(
    model: Annotated[str, typer.Argument(help=MODEL_HELP)] = "four_bar",
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="KEY=VALUE for the factory")
    ] = None,
    method: Annotated[
        list[str] | None,
        typer.Option(
            "--method", "-m", help="methods to time (default: all): " + " ".join(_dynamics.METHODS)
        ),
    ] = None,
    seconds: Annotated[float, typer.Option(help="time budget per method")] = 0.3,
):
    """Time forward dynamics per call for each method (and Pinocchio, if installed).

    Every method's q̈ is compared with the augmented oracle; Pinocchio's
    constraintDynamics is timed alongside when the model's closures are
    expressible there.  The full benchmarks live in ``benchmarks/``.
    """
    import timeit

    from rich.table import Table

    import loopdyn as ld
    from loopdyn.kernels import tiers

    tiers.set_policy("compiled")  # per-call times are the compiled tier's

    with _errors():
        m = _load_model(model, param)
        for name in method or ():
            if name not in ld.methods.dynamics.METHODS:
                raise _Usage(
                    f"unknown method {name!r}; use {', '.join(ld.methods.dynamics.METHODS)}"
                )
        seconds = float(seconds)
        if not (np.isfinite(seconds) and seconds > 0):
            raise _Usage(f"--seconds must be positive, got {seconds}")
    rng = np.random.default_rng(0)
    q = np.array(m.q0)
    v = np.zeros(m.nv)
    v[m.actuated] = rng.normal(size=m.actuated.size)
    v = ld.complete_velocity(m, q, v) if m.m else rng.normal(size=m.nv)
    tau = np.zeros(m.nv)
    tau[m.actuated] = rng.normal(size=m.actuated.size)
    ref = ld.forward_dynamics(m, q, v, tau).qdd
    scale = max(np.abs(ref).max(initial=0.0), 1e-300)

    def per_call(fn):
        fn()
        n = max(1, int(seconds / max(timeit.timeit(fn, number=3) / 3, 1e-9) / 5))
        return min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6

    rows, fell = [], []
    for name in method or list(ld.methods.dynamics.METHODS):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", ld.FallbackWarning)
                res = ld.forward_dynamics(m, q, v, tau, method=name)
            if res.method != name:
                fell.append(f"{name} -> {res.method}")
            err = np.abs(res.qdd - ref).max(initial=0.0) / scale
        except ld.ModelError as e:
            if method:  # asked for by name: say why it does not apply
                with _errors():
                    raise
            rows.append((f"loopdyn {name}", None, f"n/a: {str(e).split(';')[0]}"))
            continue
        t = per_call(lambda name=name: ld.forward_dynamics(m, q, v, tau, method=name))
        rows.append((f"loopdyn {name}", t, err))
    try:
        import pinocchio as pin

        from loopdyn.interop.pinocchio import PinocchioExport
    except ImportError:
        pin = None
    ex = PinocchioExport(m) if pin is not None and m.m else None
    if ex is not None and not ex.unexported:
        qdd_pin = ex.constraint_dynamics(q, v, tau)
        pd = ex.model.createData()
        cds = ex.constraint_datas()
        pin.initConstraintDynamics(ex.model, pd, ex.constraints, cds)
        prox = pin.ProximalSettings(1e-12, 1e-8, 20)
        args = (ex.model, pd, ex.q(q), ex.v(v), ex.v(tau), ex.constraints, cds, prox)
        t = per_call(lambda: pin.constraintDynamics(*args))
        rows.append(("pin.constraintDynamics", t, np.abs(qdd_pin - ref).max(initial=0.0) / scale))
    table = Table(title=f"{model}: forward dynamics per call (nv={m.nv}, m={m.m})")
    for col, just in (("implementation", "left"), ("µs/call", "right"), ("rel. error", "right")):
        table.add_column(col, justify=just)
    for name, t, err in rows:
        if t is None:
            table.add_row(name, "-", err)
        else:
            table.add_row(name, f"{t:.2f}", f"{err:.1e}")
    _console().print(table)
    if fell:  # the times of these rows are the fallback's
        _console().print(f"note: fell back on this state ({', '.join(fell)}): "
                         "those rows time the fallback", soft_wrap=True)  # fmt: skip


__import__("loopdyn.cli_view").cli_view.register(app)  # `loopdyn view` (cli_view.py)
__import__("loopdyn.cli_sweep").cli_sweep.register(app)  # `loopdyn sweep`, `sweep-plot`
__import__("loopdyn.cli_compile").cli_compile.register(app)  # `loopdyn compile`


def _click_errors():
    """The exception classes of the click that typer runs on: typer >= 0.25 carries its
    own copy (their base is ``typer.TyperException``), older typer uses click's."""
    bases = tuple(c for c in (getattr(typer, "TyperException", None),) if c is not None)
    try:
        import click

        bases += (click.ClickException, click.exceptions.Abort)
    except ImportError:  # pragma: no cover - typer without click
        pass
    return (*bases, typer.Abort)


def main(args=None):
    """The ``loopdyn`` command: a usage error (unknown option, missing or malformed
    argument) is one line on stderr naming the subcommand's ``--help``, exit status 2.
    A background build the command asks for starts as it exits (``tiers.defer_background``)."""
    from loopdyn.kernels import tiers

    tiers.defer_background()
    try:
        rv = app(prog_name="loopdyn", args=args, standalone_mode=False)
    except _click_errors() as e:
        name = type(e).__name__
        if name == "NoArgsIsHelpError":  # ``loopdyn`` alone: the help
            e.show()
            return 2
        if name == "Abort" or isinstance(e, typer.Abort):
            _console(stderr=True).print("[red]error:[/] interrupted", soft_wrap=True)
            return 130
        ctx = getattr(e, "ctx", None)
        text = " ".join(e.format_message().split())
        hint = f" (see '{_esc(ctx.command_path)} --help')" if ctx is not None else ""
        _console(stderr=True).print(f"[red]error:[/] {_esc(text)}{hint}", soft_wrap=True)
        return getattr(e, "exit_code", 2)
    return rv if isinstance(rv, int) else 0


def run():
    """The ``loopdyn`` console script and ``python -m loopdyn``: ``main()``, then the
    process ends without the interpreter's teardown.

    Tearing down the modules and objects numba, llvmlite, scipy and loopdyn leave costs
    0.2-0.25 s of CPU (``loopdyn info four_bar``: 1.06 -> 0.84 s CPU per process),
    after the command's work and output are done.  The exit handlers (``atexit``:
    a background build started at exit, ``weakref.finalize`` clean-ups, logging) run
    first and the standard streams are flushed, as at a normal exit; a command that
    leaves another non-daemon thread running exits normally (Python joins it)."""
    import atexit
    import os
    import threading

    rc = main()
    main_thread = threading.main_thread()
    if any(t is not main_thread and not t.daemon for t in threading.enumerate()):
        return rc
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: as Python reports it at exit
        rc = rc or 120
    os._exit(rc)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
