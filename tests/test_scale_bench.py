"""The scale benchmark on a handful of real ruff rules: every store grows one bank and reports each size."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench import _ruffdocs, scale

from tests.contract.conftest import require

CODES = ["F401", "B006", "E711", "SIM118"]


@pytest.mark.slow  # builds a small ruff dataset and walks the stdlib for distractors
def test_each_store_grows_a_bank_and_reports_every_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for backend in ("redis", "postgres"):
        require(backend)
    dataset = tmp_path / "dataset.json"
    dataset.write_text(json.dumps(_ruffdocs.build_dataset(codes=CODES)), "utf-8")
    out = tmp_path / "scale.json"
    argv = ["--sizes", "60,150", "--queries", "5", "--cases", "3", "--embedder", "hash", "--redis-max", "60",
            "--dataset", str(dataset), "--cache-dir", str(tmp_path / "cache"), "--out", str(out)]  # fmt: skip
    assert scale.main(argv) == 0
    results = json.loads(out.read_text("utf-8"))
    assert results["skipped"] == {}
    sizes = {
        backend["backend"]: [row["lessons"] for row in backend["rows"]] for backend in results["backends"]
    }
    assert sizes == {"sqlite": [60, 150], "postgres": [60, 150], "redis": [60]}
    for backend in results["backends"]:
        for row in backend["rows"]:
            assert row["import"]["added"] > 0 and row["lexical"]["n"] == 5 and row["hybrid"]["p99_ms"] > 0
            assert set(row["recall@5"]) == {"two-step", "exact"}
            assert row["memory"]["process"]["RssAnon"] > 0 and row["memory"]["lexical_index"] > 0
    table = capsys.readouterr().out
    assert "hybrid R@5 two-step vs exact" in table and "postgres" in table
