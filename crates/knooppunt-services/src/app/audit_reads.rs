//! Reading the audit trail: pages of it, its head, and the check of its chain.

use super::*;

impl AppState {
    /// Up to `size` audit entries after `after` that `picks` chooses, reading at most
    /// `scan_limit` entries; and where to go on when there may be more.
    pub async fn audit_page(
        &self,
        after: Option<u64>,
        size: usize,
        scan_limit: usize,
        picks: impl Fn(&AuditEntry) -> bool,
    ) -> Result<(Vec<AuditEntry>, Option<u64>), StoreError> {
        const CHUNK: usize = 500;
        let (mut found, mut cursor, mut scanned) = (Vec::new(), after, 0);
        loop {
            let limit = CHUNK.min(scan_limit - scanned);
            let chunk = self
                .running
                .store
                .audit_entries(AuditRange {
                    after: cursor,
                    limit,
                })
                .await?;
            scanned += chunk.len();
            let ended = chunk.len() < limit;
            for entry in chunk {
                cursor = Some(entry.seq);
                if picks(&entry) {
                    found.push(entry);
                    if found.len() == size {
                        return Ok((found, cursor));
                    }
                }
            }
            if ended {
                return Ok((found, None));
            }
            if scanned >= scan_limit {
                return Ok((found, cursor));
            }
        }
    }

    /// [`AppState::audit_page`] from the newest back: the entries before `before` (all
    /// when `None`) that `picks` takes, newest first, and the cursor to go on from.
    pub async fn audit_page_newest(
        &self,
        before: Option<u64>,
        size: usize,
        scan_limit: usize,
        picks: impl Fn(&AuditEntry) -> bool,
    ) -> Result<(Vec<AuditEntry>, Option<u64>), StoreError> {
        const CHUNK: u64 = 500;
        let mut cursor = match before {
            Some(before) => before,
            None => match self.running.store.audit_last().await? {
                Some(last) => last.seq + 1,
                None => return Ok((Vec::new(), None)),
            },
        };
        let (mut found, mut scanned) = (Vec::new(), 0);
        while cursor > 0 && scanned < scan_limit {
            // The entries in (after, cursor): at most CHUNK of them, whatever gaps the
            // sequence has (`None`: from the first).
            let after = cursor.checked_sub(CHUNK + 1);
            let chunk = self
                .running
                .store
                .audit_entries(AuditRange {
                    after,
                    limit: CHUNK as usize,
                })
                .await?;
            let below = cursor;
            for entry in chunk.into_iter().filter(|e| e.seq < below).rev() {
                scanned += 1;
                cursor = entry.seq;
                if picks(&entry) {
                    found.push(entry);
                    if found.len() == size {
                        return Ok((found, (cursor > 0).then_some(cursor)));
                    }
                }
            }
            cursor = after.map_or(0, |after| cursor.min(after + 1));
        }
        Ok((found, (cursor > 0).then_some(cursor)))
    }

    /// Whether `principal` may verify the audit trail (and read its head): admins, who see
    /// every entry. Asked by every surface that verifies or offers to.
    pub fn may_verify_audit(&self, principal: &Principal) -> Result<(), String> {
        principal.may(identity::Role::Admin, "verify the audit trail")
    }

    /// Checks the whole chain, a page at a time; with `head` (a sequence number and hash kept outside the
    /// store), also that the trail still holds that entry, unchanged: entries removed from
    /// the chain's end leave it intact but show here.
    pub async fn verify_audit(
        &self,
        head: Option<(u64, String)>,
    ) -> Result<AuditVerification, StoreError> {
        let (mut checked, mut first, mut last) = (0u64, None, None::<(u64, String)>);
        let mut head_found = None;
        let mut start = knooppunt_store::StartAnchor::default();
        loop {
            let page = self
                .running
                .store
                .audit_entries(AuditRange {
                    after: last.as_ref().map(|(seq, _)| *seq),
                    limit: 1000,
                })
                .await?;
            if page.is_empty() {
                if let Err(broken) = start.check() {
                    return Ok(AuditVerification::broken(checked, first, &last, broken));
                }
                let mut report = AuditVerification {
                    intact: true,
                    entries: checked,
                    first,
                    last: last.as_ref().map(|(seq, _)| *seq),
                    broken_at: None,
                    truncated: None,
                    why: None,
                };
                if let Some((seq, hash)) = &head {
                    let why = match (&head_found, &last) {
                        (Some(found), _) if found == hash => None,
                        (Some(_), _) => Some(format!(
                            "entry {seq} is not the one the head names: it was replaced"
                        )),
                        (None, Some((newest, _))) if newest < seq => Some(format!(
                            "the trail ends at entry {newest}, but the head names entry {seq}: \
                             entries were removed from its end"
                        )),
                        (None, None) => Some(format!(
                            "the trail is empty, but the head names entry {seq}: entries were \
                             removed"
                        )),
                        // Swept by retention: older than the trail's first entry.
                        (None, Some(_)) if first.is_some_and(|f| f > *seq) => None,
                        (None, Some(_)) => {
                            Some(format!("the trail has no entry {seq}: it was removed"))
                        }
                    };
                    if let Some(why) = why {
                        tracing::error!(head = seq, %why, "The audit trail is not complete.");
                        report.intact = false;
                        report.truncated = Some(true);
                        report.why = Some(why);
                    }
                }
                return Ok(report);
            }
            first = first.or(page.first().map(|e| e.seq));
            if let Some((seq, _)) = &head
                && let Some(entry) = page.iter().find(|e| e.seq == *seq)
            {
                head_found = Some(entry.hash.clone());
            }
            let previous = last.as_ref().map(|(seq, hash)| (*seq, hash.as_str()));
            match knooppunt_store::verify_audit(previous, &page) {
                Ok(end) => {
                    page.iter().for_each(|entry| start.see(entry));
                    checked += page.len() as u64;
                    last = end;
                }
                Err(broken) => {
                    // The entries of this page before the broken one are intact too.
                    checked += page.iter().take_while(|e| e.seq < broken.seq).count() as u64;
                    return Ok(AuditVerification::broken(checked, first, &last, broken));
                }
            }
        }
    }

    /// The chain's head as this hub knows it, signed with the hub's Ed25519 key when it
    /// has one (over `knooppunt-audit-head:<sequence>:<hash>`).
    pub fn audit_head(&self) -> AuditHead {
        use base64::Engine as _;
        let Some((seq, hash)) = self.audit().head.get() else {
            return AuditHead {
                sequence: 0,
                hash: knooppunt_store::GENESIS.to_owned(),
                head: None,
                signature: None,
            };
        };
        let content = format!("knooppunt-audit-head:{seq}:{hash}");
        let signature =
            self.deliverer()
                .sign_with_hub_key(content.as_bytes())
                .map(|(kid, signature)| HeadSignature {
                    alg: "EdDSA".into(),
                    kid,
                    signed: content,
                    value: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(signature),
                });
        AuditHead {
            sequence: seq,
            head: Some(format!("{seq}:{hash}")),
            hash,
            signature,
        }
    }
}
/// What a check of the audit chain found.
#[derive(Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditVerification {
    pub intact: bool,
    /// Entries checked.
    pub entries: u64,
    /// The oldest entry kept (older ones were removed by retention).
    pub first: Option<u64>,
    /// The newest entry checked.
    pub last: Option<u64>,
    /// The first broken entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub broken_at: Option<u64>,
    /// The head given is missing or replaced: entries were removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl AuditVerification {
    /// The report of a chain broken at `broken` after `checked` entries (logged).
    fn broken(
        checked: u64,
        first: Option<u64>,
        last: &Option<(u64, String)>,
        broken: knooppunt_store::Broken,
    ) -> AuditVerification {
        tracing::error!(entry = broken.seq, why = %broken.why, "The audit trail is broken.");
        AuditVerification {
            intact: false,
            entries: checked,
            first,
            last: last.as_ref().map(|(seq, _)| *seq),
            broken_at: Some(broken.seq),
            truncated: None,
            why: Some(broken.why),
        }
    }
}

/// The audit chain's head.
#[derive(Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AuditHead {
    /// The newest entry's number (0: none yet).
    pub sequence: u64,
    /// Its hash.
    pub hash: String,
    /// `<sequence>:<hash>`, as `verify?head=` takes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// The hub's Ed25519 signature of `signed`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signature: Option<HeadSignature>,
}

/// A signature of the audit chain's head.
#[derive(Debug, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct HeadSignature {
    #[schemars(extend("enum" = ["EdDSA"]))]
    pub alg: std::borrow::Cow<'static, str>,
    pub kid: String,
    /// `knooppunt-audit-head:<sequence>:<hash>`.
    pub signed: String,
    /// The signature, base64url without padding.
    pub value: String,
}
