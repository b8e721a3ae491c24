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
    // The services know nothing of HTTP: every surface over them is a crate above them.
    let direct = graph.direct("knooppunt-services");
    for http in ["axum", "hyper", "http", "maud", "tower", "knooppunt-broker"] {
        assert!(
            !direct.contains(http),
            "knooppunt-services depends on {http}"
        );
    }
    assert!(
        graph
            .direct("knooppunt-broker")
            .contains("knooppunt-services"),
        "the surfaces call the services"
    );
    assert_none(&graph, "knooppunt-services", &backends);
    // Nor through another crate: no server, no surface (delivery's HTTP client reaches
    // hyper, which is not serving).
    assert_none(
        &graph,
        "knooppunt-services",
        &[
            "axum",
            "maud",
            "knooppunt-server",
            "knooppunt-api",
            "knooppunt-console",
            "knooppunt-facade",
        ],
    );
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

/// The hub's source files below `dir`, with their text, named relative to their crate's
/// `src`: the services (`knooppunt-services`) and the wiring (`knooppunt-broker`). The
/// surfaces over them are crates of their own (`knooppunt-api`, `knooppunt-console`,
/// `knooppunt-facade`),
/// kept above the services by Cargo's graph.
fn services_sources(dir: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for krate in ["knooppunt-broker", "knooppunt-services"] {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../crates")
            .join(krate)
            .join("src");
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
    }
    found.sort();
    found
}

/// Inside the services (`knooppunt-services`, under the surfaces `knooppunt-api`,
/// `knooppunt-console` and `knooppunt-facade` and the wiring `knooppunt-broker`), each module may import only the
/// modules below it, as this table says (top down): the use cases every surface shares (`use_case/subscriptions.rs`, `use_case/catalog.rs`, `use_case/replays.rs`, `use_case/dead_letters.rs`,
/// `use_case/principals.rs`) over the application layer
/// (`app.rs`: the services, the store private to it) over the domain (the publish
/// pipeline, the writers of subscriptions and principals) over the registry and the
/// metrics, with the identity layer (`identity`, the crate `knooppunt-identity`) at the
/// bottom; the transport (the crate `knooppunt-server`) is the wiring's alone. No module imports one
/// above it or beside it, so there is no import cycle; no module but the wiring names the
/// crate root. Test modules (`#[cfg(test)]` to the end of a file) may reach further.
const SERVICES_LAYERS: &[(&str, &[&str])] = &[
    // The use cases every surface runs (`use_case/`: subscriptions, catalog entries and
    // approvals, replays, dead letters, principals), over the services they call.
    (
        "use_case",
        &[
            "app",
            "sessions",
            "history",
            "approvals",
            "catalog",
            "zgw",
            "subscriptions",
            "principals",
            "audit",
            "identity",
            "refused",
        ],
    ),
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
            "notices",
            "identity",
        ],
    ),
    (
        "history",
        &["approvals", "subscriptions", "notices", "refused"],
    ),
    ("zgw", &["catalog", "identity"]),
    (
        "ingest",
        &[
            "backlog",
            "approvals",
            "catalog",
            "subscriptions",
            "telemetry",
            "notices",
            "identity",
            "refused",
            "sequences",
        ],
    ),
    ("backlog", &["audit", "telemetry", "notices", "refused"]),
    (
        "approvals",
        &["catalog", "subscriptions", "audit", "identity", "refused"],
    ),
    ("catalog", &["identity", "refused"]),
    ("sessions", &["principals", "audit", "identity"]),
    ("principals", &["identity", "refused"]),
    (
        "subscriptions",
        &["registry", "notices", "identity", "refused"],
    ),
    ("registry", &[]),
    // Each source's last Integer `sequence` (the profile's contiguity), for ingest.
    ("sequences", &[]),
    ("audit", &[]),
    ("telemetry", &[]),
    ("notices", &[]),
    ("identity", &[]),
    // Why a use case refused: below every service that answers it.
    ("refused", &[]),
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
fn the_services_are_layered_without_cycles() {
    let sources = services_sources("");
    assert!(sources.len() > 10, "the services' sources are found");
    // The table is a strict order: each module imports only modules listed after it.
    for (i, (module, allowed)) in SERVICES_LAYERS.iter().enumerate() {
        for lower in *allowed {
            let position = SERVICES_LAYERS.iter().position(|(m, _)| m == lower);
            assert!(
                position.is_some_and(|p| p > i),
                "`{module}` may import `{lower}`, which is not below it"
            );
        }
    }
    let modules: Vec<&str> = SERVICES_LAYERS.iter().map(|(m, _)| *m).collect();
    let mut upward = Vec::new();
    for (name, text) in &sources {
        // The wiring, and test modules in files of their own (they may reach further).
        if name == "lib.rs" || name.ends_with("tests.rs") {
            continue;
        }
        let module = name.split(['/', '.']).next().unwrap();
        let Some((_, allowed)) = SERVICES_LAYERS.iter().find(|(m, _)| *m == module) else {
            panic!("{name}: module `{module}` has no place in the services' layers; add it");
        };
        let code = code_of(text);
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
        "imports against the services' layers:\n{}",
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

/// A file's code without its comments and its test module (`#[cfg(test)]` to the end).
fn code_of(text: &str) -> String {
    text.split("#[cfg(test)]")
        .next()
        .unwrap()
        .lines()
        .map(|line| line.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The source files of the crate whose `src` is `root`, by module path (`crate`,
/// `crate::api`, `crate::api::problem`), with their code: comments and the test modules
/// (`#[cfg(test)]` to the end of a file, or a `tests.rs` file of its own) left out.
fn crate_modules(root: &std::path::Path) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                pending.push(entry.unwrap().path());
            }
            continue;
        }
        if path.extension().is_none_or(|e| e != "rs") || path.ends_with("tests.rs") {
            continue;
        }
        let relative = path.strip_prefix(root).unwrap().with_extension("");
        let mut segments: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if segments.last().is_some_and(|s| s == "mod") {
            segments.pop();
        }
        if segments == ["lib"] || segments == ["main"] {
            segments.clear();
        }
        let module = std::iter::once("crate".to_owned())
            .chain(segments)
            .collect::<Vec<_>>()
            .join("::");
        found.push((module, code_of(&std::fs::read_to_string(&path).unwrap())));
    }
    found.sort();
    found
}

/// The paths `code` names from `crate::` or `super::` (one or more), as full paths from
/// the crate root; `parent` is the module `super` names. Grouped imports are expanded.
fn named_paths(code: &str, parent: &str) -> Vec<String> {
    fn path_at(text: &str) -> (&str, &str) {
        let end = text
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .unwrap_or(text.len());
        (&text[..end], &text[end..])
    }
    fn expand(prefix: &str, rest: &str, found: &mut Vec<String>) {
        let (path, after) = path_at(rest);
        let path = path.trim_end_matches("::");
        let full = match (prefix.is_empty(), path.is_empty()) {
            (_, true) => prefix.to_owned(),
            (true, false) => path.to_owned(),
            (false, false) => format!("{prefix}::{path}"),
        };
        if after.starts_with('{') {
            // A group: each of its items, at its top level.
            let mut depth = 0;
            let mut start = 1;
            for (i, c) in after.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => {
                        depth -= 1;
                        if depth == 0 {
                            expand(&full, after[start..i].trim_start(), found);
                            return;
                        }
                    }
                    ',' if depth == 1 => {
                        expand(&full, after[start..i].trim_start(), found);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            found.push(full);
        }
    }
    let mut found = Vec::new();
    let bytes = code.as_bytes();
    for (at, _) in code.match_indices("crate::") {
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        expand("crate", &code[at + "crate::".len()..], &mut found);
    }
    for (at, _) in code.match_indices("super::") {
        if at >= 2 && &code[at - 2..at] == "::" {
            continue; // counted from the first `super::` of a chain
        }
        let mut base: Vec<&str> = parent.split("::").collect();
        let mut rest = &code[at + "super::".len()..];
        while let Some(more) = rest.strip_prefix("super::") {
            base.pop();
            rest = more;
        }
        expand(&base.join("::"), rest, &mut found);
    }
    found
}

/// The groups of modules of the crate at `root` that import each other in a circle: each
/// file's imports (`crate::…`, `super::…`) resolved to the deepest module they name, which
/// stands for its children too (it may re-export theirs); a module's use of its own
/// ancestors (its parent's items) does not count.
fn import_circles(root: &std::path::Path) -> Vec<Vec<String>> {
    let modules = crate_modules(root);
    let names: BTreeSet<&str> = modules.iter().map(|(m, _)| m.as_str()).collect();
    let mut edges: HashMap<&str, BTreeSet<&str>> = HashMap::new();
    for (module, code) in &modules {
        let parent = module.rsplit_once("::").map_or("crate", |(p, _)| p);
        for path in named_paths(code, parent) {
            let segments: Vec<&str> = path.split("::").collect();
            let target = (1..=segments.len())
                .rev()
                .map(|n| segments[..n].join("::"))
                .find(|candidate| names.contains(candidate.as_str()));
            if let Some(target) = target {
                let target = names.get(target.as_str()).unwrap();
                let ancestor = module.starts_with(&format!("{target}::")) || *target == "crate";
                if *target != module.as_str() && !ancestor {
                    // A module stands for its children too: what it re-exports, or what its
                    // items use, may come from any of them.
                    let children = format!("{target}::");
                    let subtree = names
                        .iter()
                        .filter(|name| **name == *target || name.starts_with(&children));
                    edges.entry(module.as_str()).or_default().extend(subtree);
                }
            }
        }
    }
    // Strongly connected components (Tarjan), those of more than one module.
    struct Search<'a> {
        edges: &'a HashMap<&'a str, BTreeSet<&'a str>>,
        index: HashMap<&'a str, usize>,
        low: HashMap<&'a str, usize>,
        stack: Vec<&'a str>,
        circles: Vec<Vec<String>>,
    }
    fn visit<'a>(search: &mut Search<'a>, module: &'a str) {
        let n = search.index.len();
        search.index.insert(module, n);
        search.low.insert(module, n);
        search.stack.push(module);
        for &next in search.edges.get(module).into_iter().flatten() {
            if !search.index.contains_key(next) {
                visit(search, next);
                let low = search.low[module].min(search.low[next]);
                search.low.insert(module, low);
            } else if search.stack.contains(&next) {
                let low = search.low[module].min(search.index[next]);
                search.low.insert(module, low);
            }
        }
        if search.low[module] == search.index[module] {
            let mut group = Vec::new();
            while let Some(member) = search.stack.pop() {
                group.push(member.to_owned());
                if member == module {
                    break;
                }
            }
            if group.len() > 1 {
                group.sort();
                search.circles.push(group);
            }
        }
    }
    let mut search = Search {
        edges: &edges,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        circles: Vec::new(),
    };
    for name in &names {
        if !search.index.contains_key(name) {
            visit(&mut search, name);
        }
    }
    search.circles
}

/// No crate has files that import each other in a circle (the delivery engine's parts
/// share their state through `state.rs`, which imports none of them; an API handler's
/// problem type does not reach back into the handlers).
#[test]
fn no_crate_has_an_import_circle_between_its_files() {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates");
    let mut circles = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(&crates).unwrap() {
        let src = entry.unwrap().path().join("src");
        if src.is_dir() {
            checked += 1;
            for circle in import_circles(&src) {
                circles.push(format!("{}: {}", src.display(), circle.join(" ↔ ")));
            }
        }
    }
    assert!(checked >= 10, "the crates are found ({checked})");
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

/// The circle finder sees a circle through grouped and `super` imports and through a
/// module's children, and not a module's use of its parent.
#[test]
fn the_circle_finder_finds_circles() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, code: &str| {
        let path = dir.path().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, code).unwrap();
    };
    write("lib.rs", "mod a;\nmod b;\nmod api;\nuse crate::a::A;");
    write("a.rs", "use crate::{b::{self, B}, c};\npub struct A;");
    write(
        "b.rs",
        "// use crate::a;\nfn f() { crate::api::problem::x(); }",
    );
    write(
        "api/mod.rs",
        "mod problem;\nmod routes;\npub const BASE: &str = \"\";",
    );
    write("api/problem.rs", "use super::BASE;\nuse super::routes::r;");
    write("api/routes.rs", "use super::super::a::A;");
    assert_eq!(
        import_circles(dir.path()),
        [[
            "crate::a",
            "crate::api::problem",
            "crate::api::routes",
            "crate::b"
        ]]
    );
    write("api/routes.rs", "pub fn r() {}");
    assert!(import_circles(dir.path()).is_empty());
    // A module stands for its children: `x` uses what `api` re-exports of `routes`, and
    // `routes` uses `x`.
    write("lib.rs", "mod a;\nmod b;\nmod api;\nmod x;");
    write("x.rs", "use crate::api::BASE;");
    write("api/routes.rs", "use crate::x;\npub fn r() {}");
    assert_eq!(
        import_circles(dir.path()),
        [["crate::api::problem", "crate::api::routes", "crate::x"]],
        "`problem` uses `routes` too"
    );
}

/// The surfaces (the `/v1` API, the Notificaties facade, the console) write nothing of
/// their own on the audit trail: the use case that makes a change builds its entry (what
/// changed, redacted, and whom it concerns), so a new surface cannot record less, or a
/// secret. A surface gives at most its label (`audit::Surface`).
#[test]
fn the_surfaces_build_no_audit_entry() {
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates");
    let mut found = Vec::new();
    for surface in ["knooppunt-api", "knooppunt-facade", "knooppunt-console"] {
        for (module, code) in crate_modules(&crates.join(surface).join("src")) {
            for built in ["Action::new(", "Action {"] {
                if code.contains(built) {
                    found.push(format!("{surface} {module}: {built}"));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "audit entries built by a surface:\n{}",
        found.join("\n")
    );
}
