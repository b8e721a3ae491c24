//! Principals managed at runtime: the one sequence every surface runs (the `/v1` API, and
//! the console, which calls the API). Only an admin acts here; each change is stored (every
//! hub sharing the store follows within a second, a disabled principal's subscriptions are
//! suspended on every hub before the change answers), logged, and written on the audit
//! trail, which keeps the principal as [`described`] shows it, never a token.

use knooppunt_event::timestamp::utc_timestamp;
use knooppunt_store::{StoreError, StoredPrincipal, now_ms};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::{Value, json};

use crate::app::AppState;
use crate::audit::{Action, ActionName, Context};
use crate::identity::{Principal, Role, hash_token};
use crate::principals::{FROM_API, Refused};

/// Whether `caller` may `action` ("create principals"): only an admin may.
pub fn may_administer(caller: &Principal, action: &str) -> Result<(), Refused> {
    caller.may(Role::Admin, action).map_err(Refused::Forbidden)
}

/// A principal as the API shows it and the audit trail keeps it: its secrets never (a
/// token only as whether it has one, a ZGW client's secret not at all).
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "Principal", description = "A party that may call the API.")]
pub struct PrincipalOut {
    #[schemars(example = &"gemeente-utrecht")]
    pub name: String,
    /// What it may do: publish events, manage its own subscriptions, manage everything, read
    /// /metrics.
    #[schemars(extend("items" = {"type": "string", "enum": ["publisher", "subscriber", "admin", "metrics"]}))]
    pub roles: Vec<String>,
    /// The event types it may subscribe to; empty: any.
    pub subscribe_type_prefixes: Vec<String>,
    /// The sources it may publish; empty: any.
    pub publish_source_prefixes: Vec<String>,
    /// The OIN of its organisation: it then publishes only `urn:nld:oin:<OIN>:` sources, and
    /// a trusted client certificate whose subject serialNumber is this OIN identifies it.
    /// One OIN names one principal.
    #[schemars(regex(pattern = "^[0-9]{20}$"))]
    pub oin: Option<String>,
    /// Refused on every request while true.
    pub disabled: bool,
    /// Whether it has a bearer token (never shown after it was issued).
    pub has_token: bool,
    /// `configuration`: seeded from the hub's configuration file, which it follows at every
    /// start. `api`: created or changed over the API; the file no longer changes it.
    #[schemars(extend("enum" = ["api", "configuration"]))]
    pub origin: String,
    /// Its ZGW client of the Notificaties API facade (/api/v1); the secret is never shown.
    pub zgw: Option<ZgwClientOut>,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    #[schemars(extend("format" = "date-time"))]
    pub updated_at: String,
}

/// A principal's ZGW client without its secret.
#[derive(Debug, Serialize, serde::Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "ZgwClient")]
pub struct ZgwClientOut {
    pub client_id: String,
    pub scopes: Vec<String>,
}

impl From<&StoredPrincipal> for PrincipalOut {
    fn from(record: &StoredPrincipal) -> Self {
        PrincipalOut {
            name: record.name.clone(),
            roles: record.roles.clone(),
            subscribe_type_prefixes: record.subscribe_type_prefixes.clone(),
            publish_source_prefixes: record.publish_source_prefixes.clone(),
            oin: record.oin.clone(),
            disabled: record.disabled,
            has_token: record.token_sha256.is_some(),
            origin: record.origin.clone(),
            zgw: record.zgw.as_ref().map(|z| ZgwClientOut {
                client_id: z.client_id.clone(),
                scopes: z.scopes.clone(),
            }),
            created_at: utc_timestamp(record.created_at),
            updated_at: utc_timestamp(record.updated_at),
        }
    }
}

/// [`PrincipalOut`] as JSON (the audit trail's details, the API's answers).
pub fn described(record: &StoredPrincipal) -> Value {
    serde_json::to_value(PrincipalOut::from(record)).expect("a principal serializes")
}

/// A new random token: 32 bytes from the system's generator, as `kp_` and 64 hex digits.
fn new_token() -> String {
    let mut bytes = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .expect("the system's random generator works");
    format!("kp_{}", hex::encode(bytes))
}

/// Makes principal `record` for `caller` (an admin), with a new token when `issue_token`
/// (returned: it is shown once, and stored only as its SHA-256).
/// The longest principal name.
pub const MAX_PRINCIPAL_NAME: usize = 100;

/// The rule of a principal's name: 1 to [`MAX_PRINCIPAL_NAME`] letters, digits, `-`, `_`,
/// `.`, `:` or `@` (an access token's principal is named by its claim, with the issuer's
/// `name_prefix`, so those characters are what claims hold).
pub fn check_principal_name(name: &str) -> Result<(), String> {
    let fine = !name.is_empty()
        && name.len() <= MAX_PRINCIPAL_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.:@".contains(&b));
    if fine {
        Ok(())
    } else {
        Err(format!(
            "1 to {MAX_PRINCIPAL_NAME} letters, digits, `-`, `_`, `.`, `:` or `@` (an access \
             token's principal is named by its claim, with the issuer's name_prefix)"
        ))
    }
}

pub async fn create(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    mut record: StoredPrincipal,
    issue_token: bool,
) -> Result<(StoredPrincipal, Option<String>), Refused> {
    may_administer(caller, "create principals")?;
    check_principal_name(&record.name).map_err(|why| Refused::Invalid("name", why))?;
    let token = issue_token.then(new_token);
    record.token_sha256 = token.as_deref().map(hash_token);
    record.origin = FROM_API.into();
    state.principals().create(&caller.name, &record).await?;
    tracing::info!(principal = %record.name, by = %caller.name, "Principal created.");
    let action = Action::new(
        ActionName::PrincipalCreate,
        format!("principal/{}", record.name),
        json!({"after": described(&record), "tokenIssued": token.is_some()}),
    )
    .concerning([record.name.clone()]);
    state.audit().record(context, action).await;
    Ok((record, token))
}

/// Replaces principal `record.name` with `record` for `caller` (an admin); from now on
/// the store, not the configuration file, decides it. `false` when there is none.
pub async fn change(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    mut record: StoredPrincipal,
) -> Result<Option<StoredPrincipal>, Refused> {
    may_administer(caller, "change principals")?;
    record.updated_at = now_ms();
    record.origin = FROM_API.into();
    if !state.update_principal(&caller.name, &record).await? {
        return Ok(None);
    }
    tracing::info!(principal = %record.name, by = %caller.name, disabled = record.disabled, "Principal changed.");
    let action = Action::new(
        ActionName::PrincipalChange,
        format!("principal/{}", record.name),
        json!({"after": described(&record)}),
    )
    .concerning([record.name.clone()]);
    state.audit().record(context, action).await;
    Ok(Some(record))
}

/// Deletes principal `name` for `caller` (an admin), and its subscriptions (their ids are
/// returned); `None` when there is none.
pub async fn delete(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    name: &str,
) -> Result<Option<Vec<String>>, Refused> {
    may_administer(caller, "delete principals")?;
    let Some(subscriptions) = state.delete_principal(&caller.name, name, context).await? else {
        return Ok(None);
    };
    tracing::info!(principal = %name, by = %caller.name, subscriptions = subscriptions.len(), "Principal deleted.");
    let action = Action::new(
        ActionName::PrincipalDelete,
        format!("principal/{name}"),
        json!({"subscriptionsDeleted": subscriptions}),
    )
    .concerning([name.to_owned()]);
    state.audit().record(context, action).await;
    Ok(Some(subscriptions))
}

/// Gives principal `name` a new token for `caller` (an admin): the old one stops working
/// at once; the new one is returned (shown once). `None` when there is none.
pub async fn issue_token(
    state: &AppState,
    context: &Context,
    caller: &Principal,
    name: &str,
    keep_old: Option<std::time::Duration>,
) -> Result<Option<(String, Option<u64>)>, Refused> {
    may_administer(caller, "issue tokens")?;
    let Some(mut record) = state.principals().get(name) else {
        return Ok(None);
    };
    let token = new_token();
    // The replaced token stays valid for the overlap asked (a rotation without a gap);
    // else it stops at once, and so does any earlier one still overlapping.
    let now = now_ms();
    record.previous_token = match (keep_old, record.token_sha256.take()) {
        (Some(overlap), Some(sha256)) => Some(knooppunt_store::PreviousToken {
            sha256,
            until: now + overlap.as_millis() as u64,
        }),
        _ => None,
    };
    let previous_until = record.previous_token.as_ref().map(|p| p.until);
    record.token_sha256 = Some(hash_token(&token));
    record.updated_at = now;
    record.origin = FROM_API.into();
    if !state.principals().update(&caller.name, &record).await? {
        return Ok(None);
    }
    tracing::info!(principal = %name, by = %caller.name, "Principal's token issued.");
    let details = match previous_until {
        Some(until) => json!({
            "note": "a new token replaced the old one (the token itself is never recorded)",
            "previousValidUntil": utc_timestamp(until),
        }),
        None => json!({
            "note": "a new token replaced the old one (the token itself is never recorded)"
        }),
    };
    let action = Action::new(
        ActionName::PrincipalTokenIssue,
        format!("principal/{name}"),
        details,
    )
    .concerning([name.to_owned()]);
    state.audit().record(context, action).await;
    Ok(Some((token, previous_until)))
}

/// The chunks of a backup as it is written; an `Err` ends it unfinished.
pub type BackupChunks = tokio::sync::mpsc::Receiver<Result<Vec<u8>, StoreError>>;

/// Hands each write to the receiver of a backup's chunks; fails once it has gone (the
/// client hung up), which ends the backup.
struct ToChannel(tokio::sync::mpsc::Sender<Result<Vec<u8>, StoreError>>);

impl std::io::Write for ToChannel {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .blocking_send(Ok(bytes.to_vec()))
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the reader left"))?;
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Lets the next backup begin when dropped, even when the one taking it panicked.
struct Finished(std::sync::Arc<AppState>);

impl Drop for Finished {
    fn drop(&mut self) {
        self.0
            .backing_up()
            .store(false, std::sync::atomic::Ordering::Release);
    }
}

/// A copy of the store for `caller` (an admin), written while the hub serves: its chunks,
/// once the first is there (a store the hub does not back up, PostgreSQL, is refused
/// before). One backup at a time; when it ends, the audit trail records who took it and
/// what it holds, or why it failed.
pub async fn back_up(
    state: &std::sync::Arc<AppState>,
    context: &Context,
    caller: &Principal,
) -> Result<BackupChunks, Refused> {
    use std::sync::atomic::Ordering;
    may_administer(caller, "back up the store")?;
    if state.backing_up().swap(true, Ordering::AcqRel) {
        return Err(Refused::Conflict(
            "a backup is being taken already: wait until it has finished".into(),
        ));
    }
    let (sender, mut chunks) = tokio::sync::mpsc::channel(8);
    let writing = {
        let state = std::sync::Arc::clone(state);
        let sender = sender.clone();
        tokio::task::spawn_blocking(move || {
            let finished = Finished(std::sync::Arc::clone(&state));
            let taken = state.back_up(&mut std::io::BufWriter::with_capacity(
                256 * 1024,
                ToChannel(sender.clone()),
            ));
            drop(finished);
            if let Err(error) = &taken {
                let _ = sender.blocking_send(Err(StoreError::Backend(error.to_string())));
            }
            taken
        })
    };
    drop(sender);
    let first = chunks.recv().await;
    let (forward, rest) = tokio::sync::mpsc::channel(8);
    match first {
        Some(Ok(bytes)) => {
            let _ = forward.send(Ok(bytes)).await;
        }
        // Refused before a byte was written (a store the hub does not back up).
        Some(Err(_)) | None => {
            let outcome = writing.await;
            return Err(match outcome {
                Ok(Err(error)) => Refused::Store(error),
                _ => Refused::Store(StoreError::Backend("the backup stopped".into())),
            });
        }
    }
    let state = std::sync::Arc::clone(state);
    let context = context.clone();
    let by = caller.name.clone();
    tokio::spawn(async move {
        while let Some(chunk) = chunks.recv().await {
            if forward.send(chunk).await.is_err() {
                break;
            }
        }
        drop(forward);
        let details = match writing.await {
            Ok(Ok(summary)) => {
                tracing::info!(by = %by, segments = summary.segments, log_bytes = summary.log_bytes, "Backup taken.");
                json!({"outcome": "taken", "summary": summary})
            }
            Ok(Err(error)) => {
                tracing::warn!(by = %by, %error, "A backup failed.");
                json!({"outcome": "failed", "error": error.to_string()})
            }
            Err(panicked) => json!({"outcome": "failed", "error": panicked.to_string()}),
        };
        let action = Action::new(ActionName::StoreBackup, "store".to_string(), details);
        state.audit().record(&context, action).await;
    });
    Ok(rest)
}
