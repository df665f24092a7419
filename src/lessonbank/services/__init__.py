"""The services a bank is made of, one per concern, each given the bank's :class:`~.scope.Scope`
(store, namespace, settings, clock) and what else it needs (retriever, LLM, token counter):

- :mod:`.recording` — :class:`~.recording.Recorder`: episodes prepared (validated, redacted,
  attributed), the policy's decision, stored with their jobs; manual reflections, finished goals,
  the queue as operators see it.
- :mod:`.reflecting` — :class:`~.reflecting.ReflectionHandler`: the job handler a worker runs.
- :mod:`.writing` — :class:`~.writing.LessonIntake`: lessons added by hand, imported, or learned
  in the Reflexion loop; vector dedup and embedding of what was written.
- :mod:`.context` — :class:`~.context.ContextBuilder`: filters, recall, context blocks under a
  budget; :mod:`.sections` renders and packs each section.
- :mod:`.pools` — :class:`~.pools.Pools`: goal insights, rules, replay examples.
- :mod:`.catalog` — :class:`~.catalog.Catalog`: list (by decay tier too), show, forget, export, stats.
- :mod:`.attribution` — which lessons a context injected, for the next episode to credit.
- :mod:`.lifecycle` — :class:`~.lifecycle.Lifecycle`: archive, restore, approve, each with its audit row.
- :mod:`.retention` — :class:`~.retention.Retention`: old episodes, reflections and done jobs purged.
- :mod:`.consolidation` — the consolidation cycle's parts (today: decay scores and tiers).

:mod:`.wiring` builds them all from the bank's arguments (:func:`~.wiring.build_services`).
Nothing is imported here, so a service module can be imported on its own.
"""
