//! The Notificaties API facade on the real binary, on the embedded store and on PostgreSQL:
//! ZGW clients from the configuration file; a notificatie round-trips byte for byte to an
//! abonnement and reaches CloudEvents subscriptions; a native CloudEvent reaches the
//! abonnement as a notificatie.

mod common;

use std::time::Duration;

use common::{Backend, config_with_admin};
use knooppunt_tests::sink::{Reply, Sink};
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

/// A configuration with an admin and the ZGW clients Open Zaak (publishes) and a
/// zaakafhandelcomponent (consumes).
fn config_with_zgw_clients(dir: &std::path::Path) -> std::path::PathBuf {
    let config = config_with_admin(dir, ADMIN);
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!(
        "\n[zgw]\n\
         [[zgw.clients]]\nclient_id = \"open-zaak\"\nsecret = \"{OPEN_ZAAK}\"\nscopes = [\"notificaties.publiceren\"]\n\
         [[zgw.clients]]\nclient_id = \"zac\"\nsecret = \"{ZAC}\"\nscopes = [\"notificaties.consumeren\"]\n"
    ));
    std::fs::write(&config, text).unwrap();
    config
}

async fn both_vocabularies(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_zgw_clients(dir.path());
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

    let sink = Sink::start_for_any_hub().await;
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

/// Runs `tests/fixtures/open-zaak/run.py` (notifications-api-common's own code, in the
/// smallest Django project it needs, its database in `django_db`) against `root`: its JSON.
fn open_zaak(step: &str, root: &str, django_db: &knooppunt_test_postgres::Cluster) -> Value {
    let library = knooppunt_tests::tools::pip(
        "notifications-api-common",
        "notifications-api-common==0.13.0 psycopg2-binary==2.9.10",
    );
    let private = tempfile::tempdir().unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/open-zaak/run.py"
    );
    let output = std::process::Command::new("python3")
        .env("PYTHONPATH", library)
        .env("OZ_DB_PORT", django_db.port().to_string())
        .env("OZ_DB_NAME", "openzaak")
        .env("OZ_PRIVATE", private.path())
        .args([script, step, root, "open-zaak", OPEN_ZAAK])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "run.py {step}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&output.stdout));
    })
}

/// Open Zaak's seven kanalen registered through notifications-api-common's own
/// `register_kanalen`, twice as a re-deploy does (the second run replaces them), then a
/// notificatie on each sent by its own `send_notification`: each arrives at an abonnement
/// of the kanalen whose filters (snake_case and dotted, as Open Zaak's kenmerken are named)
/// let it through.
async fn open_zaaks_kanalen(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_zgw_clients(dir.path());
    let hub = backend.hub_with(&config, dir.path(), "a");
    let django_db = knooppunt_test_postgres::Cluster::start();
    django_db.create_database("openzaak");
    let root = hub.url("/api/v1/");

    let registered = {
        let (root, db) = (root.clone(), &django_db);
        tokio::task::block_in_place(|| open_zaak("register", &root, db))
    };
    let runs = registered["register"].as_array().unwrap();
    let kanalen = [
        "autorisaties",
        "besluiten",
        "besluittypen",
        "documenten",
        "informatieobjecttypen",
        "zaaktypen",
        "zaken",
    ];
    for (n, run) in runs.iter().enumerate() {
        assert_eq!(run["err"], "", "run {n}: {run}");
        let said = if n == 0 {
            "Registered kanaal"
        } else {
            "Updated already existing kanaal"
        };
        for kanaal in kanalen {
            assert!(
                run["out"]
                    .as_str()
                    .unwrap()
                    .contains(&format!("{said} '{kanaal}'")),
                "run {n}, {kanaal}: {run}"
            );
        }
    }
    let client = reqwest::Client::new();
    let zac = token("zac", ZAC.as_bytes());
    let listed: Value = client
        .get(hub.url("/api/v1/kanaal"))
        .bearer_auth(&zac)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["naam"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, kanalen);
    let zaken = listed
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["naam"] == "zaken")
        .unwrap();
    assert_eq!(
        zaken["filters"],
        json!([
            "bronorganisatie",
            "zaaktype",
            "zaaktype.catalogus",
            "vertrouwelijkheidaanduiding"
        ])
    );
    assert_eq!(
        zaken["documentatieLink"],
        "https://open-zaak.example.nl/ref/kanalen/#zaken"
    );

    let callback = Sink::start().await;
    callback.answer_always(Reply::status(204));
    let catalogus = "https://open-zaak.example.nl/catalogi/api/v1/catalogussen/1";
    let abonnement = client
        .post(hub.url("/api/v1/abonnement"))
        .bearer_auth(&zac)
        .json(&json!({"callbackUrl": callback.url, "auth": "Bearer zac",
                      "kanalen": [
                          {"naam": "zaken", "filters": {"zaaktype.catalogus": catalogus}},
                          {"naam": "besluiten", "filters": {"verantwoordelijke_organisatie": "224557609"}},
                          {"naam": "documenten", "filters": {"vertrouwelijkheidaanduiding": "openbaar"}},
                          {"naam": "autorisaties"},
                          {"naam": "zaaktypen", "filters": {"catalogus": catalogus}},
                          {"naam": "besluittypen"},
                          {"naam": "informatieobjecttypen", "filters": {"catalogus": "*"}}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        abonnement.status(),
        201,
        "{}",
        abonnement.text().await.unwrap()
    );

    let sent = {
        let (root, db) = (root.clone(), &django_db);
        tokio::task::block_in_place(|| open_zaak("send", &root, db))
    };
    let sent = sent["sent"].as_array().unwrap();
    assert_eq!(sent.len(), 7);
    assert_eq!(
        sent[1]["kenmerken"]["verantwoordelijkeOrganisatie"], "224557609",
        "camelCased as Open Zaak sends it: {}",
        sent[1]
    );
    // The test notificatie, then one per kanaal, each as it was sent.
    let arrived = callback.wait_for(8, Duration::from_secs(30)).await;
    let mut bodies: Vec<Value> = arrived[1..].iter().map(|r| r.json()).collect();
    bodies.sort_by_key(|b| b["kanaal"].as_str().unwrap().to_owned());
    let mut expected = sent.to_vec();
    expected.sort_by_key(|b| b["kanaal"].as_str().unwrap().to_owned());
    assert_eq!(bodies, expected);
    eprintln!(
        "{}: Open Zaak's kanalen through notifications-api-common",
        backend.name()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_zaaks_kanalen_through_notifications_api_common_on_the_embedded_store() {
    open_zaaks_kanalen(Backend::Embedded).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_zaaks_kanalen_through_notifications_api_common_on_postgres() {
    open_zaaks_kanalen(Backend::postgres("zgw-open-zaak")).await;
}
