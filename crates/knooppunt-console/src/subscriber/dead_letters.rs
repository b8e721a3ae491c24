//! A subscription's dead letters: one shown, redelivered or deleted.

use super::*;

/// `POST /console/subscriptions/{id}/redeliver`: the picked dead letters, or all of them
/// (at most 1,000 per press).
pub(crate) async fn redeliver(
    State(console): State<Arc<Console>>,
    Path(id): Path<String>,
    posted: Posted,
) -> Response {
    const MOST: usize = 1000;
    let visitor = &posted.visitor;
    let base = format!("/v1/subscriptions/{}/dead-letters", seg(&id));
    let mut letters: Vec<String> = Vec::new();
    let mut more = false;
    if posted.fields.get("scope") == "all" {
        let mut cursor: Option<String> = None;
        loop {
            let mut path = format!("{base}?pageSize=100");
            if let Some(cursor) = &cursor {
                path.push_str(&format!("&cursor={}", encode(cursor)));
            }
            let page = console.get(visitor, &path).await;
            if !page.ok() {
                return layout::api_refusal(visitor.lang, visitor, page.status, &page.problem());
            }
            let found: Vec<DeadLetterOut> = match page.parse(visitor) {
                Ok(found) => found,
                Err(page) => return page,
            };
            letters.extend(found.into_iter().map(|d| d.id));
            cursor = page.next_cursor();
            if letters.len() >= MOST {
                more = cursor.is_some() || letters.len() > MOST;
                letters.truncate(MOST);
                break;
            }
            if cursor.is_none() {
                break;
            }
        }
    } else {
        letters = posted
            .fields
            .all("letter")
            .into_iter()
            .map(str::to_owned)
            .collect();
        letters.truncate(MOST);
    }
    let mut done = 0;
    for letter in &letters {
        let answer = console
            .call(
                visitor,
                Method::POST,
                &format!("{base}/{}/redeliver", seg(letter)),
                None,
            )
            .await;
        match answer.status {
            s if s.is_success() => done += 1,
            // Redelivered meanwhile (another tab, another hub): nothing to do.
            StatusCode::NOT_FOUND => {}
            status => return layout::api_refusal(visitor.lang, visitor, status, &answer.problem()),
        }
    }
    let notice = if more { "more" } else { "redelivered" };
    redirect(&format!(
        "{BASE}/subscriptions/{}?notice={notice}&count={done}#h-dead",
        seg(&id)
    ))
}

/// `GET /console/subscriptions/{id}/dead-letters/{letter}`: why it was given up, and the
/// event as accepted (its attributes, and its data for whom the API shows it).
pub(crate) async fn dead_letter(
    State(console): State<Arc<Console>>,
    visitor: Visitor,
    Path((id, letter)): Path<(String, String)>,
) -> Result<Response, Response> {
    let lang = visitor.lang;
    let answer = console
        .get(
            &visitor,
            &format!(
                "/v1/subscriptions/{}/dead-letters/{}",
                seg(&id),
                seg(&letter)
            ),
        )
        .await
        .checked(&visitor)?;
    let d: DeadLetterOut = answer.parse(&visitor)?;
    let page_path = format!("{BASE}/subscriptions/{}", seg(&id));
    let event = d.event.as_ref().and_then(Value::as_object);
    let attributes: Vec<(&String, &Value)> = event
        .into_iter()
        .flatten()
        .filter(|(name, _)| !matches!(name.as_str(), "data" | "data_base64"))
        .collect();
    let content = html! {
        (data_list(vec![
            (lang.t("Gebeurtenis", "Event"), html! { (d.sequence) }),
            (lang.t("Reden", "Reason"), layout::said(lang, Some(&d.reason))),
            (lang.t("Pogingen", "Attempts"), html! { (d.attempts) }),
            (lang.t("Eerste poging", "First attempt"), layout::maybe_at(d.first_attempt_time.as_deref())),
            (lang.t("Laatste poging", "Last attempt"), layout::maybe_at(d.last_attempt_time.as_deref())),
            (lang.t("Laatste HTTP-status", "Last HTTP status"), html! { @if let Some(code) = d.last_status_code { (code) } @else { "—" } }),
            (lang.t("Laatste fout", "Last error"), layout::said(lang, d.last_error.as_deref())),
            (lang.t("Opgegeven", "Given up"), layout::at(&d.dead_letter_time)),
        ]))
        section aria-labelledby="h-event" {
            h2 class="utrecht-heading-2" id="h-event" { (lang.t("De gebeurtenis", "The event")) }
            @if event.is_none() {
                p class="utrecht-paragraph" { (lang.t("De gebeurtenis is niet meer in het logboek van de hub.", "The event is no longer in the hub's log.")) }
            } @else {
                (layout::table("event-caption", lang.t("Attributen", "Attributes"), &[lang.t("Attribuut", "Attribute"), lang.t("Waarde", "Value")],
                    attributes.iter().map(|(name, value)| vec![
                        html! { code class="utrecht-code" { (name) } },
                        layout::long(&value.as_str().map_or_else(|| value.to_string(), str::to_owned)),
                    ]).collect()))
                @if let Some(data) = event.and_then(|e| e.get("data")) {
                    h3 class="utrecht-heading-3" { (lang.t("Gegevens", "Data")) }
                    (json_block(data))
                } @else if event.is_some_and(|e| e.contains_key("data_base64")) {
                    p class="utrecht-paragraph" { (lang.t("Met binaire gegevens (data_base64).", "With binary data (data_base64).")) }
                }
            }
        }
        div class="kp-actions" {
            form method="post" action={ (page_path) "/redeliver" } class="kp-inline" {
                (csrf(&visitor))
                input type="hidden" name="letter" value=(d.id);
                button type="submit" name="scope" value="selected" class="utrecht-button utrecht-button--primary-action" { (lang.t("Opnieuw bezorgen", "Redeliver")) }
            }
            form method="post" action={ (page_path) "/dead-letters/" (seg(&letter)) "/delete" } class="kp-inline" {
                (csrf(&visitor))
                button type="submit" class="utrecht-button utrecht-button--secondary-action" { (lang.t("Verwijderen", "Delete")) }
            }
            a class="utrecht-link" href={ (page_path) "#h-dead" } { (lang.t("Terug naar het abonnement", "Back to the subscription")) }
        }
    };
    Ok(respond(
        StatusCode::OK,
        page(
            lang,
            Some(&visitor),
            Section::Subscriptions,
            &format!("{} {}", lang.t("Dode brief", "Dead letter"), d.sequence),
            content,
        ),
    ))
}

/// `POST /console/subscriptions/{id}/dead-letters/{letter}/delete`, after confirming.
pub(crate) async fn delete_dead_letter(
    State(console): State<Arc<Console>>,
    Path((id, letter)): Path<(String, String)>,
    posted: Posted,
) -> Result<Response, Response> {
    let visitor = &posted.visitor;
    let lang = visitor.lang;
    let page_path = format!("{BASE}/subscriptions/{}", seg(&id));
    console
        .confirmed(
            &posted,
            Ask {
                action: &format!("{page_path}/dead-letters/{}/delete", seg(&letter)),
                title: lang.t("Dode brief verwijderen?", "Delete the dead letter?"),
                consequences: &[lang.t(
                "Deze gebeurtenis wordt dan nooit meer aan dit abonnement bezorgd (opnieuw afspelen kan wel, zolang de hub haar bewaart). Dit kan niet ongedaan worden gemaakt.",
                "This event is then never delivered to this subscription again (a replay can, while the hub keeps it). This cannot be undone.",
            )],
                button: lang.t("Verwijderen", "Delete"),
                back: &format!("{page_path}/dead-letters/{}", seg(&letter)),
            },
            Method::DELETE,
            &format!(
                "/v1/subscriptions/{}/dead-letters/{}",
                seg(&id),
                seg(&letter)
            ),
        )
        .await?;
    Ok(redirect(&format!(
        "{page_path}?notice=letter-deleted#h-dead"
    )))
}
