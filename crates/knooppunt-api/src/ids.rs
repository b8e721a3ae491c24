//! The ids the API's paths carry, typed: a handler's signature says what each path
//! parameter names, so a principal's name cannot be passed where a subscription's id is
//! meant. One macro makes them all; each reads as the `str` it is.

/// Makes each id type: a `String` read from a path, compared, shown and borrowed as `str`.
/// The surfaces beside the API make theirs with it too (`knooppunt_api::ids!`; the crate
/// needs `serde`).
#[macro_export]
macro_rules! ids {
    ($($(#[$doc:meta])* $name:ident;)*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }

            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl std::ops::Deref for $name {
            type Target = str;

            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }
    )*};
}

ids! {
    /// A subscription's id, as the hub assigned it.
    SubscriptionId;
    /// A principal's name.
    PrincipalName;
    /// A catalog entry's (event type's) id.
    EntryId;
    /// A replay's id.
    ReplayId;
    /// A dead letter's id: its event's sequence number, as the path writes it.
    DeadLetterId;
    /// The secret of a subscription's validation callback.
    CallbackToken;
}
