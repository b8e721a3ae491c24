//! The embedded store's own record formats: what it writes to sled (subscriptions, principals) and to
//! the event log (delivery-state changes), as JSON. They are this backend's business: the
//! neutral model of `knooppunt-store` can change without changing what is on disk, and
//! every change here must read what earlier versions wrote (fields added with defaults,
//! old names kept as aliases).

use std::collections::BTreeMap;

use knooppunt_store::{
    ApprovalPolicy, Attempt, CatalogEntry, ClientCertificate, Decision, DeliveryChange, Grant,
    GrantState, HttpSettings, Protocol, ProtocolSettings, SchemaCheck, SigningSecrets, Sink,
    SinkCredential, Status, StatusColumns, StoredPrincipal, Subscription, SubscriptionConfig,
    SubscriptionState, TypeMatch, Validation, Verdict,
};
use serde::{Deserialize, Serialize};

/// A subscription in sled (`subscriptions` tree, id → this as JSON).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SubscriptionRecord {
    id: String,
    owner: String,
    sink: String,
    protocol: String,
    source: Option<String>,
    #[serde(default)]
    types: Vec<String>,
    /// `types: []` was sent (it matches no type), as opposed to no `types`.
    #[serde(default)]
    types_empty: bool,
    #[serde(default)]
    filters: Vec<serde_json::Value>,
    #[serde(default)]
    protocol_settings: HttpSettingsRecord,
    /// The settings of a subscription to a broker (MQTT, NATS): the store's one record of
    /// them (`ProtocolSettings::broker_record`). Written as `mqtt` before NATS.
    #[serde(default, alias = "mqtt", skip_serializing_if = "Option::is_none")]
    broker: Option<serde_json::Value>,
    sink_credential: Option<CredentialRecord>,
    #[serde(default)]
    client_certificate: Option<ClientCertificateRecord>,
    #[serde(default)]
    config: BTreeMap<String, String>,
    created_at: u64,
    updated_at: u64,
    #[serde(default)]
    state: StateRecord,
    #[serde(default)]
    validated_by: Option<ValidationRecord>,
    #[serde(default)]
    validation_token: Option<String>,
    #[serde(default)]
    allowed_rate: Option<u32>,
    #[serde(default)]
    validation_problem: Option<String>,
    #[serde(default, alias = "filter_problem")]
    disabled_reason: Option<String>,
    #[serde(default)]
    signing: Option<SigningRecord>,
    #[serde(default)]
    label: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SigningRecord {
    current: String,
    #[serde(default)]
    previous: Option<(String, u64)>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct HttpSettingsRecord {
    #[serde(default)]
    headers: BTreeMap<String, String>,
    method: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "credentialtype", rename_all = "UPPERCASE")]
enum CredentialRecord {
    Plain {
        identifier: String,
        secret: String,
    },
    AccessToken {
        accesstoken: String,
        accesstokentype: Option<String>,
        accesstokenexpiresutc: Option<String>,
    },
    ClientCredentials {
        token_url: String,
        client_id: String,
        client_secret: String,
        scope: Option<String>,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct ClientCertificateRecord {
    certificate: String,
    private_key: String,
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum StateRecord {
    #[default]
    Active,
    Pending,
    Disabled,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum ValidationRecord {
    Handshake,
    Callback,
    Agreement,
}

impl From<&Subscription> for SubscriptionRecord {
    fn from(s: &Subscription) -> Self {
        let columns = s.status.columns();
        SubscriptionRecord {
            id: s.id.clone(),
            owner: s.owner.clone(),
            sink: s.sink.to_string(),
            protocol: s.protocol().as_str().to_owned(),
            source: s.source.clone(),
            types: s.types.clone().unwrap_or_default(),
            types_empty: s.types.as_ref().is_some_and(Vec::is_empty),
            filters: s.filters.clone(),
            protocol_settings: s
                .protocol_settings
                .http()
                .map(|http| HttpSettingsRecord {
                    headers: http.headers.clone(),
                    method: http.method.clone(),
                })
                .unwrap_or_default(),
            broker: s.protocol_settings.broker_record(),
            sink_credential: s.sink_credential.as_ref().map(|c| match c.clone() {
                SinkCredential::Plain { identifier, secret } => {
                    CredentialRecord::Plain { identifier, secret }
                }
                SinkCredential::AccessToken {
                    accesstoken,
                    accesstokentype,
                    accesstokenexpiresutc,
                } => CredentialRecord::AccessToken {
                    accesstoken,
                    accesstokentype,
                    accesstokenexpiresutc,
                },
                SinkCredential::ClientCredentials {
                    token_url,
                    client_id,
                    client_secret,
                    scope,
                } => CredentialRecord::ClientCredentials {
                    token_url,
                    client_id,
                    client_secret,
                    scope,
                },
            }),
            client_certificate: s
                .client_certificate
                .as_ref()
                .map(|c| ClientCertificateRecord {
                    certificate: c.certificate.clone(),
                    private_key: c.private_key.clone(),
                }),
            config: s.config.values().clone(),
            created_at: s.created_at,
            updated_at: s.updated_at,
            state: match columns.state {
                SubscriptionState::Active => StateRecord::Active,
                SubscriptionState::Pending => StateRecord::Pending,
                SubscriptionState::Disabled => StateRecord::Disabled,
            },
            validated_by: columns.validated_by.map(|v| match v {
                Validation::Handshake => ValidationRecord::Handshake,
                Validation::Callback => ValidationRecord::Callback,
                Validation::Agreement => ValidationRecord::Agreement,
            }),
            validation_token: s.validation_token.clone(),
            label: s.label.clone(),
            signing: s.signing.as_ref().map(|signing| SigningRecord {
                current: signing.current.clone(),
                previous: signing.previous.clone(),
            }),
            allowed_rate: columns.allowed_rate,
            validation_problem: columns.validation_problem,
            disabled_reason: columns.disabled_reason,
        }
    }
}

impl TryFrom<SubscriptionRecord> for Subscription {
    /// What in the record is not what this backend writes.
    type Error = String;

    fn try_from(r: SubscriptionRecord) -> Result<Self, String> {
        let sink = Sink::parse(&r.sink)?;
        let protocol = Protocol::parse(&r.protocol)
            .ok_or_else(|| format!("protocol `{}` is not one the hub speaks", r.protocol))?;
        let protocol_settings = ProtocolSettings::from_record(
            protocol,
            HttpSettings {
                headers: r.protocol_settings.headers,
                method: r.protocol_settings.method,
            },
            r.broker.as_ref(),
        )?;
        Ok(Subscription {
            id: r.id,
            owner: r.owner,
            label: r.label,
            sink,
            source: r.source,
            types: (r.types_empty || !r.types.is_empty()).then_some(r.types),
            filters: r.filters,
            protocol_settings,
            sink_credential: r.sink_credential.map(|c| match c {
                CredentialRecord::Plain { identifier, secret } => {
                    SinkCredential::Plain { identifier, secret }
                }
                CredentialRecord::AccessToken {
                    accesstoken,
                    accesstokentype,
                    accesstokenexpiresutc,
                } => SinkCredential::AccessToken {
                    accesstoken,
                    accesstokentype,
                    accesstokenexpiresutc,
                },
                CredentialRecord::ClientCredentials {
                    token_url,
                    client_id,
                    client_secret,
                    scope,
                } => SinkCredential::ClientCredentials {
                    token_url,
                    client_id,
                    client_secret,
                    scope,
                },
            }),
            client_certificate: r.client_certificate.map(|c| ClientCertificate {
                certificate: c.certificate,
                private_key: c.private_key,
            }),
            config: SubscriptionConfig::stored(r.config),
            created_at: r.created_at,
            updated_at: r.updated_at,
            status: Status::from_columns(StatusColumns {
                state: match r.state {
                    StateRecord::Active => SubscriptionState::Active,
                    StateRecord::Pending => SubscriptionState::Pending,
                    StateRecord::Disabled => SubscriptionState::Disabled,
                },
                validated_by: r.validated_by.map(|v| match v {
                    ValidationRecord::Handshake => Validation::Handshake,
                    ValidationRecord::Callback => Validation::Callback,
                    ValidationRecord::Agreement => Validation::Agreement,
                }),
                allowed_rate: r.allowed_rate,
                validation_problem: r.validation_problem,
                disabled_reason: r.disabled_reason,
            }),
            validation_token: r.validation_token,
            signing: r.signing.map(|signing| SigningSecrets {
                current: signing.current,
                previous: signing.previous,
            }),
        })
    }
}

/// A delivery-state change in the event log (kind 2 records). Only results that counted
/// reach the log (lease tokens are checked before), so it holds no lease tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "camelCase")]
pub(crate) enum ChangeRecord {
    Attempted(AttemptRecord),
    Redeliver {
        subscription: String,
        seq: u64,
        at: u64,
    },
    DeleteDeadLetter {
        subscription: String,
        seq: u64,
    },
    Retire {
        subscription: String,
        at: u64,
        reason: String,
    },
    Withdraw {
        subscription: String,
        seqs: Vec<u64>,
        at: u64,
        reason: String,
    },
    Requeue {
        subscription: String,
        seqs: Vec<u64>,
        at: u64,
        replay: String,
    },
    Leased {
        subscription: String,
        leases: Vec<LeaseRecord>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LeaseRecord {
    seq: u64,
    lease: u64,
    until: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct AttemptRecord {
    subscription: String,
    seq: u64,
    at: u64,
    status: Option<u16>,
    error: Option<String>,
    verdict: VerdictRecord,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "camelCase")]
enum VerdictRecord {
    Delivered,
    Retry { next_attempt_at: u64 },
    DeadLetter { reason: String },
}

impl From<&DeliveryChange> for ChangeRecord {
    fn from(change: &DeliveryChange) -> Self {
        match change.clone() {
            DeliveryChange::Attempted(a) => ChangeRecord::Attempted(AttemptRecord {
                subscription: a.subscription,
                seq: a.seq,
                at: a.at,
                status: a.status,
                error: a.error,
                verdict: match a.verdict {
                    Verdict::Delivered => VerdictRecord::Delivered,
                    Verdict::Retry { next_attempt_at } => VerdictRecord::Retry { next_attempt_at },
                    Verdict::DeadLetter { reason } => VerdictRecord::DeadLetter { reason },
                },
            }),
            DeliveryChange::Redeliver {
                subscription,
                seq,
                at,
            } => ChangeRecord::Redeliver {
                subscription,
                seq,
                at,
            },
            DeliveryChange::DeleteDeadLetter { subscription, seq } => {
                ChangeRecord::DeleteDeadLetter { subscription, seq }
            }
            DeliveryChange::Retire {
                subscription,
                at,
                reason,
            } => ChangeRecord::Retire {
                subscription,
                at,
                reason,
            },
            DeliveryChange::Withdraw {
                subscription,
                seqs,
                at,
                reason,
            } => ChangeRecord::Withdraw {
                subscription,
                seqs,
                at,
                reason,
            },
            DeliveryChange::Requeue {
                subscription,
                seqs,
                at,
                replay,
            } => ChangeRecord::Requeue {
                subscription,
                seqs,
                at,
                replay,
            },
            DeliveryChange::Leased {
                subscription,
                leases,
            } => ChangeRecord::Leased {
                subscription,
                leases: leases
                    .into_iter()
                    .map(|(seq, lease, until)| LeaseRecord { seq, lease, until })
                    .collect(),
            },
        }
    }
}

impl From<ChangeRecord> for DeliveryChange {
    fn from(record: ChangeRecord) -> Self {
        match record {
            ChangeRecord::Attempted(a) => DeliveryChange::Attempted(Attempt {
                subscription: a.subscription,
                seq: a.seq,
                lease: 0,
                at: a.at,
                status: a.status,
                error: a.error,
                verdict: match a.verdict {
                    VerdictRecord::Delivered => Verdict::Delivered,
                    VerdictRecord::Retry { next_attempt_at } => Verdict::Retry { next_attempt_at },
                    VerdictRecord::DeadLetter { reason } => Verdict::DeadLetter { reason },
                },
                // Receipts are filed when the result is recorded, not when the log is read.
                receipt: false,
            }),
            ChangeRecord::Redeliver {
                subscription,
                seq,
                at,
            } => DeliveryChange::Redeliver {
                subscription,
                seq,
                at,
            },
            ChangeRecord::DeleteDeadLetter { subscription, seq } => {
                DeliveryChange::DeleteDeadLetter { subscription, seq }
            }
            ChangeRecord::Retire {
                subscription,
                at,
                reason,
            } => DeliveryChange::Retire {
                subscription,
                at,
                reason,
            },
            ChangeRecord::Withdraw {
                subscription,
                seqs,
                at,
                reason,
            } => DeliveryChange::Withdraw {
                subscription,
                seqs,
                at,
                reason,
            },
            ChangeRecord::Requeue {
                subscription,
                seqs,
                at,
                replay,
            } => DeliveryChange::Requeue {
                subscription,
                seqs,
                at,
                replay,
            },
            ChangeRecord::Leased {
                subscription,
                leases,
            } => DeliveryChange::Leased {
                subscription,
                leases: leases
                    .into_iter()
                    .map(|l| (l.seq, l.lease, l.until))
                    .collect(),
            },
        }
    }
}

/// A principal in sled (`principals` tree, name → this as JSON).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PrincipalRecord {
    name: String,
    #[serde(default)]
    roles: Vec<String>,
    #[serde(default)]
    token_sha256: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    previous_token: Option<knooppunt_store::PreviousToken>,
    #[serde(default)]
    subscribe_type_prefixes: Vec<String>,
    #[serde(default)]
    publish_source_prefixes: Vec<String>,
    #[serde(default)]
    oin: Option<String>,
    #[serde(default)]
    disabled: bool,
    #[serde(default)]
    origin: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    zgw: Option<knooppunt_store::StoredZgwClient>,
    created_at: u64,
    updated_at: u64,
}

impl From<&StoredPrincipal> for PrincipalRecord {
    fn from(p: &StoredPrincipal) -> Self {
        PrincipalRecord {
            name: p.name.clone(),
            roles: p.roles.clone(),
            token_sha256: p.token_sha256.clone(),
            previous_token: p.previous_token.clone(),
            subscribe_type_prefixes: p.subscribe_type_prefixes.clone(),
            publish_source_prefixes: p.publish_source_prefixes.clone(),
            oin: p.oin.clone(),
            disabled: p.disabled,
            origin: p.origin.clone(),
            zgw: p.zgw.clone(),
            created_at: p.created_at,
            updated_at: p.updated_at,
        }
    }
}

impl From<PrincipalRecord> for StoredPrincipal {
    fn from(r: PrincipalRecord) -> Self {
        StoredPrincipal {
            name: r.name,
            roles: r.roles,
            token_sha256: r.token_sha256,
            previous_token: r.previous_token,
            subscribe_type_prefixes: r.subscribe_type_prefixes,
            publish_source_prefixes: r.publish_source_prefixes,
            oin: r.oin,
            disabled: r.disabled,
            origin: r.origin,
            zgw: r.zgw,
            created_at: r.created_at,
            updated_at: r.updated_at,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record whose sink or protocol is not one the hub could have written is corrupt, not
    /// a subscription.
    #[test]
    fn a_record_with_an_impossible_sink_or_protocol_is_refused() {
        let record = |sink: &str, protocol: &str| -> SubscriptionRecord {
            serde_json::from_str(&format!(
                r#"{{"id":"a","owner":"o","sink":"{sink}","protocol":"{protocol}","source":null,
                "types":[],"filters":[],"config":{{}},"created_at":1,"updated_at":2}}"#
            ))
            .unwrap()
        };
        assert!(Subscription::try_from(record("https://x.example/", "HTTP")).is_ok());
        let bad_sink = Subscription::try_from(record("x.example/events", "HTTP")).unwrap_err();
        assert!(bad_sink.contains("not an absolute URL"), "{bad_sink}");
        let bad_protocol =
            Subscription::try_from(record("https://x.example/", "KAFKA")).unwrap_err();
        assert!(bad_protocol.contains("KAFKA"), "{bad_protocol}");
        // MQTT without its settings (topic and all) is not what the hub writes.
        let no_settings = Subscription::try_from(record("mqtt://x.example", "MQTT5")).unwrap_err();
        assert!(no_settings.contains("MQTT5"), "{no_settings}");
    }

    /// Records written by earlier versions (before these types were the backend's own)
    /// still read, and what is written now reads back the same.
    #[test]
    fn earlier_records_still_read() {
        let old = r#"{"id":"a","owner":"o","sink":"https://x.example/","protocol":"HTTP",
            "source":null,"types":[],"types_empty":true,"filters":[],
            "protocol_settings":{"headers":{"X-Key":"v"},"method":null},
            "sink_credential":{"credentialtype":"PLAIN","identifier":"hub","secret":"s"},
            "config":{"mode":"binary"},"created_at":1,"updated_at":2,"state":"disabled",
            "validated_by":"callback","filter_problem":"why"}"#;
        let record: SubscriptionRecord = serde_json::from_str(old).unwrap();
        let subscription = Subscription::try_from(record).unwrap();
        assert_eq!(subscription.types, Some(vec![]));
        assert_eq!(
            subscription.status,
            Status::Disabled(knooppunt_store::Disabled::Unusable("why".into()))
        );
        assert_eq!(
            subscription.delivery_config().mode,
            knooppunt_store::DeliveryMode::Binary
        );
        let again = Subscription::try_from(
            serde_json::from_slice::<SubscriptionRecord>(
                &serde_json::to_vec(&SubscriptionRecord::from(&subscription)).unwrap(),
            )
            .unwrap(),
        )
        .unwrap();
        assert_eq!(again, subscription);

        let old_change = r#"{"change":"attempted","subscription":"a","seq":7,"at":5,
            "status":503,"error":"x","verdict":{"outcome":"retry","next_attempt_at":9}}"#;
        let change =
            DeliveryChange::from(serde_json::from_str::<ChangeRecord>(old_change).unwrap());
        let DeliveryChange::Attempted(attempt) = &change else {
            panic!("{change:?}")
        };
        assert_eq!(attempt.verdict, Verdict::Retry { next_attempt_at: 9 });
        assert_eq!(
            ChangeRecord::from(&change),
            serde_json::from_str(old_change).unwrap()
        );
    }

    /// A stored config this version cannot read is kept as it is and reported.
    #[test]
    fn an_unreadable_config_is_kept_and_reported() {
        let record: SubscriptionRecord = serde_json::from_str(
            r#"{"id":"a","owner":"o","sink":"https://x.example/","protocol":"HTTP","source":null,
                "created_at":1,"updated_at":1,"config":{"mode":"pigeon"}}"#,
        )
        .unwrap();
        let subscription = Subscription::try_from(record).unwrap();
        assert!(subscription.config.unreadable().is_some());
        assert_eq!(subscription.config.values()["mode"], "pigeon");
        assert_eq!(subscription.types, None);
    }
}

fn schema_check_off() -> String {
    "off".into()
}

/// A catalog entry in sled (`catalog` tree, id → this as JSON).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CatalogRecord {
    id: String,
    owner: String,
    source_prefix: String,
    event_type: String,
    type_match: String,
    description: String,
    #[serde(default)]
    documentation: Option<String>,
    #[serde(default)]
    dataschema: Option<String>,
    #[serde(default)]
    schema: Option<String>,
    #[serde(default = "schema_check_off")]
    schema_check: String,
    #[serde(default)]
    deprecated: bool,
    approval: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    kenmerken: Vec<String>,
    created_at: u64,
    updated_at: u64,
}

impl From<&CatalogEntry> for CatalogRecord {
    fn from(e: &CatalogEntry) -> Self {
        CatalogRecord {
            id: e.id.clone(),
            owner: e.owner.clone(),
            source_prefix: e.source_prefix.clone(),
            event_type: e.event_type.clone(),
            type_match: e.type_match.as_str().to_owned(),
            description: e.description.clone(),
            documentation: e.documentation.clone(),
            dataschema: e.dataschema.clone(),
            schema: e.schema.clone(),
            schema_check: e.schema_check.as_str().to_owned(),
            deprecated: e.deprecated,
            approval: e.approval.as_str().to_owned(),
            kenmerken: e.kenmerken.clone(),
            created_at: e.created_at,
            updated_at: e.updated_at,
        }
    }
}

impl TryFrom<CatalogRecord> for CatalogEntry {
    /// What in the record is not what this backend writes.
    type Error = String;

    fn try_from(r: CatalogRecord) -> Result<Self, String> {
        Ok(CatalogEntry {
            type_match: TypeMatch::parse(&r.type_match)
                .ok_or_else(|| format!("type match `{}`", r.type_match))?,
            approval: ApprovalPolicy::parse(&r.approval)
                .ok_or_else(|| format!("approval policy `{}`", r.approval))?,
            schema_check: SchemaCheck::parse(&r.schema_check)
                .ok_or_else(|| format!("schema check `{}`", r.schema_check))?,
            schema: r.schema,
            id: r.id,
            owner: r.owner,
            source_prefix: r.source_prefix,
            event_type: r.event_type,
            description: r.description,
            documentation: r.documentation,
            dataschema: r.dataschema,
            deprecated: r.deprecated,
            kenmerken: r.kenmerken,
            created_at: r.created_at,
            updated_at: r.updated_at,
        })
    }
}

/// A grant in sled (`grants` tree, `entry \0 subscription` → this as JSON).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct GrantRecord {
    entry: String,
    subscription: String,
    state: String,
    requested_at: u64,
    #[serde(default)]
    decided_by: Option<String>,
    #[serde(default)]
    decided_at: Option<u64>,
    #[serde(default)]
    reason: Option<String>,
}

impl From<&Grant> for GrantRecord {
    fn from(g: &Grant) -> Self {
        GrantRecord {
            entry: g.entry.clone(),
            subscription: g.subscription.clone(),
            state: g.state.as_str().to_owned(),
            requested_at: g.requested_at,
            decided_by: g.decision.as_ref().map(|d| d.by.clone()),
            decided_at: g.decision.as_ref().map(|d| d.at),
            reason: g.decision.as_ref().and_then(|d| d.reason.clone()),
        }
    }
}

impl TryFrom<GrantRecord> for Grant {
    /// What in the record is not what this backend writes.
    type Error = String;

    fn try_from(r: GrantRecord) -> Result<Self, String> {
        Ok(Grant {
            state: GrantState::parse(&r.state)
                .ok_or_else(|| format!("grant state `{}`", r.state))?,
            decision: match (r.decided_by, r.decided_at) {
                (Some(by), Some(at)) => Some(Decision {
                    by,
                    at,
                    reason: r.reason,
                }),
                _ => None,
            },
            entry: r.entry,
            subscription: r.subscription,
            requested_at: r.requested_at,
        })
    }
}
