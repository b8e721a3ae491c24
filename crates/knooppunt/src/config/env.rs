//! Settings from the environment (`KNOOPPUNT_<SECTION>_<KEY>`), over the file.

use super::*;

/// The sections an environment variable can reach: every one of the file but
/// `principals`, a list (file only).
pub(crate) const ENV_SECTIONS: [&str; 11] = [
    "server",
    "store",
    "ingest",
    "validation",
    "delivery",
    "filters",
    "log",
    "audit",
    "zgw",
    "console",
    "backlog",
];

/// Whether `setting` (a variable's name without `KNOOPPUNT_`, lower case) has the shape of
/// the variables Kubernetes makes for a Service (named `knooppunt`, or `knooppunt-<x>`):
/// `[<x>_]service_host`, `[<x>_]service_port[_<name>]`, `[<x>_]port[_<n>_<proto>[_…]]`.
pub(super) fn is_service_link(setting: &str) -> bool {
    let words: Vec<&str> = setting.split('_').collect();
    words
        .windows(2)
        .any(|pair| pair[0] == "service" && (pair[1] == "host" || pair[1] == "port"))
        || words.iter().enumerate().any(|(i, word)| {
            *word == "port"
                && (i + 1 == words.len()
                    || (words.get(i + 1).is_some_and(|n| n.parse::<u16>().is_ok())
                        && words
                            .get(i + 2)
                            .is_some_and(|p| ["tcp", "udp", "sctp"].contains(p))))
        })
}

/// What became of a `KNOOPPUNT_…` variable.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Variable {
    /// It set a setting.
    Applied,
    /// A Kubernetes Service's link: left alone, as expected.
    ServiceLink,
    /// It names no section of the file (a misspelling, most likely): left alone, and said
    /// at `warn`.
    NoSection,
}

/// Applies `KNOOPPUNT_<SECTION>_<KEY>=value` to the parsed file. The value is read as a TOML
/// value when it is one (`2097152`, `true`) and as a string otherwise; a list setting reads
/// a string as comma-separated items (`list_or_commas`). A variable that is not of a
/// setting's form (a Kubernetes Service's link, or no section of the file) is left alone. A
/// key a section does not have stops start-up, naming it.
pub(super) fn override_setting(
    table: &mut toml::Table,
    name: &str,
    setting: &str,
    value: &str,
) -> anyhow::Result<Variable> {
    if is_service_link(setting) {
        return Ok(Variable::ServiceLink);
    }
    let Some((section, key)) = ENV_SECTIONS.iter().find_map(|section| {
        let key = setting.strip_prefix(section)?.strip_prefix('_')?;
        Some((*section, key))
    }) else {
        return Ok(Variable::NoSection);
    };
    let parsed = toml::from_str::<toml::Table>(&format!("v = {value}"))
        .ok()
        .and_then(|mut t| t.remove("v"))
        .filter(|v| !v.is_table())
        .unwrap_or_else(|| toml::Value::String(value.to_owned()));
    let section = table
        .entry(section)
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let Some(section) = section.as_table_mut() else {
        bail!("{name}: `{setting}` is not in a table of the configuration file");
    };
    section.insert(key.to_owned(), parsed);
    Ok(Variable::Applied)
}

/// A log level or filter each of whose parts names a level: `warn`, or
/// `info,knooppunt_delivery=debug`. A bare word that is not a level (`warning`) would be
/// read as a module to log everything of, silencing the rest: it is refused instead.
pub(super) fn check_log_level(level: &str) -> anyhow::Result<()> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    for part in level.split(',').map(str::trim) {
        let named = part.rsplit_once('=').map_or(part, |(_, level)| level);
        if !LEVELS.contains(&named.to_ascii_lowercase().as_str()) {
            bail!(
                "log.level: `{part}` is not a level; use one of {} (or a filter such as \
                 `info,knooppunt_delivery=debug`)",
                LEVELS.join(", ")
            );
        }
    }
    Ok(())
}

/// Reads a PEM file of CA certificates; it must hold at least one.
pub(crate) fn read_ca_file(path: &Path) -> Result<Vec<u8>, String> {
    let pem =
        std::fs::read(path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    match reqwest::Certificate::from_pem_bundle(&pem) {
        Ok(certificates) if !certificates.is_empty() => Ok(pem),
        Ok(_) => Err(format!("{} holds no PEM certificate", path.display())),
        Err(error) => Err(format!(
            "{} is not a PEM certificate bundle: {error}",
            path.display()
        )),
    }
}
