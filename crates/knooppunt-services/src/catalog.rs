//! The event type catalog: the one writer of its entries. An entry says what a publisher's
//! events of a source prefix and a type are, and whether the data owner must approve who
//! receives them. Only its owner (a publisher that may publish the entry's source prefix)
//! or an admin changes it. Store first, then the in-memory table, under one lock.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use knooppunt_store::{
    ApprovalPolicy, CatalogEntry, SchemaCheck, Store, StoreError, TypeMatch, now_ms,
};

use crate::identity::{Principal, Role, SourceRefused};

/// What a publisher says of an entry (the rest is the hub's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draft {
    pub source_prefix: String,
    pub event_type: String,
    pub type_match: TypeMatch,
    pub description: String,
    pub documentation: Option<String>,
    pub dataschema: Option<String>,
    /// A JSON Schema for the events' data (as JSON text), and how strictly it holds.
    pub schema: Option<String>,
    pub schema_check: SchemaCheck,
    pub deprecated: bool,
    pub approval: ApprovalPolicy,
    /// The attributes subscribers may filter on (a ZGW kanaal's filters).
    pub kenmerken: Vec<String>,
}

/// What the catalog says of an event it covers.
#[derive(Clone)]
pub struct Covered {
    /// One of the entries that cover it is deprecated.
    pub deprecated: bool,
    /// The approval-required entries that cover it: it reaches only subscriptions holding
    /// a grant for each.
    pub gated: Vec<Arc<CatalogEntry>>,
    /// The schemas its data is to be checked against: the entry's id, how strictly, and
    /// the compiled schema.
    pub schemas: Vec<(String, SchemaCheck, Arc<jsonschema::Validator>)>,
}

/// The largest JSON Schema an entry may carry, in bytes.
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// Compiles a JSON Schema as the catalog uses it: no remote or file references (nothing is
/// fetched), patterns with the linear-time `regex` engine, formats checked. What is wrong
/// with it, when it is not one.
pub fn compile_schema(text: &str) -> Result<jsonschema::Validator, String> {
    if text.len() > MAX_SCHEMA_BYTES {
        return Err(format!(
            "is {} bytes; a schema may have at most {MAX_SCHEMA_BYTES}",
            text.len()
        ));
    }
    let schema: serde_json::Value =
        serde_json::from_str(text).map_err(|error| format!("is not JSON: {error}"))?;
    jsonschema::options()
        .with_retriever(NoRetrieval)
        .with_pattern_options(jsonschema::PatternOptions::regex().size_limit(1 << 20))
        .should_validate_formats(true)
        .build(&schema)
        .map_err(|error| format!("is not a usable JSON Schema: {error}"))
}

/// References outside the schema are never fetched (no network, no files).
struct NoRetrieval;

impl jsonschema::Retrieve for NoRetrieval {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<serde_json::Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!("`{uri}` is outside the schema; the hub fetches no references").into())
    }
}

pub use crate::refused::{Missing, Refused};

pub struct Catalog {
    store: Arc<dyn Store>,
    entries: RwLock<Entries>,
    writes: tokio::sync::Mutex<()>,
    reserve_oin_sources: bool,
}

/// The entries by id, and indexed by type for publishing: an exact type is one hash look-up,
/// the (few) type-prefix entries are scanned.
#[derive(Default)]
struct Entries {
    by_id: BTreeMap<String, Arc<CatalogEntry>>,
    /// The compiled schemas of the entries that check one.
    schemas: std::collections::HashMap<String, Arc<jsonschema::Validator>>,
    exact: std::collections::HashMap<String, Vec<Arc<CatalogEntry>>>,
    prefixes: Vec<Arc<CatalogEntry>>,
}

impl Entries {
    /// Files `entry` with its compiled schema (when it checks one).
    fn insert(&mut self, entry: Arc<CatalogEntry>, schema: Option<Arc<jsonschema::Validator>>) {
        self.remove(&entry.id);
        if let Some(validator) = schema {
            self.schemas.insert(entry.id.clone(), validator);
        }
        match entry.type_match {
            TypeMatch::Exact => self
                .exact
                .entry(entry.event_type.clone())
                .or_default()
                .push(Arc::clone(&entry)),
            TypeMatch::Prefix => self.prefixes.push(Arc::clone(&entry)),
        }
        self.by_id.insert(entry.id.clone(), entry);
    }

    fn remove(&mut self, id: &str) {
        let Some(old) = self.by_id.remove(id) else {
            return;
        };
        self.schemas.remove(id);
        if let Some(list) = self.exact.get_mut(&old.event_type) {
            list.retain(|e| e.id != id);
            if list.is_empty() {
                self.exact.remove(&old.event_type);
            }
        }
        self.prefixes.retain(|e| e.id != id);
    }
}

impl Catalog {
    pub async fn load(
        store: Arc<dyn Store>,
        reserve_oin_sources: bool,
    ) -> Result<Catalog, StoreError> {
        let catalog = Catalog {
            store,
            entries: RwLock::default(),
            writes: tokio::sync::Mutex::new(()),
            reserve_oin_sources,
        };
        catalog.reload().await?;
        Ok(catalog)
    }

    /// Reads the entries again (another hub changed them).
    pub async fn reload(&self) -> Result<(), StoreError> {
        let _writer = self.writes.lock().await;
        let loaded = self.store.catalog_entries().await?;
        let mut entries = Entries::default();
        let current = self.entries.read().expect("catalog lock");
        for entry in loaded {
            // An entry as it was keeps its compiled schema: only changed ones compile.
            let schema = match current.by_id.get(&entry.id) {
                Some(known) if **known == entry => current.schemas.get(&entry.id).cloned(),
                _ => stored_schema(&entry),
            };
            entries.insert(Arc::new(entry), schema);
        }
        drop(current);
        *self.entries.write().expect("catalog lock") = entries;
        Ok(())
    }

    pub fn get(&self, id: &str) -> Option<Arc<CatalogEntry>> {
        self.entries
            .read()
            .expect("catalog lock")
            .by_id
            .get(id)
            .cloned()
    }

    /// The entries `keep` chooses, in id order (one pass under the lock, nothing paged).
    pub fn entries_where(&self, keep: impl Fn(&CatalogEntry) -> bool) -> Vec<Arc<CatalogEntry>> {
        self.entries
            .read()
            .expect("catalog lock")
            .by_id
            .values()
            .filter(|entry| keep(entry))
            .cloned()
            .collect()
    }

    /// Up to `size` entries after `cursor` in id order, and whether there are more.
    pub fn page(&self, cursor: Option<&str>, size: usize) -> (Vec<Arc<CatalogEntry>>, bool) {
        let entries = self.entries.read().expect("catalog lock");
        let mut after = entries
            .by_id
            .iter()
            .filter(|(id, _)| cursor.is_none_or(|c| id.as_str() > c))
            .map(|(_, entry)| Arc::clone(entry));
        let page: Vec<_> = after.by_ref().take(size).collect();
        (page, after.next().is_some())
    }

    /// The owners of the entries that cover events of `source` and `event_type`.
    pub fn owners_of(&self, source: &str, event_type: &str) -> Vec<String> {
        let entries = self.entries.read().expect("catalog lock");
        let exact = entries.exact.get(event_type).into_iter().flatten();
        exact
            .chain(&entries.prefixes)
            .filter(|e| e.covers(source, event_type))
            .map(|e| e.owner.clone())
            .collect()
    }

    /// The entries whose events only approved subscriptions receive.
    pub fn gated(&self) -> Vec<Arc<CatalogEntry>> {
        self.entries
            .read()
            .expect("catalog lock")
            .by_id
            .values()
            .filter(|e| e.approval == ApprovalPolicy::ApprovalRequired)
            .cloned()
            .collect()
    }

    /// What the catalog says of each event (by source and type): `None` when no entry covers
    /// it, else whether one of the entries that do is deprecated.
    pub fn look_up<'a>(
        &self,
        events: impl Iterator<Item = (&'a str, &'a str)>,
    ) -> Vec<Option<Covered>> {
        let entries = self.entries.read().expect("catalog lock");
        events
            .map(|(source, event_type)| {
                let exact = entries.exact.get(event_type).into_iter().flatten();
                let mut covering = exact
                    .chain(&entries.prefixes)
                    .filter(|entry| entry.covers(source, event_type))
                    .peekable();
                covering.peek()?;
                let mut covered = Covered {
                    deprecated: false,
                    gated: Vec::new(),
                    schemas: Vec::new(),
                };
                for entry in covering {
                    covered.deprecated |= entry.deprecated;
                    if entry.approval == ApprovalPolicy::ApprovalRequired {
                        covered.gated.push(Arc::clone(entry));
                    }
                    if let Some(validator) = entries.schemas.get(&entry.id) {
                        covered.schemas.push((
                            entry.id.clone(),
                            entry.schema_check,
                            Arc::clone(validator),
                        ));
                    }
                }
                Some(covered)
            })
            .collect()
    }

    /// Whether `principal` may own an entry of `source_prefix`: a publisher (or an admin)
    /// that may publish every source the prefix covers ([`Principal::may_describe`]).
    fn check_owner(&self, principal: &Principal, source_prefix: &str) -> Result<(), Refused> {
        if !principal.has(Role::Publisher) && !principal.is_admin() {
            return Err(Refused::Forbidden(format!(
                "principal `{}` has no `publisher` role: catalog entries describe one's own events",
                principal.name
            )));
        }
        principal
            .may_describe(source_prefix, self.reserve_oin_sources)
            .map_err(|why| Refused::Forbidden(outside(principal, source_prefix, why)))
    }

    /// Whether `source` is in a source space `principal` publishes as its own (its OIN's, or
    /// one of its prefixes): what it may describe in the catalog.
    pub fn in_own_space(&self, principal: &Principal, source: &str) -> bool {
        principal.has(Role::Publisher)
            && principal
                .may_describe(source, self.reserve_oin_sources)
                .is_ok()
    }

    /// The entries whose owner may not describe their source prefix (stored before this
    /// rule, or the owner's rights changed since), each with why; `owner` finds an owner by
    /// name (`None`: it no longer exists).
    pub fn out_of_bounds(
        &self,
        owner: impl Fn(&str) -> Option<Principal>,
    ) -> Vec<(Arc<CatalogEntry>, String)> {
        self.entries_where(|_| true)
            .into_iter()
            .filter_map(|entry| {
                let why = match owner(&entry.owner) {
                    None => format!("its owner `{}` no longer exists", entry.owner),
                    Some(principal) => self
                        .check_owner(&principal, &entry.source_prefix)
                        .err()?
                        .to_string(),
                };
                Some((entry, why))
            })
            .collect()
    }

    /// Refuses a draft that covers exactly what another entry (not `except`) covers.
    fn check_unique(&self, draft: &Draft, except: Option<&str>) -> Result<(), Refused> {
        let entries = self.entries.read().expect("catalog lock");
        if let Some(other) = entries.by_id.values().find(|e| {
            Some(e.id.as_str()) != except
                && e.source_prefix == draft.source_prefix
                && e.event_type == draft.event_type
                && e.type_match == draft.type_match
        }) {
            return Err(Refused::Conflict(format!(
                "entry {} already covers type `{}` of sources `{}`; change that one",
                other.id, draft.event_type, draft.source_prefix
            )));
        }
        Ok(())
    }

    /// A new entry owned by `principal`.
    pub async fn create(
        &self,
        principal: &Principal,
        draft: Draft,
    ) -> Result<Arc<CatalogEntry>, Refused> {
        self.check_owner(principal, &draft.source_prefix)?;
        let schema = check_schema(&draft)?;
        let _writer = self.writes.lock().await;
        self.check_unique(&draft, None)?;
        let now = now_ms();
        let entry = entry(
            uuid::Uuid::now_v7().to_string(),
            principal.name.clone(),
            draft,
            now,
            now,
        );
        self.store.insert_catalog_entry(&entry).await?;
        Ok(self.file(entry, schema))
    }

    /// Replaces entry `id` with `draft`, when `principal` owns it (or is an admin).
    /// `Ok(None)` when there is none.
    pub async fn replace(
        &self,
        principal: &Principal,
        id: &str,
        draft: Draft,
    ) -> Result<Option<Arc<CatalogEntry>>, Refused> {
        let _writer = self.writes.lock().await;
        let Some(existing) = self.get(id) else {
            return Ok(None);
        };
        self.check_changer(principal, &existing)?;
        if !principal.is_admin() {
            self.check_owner(principal, &draft.source_prefix)?;
        }
        let schema = check_schema(&draft)?;
        self.check_unique(&draft, Some(id))?;
        let entry = entry(
            existing.id.clone(),
            existing.owner.clone(),
            draft,
            existing.created_at,
            now_ms(),
        );
        if !self.store.update_catalog_entry(&entry).await? {
            return Ok(None);
        }
        Ok(Some(self.file(entry, schema)))
    }

    /// Deletes entry `id`, when `principal` owns it (or is an admin); `false` when there is
    /// none.
    pub async fn delete(&self, principal: &Principal, id: &str) -> Result<bool, Refused> {
        let _writer = self.writes.lock().await;
        let Some(existing) = self.get(id) else {
            return Ok(false);
        };
        self.check_changer(principal, &existing)?;
        if !self.store.delete_catalog_entry(id).await? {
            return Ok(false);
        }
        self.entries.write().expect("catalog lock").remove(id);
        Ok(true)
    }

    /// Whether `principal` may change (replace or delete) entry `id`: asked by a surface
    /// before it shows a form to change it, so that a form is never shown to one who may
    /// not save it. An entry that does not exist is not refused here.
    pub fn may_change(&self, principal: &Principal, id: &str) -> Result<(), Refused> {
        match self.get(id) {
            Some(entry) => self.check_changer(principal, &entry),
            None => Ok(()),
        }
    }

    /// Only the owner or an admin changes an entry.
    fn check_changer(&self, principal: &Principal, entry: &CatalogEntry) -> Result<(), Refused> {
        if principal.is_admin() || principal.name == entry.owner {
            return Ok(());
        }
        Err(Refused::Forbidden(format!(
            "entry {} is owned by `{}`: only its owner or an admin changes it",
            entry.id, entry.owner
        )))
    }

    fn file(
        &self,
        entry: CatalogEntry,
        schema: Option<Arc<jsonschema::Validator>>,
    ) -> Arc<CatalogEntry> {
        let shared = Arc::new(entry);
        self.entries
            .write()
            .expect("catalog lock")
            .insert(Arc::clone(&shared), schema);
        shared
    }
}

/// Why `principal` may not describe the events of `prefix`, for the one who asked.
fn outside(principal: &Principal, prefix: &str, why: SourceRefused) -> String {
    let name = &principal.name;
    match why {
        SourceRefused::OutsidePrefixes => format!(
            "principal `{name}` may publish only sources starting with `{}`, so an entry's \
             source must start with one of them; `{prefix}` would also cover sources outside them",
            principal.publish_source_prefixes.join("`, `"),
        ),
        SourceRefused::OutsideOwnSpace(own) => format!(
            "principal `{name}` publishes only sources starting with `{own}`; make the entry's \
             source start with it (`{prefix}` would also cover other sources)"
        ),
        SourceRefused::OtherOrganisation(oin) => format!(
            "`{prefix}` is in the source space of organisation OIN {oin}: only that \
             organisation (or a supplier whose prefixes name it) describes its events"
        ),
        SourceRefused::AllOrganisations => {
            let spaces: Vec<String> = principal
                .oin
                .iter()
                .map(|oin| format!("urn:nld:oin:{oin}:"))
                .chain(principal.publish_source_prefixes.iter().cloned())
                .collect();
            let inside = if spaces.is_empty() {
                "it has none: an admin gives it an OIN or publish_source_prefixes".to_owned()
            } else {
                format!("start it with `{}`", spaces.join("` or `"))
            };
            format!(
                "`{prefix}` covers the source spaces of every organisation \
                 (`urn:nld:oin:<OIN>:`); an entry's source must lie inside a space principal \
                 `{name}` may publish ({inside}); only an admin describes wider spaces"
            )
        }
        SourceRefused::NoOwnSpace => format!(
            "principal `{name}` has neither an OIN nor publish_source_prefixes, so it has no \
             source space of its own to describe: an admin gives it one (or makes the entry)"
        ),
    }
}

/// A draft's schema compiles, and one that is checked is there: the compiled schema when it
/// is checked.
fn check_schema(draft: &Draft) -> Result<Option<Arc<jsonschema::Validator>>, Refused> {
    match (&draft.schema, draft.schema_check) {
        (None, SchemaCheck::Off) => Ok(None),
        (None, _) => Err(Refused::Invalid(
            "schema",
            "is needed when schemaCheck is `warn` or `enforce`".into(),
        )),
        (Some(text), check) => {
            let validator = compile_schema(text).map_err(|why| Refused::Invalid("schema", why))?;
            Ok((check != SchemaCheck::Off).then(|| Arc::new(validator)))
        }
    }
}

/// The compiled schema of a stored entry that checks one; one this version cannot compile
/// (it compiled when it was stored) is left out, saying so.
fn stored_schema(entry: &CatalogEntry) -> Option<Arc<jsonschema::Validator>> {
    let text = entry
        .schema
        .as_ref()
        .filter(|_| entry.schema_check != SchemaCheck::Off)?;
    compile_schema(text)
        .inspect_err(
            |why| tracing::warn!(entry = %entry.id, %why, "A catalog entry's schema is not used."),
        )
        .ok()
        .map(Arc::new)
}

fn entry(
    id: String,
    owner: String,
    draft: Draft,
    created_at: u64,
    updated_at: u64,
) -> CatalogEntry {
    CatalogEntry {
        id,
        owner,
        source_prefix: draft.source_prefix,
        event_type: draft.event_type,
        type_match: draft.type_match,
        description: draft.description,
        documentation: draft.documentation,
        dataschema: draft.dataschema,
        schema: draft.schema,
        schema_check: draft.schema_check,
        deprecated: draft.deprecated,
        approval: draft.approval,
        kenmerken: draft.kenmerken,
        created_at,
        updated_at,
    }
}

impl std::fmt::Debug for Covered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Covered").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog").finish_non_exhaustive()
    }
}
