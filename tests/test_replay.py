"""Record once, replay many: the replay table's checks, the replaying env, and ``wmrl record`` for real.

The table tests use a tiny hand-made table over a real competition of the built-in suite (its real
content fingerprint and its real rendered scripts); the outcomes in it are made up, which is what the
table is for: the env must serve whatever was recorded. ``wmrl record`` runs for real in the
bubblewrap sandbox (marked ``integration``).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from wmrl_adapters.cli import main as wmrl_main
from wmrl_adapters.train.kaggle.record import (
    SUITE_DESIGNS,
    CheckRow,
    RecordArgs,
    load_designs,
    record_table,
    write_check,
)

from wmrl_algos.errors import ConfigError, DataError, ReplayMismatchError, ReplayMiss
from wmrl_envs.kaggle.design import Design, design_header, render_design
from wmrl_envs.kaggle.env import MAX_TEXT_LENGTH, parse_action
from wmrl_envs.kaggle.fingerprint import competition_fingerprint
from wmrl_envs.kaggle.outcome import Outcome
from wmrl_envs.kaggle.replay import (
    REPLAY_FORMAT,
    RecordedOutcome,
    RecordingSettings,
    ReplayKaggleEnv,
    ReplayTable,
    code_digest,
    execute_for_table,
    is_recordable,
)
from wmrl_envs.kaggle.suite import load_suite

COMPETITION = "titanic-survival"
LINEAR = Design(model="linear")
TREE = Design(model="tree", categorical="ordinal")
UNRECORDED = Design(model="knn")


@pytest.fixture(scope="module")
def suite():
    return load_suite()


def _table(suite) -> ReplayTable:
    competition = suite.get(COMPETITION)
    table = ReplayTable([LINEAR, TREE, UNRECORDED])
    fingerprint = competition_fingerprint(competition)
    valid = Outcome(status="valid", score=0.81, public_score=0.8, position=0.62, above_median=True,
                    stdout_tail="validation score: 0.8\n", exit_code=0, backend="local",
                    extra={"cpu_s": 3.25, "max_rss_mb": 210.0})
    failed = Outcome(status="runtime_error", stderr_tail="Traceback ...\nValueError: boom\n", exit_code=1,
                     traceback="ValueError: boom", backend="local", extra={"cpu_s": 1.5})
    for design, outcome in ((LINEAR, valid), (TREE, failed)):
        table.add(COMPETITION, fingerprint, design, code_digest(render_design(design, competition)),
                  RecordedOutcome.from_outcome(dataclasses.replace(outcome, wall_s=4.0)))
    return table


def _action(design: Design, competition) -> str:
    return f"```python\n{render_design(design, competition)}```\n"


def _edited(path: Path, edit) -> Path:
    document = json.loads(path.read_text())
    edit(document)
    path.write_text(json.dumps(document))
    return path


def test_table_round_trips_through_its_file(tmp_path, suite):
    table = _table(suite)
    path = table.save(tmp_path / "table.json")
    loaded = ReplayTable.load(path, suite, designs=[LINEAR, TREE, UNRECORDED])
    assert json.loads(path.read_text())["format"] == REPLAY_FORMAT
    assert loaded.designs == table.designs and loaded.competitions() == [COMPETITION]
    assert loaded.to_json() == table.to_json()
    assert loaded.record(COMPETITION, LINEAR) == table.record(COMPETITION, LINEAR)
    assert loaded.position(COMPETITION, LINEAR) == 0.62
    assert loaded.position(COMPETITION, TREE) == 0.0  # a failed solution has position 0
    assert loaded.cpu_s(COMPETITION, TREE) == 1.5
    assert loaded.missing([COMPETITION]) == [(COMPETITION, UNRECORDED)]


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda d: d.update(suite_version="v0"), "suite version differs"),
        (lambda d: d.update(grading_code_version="0" * 64), "grading code differs"),
        (lambda d: d.update(format="wmrl-replay/0"), "format"),
        (lambda d: d["competitions"][COMPETITION].update(fingerprint="0" * 64),
         f"{COMPETITION!r}: content differs"),
        (lambda d: d["competitions"][COMPETITION]["records"]["0"].update(code_sha256="0" * 64),
         f"{COMPETITION!r}: solution code differs"),
    ],
    ids=["suite-version", "grading-code", "format", "content", "solution-code"],
)
def test_a_table_recorded_under_other_conditions_is_refused_naming_the_mismatch(tmp_path, suite, edit, named):
    path = _edited(_table(suite).save(tmp_path / "table.json"), edit)
    with pytest.raises(ReplayMismatchError, match=named):
        ReplayTable.load(path, suite)


def test_a_table_of_another_design_list_is_refused(tmp_path, suite):
    path = _table(suite).save(tmp_path / "table.json")
    with pytest.raises(ReplayMismatchError, match="design list differs: design 1 is tree"):
        ReplayTable.load(path, designs=[LINEAR, Design(model="svm"), UNRECORDED])
    with pytest.raises(ReplayMismatchError, match="the table has 3 designs, 1 were expected"):
        ReplayTable.load(path, designs=[LINEAR])


def test_another_competition_content_is_refused_by_the_env(tmp_path, suite):
    competition = suite.get(COMPETITION)
    answers = tmp_path / "answers.csv"
    shutil.copy(competition.answers_path, answers)
    lines = answers.read_text().splitlines(keepends=True)
    answers.write_text("".join(lines[:-1]))  # one hidden answer fewer: another competition, same id
    changed = dataclasses.replace(competition, answers_path=answers)
    env = ReplayKaggleEnv(_table(suite), competition=changed)
    env.reset(seed=0)
    with pytest.raises(ReplayMismatchError, match=f"{COMPETITION!r}: content differs"):
        env.step(_action(LINEAR, changed))


def test_a_corrupt_table_is_a_data_error_not_a_traceback(tmp_path, suite):
    path = _edited(_table(suite).save(tmp_path / "table.json"),
                   lambda d: d["competitions"][COMPETITION]["records"]["0"]["outcome"].update(status="won"))
    with pytest.raises(DataError, match="status='won'"):
        ReplayTable.load(path)
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(DataError, match="cannot read the replay table"):
        ReplayTable.load(tmp_path / "broken.json")


@pytest.mark.parametrize(
    ("competition_id", "design", "named"),
    [("concrete-strength", LINEAR, "no competition 'concrete-strength'"),
     (COMPETITION, Design(model="svm"), "not in the replay table's design list"),
     (COMPETITION, UNRECORDED, "no entry for design knn")],
    ids=["competition", "design", "entry"],
)
def test_a_miss_raises_replay_miss(suite, competition_id, design, named):
    with pytest.raises(ReplayMiss, match=named):
        _table(suite).record(competition_id, design)


def test_the_env_serves_the_recorded_outcome_and_charges_its_cpu_seconds(suite):
    table = _table(suite)
    env = ReplayKaggleEnv(table, suite=suite, split="all", max_turns=2)
    env.reset(options={"competition": COMPETITION})
    _, reward, _, _, info = env.step(_action(LINEAR, suite.get(COMPETITION)))
    assert info["replayed"] is True and info["status"] == "valid"
    assert info["cpu_s"] == table.cpu_s(COMPETITION, LINEAR) == 3.25
    assert info["position"] == 0.62 and reward == pytest.approx(0.5 + 0.5 * 0.62)
    assert info["isolated"] is True  # recorded in the bubblewrap sandbox
    _, reward, terminated, _, info = env.step(_action(TREE, suite.get(COMPETITION)))
    assert (info["status"], reward, info["replayed"], terminated) == ("runtime_error", 0.1, True, True)


@pytest.mark.parametrize(
    "action",
    [b"bytes", "x" * (MAX_TEXT_LENGTH + 1), "x = '\ud800'", "I would use a random forest."],
    ids=["not-text", "too-long", "lone-surrogate", "prose"],
)
def test_the_env_judges_malformed_actions_before_the_table(suite, action):
    env = ReplayKaggleEnv(_table(suite), suite=suite, split="all")
    env.reset(options={"competition": COMPETITION})
    _, reward, _, _, info = env.step(action)
    expected = parse_action(action)
    assert isinstance(expected, Outcome)
    assert (info["status"], info["detail"], reward) == ("malformed", expected.detail, 0.0)
    assert info["replayed"] is False


def test_a_design_header_on_other_code_replays_nothing(suite):
    env = ReplayKaggleEnv(_table(suite), suite=suite, split="all")
    env.reset(options={"competition": COMPETITION})
    forged = design_header(LINEAR) + "import shutil\nshutil.copy('input/sample_submission.csv', 'x.csv')\n"
    with pytest.raises(ReplayMiss, match="carries the header of design linear"):
        env.step(f"```python\n{forged}```")
    with pytest.raises(ReplayMiss, match="without a design header"):
        env.step("```python\nprint(1)\n```")


def test_the_env_refuses_limits_other_than_the_recorded_ones(suite):
    with pytest.raises(ReplayMismatchError, match="timeout_s=60.0, but the replay table was recorded with"):
        ReplayKaggleEnv(_table(suite), suite=suite, timeout_s=60.0)
    with pytest.raises(ConfigError, match="on_miss='maybe'"):
        ReplayKaggleEnv(_table(suite), suite=suite, on_miss="maybe")  # type: ignore[arg-type]
    assert ReplayKaggleEnv(_table(suite), suite=suite).config.timeout_s == RecordingSettings().timeout_s


def test_an_unknown_outcome_is_retried_and_never_recorded():
    with pytest.raises(DataError, match="never recorded"):
        RecordedOutcome(Outcome(status="sandbox_error"), cpu_s=0.0, wall_s=0.0)
    calls = iter([Outcome(status="timeout"), Outcome(status="sandbox_error")])
    assert execute_for_table(lambda: next(calls)).status == "sandbox_error"


def test_a_timeout_is_recorded_only_when_the_solution_used_the_time():
    settings = RecordingSettings(timeout_s=60.0)
    assert is_recordable(Outcome(status="timeout", extra={"cpu_s": 59.0}), settings)
    assert not is_recordable(Outcome(status="timeout", extra={"cpu_s": 4.0}), settings)  # the host starved it
    assert not is_recordable(Outcome(status="sandbox_error", extra={"cpu_s": 59.0}), settings)
    assert is_recordable(Outcome(status="runtime_error", extra={"cpu_s": 0.1}), settings)


def _designs_file(tmp_path: Path, designs) -> str:
    path = tmp_path / "designs.json"
    path.write_text(json.dumps([dataclasses.asdict(design) for design in designs]))
    return str(path)


def test_record_refuses_to_resume_a_table_of_another_design_list_or_limits(tmp_path, suite):
    out = _table(suite).save(tmp_path / "table.json")
    other = _designs_file(tmp_path, [LINEAR, UNRECORDED])
    with pytest.raises(ReplayMismatchError, match="design list differs"):
        record_table(RecordArgs(designs=other, out=str(out), competitions=COMPETITION, resume=True), suite)
    same = _designs_file(tmp_path, [LINEAR, TREE, UNRECORDED])
    with pytest.raises(ReplayMismatchError, match="limits differ"):
        record_table(RecordArgs(designs=same, out=str(out), competitions=COMPETITION, resume=True,
                                timeout_s=60.0), suite)
    with pytest.raises(ConfigError, match="exists; pass --resume"):
        record_table(RecordArgs(designs=same, out=str(out), competitions=COMPETITION), suite)


@pytest.mark.parametrize(
    ("spec", "named"),
    [("no-such-preset", "neither a preset"), ('[{"model": "forest"}]', "not a list of designs")],
    ids=["unknown", "invalid-design"],
)
def test_a_bad_design_list_is_a_config_error(tmp_path, spec, named):
    if spec.startswith("["):
        (tmp_path / "designs.json").write_text(spec)
        spec = str(tmp_path / "designs.json")
    with pytest.raises(ConfigError, match=named):
        load_designs(spec)


def test_the_suite_preset_is_a_fixed_list_of_distinct_designs():
    assert load_designs("suite") == SUITE_DESIGNS
    assert len(set(SUITE_DESIGNS)) == len(SUITE_DESIGNS) == 16


@pytest.mark.integration
def test_wmrl_record_executes_for_real_and_resumes_without_executing_again(
    tmp_path, suite, strict_bubblewrap, capsys
):
    out = tmp_path / "table.json"
    designs = _designs_file(tmp_path, [LINEAR, TREE])
    command = ["record", "--designs", designs, "--competitions", "mortgage-denial", "--out", str(out)]
    assert wmrl_main([*command, "--warm", "0"]) == 0
    assert "recorded 2 of 2 executions" in capsys.readouterr().out
    recorded = out.read_text()
    table = ReplayTable.load(out, suite, designs=[LINEAR, TREE])
    assert len(table) == 2 and all(table.cpu_s("mortgage-denial", d) > 0 for d in (LINEAR, TREE))
    assert wmrl_main([*command, "--resume"]) == 0
    assert "recorded 0 of 0 executions" in capsys.readouterr().out
    assert out.read_text() == recorded  # nothing re-executed: the measured CPU-s are the first run's
    assert wmrl_main(command) == 2
    assert "exists; pass --resume" in capsys.readouterr().err


@pytest.mark.integration
def test_a_miss_executes_live_and_joins_the_table_with_on_miss_execute(suite, strict_bubblewrap):
    table = ReplayTable([LINEAR, TREE])
    env = ReplayKaggleEnv(table, on_miss="execute", suite=suite, split="all", sandbox=strict_bubblewrap,
                          max_turns=2)
    env.reset(options={"competition": "mortgage-denial"})
    action = _action(LINEAR, env.competition)
    _, _, _, _, live = env.step(action)
    assert live["replayed"] is False and live["status"] == "valid" and live["isolated"] is True
    assert table.cpu_s("mortgage-denial", LINEAR) == live["cpu_s"]
    _, _, _, _, replayed = env.step(action)
    assert replayed["replayed"] is True
    assert (replayed["score"], replayed["cpu_s"]) == (live["score"], live["cpu_s"])


def test_the_check_report_counts_a_different_status_or_score_as_disagreement_and_unknown_apart(tmp_path):
    valid = Outcome(status="valid", score=0.8, extra={"cpu_s": 2.0})
    rows = [
        CheckRow(COMPETITION, LINEAR, valid, dataclasses.replace(valid, extra={"cpu_s": 2.2}), 2.0),
        CheckRow(COMPETITION, TREE, valid, dataclasses.replace(valid, score=0.8 + 1e-3), 2.0),
        CheckRow(COMPETITION, UNRECORDED, valid, Outcome(status="runtime_error", extra={"cpu_s": 1.0}), 2.0),
        CheckRow("concrete-strength", LINEAR, valid, Outcome(status="sandbox_error"), 2.0, live_known=False),
    ]
    assert [row.agrees for row in rows] == [True, False, False, None]
    report = write_check(rows, tmp_path / "check.md", tmp_path / "table.json").read_text()
    assert "**1/3 agree** (1 unknown); largest score difference 0.001" in report


@pytest.mark.long
@pytest.mark.integration
def test_wmrl_record_check_re_executes_live_and_agrees(tmp_path, strict_bubblewrap):
    out = tmp_path / "table.json"
    command = ["record", "--designs", _designs_file(tmp_path, [TREE]), "--competitions", "mortgage-denial",
               "--out", str(out), "--warm", "0"]
    assert wmrl_main(command) == 0
    assert wmrl_main([*command, "--resume", "--check", "1", "--check-out", str(tmp_path / "check.md")]) == 0
    assert "**1/1 agree** (0 unknown)" in (tmp_path / "check.md").read_text()
