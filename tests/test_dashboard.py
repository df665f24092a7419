"""The dashboard: every page over a seeded SQLite bank, in TestClient for escaping, the CSP header,
the CSRF checks and the decision forms, and in a real headless Chromium (Debian's package, driven
by Playwright) for what a person sees: pages that load without console errors, a proposal approved
by clicking, a hostile lesson that stays text. Screenshots of each page go under the test's
``tmp_path``/screens."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from lessonbank import LessonBank, LLMError
from lessonbank.llm import FakeLLM
from lessonbank.server.app import create_app
from lessonbank.server.auth import KeyStore
from lessonbank.server.dashboard import CSRF_TOKEN, explain
from lessonbank.settings import Settings
from tests.conftest import SEED_004_REPLY
from tests.test_consolidation_llm import Script, proposed
from tests.threaded_server import serving

HOSTILE = "Deploy gate <script>alert(1)</script> then <img src=x onerror=alert(1)> check the staging gate"
CHROMIUM = "/usr/bin/chromium"


@dataclass
class Seeded:
    settings: Settings
    proposal_id: str
    hostile_id: str
    episode_id: str  # an episode whose reflection produced a lesson
    dead_job_id: str

    def bank(self) -> LessonBank:
        return LessonBank(settings=self.settings, worker=False)


@pytest.fixture
def seeded(tmp_path: Path) -> Seeded:
    """A real SQLite bank with a dead job, a reflected episode and its lesson, a hostile lesson, a
    superseded pair, and a pending proposal from the five scripted consolidation phases."""
    settings = Settings(home=tmp_path / "home", db=f"sqlite:///{tmp_path / 'bank.db'}")
    with LessonBank(settings=settings, llm=FakeLLM([LLMError("401: check the API key")])) as bank:
        bank.record({"task": "deploy the billing service", "error": "helm upgrade timed out"})
        assert bank.flush()
        [dead] = bank.jobs(status="dead")
    with LessonBank(settings=settings, llm=FakeLLM([SEED_004_REPLY])) as bank:
        reflected = bank.record({"task": "refactor the Go parser", "error": "rewrite broke the build"})
        assert bank.flush()
    llm = Script()
    with LessonBank(settings=settings, llm=llm, worker=False) as bank:
        proposal, _ = proposed(bank, llm)
        hostile = bank.add_lesson(HOSTILE, tags=["deploy"])
        bank.import_lessons(
            [
                {
                    "id": "les_old_vpn",
                    "content": "Connect through the old VPN profile before deploying.",
                    "superseded_by": "les_new_vpn",
                },
                {
                    "id": "les_new_vpn",
                    "content": "Connect through the new VPN profile before deploying.",
                    "supersedes": "les_old_vpn",
                    "helpful": 3,
                    "harmful": 1,
                    "access_count": 4,
                },
            ]
        )
    return Seeded(settings, proposal.id, hostile.id, reflected.id, dead.id)


def client_of(seeded: Seeded, keys: KeyStore | None = None) -> TestClient:
    app = create_app(seeded.settings, keys=keys or KeyStore(seeded.settings.home / "keys.json"), worker=False)
    return TestClient(app, base_url="http://127.0.0.1", follow_redirects=False)


def pages(seeded: Seeded) -> dict[str, str]:
    return {
        "overview": "/",
        "lessons": "/lessons",
        "search": "/lessons?q=deploy+staging+gate",
        "lesson": f"/lessons/{seeded.hostile_id}",
        "chain": "/lessons/les_new_vpn",
        "episode": f"/episodes/{seeded.episode_id}",
        "why": "/why?task=deploy+through+the+staging+gate&budget=120",
        "jobs": "/jobs",
        "proposals": "/proposals",
        "proposal": f"/proposals/{seeded.proposal_id}",
    }


# ---------------------------------------------------------------------- TestClient


def test_every_page_escapes_the_hostile_lesson_and_sends_a_strict_csp(seeded: Seeded) -> None:
    with client_of(seeded) as client:
        for name, path in pages(seeded).items():
            response = client.get(path)
            assert response.status_code == 200, (name, response.text[:300])
            csp = response.headers["content-security-policy"]
            assert "default-src 'none'" in csp and "style-src 'self'" in csp, name
            assert "unsafe-inline" not in csp and "script-src" not in csp, name
            assert response.headers["x-frame-options"] == "DENY"
            html = response.text
            assert "<script" not in html and "<img" not in html, name  # the escaped text only
        for path in ("/lessons/" + seeded.hostile_id, "/lessons?q=deploy+staging+gate", pages(seeded)["why"]):
            assert "&lt;script&gt;alert(1)&lt;/script&gt;" in client.get(path).text
            assert "&lt;img src=x onerror=alert(1)&gt;" in client.get(path).text


def test_pages_show_what_the_bank_holds(seeded: Seeded) -> None:
    with client_of(seeded) as client:
        episode = client.get(pages(seeded)["episode"]).text
        assert (
            "The policy's decision" in episode
            and "reflect" in episode
            and "Refactoring large Go files" in episode
        )
        chain = client.get("/lessons/les_new_vpn").text
        assert "Supersession chain" in chain and "old VPN profile" in chain and "+3 / −1" in chain
        jobs = client.get("/jobs").text
        assert (
            seeded.dead_job_id in jobs and "401: check the API key" in jobs and "Retry every dead job" in jobs
        )
        proposal = client.get(pages(seeded)["proposal"]).text
        assert (
            "EXTRACT" in proposal
            and "CORE MEMORY" in proposal
            and "Should the staging gate be pinned?" in proposal
        )
        assert "Reflection Summary" in proposal  # the pending reflection as seed 002 renders it
        overview = client.get("/").text
        assert overview.count("<svg") == 3 and "Reflections per day" in overview  # no loop yet: no curve
        missing = client.get("/lessons/les_nowhere")
        assert (
            missing.status_code == 404 and "les_nowhere" in missing.text and "<!doctype html>" in missing.text
        )


def test_a_post_needs_the_token_and_this_origin(seeded: Seeded) -> None:
    path = f"/lessons/{seeded.hostile_id}/archive"
    with client_of(seeded) as client:
        assert client.post(path, data={"ns": "default"}).status_code == 403
        assert client.post(path, data={"ns": "default", "csrf": "guess"}).status_code == 403
        foreign = client.post(
            path, data={"ns": "default", "csrf": CSRF_TOKEN}, headers={"Origin": "https://evil.example"}
        )
        assert foreign.status_code == 403
        cross = client.post(
            path, data={"ns": "default", "csrf": CSRF_TOKEN}, headers={"Sec-Fetch-Site": "cross-site"}
        )
        assert cross.status_code == 403
        with seeded.bank() as bank:
            assert bank.get_lesson(seeded.hostile_id).status == "active"
        done = client.post(
            path, data={"ns": "default", "csrf": CSRF_TOKEN}, headers={"Origin": "http://127.0.0.1"}
        )
        assert done.status_code == 303 and "done=archived" in done.headers["location"]
    with seeded.bank() as bank:
        assert bank.get_lesson(seeded.hostile_id).status == "archived"
        assert bank.audit(lesson_id=seeded.hostile_id)[0].actor == "dashboard:open"


def test_a_lesson_is_pinned_and_its_tags_edited_from_its_page(seeded: Seeded) -> None:
    path = f"/lessons/{seeded.hostile_id}/edit"
    origin = {"Origin": "http://127.0.0.1"}
    with client_of(seeded) as client:
        page = client.get(f"/lessons/{seeded.hostile_id}").text
        assert f'action="{path}"' in page and "Pin (never decays" in page
        pinned = client.post(
            path, data={"ns": "default", "csrf": CSRF_TOKEN, "pinned": "yes"}, headers=origin
        )
        assert pinned.status_code == 303 and "done=edited" in pinned.headers["location"]
        form = {"ns": "default", "csrf": CSRF_TOKEN, "tags": "deploy, security", "importance": "0.8"}
        assert client.post(path, data=form, headers=origin).status_code == 303
        bad = client.post(path, data={**form, "importance": "lots"}, headers=origin)
        assert bad.status_code == 422 and "importance is a number" in bad.text
        assert "Unpin" in client.get(f"/lessons/{seeded.hostile_id}").text
    with seeded.bank() as bank:
        lesson = bank.get_lesson(seeded.hostile_id)
        assert lesson.pinned and lesson.tags == ["deploy", "security"] and lesson.importance == 0.8
        assert [row.action for row in bank.audit(lesson_id=lesson.id)][:2] == ["edit", "edit"]


def test_partial_approval_with_an_edit_and_then_revert(seeded: Seeded) -> None:
    with seeded.bank() as bank:
        proposal = bank.proposal(seeded.proposal_id)
    extract = next(op for op in proposal.operations if op.kind == "extract")
    edited = "Before a deploy, run the migrations and wait until every one has finished."
    form = {
        "ns": "default",
        "csrf": CSRF_TOKEN,
        "decision": "partial",
        "only": [extract.id],
        f"edit:{extract.id}": edited.replace("\n", "\r\n"),
    }
    with client_of(seeded) as client:
        answer = client.post(f"/proposals/{seeded.proposal_id}/approve", data=form)
        assert answer.status_code == 303, answer.text[:300]
        with seeded.bank() as bank:
            decided = bank.proposal(seeded.proposal_id)
            assert decided.status == "partially_applied"
            [written] = [op for op in decided.operations if op.id == extract.id]
            assert written.lesson is not None and bank.get_lesson(written.lesson.id).content == edited
            assert all(op.status != "applied" for op in decided.operations if op.id != extract.id)
        page = client.get(f"/proposals/{seeded.proposal_id}?done=approved").text
        assert "Proposal applied." in page and "Revert" in page
        reverted = client.post(
            f"/proposals/{seeded.proposal_id}/revert", data={"ns": "default", "csrf": CSRF_TOKEN}
        )
        assert reverted.status_code == 303
    with seeded.bank() as bank:
        assert bank.proposal(seeded.proposal_id).status == "reverted"


def test_a_keyed_server_asks_for_a_key_and_keeps_its_role(seeded: Seeded) -> None:
    keys = KeyStore(seeded.settings.home / "keys.json")
    _, reader = keys.create("viewer", role="read", namespaces=["default"])
    with client_of(seeded, keys) as client:
        assert client.get("/lessons").status_code == 303  # to /login
        assert client.post("/login", data={"csrf": CSRF_TOKEN, "key": "lbk_wrong_key"}).status_code == 401
        signed = client.post("/login", data={"csrf": CSRF_TOKEN, "key": reader, "next": "/lessons"})
        assert signed.status_code == 303 and "httponly" in signed.headers["set-cookie"].lower()
        assert "samesite=strict" in signed.headers["set-cookie"].lower()
        assert client.get("/lessons").status_code == 200
        assert client.get("/lessons?ns=other").status_code == 403
        refused = client.post(
            f"/proposals/{seeded.proposal_id}/reject", data={"ns": "default", "csrf": CSRF_TOKEN}
        )
        assert refused.status_code == 403 and "may not admin" in refused.text
    with seeded.bank() as bank:
        assert bank.proposal(seeded.proposal_id).status == "pending"


def test_why_explains_the_budget_without_counting_a_use(seeded: Seeded) -> None:
    with seeded.bank() as bank:
        before = {lesson.id: lesson.access_count for lesson in bank.lessons(limit=100)}
        considered, block, used = explain(bank, "run the migrations before the deploy", 120)
        assert considered and used <= 120
        injected = [item for item in considered if item.injected]
        left_out = [item for item in considered if not item.injected]
        assert injected and left_out and all("budget" in item.reason for item in left_out)
        assert injected[0].hit.lesson.content.split()[0] in block
        real = bank.context("run the migrations before the deploy", budget_tokens=120)
        assert real.lesson_ids == [item.hit.lesson.id for item in injected] and real.text == block
        after = {lesson.id: lesson.access_count for lesson in bank.lessons(limit=100)}
        touched = {key for key in after if after[key] != before[key]}
        assert touched == set(real.lesson_ids)  # only the real context() counted a use


# ---------------------------------------------------------------------- the browser


def _chromium_or_skip() -> None:
    reason = None
    if not shutil.which(CHROMIUM):
        reason = f"{CHROMIUM} is not installed (apt-get install -y chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            reason = "the playwright package is not installed (the dev group has it)"
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


@pytest.fixture
def served(seeded: Seeded) -> Iterator[str]:
    """A real uvicorn server over the seeded bank, on a free local port, in a thread."""
    app = create_app(seeded.settings, keys=KeyStore(seeded.settings.home / "keys.json"), worker=False)
    with serving(app) as base:
        yield base


@pytest.fixture
def browser_page(tmp_path: Path) -> Iterator[tuple[object, list[str], list[str]]]:
    _chromium_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        problems: list[str] = []
        dialogs: list[str] = []
        page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: problems.append(str(exc)))

        def on_dialog(dialog: object) -> None:
            dialogs.append(dialog.message)  # type: ignore[attr-defined]
            dialog.dismiss()  # type: ignore[attr-defined]

        page.on("dialog", on_dialog)
        try:
            yield page, problems, dialogs
        finally:
            browser.close()


def test_every_page_loads_in_chromium_with_screenshots(
    seeded: Seeded, served: str, browser_page: tuple[object, list[str], list[str]], tmp_path: Path
) -> None:
    page, problems, dialogs = browser_page
    screens = tmp_path / "screens"
    for name, path in pages(seeded).items():
        response = page.goto(served + path)  # type: ignore[attr-defined]
        assert response is not None and response.status == 200, name
        page.wait_for_load_state("load")  # type: ignore[attr-defined]
        page.screenshot(path=str(screens / f"{name}.png"), full_page=True)  # type: ignore[attr-defined]
        assert page.locator("h1").count() == 1, name  # type: ignore[attr-defined]
    assert problems == []  # a CSP violation or a failed asset load is a console error
    assert dialogs == []
    assert sorted(p.stem for p in screens.glob("*.png")) == sorted(pages(seeded))


def test_a_hostile_lesson_stays_inert_in_chromium(
    seeded: Seeded, served: str, browser_page: tuple[object, list[str], list[str]]
) -> None:
    page, problems, dialogs = browser_page
    for path in (f"/lessons/{seeded.hostile_id}", "/lessons?q=deploy+staging+gate", pages(seeded)["why"]):
        page.goto(served + path)  # type: ignore[attr-defined]
        assert page.locator("script").count() == 0  # type: ignore[attr-defined]
        assert page.locator("img").count() == 0  # type: ignore[attr-defined]
        page.get_by_text("<script>alert(1)</script>", exact=False).first.wait_for()  # type: ignore[attr-defined]
    page.goto(served + f"/lessons/{seeded.hostile_id}")  # type: ignore[attr-defined]
    assert HOSTILE in page.locator("pre").first.inner_text()  # type: ignore[attr-defined]
    assert dialogs == [] and problems == []


def test_a_proposal_is_approved_by_clicking(
    seeded: Seeded, served: str, browser_page: tuple[object, list[str], list[str]], tmp_path: Path
) -> None:
    page, problems, _ = browser_page
    page.goto(f"{served}/proposals")  # type: ignore[attr-defined]
    page.get_by_role("link", name=seeded.proposal_id).click()  # type: ignore[attr-defined]
    page.get_by_role("button", name="Approve all").click()  # type: ignore[attr-defined]
    page.get_by_text("Proposal applied.").wait_for()  # type: ignore[attr-defined]
    page.screenshot(path=str(tmp_path / "screens" / "approved.png"), full_page=True)  # type: ignore[attr-defined]
    assert problems == []
    with seeded.bank() as bank:
        decided = bank.proposal(seeded.proposal_id)
        assert decided.status == "applied" and decided.decided_by == "dashboard:open"
        assert bank.get_lesson("les_gate").metadata["links"] == [
            {"to": "les_smoke", "type": "refines", "direction": "out"}
        ]
        assert bank.core_memory() == decided.core_memory
