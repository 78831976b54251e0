"""What braid adds for torch_npu users: the simulator's sanitizer and timeline on a torch_npu
program, asked for with the wheel's command from a fresh shell: `braid-acl-sim run
--race-report races.json --timeline timeline.json python program.py` (the options set
BRAID_ACL_SIM_RACE_REPORT and BRAID_ACL_SIM_TIMELINE)."""

import json

from braid_npu import child_result, run_command

PROGRAM = """
import braid_npu, sys, torch, torch_npu
s1, s2 = torch.npu.Stream(), torch.npu.Stream()
x = torch.ones(1 << 16, device="npu")
torch.npu.synchronize()
with torch.npu.stream(s1):
    y = x * 2                 # aclnnMuls writes y on s1
if sys.argv[1:] == []:        # the correct program waits; the racy one does not
    s2.wait_stream(s1)
with torch.npu.stream(s2):
    z = y + 1                 # aclnnAdds reads y on s2
y.record_stream(s2)
torch.npu.synchronize()
braid_npu.result([hex(s1.npu_stream), hex(s2.npu_stream)])
"""


def run(tmp_path, racy):
    (tmp_path / "program.py").write_text(PROGRAM)
    proc = run_command(
        ["run", "--race-report", "races.json", "--timeline", "timeline.json", "python",
         "program.py"] + (["racy"] if racy else []),
        cwd=tmp_path,
    )
    s1, s2 = child_result(proc)
    report, timeline = tmp_path / "races.json", tmp_path / "timeline.json"
    return json.loads(report.read_text()), json.loads(timeline.read_text()), s1, s2


def test_a_read_on_one_stream_of_what_another_writes_without_wait_stream_is_reported(tmp_path):
    report, _, s1, s2 = run(tmp_path, racy=True)
    assert report["count"] == 1, report
    (race,) = report["reports"]
    assert race["kind"] == "read-write race"
    assert race["bytes"] == (1 << 16) * 4
    first, second = race["first"], race["second"]
    assert (first["operator"], first["acl_stream"]) == ("aclnnMuls", s1)
    assert (second["operator"], second["acl_stream"]) == ("aclnnAdds", s2)
    assert "aclnnMuls" in race["message"] and "aclnnAdds" in race["message"]


def test_the_correct_program_has_no_report_and_a_timeline_with_its_streams(tmp_path):
    report, timeline, s1, s2 = run(tmp_path, racy=False)
    assert report == {"tool": "braid-acl-sim sanitizer", "count": 0, "reports": []}
    events = timeline["traceEvents"]
    tracks = {
        e["tid"]: e["args"]["name"]
        for e in events
        if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == 0
    }
    by_handle = {name.split("aclrtStream ")[-1].rstrip(")"): tid for tid, name in tracks.items()}
    assert s1 in by_handle and s2 in by_handle, tracks
    ops = {(e["tid"], e["name"]) for e in events if e["ph"] == "X" and e.get("cat") == "op"}
    assert (by_handle[s1], "aclnnMuls") in ops
    assert (by_handle[s2], "aclnnAdds") in ops
    memory = [e for e in events if e["ph"] == "C" and e["name"] == "memory" and e["pid"] == 0]
    assert memory and max(e["args"]["reserved"] for e in memory) >= 2 * (1 << 18)
