import json

from constraint_helpers import build, call, sc
from tracesynth.cli import main


def test_check_exit_codes_json_and_rule_selection(tmp_path, capsys):
    clean = tmp_path / "clean.parquet"
    build([*call("read", 3, count=3, fd=0)]).save(clean)
    broken = tmp_path / "broken.parquet"
    build([sc("read", "entry"), sc("write", "entry"), {"event": "x", "ts": 1}]).save(broken)
    assert main(["check", str(clean)]) == 0
    capsys.readouterr()
    assert main(["check", str(clean), str(broken), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data[str(broken)]["per_rule"]["syscall-pairing"] == 1
    assert data[str(broken)]["per_rule"]["timestamps"] == 1
    assert data[str(clean)]["violated"] is False
    assert main(["check", str(broken), "--rules", "return-values"]) == 0
    assert main(["check", str(broken), "--rules", "bogus"]) == 2


def test_repair_writes_trace_and_edit_log(tmp_path, capsys):
    broken = tmp_path / "broken.parquet"
    build([sc("read", "entry"), sc("write", "entry"), *call("close", 5)]).save(broken)
    out, edits = tmp_path / "fixed.parquet", tmp_path / "edits.jsonl"
    assert main(["repair", str(broken), "-o", str(out), "--edits", str(edits)]) == 0
    log = [json.loads(line) for line in edits.read_text().splitlines()]
    assert {e["rule"] for e in log} == {"syscall-pairing", "return-values"}
    assert all(set(e) == {"op", "row", "rule", "before", "after"} for e in log)
    assert main(["check", str(out)]) == 0
