//! TLS to the database, asked for in the URL as libpq reads it: `sslmode` and
//! `sslrootcert` (which tokio-postgres does not know, so they are taken out here).
//!
//! - no `sslmode`, or `disable`: plain TCP, as before (the hub warns when the database is not
//!   on this machine);
//! - `prefer`: TLS when the server offers it, else plain;
//! - `require`, `verify-ca`: TLS or no connection, the server's certificate checked against
//!   the roots (not its name): stricter than libpq's `require`, which checks nothing;
//! - `verify-full`: the same, and the certificate must name the host connected to.
//!
//! The roots are `sslrootcert` (a PEM file of CA certificates) when given, else the
//! system's (`sslrootcert=system` says so). rustls with ring, as every other connection of
//! the hub.

use std::sync::Arc;

use knooppunt_store::StoreError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use tokio_postgres::config::SslMode;

/// What the URL asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// No `sslmode` (plain, warned about off this machine) or `disable`.
    Plain {
        asked: bool,
    },
    Prefer,
    /// `require` or `verify-ca`: the chain is checked, not the name.
    VerifyCa,
    VerifyFull,
}

/// The database to connect to: tokio-postgres' settings and the TLS connector, if any.
#[derive(Clone)]
pub(crate) struct Database {
    pub(crate) config: tokio_postgres::Config,
    pub(crate) tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
    pub(crate) mode: Mode,
}

impl std::fmt::Debug for Database {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Database")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

fn invalid(why: impl std::fmt::Display) -> StoreError {
    StoreError::Backend(format!("store.url: {why}"))
}

/// `url` without its `sslmode` and `sslrootcert`, and their values (URL or key=value form).
fn take_tls_settings(url: &str) -> (String, Option<String>, Option<String>) {
    let (mut mode, mut root) = (None, None);
    let mut take = |pair: &str| -> bool {
        match pair.split_once('=') {
            Some(("sslmode", value)) => mode = Some(value.trim().to_owned()),
            Some(("sslrootcert", value)) => root = Some(value.trim().to_owned()),
            _ => return true,
        }
        false
    };
    let rest = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        match url.split_once('?') {
            Some((base, query)) => {
                let kept: Vec<&str> = query.split('&').filter(|pair| take(pair)).collect();
                if kept.is_empty() {
                    base.to_owned()
                } else {
                    format!("{base}?{}", kept.join("&"))
                }
            }
            None => url.to_owned(),
        }
    } else {
        url.split_whitespace()
            .filter(|pair| take(pair))
            .collect::<Vec<_>>()
            .join(" ")
    };
    (rest, mode, root)
}

impl Database {
    /// Reads `url`; `redacted` names it in errors without its password.
    pub(crate) fn parse(url: &str, redacted: &str) -> Result<Database, StoreError> {
        let (rest, mode, root) = take_tls_settings(url);
        let mut config: tokio_postgres::Config = rest
            .parse()
            .map_err(|error| invalid(format!("`{redacted}` is not a PostgreSQL URL: {error}")))?;
        let mode = match mode.as_deref() {
            None => Mode::Plain { asked: false },
            Some("disable") => Mode::Plain { asked: true },
            Some("prefer") => Mode::Prefer,
            Some("require" | "verify-ca") => Mode::VerifyCa,
            Some("verify-full") => Mode::VerifyFull,
            Some(other) => {
                return Err(invalid(format!(
                    "sslmode={other} is not one of disable, prefer, require, verify-ca, \
                     verify-full"
                )));
            }
        };
        if root.is_some() && matches!(mode, Mode::Plain { .. }) {
            return Err(invalid(
                "sslrootcert is given but no sslmode that uses TLS: add sslmode=verify-full",
            ));
        }
        let tls = match mode {
            Mode::Plain { .. } => {
                config.ssl_mode(SslMode::Disable);
                None
            }
            Mode::Prefer | Mode::VerifyCa | Mode::VerifyFull => {
                config.ssl_mode(if mode == Mode::Prefer {
                    SslMode::Prefer
                } else {
                    SslMode::Require
                });
                Some(connector(root.as_deref(), mode == Mode::VerifyFull)?)
            }
        };
        Ok(Database { config, tls, mode })
    }

    /// Whether the connection is plain although the database is not on this machine.
    pub(crate) fn plain_off_this_machine(&self) -> bool {
        use tokio_postgres::config::Host;
        self.mode == (Mode::Plain { asked: false })
            && self.config.get_hosts().iter().any(|host| match host {
                Host::Tcp(name) => !matches!(name.as_str(), "localhost" | "127.0.0.1" | "::1"),
                Host::Unix(_) => false,
            })
    }
}

/// The roots: the PEM file at `root` (or the system's for `None` and `system`).
fn roots(root: Option<&str>) -> Result<rustls::RootCertStore, StoreError> {
    let mut roots = rustls::RootCertStore::empty();
    match root {
        None | Some("system") => {
            let found = rustls_native_certs::load_native_certs();
            for certificate in found.certs {
                let _ = roots.add(certificate);
            }
            if roots.is_empty() {
                return Err(invalid(
                    "the system has no CA certificates to check the database's certificate \
                     with: give sslrootcert=<a PEM file of the CA>",
                ));
            }
        }
        Some(path) => {
            let pem = std::fs::read(path)
                .map_err(|error| invalid(format!("sslrootcert: cannot read {path}: {error}")))?;
            for certificate in CertificateDer::pem_slice_iter(&pem) {
                let certificate = certificate
                    .map_err(|error| invalid(format!("sslrootcert: {path} is not PEM: {error}")))?;
                roots.add(certificate).map_err(|error| {
                    invalid(format!(
                        "sslrootcert: a certificate in {path} is not usable: {error}"
                    ))
                })?;
            }
            if roots.is_empty() {
                return Err(invalid(format!("sslrootcert: {path} holds no certificate")));
            }
        }
    }
    Ok(roots)
}

fn connector(
    root: Option<&str>,
    check_name: bool,
) -> Result<tokio_postgres_rustls::MakeRustlsConnect, StoreError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let webpki = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots(root)?),
        Arc::clone(&provider),
    )
    .build()
    .map_err(|error| invalid(format!("cannot check the database's certificate: {error}")))?;
    let verifier: Arc<dyn ServerCertVerifier> = if check_name {
        webpki
    } else {
        Arc::new(ChainOnly(webpki))
    };
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| invalid(format!("cannot set up TLS: {error}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

/// `verify-ca`: the chain must lead to a root; the name is not checked.
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// Every cause of `error`, outermost first: tokio-postgres says "error performing TLS
/// handshake" and keeps why (the certificate's issuer, its name) in its source.
pub(crate) fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let said = cause.to_string();
        if !text.contains(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_settings_are_taken_out_of_both_forms() {
        let (rest, mode, root) = take_tls_settings(
            "postgres://u:p@db:5432/k?sslmode=verify-full&application_name=x&sslrootcert=/ca.pem",
        );
        assert_eq!(rest, "postgres://u:p@db:5432/k?application_name=x");
        assert_eq!(mode.as_deref(), Some("verify-full"));
        assert_eq!(root.as_deref(), Some("/ca.pem"));
        let (rest, mode, root) = take_tls_settings("host=db user=u sslmode=require dbname=k");
        assert_eq!(rest, "host=db user=u dbname=k");
        assert_eq!(mode.as_deref(), Some("require"));
        assert_eq!(root, None);
        let (rest, mode, _) = take_tls_settings("postgres://u@db/k?sslmode=disable");
        assert_eq!(rest, "postgres://u@db/k");
        assert_eq!(mode.as_deref(), Some("disable"));
    }

    #[test]
    fn a_mode_that_is_none_is_refused_naming_the_modes() {
        let error = Database::parse("postgres://u@db/k?sslmode=allow", "x").unwrap_err();
        assert!(error.to_string().contains("verify-full"), "{error}");
        let error = Database::parse("postgres://u@db/k?sslrootcert=/ca.pem", "x").unwrap_err();
        assert!(error.to_string().contains("sslmode=verify-full"), "{error}");
        let plain = Database::parse("postgres://u@db.example.nl/k", "x").unwrap();
        assert!(plain.plain_off_this_machine());
        let local = Database::parse("postgres://u@127.0.0.1/k", "x").unwrap();
        assert!(!local.plain_off_this_machine());
    }
}
