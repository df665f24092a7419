"""Server URLs: lessonbank's own query options split from the driver's, and passwords masked.

``redis://:secret@host:6379/0?prefix=a:&retry_s=5`` → the driver gets ``redis://:secret@host:6379/0``,
lessonbank gets ``{"prefix": "a:", "retry_s": "5"}``; messages show ``redis://:***@host:6379/0``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit


def split_options(
    url: str, options: Collection[str], *, schemes: Mapping[str, str] | None = None
) -> tuple[str, dict[str, str]]:
    """The driver's URL without the query ``options`` lessonbank reads, and those options.

    ``schemes`` renames schemes the driver does not know (``postgres`` → ``postgresql``)."""
    parts = urlsplit(url)
    if schemes and parts.scheme in schemes:
        parts = parts._replace(scheme=schemes[parts.scheme])
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours = {key: value for key, value in query if key in options}
    rest = [(key, value) for key, value in query if key not in options]
    return urlunsplit(parts._replace(query=urlencode(rest))), ours


def redacted(url: str) -> str:
    """``url`` fit for messages and logs: the password masked, the query left out."""
    parts = urlsplit(url)
    if parts.password:
        parts = parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@"))
    return urlunsplit(parts._replace(query=""))
