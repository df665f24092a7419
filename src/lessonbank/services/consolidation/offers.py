"""Pairs the pre-pass is not sure of, offered to the LLM phase to confirm.

The pre-pass joins only the pairs it is sure of (:mod:`.prepass`): on the labelled bank, for most
duplicate pairs another lesson is as close to one side as its partner, so no similarity threshold
merges them without also merging a wrong pair. A model that reads both texts can tell them apart,
so besides its joins the pre-pass **offers** each live lesson's few nearest guarded neighbours:

- same scope, the guards of :func:`~.paraphrase.relation` let the pair through (not opposed, not
  siblings, not naming different things), not already in one cluster;
- ranked by the scorer's probability (:mod:`.scorer`), from :data:`FLOOR` on; each lesson offers
  its :data:`PER_LESSON` likeliest (a pair is offered when it is among either side's), so a lesson
  with many neighbours does not crowd the others out; a cluster counts as one lesson (its likeliest
  pair with another lesson is offered, not one per member);
- per cycle, the most likely per token first, as many as fit the tokens the consolidation phase
  gives them (:func:`render`, half of that phase's input by default); a pair shown to a model once is not shown
  again (:func:`remember` keeps it in the namespace's cycle state), so successive cycles work down
  the list instead of showing the same pairs.

Offered pairs are rendered in phase 3's prompt (``PAIRS TO CONFIRM``); a model answers MERGE for
those it judges one lesson. Such a MERGE is still checked like any other: the guards again for
every pair of its sources (:func:`refusal`: an opposed or sibling pair is never merged, whatever
the model says, and the proposal shows why), the screens and validation.

Cost: only pairs already scored by the pre-pass (its candidates by words and by vectors) are
ranked, by the scorer's upper bound first (:class:`.pairtable.TermTable` leaves the word-order
feature out); only a lesson's best few get their guards and alignment, so the work is a few pairs
per lesson.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from lessonbank.models import Lesson
from lessonbank.services.consolidation import scorer
from lessonbank.services.consolidation.paraphrase import (
    Weights,
    named_apart,
    opposed,
    relation,
    same_text,
    sentences_apart,
    siblings,
)
from lessonbank.services.sections import inline
from lessonbank.text import same_lesson

if TYPE_CHECKING:
    from lessonbank.services.consolidation.prepass import _Pairs

# Chosen on the tuning half of bench/consolidation_bank.py (--sweep-offers: the share of duplicate pairs
# joined or offered against the tokens the offers take): 1 and 0.1 offer 0.68 pairs a lesson for 0.48 of the
# pairs; 2 and 0.05 reach 0.53 for twice the tokens.
PER_LESSON = 1
FLOOR = 0.1
ROW_CHARS = 240  # one lesson's text in the prompt, as the other phases show it
PROMPT_SHARE = 0.5  # of phase 3's input tokens, at most, for the pairs to confirm
SHOWN = "offers_shown"  # the cycle state's pairs already shown to a model ("a b")
MAX_SHOWN = 20_000  # kept: about 1 MB of state at most

Pair = tuple[str, str]


class Offer(NamedTuple):
    """Two lessons of one scope that may be one lesson, and the scorer's probability that they are."""

    a: str
    b: str
    probability: float


def offered(
    pairs: _Pairs,
    clusters: Sequence[Sequence[str]],
    opposed_pairs: set[Pair],
    *,
    per_lesson: int = PER_LESSON,
    floor: float = FLOOR,
) -> list[Offer]:
    """The pairs of one scope offered to confirm (see the module docstring), likeliest first."""
    if per_lesson <= 0:
        return []
    cluster_of = {member: n for n, cluster in enumerate(clusters) for member in cluster}
    bounds = pairs.bounds if pairs.table is not None else pairs.scores
    ranked: dict[str, list[tuple[float, Pair]]] = defaultdict(list)
    for pair, bound in bounds.items():
        a, b = pair
        if bound < floor or pair in opposed_pairs or (a in cluster_of and cluster_of.get(b) == cluster_of[a]):
            continue
        ranked[a].append((bound, pair))
        ranked[b].append((bound, pair))

    def units(pair: Pair) -> tuple[str, str]:  # a cluster is one lesson to offer: named by its first member
        one, other = (clusters[cluster_of[i]][0] if i in cluster_of else i for i in pair)
        return (one, other) if one < other else (other, one)

    exact: dict[Pair, float] = {}
    chosen: dict[tuple[str, str], tuple[float, Pair]] = {}
    for found in ranked.values():
        found.sort(key=lambda item: (-item[0], item[1]))
        best: dict[tuple[str, str], tuple[float, Pair]] = {}
        for start in range(0, len(found), per_lesson):
            top = sorted(best.values(), key=lambda item: (-item[0], item[1]))
            if len(top) >= per_lesson and found[start][0] <= top[per_lesson - 1][0]:
                break  # a bound is never below its pair's probability: nothing further can enter
            batch = [pair for _, pair in found[start : start + per_lesson]]
            exact.update(_probabilities(pairs, [pair for pair in batch if pair not in exact]))
            for pair in batch:
                key = units(pair)
                if exact[pair] >= floor and (key not in best or exact[pair] > best[key][0]):
                    best[key] = (exact[pair], pair)
        for probability, pair in sorted(best.values(), key=lambda item: (-item[0], item[1]))[:per_lesson]:
            key = units(pair)
            if key not in chosen or probability > chosen[key][0]:
                chosen[key] = (probability, pair)
    return sorted(
        (Offer(a, b, round(p, 4)) for p, (a, b) in chosen.values()), key=lambda o: (-o.probability, o.a, o.b)
    )


def _probabilities(pairs: _Pairs, todo: Sequence[Pair]) -> dict[Pair, float]:
    """The scorer's probability of each pair, 0 when the guards veto it."""
    found: dict[Pair, float] = {}
    scored: list[Pair] = []
    for pair in todo:
        known = pairs.scores.get(pair, 0.0)
        if known > 0 or pairs.table is None:  # exact already (without NumPy every score is)
            found[pair] = known
            continue
        a, b = pairs.text[pair[0]], pairs.text[pair[1]]
        kind = (
            pairs.relations[pair]
            if pair in pairs.relations
            else relation(a, b, pairs.weights, paraphrase=0.0)
        )
        if kind == "paraphrase" or same_text(a, b):
            scored.append(pair)
        else:
            found[pair] = 0.0
    if scored:
        import numpy as np

        from lessonbank.services.consolidation.pairtable import TEMPLATE, alignments

        assert pairs.table is not None
        rows = np.asarray([(pairs.index[a], pairs.index[b]) for a, b in scored], dtype=np.int64)
        values = pairs.table.features(rows)
        values[:, TEMPLATE] = alignments([(pairs.text[a], pairs.text[b]) for a, b in scored])
        for pair, row in zip(scored, values.tolist(), strict=True):
            cosine = pairs._cosine(pair)
            if cosine is None:
                found[pair] = scorer.probability(scorer.LEXICAL, tuple(row))
            else:
                found[pair] = scorer.probability(pairs.model, (*row, cosine))
    return found


# ---------------------------------------------------------------------------- the prompt


def render(
    offers: Sequence[Offer], lessons: Mapping[str, Lesson], count: Callable[[str], int], budget: int
) -> tuple[str, list[Offer]]:
    """The pairs to confirm as phase 3 reads them, as many as fit ``budget`` tokens: (text, the pairs
    shown). The most likely per token first: the merges a cycle's tokens may buy (on the tuning bank,
    within the 4.6k tokens of a default cycle, 0.24 of the duplicate pairs joined or shown against 0.08
    likeliest first: the likeliest unjoined pairs are long reflections on one problem). Each pair is
    numbered, one lesson a line (id | text)."""
    blocks = []
    for offer in offers:
        if offer.a in lessons and offer.b in lessons:
            block = f"{_row(lessons[offer.a])}\n   {_row(lessons[offer.b])}"
            blocks.append((count(block) + 3, block, offer))  # + the number and the line break
    blocks.sort(key=lambda item: (-item[2].probability / item[0], item[2].a, item[2].b))
    shown: list[str] = []
    pairs: list[Offer] = []
    spent = 0
    for cost, block, offer in blocks:
        if spent + cost > budget:
            break
        shown.append(f"{len(shown) + 1}. {block}")
        pairs.append(offer)
        spent += cost
    return "\n".join(shown), pairs


def unseen(offers: Sequence[Offer], state: Mapping[str, object]) -> list[Offer]:
    """The offers no earlier cycle showed to its model (:func:`remember`): a pair a model saw and did not
    merge is not shown again, so the next cycle's tokens go to the next pairs."""
    seen = state.get(SHOWN)
    if not isinstance(seen, list) or not seen:
        return list(offers)
    done = set(seen)
    return [offer for offer in offers if f"{offer.a} {offer.b}" not in done]


def remember(state: dict[str, object], shown: Sequence[Offer]) -> None:
    """Adds the pairs a cycle showed its model to the namespace's cycle state, the last :data:`MAX_SHOWN`."""
    if shown:
        earlier = state.get(SHOWN)
        keys = [*(earlier if isinstance(earlier, list) else []), *(f"{o.a} {o.b}" for o in shown)]
        state[SHOWN] = list(dict.fromkeys(keys))[-MAX_SHOWN:]


def _row(lesson: Lesson) -> str:
    text = inline(lesson.content)
    return f"{lesson.id} | {text if len(text) <= ROW_CHARS else text[: ROW_CHARS - 1] + '…'}"


# ---------------------------------------------------------------------------- a model's merge


def refusal(
    sources: Sequence[Lesson], clusters: Iterable[Sequence[str]], weights_of: Callable[[Lesson], Weights]
) -> str | None:
    """Why a model's merge of ``sources`` must not be made, or None: every pair of its sources that
    the pre-pass did not put in one cluster must pass the guards the pre-pass uses. ``weights_of``
    gives a lesson's scope's word weights."""
    together = {member: n for n, cluster in enumerate(clusters) for member in cluster}
    for n, one in enumerate(sources):
        for other in sources[n + 1 :]:
            if one.id in together and together.get(other.id) == together[one.id]:
                continue
            a, b = one.content, other.content
            if same_lesson(a, b) or same_text(a, b):
                continue
            weights = weights_of(one)
            if relation(a, b, weights, paraphrase=0.0) == "paraphrase":
                continue
            return f"guards: {one.id} and {other.id} {_why(a, b, weights)}; a merge never joins them"
    return None


def _why(a: str, b: str, weights: Weights) -> str:
    if named_apart(a, b):
        return "name different things (code, identifiers or numbers)"
    if opposed(a, b):
        return "say opposite things about one subject"
    if siblings(a, b):
        return "are siblings (the word that differs is the lesson)"
    if sentences_apart(a, b, weights):
        return "share one sentence and differ in the other"
    return "are two lessons"
