//! How a catalog entry is a row of `catalog` (migration 6).

use knooppunt_store::{
    ApprovalPolicy, CatalogEntry, Decision, Grant, GrantState, SchemaCheck, StoreError, TypeMatch,
};
use tokio_postgres::Row;

pub(crate) const COLUMNS: &str = "id, owner, source_prefix, event_type, type_match, description, \
    documentation, dataschema, deprecated, approval, created_at, updated_at, schema, schema_check, \
    kenmerken";
pub(crate) const PLACEHOLDERS: &str =
    "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15";

/// The values of [`COLUMNS`] that are not the entry's own fields as they are.
pub(crate) struct Params {
    type_match: &'static str,
    approval: &'static str,
    schema_check: &'static str,
    created_at: i64,
    updated_at: i64,
    /// The kenmerken as a JSON array, NULL when there are none (migration 12).
    kenmerken: Option<String>,
}

impl Params {
    pub(crate) fn new(e: &CatalogEntry) -> Params {
        Params {
            type_match: e.type_match.as_str(),
            approval: e.approval.as_str(),
            schema_check: e.schema_check.as_str(),
            created_at: e.created_at as i64,
            updated_at: e.updated_at as i64,
            kenmerken: (!e.kenmerken.is_empty())
                .then(|| serde_json::to_string(&e.kenmerken).expect("strings serialise")),
        }
    }

    pub(crate) fn refs<'a>(
        &'a self,
        e: &'a CatalogEntry,
    ) -> [&'a (dyn tokio_postgres::types::ToSql + Sync); 15] {
        [
            &e.id,
            &e.owner,
            &e.source_prefix,
            &e.event_type,
            &self.type_match,
            &e.description,
            &e.documentation,
            &e.dataschema,
            &e.deprecated,
            &self.approval,
            &self.created_at,
            &self.updated_at,
            &e.schema,
            &self.schema_check,
            &self.kenmerken,
        ]
    }
}

pub(crate) fn from_row(row: &Row) -> Result<CatalogEntry, StoreError> {
    let id: String = row.get("id");
    let corrupt = |what: &str| StoreError::Corrupt(format!("catalog entry {id}: {what}"));
    Ok(CatalogEntry {
        type_match: TypeMatch::parse(row.get("type_match")).ok_or_else(|| corrupt("type_match"))?,
        approval: ApprovalPolicy::parse(row.get("approval")).ok_or_else(|| corrupt("approval"))?,
        schema_check: SchemaCheck::parse(row.get("schema_check"))
            .ok_or_else(|| corrupt("schema_check"))?,
        schema: row.get("schema"),
        owner: row.get("owner"),
        source_prefix: row.get("source_prefix"),
        event_type: row.get("event_type"),
        description: row.get("description"),
        documentation: row.get("documentation"),
        dataschema: row.get("dataschema"),
        deprecated: row.get("deprecated"),
        kenmerken: match row.get::<_, Option<String>>("kenmerken") {
            None => Vec::new(),
            Some(text) => serde_json::from_str(&text).map_err(|_| corrupt("kenmerken"))?,
        },
        created_at: row.get::<_, i64>("created_at") as u64,
        updated_at: row.get::<_, i64>("updated_at") as u64,
        id,
    })
}

/// The columns of `grants` (migration 7), in the order of [`grant_params`].
pub(crate) const GRANT_COLUMNS: &str =
    "entry, subscription, state, requested_at, decided_by, decided_at, reason";

/// A grant's values, owned, in the order of [`GRANT_COLUMNS`].
pub(crate) struct GrantParams {
    state: &'static str,
    requested_at: i64,
    decided_by: Option<String>,
    decided_at: Option<i64>,
    reason: Option<String>,
}

pub(crate) fn grant_params(g: &Grant) -> GrantParams {
    GrantParams {
        state: g.state.as_str(),
        requested_at: g.requested_at as i64,
        decided_by: g.decision.as_ref().map(|d| d.by.clone()),
        decided_at: g.decision.as_ref().map(|d| d.at as i64),
        reason: g.decision.as_ref().and_then(|d| d.reason.clone()),
    }
}

impl GrantParams {
    pub(crate) fn refs<'a>(
        &'a self,
        g: &'a Grant,
    ) -> [&'a (dyn tokio_postgres::types::ToSql + Sync); 7] {
        [
            &g.entry,
            &g.subscription,
            &self.state,
            &self.requested_at,
            &self.decided_by,
            &self.decided_at,
            &self.reason,
        ]
    }
}

pub(crate) fn grant_from_row(row: &Row) -> Result<Grant, StoreError> {
    let state = GrantState::parse(row.get("state"))
        .ok_or_else(|| StoreError::Corrupt("a grant's state".into()))?;
    let decision = match (
        row.get::<_, Option<String>>("decided_by"),
        row.get::<_, Option<i64>>("decided_at"),
    ) {
        (Some(by), Some(at)) => Some(Decision {
            by,
            at: at as u64,
            reason: row.get("reason"),
        }),
        _ => None,
    };
    Ok(Grant {
        entry: row.get("entry"),
        subscription: row.get("subscription"),
        state,
        requested_at: row.get::<_, i64>("requested_at") as u64,
        decision,
    })
}

impl crate::table::Table for Grant {
    const NAME: &'static str = "grants";
    const KEY: &'static str = "entry, subscription";
    const COLUMNS: &'static str = GRANT_COLUMNS;
    const PLACEHOLDERS: &'static str = "$1, $2, $3, $4, $5, $6, $7";
    const ORDER: &'static str = "entry COLLATE \"C\", subscription COLLATE \"C\"";

    fn from_row(row: &Row) -> Result<Self, StoreError> {
        grant_from_row(row)
    }
}

impl crate::table::Table for CatalogEntry {
    const NAME: &'static str = "catalog";
    const KEY: &'static str = "id";
    const COLUMNS: &'static str = COLUMNS;
    const PLACEHOLDERS: &'static str = PLACEHOLDERS;

    fn from_row(row: &Row) -> Result<Self, StoreError> {
        from_row(row)
    }
}
