//! Exporting traces with OpenTelemetry (docs/operating.md, "Traces"): off unless the
//! standard `OTEL_*` variables ask for it; then the hub's spans (a publish, its routing and
//! durable append, every delivery attempt: `knooppunt_delivery::trace`) go to an OTLP/HTTP
//! endpoint in protobuf, sampled as `OTEL_TRACES_SAMPLER` says.

use anyhow::{Context, bail};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;

/// Whether the environment asks for traces: `OTEL_TRACES_EXPORTER=otlp`, or an OTLP
/// endpoint (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), unless
/// `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`. What this hub cannot do stops it
/// with the variable named, rather than exporting nothing unseen.
pub(crate) fn wanted(env: impl Fn(&str) -> Option<String>) -> anyhow::Result<bool> {
    let set = |name: &str| env(name).filter(|value| !value.trim().is_empty());
    if set("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(false);
    }
    let exporter = set("OTEL_TRACES_EXPORTER").map(|v| v.trim().to_ascii_lowercase());
    match exporter.as_deref() {
        Some("none") => return Ok(false),
        Some("otlp") | None => {}
        Some(other) => bail!(
            "OTEL_TRACES_EXPORTER: `{other}` is not an exporter this hub has; use `otlp` \
             (or `none`)"
        ),
    }
    for name in [
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ] {
        if let Some(protocol) = set(name)
            && protocol.trim() != "http/protobuf"
        {
            bail!(
                "{name}: `{protocol}` is not a protocol this hub exports with; use \
                 `http/protobuf` (an OpenTelemetry Collector receives it on port 4318)"
            );
        }
    }
    let endpoint = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT"))
        .is_some();
    Ok(exporter.is_some() || endpoint)
}

/// The tracer provider that exports the hub's spans (batched, on a thread of its own),
/// named `knooppunt` unless `OTEL_SERVICE_NAME` names it.
pub(crate) fn provider(version: &str) -> anyhow::Result<SdkTracerProvider> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .context("OTEL_EXPORTER_OTLP_*: cannot make the trace exporter")?;
    let mut resource = Resource::builder().with_attribute(opentelemetry::KeyValue::new(
        "service.version",
        version.to_owned(),
    ));
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        resource = resource.with_service_name("knooppunt");
    }
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build())
}

/// The `tracing` layer that turns the hub's spans into exported ones (its events stay in
/// the log alone).
pub(crate) fn layer<S>(provider: &SdkTracerProvider) -> impl tracing_subscriber::Layer<S>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
{
    use tracing_subscriber::Layer as _;
    tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("knooppunt"))
        .with_filter(tracing_subscriber::filter::filter_fn(|metadata| {
            metadata.is_span() && metadata.target().starts_with("knooppunt")
        }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wanted_with(vars: &[(&str, &str)]) -> anyhow::Result<bool> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        wanted(|name| {
            vars.iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.clone())
        })
    }

    #[test]
    fn traces_are_off_unless_an_otlp_endpoint_or_exporter_is_named() {
        assert!(!wanted_with(&[]).unwrap());
        assert!(!wanted_with(&[("OTEL_SERVICE_NAME", "hub")]).unwrap());
        assert!(wanted_with(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318")]).unwrap());
        assert!(
            wanted_with(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c/v1/traces")]).unwrap()
        );
        assert!(wanted_with(&[("OTEL_TRACES_EXPORTER", "otlp")]).unwrap());
        let off = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_SDK_DISABLED", "true"),
        ];
        assert!(!wanted_with(&off).unwrap());
        let none = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ];
        assert!(!wanted_with(&none).unwrap());
    }

    #[test]
    fn what_the_hub_cannot_export_is_refused_by_name() {
        let error = wanted_with(&[("OTEL_TRACES_EXPORTER", "zipkin")]).unwrap_err();
        assert!(
            error.to_string().contains("OTEL_TRACES_EXPORTER: `zipkin`"),
            "{error}"
        );
        let grpc = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ];
        let error = wanted_with(&grpc).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("OTEL_EXPORTER_OTLP_PROTOCOL: `grpc`"),
            "{error}"
        );
    }
}
