//! Write-only secrets stay write-only on every path that reads subscriptions: a search sees
//! exactly what a read shows, so it cannot tell a sink's password or query values a
//! character at a time, on both backends.

mod common;

use common::{Backend, on_both_backends};
use serde_json::Value;

const TOKEN: &str = "secrets-admin-token";
const SINK: &str = "https://u:Pw7secret@127.0.0.1:9/path?apikey=K9x4TopSecret";

/// The ids of the subscriptions `GET /v1/subscriptions?search=` finds for `text`.
async fn found(client: &reqwest::Client, hub: &common::HubProcess, text: &str) -> Vec<String> {
    let answer = client
        .get(hub.url("/v1/subscriptions"))
        .query(&[("search", text)])
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let listed: Value = answer.json().await.unwrap();
    listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn search_sees_what_a_read_shows(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let hub = backend.hub(dir.path(), "a", TOKEN);
    let client = reqwest::Client::new();
    let body = serde_json::json!({"sink": SINK, "protocol": "HTTP", "types": ["nl.test.secret"]});
    let id = common::create_subscription(&client, &hub, TOKEN, &body).await;
    let read = common::get_json(&client, &hub, TOKEN, &format!("/v1/subscriptions/{id}")).await;
    let shown = read["sink"].as_str().unwrap();
    assert_eq!(
        shown, "https://u:********@127.0.0.1:9/path?apikey=********",
        "{read}"
    );

    // What a read shows is found, in any case.
    for visible in [
        "apikey",
        "APIKEY=",
        "u:********@",
        "/path?apikey=********",
        "nl.test",
    ] {
        assert_eq!(
            found(&client, &hub, visible).await,
            std::slice::from_ref(&id),
            "{visible}"
        );
    }
    // What it does not show is not, however much of it a search guesses right.
    for hidden in [
        "K9x4T",
        "apikey=K9x4T",
        "apikey=k9x4topsecret",
        "TopSecret",
        "Pw7",
        "u:Pw7secret@",
        "pw7SECRET",
    ] {
        assert_eq!(
            found(&client, &hub, hidden).await,
            Vec::<String>::new(),
            "{hidden}"
        );
    }
    assert!(hub.terminate().success());
}

on_both_backends!(
    search_hides_secrets_on_the_embedded_store,
    search_hides_secrets_on_postgres,
    search_sees_what_a_read_shows,
    "secrets"
);
