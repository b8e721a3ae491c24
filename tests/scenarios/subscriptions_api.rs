//! The subscriptions API driven over HTTP on a real hub: create, read, list, update, delete,
//! authentication, ownership, type-prefix limits, every validation error, the ADR headers,
//! and the matching index following every change, across a restart too.

use knooppunt_event::EventBuilder;
use knooppunt_tests::{Answer, TestHub, tokens};
use reqwest::Method;
use serde_json::{Value, json};

async fn create(hub: &TestHub, token: &str, body: Value) -> Answer {
    hub.call(Method::POST, "/v1/subscriptions", token, Some(body))
        .await
}

fn minimal() -> Value {
    json!({"sink": "http://127.0.0.1:9/events", "protocol": "HTTP"})
}

fn brp_event(ty: &str, subject: &str) -> knooppunt_event::Event {
    EventBuilder::new("1", "urn:nld:oin:00000001823288444000:systeem:BRP", ty)
        .subject(subject)
        .build()
        .unwrap()
}

#[tokio::test]
async fn create_read_list_replace_delete() {
    let hub = TestHub::start().await;
    let created = create(
        &hub,
        tokens::KVK,
        json!({
            "id": "ignored-on-create",
            "sink": "https://kvk.example.nl/events",
            "protocol": "HTTP",
            "types": ["nl.kvk.opgericht"],
            "filters": [{"prefix": {"subject": "123"}}],
            "protocolsettings": {"headers": {"X-Tenant": "kvk"}},
            "sinkcredential": {"credentialtype": "ACCESSTOKEN", "accesstoken": "very-secret",
                               "accesstokentype": "bearer", "accesstokenexpiresutc": "2099-01-01T00:00:00Z"},
            "config": {"mode": "binary", "maxAttempts": "5"}
        }),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["id"].as_str().unwrap().to_owned();
    assert_ne!(id, "ignored-on-create");
    assert_eq!(
        created.header("location"),
        Some(format!("/v1/subscriptions/{id}").as_str())
    );
    assert_eq!(created.body["owner"], "kvk");
    assert_eq!(created.body["config"]["mode"], "binary");
    assert_eq!(created.body["config"]["maxAttempts"], "5");
    assert_eq!(
        created.body["config"]["ttl"], "PT24H",
        "defaults are filled in"
    );
    assert_eq!(created.body["config"]["ordering"], "ordered");
    assert_eq!(created.body["protocolsettings"]["method"], "POST");
    assert!(
        created.body.get("sinkcredential").is_none(),
        "credentials are write-only"
    );
    assert!(!created.body.to_string().contains("very-secret"));

    let read = hub
        .call(
            Method::GET,
            &format!("/v1/subscriptions/{id}"),
            tokens::KVK,
            None,
        )
        .await;
    assert_eq!(read.status, 200);
    assert_eq!(read.body, resource_of(&created));

    let list = hub
        .call(Method::GET, "/v1/subscriptions", tokens::KVK, None)
        .await;
    assert_eq!(list.status, 200);
    assert_eq!(list.body, json!([resource_of(&created)]));

    let mut replacement = minimal();
    replacement["id"] = json!(id);
    replacement["types"] = json!(["nl.kvk.opgeheven"]);
    let replaced = hub
        .call(
            Method::PUT,
            &format!("/v1/subscriptions/{id}"),
            tokens::KVK,
            Some(replacement),
        )
        .await;
    assert_eq!(replaced.status, 200, "{}", replaced.body);
    assert_eq!(replaced.body["types"], json!(["nl.kvk.opgeheven"]));
    assert_eq!(
        replaced.body["config"]["mode"], "structured",
        "a PUT replaces the whole resource"
    );
    assert_eq!(replaced.body["owner"], "kvk");

    let deleted = hub
        .call(
            Method::DELETE,
            &format!("/v1/subscriptions/{id}"),
            tokens::KVK,
            None,
        )
        .await;
    assert_eq!(deleted.status, 200);
    assert_eq!(deleted.body["id"], json!(id));
    hub.call(
        Method::GET,
        &format!("/v1/subscriptions/{id}"),
        tokens::KVK,
        None,
    )
    .await
    .assert_problem(404);
    hub.call(
        Method::DELETE,
        &format!("/v1/subscriptions/{id}"),
        tokens::KVK,
        None,
    )
    .await
    .assert_problem(404);
}

#[tokio::test]
async fn authentication_and_roles() {
    let hub = TestHub::start().await;
    let anonymous = Answer::from(
        hub.client
            .get(hub.url("/v1/subscriptions"))
            .send()
            .await
            .unwrap(),
    )
    .await
    .assert_problem(401);
    assert_eq!(
        anonymous.header("www-authenticate"),
        Some("Bearer realm=\"knooppunt\"")
    );
    let wrong = hub
        .call(Method::GET, "/v1/subscriptions", "not-a-token", None)
        .await
        .assert_problem(401);
    assert!(
        wrong
            .header("www-authenticate")
            .unwrap()
            .contains("invalid_token")
    );
    let basic = Answer::from(
        hub.client
            .get(hub.url("/v1/subscriptions"))
            .basic_auth("kvk", Some("kvk-token"))
            .send()
            .await
            .unwrap(),
    )
    .await
    .assert_problem(401);
    assert!(basic.body["detail"].as_str().unwrap().contains("Bearer"));

    let publisher = create(&hub, tokens::PUBLISHER, minimal())
        .await
        .assert_problem(403);
    assert!(
        publisher.body["detail"]
            .as_str()
            .unwrap()
            .contains("`subscriber` role")
    );
    hub.call(Method::GET, "/v1/subscriptions", tokens::PUBLISHER, None)
        .await
        .assert_problem(403);
}

/// The resource a 201 describes: the answer without the signing secret, which only that
/// answer shows.
fn resource_of(created: &Answer) -> Value {
    let mut body = created.body.clone();
    let secret = body.as_object_mut().unwrap().remove("signingsecret");
    assert!(
        secret.is_some_and(|s| s.as_str().is_some_and(|s| s.starts_with("whsec_"))),
        "the 201 shows the signing secret: {}",
        created.body
    );
    body
}

#[tokio::test]
async fn subscribers_see_only_their_own_and_admins_see_all() {
    let hub = TestHub::start().await;
    let mut brp = minimal();
    brp["types"] = json!(["nl.brp.persoon-verhuisd"]);
    let gemeente = create(&hub, tokens::GEMEENTE, brp).await;
    assert_eq!(gemeente.status, 201, "{}", gemeente.body);
    let kvk = create(&hub, tokens::KVK, minimal()).await;
    let gemeente_id = gemeente.body["id"].as_str().unwrap();
    let path = format!("/v1/subscriptions/{gemeente_id}");

    let kvk_list = hub
        .call(Method::GET, "/v1/subscriptions", tokens::KVK, None)
        .await;
    assert_eq!(kvk_list.body, json!([resource_of(&kvk)]));
    for method in [Method::GET, Method::DELETE, Method::OPTIONS] {
        hub.call(method, &path, tokens::KVK, None)
            .await
            .assert_problem(404);
    }
    hub.call(Method::PUT, &path, tokens::KVK, Some(minimal()))
        .await
        .assert_problem(404);

    let all = hub
        .call(Method::GET, "/v1/subscriptions", tokens::ADMIN, None)
        .await;
    assert_eq!(all.body.as_array().unwrap().len(), 2);
    let mut change = minimal();
    change["types"] = json!(["nl.brp.persoon-gehuwd"]);
    let changed = hub
        .call(Method::PUT, &path, tokens::ADMIN, Some(change))
        .await;
    assert_eq!(changed.status, 200);
    assert_eq!(
        changed.body["owner"], "gemeente",
        "an admin's change keeps the owner"
    );
}

#[tokio::test]
async fn principals_limited_to_type_prefixes() {
    let hub = TestHub::start().await;
    let outside = create(&hub, tokens::GEMEENTE, json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP", "types": ["nl.brp.x", "nl.kvk.y"]}))
        .await
        .assert_problem(403);
    assert!(
        outside.body["detail"]
            .as_str()
            .unwrap()
            .contains("nl.kvk.y")
    );
    let unconstrained = create(&hub, tokens::GEMEENTE, minimal())
        .await
        .assert_problem(403);
    assert!(
        unconstrained.body["detail"]
            .as_str()
            .unwrap()
            .contains("nl.brp.")
    );
    let by_filter = create(
        &hub,
        tokens::GEMEENTE,
        json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP",
               "filters": [{"all": [{"prefix": {"type": "nl.brp.persoon"}}, {"exact": {"subject": "1"}}]}]}),
    )
    .await;
    assert_eq!(by_filter.status, 201, "{}", by_filter.body);
}

#[tokio::test]
async fn every_validation_problem_is_named() {
    let hub = TestHub::start().await;
    let cases: Vec<(Value, &[&str])> = vec![
        (json!({}), &["sink", "protocol"]),
        (json!({"sink": "/relative", "protocol": "HTTP"}), &["sink"]),
        (
            json!({"sink": "ftp://example.nl/x", "protocol": "HTTP"}),
            &["sink"],
        ),
        (json!({"sink": 5, "protocol": "HTTP"}), &["sink"]),
        (
            json!({"sink": "http://127.0.0.1:9/", "protocol": "KAFKA"}),
            &["protocol"],
        ),
        (
            json!({"sink": "http://127.0.0.1:9/", "protocol": "http"}),
            &["protocol"],
        ),
        (
            json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP", "source": "a b"}),
            &["source"],
        ),
        (
            json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP", "types": ["", 5]}),
            &["types[0]", "types[1]"],
        ),
        (
            json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP", "filters": [{"regex": {"type": "x"}}]}),
            &["filters[0].regex"],
        ),
        (
            json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP", "filters": [{"sql": "type = "}]}),
            &["filters[0].sql"],
        ),
        (
            json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP", "filters": {"exact": {}}}),
            &["filters"],
        ),
        (
            json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP", "protocolsettings": {"method": "GET", "retries": 3}}),
            &["protocolsettings.retries", "protocolsettings.method"],
        ),
        (
            json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP", "protocolsettings": {"headers": {"Authorization": "x", "Bad Header": "y"}}}),
            &[
                "protocolsettings.headers.Authorization",
                "protocolsettings.headers.Bad Header",
            ],
        ),
        (
            json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP", "sinkcredential": {"credentialtype": "PLAIN", "identifier": "x"}}),
            &["sinkcredential.secret"],
        ),
        (
            json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP", "sinkcredential": {"credentialtype": "REFRESHTOKEN"}}),
            &["sinkcredential.credentialtype"],
        ),
        (
            json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP", "config": {"mode": "fax", "ttl": "1 day", "maxAttempts": 3, "colour": "red"}}),
            &[
                "config.maxAttempts",
                "config.colour",
                "config.mode",
                "config.ttl",
            ],
        ),
        (
            json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP", "filter": []}),
            &["filter"],
        ),
        (json!([]), &[""]),
    ];
    for (body, expected) in cases {
        let answer = create(&hub, tokens::KVK, body.clone())
            .await
            .assert_problem(400);
        let mut names = answer.invalid_params();
        names.sort();
        let mut expected: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
        expected.sort();
        assert_eq!(names, expected, "{body}: {}", answer.body);
        for param in answer.body["invalidParams"].as_array().unwrap() {
            assert!(!param["reason"].as_str().unwrap().is_empty());
        }
    }
    let sql = create(&hub, tokens::KVK, json!({"sink": "http://127.0.0.1:9/", "protocol": "HTTP", "filters": [{"sql": "type LIKE 5"}]}))
        .await
        .assert_problem(400);
    assert!(
        sql.body["invalidParams"][0]["reason"]
            .as_str()
            .unwrap()
            .contains("LIKE must be followed by a string literal"),
        "the parser's message reaches the user: {}",
        sql.body
    );
    assert_eq!(
        hub.hub.subscription_count(),
        0,
        "nothing invalid was stored"
    );
}

#[tokio::test]
async fn put_with_another_id_is_refused() {
    let hub = TestHub::start().await;
    let created = create(&hub, tokens::KVK, minimal()).await;
    let id = created.body["id"].as_str().unwrap();
    let mut body = minimal();
    body["id"] = json!("something-else");
    let answer = hub
        .call(
            Method::PUT,
            &format!("/v1/subscriptions/{id}"),
            tokens::KVK,
            Some(body),
        )
        .await
        .assert_problem(400);
    assert_eq!(answer.invalid_params(), ["id"]);
    hub.call(
        Method::PUT,
        "/v1/subscriptions/unknown",
        tokens::KVK,
        Some(minimal()),
    )
    .await
    .assert_problem(404);
}

async fn post_raw(hub: &TestHub, content_type: &str, body: &'static str) -> Answer {
    let request = hub
        .request(Method::POST, "/v1/subscriptions", tokens::KVK)
        .header("content-type", content_type)
        .body(body);
    Answer::from(request.send().await.unwrap()).await
}

#[tokio::test]
async fn bodies_that_are_not_json() {
    let hub = TestHub::start().await;
    let text = post_raw(&hub, "text/plain", "sink=x")
        .await
        .assert_problem(415);
    let detail = text.body["detail"].as_str().unwrap();
    assert!(detail.contains("application/json"), "{detail}");
    let broken = post_raw(&hub, "application/json", "{\"sink\": ")
        .await
        .assert_problem(400);
    let detail = broken.body["detail"].as_str().unwrap();
    assert!(detail.contains("not valid JSON"), "{detail}");
}

#[tokio::test]
async fn api_design_rules_headers_and_paths() {
    let hub = TestHub::start().await;
    let created = create(&hub, tokens::KVK, minimal()).await;
    let not_found = hub
        .call(Method::GET, "/v1/nothing-here", tokens::KVK, None)
        .await
        .assert_problem(404);
    let trailing = hub
        .call(Method::GET, "/v1/subscriptions/", tokens::KVK, None)
        .await;
    assert_eq!(trailing.status, 404, "no trailing-slash redirect");
    let not_allowed = hub
        .call(Method::PATCH, "/v1/subscriptions", tokens::KVK, None)
        .await
        .assert_problem(405);
    assert_eq!(not_allowed.header("allow"), Some("GET, POST, OPTIONS"));
    for answer in [&created, &not_found, &trailing, &not_allowed] {
        assert_eq!(answer.header("api-version"), Some("1.0.0"));
        assert_eq!(answer.header("x-content-type-options"), Some("nosniff"));
        assert_eq!(answer.header("x-frame-options"), Some("DENY"));
        assert_eq!(answer.header("cache-control"), Some("no-store"));
        assert!(
            answer
                .header("content-security-policy")
                .unwrap()
                .contains("frame-ancestors 'none'")
        );
        assert!(answer.header("strict-transport-security").is_some());
    }
    let options = hub
        .call(Method::OPTIONS, "/v1/subscriptions", tokens::KVK, None)
        .await;
    assert_eq!(options.status, 200);
    assert_eq!(options.header("allow"), Some("GET, POST, OPTIONS"));
    let id = created.body["id"].as_str().unwrap();
    let item = hub
        .call(
            Method::OPTIONS,
            &format!("/v1/subscriptions/{id}"),
            tokens::KVK,
            None,
        )
        .await;
    assert_eq!(item.header("allow"), Some("GET, PUT, DELETE, OPTIONS"));
}

#[tokio::test]
async fn listing_is_paginated_in_creation_order() {
    let hub = TestHub::start().await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(
            create(&hub, tokens::KVK, minimal()).await.body["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let mut seen = Vec::new();
    let mut path = "/v1/subscriptions?pageSize=2".to_owned();
    loop {
        let page = hub.call(Method::GET, &path, tokens::KVK, None).await;
        assert_eq!(page.status, 200);
        assert!(page.body.as_array().unwrap().len() <= 2);
        seen.extend(
            page.body
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s["id"].as_str().unwrap().to_owned()),
        );
        match page.header("link") {
            Some(link) => {
                assert!(link.ends_with("; rel=\"next\""), "{link}");
                path = link[1..link.find('>').unwrap()].to_owned();
            }
            None => break,
        }
    }
    assert_eq!(seen, ids);
    for bad in ["pageSize=0", "pageSize=many", "page=2"] {
        hub.call(
            Method::GET,
            &format!("/v1/subscriptions?{bad}"),
            tokens::KVK,
            None,
        )
        .await
        .assert_problem(400);
    }
    // Every problem of a query is named at once, a parameter given twice among them (which
    // one counts would be a guess), read by the query's one type.
    let answer = hub
        .call(
            Method::GET,
            "/v1/subscriptions?state=gone&pageSize=0&page=2&search=a&search=b",
            tokens::KVK,
            None,
        )
        .await
        .assert_problem(400);
    let mut named: Vec<&str> = answer.body["invalidParams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    named.sort_unstable();
    assert_eq!(
        named,
        ["page", "pageSize", "search", "state"],
        "{}",
        answer.body
    );
    let page = answer.body["invalidParams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "page")
        .unwrap();
    assert_eq!(
        page["reason"],
        "unknown query parameter; the parameters are `cursor`, `owner`, `pageSize`, `search` \
         and `state`"
    );
    // The document describes the same parameters, from the same type.
    let document = hub.get_json("/v1/openapi.json").await;
    let parameters: Vec<&str> = document["paths"]["/subscriptions"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        parameters,
        ["cursor", "owner", "pageSize", "search", "state"]
    );
}

#[tokio::test]
async fn the_index_follows_every_change_and_survives_a_restart() {
    let hub = TestHub::start().await;
    let verhuisd = brp_event("nl.brp.persoon-verhuisd", "999990342");
    let gehuwd = brp_event("nl.brp.persoon-gehuwd", "999990342");
    let mut body = minimal();
    body["filters"] = json!([{"sql": "type = 'nl.brp.persoon-verhuisd' AND subject LIKE '9999%'"}]);
    let id = create(&hub, tokens::KVK, body).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        hub.hub.matching_subscriptions(&verhuisd),
        std::slice::from_ref(&id)
    );
    assert!(hub.hub.matching_subscriptions(&gehuwd).is_empty());

    let mut change = minimal();
    change["types"] = json!(["nl.brp.persoon-gehuwd"]);
    hub.call(
        Method::PUT,
        &format!("/v1/subscriptions/{id}"),
        tokens::KVK,
        Some(change),
    )
    .await;
    assert!(hub.hub.matching_subscriptions(&verhuisd).is_empty());
    assert_eq!(
        hub.hub.matching_subscriptions(&gehuwd),
        std::slice::from_ref(&id)
    );

    let other = create(&hub, tokens::KVK, minimal()).await.body["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let hub = hub.restart().await;
    assert_eq!(hub.hub.subscription_count(), 2);
    let mut matched = hub.hub.matching_subscriptions(&gehuwd);
    matched.sort();
    let mut expected = vec![id.clone(), other.clone()];
    expected.sort();
    assert_eq!(
        matched, expected,
        "subscriptions and filters survive a restart"
    );
    let read = hub
        .call(
            Method::GET,
            &format!("/v1/subscriptions/{id}"),
            tokens::KVK,
            None,
        )
        .await;
    assert_eq!(read.body["types"], json!(["nl.brp.persoon-gehuwd"]));

    hub.call(
        Method::DELETE,
        &format!("/v1/subscriptions/{other}"),
        tokens::KVK,
        None,
    )
    .await;
    assert_eq!(hub.hub.matching_subscriptions(&gehuwd), [id]);
}

#[tokio::test]
async fn development_mode_needs_no_token() {
    let hub = TestHub::builder().without_authentication().start().await;
    let created = Answer::from(
        hub.client
            .post(hub.url("/v1/subscriptions"))
            .json(&minimal())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["owner"], "development");
}

#[tokio::test]
async fn framework_errors_are_problems_too() {
    let hub = TestHub::start().await;
    // A path segment that is not UTF-8 once percent-decoded is refused by the router itself.
    let answer = hub
        .call(Method::GET, "/v1/subscriptions/%FF", tokens::KVK, None)
        .await
        .assert_problem(400);
    assert_eq!(answer.header("api-version"), Some("1.0.0"));
}

/// The hub's default delivery policy fills the `config` keys a subscription leaves out, and
/// the OpenAPI document shows the hub's defaults.
#[tokio::test]
async fn the_hubs_delivery_defaults_fill_what_a_subscription_leaves_out() {
    let mut options = knooppunt_tests::test_options();
    options.subscription_defaults = knooppunt_store::ConfigDefaults::try_new([
        ("maxAttempts", "7".to_owned()),
        ("ordering", "unordered".to_owned()),
    ])
    .unwrap();
    let hub = TestHub::builder().options(options).start().await;
    let mut body = minimal();
    body["config"] = json!({"ordering": "ordered"});
    let created = create(&hub, tokens::KVK, body).await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let config = &created.body["config"];
    assert_eq!(config["maxAttempts"], "7", "the hub's default");
    assert_eq!(
        config["ordering"], "ordered",
        "the subscription's own choice"
    );
    assert_eq!(config["ttl"], "PT24H", "the standard default");

    let document: Value = hub
        .client
        .get(hub.url("/v1/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let keys = &document["components"]["schemas"]["Config"]["properties"];
    assert_eq!(keys["maxAttempts"]["default"], "7");
    assert_eq!(keys["mode"]["default"], "structured");
}

/// http-webhook.md: "HTTPS MUST be used for the connection". A sink off the hub's machine
/// must be https:// unless the hub allows plain http (a test environment without TLS).
#[tokio::test]
async fn sinks_must_use_https_unless_on_this_machine_or_allowed() {
    let hub = TestHub::start().await;
    let with_sink = |sink: &str| json!({"sink": sink, "protocol": "HTTP"});
    let refused = create(
        &hub,
        tokens::KVK,
        with_sink("http://gemeente.example.nl/events"),
    )
    .await
    .assert_problem(400);
    let reason = refused.body["invalidParams"][0]["reason"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(refused.invalid_params(), ["sink"]);
    assert!(
        reason.contains("https://") && reason.contains("allow_http_sinks"),
        "{reason}"
    );
    for sink in [
        "https://gemeente.example.nl/events",
        "http://localhost:9/events",
        "http://127.0.0.2:9/events",
        "http://[::1]:9/events",
    ] {
        let created = create(&hub, tokens::KVK, with_sink(sink)).await;
        assert_eq!(created.status, 201, "{sink}: {}", created.body);
    }

    let mut options = knooppunt_tests::test_options();
    options.allow_http_sinks = true;
    let lenient = TestHub::builder().options(options).start().await;
    let created = create(
        &lenient,
        tokens::KVK,
        with_sink("http://gemeente.example.nl/events"),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
}

/// `GET /subscriptions?owner=`: an admin lists one principal's subscriptions (the next
/// page's link keeps the filter); others only their own. Each listed subscription carries
/// its backlog.
#[tokio::test]
async fn subscriptions_are_listed_by_owner_with_their_backlog() {
    let hub = TestHub::start().await;
    for token in [tokens::KVK, tokens::KVK, tokens::KVK, tokens::GEMEENTE] {
        let created = hub
            .call(
                Method::POST,
                "/v1/subscriptions",
                token,
                Some(json!({"protocol": "HTTP", "types": ["nl.brp.x"],
                            "config": {"delivery": "pull"}})),
            )
            .await;
        assert_eq!(created.status, 201, "{}", created.body);
    }
    let page = Answer::from(
        hub.request(
            Method::GET,
            "/v1/subscriptions?owner=kvk&pageSize=2",
            tokens::ADMIN,
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(page.status, 200);
    let items = page.body.as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert!(
        items
            .iter()
            .all(|s| s["owner"] == "kvk" && s["backlog"] == 0)
    );
    let link = page.headers["link"].to_str().unwrap();
    assert!(link.contains("owner=kvk&pageSize=2&cursor="), "{link}");
    let next = link[1..link.find('>').unwrap()].to_owned();
    let rest = hub.call(Method::GET, &next, tokens::ADMIN, None).await;
    assert_eq!(rest.body.as_array().unwrap().len(), 1, "{}", rest.body);
    assert_eq!(rest.body[0]["owner"], "kvk");

    let own = hub
        .call(
            Method::GET,
            "/v1/subscriptions?owner=gemeente",
            tokens::GEMEENTE,
            None,
        )
        .await;
    assert_eq!(own.body.as_array().unwrap().len(), 1);
    let refused = hub
        .call(
            Method::GET,
            "/v1/subscriptions?owner=kvk",
            tokens::GEMEENTE,
            None,
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        refused.body["detail"]
            .as_str()
            .unwrap()
            .contains("administrator")
    );
    let empty = hub
        .call(Method::GET, "/v1/subscriptions?owner=", tokens::ADMIN, None)
        .await;
    assert_eq!(empty.status, 400);
}

/// `GET /subscriptions?state=&search=`: the subscriptions in a state, or with a text in
/// their id, owner, sink or types (without case); the next page's link keeps the
/// selection; an unknown state is a 400 that names the states.
#[tokio::test]
async fn subscriptions_are_listed_by_state_and_search() {
    let hub = TestHub::start().await;
    for (token, event_type) in [
        (tokens::KVK, "nl.brp.persoon-verhuisd"),
        (tokens::KVK, "nl.brp.persoon-verhuisd"),
        (tokens::KVK, "nl.kvk.inschrijving"),
        (tokens::GEMEENTE, "nl.brp.persoon-verhuisd"),
    ] {
        let created = hub
            .call(
                Method::POST,
                "/v1/subscriptions",
                token,
                Some(json!({"protocol": "HTTP", "types": [event_type],
                            "config": {"delivery": "pull"}})),
            )
            .await;
        assert_eq!(created.status, 201, "{}", created.body);
    }
    let found = hub
        .call(
            Method::GET,
            "/v1/subscriptions?search=VERHUISD&pageSize=2",
            tokens::ADMIN,
            None,
        )
        .await;
    assert_eq!(found.status, 200, "{}", found.body);
    assert_eq!(found.body.as_array().unwrap().len(), 2);
    let link = found.headers["link"].to_str().unwrap();
    assert!(
        link.contains("search=VERHUISD&pageSize=2&cursor="),
        "{link}"
    );
    let next = link[1..link.find('>').unwrap()].to_owned();
    let rest = hub.call(Method::GET, &next, tokens::ADMIN, None).await;
    assert_eq!(rest.body.as_array().unwrap().len(), 1, "{}", rest.body);
    // A subscriber's search stays within its own.
    let own = hub
        .call(
            Method::GET,
            "/v1/subscriptions?search=nl.brp",
            tokens::KVK,
            None,
        )
        .await;
    assert_eq!(own.body.as_array().unwrap().len(), 2, "{}", own.body);
    assert!(
        own.body
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["owner"] == "kvk")
    );
    let by_owner = hub
        .call(
            Method::GET,
            "/v1/subscriptions?search=gemeente",
            tokens::ADMIN,
            None,
        )
        .await;
    assert_eq!(
        by_owner.body.as_array().unwrap().len(),
        1,
        "{}",
        by_owner.body
    );
    // Pull subscriptions are active at once; none is disabled.
    let active = hub
        .call(
            Method::GET,
            "/v1/subscriptions?state=active",
            tokens::ADMIN,
            None,
        )
        .await;
    assert_eq!(active.body.as_array().unwrap().len(), 4, "{}", active.body);
    let disabled = hub
        .call(
            Method::GET,
            "/v1/subscriptions?state=disabled",
            tokens::ADMIN,
            None,
        )
        .await;
    assert_eq!(disabled.body, json!([]));
    let refused = hub
        .call(
            Method::GET,
            "/v1/subscriptions?state=kapot&search=",
            tokens::ADMIN,
            None,
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    let names: Vec<&str> = refused.body["invalidParams"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    assert_eq!(names, ["state", "search"], "{}", refused.body);
}

/// `label`: a name people know a subscription by, kept and shown as sent, found by the
/// list's search; text of 1 to 200 characters without control characters.
#[tokio::test]
async fn a_subscription_carries_the_label_it_was_given() {
    let hub = TestHub::start().await;
    let body = |label: Value| {
        json!({"protocol": "HTTP", "types": ["nl.brp.x"], "label": label,
               "config": {"delivery": "pull"}})
    };
    let created = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::KVK,
            Some(body(json!("Verhuizingen voor Burgerzaken"))),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(created.body["label"], "Verhuizingen voor Burgerzaken");
    let id = created.body["id"].as_str().unwrap().to_owned();
    let read = hub
        .call(
            Method::GET,
            &format!("/v1/subscriptions/{id}"),
            tokens::KVK,
            None,
        )
        .await;
    assert_eq!(read.body["label"], "Verhuizingen voor Burgerzaken");
    let found = hub
        .call(
            Method::GET,
            "/v1/subscriptions?search=burgerzaken",
            tokens::KVK,
            None,
        )
        .await;
    assert_eq!(found.body.as_array().unwrap().len(), 1, "{}", found.body);
    // Replaced without it: gone.
    let mut replacement = read.body.clone();
    replacement.as_object_mut().unwrap().remove("label");
    let replaced = hub
        .call(
            Method::PUT,
            &format!("/v1/subscriptions/{id}"),
            tokens::KVK,
            Some(replacement),
        )
        .await;
    assert_eq!(replaced.status, 200, "{}", replaced.body);
    assert!(replaced.body.get("label").is_none(), "{}", replaced.body);
    for bad in [
        json!(""),
        json!("regel\nregel"),
        json!("x".repeat(201)),
        json!(7),
        json!(null),
    ] {
        let refused = hub
            .call(
                Method::POST,
                "/v1/subscriptions",
                tokens::KVK,
                Some(body(bad.clone())),
            )
            .await;
        assert_eq!(refused.status, 400, "{bad}: {}", refused.body);
        assert_eq!(
            refused.body["invalidParams"][0]["name"], "label",
            "{}",
            refused.body
        );
    }
}
