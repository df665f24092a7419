"""``lessonbank serve``: one process serving the REST API (``/api/v1``, OpenAPI at ``/docs``), the
MCP endpoint (``/mcp``, Streamable HTTP; ``lessonbank mcp`` serves it over stdio) and the dashboard
(``/``), over the configured bank. Needs the ``server`` extra (FastAPI, uvicorn, the MCP SDK).

- :mod:`.app` — ``create_app``: the parts mounted over shared state, JSON errors, body limits;
- :mod:`.auth` — API keys (hashed), roles and namespaces; :mod:`.deps` — the checks every route uses;
- :mod:`.banks` — one bank per namespace; :mod:`.errors` — stable error codes;
- :mod:`.rest`, :mod:`.mcp_http`, :mod:`.dashboard` — the three faces.
"""
