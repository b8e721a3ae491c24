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
        ["serde", "serde_json", "sha2", "thiserror"],
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
        "knooppunt-identity",
        &[
            &backends[..],
            &["axum", "knooppunt-broker", "knooppunt-delivery"],
        ]
        .concat(),
    );
    assert_none(
        &graph,
        "knooppunt-server",
        &[
            &backends[..],
            &["knooppunt-broker", "knooppunt-delivery", "knooppunt-filter"],
        ]
        .concat(),
    );
    for layer in ["knooppunt-identity", "knooppunt-server"] {
        assert!(
            graph.direct("knooppunt-broker").contains(layer),
            "the broker takes {layer} from its crate"
        );
    }
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

/// Inside the broker, each module may import only the modules below it, as this table says
/// (top down): the wiring (`lib.rs`) over the HTTP adapter (`api/`) over the use cases
/// every surface shares (`subscribing.rs`, `cataloging.rs`) over the application layer
/// (`app.rs`: the services, the store private to it) over the domain (the publish
/// pipeline, the writers of subscriptions and principals) over the registry and the
/// metrics, with the transport (`server`, the crate `knooppunt-server`) and the identity
/// layer (`identity`, the crate `knooppunt-identity`) at the bottom. No module imports one
/// above it or beside it, so there is no import cycle; no module but the wiring names the
/// crate root. Test modules (`#[cfg(test)]` to the end of a file) may reach further.
const BROKER_LAYERS: &[(&str, &[&str])] = &[
    (
        "api",
        &[
            "subscribing",
            "cataloging",
            "app",
            "sessions",
            "history",
            "zgw",
            "ingest",
            "backlog",
            "approvals",
            "catalog",
            "subscriptions",
            "principals",
            "audit",
            "telemetry",
            "identity",
            "server",
        ],
    ),
    // The use cases every surface runs (subscriptions, catalog entries), over the services
    // they call.
    (
        "subscribing",
        &["app", "subscriptions", "audit", "identity"],
    ),
    ("cataloging", &["app", "catalog", "audit", "identity"]),
    (
        "app",
        &[
            "sessions",
            "history",
            "ingest",
            "backlog",
            "approvals",
            "catalog",
            "subscriptions",
            "principals",
            "audit",
            "telemetry",
            "identity",
            "server",
        ],
    ),
    ("history", &["approvals", "subscriptions"]),
    ("zgw", &["catalog", "identity"]),
    (
        "ingest",
        &[
            "backlog",
            "approvals",
            "catalog",
            "subscriptions",
            "telemetry",
            "identity",
        ],
    ),
    ("backlog", &["audit", "telemetry"]),
    (
        "approvals",
        &["catalog", "subscriptions", "audit", "identity"],
    ),
    ("catalog", &["identity"]),
    ("sessions", &["principals", "identity"]),
    ("principals", &["identity"]),
    ("subscriptions", &["registry", "identity"]),
    ("registry", &[]),
    ("audit", &[]),
    ("telemetry", &[]),
    ("server", &["identity"]),
    ("identity", &[]),
];

/// The modules of the crate `crate::…` or `super::…` names in `code` (a file of module
/// `dir`, top-level when empty); `"<root>"` for an item of the crate root.
fn crate_imports(code: &str, nested: bool) -> Vec<String> {
    let mut found = Vec::new();
    let root_prefixes: &[&str] = if nested {
        &["crate::", "super::super::"]
    } else {
        &["crate::", "super::"]
    };
    for prefix in root_prefixes {
        let mut rest = code;
        while let Some(at) = rest.find(prefix) {
            // `super::super::` also contains `super::`; count each use once.
            let before = &rest[..at];
            rest = &rest[at + prefix.len()..];
            if !nested && *prefix == "super::" && before.ends_with("super::") {
                continue;
            }
            let names: Vec<&str> = if let Some(group) = rest.strip_prefix('{') {
                let mut depth = 1;
                let end = group
                    .char_indices()
                    .find(|&(_, c)| {
                        depth += match c {
                            '{' => 1,
                            '}' => -1,
                            _ => 0,
                        };
                        depth == 0
                    })
                    .map_or(group.len(), |(i, _)| i);
                let mut names = Vec::new();
                let mut depth = 0;
                let mut start = 0;
                for (i, c) in group[..end].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => depth -= 1,
                        ',' if depth == 0 => {
                            names.push(&group[start..i]);
                            start = i + 1;
                        }
                        _ => {}
                    }
                }
                names.push(&group[start..end]);
                names
            } else {
                vec![rest]
            };
            for name in names {
                let first: String = name
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !first.is_empty() && first != "self" {
                    found.push(first);
                }
            }
        }
    }
    found
}

#[test]
fn the_broker_is_layered_without_cycles() {
    let sources = broker_sources("");
    assert!(sources.len() > 10, "the broker's sources are found");
    // The table is a strict order: each module imports only modules listed after it.
    for (i, (module, allowed)) in BROKER_LAYERS.iter().enumerate() {
        for lower in *allowed {
            let position = BROKER_LAYERS.iter().position(|(m, _)| m == lower);
            assert!(
                position.is_some_and(|p| p > i),
                "`{module}` may import `{lower}`, which is not below it"
            );
        }
    }
    let modules: Vec<&str> = BROKER_LAYERS.iter().map(|(m, _)| *m).collect();
    let mut upward = Vec::new();
    for (name, text) in &sources {
        if name == "lib.rs" {
            continue;
        }
        let module = name.split(['/', '.']).next().unwrap();
        let Some((_, allowed)) = BROKER_LAYERS.iter().find(|(m, _)| *m == module) else {
            panic!("{name}: module `{module}` has no place in the broker's layers; add it");
        };
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap()
            .lines()
            .map(|line| line.split("//").next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n");
        for imported in crate_imports(&code, name.contains('/')) {
            if imported == module {
                continue;
            }
            let fine = modules.contains(&imported.as_str()) && allowed.contains(&imported.as_str());
            if !fine {
                let what = if modules.contains(&imported.as_str()) {
                    format!("`{imported}`")
                } else {
                    format!("`{imported}` of the crate root (the wiring)")
                };
                upward.push(format!("{name} ({module}) imports {what}"));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports against the broker's layers:\n{}",
        upward.join("\n")
    );
}

/// The checker itself sees single, grouped and nested imports, and the root through `super`.
#[test]
fn the_layer_checker_reads_imports() {
    let code = "use crate::app::AppState;\nuse crate::{ingest::{self, Receipt}, telemetry};\n\
                fn f() { crate::server::run(); super::Hub::x(); }";
    assert_eq!(
        crate_imports(code, false),
        ["app", "ingest", "telemetry", "server", "Hub"]
    );
    assert_eq!(
        crate_imports("use super::page;", true),
        Vec::<String>::new()
    );
    assert_eq!(
        crate_imports("use super::super::AppState;", true),
        ["AppState"]
    );
}
