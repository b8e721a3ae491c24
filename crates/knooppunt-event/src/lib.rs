//! The CloudEvents 1.0 core of Knooppunt: the event model, the JSON event format, the HTTP
//! protocol binding and validation against the core specification and the NL GOV profile.
//!
//! This crate does no I/O. Everything else in the hub stands on it:
//!
//! - [`Event`] holds the context attributes with their CloudEvents types and the `data` as it
//!   came. It can only be built through the decoders or [`EventBuilder`], which enforce every
//!   MUST of the core specification, so a value of this type is always a valid event.
//! - [`format::json`] reads and writes the JSON event format, single and batched.
//!   [`ReceivedEvent`] keeps the exact JSON text of a structured event next to the parsed
//!   attributes, so the hub can route on the attributes and forward the original bytes.
//! - [`binding::http`] maps events to and from HTTP messages in structured, binary and batched
//!   content mode, including the percent-encoding of `ce-` headers.
//! - [`validate`] holds the rules: [`Violation`] names the attribute, the rule and the spec
//!   section; [`validate::findings`] adds the SHOULD-level advice and the NL GOV profile checks
//!   at a configurable [`ProfileLevel`].

pub mod binding;
mod builder;
mod data;
mod event;
pub mod format;
pub mod notificatie;
pub mod timestamp;
pub mod trace_context;
pub mod validate;

pub use builder::EventBuilder;
pub use data::{
    Data, JsonText, JsonTextError, MAX_DATA_DEPTH, is_json_media_type, is_text_media_type,
    json_depth,
};
pub use event::{
    AttributeRef, AttributeValue, CORE_ATTRIBUTES, Event, ExtensionType, ReceivedEvent,
    SPEC_VERSION,
};
pub use validate::{ProfileLevel, Rule, Severity, Violation, Violations};
