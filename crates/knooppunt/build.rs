//! Names the commit the binary is built from (`KNOOPPUNT_COMMIT`): the variable of that
//! name when the build sets it (a container build without `.git`), else `git rev-parse`,
//! else `unknown`.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=KNOOPPUNT_COMMIT");
    let commit = std::env::var("KNOOPPUNT_COMMIT")
        .ok()
        .filter(|commit| !commit.trim().is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=KNOOPPUNT_COMMIT={}", commit.trim());
}

/// The checked-out commit, and what makes this script run again when it changes.
fn git_commit() -> Option<String> {
    let git = |args: &[&str]| {
        let output = Command::new("git").args(args).output().ok()?;
        output
            .status
            .success()
            .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
    };
    let git_dir = git(&["rev-parse", "--git-dir"])?;
    let git_dir = Path::new(&git_dir);
    // HEAD names the branch; the branch's file (or packed-refs) names the commit. Only
    // files that exist are watched (Cargo would run this again on every build for others).
    let mut watched = vec![git_dir.join("HEAD"), git_dir.join("packed-refs")];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(git_dir.join(branch));
    }
    for file in watched.iter().filter(|file| file.exists()) {
        println!("cargo:rerun-if-changed={}", file.display());
    }
    git(&["rev-parse", "--short=12", "HEAD"])
}
