"""scripts/torch_npu_guide_test.py, which runs the guide's torch_npu chapter as printed (.ci/run
runs it): its placeholders mean what its doc says, and a chapter whose samples differ from its
run, or with a block it does not check, fails naming the line."""

import importlib.util
import textwrap

import pytest

import braid_npu

SCRIPT = braid_npu.HERE.parents[1] / "scripts" / "torch_npu_guide_test.py"
_spec = importlib.util.spec_from_file_location("torch_npu_guide_test", SCRIPT)
guide = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(guide)


def test_the_placeholders_mean_what_the_doc_says():
    assert guide.line_matches("a [..] c", "a b b c") and not guide.line_matches("a [..] c", "a b d")
    assert guide.lines_match(["x", "...", "z"], ["x", "y", "y", "z"])
    assert guide.lines_match(["x", "...", "z"], ["x", "z"])
    assert not guide.lines_match(["x"], ["x", "y"])
    assert guide.json_fits({"a": "...", "b": [1]}, {"a": {"deep": 1}, "b": [1], "c": 2})
    assert not guide.json_fits({"a": 1}, {"b": 1}) and not guide.json_fits([1], [1, 2])
    assert guide.json_fits(["...", 2, 3, "..."], [1, 2, 3, 4])
    assert not guide.json_fits(["...", 3, 2, "..."], [1, 2, 3, 4])
    assert guide.json_fits({"m": "at [..] us"}, {"m": "at 1.0..2.0 us"})
    assert not guide.json_fits({"m": "at [..] us"}, {"m": "at 1.0..2.0 ms"})


def test_a_transcript_s_commands_and_their_continuations():
    body = ["$ echo a \\", "  b", "a b", "$ true"]
    assert guide.commands(body) == [("echo a \\\n  b", ["a b"]), ("true", [])]


CHAPTER = """
```sh
mkdir work && cd work
export GREETING=hello
```

```python prog.py
import json, os
json.dump({"greeting": os.environ["GREETING"], "items": [1, 2, 3]}, open("out.json", "w"))
print(os.environ["GREETING"], os.environ["HOME"] == os.getcwd().rsplit("/", 1)[0])
```

```console torch_npu
$ python3 prog.py
hello True
```

```json out.json
{"greeting": "hello", "items": ["...", 3]}
```
"""


def write(tmp_path, text):
    chapter = tmp_path / "chapter.md"
    chapter.write_text(textwrap.dedent(text))
    return chapter


def test_a_chapter_that_runs_as_printed_passes_each_command_where_the_last_left_off(tmp_path):
    guide.run(write(tmp_path, CHAPTER))


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (("hello True", "hello False"), "`python3 prog.py` printed"),
        (('"items": ["...", 3]', '"items": ["...", 4]'), "out.json is"),
        (("$ python3 prog.py", "$ false"), "exit 1"),
        (("```json out.json", "```json missing.json"), "no command wrote missing.json"),
        (("```sh", "```bash"), "a ```bash block: not a kind this test runs or checks"),
    ],
)
def test_a_chapter_and_a_run_that_disagree_fail_naming_the_line(tmp_path, change, error):
    with pytest.raises(guide.GuideError, match=r"chapter\.md:\d+: ") as caught:
        guide.run(write(tmp_path, CHAPTER.replace(*change)))
    assert error in str(caught.value)


def test_the_account_is_fresh():
    env = guide.fresh_account(braid_npu.HERE)
    assert env["HOME"] == str(braid_npu.HERE)
    for gone in (
        "LD_LIBRARY_PATH", "PYTHONPATH", "BRAID_ACL_LIB", "VIRTUAL_ENV", "XDG_CACHE_HOME",
        "PIP_CACHE_DIR",
    ):
        assert gone not in env, gone
    assert not [k for k in env if k.startswith("BRAID_")]


def test_a_pip_cache_given_is_the_only_thing_kept(tmp_path):
    # CI keeps pip's download cache between runs (--pip-cache): the account stays fresh.
    env = guide.fresh_account(braid_npu.HERE, tmp_path / "pip")
    assert env["PIP_CACHE_DIR"] == str(tmp_path / "pip")
    assert env["HOME"] == str(braid_npu.HERE)
    assert "VIRTUAL_ENV" not in env and "XDG_CACHE_HOME" not in env
