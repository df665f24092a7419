"""Seed 001 paths: loops in a namespace, one record numbering, a missing Python module, and the
JavaScript runners and markdownlint parsed like pytest / mypy / ruff.

The node test runner and npm run for real (no package to install). The parsers are also checked
against output jest, vitest and markdownlint printed (jest 30, vitest 4.1, markdownlint-cli 0.48,
node 20), kept in ``tests/data/loop_js/``, and the real tools run too: from
``LESSONBANK_TEST_NODE_MODULES`` when it names a ``node_modules`` holding them, else npm-installed
once into the test cache (:mod:`tests.npm_packages`; skipped without npm).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lessonbank import LessonBank
from lessonbank.errors import EvaluatorError
from lessonbank.llm import FakeLLM
from lessonbank.loop import ActorOutput, CommandEvaluator, FunctionEvaluator, ReflexionLoop
from lessonbank.loop.evaluators import PARSERS, CheckResult, score, tool_of, verification_type_of
from lessonbank.loop.records import export_aiwg
from lessonbank.loop.window import resolve_omega
from tests.npm_packages import npm_program
from tests.test_loop import reflection

DATA = Path(__file__).parent / "data" / "loop_js"
NODE_MODULES = os.environ.get("LESSONBANK_TEST_NODE_MODULES", "")
needs_node = pytest.mark.skipif(not (shutil.which("node") and shutil.which("npm")), reason="node/npm missing")

NODE_TEST = """const test = require("node:test");
const assert = require("node:assert");
function add(a, b) { return a - b; }
test("adds zero", () => { assert.strictEqual(add(2, 0), 2); });
test("adds two", () => { assert.strictEqual(add(2, 3), 5); });
test.it.skip("later", () => {});
"""


# --------------------------------------------------------------------------- namespaces


def _failing_loop(bank: LessonBank, task: str) -> Any:
    return ReflexionLoop(
        bank,
        actor=lambda t, m: ActorOutput(actions=["edited the parser"]),
        evaluator=FunctionEvaluator(lambda out: 0.4, name="score"),
        max_iterations=1,
    ).run(task, task_type="code")


def test_a_loop_learns_and_recalls_in_its_banks_namespace(db_url: str) -> None:
    llm = FakeLLM(default=reflection("edge_case_miss", "Handle empty input before parsing the header"))
    with LessonBank(db_url, llm=llm, namespace="team-a") as team_a:
        first = _failing_loop(team_a, "Parse the empty invoice file")
        learned = team_a.lessons(tags=["reflexion"])
        assert [lesson.correction for lesson in learned] == ["Handle empty input before parsing the header"]
        assert {lesson.namespace for lesson in learned} == {"team-a"}
        assert [r["loop_id"] for r in team_a.search_reflections(keywords=["invoice"])] == [first.loop_id]
        # team-a's next loop on a like task starts from what team-a learned.
        again = _failing_loop(team_a, "Parse the empty invoice file again")
        assert again.prior_lesson_ids == [learned[0].id]
    with LessonBank(db_url, llm=llm) as default:
        assert default.lessons(tags=["reflexion"]) == []
        assert default.search_reflections() == []
        assert _failing_loop(default, "Parse the empty invoice file").prior_lesson_ids == []


# --------------------------------------------------------------------------- numbering


def test_export_into_the_live_folder_rewrites_the_same_files(db_url: str, tmp_path: Path) -> None:
    live = tmp_path / "reflections"
    with LessonBank(db_url, llm=FakeLLM(default=reflection("logic_error", "Check the sign"))) as bank:
        scores = iter([0.2, 1.0])
        result = ReflexionLoop(
            bank,
            actor=lambda t, m: ActorOutput(actions=["tried"]),
            evaluator=FunctionEvaluator(lambda out: next(scores), name="score"),
            records_dir=live,
        ).run("Fix the sign")
        folder = live / result.loop_id
        written = {path.name: path.read_text() for path in folder.iterdir()}
        assert sorted(written) == ["001.json", "002.json"]
        paths = export_aiwg(bank, result.loop_id, live)
        assert [path.name for path in paths] == ["001.json", "002.json"]
        assert sorted(path.name for path in folder.iterdir()) == ["001.json", "002.json"]
        assert [json.loads(folder.joinpath(name).read_text())["iteration"] for name in sorted(written)] == [
            0,
            1,
        ]


# --------------------------------------------------------------------------- a missing module


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Python with nothing installed: a venv without pip."""
    folder = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    return str(folder / "bin" / "python")


@pytest.mark.parametrize("command", ["-m pytest -q", "-m mypy calc.py", "-m ruff check ."])
def test_a_module_the_python_lacks_is_an_evaluator_error(
    bare_python: str, tmp_path: Path, command: str
) -> None:
    (tmp_path / "calc.py").write_text("x = 1\n")
    evaluator = CommandEvaluator([f"{bare_python} {command}"], cwd=tmp_path)
    with pytest.raises(EvaluatorError, match="has no module") as caught:
        evaluator.evaluate(None)
    assert caught.value.command == f"{bare_python} {command}"


def test_a_missing_module_aborts_the_loop_after_one_reflection(
    bare_python: str, db_url: str, tmp_path: Path
) -> None:
    llm = FakeLLM(default=reflection("configuration_error", "Install the test runner first"))
    with LessonBank(db_url, llm=llm) as bank:
        result = ReflexionLoop(
            bank,
            actor=lambda t, m: ActorOutput(actions=["edited"]),
            evaluator=CommandEvaluator([f"{bare_python} -m pytest -q"], cwd=tmp_path),
            max_iterations=3,
        ).run("Make the tests pass")
    assert result.status == "error" and result.iterations == 1 and len(llm.calls) == 1
    assert "cannot run" in result.records[0]["notes"]


def test_an_import_error_inside_the_tests_is_still_a_failed_check(tmp_path: Path) -> None:
    (tmp_path / "test_x.py").write_text("import no_such_module_xyz\n\n\ndef test_x():\n    pass\n")
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    evaluation = CommandEvaluator([f"{sys.executable} -m pytest -q"], cwd=tmp_path, env=env).evaluate(None)
    assert not evaluation.passed and evaluation.metrics["tests_failed"] == 1


# --------------------------------------------------------------------------- JavaScript runners


def _parsed(tool: str, *, out: str = "", err: str = "", report: str = "", code: int = 1) -> CheckResult:
    result = CheckResult(tool=tool, kind="tests", status="fail" if code else "pass", exit_code=code)
    PARSERS[tool](result, out, err, report)
    return result


def test_tool_detection_of_the_javascript_runners() -> None:
    assert tool_of(["npm", "test"]) == tool_of(["npm", "run", "test:coverage"]) == "npm-test"
    assert tool_of(["yarn", "test"]) == tool_of(["pnpm", "run", "test-unit"]) == "npm-test"
    assert tool_of(["npm", "run", "build"]) == "other"
    assert tool_of(["npx", "jest", "--ci"]) == "jest"
    assert tool_of(["npx", "vitest", "run"]) == "vitest"
    assert tool_of(["node", "--test", "test/"]) == "node-test"
    assert tool_of(["node", "script.js"]) == "other"
    assert (
        tool_of(["npx", "markdownlint", "docs"]) == tool_of(["markdownlint-cli2", "*.md"]) == "markdownlint"
    )
    for command in ("npm test", "npm run test:coverage", "npx jest", "node --test"):
        evaluator = CommandEvaluator([command])
        assert verification_type_of(evaluator) == "unit_tests"
        assert resolve_omega(None, verification_type="unit_tests", categories=[]) == 1
    assert verification_type_of(CommandEvaluator(["markdownlint ."])) == "lint"


@pytest.mark.parametrize("name", ["jest.json", "vitest.json"])
def test_jest_and_vitest_json_reports(name: str) -> None:
    text = (DATA / name).read_text()
    for result in (
        _parsed("jest", report=text),
        _parsed("npm-test", out=f"\n> p@1.0.0 test\n> jest\n\n{text}"),
    ):
        assert (result.tests_passed, result.tests_failed) == (1, 1)
        (error,) = result.errors
        assert error["type"] == "test_failure" and error["rule"] == "adds two"
        assert error["file"].endswith("sum.test.js") and error["line"] == 4
        assert "5" in error["message"]
    evaluation = score([_parsed("jest", report=text)])
    assert evaluation.reward == 0.75 and evaluation.verification_type == "unit_tests"


def test_a_jest_suite_that_cannot_run_is_one_failed_test() -> None:
    result = _parsed("jest", report=(DATA / "jest-broken.json").read_text())
    assert (result.tests_passed, result.tests_failed) == (0, 1)
    assert result.errors[0]["type"] == "syntax_error" and result.errors[0]["file"].endswith("broken.test.js")


@pytest.mark.parametrize("name", ["jest-default.txt", "vitest-default.txt"])
def test_the_human_summaries_give_the_counts(name: str) -> None:
    result = _parsed("npm-test", err=(DATA / name).read_text())
    assert (result.tests_passed, result.tests_failed) == (1, 1)


@pytest.mark.parametrize("name", ["node-tap.txt", "node-spec.txt"])
def test_node_test_runner_output(name: str) -> None:
    result = _parsed("node-test", out=(DATA / name).read_text())
    assert (result.tests_passed, result.tests_failed) == (2, 1)
    (error,) = result.errors
    assert error["rule"] == "adds two" and error["type"] == "test_failure"
    if name == "node-tap.txt":
        assert error["file"].endswith("sum.test.js") and error["line"] == 5
        assert "strictly equal" in error["message"]


def test_markdownlint_output_is_lint() -> None:
    for name in ("markdownlint.txt", "markdownlint.json"):  # both printed on stderr
        text = (DATA / name).read_text()
        result = CheckResult(tool="markdownlint .", kind="lint", status="fail", exit_code=1)
        PARSERS["markdownlint"](result, "", text, "")
        assert sorted((e["line"], e["rule"].split("/")[0]) for e in result.errors) == [
            (1, "MD022"),
            (3, "MD022"),
            (5, "MD032"),
            (6, "MD004"),
            (6, "MD032"),
        ], name
        assert all(e["type"] == "lint_error" and e["file"] == "md/README.md" for e in result.errors)
        evaluation = score([result])
        assert evaluation.reward == 0.8 and evaluation.metrics["lint_errors"] == 5
        assert evaluation.verification_type == "lint"


def _node_project(root: Path, scripts: dict[str, str]) -> Path:
    (root / "test").mkdir(parents=True)
    (root / "test" / "sum.test.js").write_text(NODE_TEST)
    (root / "package.json").write_text(json.dumps({"name": "p", "version": "1.0.0", "scripts": scripts}))
    return root


@needs_node
@pytest.mark.parametrize(
    "command", ["node --test test/", "npm test", "npm run test:coverage", "npm test -- --test-reporter=spec"]
)
def test_node_and_npm_test_are_counted_per_test(tmp_path: Path, command: str) -> None:
    project = _node_project(
        tmp_path / "p",
        {"test": "node --test", "test:coverage": "node --test --experimental-test-coverage test/"},
    )
    env = {key: value for key, value in os.environ.items() if key != "NODE_OPTIONS"}
    env["npm_config_cache"] = str(tmp_path / "npm-cache")
    evaluation = CommandEvaluator([command], cwd=project, env=env).evaluate(None)
    assert not evaluation.passed
    assert evaluation.metrics["tests_passed"] == 1 and evaluation.metrics["tests_failed"] == 1
    assert evaluation.reward == 0.75 and evaluation.verification_type == "unit_tests"
    (error,) = evaluation.errors
    assert error["rule"] == "adds two"


# --------------------------------------------------------------------------- real jest / vitest / markdownlint


PACKAGES = {"jest": "jest", "vitest": "vitest", "markdownlint": "markdownlint-cli"}


def _installed(name: str) -> Path:
    """The real program: from ``LESSONBANK_TEST_NODE_MODULES``, else npm-installed in the test cache."""
    if NODE_MODULES:
        binary = Path(NODE_MODULES) / ".bin" / name
        if binary.exists():
            return binary
    return npm_program(PACKAGES[name], name, on_path=False)


def _node_modules(binary: Path) -> Path:
    return binary.parent.parent  # <node_modules>/.bin/<name>


@needs_node
@pytest.mark.parametrize("runner", ["jest", "vitest"])
def test_real_jest_and_vitest_through_npm_test(tmp_path: Path, runner: str) -> None:
    binary = _installed(runner)
    project = tmp_path / "p"
    project.mkdir()
    os.symlink(_node_modules(binary), project / "node_modules")
    header = 'import { test, expect } from "vitest";\n' if runner == "vitest" else ""
    body = "function add(a, b) { return a - b; }\n"
    body += 'test("adds zero", () => { expect(add(2, 0)).toBe(2); });\n'
    body += 'test("adds two", () => { expect(add(2, 3)).toBe(5); });\n'
    (project / "sum.test.js").write_text(header + body)
    script = "jest" if runner == "jest" else "vitest run"
    (project / "package.json").write_text(json.dumps({"name": "p", "scripts": {"test": script}}))
    env = {**os.environ, "npm_config_cache": str(tmp_path / "npm-cache"), "CI": "1"}
    for command in ("npm test", f"npx {script}"):
        evaluation = CommandEvaluator([command], cwd=project, env=env).evaluate(None)
        assert (evaluation.metrics["tests_passed"], evaluation.metrics["tests_failed"]) == (1, 1), command
        assert evaluation.errors[0]["rule"] == "adds two"
        assert evaluation.errors[0]["line"] == body.count("\n") + header.count("\n")


def test_real_markdownlint(tmp_path: Path) -> None:
    binary = _installed("markdownlint")
    (tmp_path / "README.md").write_text("# Title\nSome text\n")
    for command in (f"{binary} README.md", f"{binary} --json README.md"):
        evaluation = CommandEvaluator([command], cwd=tmp_path).evaluate(None)
        assert evaluation.reward == 0.8 and evaluation.verification_type == "lint", command
        assert [e["rule"].split("/")[0] for e in evaluation.errors] == ["MD022"]
