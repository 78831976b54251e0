"""The ``braid-acl-sim`` command.

``braid-acl-sim run [options] PROGRAM [ARGS...]`` runs PROGRAM (``python prog.py``,
``python -m pytest``, ``torchrun ...``) with braid-acl-sim as its CANN: it prepends the
CANN-named links (:func:`braid_acl_sim.layout.cann_dir`) to ``LD_LIBRARY_PATH``, points
``BRAID_ACL_LIB`` at the library (for programs that load ACL through braid), puts the
allocator-key workaround's ``sitecustomize`` first on ``PYTHONPATH``, sets braid-acl-sim's
variables for the options given, and then *becomes* PROGRAM (``exec``): its exit status, its
signals and its children are the program's own. Everything is inherited by the program's
children, so processes it starts run on braid-acl-sim too.
"""

import argparse
import os
import sys
from pathlib import Path

from . import LIBRARY, PRELOAD_DIR, __version__
from .layout import LayoutError, cann_dir

#: The most devices torch_npu 2.14 handles (``C10_COMPILE_TIME_MAX_NPUS``).
TORCH_NPU_MAX_DEVICES = 32

#: braid-acl-sim's variables the options set (crates/acl-sim/src/settings.rs reads them).
RACE_REPORT_ENV = "BRAID_ACL_SIM_RACE_REPORT"
TIMELINE_ENV = "BRAID_ACL_SIM_TIMELINE"
ERROR_LOG_ENV = "BRAID_ACL_SIM_ERROR_LOG"
DEVICES_ENV = "BRAID_ACL_SIM_DEVICES"


def _devices(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= TORCH_NPU_MAX_DEVICES:
        raise argparse.ArgumentTypeError(
            f"{text!r}: torch_npu handles 1 to {TORCH_NPU_MAX_DEVICES} devices"
        )
    return n


def parser() -> argparse.ArgumentParser:
    """The command line."""
    top = argparse.ArgumentParser(
        prog="braid-acl-sim",
        allow_abbrev=False,
        description="Run programs (torch_npu, or any CANN client) on braid-acl-sim: CANN's "
        "C API on braid's simulator, no NPU needed.",
    )
    top.add_argument("--version", action="version", version=f"braid-acl-sim {__version__}")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="run a program with braid-acl-sim as its CANN",
        description="Run PROGRAM with braid-acl-sim as its CANN. Options go before PROGRAM; "
        "everything from PROGRAM on is the program's. Both reports are written when the "
        "program finalizes ACL (torch_npu does at exit), or when it exits.",
        usage="braid-acl-sim run [options] PROGRAM [ARGS...]",
        allow_abbrev=False,
    )
    run.add_argument(
        "--race-report",
        metavar="FILE",
        help="write the sanitizer's race report here, as JSON "
        f"(sets {RACE_REPORT_ENV}); \"count\" is the number of races",
    )
    run.add_argument(
        "--timeline",
        metavar="FILE",
        help="write the simulated timeline here, as Chrome Trace Event JSON for "
        f"ui.perfetto.dev (sets {TIMELINE_ENV})",
    )
    run.add_argument(
        "--error-log",
        metavar="FILE",
        help=f"append every call braid-acl-sim refuses here, one line each (sets {ERROR_LOG_ENV})",
    )
    run.add_argument(
        "--devices",
        metavar="N",
        type=_devices,
        help=f"simulated devices, 1 to {TORCH_NPU_MAX_DEVICES} (sets {DEVICES_ENV}; default 8)",
    )
    run.add_argument("program", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return top


def _prepend(env: dict, variable: str, entry: Path) -> None:
    rest = env.get(variable)
    env[variable] = str(entry) + (os.pathsep + rest if rest else "")


def environment(args: argparse.Namespace, base=os.environ) -> dict:
    """The program's environment: ``base`` with braid-acl-sim's settings (relative report
    paths made absolute, so a program that changes directory still writes where asked)."""
    env = dict(base)
    _prepend(env, "LD_LIBRARY_PATH", cann_dir(env=base))
    _prepend(env, "PYTHONPATH", PRELOAD_DIR)
    env["BRAID_ACL_LIB"] = str(LIBRARY.resolve())
    for variable, value in (
        (RACE_REPORT_ENV, args.race_report),
        (TIMELINE_ENV, args.timeline),
        (ERROR_LOG_ENV, args.error_log),
    ):
        if value is not None:
            env[variable] = os.path.abspath(value)
    if args.devices is not None:
        env[DEVICES_ENV] = str(args.devices)
    return env


def main(argv=None) -> int:
    """Runs the command line ``argv`` (default: the process's); returns an exit status when
    the program could not be started (otherwise the process becomes it)."""
    cli = parser()
    args = cli.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    if not program:
        cli.error("run: name the program to run, e.g. `braid-acl-sim run python prog.py`")
    try:
        env = environment(args)
    except LayoutError as e:
        print(f"braid-acl-sim: {e}", file=sys.stderr)
        return 1
    try:
        os.execvpe(program[0], program, env)
    except FileNotFoundError:
        print(f"braid-acl-sim run: {program[0]}: command not found", file=sys.stderr)
        return 127
    except PermissionError:
        print(f"braid-acl-sim run: {program[0]}: permission denied", file=sys.stderr)
        return 126
