//! The audit trail's head, anchored outside the store: entries removed from the end of
//! the chain (which leaves it intact) are found, on both backends.

mod common;

use common::{Backend, on_both_backends};

const TOKEN: &str = "audit-admin-token";

/// The last entry of the trail is removed while the hub is stopped, as someone with access
/// to the store could: the chain stays intact, but the hub refuses to start against its
/// checkpoint, and `audit verify --head` with the head it gave before finds the gap.
async fn removing_the_newest_entries_is_found(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let mut hub = backend.hub(dir.path(), "a", TOKEN);
    let client = reqwest::Client::new();
    for name in ["een", "twee"] {
        let created = client
            .post(hub.url("/v1/principals"))
            .bearer_auth(TOKEN)
            .json(&serde_json::json!({"name": name, "roles": ["subscriber"]}))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), 201);
    }
    let head = common::get_json(&client, &hub, TOKEN, "/v1/audit/head").await;
    let sequence = head["sequence"].as_u64().unwrap();
    assert!(sequence >= 2, "{head}");
    let said = format!("{sequence}:{}", head["hash"].as_str().unwrap());
    assert_eq!(head["head"], said.as_str());
    assert!(
        hub.log()
            .iter()
            .any(|line| line.contains("Audit trail head.")
                && line.contains(head["hash"].as_str().unwrap())),
        "every change logs the head"
    );
    let metrics = client
        .get(hub.url("/metrics"))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(&format!(
            "knooppunt_audit_head_sequence{{hash=\"{}\"}} {sequence}",
            head["hash"].as_str().unwrap()
        )),
        "{metrics}"
    );
    assert!(hub.stop().success());
    drop(hub);

    // Remove the newest entry, and the head the store keeps beside it.
    match &backend {
        Backend::Embedded => {
            let db = sled::open(dir.path().join("a")).unwrap();
            let tree = db.open_tree("audit").unwrap();
            let (key, _) = tree.last().unwrap().expect("entries");
            tree.remove(key).unwrap();
            db.flush().unwrap();
        }
        Backend::Postgres {
            _cluster: cluster, ..
        } => {
            cluster.psql(
                "audit",
                "DELETE FROM audit WHERE seq = (SELECT max(seq) FROM audit); \
                 UPDATE audit_head SET seq = (SELECT max(seq) FROM audit), \
                   hash = (SELECT entry::json->>'hash' FROM audit ORDER BY seq DESC LIMIT 1)",
            );
        }
    }

    // The hub compares the store with its checkpoint and refuses to start.
    let config = dir.path().join("knooppunt.toml");
    let refused = backend
        .serve_command(&config, dir.path(), "a")
        .output()
        .unwrap();
    let said_why = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "{said_why}");
    assert!(
        said_why.contains("entries were removed from its end") && said_why.contains("audit-head"),
        "{said_why}"
    );

    // Moved aside on purpose, it starts; the chain alone looks intact, the head says not.
    std::fs::rename(
        dir.path().join("a").join("audit-head"),
        dir.path().join("audit-head.kept"),
    )
    .unwrap();
    let hub = backend.hub_with(&config, dir.path(), "a");
    let verify = |head: Option<&str>| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_knooppunt"));
        command
            .args(["audit", "verify", "--url", &hub.url(""), "--token", TOKEN])
            .args(head.map(|h| vec!["--head", h]).unwrap_or_default());
        command.output().unwrap()
    };
    let plain = verify(None);
    assert!(
        plain.status.success(),
        "{}",
        String::from_utf8_lossy(&plain.stdout)
    );
    let anchored = verify(Some(&said));
    let text = String::from_utf8_lossy(&anchored.stdout);
    assert_eq!(anchored.status.code(), Some(3), "{text}");
    assert!(
        text.contains("NOT COMPLETE") && text.contains("removed"),
        "{text}"
    );
}

on_both_backends!(
    truncation_on_the_embedded_store,
    truncation_on_postgres,
    removing_the_newest_entries_is_found,
    "audit"
);
