//! Domain: the ZGW Notificaties API's kanalen, kept as catalog entries of the hub. A kanaal
//! `naam` is the catalog entry of the types `nl.vng.zgw.<naam>.` (a prefix) in the source
//! space of the client that registered it; its `filters` are the entry's kenmerken and its
//! `documentatieLink` the entry's documentation.

use std::collections::BTreeMap;

use knooppunt_event::notificatie::{self, FieldError, TYPE_PREFIX};
use knooppunt_store::{ApprovalPolicy, CatalogEntry, SchemaCheck, Subscription, TypeMatch};

use crate::catalog::{Catalog, Draft, Refused};
use crate::identity::zgw::ZgwClient;

/// A kanaal as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kanaal {
    /// The catalog entry's id: the kanaal's uuid.
    pub id: String,
    pub naam: String,
    pub documentatie_link: Option<String>,
    pub filters: Vec<String>,
}

impl Kanaal {
    /// The kanaal a catalog entry is, if it is one.
    pub fn of(entry: &CatalogEntry) -> Option<Kanaal> {
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
pub struct KanaalDraft {
    pub naam: String,
    pub documentatie_link: Option<String>,
    pub filters: Vec<String>,
}

/// The longest kanaal name, in characters (Open Notificaties' `max_length`).
pub const MAX_KANAAL_NAAM: usize = 50;

/// What is wrong with a kanaal's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NaamProblem {
    /// Empty, or only white space.
    Blank,
    /// Longer than this many characters.
    TooLong(usize),
    /// A character other than a letter, a digit, `-` or `_`.
    Characters,
}

/// The rule of a kanaal's name: 1 to [`MAX_KANAAL_NAAM`] letters, digits, `-` or `_`. The
/// name is part of its events' type (`nl.vng.zgw.<naam>.`), so it holds no dots and no white
/// space.
pub fn check_kanaal_naam(naam: &str) -> Result<(), NaamProblem> {
    if naam.trim().is_empty() {
        Err(NaamProblem::Blank)
    } else if naam.chars().count() > MAX_KANAAL_NAAM {
        Err(NaamProblem::TooLong(MAX_KANAAL_NAAM))
    } else if !naam
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        Err(NaamProblem::Characters)
    } else {
        Ok(())
    }
}

/// Why a kanaal was not registered.
#[derive(Debug, thiserror::Error)]
pub enum KanaalRefused {
    /// A kanaal of that name exists.
    #[error("kanaal met deze naam bestaat al")]
    Taken,
    /// A kanaal's name cannot change (it is part of its events' type).
    #[error("de naam van een kanaal mag niet gewijzigd worden")]
    Renamed,
    #[error(transparent)]
    Catalog(#[from] Refused),
}

/// The kanalen of the catalog, in registration order; only those named `naam` if given.
pub fn kanalen(catalog: &Catalog, naam: Option<&str>) -> Vec<Kanaal> {
    // A kanaal's entry is of the types `nl.vng.zgw.<naam>.`: only those entries are read.
    let wanted = naam.map(|n| format!("{TYPE_PREFIX}{n}."));
    catalog
        .entries_where(|entry| match &wanted {
            Some(event_type) => entry.event_type == *event_type,
            None => entry.event_type.starts_with(TYPE_PREFIX),
        })
        .iter()
        .filter_map(|entry| Kanaal::of(entry))
        .collect()
}

pub fn kanaal(catalog: &Catalog, id: &str) -> Option<Kanaal> {
    catalog.get(id).as_deref().and_then(Kanaal::of)
}

/// The catalog entry kanaal `draft` of `client` becomes, unless a kanaal of that name
/// exists (it is made by `use_case::catalog::create`, which checks that the client may publish
/// what it covers).
pub fn kanaal_entry(
    catalog: &Catalog,
    client: &ZgwClient,
    draft: KanaalDraft,
) -> Result<Draft, KanaalRefused> {
    if !kanalen(catalog, Some(&draft.naam)).is_empty() {
        return Err(KanaalRefused::Taken);
    }
    Ok(entry_of(client, draft))
}

/// The catalog entry kanaal `existing` becomes with `draft` (`PUT` or `PATCH`, as Open
/// Notificaties serves them): its documentation link and filters change, its name may not
/// (it is part of its events' type). Replaced by `use_case::catalog::replace`, which checks that
/// the client owns the entry.
pub fn kanaal_update(
    client: &ZgwClient,
    existing: &Kanaal,
    draft: KanaalDraft,
) -> Result<Draft, KanaalRefused> {
    if draft.naam != existing.naam {
        return Err(KanaalRefused::Renamed);
    }
    Ok(entry_of(client, draft))
}

fn entry_of(client: &ZgwClient, draft: KanaalDraft) -> Draft {
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
    }
}

/// Whether names are consistent with a kanaal's filters as Open Notificaties judges them
/// (`Kanaal.match_filter_names`): the names are all among the filters, or the filters all
/// among the names (so any names on a kanaal without filters). Names are compared as the
/// hub reads kenmerken ([`notificatie::kenmerk_key`]: `verantwoordelijkeOrganisatie` is
/// `verantwoordelijke_organisatie`).
pub fn consistent_with_filters<'a>(
    kanaal: &Kanaal,
    names: impl IntoIterator<Item = &'a String>,
) -> bool {
    use std::collections::BTreeSet;
    let key = |name: &String| notificatie::kenmerk_key(name).unwrap_or_else(|| name.clone());
    let filters: BTreeSet<String> = kanaal.filters.iter().map(key).collect();
    let names: BTreeSet<String> = names.into_iter().map(key).collect();
    filters.is_subset(&names) || names.is_subset(&filters)
}

/// How far in the future an `aanmaakdatum` may be (clocks differ a little); one without
/// offset, read as UTC, may be two hours more ahead (the Dutch offsets).
pub const AANMAAKDATUM_LEEWAY_MS: u64 = 60_000;

/// Whether a notificatie may be published at `now_ms`: its kanaal exists, its kenmerken are
/// consistent with the kanaal's filters ([`consistent_with_filters`]) and its
/// `aanmaakdatum` is not in the future (as Open Notificaties checks); every problem, in the
/// API's shape.
pub fn check_notificatie(
    catalog: &Catalog,
    notificatie: &knooppunt_event::notificatie::Notificatie,
    now_ms: u64,
) -> Result<(), Vec<knooppunt_event::notificatie::FieldError>> {
    let mut errors = Vec::new();
    if let Some((at, naive)) = notificatie.aanmaakdatum_ms() {
        let leeway = AANMAAKDATUM_LEEWAY_MS + if naive { 2 * 3_600_000 } else { 0 };
        if at > now_ms.saturating_add(leeway) {
            errors.push(FieldError {
                name: "aanmaakdatum".into(),
                code: "future_not_allowed",
                reason: "Ensure this value is not in the future.".into(),
            });
        }
    }
    match kanalen(catalog, Some(&notificatie.kanaal))
        .into_iter()
        .next()
    {
        None => errors.push(FieldError {
            name: "kanaal".into(),
            code: "kanaal_not_found",
            reason: format!("Kanaal `{}` bestaat niet.", notificatie.kanaal),
        }),
        Some(kanaal) if !consistent_with_filters(&kanaal, notificatie.kenmerken.keys()) => {
            let names: Vec<&str> = notificatie.kenmerken.keys().map(String::as_str).collect();
            errors.push(FieldError {
                name: "kenmerken".into(),
                code: "kenmerken_inconsistent",
                reason: format!(
                    "Kenmerken aren't consistent with kanaal filters: {} are neither among \
                     nor all of {}",
                    names.join(", "),
                    kanaal.filters.join(", ")
                ),
            });
        }
        Some(_) => {}
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// An abonnement: a subscription of the hub owned by a ZGW client, delivering the
/// notificaties of its kanalen (in binary mode: the body is the notificatie) to its
/// callback with its `auth` as `Authorization`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Abonnement {
    /// The subscription's id.
    pub id: String,
    pub callback_url: String,
    pub kanalen: Vec<(String, BTreeMap<String, String>)>,
    /// It receives CloudEvents (Open Notificaties' `sendCloudevents`).
    pub send_cloudevents: bool,
    /// The CloudEvents it receives (`cloudeventFilters`).
    pub cloudevent_filters: Vec<CloudEventFilter>,
}

/// What a client asks to subscribe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbonnementDraft {
    pub callback_url: String,
    pub auth: String,
    pub kanalen: Vec<(String, BTreeMap<String, String>)>,
    /// As [`Abonnement::send_cloudevents`].
    pub send_cloudevents: bool,
    /// As [`Abonnement::cloudevent_filters`].
    pub cloudevent_filters: Vec<CloudEventFilter>,
}

/// One of an abonnement's `cloudeventFilters`: a substring of the types it receives, and
/// filters on the members of the event's data (as Open Notificaties judges them).
pub type CloudEventFilter = (String, BTreeMap<String, String>);

/// The filter of CloudEvents whose type contains the substring and whose data passes the
/// filters: CESQL, `type LIKE '%…%'` (its `%`, `_` and quotes escaped) and
/// `KNOOPPUNT_DATA_MATCHES(key, value)` per data filter (the hub's CESQL function);
/// [`type_substring_of`] reads it back.
pub fn type_substring_filter((substring, data): &CloudEventFilter) -> serde_json::Value {
    let escape = |text: &str, like: bool| {
        let mut escaped = String::with_capacity(text.len() + 8);
        for c in text.chars() {
            if c == '\'' || (like && matches!(c, '%' | '_')) {
                escaped.push('\\');
            }
            escaped.push(c);
        }
        escaped
    };
    let mut sql = format!("type LIKE '%{}%'", escape(substring, true));
    for (key, value) in data {
        sql.push_str(&format!(
            " AND KNOOPPUNT_DATA_MATCHES('{}', '{}')",
            escape(key, false),
            escape(value, false)
        ));
    }
    serde_json::json!({ "sql": sql })
}

/// A CESQL string literal's text (its `\'` a quote) and what follows its closing quote.
fn sql_literal(raw: &str) -> Option<(String, &str)> {
    let mut text = String::new();
    let mut chars = raw.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '\\' if chars.peek().is_some_and(|(_, next)| *next == '\'') => {
                chars.next();
                text.push('\'');
            }
            '\'' => return Some((text, &raw[at + 1..])),
            other => text.push(other),
        }
    }
    None
}

/// The cloudevent filter of a filter [`type_substring_filter`] made.
pub fn type_substring_of(filter: &serde_json::Value) -> Option<CloudEventFilter> {
    let sql = filter.get("sql")?.as_str()?;
    let (pattern, mut rest) = sql_literal(sql.strip_prefix("type LIKE '")?)?;
    let pattern = pattern.strip_prefix('%')?.strip_suffix('%')?;
    let mut substring = String::with_capacity(pattern.len());
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('\\', Some('%' | '_')) => substring.extend(chars.next()),
            _ => substring.push(c),
        }
    }
    let mut data = BTreeMap::new();
    while !rest.is_empty() {
        let (key, after) = sql_literal(rest.strip_prefix(" AND KNOOPPUNT_DATA_MATCHES('")?)?;
        let (value, after) = sql_literal(after.strip_prefix(", '")?)?;
        rest = after.strip_prefix(')')?;
        data.insert(key, value);
    }
    Some((substring, data))
}

/// The subscription filters of an abonnement's kanalen (one filter: any of them), when its
/// kanalen exist and their filters are among the kanalen's; else every problem.
pub fn abonnement_filters(
    catalog: &Catalog,
    draft: &AbonnementDraft,
) -> Result<Vec<serde_json::Value>, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut per_kanaal = Vec::new();
    for (n, (naam, filters)) in draft.kanalen.iter().enumerate() {
        let Some(kanaal) = kanalen(catalog, Some(naam)).into_iter().next() else {
            errors.push(FieldError {
                name: format!("kanalen.{n}.naam"),
                code: "kanaal_not_found",
                reason: format!("Kanaal `{naam}` bestaat niet."),
            });
            continue;
        };
        if !filters.is_empty() && !consistent_with_filters(&kanaal, filters.keys()) {
            let names: Vec<&str> = filters.keys().map(String::as_str).collect();
            errors.push(FieldError {
                name: format!("kanalen.{n}.filters"),
                code: "inconsistent-abonnement-filters",
                reason: format!(
                    "abonnement filters aren't consistent with kanaal filters: {} are neither \
                     among nor all of {}",
                    names.join(", "),
                    kanaal.filters.join(", ")
                ),
            });
            continue;
        }
        match notificatie::kanaal_filter(naam, filters) {
            Some(filter) => per_kanaal.push(filter),
            None => errors.push(FieldError {
                name: format!("kanalen.{n}.filters"),
                code: "invalid",
                reason: "een filtersleutel bestaat uit letters, cijfers, `_`, `-` en `.`".into(),
            }),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    per_kanaal.extend(draft.cloudevent_filters.iter().map(type_substring_filter));
    Ok(vec![serde_json::json!({"any": per_kanaal})])
}

/// The abonnement a subscription is, if it is one (a ZGW client's, with filters made by
/// [`abonnement_filters`]); the filter keys in the case the kanaal names them.
pub fn abonnement_of(catalog: &Catalog, subscription: &Subscription) -> Option<Abonnement> {
    let send_cloudevents = match subscription.delivery_config().mode {
        knooppunt_store::DeliveryMode::Notificatie => false,
        knooppunt_store::DeliveryMode::ZgwCloudEvent => true,
        _ => return None,
    };
    let mut cloudevent_filters = Vec::new();
    let [filter] = subscription.filters.as_slice() else {
        return None;
    };
    let mut kanalen_of = Vec::new();
    for part in filter.get("any")?.as_array()? {
        if let Some(filter) = type_substring_of(part) {
            cloudevent_filters.push(filter);
            continue;
        }
        let (naam, lowered) = notificatie::kanaal_of_filter(part)?;
        let names = kanalen(catalog, Some(&naam))
            .into_iter()
            .next()
            .map(|k| k.filters)
            .unwrap_or_default();
        let filters = lowered
            .into_iter()
            .map(|(key, value)| {
                let original = names
                    .iter()
                    .find(|n| notificatie::kenmerk_key(n).as_deref() == Some(key.as_str()))
                    .cloned()
                    .unwrap_or(key);
                (original, value)
            })
            .collect();
        kanalen_of.push((naam, filters));
    }
    Some(Abonnement {
        id: subscription.id.clone(),
        callback_url: subscription.sink.to_string(),
        kanalen: kanalen_of,
        send_cloudevents,
        cloudevent_filters,
    })
}

/// An abonnement's `callbackUrl` as a sink: an http(s) URL, as the Notificaties API has it.
fn http_sink(callback_url: &str) -> Result<knooppunt_store::Sink, String> {
    let sink = knooppunt_store::Sink::parse(callback_url)?;
    if !sink.is_for(knooppunt_store::Protocol::Http) {
        return Err(format!("`{callback_url}` is not an http(s) URL"));
    }
    Ok(sink)
}

/// The hub subscription an abonnement is: in `notificatie` mode (the body is the
/// notificatie, as ZGW consumers expect it; one built from the attributes of a native
/// CloudEvent of a kanaal type), unordered, `auth` as the `Authorization` of every callback.
pub fn subscription_of(
    client: &ZgwClient,
    id: String,
    draft: &AbonnementDraft,
    filters: Vec<serde_json::Value>,
    defaults: &knooppunt_store::ConfigDefaults,
) -> Result<Subscription, String> {
    let now = knooppunt_store::now_ms();
    // Retried for a day, as the NRCs ZGW components know do, whatever the hub's defaults.
    let config = std::collections::BTreeMap::from([
        (
            "mode".to_owned(),
            if draft.send_cloudevents {
                "zgw-cloudevent"
            } else {
                "notificatie"
            }
            .to_owned(),
        ),
        ("ordering".to_owned(), "unordered".to_owned()),
        ("ttl".to_owned(), "PT24H".to_owned()),
    ]);
    let config =
        knooppunt_store::SubscriptionConfig::parse(&config, defaults).map_err(|errors| {
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        })?;
    Ok(Subscription {
        id,
        owner: client.principal().name,
        label: None,
        sink: http_sink(&draft.callback_url)?,
        source: None,
        types: None,
        filters,
        protocol_settings: knooppunt_store::ProtocolSettings::Http(knooppunt_store::HttpSettings {
            headers: std::collections::BTreeMap::from([(
                "Authorization".to_owned(),
                draft.auth.clone(),
            )]),
            method: None,
        }),
        sink_credential: None,
        client_certificate: None,
        config,
        created_at: now,
        updated_at: now,
        status: knooppunt_store::Status::Pending { problem: None },
        validation_token: None,
        signing: None,
    })
}

/// The notificatie Open Notificaties sends to a new abonnement's callback: it must answer
/// 2xx for the abonnement to be made.
pub fn test_notificatie(now_ms: u64) -> String {
    serde_json::json!({
        "kanaal": "test",
        "hoofdObject": "http://some.hoofdobject.nl/",
        "resource": "some_resource",
        "resourceUrl": "http://some.resource.nl/",
        "actie": "create",
        "aanmaakdatum": knooppunt_event::timestamp::utc_timestamp(now_ms),
        "kenmerken": {}
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cloudevent_filter_reads_back_and_matches_as_open_notificaties_judges() {
        let criteria = |filter: &serde_json::Value| knooppunt_filter::Criteria {
            source: None,
            types: None,
            filters: knooppunt_filter::Filter::list_from_json(
                std::slice::from_ref(filter),
                "filters",
                &knooppunt_filter::Limits::DEFAULT,
            )
            .unwrap(),
        };
        let event = |ty: &str, data: serde_json::Value| {
            knooppunt_event::EventBuilder::new("1", "urn:x", ty)
                .datacontenttype("application/json")
                .data(knooppunt_event::Data::Json(
                    knooppunt_event::JsonText::parse(&data.to_string()).unwrap(),
                ))
                .build()
                .unwrap()
        };
        for substring in ["zaken.zaak", "100%_echt", "it's", r"back\slash\%"] {
            for data in [
                BTreeMap::new(),
                BTreeMap::from([("zaak".to_owned(), "1".to_owned())]),
                BTreeMap::from([
                    ("it's".to_owned(), r"a\'b".to_owned()),
                    ("x".into(), "*".into()),
                ]),
            ] {
                let filter = (substring.to_owned(), data);
                let made = type_substring_filter(&filter);
                assert_eq!(type_substring_of(&made), Some(filter.clone()), "{made}");
                let criteria = criteria(&made);
                let passing: serde_json::Map<String, serde_json::Value> = filter
                    .1
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::json!(v)))
                    .collect();
                let ty = format!("a.{substring}.b");
                assert!(criteria.matches(&event(&ty, passing.into())), "{made}");
                assert!(!criteria.matches(&event("nl.overheid.anders", serde_json::json!({}))));
            }
        }
        let filter = (
            "zaken".to_owned(),
            BTreeMap::from([("zaak".into(), "1".into())]),
        );
        let zaak = criteria(&type_substring_filter(&filter));
        assert!(zaak.matches(&event("zaken.x", serde_json::json!({"zaak": "1"}))));
        assert!(!zaak.matches(&event("zaken.x", serde_json::json!({"zaak": "2"}))));
        assert!(zaak.matches(&event("zaken.x", serde_json::json!({"ander": "2"}))));
        let percent = criteria(&type_substring_filter(&(
            "100%_echt".into(),
            BTreeMap::new(),
        )));
        assert!(
            !percent.matches(&event("100 procent echt", serde_json::json!({}))),
            "% and _ are the characters, not wildcards"
        );
    }
}
