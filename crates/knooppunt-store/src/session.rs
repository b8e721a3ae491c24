//! Console sessions: who signed in to the hub's web pages, until when. Kept in the store so
//! that every hub sharing it knows a session, and ending it ends it everywhere.

use serde::{Deserialize, Serialize};

/// One signed-in browser. Kept as JSON, the same on every backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    /// The hex SHA-256 of the secret in the browser's cookie (the secret itself is never
    /// stored).
    pub id: String,
    /// The principal signed in.
    pub principal: String,
    /// What it signed in with, and must still hold: `token:<hex SHA-256>`,
    /// `certificate:<OIN>`, or `none` (authentication switched off).
    pub credential: String,
    /// The token its forms carry (CSRF).
    pub csrf: String,
    pub created_at: u64,
    /// It ends then, whatever happens (milliseconds since the Unix epoch).
    pub expires_at: u64,
    /// When it was last used (kept to the minute): it ends once unused for the hub's idle
    /// time.
    pub last_seen_at: u64,
}
