"""Bank-level figures of one consolidation cycle: a bank of more than 1,000 lessons with known duplicates,
stale lessons and distinct lessons that share many words, one cycle, approved whole.

The bank, one per half of ``tests/data/lesson_pairs.jsonl`` (``tune``: the pre-pass's thresholds were
chosen on it; ``held``: never looked at while tuning):

- **duplicates**: every text of the half's labelled pairs; a labelled paraphrase pair (two documentations
  of one check, a hand-written pair, two reflections the label audit read as one lesson) is a known
  duplicate pair. Two successive reflections on one problem (``same-problem``) are reported apart:
  most are two diagnoses, not one lesson, so merging them is neither counted right nor wrong, and
  neither text is counted as a distinct lesson;
- **stale**: :data:`STALE` ruff rule summaries written 400 days ago and never used (decay proposes them for
  archive);
- **distinct**: the other ruff rule summaries (``ruff rule --all``), one lesson per rule, leaving out the
  rules the half's pairs already document and the rules ruff documents as another's ("This rule is
  identical to [S307]", "remapped to [B035]"): many share most of their words ("Missing return type
  annotation for *special method*" / "*classmethod*").

Every text belongs to one **item** (a rule code, a task, a hand-written pair; a text and its retype are one
item). One cycle runs with a scripted model that follows the pre-pass (its replies propose nothing of
their own: the proposal is the pre-pass's merges and archives, and the phases' tokens are spent as in
use), and the proposal is approved whole. Reported: lessons before / after, duplicate pairs merged and
left (the documented pairs and the audited reflection pairs apart; the same-problem pairs merged),
merge precision (pairs of lessons merged into one whose items agree, same-problem pairs left out and
counted), distinct lessons lost
(superseded or archived without being a duplicate or stale: target 0), stale archived, tokens spent.

    .venv/bin/python bench/consolidation_bank.py                       # words only and MiniLM
    .venv/bin/python bench/consolidation_bank.py --embedders none      # words only
    PYTHONPATH=/tmp/cand .venv/bin/python bench/consolidation_bank.py --embedders cand:paraphrase-l3
                                                                       # a bench/_candidate_embedders.py one
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from itertools import combinations
from pathlib import Path
from typing import Any

import _pairdata
import _ruffdocs
import consolidation_judges
from consolidation_pairs import _join, item_of, unknown
from lessonbank import LessonBank
from lessonbank.errors import NotFoundError
from lessonbank.llm.base import Message
from lessonbank.llm.fake import FakeLLM
from lessonbank.services.consolidation import cycle, offers, prompts
from lessonbank.services.consolidation.paraphrase import Weights
from lessonbank.settings import Settings
from lessonbank.text import same_lesson

RESULTS = Path(__file__).resolve().parent / "results"
STALE = 25
MIN_LESSONS = 1_000

CORE = "## Identity\nA bench bank.\n\n## Active Context\nLint rules.\n\n## Persona\nTerse.\n\n## Critical Facts\n- none\n"
SUMMARY = "## Key Insight\nThe pre-pass found the duplicates.\n\n## What I've Learned About Learning\nNothing new.\n"
REPLIES = {
    "You are performing a memory consolidation cycle": "1. Follow the pre-pass's candidates.",
    "You are reviewing your history of reflections": "- Insight: nothing beyond the pre-pass.",
    "Execute the consolidation plan": "NONE",
    "Rewrite the core memory": CORE,
    "Generate a human-readable reflection summary": SUMMARY,
}


def follower() -> FakeLLM:
    """A model that answers each phase briefly and proposes nothing beyond the pre-pass."""

    def answer(messages: Sequence[Message]) -> str:
        if messages[0]["content"] != prompts.SYSTEM:
            return "not a reflection"
        prompt = next(m["content"] for m in messages if m["role"] == "user")
        return next((reply for opening, reply in REPLIES.items() if prompt.startswith(opening)), "")

    return FakeLLM(default=answer)


_NEAR = re.compile(r"^near duplicates: (.+)$", re.M)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def rewriter() -> FakeLLM:
    """A deterministic stand-in for the consolidation model that rewrites merges: its plan repeats the
    pre-pass's clusters; for each it writes one MERGE whose wording is the longest source as the prompt
    shows it (a row cut short loses its unfinished sentence). It sees what a model sees (the prompts),
    nothing else: no label, no item. The cycle keeps its wording when it passes validation and the
    screens (``merges.prefer_model_wording``)."""

    def answer(messages: Sequence[Message]) -> str:
        if messages[0]["content"] != prompts.SYSTEM:
            return "not a reflection"
        prompt = next(m["content"] for m in messages if m["role"] == "user")
        if prompt.startswith("You are performing a memory consolidation cycle"):
            clusters = [f"near duplicates: {ids}" for ids in _NEAR.findall(prompt)]
            return "\n".join(["1. Merge the pre-pass's near duplicates.", *clusters])
        if prompt.startswith("Execute the consolidation plan"):
            return _merges(prompt)
        return next((reply for opening, reply in REPLIES.items() if prompt.startswith(opening)), "")

    return FakeLLM(default=answer)


def _merges(prompt: str) -> str:
    named = prompt.split("LESSONS NAMED IN THE PLAN (id | kind | text):", 1)[-1]
    rows = {}
    for line in named.splitlines():
        parts = line.split(" | ", 2)
        if len(parts) == 3 and parts[0].startswith("les_"):
            rows[parts[0]] = parts[2]
    blocks = []
    for cluster in _NEAR.findall(prompt):
        ids = [i.strip() for i in cluster.split(",") if i.strip() in rows]
        if len(ids) < 2:
            continue
        text = max((rows[i] for i in ids), key=len)
        if text.endswith("…"):  # cut for the prompt: keep its whole sentences
            whole = _SENTENCE_END.split(text[:-1])
            text = " ".join(whole[:-1]) if len(whole) > 1 else text[:-1]
        blocks.append(
            f"---\nOPERATION: MERGE\nTARGET: {', '.join(ids)}\nCONTENT: {text}\n"
            "REASON: the same lesson in other words\n---"
        )
    return "\n".join(blocks) or "NONE"


MODELS = {"follower": follower, "rewriter": rewriter}


def build(half: str, rules: Sequence[Mapping[str, Any]], now: datetime) -> dict[str, Any]:
    """The half's bank: lesson rows, lesson id → item, the duplicate pairs, the stale ids."""
    records = [record for record in _pairdata.load() if record["half"] == half]
    texts: dict[str, str] = {}  # text → id
    items: dict[str, str] = {}
    duplicates: set[tuple[str, str]] = set()
    reflections: set[tuple[str, str]] = set()  # of them, two reflections the audit read as one lesson
    same_problem: set[tuple[str, str]] = set()  # two reflections on one problem, not known to be one lesson
    for record in records:
        for side in ("a", "b"):
            text = record[side]
            if text not in texts:
                texts[text] = f"les_p{len(texts):04d}"
                items[texts[text]] = item_of(record, side)
        a, b = sorted((texts[record["a"]], texts[record["b"]]))
        if record["label"] == "paraphrase":
            duplicates.add((a, b))
            _join(items, items[b], items[a])
            if record["source"] == "reflections":
                reflections.add((a, b))
        elif record["label"] == "same-problem":
            same_problem.add((a, b))
    documented = {code for item in items.values() for code in re.split(r"[:~]", item)[0].split("/")}
    rows: list[dict[str, Any]] = []
    for text, lesson_id in texts.items():
        rows.append({"id": lesson_id, "content": text, "created_at": now - timedelta(days=1)})
    stale: set[str] = set()
    filler = [rule for rule in rules if rule["code"] not in documented]
    for n, rule in enumerate(filler):
        if _ALIAS.search(rule["explanation"]):  # documented by ruff as another rule: not a distinct lesson
            continue
        text = rule["summary"]
        if text in texts or any(same_lesson(text, other) for other in texts):
            continue
        lesson_id = f"les_r{n:04d}"
        texts[text] = lesson_id
        items[lesson_id] = rule["code"]
        row: dict[str, Any] = {"id": lesson_id, "content": text, "created_at": now - timedelta(days=1)}
        if len(stale) < STALE and n % 7 == 0:
            row["created_at"] = now - timedelta(days=400)
            stale.add(lesson_id)
        rows.append(row)
    _join_retypes(texts, items)
    return {
        "rows": rows,
        "items": items,
        "duplicates": sorted(duplicates),
        "reflections": reflections,
        "same_problem": sorted(same_problem),
        "stale": stale,
    }


_ALIAS = re.compile(r"\b(?:is identical to|has been remapped to) \[\w+\]")

_CEILINGS: dict[tuple[str, str | None], dict[str, float | None]] = {}


def ceiling(
    rows: Sequence[Mapping[str, Any]],
    items: Mapping[str, str],
    duplicates: Sequence[tuple[str, str]],
    embedder: str | None,
) -> dict[str, float | None]:
    """How many duplicate pairs any similarity could merge without merging something else first: the
    share of pairs where one text's nearest lesson of another item is farther than its partner (by
    weighted term Dice, by MiniLM cosine when ``embedder``, by either). Below that, the two texts are
    less alike than one of them is to a distinct lesson: a recall ceiling for a pre-pass that merges
    what is alike, whatever its threshold. Evaluation only: the pre-pass never sees it."""
    ids = [row["id"] for row in rows]
    text = {row["id"]: row["content"] for row in rows}
    weights = Weights.of(text.values())
    involved = sorted({i for pair in duplicates for i in pair})
    near_dice = {
        i: max((weights.likeness(text[i], text[j]) for j in ids if items[j] != items[i]), default=0.0)
        for i in involved
    }
    found = {"dice": [], "cosine": [], "either": []}
    cosine: dict[tuple[str, str], float] = {}
    near_cosine: dict[str, float] = {}
    if embedder is not None:
        import numpy as np

        vectors = vectors_of([text[i] for i in ids], embedder)
        matrix = np.asarray(vectors, dtype=np.float32)
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        row_of = {i: n for n, i in enumerate(ids)}
        other = np.asarray([[items[j] != items[i] for j in ids] for i in involved])
        sims = matrix[[row_of[i] for i in involved]] @ matrix.T
        for n, i in enumerate(involved):
            near_cosine[i] = float(np.where(other[n], sims[n], -1.0).max())
        for a, b in duplicates:
            cosine[(a, b)] = float(matrix[row_of[a]] @ matrix[row_of[b]])
    for a, b in duplicates:
        by_dice = weights.likeness(text[a], text[b]) > min(near_dice[a], near_dice[b])
        found["dice"].append(by_dice)
        if embedder is not None:
            by_cosine = cosine[(a, b)] > min(near_cosine[a], near_cosine[b])
            found["cosine"].append(by_cosine)
            found["either"].append(by_dice or by_cosine)
    return {key: round(sum(hits) / len(hits), 3) if hits else None for key, hits in found.items()}


def vectors_of(texts: Sequence[str], embedder: str) -> Any:
    import _candidate_embedders
    import _vectorcache

    inner = _candidate_embedders.resolve(embedder)
    assert inner is not None, embedder
    return _vectorcache.CachedEmbedder(inner, _vectorcache.DEFAULT_PATH).embed_documents(list(texts))


def _embedder(spec: str | None) -> Any:
    """The bank's embedder: lessonbank's own spec as it is, a ``cand:NAME`` candidate built here."""
    if spec is None or not spec.startswith("cand:"):
        return spec
    import _candidate_embedders

    return _candidate_embedders.resolve(spec)


def _join_retypes(texts: Mapping[str, str], items: dict[str, str]) -> None:
    """A text and its retype (the same lesson) are one item."""
    heads: list[str] = []
    for text in texts:
        head = next((h for h in heads if same_lesson(h, text)), None)
        if head is None:
            heads.append(text)
            continue
        old, new = items[texts[text]], items[texts[head]]
        for key, value in items.items():
            if value == old:
                items[key] = new


def run(
    half: str,
    embedder: str | None,
    rules: Sequence[Mapping[str, Any]],
    model: str = "follower",
    *,
    per_lesson: int = offers.PER_LESSON,
    floor: float = offers.FLOOR,
    budget: tuple[int, int] | None = None,
) -> dict[str, Any]:
    now = datetime.now(UTC)
    bank_spec = build(half, rules, now)
    items: dict[str, str] = bank_spec["items"]
    if model in consolidation_judges.STAND_INS:
        seen = consolidation_judges.STAND_INS[model](REPLIES, items)
    else:
        seen = consolidation_judges.Seen(MODELS[model]().default)
    found: list[Any] = []  # the pre-pass's candidates, every offer before the prompt's token cut

    def find_candidates(*args: Any, **kwargs: Any) -> Any:
        found.append(original(*args, **kwargs, offers_per_lesson=per_lesson, offer_floor=floor))
        return found[-1]

    original, cycle.find_candidates = cycle.find_candidates, find_candidates
    with (
        tempfile.TemporaryDirectory(prefix="lb-consolidation-bank-") as tmp,
        LessonBank(
            f"sqlite:///{tmp}/bank.db",
            embedder=_embedder(embedder),
            llm=seen.llm(),
            worker=False,
            settings=None
            if budget is None
            else Settings(consolidation_max_tokens_in=budget[0], consolidation_max_tokens_out=budget[1]),
        ) as bank,
    ):
        bank.import_lessons(bank_spec["rows"])
        ids = [row["id"] for row in bank_spec["rows"]]
        before = len(bank.lessons(limit=100_000))
        proposal = bank.consolidate()
        merges = [] if proposal is None else [op for op in proposal.operations if op.kind == "merge"]
        archives = [] if proposal is None else [op for op in proposal.operations if op.kind == "archive"]
        cycle.find_candidates = original
        if proposal is not None:
            bank.approve(proposal.id)
        after = len(bank.lessons(limit=100_000))
        state = {}
        for lesson_id in ids:
            try:
                state[lesson_id] = bank.get_lesson(lesson_id)
            except NotFoundError:  # the same words as a lesson before it: one lesson on write
                continue
    ids = list(state)
    merged_into = {i: lesson.superseded_by for i, lesson in state.items() if lesson.superseded_by}
    archived = {i for i, lesson in state.items() if lesson.status == "archived"}
    merged_pairs = [
        pair for op in merges for pair in combinations(sorted(op.lesson_ids), 2) if op.status != "dropped"
    ]
    duplicates: list[tuple[str, str]] = bank_spec["duplicates"]
    duplicates = [(a, b) for a, b in duplicates if a in state and b in state]

    def root(lesson_id: str) -> str:  # a merge keeps one source (or writes a new lesson), supersedes the rest
        seen = {lesson_id}
        while lesson_id in merged_into and merged_into[lesson_id] not in seen:
            lesson_id = merged_into[lesson_id]
            seen.add(lesson_id)
        return lesson_id

    left = [(a, b) for a, b in duplicates if root(a) != root(b)]
    documented = [pair for pair in duplicates if pair not in bank_spec["reflections"]]
    documented_left = [pair for pair in left if pair not in bank_spec["reflections"]]
    in_duplicates = {i for pair in duplicates for i in pair}
    same_item = {i for i in ids if sum(items[j] == items[i] for j in ids) > 1 or "~" in items[i]}
    same_problem = [(a, b) for a, b in bank_spec["same_problem"] if a in state and b in state]
    stale: set[str] = bank_spec["stale"] & set(state)
    distinct = [i for i in ids if i not in in_duplicates and i not in same_item and i not in stale]
    lost = sorted(i for i in distinct if i in merged_into or i in archived)
    key = (half, embedder)
    if key not in _CEILINGS:  # the same bank for every model: measured once
        _CEILINGS[key] = ceiling(
            [r for r in bank_spec["rows"] if r["id"] in state], items, duplicates, embedder
        )
    reachable = _CEILINGS[key]
    offered = _offered(found[0], seen, duplicates, items)
    refused = (
        []
        if proposal is None
        else [op for op in proposal.operations if (op.note or "").startswith("guards:")]
    )
    unsure = [(a, b) for a, b in merged_pairs if unknown(items[a], items[b])]
    wrong = [(a, b) for a, b in merged_pairs if items[a] != items[b] and not unknown(items[a], items[b])]
    return {
        "half": half,
        "embedder": embedder or "none",
        "model": model,
        "merges_worded_by_model": sum(1 for op in merges if "the model's wording" in op.reason),
        "lessons_before": before,
        "lessons_after": after,
        "duplicate_pairs": len(duplicates),
        "duplicates_merged": len(duplicates) - len(left),
        "duplicates_merged_share": round(1 - len(left) / len(duplicates), 3) if duplicates else None,
        "duplicate_pairs_left": len(left),
        "documented_pairs": len(documented),
        "documented_merged_share": round(1 - len(documented_left) / len(documented), 3)
        if documented
        else None,
        "reflection_pairs_merged_share": _share_merged(
            len(duplicates) - len(documented), len(left) - len(documented_left)
        ),
        "same_problem_pairs": len(same_problem),
        "same_problem_merged_share": _share_merged(
            len(same_problem), sum(root(a) != root(b) for a, b in same_problem)
        ),
        "ceiling_dice": reachable["dice"],
        "ceiling_cosine": reachable["cosine"],
        "ceiling_either": reachable["either"],
        "merges": len(merges),
        "merged_pairs": len(merged_pairs),
        "merge_precision": round(1 - len(wrong) / (len(merged_pairs) - len(unsure)), 3)
        if len(merged_pairs) > len(unsure)
        else None,
        "merged_pairs_unknown": len(unsure),
        "distinct_lessons": len(distinct),
        "distinct_lost": len(lost),
        "stale": len(stale),
        "stale_archived": len(stale & archived),
        "archived": len(archives),
        "tokens_in": 0 if proposal is None else proposal.tokens_in,
        "tokens_out": 0 if proposal is None else proposal.tokens_out,
        **offered,
        "refused_by_guards": len(refused),
        "lost_examples": [state[i].content[:120] for i in lost[:10]],
        "wrong_merges": [[state[a].content[:100], state[b].content[:100]] for a, b in wrong[:10]],
    }


def _offered(
    candidates: Any,
    seen: consolidation_judges.Seen,
    duplicates: Sequence[tuple[str, str]],
    items: Mapping[str, str],
) -> dict[str, Any]:
    """Discovery: the share of duplicate pairs the pre-pass joins or offers to confirm (in the prompt, and
    all it offered before the prompt's token cut), how many pairs it offers and what they cost. A pair is
    offered when its two lessons, or the clusters they are in, are: confirming it merges them."""
    unit = {member: cluster[0] for cluster in candidates.clusters for member in cluster}

    def units(a: str, b: str) -> tuple[str, str]:
        one, other = unit.get(a, a), unit.get(b, b)
        return (one, other) if one < other else (other, one)

    every = {units(o.a, o.b) for o in candidates.offers}
    shown = {units(a, b) for a, b in seen.offered}

    def share(pairs: set[tuple[str, str]]) -> float | None:
        hits = sum(unit.get(a, a) == unit.get(b, b) or units(a, b) in pairs for a, b in duplicates)
        return round(hits / len(duplicates), 3) if duplicates else None

    def kinds(pairs: Sequence[tuple[str, str]]) -> tuple[int, int]:
        same = sum(items[a] == items[b] for a, b in pairs)
        apart = sum(items[a] != items[b] and not unknown(items[a], items[b]) for a, b in pairs)
        return same, apart

    live = candidates.counts.get("live", 0)
    same_shown, apart_shown = kinds(seen.offered)
    return {
        "discovery_share": share(shown),
        "discovery_share_uncut": share(every),
        "offered_pairs": len(candidates.offers),
        "offers_per_lesson": round(2 * len(candidates.offers) / live, 2) if live else None,
        "offered_in_prompt": len(seen.offered),
        "offered_one_item": same_shown,
        "offered_two_items": apart_shown,
        "offer_tokens": seen.tokens,
    }


def _share_merged(pairs: int, left: int) -> float | None:
    return round(1 - left / pairs, 3) if pairs else None


ROWS = (
    "lessons_before",
    "lessons_after",
    "duplicate_pairs",
    "duplicates_merged",
    "duplicates_merged_share",
    "duplicate_pairs_left",
    "documented_pairs",
    "documented_merged_share",
    "reflection_pairs_merged_share",
    "same_problem_pairs",
    "same_problem_merged_share",
    "ceiling_dice",
    "ceiling_cosine",
    "ceiling_either",
    "merge_precision",
    "merged_pairs_unknown",
    "merges_worded_by_model",
    "distinct_lessons",
    "distinct_lost",
    "stale",
    "stale_archived",
    "tokens_in",
    "tokens_out",
    "discovery_share",
    "discovery_share_uncut",
    "offered_pairs",
    "offers_per_lesson",
    "offered_in_prompt",
    "offered_one_item",
    "offered_two_items",
    "offer_tokens",
    "refused_by_guards",
)


def table(results: Sequence[Mapping[str, Any]]) -> str:
    heads = [f"{r['embedder']}/{r['half']}" for r in results]
    models = [r["model"] for r in results]
    lines = [
        f"{'':26}" + "".join(f"{h:>14}" for h in heads),
        f"{'':26}" + "".join(f"{m:>14}" for m in models),
    ]
    for row in ROWS:
        cells = ["-" if r[row] is None else str(r[row]) for r in results]
        lines.append(f"{row:26}" + "".join(f"{c:>14}" for c in cells))
    return "\n".join(lines)


def sweep_offers(half: str, embedder: str | None, rules: Sequence[Mapping[str, Any]]) -> None:
    """Discovery against the tokens the offers cost, over per-lesson counts and floors: the pre-pass alone
    on the half's bank (no cycle), every offer rendered as phase 3 shows it, and the likeliest that fit
    ``CUT`` tokens (about what phase 3 gives them in a cycle of the default budget)."""
    from lessonbank.models import Lesson
    from lessonbank.services.consolidation.prepass import find_candidates
    from lessonbank.text import estimate_tokens

    now = datetime.now(UTC)
    spec = build(half, rules, now)
    lessons = [Lesson(**row) for row in spec["rows"]]
    by_id = {lesson.id: lesson for lesson in lessons}
    vectors = None
    if embedder is not None:
        found_vectors = vectors_of([lesson.content for lesson in lessons], embedder)
        vectors = {lesson.id: vector for lesson, vector in zip(lessons, found_vectors, strict=True)}
    for per_lesson in (1, 2, 3, 4):
        for floor in (0.02, 0.05, 0.1, 0.2, 0.3):
            candidates = find_candidates(
                lessons, now, vectors=vectors, offers_per_lesson=per_lesson, offer_floor=floor
            )
            every = consolidation_judges.Seen(lambda _: "")
            text, _ = offers.render(candidates.offers, by_id, estimate_tokens, 10**9)
            every.offered, every.tokens = consolidation_judges.offered_in(_section(text))
            cut = consolidation_judges.Seen(lambda _: "")
            text, _ = offers.render(candidates.offers, by_id, estimate_tokens, CUT)
            cut.offered, cut.tokens = consolidation_judges.offered_in(_section(text))
            full = _offered(candidates, every, spec["duplicates"], spec["items"])
            shown = _offered(candidates, cut, spec["duplicates"], spec["items"])
            print(
                embedder or "none", per_lesson, floor,
                f"discovery={full['discovery_share']}", f"pairs={full['offered_pairs']}",
                f"per_lesson={full['offers_per_lesson']}", f"one_item={full['offered_one_item']}",
                f"two_items={full['offered_two_items']}", f"tokens={full['offer_tokens']}",
                f"in_{CUT}_tokens={shown['discovery_share']}", flush=True,
            )  # fmt: skip


CUT = 4_600


def _section(text: str) -> str:
    return f"PAIRS TO CONFIRM (...):\n{text or 'none'}\n\nLESSONS NAMED IN THE PLAN"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedders", nargs="+", default=["none", "minilm"])
    choices = [*MODELS, *consolidation_judges.STAND_INS]
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=choices)
    parser.add_argument("--per-lesson", type=int, default=offers.PER_LESSON, help="pairs each lesson offers")
    parser.add_argument("--floor", type=float, default=offers.FLOOR, help="least probability offered")
    parser.add_argument(
        "--budget", type=int, nargs=2, metavar=("IN", "OUT"), help="the cycle's tokens (30000 8000)"
    )
    parser.add_argument(
        "--sweep-offers", action="store_true", help="the tuning half over --per-lesson 1-4 and floors"
    )
    args = parser.parse_args(argv)
    rules = [rule for rule in _ruffdocs.ruff_rules(_ruffdocs.ruff_binary()) if rule.get("code")]
    if args.sweep_offers:  # the tuning half only: the held half is reported, never tuned on
        for embedder in args.embedders:
            sweep_offers("tune", None if embedder == "none" else embedder, rules)
        return 0
    results = []
    for embedder in args.embedders:
        for model in args.models:
            for half in ("tune", "held"):
                spec = None if embedder == "none" else embedder
                found = run(
                    half, spec, rules, model, per_lesson=args.per_lesson, floor=args.floor, budget=args.budget
                )
                assert found["lessons_before"] >= MIN_LESSONS, found["lessons_before"]
                results.append(found)
    print(f"offers: {args.per_lesson} per lesson from probability {args.floor}; cycle tokens {args.budget}")
    product = [r for r in results if r["model"] in MODELS]
    stand_ins = [r for r in results if r["model"] not in MODELS]
    if product:
        print(table(product))
    if stand_ins:  # not a judge: an upper bound (perfect-judge) and a careless one (confirm-all), apart
        print("\nstand-ins that read the labels or say yes to everything (bounds, not the bank's figure):")
        print(table(stand_ins))
    for found in results:
        for label in ("wrong_merges", "lost_examples"):
            for example in found[label]:
                print(f"{found['embedder']}/{found['model']}/{found['half']} {label}: {example}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "consolidation_bank.json"
    out.write_text(json.dumps(results, indent=2))
    print(f"-> {out.relative_to(RESULTS.parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
