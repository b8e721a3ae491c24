//! The configuration file (`config/knooppunt.toml`).

use std::path::Path;

use anyhow::Context;
use knooppunt_event::ProfileLevel;
use serde::Deserialize;

/// The whole configuration; every section has defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct Config {
    /// How published events are validated.
    pub(crate) validation: ValidationConfig,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ValidationConfig {
    /// How strictly the NL GOV profile is applied: `off`, `warn` or `enforce`.
    pub(crate) profile: ProfileLevel,
}

impl Config {
    /// Reads the file at `path`; a missing file at the default path means the defaults.
    pub(crate) fn load(path: &Path, explicit: bool) -> anyhow::Result<Config> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound && !explicit => {
                return Ok(Config::default());
            }
            Err(error) => {
                return Err(error).with_context(|| format!("cannot read {}", path.display()));
            }
        };
        Config::parse(&text).with_context(|| format!("invalid configuration in {}", path.display()))
    }

    pub(crate) fn parse(text: &str) -> anyhow::Result<Config> {
        Ok(toml::from_str(text)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_file_holds_the_defaults() {
        let shipped = include_str!("../../../config/knooppunt.toml");
        assert_eq!(Config::parse(shipped).unwrap(), Config::default());
    }

    #[test]
    fn errors_name_the_key() {
        let error = Config::parse("[validation]\nprofile = \"strict\"\n").unwrap_err();
        let message = format!("{error:#}");
        assert!(message.contains("profile"), "{message}");
        assert!(message.contains("strict"), "{message}");
        let error = Config::parse("[validation]\nprofiel = \"warn\"\n").unwrap_err();
        assert!(format!("{error:#}").contains("profiel"), "{error:#}");
    }
}
