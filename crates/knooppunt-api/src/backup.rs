//! `GET /v1/backup` (admins): a copy of the embedded store taken while the hub serves, as
//! one stream that `knooppunt backup --to DIR` turns into a data directory. A PostgreSQL
//! store is refused (409): back the database up with `pg_dump`.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::HeaderValue;
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use knooppunt_services::app::AppState;
use knooppunt_services::use_case::{self, principals::BackupChunks};
use knooppunt_store::StoreError;
use serde_json::json;

use crate::auth::Caller;
use crate::document::{Operation, UNAUTHORIZED};
use crate::endpoints::Endpoints;
use crate::problem::ApiError;
use crate::request::RequestAudit;

/// The media type of a backup stream.
pub(crate) const BACKUP_MEDIA_TYPE: &str = "application/vnd.knooppunt.backup";

/// The chunks of a backup as a response body; an error ends it unfinished (the connection
/// is closed without the body's end, so that no client takes it for whole).
struct Chunks(BackupChunks);

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = StoreError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, StoreError>>> {
        self.0.poll_recv(cx).map(|chunk| {
            chunk.map(|chunk| chunk.map(|bytes| http_body::Frame::data(Bytes::from(bytes))))
        })
    }
}

/// `GET /v1/backup`.
pub(crate) async fn take(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    audit: RequestAudit,
) -> Result<Response, ApiError> {
    let chunks = use_case::principals::back_up(&state, &audit.of(&caller), &caller.0).await?;
    Ok((
        [
            (CONTENT_TYPE, HeaderValue::from_static(BACKUP_MEDIA_TYPE)),
            (CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        Body::new(Chunks(chunks)),
    )
        .into_response())
}

/// The backup's operation.
pub(crate) fn describe(doc: &mut Endpoints) {
    let take = Operation::new(
        "takeBackup",
        "status",
        "A copy of the embedded store taken while the hub serves (admins): the event log, \
         subscriptions, principals, catalog, grants, receipts and the audit trail with its \
         checkpoint. `knooppunt backup --to DIR` writes it as a data directory the hub opens \
         as it is (docs/operating.md, \"Back up and restore\"). What is acknowledged while it \
         is taken may or may not be in it. One at a time.",
    )
    .answer_as(
        "200",
        "The backup, streamed (format 1: see knooppunt-store-embedded's backup.rs). A stream \
         that breaks off is incomplete and restores nothing.",
        BACKUP_MEDIA_TYPE,
        json!({"type": "string", "format": "binary"}),
    )
    .refusals(&[
        UNAUTHORIZED,
        ("403", "Only an administrator takes backups."),
        (
            "409",
            "A backup is being taken already, or the store is PostgreSQL (back it up with \
             pg_dump).",
        ),
    ]);
    doc.get("/backup", self::take, &json!([]), take);
}
