//! `knooppunt-bench compare <git-ref>`: the working tree's bench against another commit's,
//! interleaved on this machine. The ref is checked out into a worktree under
//! `target/compare/<commit>` and built (release) into `target/compare/build/<commit>`, a
//! target directory of its own per commit (a shared one reused other refs' artifacts of the
//! workspace's crates); then each chosen workload
//! runs with the ref's binary and with this one, alternately, `rounds` times. Both outputs
//! are printed, then, for every line the two print alike, the ratio of its first figure,
//! and the machine CPU (user and system, from `/proc/self/stat` of this process's waited-for
//! children) each run used.
//!
//! Each side's `ingest` runs its own load client, so a client that got dearer shows as a
//! slower hub on a machine whose cores the two share. The workload `ingest-one-client`,
//! which `compare` runs itself, puts each side's hub alone (`hub-process`: a fresh store,
//! no subscriptions) under this tree's client instead.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The workload that meets both hubs with the same client (see the module's text).
const ONE_CLIENT: &str = "ingest-one-client";

/// `binary`'s hub alone under `client`'s load (64 connections, 1 KiB events, 3 s of
/// warm-up, then `seconds`): acknowledged events/s and the hub's CPU per event.
fn one_client(binary: &Path, client: &Path, seconds: u64) -> anyhow::Result<String> {
    let data = tempfile::tempdir()?;
    let mut hub = Command::new(binary)
        .args(["hub-process", "--data"])
        .arg(data.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut base = String::new();
    if let Some(stdout) = hub.stdout.take() {
        std::io::BufReader::new(stdout).read_line(&mut base)?;
    }
    let base = base.trim();
    let stat = format!("/proc/{}/stat", hub.id());
    let measured = (|| {
        anyhow::ensure!(base.starts_with("http://"), "the hub printed {base:?}");
        let url = format!("{base}/v1/events");
        let load = |seconds: u64| -> anyhow::Result<serde_json::Value> {
            let seconds = seconds.to_string();
            let args = [
                "load",
                "--url",
                &url,
                "--seconds",
                &seconds,
                "--connections",
                "64",
            ];
            let output = Command::new(client)
                .args(args)
                .args([
                    "--event-bytes",
                    "1024",
                    "--token",
                    crate::TOKEN,
                    "--expect",
                    "202",
                ])
                .output()?;
            anyhow::ensure!(
                output.status.success(),
                "the load failed: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
            Ok(serde_json::from_slice(&output.stdout)?)
        };
        load(3)?;
        let before = crate::proc_cpu(&stat, 14);
        let summary = load(seconds)?;
        let cpu = crate::proc_cpu(&stat, 14) - before;
        let acknowledged = summary["acknowledged"].as_f64().unwrap_or(0.0);
        let per_event = if acknowledged > 0.0 {
            cpu * 1e6 / acknowledged
        } else {
            0.0
        };
        Ok(format!(
            "the hub alone under one client, {seconds} s, no subscriptions\n\
             acked/s  {:.0}\n\
             hub CPU per event (µs)  {per_event:.1}\n",
            summary["rate"].as_f64().unwrap_or(0.0)
        ))
    })();
    let _ = hub.kill();
    let _ = hub.wait();
    measured
}

/// The CPU time (user + system, seconds) of this process's waited-for descendants.
fn children_cpu() -> f64 {
    crate::proc_self_cpu(16)
}

fn git(root: &Path, args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new("git").current_dir(root).args(args).output()?;
    anyhow::ensure!(
        output.status.success(),
        "git {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(String::from_utf8(output.stdout)?.trim().to_owned())
}

/// Builds `reference` and returns its bench binary.
fn build(root: &Path, reference: &str) -> anyhow::Result<PathBuf> {
    let commit = git(
        root,
        &["rev-parse", "--verify", &format!("{reference}^{{commit}}")],
    )?;
    let compare = root.join("target").join("compare");
    let tree = compare.join(&commit[..12]);
    if !tree.exists() {
        git(
            root,
            &[
                "worktree",
                "add",
                "--detach",
                &tree.to_string_lossy(),
                &commit,
            ],
        )?;
    }
    // A target directory per commit: cargo names a workspace crate's artifacts alike in
    // every checkout, so in a shared one a crate whose dependencies did not change was
    // taken from the last ref built, not built from this one.
    let target = compare.join("build").join(&commit[..12]);
    eprintln!(
        "building {reference} ({}) in {}",
        &commit[..12],
        tree.display()
    );
    let status = Command::new("cargo")
        .current_dir(&tree)
        .env("CARGO_TARGET_DIR", &target)
        .args(["build", "--release", "-q", "-p", "knooppunt-bench"])
        .status()?;
    anyhow::ensure!(status.success(), "building {reference} failed");
    // Keep a copy per commit: the next ref's build overwrites the shared target's binary.
    let binary = compare.join(format!("knooppunt-bench-{}", &commit[..12]));
    std::fs::copy(target.join("release").join("knooppunt-bench"), &binary)?;
    Ok(binary)
}

/// Runs `binary` with `args`; its output and the CPU it used.
fn run(binary: &Path, args: &[String]) -> anyhow::Result<(String, f64)> {
    let before = children_cpu();
    let output = Command::new(binary).args(args).output()?;
    let cpu = children_cpu() - before;
    anyhow::ensure!(
        output.status.success(),
        "{} {} failed: {}",
        binary.display(),
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok((String::from_utf8_lossy(&output.stdout).into_owned(), cpu))
}

/// A line's label (its text up to the first run of two spaces, or up to a `:`) and the
/// figures after it (each word that starts with a digit, read up to its unit: `34794/s`,
/// `0.24`, `55%`).
fn figures(line: &str) -> Option<(String, Vec<f64>)> {
    let line = line.trim();
    let split = line
        .find("  ")
        .or_else(|| line.find(": ").map(|at| at + 1))?;
    let (label, rest) = line.split_at(split);
    let label = label.trim().trim_end_matches(':');
    let numbers: Vec<f64> = rest
        .split_whitespace()
        .filter_map(|word| {
            let number: String = word
                .chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect();
            number.parse().ok()
        })
        .collect();
    if label.is_empty() || numbers.is_empty() {
        return None;
    }
    Some((label.to_owned(), numbers))
}

/// A table's heading: the names of its columns (a line of words only, two or more).
fn columns(line: &str) -> Option<Vec<String>> {
    let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
    let only_words = words
        .iter()
        .all(|word| !word.starts_with(|c: char| c.is_ascii_digit()));
    (words.len() >= 2 && only_words && line.starts_with("   ")).then_some(words)
}

/// Every figure of an output, named by its line's label and, in a table, its column.
fn named_figures(output: &str) -> Vec<(String, f64)> {
    let mut heading: Option<Vec<String>> = None;
    let mut named = Vec::new();
    for line in output.lines() {
        if let Some(words) = columns(line) {
            heading = Some(words);
            continue;
        }
        let Some((label, numbers)) = figures(line) else {
            continue;
        };
        match &heading {
            Some(names) if names.len() == numbers.len() && numbers.len() > 1 => {
                for (name, number) in names.iter().zip(numbers) {
                    named.push((format!("{label}, {name}"), number));
                }
            }
            _ => named.push((label, numbers[0])),
        }
    }
    named
}

pub(crate) fn compare(
    reference: &str,
    workloads: &[String],
    rounds: usize,
    extra: &[String],
) -> anyhow::Result<()> {
    let root = PathBuf::from(git(Path::new("."), &["rev-parse", "--show-toplevel"])?);
    let base = build(&root, reference)?;
    let current = std::env::current_exe()?;
    let head = git(&root, &["rev-parse", "--short=12", "HEAD"])?;
    let dirty = !git(&root, &["status", "--porcelain", "--untracked-files=no"])?.is_empty();
    let this = format!("{head}{}", if dirty { "+changes" } else { "" });
    for workload in workloads {
        let mut args = vec![workload.clone()];
        args.extend(extra.iter().cloned());
        for round in 1..=rounds {
            for (name, binary) in [(reference, &base), (this.as_str(), &current)] {
                println!("== {workload}, round {round}: {name}");
                let (output, cpu) = if workload == ONE_CLIENT {
                    let before = children_cpu();
                    let output = one_client(binary, &current, seconds(extra))?;
                    (output, children_cpu() - before)
                } else {
                    run(binary, &args)?
                };
                print!("{output}");
                println!("   (CPU used by the run: {cpu:.1} s)");
                if name == reference {
                    BASE_OUTPUT.with(|b| *b.borrow_mut() = output);
                } else {
                    let base_output = BASE_OUTPUT.with(|b| b.borrow().clone());
                    ratios(&base_output, &output);
                }
            }
        }
    }
    Ok(())
}

/// The `--seconds` among the extra arguments; 8 when none.
fn seconds(extra: &[String]) -> u64 {
    extra
        .iter()
        .position(|arg| arg == "--seconds")
        .and_then(|at| extra.get(at + 1))
        .and_then(|value| value.parse().ok())
        .unwrap_or(8)
}

thread_local! {
    static BASE_OUTPUT: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// The ratio (this / base) of every figure the two outputs print alike.
fn ratios(base: &str, this: &str) {
    let base = named_figures(base);
    for (label, value) in named_figures(this) {
        if let Some((_, was)) = base.iter().find(|(l, _)| *l == label)
            && *was > 0.0
        {
            println!("   ratio {label}: {:.2}", value / was);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table's rows give a ratio per column; a line of its own, its first figure.
    #[test]
    fn figures_are_named_by_line_and_column() {
        let output = "deliver: 16 publishing connections, 1 sinks\n\
            \x20                                published     delivered        p50        p99   backlog\n\
            plain forwarding hop               34794/s       34805/s    0.24 ms    0.43 ms         0\n\
            knooppunt (durable, unordered)     20812/s       19154/s  336.57 ms  422.93 ms         0\n\
            delivered: knooppunt / forwarding hop: 55%\n";
        let named = named_figures(output);
        assert!(named.contains(&("knooppunt (durable, unordered), delivered".into(), 19154.0)));
        assert!(named.contains(&("knooppunt (durable, unordered), p99".into(), 422.93)));
        assert!(named.contains(&("plain forwarding hop, published".into(), 34794.0)));
        assert!(named.contains(&("delivered".into(), 55.0)));
        assert_eq!(
            named_figures("acked/s  55285\n"),
            vec![("acked/s".into(), 55285.0)]
        );
    }
}
