//! `/api/v1/kanaal`: the kanalen.

use super::*;

/// A KANAAL as the Notificaties API shows it.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KanaalOut {
    pub(crate) url: String,
    pub(crate) naam: String,
    /// Left out when there is none: the document makes it a URI, which "" is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) documentatie_link: Option<String>,
    pub(crate) filters: Vec<String>,
}

pub(crate) fn representation(base: &str, kanaal: &Kanaal) -> KanaalOut {
    KanaalOut {
        url: format!("{base}/api/v1/kanaal/{}", kanaal.id),
        naam: kanaal.naam.clone(),
        documentatie_link: kanaal.documentatie_link.clone(),
        filters: kanaal.filters.clone(),
    }
}

/// The query string of `GET /api/v1/kanaal`. Other parameters are ignored, as Open
/// Notificaties ignores them.
#[derive(Debug, Default, Deserialize)]
pub struct KanalenQuery {
    /// Only the kanaal with this name.
    pub naam: Option<String>,
}

/// `GET /api/v1/kanaal[?naam=]`: every kanaal (the 1.0 API does not page them).
pub(crate) async fn list_kanalen(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    headers: HeaderMap,
    query: Result<Query<KanalenQuery>, QueryRejection>,
) -> Result<Response, ZgwError> {
    caller.require_any(&[PUBLISH, CONSUME])?;
    let Query(query) = query.map_err(|rejection| {
        ZgwError::Invalid(vec![FieldError {
            name: "nonFieldErrors".to_owned(),
            code: "invalid",
            reason: format!(
                "de query is niet te lezen ({}); geef `naam` hoogstens één keer",
                rejection.body_text()
            ),
        }])
    })?;
    let base = base_url(&state, &headers);
    let kanalen = knooppunt_services::zgw::kanalen(state.catalog(), query.naam.as_deref());
    let body: Vec<KanaalOut> = kanalen.iter().map(|k| representation(&base, k)).collect();
    Ok(answer(StatusCode::OK, &body))
}

/// `GET /api/v1/kanaal/{uuid}`.
pub(crate) async fn read_kanaal(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    headers: HeaderMap,
    Path(uuid): Path<KanaalId>,
) -> Result<Response, ZgwError> {
    caller.require_any(&[PUBLISH, CONSUME])?;
    let kanaal = knooppunt_services::zgw::kanaal(state.catalog(), &uuid)
        .ok_or_else(|| ZgwError::NotFound(format!("er is geen kanaal `{uuid}`")))?;
    Ok(answer(
        StatusCode::OK,
        &representation(&base_url(&state, &headers), &kanaal),
    ))
}

/// The body of `POST /api/v1/kanaal`, every problem reported.
pub(crate) fn read_draft(body: &[u8]) -> Result<KanaalDraft, Vec<FieldError>> {
    draft_of(&json_object(body)?)
}

/// A KANAAL as a client sends it (the Notificaties API's shape; other members are ignored,
/// as Open Notificaties does).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KanaalIn {
    #[serde(default)]
    pub naam: Field<String>,
    #[serde(default)]
    pub documentatie_link: Field<String>,
    #[serde(default)]
    pub filters: Field<Vec<Field<String>>>,
}

/// A kanaal's fields, every problem reported.
pub(crate) fn draft_of(object: &Map<String, Value>) -> Result<KanaalDraft, Vec<FieldError>> {
    let field = |name: &str, code: &'static str, reason: String| FieldError {
        name: name.to_owned(),
        code,
        reason,
    };
    let null = |name: &str| FieldError {
        name: name.to_owned(),
        code: "null",
        reason: "Dit veld mag niet leeg zijn.".into(),
    };
    let sent = KanaalIn::deserialize(&Value::Object(object.clone()))
        .map_err(|error| vec![field("nonFieldErrors", "invalid", error.to_string())])?;
    let mut errors = Vec::new();
    let naam = match sent.naam {
        Field::Absent => {
            errors.push(field("naam", "required", "Dit veld is vereist.".into()));
            String::new()
        }
        Field::Given(naam) => match knooppunt_services::zgw::check_kanaal_naam(&naam) {
            Ok(()) => naam,
            Err(problem) => {
                let (code, reason) = match problem {
                    NaamProblem::Blank => ("blank", "Dit veld mag niet leeg zijn.".to_owned()),
                    NaamProblem::TooLong(max) => (
                        "max_length",
                        format!("Zorg ervoor dat dit veld niet meer dan {max} karakters bevat."),
                    ),
                    NaamProblem::Characters => (
                        "invalid",
                        "Een kanaalnaam bestaat uit letters, cijfers, `-` en `_`.".to_owned(),
                    ),
                };
                errors.push(field("naam", code, reason));
                String::new()
            }
        },
        Field::Null | Field::Wrong(_) => {
            errors.push(field("naam", "invalid", "Geen geldige string.".into()));
            String::new()
        }
    };
    let documentatie_link = match sent.documentatie_link {
        Field::Absent => None,
        Field::Null => {
            errors.push(null("documentatieLink"));
            None
        }
        Field::Given(link) if link.is_empty() => None,
        Field::Given(link) if link.chars().count() > 200 => {
            errors.push(field(
                "documentatieLink",
                "max_length",
                "Zorg ervoor dat dit veld niet meer dan 200 karakters bevat.".into(),
            ));
            None
        }
        Field::Given(link) if link.starts_with("https://") || link.starts_with("http://") => {
            Some(link)
        }
        Field::Given(_) | Field::Wrong(_) => {
            errors.push(field(
                "documentatieLink",
                "invalid",
                "Voer een geldige URL in.".into(),
            ));
            None
        }
    };
    let mut filters = Vec::new();
    match sent.filters {
        Field::Absent => {}
        Field::Null => errors.push(null("filters")),
        Field::Given(items) if items.len() <= 100 => {
            for (n, item) in items.into_iter().enumerate() {
                match item {
                    Field::Given(text) if !text.is_empty() && text.chars().count() <= 100 => {
                        filters.push(text)
                    }
                    _ => errors.push(field(
                        &format!("filters.{n}"),
                        "invalid",
                        "Een filter is een kenmerknaam van 1 tot 100 karakters.".into(),
                    )),
                }
            }
        }
        Field::Given(_) | Field::Wrong(_) => errors.push(field(
            "filters",
            "not_a_list",
            "Verwachtte een lijst met items (ten hoogste 100).".into(),
        )),
    }
    if errors.is_empty() {
        Ok(KanaalDraft {
            naam,
            documentatie_link,
            filters,
        })
    } else {
        Err(errors)
    }
}

/// `POST /api/v1/kanaal`: registers a kanaal (scope `notificaties.publiceren`), unique by
/// name; 201 with its `url` (and `Location`).
pub(crate) async fn create_kanaal(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    audit: RequestAudit,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ZgwError> {
    caller.require_any(&[PUBLISH])?;
    let draft = read_draft(&body).map_err(ZgwError::Invalid)?;
    let principal = caller.0.principal();
    let made = async {
        let entry = knooppunt_services::zgw::kanaal_entry(state.catalog(), &caller.0, draft)?;
        let context = caller.context(&audit);
        Ok(
            knooppunt_services::use_case::catalog::create(&state, &context, &principal, entry)
                .await?,
        )
    };
    let entry = made.await.map_err(kanaal_refusal)?;
    let kanaal =
        Kanaal::of(&entry).ok_or_else(|| ZgwError::Internal("a kanaal reads back".into()))?;
    let body = representation(&base_url(&state, &headers), &kanaal);
    Ok(created(&body.url, &body))
}

/// `PUT /api/v1/kanaal/{uuid}` (scope `notificaties.publiceren`, the client that registered
/// it): replaces its documentation link and filters, as Open Notificaties does when
/// `register_kanalen` runs again; its name may not change. 200 with the kanaal. `PATCH`:
/// the same with only the fields sent.
pub(crate) async fn change_kanaal(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    audit: RequestAudit,
    method: http::Method,
    headers: HeaderMap,
    Path(uuid): Path<KanaalId>,
    body: Bytes,
) -> Result<Response, ZgwError> {
    let mut object = json_object(&body).map_err(ZgwError::Invalid)?;
    let partial = method == http::Method::PATCH;
    caller.require_any(&[PUBLISH])?;
    let existing = knooppunt_services::zgw::kanaal(state.catalog(), &uuid)
        .ok_or_else(|| ZgwError::NotFound(format!("er is geen kanaal `{uuid}`")))?;
    if partial {
        // What a patch leaves out stays as it is.
        let now = serde_json::to_value(representation("", &existing))
            .map_err(|error| ZgwError::Internal(error.to_string()))?;
        for name in ["naam", "documentatieLink", "filters"] {
            if let (false, Some(value)) = (object.contains_key(name), now.get(name)) {
                object.insert(name.to_owned(), value.clone());
            }
        }
    }
    let draft = draft_of(&object).map_err(ZgwError::Invalid)?;
    let principal = caller.0.principal();
    let replaced = async {
        let entry = knooppunt_services::zgw::kanaal_update(&caller.0, &existing, draft)?;
        let context = caller.context(&audit);
        Ok(knooppunt_services::use_case::catalog::replace(
            &state,
            &context,
            &principal,
            &existing.id,
            entry,
        )
        .await?)
    };
    let entry = replaced
        .await
        .map_err(kanaal_refusal)?
        .ok_or_else(|| ZgwError::NotFound(format!("er is geen kanaal `{uuid}`")))?;
    let kanaal =
        Kanaal::of(&entry).ok_or_else(|| ZgwError::Internal("a kanaal reads back".into()))?;
    Ok(answer(
        StatusCode::OK,
        &representation(&base_url(&state, &headers), &kanaal),
    ))
}

/// A kanaal the catalog did not take, in the API's shapes.
pub(crate) fn kanaal_refusal(why: KanaalRefused) -> ZgwError {
    match why {
        KanaalRefused::Taken => ZgwError::Invalid(vec![FieldError {
            name: "naam".into(),
            code: "unique",
            reason: "Kanaal met deze naam bestaat al.".into(),
        }]),
        KanaalRefused::Renamed => ZgwError::Invalid(vec![FieldError {
            name: "naam".into(),
            code: "wijzigen-niet-toegelaten",
            reason: "Dit veld mag niet gewijzigd worden.".into(),
        }]),
        // What the catalog refuses of a kanaal's values reads as Open Notificaties' 400.
        KanaalRefused::Catalog(
            refused @ (knooppunt_services::refused::Refused::Conflict(_)
            | knooppunt_services::refused::Refused::Invalid(..)),
        ) => ZgwError::Invalid(vec![FieldError {
            name: "nonFieldErrors".into(),
            code: "invalid",
            reason: refused.to_string(),
        }]),
        KanaalRefused::Catalog(refused) => refused.into(),
    }
}
