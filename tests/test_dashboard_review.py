"""The dashboard as a reviewer uses it: the list of episodes and a lesson's way back to its episode,
an overview whose cards link to what they count and whose counts agree, the pending reflection as
rendered Markdown (no chat instructions, no glyph the fonts lack), and every page readable on a
420 px wide screen in a real headless Chromium (screenshots under the test's ``tmp_path``/narrow)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from lessonbank import LessonBank
from lessonbank.llm import FakeLLM
from tests import test_dashboard as dashboard_tests
from tests.conftest import SEED_004_REPLY
from tests.test_dashboard import Seeded, client_of, pages

# The seeded bank, its server and the Chromium page of the dashboard's own tests.
seeded = dashboard_tests.seeded
served = dashboard_tests.served
browser_page = dashboard_tests.browser_page

NARROW = 420


def _pictographs(text: str) -> list[str]:
    return [
        char
        for char in text
        if ord(char) >= 0x1F000
        or char in "\ufe0f\u200d"
        or (ord(char) >= 0x2600 and unicodedata.category(char) == "So")
    ]


def _cards(html: str) -> dict[str, tuple[str, str]]:
    """The overview's cards: label -> (link, number)."""
    found = re.findall(
        r'<a class="card" href="([^"]*)"><span class="n">([^<]*)</span><span class="l">([^<]*)</span></a>',
        html,
    )
    return {label: (target.replace("&amp;", "&"), number) for target, number, label in found}


# ---------------------------------------------------------------------- episodes and provenance


def test_the_episodes_page_lists_outcome_agent_task_and_error(seeded: Seeded) -> None:
    with seeded.bank() as bank:
        ops = bank.record({"task": "rotate the TLS certificate", "agent": "ops", "status": "success"})
    with client_of(seeded) as client:
        listed = client.get("/episodes")
        assert listed.status_code == 200
        html = listed.text
        assert '<a href="/episodes?ns=default" class="on">Episodes</a>' in html  # in the navigation
        for text in ("deploy the billing service", "helm upgrade timed out", "refactor the Go parser"):
            assert text in html
        assert f'href="/episodes/{seeded.episode_id}?ns=default"' in html
        assert '<span class="badge bad">failure</span>' in html and "reflect: error" in html
        only_ops = client.get("/episodes?agent=ops").text
        assert "rotate the TLS certificate" in only_ops and f"/episodes/{ops.id}?" in only_ops
        assert "helm upgrade timed out" not in only_ops
        assert "No episode recorded by agent nobody." in client.get("/episodes?agent=nobody").text


def test_a_lesson_links_to_the_episode_it_was_learned_from(seeded: Seeded) -> None:
    with seeded.bank() as bank:
        [learned] = [lesson for lesson in bank.lessons(limit=100) if lesson.episode_id == seeded.episode_id]
    with client_of(seeded) as client:
        html = client.get(f"/lessons/{learned.id}").text
        assert f'<a href="/episodes/{seeded.episode_id}?ns=default">episode {seeded.episode_id}</a>' in html
        assert "refactor the Go parser" in html  # the task it was learned on, beside the link
        episode = client.get(f"/episodes/{seeded.episode_id}").text
        assert f'href="/lessons/{learned.id}?ns=default"' in episode  # and back


# ---------------------------------------------------------------------- overview


def test_the_overview_says_how_many_proposals_wait_and_its_cards_are_links(seeded: Seeded) -> None:
    with client_of(seeded) as client:
        cards = _cards(client.get("/").text)
        assert cards["proposals pending review"] == ("/proposals?ns=default", "1")
        assert cards["episodes"] == ("/episodes?ns=default", "3")
        assert cards["active lessons"][0] == "/lessons?ns=default"
        assert cards["quarantined lessons"][0] == "/lessons?ns=default&status=quarantined"
        assert cards["dead jobs"] == ("/jobs?ns=default&status=dead", "1")
        for label, (target, _) in cards.items():
            if not target.startswith("#"):
                assert client.get(target).status_code == 200, label
        with seeded.bank() as bank:
            bank.reject(seeded.proposal_id, reason="not now")
        assert _cards(client.get("/").text)["proposals pending review"][1] == "0"


def test_the_overview_counts_reflections_and_llm_calls_apart(seeded: Seeded) -> None:
    # An unreadable first reply and its repair: one reflection that took two LLM calls (and the
    # episode the cycle's fixture left queued, one call).
    llm = FakeLLM(["no idea", SEED_004_REPLY], default=SEED_004_REPLY)
    with LessonBank(settings=seeded.settings, llm=llm) as bank:
        bank.record({"task": "bump the Go toolchain", "error": "go vet failed on the new loop semantics"})
        assert bank.flush()
        stats = bank.stats()
    assert sum(stats["reflections"].values()) == 3 and stats["llm_calls"] == 4
    with client_of(seeded) as client:
        html = client.get("/").text
    cards = _cards(html)
    assert cards["reflections on episodes"][1] == "3"
    assert cards["LLM calls of reflections"] == ("#spend", "4")
    # The "Reflections per day" chart draws reflections, not calls: today's bar says 3.
    figure = html.split("<figcaption>Reflections per day</figcaption>")[1].split("</figure>")[0]
    assert re.findall(r"<title>[^<]*: ([0-9.]+)</title>", figure)[-1] == "3"
    spend = html.split('<h2 id="spend">Spend</h2>')[1]
    assert "<th>runs</th><th>LLM calls</th>" in spend
    assert (
        '<td data-label="reflector">lesson</td><td data-label="runs">3</td><td data-label="LLM calls">4</td>'
    ) in spend
    assert (
        '<td data-label="reflector"><a href="/proposals?ns=default">consolidation cycles</a></td>'
        '<td data-label="runs">1</td>'
    ) in spend


# ---------------------------------------------------------------------- the pending reflection


def test_the_pending_reflection_is_rendered_markdown_for_a_page(seeded: Seeded) -> None:
    with client_of(seeded) as client:
        html = client.get(pages(seeded)["proposal"]).text
    reflection = html.split("As the pending reflection reads</h2>")[1]
    assert reflection.startswith('<div class="markdown"><h3>Reflection Summary')
    assert "<h4>New Knowledge Extracted</h4>" in reflection and "<h4>Questions for You</h4>" in reflection
    assert '<pre><code class="language-diff">' in reflection and "<strong>Reflection #</strong>" in reflection
    assert "<ul>\n<li>supersedes les_twin_a" in reflection  # a nested list stays nested
    assert "Reply with" not in html and "approve with changes`" not in html
    assert _pictographs(html) == []


def test_markdown_from_a_model_stays_inert() -> None:
    from lessonbank.server.ui.html import render_markdown

    hostile = (
        "## ⚠️ Heads up <script>alert(1)</script>\n\n<img src=x onerror=alert(1)>\n\n"
        "![tracker](https://evil.example/t.png) [click](javascript:alert(1)) [docs](https://docs.example/)\n\n"
        "> Reply with `approve` or `reject`.\n\nStill here 👍🏽.\n\n- 🧠 one\n  - ✏️ two"
    )
    html = render_markdown(hostile)
    assert "<script" not in html and "<img" not in html and 'href="javascript' not in html
    assert "<h4>Heads up &lt;script&gt;alert(1)&lt;/script&gt;</h4>" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "tracker" in html
    assert '<a href="https://docs.example/">docs</a>' in html
    assert "Reply with" not in html and "Still here." in html and _pictographs(html) == []
    assert "<li>one\n<ul>\n<li>two</li>" in html


# ---------------------------------------------------------------------- the browser, 420 px wide

OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  const cut = [];
  for (const el of document.querySelectorAll('body *')) {
    if (el.closest('.scroll')) continue;  // a table: measured as a whole below
    const box = el.getBoundingClientRect();
    const spills = el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1
      && getComputedStyle(el).overflowX === 'visible';  // its text runs out of its box
    if (spills || (box.width && (box.right > width + 1 || box.left < -1))) {
      cut.push(`${el.tagName.toLowerCase()}.${el.className} ${Math.round(box.left)}..${Math.round(box.right)}`);
    }
  }
  for (const box of document.querySelectorAll('.scroll')) {
    const edge = box.getBoundingClientRect().right;
    if (edge > width + 1) cut.push(`scroll box to ${Math.round(edge)}`);
    if (box.scrollWidth > box.clientWidth + 1) cut.push(`a table ${box.scrollWidth} px wide`);
  }
  return {page: document.documentElement.scrollWidth, width, cut: cut.slice(0, 8)};
}"""


def test_every_page_reads_on_a_420_px_screen(
    seeded: Seeded, served: str, browser_page: tuple[object, list[str], list[str]], tmp_path: Path
) -> None:
    page, problems, _ = browser_page
    page.set_viewport_size({"width": NARROW, "height": 900})  # type: ignore[attr-defined]
    screens = tmp_path / "narrow"
    with seeded.bank() as bank:
        [learned] = [lesson for lesson in bank.lessons(limit=100) if lesson.episode_id == seeded.episode_id]
    narrow = {**pages(seeded), "episodes": "/episodes", "learned": f"/lessons/{learned.id}"}
    for name, path in narrow.items():
        response = page.goto(served + path)  # type: ignore[attr-defined]
        assert response is not None and response.status == 200, name
        page.screenshot(path=str(screens / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]
        measured = page.evaluate(OVERFLOW)  # type: ignore[attr-defined]
        assert measured["page"] <= NARROW and measured["cut"] == [], (name, measured)
    assert problems == []


def test_a_reviewer_goes_from_the_overview_to_the_proposal_and_its_reflection(
    seeded: Seeded, served: str, browser_page: tuple[object, list[str], list[str]], tmp_path: Path
) -> None:
    page, problems, _ = browser_page
    page.set_viewport_size({"width": NARROW, "height": 900})  # type: ignore[attr-defined]
    page.goto(served + "/")  # type: ignore[attr-defined]
    page.get_by_role("link", name="proposals pending review").click()  # type: ignore[attr-defined]
    page.get_by_role("link", name=seeded.proposal_id).click()  # type: ignore[attr-defined]
    heading = page.locator(".markdown h4", has_text="New Knowledge Extracted")  # type: ignore[attr-defined]
    heading.wait_for()
    assert heading.inner_text() == "New Knowledge Extracted"
    text = page.locator(".markdown").inner_text()  # type: ignore[attr-defined]
    assert "Reply with" not in text and "# Reflection" not in text and _pictographs(text) == []
    page.locator(".markdown").screenshot(path=str(tmp_path / "narrow" / "reflection.png"))  # type: ignore[attr-defined]
    page.get_by_role("link", name="Episodes").click()  # type: ignore[attr-defined]
    page.get_by_role("link", name="refactor the Go parser").click()  # type: ignore[attr-defined]
    page.get_by_text("The policy's decision").wait_for()  # type: ignore[attr-defined]
    assert problems == []


# ---------------------------------------------------------------------- merges and flags


def test_a_merged_lesson_shows_what_it_was_merged_from(seeded: Seeded) -> None:
    with seeded.bank() as bank:
        a = bank.add_lesson("run the linter before pushing")
        b = bank.add_lesson("before a push, run the linter")
        merged = bank.add_lesson("lint before every push")
        bank.store.update_lesson(
            merged.model_copy(update={"metadata": {**merged.metadata, "merged_from": [a.id, b.id]}})
        )
    with client_of(seeded) as client:
        html = client.get(f"/lessons/{merged.id}").text
        assert "merged from" in html
        assert f'href="/lessons/{a.id}?ns=default"' in html and f'href="/lessons/{b.id}?ns=default"' in html
        assert "merged from" not in client.get(f"/lessons/{a.id}").text


def test_the_why_page_marks_an_injected_lesson_a_pending_proposal_flags(seeded: Seeded) -> None:
    from lessonbank.proposals import Operation, Proposal

    with seeded.bank() as bank:
        keep = bank.add_lesson("always cache the auth token between calls")
        other = bank.add_lesson("never cache the auth token between calls")
        flag = Operation(kind="flag", lesson_ids=[keep.id, other.id], reason="they contradict")
        bank.store.save_proposal(Proposal(cycle_id="cyc_test", operations=[flag]))
    with client_of(seeded) as client:
        html = client.get("/why", params={"task": "cache the auth token", "budget": 400}).text
        assert "flagged" in html and "contradicts" in html
        assert f'href="/lessons/{other.id}?ns=default"' in html
        plain = client.get("/why", params={"task": "refactor the Go parser", "budget": 400}).text
        assert "contradicts" not in plain
