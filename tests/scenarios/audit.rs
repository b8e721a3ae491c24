//! The audit trail: every change and every refused request is there with the right actor,
//! request id and trace id, and no secret; each principal sees what it did and what concerns
//! it (an admin all); the chain verifies, and after one stored entry is edited by hand the
//! hub's verification names that entry.

use knooppunt_tests::sink::Sink;
use knooppunt_tests::wait::until;
use knooppunt_tests::{Answer, TestHub, tokens};
use reqwest::Method;
use serde_json::{Value, json};

/// How long a scenario waits for the hub.
const WAIT: std::time::Duration = std::time::Duration::from_secs(10);

const PREFIX: &str = "urn:nld:oin:00000001823288444000:";
const TYPE: &str = "nl.brp.persoon-verhuisd";
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

async fn all_entries(hub: &TestHub, token: &str) -> Vec<Value> {
    let answer = hub.call(Method::GET, "/v1/audit", token, None).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    answer.body.as_array().unwrap().clone()
}

fn find<'a>(entries: &'a [Value], name: &str) -> &'a Value {
    entries
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no `{name}` entry in {entries:#?}"))
}

#[tokio::test]
async fn every_change_and_refusal_is_on_a_chain_that_names_an_edited_entry() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;

    // An admin makes a principal (with a token, which must never reach the trail).
    let created = hub
        .call(
            Method::POST,
            "/v1/principals",
            tokens::ADMIN,
            Some(json!({"name": "rvig", "roles": ["subscriber"]})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let token = created.body["token"].as_str().unwrap().to_owned();

    // The BRP describes its events, with its own request id and trace.
    let described = Answer::from(
        hub.request(Method::POST, "/v1/eventtypes", tokens::BRP_PUBLISHER)
            .header("x-request-id", "brp-change-4711")
            .header("traceparent", format!("00-{TRACE}-00f067aa0ba902b7-01"))
            .json(
                &json!({"source": PREFIX, "type": TYPE, "description": "Verhuisd.",
                          "approval": "approval-required"}),
            )
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(described.status, 201, "{}", described.body);
    assert_eq!(described.header("x-request-id"), Some("brp-change-4711"));
    let entry = described.body["id"].as_str().unwrap().to_owned();

    // The KVK subscribes (the hub asks the BRP's approval), the BRP grants it.
    let subscribed = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::KVK,
            Some(
                json!({"sink": format!("{}?key=s3cr3t-webhook-key", sink.url),
                        "protocol": "HTTP", "types": [TYPE],
                        "protocolsettings": {"headers": {"x-api-key": "h3ad3r-key"}},
                        "sinkcredential": {"credentialtype": "ACCESSTOKEN",
                                           "accesstoken": "acc3ss-token",
                                           "accesstokentype": "Bearer",
                                           "accesstokenexpiresutc": "2099-01-01T00:00:00Z"}}),
            ),
        )
        .await;
    assert_eq!(subscribed.status, 201, "{}", subscribed.body);
    let subscription = subscribed.body["id"].as_str().unwrap().to_owned();
    let secret = subscribed.body["signingsecret"]
        .as_str()
        .unwrap()
        .to_owned();
    let approval = format!("/v1/eventtypes/{entry}/approvals/{subscription}");
    let granted = hub
        .call(
            Method::PUT,
            &approval,
            tokens::BRP_PUBLISHER,
            Some(json!({"state": "granted", "reason": "art. 3.2"})),
        )
        .await;
    assert_eq!(granted.status, 200, "{}", granted.body);

    // Refused: the KVK deciding on its own approval, and a token nobody has.
    hub.call(
        Method::PUT,
        &approval,
        tokens::KVK,
        Some(json!({"state": "revoked", "reason": "x"})),
    )
    .await
    .assert_problem(403);
    hub.call(Method::GET, "/v1/subscriptions", "not-a-token", None)
        .await
        .assert_problem(401);

    // The admin sees every entry, in order, with the right actor. Refusals are written
    // without holding up the answer: they arrive a moment later.
    let entries = until("the refusal on the trail", WAIT, || async {
        let entries = all_entries(&hub, tokens::ADMIN).await;
        if entries
            .iter()
            .any(|e| e["name"] == "request.unauthenticated")
        {
            Ok(entries)
        } else {
            Err(format!("{} entries, none of it", entries.len()))
        }
    })
    .await;
    let names: Vec<&str> = entries
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    let expected = [
        "principal.create",
        "eventtype.create",
        "subscription.create",
        "approval.request",
        "approval.grant",
        "request.forbidden",
        "request.unauthenticated",
    ];
    let mut at = 0;
    for name in expected {
        at += names[at..]
            .iter()
            .position(|n| *n == name)
            .unwrap_or_else(|| panic!("`{name}` missing or out of order in {names:?}"));
    }
    assert_eq!(find(&entries, "principal.create")["actor"], "admin");
    assert_eq!(
        find(&entries, "principal.create")["object"],
        "principal/rvig"
    );
    let change = find(&entries, "eventtype.create");
    assert_eq!(change["actor"], "brp");
    assert_eq!(change["requestId"], "brp-change-4711");
    assert_eq!(change["traceId"], TRACE);
    assert_eq!(change["statusCode"], "OK");
    assert_eq!(change["processingActivityId"], "eventtype");
    assert_eq!(change["details"]["after"]["type"], TYPE);
    assert_eq!(find(&entries, "approval.request")["actor"], "knooppunt");
    assert_eq!(find(&entries, "subscription.create")["actor"], "kvk");
    let grant = find(&entries, "approval.grant");
    assert_eq!(grant["actor"], "brp");
    assert_eq!(grant["details"]["reason"], "art. 3.2");
    let forbidden = find(&entries, "request.forbidden");
    assert_eq!(forbidden["actor"], "kvk");
    assert_eq!(forbidden["statusCode"], "ERROR");
    assert_eq!(
        forbidden["object"],
        "PUT /v1/eventtypes/{id}/approvals/{subscription}"
    );
    assert!(
        forbidden["details"]["detail"]
            .as_str()
            .unwrap()
            .contains("owned by `brp`"),
        "{forbidden}"
    );
    let unknown = find(&entries, "request.unauthenticated");
    assert_eq!(unknown["actor"], Value::Null);
    assert!(
        unknown["requestId"]
            .as_str()
            .is_some_and(|id| !id.is_empty())
    );
    // Every entry chains on the one before.
    for pair in entries.windows(2) {
        assert_eq!(pair[1]["prevHash"], pair[0]["hash"]);
        assert_eq!(
            pair[1]["sequence"].as_u64().unwrap(),
            pair[0]["sequence"].as_u64().unwrap() + 1
        );
    }
    // No secret reaches the trail.
    let text = serde_json::to_string(&entries).unwrap();
    assert!(
        !text.contains(&token),
        "a principal's token is in the trail"
    );
    assert!(!text.contains(&secret), "a signing secret is in the trail");
    assert!(
        !text.contains("s3cr3t-webhook-key"),
        "a key in the sink's URL is in the trail"
    );
    assert!(
        !text.contains("h3ad3r-key") && !text.contains("acc3ss-token"),
        "a header's value or the sink's credential is in the trail"
    );
    let made = entries
        .iter()
        .find(|e| e["name"] == "subscription.create")
        .unwrap();
    assert_eq!(made["details"]["after"]["credentialtype"], "ACCESSTOKEN");
    assert_eq!(
        made["details"]["after"]["protocolsettings"]["headers"]["x-api-key"],
        "********"
    );

    // Each sees its own and what concerns it; filters and pages work.
    let kvk = all_entries(&hub, tokens::KVK).await;
    assert!(
        kvk.iter()
            .all(|e| e["actor"] == "kvk"
                || e["concerns"].as_array().unwrap().contains(&json!("kvk")))
    );
    assert!(
        kvk.iter().any(|e| e["name"] == "approval.grant"),
        "{kvk:#?}"
    );
    assert!(!kvk.iter().any(|e| e["name"] == "principal.create"));
    let brp = all_entries(&hub, tokens::BRP_PUBLISHER).await;
    assert!(brp.iter().any(|e| e["name"] == "approval.request"));
    assert!(!brp.iter().any(|e| e["name"] == "subscription.create"));
    let approvals = hub
        .call(
            Method::GET,
            "/v1/audit?name=approval&pageSize=1",
            tokens::ADMIN,
            None,
        )
        .await;
    assert_eq!(approvals.body.as_array().unwrap().len(), 1);
    assert_eq!(approvals.body[0]["name"], "approval.request");
    let link = approvals.header("link").unwrap().to_owned();
    assert!(link.contains("name=approval&pageSize=1&cursor="), "{link}");
    let next = approvals.next_link().unwrap();
    let second = hub.call(Method::GET, &next, tokens::ADMIN, None).await;
    assert_eq!(second.body[0]["name"], "approval.grant");
    hub.call(Method::GET, "/v1/audit?from=yesterday", tokens::ADMIN, None)
        .await
        .assert_problem(400);
    // A valid RFC 3339 time before 1970 is a bound like any other: from the start.
    let since_1969 = hub
        .call(
            Method::GET,
            "/v1/audit?from=1969-07-20T20:17:40Z&name=approval",
            tokens::ADMIN,
            None,
        )
        .await;
    assert_eq!(since_1969.status, 200, "{}", since_1969.body);
    assert_eq!(since_1969.body[0]["name"], "approval.request");
    // As JSON lines, in the trail's own field names.
    let lines = hub
        .request(Method::GET, "/v1/audit", tokens::ADMIN)
        .header("accept", "application/x-ndjson")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let first: Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert_eq!(first["name"], "principal.create");
    assert!(first["start_time"].is_u64() && first["prev_hash"].is_string());

    // Only admins verify; the chain is intact.
    hub.call(Method::GET, "/v1/audit/verify", tokens::KVK, None)
        .await
        .assert_problem(403);
    let verified = hub
        .call(Method::GET, "/v1/audit/verify", tokens::ADMIN, None)
        .await;
    assert_eq!(verified.body["intact"], true, "{}", verified.body);

    // Someone with access to the disk changes who granted the approval.
    let edited = find(&entries, "approval.grant")["sequence"]
        .as_u64()
        .unwrap();
    let hub = hub
        .restart_after_editing(|data| {
            let db = sled::open(data).unwrap();
            let tree = db.open_tree("audit").unwrap();
            let key = edited.to_be_bytes();
            let stored = tree.get(key).unwrap().expect("the entry is stored");
            let mut entry: Value = serde_json::from_slice(&stored).unwrap();
            entry["actor"] = json!("admin");
            tree.insert(key, serde_json::to_vec(&entry).unwrap())
                .unwrap();
            db.flush().unwrap();
        })
        .await;
    let verified = hub
        .call(Method::GET, "/v1/audit/verify", tokens::ADMIN, None)
        .await;
    assert_eq!(verified.status, 200);
    assert_eq!(verified.body["intact"], false, "{}", verified.body);
    assert_eq!(verified.body["brokenAt"], edited, "{}", verified.body);
    assert_eq!(
        verified.body["entries"],
        edited - verified.body["first"].as_u64().unwrap(),
        "the entries before the broken one are counted as intact: {}",
        verified.body
    );
}

#[tokio::test]
async fn the_owner_sees_who_received_an_event_and_a_subscriber_what_it_received() {
    let hub = TestHub::start().await;
    let described = hub
        .call(
            Method::POST,
            "/v1/eventtypes",
            tokens::BRP_PUBLISHER,
            Some(json!({"source": PREFIX, "type": TYPE, "description": "Verhuisd."})),
        )
        .await;
    assert_eq!(described.status, 201, "{}", described.body);
    let (kvk_sink, gemeente_sink) = (Sink::start().await, Sink::start().await);
    let mut ids = Vec::new();
    for (token, sink) in [(tokens::KVK, &kvk_sink), (tokens::GEMEENTE, &gemeente_sink)] {
        let created = hub
            .call(
                Method::POST,
                "/v1/subscriptions",
                token,
                Some(json!({"sink": sink.url, "protocol": "HTTP", "types": [TYPE]})),
            )
            .await;
        assert_eq!(created.status, 201, "{}", created.body);
        ids.push(created.body["id"].as_str().unwrap().to_owned());
    }
    let event = json!({"specversion": "1.0", "id": "verhuizing-1", "source": format!("{PREFIX}systeem:BRP"),
                       "type": TYPE, "datacontenttype": "application/json", "data": {"n": 1}});
    let published = hub.publish_as(tokens::BRP_PUBLISHER, &event).await;
    let seq = published.body["sequence"].as_u64().unwrap();
    kvk_sink
        .wait_for(1, std::time::Duration::from_secs(10))
        .await;
    gemeente_sink
        .wait_for(1, std::time::Duration::from_secs(10))
        .await;

    // The data owner sees both subscriptions (the receipts may trail the delivery).
    let path = format!("/v1/events/{seq}/receipts");
    let owner = until("both receipts", WAIT, || async {
        let owner = hub
            .call(Method::GET, &path, tokens::BRP_PUBLISHER, None)
            .await;
        if owner.body["receipts"]
            .as_array()
            .is_some_and(|r| r.len() == 2)
        {
            Ok(owner)
        } else {
            Err(owner.body)
        }
    })
    .await;
    assert_eq!(owner.status, 200, "{}", owner.body);
    assert_eq!(owner.body["id"], "verhuizing-1");
    let receivers: Vec<&str> = owner.body["receipts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["subscriber"].as_str().unwrap())
        .collect();
    assert_eq!(receivers.len(), 2, "{}", owner.body);
    assert!(receivers.contains(&"kvk") && receivers.contains(&"gemeente"));
    // A subscriber sees only its own receipt, and another publisher none.
    let kvk = hub.call(Method::GET, &path, tokens::KVK, None).await;
    let own = kvk.body["receipts"].as_array().unwrap();
    assert_eq!(own.len(), 1, "{}", kvk.body);
    assert_eq!(own[0]["subscription"], ids[0].as_str());
    // Anyone else learns nothing of the event, not even that it exists; nor of an event
    // that does not exist.
    let other = hub
        .call(Method::GET, &path, tokens::PUBLISHER, None)
        .await
        .assert_problem(404);
    assert!(
        !other.body.to_string().contains("verhuizing-1"),
        "{}",
        other.body
    );
    for token in [tokens::PUBLISHER, tokens::KVK, tokens::ADMIN] {
        hub.call(Method::GET, "/v1/events/987654/receipts", token, None)
            .await
            .assert_problem(404);
    }
    // The publisher (the organisation whose source space it is) sees every receipt even
    // without a catalog entry of its own: the entry is gone now.
    let entry = format!("/v1/eventtypes/{}", described.body["id"].as_str().unwrap());
    let deleted = hub
        .call(Method::DELETE, &entry, tokens::BRP_PUBLISHER, None)
        .await;
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    let publisher = hub
        .call(Method::GET, &path, tokens::BRP_PUBLISHER, None)
        .await;
    assert_eq!(publisher.body["receipts"].as_array().unwrap().len(), 2);
    // What did I receive?
    let received = hub
        .call(
            Method::GET,
            &format!("/v1/subscriptions/{}/receipts", ids[0]),
            tokens::KVK,
            None,
        )
        .await;
    assert_eq!(received.status, 200, "{}", received.body);
    assert_eq!(received.body[0]["sequence"], seq);
    assert_eq!(received.body[0]["id"], "verhuizing-1");
    hub.call(
        Method::GET,
        &format!("/v1/subscriptions/{}/receipts", ids[0]),
        tokens::GEMEENTE,
        None,
    )
    .await
    .assert_problem(404);
    hub.call(Method::GET, "/v1/events/x/receipts", tokens::KVK, None)
        .await
        .assert_problem(400);

    // A deleted subscription's receipt keeps naming its subscriber, who keeps its record.
    let deleted = hub
        .call(
            Method::DELETE,
            &format!("/v1/subscriptions/{}", ids[0]),
            tokens::KVK,
            None,
        )
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    let publisher = hub
        .call(Method::GET, &path, tokens::BRP_PUBLISHER, None)
        .await;
    let kvk_receipt = publisher.body["receipts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["subscription"] == ids[0].as_str())
        .cloned()
        .unwrap();
    assert_eq!(kvk_receipt["subscriber"], "kvk", "{}", publisher.body);
    let own = hub.call(Method::GET, &path, tokens::KVK, None).await;
    assert_eq!(
        own.body["receipts"].as_array().unwrap().len(),
        1,
        "{}",
        own.body
    );
    let received = hub
        .call(
            Method::GET,
            &format!("/v1/subscriptions/{}/receipts", ids[0]),
            tokens::KVK,
            None,
        )
        .await;
    assert_eq!(received.status, 200, "{}", received.body);
    assert_eq!(received.body[0]["id"], "verhuizing-1");
    hub.call(
        Method::GET,
        &format!("/v1/subscriptions/{}/receipts", ids[0]),
        tokens::GEMEENTE,
        None,
    )
    .await
    .assert_problem(404);
}

#[tokio::test]
async fn an_operator_can_switch_receipts_off() {
    let mut options = knooppunt_tests::test_options();
    options.delivery.receipts = false;
    let hub = TestHub::builder().options(options).start().await;
    let sink = Sink::start().await;
    let created = hub
        .call(
            Method::POST,
            "/v1/subscriptions",
            tokens::KVK,
            Some(json!({"sink": sink.url, "protocol": "HTTP", "types": [TYPE]})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let event = json!({"specversion": "1.0", "id": "stil", "source": format!("{PREFIX}systeem:BRP"),
                       "type": TYPE});
    let seq = hub.publish_as(tokens::BRP_PUBLISHER, &event).await.body["sequence"]
        .as_u64()
        .unwrap();
    sink.wait_for(1, std::time::Duration::from_secs(10)).await;
    // Longer than the embedded store takes to file receipts.
    knooppunt_tests::wait::quiet(
        "a receipt filed for it",
        std::time::Duration::from_millis(500),
    )
    .await;
    let receipts = hub
        .call(
            Method::GET,
            &format!("/v1/events/{seq}/receipts"),
            tokens::ADMIN,
            None,
        )
        .await;
    assert_eq!(receipts.body["receipts"], json!([]), "{}", receipts.body);
}

/// The chain's head at `GET /v1/audit/head` is signed with the hub's Ed25519 key, and the
/// signature verifies with the public key the hub publishes; `verify?head=` takes it.
#[tokio::test]
async fn the_head_is_signed_with_the_hubs_key() {
    use base64::Engine as _;
    let der =
        ring::signature::Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).unwrap();
    let pem = format!(
        "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
        base64::engine::general_purpose::STANDARD.encode(der.as_ref())
    );
    let mut options = knooppunt_tests::test_options();
    options.delivery.hub_keys = knooppunt_broker::HubKeys::from_pem(&pem, None).unwrap();
    let hub = TestHub::builder().options(options).start().await;
    let created = hub
        .call(
            Method::POST,
            "/v1/principals",
            tokens::ADMIN,
            Some(json!({"name": "rvo", "roles": ["publisher"]})),
        )
        .await;
    assert_eq!(created.status, 201);
    hub.call(Method::GET, "/v1/audit/head", tokens::KVK, None)
        .await
        .assert_problem(403);
    let head = hub
        .call(Method::GET, "/v1/audit/head", tokens::ADMIN, None)
        .await;
    assert_eq!(head.status, 200, "{}", head.body);
    let signature = &head.body["signature"];
    assert_eq!(
        signature["signed"],
        format!(
            "knooppunt-audit-head:{}",
            head.body["head"].as_str().unwrap()
        )
    );
    let keys = hub.get_json("/v1/signing-keys").await;
    assert_eq!(keys["keys"][0]["kid"], signature["kid"]);
    let decode = |text: &Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(text.as_str().unwrap())
            .unwrap()
    };
    ring::signature::UnparsedPublicKey::new(
        &ring::signature::ED25519,
        decode(&keys["keys"][0]["x"]),
    )
    .verify(
        signature["signed"].as_str().unwrap().as_bytes(),
        &decode(&signature["value"]),
    )
    .expect("the head's signature verifies with the published key");
    let path = format!(
        "/v1/audit/verify?head={}",
        head.body["head"].as_str().unwrap()
    );
    let verified = hub.call(Method::GET, &path, tokens::ADMIN, None).await;
    assert_eq!(verified.body["intact"], true, "{}", verified.body);
    let unknown = format!("/v1/audit/verify?head=999:{}", "a".repeat(64));
    let verified = hub.call(Method::GET, &unknown, tokens::ADMIN, None).await;
    assert_eq!(verified.body["intact"], false, "{}", verified.body);
    assert_eq!(verified.body["truncated"], true, "{}", verified.body);
    hub.call(Method::GET, "/v1/audit/verify?head=x", tokens::ADMIN, None)
        .await
        .assert_problem(400);
}

/// `order=newest`: the trail from its newest entry back, page by page, each page's link
/// going on where the last ended; together the same entries as oldest first, reversed
/// (more than the 500 the hub reads from its store at a time).
#[tokio::test]
async fn the_trail_reads_newest_first() {
    let hub = TestHub::start().await;
    hub.create_principals(520).await;
    assert!(all_entries(&hub, tokens::ADMIN).await.len() >= 100);
    let mut newest_first = Vec::new();
    let mut path = "/v1/audit?order=newest&pageSize=200&name=principal".to_owned();
    loop {
        let page = Answer::from(
            hub.request(Method::GET, &path, tokens::ADMIN)
                .send()
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(page.status, 200, "{}", page.body);
        newest_first.extend(
            page.body
                .as_array()
                .unwrap()
                .iter()
                .map(|e| e["sequence"].as_u64().unwrap()),
        );
        let Some(link) = page.headers.get("link") else {
            break;
        };
        let link = link.to_str().unwrap();
        assert!(link.contains("order=newest"), "{link}");
        path = link[1..link.find('>').unwrap()].to_owned();
    }
    let all = hub
        .call(Method::GET, "/v1/audit?pageSize=1000", tokens::ADMIN, None)
        .await;
    let principals: Vec<u64> = all
        .body
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"].as_str().unwrap().starts_with("principal"))
        .map(|e| e["sequence"].as_u64().unwrap())
        .rev()
        .collect();
    assert_eq!(newest_first, principals);
    let refused = hub
        .call(Method::GET, "/v1/audit?order=sideways", tokens::ADMIN, None)
        .await;
    assert_eq!(refused.status, 400, "{}", refused.body);
}
