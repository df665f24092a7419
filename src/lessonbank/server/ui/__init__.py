"""The dashboard's HTML, built on the server without a template engine or JavaScript.

- :mod:`.html` — escaping, links, forms and the page frame (every value from a bank goes through
  :func:`.html.esc`; lesson text is untrusted);
- :mod:`.views` — the body of each page, from the bank's records;
- :mod:`.charts` — small inline SVG charts;
- ``dashboard.css`` — the one stylesheet, served from ``/static/dashboard.css`` (the pages' CSP allows
  no inline style or script).
"""
