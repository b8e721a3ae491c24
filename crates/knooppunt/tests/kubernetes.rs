//! The Kubernetes manifests (`deploy/kubernetes`): rendered with `kubectl kustomize`,
//! validated against the Kubernetes API's schemas (`kubernetes-validate`, strict), and the
//! pod they describe started as the real binary — its arguments, its environment (with the
//! variables a Service injects into every pod of its namespace), its configuration from the
//! rendered Secret — answering its probes.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine;
use serde::Deserialize;
use serde_yaml::Value;

fn manifests() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes")
}

/// `kubectl kustomize <overlay>`: the rendered text.
fn render(overlay: &str) -> String {
    let output = Command::new("kubectl")
        .arg("kustomize")
        .arg(manifests().join(overlay))
        .output()
        .expect("kubectl is needed (Debian: kubernetes-client)");
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout).unwrap()
}

fn parse(rendered: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(rendered)
        .map(|document| Value::deserialize(document).unwrap())
        .filter(|document| !document.is_null())
        .collect()
}

fn of_kind<'a>(documents: &'a [Value], kind: &str) -> Vec<&'a Value> {
    documents.iter().filter(|d| d["kind"] == kind).collect()
}

fn str_of(value: &Value) -> &str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("not a string: {value:?}"))
}

/// The workload of an overlay: its kind and the one that is there.
fn workload<'a>(documents: &'a [Value], kind: &str) -> &'a Value {
    let found = of_kind(documents, kind);
    assert_eq!(found.len(), 1, "one {kind}");
    found[0]
}

fn container(workload: &Value) -> &Value {
    let containers = workload["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .unwrap();
    assert_eq!(containers.len(), 1);
    &containers[0]
}

/// The rendered documents pass `kubernetes-validate --strict` (no unknown field anywhere)
/// for each Kubernetes release the manifests are for.
fn validate(overlay: &str, rendered: &str) {
    let tool = knooppunt_tests::tools::pip("kubernetes-validate", "kubernetes-validate==1.37.0");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join(format!("{overlay}.yaml"));
    std::fs::write(&file, rendered).unwrap();
    for release in ["1.30.0", "1.31.0", "1.32.0"] {
        let output = Command::new("python3")
            .args(["-m", "kubernetes_validate", "--strict", "-k", release])
            .arg(&file)
            .env("PYTHONPATH", &tool)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{overlay} on Kubernetes {release}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The image is the one the variant's `images:` names, not the bare placeholder name.
fn check_image(workload: &Value) {
    assert_eq!(
        container(workload)["image"],
        "registry.example.nl/knooppunt:0.1.0",
        "the variant's `images:` applies to its workload"
    );
}

/// The ports a rule of a NetworkPolicy opens, as (protocol, port) with named ports kept
/// as names.
fn rule_ports(rule: &Value) -> Vec<(String, String)> {
    rule["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| {
            let port = match &p["port"] {
                Value::Number(n) => n.to_string(),
                other => str_of(other).to_owned(),
            };
            (str_of(&p["protocol"]).to_owned(), port)
        })
        .collect()
}

/// The NetworkPolicies select the hubs' pods and let in the API from anywhere and the
/// metrics only from the monitoring namespace; they let out DNS, the sinks (443, 80) and,
/// with `database`, PostgreSQL, and nothing else.
fn check_network(documents: &[Value], workload: &Value, database: bool) {
    let labels = &workload["spec"]["template"]["metadata"]["labels"];
    let policies = of_kind(documents, "NetworkPolicy");
    assert_eq!(policies.len(), if database { 2 } else { 1 });
    let mut ingress = Vec::new();
    let mut egress = Vec::new();
    for policy in &policies {
        for (key, value) in policy["spec"]["podSelector"]["matchLabels"]
            .as_mapping()
            .unwrap()
        {
            assert_eq!(&labels[key], value, "the policy selects the hubs' pods");
        }
        let types = policy["spec"]["policyTypes"].as_sequence().unwrap();
        assert!(types.iter().any(|t| t == "Egress"));
        for rule in policy["spec"]["ingress"]
            .as_sequence()
            .into_iter()
            .flatten()
        {
            ingress.push((rule["from"].clone(), rule_ports(rule)));
        }
        for rule in policy["spec"]["egress"].as_sequence().into_iter().flatten() {
            egress.push(rule_ports(rule));
        }
    }
    let tcp = |port: &str| ("TCP".to_owned(), port.to_owned());
    assert_eq!(ingress.len(), 2, "{ingress:?}");
    let api = ingress
        .iter()
        .find(|(_, ports)| ports == &[tcp("http")])
        .unwrap();
    assert!(api.0.is_null(), "the API from anywhere");
    let metrics = ingress
        .iter()
        .find(|(_, ports)| ports == &[tcp("metrics")])
        .unwrap();
    assert_eq!(
        metrics.0[0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
        "monitoring",
        "the metrics only from the monitoring namespace"
    );
    let mut out: Vec<(String, String)> = egress.into_iter().flatten().collect();
    out.sort();
    let mut expected = vec![
        tcp("443"),
        tcp("53"),
        tcp("80"),
        ("UDP".into(), "53".into()),
    ];
    if database {
        expected.push(tcp("5432"));
    }
    expected.sort();
    assert_eq!(out, expected, "out: DNS, the sinks and the database only");
}

/// What every hub's pod must be: not root, a read-only root filesystem, no privileges,
/// bounded memory, probes on /healthz and /readyz of a port it declares, the configuration
/// from the Secret, the data directory on a volume; every Service reaches a declared port.
fn check_pod(documents: &[Value], workload: &Value) {
    let pod = &workload["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert!(pod["securityContext"]["runAsUser"].as_u64().unwrap() > 0);
    let container = container(workload);
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"][0], "ALL");
    assert!(container["resources"]["requests"]["memory"].is_string());
    assert!(container["resources"]["limits"]["memory"].is_string());
    let ports: Vec<&str> = container["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| str_of(&p["name"]))
        .collect();
    for (probe, path) in [
        ("livenessProbe", "/healthz"),
        ("readinessProbe", "/readyz"),
        ("startupProbe", "/healthz"),
    ] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert!(ports.contains(&str_of(&get["port"])), "{probe}");
    }
    for service in of_kind(documents, "Service") {
        for port in service["spec"]["ports"].as_sequence().unwrap() {
            assert!(ports.contains(&str_of(&port["targetPort"])), "{service:?}");
        }
        let selector = service["spec"]["selector"].as_mapping().unwrap();
        for (key, value) in selector {
            assert_eq!(
                &workload["spec"]["template"]["metadata"]["labels"][key],
                value
            );
        }
    }
    // Every mount comes from a volume of the pod (or a claim template of the set).
    let mut volumes: Vec<&str> = pod["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| str_of(&v["name"]))
        .collect();
    for claim in workload["spec"]["volumeClaimTemplates"]
        .as_sequence()
        .into_iter()
        .flatten()
    {
        volumes.push(str_of(&claim["metadata"]["name"]));
    }
    for mount in container["volumeMounts"].as_sequence().unwrap() {
        assert!(volumes.contains(&str_of(&mount["name"])), "{mount:?}");
    }
}

#[test]
fn the_manifests_render_and_validate_against_the_kubernetes_schemas() {
    let rendered = render("embedded");
    validate("embedded", &rendered);
    let documents = parse(&rendered);
    let set = workload(&documents, "StatefulSet");
    assert_eq!(
        set["spec"]["replicas"], 1,
        "the embedded store is one hub's"
    );
    let claim = &set["spec"]["volumeClaimTemplates"][0];
    assert_eq!(claim["spec"]["accessModes"][0], "ReadWriteOnce");
    check_pod(&documents, set);
    check_image(set);
    check_network(&documents, set, false);
    assert!(of_kind(&documents, "Deployment").is_empty());
    // The set's serviceName is its own headless Service.
    let governing = of_kind(&documents, "Service")
        .into_iter()
        .find(|s| s["metadata"]["name"] == set["spec"]["serviceName"])
        .expect("the Service the StatefulSet names");
    assert_eq!(governing["spec"]["clusterIP"], "None", "headless");

    let rendered = render("postgresql");
    validate("postgresql", &rendered);
    let documents = parse(&rendered);
    let deployment = workload(&documents, "Deployment");
    assert!(deployment["spec"]["replicas"].as_u64().unwrap() >= 2);
    check_pod(&documents, deployment);
    check_image(deployment);
    check_network(&documents, deployment, true);
    assert!(of_kind(&documents, "StatefulSet").is_empty());
    assert_eq!(
        deployment["spec"]["strategy"]["type"], "Recreate",
        "an image change never runs two releases on one database"
    );
    let budget = workload(&documents, "PodDisruptionBudget");
    assert_eq!(
        budget["spec"]["selector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    // The database URL comes from a Secret the overlay renders, not from the manifest.
    let env = container(deployment)["env"].as_sequence().unwrap();
    let url = env
        .iter()
        .find(|e| e["name"] == "KNOOPPUNT_STORE_URL")
        .expect("the database URL");
    let reference = &url["valueFrom"]["secretKeyRef"];
    let secret = of_kind(&documents, "Secret")
        .into_iter()
        .find(|s| s["metadata"]["name"] == reference["name"])
        .expect("the referenced Secret is rendered");
    assert!(secret["data"][str_of(&reference["key"])].is_string());
}

/// The variables Kubernetes puts into every pod of a namespace for each Service there
/// (`<NAME>_SERVICE_HOST`, `<NAME>_PORT_8080_TCP_ADDR`, …); none for a headless one.
fn service_links(documents: &[Value]) -> Vec<(String, String)> {
    let mut env = Vec::new();
    let services = of_kind(documents, "Service").into_iter();
    for (n, service) in services
        .filter(|s| s["spec"]["clusterIP"] != "None")
        .enumerate()
    {
        let name = str_of(&service["metadata"]["name"])
            .to_uppercase()
            .replace('-', "_");
        let ip = format!("10.96.0.{}", 10 + n);
        for (i, port) in service["spec"]["ports"]
            .as_sequence()
            .unwrap()
            .iter()
            .enumerate()
        {
            let number = port["port"].as_u64().unwrap();
            let url = format!("tcp://{ip}:{number}");
            if i == 0 {
                env.push((format!("{name}_SERVICE_HOST"), ip.clone()));
                env.push((format!("{name}_SERVICE_PORT"), number.to_string()));
                env.push((format!("{name}_PORT"), url.clone()));
            }
            let port_name = str_of(&port["name"]).to_uppercase().replace('-', "_");
            env.push((
                format!("{name}_SERVICE_PORT_{port_name}"),
                number.to_string(),
            ));
            let prefix = format!("{name}_PORT_{number}_TCP");
            env.push((prefix.clone(), url));
            env.push((format!("{prefix}_PROTO"), "tcp".into()));
            env.push((format!("{prefix}_PORT"), number.to_string()));
            env.push((format!("{prefix}_ADDR"), ip.clone()));
        }
    }
    env
}

/// Starts the pod of `workload` as the real binary: the container's arguments and
/// environment (secrets resolved from the rendered Secrets, `database` in place of the
/// database URL), the Services' variables, the mounted Secrets written to a directory
/// that stands for the container's filesystem. Only the addresses move to free ports of
/// loopback and the data directory into that directory. Then asks each probe's path on
/// the port it names.
fn start_the_pod(documents: &[Value], workload: &Value, database: Option<&str>) {
    let root = tempfile::tempdir().unwrap();
    let inside = |path: &str| root.path().join(path.trim_start_matches('/'));
    let container = container(workload);
    let pod = &workload["spec"]["template"]["spec"];
    let secret_data = |name: &Value| -> BTreeMap<String, Vec<u8>> {
        let secret = of_kind(documents, "Secret")
            .into_iter()
            .find(|s| &s["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no Secret {name:?}"));
        secret["data"]
            .as_mapping()
            .unwrap()
            .iter()
            .map(|(key, value)| {
                // kubectl folds long values over lines.
                let folded: String = str_of(value).split_whitespace().collect();
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(folded)
                    .unwrap();
                (str_of(key).to_string(), bytes)
            })
            .collect()
    };
    for mount in container["volumeMounts"].as_sequence().unwrap() {
        let dir = inside(str_of(&mount["mountPath"]));
        std::fs::create_dir_all(&dir).unwrap();
        let volume = pod["volumes"]
            .as_sequence()
            .into_iter()
            .flatten()
            .find(|v| v["name"] == mount["name"]);
        if let Some(secret) = volume.map(|v| &v["secret"]).filter(|s| !s.is_null()) {
            for (file, bytes) in secret_data(&secret["secretName"]) {
                std::fs::write(dir.join(file), bytes).unwrap();
            }
        }
    }
    let args: Vec<PathBuf> = container["args"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|arg| {
            let arg = str_of(arg);
            if arg.starts_with('/') {
                inside(arg)
            } else {
                PathBuf::from(arg)
            }
        })
        .collect();
    let mut command = Command::new(env!("CARGO_BIN_EXE_knooppunt"));
    command.args(&args).env_clear();
    command.envs(service_links(documents));
    for variable in container["env"].as_sequence().into_iter().flatten() {
        let name = str_of(&variable["name"]);
        let value = if let Some(value) = variable["value"].as_str() {
            value.to_string()
        } else {
            let reference = &variable["valueFrom"]["secretKeyRef"];
            let value = secret_data(&reference["name"]).remove(str_of(&reference["key"]));
            let value = String::from_utf8(value.expect("the Secret has the key")).unwrap();
            match database {
                Some(url) if name == "KNOOPPUNT_STORE_URL" => url.to_string(),
                _ => value,
            }
        };
        command.env(name, value);
    }
    // The data directory the configuration names lies in a mounted volume.
    let config = std::fs::read_to_string(&args[2]).unwrap();
    let config: toml::Table = toml::from_str(&config).unwrap();
    let data_dir = config["server"]["data_dir"].as_str().unwrap();
    assert!(
        container["volumeMounts"]
            .as_sequence()
            .unwrap()
            .iter()
            .any(|m| data_dir.starts_with(str_of(&m["mountPath"])) && m["readOnly"] != true),
        "{data_dir} is on a writable volume"
    );
    command
        .env("KNOOPPUNT_SERVER_LISTEN", "127.0.0.1:0")
        .env("KNOOPPUNT_SERVER_METRICS_LISTEN", "127.0.0.1:0")
        .env("KNOOPPUNT_SERVER_DATA_DIR", inside(data_dir));
    let hub = common::HubProcess::spawn(command);

    let metrics = hub
        .log()
        .iter()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .find_map(|record| record["metrics_address"].as_str().map(str::to_owned))
        .expect("the metrics address in the JSON log");
    for probe in ["startupProbe", "livenessProbe", "readinessProbe"] {
        let get = &container[probe]["httpGet"];
        let address = match str_of(&get["port"]) {
            "metrics" => &metrics,
            "http" => &hub.address,
            other => panic!("{probe} on port {other}"),
        };
        let url = format!("http://{address}{}", str_of(&get["path"]));
        let answer = probe::get(&url);
        assert_eq!(answer, 200, "{probe}: {url}");
    }
    let starting = hub
        .log()
        .into_iter()
        .find(|line| line.contains("Knooppunt is starting."))
        .unwrap();
    assert!(
        starting.contains(&args[2].display().to_string()),
        "{starting}"
    );
    assert!(hub.terminate().success());
}

/// A GET as the kubelet's probes make it; the status code.
mod probe {
    pub(super) fn get(url: &str) -> u16 {
        use std::io::{Read, Write};
        let rest = url.strip_prefix("http://").unwrap();
        let (address, path) = rest.split_at(rest.find('/').unwrap());
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: pod\r\nUser-Agent: kube-probe/1.30\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        response[9..12].parse().unwrap()
    }
}

#[test]
fn the_embedded_pod_starts_with_its_rendered_environment_and_answers_its_probes() {
    let documents = parse(&render("embedded"));
    start_the_pod(&documents, workload(&documents, "StatefulSet"), None);
}

#[test]
fn the_postgresql_pods_start_with_their_rendered_environment_on_a_real_database() {
    let backend = common::Backend::postgres("kubernetes");
    let common::Backend::Postgres { url, .. } = &backend else {
        unreachable!()
    };
    let documents = parse(&render("postgresql"));
    start_the_pod(&documents, workload(&documents, "Deployment"), Some(url));
}
