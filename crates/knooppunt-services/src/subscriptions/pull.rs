//! Pull delivery: a consumer receives and settles the events of its pull subscription.

use super::*;

impl Subscriptions {
    /// Hands up to `max` events of pull subscription `id` to its consumer, waiting up to
    /// `wait` for some (see [`Deliverer::receive`]).
    pub async fn receive(
        &self,
        id: &str,
        max: usize,
        wait: std::time::Duration,
    ) -> Result<Vec<Received>, PullRefused> {
        // Read before the checks: a cut after it (a right taken away after they passed)
        // makes this receive hand out nothing.
        let generation = self.deliverer.cuts_of(id);
        let subscription = self.pullable(id)?;
        Ok(self
            .deliverer
            .receive(&subscription, max, wait, generation)
            .await?)
    }

    /// Waits until every other hub alive on the store applied the changes made so far, so
    /// that each cut what they take away ([`Cluster::hub_applied`]): at most until a hub that
    /// stays silent is forgotten, and a second more. Names the hubs still behind then (none
    /// on a store only one hub writes).
    pub async fn wait_for_other_hubs(&self) -> Result<Vec<String>, StoreError> {
        let version = self.store.subscriptions_version().await?;
        let silent = knooppunt_delivery::HUB_SILENT_FOR;
        let deadline = tokio::time::Instant::now() + silent + std::time::Duration::from_secs(1);
        loop {
            let behind = self
                .store
                .hubs_behind(self.deliverer.hub_id(), version, silent.as_millis() as u64)
                .await?;
            if behind.is_empty() || tokio::time::Instant::now() >= deadline {
                if !behind.is_empty() {
                    tracing::warn!(
                        hubs = ?behind,
                        "Hubs alive on the store did not apply a change that takes a right \
                         away; they may still deliver until they do."
                    );
                }
                return Ok(behind);
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    /// Cuts subscription `id`'s deliveries taken so far ([`Deliverer::cut`]); the moment.
    pub async fn cut(&self, id: &str) -> u64 {
        self.deliverer.cut(id).await
    }

    /// Settles events of pull subscription `id` held under `tokens` (see
    /// [`Deliverer::settle`]): per token, whether it was settled or why not.
    pub async fn settle(
        &self,
        id: &str,
        tokens: &[String],
        how: &Settlement,
    ) -> Result<Vec<Result<(), TokenProblem>>, PullRefused> {
        let subscription = self.pullable(id)?;
        Ok(self.deliverer.settle(&subscription, tokens, how).await?)
    }

    fn pullable(&self, id: &str) -> Result<Arc<Subscription>, PullRefused> {
        let subscription = self.get(id).ok_or(PullRefused::NoSubscription)?;
        if !subscription.is_pull() {
            return Err(PullRefused::Push);
        }
        if let Status::Disabled(why) = &subscription.status {
            return Err(PullRefused::Disabled(why.reason().to_owned()));
        }
        if let Some(why) = self.suspension(&subscription) {
            return Err(PullRefused::Suspended(why));
        }
        Ok(subscription)
    }
}
