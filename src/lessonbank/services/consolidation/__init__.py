"""The consolidation cycle ("dream mode", seed 002): the parts that keep a namespace small, true and
reviewed by a person. The cycle proposes; a person decides.

- :mod:`.decay` — how relevant each lesson still is (score and tier), a pure function of the lesson
  and the clock;
- :mod:`.prepass` — the deterministic pre-pass, without any LLM: clusters of near duplicates (the
  same lesson retyped, an embedder's marks, close vectors; siblings kept apart), contradictions,
  decayed lessons, rules due for promotion; bounded in time and memory at 100k lessons;
- :mod:`.operations` — the operations a cycle proposes without an LLM (MERGE, ARCHIVE, FLAG, less
  the rejected ones) and the validation every operation passes before it enters a proposal;
- :mod:`.render` — a proposal as seed 002's pending reflection, the Markdown a person approves by
  operation id;
- :mod:`.documents` — the core memory, evolution log and reflection log, with their caps and pruning;
- :mod:`.inputs`, :mod:`.prompts`, :mod:`.phases` — what a cycle reads, seed 002's five prompts, and
  the five LLM phases within the cycle's token budget;
- :mod:`.edits` — approve with changes (pinned facts stay in the core memory whatever an edit says);
- :mod:`.repeats` — what a cycle does not propose again: what a person rejected, what is already
  applied, what a pending proposal already holds;
- :mod:`.applying` — what one approved operation writes;
- :mod:`.cycle` — a cycle over one namespace, and a person's decision on its proposal;
- :mod:`.jobs`, :mod:`.triggers` — the cycle as a durable job (one per namespace at a time), its
  triggers (schedule, threshold, inactivity, session end), daily caps and circuit breaker;
- :mod:`.mirror` — the optional git mirror of a namespace.

:mod:`.decay`, :mod:`.prepass`, :mod:`.operations`, :mod:`.documents`, :mod:`.repeats`,
:mod:`.applying` and :mod:`.render` are pure (no store, no LLM).
Nothing is imported here, so each part can be imported on its own.
"""
