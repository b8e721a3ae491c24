//! The console (`/console`) in a real browser: headless Chromium over WebDriver against a
//! real hub and real sinks. Signing in, a failing subscription's last error, redelivering a
//! dead letter to a sink that works again, a test event, the filter checked as it is typed,
//! a replay followed to its end, an owner's approval letting events flow, an admin's new
//! principal whose token then works, a subscriber kept from another's pages (direct URLs
//! included), forms without a CSRF token refused, sessions that end, no axe-core violation
//! on any page (every page also at 320 CSS px, where nothing may scroll sideways), every
//! task of a subscriber, a data owner and an administrator done through the pages alone,
//! an operator's theme, and keyboard-only use. Every page is photographed into the test's
//! temporary directory (its path is printed) for a reviewer to look at.

use std::path::PathBuf;
use std::time::Duration;

use knooppunt_tests::browser::Browser;
use knooppunt_tests::certificates::https_client;
use knooppunt_tests::console::{
    cookie_pair, hidden_field, set_cookie, sign_in as sign_in_over_http,
};
use knooppunt_tests::sink::{Reply, Sink};
use knooppunt_tests::wait::quiet;
use knooppunt_tests::wait::until;
use knooppunt_tests::{TestHub, test_options, tokens};
use reqwest::Method;
use serde_json::{Value, json};

const SOURCE: &str = "urn:nld:oin:00000001823288444000:systeem:BRP";
const PREFIX: &str = "urn:nld:oin:00000001823288444000:";
const TYPE: &str = "nl.brp.persoon-verhuisd";
const TAB: &str = "\u{E004}";
const ENTER: &str = "\u{E007}";

/// Where this test's screenshots go: kept after the run (printed), in the system's
/// temporary directory.
fn shots(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("knooppunt-console-{test}-{}", std::process::id()));
    // The reviewer's pointer to the pictures (shown with --nocapture or on failure).
    #[allow(clippy::print_stdout)]
    {
        println!("screenshots of `{test}`: {}", dir.display());
    }
    dir
}

/// Signs in through the sign-in page with `token`.
async fn sign_in(browser: &Browser, hub: &TestHub, token: &str) {
    browser.goto(&hub.url("/console/login")).await;
    browser.fill("#token", token).await;
    browser
        .click_on("form button[type=submit]:not([name])")
        .await;
    // The sign-in page has a `main h1` too: wait for the answer to replace it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while browser.url().await.contains("/login") {
        assert!(
            std::time::Instant::now() < deadline,
            "signing in failed: {}",
            browser.text().await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    browser.find("main h1").await;
}

/// Photographs the page and checks it with axe-core, at 320 and at 1280 CSS px.
async fn look(browser: &Browser, name: &str) {
    both_widths(browser, name).await;
}

async fn subscribe(hub: &TestHub, token: &str, sink: &Sink, config: Value) -> String {
    hub.subscribe(token, &sink.url, TYPE, config).await
}

async fn publish(hub: &TestHub, id: &str) -> u64 {
    let event = json!({"specversion": "1.0", "id": id, "source": SOURCE, "type": TYPE,
                       "datacontenttype": "application/json", "data": {"n": id}});
    let answer = hub.publish_as(tokens::BRP_PUBLISHER, &event).await;
    answer.body["sequence"]
        .as_u64()
        .unwrap_or_else(|| panic!("the publish answer names the sequence: {}", answer.body))
}

/// Waits until the subscription has `count` dead letters.
async fn dead_letters(hub: &TestHub, token: &str, id: &str, count: usize) -> Vec<Value> {
    until("the dead letters", Duration::from_secs(15), || async {
        let answer = hub
            .call(
                Method::GET,
                &format!("/v1/subscriptions/{id}/dead-letters"),
                token,
                None,
            )
            .await;
        let list = answer.body.as_array().cloned().unwrap_or_default();
        if list.len() >= count {
            Ok(list)
        } else {
            Err(answer.body)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_sees_the_last_error_redelivers_a_dead_letter_and_tests_its_endpoint() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    sink.answer_always(Reply::status(500));
    let id = subscribe(&hub, tokens::KVK, &sink, json!({"maxAttempts": "1"})).await;
    publish(&hub, "verhuizing-1").await;
    let dead = dead_letters(&hub, tokens::KVK, &id, 1).await;

    let browser = Browser::start(&shots("subscriber")).await;
    browser.goto(&hub.url("/console/subscriptions")).await;
    // Not signed in: to the sign-in page, and back afterwards.
    assert!(
        browser.url().await.contains("/console/login?next="),
        "{}",
        browser.url().await
    );
    look(&browser, "01-sign-in").await;
    browser.fill("#token", tokens::KVK).await;
    browser.click_on("form button[type=submit]").await;
    browser.find("#subscriptions-caption").await;
    assert!(browser.url().await.ends_with("/console/subscriptions"));
    // A path the console does not have keeps the header and the navigation.
    browser.goto(&hub.url("/console/bestaat-niet")).await;
    let navigation = browser
        .execute(
            "return [document.querySelector('nav.kp-nav a') !== null, \
                     document.querySelector('h1').textContent];",
            json!([]),
        )
        .await;
    assert_eq!(navigation[0], json!(true), "{navigation}");
    assert!(
        navigation[1].as_str().unwrap().contains("Niet gevonden"),
        "{navigation}"
    );
    look(&browser, "01a-not-found").await;
    browser.goto(&hub.url("/console/subscriptions")).await;
    browser.find("#subscriptions-caption").await;
    let text = browser.text().await;
    assert!(
        text.contains("het eindpunt antwoordde 500"),
        "the last error is shown, in Dutch:\n{text}"
    );
    assert!(text.contains(&id), "{text}");
    look(&browser, "02-subscriptions").await;

    // The subscription: its attempts and its dead letter.
    browser
        .click_on(&format!("a[href='/console/subscriptions/{id}']"))
        .await;
    let text = browser
        .wait_for_text("Dode brieven", Duration::from_secs(5), false)
        .await;
    assert!(text.contains("500"), "{text}");
    look(&browser, "03-subscription").await;

    // The sink works again; the dead letter is redelivered from the page and arrives.
    sink.answer_always(Reply::status(200));
    let before = sink.deliveries().len();
    browser
        .click_on(&format!(
            "input[name=letter][value='{}']",
            dead[0]["id"].as_str().unwrap()
        ))
        .await;
    browser.click_on("button[name=scope][value=selected]").await;
    browser
        .wait_for_text(
            "1 dode brief staat weer in de wachtrij",
            Duration::from_secs(5),
            false,
        )
        .await;
    let arrived = sink.wait_for(before + 1, Duration::from_secs(10)).await;
    assert_eq!(arrived.last().unwrap().json()["id"], "verhuizing-1");
    dead_letters(&hub, tokens::KVK, &id, 0).await;
    assert!(
        hub.call(
            Method::GET,
            &format!("/v1/subscriptions/{id}/dead-letters"),
            tokens::KVK,
            None
        )
        .await
        .body
        .as_array()
        .unwrap()
        .is_empty(),
        "the dead letter is gone once redelivered"
    );
    browser.screenshot("04-redelivered").await;

    // A test event goes to the endpoint, as deliveries go.
    let before = sink.deliveries().len();
    browser
        .click_on(&format!(
            "form[action='/console/subscriptions/{id}/test'] button"
        ))
        .await;
    browser
        .wait_for_text(
            "Het testbericht is afgeleverd",
            Duration::from_secs(10),
            false,
        )
        .await;
    let arrived = sink.wait_for(before + 1, Duration::from_secs(5)).await;
    assert_eq!(arrived.last().unwrap().json()["type"], "nl.knooppunt.test");

    // The filter is checked as it is typed, by the API's own rules.
    browser
        .goto(&hub.url(&format!("/console/subscriptions/{id}/edit")))
        .await;
    browser
        .fill("#f-filters", r#"[{"sql": "subject LIKE"}]"#)
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let shown = browser.text_of("#check-result").await;
        if shown.contains("Dat ging niet") && shown.contains("filters") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "an invalid filter is reported as typed: {shown}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    look(&browser, "05-edit-invalid-filter").await;
    browser
        .fill("#f-filters", r#"[{"prefix": {"subject": "zaak-"}}]"#)
        .await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !browser
        .text_of("#check-result")
        .await
        .contains("neemt dit abonnement zo aan")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{}",
            browser.text_of("#check-result").await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    browser.click_on("form.kp-form button[type=submit]").await;
    browser
        .wait_for_text(
            "De wijzigingen zijn opgeslagen",
            Duration::from_secs(5),
            false,
        )
        .await;
    let stored = hub
        .call(
            Method::GET,
            &format!("/v1/subscriptions/{id}"),
            tokens::KVK,
            None,
        )
        .await
        .body;
    assert_eq!(stored["filters"], json!([{"prefix": {"subject": "zaak-"}}]));
    assert_eq!(
        stored["config"]["maxAttempts"], "1",
        "what the form does not show is kept"
    );

    // A replay, followed to its end (the filter now admits no event: 0 queued).
    browser
        .goto(&hub.url(&format!("/console/subscriptions/{id}")))
        .await;
    browser
        .click_on(&format!(
            "form[action='/console/subscriptions/{id}/replays'] button"
        ))
        .await;
    browser
        .wait_for_text("klaar", Duration::from_secs(15), false)
        .await;
    look(&browser, "06-replay").await;

    // Creating one: the form, then the new subscription's page.
    browser.goto(&hub.url("/console/subscriptions/new")).await;
    look(&browser, "07-new-subscription").await;
    browser.fill("#f-sink", &sink.url).await;
    browser.fill("#f-types", TYPE).await;
    browser.click_on("form.kp-form button[type=submit]").await;
    browser
        .wait_for_text(
            "Het abonnement is aangemaakt",
            Duration::from_secs(10),
            false,
        )
        .await;
    let mine = hub
        .call(Method::GET, "/v1/subscriptions", tokens::KVK, None)
        .await
        .body;
    assert_eq!(mine.as_array().unwrap().len(), 2);

    // The audit trail holds what the pages did, as the principal.
    let audit = hub
        .call(Method::GET, "/v1/audit?actor=kvk", tokens::ADMIN, None)
        .await
        .body;
    let names: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    for name in [
        "console.signin",
        "dead-letter.redeliver",
        "subscription.test",
        "subscription.replace",
        "replay.create",
        "subscription.create",
    ] {
        assert!(
            names.iter().any(|n| n.starts_with(name)),
            "`{name}` is on the audit trail: {names:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_grants_a_request_and_events_flow() {
    let hub = TestHub::start().await;
    let entry = hub
        .call(
            Method::POST,
            "/v1/eventtypes",
            tokens::BRP_PUBLISHER,
            Some(
                json!({"source": PREFIX, "type": TYPE, "approval": "approval-required",
                        "description": "Een ingezetene is verhuisd."}),
            ),
        )
        .await;
    assert_eq!(entry.status, 201, "{}", entry.body);
    let sink = Sink::start().await;
    subscribe(&hub, tokens::KVK, &sink, json!({})).await;
    publish(&hub, "voor-het-besluit").await;
    quiet(
        "a delivery before the owner's decision",
        Duration::from_millis(500),
    )
    .await;
    assert!(
        sink.deliveries().is_empty(),
        "nothing flows before the grant"
    );

    let browser = Browser::start(&shots("owner")).await;
    sign_in(&browser, &hub, tokens::BRP_PUBLISHER).await;
    look(&browser, "01-overview").await;
    browser.goto(&hub.url("/console/eventtypes")).await;
    assert!(browser.text().await.contains(TYPE));
    look(&browser, "02-event-types").await;
    browser.goto(&hub.url("/console/approvals")).await;
    let text = browser.text().await;
    assert!(
        text.contains("kvk") && text.contains("aangevraagd"),
        "{text}"
    );
    look(&browser, "03-approvals").await;
    browser
        .fill("#reason-0", "Wettelijke grondslag: Wet BRP art. 3.3")
        .await;
    browser.click_on("button[name=state][value=granted]").await;
    browser
        .wait_for_text("Toegestaan", Duration::from_secs(5), false)
        .await;
    browser.screenshot("04-granted").await;

    let seq = publish(&hub, "na-het-besluit").await;
    let arrived = sink.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!(arrived[0].json()["id"], "na-het-besluit");

    // Who received it: the owner looks it up by its sequence number.
    let events = hub
        .call(Method::GET, "/v1/audit?name=approval", tokens::ADMIN, None)
        .await
        .body;
    assert!(
        events
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "approval.grant" && e["actor"] == "brp")
    );
    browser.goto(&hub.url("/console/receipts")).await;
    browser.fill("#sequence", &seq.to_string()).await;
    browser.click_on("form.kp-form button").await;
    browser
        .wait_for_text("kvk", Duration::from_secs(10), true)
        .await;
    look(&browser, "05-receipts").await;

    // Revoked: nothing more flows.
    browser.goto(&hub.url("/console/approvals")).await;
    browser.click_on("button[name=state][value=revoked]").await;
    // A revocation needs a reason: the API's problem is shown, and nothing changed.
    let text = browser
        .wait_for_text("Dat ging niet", Duration::from_secs(5), false)
        .await;
    assert!(text.contains("reason"), "{text}");
    // On the same page, at the request itself, its field marked.
    browser.find("#reason-0[aria-invalid=true]").await;
    assert!(text.contains("verplicht bij intrekken"), "{text}");
    browser.goto(&hub.url("/console/approvals")).await;
    browser.fill("#reason-0", "De grondslag is vervallen").await;
    browser.click_on("button[name=state][value=revoked]").await;
    browser
        .wait_for_text("Ingetrokken", Duration::from_secs(5), false)
        .await;
    publish(&hub, "na-de-intrekking").await;
    quiet(
        "a delivery after the revocation",
        Duration::from_millis(500),
    )
    .await;
    assert_eq!(sink.deliveries().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_creates_a_principal_whose_token_works_and_sees_the_hub() {
    let hub = TestHub::start().await;
    let browser = Browser::start(&shots("admin")).await;
    sign_in(&browser, &hub, tokens::ADMIN).await;
    browser.goto(&hub.url("/console/principals")).await;
    look(&browser, "01-principals").await;
    browser.fill("#p-name", "gemeente-utrecht").await;
    browser.click_on("#role-subscriber").await;
    browser
        .click_on("#h-new-principal ~ form button[type=submit]")
        .await;
    let token = browser.text_of("#new-token").await;
    assert!(token.len() >= 32, "a token is shown once: {token}");
    browser.screenshot("02-token-shown").await;
    // The token whole on one line, with a button that copies it (the script shows it).
    let shown = browser
        .execute(
            "const b = document.querySelector('button[data-copy=\"new-token\"]'); \
             const t = document.getElementById('new-token'); \
             return [!!b && !b.hidden, getComputedStyle(t).whiteSpace];",
            json!([]),
        )
        .await;
    assert_eq!(
        shown,
        json!([true, "nowrap"]),
        "a copy button, and no break"
    );
    // Roles read in Dutch, with the API's name beside.
    assert_eq!(
        browser.text_of("label[for=role-subscriber]").await,
        "abonneren (subscriber)"
    );
    let answer = hub
        .call(Method::GET, "/v1/subscriptions", &token, None)
        .await;
    assert_eq!(answer.status, 200, "the new token works: {}", answer.body);

    // A new token replaces the old one.
    browser
        .click_on("form[action='/console/principals/gemeente-utrecht'] button[value=rotate]")
        .await;
    // A new token is asked for first: the old one stops at once.
    confirm(&browser, "werkt daarna meteen niet meer").await;
    let rotated = browser.text_changed_from("#new-token", &token).await;
    assert!(
        rotated.len() >= 32,
        "the new token is shown once: {rotated}"
    );
    assert_eq!(
        hub.call(Method::GET, "/v1/subscriptions", &token, None)
            .await
            .status,
        401
    );
    assert_eq!(
        hub.call(Method::GET, "/v1/subscriptions", &rotated, None)
            .await
            .status,
        200
    );
    // Disabled: refused.
    browser
        .click_on("form[action='/console/principals/gemeente-utrecht'] button[value=disable]")
        .await;
    confirm(&browser, "opgeschort").await;
    browser
        .wait_for_text("Opgeslagen", Duration::from_secs(5), false)
        .await;
    assert_eq!(
        hub.call(Method::GET, "/v1/subscriptions", &rotated, None)
            .await
            .status,
        403
    );

    browser.goto(&hub.url("/console/status")).await;
    let text = browser.text().await;
    assert!(
        text.contains("Achterstand") && text.contains("Opslag"),
        "{text}"
    );
    assert!(
        text.contains("Neemt publicaties aan\nja") || text.contains("Neemt publicaties aan ja"),
        "the hub accepts publishes, and the page says so: {text}"
    );
    look(&browser, "03-status").await;
    browser.goto(&hub.url("/console/audit")).await;
    browser.fill("#a-name", "principal").await;
    browser.click_on("form[role=search] button").await;
    let text = browser
        .wait_for_text("principal.create", Duration::from_secs(5), false)
        .await;
    assert!(text.contains("gemeente-utrecht"), "{text}");
    look(&browser, "04-audit").await;
    // Every other page an admin reaches passes axe too.
    for (path, name) in [
        ("/console", "05-overview"),
        ("/console/subscriptions", "06-subscriptions"),
        ("/console/subscriptions/new", "07-new-subscription"),
        ("/console/eventtypes", "08-event-types"),
        ("/console/approvals", "09-approvals"),
        ("/console/receipts", "10-receipts"),
        ("/console/nergens", "11-not-found"),
    ] {
        browser.goto(&hub.url(path)).await;
        look(&browser, name).await;
    }
    // English is there too.
    browser.click_on("a[lang=en]").await;
    browser
        .wait_for_text("Signed in as", Duration::from_secs(5), false)
        .await;
    look(&browser, "12-english").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_cannot_see_or_act_on_anothers_pages() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    let theirs = subscribe(&hub, tokens::KVK, &sink, json!({})).await;
    let browser = Browser::start(&shots("tenants")).await;
    sign_in(&browser, &hub, tokens::GEMEENTE).await;
    let text = browser.text().await;
    assert!(
        !text.contains("Principals") && !text.contains("Hubstatus"),
        "no admin navigation: {text}"
    );

    browser.goto(&hub.url("/console/subscriptions")).await;
    assert!(
        !browser.text().await.contains(&theirs),
        "another's subscription is not listed"
    );
    for path in [
        format!("/console/subscriptions/{theirs}"),
        format!("/console/subscriptions/{theirs}/edit"),
    ] {
        browser.goto(&hub.url(&path)).await;
        let text = browser.text().await;
        assert!(text.contains("Niet gevonden"), "{path}: {text}");
        assert!(!text.contains(&sink.url), "{path} shows nothing of it");
    }
    look(&browser, "01-not-found").await;
    for path in [
        "/console/principals",
        "/console/status",
        "/console/audit?actor=kvk",
    ] {
        browser.goto(&hub.url(path)).await;
        let text = browser.text().await;
        assert!(
            text.contains("Geen toegang") || text.contains("Niets gevonden"),
            "{path}: {text}"
        );
        assert!(
            !text.contains("kvk-token") && !text.contains("subscription.create"),
            "{path}: {text}"
        );
    }
    // A form of its own session aimed at another's subscription: refused by the API.
    browser.goto(&hub.url("/console")).await;
    let csrf = browser
        .execute(
            "return document.querySelector('input[name=_csrf]').value;",
            json!([]),
        )
        .await;
    let status = browser
        .execute_async(
            "const done = arguments[arguments.length - 1];\
             fetch(arguments[0], {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'},\
                                  body: '_csrf=' + encodeURIComponent(arguments[1])}).then(r => done(r.status));",
            json!([format!("/console/subscriptions/{theirs}/test"), csrf]),
        )
        .await;
    assert_eq!(status, json!(404));
    assert!(
        sink.deliveries().is_empty(),
        "nothing was sent to another's endpoint"
    );
}

/// A browser-like client over plain HTTP: it keeps the session cookie it was given.
struct Session {
    client: reqwest::Client,
    /// `knooppunt_session=<secret>`.
    cookie: String,
    /// The whole `Set-Cookie` header.
    set_cookie: String,
}

impl Session {
    async fn get(&self, url: &str) -> reqwest::Response {
        self.client
            .get(url)
            .header("cookie", &self.cookie)
            .send()
            .await
            .unwrap()
    }

    async fn post(&self, url: &str, body: &str, origin: Option<&str>) -> reqwest::Response {
        let mut request = self
            .client
            .post(url)
            .header("cookie", &self.cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body.to_owned());
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send().await.unwrap()
    }
}

/// Signs in over plain HTTP, as a browser would.
async fn http_session(hub: &TestHub, token: &str) -> Session {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let fields = [("method", "token"), ("token", token)];
    let (_, answer) = sign_in_over_http(&client, &hub.url(""), &fields).await;
    assert_eq!(answer.status(), 303);
    let set_cookie = set_cookie(&answer, "knooppunt_session");
    Session {
        client,
        cookie: cookie_pair(&set_cookie),
        set_cookie,
    }
}

#[tokio::test]
async fn forms_without_their_csrf_token_are_refused_and_sessions_end() {
    let mut options = test_options();
    options.sessions.idle = Duration::from_secs(2);
    let hub = TestHub::builder().options(options).start().await;
    let sink = Sink::start().await;
    let id = subscribe(&hub, tokens::KVK, &sink, json!({})).await;
    let session = http_session(&hub, tokens::KVK).await;
    let cookie = &session.set_cookie;
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "plain HTTP: no Secure (the browser would drop it)"
    );
    let page = session
        .get(&hub.url(&format!("/console/subscriptions/{id}")))
        .await;
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("default-src 'none'")
            && csp.contains("script-src 'self'")
            && !csp.contains("unsafe"),
        "{csp}"
    );
    let csrf = hidden_field(&page.text().await.unwrap(), "_csrf");
    let test = hub.url(&format!("/console/subscriptions/{id}/test"));
    // No token, a wrong one, another site's Origin: 403, and nothing happens.
    for (body, origin) in [
        (String::new(), None),
        ("_csrf=forged".to_owned(), None),
        (format!("_csrf={csrf}"), Some("http://evil.example")),
    ] {
        let answer = session.post(&test, &body, origin).await;
        assert_eq!(answer.status(), 403, "{body} {origin:?}");
        assert!(answer.text().await.unwrap().contains("niets gedaan"));
    }
    let refused_login = reqwest::Client::new()
        .post(hub.url("/console/login"))
        .form(&[("method", "token"), ("token", tokens::KVK)])
        .send()
        .await
        .unwrap();
    assert_eq!(
        refused_login.status(),
        403,
        "the sign-in form needs its token too"
    );
    assert!(
        sink.deliveries().is_empty(),
        "no refused form sent anything"
    );
    // With the token it works.
    let answer = session
        .post(&test, &format!("_csrf={csrf}"), Some(&hub.url("")))
        .await;
    assert_eq!(answer.status(), 303);
    sink.wait_for(1, Duration::from_secs(5)).await;

    // Signed out: the cookie is worth nothing, here or on any hub sharing the store.
    let answer = session
        .post(&hub.url("/console/logout"), &format!("_csrf={csrf}"), None)
        .await;
    assert_eq!(answer.status(), 303);
    let answer = session.get(&hub.url("/console")).await;
    assert_eq!(answer.status(), 303, "an ended session goes to sign in");
    assert!(
        answer.headers()["location"]
            .to_str()
            .unwrap()
            .starts_with("/console/login")
    );

    // Idle past its limit: ended.
    let session = http_session(&hub, tokens::KVK).await;
    assert_eq!(session.get(&hub.url("/console")).await.status(), 200);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(session.get(&hub.url("/console")).await.status(), 303);

    // A rotated token ends the sessions signed in with the old one.
    let session = http_session(&hub, tokens::KVK).await;
    assert_eq!(session.get(&hub.url("/console")).await.status(), 200);
    let rotated = hub
        .call(
            Method::POST,
            "/v1/principals/kvk/token",
            tokens::ADMIN,
            None,
        )
        .await;
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    assert_eq!(session.get(&hub.url("/console")).await.status(), 303);
}

/// A form past the console's 256 KiB gets a page that says so (413, HTML, in the
/// browser's language), whether its size was announced or found out while reading it.
#[tokio::test]
async fn an_oversized_form_gets_a_page_that_says_so() {
    let hub = TestHub::start().await;
    let client = reqwest::Client::new();
    let form = format!("method=token&token={}", "x".repeat(300 * 1024));
    let announced = client
        .post(hub.url("/console/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept-language", "en")
        .body(form.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(announced.status(), 413);
    let content_type = announced.headers()["content-type"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(content_type.starts_with("text/html"), "{content_type}");
    let page = announced.text().await.unwrap();
    assert!(
        page.contains("larger than the 256 KiB the console takes"),
        "{page}"
    );
    // Chunked, without a Content-Length: found out while reading.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(hub.address).await.unwrap();
    let head = "POST /console/login HTTP/1.1\r\nHost: hub\r\nAccept-Language: nl\r\n\
                Content-Type: application/x-www-form-urlencoded\r\n\
                Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    for chunk in form.as_bytes().chunks(64 * 1024) {
        let framed = [format!("{:x}\r\n", chunk.len()).as_bytes(), chunk, b"\r\n"].concat();
        if stream.write_all(&framed).await.is_err() {
            break;
        }
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        answer
            .to_ascii_lowercase()
            .contains("content-type: text/html"),
        "{answer}"
    );
    assert!(
        answer.contains("groter dan de 256 KiB die de console aanneemt"),
        "{answer}"
    );
}
#[tokio::test]
async fn on_https_the_session_cookie_is_secure() {
    let mut options = test_options();
    options.public_url = Some("https://knooppunt.example.nl".into());
    let hub = TestHub::builder().options(options).start().await;
    let session = http_session(&hub, tokens::KVK).await;
    assert!(
        session.set_cookie.contains("; Secure"),
        "{}",
        session.set_cookie
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_works_with_the_keyboard_alone() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    subscribe(&hub, tokens::KVK, &sink, json!({})).await;
    let browser = Browser::start(&shots("keyboard")).await;
    browser.goto(&hub.url("/console/login")).await;
    browser.wait_for_keyboard().await;
    // From the top of the page: the skip link first, visibly focused.
    browser.press(TAB).await;
    let focused = browser.focused().await;
    assert_eq!(
        focused["href"], "#inhoud",
        "the skip link comes first: {focused}"
    );
    assert_eq!(focused["indicator"], true, "focus is visible: {focused}");
    // Tab on to the token field and sign in with Enter.
    let mut steps = 0;
    while browser.focused().await["id"] != "token" {
        browser.press(TAB).await;
        steps += 1;
        assert!(steps < 10, "the token field is reached by Tab");
    }
    browser.press(tokens::KVK).await;
    browser.press(ENTER).await;
    browser
        .wait_for_text("Ingelogd als", Duration::from_secs(5), false)
        .await;
    browser.wait_for_keyboard().await;
    // To the subscriptions by Tab and Enter, every stop visibly focused.
    let mut steps = 0;
    loop {
        browser.press(TAB).await;
        let focused = browser.focused().await;
        assert_eq!(
            focused["indicator"], true,
            "every focus stop is visible: {focused}"
        );
        if focused["href"] == "/console/subscriptions" && focused["tag"] == "a" {
            break;
        }
        steps += 1;
        assert!(
            steps < 20,
            "the subscriptions link is reached by Tab: {focused}"
        );
    }
    browser.press(ENTER).await;
    browser.find("#subscriptions-caption").await;
    browser.wait_for_keyboard().await;
    // The skip link moves the focus to the content.
    browser.press(TAB).await;
    browser.press(ENTER).await;
    let focused = browser.focused().await;
    assert_eq!(
        focused["id"], "inhoud",
        "the skip link lands in the content: {focused}"
    );
    browser.screenshot("01-keyboard").await;
}

#[tokio::test]
async fn a_trusted_client_certificate_signs_in_its_principal() {
    use knooppunt_tests::certificates::TestCa;
    const OIN: &str = "00000001003214345000";
    let government = TestCa::new("Test Staat der Nederlanden Private Services CA");
    let rogue = TestCa::new("Rogue CA");
    let transport = knooppunt_broker::Transport {
        tls: Some(knooppunt_tests::certificates::hub_tls(&government)),
        ..Default::default()
    };
    let hub = TestHub::builder()
        .options(test_options())
        .transport(transport)
        .start()
        .await;
    let client = |identity: Option<(String, String)>| {
        https_client(&government, identity.as_ref())
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
    };
    let created = client(None)
        .post(hub.url("/v1/principals"))
        .bearer_auth(tokens::ADMIN)
        .json(&json!({"name": "rvo", "roles": ["subscriber"], "oin": OIN, "issueToken": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);

    let base = hub.url("");
    let with_certificate = |client: reqwest::Client| {
        let base = base.clone();
        async move { sign_in_over_http(&client, &base, &[("method", "certificate")]).await }
    };

    let rvo = client(Some(government.issue("RVO", Some(OIN), false)));
    let (page, answer) = with_certificate(rvo.clone()).await;
    assert!(
        page.contains("Inloggen met uw certificaat als rvo"),
        "the page offers the certificate"
    );
    assert_eq!(answer.status(), 303);
    let cookie = answer.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("; Secure") && cookie.contains("HttpOnly"),
        "over HTTPS: {cookie}"
    );
    let home = rvo
        .get(hub.url("/console"))
        .header("cookie", cookie.split(';').next().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(home.status(), 200);
    assert!(home.headers().contains_key("strict-transport-security"));
    assert!(home.text().await.unwrap().contains("<strong>rvo</strong>"));

    // A certificate of a CA the hub does not trust is never offered, nor accepted. (The
    // TLS handshake may refuse it outright; if it gets through, the page refuses it.)
    let impostor = client(Some(rogue.issue("RVO", Some(OIN), false)));
    if let Ok(page) = impostor.get(hub.url("/console/login")).send().await {
        let html = page.text().await.unwrap();
        assert!(
            !html.contains("Inloggen met uw certificaat"),
            "an untrusted certificate is not offered"
        );
    }
    // Without a certificate, the certificate sign-in is refused with what to do.
    let (_, answer) = with_certificate(client(None)).await;
    assert_eq!(answer.status(), 401);
    assert!(
        answer
            .text()
            .await
            .unwrap()
            .contains("geen clientcertificaat")
    );
}

/// Checks the page at 1280 and at 320 CSS px (WCAG 2.1 reflow, 1.4.10: nothing scrolls
/// sideways at 320) with every axe-core violation, whatever its impact, and photographs it
/// at both widths.
async fn both_widths(browser: &Browser, name: &str) {
    // The narrow one first: the browser is left at 1280 for what the test does next.
    for width in [320, 1280] {
        browser.set_width(width).await;
        // Laid out again at the new width before anything is measured.
        browser
            .execute(
                "return document.documentElement.getBoundingClientRect().width;",
                json!([]),
            )
            .await;
        let (over, wide) = browser.sideways_overflow().await;
        assert!(
            over <= 0,
            "{name} ({}) scrolls {over} px sideways at {width} px; reaching past the edge:\n{}",
            browser.url().await,
            wide.join("\n")
        );
        browser.screenshot(&format!("{name}-{width}")).await;
        let violations = browser.accessibility_violations().await;
        assert!(
            violations.is_empty(),
            "axe-core finds problems on {name} ({}) at {width} px:\n{violations:?}",
            browser.url().await
        );
    }
}

/// A hub with something on every page: a catalog entry with a request to decide, a
/// subscription with attempts, a dead letter and a replay, an event with a receipt.
struct Furnished {
    hub: TestHub,
    entry: String,
    dead_letter: String,
    subscription: String,
    replay: String,
    sequence: u64,
    _sinks: (Sink, Sink),
}

async fn furnished_hub() -> Furnished {
    let hub = TestHub::start().await;
    let entry = hub
        .call(
            Method::POST,
            "/v1/eventtypes",
            tokens::BRP_PUBLISHER,
            Some(json!({"source": PREFIX, "type": "nl.brp.persoon-overleden",
                        "approval": "approval-required",
                        "description": "Een ingezetene is overleden; alleen voor wie er een grondslag voor heeft."})),
        )
        .await;
    assert_eq!(entry.status, 201, "{}", entry.body);
    let failing = Sink::start().await;
    failing.answer_always(Reply::status(500));
    let working = Sink::start().await;
    let subscription = subscribe(&hub, tokens::KVK, &failing, json!({"maxAttempts": "1"})).await;
    subscribe(&hub, tokens::GEMEENTE, &working, json!({})).await;
    hub.subscribe(
        tokens::KVK,
        &working.url,
        "nl.brp.persoon-overleden",
        json!({}),
    )
    .await;
    let sequence = publish(&hub, "verhuizing-met-een-lange-naam-0123456789abcdef").await;
    let dead = dead_letters(&hub, tokens::KVK, &subscription, 1).await;
    working.wait_for(1, Duration::from_secs(10)).await;
    let replay = hub
        .call(
            Method::POST,
            &format!("/v1/subscriptions/{subscription}/replays"),
            tokens::KVK,
            Some(json!({"from": "2020-01-01T00:00:00Z", "until": "2099-01-01T00:00:00Z"})),
        )
        .await;
    assert_eq!(replay.status, 202, "{}", replay.body);
    Furnished {
        hub,
        entry: entry.body["id"].as_str().unwrap().to_owned(),
        dead_letter: dead[0]["id"].as_str().unwrap().to_owned(),
        subscription,
        replay: replay.body["id"].as_str().unwrap().to_owned(),
        sequence,
        _sinks: (failing, working),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_page_reflows_at_320_px_and_passes_axe_at_1280_and_320() {
    let f = furnished_hub().await;
    let hub = &f.hub;
    let browser = Browser::start(&shots("pages")).await;
    browser.goto(&hub.url("/console/login")).await;
    both_widths(&browser, "sign-in").await;
    browser.goto(&hub.url("/console/nergens")).await;
    both_widths(&browser, "not-found-signed-out").await;
    sign_in(&browser, hub, tokens::ADMIN).await;
    let id = &f.subscription;
    let pages = [
        ("/console".to_owned(), "overview"),
        ("/console/subscriptions".to_owned(), "subscriptions"),
        ("/console/subscriptions/new".to_owned(), "new-subscription"),
        (format!("/console/subscriptions/{id}"), "subscription"),
        (
            format!("/console/subscriptions/{id}/edit"),
            "edit-subscription",
        ),
        (
            format!("/console/subscriptions/{id}/replays/{}", f.replay),
            "replay",
        ),
        (
            format!("/console/subscriptions/{id}/dead-letters/{}", f.dead_letter),
            "dead-letter",
        ),
        (
            format!("/console/subscriptions/{id}/receipts"),
            "subscription-receipts",
        ),
        ("/console/eventtypes".to_owned(), "event-types"),
        (format!("/console/eventtypes/{}", f.entry), "event-type"),
        ("/console/eventtypes/new".to_owned(), "new-event-type"),
        (
            format!("/console/eventtypes/{}/edit", f.entry),
            "edit-event-type",
        ),
        ("/console/approvals".to_owned(), "approvals"),
        (
            format!("/console/receipts?sequence={}", f.sequence),
            "receipts",
        ),
        ("/console/principals".to_owned(), "principals"),
        ("/console/status".to_owned(), "status"),
        ("/console/principals/kvk".to_owned(), "principal"),
        ("/console/audit".to_owned(), "audit"),
        ("/console/audit/verify".to_owned(), "audit-verify"),
        ("/console/nergens".to_owned(), "not-found"),
    ];
    for (path, name) in &pages {
        browser.goto(&hub.url(path)).await;
        both_widths(&browser, name).await;
    }
    // The English console too.
    browser.click_on("a[lang=en]").await;
    browser
        .wait_for_text("Signed in as", Duration::from_secs(5), false)
        .await;
    for (path, name) in &pages {
        browser.goto(&hub.url(path)).await;
        both_widths(&browser, &format!("en-{name}")).await;
    }
}

/// Whether `delivery` carries a Standard Webhooks `v1` signature made with `secret`.
fn signed_with(secret: &str, delivery: &knooppunt_tests::sink::Received) -> bool {
    use base64::Engine;
    let engine = base64::engine::general_purpose::STANDARD;
    let key = engine
        .decode(secret.strip_prefix("whsec_").expect("a whsec_ secret"))
        .expect("base64");
    let mut content = format!(
        "{}.{}.",
        delivery.header("webhook-id").unwrap_or_default(),
        delivery.header("webhook-timestamp").unwrap_or_default()
    )
    .into_bytes();
    content.extend_from_slice(&delivery.body);
    let tag = ring::hmac::sign(
        &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key),
        &content,
    );
    let expected = format!("v1,{}", engine.encode(tag.as_ref()));
    delivery
        .header("webhook-signature")
        .unwrap_or_default()
        .split(' ')
        .any(|signature| signature == expected)
}

/// Makes two catalog entries as the BRP: `TYPE`, open, and `nl.brp.persoon-overleden`,
/// approval required.
async fn catalog(hub: &TestHub) {
    for (event_type, approval, description) in [
        (TYPE, "open", "Een ingezetene is verhuisd."),
        (
            "nl.brp.persoon-overleden",
            "approval-required",
            "Een ingezetene is overleden.",
        ),
    ] {
        let entry = hub
            .call(
                Method::POST,
                "/v1/eventtypes",
                tokens::BRP_PUBLISHER,
                Some(json!({"source": PREFIX, "type": event_type, "approval": approval,
                            "description": description,
                            "schema": {"type": "object", "required": ["n"]}, "schemaCheck": "warn"})),
            )
            .await;
        assert_eq!(entry.status, 201, "{}", entry.body);
    }
}

/// Clicks the button that confirms an irreversible action, after checking the page says
/// what will happen (`says`).
async fn confirm(browser: &Browser, says: &str) {
    let text = browser
        .wait_for_text(says, Duration::from_secs(5), false)
        .await;
    assert!(text.contains("Annuleren"), "a way back is offered: {text}");
    both_widths(browser, "confirm").await;
    browser
        .click_on("form input[name=confirmed][value=yes] ~ button[type=submit]")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_does_its_tasks_through_the_pages_alone() {
    let mut options = test_options();
    // One event a second: a replay runs long enough to stop it from its page.
    options.replays = knooppunt_broker::ReplayOptions {
        max_running: 1,
        rate: 1,
        takeover: Duration::from_secs(30),
    };
    let hub = TestHub::builder().options(options).start().await;
    catalog(&hub).await;
    let sink = Sink::start().await;
    let browser = Browser::start(&shots("subscriber-tasks")).await;
    sign_in(&browser, &hub, tokens::KVK).await;

    // The catalog: every entry, with its owner and policy; one opened, with its schema.
    browser.goto(&hub.url("/console/eventtypes")).await;
    let text = browser.text().await;
    assert!(
        text.contains("nl.brp.persoon-overleden")
            && text.contains("toestemming van de gegevenseigenaar nodig")
            && text.contains("brp"),
        "{text}"
    );
    browser
        .click_on("a.utrecht-link[href^='/console/eventtypes/']:not([href$='mine=1'])")
        .await;
    browser.find("#h-schema").await;
    // The approval-required entry asks access; the open one subscribes. Open the open one.
    browser.goto(&hub.url("/console/eventtypes")).await;
    let open_entry = browser
        .execute(
            "return [...document.querySelectorAll('td a.utrecht-link')].find(a => a.textContent.trim() === arguments[0]).getAttribute('href');",
            json!([TYPE]),
        )
        .await;
    browser.goto(&hub.url(open_entry.as_str().unwrap())).await;
    let text = browser.text().await;
    assert!(text.contains("\"required\""), "the schema is shown: {text}");
    look(&browser, "01-entry").await;
    browser
        .click_on("a[href^='/console/subscriptions/new?type=']")
        .await;
    let types = browser
        .execute(
            "return document.querySelector('#f-types').value;",
            json!([]),
        )
        .await;
    assert_eq!(types, json!(TYPE), "the form comes with the entry's type");

    // Created with a name and its settings as fields: the signing secret is shown once.
    browser.fill("#f-label", "Verhuizingen voor de KvK").await;
    browser.fill("#f-sink", &sink.url).await;
    browser.fill("#f-config-maxAttempts", "1").await;
    browser
        .click_on("#f-config-mode option[value=binary]")
        .await;
    look(&browser, "02-new").await;
    browser.click_on("form.kp-form button[type=submit]").await;
    let secret = browser.text_of("#new-secret").await;
    assert!(
        secret.starts_with("whsec_"),
        "the secret is shown: {secret}"
    );
    look(&browser, "03-secret").await;
    browser
        .click_on("main a[href^='/console/subscriptions/']")
        .await;
    browser.find("#h-status").await;
    // Durations read as words, the value beside.
    let page = browser.text().await;
    assert!(page.contains("10 seconden (PT10S)"), "{page}");
    let url = browser.url().await;
    let id = url.rsplit('/').next().unwrap().to_owned();
    let stored = hub
        .call(
            Method::GET,
            &format!("/v1/subscriptions/{id}"),
            tokens::KVK,
            None,
        )
        .await;
    assert_eq!(stored.body["config"]["maxAttempts"], "1", "{}", stored.body);
    assert_eq!(stored.body["config"]["mode"], "binary", "{}", stored.body);
    assert_eq!(stored.body["label"], "Verhuizingen voor de KvK");
    assert_eq!(
        browser.text_of("main h1").await,
        "Verhuizingen voor de KvK",
        "the page is titled by the name"
    );
    let text = browser.text().await;
    assert!(
        text.contains("Pogingen per gebeurtenis") && text.contains("binair"),
        "the settings read as words: {text}"
    );

    // The delivery verifies with the secret from the page.
    publish(&hub, "na-het-aanmaken").await;
    let arrived = sink.wait_for(1, Duration::from_secs(10)).await;
    assert!(
        signed_with(&secret, &arrived[0]),
        "signed with the shown secret"
    );

    // A new secret, after confirming: shown once, and it signs.
    browser
        .click_on(&format!(
            "form[action='/console/subscriptions/{id}/signing-secret'] button"
        ))
        .await;
    confirm(&browser, "Het huidige geheim ondertekent nog").await;
    let rotated = browser.text_changed_from("#new-secret", &secret).await;
    assert!(
        rotated.starts_with("whsec_") && rotated != secret,
        "{rotated}"
    );
    publish(&hub, "na-het-vervangen").await;
    let arrived = sink.wait_for(2, Duration::from_secs(10)).await;
    assert!(
        signed_with(&rotated, &arrived[1]),
        "signed with the new secret"
    );
    // While the previous secret still signs, the page offers no rotation that would be
    // refused, and says from when it can.
    browser
        .goto(&hub.url(&format!("/console/subscriptions/{id}")))
        .await;
    let waits = browser.text_of("#signing-overlap").await;
    assert!(
        waits.contains("Een nieuw ondertekeningsgeheim kan vanaf"),
        "{waits}"
    );
    assert!(
        browser
            .try_find(&format!(
                "form[action='/console/subscriptions/{id}/signing-secret'] button"
            ))
            .await
            .is_none(),
        "no rotate button during the overlap"
    );

    // The list names it before its id.
    browser.goto(&hub.url("/console/subscriptions")).await;
    let cell = browser.text_of("#subscriptions-caption ~ tbody td").await;
    assert!(
        cell.find("Verhuizingen voor de KvK") < cell.find(&id),
        "the name before the id: {cell}"
    );

    // Receipts: what the subscription took.
    browser
        .goto(&hub.url(&format!("/console/subscriptions/{id}/receipts")))
        .await;
    // A receipt is recorded as its delivery is: the page is read again until it shows.
    let text = browser
        .wait_for_text("na-het-vervangen", Duration::from_secs(10), true)
        .await;
    assert!(text.contains("na-het-aanmaken"), "{text}");
    look(&browser, "04-receipts").await;

    // A dead letter: its event seen, then deleted after confirming.
    sink.answer_always(Reply::status(500));
    publish(&hub, "wordt-een-dode-brief").await;
    let dead = dead_letters(&hub, tokens::KVK, &id, 1).await;
    browser
        .goto(&hub.url(&format!("/console/subscriptions/{id}")))
        .await;
    browser
        .click_on(&format!(
            "a[href='/console/subscriptions/{id}/dead-letters/{}']",
            dead[0]["id"].as_str().unwrap()
        ))
        .await;
    let text = browser
        .wait_for_text("wordt-een-dode-brief", Duration::from_secs(5), false)
        .await;
    assert!(
        text.contains("het maximum van 1 pogingen is bereikt")
            && text.contains("het eindpunt antwoordde 500"),
        "the reason and the last error in Dutch: {text}"
    );
    assert!(text.contains("\"n\""), "the event's data: {text}");
    look(&browser, "05-dead-letter").await;
    browser.click_on("form[action$='/delete'] button").await;
    confirm(&browser, "nooit meer aan dit abonnement bezorgd").await;
    browser
        .wait_for_text(
            "De dode brief is verwijderd.",
            Duration::from_secs(5),
            false,
        )
        .await;
    dead_letters(&hub, tokens::KVK, &id, 0).await;
    let left = hub
        .call(
            Method::GET,
            &format!("/v1/subscriptions/{id}/dead-letters"),
            tokens::KVK,
            None,
        )
        .await;
    assert_eq!(left.body, json!([]), "the dead letter is gone");

    // A replay, stopped from its page while it runs.
    sink.answer_always(Reply::status(200));
    browser
        .goto(&hub.url(&format!("/console/subscriptions/{id}")))
        .await;
    browser.fill("#replay-from", "2020-01-01T00:00:00Z").await;
    browser.click_on("form[action$='/replays'] button").await;
    browser.find("#replay-progress").await;
    browser.click_on("form[action$='/cancel'] button").await;
    browser
        .wait_for_text("geannuleerd", Duration::from_secs(5), false)
        .await;
    look(&browser, "06-replay-cancelled").await;

    // Asking access: a subscription to the approval-required type waits for the owner.
    browser.goto(&hub.url("/console/eventtypes")).await;
    let overleden = browser
        .execute(
            "return [...document.querySelectorAll('td a.utrecht-link')].find(a => a.textContent.trim() === 'nl.brp.persoon-overleden').getAttribute('href');",
            json!([]),
        )
        .await;
    browser.goto(&hub.url(overleden.as_str().unwrap())).await;
    browser
        .click_on("a[href^='/console/subscriptions/new?type=']")
        .await;
    browser.fill("#f-sink", &sink.url).await;
    // A filter as a CESQL expression in a field of its own: a wrong one is marked there.
    browser.fill("#f-sql", "subject LIKE").await;
    browser.click_on("form.kp-form button[type=submit]").await;
    browser.find("#f-sql[aria-invalid=true]").await;
    assert!(
        browser
            .try_find("#f-filters[aria-invalid=true]")
            .await
            .is_none(),
        "only the field that is wrong is marked"
    );
    browser.fill("#f-sql", "subject LIKE 'bsn-%'").await;
    browser.click_on("form.kp-form button[type=submit]").await;
    browser.find("#new-secret").await;
    browser
        .click_on("main a[href^='/console/subscriptions/']")
        .await;
    browser.find("#h-status").await;
    let asked = browser.url().await.rsplit('/').next().unwrap().to_owned();
    let stored = hub
        .call(
            Method::GET,
            &format!("/v1/subscriptions/{asked}"),
            tokens::KVK,
            None,
        )
        .await;
    assert_eq!(
        stored.body["filters"],
        json!([{"sql": "subject LIKE 'bsn-%'"}]),
        "{}",
        stored.body
    );
    browser
        .goto(&hub.url(&format!("/console/subscriptions/{asked}/edit")))
        .await;
    let shown = browser
        .execute(
            "return [document.querySelector('#f-sql').value, document.querySelector('#f-filters').value];",
            json!([]),
        )
        .await;
    assert_eq!(
        shown,
        json!(["subject LIKE 'bsn-%'", ""]),
        "read back into its field"
    );
    let approvals = hub
        .call(Method::GET, "/v1/approvals", tokens::BRP_PUBLISHER, None)
        .await;
    assert!(
        approvals
            .body
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g["state"] == "requested" && g["subscriber"] == "kvk"),
        "the owner sees the request: {}",
        approvals.body
    );

    // Deleted, after confirming what that means.
    browser
        .goto(&hub.url(&format!("/console/subscriptions/{id}")))
        .await;
    browser
        .click_on(&format!(
            "form[action='/console/subscriptions/{id}/delete'] button"
        ))
        .await;
    confirm(&browser, "Dit kan niet ongedaan worden gemaakt.").await;
    browser
        .wait_for_text(
            "Het abonnement is verwijderd.",
            Duration::from_secs(5),
            false,
        )
        .await;
    assert_eq!(
        hub.call(
            Method::GET,
            &format!("/v1/subscriptions/{id}"),
            tokens::KVK,
            None
        )
        .await
        .status,
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_owner_keeps_its_catalog_through_the_pages_alone() {
    let hub = TestHub::start().await;
    let browser = Browser::start(&shots("owner-tasks")).await;
    sign_in(&browser, &hub, tokens::BRP_PUBLISHER).await;

    // A new entry, through the form.
    browser.goto(&hub.url("/console/eventtypes")).await;
    browser.click_on("a[href='/console/eventtypes/new']").await;
    browser.fill("#e-type", TYPE).await;
    browser.fill("#e-source", PREFIX).await;
    browser
        .fill("#e-description", "Een ingezetene is verhuisd.")
        .await;
    browser
        .click_on("#e-approval option[value=approval-required]")
        .await;
    browser
        .fill("#e-schema", r#"{"type": "object", "required": ["n"]}"#)
        .await;
    browser
        .click_on("#e-schemaCheck option[value=enforce]")
        .await;
    browser.fill("#e-kenmerken", "bsn\ngemeente").await;
    look(&browser, "01-new-entry").await;
    browser.click_on("form.kp-form button[type=submit]").await;
    browser
        .wait_for_text(
            "Het gebeurtenistype is aangemaakt.",
            Duration::from_secs(5),
            false,
        )
        .await;
    let entries = hub
        .call(Method::GET, "/v1/eventtypes", tokens::BRP_PUBLISHER, None)
        .await;
    let entry = entries.body[0].clone();
    assert_eq!(entry["type"], TYPE, "{entry}");
    assert_eq!(entry["approval"], "approval-required", "{entry}");
    assert_eq!(entry["schemaCheck"], "enforce", "{entry}");
    assert_eq!(entry["kenmerken"], json!(["bsn", "gemeente"]), "{entry}");
    let id = entry["id"].as_str().unwrap().to_owned();

    // A mistake is said at the field, and what was typed stays.
    browser
        .goto(&hub.url(&format!("/console/eventtypes/{id}/edit")))
        .await;
    browser.fill("#e-documentation", "geen url").await;
    browser.click_on("form.kp-form button[type=submit]").await;
    let text = browser
        .wait_for_text("Dat ging niet", Duration::from_secs(5), false)
        .await;
    assert!(text.contains("documentation"), "{text}");
    browser.find("#e-documentation[aria-invalid=true]").await;
    look(&browser, "02-edit-refused").await;
    // Edited: documented, deprecated.
    browser
        .fill("#e-documentation", "https://example.org/brp/verhuisd")
        .await;
    browser.click_on("#e-deprecated").await;
    browser.click_on("form.kp-form button[type=submit]").await;
    browser
        .wait_for_text(
            "De wijzigingen zijn opgeslagen.",
            Duration::from_secs(5),
            false,
        )
        .await;
    let stored = hub
        .call(
            Method::GET,
            &format!("/v1/eventtypes/{id}"),
            tokens::BRP_PUBLISHER,
            None,
        )
        .await;
    assert_eq!(stored.body["deprecated"], true, "{}", stored.body);
    assert_eq!(
        stored.body["documentation"],
        "https://example.org/brp/verhuisd"
    );
    assert_eq!(
        stored.body["schemaCheck"], "enforce",
        "kept: {}",
        stored.body
    );

    // Requests waiting come first, named by their type.
    let sink = Sink::start().await;
    let first = subscribe(&hub, tokens::KVK, &sink, json!({})).await;
    hub.call(
        Method::PUT,
        &format!("/v1/eventtypes/{id}/approvals/{first}"),
        tokens::BRP_PUBLISHER,
        Some(json!({"state": "granted", "reason": "Wet BRP"})),
    )
    .await;
    subscribe(&hub, tokens::GEMEENTE, &sink, json!({})).await;
    browser.goto(&hub.url("/console/approvals")).await;
    let headings = browser
        .execute(
            "return [...document.querySelectorAll('main h2')].map(h => h.textContent.trim());",
            json!([]),
        )
        .await;
    assert_eq!(
        headings,
        json!([format!("gemeente → {TYPE}"), format!("kvk → {TYPE}")]),
        "the waiting request first"
    );
    let text = browser.text().await;
    assert!(text.contains("1 verzoek wacht op uw besluit."), "{text}");
    look(&browser, "03-approvals").await;

    // Deleted, after the page says what that means.
    browser
        .goto(&hub.url(&format!("/console/eventtypes/{id}")))
        .await;
    browser
        .click_on(&format!(
            "form[action='/console/eventtypes/{id}/delete'] button"
        ))
        .await;
    confirm(&browser, "houdt de hub deze gebeurtenissen niet meer tegen").await;
    browser
        .wait_for_text(
            "Het gebeurtenistype is verwijderd.",
            Duration::from_secs(5),
            false,
        )
        .await;
    assert_eq!(
        hub.call(
            Method::GET,
            &format!("/v1/eventtypes/{id}"),
            tokens::BRP_PUBLISHER,
            None
        )
        .await
        .status,
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_admin_does_its_tasks_through_the_pages_alone() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    let silent = Sink::start().await;
    silent.consent(knooppunt_tests::sink::Consent::Refuse);
    let kvk = subscribe(&hub, tokens::KVK, &sink, json!({})).await;
    let pending = subscribe(&hub, tokens::KVK, &silent, json!({})).await;
    let gemeente = subscribe(&hub, tokens::GEMEENTE, &sink, json!({})).await;
    let browser = Browser::start(&shots("admin-tasks")).await;
    sign_in(&browser, &hub, tokens::ADMIN).await;

    // Every subscription, with its owner; found by owner, state and text.
    browser.goto(&hub.url("/console/subscriptions")).await;
    let text = browser.text().await;
    assert!(
        text.contains(&kvk) && text.contains(&gemeente) && text.contains("Alle abonnementen"),
        "{text}"
    );
    browser.fill("#s-owner", "kvk").await;
    browser.click_on("form[role=search] button").await;
    browser
        .wait_for_url("owner=kvk", Duration::from_secs(5))
        .await;
    let text = browser.text_of("main").await;
    assert!(text.contains(&kvk) && !text.contains(&gemeente), "{text}");
    browser.click_on("#s-state option[value=pending]").await;
    browser.click_on("form[role=search] button").await;
    browser
        .wait_for_url("state=pending", Duration::from_secs(5))
        .await;
    let shown = browser
        .execute(
            "return [...document.querySelectorAll('#subscriptions-caption ~ tbody a')].map(a => a.textContent.trim());",
            json!([]),
        )
        .await;
    assert_eq!(shown, json!([pending]), "only the one awaiting consent");
    look(&browser, "01-subscriptions-found").await;

    // The sink's consent, agreed outside the hub, recorded after confirming.
    browser
        .goto(&hub.url(&format!("/console/subscriptions/{pending}")))
        .await;
    browser
        .click_on(&format!(
            "form[action='/console/subscriptions/{pending}/consent'] button"
        ))
        .await;
    confirm(&browser, "buiten de hub heeft ingestemd").await;
    browser
        .wait_for_text("De instemming is vastgelegd", Duration::from_secs(5), false)
        .await;
    let stored = hub
        .call(
            Method::GET,
            &format!("/v1/subscriptions/{pending}"),
            tokens::ADMIN,
            None,
        )
        .await;
    assert_eq!(stored.body["validatedBy"], "agreement", "{}", stored.body);

    // A principal's rights edited on its page.
    browser.goto(&hub.url("/console/principals")).await;
    browser
        .click_on("a[href='/console/principals/gemeente']")
        .await;
    browser.find("#p-oin").await;
    browser.click_on("#role-publisher").await;
    browser.fill("#p-oin", "00000001001234567000").await;
    browser.fill("#p-types", "nl.brp.\nnl.kvk.").await;
    browser
        .fill("#p-sources", "urn:nld:oin:00000001001234567000:")
        .await;
    look(&browser, "02-principal").await;
    browser.click_on("form.kp-form button[type=submit]").await;
    browser
        .wait_for_text("Opgeslagen.", Duration::from_secs(5), false)
        .await;
    let principal = hub
        .call(Method::GET, "/v1/principals/gemeente", tokens::ADMIN, None)
        .await
        .body;
    assert!(
        principal["roles"]
            .as_array()
            .unwrap()
            .contains(&json!("publisher")),
        "{principal}"
    );
    assert_eq!(principal["oin"], "00000001001234567000", "{principal}");
    assert_eq!(
        principal["subscribeTypePrefixes"],
        json!(["nl.brp.", "nl.kvk."])
    );
    assert_eq!(
        principal["publishSourcePrefixes"],
        json!(["urn:nld:oin:00000001001234567000:"])
    );

    // Deleted, after the page says what goes with it.
    browser.click_on("button[name=action][value=delete]").await;
    confirm(&browser, "1 abonnement van hem wordt mee verwijderd").await;
    browser
        .wait_for_text("Verwijderd.", Duration::from_secs(5), false)
        .await;
    assert_eq!(
        hub.call(Method::GET, "/v1/principals/gemeente", tokens::ADMIN, None)
            .await
            .status,
        404
    );
    assert_eq!(
        hub.call(
            Method::GET,
            &format!("/v1/subscriptions/{gemeente}"),
            tokens::ADMIN,
            None
        )
        .await
        .status,
        404
    );

    // The audit trail: newest first, details as words, verified, exported.
    browser.goto(&hub.url("/console/audit")).await;
    let sequences = browser
        .execute(
            "return [...document.querySelectorAll('#audit-caption ~ tbody tr td:first-child')].map(td => Number(td.textContent.trim()));",
            json!([]),
        )
        .await;
    let sequences: Vec<u64> = serde_json::from_value(sequences).unwrap();
    assert!(sequences.len() > 3, "{sequences:?}");
    assert!(
        sequences.windows(2).all(|pair| pair[0] > pair[1]),
        "newest first: {sequences:?}"
    );
    assert!(
        browser.try_find("dl.kp-details dt").await.is_some(),
        "details as terms"
    );
    let text = browser.text().await;
    assert!(text.contains("principal.delete"), "{text}");
    look(&browser, "03-audit").await;
    browser.click_on("a[href='/console/audit/verify']").await;
    browser
        .wait_for_text("De keten is heel", Duration::from_secs(5), false)
        .await;
    let head = browser.text_of("#audit-head").await;
    assert!(head.contains(':'), "the head to keep: {head}");
    browser.fill("#v-head", &head).await;
    browser.click_on("form.kp-form button").await;
    let text = browser
        .wait_for_text("Eind weggehaald", Duration::from_secs(5), false)
        .await;
    assert!(text.contains("De keten is heel"), "{text}");
    look(&browser, "04-verified").await;
    // More than the 1,000 entries of one page, so that the export streams several.
    hub.create_principals(1_050).await;
    let export = browser
        .execute_async(
            "const done = arguments[arguments.length - 1];\
             fetch('/console/audit/export?name=principal').then(r => r.text().then(t => done([r.status, r.headers.get('content-type'), t])));",
            json!([]),
        )
        .await;
    assert_eq!(export[0], 200, "{export}");
    assert_eq!(export[1], "application/x-ndjson");
    let lines: Vec<Value> = export[2]
        .as_str()
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert!(
        lines
            .iter()
            .all(|l| l["name"].as_str().unwrap().starts_with("principal")),
        "only what the search selects"
    );
    // Every selected entry once, oldest first, across the pages.
    let expected = hub
        .call(
            Method::GET,
            "/v1/audit?name=principal&pageSize=1000",
            tokens::ADMIN,
            None,
        )
        .await;
    let rest = hub
        .call(
            Method::GET,
            "/v1/audit?name=principal&pageSize=1000&order=newest",
            tokens::ADMIN,
            None,
        )
        .await;
    let total = expected.body.as_array().unwrap().len()
        + rest
            .body
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| {
                e["sequence"].as_u64()
                    > expected.body.as_array().unwrap().last().unwrap()["sequence"].as_u64()
            })
            .count();
    assert!(total > 1_050, "{total}");
    assert_eq!(lines.len(), total, "every selected entry");
    let numbers: Vec<u64> = lines
        .iter()
        .map(|l| l["seq"].as_u64().expect("each line has its number"))
        .collect();
    assert!(
        numbers.windows(2).all(|pair| pair[0] < pair[1]),
        "oldest first, none twice"
    );
    // The page says which check an export takes: a search's export is a selection.
    browser
        .goto(&hub.url("/console/audit?name=principal"))
        .await;
    let check = browser.text_of("#audit-export-check").await;
    assert!(
        check.contains("selectie") && check.contains("--selection"),
        "{check}"
    );
    browser.goto(&hub.url("/console/audit")).await;
    let check = browser.text_of("#audit-export-check").await;
    assert!(
        check.contains("hele keten") && !check.contains("--selection"),
        "{check}"
    );
}

/// An operator's NL Design System theme: its tokens, scoped to its own class, colour the
/// pages; the pages still pass axe at both widths.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_theme_colours_the_pages() {
    let mut options = test_options();
    options.console_theme = knooppunt_broker::ConsoleTheme {
        css: Some(
            ".gemeente-theme {\n  --utrecht-button-primary-action-background-color: rgb(0, 80, 40);\n  \
             --utrecht-page-header-background-color: rgb(230, 240, 235);\n}\n"
                .into(),
        ),
        class: Some("gemeente-theme".into()),
    };
    let hub = TestHub::builder().options(options).start().await;
    let browser = Browser::start(&shots("theme")).await;
    browser.goto(&hub.url("/console/login")).await;
    let colour = browser
        .execute(
            "return getComputedStyle(document.querySelector('form button[type=submit]')).backgroundColor;",
            json!([]),
        )
        .await;
    assert_eq!(colour, json!("rgb(0, 80, 40)"), "the theme's token applies");
    both_widths(&browser, "themed-sign-in").await;
    // Revalidated on each page, but sent again only when it changed.
    let client = reqwest::Client::new();
    let first = client
        .get(hub.url("/console/assets/theme.css"))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 200);
    let tag = first.headers()["etag"].clone();
    assert!(first.text().await.unwrap().contains(".voorbeeld-theme {"));
    let again = client
        .get(hub.url("/console/assets/theme.css"))
        .header("if-none-match", tag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    // Without a theme the built-in one applies.
    let plain = TestHub::start().await;
    browser.goto(&plain.url("/console/login")).await;
    let colour = browser
        .execute(
            "return getComputedStyle(document.querySelector('form button[type=submit]')).backgroundColor;",
            json!([]),
        )
        .await;
    assert_ne!(colour, json!("rgb(0, 80, 40)"));
}

/// Waits until `#check-result` shows `expected`: the form's live check has answered.
async fn check_says(browser: &Browser, expected: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let shown = browser.text_of("#check-result").await;
        if shown.contains(expected) {
            return shown;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the live check should say `{expected}`: {shown}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Deletes the admin's subscription `old` (the quota is one), makes `body` instead and
/// opens its page: its id.
async fn replace_and_show(hub: &TestHub, browser: &Browser, old: &str, body: Value) -> String {
    let deleted = hub
        .call(
            reqwest::Method::DELETE,
            &format!("/v1/subscriptions/{old}"),
            tokens::ADMIN,
            None,
        )
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    let made = hub
        .call(
            reqwest::Method::POST,
            "/v1/subscriptions",
            tokens::ADMIN,
            Some(body),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let id = made.body["id"].as_str().unwrap().to_owned();
    browser
        .goto(&hub.url(&format!("/console/subscriptions/{id}")))
        .await;
    id
}

/// The console offers only what the hub will do, by asking the rule the save applies: no
/// edit form for another owner's catalog entry (refused before it is shown, not on
/// Opslaan), a live check of a new subscription that is a dry run of creating it (a sink
/// in a private range and a subscription past the owner's quota are refused as typed), and
/// no "verify the chain" link for one who may not verify.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_offers_only_what_the_hub_allows() {
    let mut options = knooppunt_tests::test_options();
    options.quotas.max_subscriptions = 1;
    let hub = TestHub::builder().options(options).start().await;
    catalog(&hub).await;
    let entries = hub
        .call(Method::GET, "/v1/eventtypes", tokens::ADMIN, None)
        .await;
    let entry = entries.body.as_array().unwrap()[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let browser = Browser::start(&shots("offers")).await;

    // Another publisher: the entry is shown, its edit form is not.
    sign_in(&browser, &hub, tokens::PUBLISHER).await;
    browser
        .goto(&hub.url(&format!("/console/eventtypes/{entry}/edit")))
        .await;
    let text = browser.text().await;
    assert!(text.contains("Geen toegang"), "{text}");
    assert!(text.contains("owned by `brp`"), "says whose it is: {text}");
    assert!(
        browser
            .try_find("form.kp-form textarea, form.kp-form input[type=text]")
            .await
            .is_none(),
        "no form to fill in: {text}"
    );
    look(&browser, "01-not-the-owner").await;

    // A subscriber's live check: a private address, then its quota.
    sign_in(&browser, &hub, tokens::KVK).await;
    browser.goto(&hub.url("/console/subscriptions/new")).await;
    browser.fill("#f-types", TYPE).await;
    browser.fill("#f-sink", "https://10.1.2.3/hook").await;
    let said = check_says(&browser, "Dat ging niet").await;
    assert!(
        said.contains("a range the hub does not deliver to"),
        "{said}"
    );
    assert!(!said.contains("neemt dit abonnement zo aan"), "{said}");
    look(&browser, "02-private-sink").await;
    // A broker's endpoint is an MQTT 5 subscription, which needs its topic.
    browser
        .fill("#f-sink", "mqtts://broker.gemeente.example")
        .await;
    let said = check_says(&browser, "topicname").await;
    assert!(said.contains("Dat ging niet"), "{said}");
    browser.fill("#f-topic", "knooppunt/console").await;
    check_says(&browser, "neemt dit abonnement zo aan").await;
    // A NATS server's endpoint: the same field is its subject, checked as one.
    browser.fill("#f-topic", "").await;
    browser.fill("#f-sink", "tls://nats.gemeente.example").await;
    let said = check_says(&browser, "protocolsettings.subject").await;
    assert!(said.contains("Dat ging niet"), "{said}");
    browser.fill("#f-topic", "knooppunt.console").await;
    check_says(&browser, "neemt dit abonnement zo aan").await;
    let sink = Sink::start().await;
    browser.fill("#f-sink", &sink.url).await;
    check_says(&browser, "neemt dit abonnement zo aan").await;
    let mine = subscribe(&hub, tokens::KVK, &sink, json!({})).await;
    browser.fill("#f-label", "Nog een").await;
    let said = check_says(&browser, "Dat ging niet").await;
    assert!(
        said.contains("max_subscriptions_per_principal"),
        "names the quota: {said}"
    );
    // Its one subscription, edited, counts once: the quota is not past.
    browser
        .goto(&hub.url(&format!("/console/subscriptions/{mine}/edit")))
        .await;
    browser.fill("#f-label", "Verhuizingen").await;
    check_says(&browser, "neemt dit abonnement zo aan").await;

    // The audit page: the chain's check is offered to an admin only.
    browser.goto(&hub.url("/console/audit")).await;
    assert!(
        !browser.text().await.contains("De keten controleren"),
        "a subscriber may not verify the chain"
    );
    let check = browser.text_of("#audit-export-check").await;
    assert!(
        check.contains("alleen wat u mag zien") && check.contains("--selection"),
        "a subscriber's export is a selection: {check}"
    );
    sign_in(&browser, &hub, tokens::ADMIN).await;
    browser.goto(&hub.url("/console/audit")).await;
    assert!(browser.text().await.contains("De keten controleren"));

    // An MQTT subscription's page shows its topic, and its form keeps it.
    let made = hub
        .call(
            reqwest::Method::POST,
            "/v1/subscriptions",
            tokens::ADMIN,
            Some(json!({"sink": "mqtt://127.0.0.1:9", "protocol": "MQTT5",
                        "protocolsettings": {"topicname": "knooppunt/console", "qos": 2}})),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let id = made.body["id"].as_str().unwrap();
    browser
        .goto(&hub.url(&format!("/console/subscriptions/{id}")))
        .await;
    let text = browser.text().await;
    assert!(
        text.contains("MQTT-onderwerp") && text.contains("knooppunt/console (MQTT 5, QoS 2)"),
        "{text}"
    );
    browser
        .goto(&hub.url(&format!("/console/subscriptions/{id}/edit")))
        .await;
    let topic = browser
        .execute("return document.getElementById('f-topic').value", json!([]))
        .await;
    assert_eq!(topic, "knooppunt/console");

    // A NATS subscription's page shows its subject and what JetStream promises (the MQTT
    // one deleted first: the quota is one).
    let id = replace_and_show(
        &hub,
        &browser,
        id,
        json!({"sink": "nats://127.0.0.1:9", "protocol": "NATS",
               "protocolsettings": {"subject": "knooppunt.console", "jetstream": true}}),
    )
    .await;
    let text = browser.text().await;
    assert!(
        text.contains("NATS-subject")
            && text.contains("knooppunt.console (JetStream: minstens één keer)"),
        "{text}"
    );
    browser
        .goto(&hub.url(&format!("/console/subscriptions/{id}/edit")))
        .await;
    let subject = browser
        .execute("return document.getElementById('f-topic').value", json!([]))
        .await;
    assert_eq!(subject, "knooppunt.console");

    // An AMQP subscription's page shows its target: here the endpoint's path.
    replace_and_show(
        &hub,
        &browser,
        &id,
        json!({"sink": "amqp://127.0.0.1:9/amq/queue/knooppunt", "protocol": "AMQP"}),
    )
    .await;
    let text = browser.text().await;
    assert!(
        text.contains("AMQP-adres")
            && text.contains("het pad van het eindpunt (AMQP 1.0, unsettled: minstens één keer)"),
        "{text}"
    );
}
