"""The other linters' descriptions of their checks, read from wheel sources without importing them
(``bench/_lintdocs.py``, a source of the labelled lesson pairs): small sources written in each layout."""

from __future__ import annotations

import zipfile
from pathlib import Path

from bench import _lintdocs

PYLINT = """
class ImportsChecker:
    msgs = {
        "C0414": (
            "Import alias does not rename original package",
            "useless-import-alias",
            "Used when an import alias is same as "
            "original package, e.g., using import numpy as numpy.",
        ),
        "W0404": ("Reimport %r (imported line %s)", "reimported", "Used when a module is imported more than once."),
        "E9999": ("Too short", "short"),
    }
"""

PYFLAKES = """
class Message:
    message = ""

class UnusedImport(Message):
    message = "%r imported but unused"

class NotMapped(Message):
    message = "never reported by flake8"
"""

FLAKE8 = 'FLAKE8_PYFLAKES_CODES = {"UnusedImport": "F401", "Other": "F999"}\n'

PLUGIN = """
MESSAGES = {"C400": "C400 Unnecessary generator - rewrite as a list comprehension."}

class UnnecessaryReturnNone(Error):
    code = "R501"
    message = "do not explicitly return None in function if it is the only possible return value."

class NamingChecker:
    N801 = "class name '{name}' should use CapWords convention"

@test.test_id("B101")
def assert_used(context):
    return bandit.Issue(severity=LOW, text="Use of assert detected.")

@rule("SIM101", ast.BoolOp)
def get_sim101(node):
    RULE = "Multiple isinstance-calls which can be merged into a single call for variable '{var}'"
    yield Violation(node, RULE.format(var=1))

@rule("SIM102", ast.If)
def get_sim102(node):
    yield Violation(node, "Use a single if-statement instead of nested if-statements")

sets.append(build_conf_dict("pickle", "B301", ["pickle.loads"], "Pickle can be unsafe on untrusted data."))
PIE790 = partial(Error, message="PIE790 no-unnecessary-pass: `pass` can be removed.")
"""


def test_pylint_descriptions_are_read_from_the_checkers_msgs() -> None:
    found = _lintdocs.pylint({"pylint/checkers/imports.py": PYLINT, "pylint/other.py": PYLINT})
    assert found == {
        "PLC0414": "Used when an import alias is same as original package, e.g., using import numpy as numpy.",
        "PLW0404": "Used when a module is imported more than once.",
    }


def test_pyflakes_messages_take_their_codes_from_flake8() -> None:
    found = _lintdocs.pyflakes({"pyflakes/messages.py": PYFLAKES}, {"flake8/plugins/pyflakes.py": FLAKE8})
    assert found == {"F401": "imported but unused"}


def test_plugin_messages_in_every_layout_map_to_ruff_codes() -> None:
    found = _lintdocs.plugin({"plugin.py": PLUGIN, "broken.py": "def (:"}, lambda code: f"X{code}")
    assert found == {
        "XC400": "Unnecessary generator - rewrite as a list comprehension.",
        "XR501": "do not explicitly return None in function if it is the only possible return value.",
        "XN801": "class name should use CapWords convention",
        "XB101": "Use of assert detected.",
        "XSIM101": "Multiple isinstance-calls which can be merged into a single call for variable",
        "XSIM102": "Use a single if-statement instead of nested if-statements",
        "XB301": "Pickle can be unsafe on untrusted data.",
        "XPIE790": "`pass` can be removed.",
    }
    assert _lintdocs.PLUGINS["flake8-return"][1]("R501") == "RET501"
    assert _lintdocs.PLUGINS["bandit"][1]("B101") == "S101"


def test_a_wheel_is_read_as_its_python_sources(tmp_path: Path) -> None:
    wheel = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("pkg/checks.py", PLUGIN)
        archive.writestr("pkg-1.0.dist-info/METADATA", "Name: pkg")
    assert list(_lintdocs.sources(wheel)) == ["pkg/checks.py"]
