//! Domain: the ZGW Notificaties API's kanalen, kept as catalog entries of the hub. A kanaal
//! `naam` is the catalog entry of the types `nl.vng.zgw.<naam>.` (a prefix) in the source
//! space of the client that registered it; its `filters` are the entry's kenmerken and its
//! `documentatieLink` the entry's documentation.

use std::sync::Arc;

use knooppunt_event::notificatie::TYPE_PREFIX;
use knooppunt_store::{ApprovalPolicy, CatalogEntry, SchemaCheck, TypeMatch};

use crate::catalog::{Catalog, Draft, Refused};
use crate::identity::zgw::ZgwClient;

/// A kanaal as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kanaal {
    /// The catalog entry's id: the kanaal's uuid.
    pub(crate) id: String,
    pub(crate) naam: String,
    pub(crate) documentatie_link: Option<String>,
    pub(crate) filters: Vec<String>,
}

impl Kanaal {
    /// The kanaal a catalog entry is, if it is one.
    pub(crate) fn of(entry: &CatalogEntry) -> Option<Kanaal> {
        let naam = entry
            .event_type
            .strip_prefix(TYPE_PREFIX)?
            .strip_suffix('.')?;
        (entry.type_match == TypeMatch::Prefix && !naam.is_empty() && !naam.contains('.')).then(
            || Kanaal {
                id: entry.id.clone(),
                naam: naam.to_owned(),
                documentatie_link: entry.documentation.clone(),
                filters: entry.kenmerken.clone(),
            },
        )
    }
}

/// What a client asks to register.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KanaalDraft {
    pub(crate) naam: String,
    pub(crate) documentatie_link: Option<String>,
    pub(crate) filters: Vec<String>,
}

/// Why a kanaal was not registered.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KanaalRefused {
    /// A kanaal of that name exists.
    #[error("kanaal met deze naam bestaat al")]
    Taken,
    #[error(transparent)]
    Catalog(#[from] Refused),
}

/// The kanalen of the catalog, in registration order; only those named `naam` if given.
pub(crate) fn kanalen(catalog: &Catalog, naam: Option<&str>) -> Vec<Kanaal> {
    let mut kanalen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let (page, more) = catalog.page(cursor.as_deref(), 1000);
        kanalen.extend(
            page.iter()
                .filter_map(|entry| Kanaal::of(entry))
                .filter(|k| naam.is_none_or(|n| k.naam == n)),
        );
        match page.last() {
            Some(last) if more => cursor = Some(last.id.clone()),
            _ => return kanalen,
        }
    }
}

pub(crate) fn kanaal(catalog: &Catalog, id: &str) -> Option<Kanaal> {
    catalog.get(id).as_deref().and_then(Kanaal::of)
}

/// Registers a kanaal for `client` (which must be allowed to publish), unique by name.
pub(crate) async fn register(
    catalog: &Catalog,
    client: &ZgwClient,
    draft: KanaalDraft,
) -> Result<Kanaal, KanaalRefused> {
    if !kanalen(catalog, Some(&draft.naam)).is_empty() {
        return Err(KanaalRefused::Taken);
    }
    let entry: Arc<CatalogEntry> = catalog
        .create(
            &client.principal(),
            Draft {
                source_prefix: client.source(),
                event_type: format!("{TYPE_PREFIX}{}.", draft.naam),
                type_match: TypeMatch::Prefix,
                description: format!("ZGW-kanaal {} (Notificaties API)", draft.naam),
                documentation: draft.documentatie_link,
                dataschema: None,
                schema: None,
                schema_check: SchemaCheck::Off,
                deprecated: false,
                approval: ApprovalPolicy::Open,
                kenmerken: draft.filters,
            },
        )
        .await?;
    Ok(Kanaal::of(&entry).expect("a kanaal's entry is a kanaal"))
}

/// Whether a notificatie may be published: its kanaal exists, and its kenmerken are among
/// the kanaal's filters (as Open Notificaties checks); every problem, in the API's shape.
pub(crate) fn check_notificatie(
    catalog: &Catalog,
    notificatie: &knooppunt_event::notificatie::Notificatie,
) -> Result<(), Vec<knooppunt_event::notificatie::FieldError>> {
    use knooppunt_event::notificatie::FieldError;
    let Some(kanaal) = kanalen(catalog, Some(&notificatie.kanaal))
        .into_iter()
        .next()
    else {
        return Err(vec![FieldError {
            name: "kanaal".into(),
            code: "kanaal_not_found",
            reason: format!("Kanaal `{}` bestaat niet.", notificatie.kanaal),
        }]);
    };
    let unknown: Vec<&str> = notificatie
        .kenmerken
        .keys()
        .filter(|key| !kanaal.filters.contains(key))
        .map(String::as_str)
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    Err(vec![FieldError {
        name: "kenmerken".into(),
        code: "kenmerken_inconsistent",
        reason: format!(
            "Kenmerken aren't consistent with kanaal filters: {} not among {}",
            unknown.join(", "),
            kanaal.filters.join(", ")
        ),
    }])
}
