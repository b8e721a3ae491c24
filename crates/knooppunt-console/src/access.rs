//! Signing in and out, the language switch, and the overview.

use std::sync::Arc;

use axum::Extension;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::response::Response;
use http::header::SET_COOKIE;
use http::{HeaderMap, HeaderValue, StatusCode};
use knooppunt_api::{GrantOut, HubStatusOut, SubscriptionOut};
use maud::{Markup, html};

use crate::forms::{CSRF_FIELD, Fields, Posted, same_secret};
use crate::identity::ClientCertificate;
use crate::identity::{Authentication, Role};
use crate::layout::{self, Section, badge, page, respond};
use crate::{BASE, Console, LANG_COOKIE, Lang, SESSION_COOKIE, Visitor, cookie, lang_of, redirect};
use knooppunt_services::sessions::{Credential, SignIn, trail};

/// The cookie that carries the sign-in form's CSRF token (there is no session yet).
const LOGIN_COOKIE: &str = "knooppunt_login";

fn set_cookie(response: &mut Response, value: String) {
    if let Ok(value) = HeaderValue::try_from(value) {
        response.headers_mut().append(SET_COOKIE, value);
    }
}

/// Only a path of the console itself is a place to go back to (no open redirect).
fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(next)
            if next.starts_with(BASE)
                && !next.starts_with("//")
                && !next.contains("://")
                && !next.contains('\\')
                && !next.starts_with(&format!("{BASE}/login")) =>
        {
            next.to_owned()
        }
        _ => BASE.to_owned(),
    }
}

fn secure_attribute(console: &Console) -> &'static str {
    if console.secure() { "; Secure" } else { "" }
}

/// `GET /console/login`.
pub(crate) async fn form(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    certificate: Option<Extension<ClientCertificate>>,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Response {
    let lang = lang_of(&headers);
    let certificate = certificate.map(|Extension(c)| c);
    login_page(&console, lang, &query, certificate.as_ref(), None)
}

fn login_page(
    console: &Console,
    lang: Lang,
    query: &std::collections::HashMap<String, String>,
    certificate: Option<&ClientCertificate>,
    error: Option<&str>,
) -> Response {
    let nonce = console.state.sessions().nonce();
    let next = safe_next(query.get("next").map(String::as_str));
    let development = matches!(console.state.authentication(), Authentication::Disabled);
    let certified = certificate.and_then(|c| {
        knooppunt_api::auth::by_certificate(&console.state, c)
            .ok()
            .map(|caller| caller.0.name.clone())
    });
    let content = html! {
        @if let Some(error) = error {
            div class="utrecht-alert utrecht-alert--error" role="alert" {
                div class="utrecht-alert__message" { p class="utrecht-paragraph" { (error) } }
            }
        }
        @if query.contains_key("ended") {
            (layout::notice(true, lang.t("U bent uitgelogd.", "You are signed out.")))
        }
        p class="utrecht-paragraph" {
            (lang.t("Log in met het token van uw principal (zoals de API het als Bearer-token aanneemt), of met uw PKIoverheid-certificaat.",
                    "Sign in with your principal's token (as the API takes it as a bearer token), or with your PKIoverheid certificate."))
        }
        @if development {
            form method="post" action={ (BASE) "/login" } class="kp-form" {
                input type="hidden" name=(CSRF_FIELD) value=(nonce);
                input type="hidden" name="next" value=(next);
                input type="hidden" name="method" value="development";
                p class="utrecht-paragraph" { (lang.t("Deze hub draait zonder authenticatie (ontwikkeling).", "This hub runs without authentication (development).")) }
                div { button type="submit" class="utrecht-button utrecht-button--primary-action" { (lang.t("Verder", "Continue")) } }
            }
        } @else {
            @if let Some(name) = &certified {
                form method="post" action={ (BASE) "/login" } class="kp-form" {
                    input type="hidden" name=(CSRF_FIELD) value=(nonce);
                    input type="hidden" name="next" value=(next);
                    input type="hidden" name="method" value="certificate";
                    div { button type="submit" class="utrecht-button utrecht-button--primary-action" {
                        (lang.t("Inloggen met uw certificaat als ", "Sign in with your certificate as ")) (name)
                    } }
                }
            }
            form method="post" action={ (BASE) "/login" } class="kp-form" {
                input type="hidden" name=(CSRF_FIELD) value=(nonce);
                input type="hidden" name="next" value=(next);
                input type="hidden" name="method" value="token";
                div class="utrecht-form-field" {
                    label class="utrecht-form-label" for="token" { (lang.t("Token", "Token")) }
                    input class="utrecht-textbox utrecht-textbox--html-input" type="password" id="token" name="token"
                        autocomplete="off" required spellcheck="false";
                }
                div { button type="submit" class="utrecht-button utrecht-button--primary-action" { (lang.t("Inloggen", "Sign in")) } }
            }
        }
    };
    let mut response = respond(
        if error.is_some() {
            StatusCode::UNAUTHORIZED
        } else {
            StatusCode::OK
        },
        page(
            lang,
            None,
            Section::None,
            lang.t("Inloggen", "Sign in"),
            content,
        ),
    );
    set_cookie(
        &mut response,
        format!(
            "{LOGIN_COOKIE}={nonce}; Path={BASE}/login; HttpOnly; SameSite=Strict; Max-Age=3600{}",
            secure_attribute(console)
        ),
    );
    response
}

/// `POST /console/login`: a token, a client certificate, or (development) nothing.
pub(crate) async fn sign_in(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    certificate: Option<Extension<ClientCertificate>>,
    peer: Option<Extension<crate::server::PeerIp>>,
    bytes: Bytes,
) -> Response {
    let lang = lang_of(&headers);
    let certificate = certificate.map(|Extension(c)| c);
    let fields = Fields::parse(&bytes);
    let query: std::collections::HashMap<String, String> =
        [("next".to_owned(), fields.get("next").to_owned())].into();
    let expected = cookie(&headers, LOGIN_COOKIE).unwrap_or("");
    if expected.is_empty() || !same_secret(fields.get(CSRF_FIELD), expected) {
        return layout::refusal(
            lang,
            StatusCode::FORBIDDEN,
            lang.t(
                "Dit inlogformulier had geen geldig CSRF-token; er is niets gedaan. Open de inlogpagina opnieuw.",
                "This sign-in form had no valid CSRF token; nothing was done. Open the sign-in page again.",
            ),
        );
    }
    let state = &console.state;
    let peer = peer.map(|Extension(crate::server::PeerIp(ip))| ip);
    let now = knooppunt_store::now_ms();
    // Failed sign-ins slow an address down: past a few a minute, it waits.
    if let Some(wait) = peer.and_then(|ip| state.sessions().throttle.check(ip, now).err()) {
        let why = format!(
            "{} {wait} s.",
            lang.t(
                "Te veel mislukte inlogpogingen vanaf dit adres; probeer het opnieuw over",
                "Too many failed sign-ins from this address; try again in",
            )
        );
        trail::refused(
            state.audit(),
            "too many failed sign-ins from this address: refused without checking the \
             credential",
            peer,
        );
        let mut page = layout::refusal(lang, StatusCode::TOO_MANY_REQUESTS, &why);
        if let Ok(value) = http::HeaderValue::try_from(wait.to_string()) {
            page.headers_mut().insert(http::header::RETRY_AFTER, value);
        }
        return page;
    }
    let started = match fields.get("method") {
        "development" if matches!(state.authentication(), Authentication::Disabled) => state
            .sessions()
            .with_principal(
                Arc::new(crate::identity::Principal::development()),
                Credential::None,
            )
            .await
            .map(Ok),
        "certificate" => match certificate
            .as_ref()
            .map(|c| knooppunt_api::auth::by_certificate(state, c))
        {
            Some(Ok(caller)) => {
                let oin = caller.0.oin.as_ref().map(|o| o.as_str().to_owned());
                match oin {
                    Some(oin) => state
                        .sessions()
                        .with_principal(Arc::clone(&caller.0), Credential::Certificate(oin))
                        .await
                        .map(Ok),
                    None => Ok(Err(lang.t("Dit certificaat heeft geen OIN.", "This certificate has no OIN.").to_owned())),
                }
            }
            Some(Err(refused)) => Ok(Err(refused.to_string())),
            None => Ok(Err(lang
                .t(
                    "Uw browser stuurde geen clientcertificaat; log in met een token.",
                    "Your browser sent no client certificate; sign in with a token.",
                )
                .to_owned())),
        },
        _ => match state.sessions().with_token(fields.get("token"), state.principals()).await {
            Ok(SignIn::Started(secret, live)) => Ok(Ok((secret, live))),
            Ok(SignIn::Disabled(name)) => Ok(Err(format!(
                "{} `{name}` {}",
                lang.t("Principal", "Principal"),
                lang.t(
                    "is uitgeschakeld; een beheerder van de hub kan hem weer inschakelen.",
                    "is disabled; an administrator of the hub can enable it again."
                )
            ))),
            Ok(SignIn::Unknown) => Ok(Err(lang
                .t(
                    "Dit token kent de hub niet. Gebruik het token van een principal van deze hub (toegangstokens van een uitgever zijn voor de API).",
                    "The hub does not know this token. Use the token of a principal of this hub (access tokens of an issuer are for the API).",
                )
                .to_owned())),
            Err(error) => Err(error),
        },
    };
    let (secret, live) = match started {
        Ok(Ok(started)) => started,
        Ok(Err(why)) => {
            if let Some(ip) = peer {
                state.sessions().throttle.failed(ip, now);
            }
            trail::refused(state.audit(), &why, peer);
            return login_page(&console, lang, &query, certificate.as_ref(), Some(&why));
        }
        Err(error) => {
            tracing::warn!(%error, "Starting a console session failed.");
            return layout::failure(lang, StatusCode::SERVICE_UNAVAILABLE);
        }
    };
    if let Some(ip) = peer {
        state.sessions().throttle.succeeded(ip);
    }
    trail::signed_in(state.audit(), &live.principal, live.session.expires_at).await;
    let mut response = redirect(&safe_next(Some(fields.get("next"))));
    let max_age = state.sessions().options().lifetime.as_secs();
    set_cookie(
        &mut response,
        format!(
            "{SESSION_COOKIE}={secret}; Path={BASE}; HttpOnly; SameSite=Strict; Max-Age={max_age}{}",
            secure_attribute(&console)
        ),
    );
    set_cookie(
        &mut response,
        format!("{LOGIN_COOKIE}=; Path={BASE}/login; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    response
}

/// `POST /console/logout`: ends the session everywhere.
pub(crate) async fn sign_out(
    State(console): State<Arc<Console>>,
    headers: HeaderMap,
    posted: Posted,
) -> Response {
    if let Some(secret) = cookie(&headers, SESSION_COOKIE)
        && let Err(error) = console.state.sessions().end(secret).await
    {
        tracing::warn!(%error, "Ending a console session failed.");
        return layout::failure(posted.visitor.lang, StatusCode::SERVICE_UNAVAILABLE);
    }
    trail::signed_out(console.state.audit(), &posted.visitor.principal).await;
    let mut response = redirect(&format!("{BASE}/login?ended=1"));
    set_cookie(
        &mut response,
        format!("{SESSION_COOKIE}=; Path={BASE}; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    response
}

/// `GET /console/language?to=en&back=/console/…`: remembers the language, and goes back.
pub(crate) async fn language(
    State(console): State<Arc<Console>>,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Response {
    let to = if query.get("to").map(String::as_str) == Some("en") {
        "en"
    } else {
        "nl"
    };
    let mut response = redirect(&safe_next(query.get("back").map(String::as_str)));
    set_cookie(
        &mut response,
        format!(
            "{LANG_COOKIE}={to}; Path={BASE}; SameSite=Strict; Max-Age=31536000{}",
            secure_attribute(&console)
        ),
    );
    response
}

/// `GET /console`: what the visitor can do here, and what needs attention.
pub(crate) async fn home(State(console): State<Arc<Console>>, visitor: Visitor) -> Response {
    let lang = visitor.lang;
    let mut cards: Vec<Markup> = Vec::new();
    if visitor.has(Role::Subscriber) {
        let answer = console
            .get(&visitor, "/v1/subscriptions?pageSize=100")
            .await;
        let all: Vec<SubscriptionOut> = answer.read().unwrap_or_default();
        let troubled: Vec<&SubscriptionOut> = all
            .iter()
            .filter(|s| {
                s.state != "active"
                    || s.last_delivery
                        .as_ref()
                        .is_some_and(|last| last.outcome != "delivered")
            })
            .collect();
        cards.push(html! {
            section class="kp-card" aria-labelledby="card-subscriptions" {
                h2 class="utrecht-heading-2" id="card-subscriptions" { (lang.t("Abonnementen", "Subscriptions")) }
                p class="utrecht-paragraph" {
                    (lang.count(all.len() as u64, ("abonnement", "abonnementen"), ("subscription", "subscriptions")))
                    @if answer.next_cursor().is_some() { "+" }
                    "; " (lang.count(troubled.len() as u64, ("vraagt aandacht.", "vragen aandacht."), ("needs attention.", "need attention.")))
                }
                @if !troubled.is_empty() {
                    ul class="utrecht-unordered-list" {
                        @for s in troubled.iter().take(5) {
                            li class="utrecht-unordered-list__item" {
                                a class="utrecht-link kp-break" href={ (BASE) "/subscriptions/" (crate::forms::encode(&s.id)) } { (s.label.as_deref().unwrap_or(&s.id)) }
                                " " (badge(lang, &s.state))
                            }
                        }
                    }
                }
                p class="utrecht-paragraph" { a class="utrecht-link" href={ (BASE) "/subscriptions" } { (lang.t("Alle abonnementen", "All subscriptions")) } }
            }
        });
    }
    if visitor.has(Role::Publisher) {
        let answer = console
            .get(&visitor, "/v1/approvals?state=requested&pageSize=100")
            .await;
        let waiting = answer.read::<Vec<GrantOut>>().map_or(0, |list| list.len());
        cards.push(html! {
            section class="kp-card" aria-labelledby="card-approvals" {
                h2 class="utrecht-heading-2" id="card-approvals" { (lang.t("Goedkeuringen", "Approvals")) }
                p class="utrecht-paragraph" { (waiting) (lang.t(" verzoeken wachten op uw besluit.", " requests await your decision.")) }
                p class="utrecht-paragraph" { a class="utrecht-link" href={ (BASE) "/approvals" } { (lang.t("Naar de goedkeuringen", "To the approvals")) } }
            }
        });
    }
    if visitor.principal.is_admin() {
        let status: Option<HubStatusOut> = console.get(&visitor, "/v1/status").await.read();
        cards.push(html! {
            section class="kp-card" aria-labelledby="card-status" {
                h2 class="utrecht-heading-2" id="card-status" { (lang.t("Hub", "Hub")) }
                p class="utrecht-paragraph" {
                    @if let Some(status) = &status {
                        (lang.t("Achterstand: ", "Backlog: ")) (status.backlog)
                        "; " (lang.t("eindpunten met open stroomonderbreker: ", "endpoints with an open breaker: ")) (status.open_breakers.len())
                    } @else { "—" }
                }
                p class="utrecht-paragraph" { a class="utrecht-link" href={ (BASE) "/status" } { (lang.t("Naar de hubstatus", "To the hub status")) } }
            }
        });
    }
    let roles: Vec<String> = visitor
        .principal
        .roles
        .iter()
        .map(|r| layout::role_label(lang, r.name()))
        .collect();
    respond(
        StatusCode::OK,
        page(
            lang,
            Some(&visitor),
            Section::Home,
            lang.t("Overzicht", "Overview"),
            html! {
                p class="utrecht-paragraph" {
                    (lang.t("Rollen: ", "Roles: ")) (roles.join(", "))
                }
                div class="kp-cards" { @for card in cards { (card) } }
            },
        ),
    )
}
