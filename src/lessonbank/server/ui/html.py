"""HTML pieces for the dashboard's pages.

Every function here returns markup; everything that comes from a bank, a request or a person goes
through :func:`esc` (or :func:`attr`) exactly once, where it is put into the markup. Lesson text is
untrusted: an agent, a model or a poisoned episode wrote it. Nothing here emits a ``style`` or
``on*`` attribute or a ``<script>``: the pages' Content-Security-Policy forbids them anyway.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from html import escape
from urllib.parse import urlencode

NAV = (
    ("overview", "/", "Overview"),
    ("lessons", "/lessons", "Lessons"),
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
    """A table of cells that are already markup; ``headers`` are plain text."""
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="empty">{esc(empty)}</p>'
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


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
