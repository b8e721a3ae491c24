//! `/api/v1/abonnement`: the abonnementen, each a subscription of its client's principal.

use super::*;

/// An ABONNEMENT as the Notificaties API shows it (`auth` is write-only: never returned).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct AbonnementOut {
    pub(crate) url: String,
    pub(crate) callback_url: String,
    pub(crate) kanalen: Vec<FilterGroupOut>,
    pub(crate) send_cloudevents: bool,
    pub(crate) cloudevent_filters: Vec<CloudeventFilterOut>,
    /// When one abonnement is read: how its deliveries go.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) bezorging: Option<BezorgingOut>,
}

/// A kanaal of an abonnement and the kenmerken it filters on.
#[derive(Debug, Serialize)]
pub(crate) struct FilterGroupOut {
    pub(crate) naam: String,
    pub(crate) filters: BTreeMap<String, String>,
}

/// One of an abonnement's `cloudeventFilters`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct CloudeventFilterOut {
    pub(crate) type_substring: String,
    pub(crate) filters: BTreeMap<String, String>,
}

/// How an abonnement's deliveries go (`bezorging`, read-only; not in Open Notificaties).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BezorgingOut {
    /// `actief`, `wachtend`, `uitgeschakeld` or `onbekend`.
    pub(crate) status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reden: Option<String>,
    pub(crate) achterstand: u64,
    pub(crate) dode_brieven: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) laatste_poging: Option<PogingOut>,
}

/// An abonnement's latest delivery attempt.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PogingOut {
    pub(crate) tijdstip: String,
    /// `delivered`, `retry` or `deadLetter`.
    pub(crate) uitkomst: &'static str,
    pub(crate) http_status: Option<u16>,
    pub(crate) fout: Option<String>,
}

pub(crate) fn abonnement_representation(
    base: &str,
    abonnement: &knooppunt_services::zgw::Abonnement,
) -> AbonnementOut {
    AbonnementOut {
        url: format!("{base}/api/v1/abonnement/{}", abonnement.id),
        callback_url: abonnement.callback_url.clone(),
        kanalen: kanalen_of(abonnement),
        send_cloudevents: abonnement.send_cloudevents,
        cloudevent_filters: abonnement
            .cloudevent_filters
            .iter()
            .map(|(substring, filters)| CloudeventFilterOut {
                type_substring: substring.clone(),
                filters: filters.clone(),
            })
            .collect(),
        bezorging: None,
    }
}

/// An abonnement's kanalen with their filters, as the API shows them.
pub(crate) fn kanalen_of(abonnement: &knooppunt_services::zgw::Abonnement) -> Vec<FilterGroupOut> {
    abonnement
        .kanalen
        .iter()
        .map(|(naam, filters)| FilterGroupOut {
            naam: naam.clone(),
            filters: filters.clone(),
        })
        .collect()
}

/// Values keyed by name, as a client sends them (a kanaal's or a CloudEvent filter's).
type Strings = BTreeMap<String, Field<String>>;

/// An ABONNEMENT as a client sends it (the Notificaties API's shape with Open
/// Notificaties' CloudEvents members; other members are ignored, as Open Notificaties does).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AbonnementIn {
    #[serde(default)]
    pub callback_url: Field<String>,
    #[serde(default)]
    pub auth: Field<String>,
    #[serde(default)]
    pub kanalen: Field<Vec<Field<AbonnementKanaalIn>>>,
    #[serde(default)]
    pub send_cloudevents: Field<bool>,
    #[serde(default)]
    pub cloudevent_filters: Field<Vec<Field<CloudEventFilterIn>>>,
}

/// A kanaal of an abonnement and its filters.
#[derive(Debug, Deserialize)]
pub struct AbonnementKanaalIn {
    #[serde(default)]
    pub naam: Field<String>,
    #[serde(default)]
    pub filters: Field<Strings>,
}

/// A CloudEvent filter of an abonnement: a substring of the types and filters on the
/// members of the data.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CloudEventFilterIn {
    #[serde(default)]
    pub type_substring: Field<String>,
    #[serde(default)]
    pub filters: Field<Strings>,
}

/// The body of `POST /api/v1/abonnement`, every problem reported.
pub(crate) fn read_abonnement_draft(
    body: &[u8],
) -> Result<knooppunt_services::zgw::AbonnementDraft, Vec<FieldError>> {
    let field = |name: &str, code: &'static str, reason: &str| FieldError {
        name: name.to_owned(),
        code,
        reason: reason.to_owned(),
    };
    let object = json_object(body)?;
    let sent = AbonnementIn::deserialize(&Value::Object(object))
        .map_err(|error| vec![field("nonFieldErrors", "invalid", &error.to_string())])?;
    let mut errors = Vec::new();
    let mut text = |value: Field<String>, name: &str, max: usize| match value {
        Field::Absent | Field::Null => {
            errors.push(field(name, "required", "Dit veld is vereist."));
            String::new()
        }
        Field::Given(t) if t.trim().is_empty() => {
            errors.push(field(name, "blank", "Dit veld mag niet leeg zijn."));
            String::new()
        }
        Field::Given(t) if t.chars().count() > max => {
            errors.push(field(
                name,
                "max_length",
                &format!("Zorg ervoor dat dit veld niet meer dan {max} karakters bevat."),
            ));
            String::new()
        }
        Field::Given(t) => t,
        Field::Wrong(_) => {
            errors.push(field(name, "invalid", "Geen geldige string."));
            String::new()
        }
    };
    let callback_url = text(sent.callback_url, "callbackUrl", 200);
    let auth = text(sent.auth, "auth", 1000);
    let (send_cloudevents, cloudevent_filters) =
        cloudevent_fields(sent.send_cloudevents, sent.cloudevent_filters, &mut errors);
    let mut kanalen = Vec::new();
    match sent.kanalen {
        // An abonnement of CloudEvents alone needs no kanaal.
        Field::Absent | Field::Null if !cloudevent_filters.is_empty() => {}
        Field::Given(items) if items.is_empty() && !cloudevent_filters.is_empty() => {}
        Field::Given(items) if !items.is_empty() && items.len() <= 100 => {
            for (n, item) in items.into_iter().enumerate() {
                let (naam, sent_filters) = match item {
                    Field::Given(item) => {
                        (item.naam.given().cloned().unwrap_or_default(), item.filters)
                    }
                    _ => (String::new(), Field::Absent),
                };
                if naam.is_empty() {
                    errors.push(field(
                        &format!("kanalen.{n}.naam"),
                        "required",
                        "Dit veld is vereist.",
                    ));
                    continue;
                }
                let mut filters = BTreeMap::new();
                match sent_filters {
                    Field::Absent => {}
                    // Open Notificaties refuses it too (its serializer's `null`).
                    Field::Null => errors.push(field(
                        &format!("kanalen.{n}.filters"),
                        "null",
                        "Dit veld mag niet leeg zijn.",
                    )),
                    Field::Given(map) => {
                        for (key, value) in map {
                            match value {
                                Field::Given(v) if !v.is_empty() && v.chars().count() <= 1000 => {
                                    filters.insert(key, v);
                                }
                                _ => errors.push(field(
                                    &format!("kanalen.{n}.filters.{key}"),
                                    "invalid",
                                    "Een filterwaarde is een string van 1 tot 1000 karakters.",
                                )),
                            }
                        }
                    }
                    Field::Wrong(_) => errors.push(field(
                        &format!("kanalen.{n}.filters"),
                        "not_a_dict",
                        "Verwachtte een dictionary van items, maar kreeg een ander type.",
                    )),
                }
                kanalen.push((naam, filters));
            }
        }
        Field::Absent | Field::Null => {
            errors.push(field("kanalen", "required", "Dit veld is vereist."))
        }
        Field::Given(_) | Field::Wrong(_) => errors.push(field(
            "kanalen",
            "invalid",
            "Een lijst van 1 tot 100 kanalen met hun filters.",
        )),
    }
    if errors.is_empty() {
        Ok(knooppunt_services::zgw::AbonnementDraft {
            callback_url,
            auth,
            kanalen,
            send_cloudevents,
            cloudevent_filters,
        })
    } else {
        Err(errors)
    }
}

/// `sendCloudevents` and `cloudeventFilters` (Open Notificaties' additions, experimental
/// there): per filter a substring of the types and filters on the members of the data.
pub(crate) fn cloudevent_fields(
    send: Field<bool>,
    sent_groups: Field<Vec<Field<CloudEventFilterIn>>>,
    errors: &mut Vec<FieldError>,
) -> (bool, Vec<knooppunt_services::zgw::CloudEventFilter>) {
    let mut problem = |name: String, reason: &str| {
        errors.push(FieldError {
            name,
            code: "invalid",
            reason: reason.to_owned(),
        })
    };
    let send = match send {
        Field::Absent | Field::Null => false,
        Field::Given(send) => send,
        Field::Wrong(_) => {
            problem("sendCloudevents".into(), "Must be a valid boolean.");
            false
        }
    };
    let mut groups = Vec::new();
    match sent_groups {
        Field::Absent | Field::Null => {}
        Field::Given(items) if items.len() <= 100 => {
            for (n, group) in items.into_iter().enumerate() {
                let (substring, sent_filters) = match group {
                    Field::Given(group) => (group.type_substring, group.filters),
                    _ => (Field::Absent, Field::Absent),
                };
                let substring = match substring {
                    Field::Given(s) if !s.is_empty() && s.chars().count() <= 255 => s,
                    _ => {
                        problem(
                            format!("cloudeventFilters.{n}.typeSubstring"),
                            "Een typeSubstring is een string van 1 tot 255 karakters.",
                        );
                        continue;
                    }
                };
                let mut filters = BTreeMap::new();
                match sent_filters {
                    Field::Absent | Field::Null => {}
                    Field::Given(members) if members.len() <= 100 => {
                        for (key, value) in members {
                            match value {
                                Field::Given(v)
                                    if !key.is_empty()
                                        && key.chars().count() <= 100
                                        && v.chars().count() <= 1000 =>
                                {
                                    filters.insert(key, v);
                                }
                                _ => problem(
                                    format!("cloudeventFilters.{n}.filters.{key}"),
                                    "Een filter is een sleutel van 1 tot 100 en een waarde \
                                     van ten hoogste 1000 karakters.",
                                ),
                            }
                        }
                    }
                    Field::Given(_) | Field::Wrong(_) => problem(
                        format!("cloudeventFilters.{n}.filters"),
                        "Verwachtte een dictionary van ten hoogste 100 items.",
                    ),
                }
                groups.push((substring, filters));
            }
        }
        Field::Given(_) | Field::Wrong(_) => problem(
            "cloudeventFilters".into(),
            "Een lijst van ten hoogste 100 filters (typeSubstring, filters).",
        ),
    }
    if !send && !groups.is_empty() {
        problem(
            "cloudeventFilters".into(),
            "cloudeventFilters gelden alleen met sendCloudevents: true.",
        );
    }
    (send, groups)
}

/// The abonnement `draft` as subscription `id` of the caller, checked (agreed by its
/// callback), once its kanalen are as Open Notificaties requires, the hub's checks of a new
/// subscription passed (the same as for the REST API: [`knooppunt_services::use_case::subscriptions::check`]), and
/// its callback answered the test notificatie (2xx).
pub(crate) async fn checked_abonnement(
    state: &AppState,
    caller: &ZgwCaller,
    draft: &knooppunt_services::zgw::AbonnementDraft,
    id: &str,
) -> Result<knooppunt_services::use_case::subscriptions::Checked<'static>, ZgwError> {
    let filters = knooppunt_services::zgw::abonnement_filters(state.catalog(), draft)
        .map_err(ZgwError::Invalid)?;
    let criteria = knooppunt_filter::Criteria {
        source: None,
        types: None,
        filters: knooppunt_filter::Filter::list_from_json(
            &filters,
            "filters",
            &state.filter_limits(),
        )
        .map_err(|errors| invalid("kanalen", "invalid", format!("{errors:?}")))?,
    };
    knooppunt_delivery::check_http_url(&draft.callback_url, state.allow_http_sinks())
        .map_err(|why| invalid("callbackUrl", crate::error::INVALID_CALLBACK_URL, why))?;
    let subscription = knooppunt_services::zgw::subscription_of(
        &caller.0,
        id.to_owned(),
        draft,
        filters,
        state.subscription_defaults(),
    )
    .map_err(|why| invalid("callbackUrl", crate::error::INVALID_CALLBACK_URL, why))?;
    let new = knooppunt_services::use_case::subscriptions::New {
        subscription,
        criteria,
        consent: knooppunt_services::use_case::subscriptions::Consent::Agreed,
    };
    let checked =
        knooppunt_services::use_case::subscriptions::check(state, &caller.0.principal(), new)
            .await?;
    let test = knooppunt_services::zgw::test_notificatie(knooppunt_store::now_ms());
    match state
        .deliverer()
        .probe(
            &draft.callback_url,
            &[("Authorization", &draft.auth)],
            test.into_bytes(),
        )
        .await
    {
        Ok(status) if (200..300).contains(&status) => {}
        Ok(status) => {
            return Err(invalid(
                "callbackUrl",
                "invalid-callback-url",
                format!(
                    "De callback URL antwoordde HTTP {status} op de testnotificatie (kanaal `test`); verwacht 2xx."
                ),
            ));
        }
        Err(why) => {
            return Err(invalid(
                "callbackUrl",
                "invalid-callback-url",
                format!("De testnotificatie kwam niet aan: {why}"),
            ));
        }
    }
    Ok(checked)
}

/// `POST /api/v1/abonnement` (scope `notificaties.consumeren`): the callback must take a
/// test notificatie (2xx) first; the abonnement is then a subscription of the hub, active at
/// once, with the hub's delivery (retries, breaker, SSRF guard, dead letters).
pub(crate) async fn create_abonnement(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    audit: RequestAudit,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ZgwError> {
    caller.require_any(&[CONSUME])?;
    let draft = read_abonnement_draft(&body).map_err(ZgwError::Invalid)?;
    let id = uuid::Uuid::now_v7().to_string();
    let checked = checked_abonnement(&state, &caller, &draft, &id).await?;
    let base = base_url(&state, &headers);
    let made = knooppunt_services::use_case::subscriptions::create(
        &state,
        &caller.context(&audit),
        checked,
    )
    .await?;
    let abonnement = knooppunt_services::zgw::abonnement_of(state.catalog(), &made.stored)
        .ok_or_else(|| ZgwError::Internal("an abonnement reads back".into()))?;
    let body = abonnement_representation(&base, &abonnement);
    Ok(created(&body.url, &body))
}

/// The caller's abonnement `uuid`, or 404.
pub(crate) fn own_abonnement(
    state: &AppState,
    caller: &ZgwCaller,
    uuid: &str,
) -> Result<knooppunt_services::zgw::Abonnement, ZgwError> {
    state
        .subscriptions()
        .get(uuid)
        .filter(|s| s.owner == caller.0.principal().name)
        .and_then(|s| knooppunt_services::zgw::abonnement_of(state.catalog(), &s))
        .ok_or_else(|| {
            ZgwError::NotFound(format!("er is geen abonnement `{uuid}` van deze client"))
        })
}

/// `GET /api/v1/abonnement`: the caller's abonnementen.
pub(crate) async fn list_abonnementen(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    headers: HeaderMap,
) -> Result<Response, ZgwError> {
    caller.require_any(&[PUBLISH, CONSUME])?;
    let owner = caller.0.principal().name;
    let base = base_url(&state, &headers);
    let mut list = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let (page, more) = state.subscriptions().page(
            &knooppunt_services::registry::Selection {
                owner: Some(&owner),
                ..Default::default()
            },
            cursor.as_deref(),
            1000,
        );
        list.extend(
            page.iter()
                .filter_map(|s| knooppunt_services::zgw::abonnement_of(state.catalog(), s))
                .map(|a| abonnement_representation(&base, &a)),
        );
        match page.last() {
            Some(last) if more => cursor = Some(last.id.clone()),
            _ => break,
        }
    }
    Ok(answer(StatusCode::OK, &list))
}

/// `GET /api/v1/abonnement/{uuid}`.
pub(crate) async fn read_abonnement(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    headers: HeaderMap,
    Path(uuid): Path<AbonnementId>,
) -> Result<Response, ZgwError> {
    caller.require_any(&[PUBLISH, CONSUME])?;
    let abonnement = own_abonnement(&state, &caller, &uuid)?;
    let mut body = abonnement_representation(&base_url(&state, &headers), &abonnement);
    body.bezorging = Some(delivery_state(&state, &uuid).await?);
    Ok(answer(StatusCode::OK, &body))
}

/// How an abonnement's deliveries go, for its client (`bezorging`, read-only; not in Open
/// Notificaties, which shows nothing of it): the subscription's state, its backlog and
/// dead letters, and its latest attempt.
pub(crate) async fn delivery_state(state: &AppState, id: &str) -> Result<BezorgingOut, ZgwError> {
    let (status, reden) = match state.subscriptions().get(id).map(|s| s.status.clone()) {
        Some(knooppunt_store::Status::Active(_)) => ("actief", None),
        Some(knooppunt_store::Status::Pending { problem }) => ("wachtend", problem),
        Some(knooppunt_store::Status::Disabled(why)) => {
            ("uitgeschakeld", Some(why.reason().to_owned()))
        }
        None => ("onbekend", None),
    };
    let queue = state.queue_stats_of(id).await?;
    Ok(BezorgingOut {
        status,
        reden,
        achterstand: queue.as_ref().map_or(0, |q| q.pending),
        dode_brieven: queue.as_ref().map_or(0, |q| q.dead_letters),
        laatste_poging: state.deliverer().last_delivery(id).map(|last| PogingOut {
            tijdstip: knooppunt_event::timestamp::utc_timestamp(last.at),
            uitkomst: last.outcome,
            http_status: last.status,
            fout: last.error,
        }),
    })
}

/// `DELETE /api/v1/abonnement/{uuid}`: 204.
pub(crate) async fn delete_abonnement(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    audit: RequestAudit,
    Path(uuid): Path<AbonnementId>,
) -> Result<Response, ZgwError> {
    caller.require_any(&[CONSUME])?;
    own_abonnement(&state, &caller, &uuid)?;
    let principal = caller.0.principal();
    knooppunt_services::use_case::subscriptions::delete(
        &state,
        &caller.context(&audit),
        &principal,
        &uuid,
        |_| (),
    )
    .await?
    .ok_or_else(|| ZgwError::NotFound(format!("er is geen abonnement `{uuid}`")))?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Replaces the caller's abonnement `uuid` with `draft` (checked as a new one, its callback
/// tested again): 200 with it as it is now.
pub(crate) async fn update_abonnement(
    state: &AppState,
    caller: &ZgwCaller,
    audit: &RequestAudit,
    headers: &HeaderMap,
    uuid: &str,
    draft: knooppunt_services::zgw::AbonnementDraft,
) -> Result<Response, ZgwError> {
    let change = checked_abonnement(state, caller, &draft, uuid)
        .await?
        .replacing::<ZgwError>(uuid);
    let principal = caller.0.principal();
    let base = base_url(state, headers);
    let replaced = knooppunt_services::use_case::subscriptions::replace(
        state,
        &caller.context(audit),
        &principal,
        change,
    )
    .await?
    .ok_or_else(|| ZgwError::NotFound(format!("er is geen abonnement `{uuid}`")))?;
    let abonnement = knooppunt_services::zgw::abonnement_of(state.catalog(), &replaced)
        .ok_or_else(|| ZgwError::Internal("an abonnement reads back".into()))?;
    let body = abonnement_representation(&base, &abonnement);
    Ok(answer(StatusCode::OK, &body))
}

/// `PUT /api/v1/abonnement/{uuid}`: the whole abonnement again.
pub(crate) async fn replace_abonnement(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    audit: RequestAudit,
    headers: HeaderMap,
    Path(uuid): Path<AbonnementId>,
    body: Bytes,
) -> Result<Response, ZgwError> {
    caller.require_any(&[CONSUME])?;
    own_abonnement(&state, &caller, &uuid)?;
    let draft = read_abonnement_draft(&body).map_err(ZgwError::Invalid)?;
    update_abonnement(&state, &caller, &audit, &headers, &uuid, draft).await
}

/// `PATCH /api/v1/abonnement/{uuid}`: the members sent replace the current ones (`auth`
/// left out keeps the current one).
pub(crate) async fn patch_abonnement(
    State(state): State<Arc<AppState>>,
    caller: ZgwCaller,
    audit: RequestAudit,
    headers: HeaderMap,
    Path(uuid): Path<AbonnementId>,
    body: Bytes,
) -> Result<Response, ZgwError> {
    caller.require_any(&[CONSUME])?;
    let current = own_abonnement(&state, &caller, &uuid)?;
    let auth = state
        .subscriptions()
        .get(&uuid)
        .and_then(|s| {
            s.protocol_settings
                .http()?
                .headers
                .get("Authorization")
                .cloned()
        })
        .unwrap_or_default();
    let mut merged = serde_json::to_value(abonnement_representation("", &current))
        .map_err(|error| ZgwError::Internal(error.to_string()))?;
    merged["auth"] = json!(auth);
    for (name, value) in json_object(&body).map_err(ZgwError::Invalid)? {
        merged[name] = value;
    }
    let draft = read_abonnement_draft(merged.to_string().as_bytes()).map_err(ZgwError::Invalid)?;
    update_abonnement(&state, &caller, &audit, &headers, &uuid, draft).await
}
