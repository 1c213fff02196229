"""Usage errors of every subcommand, run as users run the command (a subprocess of the
installed entry point when there is one, else ``python -m loopdyn``): one line on
stderr naming the subcommand's --help, exit status 2, no traceback."""

import shutil
import subprocess
import sys

import pytest

COMMANDS = ["models", "info", "convert", "simulate", "bench", "sweep", "sweep-plot", "view"]


def _run(*args):
    exe = shutil.which("loopdyn")
    cmd = [exe] if exe else [sys.executable, "-m", "loopdyn"]
    return subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("command", COMMANDS)
def test_unknown_option_is_one_line_exit_2(command):
    r = _run(command, "--no-such-option")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, r.stderr
    assert len(lines) == 1, r.stderr
    assert "No such option: --no-such-option" in lines[0]
    assert f"loopdyn {command} --help" in lines[0]


@pytest.mark.parametrize(
    "args, words",
    [
        (["simulate"], "Missing argument"),
        (["simulate", "four_bar", "--t-end", "soon"], "--t-end"),
        (["no-such-command"], "No such command"),
        (["simulate", "four_bar", "--method"], "requires an argument"),
    ],
)
def test_malformed_command_lines_are_one_line_exit_2(args, words):
    r = _run(*args)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert words in r.stderr and "Traceback" not in r.stderr


def test_help_and_bare_command_still_print_help():
    r = _run("--help")
    assert r.returncode == 0 and "simulate" in r.stdout
    r = _run()
    assert r.returncode == 2 and "simulate" in (r.stdout + r.stderr)
