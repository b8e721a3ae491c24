//! The container: the health check the binary answers itself, and the image and compose
//! file as they run it. (No container runtime can run here: the tests run what the image
//! declares — its environment, command and health check — with the real binary.)

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn knooppunt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_knooppunt"))
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `knooppunt check --health URL`: exit 0 when /healthz answers 200; exit 1 saying why
/// when nothing answers or the answer is not 200.
#[test]
fn the_binary_answers_its_own_health_check() {
    let data = tempfile::tempdir().unwrap();
    let hub = common::HubProcess::start(&repository().join("config/knooppunt.toml"), data.path());

    let healthy = knooppunt(&["check", "--health", &hub.url("")]);
    assert!(healthy.status.success(), "{healthy:?}");
    assert_eq!(
        text(&healthy.stdout),
        format!("healthy: {} answered 200 OK\n", hub.url("/healthz"))
    );

    // A path of the URL's own is asked instead: one that answers 401 is unhealthy.
    let refused = knooppunt(&["check", "--health", &hub.url("/v1/subscriptions")]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    assert!(
        text(&refused.stderr).contains("/v1/subscriptions answered 401 Unauthorized"),
        "{refused:?}"
    );

    // Nothing listens there once the hub has stopped.
    let url = hub.url("");
    assert!(hub.terminate().success());
    let down = knooppunt(&["check", "--health", &url]);
    assert_eq!(down.status.code(), Some(1), "{down:?}");
    let said = text(&down.stderr);
    assert!(
        said.contains("unhealthy") && said.contains("did not answer") && said.contains("refused"),
        "{said}"
    );

    let nonsense = knooppunt(&["check", "--health", "hub:8080"]);
    assert_eq!(nonsense.status.code(), Some(1), "{nonsense:?}");
    assert!(text(&nonsense.stderr).contains("not an http or https URL"));
}

/// One instruction of the Dockerfile (continuation lines joined), by its keyword.
fn instructions(dockerfile: &str, keyword: &str) -> Vec<String> {
    let joined = dockerfile.replace("\\\n", " ");
    joined
        .lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.strip_prefix(&format!("{keyword} ")))
        .map(|rest| rest.trim().to_string())
        .collect()
}

/// The exec form of an instruction (`["a", "b"]`), after its options (`--interval=…`).
fn exec_form(instruction: &str) -> Vec<String> {
    let array = &instruction[instruction.find('[').expect("an exec form")..];
    serde_json::from_str(array).unwrap()
}

/// The image as a container runtime runs it: its last stage's `ENV`, `ENTRYPOINT` and
/// `CMD` start the real binary (the address moved to a free port of loopback, the store
/// to a temporary directory, the configuration file to this repository's, which the image
/// copies), and its `HEALTHCHECK` command, run as written but for the port, finds it
/// healthy. The image runs as a user that is not root, and builds a stripped binary.
#[test]
fn the_images_command_and_health_check_run_the_hub() {
    let dockerfile = std::fs::read_to_string(repository().join("Dockerfile")).unwrap();
    let runtime = &dockerfile[dockerfile.rfind("\nFROM ").unwrap()..];

    let user = instructions(runtime, "USER");
    assert_eq!(user.len(), 1, "{user:?}");
    let uid = user[0].split(':').next().unwrap();
    assert!(uid != "root" && uid.parse::<u32>().unwrap() > 0, "{user:?}");

    let build = instructions(&dockerfile, "RUN").join(" ");
    assert!(
        build.contains("CARGO_PROFILE_RELEASE_STRIP=true")
            && build.contains("CARGO_PROFILE_RELEASE_DEBUG=false")
            && build.contains("cargo build --release"),
        "{build}"
    );

    let mut env: Vec<(String, String)> = Vec::new();
    for instruction in instructions(runtime, "ENV") {
        for pair in instruction.split_whitespace() {
            let (name, value) = pair.split_once('=').unwrap();
            env.push((name.into(), value.into()));
        }
    }
    let listen = env
        .iter()
        .find(|(name, _)| name == "KNOOPPUNT_SERVER_LISTEN")
        .map(|(_, value)| value.clone())
        .expect("the image says where the hub listens");
    let port = listen.rsplit(':').next().unwrap().to_string();
    assert!(instructions(runtime, "EXPOSE").contains(&port));

    let data = tempfile::tempdir().unwrap();
    let mut argv = exec_form(&instructions(runtime, "ENTRYPOINT")[0]);
    argv.extend(exec_form(&instructions(runtime, "CMD")[0]));
    assert_eq!(argv[0], "knooppunt");
    let copied = "/etc/knooppunt/knooppunt.toml";
    assert!(instructions(runtime, "COPY").contains(&format!("config/knooppunt.toml {copied}")));
    let config = repository().join("config/knooppunt.toml");
    let args: Vec<String> = argv[1..]
        .iter()
        .map(|arg| {
            if arg == copied {
                config.display().to_string()
            } else {
                arg.clone()
            }
        })
        .collect();
    let mut command = Command::new(env!("CARGO_BIN_EXE_knooppunt"));
    command
        .args(&args)
        .envs(env.iter().map(|(n, v)| (n.as_str(), v.as_str())))
        .env("KNOOPPUNT_SERVER_LISTEN", "127.0.0.1:0")
        .env("KNOOPPUNT_SERVER_DATA_DIR", data.path());
    let hub = common::HubProcess::spawn(command);

    let check = instructions(runtime, "HEALTHCHECK");
    assert_eq!(check.len(), 1, "{check:?}");
    assert!(
        check[0].contains("--timeout=6s"),
        "longer than the check's own 5 s"
    );
    let health = exec_form(&check[0]);
    assert_eq!(health[..3], ["knooppunt", "check", "--health"]);
    let url = health[3].replace(
        &format!(":{port}"),
        &format!(":{}", hub.address.rsplit(':').next().unwrap()),
    );
    assert_ne!(
        url, health[3],
        "the health check asks the port the hub listens on"
    );
    let checked = knooppunt(&["check", "--health", &url]);
    assert!(checked.status.success(), "{checked:?}");
    assert!(hub.terminate().success());
}

/// docker-compose.yml publishes ports on this machine's loopback only, and builds one
/// image that every hub of the file runs.
#[test]
fn compose_publishes_on_loopback_and_builds_one_image() {
    let file = std::fs::read_to_string(repository().join("docker-compose.yml")).unwrap();
    let mut compose: serde_yaml::Value = serde_yaml::from_str(&file).unwrap();
    // `<<: *hub-on-postgres`, as compose reads it.
    compose.apply_merge().unwrap();
    let services = compose["services"].as_mapping().unwrap();
    let mut built = Vec::new();
    let mut hubs = 0;
    for (name, service) in services {
        let name = name.as_str().unwrap();
        for port in service["ports"].as_sequence().into_iter().flatten() {
            let port = port.as_str().unwrap();
            assert!(
                port.starts_with("127.0.0.1:"),
                "{name} publishes {port} on every interface"
            );
        }
        if service.get("build").is_some() {
            built.push(name.to_string());
        }
        if service["image"].as_str() == Some("knooppunt:local") {
            hubs += 1;
            if service.get("build").is_none() {
                assert_eq!(service["pull_policy"].as_str(), Some("never"), "{name}");
            }
        }
    }
    assert_eq!(built, ["knooppunt"], "one service builds the image");
    assert_eq!(
        services["knooppunt"]["build"]["args"]["KNOOPPUNT_COMMIT"].as_str(),
        Some("${KNOOPPUNT_COMMIT:-unknown}"),
        "the commit reaches the image's build"
    );
    assert_eq!(
        hubs, 3,
        "the hub and the two of the scale-out profile run it"
    );
}

/// The image says what it is (OCI annotations as labels, the revision from the build's
/// commit), and its version label is the binary's.
#[test]
fn the_image_is_labelled() {
    let dockerfile = std::fs::read_to_string(repository().join("Dockerfile")).unwrap();
    let labels = instructions(&dockerfile, "LABEL").join(" ");
    for key in [
        "title",
        "description",
        "version",
        "revision",
        "licenses",
        "documentation",
    ] {
        assert!(
            labels.contains(&format!("org.opencontainers.image.{key}=")),
            "{key}: {labels}"
        );
    }
    assert!(
        labels.contains(r#"revision="${KNOOPPUNT_COMMIT}""#),
        "{labels}"
    );
    assert!(
        labels.contains(&format!(r#"version="{}""#, env!("CARGO_PKG_VERSION"))),
        "{labels}"
    );
    // The runtime stage declares the build argument its label reads.
    let runtime = &dockerfile[dockerfile.rfind("\nFROM ").unwrap()..];
    assert!(runtime.contains("\nARG KNOOPPUNT_COMMIT"), "{runtime}");
}
