//! Subscriptions as rows of table `subscriptions`: scalar fields as columns, the nested
//! ones (types, filters, headers, credential, config, client certificate) as jsonb. This is the backend's own
//! record format.

use std::collections::BTreeMap;

use knooppunt_store::{
    ClientCertificate, HttpSettings, Protocol, ProtocolSettings, SigningSecrets, Sink,
    SinkCredential, Status, StatusColumns, StoreError, Subscription, SubscriptionConfig,
    SubscriptionState, Validation,
};
use serde_json::{Value, json};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

/// The columns, in the order of [`params`].
pub(crate) const COLUMNS: &str = "id, owner, sink, protocol, source, types, filters, headers, \
    method, credential, config, created_at, updated_at, state, validated_by, validation_token, \
    allowed_rate, validation_problem, disabled_reason, client_certificate, signing, label, broker_settings";

/// `$1, ..., $23`.
pub(crate) const PLACEHOLDERS: &str = "$1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, \
    $14, $15, $16, $17, $18, $19, $20, $21, $22, $23";

/// The values of a row, owned, in the order of [`COLUMNS`].
pub(crate) struct Params {
    id: String,
    owner: String,
    sink: String,
    protocol: String,
    source: Option<String>,
    types: Option<Value>,
    filters: Value,
    headers: Value,
    method: Option<String>,
    credential: Option<Value>,
    config: Value,
    created_at: i64,
    updated_at: i64,
    state: &'static str,
    validated_by: Option<&'static str>,
    validation_token: Option<String>,
    allowed_rate: Option<i32>,
    validation_problem: Option<String>,
    disabled_reason: Option<String>,
    client_certificate: Option<Value>,
    signing: Option<Value>,
    label: Option<String>,
    broker_settings: Option<Value>,
}

impl Params {
    pub(crate) fn refs(&self) -> [&(dyn ToSql + Sync); 23] {
        [
            &self.id,
            &self.owner,
            &self.sink,
            &self.protocol,
            &self.source,
            &self.types,
            &self.filters,
            &self.headers,
            &self.method,
            &self.credential,
            &self.config,
            &self.created_at,
            &self.updated_at,
            &self.state,
            &self.validated_by,
            &self.validation_token,
            &self.allowed_rate,
            &self.validation_problem,
            &self.disabled_reason,
            &self.client_certificate,
            &self.signing,
            &self.label,
            &self.broker_settings,
        ]
    }
}

pub(crate) fn params(s: &Subscription) -> Params {
    let columns = s.status.columns();
    Params {
        id: s.id.clone(),
        owner: s.owner.clone(),
        sink: s.sink.to_string(),
        protocol: s.protocol().as_str().to_owned(),
        source: s.source.clone(),
        types: s.types.as_ref().map(|types| json!(types)),
        filters: Value::Array(s.filters.clone()),
        headers: json!(s.protocol_settings.http().map(|h| &h.headers)),
        method: s.protocol_settings.http().and_then(|h| h.method.clone()),
        credential: s.sink_credential.as_ref().map(|c| match c {
            SinkCredential::Plain { identifier, secret } => json!({
                "credentialtype": "PLAIN", "identifier": identifier, "secret": secret,
            }),
            SinkCredential::AccessToken {
                accesstoken,
                accesstokentype,
                accesstokenexpiresutc,
            } => json!({
                "credentialtype": "ACCESSTOKEN", "accesstoken": accesstoken,
                "accesstokentype": accesstokentype,
                "accesstokenexpiresutc": accesstokenexpiresutc,
            }),
            SinkCredential::ClientCredentials {
                token_url,
                client_id,
                client_secret,
                scope,
            } => json!({
                "credentialtype": "CLIENTCREDENTIALS", "token_url": token_url,
                "client_id": client_id, "client_secret": client_secret, "scope": scope,
            }),
        }),
        config: json!(s.config.values()),
        created_at: s.created_at as i64,
        updated_at: s.updated_at as i64,
        state: columns.state.as_str(),
        validated_by: columns.validated_by.map(Validation::as_str),
        validation_token: s.validation_token.clone(),
        allowed_rate: columns.allowed_rate.map(|r| r as i32),
        validation_problem: columns.validation_problem,
        disabled_reason: columns.disabled_reason,
        client_certificate: s
            .client_certificate
            .as_ref()
            .map(|c| json!({"certificate": c.certificate, "private_key": c.private_key})),
        signing: s
            .signing
            .as_ref()
            .map(|signing| json!({"current": signing.current, "previous": signing.previous})),
        label: s.label.clone(),
        broker_settings: s.protocol_settings.broker_record(),
    }
}

fn corrupt(id: &str, what: &str) -> StoreError {
    StoreError::Corrupt(format!("subscription `{id}`: {what}"))
}

fn strings(value: Value) -> Option<BTreeMap<String, String>> {
    serde_json::from_value(value).ok()
}

/// A subscription from a row selected with [`COLUMNS`].
pub(crate) fn from_row(row: &Row) -> Result<Subscription, StoreError> {
    let id: String = row.get(0);
    let types: Option<Value> = row.get(5);
    let types = match types {
        None => None,
        Some(value) => {
            Some(serde_json::from_value::<Vec<String>>(value).map_err(|_| corrupt(&id, "types"))?)
        }
    };
    let filters = match row.get::<_, Value>(6) {
        Value::Array(filters) => filters,
        _ => return Err(corrupt(&id, "filters")),
    };
    let text = |value: &Value, key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    let protocol = Protocol::parse(row.get(3)).ok_or_else(|| corrupt(&id, "protocol"))?;
    let broker = row.get::<_, Option<Value>>(22);
    let http = match broker {
        // NULL for a subscription to a broker.
        Some(_) => HttpSettings::default(),
        None => HttpSettings {
            headers: strings(row.get(7)).ok_or_else(|| corrupt(&id, "headers"))?,
            method: row.get(8),
        },
    };
    let protocol_settings = ProtocolSettings::from_record(protocol, http, broker.as_ref())
        .map_err(|why| corrupt(&id, &why))?;
    let credential: Option<Value> = row.get(9);
    let sink_credential = match credential {
        None => None,
        Some(c) => Some(match c.get("credentialtype").and_then(Value::as_str) {
            Some("PLAIN") => SinkCredential::Plain {
                identifier: text(&c, "identifier").unwrap_or_default(),
                secret: text(&c, "secret").unwrap_or_default(),
            },
            Some("ACCESSTOKEN") => SinkCredential::AccessToken {
                accesstoken: text(&c, "accesstoken").unwrap_or_default(),
                accesstokentype: text(&c, "accesstokentype"),
                accesstokenexpiresutc: text(&c, "accesstokenexpiresutc"),
            },
            Some("CLIENTCREDENTIALS") => SinkCredential::ClientCredentials {
                token_url: text(&c, "token_url").unwrap_or_default(),
                client_id: text(&c, "client_id").unwrap_or_default(),
                client_secret: text(&c, "client_secret").unwrap_or_default(),
                scope: text(&c, "scope"),
            },
            _ => return Err(corrupt(&id, "credential")),
        }),
    };
    let client_certificate = match row.get::<_, Option<Value>>(19) {
        None => None,
        Some(c) => Some(ClientCertificate {
            certificate: text(&c, "certificate")
                .ok_or_else(|| corrupt(&id, "client_certificate"))?,
            private_key: text(&c, "private_key")
                .ok_or_else(|| corrupt(&id, "client_certificate"))?,
        }),
    };
    let signing = match row.get::<_, Option<Value>>(20) {
        None => None,
        Some(signing) => Some(SigningSecrets {
            current: text(&signing, "current").ok_or_else(|| corrupt(&id, "signing"))?,
            previous: match &signing["previous"] {
                Value::Null => None,
                Value::Array(pair) => match pair.as_slice() {
                    [Value::String(secret), until] => Some((
                        secret.clone(),
                        until.as_u64().ok_or_else(|| corrupt(&id, "signing"))?,
                    )),
                    _ => return Err(corrupt(&id, "signing")),
                },
                _ => return Err(corrupt(&id, "signing")),
            },
        }),
    };
    let config = strings(row.get(10)).ok_or_else(|| corrupt(&id, "config"))?;
    let state = match row.get::<_, &str>(13) {
        "active" => SubscriptionState::Active,
        "pending" => SubscriptionState::Pending,
        "disabled" => SubscriptionState::Disabled,
        _ => return Err(corrupt(&id, "state")),
    };
    let validated_by = match row.get::<_, Option<&str>>(14) {
        None => None,
        Some("handshake") => Some(Validation::Handshake),
        Some("callback") => Some(Validation::Callback),
        Some("agreement") => Some(Validation::Agreement),
        Some(_) => return Err(corrupt(&id, "validated_by")),
    };
    Ok(Subscription {
        owner: row.get(1),
        label: row.get(21),
        sink: Sink::parse(row.get(2)).map_err(|why| corrupt(&id, &format!("sink ({why})")))?,
        source: row.get(4),
        types,
        filters,
        protocol_settings,
        sink_credential,
        config: SubscriptionConfig::stored(config),
        created_at: row.get::<_, i64>(11) as u64,
        updated_at: row.get::<_, i64>(12) as u64,
        status: Status::from_columns(StatusColumns {
            state,
            validated_by,
            allowed_rate: row.get::<_, Option<i32>>(16).map(|r| r as u32),
            validation_problem: row.get(17),
            disabled_reason: row.get(18),
        }),
        validation_token: row.get(15),
        client_certificate,
        signing,
        id,
    })
}

impl crate::table::Table for Subscription {
    const NAME: &'static str = "subscriptions";
    const KEY: &'static str = "id";
    const COLUMNS: &'static str = COLUMNS;
    const PLACEHOLDERS: &'static str = PLACEHOLDERS;

    fn from_row(row: &Row) -> Result<Self, StoreError> {
        from_row(row)
    }
}
