"""Serving commands: ``serve`` runs the REST API, the MCP endpoint and the dashboard in one process;
``keys create|list|revoke`` manage the API keys it accepts. Both need the ``server`` extra
(``pip install 'lessonbank[server]'``); importing this module imports neither FastAPI nor uvicorn."""

from __future__ import annotations

import contextlib
import errno
import gc
import ipaddress
import os
import signal
import socket
import sys
from typing import Annotated

import typer

from lessonbank.cli.common import emit_json, err, fail, listing, out, require_mcp_sdk
from lessonbank.settings import Settings

LOOPBACK = "127.0.0.1"
BACKLOG = 2048  # uvicorn's
GC_YOUNG_THRESHOLD = 10_000  # allocations between two young collections in a server (Python's default: 700)
# Linux spreads the connections of a port's SO_REUSEPORT group over its sockets; elsewhere the
# option means something else, so the processes share one socket there.
_BALANCED = sys.platform == "linux" and hasattr(socket, "SO_REUSEPORT")

keys_app = typer.Typer(help="API keys of `lessonbank serve`: create, list, revoke.", no_args_is_help=True)


def _settings(ctx: typer.Context) -> Settings:
    options = ctx.obj
    return Settings.from_env(
        db=options.db, namespace=options.namespace, llm=options.llm, embedder=options.embedder
    )


def serve(
    ctx: typer.Context,
    host: Annotated[
        str | None,
        typer.Option(help="Address to bind (default 127.0.0.1; another address needs at least one API key)"),
    ] = None,
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on")] = 8765,
    allow_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allow-host",
            help="Another name an open server (no API key) answers to, besides localhost, 127.0.0.1, ::1 "
            "and the bound address (repeat for several); requests for any other Host are refused",
        ),
    ] = None,
    workers_off: Annotated[
        bool,
        typer.Option(
            "--no-worker", help="Run no reflection worker in this process (a `lessonbank worker` does)"
        ),
    ] = False,
    processes: Annotated[
        int,
        typer.Option(
            "--processes",
            min=1,
            max=64,
            help="Server processes sharing the port (forked after binding; each has its own indexes and "
            "its own group commit, all share the store); one per core is a good start",
        ),
    ] = 1,
) -> None:
    """Serve the bank: the REST API (/api/v1, OpenAPI at /docs), the MCP endpoint (/mcp) and the
    dashboard (/). Without any API key it is open to whoever can reach it, so it binds to 127.0.0.1 only."""
    require_mcp_sdk("serve")
    try:
        import uvicorn

        from lessonbank.server.app import create_app
        from lessonbank.server.auth import KeyStore, default_keys_path
    except ImportError as exc:
        fail(
            f"`lessonbank serve` needs the server extra: pip install 'lessonbank[server]' ({exc.name} is missing)"
        )
    settings = _settings(ctx)
    keys = KeyStore(default_keys_path(settings.home))
    chosen = host or LOOPBACK
    if not keys.required():
        if not _is_loopback(chosen):
            fail(
                f"no API key exists, so the server is open to anyone who reaches it: it binds to {LOOPBACK} only, "
                f"not {chosen}; create a key first (lessonbank keys create NAME --role admin)"
            )
        err.print(
            f"no API key: open to anyone on this machine, bound to {chosen} only (lessonbank keys create …)"
        )
    else:
        active = sum(key.revoked_at is None for key in keys.all())
        err.print(f"API keys required ({active} active)")
    listening = _bind(chosen, port)  # before anything starts: a taken port is one clear error
    sockets = [listening]
    if processes > 1 and _BALANCED:
        # One socket per process in one SO_REUSEPORT group: the kernel spreads new connections
        # evenly over them. (Over one shared socket, the first process to wake accepts every
        # connection waiting: 48 of 50 clients connecting at once went to one process.) The plain
        # bind above has checked that the port is free, for one clear error.
        listening.close()
        sockets = [_bind(chosen, port, share=True) for _ in range(processes)]
    for each in sockets:  # listening before the fork: no connection waits on a process still starting
        each.listen(BACKLOG)
    # Forked before the app exists: no thread, connection or index is copied into a child.
    children, index = _fork(processes - 1)
    listening = sockets[index % len(sockets)]
    for other in sockets:
        if other is not listening:  # a socket nobody accepts on would hold the connections it is given
            other.close()
    app = create_app(
        settings, keys=keys, bound_host=chosen, allow_hosts=allow_host or (), worker=not workers_off
    )
    _settle_garbage_collector()
    if children is not None:
        many = f" in {processes} processes" if processes > 1 else ""
        err.print(
            f"lessonbank serving {settings.db_url} on http://{chosen}:{port}{many} "
            "(docs /docs, MCP /mcp, dashboard /)"
        )
    # No access log (a line per request would cost more than a record); uvicorn takes httptools
    # and uvloop when the server extra installed them.
    config = uvicorn.Config(
        app, host=chosen, port=port, log_level="warning", access_log=False, backlog=BACKLOG
    )
    server = uvicorn.Server(config)
    if processes > 1:
        # uvicorn shuts down on SIGTERM, then raises it again: caught here, so the parent still
        # stops its forked servers and a forked one still exits through its own path.
        signal.signal(signal.SIGTERM, _interrupted)
    try:
        server.run(sockets=[listening])
    except KeyboardInterrupt:
        pass
    finally:
        listening.close()
        if children is None:  # a forked server: its parent reports and reaps
            os._exit(0 if server.started else 1)
        _stop(children)
    if not server.started:
        fail("the server did not start (see above)")


def _settle_garbage_collector() -> None:
    """Keep the garbage collector off a busy server's requests. What exists once the app is built
    (modules, schemas, routes: ~140,000 objects) lives as long as the process, yet each full
    collection walked it all, ~80 ms with every request stopped, several times a minute under 50
    recording clients: frozen, it is never walked again. Young collections run every 10,000
    allocations rather than 700, so the objects of requests in flight are walked, and moved on to
    the old generation, far less often."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, 10, 10)


def _fork(count: int) -> tuple[list[int] | None, int]:
    """Fork ``count`` more server processes: the parent gets their pids and index 0, the n-th
    child None and index n."""
    children: list[int] = []
    for number in range(1, count + 1):
        pid = os.fork()
        if pid == 0:
            return None, number
        children.append(pid)
    return children, 0


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _stop(children: list[int]) -> None:
    """The parent's server stopped (Ctrl-C, SIGTERM): stop the forked ones and wait for them."""
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for pid in children:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)


def _bind(host: str, port: int, *, share: bool = False) -> socket.socket:
    """A socket bound to ``host:port`` (uvicorn listens on it), or a clear error when it cannot be;
    ``share``: in the port's SO_REUSEPORT group (see ``serve``)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        fail(f"cannot serve on {host}: {exc.strerror}", 2)
    listening = socket.socket(family, kind, proto)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
    if share:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        listening.bind(address)
    except OSError as exc:
        listening.close()
        if exc.errno == errno.EADDRINUSE:
            fail(
                f"port {port} on {host} is already in use (another lessonbank serve?); "
                f"stop that one or pick another port with --port"
            )
        fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    listening.set_inheritable(True)
    return listening


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@keys_app.command("create")
def create_key(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="Who the key is for, e.g. ci-agent")],
    role: Annotated[
        str, typer.Option(help="read, write or admin (approving proposals and forgetting)")
    ] = "read",
    namespace: Annotated[
        list[str] | None, typer.Option("--ns", help="A namespace the key may use (repeat; default: all, '*')")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Create a key; its secret is printed once and only its hash is kept."""
    from lessonbank.server.auth import KeyStore, default_keys_path

    store = KeyStore(default_keys_path(_settings(ctx).home))
    key, token = store.create(name, role=role, namespaces=namespace)
    if as_json:
        emit_json(
            {"id": key.id, "name": key.name, "role": key.role, "namespaces": key.namespaces, "token": token}
        )
        return
    out.print(f"key {key.id} ({key.name}, {key.role} on {', '.join(key.namespaces)}):")
    typer.echo(token)
    err.print("keep it now: only its hash is stored")


@keys_app.command("list")
def list_keys(ctx: typer.Context, as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The keys (never their secrets): id, name, role, namespaces, created, revoked."""
    from lessonbank.server.auth import KeyStore, default_keys_path

    keys = KeyStore(default_keys_path(_settings(ctx).home)).all()
    if as_json:
        emit_json([{k: v for k, v in vars(key).items() if k != "digest"} for key in keys])
        return
    table = listing(("id", "name", "role", "namespaces", "created", "revoked"))
    for key in keys:
        table.add_row(
            key.id,
            key.name,
            key.role,
            ",".join(key.namespaces),
            key.created_at[:19],
            (key.revoked_at or "")[:19],
        )
    out.print(table)


@keys_app.command("revoke")
def revoke_key(
    ctx: typer.Context, key_id: Annotated[str, typer.Argument(help="The key's id (or name)")]
) -> None:
    """Revoke a key: requests with it are refused from now on (it stays listed, revoked)."""
    from lessonbank.server.auth import KeyStore, default_keys_path

    key = KeyStore(default_keys_path(_settings(ctx).home)).revoke(key_id)
    out.print(f"revoked {key.id} ({key.name})")
