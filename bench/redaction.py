"""Redaction on the secret table: lessonbank's hand-written patterns against the detect-secrets plugins.

Both see the same lines (``tests/redaction_table.py``): real-world secret formats, and look-alikes
that are not secrets (hashes, UUIDs, base64 that is not a secret, prose, code). A secret counts as
found (recall) when it no longer appears after redaction; for detect-secrets, every value one of its
plugins reports on the line is replaced by a marker. "flagged" is the share of secret lines where
anything was found at all (detection, whether or not the secret itself was removed). A false positive
is a look-alike line that changes (or is flagged).

    .venv/bin/pip install detect-secrets   # only to evaluate it; lessonbank does not depend on it
    .venv/bin/python bench/redaction.py [--out bench/results/redaction.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.redaction_table import NEGATIVES, POSITIVES

from lessonbank.redact import redact


def detect_secrets_redactor(*, adhoc: bool) -> Callable[[str], str] | None:
    """A redact() made of detect-secrets' default plugins, or None when it is not installed.

    ``adhoc``: its ``scan --string`` mode (every plugin, no filter, no entropy limit); otherwise its
    file-scan mode on a ``.txt`` file (the default filters and entropy limits apply)."""
    try:
        from detect_secrets.core import scan
        from detect_secrets.settings import default_settings
    except ImportError:
        return None

    def run(text: str) -> str:
        original = text
        lines = text.splitlines() or [text]
        with default_settings():
            if adhoc:
                found = [secret for line in lines for secret in scan.scan_line(line)]
            else:
                numbered = list(enumerate(lines, 1))
                found = list(scan._process_line_based_plugins(numbered, filename="notes.txt"))
        values = {secret.secret_value for secret in found if secret.secret_value}
        for value in sorted(values, key=len, reverse=True):
            text = text.replace(value, "[REDACTED]")
        # A finding whose reported value is not in the line (some plugins report a regex group, e.g.
        # "ghp") still flags the line: the line is marked, so detection is counted apart from removal.
        return text if not found or text != original else text + " [FLAGGED]"

    return run


def measure(name: str, redactor: Callable[[str], str]) -> dict[str, object]:
    started = time.perf_counter()
    out = {case: redactor(line) for case, line, _ in POSITIVES}
    missed = [case for case, _, secret in POSITIVES if secret in out[case]]
    undetected = [case for case, line, _ in POSITIVES if out[case] == line]
    flagged = [case for case, line in NEGATIVES if redactor(line) != line]
    elapsed = time.perf_counter() - started
    return {
        "detector": name,
        "positives": len(POSITIVES),
        "negatives": len(NEGATIVES),
        "recall": round(1 - len(missed) / len(POSITIVES), 4),
        "detection_recall": round(1 - len(undetected) / len(POSITIVES), 4),
        "false_positive_rate": round(len(flagged) / len(NEGATIVES), 4),
        "missed": missed,
        "false_positives": flagged,
        "ms_per_line": round(1000 * elapsed / (len(POSITIVES) + len(NEGATIVES)), 3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("bench/results/redaction.json"))
    args = parser.parse_args()
    results = [measure("lessonbank.redact", redact)]
    other = detect_secrets_redactor(adhoc=False)
    adhoc = detect_secrets_redactor(adhoc=True)
    if other is None or adhoc is None:
        print("detect-secrets is not installed: pip install detect-secrets to compare", file=sys.stderr)
    else:
        from importlib.metadata import version

        name = f"detect-secrets {version('detect-secrets')}"
        results.append(measure(f"{name}, file scan", other))
        results.append(measure(f"{name}, scan --string", adhoc))
        results.append(measure("patterns, then detect-secrets file scan", lambda text: other(redact(text))))
    print(
        f"{'detector':44} {'recall':>7} {'flagged':>8} {'FP rate':>8} {'missed':>7} {'FP':>4} {'ms/line':>8}"
    )
    for row in results:
        print(
            f"{row['detector']:44} {row['recall']:>7.3f} {row['detection_recall']:>8.3f} "
            f"{row['false_positive_rate']:>8.3f} "
            f"{len(row['missed']):>7} {len(row['false_positives']):>4} {row['ms_per_line']:>8}"  # type: ignore[arg-type]
        )
    for row in results:
        if row["missed"] or row["false_positives"]:
            print(
                f"\n{row['detector']}\n  missed: {row['missed']}\n  false positives: {row['false_positives']}"
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
