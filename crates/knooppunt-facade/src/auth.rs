//! Who calls: a ZGW client with a valid token, and what it may do.

use super::*;

/// A ZGW client that sent a valid token.
pub(crate) struct ZgwCaller(pub(crate) ZgwClient);

impl ZgwCaller {
    /// The audit context of what this client does: it acts as its principal, and the trail
    /// names its entries as the facade does, with the client.
    pub(crate) fn context(
        &self,
        audit: &knooppunt_api::request::RequestAudit,
    ) -> knooppunt_services::audit::Context {
        audit.of_client(&self.0.principal(), &self.0.client_id)
    }

    pub(crate) fn require_any(&self, scopes: &[&str]) -> Result<(), ZgwError> {
        if scopes.iter().any(|s| self.0.has_scope(s)) {
            return Ok(());
        }
        Err(ZgwError::PermissionDenied(format!(
            "client `{}` heeft geen van de scopes {}",
            self.0.client_id,
            scopes.join(" of ")
        )))
    }
}

impl FromRequestParts<Arc<AppState>> for ZgwCaller {
    type Rejection = ZgwError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let token = parts
            .headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .ok_or_else(|| {
                ZgwError::NotAuthenticated(
                    "stuur een JWT van de client: Authorization: Bearer <JWT>".into(),
                )
            })?;
        let options = &state.zgw();
        let mut client = None;
        let claims = zgw::verify(
            token,
            |id| {
                let found = options
                    .clients
                    .iter()
                    .find(|c| c.client_id == id)
                    .cloned()
                    .or_else(|| stored_client(state, id))?;
                let secret = found.secret.clone();
                client = Some(found);
                Some(secret)
            },
            knooppunt_store::now_ms() / 1000,
            options.max_token_age,
            options.leeway,
        )
        .map_err(|why| ZgwError::NotAuthenticated(why.to_string()))?;
        let client = client.expect("verified with its secret");
        debug_assert_eq!(claims.client_id, client.client_id);
        if let Some(request) = parts.extensions.get::<RequestAudit>() {
            request.identify(&client.principal());
        }
        Ok(ZgwCaller(client))
    }
}

/// A ZGW client set over the principals API: its principal (not disabled) and its secret
/// opened with the hub's keys.
pub(crate) fn stored_client(state: &AppState, client_id: &str) -> Option<ZgwClient> {
    let principal = state.principals().by_zgw_client(client_id)?;
    if principal.disabled {
        return None;
    }
    let stored = principal.zgw.as_ref()?;
    let keys = state.zgw().secret_keys.as_ref()?;
    let secret = keys
        .open(client_id, &stored.sealed_secret)
        .inspect_err(|why| {
            tracing::error!(client = client_id, %why, "A ZGW client's secret cannot be opened.")
        })
        .ok()?;
    Some(ZgwClient {
        client_id: client_id.to_owned(),
        secret,
        scopes: stored.scopes.clone(),
        oin: principal
            .oin
            .as_deref()
            .and_then(knooppunt_identity::Oin::parse),
        principal: state
            .principals()
            .rights(&principal.name)
            .map(Arc::unwrap_or_clone),
    })
}

/// The principal a publishing client acts as, once its scope and the pipeline's rule
/// (the publisher role) allow it to publish, asked before its body is read.
pub(crate) fn publisher(
    state: &AppState,
    caller: &ZgwCaller,
) -> Result<knooppunt_identity::Principal, ZgwError> {
    caller.require_any(&[PUBLISH])?;
    let principal = caller.0.principal();
    state
        .publishing()
        .may_publish(&principal, 1)
        .map_err(ZgwError::PermissionDenied)?;
    Ok(principal)
}
