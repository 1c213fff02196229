"""``python -m loopdyn``: the command line (see ``loopdyn.cli``)."""

from loopdyn.cli import app

app(prog_name="loopdyn")
