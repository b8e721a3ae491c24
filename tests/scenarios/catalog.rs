//! The event type catalog (`/v1/eventtypes`): publishers describe their own events, anyone
//! authenticated reads the catalog, only an entry's owner or an admin changes it, an
//! organisation's source space is its own, and the catalog survives a restart.

use knooppunt_tests::{TestHub, test_options, tokens};
use reqwest::Method;
use serde_json::{Value, json};

const BRP: &str = "urn:nld:oin:00000001823288444000:";

fn entry(source: &str, ty: &str) -> Value {
    json!({"source": source, "type": ty, "description": "Een ingezetene is verhuisd.",
           "documentation": "https://brp.example.nl/events", "approval": "open"})
}

/// Creates an entry as the BRP's publisher; the answer.
async fn describe(hub: &TestHub, body: Value) -> knooppunt_tests::Answer {
    let created = hub
        .call(
            Method::POST,
            "/v1/eventtypes",
            tokens::BRP_PUBLISHER,
            Some(body),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    created
}

/// A hub with the hub's defaults for source spaces (the harness lifts the reservation).
async fn hub() -> TestHub {
    let mut options = test_options();
    options.ingest.reserve_oin_sources = true;
    TestHub::builder().options(options).start().await
}

#[tokio::test]
async fn publishers_describe_their_events_and_only_owners_change_them() {
    let hub = hub().await;
    let created = hub
        .call(
            Method::POST,
            "/v1/eventtypes",
            tokens::BRP_PUBLISHER,
            Some(entry(BRP, "nl.brp.persoon-verhuisd")),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/eventtypes/{id}");
    assert_eq!(created.header("location"), Some(path.as_str()));
    assert_eq!(created.body["owner"], "brp");
    assert_eq!(created.body["typeMatch"], "exact");
    assert_eq!(created.body["approval"], "open");
    assert_eq!(created.body["deprecated"], false);
    assert_eq!(created.body.get("kenmerken"), None, "none named");

    // Anyone authenticated reads it; nobody unauthenticated.
    let read = hub.call(Method::GET, &path, tokens::KVK, None).await;
    assert_eq!(read.status, 200);
    assert_eq!(read.body, created.body);
    let listed = hub
        .call(Method::GET, "/v1/eventtypes", tokens::GEMEENTE, None)
        .await;
    assert_eq!(listed.body, json!([created.body]));
    let anonymous = hub
        .client
        .get(hub.url("/v1/eventtypes"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);

    // A subscriber describes nothing; the same entry twice is a conflict.
    hub.call(
        Method::POST,
        "/v1/eventtypes",
        tokens::KVK,
        Some(entry(BRP, "nl.brp.x")),
    )
    .await
    .assert_problem(403);
    hub.call(
        Method::POST,
        "/v1/eventtypes",
        tokens::BRP_PUBLISHER,
        Some(entry(BRP, "nl.brp.persoon-verhuisd")),
    )
    .await
    .assert_problem(409);

    // Another organisation's source space is not another publisher's to describe.
    let foreign = hub
        .call(
            Method::POST,
            "/v1/eventtypes",
            tokens::PUBLISHER,
            Some(entry(BRP, "nl.brp.anders")),
        )
        .await
        .assert_problem(403);
    assert!(
        foreign.body["detail"]
            .as_str()
            .unwrap()
            .contains("00000001823288444000"),
        "{}",
        foreign.body
    );
    // Nor someone else's entry to change or delete.
    let mut changed = created.body.clone();
    changed["deprecated"] = json!(true);
    hub.call(Method::PUT, &path, tokens::PUBLISHER, Some(changed.clone()))
        .await
        .assert_problem(403);
    hub.call(Method::DELETE, &path, tokens::PUBLISHER, None)
        .await
        .assert_problem(403);

    // The owner changes it (what it sends back of the read-only members is ignored).
    let replaced = hub
        .call(Method::PUT, &path, tokens::BRP_PUBLISHER, Some(changed))
        .await;
    assert_eq!(replaced.status, 200, "{}", replaced.body);
    assert_eq!(replaced.body["deprecated"], true);
    assert_eq!(replaced.body["owner"], "brp");
    assert_eq!(replaced.body["created"], created.body["created"]);

    // Kept across a restart.
    let hub = hub.restart().await;
    let again = hub.call(Method::GET, &path, tokens::KVK, None).await;
    assert_eq!(again.body, replaced.body);

    // An admin may delete it.
    let deleted = hub.call(Method::DELETE, &path, tokens::ADMIN, None).await;
    assert_eq!(deleted.status, 204);
    hub.call(Method::GET, &path, tokens::KVK, None)
        .await
        .assert_problem(404);
}

#[tokio::test]
async fn bad_entries_are_refused_with_every_problem_and_lists_are_paged() {
    let hub = hub().await;
    let bad = hub
        .call(
            Method::POST,
            "/v1/eventtypes",
            tokens::BRP_PUBLISHER,
            Some(
                json!({"source": BRP, "type": "", "typeMatch": "fuzzy", "colour": 1,
                        "approval": "maybe", "documentation": "ftp://x", "kenmerken": [""]}),
            ),
        )
        .await
        .assert_problem(400);
    let mut names = bad.invalid_params();
    names.sort();
    assert_eq!(
        names,
        [
            "approval",
            "colour",
            "description",
            "documentation",
            "kenmerken",
            "type",
            "typeMatch"
        ]
    );

    for n in 0..3 {
        let created = hub
            .call(
                Method::POST,
                "/v1/eventtypes",
                tokens::BRP_PUBLISHER,
                Some(entry(BRP, &format!("nl.brp.type{n}"))),
            )
            .await;
        assert_eq!(created.status, 201, "{}", created.body);
    }
    let first = hub
        .call(Method::GET, "/v1/eventtypes?pageSize=2", tokens::KVK, None)
        .await;
    assert_eq!(first.body.as_array().unwrap().len(), 2);
    let next = first.header("link").expect("a next page").to_owned();
    let url = next
        .trim_start_matches('<')
        .split('>')
        .next()
        .unwrap()
        .to_owned();
    let second = hub.call(Method::GET, &url, tokens::KVK, None).await;
    assert_eq!(second.body.as_array().unwrap().len(), 1);
    assert!(second.header("link").is_none());
    assert_eq!(second.body[0]["type"], "nl.brp.type2");
}

async fn publish(hub: &TestHub, token: &str, id: &str, ty: &str) -> knooppunt_tests::Answer {
    let event = json!({"specversion": "1.0", "id": id, "source": format!("{BRP}systeem:BRP"),
                       "type": ty});
    knooppunt_tests::Answer::from(
        hub.request(Method::POST, "/v1/events", token)
            .header("content-type", "application/cloudevents+json")
            .body(event.to_string())
            .send()
            .await
            .unwrap(),
    )
    .await
}

/// Publishing a type the catalog deprecates still works and says so; with "catalog
/// required", only described events are accepted.
#[tokio::test]
async fn deprecated_types_are_flagged_and_the_catalog_can_be_required() {
    let mut options = test_options();
    options.ingest.reserve_oin_sources = true;
    options.ingest.catalog_required = true;
    let hub = TestHub::builder().options(options).start().await;
    let uncovered = publish(&hub, tokens::BRP_PUBLISHER, "u-1", "nl.brp.onbekend")
        .await
        .assert_problem(403);
    assert!(
        uncovered.body["detail"]
            .as_str()
            .unwrap()
            .contains("POST /v1/eventtypes"),
        "{}",
        uncovered.body
    );

    let mut old = entry(BRP, "nl.brp.oud");
    old["deprecated"] = json!(true);
    let mut family = entry(BRP, "nl.brp.persoon-");
    family["typeMatch"] = json!("prefix");
    for body in [old, family] {
        describe(&hub, body).await;
    }
    let deprecated = publish(&hub, tokens::BRP_PUBLISHER, "d-1", "nl.brp.oud").await;
    assert_eq!(deprecated.status, 202, "{}", deprecated.body);
    assert_eq!(deprecated.header("deprecation"), Some("true"));
    assert_eq!(deprecated.body["deprecatedType"], true);
    let current = publish(
        &hub,
        tokens::BRP_PUBLISHER,
        "c-1",
        "nl.brp.persoon-verhuisd",
    )
    .await;
    assert_eq!(current.status, 202, "{}", current.body);
    assert_eq!(current.header("deprecation"), None);
    assert!(current.body.get("deprecatedType").is_none());
}

/// An entry's JSON Schema holds its events' data: `enforce` refuses data that breaks it
/// (saying where), `warn` accepts it with warnings; a schema the hub cannot use safely is
/// refused when the entry is made.
#[tokio::test]
async fn an_entrys_schema_holds_the_data_of_its_events() {
    let hub = hub().await;
    let schema = json!({"type": "object", "required": ["bsn"],
                        "properties": {"bsn": {"type": "string", "pattern": "^[0-9]{9}$"}}});
    let mut strict = entry(BRP, "nl.brp.persoon-verhuisd");
    strict["schema"] = schema.clone();
    strict["schemaCheck"] = json!("enforce");
    let mut lenient = entry(BRP, "nl.brp.persoon-geboren");
    lenient["schema"] = schema;
    for body in [strict, lenient] {
        describe(&hub, body).await;
    }
    let send = |id: &str, ty: &str, data: Value| {
        let event = json!({"specversion": "1.0", "id": id, "source": format!("{BRP}systeem:BRP"),
                           "type": ty, "datacontenttype": "application/json", "data": data});
        hub.request(Method::POST, "/v1/events", tokens::BRP_PUBLISHER)
            .header("content-type", "application/cloudevents+json")
            .body(event.to_string())
    };
    let good = knooppunt_tests::Answer::from(
        send(
            "s-1",
            "nl.brp.persoon-verhuisd",
            json!({"bsn": "999990342"}),
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(good.status, 202, "{}", good.body);
    let bad = knooppunt_tests::Answer::from(
        send("s-2", "nl.brp.persoon-verhuisd", json!({"bsn": "12"}))
            .send()
            .await
            .unwrap(),
    )
    .await
    .assert_problem(400);
    let text = bad.body.to_string();
    assert!(
        text.contains("hub.data-schema") && text.contains("/bsn"),
        "{text}"
    );
    let warned = knooppunt_tests::Answer::from(
        send("s-3", "nl.brp.persoon-geboren", json!({}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(warned.status, 202, "{}", warned.body);
    assert!(
        warned.body["warnings"]
            .to_string()
            .contains("hub.data-schema"),
        "{}",
        warned.body
    );

    // Schemas the hub will not use: not a schema, a reference it would have to fetch, a
    // pattern only a backtracking engine runs, a check without a schema.
    for (schema, check) in [
        (json!({"type": 5}), "enforce"),
        (
            json!({"$ref": "https://schemas.example.nl/brp.json"}),
            "enforce",
        ),
        (json!({"type": "string", "pattern": "^(a+)\\1$"}), "warn"),
        (Value::Null, "enforce"),
    ] {
        let mut body = entry(BRP, "nl.brp.anders");
        body["schema"] = schema.clone();
        body["schemaCheck"] = json!(check);
        let refused = hub
            .call(
                Method::POST,
                "/v1/eventtypes",
                tokens::BRP_PUBLISHER,
                Some(body),
            )
            .await
            .assert_problem(400);
        assert_eq!(
            refused.invalid_params(),
            ["schema"],
            "{schema}: {}",
            refused.body
        );
    }
}

/// The attributes subscribers may filter on (a ZGW kanaal's `filters`) are kept, shown and
/// survive a replacement that sends back what it read.
#[tokio::test]
async fn an_entry_names_the_kenmerken_subscribers_filter_on() {
    let hub = hub().await;
    let mut body = entry(BRP, "nl.vng.zgw.zaken.");
    body["typeMatch"] = json!("prefix");
    body["kenmerken"] = json!(["bronorganisatie", "zaaktype", "vertrouwelijkheidaanduiding"]);
    let created = describe(&hub, body).await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(
        created.body["kenmerken"],
        json!(["bronorganisatie", "zaaktype", "vertrouwelijkheidaanduiding"])
    );
    let path = format!("/v1/eventtypes/{}", created.body["id"].as_str().unwrap());
    let replaced = hub
        .call(
            Method::PUT,
            &path,
            tokens::BRP_PUBLISHER,
            Some(created.body.clone()),
        )
        .await;
    assert_eq!(replaced.status, 200, "{}", replaced.body);
    assert_eq!(replaced.body["kenmerken"], created.body["kenmerken"]);
    let hub = hub.restart().await;
    let read = hub.call(Method::GET, &path, tokens::KVK, None).await;
    assert_eq!(
        read.body["kenmerken"], created.body["kenmerken"],
        "kept across a restart"
    );
}

/// An entry covers every source that starts with its `source`, so its owner must be able to
/// publish every one of them: a publisher without a source space of its own, or a prefix
/// wider than its space (every organisation's `urn:nld:oin:`, a start of it, another case,
/// part of an OIN), is refused, on create and on replace; an organisation's own entries
/// are not, and an admin describes wider spaces.
#[tokio::test]
async fn a_publisher_cannot_claim_every_organisations_events() {
    let hub = hub().await;
    let claim = |source: &str| {
        let mut body = entry(source, "nl.");
        body["typeMatch"] = json!("prefix");
        body["approval"] = json!("approval-required");
        body
    };
    let wide = [
        "urn:nld:oin:",
        "urn:nld:",
        "urn:",
        "u",
        "URN:NLD:OIN:",
        "urn:nld:oin:0000000",
        "urn:nld:oin:00000001823288444000",
    ];
    // A publisher with no OIN and no prefixes has no space of its own to describe.
    for source in wide.iter().chain(&["urn:nld:zgw:x"]) {
        let refused = hub
            .call(
                Method::POST,
                "/v1/eventtypes",
                tokens::PUBLISHER,
                Some(claim(source)),
            )
            .await
            .assert_problem(403);
        let detail = refused.body["detail"].as_str().unwrap();
        assert!(
            [
                "no source space of its own",
                "every organisation",
                "OIN 00000001823288444000"
            ]
            .iter()
            .any(|why| detail.contains(why)),
            "{source}: {detail}"
        );
    }
    // The BRP describes only inside `urn:nld:oin:00000001823288444000:`.
    for source in wide {
        let refused = hub
            .call(
                Method::POST,
                "/v1/eventtypes",
                tokens::BRP_PUBLISHER,
                Some(claim(source)),
            )
            .await
            .assert_problem(403);
        assert!(
            refused.body["detail"].as_str().unwrap().contains(BRP),
            "{source}: {}",
            refused.body
        );
    }
    let own = describe(&hub, claim(BRP)).await;
    describe(&hub, claim(&format!("{BRP}systeem:"))).await;
    // Nor can an own entry be widened by replacing it.
    let path = format!("/v1/eventtypes/{}", own.body["id"].as_str().unwrap());
    hub.call(
        Method::PUT,
        &path,
        tokens::BRP_PUBLISHER,
        Some(claim("urn:nld:oin:")),
    )
    .await
    .assert_problem(403);
    let kept = hub.call(Method::GET, &path, tokens::KVK, None).await;
    assert_eq!(kept.body["source"], BRP);
    // An admin may describe a wider space.
    let admin = hub
        .call(
            Method::POST,
            "/v1/eventtypes",
            tokens::ADMIN,
            Some(claim("urn:nld:oin:")),
        )
        .await;
    assert_eq!(admin.status, 201, "{}", admin.body);
}
