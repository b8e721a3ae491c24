//! How a principal is a row of `principals` (migration 2).

use knooppunt_store::{StoreError, StoredPrincipal};
use tokio_postgres::Row;

pub(crate) const COLUMNS: &str = "name, roles, token_sha256, subscribe_type_prefixes, \
    publish_source_prefixes, oin, disabled, origin, created_at, updated_at, zgw, \
    previous_token_sha256, previous_token_until";
pub(crate) const PLACEHOLDERS: &str = "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13";

/// The values of [`COLUMNS`], in order.
pub(crate) struct Params {
    roles: serde_json::Value,
    types: serde_json::Value,
    sources: serde_json::Value,
    created_at: i64,
    updated_at: i64,
    /// The ZGW client as JSON (migration 13), NULL when none.
    zgw: Option<String>,
    /// The previous token's hash and until when it is accepted (migration 21).
    previous_sha256: Option<String>,
    previous_until: Option<i64>,
}

impl Params {
    pub(crate) fn new(p: &StoredPrincipal) -> Params {
        Params {
            roles: serde_json::json!(p.roles),
            types: serde_json::json!(p.subscribe_type_prefixes),
            sources: serde_json::json!(p.publish_source_prefixes),
            created_at: p.created_at as i64,
            updated_at: p.updated_at as i64,
            zgw: p
                .zgw
                .as_ref()
                .map(|z| serde_json::to_string(z).expect("serialises")),
            previous_sha256: p.previous_token.as_ref().map(|t| t.sha256.clone()),
            previous_until: p.previous_token.as_ref().map(|t| t.until as i64),
        }
    }

    pub(crate) fn refs<'a>(
        &'a self,
        p: &'a StoredPrincipal,
    ) -> [&'a (dyn tokio_postgres::types::ToSql + Sync); 13] {
        [
            &p.name,
            &self.roles,
            &p.token_sha256,
            &self.types,
            &self.sources,
            &p.oin,
            &p.disabled,
            &p.origin,
            &self.created_at,
            &self.updated_at,
            &self.zgw,
            &self.previous_sha256,
            &self.previous_until,
        ]
    }
}

fn strings(row: &Row, column: &str) -> Result<Vec<String>, StoreError> {
    serde_json::from_value(row.get::<_, serde_json::Value>(column))
        .map_err(|error| StoreError::Corrupt(format!("principal column {column}: {error}")))
}

pub(crate) fn from_row(row: &Row) -> Result<StoredPrincipal, StoreError> {
    Ok(StoredPrincipal {
        name: row.get("name"),
        roles: strings(row, "roles")?,
        token_sha256: row.get("token_sha256"),
        subscribe_type_prefixes: strings(row, "subscribe_type_prefixes")?,
        publish_source_prefixes: strings(row, "publish_source_prefixes")?,
        oin: row.get("oin"),
        disabled: row.get("disabled"),
        origin: row.get("origin"),
        zgw: match row.get::<_, Option<String>>("zgw") {
            None => None,
            Some(text) => {
                Some(serde_json::from_str(&text).map_err(|error| {
                    StoreError::Corrupt(format!("principal column zgw: {error}"))
                })?)
            }
        },
        created_at: row.get::<_, i64>("created_at") as u64,
        updated_at: row.get::<_, i64>("updated_at") as u64,
        previous_token: match (
            row.get::<_, Option<String>>("previous_token_sha256"),
            row.get::<_, Option<i64>>("previous_token_until"),
        ) {
            (Some(sha256), Some(until)) => Some(knooppunt_store::PreviousToken {
                sha256,
                until: until as u64,
            }),
            _ => None,
        },
    })
}

impl crate::table::Table for StoredPrincipal {
    const NAME: &'static str = "principals";
    const KEY: &'static str = "name";
    const COLUMNS: &'static str = COLUMNS;
    const PLACEHOLDERS: &'static str = PLACEHOLDERS;

    fn from_row(row: &Row) -> Result<Self, StoreError> {
        from_row(row)
    }
}
