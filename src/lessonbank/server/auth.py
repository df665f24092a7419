"""API keys: who may read or change which namespaces of a served bank.

A key is ``lbk_<id>_<secret>``: 16 random bytes of secret, shown once when it is created; only its
SHA-256 is stored (a random 128-bit secret needs no slow hash: nothing can be guessed from the
digest). Each key has a name, a role and the namespaces it may use (``*``: all):

- ``read``: recall, context, lessons, show, goals, insights, rules, replay, jobs, stats, proposals, audit;
- ``write``: that and record, reflect, add, import, archive, restore, consolidate, finish a goal;
- ``admin``: that and what a person decides: approve, reject, revert proposals, forget, retry jobs.

Keys live in a JSON file (``$LESSONBANK_HOME/keys.json`` by default, mode 0600), written through a
temporary file and renamed, so a crash never leaves half a file. ``lessonbank keys create|list|revoke``
manage it. A server whose key file holds no key at all is *open*: every request is admin on every
namespace, which is why ``lessonbank serve`` then binds to 127.0.0.1 only and says so (and answers only
requests addressed to this machine, see :mod:`.hosts`). Once a key was created, revoking every key leaves
the server closed, not open; and a server that ever saw a key stays closed while it runs: should its key
file then be emptied, deleted or broken, every request is refused (503) and the log says why, until the
file is restored or the server restarts.

The file is read again only when it changed (its size, time or inode), so checking a request costs a
``stat``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import threading
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from lessonbank.errors import ConfigError, InputError, NotFoundError
from lessonbank.operations import ROLES, Role, at_least
from lessonbank.settings import make_private_folder

log = logging.getLogger("lessonbank.server")

ALL = "*"
PREFIX = "lbk_"


@dataclass(frozen=True)
class Principal:
    """Who a request comes from: a key's name, role and namespaces (``open`` when no key exists)."""

    name: str
    role: Role
    namespaces: tuple[str, ...]
    open: bool = False

    def may(self, namespace: str, role: Role) -> bool:
        """Whether this principal may act as ``role`` on ``namespace``."""
        in_scope = ALL in self.namespaces or namespace in self.namespaces
        return in_scope and at_least(self.role, role)


OPEN = Principal(name="open", role="admin", namespaces=(ALL,), open=True)


@dataclass
class Key:
    id: str
    name: str
    role: Role
    namespaces: list[str]
    digest: str
    created_at: str
    revoked_at: str | None = None
    last_used_at: str | None = field(default=None, compare=False)

    def principal(self) -> Principal:
        return Principal(name=self.name, role=self.role, namespaces=tuple(self.namespaces))


class KeyStore:
    """The keys of one server, in one JSON file (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._cache: tuple[tuple[int, int, int], list[Key]] | None = None
        self._refusing: str | None = None  # why requests are refused now (logged once per reason)
        self._closed = False  # once it saw a key: reading one sets it, and nothing clears it
        try:
            self.all()
        except ConfigError:  # a key file that cannot be read was meant to hold keys: closed
            self._closed = True

    # ------------------------------------------------------------------ managing

    def create(
        self, name: str, *, role: str = "read", namespaces: list[str] | None = None
    ) -> tuple[Key, str]:
        """A new key and its secret token (shown once; only its digest is kept)."""
        if not isinstance(name, str) or not name.strip() or len(name) > 100:
            raise InputError("a key needs a name of 1 to 100 characters", field="name")
        if role not in ROLES:
            raise InputError(f"unknown role {role!r}; use one of {', '.join(ROLES)}", field="role")
        chosen = [n.strip() for n in (namespaces or [ALL]) if n.strip()]
        if not chosen:
            raise InputError("a key needs at least one namespace (or '*')", field="namespaces")
        key_id = secrets.token_hex(6)
        secret = secrets.token_urlsafe(16)
        token = f"{PREFIX}{key_id}_{secret}"
        key = Key(
            id=key_id,
            name=name.strip(),
            role=role,
            namespaces=chosen,
            digest=_digest(token),
            created_at=_now(),
        )
        with self._lock:
            keys = self._read()
            keys.append(key)
            self._write(keys)
            self._closed = True
        return key, token

    def all(self) -> list[Key]:
        with self._lock:
            return self._read()

    def revoke(self, key_id: str) -> Key:
        with self._lock:
            keys = self._read()
            for index, key in enumerate(keys):
                if key.id == key_id or key.name == key_id:
                    if key.revoked_at is None:
                        keys[index] = Key(**{**asdict(key), "revoked_at": _now()})
                        self._write(keys)
                    return keys[index]
        raise NotFoundError("key", key_id)

    # ------------------------------------------------------------------ checking

    def required(self) -> bool:
        """Whether requests need a key: once any key was created. Revoking the last key does not
        open the server again (that would turn a revocation into an open door), nor does emptying or
        deleting the key file under a store that saw a key."""
        return self._closed or bool(self.all())

    def principal(self, token: str | None) -> Principal | None:
        """The principal of ``token``; OPEN when no key was ever created; None for a missing,
        unknown or revoked token otherwise.

        Raises ConfigError (503 over HTTP) when this store saw a key and its file now holds none or
        cannot be read: the server stays closed rather than open."""
        try:
            every = self.all()
        except ConfigError as exc:
            self._closed = True
            self._refuse(str(exc))
            raise
        if every:
            self._closed, self._refusing = True, None
        elif self._closed:
            state = "is missing" if not self.path.exists() else "holds no key"
            message = (
                f"the API key file {self.path} {state}, but this server started with keys: every "
                "request is refused until the file is restored or the server restarts"
            )
            self._refuse(message)
            raise ConfigError(message)
        else:
            return OPEN
        keys = [key for key in every if key.revoked_at is None]
        if not token or not token.startswith(PREFIX):
            return None
        digest = _digest(token)
        for key in keys:
            if hmac.compare_digest(key.digest, digest):
                return key.principal()
        return None

    # ------------------------------------------------------------------ the file

    def _refuse(self, reason: str) -> None:
        if reason != self._refusing:
            self._refusing = reason
            log.error("refusing every request: %s", reason)

    def _read(self) -> list[Key]:
        """The keys in the file (none when it does not exist), read again only when it changed."""
        try:
            info = self.path.stat()
        except FileNotFoundError:
            self._cache = None
            return []
        except OSError as exc:
            raise ConfigError(f"cannot read the API keys in {self.path}: {exc}") from None
        signature = (info.st_mtime_ns, info.st_size, info.st_ino)
        if self._cache is not None and self._cache[0] == signature:
            return list(self._cache[1])
        try:
            raw = json.loads(self.path.read_text("utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read the API keys in {self.path}: {exc}") from None
        keys = _parsed(raw, self.path)
        self._cache = (signature, keys)
        self._closed = self._closed or bool(keys)  # a store that saw a key stays closed
        return list(keys)

    def _write(self, keys: list[Key]) -> None:
        make_private_folder(self.path.parent)
        temporary = self.path.with_name(self.path.name + ".tmp")
        data = json.dumps({"keys": [asdict(key) for key in keys]}, indent=2)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)


_KEY_FIELDS = {"id": str, "name": str, "role": str, "namespaces": list, "digest": str, "created_at": str}
_OPTIONAL_KEY_FIELDS = ("revoked_at", "last_used_at")


def _parsed(raw: Any, path: Path) -> list[Key]:
    """The keys of a key file's JSON, or a ConfigError naming the file and what is wrong with it."""

    def wrong(what: str) -> ConfigError:
        return ConfigError(
            f"{path} is not a lessonbank key file ({what}); fix it, or move it away and create keys "
            "again with `lessonbank keys create`"
        )

    if not isinstance(raw, dict) or not isinstance(raw.get("keys", []), list):
        raise wrong('expected {"keys": [...]}')
    keys = []
    for number, item in enumerate(raw.get("keys", []), 1):
        if not isinstance(item, dict):
            raise wrong(f"key {number} is not an object")
        for name, kind in _KEY_FIELDS.items():
            if not isinstance(item.get(name), kind):
                raise wrong(f"key {number} has no valid {name!r}")
        if item["role"] not in ROLES:
            raise wrong(f"key {number} has an unknown role {item['role']!r}")
        if not all(isinstance(n, str) for n in item["namespaces"]):
            raise wrong(f"key {number} has namespaces that are not strings")
        optional: dict[str, Any] = {name: item.get(name) for name in _OPTIONAL_KEY_FIELDS}
        if any(value is not None and not isinstance(value, str) for value in optional.values()):
            raise wrong(f"key {number} has a revoked_at or last_used_at that is not a date")
        fields: dict[str, Any] = {name: item[name] for name in _KEY_FIELDS}
        keys.append(Key(**fields, **optional))
    return keys


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _now() -> str:
    return datetime.now(UTC).isoformat()


def token_of(authorization: str | None, api_key_header: str | None) -> str | None:
    """The token a request carries: ``Authorization: Bearer <token>`` or ``X-API-Key: <token>``."""
    if api_key_header:
        return api_key_header.strip()
    if authorization and authorization.lower().startswith("bearer "):
        return authorization[7:].strip()
    return None


def default_keys_path(home: Path) -> Path:
    return home / "keys.json"
