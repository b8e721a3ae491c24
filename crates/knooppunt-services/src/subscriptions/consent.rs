//! A subscription's consent: the validation handshake, the callback and the agreement that
//! make it active, the signing secret's rotation, and the address check of its sink.

use super::*;

impl Subscriptions {
    /// Asks the sink of a pending `subscription` for consent (the validation handshake,
    /// with `callback` as the URL it may call later) and records its answer: granted makes
    /// it active; refused or failed leaves it pending, saying why. Called without the
    /// writers' lock, since the sink may call the callback while it answers; the answer is
    /// recorded only if the subscription still waits for this handshake. Returns the
    /// subscription as it is now.
    pub async fn handshake(
        &self,
        subscription: Subscription,
        callback: &str,
    ) -> Result<Subscription, StoreError> {
        let Some(token) = subscription.validation_token.clone() else {
            return Ok(subscription);
        };
        let answer = self.deliverer.handshake(&subscription, callback).await;
        let id = subscription.id.clone();
        let changed = self
            .update(&id, |current| {
                if current.validation_token.as_deref() != Some(token.as_str()) {
                    return false; // the sink changed meanwhile; its own handshake decides
                }
                match (&answer, &current.status) {
                    // The callback came first, or the subscription was disabled meanwhile.
                    (_, Status::Active(_) | Status::Disabled(_)) => return false,
                    (Handshake::Granted { allowed_rate }, Status::Pending { .. }) => {
                        current.status = Status::Active(Consent {
                            by: Some(Validation::Handshake),
                            allowed_rate: *allowed_rate,
                        });
                    }
                    (Handshake::Refused(why) | Handshake::Failed(why), Status::Pending { .. }) => {
                        // A broker has no callback: it consents by taking the connection.
                        let problem = if current.protocol() == knooppunt_store::Protocol::Http {
                            format!(
                                "the sink did not consent to deliveries ({why}); it may call \
                                 the callback URL sent in WebHook-Request-Callback, or an \
                                 administrator may record consent by agreement"
                            )
                        } else {
                            format!(
                                "the broker did not take the hub's connection ({why}); replace \
                                 the subscription once that is fixed, or an administrator may \
                                 record consent by agreement"
                            )
                        };
                        current.status = Status::Pending {
                            problem: Some(problem),
                        };
                    }
                }
                true
            })
            .await?;
        match &answer {
            Handshake::Granted { .. } => {
                tracing::info!(subscription = %id, "The sink granted the validation handshake.")
            }
            Handshake::Refused(why) | Handshake::Failed(why) => {
                tracing::info!(subscription = %id, reason = %why, "The sink did not grant the validation handshake; the subscription is pending.");
                if let Some(Status::Pending {
                    problem: Some(problem),
                }) = changed.as_ref().map(|current| &current.status)
                {
                    self.notices.pending(&id, problem);
                }
            }
        }
        Ok(changed.map_or(subscription, |current| Subscription::clone(&current)))
    }

    /// The sink consents through its callback URL, whose `token` is the credential:
    /// a pending subscription becomes active. `None` when no subscription has this token.
    pub async fn consent_by_callback(
        &self,
        id: &str,
        token: &str,
    ) -> Result<Option<Arc<Subscription>>, StoreError> {
        let matches = |subscription: &Subscription| {
            subscription
                .validation_token
                .as_deref()
                .is_some_and(|expected| constant_time_eq(expected.as_bytes(), token.as_bytes()))
        };
        if !self
            .get(id)
            .is_some_and(|subscription| matches(&subscription))
        {
            return Ok(None);
        }
        let updated = self
            .update(id, |current| {
                if !matches(current) || current.state() != SubscriptionState::Pending {
                    return false;
                }
                current.status = Status::Active(Consent {
                    by: Some(Validation::Callback),
                    allowed_rate: None,
                });
                true
            })
            .await?;
        if updated.is_some() {
            tracing::info!(subscription = %id, "The sink consented through the validation callback.");
        }
        Ok(updated)
    }

    /// An administrator records consent agreed outside the hub: the subscription becomes
    /// active, unless it is disabled (its sink answered 410, or its stored filters are
    /// unusable: it needs replacing first).
    pub async fn consent_by_agreement(&self, id: &str) -> Result<Agreed, StoreError> {
        let mut disabled = false;
        let updated = self
            .update(id, |current| {
                let allowed_rate = match &current.status {
                    Status::Disabled(_) => {
                        disabled = true;
                        return false;
                    }
                    Status::Active(consent) if consent.by == Some(Validation::Agreement) => {
                        return false;
                    }
                    Status::Active(consent) => consent.allowed_rate,
                    Status::Pending { .. } => None,
                };
                current.status = Status::Active(Consent {
                    by: Some(Validation::Agreement),
                    allowed_rate,
                });
                true
            })
            .await?;
        Ok(match updated {
            None => Agreed::NoSubscription,
            Some(_) if disabled => Agreed::Disabled,
            Some(subscription) => Agreed::Recorded(subscription),
        })
    }

    /// Gives subscription `id` a new signing secret; the one it had keeps signing too for
    /// `overlap` (so a sink can switch without losing a delivery). Returns the subscription
    /// and its new secret (to show once); `None` when there is none.
    pub async fn rotate_signing_secret(
        &self,
        id: &str,
        overlap: std::time::Duration,
    ) -> Result<Option<(Arc<Subscription>, String)>, Rotation> {
        let secret = new_signing_secret();
        let now = now_ms();
        let mut busy = None;
        let updated = self
            .update(id, |current| {
                // The last rotation promised that the secret before it signs until its
                // overlap ends: a rotation now would drop it at once.
                if let Some((_, until)) = current
                    .signing
                    .as_ref()
                    .and_then(|s| s.previous.as_ref())
                    .filter(|(_, until)| now < *until)
                {
                    busy = Some(*until);
                    return false;
                }
                current.signing = Some(SigningSecrets {
                    current: secret.clone(),
                    previous: current
                        .signing
                        .take()
                        .map(|old| (old.current, now + overlap.as_millis() as u64)),
                });
                true
            })
            .await?;
        if let Some(until) = busy {
            return Err(Rotation::InOverlap(until));
        }
        Ok(updated.map(|subscription| (subscription, secret)))
    }

    /// Refuses a sink, or a token endpoint of client credentials, whose address is in a
    /// range the hub does not deliver to (SSRF): the field (as the API names it) and why.
    /// Resolved outside the writers' lock. On a replacement, a sink sent back exactly as the
    /// stored one reads (`stored`, redacted) is the stored one, checked when it was
    /// registered (and on every connection): only the token endpoint is checked then.
    pub async fn check_addresses(
        &self,
        sink: &str,
        credential: Option<&SinkCredential>,
        stored: Option<&str>,
    ) -> Result<(), (&'static str, AddressRefused)> {
        if stored != Some(sink) {
            self.deliverer
                .check_sink_address(sink)
                .await
                .map_err(|why| ("sink", why))?;
        }
        if let Some(SinkCredential::ClientCredentials { token_url, .. }) = credential {
            self.deliverer
                .check_sink_address(token_url)
                .await
                .map_err(|why| ("sinkcredential.tokenurl", why))?;
        }
        Ok(())
    }
}
/// A fresh signing secret as Standard Webhooks writes it: `whsec_` and the base64 of 32
/// random bytes.
pub(super) fn new_signing_secret() -> String {
    use base64::Engine;
    let mut key = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key)
        .expect("the system's random generator works");
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

/// A fresh secret for a sink's validation callback URL.
pub(super) fn new_validation_token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Whether two secrets are equal, in time that does not depend on where they differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
