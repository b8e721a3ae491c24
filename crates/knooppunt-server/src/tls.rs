//! HTTPS for the API (rustls), optionally asking clients for a certificate. A client
//! certificate is checked against the trusted CAs (`client_ca`, such as the PKIoverheid
//! roots) after the handshake rather than in it, so that a client whose certificate is not
//! trusted gets a problem+json saying so instead of a bare TLS alert; the handshake still
//! proves that the client holds the certificate's key. A trusted certificate's subject
//! serialNumber is the organisation's OIN (PKIoverheid), which names the principal.
//!
//! Revoked client certificates: certificate revocation lists (PEM or DER files, such as
//! PKIoverheid's) are read at start-up and again when a file changes (looked at, at most
//! every [`CRL_LOOK_EVERY`], when a connection's certificate is checked): a certificate
//! revoked there is not trusted on any connection made after that.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use rustls::DistinguishedName;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, UnixTime};

use knooppunt_identity::ClientCertificate;

/// The API's TLS settings, read from PEM.
#[derive(Clone)]
pub struct TlsSettings {
    pub(crate) config: Arc<rustls::ServerConfig>,
    /// Checks client certificates after the handshake.
    pub(crate) verifier: Option<Arc<dyn ClientCertVerifier>>,
    /// With revocation lists: the verifier to check with, kept up to date with them.
    pub(crate) revocation: Option<Arc<Revocation>>,
    /// The client CAs (for revocation lists added later).
    roots: Option<Arc<rustls::RootCertStore>>,
}

/// How often the revocation lists' files are looked at, at most.
pub(crate) const CRL_LOOK_EVERY: Duration = Duration::from_secs(2);

/// A file's modification time and size: what says it changed.
type Stamp = (Option<SystemTime>, u64);

/// The client CAs, the revocation lists' files and the verifier made from both.
pub(crate) struct Revocation {
    roots: Arc<rustls::RootCertStore>,
    files: Vec<PathBuf>,
    /// The verifier, and the files' modification times and sizes it was made from.
    current: RwLock<(Arc<dyn ClientCertVerifier>, Vec<Stamp>)>,
    looked: Mutex<Instant>,
}

/// `path`'s [`Stamp`].
fn stamp(path: &std::path::Path) -> Stamp {
    std::fs::metadata(path).map_or((None, 0), |m| (m.modified().ok(), m.len()))
}

/// The revocation lists in `files`, each PEM (one or more lists) or DER.
fn read_crls(
    files: &[PathBuf],
) -> Result<Vec<rustls_pki_types::CertificateRevocationListDer<'static>>, String> {
    use rustls_pki_types::CertificateRevocationListDer;
    let mut crls = Vec::new();
    for path in files {
        let bytes = std::fs::read(path).map_err(|error| {
            format!(
                "cannot read the revocation list {}: {error}",
                path.display()
            )
        })?;
        if bytes.starts_with(b"-----BEGIN") || bytes.iter().take(64).all(|b| b.is_ascii()) {
            let found: Vec<_> = CertificateRevocationListDer::pem_slice_iter(&bytes)
                .collect::<Result<_, _>>()
                .map_err(|error| {
                    format!("the revocation list {} is not PEM: {error}", path.display())
                })?;
            if found.is_empty() {
                return Err(format!(
                    "{} holds no revocation list (X509 CRL, PEM or DER)",
                    path.display()
                ));
            }
            crls.extend(found);
        } else {
            crls.push(CertificateRevocationListDer::from(bytes));
        }
    }
    Ok(crls)
}

/// A verifier of client certificates against `roots` and the lists in `files`.
fn strict_verifier(
    roots: &Arc<rustls::RootCertStore>,
    files: &[PathBuf],
) -> Result<Arc<dyn ClientCertVerifier>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut builder = WebPkiClientVerifier::builder_with_provider(Arc::clone(roots), provider)
        .allow_unauthenticated();
    if !files.is_empty() {
        builder = builder
            .with_crls(read_crls(files)?)
            // A list that has passed its nextUpdate still counts: a stale list revokes what
            // it names rather than nothing.
            .allow_unknown_revocation_status();
    }
    builder
        .build()
        .map_err(|error| format!("cannot check client certificates: {error}"))
}

impl Revocation {
    /// The verifier to check a certificate with now: made again first when a list's file
    /// changed (a list that no longer reads keeps the previous one, said in the log).
    fn verifier(&self) -> Arc<dyn ClientCertVerifier> {
        let due = {
            let mut looked = self.looked.lock().expect("revocation lock");
            let due = looked.elapsed() >= CRL_LOOK_EVERY;
            if due {
                *looked = Instant::now();
            }
            due
        };
        if due {
            let stamps: Vec<_> = self.files.iter().map(|f| stamp(f)).collect();
            let changed = self.current.read().expect("revocation lock").1 != stamps;
            if changed {
                match strict_verifier(&self.roots, &self.files) {
                    Ok(verifier) => {
                        tracing::info!(files = ?self.files, "Read the client certificate revocation lists again.");
                        *self.current.write().expect("revocation lock") = (verifier, stamps);
                    }
                    Err(error) => {
                        tracing::error!(%error, "A client certificate revocation list changed but cannot be read; the previous lists still apply.");
                        self.current.write().expect("revocation lock").1 = stamps;
                    }
                }
            }
        }
        Arc::clone(&self.current.read().expect("revocation lock").0)
    }
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("client_certificates", &self.verifier.is_some())
            .field(
                "revocation_lists",
                &self.revocation.as_ref().map(|r| &r.files),
            )
            .finish_non_exhaustive()
    }
}

impl TlsSettings {
    /// The server's certificate chain and key; with `client_ca`, clients are asked for a
    /// certificate (they may also come without one and use a token).
    pub fn from_pem(
        certificate_chain: &[u8],
        key: &[u8],
        client_ca: Option<&[u8]>,
    ) -> Result<TlsSettings, String> {
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(certificate_chain)
            .collect::<Result<_, _>>()
            .map_err(|error| format!("the certificate chain is not PEM: {error}"))?;
        if chain.is_empty() {
            return Err("the certificate file holds no certificate".into());
        }
        let key = PrivateKeyDer::from_pem_slice(key)
            .map_err(|error| format!("the key file holds no usable private key: {error}"))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|error| format!("cannot set up TLS: {error}"))?;
        let (builder, verifier) = match client_ca {
            None => (builder.with_no_client_auth(), None),
            Some(pem) => {
                let mut roots = rustls::RootCertStore::empty();
                for certificate in CertificateDer::pem_slice_iter(pem) {
                    let certificate = certificate
                        .map_err(|error| format!("the client CA file is not PEM: {error}"))?;
                    roots.add(certificate).map_err(|error| {
                        format!("a client CA certificate is not usable: {error}")
                    })?;
                }
                if roots.is_empty() {
                    return Err("the client CA file holds no certificate".into());
                }
                let roots = Arc::new(roots);
                let strict = strict_verifier(&roots, &[])?;
                let lenient = Arc::new(CheckAfterwards(Arc::clone(&strict)));
                (
                    builder.with_client_cert_verifier(lenient),
                    Some((strict, roots)),
                )
            }
        };
        let mut config = builder
            .with_single_cert(chain, key)
            .map_err(|error| format!("the certificate and key do not fit: {error}"))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsSettings {
            config: Arc::new(config),
            roots: verifier.as_ref().map(|(_, roots)| Arc::clone(roots)),
            verifier: verifier.map(|(strict, _)| strict),
            revocation: None,
        })
    }

    /// These settings with client certificates also checked against the revocation lists in
    /// `files` (PEM or DER), read now and again whenever one changes.
    pub fn with_revocation_lists(mut self, files: Vec<PathBuf>) -> Result<TlsSettings, String> {
        let Some(roots) = self.roots.clone() else {
            return Err("revocation lists need client certificates: set the client CA".into());
        };
        let verifier = strict_verifier(&roots, &files)?;
        let stamps = files.iter().map(|f| stamp(f)).collect();
        self.revocation = Some(Arc::new(Revocation {
            roots,
            files,
            current: RwLock::new((verifier, stamps)),
            looked: Mutex::new(Instant::now()),
        }));
        Ok(self)
    }

    /// What the client certificate of a finished handshake says, if there was one.
    pub(crate) fn client(
        &self,
        peer: Option<&[CertificateDer<'static>]>,
    ) -> Option<ClientCertificate> {
        let verifier = match &self.revocation {
            Some(revocation) => revocation.verifier(),
            None => Arc::clone(self.verifier.as_ref()?),
        };
        let (end_entity, intermediates) = peer?.split_first()?;
        let Subject {
            name: subject,
            oin,
            not_after,
        } = subject(end_entity);
        let trusted = verifier
            .verify_client_cert(end_entity, intermediates, UnixTime::now())
            .map(|_| ())
            .map_err(|error| error.to_string());
        Some(ClientCertificate {
            oin,
            subject,
            trusted,
            not_after,
        })
    }
}

/// Asks for a certificate and checks the handshake's signature with it, but leaves the
/// certificate's trust to [`TlsSettings::client`].
#[derive(Debug)]
struct CheckAfterwards(Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for CheckAfterwards {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// One DER element: its tag, its contents and what follows it.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (length, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let bytes = (first & 0x7f) as usize;
        if bytes == 0 || bytes > 4 || rest.len() < bytes {
            return None;
        }
        let length = rest[..bytes]
            .iter()
            .fold(0usize, |n, &b| (n << 8) | b as usize);
        (length, &rest[bytes..])
    };
    if rest.len() < length {
        return None;
    }
    Some((tag, &rest[..length], &rest[length..]))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
/// 2.5.4.3 and 2.5.4.5 as DER object identifier contents.
const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
const SERIAL_NUMBER: &[u8] = &[0x55, 0x04, 0x05];

/// What the hub reads from a client certificate.
struct Subject {
    /// The subject's common name and OIN, for messages.
    name: String,
    /// The subject's serialNumber, when that is an OIN (20 digits).
    oin: Option<knooppunt_identity::Oin>,
    /// When the certificate expires (Unix seconds), checked on every request: a connection
    /// can outlive its certificate.
    not_after: Option<i64>,
}

/// Seconds since the Unix epoch of a DER UTCTime (`YYMMDDHHMMSSZ`) or GeneralizedTime
/// (`YYYYMMDDHHMMSSZ`).
fn der_time(tag: u8, text: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(text).ok()?.strip_suffix('Z')?;
    let (year, rest) = match (tag, text.len()) {
        (0x17, 12) => {
            let yy: i64 = text.get(..2)?.parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &text[2..])
        }
        (0x18, 14) => (text.get(..4)?.parse().ok()?, &text[4..]),
        _ => return None,
    };
    let field = |at: usize| -> Option<i64> { rest.get(at..at + 2)?.parse().ok() };
    let (month, day, hour, minute, second) =
        (field(0)?, field(2)?, field(4)?, field(6)?, field(8)?);
    let days = knooppunt_event::timestamp::days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3_600 + minute * 60 + second)
}

/// Reads a certificate's DER for its [`Subject`].
fn subject(certificate: &[u8]) -> Subject {
    let read = || -> Option<(Option<String>, Vec<String>, Option<i64>)> {
        let (SEQUENCE, certificate, _) = element(certificate)? else {
            return None;
        };
        let (SEQUENCE, mut tbs, _) = element(certificate)? else {
            return None;
        };
        // [0] version, if present; then serial number, signature, issuer, validity.
        if tbs.first() == Some(&0xa0) {
            tbs = element(tbs)?.2;
        }
        for _ in 0..3 {
            tbs = element(tbs)?.2;
        }
        let (SEQUENCE, validity, rest) = element(tbs)? else {
            return None;
        };
        tbs = rest;
        let not_after = element(validity)
            .and_then(|(_, _, rest)| element(rest))
            .and_then(|(tag, text, _)| der_time(tag, text));
        let (SEQUENCE, mut names, _) = element(tbs)? else {
            return None;
        };
        let (mut common_name, mut serials) = (None, Vec::new());
        while !names.is_empty() {
            let (SET, mut set, rest) = element(names)? else {
                return None;
            };
            names = rest;
            while !set.is_empty() {
                let (SEQUENCE, attribute, rest) = element(set)? else {
                    return None;
                };
                set = rest;
                let (0x06, oid, value) = element(attribute)? else {
                    return None;
                };
                let (_, text, _) = element(value)?;
                let text = String::from_utf8_lossy(text).into_owned();
                match oid {
                    COMMON_NAME => common_name = Some(text),
                    SERIAL_NUMBER => serials.push(text),
                    _ => {}
                }
            }
        }
        Some((common_name, serials, not_after))
    };
    let (common_name, serials, not_after) = read().unwrap_or((None, Vec::new(), None));
    // A subject with two serialNumbers names no one organisation: no OIN at all, rather
    // than whichever comes last.
    let oin = match serials.as_slice() {
        [serial] => knooppunt_identity::Oin::parse(serial),
        _ => None,
    };
    let name = match (&common_name, &oin) {
        (Some(cn), None) if serials.len() > 1 => {
            format!("CN={cn} (with {} serialNumbers, so no OIN)", serials.len())
        }
        (Some(cn), Some(oin)) => format!("CN={cn}, serialNumber={oin}"),
        (Some(cn), None) => format!("CN={cn}"),
        (None, Some(oin)) => format!("serialNumber={oin}"),
        (None, None) => "(no readable subject)".into(),
    };
    Subject {
        name,
        oin,
        not_after,
    }
}

#[cfg(test)]
mod tests {
    use super::{der_time, element};

    #[test]
    fn der_times_are_unix_seconds() {
        assert_eq!(der_time(0x17, b"700101000000Z"), Some(0));
        assert_eq!(der_time(0x17, b"261123201500Z"), Some(1_795_464_900));
        assert_eq!(der_time(0x18, b"20261123201500Z"), Some(1_795_464_900));
        assert_eq!(
            der_time(0x18, b"20000301000000Z"),
            Some(951_868_800),
            "after a leap day"
        );
        assert_eq!(
            der_time(0x17, b"491231235959Z"),
            Some(2_524_607_999),
            "2049"
        );
        assert_eq!(der_time(0x17, b"26112320150Z"), None);
        assert_eq!(der_time(0x04, b"261123201500Z"), None);
    }

    #[test]
    fn der_lengths_are_bounded() {
        assert_eq!(
            element(&[0x30, 0x01, 0xff]),
            Some((0x30, &[0xff][..], &[][..]))
        );
        assert_eq!(element(&[0x30, 0x02, 0xff]), None, "shorter than said");
        assert_eq!(
            element(&[0x30, 0x85, 1, 1, 1, 1, 1]),
            None,
            "too long a length"
        );
        assert_eq!(
            element(&[0x30, 0x81, 0x01, 0x07]),
            Some((0x30, &[7][..], &[][..]))
        );
        assert_eq!(element(&[0x30]), None);
    }
}
