//! The catalogue of rules, each with its code, its source in the specifications and whether
//! the specification says MUST or SHOULD.

use serde::{Serialize, Serializer};

/// MUST or SHOULD, as the specification words the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Requirement {
    Must,
    Should,
}

/// A rule an event can break. [`Rule::code`] is the stable identifier used in API responses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Rule {
    // The message itself.
    JsonSyntax,
    NotAnObject,
    NotAnArray,
    // Core specification.
    Required,
    NonEmpty,
    SpecVersion,
    DuplicateAttribute,
    AttributeName,
    AttributeNameLength,
    AttributeNameStart,
    JsonType,
    StringCharacters,
    Integer,
    Uri,
    UriReference,
    Timestamp,
    MediaType,
    // JSON event format.
    DataBase64,
    DataExclusive,
    DataNotString,
    DataNotJson,
    /// JSON data nested deeper than [`crate::data::MAX_DATA_DEPTH`] (the hub's own limit).
    DataDepth,
    /// JSON data no format but JSON could carry as it is (I-JSON).
    DataInteroperable,
    /// Data that breaks the JSON Schema of a catalog entry covering the event (the hub's).
    DataSchema,
    // CBOR event format.
    CborSyntax,
    CborType,
    CborData,
    // HTTP protocol binding.
    HeaderEncoding,
    DataContentTypeHeader,
    // NL GOV profile.
    NlGovType,
    NlGovTypeVersion,
    NlGovSource,
    /// An `urn:nld:oin:` source whose OIN is not one (20 digits).
    NlGovSourceOin,
    /// A `source` that is a data location (a URL to fetch), which the profile forbids.
    NlGovSourceLocation,
    NlGovSequence,
    NlGovSequenceType,
    NlGovSequenceInteger,
    /// An Integer `sequence` that does not count up by one from the source's previous one.
    NlGovSequenceContiguous,
    NlGovDataref,
    NlGovDataContentType,
}

impl Rule {
    /// The rule that JSON data refused as `error` breaks (syntax errors aside). Here, not in
    /// `data.rs`: the data reader knows nothing of validation.
    pub fn of_data(error: &crate::data::JsonTextError) -> Rule {
        match error {
            crate::data::JsonTextError::NotInteroperable(_) => Rule::DataInteroperable,
            _ => Rule::DataDepth,
        }
    }

    /// A short stable code, e.g. `core.required` or `nlgov.type.reverse-domain`.
    pub fn code(self) -> &'static str {
        match self {
            Rule::JsonSyntax => "json.syntax",
            Rule::CborSyntax => "cbor.syntax",
            Rule::CborType => "cbor.type-mapping",
            Rule::CborData => "cbor.data",
            Rule::NotAnObject => "json.not-an-object",
            Rule::NotAnArray => "json.batch-not-an-array",
            Rule::Required => "core.required",
            Rule::NonEmpty => "core.non-empty",
            Rule::SpecVersion => "core.specversion",
            Rule::DuplicateAttribute => "core.duplicate-attribute",
            Rule::AttributeName => "core.attribute-name",
            Rule::AttributeNameLength => "core.attribute-name-length",
            Rule::AttributeNameStart => "core.attribute-name-start",
            Rule::JsonType => "json.type-mapping",
            Rule::StringCharacters => "core.string-characters",
            Rule::Integer => "core.integer",
            Rule::Uri => "core.uri",
            Rule::UriReference => "core.uri-reference",
            Rule::Timestamp => "core.timestamp",
            Rule::MediaType => "core.media-type",
            Rule::DataBase64 => "json.data-base64",
            Rule::DataExclusive => "json.data-exclusive",
            Rule::DataNotString => "json.data-not-string",
            Rule::DataNotJson => "http.data-not-json",
            Rule::DataDepth => "hub.data-depth",
            Rule::DataInteroperable => "hub.data-interoperable",
            Rule::DataSchema => "hub.data-schema",
            Rule::HeaderEncoding => "http.header-encoding",
            Rule::DataContentTypeHeader => "http.ce-datacontenttype",
            Rule::NlGovType => "nlgov.type.reverse-domain",
            Rule::NlGovTypeVersion => "nlgov.type.version",
            Rule::NlGovSource => "nlgov.source.urn-nld",
            Rule::NlGovSourceOin => "nlgov.source.oin",
            Rule::NlGovSourceLocation => "nlgov.source.data-location",
            Rule::NlGovSequence => "nlgov.sequence",
            Rule::NlGovSequenceType => "nlgov.sequencetype",
            Rule::NlGovSequenceInteger => "nlgov.sequence.integer",
            Rule::NlGovSequenceContiguous => "nlgov.sequence.contiguous",
            Rule::NlGovDataref => "nlgov.dataref",
            Rule::NlGovDataContentType => "nlgov.datacontenttype.json",
        }
    }

    /// The specification document and section the rule comes from.
    pub fn spec(self) -> &'static str {
        match self {
            Rule::JsonSyntax | Rule::NotAnObject => "CloudEvents JSON format §3 Envelope",
            Rule::CborSyntax => "CloudEvents CBOR format §2 (RFC 8949)",
            Rule::CborType => "CloudEvents CBOR format §2.2 Type System Mapping",
            Rule::CborData => "CloudEvents CBOR format: data as a byte string or a native value",
            Rule::NotAnArray => "CloudEvents JSON format §4.1 Mapping CloudEvents (batch)",
            Rule::Required => "CloudEvents 1.0 spec.md §REQUIRED Attributes",
            Rule::NonEmpty => "CloudEvents 1.0 spec.md §Context Attributes (non-empty constraints)",
            Rule::SpecVersion => "CloudEvents 1.0 spec.md §specversion",
            Rule::DuplicateAttribute => "CloudEvents 1.0 spec.md §Context Attributes",
            Rule::AttributeName | Rule::AttributeNameLength | Rule::AttributeNameStart => {
                "CloudEvents 1.0 spec.md §Naming Conventions"
            }
            Rule::JsonType => "CloudEvents JSON format §2.2 Type System Mapping",
            Rule::StringCharacters
            | Rule::Integer
            | Rule::Uri
            | Rule::UriReference
            | Rule::Timestamp => "CloudEvents 1.0 spec.md §Type System",
            Rule::MediaType => "CloudEvents 1.0 spec.md §datacontenttype (RFC 2046)",
            Rule::DataBase64 => "CloudEvents JSON format §3.1.1 Payload Serialization",
            Rule::DataExclusive => "CloudEvents JSON format §3.1.1 Payload Serialization",
            Rule::DataNotString => "CloudEvents JSON format §3.1.2 Payload Deserialization",
            Rule::DataNotJson => "CloudEvents JSON format §3.1 Handling of data",
            Rule::DataDepth => {
                "Knooppunt: JSON data nests at most 64 arrays and objects deep (every format alike)"
            }
            Rule::DataInteroperable => {
                "I-JSON (RFC 7493 §2.1, §2.2): Unicode strings, numbers within an IEEE 754 double \
                 (integers within 64 bits), so that every delivery mode carries the data unchanged"
            }
            Rule::DataSchema => "Knooppunt: the data schema of the event type's catalog entry",
            Rule::HeaderEncoding => "CloudEvents HTTP binding §3.1.3.2 HTTP Header Values",
            Rule::DataContentTypeHeader => "CloudEvents HTTP binding §3.1.1 HTTP Content-Type",
            Rule::NlGovType | Rule::NlGovTypeVersion => {
                "NL GOV profile for CloudEvents §3.3.4 type"
            }
            Rule::NlGovSource | Rule::NlGovSourceOin | Rule::NlGovSourceLocation => {
                "NL GOV profile for CloudEvents §3.3.2 source"
            }
            Rule::NlGovSequence => "NL GOV profile for CloudEvents §3.5.1.1 sequence",
            Rule::NlGovSequenceType => "NL GOV profile for CloudEvents §3.5.1.2 sequencetype",
            Rule::NlGovSequenceInteger | Rule::NlGovSequenceContiguous => {
                "NL GOV profile for CloudEvents §3.5.1.2.2 Integer"
            }
            Rule::NlGovDataref => "NL GOV profile for CloudEvents §3.4.7 dataref",
            Rule::NlGovDataContentType => "NL GOV profile for CloudEvents §3.4.1.1 datacontenttype",
        }
    }

    /// Whether the specification says MUST or SHOULD.
    pub fn requirement(self) -> Requirement {
        match self {
            Rule::AttributeNameLength
            | Rule::AttributeNameStart
            | Rule::NlGovSource
            | Rule::NlGovSourceOin
            | Rule::NlGovDataContentType => Requirement::Should,
            _ => Requirement::Must,
        }
    }
}

impl Serialize for Rule {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.code())
    }
}
