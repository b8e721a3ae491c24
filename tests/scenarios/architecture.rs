//! The dependency rules of ARCHITECTURE.md, checked against what Cargo resolves (`cargo
//! metadata`): the I/O-free crates stay free of runtimes and servers, the neutral store has
//! only serde_json and thiserror, and nothing but the binary, the tests and the bench tool knows
//! a backend (embedded or PostgreSQL).

use std::collections::{BTreeSet, HashMap};
use std::process::Command;

use serde_json::Value;

/// Every package each workspace package depends on, directly or not, through normal
/// (not dev or build) dependencies, by name.
struct Graph {
    names: HashMap<String, String>,
    normal: HashMap<String, Vec<String>>,
}

impl Graph {
    fn load() -> Graph {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let host = String::from_utf8(Command::new("rustc").arg("-vV").output().unwrap().stdout)
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("host: ").map(str::to_owned))
            .unwrap();
        let output = Command::new(cargo)
            .args([
                "metadata",
                "--format-version",
                "1",
                "--offline",
                "--filter-platform",
            ])
            .arg(host)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "cargo metadata: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let metadata: Value = serde_json::from_slice(&output.stdout).unwrap();
        let names = metadata["packages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["id"].as_str().unwrap().to_owned(),
                    p["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let normal = metadata["resolve"]["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|node| {
                let deps = node["deps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|dep| {
                        dep["dep_kinds"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|kind| kind["kind"].is_null())
                    })
                    .map(|dep| dep["pkg"].as_str().unwrap().to_owned())
                    .collect();
                (node["id"].as_str().unwrap().to_owned(), deps)
            })
            .collect();
        Graph { names, normal }
    }

    fn id(&self, name: &str) -> String {
        self.names
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(id, _)| id.clone())
            .unwrap_or_else(|| panic!("no package {name}"))
    }

    fn direct(&self, name: &str) -> BTreeSet<String> {
        self.normal[&self.id(name)]
            .iter()
            .map(|id| self.names[id].clone())
            .collect()
    }

    fn all(&self, name: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![self.id(name)];
        while let Some(id) = todo.pop() {
            for dep in &self.normal[&id] {
                if seen.insert(self.names[dep].clone()) {
                    todo.push(dep.clone());
                }
            }
        }
        seen
    }
}

fn assert_none(graph: &Graph, package: &str, forbidden: &[&str]) {
    let all = graph.all(package);
    let found: Vec<&&str> = forbidden.iter().filter(|f| all.contains(**f)).collect();
    assert!(found.is_empty(), "{package} depends on {found:?}");
}

#[test]
fn the_crates_depend_only_as_architecture_md_says() {
    let graph = Graph::load();
    let runtime = ["tokio", "axum", "hyper", "reqwest", "sled"];
    assert_none(&graph, "knooppunt-event", &runtime);
    assert_none(&graph, "knooppunt-filter", &runtime);
    assert_none(&graph, "knooppunt-store", &runtime);
    let store: Vec<String> = graph.direct("knooppunt-store").into_iter().collect();
    assert_eq!(
        store,
        ["serde_json", "thiserror"],
        "the neutral store's dependencies"
    );
    let backends = [
        "sled",
        "knooppunt-store-embedded",
        "tokio-postgres",
        "knooppunt-store-postgres",
    ];
    assert_none(
        &graph,
        "knooppunt-delivery",
        &[&backends[..], &["axum"]].concat(),
    );
    assert_none(&graph, "knooppunt-broker", &backends);
    assert_none(
        &graph,
        "knooppunt-store-postgres",
        &[
            "sled",
            "knooppunt-store-embedded",
            "axum",
            "hyper",
            "reqwest",
        ],
    );
    assert_none(
        &graph,
        "knooppunt-store-embedded",
        &["axum", "hyper", "reqwest"],
    );
    assert_none(
        &graph,
        "knooppunt-store-conformance",
        &[&backends[..], &["axum", "reqwest"]].concat(),
    );
    assert!(graph.all("knooppunt").contains("knooppunt-store-embedded"));
    assert!(graph.all("knooppunt").contains("knooppunt-store-postgres"));
}

/// The broker's source files below `dir` (relative to the broker's `src`), with their text.
fn broker_sources(dir: &str) -> Vec<(String, String)> {
    let root =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/knooppunt-broker/src");
    let mut found = Vec::new();
    let mut pending = vec![root.join(dir)];
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                pending.push(entry.unwrap().path());
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            let name = path.strip_prefix(&root).unwrap().display().to_string();
            found.push((name, std::fs::read_to_string(&path).unwrap()));
        }
    }
    found.sort();
    found
}

/// Inside the broker, the HTTP API is the top layer: nothing below it (the server, the
/// identity types, the publish pipeline, the writers of subscriptions and principals, the
/// registry, the metrics) imports it; only `lib.rs`, which wires the hub, names it. The
/// identity layer (`identity/`) imports nothing of the crate at all.
#[test]
fn nothing_in_the_broker_imports_its_api_but_the_wiring() {
    let sources = broker_sources("");
    assert!(sources.len() > 10, "the broker's sources are found");
    let mut upward = Vec::new();
    for (name, text) in &sources {
        if name.starts_with("api/") || name == "lib.rs" {
            continue;
        }
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            if code.contains("crate::api") || code.contains("super::api") {
                upward.push(format!("{name}:{}: {}", number + 1, line.trim()));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports of the API from below it:\n{}",
        upward.join("\n")
    );
    let identity: Vec<&(String, String)> = sources
        .iter()
        .filter(|(name, _)| name.starts_with("identity/"))
        .collect();
    assert!(!identity.is_empty(), "the identity layer");
    for (name, text) in identity {
        assert!(
            !text.contains("crate::") && !text.contains("super::super"),
            "{name}: the identity layer imports nothing of the crate"
        );
    }
}
