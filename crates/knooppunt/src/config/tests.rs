use super::*;

#[test]
fn zgw_clients_are_read_and_checked() {
    let good = "[[zgw.clients]]\nclient_id = \"open-zaak\"\nsecret = \"0123456789abcdef\"\n\
                scopes = [\"notificaties.publiceren\"]\noin = \"00000001823288444000\"\n";
    let config: Config = toml::from_str(good).unwrap();
    let options = config.zgw.options().unwrap();
    assert!(options.enabled);
    assert_eq!(options.clients[0].client_id, "open-zaak");
    assert_eq!(
        options.clients[0].source(),
        "urn:nld:oin:00000001823288444000:systeem:open-zaak"
    );
    for (bad, says) in [
        (
            good.replace("0123456789abcdef", "short"),
            "zgw.clients[0].secret",
        ),
        (
            good.replace("notificaties.publiceren", "zaken.lezen"),
            "zgw.clients[0].scopes",
        ),
        (
            good.replace("00000001823288444000", "123"),
            "zgw.clients[0].oin",
        ),
    ] {
        let config: Config = toml::from_str(&bad).unwrap();
        let error = config.zgw.options().unwrap_err().to_string();
        assert!(error.contains(says), "{error}");
    }
    // Open Zaak's CloudEvents with a source of its own, and a type limit, from the file.
    let limited = format!(
        "{}publish_source_prefixes = [\"urn:nld:oin:00000001823288444000:systeem:openzaak\"]\n\
         subscribe_type_prefixes = [\"nl.vng.zgw.\"]\n",
        good.replace(
            "[\"notificaties.publiceren\"]",
            "[\"notificaties.publiceren\", \"notificaties.consumeren\"]"
        )
    );
    let config: Config = toml::from_str(&limited).unwrap();
    let acting = config.zgw.options().unwrap().clients[0].principal();
    assert_eq!(acting.name, "zgw:open-zaak");
    assert_eq!(
        acting.publish_source_prefixes,
        ["urn:nld:oin:00000001823288444000:systeem:openzaak"]
    );
    assert_eq!(acting.subscribe_type_prefixes, ["nl.vng.zgw."]);
    assert!(acting.has(Role::Publisher) && acting.has(Role::Subscriber));
    let scoped = limited.replace(", \"notificaties.consumeren\"", "");
    let config: Config = toml::from_str(&scoped).unwrap();
    let acting = config.zgw.options().unwrap().clients[0].principal();
    assert!(
        !acting.has(Role::Subscriber),
        "its scopes still decide its roles"
    );
    let outside = limited.replace(
        "urn:nld:oin:00000001823288444000:systeem:openzaak",
        "urn:nld:oin:00000009999999999000:systeem:openzaak",
    );
    let config: Config = toml::from_str(&outside).unwrap();
    let error = config.zgw.options().unwrap_err().to_string();
    assert!(
        error.contains("zgw.clients[0].publish_source_prefixes[0]") && error.contains("OIN space"),
        "{error}"
    );
}

/// The event's filter budget: 0 (none) or at least one subscription's, said so when not.
#[test]
fn the_events_filter_budget_is_read_and_checked() {
    let options = |text: &str| {
        Config::parse(&format!("[filters]\n{text}"))
            .and_then(|config| config.hub_options(knooppunt_broker::Authentication::Disabled))
    };
    let limits = |text: &str| options(text).unwrap().eval_limits;
    assert_eq!(limits("").max_units_per_event, 32_000_000);
    assert_eq!(
        limits("max_evaluation_cost_per_event = 50000000").max_units_per_event,
        50_000_000
    );
    assert_eq!(
        limits("max_evaluation_cost_per_event = 0").max_units_per_event,
        0
    );
    let error = options("max_evaluation_cost_per_event = 10")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("filters.max_evaluation_cost_per_event (10) must be 0"),
        "{error}"
    );
}

#[test]
fn the_shipped_file_holds_the_defaults() {
    let shipped = include_str!("../../../../config/knooppunt.toml");
    assert_eq!(Config::parse(shipped).unwrap(), Config::default());
}

/// The hub's signing key from a file as `openssl genpkey -algorithm ed25519` writes it,
/// a previous key with its end, and what is wrong with each kind of mistake.
#[test]
fn signing_keys_are_read_from_openssl_files() {
    let dir = tempfile::tempdir().unwrap();
    let key = |name: &str| {
        let path = dir.path().join(name);
        let status = std::process::Command::new("openssl")
            .args(["genpkey", "-algorithm", "ed25519", "-out"])
            .arg(&path)
            .status()
            .expect("openssl");
        assert!(status.success());
        path.display().to_string()
    };
    let (current, previous) = (key("current.pem"), key("previous.pem"));
    let options = |extra: &str| {
        Config::parse(&format!(
            "[delivery]\nsigning_key_file = \"{current}\"\n{extra}"
        ))
        .and_then(|config| config.hub_options(knooppunt_broker::Authentication::Disabled))
    };
    let one = options("").unwrap();
    assert_eq!(
        one.delivery
            .hub_keys
            .public(std::time::SystemTime::now())
            .len(),
        1
    );
    let two = options(&format!(
        "previous_signing_key_file = \"{previous}\"\n\
         previous_signing_key_until = \"2030-01-01T00:00:00Z\"\n"
    ))
    .unwrap();
    assert_eq!(
        two.delivery
            .hub_keys
            .public(std::time::SystemTime::now())
            .len(),
        2
    );
    let half = options(&format!("previous_signing_key_file = \"{previous}\"\n")).unwrap_err();
    assert!(half.to_string().contains("give both"), "{half}");
    std::fs::write(dir.path().join("bad.pem"), "not a key").unwrap();
    let bad = Config::parse(&format!(
        "[delivery]\nsigning_key_file = \"{}\"\n",
        dir.path().join("bad.pem").display()
    ))
    .and_then(|config| config.hub_options(knooppunt_broker::Authentication::Disabled))
    .unwrap_err();
    assert!(
        bad.to_string().contains("delivery.signing_key_file"),
        "{bad}"
    );
}

#[test]
fn principals() {
    let config = Config::parse(&format!(
        "[[principals]]\nname = \"gemeente\"\ntoken_sha256 = \"{}\"\nroles = [\"subscriber\"]\n\
         subscribe_type_prefixes = [\"nl.brp.\"]\n",
        "ab".repeat(32)
    ))
    .unwrap();
    let principals = config.principals();
    assert_eq!(principals[0].1.name, "gemeente");
    assert!(principals[0].1.has(Role::Subscriber));
    assert_eq!(principals[0].1.subscribe_type_prefixes, ["nl.brp."]);
}

#[test]
fn issuers_and_https_settings_are_checked() {
    let issuer = |url: &str, extra: &str| {
        Config::parse(&format!(
            "[[issuers]]\nissuer = \"https://auth.example.nl\"\njwks_url = \"{url}\"\n\
             audience = \"knooppunt\"\n{extra}"
        ))
    };
    let config = issuer(
        "https://auth.example.nl/jwks",
        "name_claim = \"client_id\"\noin_claim = \"oin\"\n[issuers.roles]\n\"events.publish\" = \"publisher\"\n",
    )
    .unwrap();
    let settings = &config.issuers().unwrap()[0];
    assert_eq!(settings.name_claim, "client_id");
    assert_eq!(settings.roles["events.publish"], Role::Publisher);
    assert_eq!(settings.roles.len(), 1);
    assert_eq!(settings.oin_claim.as_deref(), Some("oin"));
    assert!(
        issuer("http://127.0.0.1:9000/jwks", "").is_ok(),
        "http on this machine"
    );
    let remote = issuer("http://auth.example.nl/jwks", "").unwrap_err();
    assert!(
        format!("{remote:#}").contains("issuers[0].jwks_url"),
        "{remote:#}"
    );
    let role = issuer("https://a/j", "[issuers.roles]\n\"x\" = \"root\"\n").unwrap_err();
    assert!(format!("{role:#}").contains("root"), "{role:#}");

    let half = Config::parse("[server]\ntls_certificate = \"/nonexistent.pem\"\n").unwrap_err();
    assert!(format!("{half:#}").contains("set both"), "{half:#}");
    let client_only = Config::parse("[server]\ntls_client_ca = \"/ca.pem\"\n").unwrap_err();
    assert!(
        format!("{client_only:#}").contains("need HTTPS"),
        "{client_only:#}"
    );
    let missing = Config::parse(
        "[server]\ntls_certificate = \"/nonexistent.pem\"\ntls_key = \"/nonexistent.key\"\n",
    )
    .unwrap_err();
    assert!(
        format!("{missing:#}").contains("server.tls_certificate: cannot read"),
        "{missing:#}"
    );
    let oin = Config::parse(&format!(
        "[[principals]]\nname = \"a\"\ntoken_sha256 = \"{}\"\nroles = [\"publisher\"]\noin = \"12\"\n",
        "ab".repeat(32)
    ))
    .unwrap_err();
    assert!(format!("{oin:#}").contains("principals[0].oin"), "{oin:#}");
    let twice = Config::parse(&format!(
        "[[principals]]\nname = \"a\"\ntoken_sha256 = \"{}\"\nroles = [\"publisher\"]\n\
         oin = \"00000001003214345000\"\n[[principals]]\nname = \"b\"\n\
         token_sha256 = \"{}\"\nroles = [\"publisher\"]\noin = \"00000001003214345000\"\n",
        "ab".repeat(32),
        "cd".repeat(32)
    ))
    .unwrap_err();
    assert!(
        format!("{twice:#}").contains("principals[1].oin"),
        "{twice:#}"
    );
}

#[test]
fn delivery_settings_reach_the_hub_and_their_errors_name_the_key() {
    let config = Config::parse(
        "[server]\norigin = \"knooppunt.example.nl\"\npublic_url = \"https://hub.example.nl\"\n\
         [delivery]\nmax_in_flight = 4\nshutdown_grace = \"PT3S\"\ndefault_max_attempts = 5\n\
         default_ordering = \"unordered\"\n",
    )
    .unwrap();
    let options = config
        .hub_options(knooppunt_broker::Authentication::Disabled)
        .unwrap();
    assert_eq!(options.delivery.origin, "knooppunt.example.nl");
    assert_eq!(options.delivery.max_in_flight, 4);
    assert_eq!(
        options.public_url.as_deref(),
        Some("https://hub.example.nl")
    );
    assert_eq!(options.shutdown_grace, std::time::Duration::from_secs(3));
    let defaults = &options.subscription_defaults;
    assert_eq!(defaults.get("maxAttempts"), "5");
    assert_eq!(defaults.get("ordering"), "unordered");
    assert_eq!(
        defaults.get("ttl"),
        "PT24H",
        "unset keys keep the standard default"
    );
    let cases = [
        ("[server]\norigin = \"\"\n", "server.origin"),
        ("[server]\norigin = \"two words\"\n", "server.origin"),
        (
            "[server]\npublic_url = \"hub.example.nl\"\n",
            "server.public_url",
        ),
        ("[delivery]\nmax_in_flight = 0\n", "delivery.max_in_flight"),
        (
            "[delivery]\nshutdown_grace = \"10s\"\n",
            "delivery.shutdown_grace",
        ),
        (
            "[delivery]\ndefault_mode = \"fax\"\n",
            "delivery.default_mode",
        ),
        (
            "[delivery]\ndefault_max_attempts = 0\n",
            "delivery.default_max_attempts",
        ),
        (
            "[delivery]\ndefault_initial_backoff = \"PT2H\"\n",
            "delivery.default_max_backoff",
        ),
        (
            "[delivery]\ndefault_timeout = \"PT10M\"\n",
            "delivery.default_timeout",
        ),
    ];
    for (text, key) in cases {
        let error = Config::parse(text).unwrap_err();
        assert!(format!("{error:#}").contains(key), "{text}: {error:#}");
    }
}

#[test]
fn a_ca_file_for_sinks_is_read_and_checked() {
    let ca = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/tls/ca.pem"
    );
    let config = Config::parse(&format!("[delivery]\nca_file = \"{ca}\"\n")).unwrap();
    let options = config
        .hub_options(knooppunt_broker::Authentication::Disabled)
        .unwrap();
    assert_eq!(
        options.delivery.extra_root_certificates,
        std::fs::read(ca).unwrap()
    );
    let not_pem = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    for path in [not_pem, "/nonexistent/ca.pem"] {
        let error = Config::parse(&format!("[delivery]\nca_file = \"{path}\"\n")).unwrap_err();
        assert!(
            format!("{error:#}").contains("delivery.ca_file"),
            "{error:#}"
        );
    }
}

#[test]
fn environment_variables_override_the_file() {
    let file = "[server]\nlisten = \"127.0.0.1:8080\"\n[ingest]\nretention = \"PT1H\"\n";
    let env = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let config = Config::parse_with(
        file,
        env(&[
            ("KNOOPPUNT_SERVER_LISTEN", "0.0.0.0:9000"),
            ("KNOOPPUNT_SERVER_ORIGIN", "knooppunt.example.nl"),
            ("KNOOPPUNT_INGEST_MAX_EVENT_BYTES", "2097152"),
            ("KNOOPPUNT_VALIDATION_PROFILE", "enforce"),
            ("KNOOPPUNT_DELIVERY_MAX_IN_FLIGHT", "4"),
            ("KNOOPPUNT_LOG_FORMAT", "json"),
            ("PATH", "/usr/bin"),
            // The client commands' variables are not configuration keys.
            ("KNOOPPUNT_URL", "http://hub.example.nl"),
            ("KNOOPPUNT_TOKEN", "secret"),
            ("KNOOPPUNT_CA_FILE", "/nowhere.pem"),
        ]),
    )
    .unwrap();
    assert_eq!(config.server.listen.to_string(), "0.0.0.0:9000");
    assert_eq!(config.server.origin, "knooppunt.example.nl");
    assert_eq!(config.ingest.max_event_bytes, 2_097_152);
    assert_eq!(
        config.ingest.retention, "PT1H",
        "untouched keys keep the file's value"
    );
    assert_eq!(config.validation.profile, ProfileLevel::Enforce);
    assert_eq!(config.delivery.max_in_flight, 4);
    assert_eq!(config.log.format, LogFormat::Json);

    for (name, value, named) in [
        ("KNOOPPUNT_SERVER_LISTN", "x", "listn"),
        ("KNOOPPUNT_SERVER_LISTEN", "nowhere", "listen"),
        ("KNOOPPUNT_INGEST_MAX_EVENT_BYTE", "5", "max_event_byte"),
        (
            "KNOOPPUNT_INGEST_MAX_EVENT_BYTES",
            "many",
            "max_event_bytes",
        ),
    ] {
        let error = Config::parse_with(file, env(&[(name, value)])).unwrap_err();
        assert!(format!("{error:#}").contains(named), "{name}: {error:#}");
    }
}

/// The variables a Kubernetes Service named `knooppunt` (or `knooppunt-store`) puts in
/// every pod of its namespace are left alone, as is any variable of no section; every
/// section of the file can be set; a misspelt key of a section still stops start-up.
#[test]
fn kubernetes_service_variables_are_left_alone() {
    let env = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<Vec<_>>()
    };
    let injected = [
        ("KNOOPPUNT_SERVICE_HOST", "10.0.0.12"),
        ("KNOOPPUNT_SERVICE_PORT", "8080"),
        ("KNOOPPUNT_SERVICE_PORT_HTTP", "8080"),
        ("KNOOPPUNT_PORT", "tcp://10.0.0.12:8080"),
        ("KNOOPPUNT_PORT_8080_TCP", "tcp://10.0.0.12:8080"),
        ("KNOOPPUNT_PORT_8080_TCP_PROTO", "tcp"),
        ("KNOOPPUNT_PORT_8080_TCP_PORT", "8080"),
        ("KNOOPPUNT_PORT_8080_TCP_ADDR", "10.0.0.12"),
        ("KNOOPPUNT_STORE_SERVICE_HOST", "10.0.0.13"),
        ("KNOOPPUNT_STORE_PORT_5432_TCP", "tcp://10.0.0.13:5432"),
    ];
    let mut all = env(&injected);
    all.extend(env(&[("KNOOPPUNT_SERVR_LISTEN", "x")]));
    all.extend(env(&[
        ("KNOOPPUNT_AUDIT_RETENTION", "P30D"),
        ("KNOOPPUNT_CONSOLE_SESSION_IDLE", "PT10M"),
        ("KNOOPPUNT_SERVER_LISTEN", "0.0.0.0:9000"),
    ]));
    let config = Config::parse_with("", all).unwrap();
    assert_eq!(config.ignored_variables.len(), injected.len());
    assert_eq!(
        config.unknown_variables,
        ["KNOOPPUNT_SERVR_LISTEN"],
        "a misspelt section is told apart from a Service's links (and named at warn)"
    );
    assert!(
        config
            .ignored_variables
            .contains(&"KNOOPPUNT_SERVICE_HOST".to_owned())
    );
    assert_eq!(
        config,
        Config::parse_with(
            "[audit]\nretention = \"P30D\"\n[console]\nsession_idle = \"PT10M\"\n[server]\nlisten = \"0.0.0.0:9000\"\n",
            std::iter::empty()
        )
        .map(|mut c| {
            c.ignored_variables = config.ignored_variables.clone();
            c.unknown_variables = config.unknown_variables.clone();
            c
        })
        .unwrap(),
        "[audit] and [console] are set from the environment"
    );
    let error = Config::parse_with("", env(&[("KNOOPPUNT_ZGW_ENABLD", "true")])).unwrap_err();
    assert!(format!("{error:#}").contains("enabld"), "{error:#}");
}

/// The console's theme: its style sheet read from its file, its class checked; what
/// cannot be used stops start-up, naming the setting.
#[test]
fn the_console_theme_is_read_and_checked() {
    let dir = tempfile::tempdir().unwrap();
    let css = dir.path().join("theme.css");
    std::fs::write(
        &css,
        ".gemeente-theme { --utrecht-document-color: #123456; }",
    )
    .unwrap();
    let theme = |toml: String| Config::parse(&toml).and_then(|c| c.console.theme());
    let read = theme(format!(
        "[console]\ntheme_css = \"{}\"\ntheme_class = \"gemeente-theme\"\n",
        css.display()
    ))
    .unwrap();
    assert!(read.css.as_deref().unwrap().contains("#123456"));
    assert_eq!(read.class.as_deref(), Some("gemeente-theme"));
    assert_eq!(
        theme(String::new()).unwrap(),
        knooppunt_broker::ConsoleTheme::default()
    );
    for (toml, says) in [
        (
            format!(
                "[console]\ntheme_css = \"{}\"\ntheme_class = \"a b\"\n",
                css.display()
            ),
            "console.theme_class",
        ),
        (
            "[console]\ntheme_class = \"x\"\n".to_owned(),
            "without console.theme_css",
        ),
        (
            "[console]\ntheme_css = \"/nergens/theme.css\"\n".to_owned(),
            "/nergens/theme.css",
        ),
    ] {
        let error = format!("{:#}", theme(toml).unwrap_err());
        assert!(error.contains(says), "{error}");
    }
}

/// A log level that is not one (`warning`) would silence every log line: it stops
/// start-up; levels and filters of levels are taken.
#[test]
fn a_log_level_that_is_not_one_is_refused() {
    for level in ["warning", "info,knooppunt_delivery=verbose", "debugg"] {
        let error = Config::parse(&format!("[log]\nlevel = \"{level}\"\n")).unwrap_err();
        assert!(
            format!("{error:#}").contains("is not a level"),
            "{level}: {error:#}"
        );
    }
    for level in ["warn", "INFO", "info,knooppunt_delivery=debug", "off"] {
        Config::parse(&format!("[log]\nlevel = \"{level}\"\n")).unwrap();
    }
}

#[test]
fn errors_name_the_key() {
    let cases = [
        ("[validation]\nprofile = \"strict\"\n", "profile"),
        ("[validation]\nprofiel = \"warn\"\n", "profiel"),
        ("[server]\nlisten = \"nowhere\"\n", "listen"),
        (
            "[[principals]]\nname = \"a\"\ntoken_sha256 = \"abc\"\nroles = [\"admin\"]\n",
            "principals[0].token_sha256",
        ),
        (
            "[[principals]]\nname = \"a\"\ntoken_sha256 = \"abc\"\nroles = [\"root\"]\n",
            "root",
        ),
    ];
    for (text, key) in cases {
        let message = format!("{:#}", Config::parse(text).unwrap_err());
        assert!(message.contains(key), "{text}: {message}");
    }
    let twice = format!(
        "[[principals]]\nname = \"a\"\ntoken_sha256 = \"{h}\"\nroles = [\"admin\"]\n\
         [[principals]]\nname = \"a\"\ntoken_sha256 = \"{h}\"\nroles = [\"admin\"]\n",
        h = "ab".repeat(32)
    );
    assert!(format!("{:#}", Config::parse(&twice).unwrap_err()).contains("principals[1].name"));
}

/// One rule for every list setting the environment reaches: comma-separated items (a TOML
/// array works too), the same as in the file.
#[test]
fn every_list_setting_takes_commas() {
    let key = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    let other = "k0:HyAhIiMkJSYnKCkqKywtLi8wMTIzNDU2Nzg5Ojs8PT4=";
    let from_env = |name: &str, value: &str| {
        let env = [(name.to_owned(), value.to_owned())];
        Config::parse_with("", env).unwrap_or_else(|e| panic!("{name}: {e:#}"))
    };
    let config = from_env("KNOOPPUNT_SERVER_TLS_CLIENT_CRL", "/a.crl, /b.crl");
    assert_eq!(
        config.server.tls_client_crl,
        [PathBuf::from("/a.crl"), PathBuf::from("/b.crl")]
    );
    let config = from_env("KNOOPPUNT_SERVER_TLS_CLIENT_CRL", "/x.crl");
    assert_eq!(config.server.tls_client_crl, [PathBuf::from("/x.crl")]);
    let config = from_env("KNOOPPUNT_SERVER_TLS_CLIENT_CRL", r#"["/a.crl", "/b.crl"]"#);
    assert_eq!(config.server.tls_client_crl.len(), 2, "TOML's array too");
    let config = from_env("KNOOPPUNT_ZGW_SECRET_KEYS", &format!("{key},{other}"));
    assert_eq!(config.zgw.secret_keys, [key, other]);
    let config = from_env(
        "KNOOPPUNT_DELIVERY_ALLOW_SINK_NETWORKS",
        "10.0.0.0/8,192.168.0.0/16",
    );
    assert_eq!(
        config.delivery.allow_sink_networks,
        ["10.0.0.0/8", "192.168.0.0/16"]
    );
    // Every list of plain items in a section the environment reaches reads by that rule:
    // a new one without it fails here.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/config");
    for file in std::fs::read_dir(&dir).unwrap() {
        let path = file.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (n, line) in lines.iter().enumerate() {
            let plain = ["Vec<String>,", "Vec<PathBuf>,"]
                .iter()
                .any(|t| line.trim_start().starts_with("pub(crate) ") && line.ends_with(t));
            // A principal's and a ZGW client's lists are in `[[principals]]` and
            // `[[zgw.clients]]`, which are the file's alone.
            let at_line: usize = lines[..n].iter().map(|l| l.len() + 1).sum();
            let principals = text[..at_line]
                .rfind("pub(crate) struct ")
                .is_some_and(|at| {
                    ["PrincipalConfig", "ZgwClientConfig"]
                        .iter()
                        .any(|name| text[at..].starts_with(&format!("pub(crate) struct {name}")))
                });
            if plain
                && !principals
                && !line.contains("ignored_variables")
                && !line.contains("unknown_variables")
                && !line.contains("scopes")
            {
                assert!(
                    lines[..n]
                        .iter()
                        .rev()
                        .take(3)
                        .any(|l| l.contains("list_or_commas")),
                    "{}:{}: `{}` does not read commas",
                    path.display(),
                    n + 1,
                    line.trim()
                );
            }
        }
    }
}
