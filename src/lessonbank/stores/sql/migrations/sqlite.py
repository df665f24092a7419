"""Numbered SQLite migrations. Append only: a released migration never changes.

``PRAGMA user_version`` holds the number of migrations applied; opening a store applies the
rest inside one exclusive transaction, so concurrent openers never apply one twice.
"""

from __future__ import annotations

MIGRATIONS: list[str] = [
    # 1: episodes, reflections, lessons (+ FTS5 and tag index kept in step by triggers), jobs.
    # Episodes and jobs sit on the caller's write path, where every page a commit touches is a
    # 4 KiB WAL frame: few indexes; jobs (small rows) clustered on their id (WITHOUT ROWID);
    # episodes (rows up to a few KiB) in a rowid table, which keeps such a row on one page.
    """
    CREATE TABLE episodes (
        id TEXT PRIMARY KEY,
        namespace TEXT NOT NULL,
        created_at REAL NOT NULL,
        status TEXT NOT NULL,
        task TEXT NOT NULL,
        task_type TEXT,
        agent TEXT,
        goal_id TEXT,
        loop_id TEXT,
        data TEXT NOT NULL,
        decision TEXT
    );
    CREATE INDEX episodes_ns_agent ON episodes (namespace, agent, created_at);

    CREATE TABLE reflections (
        id TEXT PRIMARY KEY,
        namespace TEXT NOT NULL,
        episode_id TEXT NOT NULL,
        job_id TEXT,
        reflector TEXT NOT NULL,
        trigger TEXT,
        status TEXT NOT NULL,
        model TEXT,
        tokens_in INTEGER NOT NULL DEFAULT 0,
        tokens_out INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL,
        created_at REAL NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX reflections_episode ON reflections (episode_id);
    CREATE INDEX reflections_ns_created ON reflections (namespace, created_at);

    CREATE TABLE lessons (
        rowid INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        namespace TEXT NOT NULL,
        kind TEXT NOT NULL,
        content TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        tags TEXT NOT NULL DEFAULT '[]',
        task_type TEXT,
        agent TEXT,
        goal_id TEXT,
        trigger TEXT,
        importance REAL NOT NULL,
        confidence REAL NOT NULL,
        source TEXT NOT NULL,
        status TEXT NOT NULL,
        access_count INTEGER NOT NULL DEFAULT 0,
        last_accessed REAL,
        helpful INTEGER NOT NULL DEFAULT 0,
        harmful INTEGER NOT NULL DEFAULT 0,
        pinned INTEGER NOT NULL DEFAULT 0,
        expires_at REAL,
        supersedes TEXT,
        superseded_by TEXT,
        episode_id TEXT,
        reflection_id TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        extra TEXT NOT NULL DEFAULT '{}',
        UNIQUE (namespace, content_hash)
    );
    CREATE INDEX lessons_ns_kind ON lessons (namespace, kind, status);
    CREATE INDEX lessons_ns_created ON lessons (namespace, created_at);

    CREATE TABLE lesson_tags (
        lesson_rowid INTEGER NOT NULL REFERENCES lessons (rowid) ON DELETE CASCADE,
        tag TEXT NOT NULL,
        PRIMARY KEY (tag, lesson_rowid)
    ) WITHOUT ROWID;

    CREATE VIRTUAL TABLE lessons_fts USING fts5 (
        content, tags, content = 'lessons', content_rowid = 'rowid',
        tokenize = 'porter unicode61 remove_diacritics 2'
    );

    -- Bulk loads index their rows in one statement: while a marker row exists (only ever inside
    -- the loading transaction, so no other connection sees it) the insert trigger steps aside.
    CREATE TABLE bulk_load (marker INTEGER PRIMARY KEY);
    CREATE TRIGGER lessons_ai AFTER INSERT ON lessons WHEN NOT EXISTS (SELECT 1 FROM bulk_load) BEGIN
        INSERT INTO lessons_fts (rowid, content, tags) VALUES (new.rowid, new.content, new.tags);
        INSERT INTO lesson_tags (lesson_rowid, tag) SELECT new.rowid, value FROM json_each(new.tags);
    END;
    CREATE TRIGGER lessons_ad AFTER DELETE ON lessons BEGIN
        INSERT INTO lessons_fts (lessons_fts, rowid, content, tags)
            VALUES ('delete', old.rowid, old.content, old.tags);
        DELETE FROM lesson_tags WHERE lesson_rowid = old.rowid;
    END;
    CREATE TRIGGER lessons_au AFTER UPDATE OF content, tags ON lessons BEGIN
        INSERT INTO lessons_fts (lessons_fts, rowid, content, tags)
            VALUES ('delete', old.rowid, old.content, old.tags);
        INSERT INTO lessons_fts (rowid, content, tags) VALUES (new.rowid, new.content, new.tags);
        DELETE FROM lesson_tags WHERE lesson_rowid = old.rowid;
        INSERT INTO lesson_tags (lesson_rowid, tag) SELECT new.rowid, value FROM json_each(new.tags);
    END;

    CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        namespace TEXT NOT NULL,
        kind TEXT NOT NULL,
        episode_id TEXT,
        dedupe_key TEXT NOT NULL,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL,
        run_after REAL NOT NULL,
        lease_owner TEXT,
        lease_expires_at REAL,
        last_error TEXT,
        detail TEXT,
        payload TEXT NOT NULL DEFAULT '{}',
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        finished_at REAL,
        UNIQUE (namespace, dedupe_key)
    ) WITHOUT ROWID;
    CREATE INDEX jobs_runnable ON jobs (status, run_after);
    """,
    # 2: provenance (learned_from) indexed with the content: lessons_fts gains a third column, so
    # it is rebuilt with its triggers and every row re-indexed. Vectors: one row per (lesson,
    # model), replaced on re-embedding (delete + insert, so the count triggers see both); seq
    # (AUTOINCREMENT, never reused) orders the writes for readers that follow the changes. The
    # lessons delete trigger removes a lesson's vectors with it.
    """
    ALTER TABLE lessons ADD COLUMN learned_from TEXT;

    DROP TRIGGER lessons_ai;
    DROP TRIGGER lessons_ad;
    DROP TRIGGER lessons_au;
    DROP TABLE lessons_fts;
    CREATE VIRTUAL TABLE lessons_fts USING fts5 (
        content, tags, learned_from, content = 'lessons', content_rowid = 'rowid',
        tokenize = 'porter unicode61 remove_diacritics 2'
    );
    INSERT INTO lessons_fts (lessons_fts) VALUES ('rebuild');

    CREATE TABLE lesson_vectors (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        lesson_rowid INTEGER NOT NULL,
        namespace TEXT NOT NULL,
        model TEXT NOT NULL,
        text_hash TEXT NOT NULL,
        vector BLOB NOT NULL,
        UNIQUE (lesson_rowid, model)
    );
    CREATE INDEX lesson_vectors_changes ON lesson_vectors (namespace, model, seq);
    -- How many vectors each (namespace, model) holds, kept by triggers: readers ask on every sync,
    -- and counting 100k index entries takes tens of milliseconds.
    CREATE TABLE vector_counts (
        namespace TEXT NOT NULL,
        model TEXT NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (namespace, model)
    ) WITHOUT ROWID;
    CREATE TRIGGER lesson_vectors_ai AFTER INSERT ON lesson_vectors BEGIN
        INSERT OR IGNORE INTO vector_counts (namespace, model, n) VALUES (new.namespace, new.model, 0);
        UPDATE vector_counts SET n = n + 1 WHERE namespace = new.namespace AND model = new.model;
    END;
    CREATE TRIGGER lesson_vectors_ad AFTER DELETE ON lesson_vectors BEGIN
        UPDATE vector_counts SET n = n - 1 WHERE namespace = old.namespace AND model = old.model;
    END;

    CREATE TRIGGER lessons_ai AFTER INSERT ON lessons WHEN NOT EXISTS (SELECT 1 FROM bulk_load) BEGIN
        INSERT INTO lessons_fts (rowid, content, tags, learned_from)
            VALUES (new.rowid, new.content, new.tags, new.learned_from);
        INSERT INTO lesson_tags (lesson_rowid, tag) SELECT new.rowid, value FROM json_each(new.tags);
    END;
    CREATE TRIGGER lessons_ad AFTER DELETE ON lessons BEGIN
        INSERT INTO lessons_fts (lessons_fts, rowid, content, tags, learned_from)
            VALUES ('delete', old.rowid, old.content, old.tags, old.learned_from);
        DELETE FROM lesson_tags WHERE lesson_rowid = old.rowid;
        DELETE FROM lesson_vectors WHERE lesson_rowid = old.rowid;
    END;
    CREATE TRIGGER lessons_au AFTER UPDATE OF content, tags, learned_from ON lessons BEGIN
        INSERT INTO lessons_fts (lessons_fts, rowid, content, tags, learned_from)
            VALUES ('delete', old.rowid, old.content, old.tags, old.learned_from);
        INSERT INTO lessons_fts (rowid, content, tags, learned_from)
            VALUES (new.rowid, new.content, new.tags, new.learned_from);
        DELETE FROM lesson_tags WHERE lesson_rowid = old.rowid;
        INSERT INTO lesson_tags (lesson_rowid, tag) SELECT new.rowid, value FROM json_each(new.tags);
    END;
    """,
    # 3: lexical statistics per namespace. FTS5's bm25() reads table-wide figures, so ranking in
    # one namespace moved with another's data; recall now computes BM25 itself (sqlite_search.py)
    # from each lesson's FTS5 term instances and length, and this table's lesson count and total
    # length per namespace, which the lessons triggers keep in step (lb_doc_len decodes a lesson's
    # FTS5 docsize record; the store registers it on every connection).
    """
    CREATE VIRTUAL TABLE lesson_term_instances USING fts5vocab (lessons_fts, 'instance');
    CREATE TABLE lexical_stats (
        namespace TEXT PRIMARY KEY,
        docs INTEGER NOT NULL,
        tokens INTEGER NOT NULL
    ) WITHOUT ROWID;
    INSERT INTO lexical_stats (namespace, docs, tokens)
        SELECT l.namespace, count(*), coalesce(sum(lb_doc_len(d.sz)), 0)
        FROM lessons l LEFT JOIN lessons_fts_docsize d ON d.id = l.rowid GROUP BY l.namespace;

    DROP TRIGGER lessons_ai;
    DROP TRIGGER lessons_ad;
    DROP TRIGGER lessons_au;
    CREATE TRIGGER lessons_ai AFTER INSERT ON lessons WHEN NOT EXISTS (SELECT 1 FROM bulk_load) BEGIN
        INSERT INTO lessons_fts (rowid, content, tags, learned_from)
            VALUES (new.rowid, new.content, new.tags, new.learned_from);
        INSERT INTO lesson_tags (lesson_rowid, tag) SELECT new.rowid, value FROM json_each(new.tags);
        INSERT INTO lexical_stats (namespace, docs, tokens)
            VALUES (new.namespace, 1, (SELECT lb_doc_len(sz) FROM lessons_fts_docsize WHERE id = new.rowid))
            ON CONFLICT (namespace) DO UPDATE SET docs = docs + 1, tokens = tokens + excluded.tokens;
    END;
    CREATE TRIGGER lessons_ad AFTER DELETE ON lessons BEGIN
        UPDATE lexical_stats SET docs = docs - 1,
            tokens = tokens - coalesce((SELECT lb_doc_len(sz) FROM lessons_fts_docsize WHERE id = old.rowid), 0)
            WHERE namespace = old.namespace;
        INSERT INTO lessons_fts (lessons_fts, rowid, content, tags, learned_from)
            VALUES ('delete', old.rowid, old.content, old.tags, old.learned_from);
        DELETE FROM lesson_tags WHERE lesson_rowid = old.rowid;
        DELETE FROM lesson_vectors WHERE lesson_rowid = old.rowid;
    END;
    CREATE TRIGGER lessons_au AFTER UPDATE OF content, tags, learned_from ON lessons BEGIN
        UPDATE lexical_stats
            SET tokens = tokens - coalesce((SELECT lb_doc_len(sz) FROM lessons_fts_docsize WHERE id = old.rowid), 0)
            WHERE namespace = old.namespace;
        INSERT INTO lessons_fts (lessons_fts, rowid, content, tags, learned_from)
            VALUES ('delete', old.rowid, old.content, old.tags, old.learned_from);
        INSERT INTO lessons_fts (rowid, content, tags, learned_from)
            VALUES (new.rowid, new.content, new.tags, new.learned_from);
        UPDATE lexical_stats
            SET tokens = tokens + coalesce((SELECT lb_doc_len(sz) FROM lessons_fts_docsize WHERE id = new.rowid), 0)
            WHERE namespace = new.namespace;
        DELETE FROM lesson_tags WHERE lesson_rowid = old.rowid;
        INSERT INTO lesson_tags (lesson_rowid, tag) SELECT new.rowid, value FROM json_each(new.tags);
    END;
    """,
    # 4: the audit log, one row per change to a lesson (lessonbank.ports.AuditLog). Not tied to the
    # lessons table: a row outlives the lesson it records. ``seq`` orders the rows as written.
    """
    CREATE TABLE audit_log (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        namespace TEXT NOT NULL,
        at REAL NOT NULL,
        actor TEXT NOT NULL,
        action TEXT NOT NULL,
        lesson_id TEXT,
        proposal_id TEXT,
        data TEXT NOT NULL
    );
    CREATE INDEX audit_log_namespace ON audit_log (namespace, seq);
    CREATE INDEX audit_log_lesson ON audit_log (namespace, lesson_id, seq);
    """,
    # 5: consolidation (lessonbank.ports.ConsolidationStore): proposals, the dream log and each
    # namespace's cycle state, each record as JSON in ``data`` with flat copies of what is filtered on.
    """
    CREATE TABLE proposals (
        id TEXT PRIMARY KEY,
        namespace TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at REAL NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX proposals_namespace ON proposals (namespace, created_at);
    CREATE TABLE dream_log (
        id TEXT PRIMARY KEY,
        namespace TEXT NOT NULL,
        started_at REAL NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX dream_log_namespace ON dream_log (namespace, started_at);
    CREATE TABLE cycle_state (
        namespace TEXT PRIMARY KEY,
        data TEXT NOT NULL
    );
    """,
    # 6: term vectors for the exact lexical index (lessonbank.stores.lexical.term_vector): one row
    # per lesson in lesson_vectors under the space 'lexical:terms-v1', written by triggers in the
    # lesson's own transaction (lb_term_vector tokenises as the other stores do), rewritten only when
    # an indexed field or the lesson's scope (kind, agent, task type, goal) changes, removed with the lesson by lessons_ad. Existing lessons get theirs here.
    # The vector count trigger no longer uses INSERT OR IGNORE: fired from the import's upsert, the
    # upsert's conflict handling overrides the trigger's and the ignored conflict became an error. It
    # stands aside during a bulk import, which counts the vectors it writes in one statement.
    """
    DROP TRIGGER lesson_vectors_ai;
    CREATE TRIGGER lesson_vectors_ai AFTER INSERT ON lesson_vectors WHEN NOT EXISTS (SELECT 1 FROM bulk_load) BEGIN
        INSERT INTO vector_counts (namespace, model, n) SELECT new.namespace, new.model, 0
            WHERE NOT EXISTS (SELECT 1 FROM vector_counts WHERE namespace = new.namespace AND model = new.model);
        UPDATE vector_counts SET n = n + 1 WHERE namespace = new.namespace AND model = new.model;
    END;
    CREATE TRIGGER lessons_terms_ai AFTER INSERT ON lessons WHEN NOT EXISTS (SELECT 1 FROM bulk_load) BEGIN
        INSERT INTO lesson_vectors (lesson_rowid, namespace, model, text_hash, vector)
            VALUES (new.rowid, new.namespace, 'lexical:terms-v1', '',
                    lb_term_vector(new.content, new.tags, new.learned_from, new.kind, new.agent,
                                   new.task_type, new.goal_id));
    END;
    CREATE TRIGGER lessons_terms_au AFTER UPDATE OF content, tags, learned_from, kind, agent, task_type, goal_id
        ON lessons WHEN old.content IS NOT new.content OR old.tags IS NOT new.tags
            OR old.learned_from IS NOT new.learned_from OR old.kind IS NOT new.kind OR old.agent IS NOT new.agent
            OR old.task_type IS NOT new.task_type OR old.goal_id IS NOT new.goal_id BEGIN
        DELETE FROM lesson_vectors WHERE lesson_rowid = old.rowid AND model = 'lexical:terms-v1';
        INSERT INTO lesson_vectors (lesson_rowid, namespace, model, text_hash, vector)
            VALUES (new.rowid, new.namespace, 'lexical:terms-v1', '',
                    lb_term_vector(new.content, new.tags, new.learned_from, new.kind, new.agent,
                                   new.task_type, new.goal_id));
    END;
    INSERT INTO lesson_vectors (lesson_rowid, namespace, model, text_hash, vector)
        SELECT rowid, namespace, 'lexical:terms-v1', '', lb_term_vector(content, tags, learned_from, kind, agent, task_type, goal_id)
        FROM lessons ORDER BY rowid;
    """,
    # 7: a bulk import that reinforced a lesson with new tags rewrote its term vector (the update
    # trigger deletes and inserts it): the delete was counted and the insert, standing aside for the
    # bulk load, was not, so the lexical space's count fell one short each time and the lexical index
    # reloaded on every recall. The delete now stands aside as the insert does (the bulk load counts
    # what it adds itself), and every count is taken again from the rows.
    """
    DROP TRIGGER lesson_vectors_ad;
    CREATE TRIGGER lesson_vectors_ad AFTER DELETE ON lesson_vectors WHEN NOT EXISTS (SELECT 1 FROM bulk_load) BEGIN
        UPDATE vector_counts SET n = n - 1 WHERE namespace = old.namespace AND model = old.model;
    END;
    UPDATE vector_counts SET n = (SELECT count(*) FROM lesson_vectors v
        WHERE v.namespace = vector_counts.namespace AND v.model = vector_counts.model);
    """,
    # 8: a pool's lessons (an agent's rules, a goal's insights, a task type's replays) are listed
    # newest first by kind. Without statistics SQLite walked lessons_ns_created for the ORDER BY and
    # filtered the whole namespace by kind (about 140 ms a list at 100k lessons); this index serves
    # the kind and the order together.
    """
    CREATE INDEX IF NOT EXISTS lessons_ns_kind_created ON lessons (namespace, kind, created_at);
    """,
]
