"""Numbered PostgreSQL migrations. Append only: a released migration never changes.

``schema_migrations`` holds one row per applied migration; opening a store applies the rest
under an advisory lock, so concurrent openers never apply one twice. Times are Unix seconds
(double precision), as in the SQLite store; every record keeps its full JSON in a JSONB
``data`` column, so new model fields round-trip without a migration.
"""

from __future__ import annotations

TERM_VECTORS = 5  # the migration after which PostgresDialect backfills term vectors

MIGRATIONS: list[str] = [
    # 1: episodes, reflections, lessons (tsvector + GIN for lexical recall, GIN over tags), jobs.
    """
    CREATE TABLE episodes (
        id text PRIMARY KEY,
        namespace text NOT NULL,
        created_at double precision NOT NULL,
        agent text,
        data jsonb NOT NULL,
        decision jsonb
    );
    CREATE INDEX episodes_ns_created ON episodes (namespace, created_at);

    CREATE TABLE reflections (
        id text PRIMARY KEY,
        namespace text NOT NULL,
        episode_id text NOT NULL,
        reflector text NOT NULL,
        status text NOT NULL,
        tokens_in bigint NOT NULL DEFAULT 0,
        tokens_out bigint NOT NULL DEFAULT 0,
        cost_usd double precision,
        llm_calls bigint NOT NULL DEFAULT 0,
        created_at double precision NOT NULL,
        data jsonb NOT NULL
    );
    CREATE INDEX reflections_episode ON reflections (episode_id);
    CREATE INDEX reflections_ns_created ON reflections (namespace, created_at);

    CREATE TABLE lessons (
        seq bigserial UNIQUE,
        id text PRIMARY KEY,
        namespace text NOT NULL,
        kind text NOT NULL,
        content_hash text NOT NULL,
        status text NOT NULL,
        task_type text,
        agent text,
        goal_id text,
        tags text[] NOT NULL DEFAULT '{}',
        importance double precision NOT NULL,
        confidence double precision NOT NULL,
        access_count bigint NOT NULL DEFAULT 0,
        helpful bigint NOT NULL DEFAULT 0,
        harmful bigint NOT NULL DEFAULT 0,
        pinned boolean NOT NULL DEFAULT false,
        expires_at double precision,
        superseded_by text,
        last_used double precision NOT NULL,
        created_at double precision NOT NULL,
        doc_len integer NOT NULL,
        terms tsvector NOT NULL,
        weights jsonb NOT NULL,
        data jsonb NOT NULL,
        UNIQUE (namespace, content_hash)
    );
    CREATE INDEX lessons_terms ON lessons USING gin (terms);
    CREATE INDEX lessons_tags ON lessons USING gin (tags);
    CREATE INDEX lessons_ns_created ON lessons (namespace, created_at);
    CREATE INDEX lessons_ns_seq ON lessons (namespace, seq);

    CREATE TABLE jobs (
        id text PRIMARY KEY,
        namespace text NOT NULL,
        kind text NOT NULL,
        episode_id text,
        dedupe_key text NOT NULL,
        status text NOT NULL,
        attempts integer NOT NULL DEFAULT 0,
        max_attempts integer NOT NULL,
        run_after double precision NOT NULL,
        lease_owner text,
        lease_expires_at double precision,
        last_error text,
        detail text,
        payload jsonb NOT NULL DEFAULT '{}',
        created_at double precision NOT NULL,
        updated_at double precision NOT NULL,
        finished_at double precision,
        UNIQUE (namespace, dedupe_key)
    );
    CREATE INDEX jobs_runnable ON jobs (status, run_after);
    """,
    # 2: vectors, one row per (lesson, model), replaced on re-embedding and removed with the lesson
    # (ON DELETE CASCADE). seq comes from a sequence at every write; put_vectors takes a per-
    # (namespace, model) advisory lock so sequence numbers are committed in order. Lessons gain
    # learned_from (provenance), indexed with their tokens: its lexemes join ``terms`` and its
    # BM25 factors ``weights``. No lesson stored before this migration has one, so none needs
    # re-indexing.
    """
    ALTER TABLE lessons ADD COLUMN learned_from text;
    CREATE SEQUENCE lesson_vector_seq;
    CREATE TABLE lesson_vectors (
        lesson_id text NOT NULL REFERENCES lessons (id) ON DELETE CASCADE,
        model text NOT NULL,
        namespace text NOT NULL,
        seq bigint NOT NULL DEFAULT nextval('lesson_vector_seq'),
        text_hash text NOT NULL,
        vector bytea NOT NULL,
        PRIMARY KEY (lesson_id, model)
    );
    CREATE INDEX lesson_vectors_changes ON lesson_vectors (namespace, model, seq);
    -- How many vectors each (namespace, model) holds, kept by a trigger: readers ask on every
    -- sync, and counting 100k index entries costs milliseconds each time.
    CREATE TABLE vector_counts (
        namespace text NOT NULL,
        model text NOT NULL,
        n bigint NOT NULL,
        PRIMARY KEY (namespace, model)
    );
    CREATE FUNCTION lesson_vectors_count() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO vector_counts AS c (namespace, model, n) VALUES (NEW.namespace, NEW.model, 1)
                ON CONFLICT (namespace, model) DO UPDATE SET n = c.n + 1;
        ELSE
            UPDATE vector_counts SET n = n - 1 WHERE namespace = OLD.namespace AND model = OLD.model;
        END IF;
        RETURN NULL;
    END $$;
    CREATE TRIGGER lesson_vectors_count AFTER INSERT OR DELETE ON lesson_vectors
        FOR EACH ROW EXECUTE FUNCTION lesson_vectors_count();
    """,
    # 3: the audit log, one row per change to a lesson (lessonbank.ports.AuditLog). Not tied to the
    # lessons table: a row outlives the lesson it records. ``seq`` orders the rows as written.
    """
    CREATE TABLE audit_log (
        seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        id text NOT NULL UNIQUE,
        namespace text NOT NULL,
        at double precision NOT NULL,
        actor text NOT NULL,
        action text NOT NULL,
        lesson_id text,
        proposal_id text,
        data jsonb NOT NULL
    );
    CREATE INDEX audit_log_namespace ON audit_log (namespace, seq);
    CREATE INDEX audit_log_lesson ON audit_log (namespace, lesson_id, seq);
    """,
    # 4: consolidation (lessonbank.ports.ConsolidationStore): proposals, the dream log and each
    # namespace's cycle state, each record as JSONB in ``data`` with flat copies of what is filtered on.
    """
    CREATE TABLE proposals (
        id text PRIMARY KEY,
        namespace text NOT NULL,
        status text NOT NULL,
        created_at double precision NOT NULL,
        data jsonb NOT NULL
    );
    CREATE INDEX proposals_namespace ON proposals (namespace, created_at);
    CREATE TABLE dream_log (
        id text PRIMARY KEY,
        namespace text NOT NULL,
        started_at double precision NOT NULL,
        data jsonb NOT NULL
    );
    CREATE INDEX dream_log_namespace ON dream_log (namespace, started_at);
    CREATE TABLE cycle_state (
        namespace text PRIMARY KEY,
        data jsonb NOT NULL
    );
    """,
    # 5: term vectors for the exact lexical index (lessonbank.stores.lexical.term_vector), one row per
    # lesson in lesson_vectors under the space 'lexical:terms-v1', written in the lesson's own
    # transaction. The tokeniser is Python's, so existing lessons get theirs from
    # PostgresDialect.backfill_term_vectors, in this migration's transaction.
    """
    SELECT 1;
    """,
    # 6: a pool's lessons (an agent's rules, a goal's insights, a task type's replays) are listed newest
    # first by kind: this index serves the kind and the order together (as on SQLite).
    """
    CREATE INDEX IF NOT EXISTS lessons_ns_kind_created ON lessons (namespace, kind, created_at);
    """,
    # 7: the vector counts are kept per statement, not per row: the row trigger upserted the same
    # counter row once per vector written (a bulk import's thousand vectors were a thousand upserts of
    # one row, most of the import's time in the server); one upsert per (namespace, model) a
    # statement touched now, from its transition table. The counts themselves do not change.
    """
    DROP TRIGGER lesson_vectors_count ON lesson_vectors;
    DROP FUNCTION lesson_vectors_count();
    CREATE FUNCTION lesson_vectors_added() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        INSERT INTO vector_counts AS c (namespace, model, n)
            SELECT namespace, model, count(*) FROM added GROUP BY namespace, model ORDER BY namespace, model
            ON CONFLICT (namespace, model) DO UPDATE SET n = c.n + excluded.n;
        RETURN NULL;
    END $$;
    CREATE FUNCTION lesson_vectors_removed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        UPDATE vector_counts c SET n = c.n - r.n
            FROM (SELECT namespace, model, count(*) AS n FROM removed GROUP BY namespace, model) r
            WHERE c.namespace = r.namespace AND c.model = r.model;
        RETURN NULL;
    END $$;
    CREATE TRIGGER lesson_vectors_added AFTER INSERT ON lesson_vectors
        REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION lesson_vectors_added();
    CREATE TRIGGER lesson_vectors_removed AFTER DELETE ON lesson_vectors
        REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION lesson_vectors_removed();
    """,
    # 8: the large columns are compressed with lz4 where the server has it (PostgreSQL 14+ built with
    # it, as the distributions' packages are): a 1 KB lesson's row is ~3 KB (its JSON, its BM25 factors,
    # its tsvector), over the 2 KB at which every row written is compressed, and pglz was a fifth of
    # the server's time in a bulk import; lz4 compresses and reads back several times faster. Rows
    # written before keep pglz (read as they are). Elsewhere nothing changes. The JSON documents are
    # never filtered on, so ANALYZE (after imports, and autovacuum's) no longer reads and sorts them.
    """
    DO $$
    BEGIN
        -- EXECUTE: a server older than 14 does not know the clause, and must not fail parsing it.
        EXECUTE 'ALTER TABLE lessons ALTER COLUMN data SET COMPRESSION lz4, '
            'ALTER COLUMN weights SET COMPRESSION lz4, ALTER COLUMN terms SET COMPRESSION lz4';
        EXECUTE 'ALTER TABLE episodes ALTER COLUMN data SET COMPRESSION lz4, '
            'ALTER COLUMN decision SET COMPRESSION lz4';
        EXECUTE 'ALTER TABLE reflections ALTER COLUMN data SET COMPRESSION lz4';
        EXECUTE 'ALTER TABLE audit_log ALTER COLUMN data SET COMPRESSION lz4';
    EXCEPTION WHEN feature_not_supported OR syntax_error THEN
        RAISE NOTICE 'lz4 compression not available: columns keep the server''s default';
    END $$;
    ALTER TABLE lessons ALTER COLUMN data SET STATISTICS 0, ALTER COLUMN weights SET STATISTICS 0;
    """,
]
