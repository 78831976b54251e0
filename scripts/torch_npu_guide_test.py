#!/usr/bin/env python3
"""Runs the torch_npu chapter of the guide (docs/guide/torch-npu.md) as printed, on a fresh
account, and checks every sample it shows against the run.

    python3 scripts/torch_npu_guide_test.py [CHAPTER]

The chapter's fenced blocks, in order:

- ```sh: commands, run as printed by bash (``set -euo pipefail``), each block starting where
  the previous one left off (working directory and exported variables, so ``. venv/bin/activate``
  lasts);
- ```python FILE: a program the commands run, written to FILE first;
- ```text right after a ```sh block: lines its output (stdout and stderr) must show, in order
  (other lines may come between; ``...`` in a line stands for any text);
- ```json FILE: FILE as it is at that point, abridged: every key shown is there with the value
  shown, and a list's items shown are found among its items, in order;
- any other block (```rust, ```console, ...) is prose, not run.

The account is fresh: HOME is a new scratch directory, with ``~/braid`` a link to this
checkout (the chapter builds the wheel from "your clone of braid at ~/braid"), and nothing of
braid-acl-sim or a Python environment is set. Not fresh, so that a run takes minutes and not
a 3 GB download each time: pip's download cache
(``${XDG_CACHE_HOME:-~/.cache}/braid/guide-pip-cache`` of the real account, about 3 GB), and
the toolchains' homes (rustup, cargo, pyenv), which HOME would otherwise move. Each block's
time is printed, for the chapter's "how long it takes".
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
FENCE = re.compile(r"^```(\S*)[ \t]*(\S*)[ \t]*$")


class GuideError(Exception):
    """The chapter and its run disagree (the message says where)."""


def blocks(text: str):
    """The fenced blocks: (line number, language, argument, body)."""
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
            out.append((start, m.group(1), m.group(2), "\n".join(body) + "\n"))
        i += 1
    return out


def line_matches(pattern: str, line: str) -> bool:
    parts = [re.escape(p) for p in pattern.split("...")]
    return re.fullmatch(".*".join(parts), line.rstrip()) is not None


def check_output(where: str, expected: str, output: str) -> None:
    lines = output.splitlines()
    at = 0
    for want in expected.strip("\n").splitlines():
        while at < len(lines) and not line_matches(want.rstrip(), lines[at]):
            at += 1
        if at == len(lines):
            raise GuideError(f"{where}: the output lacks {want!r} (in order); it was:\n{output}")
        at += 1


def subset(shown, actual, path="") -> None:
    """Raises unless ``actual`` has everything ``shown`` has (see the module's doc)."""
    if isinstance(shown, dict):
        if not isinstance(actual, dict):
            raise GuideError(f"{path or '/'}: shown an object, found {actual!r}")
        for key, value in shown.items():
            if key not in actual:
                raise GuideError(f"{path}/{key}: shown, but not in the file")
            subset(value, actual[key], f"{path}/{key}")
    elif isinstance(shown, list):
        if not isinstance(actual, list):
            raise GuideError(f"{path}: shown a list, found {actual!r}")
        at = 0
        for i, item in enumerate(shown):
            while at < len(actual):
                try:
                    subset(item, actual[at], f"{path}[{at}]")
                    break
                except GuideError:
                    at += 1
            else:
                raise GuideError(f"{path}: item {i} shown, {json.dumps(item)}, is not in the file (in order)")
            at += 1
    elif shown != actual:
        raise GuideError(f"{path}: shown {shown!r}, the file has {actual!r}")


def fresh_account(scratch: Path) -> dict:
    """The environment of a new account whose home is ``scratch``."""
    real_home = Path.home()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or real_home / ".cache")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("BRAID_", "VIRTUAL_ENV", "PYTHON", "CONDA"))
        and k not in ("LD_LIBRARY_PATH", "XDG_CACHE_HOME", "PIP_CACHE_DIR")
    }
    env["HOME"] = str(scratch)
    env["PIP_CACHE_DIR"] = str(cache / "braid" / "guide-pip-cache")
    # The toolchains stay where they are installed.
    for variable, default in (
        ("RUSTUP_HOME", ".rustup"),
        ("CARGO_HOME", ".cargo"),
        ("PYENV_ROOT", ".pyenv"),
    ):
        if variable not in env and (real_home / default).is_dir():
            env[variable] = str(real_home / default)
    return env


def run(chapter: Path) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="braid-guide-"))
    try:
        (scratch / "braid").symlink_to(ROOT)
        state = scratch / ".guide-state"
        state.mkdir()
        (state / "cwd").write_text(str(scratch))
        (state / "env.sh").write_text("")
        env = fresh_account(scratch)
        last_output = None
        for line, language, argument, body in blocks(chapter.read_text()):
            where = f"{chapter.name}:{line}"
            if language == "python":
                if not argument:
                    raise GuideError(f"{where}: a python block names its file (```python prog.py)")
                cwd = Path((state / "cwd").read_text())
                (cwd / argument).write_text(body)
            elif language == "sh":
                script = (
                    "set -euo pipefail\n"
                    f'cd "$(cat {state}/cwd)"\n'
                    f". {state}/env.sh\n"
                    f"{body}"
                    f"pwd >{state}/cwd\n"
                    f"export -p >{state}/env.sh\n"
                )
                started = time.monotonic()
                proc = subprocess.run(
                    ["bash", "-c", script],
                    env=env,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
                seconds = time.monotonic() - started
                print(f"== {where} ({seconds:.1f} s)\n{body.rstrip()}", flush=True)
                if proc.returncode != 0:
                    raise GuideError(f"{where}: exit {proc.returncode}; output:\n{proc.stdout}")
                last_output = (where, proc.stdout)
                continue
            elif language == "text" and last_output is not None:
                check_output(f"{where} (after {last_output[0]})", body, last_output[1])
            elif language == "json" and argument:
                cwd = Path((state / "cwd").read_text())
                try:
                    shown = json.loads(body)
                except json.JSONDecodeError as e:
                    raise GuideError(f"{where}: the block is not JSON: {e}") from None
                subset(shown, json.loads((cwd / argument).read_text()), argument)
            last_output = None
        venv_sizes = subprocess.run(
            ["du", "-sh", *[str(p) for p in scratch.iterdir() if (p / "pyvenv.cfg").exists()]],
            capture_output=True,
            text=True,
        ).stdout
        print(f"== the chapter's environments on disk:\n{venv_sizes}", end="")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> int:
    chapter = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "guide" / "torch-npu.md"
    try:
        run(chapter)
    except GuideError as e:
        print(f"torch_npu_guide_test: {e}", file=sys.stderr)
        return 1
    print(f"torch_npu_guide_test: {chapter} runs as printed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
