//! The event type catalog, as stored: what publishers say their events are, and whether
//! the data owner must approve who receives them.

/// One catalog entry: events of a `source` prefix and a type (exact, or a prefix), owned by
/// the publisher principal that made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogEntry {
    /// Assigned by the hub; time-ordered.
    pub id: String,
    /// The principal that owns it (only it, or an admin, changes it).
    pub owner: String,
    /// The `source` prefix of the events it covers.
    pub source_prefix: String,
    /// The event type it covers: the type itself, or a prefix of types.
    pub event_type: String,
    pub type_match: TypeMatch,
    pub description: String,
    /// A link to the type's documentation.
    pub documentation: Option<String>,
    /// The `dataschema` of its events' data.
    pub dataschema: Option<String>,
    /// A JSON Schema (as JSON text) its events' data is checked against, per `schema_check`.
    pub schema: Option<String>,
    pub schema_check: SchemaCheck,
    /// Still accepted, but publishers and subscribers are told to move on.
    pub deprecated: bool,
    pub approval: ApprovalPolicy,
    /// The attributes subscribers may filter its events on (a ZGW kanaal's `filters`, its
    /// kenmerken); empty when it names none.
    pub kenmerken: Vec<String>,
    /// Milliseconds since the Unix epoch.
    pub created_at: u64,
    pub updated_at: u64,
}

/// How a catalog entry's type is matched.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum TypeMatch {
    #[default]
    Exact,
    Prefix,
}

impl TypeMatch {
    pub fn as_str(self) -> &'static str {
        match self {
            TypeMatch::Exact => "exact",
            TypeMatch::Prefix => "prefix",
        }
    }

    pub fn parse(name: &str) -> Option<TypeMatch> {
        match name {
            "exact" => Some(TypeMatch::Exact),
            "prefix" => Some(TypeMatch::Prefix),
            _ => None,
        }
    }
}

/// How strictly events' data is held to an entry's JSON Schema.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SchemaCheck {
    #[default]
    Off,
    /// Data that breaks the schema is accepted, with warnings.
    Warn,
    /// Data that breaks the schema is refused.
    Enforce,
}

impl SchemaCheck {
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaCheck::Off => "off",
            SchemaCheck::Warn => "warn",
            SchemaCheck::Enforce => "enforce",
        }
    }

    pub fn parse(name: &str) -> Option<SchemaCheck> {
        match name {
            "off" => Some(SchemaCheck::Off),
            "warn" => Some(SchemaCheck::Warn),
            "enforce" => Some(SchemaCheck::Enforce),
            _ => None,
        }
    }
}

/// Who may receive a catalog entry's events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ApprovalPolicy {
    /// Any subscriber whose filters match.
    #[default]
    Open,
    /// Only subscriptions the owner approved.
    ApprovalRequired,
}

impl ApprovalPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalPolicy::Open => "open",
            ApprovalPolicy::ApprovalRequired => "approval-required",
        }
    }

    pub fn parse(name: &str) -> Option<ApprovalPolicy> {
        match name {
            "open" => Some(ApprovalPolicy::Open),
            "approval-required" => Some(ApprovalPolicy::ApprovalRequired),
            _ => None,
        }
    }
}

impl CatalogEntry {
    /// Whether an event of this `source` and `event_type` is covered.
    pub fn covers(&self, source: &str, event_type: &str) -> bool {
        source.starts_with(&self.source_prefix)
            && match self.type_match {
                TypeMatch::Exact => event_type == self.event_type,
                TypeMatch::Prefix => event_type.starts_with(&self.event_type),
            }
    }
}

/// A subscription's grant for an approval-required catalog entry: whether the entry's
/// owner lets it receive the entry's events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The catalog entry's id.
    pub entry: String,
    /// The subscription's id.
    pub subscription: String,
    pub state: GrantState,
    /// Milliseconds since the Unix epoch.
    pub requested_at: u64,
    /// Who decided, when and why; `None` while it is requested.
    pub decision: Option<Decision>,
}

/// Where a grant stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GrantState {
    Requested,
    Granted,
    Refused,
    Revoked,
}

impl GrantState {
    pub fn as_str(self) -> &'static str {
        match self {
            GrantState::Requested => "requested",
            GrantState::Granted => "granted",
            GrantState::Refused => "refused",
            GrantState::Revoked => "revoked",
        }
    }

    pub fn parse(name: &str) -> Option<GrantState> {
        [
            GrantState::Requested,
            GrantState::Granted,
            GrantState::Refused,
            GrantState::Revoked,
        ]
        .into_iter()
        .find(|state| state.as_str() == name)
    }
}

/// An owner's decision on a grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The principal that decided.
    pub by: String,
    /// Milliseconds since the Unix epoch.
    pub at: u64,
    pub reason: Option<String>,
}
