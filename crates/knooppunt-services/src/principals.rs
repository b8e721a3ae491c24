//! The principals: who may call the API, kept in the store so that every hub sharing it sees
//! the same ones, changed at runtime by admins (the configuration file seeds them).
//! This is their one writer, as `subscriptions.rs` is for subscriptions: store first, then the
//! table that authenticates requests, under one lock, so a disabled principal is refused by
//! the next request.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use knooppunt_store::{Store, StoreError, StoredPrincipal};

use crate::identity::{Oin, Principal, Role};

/// Where a principal came from.
pub const FROM_API: &str = "api";
pub const FROM_CONFIGURATION: &str = "configuration";

/// What a credential names.
#[derive(Debug, Clone)]
pub enum Found {
    Active(Arc<Principal>),
    /// A principal an admin disabled: refused until enabled again.
    Disabled(String),
    Unknown,
}

/// A principal as stored, and what it may do.
struct Entry {
    record: StoredPrincipal,
    principal: Arc<Principal>,
}

/// The principals by each thing that names them; one snapshot, replaced whole on a change.
#[derive(Default)]
struct Table {
    by_name: BTreeMap<String, Arc<Entry>>,
    by_token: HashMap<[u8; 32], Arc<Entry>>,
    /// Replaced tokens still accepted, with until when (milliseconds since the epoch).
    by_previous_token: HashMap<[u8; 32], (Arc<Entry>, u64)>,
    by_oin: HashMap<String, Arc<Entry>>,
}

impl Table {
    fn build(stored: Vec<StoredPrincipal>) -> Table {
        let mut table = Table::default();
        for record in stored {
            let entry = Arc::new(Entry {
                principal: Arc::new(principal(&record)),
                record,
            });
            let record = &entry.record;
            if let Some(digest) = record.token_sha256.as_deref().and_then(digest) {
                table.by_token.insert(digest, Arc::clone(&entry));
            }
            if let Some(previous) = &record.previous_token
                && let Some(digest) = digest(&previous.sha256)
            {
                table
                    .by_previous_token
                    .insert(digest, (Arc::clone(&entry), previous.until));
            }
            if let Some(oin) = &record.oin {
                table.by_oin.insert(oin.clone(), Arc::clone(&entry));
            }
            table.by_name.insert(record.name.clone(), entry);
        }
        table
    }
}

fn found(entry: Option<&Arc<Entry>>) -> Found {
    match entry {
        Some(entry) if entry.record.disabled => Found::Disabled(entry.record.name.clone()),
        Some(entry) => Found::Active(Arc::clone(&entry.principal)),
        None => Found::Unknown,
    }
}

/// A token hash as 32 bytes; `None` when it is not 64 hex digits.
fn digest(hash: &str) -> Option<[u8; 32]> {
    let mut digest = [0u8; 32];
    hex::decode_to_slice(hash.as_bytes(), &mut digest).ok()?;
    Some(digest)
}

/// What a stored principal may do; role names this version does not know are left out.
fn principal(record: &StoredPrincipal) -> Principal {
    let roles = record
        .roles
        .iter()
        .filter_map(|name| {
            let role = Role::parse(name);
            if role.is_none() {
                tracing::warn!(principal = %record.name, role = %name, "A principal has a role this hub version does not know; it is ignored.");
            }
            role
        })
        .collect();
    Principal {
        name: record.name.clone(),
        roles,
        subscribe_type_prefixes: record.subscribe_type_prefixes.clone(),
        publish_source_prefixes: record.publish_source_prefixes.clone(),
        // Stored OINs were checked when they were written.
        oin: record.oin.as_deref().and_then(Oin::parse),
    }
}

/// Whether a stored principal is what the configuration says (times aside).
fn same_seed(current: &StoredPrincipal, seed: &StoredPrincipal) -> bool {
    let mut roles = current.roles.clone();
    roles.sort_unstable();
    let mut seed_roles = seed.roles.clone();
    seed_roles.sort_unstable();
    roles == seed_roles
        && current.token_sha256 == seed.token_sha256
        && current.subscribe_type_prefixes == seed.subscribe_type_prefixes
        && current.publish_source_prefixes == seed.publish_source_prefixes
        && current.oin == seed.oin
        && current.disabled == seed.disabled
}

/// The stored form of a principal of the configuration file.
pub fn seed_record(hash: &str, principal: &Principal, now: u64) -> StoredPrincipal {
    StoredPrincipal {
        name: principal.name.clone(),
        roles: principal
            .roles
            .iter()
            .map(|r| r.name().to_owned())
            .collect(),
        token_sha256: Some(hash.to_ascii_lowercase()),
        previous_token: None,
        subscribe_type_prefixes: principal.subscribe_type_prefixes.clone(),
        publish_source_prefixes: principal.publish_source_prefixes.clone(),
        oin: principal.oin.as_ref().map(ToString::to_string),
        disabled: false,
        origin: FROM_CONFIGURATION.into(),
        zgw: None,
        created_at: now,
        updated_at: now,
    }
}

pub struct Principals {
    store: Arc<dyn Store>,
    table: RwLock<Arc<Table>>,
    writing: tokio::sync::Mutex<()>,
}

impl Principals {
    pub async fn load(store: Arc<dyn Store>) -> Result<Principals, StoreError> {
        let table = Table::build(store.principals().await?);
        Ok(Principals {
            store,
            table: RwLock::new(Arc::new(table)),
            writing: tokio::sync::Mutex::new(()),
        })
    }

    fn table(&self) -> Arc<Table> {
        Arc::clone(&self.table.read().expect("principals lock"))
    }

    /// Brings the configuration's principals into the store: one the store lacks is
    /// created; one that came from the configuration and was not changed over the API since
    /// follows the file (a new token hash, other roles); one an admin created or changed
    /// over the API is left as it is (the store is the truth for it).
    pub async fn seed(&self, seeds: &[StoredPrincipal]) -> Result<(), StoreError> {
        let _writing = self.writing.lock().await;
        let stored: HashMap<String, StoredPrincipal> = self
            .store
            .principals()
            .await?
            .into_iter()
            .map(|p| (p.name.clone(), p))
            .collect();
        for seed in seeds {
            match stored.get(&seed.name) {
                None => match self.store.insert_principal(seed).await {
                    Ok(()) => {
                        tracing::info!(principal = %seed.name, "Principal of the configuration stored.")
                    }
                    // Another hub seeded it a moment ago.
                    Err(StoreError::NameTaken(_)) => {}
                    Err(error) => return Err(error),
                },
                Some(current) if current.origin != FROM_CONFIGURATION => tracing::info!(
                    principal = %seed.name,
                    "A principal of the configuration is managed over the API; its entry in the file is not used."
                ),
                Some(current) if same_seed(current, seed) => {}
                Some(current) => {
                    let updated = StoredPrincipal {
                        created_at: current.created_at,
                        previous_token: current.previous_token.clone(),
                        // Set over the API, not in the file.
                        zgw: current.zgw.clone(),
                        ..seed.clone()
                    };
                    self.store.update_principal(&updated).await?;
                    tracing::info!(principal = %seed.name, "Principal updated from the configuration.");
                }
            }
        }
        self.reload_locked().await
    }

    /// Reads every principal again (another hub changed them).
    pub async fn reload(&self) -> Result<(), StoreError> {
        let _writing = self.writing.lock().await;
        self.reload_locked().await
    }

    async fn reload_locked(&self) -> Result<(), StoreError> {
        let table = Table::build(self.store.principals().await?);
        *self.table.write().expect("principals lock") = Arc::new(table);
        Ok(())
    }

    /// The principal whose token has this SHA-256.
    /// The principal of a token: its current one, or a replaced one until its overlap
    /// ends (checked against the clock on every request).
    pub fn by_token(&self, digest: &[u8; 32]) -> Found {
        let table = self.table();
        if let Some(entry) = table.by_token.get(digest) {
            return found(Some(entry));
        }
        match table.by_previous_token.get(digest) {
            Some((entry, until)) if knooppunt_store::now_ms() < *until => found(Some(entry)),
            _ => Found::Unknown,
        }
    }

    /// The principal with this OIN (from a client certificate).
    pub fn by_oin(&self, oin: &str) -> Found {
        found(self.table().by_oin.get(oin))
    }

    pub fn by_name(&self, name: &str) -> Found {
        found(self.table().by_name.get(name))
    }

    pub fn count(&self) -> usize {
        self.table().by_name.len()
    }

    /// Up to `size` principals after `cursor` (a name), in name order, and whether more follow.
    pub fn page(&self, cursor: Option<&str>, size: usize) -> (Vec<StoredPrincipal>, bool) {
        use std::ops::Bound;
        let table = self.table();
        let start = cursor.map_or(Bound::Unbounded, Bound::Excluded);
        let mut page: Vec<StoredPrincipal> = table
            .by_name
            .range::<str, _>((start, Bound::Unbounded))
            .take(size + 1)
            .map(|(_, entry)| entry.record.clone())
            .collect();
        let more = page.len() > size;
        page.truncate(size);
        (page, more)
    }

    pub fn get(&self, name: &str) -> Option<StoredPrincipal> {
        self.table()
            .by_name
            .get(name)
            .map(|entry| entry.record.clone())
    }

    /// The names of the disabled principals: their subscriptions are suspended.
    pub fn disabled(&self) -> std::collections::HashSet<String> {
        self.table()
            .by_name
            .values()
            .filter(|entry| entry.record.disabled)
            .map(|entry| entry.record.name.clone())
            .collect()
    }

    /// What the principal `name` may do (disabled or not), if there is one.
    pub fn rights(&self, name: &str) -> Option<Arc<Principal>> {
        self.table()
            .by_name
            .get(name)
            .map(|entry| Arc::clone(&entry.principal))
    }

    /// The principal that has this OIN, other than `name`.
    pub fn oin_holder(&self, oin: &str, name: &str) -> Option<String> {
        self.table()
            .by_oin
            .get(oin)
            .map(|entry| entry.record.name.clone())
            .filter(|holder| holder != name)
    }

    /// Whether `actor` may still act as an administrator now, under the writing lock: a
    /// stored principal must be an enabled admin (another admin may have demoted or
    /// disabled it since its request was authenticated); one known only from an access
    /// token has its role from that token.
    fn still_admin(&self, actor: &str) -> Result<(), Refused> {
        match self.table().by_name.get(actor) {
            Some(entry)
                if entry.record.disabled || !entry.record.roles.iter().any(|r| r == "admin") =>
            {
                Err(Refused::Forbidden(format!(
                    "principal `{actor}` is no longer an enabled admin (another admin changed \
                     it while this request was on its way); nothing was changed"
                )))
            }
            _ => Ok(()),
        }
    }

    /// One OIN names one principal.
    /// The principal whose ZGW client is `client_id`, if one is.
    pub fn by_zgw_client(&self, client_id: &str) -> Option<StoredPrincipal> {
        self.table()
            .by_name
            .values()
            .find(|e| {
                e.record
                    .zgw
                    .as_ref()
                    .is_some_and(|z| z.client_id == client_id)
            })
            .map(|e| e.record.clone())
    }

    /// Seals every ZGW client secret not sealed under the first of `keys` again (a key was
    /// rotated in); how many. One that no key opens is left as it is, and logged.
    pub async fn reseal_zgw_secrets(
        &self,
        keys: &crate::identity::zgw::SecretKeys,
    ) -> Result<usize, StoreError> {
        let _writing = self.writing.lock().await;
        let mut resealed = 0;
        for entry in self.table().by_name.values() {
            let Some(zgw) = &entry.record.zgw else {
                continue;
            };
            if !keys.needs_reseal(&zgw.sealed_secret) {
                continue;
            }
            match keys.open(&zgw.client_id, &zgw.sealed_secret) {
                Ok(secret) => {
                    let mut record = entry.record.clone();
                    if let Some(stored) = record.zgw.as_mut() {
                        stored.sealed_secret = keys.seal(&zgw.client_id, &secret);
                    }
                    self.store.update_principal(&record).await?;
                    resealed += 1;
                }
                Err(why) => tracing::error!(
                    principal = %entry.record.name, client = %zgw.client_id, %why,
                    "A ZGW client's secret cannot be opened with the configured keys; it cannot sign in until it is set again."
                ),
            }
        }
        if resealed > 0 {
            self.reload_locked().await?;
        }
        Ok(resealed)
    }

    fn oin_is_free(&self, record: &StoredPrincipal) -> Result<(), Refused> {
        let holder = record
            .oin
            .as_deref()
            .and_then(|oin| Some((oin, self.oin_holder(oin, &record.name)?)));
        match holder {
            Some((oin, holder)) => Err(Refused::Conflict(format!(
                "principal `{holder}` already has OIN {oin}; one OIN names one principal"
            ))),
            None => Ok(()),
        }
    }

    /// Creates a principal on behalf of admin `actor`.
    pub async fn create(&self, actor: &str, record: &StoredPrincipal) -> Result<(), Refused> {
        let _writing = self.writing.lock().await;
        self.still_admin(actor)?;
        self.oin_is_free(record)?;
        self.store.insert_principal(record).await?;
        Ok(self.reload_locked().await?)
    }

    /// Changes a principal on behalf of admin `actor`; `false` when there is none. An admin
    /// cannot disable itself or take its own admin role (another admin can).
    pub async fn update(&self, actor: &str, record: &StoredPrincipal) -> Result<bool, Refused> {
        let _writing = self.writing.lock().await;
        self.still_admin(actor)?;
        let demoted = record.disabled || !record.roles.iter().any(|r| r == "admin");
        if record.name == actor && demoted {
            return Err(Refused::Conflict(
                "you cannot disable yourself or take your own admin role; another admin can".into(),
            ));
        }
        self.oin_is_free(record)?;
        let updated = self.store.update_principal(record).await?;
        self.reload_locked().await?;
        Ok(updated)
    }

    /// Deletes a principal on behalf of admin `actor`; `false` when there is none. An admin
    /// cannot delete itself.
    pub async fn delete(&self, actor: &str, name: &str) -> Result<bool, Refused> {
        let _writing = self.writing.lock().await;
        self.still_admin(actor)?;
        if name == actor {
            return Err(Refused::Conflict(
                "you cannot delete yourself; another admin can".into(),
            ));
        }
        let deleted = self.store.delete_principal(name).await?;
        self.reload_locked().await?;
        Ok(deleted)
    }
}

pub use crate::refused::{Missing, Refused};

impl std::fmt::Debug for Principals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Principals").finish_non_exhaustive()
    }
}
