"""The guide's torch_npu chapter (docs/guide/07-torch-npu.md), run as printed.

Its ``python FILE`` blocks are the programs, its ``console torch_npu`` blocks the commands
that run them (``NAME=value ... python FILE``), and its ``json FILE`` blocks what those runs
write. docs/guide/README.md states the rules: in a command's output, ``[..]`` stands for any
text within a line and a line ``...`` for any lines; a JSON sample may leave keys out of an
object, and ``"..."`` stands for any value. The programs run with the suite's set-up (the
keyset workaround loaded first, as every program of the suite).
"""

import json
import os
import re
import subprocess
import sys

import braid_npu

CHAPTER = braid_npu.HERE.parent.parent / "docs" / "guide" / "07-torch-npu.md"


def blocks(path):
    """(line, language, tags, body lines) of every fenced block of ``path``."""
    out, current = [], None
    for number, line in enumerate(path.read_text().splitlines(), 1):
        stripped = line.strip()
        if current is None:
            if stripped.startswith("```"):
                words = stripped[3:].split()
                current = (number, words[0] if words else "", words[1:], [])
        elif stripped == "```":
            out.append(current)
            current = None
        else:
            current[3].append(line)
    assert current is None, f"{path}:{current[0]}: a block that is never closed"
    return out


def line_matches(expected, actual):
    parts = [re.escape(p) for p in expected.rstrip().split("[..]")]
    return re.fullmatch(".*".join(parts), actual.rstrip()) is not None


def lines_match(expected, actual):
    def trim(lines):
        while lines and not lines[0].strip():
            lines = lines[1:]
        while lines and not lines[-1].strip():
            lines = lines[:-1]
        return lines

    def fits(exp, act):
        if not exp:
            return not act
        if exp[0] == "...":
            return any(fits(exp[1:], act[skip:]) for skip in range(len(act) + 1))
        return bool(act) and line_matches(exp[0], act[0]) and fits(exp[1:], act[1:])

    return fits(trim(list(expected)), trim(actual.splitlines()))


def json_fits(expected, actual):
    """Whether ``actual`` has what ``expected`` shows: an object's keys (at least those), a
    list's items (exactly those), ``"..."`` for any value."""
    if expected == "...":
        return True
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and json_fits(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(json_fits(e, a) for e, a in zip(expected, actual))
        )
    return expected == actual


def test_the_placeholders_mean_what_the_guide_says():
    assert line_matches("a [..] c", "a b c") and not line_matches("a [..] c", "a b d")
    assert lines_match(["x", "...", "z"], "x\ny\ny\nz") and not lines_match(["x"], "x\ny")
    assert json_fits({"a": "...", "b": [1]}, {"a": {"deep": 1}, "b": [1], "c": 2})
    assert not json_fits({"a": 1}, {"b": 1}) and not json_fits([1], [1, 2])


def test_the_chapter_s_programs_print_and_write_what_it_says(tmp_path):
    programs, outputs, steps = {}, {}, []
    for line, lang, tags, body in blocks(CHAPTER):
        text = "\n".join(body) + "\n"
        if lang == "python":
            programs[tags[0]] = text
        elif lang == "json":
            outputs[tags[0]] = (line, json.loads(text))
        elif lang == "console" and tags == ["torch_npu"]:
            for b in body:
                if b.startswith("$ "):
                    steps.append((line, b[2:].strip(), []))
                else:
                    steps[-1][2].append(b)
    assert programs and outputs and steps, "the chapter has its programs, commands and outputs"

    for name, source in programs.items():
        (tmp_path / name).write_text("import braid_npu\nbraid_npu.load_shim()\n" + source)
    ran = set()
    for line, command, expected in steps:
        words = command.split()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(braid_npu.HERE)] + [p for p in [os.environ.get("PYTHONPATH")] if p]
        )
        while "=" in words[0]:
            key, value = words.pop(0).split("=", 1)
            env[key] = value
        assert words[0] == "python" and len(words) == 2 and words[1] in programs, (
            f"{CHAPTER}:{line}: `{command}`: the chapter's commands run one of its programs"
        )
        proc = subprocess.run(
            [sys.executable, words[1]],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        braid_npu.assert_child_ok(proc)
        assert lines_match(expected, proc.stdout), (
            f"{CHAPTER}:{line}: `{command}` printed\n{proc.stdout}\nwhere the guide says\n"
            + "\n".join(expected)
        )
        ran.add(words[1])
    assert ran == set(programs), f"programs no command runs: {set(programs) - ran}"

    for name, (line, expected) in outputs.items():
        written = tmp_path / name
        assert written.exists(), f"{CHAPTER}:{line}: no command wrote {name}"
        actual = json.loads(written.read_text())
        assert json_fits(expected, actual), (
            f"{CHAPTER}:{line}: {name} is\n{json.dumps(actual, indent=1)}\nwhere the guide shows\n"
            f"{json.dumps(expected, indent=1)}"
        )
