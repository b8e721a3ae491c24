//! The Notificaties API facade on the real binary, on the embedded store and on PostgreSQL:
//! ZGW clients from the configuration file; a notificatie round-trips byte for byte to an
//! abonnement and reaches CloudEvents subscriptions; a native CloudEvent reaches the
//! abonnement as a notificatie.

mod common;

use std::time::Duration;

use common::{Backend, config_with_admin};
use knooppunt_tests::sink::{Consent, Reply, Sink};
use knooppunt_tests::zgw::token;
use serde_json::{Value, json};

const ADMIN: &str = "zgw-admin";
const OPEN_ZAAK: &str = "open-zaak-geheim-16";
const ZAC: &str = "zac-geheim-minstens-16";

const NOTIFICATIE: &str = r#"{
  "kanaal": "zaken",
  "hoofdObject": "https://open-zaak.example.nl/zaken/api/v1/zaken/d4d4",
  "resource": "status",
  "resourceUrl": "https://open-zaak.example.nl/zaken/api/v1/statussen/a1a1",
  "actie": "create",
  "aanmaakdatum": "2026-11-24T08:15:00.123456Z",
  "kenmerken": {"bronorganisatie": "224557609"}
}"#;

async fn both_vocabularies(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_admin(dir.path(), ADMIN);
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[zgw]\n\
         [[zgw.clients]]\nclient_id = \"open-zaak\"\nsecret = \"{OPEN_ZAAK}\"\nscopes = [\"notificaties.publiceren\"]\n\
         [[zgw.clients]]\nclient_id = \"zac\"\nsecret = \"{ZAC}\"\nscopes = [\"notificaties.consumeren\"]\n"
    ));
    std::fs::write(&config, text).unwrap();
    let hub = backend.hub_with(&config, dir.path(), "a");
    let client = reqwest::Client::new();
    let zgw = |method: reqwest::Method, path: &str, token: &str| {
        client
            .request(method, hub.url(&format!("/api/v1{path}")))
            .bearer_auth(token)
    };
    let (open_zaak, zac) = (
        token("open-zaak", OPEN_ZAAK.as_bytes()),
        token("zac", ZAC.as_bytes()),
    );
    let kanaal = zgw(reqwest::Method::POST, "/kanaal", &open_zaak)
        .json(&json!({"naam": "zaken", "filters": ["bronorganisatie"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(kanaal.status(), 201, "{}", kanaal.text().await.unwrap());

    let callback = Sink::start().await;
    callback.answer_always(Reply::status(204));
    let abonnement = zgw(reqwest::Method::POST, "/abonnement", &zac)
        .json(&json!({"callbackUrl": callback.url, "auth": "Bearer zac",
                      "kanalen": [{"naam": "zaken", "filters": {"bronorganisatie": "224557609"}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        abonnement.status(),
        201,
        "{}",
        abonnement.text().await.unwrap()
    );

    let sink = Sink::start().await;
    sink.consent(Consent::Grant {
        origin: "*".into(),
        rate: None,
    });
    let subscribed = client
        .post(hub.url("/v1/subscriptions"))
        .bearer_auth(ADMIN)
        .json(&json!({"sink": sink.url, "protocol": "HTTP",
                      "filters": [{"prefix": {"type": "nl.vng.zgw.zaken."}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(subscribed.status(), 201);

    // Notificatie → hub → notificatie, byte for byte; and a CloudEvent with it as data.
    let published = zgw(reqwest::Method::POST, "/notificaties", &open_zaak)
        .header("content-type", "application/json")
        .body(NOTIFICATIE)
        .send()
        .await
        .unwrap();
    assert_eq!(published.status(), 201);
    let arrived = callback.wait_for(2, Duration::from_secs(15)).await;
    assert_eq!(
        std::str::from_utf8(&arrived[1].body).unwrap(),
        NOTIFICATIE.trim()
    );
    assert_eq!(arrived[1].header("authorization"), Some("Bearer zac"));
    let event = sink.wait_for(1, Duration::from_secs(15)).await;
    assert!(
        std::str::from_utf8(&event[0].body)
            .unwrap()
            .contains(NOTIFICATIE.trim()),
        "the CloudEvent carries the notificatie as data"
    );

    // CloudEvent → hub → notificatie.
    let native = json!({"specversion": "1.0", "id": "ce-1", "source": "urn:nld:oin:00000001823288444000:systeem:zaken",
                        "type": "nl.vng.zgw.zaken.zaak.update",
                        "subject": "https://zaken.example.nl/api/v1/zaken/9",
                        "time": "2026-11-24T09:00:00Z", "kenmerkbronorganisatie": "224557609"});
    let sent = client
        .post(hub.url("/v1/events"))
        .bearer_auth(ADMIN)
        .header("content-type", "application/cloudevents+json")
        .body(native.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 202);
    let arrived = callback.wait_for(3, Duration::from_secs(15)).await;
    let notificatie: Value = serde_json::from_slice(&arrived[2].body).unwrap();
    assert_eq!(notificatie["resource"], "zaak");
    assert_eq!(notificatie["actie"], "update");
    assert_eq!(
        notificatie["kenmerken"],
        json!({"bronorganisatie": "224557609"})
    );
    eprintln!("{}: both vocabularies round-trip", backend.name());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_vocabularies_on_the_embedded_store() {
    both_vocabularies(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_vocabularies_on_postgres() {
    both_vocabularies(Backend::postgres("zgw")).await;
}
