//! Signed deliveries (Standard Webhooks): every delivery carries `webhook-id`,
//! `webhook-timestamp` and `webhook-signature`, verified here with the official
//! `standardwebhooks` libraries from npm and PyPI (installed into `target/tools` on first
//! use), in structured and binary mode, through a rotation of the secret.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use knooppunt_tests::sink::Sink;
use knooppunt_tests::{Answer, TestHub, tokens, tools};
use reqwest::Method;
use serde_json::{Value, json};

const SOURCE: &str = "urn:nld:oin:00000001823288444000:systeem:BRP";
const TYPE: &str = "nl.brp.persoon-verhuisd";

/// The npm library, installed on first use.
fn js_library() -> PathBuf {
    tools::npm("standardwebhooks-js", "standardwebhooks@1")
}

/// The PyPI library, installed on first use into a directory of its own.
fn python_library() -> PathBuf {
    tools::pip("standardwebhooks-py", "standardwebhooks>=1.1,<2")
}

/// Whether the library in `language` accepts `body` with `headers` under `secret`.
fn verifies(language: &str, secret: &str, body: &[u8], headers: &Value) -> bool {
    let work = tempfile::tempdir().unwrap();
    let body_file = work.path().join("body");
    std::fs::write(&body_file, body).unwrap();
    let headers_file = work.path().join("headers.json");
    std::fs::write(&headers_file, headers.to_string()).unwrap();
    let output = match language {
        "js" => {
            let script = "const { Webhook } = require('standardwebhooks');\
                 const fs = require('fs');\
                 const [secret, body, headers] = process.argv.slice(1);\
                 new Webhook(secret).verify(fs.readFileSync(body).toString(), \
                   JSON.parse(fs.readFileSync(headers, 'utf8')), { jsonParse: false });";
            Command::new("node")
                .current_dir(js_library())
                .args(["-e", script, secret])
                .arg(&body_file)
                .arg(&headers_file)
                .output()
        }
        _ => {
            let script = "import json, sys\n\
                 from standardwebhooks.webhooks import Webhook\n\
                 secret, body, headers = sys.argv[1:]\n\
                 Webhook(secret).verify(open(body, 'rb').read(), json.load(open(headers)), \
                 json_parse=False)\n";
            Command::new("python3")
                .env("PYTHONPATH", python_library())
                .args(["-c", script, secret])
                .arg(&body_file)
                .arg(&headers_file)
                .output()
        }
    }
    .expect("node and python3 run");
    if !output.status.success() {
        eprintln!(
            "{language} refused: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    output.status.success()
}

/// The Standard Webhooks headers of a delivery, as the libraries take them.
fn signature_headers(delivery: &knooppunt_tests::sink::Received) -> Value {
    json!({
        "webhook-id": delivery.header("webhook-id").expect("webhook-id"),
        "webhook-timestamp": delivery.header("webhook-timestamp").expect("webhook-timestamp"),
        "webhook-signature": delivery.header("webhook-signature").expect("webhook-signature"),
    })
}

async fn subscribe(hub: &TestHub, sink: &Sink, mode: &str) -> Answer {
    let body = json!({"sink": sink.url, "protocol": "HTTP", "types": [TYPE],
                      "config": {"mode": mode}});
    let answer = hub
        .call(Method::POST, "/v1/subscriptions", tokens::KVK, Some(body))
        .await;
    assert_eq!(answer.status, 201, "{}", answer.body);
    answer
}

async fn publish(hub: &TestHub, id: &str) {
    let event = json!({"specversion": "1.0", "id": id, "source": SOURCE, "type": TYPE,
                       "datacontenttype": "application/json", "data": {"n": id}});
    hub.publish_as(tokens::PUBLISHER, &event).await;
}

fn check_both_libraries(secret: &str, body: &[u8], headers: &Value) {
    for language in ["js", "python"] {
        assert!(
            verifies(language, secret, body, headers),
            "the {language} library verifies the delivery"
        );
        let mut tampered = body.to_vec();
        tampered.extend_from_slice(b" ");
        assert!(
            !verifies(language, secret, &tampered, headers),
            "the {language} library refuses a changed body"
        );
    }
}

#[tokio::test]
async fn deliveries_are_signed_and_verified_by_the_standard_webhooks_libraries() {
    let hub = TestHub::start().await;
    for mode in ["structured", "binary"] {
        let sink = Sink::start().await;
        let created = subscribe(&hub, &sink, mode).await;
        let secret = created.body["signingsecret"]
            .as_str()
            .expect("the secret, shown once")
            .to_owned();
        assert!(secret.starts_with("whsec_"), "{secret}");
        let id = created.body["id"].as_str().unwrap().to_owned();
        let read = hub
            .call(
                Method::GET,
                &format!("/v1/subscriptions/{id}"),
                tokens::KVK,
                None,
            )
            .await;
        assert!(
            !read.body.to_string().contains(&secret) && read.body.get("signingsecret").is_none(),
            "never shown again: {}",
            read.body
        );

        publish(&hub, &format!("{mode}-1")).await;
        let delivery = sink.wait_for(1, Duration::from_secs(10)).await.remove(0);
        let headers = signature_headers(&delivery);
        assert!(
            headers["webhook-id"].as_str().unwrap().starts_with("msg_"),
            "{headers}"
        );
        check_both_libraries(&secret, &delivery.body, &headers);
        // The event is delivered as it was: the signature is beside it, not in it.
        if mode == "structured" {
            assert!(delivery.json().get("webhook").is_none());
        }
    }

    // CBOR bodies are bytes, which the libraries read as text: the HMAC is checked here.
    let sink = Sink::start().await;
    let created = subscribe(&hub, &sink, "cbor").await;
    let secret = created.body["signingsecret"].as_str().unwrap().to_owned();
    publish(&hub, "cbor-1").await;
    let delivery = sink.wait_for(1, Duration::from_secs(10)).await.remove(0);
    assert_eq!(
        delivery.header("content-type"),
        Some("application/cloudevents+cbor")
    );
    let headers = signature_headers(&delivery);
    let mut content = format!(
        "{}.{}.",
        headers["webhook-id"].as_str().unwrap(),
        headers["webhook-timestamp"].as_str().unwrap()
    )
    .into_bytes();
    content.extend_from_slice(&delivery.body);
    use base64::Engine;
    let engine = &base64::engine::general_purpose::STANDARD;
    let key = engine
        .decode(secret.strip_prefix("whsec_").unwrap())
        .unwrap();
    let expected = engine.encode(ring::hmac::sign(
        &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key),
        &content,
    ));
    assert_eq!(
        headers["webhook-signature"].as_str().unwrap(),
        format!("v1,{expected}")
    );
}

#[tokio::test]
async fn a_rotated_secret_signs_beside_the_old_one_during_the_overlap() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    let created = subscribe(&hub, &sink, "structured").await;
    let old = created.body["signingsecret"].as_str().unwrap().to_owned();
    let id = created.body["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/subscriptions/{id}/signing-secret");

    // Only the owner (or an admin) rotates it.
    hub.call(Method::POST, &path, tokens::GEMEENTE, None)
        .await
        .assert_problem(404);
    let rotated = hub.call(Method::POST, &path, tokens::KVK, None).await;
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    let new = rotated.body["signingsecret"].as_str().unwrap().to_owned();
    assert_ne!(new, old);
    assert!(
        rotated.body["previousValidUntil"].is_string(),
        "{}",
        rotated.body
    );
    // The subscription says until when the overlap runs (before a rotation: nothing).
    assert!(
        created.body.get("signingOverlapUntil").is_none(),
        "{}",
        created.body
    );
    let read = hub
        .call(
            Method::GET,
            &format!("/v1/subscriptions/{id}"),
            tokens::KVK,
            None,
        )
        .await;
    assert_eq!(
        read.body["signingOverlapUntil"], rotated.body["previousValidUntil"],
        "{}",
        read.body
    );

    publish(&hub, "rotated-1").await;
    let delivery = sink.wait_for(1, Duration::from_secs(10)).await.remove(0);
    let headers = signature_headers(&delivery);
    assert_eq!(
        headers["webhook-signature"]
            .as_str()
            .unwrap()
            .split(' ')
            .count(),
        2,
        "both signatures during the overlap: {headers}"
    );
    check_both_libraries(&old, &delivery.body, &headers);
    check_both_libraries(&new, &delivery.body, &headers);
    // A second rotation within the overlap would drop the first secret before the time the
    // first rotation gave: it is refused, saying until when.
    let again = hub
        .call(Method::POST, &path, tokens::KVK, None)
        .await
        .assert_problem(409);
    assert!(
        again.body["detail"]
            .as_str()
            .unwrap()
            .contains(rotated.body["previousValidUntil"].as_str().unwrap()),
        "{}",
        again.body
    );
    assert!(
        !verifies(
            "python",
            "whsec_d3Jvbmctc2VjcmV0LXdyb25nLXNlY3JldA==",
            &delivery.body,
            &headers
        ),
        "another secret does not verify"
    );
}

/// A new Ed25519 key as PKCS#8 PEM.
fn key_pem() -> String {
    use base64::Engine;
    let der =
        ring::signature::Ed25519KeyPair::generate_pkcs8(&ring::rand::SystemRandom::new()).unwrap();
    let body = base64::engine::general_purpose::STANDARD.encode(der.as_ref());
    format!("-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n")
}

/// How many of `keys` (a JWK set from the hub) verify a `v1a` signature of the delivery,
/// checked by Node's own crypto (the `standardwebhooks` libraries check `v1` only).
fn keys_verifying(keys: &Value, body: &[u8], headers: &Value) -> usize {
    let work = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let path = work.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    };
    let keys_file = write("keys.json", keys.to_string().as_bytes());
    let body_file = write("body", body);
    let headers_file = write("headers.json", headers.to_string().as_bytes());
    let script = "const crypto = require('crypto'); const fs = require('fs');\
        const [keys, body, headers] = process.argv.slice(1);\
        const h = JSON.parse(fs.readFileSync(headers, 'utf8'));\
        const content = Buffer.concat([Buffer.from(h['webhook-id'] + '.' + h['webhook-timestamp'] + '.'), fs.readFileSync(body)]);\
        const sigs = h['webhook-signature'].split(' ').filter(s => s.startsWith('v1a,')).map(s => Buffer.from(s.slice(4), 'base64'));\
        let n = 0;\
        for (const k of JSON.parse(fs.readFileSync(keys, 'utf8')).keys) {\
          const key = crypto.createPublicKey({key: {kty: k.kty, crv: k.crv, x: k.x}, format: 'jwk'});\
          if (sigs.some(s => crypto.verify(null, content, key, s))) n++;\
        }\
        console.log(n);";
    let output = Command::new("node")
        .args(["-e", script])
        .arg(&keys_file)
        .arg(&body_file)
        .arg(&headers_file)
        .output()
        .expect("node runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .unwrap()
}

/// With a key of its own the hub adds `v1a` (Ed25519) signatures that a receiver checks
/// with the public keys at `/v1/signing-keys`, without a shared secret; during a key
/// rotation both keys sign.
#[tokio::test]
async fn the_hubs_own_key_signs_v1a_verifiable_with_its_published_keys() {
    let mut options = knooppunt_tests::test_options();
    let until = std::time::SystemTime::now() + Duration::from_secs(3600);
    let (current, previous) = (key_pem(), key_pem());
    options.delivery.hub_keys =
        knooppunt_broker::HubKeys::from_pem(&current, Some((&previous, until))).unwrap();
    let hub = TestHub::builder().options(options).start().await;

    // The public keys need no token.
    let keys = Answer::from(
        hub.client
            .get(hub.url("/v1/signing-keys"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(keys.status, 200, "{}", keys.body);
    let listed = keys.body["keys"].as_array().unwrap();
    assert_eq!(listed.len(), 2, "{}", keys.body);
    assert!(listed[0].get("validUntil").is_none() && listed[1]["validUntil"].is_string());
    assert!(listed[0]["whpk"].as_str().unwrap().starts_with("whpk_"));

    let sink = Sink::start().await;
    let created = subscribe(&hub, &sink, "binary").await;
    let secret = created.body["signingsecret"].as_str().unwrap().to_owned();
    publish(&hub, "v1a-1").await;
    let delivery = sink.wait_for(1, Duration::from_secs(10)).await.remove(0);
    let headers = signature_headers(&delivery);
    let signatures = headers["webhook-signature"].as_str().unwrap();
    assert_eq!(
        signatures
            .split(' ')
            .filter(|s| s.starts_with("v1a,"))
            .count(),
        2,
        "{signatures}"
    );
    assert_eq!(keys_verifying(&keys.body, &delivery.body, &headers), 2);
    let mut changed = delivery.body.to_vec();
    changed.push(b' ');
    assert_eq!(keys_verifying(&keys.body, &changed, &headers), 0);
    // The v1 signature is still there for the libraries.
    check_both_libraries(&secret, &delivery.body, &headers);

    // A hub without a key of its own publishes none.
    let plain = TestHub::start().await;
    let none = Answer::from(
        plain
            .client
            .get(plain.url("/v1/signing-keys"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(none.body, json!({"keys": []}));

    // A previous key past its time signs nothing and is no longer published.
    let mut options = knooppunt_tests::test_options();
    let ended = std::time::SystemTime::now() - Duration::from_secs(60);
    options.delivery.hub_keys =
        knooppunt_broker::HubKeys::from_pem(&current, Some((&previous, ended))).unwrap();
    let later = TestHub::builder().options(options).start().await;
    let keys = later.get_json("/v1/signing-keys").await;
    assert_eq!(keys["keys"].as_array().unwrap().len(), 1, "{keys}");
    assert!(keys["keys"][0].get("validUntil").is_none(), "{keys}");
}

/// Every test delivery is a delivery of its own, with its own `webhook-id`: a receiver
/// that drops repeated ids (as Standard Webhooks recommends) takes each.
#[tokio::test]
async fn each_test_delivery_has_a_webhook_id_of_its_own() {
    let hub = TestHub::start().await;
    let sink = Sink::start().await;
    let created = subscribe(&hub, &sink, "structured").await;
    let id = created.body["id"].as_str().unwrap().to_owned();
    let test = format!("/v1/subscriptions/{id}/test");
    for _ in 0..2 {
        let sent = hub.call(Method::POST, &test, tokens::KVK, None).await;
        assert_eq!(sent.status, 200, "{}", sent.body);
    }
    let arrived = sink.wait_for(2, Duration::from_secs(10)).await;
    let ids: Vec<&str> = arrived
        .iter()
        .map(|d| d.header("webhook-id").unwrap())
        .collect();
    assert_ne!(ids[0], ids[1], "{ids:?}");
}
