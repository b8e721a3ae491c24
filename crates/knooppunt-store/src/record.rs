//! The records kept by key, one generic core for every kind: a backend writes, reads and
//! removes a [`RecordRef`] or a [`Kind`] and [`Key`], and [`crate::Records`]' typed
//! wrappers (`insert_subscription`, `principals`, …) are written once, here and there,
//! for every backend.

use crate::{CatalogEntry, Grant, Replay, Session, StoreError, StoredPrincipal, Subscription};

/// A record's key: an id or a name, or a grant's entry and subscription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Key<'a> {
    One(&'a str),
    Grant {
        entry: &'a str,
        subscription: &'a str,
    },
}

macro_rules! kinds {
    ($($kind:ident($type:ty) = $name:literal;)*) => {
        /// The kinds of record kept by key.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Kind {
            $($kind,)*
        }

        impl Kind {
            /// Every kind.
            pub const ALL: &'static [Kind] = &[$(Kind::$kind,)*];

            /// The kind in words, for messages ("a subscription").
            pub fn name(self) -> &'static str {
                match self {
                    $(Kind::$kind => $name,)*
                }
            }
        }

        /// A record of any kind, borrowed: what a backend writes.
        #[derive(Debug, Clone, Copy)]
        pub enum RecordRef<'a> {
            $($kind(&'a $type),)*
        }

        /// A record of any kind, owned: what a backend reads. Not boxed: each is unwrapped
        /// into its own type at once (a list of subscriptions is as large either way).
        #[allow(clippy::large_enum_variant)]
        #[derive(Debug, Clone, PartialEq)]
        pub enum AnyRecord {
            $($kind($type),)*
        }

        impl RecordRef<'_> {
            pub fn kind(&self) -> Kind {
                match self {
                    $(RecordRef::$kind(_) => Kind::$kind,)*
                }
            }
        }

        impl AnyRecord {
            pub fn kind(&self) -> Kind {
                match self {
                    $(AnyRecord::$kind(_) => Kind::$kind,)*
                }
            }

            /// The record, borrowed.
            pub fn as_record(&self) -> RecordRef<'_> {
                match self {
                    $(AnyRecord::$kind(record) => RecordRef::$kind(record),)*
                }
            }
        }

        $(
            impl From<$type> for AnyRecord {
                fn from(record: $type) -> AnyRecord {
                    AnyRecord::$kind(record)
                }
            }

            impl Record for $type {
                const KIND: Kind = Kind::$kind;

                fn as_record(&self) -> RecordRef<'_> {
                    RecordRef::$kind(self)
                }

                fn from_any(record: AnyRecord) -> Result<Self, StoreError> {
                    match record {
                        AnyRecord::$kind(record) => Ok(record),
                        #[allow(unreachable_patterns)]
                        other => Err(mixed_up(Kind::$kind, other.kind())),
                    }
                }
            }
        )*
    };
}

kinds! {
    Subscription(Subscription) = "a subscription";
    Principal(StoredPrincipal) = "a principal";
    CatalogEntry(CatalogEntry) = "a catalog entry";
    Grant(Grant) = "a grant";
    Replay(Replay) = "a replay";
    Session(Session) = "a console session";
}

/// One kind of record, as its typed wrappers use it.
pub trait Record: Sized + Send + 'static {
    const KIND: Kind;
    fn as_record(&self) -> RecordRef<'_>;
    /// This kind's record out of `record`; a backend that gave another kind is corrupt.
    fn from_any(record: AnyRecord) -> Result<Self, StoreError>;
}

fn mixed_up(asked: Kind, given: Kind) -> StoreError {
    StoreError::Corrupt(format!(
        "the store gave {} where {} was asked for",
        given.name(),
        asked.name()
    ))
}

impl<'a> RecordRef<'a> {
    /// The record's key.
    pub fn key(&self) -> Key<'a> {
        match *self {
            RecordRef::Subscription(s) => Key::One(&s.id),
            RecordRef::Principal(p) => Key::One(&p.name),
            RecordRef::CatalogEntry(e) => Key::One(&e.id),
            RecordRef::Grant(g) => Key::Grant {
                entry: &g.entry,
                subscription: &g.subscription,
            },
            RecordRef::Replay(r) => Key::One(&r.id),
            RecordRef::Session(s) => Key::One(&s.id),
        }
    }

    /// The error of an insert whose key is taken: a principal's name, another's id.
    pub fn taken(&self) -> StoreError {
        match self.key() {
            Key::One(name) if self.kind() == Kind::Principal => {
                StoreError::NameTaken(name.to_owned())
            }
            Key::One(id) => StoreError::Conflict(id.to_owned()),
            Key::Grant {
                entry,
                subscription,
            } => StoreError::Conflict(format!("{entry}/{subscription}")),
        }
    }
}
