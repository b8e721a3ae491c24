//! The Notificaties API 1.0 facade (`/api/v1`) as ZGW components call it: their JWTs
//! (HS256, client_id, iat), the API's problem shapes and `API-version`, and kanalen kept as
//! catalog entries of the hub.

use knooppunt_store::Records;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use knooppunt_broker::identity::zgw::{ZgwClient, ZgwOptions};
use knooppunt_tests::wait::quiet;
use knooppunt_tests::wait::until;
use knooppunt_tests::{Answer, TestHub, tokens};
use reqwest::Method;
use serde_json::{Value, json};

const OPEN_ZAAK: &[u8] = b"open-zaak-geheim";
const ZAAKAFHANDEL: &[u8] = b"zac-geheim";

async fn hub() -> TestHub {
    hub_with(Vec::new()).await
}

/// A hub with Open Zaak (publishes) and a zaakafhandelcomponent (consumes) as ZGW clients,
/// and `more`.
async fn hub_with(more: Vec<ZgwClient>) -> TestHub {
    let mut options = knooppunt_tests::test_options();
    options.zgw = ZgwOptions {
        clients: vec![
            ZgwClient {
                client_id: "open-zaak".into(),
                secret: OPEN_ZAAK.to_vec(),
                scopes: vec!["notificaties.publiceren".into()],
                oin: None,
                principal: None,
            },
            ZgwClient {
                client_id: "zac".into(),
                secret: ZAAKAFHANDEL.to_vec(),
                scopes: vec!["notificaties.consumeren".into()],
                oin: None,
                principal: None,
            },
        ]
        .into_iter()
        .chain(more)
        .collect(),
        max_token_age: Duration::from_secs(3600),
        ..ZgwOptions::default()
    };
    TestHub::builder().options(options).start().await
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn jwt(header: Value, claims: Value, secret: &[u8]) -> String {
    knooppunt_tests::zgw::jwt(&header, &claims, secret)
}

fn token(client: &str, secret: &[u8]) -> String {
    knooppunt_tests::zgw::token(client, secret)
}

async fn call(
    hub: &TestHub,
    method: Method,
    path: &str,
    token: &str,
    body: Option<Value>,
) -> Answer {
    let answer = hub.call(method, path, token, body).await;
    assert_eq!(
        answer.header("api-version"),
        Some("1.0.0"),
        "every answer carries API-version"
    );
    answer
}

/// An abonnement as it was made: without the state of its deliveries (`bezorging`, which
/// only a read of one abonnement shows).
fn without_state(mut abonnement: Value) -> Value {
    if let Some(object) = abonnement.as_object_mut() {
        object.remove("bezorging");
    }
    abonnement
}

/// A `Fout` (or `ValidatieFout`) with this status and code.
fn assert_fout(answer: &Answer, status: u16, code: &str) {
    assert_eq!(answer.status, status, "{}", answer.body);
    assert_eq!(
        answer.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(answer.body["code"], code, "{}", answer.body);
    for field in ["type", "title", "detail", "instance"] {
        assert!(answer.body[field].is_string(), "{field}: {}", answer.body);
    }
    assert_eq!(answer.body["status"], status);
}

#[tokio::test]
async fn kanalen_are_registered_listed_and_read() {
    let hub = hub().await;
    let publisher = token("open-zaak", OPEN_ZAAK);
    let consumer = token("zac", ZAAKAFHANDEL);
    let created = call(
        &hub,
        Method::POST,
        "/api/v1/kanaal",
        &publisher,
        Some(json!({"naam": "zaken", "documentatieLink": "https://open-zaak.example.nl/ref/kanalen/#zaken",
                    "filters": ["bronorganisatie", "zaaktype", "vertrouwelijkheidaanduiding"]})),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let url = created.body["url"].as_str().unwrap().to_owned();
    assert_eq!(created.header("location"), Some(url.as_str()));
    assert!(url.starts_with(&hub.url("/api/v1/kanaal/")), "{url}");
    assert_eq!(created.body["naam"], "zaken");
    assert_eq!(
        created.body["filters"],
        json!(["bronorganisatie", "zaaktype", "vertrouwelijkheidaanduiding"])
    );

    // A consumer reads them, all or by name.
    let path = url.trim_start_matches(&hub.url(""));
    let read = call(&hub, Method::GET, path, &consumer, None).await;
    assert_eq!(read.body, created.body);
    let list = |query: &'static str| {
        let (hub, consumer) = (&hub, &consumer);
        async move {
            let path = format!("/api/v1/kanaal{query}");
            call(hub, Method::GET, &path, consumer, None).await
        }
    };
    assert_eq!(list("").await.body, json!([created.body]));
    assert_eq!(list("?naam=zaken").await.body, json!([created.body]));
    assert_eq!(list("?naam=besluiten").await.body, json!([]));
    // Other parameters are ignored, as Open Notificaties ignores them; a name given twice is
    // a question the hub cannot answer, and says so in a Fout.
    assert_eq!(list("?page=2&naam=zaken").await.body, json!([created.body]));
    let twice = list("?naam=zaken&naam=besluiten").await;
    assert_fout(&twice, 400, "invalid");
    assert!(
        twice.body["invalidParams"][0]["reason"]
            .as_str()
            .is_some_and(|reason| reason.contains("naam")),
        "{}",
        twice.body
    );
    let missing = call(&hub, Method::GET, "/api/v1/kanaal/nope", &consumer, None).await;
    assert_fout(&missing, 404, "not_found");

    // The kanaal is a catalog entry of the hub: its types and its filters as kenmerken.
    let entry = hub
        .call(
            Method::GET,
            &format!("/v1/eventtypes/{}", url.rsplit('/').next().unwrap()),
            tokens::ADMIN,
            None,
        )
        .await;
    assert_eq!(entry.status, 200, "{}", entry.body);
    assert_eq!(entry.body["type"], "nl.vng.zgw.zaken.");
    assert_eq!(entry.body["typeMatch"], "prefix");
    assert_eq!(entry.body["owner"], "zgw:open-zaak");
    assert_eq!(entry.body["source"], "urn:nld:zgw:open-zaak");
    assert_eq!(entry.body["kenmerken"], created.body["filters"]);

    // On the audit trail, by the client's principal.
    let trail = hub
        .call(
            Method::GET,
            "/v1/audit?name=kanaal.create",
            tokens::ADMIN,
            None,
        )
        .await;
    assert_eq!(trail.body[0]["actor"], "zgw:open-zaak", "{}", trail.body);
    // The catalog's entry, as `/v1` records an event type, and the kanaal it is, with the
    // client that asked.
    let details = &trail.body[0]["details"];
    assert_eq!(details["after"]["kanaal"]["naam"], "zaken", "{details}");
    assert_eq!(details["after"]["type"], "nl.vng.zgw.zaken.", "{details}");
    assert_eq!(details["client"], "open-zaak", "{details}");

    // A name is unique; every problem of a body is listed with its code.
    let again = call(
        &hub,
        Method::POST,
        "/api/v1/kanaal",
        &publisher,
        Some(json!({"naam": "zaken"})),
    )
    .await;
    assert_fout(&again, 400, "invalid");
    assert_eq!(
        again.body["invalidParams"],
        json!([{"name": "naam", "code": "unique", "reason": "Kanaal met deze naam bestaat al."}])
    );
    let bad = call(
        &hub,
        Method::POST,
        "/api/v1/kanaal",
        &publisher,
        Some(json!({"documentatieLink": "geen url", "filters": "x"})),
    )
    .await;
    assert_fout(&bad, 400, "invalid");
    let codes: Vec<(String, String)> = bad.body["invalidParams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().into(),
                p["code"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        codes,
        [
            ("naam".into(), "required".into()),
            ("documentatieLink".into(), "invalid".into()),
            ("filters".into(), "not_a_list".into())
        ]
    );
    let long = call(
        &hub,
        Method::POST,
        "/api/v1/kanaal",
        &publisher,
        Some(json!({"naam": "k".repeat(51)})),
    )
    .await;
    assert_eq!(long.body["invalidParams"][0]["code"], "max_length");

    // Registering takes the publishing scope.
    let refused = call(
        &hub,
        Method::POST,
        "/api/v1/kanaal",
        &consumer,
        Some(json!({"naam": "documenten"})),
    )
    .await;
    assert_fout(&refused, 403, "permission_denied");
}

#[tokio::test]
async fn zgw_tokens_are_checked_and_refusals_say_why() {
    let hub = hub().await;
    let refused = |answer: &Answer, needle: &str| {
        assert_fout(answer, 401, "not_authenticated");
        assert!(
            answer.body["detail"].as_str().unwrap().contains(needle),
            "{needle}: {}",
            answer.body
        );
    };
    let anonymous = hub
        .client
        .get(hub.url("/api/v1/kanaal"))
        .send()
        .await
        .unwrap();
    let anonymous = Answer::from(anonymous).await;
    assert_eq!(anonymous.header("api-version"), Some("1.0.0"));
    refused(&anonymous, "Bearer");
    let expired = jwt(
        json!({"alg": "HS256"}),
        json!({"client_id": "zac", "iat": now() - 7200}),
        ZAAKAFHANDEL,
    );
    refused(
        &call(&hub, Method::GET, "/api/v1/kanaal", &expired, None).await,
        "make a new one",
    );
    // A critical header extension the hub cannot understand (RFC 7515, 4.1.11), an `exp`
    // that has passed (RFC 7519, 4.1.4) and an `nbf` ahead refuse an otherwise valid token.
    let critical = jwt(
        json!({"alg": "HS256", "crit": ["b64"], "b64": true}),
        json!({"client_id": "zac", "iat": now()}),
        ZAAKAFHANDEL,
    );
    refused(
        &call(&hub, Method::GET, "/api/v1/kanaal", &critical, None).await,
        "crit",
    );
    let past = jwt(
        json!({"alg": "HS256"}),
        json!({"client_id": "zac", "iat": now() - 600, "exp": now() - 300}),
        ZAAKAFHANDEL,
    );
    refused(
        &call(&hub, Method::GET, "/api/v1/kanaal", &past, None).await,
        "expired",
    );
    let ahead = jwt(
        json!({"alg": "HS256"}),
        json!({"client_id": "zac", "iat": now(), "nbf": now() + 3600}),
        ZAAKAFHANDEL,
    );
    refused(
        &call(&hub, Method::GET, "/api/v1/kanaal", &ahead, None).await,
        "nbf",
    );
    let current = jwt(
        json!({"alg": "HS256"}),
        json!({"client_id": "zac", "iat": now(), "exp": now() + 300}),
        ZAAKAFHANDEL,
    );
    assert_eq!(
        call(&hub, Method::GET, "/api/v1/kanaal", &current, None)
            .await
            .status,
        200
    );
    let wrong_secret = token("zac", b"not the secret");
    refused(
        &call(&hub, Method::GET, "/api/v1/kanaal", &wrong_secret, None).await,
        "signature",
    );
    let no_client = jwt(json!({"alg": "HS256"}), json!({"iat": now()}), ZAAKAFHANDEL);
    refused(
        &call(&hub, Method::GET, "/api/v1/kanaal", &no_client, None).await,
        "client_id",
    );
    let stranger = token("someone", ZAAKAFHANDEL);
    refused(
        &call(&hub, Method::GET, "/api/v1/kanaal", &stranger, None).await,
        "someone",
    );
    let unsigned = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
        URL_SAFE_NO_PAD.encode(json!({"client_id": "zac", "iat": now()}).to_string())
    );
    refused(
        &call(&hub, Method::GET, "/api/v1/kanaal", &unsigned, None).await,
        "HS256",
    );
    // The hub's own tokens are not ZGW tokens, and ZGW tokens do not open the hub's API.
    refused(
        &call(&hub, Method::GET, "/api/v1/kanaal", tokens::ADMIN, None).await,
        "JWT",
    );
    let zgw_on_hub = hub
        .call(
            Method::GET,
            "/v1/subscriptions",
            &token("zac", ZAAKAFHANDEL),
            None,
        )
        .await;
    assert_eq!(zgw_on_hub.status, 401);
}

#[tokio::test]
async fn the_facade_can_be_switched_off() {
    let mut options = knooppunt_tests::test_options();
    options.zgw.enabled = false;
    let hub = TestHub::builder().options(options).start().await;
    let answer = hub
        .call(Method::GET, "/api/v1/kanaal", "anything", None)
        .await
        .assert_problem(404);
    assert_ne!(answer.header("api-version"), None);
}

const NOTIFICATIE: &str = r#"{
  "kanaal": "zaken",
  "hoofdObject": "https://open-zaak.example.nl/zaken/api/v1/zaken/d4d4",
  "resource": "status",
  "resourceUrl": "https://open-zaak.example.nl/zaken/api/v1/statussen/a1a1",
  "actie": "create",
  "aanmaakdatum": "2026-11-24T08:15:00.123456Z",
  "kenmerken": {"bronorganisatie": "224557609", "zaaktype": "https://open-zaak.example.nl/catalogi/api/v1/zaaktypen/1"}
}"#;

async fn register_zaken(hub: &TestHub, publisher: &str) {
    let created = call(
        hub,
        Method::POST,
        "/api/v1/kanaal",
        publisher,
        Some(json!({"naam": "zaken", "filters": ["bronorganisatie", "zaaktype", "vertrouwelijkheidaanduiding"]})),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
}

async fn post_notificatie(hub: &TestHub, token: &str, body: &str) -> Answer {
    let answer = hub
        .request(Method::POST, "/api/v1/notificaties", token)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let text_answer = Answer::from(answer).await;
    assert_eq!(text_answer.header("api-version"), Some("1.0.0"));
    text_answer
}

/// A notificatie published on the facade is stored and routed as a CloudEvent: a
/// CloudEvents subscription of the kanaal's types receives it, its data the notificatie
/// byte for byte.
#[tokio::test]
async fn a_notificatie_reaches_cloudevents_subscriptions_unchanged() {
    use knooppunt_tests::sink::Sink;
    let hub = hub().await;
    let publisher = token("open-zaak", OPEN_ZAAK);
    register_zaken(&hub, &publisher).await;
    let sink = Sink::start_for_any_hub().await;
    let subscribed = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::KVK,
            Some(json!({"sink": sink.url, "protocol": "HTTP",
                        "filters": [{"prefix": {"type": "nl.vng.zgw.zaken."}}]})),
        )
        .await;
    assert_eq!(subscribed.status, 201, "{}", subscribed.body);

    let published = post_notificatie(&hub, &publisher, NOTIFICATIE).await;
    assert_eq!(published.status, 201, "{}", published.body);
    assert_eq!(
        published.body,
        serde_json::from_str::<Value>(NOTIFICATIE).unwrap()
    );

    let delivered = sink.wait_for(1, Duration::from_secs(10)).await;
    let event = delivered[0].json();
    assert_eq!(event["type"], "nl.vng.zgw.zaken.status.create");
    assert_eq!(event["source"], "urn:nld:zgw:open-zaak");
    assert_eq!(
        event["subject"],
        "https://open-zaak.example.nl/zaken/api/v1/statussen/a1a1"
    );
    assert_eq!(event["time"], "2026-11-24T08:15:00.123456Z");
    let body = String::from_utf8(delivered[0].body.to_vec()).unwrap();
    assert!(
        body.contains(NOTIFICATIE.trim()),
        "the notificatie byte for byte in the event's data: {body}"
    );
}

#[tokio::test]
async fn notificaties_are_refused_as_open_notificaties_refuses_them() {
    let hub = hub().await;
    let publisher = token("open-zaak", OPEN_ZAAK);
    let unknown = post_notificatie(&hub, &publisher, NOTIFICATIE).await;
    assert_fout(&unknown, 400, "invalid");
    assert_eq!(unknown.body["invalidParams"][0]["name"], "kanaal");
    assert_eq!(unknown.body["invalidParams"][0]["code"], "kanaal_not_found");
    register_zaken(&hub, &publisher).await;
    let stray = NOTIFICATIE.replace("\"bronorganisatie\"", "\"kleur\"");
    let inconsistent = post_notificatie(&hub, &publisher, &stray).await;
    assert_fout(&inconsistent, 400, "invalid");
    assert_eq!(
        inconsistent.body["invalidParams"][0]["code"],
        "kenmerken_inconsistent"
    );
    let broken = post_notificatie(&hub, &publisher, r#"{"kanaal": "zaken"}"#).await;
    assert_fout(&broken, 400, "invalid");
    let names: Vec<&str> = broken.body["invalidParams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "hoofdObject",
            "resource",
            "resourceUrl",
            "actie",
            "aanmaakdatum"
        ]
    );
    let consumer = token("zac", ZAAKAFHANDEL);
    let forbidden = post_notificatie(&hub, &consumer, NOTIFICATIE).await;
    assert_fout(&forbidden, 403, "permission_denied");
    let garbage = post_notificatie(&hub, &publisher, "{").await;
    assert_eq!(garbage.body["invalidParams"][0]["code"], "parse_error");
}

/// The facade serves its OpenAPI document where ZGW clients look for it (YAML and JSON, no
/// token), and every answer of every operation it lists is what that document says.
#[tokio::test]
async fn every_answer_is_what_the_notificaties_document_says() {
    let hub = hub().await;
    let yaml = hub
        .client
        .get(hub.url("/api/v1/schema/openapi.yaml"))
        .send()
        .await
        .unwrap();
    assert_eq!(yaml.status(), 200);
    assert_eq!(yaml.headers()["api-version"], "1.0.0");
    let yaml = yaml.text().await.unwrap();
    assert!(yaml.starts_with("openapi: 3.0.0"), "{}", &yaml[..40]);
    let document: Value = hub.get_json("/api/v1/schema/openapi.json").await;
    assert_eq!(document["info"]["version"], "1.0.0");
    let mut paths: Vec<&String> = document["paths"].as_object().unwrap().keys().collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            "/abonnement",
            "/abonnement/{uuid}",
            "/cloudevents",
            "/kanaal",
            "/kanaal/{uuid}",
            "/notificaties"
        ],
        "only what is served"
    );
    // The document says what the hub refuses: a specversion other than 1.0, an abonnement
    // with neither kanalen nor cloudeventFilters.
    let schemas = &document["components"]["schemas"];
    assert_eq!(
        schemas["CloudEvent"]["properties"]["specversion"]["enum"],
        json!(["1.0"])
    );
    assert!(
        schemas["Abonnement"]["description"]
            .as_str()
            .unwrap()
            .contains("`kanalen` (1 tot 100), `cloudeventFilters`, of beide"),
        "{}",
        schemas["Abonnement"]
    );
    let mut check = knooppunt_tests::openapi::Checker::with(document);

    let publisher = token("open-zaak", OPEN_ZAAK);
    let consumer = token("zac", ZAAKAFHANDEL);
    let post = |token: &str, path: &str, body: &str| {
        hub.request(Method::POST, &format!("/api/v1{path}"), token)
            .header("content-type", "application/json")
            .body(body.to_owned())
    };
    let created = check
        .check(
            "post",
            "/kanaal",
            post(
                &publisher,
                "/kanaal",
                r#"{"naam": "zaken", "filters": ["bronorganisatie", "zaaktype"]}"#,
            ),
        )
        .await;
    for body in [r#"{"naam": "zaken"}"#, r#"{"filters": 5}"#, "[", "{}"] {
        check
            .check("post", "/kanaal", post(&publisher, "/kanaal", body))
            .await;
    }
    check
        .check(
            "post",
            "/kanaal",
            post(&consumer, "/kanaal", r#"{"naam": "x"}"#),
        )
        .await;
    check
        .check(
            "post",
            "/kanaal",
            post("nonsense", "/kanaal", r#"{"naam": "x"}"#),
        )
        .await;
    for query in ["", "?naam=zaken", "?naam=niets", "?naam=a&naam=b"] {
        check
            .check(
                "get",
                "/kanaal",
                hub.request(Method::GET, &format!("/api/v1/kanaal{query}"), &consumer),
            )
            .await;
    }
    check
        .check("get", "/kanaal", hub.client.get(hub.url("/api/v1/kanaal")))
        .await;
    let uuid = created["url"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    for id in [uuid.as_str(), "nope"] {
        check
            .check(
                "get",
                "/kanaal/{uuid}",
                hub.request(Method::GET, &format!("/api/v1/kanaal/{id}"), &consumer),
            )
            .await;
    }
    let kanaal = format!("/api/v1/kanaal/{uuid}");
    for (method, body) in [
        (
            "put",
            r#"{"naam": "zaken", "filters": ["bronorganisatie", "zaaktype"]}"#,
        ),
        ("put", r#"{"naam": "anders"}"#),
        (
            "patch",
            r#"{"documentatieLink": "https://open-zaak.example.nl/ref/kanalen"}"#,
        ),
        ("patch", r#"{"filters": null}"#),
    ] {
        let request = hub
            .request(method.to_uppercase().parse().unwrap(), &kanaal, &publisher)
            .header("content-type", "application/json")
            .body(body);
        check.check(method, "/kanaal/{uuid}", request).await;
    }
    check
        .check(
            "put",
            "/kanaal/{uuid}",
            hub.request(Method::PUT, &kanaal, &consumer)
                .header("content-type", "application/json")
                .body(r#"{"naam": "zaken"}"#),
        )
        .await;
    for body in [
        r#"{"specversion": "1.0", "id": "c-1", "source": "urn:nld:zgw:open-zaak", "type": "nl.overheid.zaken.zaak-gemuteerd"}"#,
        r#"{"specversion": "1.0", "id": "c-2", "type": "t"}"#,
        r#"{"specversion": "1.0", "id": "c-3", "source": "urn:ander", "type": "t"}"#,
        "[",
    ] {
        check
            .check(
                "post",
                "/cloudevents",
                post(&publisher, "/cloudevents", body),
            )
            .await;
    }
    for body in [
        NOTIFICATIE.to_owned(),
        NOTIFICATIE.replace("\"bronorganisatie\"", "\"kleur\""),
        r#"{"kanaal": "zaken"}"#.to_owned(),
        NOTIFICATIE.replace("\"zaken\"", "\"besluiten\""),
    ] {
        check
            .check(
                "post",
                "/notificaties",
                post(&publisher, "/notificaties", &body),
            )
            .await;
    }
    check
        .check(
            "post",
            "/notificaties",
            post(&consumer, "/notificaties", NOTIFICATIE),
        )
        .await;
    let sink = callback().await;
    let abonnement = format!(
        r#"{{"callbackUrl": "{}", "auth": "Bearer x", "kanalen": [{{"naam": "zaken", "filters": {{"bronorganisatie": "1"}}}}]}}"#,
        sink.url
    );
    let made = check
        .check(
            "post",
            "/abonnement",
            post(&consumer, "/abonnement", &abonnement),
        )
        .await;
    for body in [
        r#"{"kanalen": 5}"#,
        r#"{"callbackUrl": "x", "auth": "y", "kanalen": [{"naam": "niets"}]}"#,
    ] {
        check
            .check("post", "/abonnement", post(&consumer, "/abonnement", body))
            .await;
    }
    check
        .check(
            "post",
            "/abonnement",
            post(&publisher, "/abonnement", &abonnement),
        )
        .await;
    check
        .check(
            "get",
            "/abonnement",
            hub.request(Method::GET, "/api/v1/abonnement", &consumer),
        )
        .await;
    let made = made["url"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let item = format!("/api/v1/abonnement/{made}");
    check
        .check(
            "put",
            "/abonnement/{uuid}",
            hub.request(Method::PUT, &item, &consumer)
                .header("content-type", "application/json")
                .body(abonnement.clone()),
        )
        .await;
    check
        .check(
            "patch",
            "/abonnement/{uuid}",
            hub.request(Method::PATCH, &item, &consumer)
                .header("content-type", "application/json")
                .body(r#"{"kanalen": [{"naam": "niets"}]}"#),
        )
        .await;
    for id in [made.as_str(), "nope"] {
        let path = format!("/api/v1/abonnement/{id}");
        check
            .check(
                "get",
                "/abonnement/{uuid}",
                hub.request(Method::GET, &path, &consumer),
            )
            .await;
        check
            .check(
                "delete",
                "/abonnement/{uuid}",
                hub.request(Method::DELETE, &path, &consumer),
            )
            .await;
    }
    assert!(check.checked >= 34, "{} answers checked", check.checked);
}

/// A callback as ZGW consumers have one: it records what arrives and answers 204.
async fn callback() -> knooppunt_tests::sink::Sink {
    let sink = knooppunt_tests::sink::Sink::start().await;
    sink.answer_always(knooppunt_tests::sink::Reply::status(204));
    sink
}

async fn subscribe(hub: &TestHub, token: &str, callback: &str, filters: Value) -> Answer {
    call(
        hub,
        Method::POST,
        "/api/v1/abonnement",
        token,
        Some(
            json!({"callbackUrl": callback, "auth": "Bearer abonnee-geheim",
                    "kanalen": [{"naam": "zaken", "filters": filters}]}),
        ),
    )
    .await
}

/// An abonnement: tested with a notificatie at creation, then every notificatie of its
/// kanaal that its filters let through arrives at its callback exactly as published, with
/// its `auth`; `auth` is never shown; it is listed, read and deleted by its own client only.
#[tokio::test]
async fn abonnementen_receive_the_notificaties_their_filters_let_through() {
    let hub = hub().await;
    let publisher = token("open-zaak", OPEN_ZAAK);
    let consumer = token("zac", ZAAKAFHANDEL);
    register_zaken(&hub, &publisher).await;
    let (all, ours, theirs) = (callback().await, callback().await, callback().await);
    let created = subscribe(&hub, &consumer, &all.url, json!({})).await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body.get("auth"), None, "auth is write-only");
    let tested = all.deliveries();
    assert_eq!(tested.len(), 1, "the test notificatie");
    assert_eq!(tested[0].json()["kanaal"], "test");
    assert_eq!(
        tested[0].header("authorization"),
        Some("Bearer abonnee-geheim")
    );
    let mine = subscribe(
        &hub,
        &consumer,
        &ours.url,
        json!({"bronorganisatie": "224557609", "zaaktype": "*"}),
    )
    .await;
    assert_eq!(mine.status, 201, "{}", mine.body);
    assert_eq!(
        mine.body["kanalen"],
        json!([{"naam": "zaken", "filters": {"bronorganisatie": "224557609", "zaaktype": "*"}}])
    );
    let other = subscribe(
        &hub,
        &consumer,
        &theirs.url,
        json!({"bronorganisatie": "000000000"}),
    )
    .await;
    assert_eq!(other.status, 201, "{}", other.body);

    assert_eq!(
        post_notificatie(&hub, &publisher, NOTIFICATIE).await.status,
        201
    );
    for sink in [&all, &ours] {
        let arrived = sink.wait_for(2, Duration::from_secs(10)).await;
        assert_eq!(
            std::str::from_utf8(&arrived[1].body).unwrap(),
            NOTIFICATIE.trim(),
            "the notificatie byte for byte"
        );
        assert_eq!(
            arrived[1].header("authorization"),
            Some("Bearer abonnee-geheim")
        );
        assert_eq!(arrived[1].header("content-type"), Some("application/json"));
    }
    quiet(
        "a delivery to the abonnement whose filters refuse it",
        Duration::from_millis(300),
    )
    .await;
    assert_eq!(
        theirs.deliveries().len(),
        1,
        "filtered out: only the test notificatie"
    );

    // Listed and read by its own client; another client sees none of it.
    let listed = call(&hub, Method::GET, "/api/v1/abonnement", &consumer, None).await;
    assert_eq!(listed.body.as_array().unwrap().len(), 3);
    let path = created.body["url"]
        .as_str()
        .unwrap()
        .trim_start_matches(&hub.url(""))
        .to_owned();
    let read = call(&hub, Method::GET, &path, &consumer, None).await;
    assert_eq!(without_state(read.body), created.body);
    let stranger = call(&hub, Method::GET, &path, &publisher, None).await;
    assert_fout(&stranger, 404, "not_found");
    let deleted = call(&hub, Method::DELETE, &path, &consumer, None).await;
    assert_eq!(deleted.status, 204);
    let gone = call(&hub, Method::GET, &path, &consumer, None).await;
    assert_fout(&gone, 404, "not_found");
    // The trail keeps what went (its callback, redacted, and kanalen) as `/v1` keeps a
    // subscription before it goes (the use case builds the entry for both), and concerns
    // its owner.
    let trail = hub
        .call(
            Method::GET,
            "/v1/audit?name=abonnement.delete",
            tokens::ADMIN,
            None,
        )
        .await;
    let entry = &trail.body[0];
    assert_eq!(
        entry["details"]["before"]["sink"], created.body["callbackUrl"],
        "{entry}"
    );
    assert_eq!(
        entry["details"]["before"]["kanalen"][0]["naam"], "zaken",
        "{entry}"
    );
    assert_eq!(entry["details"]["client"], "zac", "{entry}");
    assert!(
        entry["concerns"].as_array().is_some_and(|c| !c.is_empty()),
        "{entry}"
    );
}

#[tokio::test]
async fn abonnementen_are_refused_as_open_notificaties_refuses_them() {
    let hub = hub().await;
    let publisher = token("open-zaak", OPEN_ZAAK);
    let consumer = token("zac", ZAAKAFHANDEL);
    let sink = callback().await;
    let unknown = subscribe(&hub, &consumer, &sink.url, json!({})).await;
    assert_fout(&unknown, 400, "invalid");
    assert_eq!(unknown.body["invalidParams"][0]["code"], "kanaal_not_found");
    register_zaken(&hub, &publisher).await;
    // `filters: null` is refused, as Open Notificaties refuses it (left out, it is no filter).
    let null = subscribe(&hub, &consumer, &sink.url, Value::Null).await;
    assert_fout(&null, 400, "invalid");
    assert_eq!(null.body["invalidParams"][0]["name"], "kanalen.0.filters");
    assert_eq!(null.body["invalidParams"][0]["code"], "null");
    let inconsistent = subscribe(&hub, &consumer, &sink.url, json!({"kleur": "rood"})).await;
    assert_eq!(
        inconsistent.body["invalidParams"][0]["code"],
        "inconsistent-abonnement-filters"
    );
    // A callback that does not take the test notificatie is refused; nothing is made.
    let failing = knooppunt_tests::sink::Sink::start().await;
    failing.answer_always(knooppunt_tests::sink::Reply::status(500));
    let refused = subscribe(&hub, &consumer, &failing.url, json!({})).await;
    assert_fout(&refused, 400, "invalid");
    assert_eq!(
        refused.body["invalidParams"][0]["code"],
        "invalid-callback-url"
    );
    assert!(
        refused.body["invalidParams"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("500")
    );
    let listed = call(&hub, Method::GET, "/api/v1/abonnement", &consumer, None).await;
    assert_eq!(listed.body, json!([]));
    let missing = call(
        &hub,
        Method::POST,
        "/api/v1/abonnement",
        &consumer,
        Some(json!({"kanalen": "zaken"})),
    )
    .await;
    let names: Vec<&str> = missing.body["invalidParams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["callbackUrl", "auth", "kanalen"]);
    let forbidden = subscribe(&hub, &publisher, &sink.url, json!({})).await;
    assert_fout(&forbidden, 403, "permission_denied");
}

/// A hub with the kanaal `zaken` and an abonnement whose callback takes the test
/// notificatie, then answers `then` once (and 204 after): the hub, the publisher's token,
/// the callback and the abonnement.
async fn subscribed_then(then: u16) -> (TestHub, String, knooppunt_tests::sink::Sink, Answer) {
    let hub = hub().await;
    let publisher = token("open-zaak", OPEN_ZAAK);
    let consumer = token("zac", ZAAKAFHANDEL);
    register_zaken(&hub, &publisher).await;
    let sink = knooppunt_tests::sink::Sink::start().await;
    sink.answer([
        knooppunt_tests::sink::Reply::status(204),
        knooppunt_tests::sink::Reply::status(then),
    ]);
    let created = subscribe(&hub, &consumer, &sink.url, json!({})).await;
    assert_eq!(created.status, 201, "{}", created.body);
    (hub, publisher, sink, created)
}

/// A callback that fails is retried by the hub's delivery until it takes the notificatie.
#[tokio::test]
async fn a_failing_callback_is_retried() {
    // The test notificatie passes; the notificatie fails once, then arrives.
    let (hub, publisher, sink, _) = subscribed_then(503).await;
    assert_eq!(
        post_notificatie(&hub, &publisher, NOTIFICATIE).await.status,
        201
    );
    let arrived = sink.wait_for(3, Duration::from_secs(15)).await;
    assert_eq!(
        std::str::from_utf8(&arrived[2].body).unwrap(),
        NOTIFICATIE.trim()
    );
}

/// A CloudEvent published on `/v1/events` whose type is a kanaal's reaches the matching
/// abonnementen as a notificatie built from its attributes (its `kenmerk…` extensions
/// filtered on as kenmerken).
#[tokio::test]
async fn a_native_cloudevent_reaches_abonnementen_as_a_notificatie() {
    let hub = hub().await;
    register_zaken(&hub, &token("open-zaak", OPEN_ZAAK)).await;
    let consumer = token("zac", ZAAKAFHANDEL);
    let (ours, theirs) = (callback().await, callback().await);
    let mine = subscribe(
        &hub,
        &consumer,
        &ours.url,
        json!({"bronorganisatie": "224557609"}),
    )
    .await;
    assert_eq!(mine.status, 201, "{}", mine.body);
    let other = subscribe(
        &hub,
        &consumer,
        &theirs.url,
        json!({"bronorganisatie": "000000000"}),
    )
    .await;
    assert_eq!(other.status, 201, "{}", other.body);
    let event = json!({"specversion": "1.0", "id": "ce-1", "source": "urn:nld:oin:1:systeem:zaaksysteem",
                       "type": "nl.vng.zgw.zaken.zaak.update",
                       "subject": "https://zaken.example.nl/api/v1/zaken/9",
                       "time": "2026-11-24T09:00:00Z", "kenmerkbronorganisatie": "224557609",
                       "datacontenttype": "application/json", "data": {"iets": "anders"}});
    hub.publish_as(tokens::PUBLISHER, &event).await;
    let arrived = ours.wait_for(2, Duration::from_secs(10)).await;
    let notificatie = arrived[1].json();
    assert_eq!(notificatie["kanaal"], "zaken");
    assert_eq!(notificatie["resource"], "zaak");
    assert_eq!(notificatie["actie"], "update");
    assert_eq!(
        notificatie["resourceUrl"],
        "https://zaken.example.nl/api/v1/zaken/9"
    );
    assert_eq!(notificatie["aanmaakdatum"], "2026-11-24T09:00:00Z");
    assert_eq!(
        notificatie["kenmerken"],
        json!({"bronorganisatie": "224557609"})
    );
    quiet(
        "a delivery to the abonnement whose filters refuse it",
        Duration::from_millis(300),
    )
    .await;
    assert_eq!(
        theirs.deliveries().len(),
        1,
        "filtered out: only the test notificatie"
    );
}

/// An abonnement is replaced (`PUT`) or changed (`PATCH`): the callback is tested again,
/// `auth` left out of a patch is kept, and the notificaties follow the new abonnement.
#[tokio::test]
async fn abonnementen_are_replaced_and_patched() {
    let hub = hub().await;
    let publisher = token("open-zaak", OPEN_ZAAK);
    let consumer = token("zac", ZAAKAFHANDEL);
    register_zaken(&hub, &publisher).await;
    let (first, second) = (callback().await, callback().await);
    let created = subscribe(&hub, &consumer, &first.url, json!({})).await;
    let path = created.body["url"]
        .as_str()
        .unwrap()
        .trim_start_matches(&hub.url(""))
        .to_owned();
    let replaced = call(
        &hub,
        Method::PUT,
        &path,
        &consumer,
        Some(json!({"callbackUrl": second.url, "auth": "Bearer nieuw",
                    "kanalen": [{"naam": "zaken", "filters": {"bronorganisatie": "224557609"}}]})),
    )
    .await;
    assert_eq!(replaced.status, 200, "{}", replaced.body);
    assert_eq!(replaced.body["callbackUrl"], second.url);
    assert_eq!(
        second.deliveries()[0].json()["kanaal"],
        "test",
        "the new callback tested"
    );
    // A patch of the filters keeps the callback and the auth.
    let patched = call(
        &hub,
        Method::PATCH,
        &path,
        &consumer,
        Some(json!({"kanalen": [{"naam": "zaken", "filters": {"bronorganisatie": "*"}}]})),
    )
    .await;
    assert_eq!(patched.status, 200, "{}", patched.body);
    assert_eq!(patched.body["callbackUrl"], second.url);
    assert_eq!(
        patched.body["kanalen"],
        json!([{"naam": "zaken", "filters": {"bronorganisatie": "*"}}])
    );
    assert_eq!(
        post_notificatie(&hub, &publisher, NOTIFICATIE).await.status,
        201
    );
    let arrived = second.wait_for(3, Duration::from_secs(10)).await;
    assert_eq!(arrived[2].header("authorization"), Some("Bearer nieuw"));
    assert_eq!(
        std::str::from_utf8(&arrived[2].body).unwrap(),
        NOTIFICATIE.trim()
    );
    assert_eq!(
        first.deliveries().len(),
        1,
        "the old callback had only its test"
    );
    // Another client cannot change it.
    let stranger = call(
        &hub,
        Method::PATCH,
        &path,
        &token("open-zaak", OPEN_ZAAK),
        Some(json!({"auth": "x"})),
    )
    .await;
    assert_fout(&stranger, 403, "permission_denied");
}

/// Runs the Python `script` with `args`, its libraries from `library` (warnings off): what
/// it printed, as JSON.
async fn python(library: std::path::PathBuf, script: &'static str, args: Vec<String>) -> Value {
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .env("PYTHONPATH", library)
            .args(["-W", "ignore", "-c", script])
            .args(args)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The directory the ZGW client library is installed into on first use.
fn zds_client() -> std::path::PathBuf {
    knooppunt_tests::tools::pip("gemma-zds-client", "gemma-zds-client==2.0.0")
}

/// `gemma-zds-client` (VNG's Python client of the ZGW APIs) works against the facade
/// unchanged: it reads the served document to find its operations, signs its own tokens,
/// registers a kanaal, subscribes, reads the abonnement back and publishes a notificatie.
#[tokio::test]
async fn a_real_zgw_client_works_unchanged() {
    let hub = hub().await;
    let callback = callback().await;
    let script = r#"
import json, sys
from zds_client import Client, ClientAuth
root, callback = sys.argv[1], sys.argv[2]
publisher = Client(api_root=root, oas_location="schema/openapi.yaml",
                   auth=ClientAuth(client_id="open-zaak", secret="open-zaak-geheim"))
consumer = Client(api_root=root, oas_location="schema/openapi.yaml",
                  auth=ClientAuth(client_id="zac", secret="zac-geheim"))
kanaal = publisher.create("kanaal", {"naam": "zaken", "filters": ["bronorganisatie"]})
kanalen = consumer.list("kanaal", params={"naam": "zaken"})
abonnement = consumer.create("abonnement", {
    "callbackUrl": callback, "auth": "Bearer zac",
    "kanalen": [{"naam": "zaken", "filters": {"bronorganisatie": "224557609"}}]})
again = consumer.retrieve("abonnement", url=abonnement["url"])
notificatie = publisher.create("notificaties", {
    "kanaal": "zaken", "hoofdObject": "https://zaken.example.nl/api/v1/zaken/1",
    "resource": "zaak", "resourceUrl": "https://zaken.example.nl/api/v1/zaken/1",
    "actie": "create", "aanmaakdatum": "2026-11-24T10:00:00Z",
    "kenmerken": {"bronorganisatie": "224557609"}})
print(json.dumps({"kanaal": kanaal, "kanalen": kanalen, "abonnement": abonnement,
                  "again": again, "notificatie": notificatie}))
"#;
    let said = python(
        zds_client(),
        script,
        vec![hub.url("/api/v1/"), callback.url.clone()],
    )
    .await;
    assert_eq!(said["kanaal"]["naam"], "zaken");
    assert_eq!(said["kanalen"][0]["naam"], "zaken");
    assert_eq!(without_state(said["again"].clone()), said["abonnement"]);
    assert_eq!(said["notificatie"]["actie"], "create");
    let arrived = callback.wait_for(2, Duration::from_secs(10)).await;
    assert_eq!(arrived[0].json()["kanaal"], "test");
    assert_eq!(arrived[1].json()["resource"], "zaak");
    assert_eq!(arrived[1].header("authorization"), Some("Bearer zac"));
}

fn key(byte: u8) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode([byte; 32])
}

fn options_with_keys(keys: &[(&str, &str)]) -> knooppunt_broker::HubOptions {
    let mut options = knooppunt_tests::test_options();
    options.zgw.secret_keys = Some(std::sync::Arc::new(
        knooppunt_broker::identity::zgw::SecretKeys::new(keys.iter().copied()).unwrap(),
    ));
    options
}

/// A ZGW client set over the principals API: its secret sealed in the store (never in
/// clear, never shown), its tokens accepted, and the sealing key rotated at a restart.
#[tokio::test]
async fn zgw_clients_are_set_over_the_principals_api_with_sealed_secrets() {
    const SECRET: &str = "gemeente-zgw-geheim";
    let (k1, k2) = (key(1), key(2));
    let hub = TestHub::builder()
        .options(options_with_keys(&[("k1", &k1)]))
        .start()
        .await;
    // A scope that is not a string is refused, not left out.
    hub.call(
        Method::PATCH,
        "/v1/principals/kvk",
        tokens::ADMIN,
        Some(json!({"zgw": {"clientId": "kvk-zac", "secret": SECRET,
                            "scopes": ["notificaties.consumeren", 5]}})),
    )
    .await
    .assert_problem(400);
    let set = hub
        .call(
            Method::PATCH,
            "/v1/principals/kvk",
            tokens::ADMIN,
            Some(json!({"zgw": {"clientId": "kvk-zac", "secret": SECRET,
                                "scopes": ["notificaties.consumeren"]}})),
        )
        .await;
    assert_eq!(set.status, 200, "{}", set.body);
    assert_eq!(
        set.body["zgw"],
        json!({"clientId": "kvk-zac", "scopes": ["notificaties.consumeren"]}),
        "the secret is never shown"
    );
    let stored = |store: &knooppunt_store_embedded::EmbeddedStore| {
        let store = store.clone();
        async move {
            let principals = store.principals().await.unwrap();
            principals
                .into_iter()
                .find(|p| p.name == "kvk")
                .and_then(|p| p.zgw)
                .unwrap()
                .sealed_secret
        }
    };
    let sealed = stored(&hub.store).await;
    assert!(sealed.starts_with("aes256gcm.k1."), "{sealed}");
    assert!(!sealed.contains(SECRET));
    let works = |hub: &TestHub| {
        let request = hub.request(
            Method::GET,
            "/api/v1/kanaal",
            &token("kvk-zac", SECRET.as_bytes()),
        );
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(works(&hub).await, 200);
    assert_eq!(
        hub.request(
            Method::GET,
            "/api/v1/kanaal",
            &token("kvk-zac", b"another secret of 16")
        )
        .send()
        .await
        .unwrap()
        .status(),
        401
    );

    // Rotation: a new key first, the old one still listed: sealed again at the start.
    let hub = hub
        .restart_with(options_with_keys(&[("k2", &k2), ("k1", &k1)]))
        .await;
    let resealed = stored(&hub.store).await;
    assert!(resealed.starts_with("aes256gcm.k2."), "{resealed}");
    assert_eq!(works(&hub).await, 200);
    let hub = hub.restart_with(options_with_keys(&[("k2", &k2)])).await;
    assert_eq!(works(&hub).await, 200, "the old key is no longer needed");

    // Without keys, a client cannot be set.
    let keyless = TestHub::start().await;
    let refused = keyless
        .call(
            Method::PATCH,
            "/v1/principals/kvk",
            tokens::ADMIN,
            Some(json!({"zgw": {"clientId": "x", "secret": SECRET, "scopes": ["notificaties.consumeren"]}})),
        )
        .await
        .assert_problem(400);
    assert_eq!(refused.invalid_params(), ["zgw"]);
}

/// A callback that answers 400 or 410 is retried, as Open Notificaties retries every answer
/// that is not 2xx: the notificatie arrives once it takes it, and the abonnement stays.
#[tokio::test]
async fn a_callback_that_answers_400_or_410_is_retried_as_open_notificaties_does() {
    for then in [400, 410] {
        let (hub, publisher, sink, created) = subscribed_then(then).await;
        assert_eq!(
            post_notificatie(&hub, &publisher, NOTIFICATIE).await.status,
            201
        );
        let arrived = sink.wait_for(3, Duration::from_secs(15)).await;
        assert_eq!(arrived[1].status, then);
        assert_eq!(
            std::str::from_utf8(&arrived[2].body).unwrap(),
            NOTIFICATIE.trim(),
            "retried after {then}"
        );
        let url = created.body["url"].as_str().unwrap();
        let path = &url[url.find("/api/v1/").unwrap()..];
        let consumer = token("zac", ZAAKAFHANDEL);
        let kept = call(&hub, Method::GET, path, &consumer, None).await;
        assert_eq!(kept.status, 200, "after {then}: {}", kept.body);
        // What its client can read of its deliveries: active, the refusal, then the retry.
        let state = until("the retry delivered", Duration::from_secs(10), || async {
            let state =
                call(&hub, Method::GET, path, &consumer, None).await.body["bezorging"].clone();
            if state["laatstePoging"]["uitkomst"] == "delivered" {
                Ok(state)
            } else {
                Err(state)
            }
        })
        .await;
        assert_eq!(state["status"], "actief", "{state}");
        assert_eq!(state["laatstePoging"]["uitkomst"], "delivered", "{state}");
        assert_eq!(state["laatstePoging"]["httpStatus"], 204, "{state}");
        assert_eq!(state["dodeBrieven"], 0, "{state}");
        let id = path.rsplit('/').next().unwrap();
        let dead = hub
            .call(
                Method::GET,
                &format!("/v1/subscriptions/{id}/dead-letters"),
                tokens::ADMIN,
                None,
            )
            .await;
        assert_eq!(dead.body, json!([]), "after {then}");
    }
}

/// `register_kanalen` on every Open Zaak deploy: a kanaal that exists is replaced (`PUT`)
/// or changed (`PATCH`) by the client that registered it; its name cannot change; a method
/// the API does not serve is answered 405 in the API's `Fout` shape.
#[tokio::test]
async fn kanalen_are_replaced_and_patched_as_open_notificaties_does() {
    let hub = hub().await;
    let publisher = token("open-zaak", OPEN_ZAAK);
    register_zaken(&hub, &publisher).await;
    let listed = call(
        &hub,
        Method::GET,
        "/api/v1/kanaal?naam=zaken",
        &publisher,
        None,
    )
    .await;
    let url = listed.body[0]["url"].as_str().unwrap().to_owned();
    let path = url[url.find("/api/v1/").unwrap()..].to_owned();
    let replacement = json!({"naam": "zaken",
                             "documentatieLink": "https://open-zaak.example.nl/ref/kanalen/#zaken",
                             "filters": ["bronorganisatie", "zaaktype", "vertrouwelijkheidaanduiding",
                                         "zaaktype.catalogus"]});
    let replaced = call(
        &hub,
        Method::PUT,
        &path,
        &publisher,
        Some(replacement.clone()),
    )
    .await;
    assert_eq!(replaced.status, 200, "{}", replaced.body);
    assert_eq!(replaced.body["filters"], replacement["filters"]);
    assert_eq!(replaced.body["url"], url.as_str());
    // Again, as a second deploy does.
    let again = call(
        &hub,
        Method::PUT,
        &path,
        &publisher,
        Some(replacement.clone()),
    )
    .await;
    assert_eq!(again.status, 200, "{}", again.body);
    let patched = call(
        &hub,
        Method::PATCH,
        &path,
        &publisher,
        Some(json!({"filters": ["bronorganisatie"]})),
    )
    .await;
    assert_eq!(patched.status, 200, "{}", patched.body);
    assert_eq!(patched.body["filters"], json!(["bronorganisatie"]));
    assert_eq!(
        patched.body["documentatieLink"],
        replacement["documentatieLink"]
    );
    let read = call(&hub, Method::GET, &path, &publisher, None).await;
    assert_eq!(read.body, patched.body);

    let renamed = call(
        &hub,
        Method::PUT,
        &path,
        &publisher,
        Some(json!({"naam": "zaken2", "filters": []})),
    )
    .await;
    assert_fout(&renamed, 400, "invalid");
    assert_eq!(
        renamed.body["invalidParams"][0]["code"],
        "wijzigen-niet-toegelaten"
    );
    let consumer = token("zac", ZAAKAFHANDEL);
    let forbidden = call(&hub, Method::PUT, &path, &consumer, Some(replacement)).await;
    assert_fout(&forbidden, 403, "permission_denied");
    let audited = hub
        .call(
            Method::GET,
            "/v1/audit?name=kanaal.update",
            tokens::ADMIN,
            None,
        )
        .await;
    assert_eq!(
        audited.body.as_array().map(Vec::len),
        Some(3),
        "{}",
        audited.body
    );

    for (method, path) in [
        (Method::DELETE, "/api/v1/kanaal"),
        (Method::DELETE, path.as_str()),
        (Method::PUT, "/api/v1/notificaties"),
    ] {
        let refused = call(&hub, method.clone(), path, &publisher, None).await;
        assert_fout(&refused, 405, "method_not_allowed");
        assert!(
            refused.body["detail"]
                .as_str()
                .unwrap()
                .contains(method.as_str()),
            "{}",
            refused.body
        );
        assert!(refused.header("allow").is_some(), "{method} {path}: Allow");
    }
}

const BESLUIT: &str = r#"{
  "kanaal": "besluiten",
  "hoofdObject": "https://open-zaak.example.nl/besluiten/api/v1/besluiten/b1b1",
  "resource": "besluit",
  "resourceUrl": "https://open-zaak.example.nl/besluiten/api/v1/besluiten/b1b1",
  "actie": "create",
  "aanmaakdatum": "2026-11-24T08:15:00Z",
  "kenmerken": {"verantwoordelijkeOrganisatie": "224557609",
                "besluittype": "https://open-zaak.example.nl/catalogi/api/v1/besluittypen/1"}
}"#;

/// Open Zaak's kanalen as it registers them: `besluiten` with snake_case filters and
/// notificaties with camelCase kenmerken (Open Notificaties reads both as one), and
/// `zaken` with `zaaktype.catalogus`; abonnementen filter on either spelling.
#[tokio::test]
async fn open_zaaks_kanalen_and_kenmerken_are_taken_as_open_notificaties_takes_them() {
    let hub = hub().await;
    let publisher = token("open-zaak", OPEN_ZAAK);
    let consumer = token("zac", ZAAKAFHANDEL);
    for (naam, filters) in [
        (
            "besluiten",
            json!(["verantwoordelijke_organisatie", "besluittype"]),
        ),
        (
            "zaken",
            json!([
                "bronorganisatie",
                "zaaktype",
                "zaaktype.catalogus",
                "vertrouwelijkheidaanduiding"
            ]),
        ),
    ] {
        let created = call(
            &hub,
            Method::POST,
            "/api/v1/kanaal",
            &publisher,
            Some(json!({"naam": naam, "filters": filters})),
        )
        .await;
        assert_eq!(created.status, 201, "{}", created.body);
    }
    let ours = callback().await;
    let others = callback().await;
    let subscribe_to = |sink: String, kanalen: Value| {
        let (hub, consumer) = (&hub, &consumer);
        async move {
            let answer = call(
                hub,
                Method::POST,
                "/api/v1/abonnement",
                consumer,
                Some(json!({"callbackUrl": sink, "auth": "Bearer x", "kanalen": kanalen})),
            )
            .await;
            assert_eq!(answer.status, 201, "{}", answer.body);
        }
    };
    subscribe_to(
        ours.url.clone(),
        json!([{"naam": "besluiten", "filters": {"verantwoordelijke_organisatie": "224557609"}},
               {"naam": "zaken", "filters": {"zaaktype.catalogus": "https://cat/1"}}]),
    )
    .await;
    subscribe_to(
        others.url.clone(),
        json!([{"naam": "besluiten", "filters": {"verantwoordelijkeOrganisatie": "000000000"}},
               {"naam": "zaken", "filters": {"zaaktype.catalogus": "https://cat/2"}}]),
    )
    .await;

    let published = post_notificatie(&hub, &publisher, BESLUIT).await;
    assert_eq!(published.status, 201, "{}", published.body);
    let zaak = NOTIFICATIE.replace(
        r#""bronorganisatie": "224557609""#,
        r#""bronorganisatie": "224557609", "zaaktype.catalogus": "https://cat/1""#,
    );
    let published = post_notificatie(&hub, &publisher, &zaak).await;
    assert_eq!(published.status, 201, "{}", published.body);
    // The test notificatie, then both.
    let arrived = ours.wait_for(3, Duration::from_secs(15)).await;
    let bodies: Vec<&str> = arrived[1..]
        .iter()
        .map(|r| std::str::from_utf8(&r.body).unwrap())
        .collect();
    assert!(bodies.contains(&BESLUIT.trim()), "{bodies:?}");
    assert!(bodies.contains(&zaak.trim()), "{bodies:?}");
    quiet(
        "a delivery to the other abonnement",
        Duration::from_millis(500),
    )
    .await;
    assert_eq!(others.deliveries().len(), 1, "only the test notificatie");
}

/// What Open Notificaties accepts and refuses when a notificatie or kanaal is posted, and
/// how it negotiates: the same answers here, never a 500.
#[tokio::test]
async fn notificaties_and_kanalen_are_judged_as_open_notificaties_judges_them() {
    let hub = hub().await;
    let publisher = token("open-zaak", OPEN_ZAAK);
    register_zaken(&hub, &publisher).await;
    let bare = call(
        &hub,
        Method::POST,
        "/api/v1/kanaal",
        &publisher,
        Some(json!({"naam": "kale"})),
    )
    .await;
    assert_eq!(bare.status, 201, "{}", bare.body);
    let with = |change: &dyn Fn(&mut Value)| {
        let mut notificatie: Value = serde_json::from_str(NOTIFICATIE).unwrap();
        change(&mut notificatie);
        notificatie.to_string()
    };
    // Kenmerken that are all of the kanaal's filters and more; any on a kanaal without.
    let superset = with(&|n| {
        n["kenmerken"]["vertrouwelijkheidaanduiding"] = json!("openbaar");
        n["kenmerken"]["extra"] = json!("x");
    });
    assert_eq!(
        post_notificatie(&hub, &publisher, &superset).await.status,
        201
    );
    let unfiltered = with(&|n| n["kanaal"] = json!("kale"));
    assert_eq!(
        post_notificatie(&hub, &publisher, &unfiltered).await.status,
        201
    );
    // Blank kenmerk values are kenmerken too.
    let blank = with(&|n| n["kenmerken"]["zaaktype"] = json!(""));
    assert_eq!(post_notificatie(&hub, &publisher, &blank).await.status, 201);

    let refusal = |body: String, field: &'static str, code: &'static str| {
        let (hub, publisher) = (&hub, &publisher);
        async move {
            let answer = post_notificatie(hub, publisher, &body).await;
            assert_fout(&answer, 400, "invalid");
            assert_eq!(
                answer.body["invalidParams"][0]["name"], field,
                "{}",
                answer.body
            );
            assert_eq!(
                answer.body["invalidParams"][0]["code"], code,
                "{}",
                answer.body
            );
        }
    };
    refusal(
        with(&|n| n["aanmaakdatum"] = json!("2999-01-01T00:00:00Z")),
        "aanmaakdatum",
        "future_not_allowed",
    )
    .await;
    refusal(with(&|n| n["kenmerken"] = Value::Null), "kenmerken", "null").await;
    refusal(
        with(&|n| n["resource"] = json!("sta\u{1}tus")),
        "resource",
        "invalid",
    )
    .await;
    refusal(
        with(&|n| n["actie"] = json!("cre\nate")),
        "actie",
        "invalid",
    )
    .await;

    let xml = hub
        .request(Method::GET, "/api/v1/kanaal", &publisher)
        .header("accept", "application/xml")
        .send()
        .await
        .unwrap();
    let xml = Answer::from(xml).await;
    assert_fout(&xml, 406, "not_acceptable");
    let text = hub
        .request(Method::POST, "/api/v1/kanaal", &publisher)
        .header("content-type", "text/plain")
        .body(json!({"naam": "tekst"}).to_string())
        .send()
        .await
        .unwrap();
    let text = Answer::from(text).await;
    assert_fout(&text, 415, "unsupported_media_type");
    assert!(text.body["detail"].as_str().unwrap().contains("text/plain"));
    let null_filters = call(
        &hub,
        Method::POST,
        "/api/v1/kanaal",
        &publisher,
        Some(json!({"naam": "leeg", "filters": null})),
    )
    .await;
    assert_fout(&null_filters, 400, "invalid");
    assert_eq!(null_filters.body["invalidParams"][0]["code"], "null");
}

/// A CloudEvent of a kanaal's type published on `/v1/events` without `time` reaches the
/// abonnementen, its `aanmaakdatum` the moment the hub accepted it.
#[tokio::test]
async fn a_native_cloudevent_without_time_reaches_abonnementen() {
    let hub = hub().await;
    register_zaken(&hub, &token("open-zaak", OPEN_ZAAK)).await;
    let sink = callback().await;
    let created = subscribe(&hub, &token("zac", ZAAKAFHANDEL), &sink.url, json!({})).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let before = knooppunt_store::now_ms();
    let published = hub
        .publish_raw(
            "application/cloudevents+json",
            json!({"specversion": "1.0", "id": "zonder-tijd", "source": "urn:nld:oin:1:systeem:zaken",
                   "type": "nl.vng.zgw.zaken.status.create",
                   "subject": "https://open-zaak.example.nl/zaken/api/v1/statussen/c1"})
            .to_string(),
        )
        .await;
    assert_eq!(published.status, 202, "{}", published.body);
    let arrived = sink.wait_for(2, Duration::from_secs(15)).await;
    let notificatie = arrived[1].json();
    assert_eq!(notificatie["kanaal"], "zaken");
    let at =
        knooppunt_event::timestamp::epoch_millis(notificatie["aanmaakdatum"].as_str().unwrap())
            .unwrap();
    assert!(
        at >= before && at <= knooppunt_store::now_ms(),
        "{notificatie}"
    );
}

/// A ZGW client set on a principal over the principals API acts with exactly that
/// principal's rights: one limited to `nl.brp.` types cannot subscribe to a kanaal of
/// other types (403, nothing made), one without limits can, and its abonnement is listed
/// and read back as any other (no 500 for a subscription it did make).
/// A hub's settings with sealing keys and Open Zaak as the one configured client (it
/// publishes); the consumers are set on principals.
fn with_open_zaak() -> knooppunt_broker::HubOptions {
    let mut options = options_with_keys(&[("k1", &key(1))]);
    options.zgw.clients = vec![ZgwClient {
        client_id: "open-zaak".into(),
        secret: OPEN_ZAAK.to_vec(),
        scopes: vec!["notificaties.publiceren".into()],
        oin: None,
        principal: None,
    }];
    options
}

/// Sets a ZGW client that may consume (`notificaties.consumeren`) on each principal, with
/// `secret`.
async fn consuming_clients(hub: &TestHub, clients: &[(&str, &str)], secret: &str) {
    for (principal, client) in clients {
        let set = hub
            .call(
                Method::PATCH,
                &format!("/v1/principals/{principal}"),
                tokens::ADMIN,
                Some(json!({"zgw": {"clientId": client, "secret": secret,
                                    "scopes": ["notificaties.consumeren"]}})),
            )
            .await;
        assert_eq!(set.status, 200, "{}", set.body);
    }
}

#[tokio::test]
async fn a_zgw_client_on_a_principal_keeps_that_principals_limits() {
    const SECRET: &str = "gemeente-zgw-geheim";
    let options = with_open_zaak();
    let hub = TestHub::builder().options(options).start().await;
    register_zaken(&hub, &token("open-zaak", OPEN_ZAAK)).await;
    consuming_clients(
        &hub,
        &[("gemeente", "gemeente-zac"), ("kvk", "kvk-zac")],
        SECRET,
    )
    .await;
    let sink = callback().await;
    let limited = token("gemeente-zac", SECRET.as_bytes());
    let refused = subscribe(&hub, &limited, &sink.url, json!({})).await;
    assert_fout(&refused, 403, "permission_denied");
    assert!(
        refused.body["detail"].as_str().unwrap().contains("nl.brp."),
        "{}",
        refused.body
    );
    assert!(sink.deliveries().is_empty(), "no test notificatie is sent");
    let mine = call(&hub, Method::GET, "/api/v1/abonnement", &limited, None).await;
    assert_eq!(mine.body, json!([]));
    let all = hub
        .call(Method::GET, "/v1/subscriptions", tokens::ADMIN, None)
        .await;
    assert_eq!(all.body, json!([]), "nothing was made");

    let free = token("kvk-zac", SECRET.as_bytes());
    let made = subscribe(&hub, &free, &sink.url, json!({})).await;
    assert_eq!(made.status, 201, "{}", made.body);
    let listed = call(&hub, Method::GET, "/api/v1/abonnement", &free, None).await;
    assert_eq!(listed.body, json!([made.body]));
    let path = made.body["url"]
        .as_str()
        .unwrap()
        .split("/api/v1/")
        .nth(1)
        .unwrap()
        .to_owned();
    let read = call(&hub, Method::GET, &format!("/api/v1/{path}"), &free, None).await;
    assert_eq!(without_state(read.body), made.body);
}

/// Who may publish is one rule, the pipeline's: a ZGW client on a principal acts with that
/// principal's roles, less what its scopes leave out. A subscriber's client with the scope
/// `notificaties.publiceren` publishes neither a notificatie nor a CloudEvent, as the
/// principal's own token may not on `/v1/events`; given the publisher role, it does.
#[tokio::test]
async fn a_zgw_client_publishes_only_with_its_principals_publisher_role() {
    const SECRET: &str = "repro-sub-secret-0123456789";
    let hub = TestHub::builder().options(with_open_zaak()).start().await;
    register_zaken(&hub, &token("open-zaak", OPEN_ZAAK)).await;
    let made = hub
        .call(
            Method::POST,
            "/v1/principals",
            tokens::ADMIN,
            Some(json!({"name": "repro-sub", "roles": ["subscriber"], "issueToken": false})),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let set = hub
        .call(
            Method::PATCH,
            "/v1/principals/repro-sub",
            tokens::ADMIN,
            Some(
                json!({"zgw": {"clientId": "repro-sub-zgw", "secret": SECRET,
                                "scopes": ["notificaties.publiceren"]}}),
            ),
        )
        .await;
    assert_eq!(set.status, 200, "{}", set.body);
    // What is published is delivered here: only the second event, after the promotion.
    let sink = knooppunt_tests::sink::Sink::start().await;
    let subscribed = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::ADMIN,
            Some(json!({"sink": sink.url, "protocol": "HTTP", "types": ["nl.repro.x"]})),
        )
        .await;
    assert_eq!(subscribed.status, 201, "{}", subscribed.body);
    let client = token("repro-sub-zgw", SECRET.as_bytes());
    let cloudevent = |id: &str| {
        json!({"specversion": "1.0", "id": id, "source": "urn:nld:zgw:repro-sub-zgw",
               "type": "nl.repro.x", "data": {"x": 1}})
    };
    let publish_both = |n: u32| {
        let (hub, client) = (&hub, &client);
        let event = cloudevent(&format!("repro-{n}"));
        async move {
            let cloudevent = call(
                hub,
                Method::POST,
                "/api/v1/cloudevents",
                client,
                Some(event),
            )
            .await;
            let notificatie = post_notificatie(hub, client, NOTIFICATIE).await;
            (cloudevent, notificatie)
        }
    };

    let (cloudevent, notificatie) = publish_both(1).await;
    for refused in [&cloudevent, &notificatie] {
        assert_fout(refused, 403, "permission_denied");
        let detail = refused.body["detail"].as_str().unwrap();
        assert!(
            detail.contains("repro-sub") && detail.contains("`publisher` role"),
            "{detail}"
        );
    }

    let promoted = hub
        .call(
            Method::PATCH,
            "/v1/principals/repro-sub",
            tokens::ADMIN,
            Some(json!({"roles": ["subscriber", "publisher"]})),
        )
        .await;
    assert_eq!(promoted.status, 200, "{}", promoted.body);
    let (cloudevent, notificatie) = publish_both(2).await;
    assert_eq!(cloudevent.status, 201, "{}", cloudevent.body);
    assert_eq!(notificatie.status, 201, "{}", notificatie.body);
    let delivered = sink.wait_for(1, Duration::from_secs(10)).await;
    assert_eq!(delivered[0].json()["id"], "repro-2");
}

/// Duplicates are told by `source` and `id`, as on `/v1/events`: an identical repeat on the
/// facade is answered 201 again and delivered once; a repeat with other data is not taken,
/// so it is refused (400, `unique` on `id`, naming the event), never answered 201 and
/// dropped.
#[tokio::test]
async fn a_repeated_cloudevent_is_taken_only_when_it_is_the_same() {
    let hub = hub().await;
    let sink = knooppunt_tests::sink::Sink::start().await;
    let created = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::ADMIN,
            Some(
                json!({"sink": sink.url, "protocol": "HTTP", "types": ["nl.repro.versie"],
                        "config": {"ordering": "ordered"}}),
            ),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let publisher = token("open-zaak", OPEN_ZAAK);
    let event = |versie: u32| {
        json!({"specversion": "1.0", "id": "repro-5", "source": "urn:nld:zgw:open-zaak",
               "type": "nl.repro.versie", "data": {"versie": versie}})
    };
    for _ in 0..2 {
        let taken = call(
            &hub,
            Method::POST,
            "/api/v1/cloudevents",
            &publisher,
            Some(event(1)),
        )
        .await;
        assert_eq!(taken.status, 201, "{}", taken.body);
    }
    let other = call(
        &hub,
        Method::POST,
        "/api/v1/cloudevents",
        &publisher,
        Some(event(2)),
    )
    .await;
    assert_eq!(other.status, 400, "{}", other.body);
    assert_eq!(
        other.header("content-type"),
        Some("application/problem+json")
    );
    let invalid = &other.body["invalidParams"][0];
    assert_eq!(invalid["name"], "id", "{}", other.body);
    assert_eq!(invalid["code"], "unique", "{}", other.body);
    let reason = invalid["reason"].as_str().unwrap();
    assert!(
        reason.contains("repro-5") && reason.contains("urn:nld:zgw:open-zaak"),
        "{reason}"
    );

    let marker = json!({"specversion": "1.0", "id": "repro-6", "source": "urn:nld:zgw:open-zaak",
                        "type": "nl.repro.versie", "data": {"versie": 3}});
    let taken = call(
        &hub,
        Method::POST,
        "/api/v1/cloudevents",
        &publisher,
        Some(marker),
    )
    .await;
    assert_eq!(taken.status, 201, "{}", taken.body);
    // Delivered in order: anything taken of the refused repeat would come before the marker.
    let delivered = sink.wait_for(2, Duration::from_secs(10)).await;
    let seen: Vec<Value> = delivered.iter().map(|d| d.json()["data"].clone()).collect();
    assert_eq!(seen[..2], [json!({"versie": 1}), json!({"versie": 3})]);
}

/// One use case, two surfaces: a subscription of the REST API and an abonnement of the
/// facade are made by the same service, so they are refused for the same reasons in the
/// same words (each in its own problem shape): the caller's role, its type prefixes, a sink
/// the hub does not send to, and its owner's quota.
#[tokio::test]
async fn the_rest_api_and_the_facade_refuse_a_subscription_alike() {
    const SECRET: &str = "gemeente-zgw-geheim";
    let mut options = with_open_zaak();
    options.quotas.max_subscriptions = 1;
    let hub = TestHub::builder().options(options).start().await;
    register_zaken(&hub, &token("open-zaak", OPEN_ZAAK)).await;
    let clients = [
        ("gemeente", "gemeente-zac"),
        ("kvk", "kvk-zac"),
        ("publisher", "publisher-zac"),
    ];
    consuming_clients(&hub, &clients, SECRET).await;
    let sink = callback().await;
    let rest = |token: &'static str, sink: String| {
        let hub = &hub;
        async move {
            hub.call(
                Method::POST,
                "/v1/subscriptions",
                token,
                Some(json!({"sink": sink, "protocol": "HTTP"})),
            )
            .await
        }
    };
    let facade = |client: &str, callback: String| {
        let token = token(client, SECRET.as_bytes());
        let hub = &hub;
        async move { subscribe(hub, &token, &callback, json!({})).await }
    };
    let detail = |answer: &Answer| answer.body["detail"].as_str().unwrap_or("").to_owned();

    // A principal without the subscriber role (its client may consume: the scope does not
    // give it a role its principal lacks).
    let by_rest = rest(tokens::PUBLISHER, sink.url.clone()).await;
    assert_eq!(by_rest.status, 403, "{}", by_rest.body);
    let by_facade = facade("publisher-zac", sink.url.clone()).await;
    assert_fout(&by_facade, 403, "permission_denied");
    assert_eq!(detail(&by_facade), detail(&by_rest));
    assert!(
        detail(&by_rest).contains("`subscriber` role"),
        "{}",
        by_rest.body
    );

    // Types outside the principal's prefixes (both ask for every event of their kind).
    let by_rest = rest(tokens::GEMEENTE, sink.url.clone()).await;
    assert_eq!(by_rest.status, 403, "{}", by_rest.body);
    let by_facade = facade("gemeente-zac", sink.url.clone()).await;
    assert_fout(&by_facade, 403, "permission_denied");
    for answer in [&by_rest, &by_facade] {
        assert!(detail(answer).contains("nl.brp."), "{}", answer.body);
    }

    // A sink in a network the hub does not send to.
    let private = "http://10.1.2.3/hook".to_owned();
    let by_rest = rest(tokens::KVK, private.clone()).await;
    assert_eq!(by_rest.status, 400, "{}", by_rest.body);
    let by_facade = facade("kvk-zac", private).await;
    assert_fout(&by_facade, 400, "invalid");
    assert_eq!(by_rest.body["invalidParams"][0]["name"], "sink");
    assert_eq!(by_facade.body["invalidParams"][0]["name"], "callbackUrl");
    assert_eq!(
        by_facade.body["invalidParams"][0]["code"], "invalid-callback-url",
        "named as Open Notificaties names it"
    );
    assert_eq!(
        by_facade.body["invalidParams"][0]["reason"], by_rest.body["invalidParams"][0]["reason"],
        "the same reason: {} / {}",
        by_facade.body, by_rest.body
    );

    // The owner's quota (one subscription), whichever surface made the first.
    let first = facade("kvk-zac", sink.url.clone()).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let by_rest = rest(tokens::KVK, sink.url.clone()).await;
    assert_eq!(by_rest.status, 403, "{}", by_rest.body);
    let by_facade = facade("kvk-zac", sink.url.clone()).await;
    assert_fout(&by_facade, 403, "permission_denied");
    assert_eq!(detail(&by_facade), detail(&by_rest));
    assert!(detail(&by_rest).contains("quota"), "{}", by_rest.body);

    // Changed to a sink in such a network, by either surface.
    let uuid = first.body["url"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap();
    let by_rest = hub
        .call(
            Method::PUT,
            &format!("/v1/subscriptions/{uuid}"),
            tokens::KVK,
            Some(json!({"sink": "http://10.1.2.3/hook", "protocol": "HTTP"})),
        )
        .await;
    assert_eq!(by_rest.status, 400, "{}", by_rest.body);
    let by_facade = call(
        &hub,
        Method::PUT,
        &format!("/api/v1/abonnement/{uuid}"),
        &token("kvk-zac", SECRET.as_bytes()),
        Some(
            json!({"callbackUrl": "http://10.1.2.3/hook", "auth": "Bearer abonnee-geheim",
                    "kanalen": [{"naam": "zaken", "filters": {}}]}),
        ),
    )
    .await;
    assert_fout(&by_facade, 400, "invalid");
    assert_eq!(
        by_facade.body["invalidParams"][0]["reason"],
        by_rest.body["invalidParams"][0]["reason"]
    );

    // Another principal's subscription is not there to change or delete, on either surface.
    let by_rest = hub
        .call(
            Method::PUT,
            &format!("/v1/subscriptions/{uuid}"),
            tokens::GEMEENTE,
            Some(json!({"sink": sink.url, "protocol": "HTTP", "types": ["nl.brp.x"]})),
        )
        .await;
    assert_eq!(by_rest.status, 404, "{}", by_rest.body);
    let gemeente = token("gemeente-zac", SECRET.as_bytes());
    let path = format!("/api/v1/abonnement/{uuid}");
    let by_facade = call(&hub, Method::DELETE, &path, &gemeente, None).await;
    assert_fout(&by_facade, 404, "not_found");
    let path = format!("/v1/subscriptions/{uuid}");
    let by_rest = hub
        .call(Method::DELETE, &path, tokens::GEMEENTE, None)
        .await;
    assert_eq!(by_rest.status, 404, "{}", by_rest.body);

    let all = hub
        .call(Method::GET, "/v1/subscriptions", tokens::ADMIN, None)
        .await;
    assert_eq!(all.body.as_array().map(Vec::len), Some(1), "{}", all.body);
    assert_eq!(all.body[0]["sink"], json!(sink.url), "unchanged");
    let tested = sink.deliveries().len();
    assert_eq!(
        tested, 1,
        "only the abonnement made was sent its test notificatie"
    );

    // Its own client deletes it through the facade; the REST API then has none.
    let kvk = token("kvk-zac", SECRET.as_bytes());
    let path = format!("/api/v1/abonnement/{uuid}");
    let deleted = call(&hub, Method::DELETE, &path, &kvk, None).await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    let path = format!("/v1/subscriptions/{uuid}");
    let gone = hub.call(Method::DELETE, &path, tokens::KVK, None).await;
    assert_eq!(gone.status, 404, "{}", gone.body);
}

/// `POST /api/v1/cloudevents` as Open Notificaties serves it, called by the CloudEvents
/// SDK for Python (structured and binary mode) and as Open Notificaties' own tests post
/// (`application/json`): 201 with the event, each routed like any event of the hub to a
/// CloudEvents subscription of its type; an invalid event is a `ValidatieFout` naming the
/// attribute, a consumer may not publish, an event outside the client's source space is
/// refused.
#[tokio::test]
async fn cloudevents_are_published_on_the_facade_as_open_notificaties_takes_them() {
    let hub = hub().await;
    let sink = knooppunt_tests::sink::Sink::start().await;
    let created = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::ADMIN,
            Some(json!({"sink": sink.url, "protocol": "HTTP",
                        "types": ["nl.overheid.zaken.zaak-gemuteerd"]})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let publisher = token("open-zaak", OPEN_ZAAK);
    let script = r#"
import json, sys, urllib.request, urllib.error
from cloudevents.http import CloudEvent
from cloudevents.conversion import to_structured, to_binary
url, token = sys.argv[1], sys.argv[2]
def post(headers, body):
    request = urllib.request.Request(url, data=body, method="POST",
                                     headers=dict(headers, Authorization="Bearer " + token))
    try:
        with urllib.request.urlopen(request) as answer:
            return {"status": answer.status, "body": json.loads(answer.read())}
    except urllib.error.HTTPError as error:
        return {"status": error.code, "body": json.loads(error.read())}
def event(n):
    return CloudEvent({"type": "nl.overheid.zaken.zaak-gemuteerd", "source": "urn:nld:zgw:open-zaak",
                       "id": "sdk-%d" % n, "subject": "zaak-%d" % n}, {"zaak": n})
said = {"structured": post(*to_structured(event(1))), "binary": post(*to_binary(event(2)))}
plain = {"specversion": "1.0", "type": "nl.overheid.zaken.zaak-gemuteerd",
         "source": "urn:nld:zgw:open-zaak", "id": "plain-3", "datacontenttype": "application/json",
         "data": "{}"}
said["json"] = post({"Content-Type": "application/json"}, json.dumps(plain).encode())
said["invalid"] = post({"Content-Type": "application/json"},
                       json.dumps({"specversion": "1.0", "type": "t", "id": "x"}).encode())
foreign = dict(plain, id="foreign-4", source="urn:nld:zgw:iemand-anders")
said["foreign"] = post({"Content-Type": "application/json"}, json.dumps(foreign).encode())
print(json.dumps(said))
"#;
    let library = knooppunt_tests::tools::pip("cloudevents", "cloudevents==1.12.0");
    let said = python(
        library,
        script,
        vec![hub.url("/api/v1/cloudevents"), publisher],
    )
    .await;
    for (mode, id) in [
        ("structured", "sdk-1"),
        ("binary", "sdk-2"),
        ("json", "plain-3"),
    ] {
        assert_eq!(said[mode]["status"], 201, "{mode}: {}", said[mode]);
        assert_eq!(said[mode]["body"]["id"], id, "{mode}: {}", said[mode]);
    }
    assert_eq!(said["invalid"]["status"], 400, "{}", said["invalid"]);
    assert_eq!(said["invalid"]["body"]["code"], "invalid");
    assert_eq!(
        said["invalid"]["body"]["invalidParams"][0]["name"], "source",
        "{}",
        said["invalid"]
    );
    assert_eq!(said["foreign"]["status"], 403, "{}", said["foreign"]);
    assert_eq!(said["foreign"]["body"]["code"], "permission_denied");

    let arrived = sink.wait_for(3, Duration::from_secs(15)).await;
    let mut ids: Vec<String> = arrived
        .iter()
        .map(|r| {
            r.header("ce-id")
                .map(str::to_owned)
                .unwrap_or_else(|| r.json()["id"].as_str().unwrap().to_owned())
        })
        .collect();
    ids.sort();
    assert_eq!(ids, ["plain-3", "sdk-1", "sdk-2"]);
    let consumer = token("zac", ZAAKAFHANDEL);
    let forbidden = hub
        .request(Method::POST, "/api/v1/cloudevents", &consumer)
        .header("content-type", "application/cloudevents+json")
        .body(r#"{"specversion":"1.0","type":"t","source":"urn:x","id":"1"}"#)
        .send()
        .await
        .unwrap();
    assert_fout(&Answer::from(forbidden).await, 403, "permission_denied");
}

/// An abonnement with `sendCloudevents` (Open Notificaties' experimental CloudEvents): a
/// notificatie of its kanaal arrives as the CloudEvent Open Notificaties makes of it, a
/// CloudEvent whose type contains one of its `cloudeventFilters` as published, both as
/// `application/cloudevents+json` with its `auth`, when its data passes the filter's (as
/// Open Notificaties judges a data member: equal, `*`, or absent); others not. Read back
/// as made.
#[tokio::test]
async fn abonnementen_receive_cloudevents_as_open_notificaties_sends_them() {
    let hub = hub().await;
    let publisher = token("open-zaak", OPEN_ZAAK);
    let consumer = token("zac", ZAAKAFHANDEL);
    register_zaken(&hub, &publisher).await;
    let sink = callback().await;
    let made = call(
        &hub,
        Method::POST,
        "/api/v1/abonnement",
        &consumer,
        Some(
            json!({"callbackUrl": sink.url, "auth": "Bearer mijn-overheid",
                    "kanalen": [{"naam": "zaken", "filters": {"bronorganisatie": "224557609"}}],
                    "sendCloudevents": true,
                    "cloudeventFilters": [{"typeSubstring": "zaken.zaak-gemuteerd",
                                           "filters": {"zaaktype": "https://zt/1"}}]}),
        ),
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.body);
    assert_eq!(made.body["sendCloudevents"], true);
    assert_eq!(
        made.body["cloudeventFilters"],
        json!([{"typeSubstring": "zaken.zaak-gemuteerd",
                "filters": {"zaaktype": "https://zt/1"}}])
    );
    let url = made.body["url"].as_str().unwrap();
    let read = call(
        &hub,
        Method::GET,
        &url[url.find("/api/v1/").unwrap()..],
        &consumer,
        None,
    )
    .await;
    assert_eq!(without_state(read.body), made.body);

    let notificatie = NOTIFICATIE.replace(
        r#""kanaal": "zaken","#,
        r#""kanaal": "zaken", "source": "urn:nld:oin:00000001001234567000:systeem:open-zaak","#,
    );
    assert_eq!(
        post_notificatie(&hub, &publisher, &notificatie)
            .await
            .status,
        201
    );
    let cloudevent = |id: &str, ty: &str, zaaktype: &str| {
        json!({"specversion": "1.0", "id": id, "source": "urn:nld:zgw:open-zaak", "type": ty,
               "subject": "zaak-1", "data": {"zaak": 1, "zaaktype": zaaktype}})
    };
    let gemuteerd = cloudevent("ce-1", "nl.overheid.zaken.zaak-gemuteerd", "https://zt/1");
    for event in [
        &gemuteerd,
        &cloudevent(
            "ce-2",
            "nl.overheid.besluiten.besluit-gemaakt",
            "https://zt/1",
        ),
        &cloudevent("ce-3", "nl.overheid.zaken.zaak-gemuteerd", "https://zt/2"),
    ] {
        let published = hub
            .request(Method::POST, "/api/v1/cloudevents", &publisher)
            .header("content-type", "application/json")
            .body(event.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(published.status(), 201);
    }
    // The test notificatie, then the two it receives.
    let arrived = sink.wait_for(3, Duration::from_secs(15)).await;
    quiet("a fourth notificatie", Duration::from_millis(300)).await;
    assert_eq!(
        sink.deliveries().len(),
        3,
        "not the besluit, not the zaak of another zaaktype"
    );
    for received in &arrived[1..] {
        assert_eq!(
            received.header("content-type"),
            Some("application/cloudevents+json")
        );
        assert_eq!(
            received.header("authorization"),
            Some("Bearer mijn-overheid")
        );
    }
    let bodies: Vec<Value> = arrived[1..].iter().map(|r| r.json()).collect();
    let from_notificatie = bodies
        .iter()
        .find(|b| b["type"] == "nl.overheid.zaken.status.create")
        .unwrap_or_else(|| panic!("{bodies:?}"));
    assert_eq!(
        from_notificatie["source"],
        "urn:nld:oin:00000001001234567000:systeem:open-zaak"
    );
    assert_eq!(from_notificatie["specversion"], "1.0");
    assert_eq!(from_notificatie["subject"], "a1a1");
    assert_eq!(from_notificatie["time"], "2026-11-24T08:15:00.123456Z");
    assert_eq!(from_notificatie["datacontenttype"], "application/json");
    assert_eq!(
        from_notificatie["data"],
        json!({"bronorganisatie": "224557609",
               "zaaktype": "https://open-zaak.example.nl/catalogi/api/v1/zaaktypen/1",
               "hoofdObject": "https://open-zaak.example.nl/zaken/api/v1/zaken/d4d4"})
    );
    assert!(bodies.contains(&gemuteerd), "as published: {bodies:?}");

    let bad_filters = call(
        &hub,
        Method::POST,
        "/api/v1/abonnement",
        &consumer,
        Some(
            json!({"callbackUrl": sink.url, "auth": "Bearer x", "sendCloudevents": true,
                    "cloudeventFilters": [{"typeSubstring": "zaken", "filters": {"zaak": 1}}]}),
        ),
    )
    .await;
    assert_fout(&bad_filters, 400, "invalid");
    assert_eq!(
        bad_filters.body["invalidParams"][0]["name"],
        "cloudeventFilters.0.filters.zaak"
    );
}

/// Schemathesis (property-based testing from an OpenAPI document) against `/api/v1`, with
/// VNG's Notificaties API 1.0 document and with the one the hub serves, as a client with
/// both scopes: no answer is a server error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_server_error_in_the_facade() {
    let hub = hub_with(vec![ZgwClient {
        client_id: "alles".into(),
        secret: b"alles-geheim-16-tekens".to_vec(),
        scopes: vec![
            "notificaties.publiceren".into(),
            "notificaties.consumeren".into(),
        ],
        oin: None,
        principal: None,
    }])
    .await;
    register_zaken(&hub, &token("open-zaak", OPEN_ZAAK)).await;
    let library =
        knooppunt_tests::tools::pip("schemathesis", "schemathesis==3.39.16 hypothesis==6.118.8");
    let authorization = format!(
        "Authorization: Bearer {}",
        token("alles", b"alles-geheim-16-tekens")
    );
    let vng = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../specs/vng-notificaties/notificaties-api-1.0.yaml"
    );
    for document in [vng.to_owned(), hub.url("/api/v1/schema/openapi.json")] {
        let (library, base, authorization) =
            (library.clone(), hub.url("/api/v1"), authorization.clone());
        let document_shown = document.clone();
        let output = tokio::task::spawn_blocking(move || {
            std::process::Command::new("python3")
                .env("PYTHONPATH", library)
                .args([
                    "-m",
                    "schemathesis.cli",
                    "run",
                    &document,
                    "--base-url",
                    &base,
                ])
                .args(["--checks", "not_a_server_error", "-H", &authorization])
                .args(["--hypothesis-max-examples", "25", "--hypothesis-seed", "1"])
                .args(["--hypothesis-derandomize", "--request-timeout", "10000"])
                .output()
                .unwrap()
        })
        .await
        .unwrap();
        let said = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{document_shown}: {said}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(said.contains("not_a_server_error"), "{said}");
        eprintln!(
            "{document_shown}: {}",
            said.lines()
                .rev()
                .find(|l| l.contains("passed"))
                .unwrap_or("")
        );
    }
}

/// One publish use case, three surfaces (`/v1/events`, the facade's `/cloudevents` and
/// `/notificaties`), and one catalog use case, two surfaces (`/v1/eventtypes`, the facade's
/// `/kanaal`): the same input gets the same decision, in the same words, each in its own
/// shape: the publisher role, the sources a principal may publish, a repeat of an event
/// (told by `source` and `id` on every surface), and who owns a catalog entry.
#[tokio::test]
async fn publishing_and_the_catalog_are_decided_alike_on_every_surface() {
    const SECRET: &str = "zender-zgw-geheim-0123456789";
    let hub = TestHub::builder().options(with_open_zaak()).start().await;
    register_zaken(&hub, &token("open-zaak", OPEN_ZAAK)).await;
    let made = hub
        .call(
            Method::POST,
            "/v1/principals",
            tokens::ADMIN,
            Some(json!({"name": "zender", "roles": ["subscriber"],
                        "publishSourcePrefixes": ["urn:nld:zgw:zender"]})),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let bearer = made.body["token"].as_str().unwrap().to_owned();
    let set = hub
        .call(
            Method::PATCH,
            "/v1/principals/zender",
            tokens::ADMIN,
            Some(json!({"zgw": {"clientId": "zender-zgw", "secret": SECRET,
                                "scopes": ["notificaties.publiceren"]}})),
        )
        .await;
    assert_eq!(set.status, 200, "{}", set.body);
    let client = token("zender-zgw", SECRET.as_bytes());
    let event = |id: &str, source: &str, versie: u32| {
        json!({"specversion": "1.0", "id": id, "source": source, "type": "nl.zender.x",
               "data": {"versie": versie}})
    };
    let by_rest = |event: Value| {
        let (hub, bearer) = (&hub, &bearer);
        async move {
            hub.request(Method::POST, "/v1/events", bearer)
                .header("content-type", "application/cloudevents+json")
                .body(event.to_string())
                .send()
                .await
                .map(Answer::from)
                .unwrap()
                .await
        }
    };
    let by_facade = |event: Value| {
        let (hub, client) = (&hub, &client);
        async move {
            call(
                hub,
                Method::POST,
                "/api/v1/cloudevents",
                client,
                Some(event),
            )
            .await
        }
    };
    let detail = |answer: &Answer| answer.body["detail"].as_str().unwrap_or("").to_owned();

    // The publisher role, on all three.
    let rest = by_rest(event("z-1", "urn:nld:zgw:zender", 1)).await;
    assert_eq!(rest.status, 403, "{}", rest.body);
    let cloudevent = by_facade(event("z-1", "urn:nld:zgw:zender", 1)).await;
    assert_fout(&cloudevent, 403, "permission_denied");
    let notificatie = post_notificatie(&hub, &client, NOTIFICATIE).await;
    assert_fout(&notificatie, 403, "permission_denied");
    assert!(detail(&rest).contains("`publisher` role"), "{}", rest.body);
    assert_eq!(detail(&cloudevent), detail(&rest));
    assert_eq!(detail(&notificatie), detail(&rest));

    let promoted = hub
        .call(
            Method::PATCH,
            "/v1/principals/zender",
            tokens::ADMIN,
            Some(json!({"roles": ["subscriber", "publisher"]})),
        )
        .await;
    assert_eq!(promoted.status, 200, "{}", promoted.body);

    // A source outside the principal's prefixes.
    let rest = by_rest(event("z-2", "urn:nld:zgw:elders", 1)).await;
    assert_eq!(rest.status, 403, "{}", rest.body);
    let cloudevent = by_facade(event("z-2", "urn:nld:zgw:elders", 1)).await;
    assert_fout(&cloudevent, 403, "permission_denied");
    assert!(
        detail(&rest).contains("urn:nld:zgw:elders"),
        "{}",
        rest.body
    );
    assert_eq!(detail(&cloudevent), detail(&rest));

    // A repeat: the same `source` and `id` is the same event on either surface, whichever
    // took it first; the facade, which answers 201 as if it were taken, refuses one with
    // other content.
    let first = by_facade(event("z-3", "urn:nld:zgw:zender", 1)).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let rest = by_rest(event("z-3", "urn:nld:zgw:zender", 1)).await;
    assert!(rest.status == 200 || rest.status == 202, "{}", rest.body);
    assert_eq!(rest.body["duplicate"], true, "{}", rest.body);
    let rest = by_rest(event("z-4", "urn:nld:zgw:zender", 1)).await;
    assert_eq!(rest.body["duplicate"], false, "{}", rest.body);
    let other = by_facade(event("z-4", "urn:nld:zgw:zender", 2)).await;
    assert_eq!(other.status, 400, "{}", other.body);
    assert_eq!(
        other.body["invalidParams"][0]["code"], "unique",
        "{}",
        other.body
    );

    // A catalog entry owned by another principal (open-zaak's kanaal), on either surface.
    let listed = call(
        &hub,
        Method::GET,
        "/api/v1/kanaal?naam=zaken",
        &client,
        None,
    )
    .await;
    let url = listed.body[0]["url"].as_str().unwrap().to_owned();
    let uuid = url.rsplit('/').next().unwrap().to_owned();
    let rest = hub
        .call(
            Method::PUT,
            &format!("/v1/eventtypes/{uuid}"),
            &bearer,
            Some(
                json!({"source": "urn:nld:zgw:zender", "type": "nl.vng.zgw.zaken.",
                        "typeMatch": "prefix", "description": "Zaken"}),
            ),
        )
        .await;
    assert_eq!(rest.status, 403, "{}", rest.body);
    let kanaal = call(
        &hub,
        Method::PUT,
        &format!("/api/v1/kanaal/{uuid}"),
        &client,
        Some(json!({"naam": "zaken", "filters": ["bronorganisatie"]})),
    )
    .await;
    assert_fout(&kanaal, 403, "permission_denied");
    assert_eq!(detail(&kanaal), detail(&rest));
}
