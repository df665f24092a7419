"""The consolidation cycle ("dream mode", seed 002): the parts that keep a namespace small, true and
reviewed by a person. It will hold:

- :mod:`.phases` — survey, meta-reflection, consolidate, rewrite core, summarize;
- :mod:`.decay` — how relevant each lesson still is (score and tier), a pure function of the lesson
  and the clock;
- :mod:`.proposals` — the pending proposal a person approves, edits or rejects;
- :mod:`.audit` — the record of every applied proposal;
- :mod:`.mirror` — the optional git-backed Markdown mirror.

Only :mod:`.decay` exists so far. Nothing is imported here, so each part can be imported on its own.
"""
