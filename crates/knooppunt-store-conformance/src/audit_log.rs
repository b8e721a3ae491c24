//! [`knooppunt_store::AuditLog`]: one durable hash chain.

use super::*;

/// [`knooppunt_store::AuditLog`]: one durable hash chain.
pub async fn audit_log(backend: &mut impl Backend) {
    the_audit_trail_is_one_durable_chain(backend).await;
}

fn audit_record(at: u64, name: &str) -> knooppunt_store::AuditRecord {
    knooppunt_store::AuditRecord {
        start_time: at,
        name: name.into(),
        status_code: "OK".into(),
        actor: Some("brp".into()),
        actor_oin: Some("00000001823288444000".into()),
        object: Some(format!("eventtype/{at}")),
        request_id: Some(format!("req-{at}")),
        trace_id: Some("4bf92f3577b34da6a3ce929d0e0e4736".into()),
        processing_activity_id: Some("catalog".into()),
        data_subject_id: None,
        details: serde_json::json!({"z": 1, "a": {"nested": [1, 2, "x"]}, "text": "é\u{0}"}),
        concerns: vec!["kvk".into()],
    }
}

/// Audit entries are chained in one sequence, durable, read in pages, verify, and the
/// retention sweep removes only the oldest run (never the newest entry), so that what is
/// left is still one chain.
async fn the_audit_trail_is_one_durable_chain(backend: &mut impl Backend) {
    use knooppunt_store::{AuditRange, GENESIS, verify_audit};
    let store = backend.open().await;
    let all = AuditRange {
        after: None,
        limit: 100,
    };
    assert!(store.audit_entries(all).await.unwrap().is_empty());
    assert_eq!(store.audit_last().await.unwrap(), None, "no head yet");
    let first = store
        .append_audit(vec![
            audit_record(100, "eventtype.create"),
            audit_record(200, "eventtype.replace"),
        ])
        .await
        .unwrap();
    assert_eq!(first.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(first[0].prev_hash, GENESIS);
    assert_eq!(first[1].prev_hash, first[0].hash);
    let store = backend.reopen(store).await;
    let more = store
        .append_audit(vec![
            audit_record(300, "approval.grant"),
            audit_record(400, "approval.revoke"),
            audit_record(500, "request.refused"),
        ])
        .await
        .unwrap();
    assert_eq!(more[0].seq, 3);
    assert_eq!(
        more[0].prev_hash, first[1].hash,
        "chained on after a reopen"
    );
    let store = backend.reopen(store).await;
    let entries = store.audit_entries(all).await.unwrap();
    assert_eq!(entries.len(), 5);
    assert_eq!(entries[..2], first[..], "every field as written");
    assert_eq!(
        store.audit_last().await.unwrap().as_ref(),
        entries.last(),
        "the head is the newest entry"
    );
    assert_eq!(verify_audit(None, &entries).unwrap().unwrap().0, 5);
    let page = store
        .audit_entries(AuditRange {
            after: Some(2),
            limit: 2,
        })
        .await
        .unwrap();
    assert_eq!(page.iter().map(|e| e.seq).collect::<Vec<_>>(), [3, 4]);

    assert_eq!(
        store.remove_audit_through(2).await.unwrap(),
        2,
        "entries 1 and 2"
    );
    let kept = store.audit_entries(all).await.unwrap();
    assert_eq!(kept.first().map(|e| e.seq), Some(3));
    assert_eq!(kept[0].prev_hash, entries[1].hash, "the chain goes on");
    assert!(verify_audit(None, &kept).is_ok());
    let store = backend.reopen(store).await;
    assert_eq!(
        store.audit_entries(all).await.unwrap(),
        kept,
        "removed for good, the rest kept"
    );
    assert_eq!(store.remove_audit_through(2).await.unwrap(), 0);
    assert_eq!(store.remove_audit_through(u64::MAX).await.unwrap(), 2);
    let kept = store.audit_entries(all).await.unwrap();
    assert_eq!(kept.len(), 1, "the newest entry stays");
    let next = store
        .append_audit(vec![audit_record(600, "eventtype.delete")])
        .await
        .unwrap();
    assert_eq!(next[0].seq, 6);
    assert_eq!(next[0].prev_hash, kept[0].hash);
    assert_eq!(store.audit_last().await.unwrap().as_ref(), next.first());
}
