//! The OpenAPI document tells the truth: every answer the hub gives to a broad set of
//! requests (each operation, its errors, edge cases schemathesis found) has a status the
//! document lists for that operation, its content type, and a body that validates against
//! the schema the document serves (one `oneOf` branch exactly).

use std::time::Duration;

use knooppunt_tests::openapi::Checker;
use knooppunt_tests::sink::{Reply, Sink};
use knooppunt_tests::{TestHub, tokens};
use reqwest::Method;
use serde_json::{Value, json};

const SOURCE: &str = "urn:nld:oin:00000001823288444000:systeem:BRP";
const TYPE: &str = "nl.brp.persoon-verhuisd";

fn event(id: &str) -> Value {
    json!({"specversion": "1.0", "id": id, "source": SOURCE, "type": TYPE,
           "subject": "999990342", "comexampleflag": true, "data": {"n": 1}})
}

#[tokio::test]
async fn every_answer_is_what_the_document_says() {
    let hub = TestHub::start().await;
    let mut check = Checker::new(&hub).await;
    let sink = Sink::start().await;
    let as_kvk = |method: Method, path: &str| hub.request(method, path, tokens::KVK);

    // Subscriptions.
    let body = json!({"sink": sink.url, "protocol": "HTTP", "types": [TYPE],
                      "filters": [{"sql": "subject LIKE '9999%'"}],
                      "protocolsettings": {"headers": {"X-Tenant": "kvk"}},
                      "sinkcredential": {"credentialtype": "PLAIN", "identifier": "hub", "secret": "s"},
                      "config": {"maxAttempts": "2", "initialBackoff": "PT0.05S", "maxBackoff": "PT0.1S"}});
    let created = check
        .check(
            "post",
            "/subscriptions",
            as_kvk(Method::POST, "/v1/subscriptions").json(&body),
        )
        .await;
    let id = created["id"].as_str().unwrap().to_owned();
    let item = format!("/v1/subscriptions/{id}");
    for bad in [
        json!({"protocol": "HTTP"}),
        json!({"sink": "https://x.example/", "protocol": "HTTP", "types": null}),
        json!({"sink": "https://x.example/", "protocol": "HTTP", "filters": [{"sql": "(("}]}),
        json!({"sink": "https://x.example/", "protocol": "HTTP", "sinkcredential": {"credentialtype": "PLAIN"}}),
    ] {
        check
            .check(
                "post",
                "/subscriptions",
                as_kvk(Method::POST, "/v1/subscriptions").json(&bad),
            )
            .await;
    }
    check
        .check(
            "post",
            "/subscriptions",
            as_kvk(Method::POST, "/v1/subscriptions").body("not json"),
        )
        .await;
    check
        .check(
            "post",
            "/subscriptions",
            hub.client.post(hub.url("/v1/subscriptions")).json(&body),
        )
        .await;
    check
        .check(
            "post",
            "/subscriptions",
            hub.request(Method::POST, "/v1/subscriptions", tokens::PUBLISHER)
                .json(&body),
        )
        .await;
    for query in [
        "",
        "?pageSize=1",
        "?cursor=",
        "?pageSize=0",
        "?cursor=x&pageSize=5",
        "?other=1",
    ] {
        check
            .check(
                "get",
                "/subscriptions",
                as_kvk(Method::GET, &format!("/v1/subscriptions{query}")),
            )
            .await;
    }
    check
        .check("get", "/subscriptions/{id}", as_kvk(Method::GET, &item))
        .await;
    check
        .check(
            "get",
            "/subscriptions/{id}",
            as_kvk(Method::GET, "/v1/subscriptions/nope"),
        )
        .await;
    check
        .check(
            "options",
            "/subscriptions",
            as_kvk(Method::OPTIONS, "/v1/subscriptions"),
        )
        .await;
    check
        .check(
            "options",
            "/subscriptions/{id}",
            as_kvk(Method::OPTIONS, &item),
        )
        .await;
    let mut replacement = created.clone();
    replacement["types"] = json!([TYPE, "nl.brp.other"]);
    check
        .check(
            "put",
            "/subscriptions/{id}",
            as_kvk(Method::PUT, &item).json(&replacement),
        )
        .await;

    // Events: structured, batch (also empty), binary, and the refusals.
    let publish = |content_type: &str, body: String| {
        hub.request(Method::POST, "/v1/events", tokens::PUBLISHER)
            .header("content-type", content_type)
            .body(body)
    };
    let structured = "application/cloudevents+json";
    let batch = "application/cloudevents-batch+json";
    check
        .check(
            "post",
            "/events",
            publish(structured, event("o-1").to_string()),
        )
        .await;
    check
        .check(
            "post",
            "/events",
            publish(structured, event("o-1").to_string()),
        )
        .await;
    check
        .check(
            "post",
            "/events",
            publish(batch, json!([event("o-2"), event("o-3")]).to_string()),
        )
        .await;
    let empty = check
        .check("post", "/events", publish(batch, "[]".into()))
        .await;
    assert_eq!(empty, json!({"events": []}));
    check
        .check(
            "post",
            "/events",
            hub.request(Method::POST, "/v1/events", tokens::PUBLISHER)
                .header("ce-specversion", "1.0")
                .header("ce-id", "o-4")
                .header("ce-source", SOURCE)
                .header("ce-type", TYPE)
                .header("content-type", "text/plain")
                .body("hello"),
        )
        .await;
    check
        .check(
            "post",
            "/events",
            publish(structured, json!({"id": "x"}).to_string()),
        )
        .await;
    check
        .check("post", "/events", publish("text/plain", "hello".into()))
        .await;
    check
        .check(
            "post",
            "/events",
            hub.request(Method::POST, "/v1/events", tokens::KVK)
                .header("content-type", structured)
                .body(event("o-5").to_string()),
        )
        .await;

    // Dead letters: the sink refuses, twice.
    sink.answer_always(Reply::status(500));
    check
        .check(
            "post",
            "/events",
            publish(structured, event("dead-1").to_string()),
        )
        .await;
    let dead_path = format!("/v1/subscriptions/{id}/dead-letters");
    let mut dead = Value::Null;
    for _ in 0..300 {
        dead = check
            .check(
                "get",
                "/subscriptions/{id}/dead-letters",
                as_kvk(Method::GET, &dead_path),
            )
            .await;
        if dead.as_array().is_some_and(|list| !list.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seq = dead[0]["sequence"].as_u64().expect("a dead letter");
    check
        .check(
            "get",
            "/subscriptions/{id}/dead-letters",
            as_kvk(Method::GET, &format!("{dead_path}?cursor=")),
        )
        .await;
    check
        .check(
            "get",
            "/subscriptions/{id}/dead-letters/{deadLetterId}",
            as_kvk(Method::GET, &format!("{dead_path}/{seq}")),
        )
        .await;
    check
        .check(
            "get",
            "/subscriptions/{id}/dead-letters/{deadLetterId}",
            as_kvk(Method::GET, &format!("{dead_path}/999999")),
        )
        .await;
    sink.answer_always(Reply::status(204));
    check
        .check(
            "post",
            "/subscriptions/{id}/dead-letters/{deadLetterId}/redeliver",
            as_kvk(Method::POST, &format!("{dead_path}/{seq}/redeliver")),
        )
        .await;

    check
        .check(
            "delete",
            "/subscriptions/{id}",
            as_kvk(Method::DELETE, &item),
        )
        .await;
    check
        .check(
            "delete",
            "/subscriptions/{id}",
            as_kvk(Method::DELETE, &item),
        )
        .await;

    // Principals.
    let as_admin = |method: Method, path: &str| hub.request(method, path, tokens::ADMIN);
    let principal = json!({"name": "rvo", "roles": ["publisher"], "oin": "00000001003214345000",
                           "publishSourcePrefixes": ["urn:nld:oin:00000001003214345000:"]});
    check
        .check(
            "post",
            "/principals",
            as_admin(Method::POST, "/v1/principals").json(&principal),
        )
        .await;
    for request in [
        as_admin(Method::POST, "/v1/principals").json(&principal),
        as_admin(Method::POST, "/v1/principals").json(&json!({"name": "", "roles": []})),
        as_kvk(Method::POST, "/v1/principals").json(&principal),
        hub.client.post(hub.url("/v1/principals")).json(&principal),
    ] {
        check.check("post", "/principals", request).await;
    }
    for query in [
        "",
        "?pageSize=1",
        "?pageSize=1&cursor=admin",
        "?pageSize=0",
        "?page=2",
    ] {
        check
            .check(
                "get",
                "/principals",
                as_admin(Method::GET, &format!("/v1/principals{query}")),
            )
            .await;
    }
    check
        .check("get", "/principals", as_kvk(Method::GET, "/v1/principals"))
        .await;
    for name in ["rvo", "nobody"] {
        let path = format!("/v1/principals/{name}");
        check
            .check("get", "/principals/{name}", as_admin(Method::GET, &path))
            .await;
        check
            .check(
                "patch",
                "/principals/{name}",
                as_admin(Method::PATCH, &path)
                    .header("content-type", "application/merge-patch+json")
                    .body(json!({"disabled": true, "oin": null}).to_string()),
            )
            .await;
        check
            .check(
                "post",
                "/principals/{name}/token",
                as_admin(Method::POST, &format!("{path}/token")),
            )
            .await;
    }
    check
        .check(
            "patch",
            "/principals/{name}",
            as_admin(Method::PATCH, "/v1/principals/rvo").json(&json!({"roles": ["root"]})),
        )
        .await;
    check
        .check(
            "patch",
            "/principals/{name}",
            as_admin(Method::PATCH, "/v1/principals/admin").json(&json!({"disabled": true})),
        )
        .await;
    for name in ["rvo", "rvo", "admin"] {
        check
            .check(
                "delete",
                "/principals/{name}",
                as_admin(Method::DELETE, &format!("/v1/principals/{name}")),
            )
            .await;
    }

    // The catalog, the signing secret's rotation and the hub's signing keys.
    let as_brp = |method: Method, path: &str| hub.request(method, path, tokens::BRP_PUBLISHER);
    let entry = json!({"source": "urn:nld:oin:00000001823288444000:", "type": "nl.brp.x",
                       "description": "x", "approval": "open"});
    let created = check
        .check(
            "post",
            "/eventtypes",
            as_brp(Method::POST, "/v1/eventtypes").json(&entry),
        )
        .await;
    for request in [
        as_brp(Method::POST, "/v1/eventtypes").json(&entry),
        as_brp(Method::POST, "/v1/eventtypes").json(&json!({"type": 1})),
        as_kvk(Method::POST, "/v1/eventtypes").json(&entry),
        hub.client.post(hub.url("/v1/eventtypes")).json(&entry),
    ] {
        check.check("post", "/eventtypes", request).await;
    }
    check
        .check("get", "/eventtypes", as_kvk(Method::GET, "/v1/eventtypes"))
        .await;
    let path = format!("/v1/eventtypes/{}", created["id"].as_str().unwrap());
    check
        .check("get", "/eventtypes/{id}", as_kvk(Method::GET, &path))
        .await;
    check
        .check(
            "put",
            "/eventtypes/{id}",
            as_brp(Method::PUT, &path).json(&entry),
        )
        .await;
    check
        .check(
            "put",
            "/eventtypes/{id}",
            hub.request(Method::PUT, &path, tokens::PUBLISHER)
                .json(&entry),
        )
        .await;
    // `false` is a JSON Schema too (nothing holds), echoed as sent.
    let mut nothing = entry.clone();
    nothing["schema"] = json!(false);
    nothing["schemaCheck"] = json!("off");
    let echoed = check
        .check(
            "put",
            "/eventtypes/{id}",
            as_brp(Method::PUT, &path).json(&nothing),
        )
        .await;
    assert_eq!(echoed["schema"], json!(false), "{echoed}");
    for _ in 0..2 {
        check
            .check("delete", "/eventtypes/{id}", as_brp(Method::DELETE, &path))
            .await;
    }
    let subscription = check
        .check(
            "post",
            "/subscriptions",
            as_kvk(Method::POST, "/v1/subscriptions")
                .json(&json!({"sink": sink.url, "protocol": "HTTP"})),
        )
        .await;
    let rotate = format!(
        "/v1/subscriptions/{}/signing-secret",
        subscription["id"].as_str().unwrap()
    );
    check
        .check(
            "post",
            "/subscriptions/{id}/signing-secret",
            as_kvk(Method::POST, &rotate),
        )
        .await;
    check
        .check(
            "post",
            "/subscriptions/{id}/signing-secret",
            hub.request(Method::POST, &rotate, tokens::GEMEENTE),
        )
        .await;
    check
        .check(
            "get",
            "/signing-keys",
            hub.client.get(hub.url("/v1/signing-keys")),
        )
        .await;

    // Approvals, receipts and the audit trail.
    let guarded = json!({"source": "urn:nld:oin:00000001823288444000:", "type": "nl.brp.guarded",
                         "description": "x", "approval": "approval-required"});
    let guarded = check
        .check(
            "post",
            "/eventtypes",
            as_brp(Method::POST, "/v1/eventtypes").json(&guarded),
        )
        .await;
    let bound = check
        .check(
            "post",
            "/subscriptions",
            as_kvk(Method::POST, "/v1/subscriptions")
                .json(&json!({"sink": sink.url, "protocol": "HTTP", "types": ["nl.brp.guarded"]})),
        )
        .await;
    check
        .check(
            "get",
            "/subscriptions/{id}",
            as_kvk(
                Method::GET,
                &format!("/v1/subscriptions/{}", bound["id"].as_str().unwrap()),
            ),
        )
        .await;
    for request in [
        as_brp(Method::GET, "/v1/approvals?state=requested"),
        as_brp(Method::GET, "/v1/approvals?state=maybe"),
        hub.client.get(hub.url("/v1/approvals")),
    ] {
        check.check("get", "/approvals", request).await;
    }
    let approval = format!(
        "/v1/eventtypes/{}/approvals/{}",
        guarded["id"].as_str().unwrap(),
        bound["id"].as_str().unwrap()
    );
    let route = "/eventtypes/{id}/approvals/{subscription}";
    check
        .check("get", route, as_kvk(Method::GET, &approval))
        .await;
    check
        .check(
            "get",
            route,
            as_kvk(Method::GET, "/v1/eventtypes/x/approvals/y"),
        )
        .await;
    for request in [
        as_brp(Method::PUT, &approval).json(&json!({"state": "granted"})),
        as_brp(Method::PUT, &approval).json(&json!({"state": "refused", "reason": "x"})),
        as_brp(Method::PUT, &approval).json(&json!({"state": "nope"})),
        as_kvk(Method::PUT, &approval).json(&json!({"state": "revoked", "reason": "x"})),
    ] {
        check.check("put", route, request).await;
    }
    for request in [
        as_kvk(Method::GET, "/v1/events/1/receipts"),
        as_kvk(Method::GET, "/v1/events/x/receipts"),
    ] {
        check
            .check("get", "/events/{sequence}/receipts", request)
            .await;
    }
    let receipts = format!(
        "/v1/subscriptions/{}/receipts",
        bound["id"].as_str().unwrap()
    );
    for request in [
        as_kvk(Method::GET, &receipts),
        hub.request(Method::GET, &receipts, tokens::GEMEENTE),
    ] {
        check
            .check("get", "/subscriptions/{id}/receipts", request)
            .await;
    }
    for request in [
        hub.request(Method::GET, "/v1/audit?name=approval", tokens::ADMIN),
        as_kvk(Method::GET, "/v1/audit"),
        as_kvk(Method::GET, "/v1/audit?from=nope"),
    ] {
        check.check("get", "/audit", request).await;
    }
    for request in [
        hub.request(Method::GET, "/v1/audit/verify", tokens::ADMIN),
        as_kvk(Method::GET, "/v1/audit/verify"),
        hub.request(Method::GET, "/v1/audit/verify?head=x", tokens::ADMIN),
        hub.request(
            Method::GET,
            &format!("/v1/audit/verify?head=9999:{}", "0".repeat(64)),
            tokens::ADMIN,
        ),
    ] {
        check.check("get", "/audit/verify", request).await;
    }
    for request in [
        hub.request(Method::GET, "/v1/audit/head", tokens::ADMIN),
        as_kvk(Method::GET, "/v1/audit/head"),
    ] {
        check.check("get", "/audit/head", request).await;
    }
    // Pull delivery.
    let pulled = check
        .check(
            "post",
            "/subscriptions",
            as_kvk(Method::POST, "/v1/subscriptions").json(&json!({
                "protocol": "HTTP", "types": [TYPE],
                "config": {"delivery": "pull", "ordering": "unordered", "lockDuration": "PT5S"}})),
        )
        .await;
    let pull = format!("/v1/subscriptions/{}", pulled["id"].as_str().unwrap());
    let publisher = hub.request(Method::POST, "/v1/events", tokens::PUBLISHER);
    let answer = publisher
        .header("content-type", "application/cloudevents+json")
        .body(event("pulled-1").to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 202);
    // Optional attributes sent as `null` (unset) come back as sent, in the stream too.
    let mut unset = event("pulled-2");
    for name in [
        "datacontenttype",
        "subject",
        "time",
        "dataschema",
        "comexampleunset",
    ] {
        unset[name] = Value::Null;
    }
    let answer = hub
        .request(Method::POST, "/v1/events", tokens::PUBLISHER)
        .header("content-type", "application/cloudevents+json")
        .body(unset.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 202);
    let push = format!("/v1/subscriptions/{id}");
    for request in [
        as_kvk(
            Method::POST,
            &format!("{pull}/receive?maxEvents=5&maxWait=PT5S"),
        ),
        as_kvk(Method::POST, &format!("{pull}/receive?maxWait=PT0S")),
        as_kvk(
            Method::POST,
            &format!("{pull}/receive?maxEvents=0&maxWait=PT2M"),
        ),
        as_kvk(Method::POST, &format!("{pull}/receive?other=1")),
        as_kvk(Method::POST, &format!("{push}/receive")),
        as_kvk(Method::POST, "/v1/subscriptions/nope/receive"),
        hub.client.post(hub.url(&format!("{pull}/receive"))),
        hub.request(Method::POST, &format!("{pull}/receive"), tokens::PUBLISHER),
    ] {
        check
            .check("post", "/subscriptions/{id}/receive", request)
            .await;
    }
    let streamed = check
        .check(
            "get",
            "/subscriptions/{id}/events",
            as_kvk(Method::GET, &format!("{pull}/events")),
        )
        .await;
    assert!(
        streamed.to_string().contains(r#""datacontenttype":null"#),
        "{streamed}"
    );
    for query in [
        "",
        "?after=0&limit=5",
        "?after=x",
        "?limit=0",
        "?maxWait=PT2M",
    ] {
        check
            .check(
                "get",
                "/subscriptions/{id}/events",
                as_kvk(Method::GET, &format!("{pull}/events{query}")),
            )
            .await;
    }
    check
        .check(
            "get",
            "/subscriptions/{id}/events",
            hub.request(Method::GET, &format!("{pull}/events"), tokens::GEMEENTE),
        )
        .await;
    let replays = format!("{pull}/replays");
    let mut replay_location = String::new();
    for body in [
        json!({"from": "2026-01-01T00:00:00Z"}),
        json!({"from": "2026-01-01T00:00:00Z", "until": "2025-01-01T00:00:00Z"}),
        json!({"from": "yesterday"}),
        json!({"until": "2026-01-01T00:00:00Z"}),
        json!({"from": "2026-01-01T00:00:00Z", "other": 1}),
    ] {
        let created = check
            .check(
                "post",
                "/subscriptions/{id}/replays",
                as_kvk(Method::POST, &replays).json(&body),
            )
            .await;
        if let Some(id) = created["id"].as_str() {
            replay_location = format!("{replays}/{id}");
        }
    }
    check
        .check(
            "post",
            "/subscriptions/{id}/replays",
            hub.request(Method::POST, &replays, tokens::GEMEENTE)
                .json(&json!({"from": "2026-01-01T00:00:00Z"})),
        )
        .await;
    check
        .check(
            "get",
            "/subscriptions/{id}/replays",
            as_kvk(Method::GET, &replays),
        )
        .await;
    for location in [replay_location.clone(), format!("{replays}/nope")] {
        check
            .check(
                "get",
                "/subscriptions/{id}/replays/{replay}",
                as_kvk(Method::GET, &location),
            )
            .await;
        check
            .check(
                "post",
                "/subscriptions/{id}/replays/{replay}/cancel",
                as_kvk(Method::POST, &format!("{location}/cancel")),
            )
            .await;
    }
    for (operation, body) in [
        ("renew", json!({"lockTokens": ["1.1", "x"]})),
        ("release", json!({"lockTokens": ["1.1"], "delay": "PT1S"})),
        ("release", json!({"lockTokens": ["1.1"], "delay": "PT2H"})),
        ("reject", json!({"lockTokens": ["1.1"], "reason": "no"})),
        ("reject", json!({"lockTokens": ["1.1"]})),
        ("acknowledge", json!({"lockTokens": []})),
        ("acknowledge", json!({"lockTokens": ["1.1"], "other": 1})),
        ("acknowledge", json!(["1.1"])),
        ("acknowledge", json!({"lockTokens": ["1.1"]})),
    ] {
        let path = format!("/subscriptions/{{id}}/{operation}");
        check
            .check(
                "post",
                &path,
                as_kvk(Method::POST, &format!("{pull}/{operation}")).json(&body),
            )
            .await;
        check
            .check(
                "post",
                &path,
                as_kvk(Method::POST, &format!("{push}/{operation}")).json(&body),
            )
            .await;
    }
    assert!(check.checked >= 90, "{} answers checked", check.checked);
}

/// How deliveries fare: a subscription's status and attempts, a test event, the hub's
/// status; each answer (and refusal) as the document says.
#[tokio::test]
async fn status_answers_are_what_the_document_says() {
    let hub = TestHub::start().await;
    let mut check = Checker::new(&hub).await;
    let sink = Sink::start().await;
    let body = json!({"sink": sink.url, "protocol": "HTTP", "types": [TYPE]});
    let created = hub
        .call(Method::POST, "/v1/subscriptions", tokens::KVK, Some(body))
        .await;
    let id = created.body["id"].as_str().unwrap().to_owned();
    let as_kvk = |method: Method, path: &str| hub.request(method, path, tokens::KVK);
    let sent = check
        .check(
            "post",
            "/subscriptions/{id}/test",
            as_kvk(Method::POST, &format!("/v1/subscriptions/{id}/test")),
        )
        .await;
    assert_eq!(sent["outcome"], "delivered", "{sent}");
    let delivered = sink.wait_for(1, std::time::Duration::from_secs(5)).await;
    assert_eq!(delivered[0].json()["type"], "nl.knooppunt.test");
    let status = check
        .check(
            "get",
            "/subscriptions/{id}/status",
            as_kvk(Method::GET, &format!("/v1/subscriptions/{id}/status")),
        )
        .await;
    assert_eq!(status["breaker"]["state"], "closed", "{status}");
    assert_eq!(status["lastAttempt"]["outcome"], "test", "{status}");
    let shown = check
        .check(
            "get",
            "/subscriptions/{id}",
            as_kvk(Method::GET, &format!("/v1/subscriptions/{id}")),
        )
        .await;
    assert_eq!(shown["lastDelivery"]["outcome"], "test", "{shown}");
    let attempts = check
        .check(
            "get",
            "/subscriptions/{id}/attempts",
            as_kvk(Method::GET, &format!("/v1/subscriptions/{id}/attempts")),
        )
        .await;
    assert_eq!(attempts[0]["statusCode"], 204, "{attempts}");
    // Another's subscription: not found; the hub's status: admins only.
    for path in ["status", "attempts"] {
        check
            .check(
                "get",
                &format!("/subscriptions/{{id}}/{path}"),
                hub.request(
                    Method::GET,
                    &format!("/v1/subscriptions/{id}/{path}"),
                    tokens::GEMEENTE,
                ),
            )
            .await;
    }
    check
        .check(
            "get",
            "/status",
            hub.request(Method::GET, "/v1/status", tokens::KVK),
        )
        .await;
    let hub_status = check
        .check(
            "get",
            "/status",
            hub.request(Method::GET, "/v1/status", tokens::ADMIN),
        )
        .await;
    assert_eq!(hub_status["subscriptions"]["active"], 1, "{hub_status}");
}

/// Every answer a test hub gives under `/v1` is checked against its document as it is sent
/// (`TestHub`'s conformance layer), so every scenario of the suite checks it too; an answer
/// the document does not describe is caught.
#[tokio::test]
async fn the_harness_checks_every_answer_against_the_document() {
    let hub = TestHub::start().await;
    let before = hub.conformance().checked();
    let answer = hub
        .request(Method::GET, "/v1/subscriptions/nothing-here", tokens::KVK)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 404);
    assert_eq!(hub.conformance().checked(), before + 1);
    assert!(hub.conformance().violations().is_empty());

    // The same answer against a document that does not list 404 for the operation.
    let mut document = hub.hub.openapi_document();
    let responses = document["paths"]["/subscriptions/{id}"]["get"]["responses"]
        .as_object_mut()
        .unwrap();
    assert!(responses.remove("404").is_some());
    let strict = knooppunt_tests::openapi::Conformance::new(document);
    let router = knooppunt_tests::openapi::conformance_layer(hub.hub.router(), &strict);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let served = tokio::spawn(async move { axum::serve(listener, router).await });
    let answer = hub
        .client
        .get(format!("http://{address}/v1/subscriptions/nothing-here"))
        .bearer_auth(tokens::KVK)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 404);
    assert_eq!(
        strict.violations(),
        ["GET /subscriptions/{id} 404: a status the document does not list"]
    );
    served.abort();
}
