"""Generate the synchronous twin of each hand-written async module (httpcore's "unasync" approach).

    python scripts/unasync.py           # write every target from its source
    python scripts/unasync.py --check   # exit 1, showing the difference, when a target is stale

Only the async module of a pair is written by hand; its target is generated and checked in, and
``tests/test_generated.py`` fails while a target is not what this script produces now. To add a
pair, add one line to ``PAIRS``.

The rules work on the source's tokens (``tokenize``), never on its text, so prose is not rewritten
by accident:

- code (NAME tokens): ``async`` before ``def`` / ``with`` / ``for`` and every ``await`` are dropped;
  a name the pair lists is renamed (``AsyncLessonBank`` → ``LessonBank``); then a name of ``NAMES``
  (``__aenter__`` → ``__enter__``, ``aclose`` → ``close``, …); then any other ``Async<Upper>…`` name
  loses its prefix (``httpx.AsyncClient`` → ``httpx.Client``); a dotted name of ``DOTTED`` is
  replaced whole (``asyncio.sleep`` → ``time.sleep``);
- strings and comments: only the names the pair lists, as whole words (a class named in a
  docstring); nothing else;
- the module docstring is the pair's ``doc``, under a header saying the file is generated;
- the result goes through ``ruff check --fix-only --select F401,I`` (an import only the async code
  used goes, imports are sorted again) and ``ruff format``, with the project's configuration.

Before the pairs, it writes the one generated stretch of a hand-written module: the remote client's
plain methods (``remote/aio.py``, between two marker comments), one per operation of the table that
``AsyncLessonBank`` has and the server routes, with the bank method's own signature and one line that
sends the operation's request model. The remote methods that do more (``flush``, ``import_lessons``,
``export_to``…) are written by hand above the markers.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import io
import re
import subprocess
import sys
import tokenize
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = "scripts/unasync.py"

NAMES = {
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": "__next__",
    "StopAsyncIteration": "StopIteration",
    "aclose": "close",
    "aread": "read",
    "aiter_bytes": "iter_bytes",
    "aiter_lines": "iter_lines",
    "aiter_raw": "iter_raw",
    "aiter_text": "iter_text",
    "anext": "next",
    "aiter": "iter",
}
DOTTED = {"asyncio.sleep": "time.sleep"}
ASYNC_PREFIX = re.compile(r"Async(?=[A-Z])")
ASYNC_BEFORE = {"def", "with", "for"}


@dataclass(frozen=True)
class Pair:
    """One hand-written async module (``source``) and the sync module generated from it (``target``),
    paths from the repository root."""

    source: str
    target: str
    doc: str  # the generated module's docstring
    names: Mapping[str, str] = field(default_factory=dict)  # renamed in code, strings and comments


PAIRS = [
    Pair(
        "src/lessonbank/bank/aio.py",
        "src/lessonbank/bank/sync.py",
        doc="LessonBank: the synchronous facade; reflections run on a background thread.",
        names={"AsyncLessonBank": "LessonBank", "AsyncBankBase": "SyncBankBase"},
    ),
    Pair(
        "src/lessonbank/remote/aio.py",
        "src/lessonbank/remote/sync.py",
        doc=(
            "RemoteBank: LessonBank's methods over HTTP, against ``lessonbank serve``.\n\n"
            "Each method builds its operation's request model and sends it (:class:`~.transport.Transport`);\n"
            "the table of operations says where it goes."
        ),
        names={"AsyncRemoteBank": "RemoteBank", "AsyncLessonBank": "LessonBank"},
    ),
]


def _rename(name: str, pair: Pair) -> str:
    if name in pair.names:
        return pair.names[name]
    if name in NAMES:
        return NAMES[name]
    return ASYNC_PREFIX.sub("", name, count=1) if name.startswith("Async") else name


def _prose(text: str, pair: Pair) -> str:
    for old, new in pair.names.items():
        text = re.sub(rf"\b{re.escape(old)}\b", new, text)
    return text


def rewrite(source: str, pair: Pair) -> str:
    """``source`` with the rules applied (before ruff): the target's text, unformatted."""
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: tuple[int, int]) -> int:
        return starts[position[0] - 1] + position[1]

    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    prose_types = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", -1)}
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement) in ``source``
    docstring_done = False
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        after = tokens[i + 1] if i + 1 < len(tokens) else None
        if not docstring_done and tok.type not in (tokenize.COMMENT, tokenize.NL, tokenize.ENCODING):
            docstring_done = True
            if tok.type == tokenize.STRING and after is not None and after.type == tokenize.NEWLINE:
                edits.append((offset(tok.start), offset(tok.end), f'"""{pair.doc}"""'))
                i += 1
                continue
        if tok.type == tokenize.NAME and after is not None:
            if tok.string == "await" or (tok.string == "async" and after.string in ASYNC_BEFORE):
                # The keyword goes with the space after it (when the next token is on the same line).
                end = offset(after.start) if after.start[0] == tok.end[0] else offset(tok.end)
                edits.append((offset(tok.start), end, ""))
                i += 1
                continue
            if i + 2 < len(tokens) and after.string == ".":
                dotted = f"{tok.string}.{tokens[i + 2].string}"
                if dotted in DOTTED:
                    edits.append((offset(tok.start), offset(tokens[i + 2].end), DOTTED[dotted]))
                    i += 3
                    continue
        if tok.type == tokenize.NAME:
            renamed = _rename(tok.string, pair)
            if renamed != tok.string:
                edits.append((offset(tok.start), offset(tok.end), renamed))
        elif tok.type in prose_types:
            renamed = _prose(tok.string, pair)
            if renamed != tok.string:
                edits.append((offset(tok.start), offset(tok.end), renamed))
        i += 1
    out = source
    for start, end, text in reversed(edits):
        out = out[:start] + text + out[end:]
    header = (
        f"# Generated from {pair.source} by {SCRIPT}: do not edit.\n"
        f"# Edit the source, then run `python {SCRIPT}` (tests/test_generated.py checks this file is current).\n"
    )
    return header + out


def _ruff(args: Sequence[str], text: str, target: str, root: Path) -> str:
    command = [sys.executable, "-m", "ruff", *args, "--config", str(root / "pyproject.toml")]
    command += ["--stdin-filename", target, "-"]
    done = subprocess.run(command, input=text, capture_output=True, text=True, cwd=root, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[2:4])} failed on {target}:\n{done.stderr}")
    return done.stdout


def generate(pair: Pair, root: Path = ROOT) -> str:
    """The target's text as it must be checked in."""
    text = rewrite((root / pair.source).read_text("utf-8"), pair)
    text = _ruff(["check", "--fix-only", "--select", "F401,I"], text, pair.target, root)
    return _ruff(["format"], text, pair.target, root)


def stale(pairs: Iterable[Pair] = PAIRS, root: Path = ROOT) -> list[tuple[Pair, str]]:
    """The pairs whose checked-in target differs from what :func:`generate` gives, with that text."""
    found = []
    for pair in pairs:
        target = root / pair.target
        wanted = generate(pair, root)
        if not target.exists() or target.read_text("utf-8") != wanted:
            found.append((pair, wanted))
    return found


# ---------------------------------------------------------------------- the remote client's plain methods

REMOTE = "src/lessonbank/remote/aio.py"
BANK = "src/lessonbank/bank/aio.py"
BEGIN = "    # -- generated by scripts/unasync.py from bank/aio.py and the operation table: do not edit --"
END = "    # -- end of the generated methods --"


def remote_methods(root: Path = ROOT) -> str:
    """The remote client's plain methods: for each ``AsyncLessonBank`` method the table serves over
    REST and the client does not write by hand, the bank's signature and one line sending its
    request model (its parameters are the model's fields: tests/test_operations.py checks it)."""
    sys.path.insert(0, str(root / "src"))
    from lessonbank.operations import OPERATIONS

    remote = (root / REMOTE).read_text("utf-8")
    by_hand = _methods(remote.split(BEGIN)[0], "AsyncRemoteBank")
    bank = (root / BANK).read_text("utf-8")
    lines = bank.splitlines()
    out: list[str] = []
    for name, node in _methods(bank, "AsyncLessonBank").items():
        operation = OPERATIONS.get(name)
        if operation is None or operation.rest is None or operation.request is None or name in by_hand:
            continue
        header = lines[node.lineno - 1 : node.body[0].lineno - 1]
        call = f"self._call(rq.{operation.request.__name__}.of(locals()))"
        out += [*header, f"        return await {call}", ""]
    return "\n".join(out).rstrip() + "\n"


def _methods(source: str, cls: str) -> dict[str, ast.AsyncFunctionDef]:
    """The public ``async def`` methods of class ``cls`` in ``source``, in order."""
    found: dict[str, ast.AsyncFunctionDef] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.AsyncFunctionDef) and not item.name.startswith("_"):
                    found[item.name] = item
    return found


def remote_with_methods(root: Path = ROOT) -> str:
    """``remote/aio.py`` with its generated stretch as it must be checked in."""
    text = (root / REMOTE).read_text("utf-8")
    head, rest = text.split(BEGIN + "\n", 1)
    _, tail = rest.split(END + "\n", 1)
    return _ruff(["format"], f"{head}{BEGIN}\n{remote_methods(root)}{END}\n{tail}", REMOTE, root)


def main(argv: Sequence[str] | None = None, pairs: Sequence[Pair] = PAIRS, root: Path = ROOT) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="exit 1 when a generated file is stale")
    args = parser.parse_args(argv)
    stale_remote = False
    if (root / REMOTE).exists() and any(pair.source == REMOTE for pair in pairs):
        wanted = remote_with_methods(root)
        stale_remote = (root / REMOTE).read_text("utf-8") != wanted
        if stale_remote and args.check:
            sys.stdout.write(f"{REMOTE}'s generated methods are stale: run `python {SCRIPT}`\n")
        elif stale_remote:
            (root / REMOTE).write_text(wanted, "utf-8")
            print(f"wrote the generated methods of {REMOTE}")
    outdated = stale(pairs, root)
    for pair, wanted in outdated:
        target = root / pair.target
        if args.check:
            current = target.read_text("utf-8").splitlines(keepends=True) if target.exists() else []
            diff = difflib.unified_diff(
                current, wanted.splitlines(keepends=True), pair.target, f"{pair.target} (generated)"
            )
            sys.stdout.write(f"{pair.target} is stale: run `python {SCRIPT}`\n{''.join(diff)}")
        else:
            target.write_text(wanted, "utf-8")
            print(f"wrote {pair.target} from {pair.source}")
    return 1 if args.check and (outdated or stale_remote) else 0


if __name__ == "__main__":
    raise SystemExit(main())
