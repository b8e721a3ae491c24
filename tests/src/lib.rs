//! The test harness shared by the scenarios in `scenarios/`: where the specifications are,
//! and (as the hub grows) how to start it and a recording sink.

use std::path::PathBuf;

/// `../shared/specs` beside the checkout: the specifications this project implements.
pub fn specs_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/specs");
    assert!(
        dir.is_dir(),
        "the specifications are expected at {}: check out `shared/` beside this repository",
        dir.display()
    );
    dir
}

/// Reads a file below `../shared/specs`.
pub fn read_spec(path: &str) -> String {
    let path = specs_dir().join(path);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", path.display()))
}
