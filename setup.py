"""The one part of the build pyproject.toml cannot state without an experimental table: the pruned
lexical search's hot loops in C (src/lessonbank/retrieval/_postings.c).

``optional``: where no C compiler is at hand the build goes on without them, and numpy runs the same
steps (slower; ``lessonbank.retrieval.pruning.COMPILED`` says which). ``py_limited_api``: one build
serves every Python from 3.11 (the stable ABI, a ``cp311-abi3`` wheel)."""

import os

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "lessonbank.retrieval._postings",
            sources=["src/lessonbank/retrieval/_postings.c"],
            define_macros=[("Py_LIMITED_API", "0x030B0000")],
            # A heavy read's second thread (POSIX threads; one thread on Windows).
            extra_compile_args=[] if os.name == "nt" else ["-pthread"],
            extra_link_args=[] if os.name == "nt" else ["-pthread"],
            py_limited_api=True,
            optional=True,
        )
    ],
    options={"bdist_wheel": {"py_limited_api": "cp311"}},
)
