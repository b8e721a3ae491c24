//! Delivery changes as SQL: the one statement each change is applied with, and a call's
//! changes applied in one transaction.

use super::*;

type OwnedParam = transactions::OwnedParam;

/// The one statement that applies a delivery change, with its parameters; `None` for an
/// attempt without a lease (a delivery that was never leased takes no result). An attempt
/// changes its delivery only while it holds the attempt's lease (the condition and the
/// change in one statement).
pub(crate) fn statement(change: &DeliveryChange) -> Option<(&'static str, Vec<OwnedParam>)> {
    Some(match change {
        DeliveryChange::Attempted(attempt) => {
            if attempt.lease == 0 {
                return None;
            }
            let keys: Vec<OwnedParam> = vec![
                Box::new(attempt.subscription.clone()),
                Box::new(attempt.seq as i64),
                Box::new(attempt.lease as i64),
            ];
            let mut details = keys;
            let at = attempt.at as i64;
            match &attempt.verdict {
                // Delivered: the delivery held under the lease goes; or, when it is no
                // longer pending at all (withdrawn, retired, or a dead letter by a later
                // lease while this attempt was under way), its dead letter goes, for the
                // sink took the event. A receipt is kept of either.
                Verdict::Delivered if !attempt.receipt => (
                    "WITH done AS (DELETE FROM deliveries \
                       WHERE subscription = $1 AND seq = $2 AND lease = $3 RETURNING seq), \
                     taken AS (DELETE FROM dead_letters \
                       WHERE subscription = $1 AND seq = $2 \
                       AND NOT EXISTS (SELECT 1 FROM done) \
                       AND NOT EXISTS (SELECT 1 FROM deliveries \
                         WHERE subscription = $1 AND seq = $2) \
                       RETURNING seq) \
                     SELECT seq FROM done UNION ALL SELECT seq FROM taken",
                    details,
                ),
                Verdict::Delivered => {
                    details.push(Box::new(at));
                    (
                        "WITH done AS (DELETE FROM deliveries \
                           WHERE subscription = $1 AND seq = $2 AND lease = $3 \
                           RETURNING subscription, seq), \
                         taken AS (DELETE FROM dead_letters \
                           WHERE subscription = $1 AND seq = $2 \
                           AND NOT EXISTS (SELECT 1 FROM done) \
                           AND NOT EXISTS (SELECT 1 FROM deliveries \
                             WHERE subscription = $1 AND seq = $2) \
                           RETURNING subscription, seq) \
                         INSERT INTO receipts (seq, subscription, delivered_at) \
                         SELECT seq, subscription, $4::int8 FROM done \
                         UNION ALL SELECT seq, subscription, $4::int8 FROM taken \
                         ON CONFLICT (seq, subscription) DO NOTHING",
                        details,
                    )
                }
                Verdict::Retry { next_attempt_at } => {
                    details.push(Box::new(at));
                    details.push(Box::new(attempt.status.map(i32::from)));
                    details.push(Box::new(attempt.error.clone()));
                    details.push(Box::new(*next_attempt_at as i64));
                    (
                        "UPDATE deliveries SET attempts = attempts + 1, \
                           first_attempt_at = COALESCE(first_attempt_at, $4), \
                           last_attempt_at = $4, last_status = $5, last_error = $6, \
                           leased_until = 0, lease = 0, next_attempt_at = $7 \
                         WHERE subscription = $1 AND seq = $2 AND lease = $3",
                        details,
                    )
                }
                Verdict::DeadLetter { reason } => {
                    details.push(Box::new(at));
                    details.push(Box::new(attempt.status.map(i32::from)));
                    details.push(Box::new(attempt.error.clone()));
                    details.push(Box::new(reason.clone()));
                    (
                        "WITH gone AS (DELETE FROM deliveries \
                           WHERE subscription = $1 AND seq = $2 AND lease = $3 RETURNING *) \
                         INSERT INTO dead_letters (subscription, seq, attempts, \
                           first_attempt_at, last_attempt_at, last_status, last_error, \
                           reason, dead_at) \
                         SELECT subscription, seq, attempts + 1, \
                           COALESCE(first_attempt_at, $4), $4, $5, $6, $7, $4 FROM gone \
                         ON CONFLICT (subscription, seq) DO NOTHING",
                        details,
                    )
                }
            }
        }
        DeliveryChange::Redeliver {
            subscription,
            seq,
            at,
        } => (
            "WITH back AS (DELETE FROM dead_letters \
               WHERE subscription = $1 AND seq = $2 RETURNING seq) \
             INSERT INTO deliveries (subscription, seq, next_attempt_at, bytes) \
             SELECT $1, back.seq, $3, \
               octet_length(e.json) + COALESCE(octet_length(e.extension_types), 0) \
             FROM back JOIN events e ON e.seq = back.seq \
             WHERE EXISTS (SELECT 1 FROM subscriptions WHERE id = $1) \
             ON CONFLICT (subscription, seq) DO NOTHING",
            vec![
                Box::new(subscription.clone()),
                Box::new(*seq as i64),
                Box::new(*at as i64),
            ],
        ),
        DeliveryChange::Requeue {
            subscription,
            seqs,
            at,
            replay,
        } => (
            "INSERT INTO deliveries (subscription, seq, next_attempt_at, replay, bytes) \
             SELECT $1, e.seq, $2, $3, \
               octet_length(e.json) + COALESCE(octet_length(e.extension_types), 0) \
             FROM events e \
             WHERE e.seq = ANY($4) AND EXISTS (SELECT 1 FROM subscriptions WHERE id = $1) \
             ON CONFLICT (subscription, seq) DO NOTHING",
            vec![
                Box::new(subscription.clone()),
                Box::new(*at as i64),
                Box::new(replay.clone()),
                Box::new(seqs.iter().map(|s| *s as i64).collect::<Vec<i64>>()),
            ],
        ),
        // Leases are rows already: they survive a crash as they are.
        DeliveryChange::Leased { .. } => return None,
        DeliveryChange::DeleteDeadLetter { subscription, seq } => (
            "DELETE FROM dead_letters WHERE subscription = $1 AND seq = $2",
            vec![Box::new(subscription.clone()), Box::new(*seq as i64)],
        ),
        DeliveryChange::Withdraw {
            subscription,
            seqs,
            at,
            reason,
        } => (
            "WITH gone AS (DELETE FROM deliveries \
               WHERE subscription = $1 AND seq = ANY($4) RETURNING *) \
             INSERT INTO dead_letters (subscription, seq, attempts, first_attempt_at, \
               last_attempt_at, last_status, last_error, reason, dead_at) \
             SELECT subscription, seq, attempts, first_attempt_at, last_attempt_at, \
               last_status, last_error, $3, $2 FROM gone \
             ON CONFLICT (subscription, seq) DO NOTHING",
            vec![
                Box::new(subscription.clone()),
                Box::new(*at as i64),
                Box::new(reason.clone()),
                Box::new(seqs.iter().map(|s| *s as i64).collect::<Vec<i64>>()),
            ],
        ),
        DeliveryChange::Retire {
            subscription,
            at,
            reason,
        } => (
            "WITH gone AS (DELETE FROM deliveries WHERE subscription = $1 RETURNING *) \
             INSERT INTO dead_letters (subscription, seq, attempts, first_attempt_at, \
               last_attempt_at, last_status, last_error, reason, dead_at) \
             SELECT subscription, seq, attempts, first_attempt_at, last_attempt_at, \
               last_status, last_error, $3, $2 FROM gone \
             ON CONFLICT (subscription, seq) DO NOTHING",
            vec![
                Box::new(subscription.clone()),
                Box::new(*at as i64),
                Box::new(reason.clone()),
            ],
        ),
    })
}

/// What an applied change that changed nothing means: for an attempt, its delivery is
/// either gone (the result is ignored; a delivered one took its dead letter, if there was
/// one) or held under another lease (refused as stale).
pub(crate) async fn classify(
    client: &deadpool_postgres::ClientWrapper,
    change: &DeliveryChange,
    changed: u64,
) -> Result<(), StoreError> {
    let DeliveryChange::Attempted(attempt) = change else {
        return Ok(());
    };
    if changed > 0 {
        return Ok(());
    }
    let held_by_another = run(
        client,
        "SELECT 1 FROM deliveries WHERE subscription = $1 AND seq = $2",
        &[&attempt.subscription, &(attempt.seq as i64)],
    )
    .await?
        > 0;
    if held_by_another {
        return Err(StoreError::StaleLease {
            subscription: attempt.subscription.clone(),
            seq: attempt.seq,
        });
    }
    Ok(()) // finished, retired or deleted meanwhile: nothing to record
}

/// Applies `changes` in order in a transaction it begins on `client` (with the key plans;
/// `durable`: whether its commit waits for the WAL flush), leaving it open for the caller
/// to commit or roll back: `BEGIN` and every statement go out in one round trip; only a
/// change that found nothing to change asks why (a stale lease fails the whole call).
pub(crate) async fn apply_all(
    client: &deadpool_postgres::ClientWrapper,
    changes: &[DeliveryChange],
    durable: bool,
) -> Result<(), StoreError> {
    let found: Vec<_> = changes.iter().map(statement).collect();
    let prepared = transactions::prepare_all(client, &found).await?;
    let executions = transactions::executions(client, &found, &prepared);
    let begin = transactions::begin(durable);
    let (begun, counts) = tokio::join!(
        client.batch_execute(&begin),
        transactions::join_all(executions)
    );
    begun.map_err(backend)?;
    let counts = counts
        .into_iter()
        .collect::<Result<Vec<u64>, _>>()
        .map_err(backend)?;
    for (change, count) in changes.iter().zip(counts) {
        classify(client, change, count).await?;
    }
    Ok(())
}
