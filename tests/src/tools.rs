//! Third-party tools the tests check the hub with (npm and PyPI packages), installed into
//! `target/tools/<name>` on first use.
//!
//! A tool's directory appears only complete: it is installed into a staging directory of
//! its own and renamed into place after the install succeeded, so a test running beside the
//! install (another thread, or another test binary) never sees half of it, and an
//! interrupted install is started again instead of being taken for done.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// Written last into a complete tool directory.
const COMPLETE: &str = ".complete";

fn tools_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/tools")
}

/// `target/tools/<name>`, installed by `install` (given the directory to install into) if
/// it is not there complete yet.
pub fn installed(name: &str, install: impl FnOnce(&Path) -> Result<(), String>) -> PathBuf {
    static INSTALLING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = INSTALLING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = tools_dir().join(name);
    if dir.join(COMPLETE).exists() {
        return dir;
    }
    let staging = tools_dir().join(format!(".{name}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(&staging).unwrap();
    if let Err(problem) = install(&staging) {
        let _ = std::fs::remove_dir_all(&staging);
        panic!("installing {name} for the tests failed: {problem}");
    }
    std::fs::write(staging.join(COMPLETE), b"").unwrap();
    if !dir.join(COMPLETE).exists() {
        // An incomplete directory from an interrupted install goes; a complete one that
        // another test binary renamed into place meanwhile stays.
        let _ = std::fs::remove_dir_all(&dir);
        if std::fs::rename(&staging, &dir).is_ok() {
            return dir;
        }
    }
    let _ = std::fs::remove_dir_all(&staging);
    assert!(
        dir.join(COMPLETE).exists(),
        "installing {name} for the tests: {} did not appear",
        dir.display()
    );
    dir
}

/// An npm package (`package@version`), installed with its dependencies under
/// `target/tools/<name>/node_modules`.
pub fn npm(name: &str, package: &str) -> PathBuf {
    installed(name, |dir| {
        let status = Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
            .arg(dir)
            .arg(package)
            .status()
            .map_err(|error| format!("npm is needed to install {package}: {error}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("npm install {package}: {status}"))
        }
    })
}

/// PyPI packages (pip requirements, separated by spaces), installed with their
/// dependencies into `target/tools/<name>`, a directory of its own for `PYTHONPATH`, never
/// the system's packages.
pub fn pip(name: &str, requirement: &str) -> PathBuf {
    installed(name, |dir| {
        // Debian's pip wants --break-system-packages said even for a directory of its own;
        // older pips do not know the flag.
        let install = |extra: &[&str]| {
            Command::new("python3")
                .args(["-m", "pip", "install", "--quiet", "--target"])
                .arg(dir)
                .args(extra)
                .args(requirement.split_whitespace())
                .status()
                .map(|status| status.success())
                .map_err(|error| {
                    format!("python3 with pip is needed (Debian: python3-pip): {error}")
                })
        };
        if install(&["--break-system-packages"])? || install(&[])? {
            Ok(())
        } else {
            Err(format!("pip install {requirement} failed"))
        }
    })
}
