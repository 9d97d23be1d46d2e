"""The loader of ``scenarios.yaml`` refuses a malformed row, naming the scenario and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conformance.scenarios import Fault, Outcome, TableError, load

HEAD = "files: {controller.go: component/clusterd/pkg/application/recover/controller.go}\n"
HEAD += "faults: {UCE: {pod: 1, type: uce, level: RestartBusiness}}\n"
ROW = "- {id: one, src: [controller.go:10-20], strategies: retry, faults: [UCE], expected: {init: 403}"


def table(tmp_path: Path, row: str) -> Path:
    path = tmp_path / "scenarios.yaml"
    path.write_text(f"{HEAD}scenarios:\n  {row}\n")
    return path


def test_a_row_reads_into_a_scenario_with_the_cited_path_expanded(tmp_path: Path) -> None:
    (scenario,) = load(table(tmp_path, ROW + "}"))
    assert scenario.src == ("component/clusterd/pkg/application/recover/controller.go:10-20",)
    assert scenario.faults == (Fault(1, "uce", "RestartBusiness"),)
    assert scenario.expected == Outcome(init=403)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (ROW + ", spares: false}", r"scenario 'one': unknown key\(s\) \['spares'\]"),
        (ROW.replace("strategies: retry, ", "") + "}", r"scenario 'one': missing key\(s\) \['strategies'\]"),
        (ROW.replace("controller.go:10-20", "rules.go:1") + "}", "scenario 'one': src: 'rules.go:1'"),
        (ROW.replace("[UCE]", "[HCCL]") + "}", "scenario 'one': faults: 'HCCL'"),
        (ROW.replace("{init: 403}", "{inits: 403}") + "}", "scenario 'one': expected: unknown key"),
        (
            ROW.replace("{init: 403}", "{restart_fault_process: maybe}") + "}",
            "scenario 'one': expected: restart_fault_process: true, false or none",
        ),
        (ROW + ", then: [HCCL]}", "scenario 'one': faults: 'HCCL'"),
    ],
)
def test_a_malformed_row_is_refused_by_name(tmp_path: Path, row: str, message: str) -> None:
    with pytest.raises(TableError, match=message):
        load(table(tmp_path, row))


def test_then_and_restart_fault_process_read(tmp_path: Path) -> None:
    row = ROW.replace("{init: 403}", '{restart_fault_process: "none"}') + ", then: [UCE, {pod: 0}]}"
    (scenario,) = load(table(tmp_path, row))
    assert scenario.then == (Fault(1, "uce", "RestartBusiness"), Fault(0))
    assert scenario.expected.restart_fault_process == "none"
    (flag,) = load(table(tmp_path, ROW.replace("{init: 403}", "{restart_fault_process: true}") + "}"))
    assert flag.expected.restart_fault_process == "true"
