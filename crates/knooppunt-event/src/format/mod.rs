//! Event formats: how an event is written as a sequence of bytes. CloudEvents requires the
//! JSON format of every implementation, and it is the one the NL GOV profile prescribes.

pub mod cbor;
pub mod json;
