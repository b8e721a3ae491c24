//! The schema, as numbered migrations applied in order at start-up. Each hub applies what
//! is missing under an advisory lock, so hubs starting together do not race; a database
//! with a newer schema than this version knows is refused (a rolling upgrade starts the
//! new version first only where its migrations keep the old one working).

use deadpool_postgres::Object;
use knooppunt_store::StoreError;

use crate::backend;

/// The advisory lock key that serialises migrations (`knooppunt` in ASCII, as an i64).
const MIGRATION_LOCK: i64 = 0x6b6e_6f6f_7070_756e;

/// Every migration, oldest first; the schema version is the number applied.
const MIGRATIONS: &[&str] = &[
    // 1: subscriptions, events, deliveries, dead letters. Few indexes: each one costs on
    // every append. Nothing indexes deliveries or dead letters by event: the sweep finds the
    // oldest event still needed through the primary keys, one subscription at a time.
    r#"
    CREATE TABLE subscriptions (
        id text PRIMARY KEY,
        owner text NOT NULL,
        sink text NOT NULL,
        protocol text NOT NULL,
        source text,
        types jsonb,
        filters jsonb NOT NULL,
        headers jsonb NOT NULL,
        method text,
        credential jsonb,
        config jsonb NOT NULL,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL,
        state text NOT NULL,
        validated_by text,
        validation_token text,
        allowed_rate integer,
        validation_problem text,
        disabled_reason text
    );
    -- Bumped in the transaction of every subscription change, so that other hubs see that
    -- they must reload (a sequence would not do: its values are not transactional).
    CREATE TABLE versions (subscriptions bigint NOT NULL);
    INSERT INTO versions VALUES (0);

    -- Acceptance order: an append takes its numbers and its transaction id together under
    -- a short lock, so numbers follow transaction ids (see deliveries.xid).
    CREATE SEQUENCE event_numbers;
    CREATE TABLE events (
        seq bigint PRIMARY KEY,
        source text NOT NULL,
        id text NOT NULL,
        accepted_at bigint NOT NULL,
        json text NOT NULL
    );
    -- Duplicate detection: the last accepted event of each identity. Its key makes two
    -- hubs accepting the same identity at once wait for each other.
    CREATE TABLE identities (
        source text NOT NULL,
        id text NOT NULL,
        seq bigint NOT NULL,
        accepted_at bigint NOT NULL,
        PRIMARY KEY (source, id)
    );
    CREATE INDEX identities_accepted ON identities USING brin (accepted_at);

    CREATE SEQUENCE lease_tokens;
    CREATE TABLE deliveries (
        subscription text NOT NULL,
        seq bigint NOT NULL,
        attempts integer NOT NULL DEFAULT 0,
        next_attempt_at bigint NOT NULL,
        first_attempt_at bigint,
        last_attempt_at bigint,
        last_status integer,
        last_error text,
        leased_until bigint NOT NULL DEFAULT 0,
        lease bigint NOT NULL DEFAULT 0,
        -- The transaction that queued it: an ordered subscription's oldest delivery is
        -- leased only once every older transaction has ended, so no smaller number can
        -- still appear before it.
        xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
        PRIMARY KEY (subscription, seq)
    );
    -- No index on when a delivery is available: leasing walks a subscription's queue in
    -- number order through the primary key, and leases and results change no indexed
    -- column, so their updates stay on the same page (HOT) without index entries.

    CREATE TABLE dead_letters (
        subscription text NOT NULL,
        seq bigint NOT NULL,
        attempts integer NOT NULL,
        first_attempt_at bigint,
        last_attempt_at bigint,
        last_status integer,
        last_error text,
        reason text NOT NULL,
        dead_at bigint NOT NULL,
        PRIMARY KEY (subscription, seq)
    );
    "#,
    // 2: principals, shared by every hub; a change bumps `versions.subscriptions` (the
    // version of everything hubs keep in memory) like a subscription change.
    r#"
    CREATE TABLE principals (
        name text PRIMARY KEY,
        roles jsonb NOT NULL,
        token_sha256 text,
        subscribe_type_prefixes jsonb NOT NULL,
        publish_source_prefixes jsonb NOT NULL,
        oin text,
        disabled boolean NOT NULL,
        origin text NOT NULL,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL
    );
    "#,
    // 3: the client certificate a subscription's deliveries present (mutual TLS).
    "ALTER TABLE subscriptions ADD COLUMN client_certificate jsonb;",
    // 4: the types of extensions an event's JSON cannot carry (URI, Timestamp and Binary
    // extensions published in CBOR), so that a CBOR delivery gives them back.
    "ALTER TABLE events ADD COLUMN extension_types text;",
    // 5: the secrets deliveries are signed with (Standard Webhooks), current and previous.
    "ALTER TABLE subscriptions ADD COLUMN signing jsonb;",
    // 6: the event type catalog.
    r#"
    CREATE TABLE catalog (
        id text PRIMARY KEY,
        owner text NOT NULL,
        source_prefix text NOT NULL,
        event_type text NOT NULL,
        type_match text NOT NULL,
        description text NOT NULL,
        documentation text,
        dataschema text,
        schema text,
        schema_check text NOT NULL,
        deprecated boolean NOT NULL,
        approval text NOT NULL,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL
    );
    "#,
    // 7: grants of approval-required catalog entries to subscriptions.
    r#"
    CREATE TABLE grants (
        entry text NOT NULL,
        subscription text NOT NULL,
        state text NOT NULL,
        requested_at bigint NOT NULL,
        decided_by text,
        decided_at bigint,
        reason text,
        PRIMARY KEY (entry, subscription)
    );
    "#,
    // 8: the audit trail (the entry as JSON text, exactly as it was hashed), and its head:
    // the last entry's number and hash, one row, locked while entries are chained on.
    r#"
    CREATE TABLE audit (
        seq bigint PRIMARY KEY,
        start_time bigint NOT NULL,
        entry text NOT NULL
    );
    CREATE TABLE audit_head (
        seq bigint NOT NULL,
        hash text NOT NULL
    );
    INSERT INTO audit_head VALUES (0, '0000000000000000000000000000000000000000000000000000000000000000');
    "#,
    // 9: delivery receipts: which subscriptions took which event, and when.
    r#"
    CREATE TABLE receipts (
        seq bigint NOT NULL,
        subscription text NOT NULL,
        delivered_at bigint NOT NULL,
        PRIMARY KEY (seq, subscription)
    );
    CREATE INDEX receipts_by_subscription ON receipts (subscription, delivered_at, seq);
    CREATE INDEX receipts_by_time ON receipts (delivered_at);
    "#,
    // 10: reading events in acceptance order (streams, replays): the transaction of each
    // append (NULL for events from before: their appends have long ended), how far the
    // retention sweep removed events, and finding where a time window starts.
    r#"
    ALTER TABLE events ADD COLUMN xid xid8;
    ALTER TABLE events ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
    CREATE TABLE swept (through bigint NOT NULL);
    INSERT INTO swept VALUES (0);
    CREATE INDEX events_accepted ON events USING brin (accepted_at);
    "#,
    // 11: replays: the jobs (as JSON, the model's own form), and the replay a delivery was
    // queued by.
    r#"
    ALTER TABLE deliveries ADD COLUMN replay text;
    CREATE TABLE replays (
        id text PRIMARY KEY,
        created_at bigint NOT NULL,
        updated_at bigint NOT NULL,
        body text NOT NULL
    );
    "#,
    // 12: the kenmerken of a catalog entry (a ZGW kanaal's filters), as a JSON array.
    "ALTER TABLE catalog ADD COLUMN kenmerken text;",
    // 13: a principal's ZGW client (client id, sealed secret, scopes) as JSON.
    "ALTER TABLE principals ADD COLUMN zgw text;",
    // 14: console sessions (as JSON, the model's own form), with their ends to sweep by.
    r#"
    CREATE TABLE sessions (
        id text PRIMARY KEY,
        expires_at bigint NOT NULL,
        last_seen_at bigint NOT NULL,
        body text NOT NULL
    );
    "#,
    // 15: each delivery's event size, so that measuring a backlog (every few seconds, the
    // backlog guard) sums one table instead of joining every pending delivery's event.
    r#"
    ALTER TABLE deliveries ADD COLUMN bytes integer NOT NULL DEFAULT 0;
    UPDATE deliveries d
       SET bytes = octet_length(e.json) + COALESCE(octet_length(e.extension_types), 0)
      FROM events e WHERE e.seq = d.seq;
    "#,
    // 16: the dead-letter retention sweep finds the oldest dead letters by when they died.
    "CREATE INDEX dead_letters_dead_at ON dead_letters (dead_at);",
    // 17: every text key compared by its bytes (collation "C"), whatever the database's
    // default: listings come in the same order as on the embedded store; comparing keys
    // costs a `memcmp`, not a linguistic collation (ICU or the C library) on every step
    // through an index; and an index's order cannot change under it when the operating
    // system's collation data does (PostgreSQL's documented hazard of upgrading the C
    // library). The columns keep their data; their indexes are rebuilt once.
    r#"
    ALTER TABLE subscriptions ALTER COLUMN id TYPE text COLLATE "C";
    ALTER TABLE principals ALTER COLUMN name TYPE text COLLATE "C";
    ALTER TABLE catalog ALTER COLUMN id TYPE text COLLATE "C";
    ALTER TABLE grants ALTER COLUMN entry TYPE text COLLATE "C",
                       ALTER COLUMN subscription TYPE text COLLATE "C";
    ALTER TABLE identities ALTER COLUMN source TYPE text COLLATE "C",
                           ALTER COLUMN id TYPE text COLLATE "C";
    ALTER TABLE events ALTER COLUMN source TYPE text COLLATE "C",
                       ALTER COLUMN id TYPE text COLLATE "C";
    ALTER TABLE deliveries ALTER COLUMN subscription TYPE text COLLATE "C",
                           ALTER COLUMN replay TYPE text COLLATE "C";
    ALTER TABLE dead_letters ALTER COLUMN subscription TYPE text COLLATE "C";
    ALTER TABLE receipts ALTER COLUMN subscription TYPE text COLLATE "C";
    ALTER TABLE replays ALTER COLUMN id TYPE text COLLATE "C";
    ALTER TABLE sessions ALTER COLUMN id TYPE text COLLATE "C";
    "#,
    // 18: the hubs alive, each said alive every second or so by itself (by the database's
    // clock), so that they share each subscription's slots and granted rate; and the sinks
    // that asked one of them for a pause (`Retry-After`), which every hub keeps to.
    r#"
    CREATE TABLE hubs (
        id text COLLATE "C" PRIMARY KEY,
        seen timestamptz NOT NULL
    );
    CREATE TABLE sink_pauses (
        sink text COLLATE "C" PRIMARY KEY,
        until bigint NOT NULL
    );
    "#,
    // 19: how far each hub applied the changes of the others (the `versions` counter), so
    // that a hub taking a right away waits until every hub alive has cut it.
    r#"
    ALTER TABLE hubs ADD COLUMN applied bigint NOT NULL DEFAULT 0;
    "#,
    // 20: deleted subscriptions' owners, so that their receipts keep naming them.
    r#"
    CREATE TABLE former_subscriptions (
        id text COLLATE "C" PRIMARY KEY,
        owner text COLLATE "C" NOT NULL
    );
    "#,
    // 21: a principal's previous token, accepted until a time after a rotation.
    r#"
    ALTER TABLE principals ADD COLUMN IF NOT EXISTS previous_token_sha256 text,
        ADD COLUMN IF NOT EXISTS previous_token_until bigint;
    "#,
    // 22: a subscription's label, the name people know it by.
    "ALTER TABLE subscriptions ADD COLUMN IF NOT EXISTS label text;",
    // 23: the settings of a subscription to a broker (MQTT, NATS), as JSON; NULL for HTTP, whose
    // settings are `headers` and `method`.
    "ALTER TABLE subscriptions ADD COLUMN IF NOT EXISTS broker_settings jsonb;",
];

/// Applies the migrations this database lacks; returns its schema version.
pub(crate) async fn migrate(client: &mut Object) -> Result<usize, StoreError> {
    client
        .execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(backend)?;
    let result = apply(client).await;
    let _ = client
        .execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])
        .await;
    result
}

async fn apply(client: &mut Object) -> Result<usize, StoreError> {
    client
        .batch_execute(
            "CREATE TABLE IF NOT EXISTS knooppunt_schema (
                version integer PRIMARY KEY,
                applied_at timestamptz NOT NULL DEFAULT now()
            )",
        )
        .await
        .map_err(backend)?;
    let row = client
        .query_one(
            "SELECT COALESCE(max(version), 0) FROM knooppunt_schema",
            &[],
        )
        .await
        .map_err(backend)?;
    let current = row.get::<_, i32>(0) as usize;
    if current > MIGRATIONS.len() {
        return Err(StoreError::Backend(format!(
            "the database has schema version {current}, newer than this hub knows ({}); run \
             the newer hub version",
            MIGRATIONS.len()
        )));
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        let version = (index + 1) as i32;
        let transaction = client.transaction().await.map_err(backend)?;
        transaction.batch_execute(sql).await.map_err(backend)?;
        transaction
            .execute(
                "INSERT INTO knooppunt_schema (version) VALUES ($1)",
                &[&version],
            )
            .await
            .map_err(backend)?;
        transaction.commit().await.map_err(backend)?;
        tracing::info!(version, "Database schema migrated.");
    }
    Ok(MIGRATIONS.len())
}
