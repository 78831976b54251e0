#!/usr/bin/env python3
"""Runs the torch_npu chapter of the guide (docs/guide/07-torch-npu.md) as printed, on a fresh
account, from the install on, and checks every sample it shows against the run.

    python3 scripts/torch_npu_guide_test.py [--pip-cache DIR] [CHAPTER]

Every fenced block of the chapter is one of these kinds (the guide's conventions,
docs/guide/README.md), taken in order; any other kind is an error:

- ```sh: commands, run as printed by bash (``set -euo pipefail``);
- ```python FILE: a program the commands run, written to FILE first;
- ```console torch_npu: a transcript: each ``$ `` line is a command (a backslash at its end
  continues it), the lines after it what it prints on stdout (stderr, with progress and
  warnings, is not compared); ``[..]`` in a line stands for any text within it, and a line
  ``...`` for any number of lines;
- ```json FILE: FILE as the commands before the block left it, abridged: an object shows some
  of its keys, ``"..."`` stands for any value (as an item of a list: for any number of items),
  and ``[..]`` in a string for any text within it.

Commands run one after another as in one shell: each starts where the one before left off
(working directory, exported variables, so ``. venv/bin/activate`` lasts). The account is
fresh: HOME is a new scratch directory (pip's cache too, so the packages are downloaded from
the registry as a new user's are, about 3 GB), with ``~/braid`` a link to this checkout (the
chapter builds the wheel from "your clone of braid at ~/braid"), and nothing of braid-acl-sim
or of a Python environment is set. Only the toolchains stay where they are installed (rustup,
cargo, pyenv, which HOME would otherwise move), and cargo reuses this checkout's build. Each
command's time is printed, for the chapter's "how long it takes".

``--pip-cache DIR`` keeps pip's download cache in DIR between runs (CI passes one, so that
only its first run downloads the 3 GB): the commands still run as printed, and pip installs
from its cache exactly what it would download.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(\S+)(.*)$")


class GuideError(Exception):
    """The chapter and its run disagree (the message says where)."""


def blocks(text: str):
    """The fenced blocks: (line number, language, tags, body lines)."""
    out, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m and m.group(1):
            start, body = i + 1, []
            i += 1
            while i < len(lines) and lines[i].rstrip() != "```":
                body.append(lines[i])
                i += 1
            if i == len(lines):
                raise GuideError(f"line {start}: the block never ends")
            out.append((start, m.group(1), m.group(2).split(), body))
        i += 1
    return out


def line_matches(pattern: str, line: str) -> bool:
    parts = [re.escape(p) for p in pattern.rstrip().split("[..]")]
    return re.fullmatch(".*".join(parts), line.rstrip()) is not None


def lines_match(expected, actual) -> bool:
    """Whether the lines ``actual`` are the lines ``expected`` (placeholders as above; blank
    lines at either end not compared)."""

    def trim(lines):
        while lines and not lines[0].strip():
            lines = lines[1:]
        while lines and not lines[-1].strip():
            lines = lines[:-1]
        return lines

    def fits(exp, act):
        if not exp:
            return not act
        if exp[0].strip() == "...":
            return any(fits(exp[1:], act[skip:]) for skip in range(len(act) + 1))
        return bool(act) and line_matches(exp[0], act[0]) and fits(exp[1:], act[1:])

    return fits(trim(list(expected)), trim(list(actual)))


def json_fits(shown, actual) -> bool:
    """Whether ``actual`` has what ``shown`` shows (see the module's doc)."""
    if shown == "...":
        return True
    if isinstance(shown, dict):
        return isinstance(actual, dict) and all(
            k in actual and json_fits(v, actual[k]) for k, v in shown.items()
        )
    if isinstance(shown, list):
        if not isinstance(actual, list):
            return False
        if not shown:
            return not actual
        if shown[0] == "...":
            return any(json_fits(shown[1:], actual[skip:]) for skip in range(len(actual) + 1))
        return bool(actual) and json_fits(shown[0], actual[0]) and json_fits(shown[1:], actual[1:])
    if isinstance(shown, str) and "[..]" in shown:
        return isinstance(actual, str) and line_matches(shown, actual)
    return shown == actual


def commands(body):
    """The ``$ `` commands of a transcript, each with the lines it prints."""
    out, pending = [], None
    for line in body:
        if pending is not None:
            pending += "\n" + line
        elif line.startswith("$ "):
            pending = line[2:]
        else:
            if not out:
                raise GuideError(f"output before any command: {line!r}")
            out[-1][1].append(line)
            continue
        if pending.endswith("\\"):
            continue
        out.append((pending, []))
        pending = None
    return out


def fresh_account(scratch: Path, pip_cache=None) -> dict:
    """The environment of a new account whose home is ``scratch`` (pip's cache in
    ``pip_cache`` when given)."""
    real_home = Path.home()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("BRAID_", "VIRTUAL_ENV", "PYTHON", "CONDA"))
        and k not in ("LD_LIBRARY_PATH", "XDG_CACHE_HOME", "PIP_CACHE_DIR")
    }
    env["HOME"] = str(scratch)
    if pip_cache is not None:
        env["PIP_CACHE_DIR"] = str(pip_cache)
    # The toolchains stay where they are installed.
    for variable, default in (
        ("RUSTUP_HOME", ".rustup"),
        ("CARGO_HOME", ".cargo"),
        ("PYENV_ROOT", ".pyenv"),
    ):
        if variable not in env and (real_home / default).is_dir():
            env[variable] = str(real_home / default)
    return env


class Shell:
    """Commands run one after another as in one shell session (see the module's doc)."""

    def __init__(self, home: Path, env: dict):
        self.env = env
        self.state = home / ".guide-state"
        self.state.mkdir()
        (self.state / "cwd").write_text(str(home))
        (self.state / "env.sh").write_text("")

    @property
    def cwd(self) -> Path:
        return Path((self.state / "cwd").read_text().strip())

    def run(self, where: str, commands: str) -> str:
        """Runs ``commands``; returns their stdout, or raises naming ``where`` when one fails."""
        script = (
            "set -euo pipefail\n"
            f'cd "$(cat {self.state}/cwd)"\n'
            f". {self.state}/env.sh\n"
            f"{commands}\n"
            f"pwd >{self.state}/cwd\n"
            f"export -p >{self.state}/env.sh\n"
        )
        started = time.monotonic()
        proc = subprocess.run(
            ["bash", "-c", script], env=self.env, capture_output=True, text=True
        )
        print(f"== {where} ({time.monotonic() - started:.1f} s)\n{commands}", flush=True)
        if proc.returncode != 0:
            raise GuideError(
                f"{where}: exit {proc.returncode}\n--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}"
            )
        return proc.stdout


def run(chapter: Path, pip_cache=None) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="braid-guide-"))
    try:
        (scratch / "braid").symlink_to(ROOT)
        shell = Shell(scratch, fresh_account(scratch, pip_cache))
        for line, language, tags, body in blocks(chapter.read_text()):
            where = f"{chapter.name}:{line}"
            if language == "sh" and not tags:
                shell.run(where, "\n".join(body))
            elif language == "python" and len(tags) == 1:
                (shell.cwd / tags[0]).write_text("\n".join(body) + "\n")
            elif language == "console" and tags == ["torch_npu"]:
                for command, expected in commands(body):
                    printed = shell.run(where, command)
                    if not lines_match(expected, printed.splitlines()):
                        raise GuideError(
                            f"{where}: `{command}` printed\n{printed}where the guide says\n"
                            + "\n".join(expected)
                        )
            elif language == "json" and len(tags) == 1:
                try:
                    shown = json.loads("\n".join(body))
                except json.JSONDecodeError as e:
                    raise GuideError(f"{where}: the block is not JSON: {e}") from None
                written = shell.cwd / tags[0]
                if not written.exists():
                    raise GuideError(f"{where}: no command wrote {tags[0]}")
                actual = json.loads(written.read_text())
                if not json_fits(shown, actual):
                    raise GuideError(
                        f"{where}: {tags[0]} is\n{json.dumps(actual, indent=1)}\nwhere the "
                        f"guide shows\n{json.dumps(shown, indent=1)}"
                    )
            else:
                raise GuideError(
                    f"{where}: a ```{' '.join([language, *tags])} block: not a kind this test "
                    "runs or checks (see its doc)"
                )
        venvs = [str(p) for p in scratch.iterdir() if (p / "pyvenv.cfg").exists()]
        if venvs:
            sizes = subprocess.run(["du", "-sh", *venvs], capture_output=True, text=True)
            print(f"== the chapter's environments on disk:\n{sizes.stdout}", end="")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    args = sys.argv[1:]
    pip_cache = None
    if args[:1] == ["--pip-cache"]:
        if len(args) < 2:
            print("torch_npu_guide_test: --pip-cache needs a directory", file=sys.stderr)
            return 2
        pip_cache = Path(args[1]).expanduser().resolve()
        pip_cache.mkdir(parents=True, exist_ok=True)
        args = args[2:]
    chapter = Path(args[0]) if args else ROOT / "docs" / "guide" / "07-torch-npu.md"
    try:
        run(chapter, pip_cache)
    except GuideError as e:
        print(f"torch_npu_guide_test: {e}", file=sys.stderr)
        return 1
    print(f"torch_npu_guide_test: {chapter} runs as printed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
