//! A subscription's dead letters: listed, read, deleted and redelivered.

use super::*;

impl Subscriptions {
    /// Up to `limit` dead letters of subscription `id`, oldest first, after `after`.
    pub async fn dead_letters(
        &self,
        id: &str,
        after: Option<u64>,
        limit: usize,
    ) -> Result<Vec<DeadLetter>, StoreError> {
        self.store.dead_letters(id, after, limit).await
    }

    /// Dead letter `seq` of subscription `id`, with its event as accepted (when the store
    /// still has it).
    pub async fn dead_letter(
        &self,
        id: &str,
        seq: u64,
    ) -> Result<Option<(DeadLetter, Option<Arc<StoredEvent>>)>, StoreError> {
        let Some(dead) = self.store.dead_letter(id, seq).await? else {
            return Ok(None);
        };
        Ok(Some((dead, self.store.event(seq).await?)))
    }

    /// Deletes dead letter `seq` of subscription `id`; `false` when there is none.
    pub async fn delete_dead_letter(&self, id: &str, seq: u64) -> Result<bool, StoreError> {
        let _writer = self.writes.lock().await;
        if self.store.dead_letter(id, seq).await?.is_none() {
            return Ok(false);
        }
        let change = DeliveryChange::DeleteDeadLetter {
            subscription: id.to_owned(),
            seq,
        };
        self.store.record(vec![change]).await?;
        Ok(true)
    }

    /// Puts dead letter `seq` back into the queue of subscription `id`, unless the
    /// subscription is disabled (checked under the lock, so no 410 can come between).
    pub async fn redeliver(&self, id: &str, seq: u64) -> Result<Redelivered, StoreError> {
        let _writer = self.writes.lock().await;
        match self.get(id) {
            None => return Ok(Redelivered::NoSubscription),
            Some(s) if s.state() == SubscriptionState::Disabled => {
                return Ok(Redelivered::Disabled);
            }
            Some(_) => {}
        }
        if self.store.dead_letter(id, seq).await?.is_none() {
            return Ok(Redelivered::NoDeadLetter);
        }
        let change = DeliveryChange::Redeliver {
            subscription: id.to_owned(),
            seq,
            at: now_ms(),
        };
        self.store.record(vec![change]).await?;
        self.deliverer.wake([&id.to_owned()]);
        Ok(Redelivered::Queued)
    }
}
