//! Certificates made in the tests (rcgen): a CA, servers on 127.0.0.1, and clients with an
//! OIN in the subject's serialNumber as PKIoverheid certificates have it.

/// A CA of the test, and certificates it signs.
#[allow(missing_debug_implementations)]
pub struct TestCa {
    certificate: rcgen::Certificate,
    key: rcgen::KeyPair,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        TestCa {
            certificate: params.self_signed(&key).unwrap(),
            key,
        }
    }

    pub fn pem(&self) -> String {
        self.certificate.pem()
    }

    /// A certificate and its key as PEM: for a server on 127.0.0.1, or for a client with
    /// this OIN as the subject's serialNumber.
    pub fn issue(&self, name: &str, oin: Option<&str>, server: bool) -> (String, String) {
        self.issue_until(name, oin, server, None)
    }

    /// [`TestCa::issue`], valid until `not_after` if given.
    pub fn issue_until(
        &self,
        name: &str,
        oin: Option<&str>,
        server: bool,
        not_after: Option<time::OffsetDateTime>,
    ) -> (String, String) {
        self.issue_with(name, oin, server, not_after, None)
    }

    /// A client certificate with this OIN and serial number (for revocation lists).
    pub fn issue_numbered(&self, name: &str, oin: &str, serial: u64) -> (String, String) {
        self.issue_with(name, Some(oin), false, None, Some(serial))
    }

    /// A certificate revocation list of this CA (PEM) revoking these serial numbers.
    pub fn revocation_list(&self, revoked: &[u64], number: u64) -> String {
        let now = time::OffsetDateTime::now_utc();
        let params = rcgen::CertificateRevocationListParams {
            this_update: now - time::Duration::minutes(1),
            next_update: now + time::Duration::days(1),
            crl_number: rcgen::SerialNumber::from(number),
            issuing_distribution_point: None,
            revoked_certs: revoked
                .iter()
                .map(|serial| rcgen::RevokedCertParams {
                    serial_number: rcgen::SerialNumber::from(*serial),
                    revocation_time: now - time::Duration::minutes(1),
                    reason_code: Some(rcgen::RevocationReason::KeyCompromise),
                    invalidity_date: None,
                })
                .collect(),
            key_identifier_method: rcgen::KeyIdMethod::Sha256,
        };
        params
            .signed_by(&self.certificate, &self.key)
            .unwrap()
            .pem()
            .unwrap()
    }

    fn issue_with(
        &self,
        name: &str,
        oin: Option<&str>,
        server: bool,
        not_after: Option<time::OffsetDateTime>,
        serial: Option<u64>,
    ) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let names = if server {
            vec!["127.0.0.1".to_owned()]
        } else {
            Vec::new()
        };
        let mut params = rcgen::CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        if let Some(oin) = oin {
            params
                .distinguished_name
                .push(rcgen::DnType::CustomDnType(vec![2, 5, 4, 5]), oin);
        }
        if let Some(not_after) = not_after {
            params.not_after = not_after;
        }
        if let Some(serial) = serial {
            params.serial_number = Some(rcgen::SerialNumber::from(serial));
        }
        params.extended_key_usages = vec![if server {
            rcgen::ExtendedKeyUsagePurpose::ServerAuth
        } else {
            rcgen::ExtendedKeyUsagePurpose::ClientAuth
        }];
        let certificate = params
            .signed_by(&key, &self.certificate, &self.key)
            .unwrap();
        (certificate.pem(), key.serialize_pem())
    }

    /// A client certificate whose subject has two serialNumbers (rcgen keeps one value per
    /// attribute type, so `openssl` makes it), and its key, as PEM.
    pub fn issue_with_two_serial_numbers(
        &self,
        name: &str,
        first: &str,
        second: &str,
    ) -> (String, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = |file: &str| dir.path().join(file);
        std::fs::write(path("ca.pem"), self.certificate.pem()).unwrap();
        std::fs::write(path("ca.key"), self.key.serialize_pem()).unwrap();
        std::fs::write(path("ext.cnf"), "extendedKeyUsage = clientAuth\n").unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        std::fs::write(path("client.key"), key.serialize_pem()).unwrap();
        let run = |args: &[&str]| {
            let output = std::process::Command::new("openssl")
                .args(args)
                .current_dir(dir.path())
                .output()
                .expect("openssl runs");
            assert!(
                output.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        };
        let subject = format!("/CN={name}/serialNumber={first}/serialNumber={second}");
        run(&[
            "req",
            "-new",
            "-key",
            "client.key",
            "-subj",
            &subject,
            "-out",
            "client.csr",
        ]);
        run(&[
            "x509",
            "-req",
            "-in",
            "client.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
            "-out",
            "client.pem",
        ]);
        (
            std::fs::read_to_string(path("client.pem")).unwrap(),
            key.serialize_pem(),
        )
    }
}

/// A client of a hub over HTTPS, trusting `ca` only, presenting this client certificate
/// (PEM certificate and key) if any.
pub fn https_client(ca: &TestCa, identity: Option<&(String, String)>) -> reqwest::ClientBuilder {
    let mut builder = reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap());
    if let Some((certificate, key)) = identity {
        builder = builder.identity(
            reqwest::Identity::from_pem(format!("{certificate}{key}").as_bytes()).unwrap(),
        );
    }
    builder
}

/// HTTPS for a test hub: a server certificate for `knooppunt.test` issued by `ca`, whose
/// client certificates identify principals (by OIN).
pub fn hub_tls(ca: &TestCa) -> knooppunt_broker::TlsSettings {
    let (certificate, key) = ca.issue("knooppunt.test", None, true);
    knooppunt_broker::TlsSettings::from_pem(
        certificate.as_bytes(),
        key.as_bytes(),
        Some(ca.pem().as_bytes()),
    )
    .unwrap()
}
