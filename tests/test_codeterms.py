"""Code-aware terms: identifiers split, code found in prose, Python read for what it says."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lessonbank import LessonBank, Settings
from lessonbank.codeterms import code_words, inline_code, query_words, split_code, split_identifier


def test_identifiers_split_as_prose_names_their_parts() -> None:
    assert split_identifier("os.path.getmtime") == ["os", "path", "getmtime"]
    assert split_identifier("HTTPServerError") == ["http", "server", "error"]
    assert split_identifier("getElementById") == ["get", "element", "by", "id"]
    assert split_identifier("ssl_version") == ["ssl", "version"]
    assert split_identifier("__init__") == ["init"]
    assert split_identifier("utf8Decode2") == ["utf", "8", "decode", "2"]
    assert split_identifier("") == []


def test_code_is_found_in_fences_spans_and_pasted_lines() -> None:
    text = "The build broke.\n```python\nx = lambda: 1\n```\nSee `os.path.join` and then:\n    raise ValueError(msg)\nThanks."
    prose, code = split_code(text)
    assert code == ["x = lambda: 1\n", "os.path.join", "    raise ValueError(msg)"]
    assert "broke" in prose and "Thanks" in prose and "lambda" not in prose


def test_plain_prose_holds_no_code() -> None:
    assert split_code("Always pin the base image when the deploy is reproducible.")[1] == []
    prose = (
        "If the build fails, retry it once (see below).\n- pin the image\n+ keep the cache\n"
        "Return early when the list is empty; for each file, import it by hand.\nWith care: ship it."
    )
    assert split_code(prose)[1] == []


def test_code_lines_are_told_from_prose_by_their_shape() -> None:
    for line in [
        "def load(path):",
        "class Cache(dict):",
        "from os import path",
        "import numpy as np",
        "if x is None:",
        "    return value",
        "raise ValueError(msg)",
        "total += 1",
        "print(x)",
        "@pytest.fixture",
        "SELECT a FROM t",
        "-    handle = open(path)",
        "+    with open(path) as f:",
        ">>> 1 + 1",
        'File "app.py", line 3, in main',
        "const x = 1;",
        "{a: b for a, b in iterable}",
        "1 + 1",
    ]:
        assert split_code(line)[1] == [line], line
    assert split_code("hello")[1] == [] and split_code("fix the flaky test")[1] == []


def test_python_constructs_are_named_as_prose_names_them() -> None:
    said = code_words("f = lambda x: [y for y in x if y]")
    assert {"lambda", "list", "comprehension"} <= set(said)
    assert {"bare", "except", "try", "pass"} <= set(code_words("try:\n    run()\nexcept:\n    pass"))
    assert {"f", "string", "format"} <= set(code_words('print(f"{name}!")'))
    assert {"keyword", "argument", "timeout"} <= set(code_words("requests.get(url, timeout=None)"))
    assert "decorator" in code_words("@cache\ndef f():\n    return 1")


def test_fragments_that_do_not_parse_still_give_their_names() -> None:
    # An indented line cut out of a function, a block opener without its body, a diff.
    assert {"students", "df", "ix"} <= set(code_words("        students_df.ix[0]"))
    assert {"function", "read", "items"} <= set(
        code_words("async def read_items(commons: dict = Depends(x)):")
    )
    assert {"open", "file", "handle"} <= set(
        code_words("-    fileHandle = open(path\n+    with open(path) as f:")
    )


def test_query_words_keep_the_keywords_and_add_what_the_code_says() -> None:
    words = query_words("Use `dict.fromkeys` here:\n    seenKeys = {k: None for k in items}", 64)
    assert words[:3] == ["use", "dict", "fromkeys"]
    assert {"seen", "keys"} <= set(words) and len(words) == len(set(words))
    # Constructs are named only for a task that is all code (beside prose they were noise).
    assert "comprehension" not in words
    assert "comprehension" in query_words("seenKeys = {k: None for k in items}", 64)


def test_query_words_respect_the_limit_and_keep_room_for_code() -> None:
    long_prose = " ".join(f"word{i}" for i in range(200))
    words = query_words(f"{long_prose}\n    fooBar = [a for a in b]", 64)
    assert len(words) == 64
    assert {"foo", "bar"} <= set(words)  # the code's own words are not pushed out by a long text
    assert query_words("", 64) == [] and query_words("   ", 64) == []


def test_a_huge_query_is_read_whole_and_capped() -> None:
    big = "Some prose about the deploy.\n    x = call_me(a_b, cD)\n" * 20_000  # 1.2 MB
    words = query_words(big, 64)
    assert {"call", "cd", "c", "d"} <= set(words) and len(words) <= 64


def test_inline_code_of_a_lesson() -> None:
    assert inline_code("Prefer `pathlib.Path` over ``os.path``; see\n```\nPath('a') / 'b'\n```") == [
        "Path('a') / 'b'\n",
        "pathlib.Path",
        "os.path",
    ]


@given(st.text(max_size=400))
def test_any_text_gives_distinct_lowercase_words(text: str) -> None:
    words = query_words(text, 64)
    assert len(words) <= 64 and len(words) == len(set(words))
    assert all(word == word.lower() and word for word in words)


def test_hostile_code_is_read_without_failing() -> None:
    deep = "(" * 5000 + "x" + ")" * 5000  # the parser's recursion limit
    assert "x" in code_words(deep)
    assert "q" in code_words("x = '\\q'\n")  # an invalid escape warns in the parser, never raises
    huge = "value_name = fetch_rows(1)\n" * 2000  # past MAX_PARSED_CHARS: tokens only, still split
    assert {"value", "name", "fetch", "rows"} <= set(code_words(huge))


def test_a_code_only_task_finds_the_prose_lesson_about_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bank = LessonBank(f"sqlite:///{tmp_path / 'bank.db'}", settings=Settings(home=tmp_path), worker=False)
    try:
        bank.import_lessons(
            [
                {"id": "lambda", "content": "Do not assign a lambda expression; write a def instead."},
                {"id": "comp", "content": "Prefer a list comprehension to a loop that appends to a list."},
                {"id": "other", "content": "Pin every dependency of the deploy image."},
            ]
        )
        hits = bank.recall("    handler = lambda event: event.id", k=2, mode="lexical")
        assert hits and hits[0].lesson.id == "lambda"
        # Found only through the construct the code uses: "comprehension" is not in the query text.
        hits = bank.recall("squares = [n * n for n in numbers]", k=1, mode="lexical")
        assert hits and hits[0].lesson.id == "comp"
    finally:
        bank.close()
