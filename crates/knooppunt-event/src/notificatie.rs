//! ZGW notificaties (VNG Notificaties API 1.0, `Message`) and their CloudEvents form, both
//! ways, without losing a byte of the notificatie.
//!
//! A notificatie becomes a CloudEvent whose `data` is the notificatie's JSON text exactly as
//! it was sent (`datacontenttype: application/json`), so it can always be given back byte
//! for byte; the attributes are derived from it for routing:
//!
//! | attribute | from the notificatie |
//! | --- | --- |
//! | `type` | `nl.vng.zgw.<kanaal>.<resource>.<actie>` ([`event_type`]) |
//! | `subject` | `resourceUrl` |
//! | `time` | `aanmaakdatum`, when it is an RFC 3339 timestamp |
//! | `source`, `id` | the publishing client and a new id (the caller's) |
//! | `kenmerk<name>` | each non-empty kenmerk, its name's letters and digits lower-cased ([`kenmerk_attribute`]: `verantwoordelijkeOrganisatie` and `verantwoordelijke_organisatie` are one, as Open Notificaties' camelCase/snake_case conversions make them), so that subscriptions filter on them |
//!
//! The other way, a CloudEvent whose `data` is a notificatie is given back as that
//! notificatie; one of type `nl.vng.zgw.<kanaal>.<resource>.<actie>` with other data becomes
//! a notificatie built from its attributes ([`Notificatie::from_event`]).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::builder::EventBuilder;
use crate::data::{Data, JsonText};
use crate::event::Event;

/// The prefix of the CloudEvents types of notificaties.
pub const TYPE_PREFIX: &str = "nl.vng.zgw.";

/// The extension attribute a kenmerk is carried in: `kenmerk` and the letters and digits of
/// its name in lower case (`zaaktype.catalogus` is `kenmerkzaaktypecatalogus`). Open
/// Notificaties compares kenmerken in camelCase after reading them in snake_case, so
/// `verantwoordelijkeOrganisatie` and `verantwoordelijke_organisatie` are one kenmerk there,
/// as here ([`kenmerk_key`]). `None` for a name without letters or digits, or with other
/// characters than letters, digits, `_`, `-` and `.` (those stay in `data` alone).
pub fn kenmerk_attribute(name: &str) -> Option<String> {
    kenmerk_key(name).map(|key| format!("kenmerk{key}"))
}

/// A kenmerk's name as the hub compares it: its letters and digits, lower case.
pub fn kenmerk_key(name: &str) -> Option<String> {
    let usable = name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    let key: String = name
        .bytes()
        .filter(u8::is_ascii_alphanumeric)
        .map(|b| char::from(b.to_ascii_lowercase()))
        .collect();
    (usable && !key.is_empty()).then_some(key)
}

/// An abonnement's filters for one kanaal as CloudEvents Subscriptions API filters, with
/// Open Notificaties' rule: per filter key, the kenmerk equals the value, or the filter is
/// `*`, or the notificatie has no such kenmerk. `None` for a key that cannot be an attribute
/// name ([`kenmerk_attribute`]). [`kanaal_of_filter`] reads one back.
pub fn kanaal_filter(kanaal: &str, filters: &BTreeMap<String, String>) -> Option<Value> {
    let mut all = vec![serde_json::json!({"prefix": {"type": format!("{TYPE_PREFIX}{kanaal}.")}})];
    for (key, wanted) in filters {
        let attribute = kenmerk_attribute(key)?;
        // `*` matches anything; it is kept (always true) so that the filter reads back.
        let exact = if wanted == "*" {
            serde_json::json!({"sql": format!("EXISTS {attribute}")})
        } else {
            serde_json::json!({"exact": {attribute.clone(): wanted}})
        };
        all.push(serde_json::json!({"any": [exact, {"sql": format!("NOT EXISTS {attribute}")}]}));
    }
    Some(serde_json::json!({"all": all}))
}

/// The kanaal and the filters of a filter [`kanaal_filter`] made; the filter keys as the
/// attributes name them (lower case).
pub fn kanaal_of_filter(filter: &Value) -> Option<(String, BTreeMap<String, String>)> {
    let all = filter.get("all")?.as_array()?;
    let (first, rest) = all.split_first()?;
    let kanaal = first
        .get("prefix")?
        .get("type")?
        .as_str()?
        .strip_prefix(TYPE_PREFIX)?
        .strip_suffix('.')?
        .to_owned();
    let mut filters = BTreeMap::new();
    for part in rest {
        let any = part.get("any")?.as_array()?;
        let (key, value) = match any.first()? {
            Value::Object(o) if o.contains_key("exact") => {
                let (attribute, value) = o["exact"].as_object()?.iter().next()?;
                (attribute.clone(), value.as_str()?.to_owned())
            }
            Value::Object(o) if o.contains_key("sql") => {
                let attribute = o["sql"].as_str()?.strip_prefix("EXISTS ")?;
                (attribute.to_owned(), "*".to_owned())
            }
            _ => return None,
        };
        filters.insert(key.strip_prefix("kenmerk")?.to_owned(), value);
    }
    Some((kanaal, filters))
}

/// The CloudEvents `type` of a notificatie.
pub fn event_type(kanaal: &str, resource: &str, actie: &str) -> String {
    format!("{TYPE_PREFIX}{kanaal}.{resource}.{actie}")
}

/// One problem with a notificatie, in the shape of the API's `FieldValidationError`: the
/// field, a system code as Open Notificaties gives it, and the reason (in Dutch, as the
/// ZGW APIs give them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub name: String,
    pub code: &'static str,
    pub reason: String,
}

impl FieldError {
    fn new(name: impl Into<String>, code: &'static str, reason: impl Into<String>) -> Self {
        FieldError {
            name: name.into(),
            code,
            reason: reason.into(),
        }
    }
}

/// A valid notificatie, with the exact JSON text it came as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notificatie {
    text: JsonText,
    pub kanaal: String,
    pub hoofd_object: String,
    pub resource: String,
    pub resource_url: String,
    pub actie: String,
    pub aanmaakdatum: String,
    /// The `kenmerken`, by key.
    pub kenmerken: BTreeMap<String, String>,
    /// Its `source` (Open Notificaties' addition: the system or organisation it comes from),
    /// when it has one.
    pub source: Option<String>,
}

/// The bounds of the API's `Message` schema.
const MAX_KANAAL: usize = 50;
const MAX_RESOURCE: usize = 100;
const MAX_ACTIE: usize = 100;
const MAX_KENMERK: usize = 1000;
const MAX_SOURCE: usize = 100;
/// Not in the schema: the hub's own bound on the URLs (the schema sets none).
const MAX_URL: usize = 1000;

impl Notificatie {
    /// Reads a notificatie (`Message`) as the API's `POST /notificaties` takes it, every
    /// problem reported.
    pub fn read(text: &str) -> Result<Notificatie, Vec<FieldError>> {
        let json = JsonText::parse(text).map_err(|error| {
            vec![FieldError::new(
                "nonFieldErrors",
                "parse_error",
                format!("JSON parse error - {error}"),
            )]
        })?;
        let value: Value = json.to_value().map_err(|error| {
            vec![FieldError::new(
                "nonFieldErrors",
                "parse_error",
                format!("JSON parse error - {error}"),
            )]
        })?;
        let Value::Object(object) = value else {
            return Err(vec![FieldError::new(
                "nonFieldErrors",
                "invalid",
                "Ongeldige data. Verwachtte een dictionary, kreeg een ander type.",
            )]);
        };
        let mut errors = Vec::new();
        let kanaal = text_field(&object, "kanaal", MAX_KANAAL, &mut errors);
        let hoofd_object = url_field(&object, "hoofdObject", &mut errors);
        let resource = text_field(&object, "resource", MAX_RESOURCE, &mut errors);
        let resource_url = url_field(&object, "resourceUrl", &mut errors);
        let actie = text_field(&object, "actie", MAX_ACTIE, &mut errors);
        let aanmaakdatum = date_time_field(&object, "aanmaakdatum", &mut errors);
        let kenmerken = kenmerken(&object, &mut errors);
        let source = object
            .contains_key("source")
            .then(|| text_field(&object, "source", MAX_SOURCE, &mut errors));
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Notificatie {
            text: json,
            kanaal,
            hoofd_object,
            resource,
            resource_url,
            actie,
            aanmaakdatum,
            kenmerken,
            source,
        })
    }

    /// The CloudEvent Open Notificaties sends an abonnement with `sendCloudevents` for this
    /// notificatie (`_transform_to_cloudevent` in its tasks): type
    /// `nl.overheid.<kanaal>.<resource>.<actie>`, `subject` the last part of `resourceUrl`,
    /// `time` the `aanmaakdatum`, `data` the kenmerken with `hoofdObject`; its `source`, or
    /// `source` when it has none; with this `id`.
    pub fn open_notificaties_cloudevent(&self, id: &str, source: &str) -> Value {
        let mut data: Map<String, Value> = self
            .kenmerken
            .iter()
            .map(|(key, value)| (key.clone(), Value::from(value.as_str())))
            .collect();
        data.insert(
            "hoofdObject".into(),
            Value::from(self.hoofd_object.as_str()),
        );
        let subject = self.resource_url.rsplit('/').next().unwrap_or_default();
        serde_json::json!({
            "id": id,
            "source": self.source.as_deref().unwrap_or(source),
            "specversion": "1.0",
            "type": format!("nl.overheid.{}.{}.{}", self.kanaal, self.resource, self.actie),
            "datacontenttype": "application/json",
            "subject": subject,
            "time": self.aanmaakdatum,
            "data": data,
        })
    }

    /// The notificatie exactly as it was sent.
    pub fn json(&self) -> &str {
        self.text.as_str()
    }

    /// Its CloudEvents `type`.
    pub fn event_type(&self) -> String {
        event_type(&self.kanaal, &self.resource, &self.actie)
    }

    /// The CloudEvent that carries it, with this `source` and `id`: `data` is the
    /// notificatie's text unchanged.
    pub fn to_event(&self, source: &str, id: &str) -> Result<Event, crate::Violations> {
        let mut builder = EventBuilder::new(id, source, self.event_type())
            .datacontenttype("application/json")
            .subject(self.resource_url.clone())
            .data(Data::Json(self.text.clone()));
        if crate::validate::syntax::timestamp(&self.aanmaakdatum).is_ok() {
            builder = builder.time(self.aanmaakdatum.clone());
        }
        // Two kenmerken whose names differ in case or punctuation only would be one
        // attribute: neither is carried as one (both stay in `data`).
        let attributes: Vec<(String, &String)> = self
            .kenmerken
            .iter()
            .filter(|(_, value)| !value.is_empty())
            .filter_map(|(name, value)| Some((kenmerk_attribute(name)?, value)))
            .collect();
        for (attribute, value) in &attributes {
            if attributes.iter().filter(|(a, _)| a == attribute).count() == 1 {
                builder = builder.extension(attribute.clone(), (*value).clone());
            }
        }
        builder.build()
    }

    /// The notificatie an event stands for: its `data` when that is a notificatie (the
    /// exact text), else one built from the attributes of an event of type
    /// `nl.vng.zgw.<kanaal>.<resource>.<actie>` (`hoofdObject` and `resourceUrl` from
    /// `subject`, `aanmaakdatum` from `time`, `kenmerken` from its `kenmerk<name>`
    /// extensions). `None` when the event is neither.
    pub fn from_event(event: &Event) -> Option<Notificatie> {
        Notificatie::from_event_or_why(event, None).ok()
    }

    /// The same, or what keeps the event from being a notificatie, in a sentence that
    /// quotes at most a short piece of any attribute. An event without `time` has the
    /// moment it was `accepted` (milliseconds since the Unix epoch) as its `aanmaakdatum`,
    /// when that is given.
    pub fn from_event_or_why(event: &Event, accepted: Option<u64>) -> Result<Notificatie, String> {
        let data_problem = match event.data() {
            Some(Data::Json(json)) => match Notificatie::read(json.as_str()) {
                Ok(notificatie) => return Ok(notificatie),
                Err(errors) => {
                    let named: Vec<String> = errors
                        .iter()
                        .take(3)
                        .map(|e| format!("{}: {}", e.name, short(&e.reason)))
                        .collect();
                    format!("its data is no notificatie ({})", named.join("; "))
                }
            },
            Some(_) => "its data is not JSON".to_owned(),
            None => "it has no data".to_owned(),
        };
        let why = |what: &str| {
            format!(
                "event `{}` is not a ZGW notificatie: {data_problem}, and {what}",
                short(event.id())
            )
        };
        let rest = event.ty().strip_prefix(TYPE_PREFIX);
        let mut parts = rest.unwrap_or_default().splitn(3, '.');
        let (Some(kanaal), Some(resource), Some(actie)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(why(&format!(
                "its type `{}` is not {TYPE_PREFIX}<kanaal>.<resource>.<actie>",
                short(event.ty())
            )));
        };
        if rest.is_none() {
            return Err(why(&format!(
                "its type `{}` is not {TYPE_PREFIX}<kanaal>.<resource>.<actie>",
                short(event.ty())
            )));
        }
        let url = event
            .subject()
            .ok_or_else(|| why("it has no subject (the resource's URL)"))?;
        let time = event
            .time()
            .map(str::to_owned)
            .or_else(|| accepted.map(crate::timestamp::utc_timestamp))
            .ok_or_else(|| why("it has no time (the aanmaakdatum)"))?;
        let mut object = Map::new();
        object.insert("kanaal".into(), Value::from(kanaal));
        object.insert("hoofdObject".into(), Value::from(url));
        object.insert("resource".into(), Value::from(resource));
        object.insert("resourceUrl".into(), Value::from(url));
        object.insert("actie".into(), Value::from(actie));
        object.insert("aanmaakdatum".into(), Value::from(time));
        // Its `kenmerk<name>` extensions are its kenmerken (names as the attributes have
        // them: lower case).
        let kenmerken: Map<String, Value> = event
            .extensions()
            .iter()
            .filter_map(|(name, value)| {
                let key = name.strip_prefix("kenmerk").filter(|k| !k.is_empty())?;
                Some((key.to_owned(), Value::from(value.to_string())))
            })
            .collect();
        object.insert("kenmerken".into(), Value::Object(kenmerken));
        Notificatie::read(&Value::Object(object).to_string()).map_err(|errors| {
            let named: Vec<String> = errors
                .iter()
                .take(3)
                .map(|e| format!("{}: {}", e.name, short(&e.reason)))
                .collect();
            why(&format!(
                "the notificatie its attributes make is not valid ({})",
                named.join("; ")
            ))
        })
    }

    /// Whether an abonnement's `filters` for this notificatie's kanaal let it through, as
    /// Open Notificaties decides: every filter key matches when the kenmerk has that value,
    /// when the filter's value is `*`, or when the notificatie has no such kenmerk.
    pub fn passes(&self, filters: &BTreeMap<String, String>) -> bool {
        filters.iter().all(|(key, wanted)| {
            let key = kenmerk_key(key);
            wanted == "*"
                || self
                    .kenmerken
                    .iter()
                    .filter(|(name, _)| kenmerk_key(name) == key)
                    .all(|(_, value)| value == wanted)
        })
    }

    /// The `aanmaakdatum` in milliseconds since the Unix epoch, and whether it had no
    /// offset (then read as UTC; the ZGW APIs read it in their own time zone).
    pub fn aanmaakdatum_ms(&self) -> Option<(u64, bool)> {
        let text = self.aanmaakdatum.as_str();
        let (date, time) = (text.get(..10)?, text.get(11..16)?);
        let mut rest = &text[16..];
        let mut seconds = ":00".to_owned();
        if let Some(after) = rest.strip_prefix(':') {
            let digits = after
                .bytes()
                .take_while(|b| b.is_ascii_digit() || *b == b'.')
                .count();
            seconds = format!(":{}", &after[..digits]);
            rest = &after[digits..];
        }
        let naive = rest.is_empty();
        let offset = if naive { "Z" } else { rest };
        crate::timestamp::epoch_millis(&format!("{date}T{time}{seconds}{offset}"))
            .map(|ms| (ms, naive))
    }
}

/// At most 80 characters of `text`, said to be cut when it is.
fn short(text: &str) -> String {
    match text.char_indices().nth(80) {
        Some((at, _)) => format!("{}… ({} bytes)", &text[..at], text.len()),
        None => text.to_owned(),
    }
}

fn required(name: &str) -> FieldError {
    FieldError::new(name, "required", "Dit veld is vereist.")
}

fn text_field(
    object: &Map<String, Value>,
    name: &str,
    max: usize,
    errors: &mut Vec<FieldError>,
) -> String {
    match object.get(name) {
        None => errors.push(required(name)),
        Some(Value::Null) => errors.push(FieldError::new(
            name,
            "null",
            "Dit veld mag niet leeg zijn.",
        )),
        Some(Value::String(text)) if text.trim().is_empty() => errors.push(FieldError::new(
            name,
            "blank",
            "Dit veld mag niet leeg zijn.",
        )),
        Some(Value::String(text)) if text.chars().count() > max => errors.push(FieldError::new(
            name,
            "max_length",
            format!("Zorg ervoor dat dit veld niet meer dan {max} karakters bevat."),
        )),
        // The type of the notificatie's CloudEvent is made of the kanaal, resource and
        // actie: no control character may be in it.
        Some(Value::String(text)) if text.chars().any(char::is_control) => errors.push(
            FieldError::new(name, "invalid", "Dit veld mag geen stuurtekens bevatten."),
        ),
        Some(Value::String(text)) => return text.clone(),
        Some(_) => errors.push(FieldError::new(name, "invalid", "Geen geldige string.")),
    }
    String::new()
}

fn url_field(object: &Map<String, Value>, name: &str, errors: &mut Vec<FieldError>) -> String {
    let before = errors.len();
    let text = text_field(object, name, MAX_URL, errors);
    if errors.len() == before && !is_url(&text) {
        errors.push(FieldError::new(name, "invalid", "Voer een geldige URL in."));
    }
    text
}

/// An absolute http(s) URL with a host and no white space (as Django's URL validator
/// takes them, roughly).
fn is_url(text: &str) -> bool {
    let Some((scheme, rest)) = text.split_once("://") else {
        return false;
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    matches!(scheme.to_ascii_lowercase().as_str(), "http" | "https")
        && !host.is_empty()
        && !text.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn date_time_field(
    object: &Map<String, Value>,
    name: &str,
    errors: &mut Vec<FieldError>,
) -> String {
    let before = errors.len();
    let text = text_field(object, name, 64, errors);
    if errors.len() == before && !is_date_time(&text) {
        errors.push(FieldError::new(
            name,
            "invalid",
            "Datetime heeft een ongeldig formaat, gebruik 1 van de volgende formaten: \
             YYYY-MM-DDThh:mm[:ss[.uuuuuu]][+HH:MM|-HH:MM|Z].",
        ));
    }
    text
}

/// `YYYY-MM-DDThh:mm[:ss[.u…]][Z|±HH:MM]`: ISO 8601 as the ZGW APIs accept it (a time
/// without offset too); only an RFC 3339 one also becomes the event's `time`.
fn is_date_time(text: &str) -> bool {
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        bytes
            .get(range)
            .is_some_and(|part| part.iter().all(u8::is_ascii_digit))
    };
    if !(digits(0..4)
        && bytes.get(4) == Some(&b'-')
        && digits(5..7)
        && bytes.get(7) == Some(&b'-')
        && digits(8..10)
        && matches!(bytes.get(10), Some(b'T' | b't' | b' '))
        && digits(11..13)
        && bytes.get(13) == Some(&b':')
        && digits(14..16))
    {
        return false;
    }
    let mut rest = &text[16..];
    if let Some(after) = rest.strip_prefix(':') {
        if !after
            .get(..2)
            .is_some_and(|s| s.bytes().all(|b| b.is_ascii_digit()))
        {
            return false;
        }
        rest = &after[2..];
        if let Some(fraction) = rest.strip_prefix('.') {
            let n = fraction.bytes().take_while(u8::is_ascii_digit).count();
            if n == 0 || n > 9 {
                return false;
            }
            rest = &fraction[n..];
        }
    }
    let month: u32 = text[5..7].parse().unwrap_or(0);
    let day: u32 = text[8..10].parse().unwrap_or(0);
    let hour: u32 = text[11..13].parse().unwrap_or(99);
    let minute: u32 = text[14..16].parse().unwrap_or(99);
    let offset = match rest {
        "" | "Z" | "z" => true,
        _ => {
            let b = rest.as_bytes();
            rest.len() == 6
                && matches!(b[0], b'+' | b'-')
                && b[1..3].iter().all(u8::is_ascii_digit)
                && b[3] == b':'
                && b[4..6].iter().all(u8::is_ascii_digit)
        }
    };
    offset && (1..=12).contains(&month) && (1..=31).contains(&day) && hour < 24 && minute < 60
}

fn kenmerken(
    object: &Map<String, Value>,
    errors: &mut Vec<FieldError>,
) -> BTreeMap<String, String> {
    let mut kenmerken = BTreeMap::new();
    match object.get("kenmerken") {
        None => {}
        Some(Value::Null) => errors.push(FieldError::new(
            "kenmerken",
            "null",
            "Dit veld mag niet leeg zijn.",
        )),
        Some(Value::Object(map)) => {
            for (key, value) in map {
                let name = format!("kenmerken.{key}");
                match value {
                    Value::String(text) if text.chars().count() > MAX_KENMERK => {
                        errors.push(FieldError::new(
                            name,
                            "max_length",
                            format!(
                                "Zorg ervoor dat dit veld niet meer dan {MAX_KENMERK} karakters bevat."
                            ),
                        ))
                    }
                    Value::String(text) => {
                        kenmerken.insert(key.clone(), text.clone());
                    }
                    _ => errors.push(FieldError::new(name, "invalid", "Geen geldige string.")),
                }
            }
        }
        Some(_) => errors.push(FieldError::new(
            "kenmerken",
            "not_a_dict",
            "Verwachtte een dictionary van items, maar kreeg een ander type.",
        )),
    }
    kenmerken
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZAAK: &str = r#"{
  "kanaal": "zaken",
  "hoofdObject": "https://zaken.example.nl/api/v1/zaken/d4d4",
  "resource": "status",
  "resourceUrl": "https://zaken.example.nl/api/v1/statussen/a1a1",
  "actie": "create",
  "aanmaakdatum": "2026-11-24T08:15:00.123456Z",
  "kenmerken": {"bronorganisatie": "224557609", "zaaktype": "https://catalogi.example.nl/api/v1/zaaktypen/1", "vertrouwelijkheidaanduiding": "openbaar"}
}"#;

    #[test]
    fn a_notificatie_round_trips_byte_for_byte_through_its_cloudevent() {
        let notificatie = Notificatie::read(ZAAK).unwrap();
        let event = notificatie
            .to_event("urn:nld:zgw:client:open-zaak", "e-1")
            .unwrap();
        assert_eq!(event.ty(), "nl.vng.zgw.zaken.status.create");
        assert_eq!(
            event.subject(),
            Some("https://zaken.example.nl/api/v1/statussen/a1a1")
        );
        assert_eq!(event.time(), Some("2026-11-24T08:15:00.123456Z"));
        assert_eq!(event.datacontenttype(), Some("application/json"));
        assert_eq!(
            event
                .extension("kenmerkbronorganisatie")
                .map(ToString::to_string),
            Some("224557609".into())
        );
        assert_eq!(
            event
                .extension("kenmerkvertrouwelijkheidaanduiding")
                .map(ToString::to_string),
            Some("openbaar".into())
        );
        // Through the JSON event format and back, as the hub stores and reads it.
        let stored = crate::format::json::encode_event(&event);
        let received = crate::format::json::decode_event(stored.as_bytes()).unwrap();
        let back = Notificatie::from_event(&received.event).unwrap();
        assert_eq!(back.json(), ZAAK.trim(), "byte for byte");
        assert_eq!(back, notificatie);
    }

    #[test]
    fn a_cloudevent_of_a_kanaal_type_becomes_a_notificatie() {
        let event = EventBuilder::new(
            "1",
            "urn:nld:oin:1:systeem:x",
            "nl.vng.zgw.zaken.zaak.update",
        )
        .subject("https://zaken.example.nl/api/v1/zaken/9")
        .time("2026-11-24T09:00:00Z")
        .data(Data::Json(JsonText::parse(r#"{"other": true}"#).unwrap()))
        .build()
        .unwrap();
        let notificatie = Notificatie::from_event(&event).unwrap();
        assert_eq!(
            (
                notificatie.kanaal.as_str(),
                notificatie.resource.as_str(),
                notificatie.actie.as_str()
            ),
            ("zaken", "zaak", "update")
        );
        assert_eq!(
            notificatie.resource_url,
            "https://zaken.example.nl/api/v1/zaken/9"
        );
        assert_eq!(notificatie.aanmaakdatum, "2026-11-24T09:00:00Z");
        let other = EventBuilder::new("1", "urn:x", "nl.other.type")
            .build()
            .unwrap();
        assert_eq!(Notificatie::from_event(&other), None);
        let why = Notificatie::from_event_or_why(&other, None).unwrap_err();
        assert!(
            why.contains("it has no data") && why.contains("`nl.other.type`"),
            "{why}"
        );
        let long_type = crate::EventBuilder::new("x", "urn:test", "t".repeat(10_000))
            .build()
            .unwrap();
        let why = Notificatie::from_event_or_why(&long_type, None).unwrap_err();
        assert!(
            why.contains("it has no data") && why.contains("(10000 bytes)"),
            "{why}"
        );
        assert!(why.len() < 400, "a long type is not quoted whole: {why}");
    }

    #[test]
    fn kenmerk_names_are_one_in_camel_and_snake_case_and_may_have_dots() {
        for (name, attribute) in [
            (
                "verantwoordelijkeOrganisatie",
                Some("kenmerkverantwoordelijkeorganisatie"),
            ),
            (
                "verantwoordelijke_organisatie",
                Some("kenmerkverantwoordelijkeorganisatie"),
            ),
            ("zaaktype.catalogus", Some("kenmerkzaaktypecatalogus")),
            ("status-type", Some("kenmerkstatustype")),
            ("met spatie", None),
            ("_", None),
            ("", None),
        ] {
            assert_eq!(kenmerk_attribute(name).as_deref(), attribute, "{name}");
        }
    }

    #[test]
    fn an_aanmaakdatum_is_read_to_its_moment() {
        let at = |aanmaakdatum: &str| {
            let text = ZAAK.replace("2026-11-24T08:15:00.123456Z", aanmaakdatum);
            Notificatie::read(&text).unwrap().aanmaakdatum_ms()
        };
        let moment = crate::timestamp::epoch_millis("2026-11-24T08:15:00Z").unwrap();
        assert_eq!(at("2026-11-24T08:15:00Z"), Some((moment, false)));
        assert_eq!(at("2026-11-24T09:15+01:00"), Some((moment, false)));
        assert_eq!(at("2026-11-24T08:15:00.5"), Some((moment + 500, true)));
    }

    #[test]
    fn every_problem_is_reported_with_the_zgw_codes() {
        let errors = Notificatie::read(
            r#"{"kanaal": "", "hoofdObject": "not a url", "resource": 5,
                "resourceUrl": "https://x.example/1", "aanmaakdatum": "gisteren",
                "kenmerken": null}"#,
        )
        .unwrap_err();
        let found: Vec<(&str, &str)> = errors.iter().map(|e| (e.name.as_str(), e.code)).collect();
        assert_eq!(
            found,
            [
                ("kanaal", "blank"),
                ("hoofdObject", "invalid"),
                ("resource", "invalid"),
                ("actie", "required"),
                ("aanmaakdatum", "invalid"),
                ("kenmerken", "null"),
            ]
        );
        // Open Notificaties takes blank kenmerken; no control character goes into a type.
        let blank = ZAAK.replace("\"openbaar\"", "\"\"");
        assert!(Notificatie::read(&blank).is_ok());
        let control = ZAAK.replace("\"status\"", "\"sta\\ttus\"");
        let errors = Notificatie::read(&control).unwrap_err();
        assert_eq!(
            (errors[0].name.as_str(), errors[0].code),
            ("resource", "invalid")
        );
        let long = format!(
            r#"{{"kanaal": "{}", "hoofdObject": "https://a.nl/1", "resource": "r",
                "resourceUrl": "https://a.nl/1", "actie": "create", "aanmaakdatum": "2026-01-01T00:00"}}"#,
            "k".repeat(51)
        );
        let errors = Notificatie::read(&long).unwrap_err();
        assert_eq!(
            (errors[0].name.as_str(), errors[0].code),
            ("kanaal", "max_length")
        );
        assert_eq!(Notificatie::read("[]").unwrap_err()[0].code, "invalid");
        assert_eq!(Notificatie::read("{").unwrap_err()[0].code, "parse_error");
    }

    #[test]
    fn kenmerken_differing_in_case_only_are_not_attributes() {
        let text = ZAAK.replace(
            r#""vertrouwelijkheidaanduiding": "openbaar""#,
            r#""Zaaktype": "x", "vertrouwelijkheidaanduiding": "openbaar""#,
        );
        let event = Notificatie::read(&text)
            .unwrap()
            .to_event("urn:x", "1")
            .unwrap();
        assert_eq!(event.extension("kenmerkzaaktype"), None);
        assert!(event.extension("kenmerkbronorganisatie").is_some());
    }

    #[test]
    fn a_time_without_offset_is_taken_but_is_not_the_events_time() {
        let text = ZAAK.replace("2026-11-24T08:15:00.123456Z", "2026-11-24T08:15:00");
        let notificatie = Notificatie::read(&text).unwrap();
        let event = notificatie.to_event("urn:x", "1").unwrap();
        assert_eq!(event.time(), None);
        for bad in [
            "2026-13-01T00:00Z",
            "2026-01-01",
            "2026-01-01T25:00",
            "2026-01-01T00:00+1",
        ] {
            assert!(!is_date_time(bad), "{bad}");
        }
    }

    proptest::proptest! {
        /// Whatever valid notificatie a client sends, in whatever layout, comes back out of
        /// its CloudEvent (through the JSON event format) byte for byte.
        #[test]
        fn any_notificatie_round_trips_byte_for_byte(
            kanaal in "[a-z]{1,50}",
            resource in "[a-zA-Z_]{1,20}",
            actie in "[a-z_]{1,20}",
            path in "[a-zA-Z0-9/_-]{0,40}",
            kenmerken in proptest::collection::btree_map("[a-zA-Z_]{1,12}", "\\PC{1,30}", 0..5),
            space in "[ \n\t]{0,3}",
        ) {
            let mut members = vec![
                format!("{space}\"kanaal\":{space}{}", Value::from(kanaal.clone())),
                format!("\"hoofdObject\": \"https://zgw.example.nl/{path}\""),
                format!("\"resource\":{}", Value::from(resource.clone())),
                format!("\"resourceUrl\":\"https://zgw.example.nl/{path}/r\""),
                format!("\"actie\":{}{space}", Value::from(actie.clone())),
                "\"aanmaakdatum\":\"2026-11-24T08:15:00+01:00\"".to_owned(),
            ];
            let kenmerken: Map<String, Value> =
                kenmerken.into_iter().map(|(k, v)| (k, Value::from(v))).collect();
            members.push(format!("\"kenmerken\":{}", Value::Object(kenmerken)));
            let text = format!("{{{}}}", members.join(&format!(",{space}")));
            let notificatie = Notificatie::read(&text).unwrap();
            let event = notificatie.to_event("urn:x", "1").unwrap();
            let stored = crate::format::json::encode_event(&event);
            let received = crate::format::json::decode_event(stored.as_bytes()).unwrap();
            let back = Notificatie::from_event(&received.event).unwrap();
            proptest::prop_assert_eq!(back.json(), text.trim());
            proptest::prop_assert_eq!(event.ty(), event_type(&kanaal, &resource, &actie));
        }
    }

    #[test]
    fn filters_match_as_open_notificaties_matches_them() {
        let notificatie = Notificatie::read(ZAAK).unwrap();
        let filters = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(notificatie.passes(&filters(&[])));
        assert!(notificatie.passes(&filters(&[("bronorganisatie", "224557609")])));
        assert!(notificatie.passes(&filters(&[("bronorganisatie", "*")])));
        assert!(
            notificatie.passes(&filters(&[("onbekend", "x")])),
            "a key the notificatie lacks matches"
        );
        assert!(!notificatie.passes(&filters(&[("bronorganisatie", "000000000")])));
        assert!(!notificatie.passes(&filters(&[
            ("bronorganisatie", "224557609"),
            ("vertrouwelijkheidaanduiding", "geheim")
        ])));
    }
}
