"""The documentation site: `mkdocs build --strict` passes (built once per session, offline), every page
of docs/ is in the nav, every internal link and anchor of the built site resolves, the README's links to
docs/ resolve, and the generated reference pages list every command, route, tool and setting."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
GENERATED = {"reference/cli.md", "reference/rest.md", "reference/mcp.md"}  # written by docs/hooks.py

# The build runs the venv's mkdocs in a subprocess whose sockets may reach this machine only, so a theme
# or plugin that downloads anything (fonts, icons, social cards) fails the build.
OFFLINE_MKDOCS = """
import socket, sys
real = socket.socket.connect
def connect(self, address):
    if self.family in (socket.AF_INET, socket.AF_INET6) and address[0] not in ("127.0.0.1", "::1", "localhost"):
        raise RuntimeError(f"the docs build must not reach the internet (tried {address!r})")
    return real(self, address)
socket.socket.connect = connect
from mkdocs.__main__ import cli
sys.argv[0] = "mkdocs"
cli()
"""

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once for the session with ``mkdocs build --strict``."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "LESSONBANK_HOME": str(out.parent / "home")}
    done = subprocess.run(
        [sys.executable, "-c", OFFLINE_MKDOCS, "build", "--strict", "--clean", "-d", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    assert "WARNING" not in done.stderr, done.stderr[-5000:]
    return out


def nav_pages() -> list[str]:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    found: list[str] = []

    def walk(item: object) -> None:
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, list):
            for entry in item:
                walk(entry)
        elif isinstance(item, dict):
            for value in item.values():
                walk(value)

    walk(config["nav"])
    return found


def test_every_docs_page_is_in_the_nav_and_every_nav_page_exists() -> None:
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    nav = nav_pages()
    assert len(nav) == len(set(nav)), "a page is twice in the nav"
    assert pages - set(nav) == set(), "pages missing from the nav"
    assert set(nav) - pages - GENERATED == set(), "nav entries without a page"
    assert not pages & GENERATED, "a generated reference page is committed: it would shadow the generated one"


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()
        self.loads: list[str] = []  # what a browser fetches on its own: stylesheets, scripts, images

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(values["id"] or "")
        if tag in ("a", "link") and values.get("href"):
            self.hrefs.append(values["href"] or "")
        if (tag == "link" and values.get("rel") != "canonical") or tag in ("script", "img", "iframe"):
            self.loads.append(values.get("href") or values.get("src") or "")


def _parse(page: Path) -> _Links:
    parser = _Links()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def test_the_site_builds_strict_and_every_internal_link_resolves(site: Path) -> None:
    site = site.resolve()
    pages = sorted(site.rglob("*.html"))
    assert (site / "index.html").exists() and len(pages) > 15
    parsed = {page: _parse(page) for page in pages}
    broken: list[str] = []
    for page, links in parsed.items():
        if page == site / "404.html":  # served at any depth, so its links are absolute to the site
            continue
        for href in links.hrefs:
            parts = urlsplit(href)
            if parts.scheme or parts.netloc or href.startswith(("mailto:", "javascript:")):
                continue
            base = site if parts.path.startswith("/") else page.parent
            target = page if not parts.path else (base / unquote(parts.path).lstrip("/")).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.exists():
                broken.append(f"{page.relative_to(site)}: {href}")
            elif parts.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else _parse(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{page.relative_to(site)}: {href} (no such anchor)")
    assert broken == []
    remote = {load for links in parsed.values() for load in links.loads if urlsplit(load).netloc}
    assert remote == set(), (
        "a page loads something from another host (fonts, scripts): the site must work offline"
    )


def test_the_readme_links_to_docs_pages_that_exist() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#]+)(?:#[^)]*)?\)", readme)
    assert len(links) >= 10
    assert [link for link in links if not (ROOT / link).is_file()] == []


def test_the_reference_lists_every_command_route_and_tool(site: Path) -> None:
    from lessonbank.cli.app import COMMANDS, GROUPS
    from lessonbank.operations import OPERATIONS

    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    for entry in (*COMMANDS, *GROUPS):
        assert f"<code>lessonbank {entry.name}</code>" in cli, entry.name
    assert (
        "<code>lessonbank proposals approve</code>" in cli and "<code>lessonbank claude install</code>" in cli
    )

    rest = (site / "reference" / "rest" / "index.html").read_text(encoding="utf-8")
    mcp = (site / "reference" / "mcp" / "index.html").read_text(encoding="utf-8")
    for operation in OPERATIONS.values():
        if operation.rest is not None:
            assert f"/api/v1{operation.rest[1]}" in rest, operation.name
        if operation.mcp is not None:
            assert f'id="{operation.mcp}"' in mcp, operation.mcp


def test_the_python_reference_documents_the_public_api(site: Path) -> None:
    import lessonbank

    page = (site / "reference" / "python" / "index.html").read_text(encoding="utf-8")
    assert [name for name in lessonbank.__all__ if f'id="lessonbank.{name}"' not in page] == []


def test_every_setting_is_in_the_configuration_page() -> None:
    from lessonbank.settings import Settings

    page = (DOCS / "how-to" / "configuration.md").read_text(encoding="utf-8")
    names = []
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        names += list(getattr(alias, "choices", [])) if alias is not None else [f"LESSONBANK_{name.upper()}"]
    assert [name for name in names if f"`{name}`" not in page] == []


# ---------------------------------------------------------------------- the browser


@pytest.fixture
def served_site(site: Path) -> Iterator[str]:
    """The built site over HTTP on a free local port (Material's search needs http://, not file://)."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_site_reads_in_chromium_wide_and_narrow(served_site: str, tmp_path: Path) -> None:
    """Home, a how-to and the generated references load in Debian's chromium with no script error
    and nothing from another host; the nav leads from page to page; search finds a concept; on a
    420 px screen nothing overflows sideways. Screenshots are kept in the test's folder."""
    from tests.test_dashboard import CHROMIUM, _chromium_or_skip

    _chromium_or_skip()
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    foreign: list[str] = []
    with sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            for width in (1280, 420):
                page = browser.new_page(viewport={"width": width, "height": 900})
                page.on("console", lambda msg: problems.append(msg.text) if msg.type == "error" else None)
                page.on("pageerror", lambda exc: problems.append(str(exc)))
                page.on(
                    "request",
                    lambda request: (
                        foreign.append(request.url)
                        if not request.url.startswith((served_site, "data:", "blob:"))
                        else None
                    ),
                )
                for path, heading in (
                    ("/", "lessonbank"),
                    ("/how-to/langgraph/", "LangGraph"),
                    ("/reference/cli/", "CLI"),
                    ("/reference/mcp/", "MCP"),
                ):
                    page.goto(served_site + path)
                    assert heading.lower() in page.locator("h1").first.inner_text().lower(), path
                    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
                    assert overflow <= 1, f"{path} scrolls sideways by {overflow}px at {width}px"
                    name = path.strip("/").replace("/", "-") or "home"
                    page.screenshot(path=str(tmp_path / f"docs-{name}-{width}.png"))
                if width == 1280:
                    page.goto(served_site + "/")
                    page.get_by_role("link", name="Concepts").first.click()
                    page.wait_for_url("**/concepts/")
                    assert "Concepts" in page.locator("h1").first.inner_text()
                    page.locator("label.md-search__icon, .md-search__input").first.click()
                    results = page.locator(".md-search-result__item")
                    # The search index loads in a web worker: a query typed before it is ready finds
                    # nothing, so type it again until results show (a generous bound on a busy machine).
                    for _attempt in range(30):
                        page.locator("input.md-search__input").fill("")
                        page.locator("input.md-search__input").fill("consolidation")
                        try:
                            results.first.wait_for(timeout=3_000)
                            break
                        except PlaywrightTimeout:
                            continue
                    assert results.count() >= 1
                    page.screenshot(path=str(tmp_path / "docs-search-1280.png"))
                page.close()
        finally:
            browser.close()
    assert problems == []
    assert foreign == []
