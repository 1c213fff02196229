"""``loopdyn view MODEL|FILE|TRAJECTORY``: the 3D scene in the browser, or one HTML file.

    loopdyn view four_bar                              # a slider per independent coordinate
    loopdyn view four_bar --t-end 5                    # simulate 5 s from rest, play it
    loopdyn view traj.npz --model four_bar             # a saved trajectory (ld.Trajectory.save)
    loopdyn view cassie.sdf --html cassie.html         # one offline page, no server

Registered on the main command line by ``register(app)`` (one line in ``cli.py``).
Errors print one line and exit with status 2.
"""

from pathlib import Path
from typing import Annotated

import typer

from loopdyn.cli_common import MODEL_FILES, LoadOption, LoopsOption
from loopdyn.methods.dynamics import METHODS


def register(app):
    """Add the ``view`` command to the typer ``app``."""
    app.command(name="view")(view)


def _target(spec, model_spec, params, t_end, method, loops=None, load_options=None):
    """(object to show, its model or None) of the command's arguments."""
    import loopdyn as ld
    from loopdyn import cli_common as cli

    if spec.lower().endswith(".npz"):
        if params or t_end is not None:
            raise cli._Usage("--param and --t-end apply to a model, not to a saved trajectory")
        if not Path(spec).is_file():
            raise cli._Usage(f"trajectory file {spec!r} not found")
        model = cli._load_model(model_spec, []) if model_spec else None
        traj = ld.Trajectory.load(spec, model=model)
        return traj, traj.resolve_model(model)
    if model_spec:
        raise cli._Usage("--model names a saved trajectory's model; give the model as TARGET")
    model = cli._load_model(spec, params, loops, load_options)
    if t_end is None:
        return model, model
    import numpy as np

    traj = ld.simulate(model, model.q0, np.zeros(model.nv), t_end, method=method)
    return traj, model


def view(
    target: Annotated[
        str,
        typer.Argument(help=f"catalog name, model file ({MODEL_FILES}) or trajectory .npz"),
    ],
    html: Annotated[
        Path | None, typer.Option("--html", help="write one self-contained .html file and exit")
    ] = None,
    param: Annotated[
        list[str] | None, typer.Option("--param", "-p", help="catalog parameter KEY=VALUE")
    ] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="a trajectory's model (catalog name or file)")
    ] = None,
    t_end: Annotated[
        float | None, typer.Option("--t-end", "-T", help="simulate T s from q0 at rest and show it")
    ] = None,
    method: Annotated[
        str, typer.Option("--method", "-m", help="with --t-end: " + " ".join(METHODS))
    ] = "augmented",
    host: Annotated[str, typer.Option(help="viewer address")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="viewer port")] = 8080,
    max_frames: Annotated[int, typer.Option(help="frames kept of a trajectory")] = 300,
    meshes: Annotated[bool, typer.Option(help="draw the file's meshes (else sticks)")] = True,
    loops: LoopsOption = None,
    load_option: LoadOption = None,
):
    """Show a model or a trajectory in 3D: a viewer in the browser, or an HTML file."""
    from loopdyn import cli_common as cli

    with cli._errors():
        if html is not None:
            cli._check_output(html, (".html", ".htm"), "--html")
        if max_frames < 1:
            raise cli._Usage(f"--max-frames must be at least 1, got {max_frames}")
        try:
            obj, mdl = _target(target, model, param, t_end, method, loops, load_option)
            if html is not None:
                from loopdyn.viz.html import export_html

                export_html(obj, html, model=mdl, max_frames=max_frames, meshes=meshes)
                cli._console().print(f"wrote {html}")
                return
            from loopdyn.viz.viewer import view as serve

            serve(obj, model=mdl, host=host, port=port, max_frames=max_frames, meshes=meshes)
        except ImportError as e:
            raise cli._Usage(str(e)) from None
