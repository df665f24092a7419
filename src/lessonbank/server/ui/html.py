"""HTML pieces for the dashboard's pages.

Every function here returns markup; everything that comes from a bank, a request or a person goes
through :func:`esc` (or :func:`attr`) exactly once, where it is put into the markup. Lesson text is
untrusted: an agent, a model or a poisoned episode wrote it. Nothing here emits a ``style`` or
``on*`` attribute or a ``<script>``: the pages' Content-Security-Policy forbids them anyway.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from html import escape
from typing import Any
from urllib.parse import urlencode

from markdown_it import MarkdownIt

NAV = (
    ("overview", "/", "Overview"),
    ("lessons", "/lessons", "Lessons"),
    ("episodes", "/episodes", "Episodes"),
    ("why", "/why", "Why"),
    ("jobs", "/jobs", "Jobs"),
    ("proposals", "/proposals", "Proposals"),
)

ON = ' class="on"'


def esc(value: object) -> str:
    """Text as HTML text or a quoted attribute value (quotes escaped too); None is empty."""
    return "" if value is None else escape(str(value), quote=True)


def attr(value: object) -> str:
    """A double-quoted attribute value."""
    return f'"{esc(value)}"'


def href(path: str, ns: str, **params: object) -> str:
    """A dashboard URL with the namespace and the non-empty ``params`` in its query, escaped for an
    attribute. ``path`` is one of ours; ids in it are quoted by the caller with :func:`segment`."""
    query = {"ns": ns, **{key: value for key, value in params.items() if value not in (None, "")}}
    return attr(f"{path}?{urlencode(query, doseq=True)}")


def segment(value: str) -> str:
    """An id as one URL path segment."""
    from urllib.parse import quote

    return quote(value, safe="")


def link(path: str, ns: str, text: object, **params: object) -> str:
    return f"<a href={href(path, ns, **params)}>{esc(text)}</a>"


def when(value: datetime | str | None) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        return esc(value[:16].replace("T", " "))
    return esc(f"{value:%Y-%m-%d %H:%M}")


def badge(text: object, tone: str = "") -> str:
    return f'<span class="badge {esc(tone)}">{esc(text)}</span>'


def clip(text: str, limit: int = 160) -> str:
    """The start of ``text`` on one line (escaped by the caller)."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, empty: str = "Nothing here yet.") -> str:
    """A table of cells that are already markup; ``headers`` are plain text. On a narrow screen
    the stylesheet shows each row as a block of labelled cells."""
    labels = [attr(h) for h in headers]  # a narrow screen shows each cell under its header's name
    body = "".join(
        "<tr>"
        + "".join(f"<td data-label={label}>{cell}</td>" for label, cell in zip(labels, row, strict=False))
        + "</tr>"
        for row in rows
    )
    if not body:
        return f'<p class="empty">{esc(empty)}</p>'
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def pairs(items: Mapping[str, str]) -> str:
    """A definition list of plain-text labels and markup values."""
    return "<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in items.items()) + "</dl>"


def hidden(name: str, value: object) -> str:
    return f'<input type="hidden" name={attr(name)} value={attr(value)}>'


def post_form(action: str, ns: str, csrf: str, inner: str, *, css: str = "inline") -> str:
    """A same-origin POST form carrying the namespace and the process's CSRF token."""
    return (
        f'<form method="post" action={attr(action)} class={attr(css)}>'
        f"{hidden('csrf', csrf)}{hidden('ns', ns)}{inner}</form>"
    )


def button(text: str, *, name: str = "", value: str = "", tone: str = "") -> str:
    named = f" name={attr(name)} value={attr(value)}" if name else ""
    return f'<button type="submit" class={attr(tone)}{named}>{esc(text)}</button>'


def options(choices: Iterable[str], selected: str | None, *, blank: str = "any") -> str:
    chosen = selected or ""
    items = [f'<option value=""{" selected" if not chosen else ""}>{esc(blank)}</option>']
    for choice in choices:
        mark = " selected" if choice == chosen else ""
        items.append(f"<option value={attr(choice)}{mark}>{esc(choice)}</option>")
    return "".join(items)


def page(
    title: str,
    body: str,
    *,
    ns: str,
    active: str,
    namespaces: Sequence[str] = (),
    notice: str | None = None,
    error: str | None = None,
) -> str:
    """The whole page: header with the navigation and the namespace selector, then ``body``."""
    nav = "".join(
        f"<a href={href(path, ns)}{ON if key == active else ''}>{esc(label)}</a>" for key, path, label in NAV
    )
    known = "".join(f"<option value={attr(name)}>" for name in namespaces)
    selector = (
        '<form method="get" action="/lessons" class="ns">'
        '<label for="ns">namespace</label>'
        f'<input id="ns" name="ns" value={attr(ns)} list="namespaces" maxlength="200">'
        f'<datalist id="namespaces">{known}</datalist><button type="submit">go</button></form>'
    )
    flash = f'<p class="notice">{esc(notice)}</p>' if notice else ""
    flash += f'<p class="error">{esc(error)}</p>' if error else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)} · lessonbank</title>"
        '<link rel="stylesheet" href="/static/dashboard.css"></head><body>'
        f'<header><span class="brand">lessonbank</span><nav>{nav}</nav>{selector}</header>'
        f"<main><h1>{esc(title)}</h1>{flash}{body}</main></body></html>"
    )


# ---------------------------------------------------------------------- Markdown

# Markdown as the bank writes it for a chat (seed 002's pending reflection): raw HTML stays text,
# images show their alt text (the CSP would block them), headings start at <h3> under the page's.
_MARKDOWN = MarkdownIt("commonmark", {"html": False, "breaks": True}).enable(["table", "strikethrough"])
_MARKDOWN.add_render_rule("image", lambda _r, tokens, idx, _o, _e: esc(tokens[idx].content))
HEADING_SHIFT = 2
# A line addressed to a chat reader ("Reply with `approve`, …"): on a page the forms decide.
_CHAT_LINE = re.compile(r"^\s*(?:>\s*)?reply with\b.*$", re.IGNORECASE | re.MULTILINE)
_JOINERS = {"\u200d", "\ufe0e", "\ufe0f", "\u20e3"}


def _pictograph(char: str) -> bool:
    """An emoji or pictographic symbol: the dashboard's fonts (system sans) have no glyph for most."""
    code = ord(char)
    if char in _JOINERS or 0x1F3FB <= code <= 0x1F3FF:  # joiners, presentation selectors, skin tones
        return True
    return (code >= 0x2600 and unicodedata.category(char) == "So") or code >= 0x1F000


def plain_symbols(text: str) -> str:
    """``text`` without emoji and pictographs (spaces around a dropped one collapse)."""
    if all(ord(char) < 0x2600 for char in text):
        return text
    kept = "".join("\x00" if _pictograph(char) else char for char in text)
    kept = re.sub(r"^([ \t]*)\x00+[ \t]*", r"\1", kept, flags=re.MULTILINE)  # a line keeps its indent
    kept = re.sub(r"[ \t]*\x00+[ \t]*(?=[.,;:!?)]|$)", "", kept, flags=re.MULTILINE)
    return re.sub(r"[ \t]*\x00+[ \t]*", " ", kept)


def render_markdown(text: str) -> str:
    """``text`` (Markdown, untrusted) as safe HTML: raw HTML is escaped, never passed through; no
    image is loaded; headings become ``<h3>``…``<h6>``; emoji are dropped (the page's fonts lack
    them); lines telling a chat reader how to reply (``Reply with `approve` …``) are left out."""
    cleaned = plain_symbols(_CHAT_LINE.sub("", text))
    tokens = _MARKDOWN.parse(cleaned)
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(6, int(token.tag[1]) + HEADING_SHIFT)}"
    options: Any = _MARKDOWN.options
    return f'<div class="markdown">{_MARKDOWN.renderer.render(tokens, options, {})}</div>'
