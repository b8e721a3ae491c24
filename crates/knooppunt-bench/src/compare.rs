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
//! Each side's `ingest` runs its own load client, and a client that changed changes the
//! figure: `e663a56`'s client gives every load run the same event ids, so after its warm-up
//! a third of its measured events were duplicates (answered without being written), which
//! made its hub look faster than it was. The workload `ingest-one-client`, which `compare`
//! runs itself, measures each side's hub (`hub-process`: a fresh store and `--subscriptions`
//! subscriptions, 100 by default, like `ingest`'s) and then this tree's trivial axum server
//! under this tree's client: every event new, and each hub's share of the trivial server
//! measured beside it.
//!
//! Each side's `deliver` counts what arrives while its publishers publish, and `e663a56`'s
//! hub acknowledges faster than it delivers (a backlog that drains after the count) where
//! this tree's paces its publishers: at 16 sinks the two figures varied 0.59-1.49x from
//! round to round. The workload `deliver-one-client` gives both hubs the same client and
//! sinks and counts every delivery of what was published, to the last.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The workload that meets both hubs with the same client (see the module's text).
const ONE_CLIENT: &str = "ingest-one-client";

/// The workload that meets both hubs' delivery with the same client and sinks (see
/// [`deliver_one_client`]).
const DELIVER_ONE_CLIENT: &str = "deliver-one-client";

/// `binary`'s hub alone with `subscriptions` subscriptions, then this tree's trivial axum
/// server, each under `client`'s load (64 connections, 1 KiB events, 3 s of warm-up, then
/// `seconds`): acknowledged events/s, the hub's CPU per event and its share of the trivial
/// server. With `offered`, the hub is offered that many events/s (warm-up included) and its
/// CPU per event is the figure to read: at a rate both hubs keep up with, it depends far
/// less on what else the machine runs than a rate at saturation does. Its share of the
/// trivial server says nothing then, and neither is measured.
fn one_client(
    binary: &Path,
    client: &Path,
    seconds: u64,
    subscriptions: usize,
    offered: Option<f64>,
) -> anyhow::Result<String> {
    let load = |url: &str, seconds: u64, expect: &str, rate: Option<f64>| {
        load(client, url, seconds, 64, expect, rate)
    };
    let mut hub = Hub::start(binary, crate::ingest_subscriptions(subscriptions))?;
    let (stat, url) = (hub.stat.clone(), hub.events.clone());
    load(&url, 3, "202", offered)?;
    let before = crate::proc_cpu(&stat, 14);
    let (rate, acknowledged) = load(&url, seconds, "202", offered)?;
    let cpu = crate::proc_cpu(&stat, 14) - before;
    hub.stop();
    let per_event = if acknowledged > 0.0 {
        cpu * 1e6 / acknowledged
    } else {
        0.0
    };
    let hub_lines = format!(
        "acked/s  {rate:.0}\n\
         hub CPU per event (µs)  {per_event:.1}\n"
    );
    if let Some(offered) = offered {
        return Ok(format!(
            "the hub alone under one client offering {offered:.0} events/s, {seconds} s, \
             {subscriptions} subscriptions\n{hub_lines}"
        ));
    }
    let listen = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let mut trivial = Served::start(
        Command::new(client)
            .args(["trivial-server", "--listen"])
            .arg(listen.to_string()),
    )?;
    let url = format!("http://{listen}/");
    load(&url, 3, "204", None)?;
    let (trivial_rate, _) = load(&url, seconds, "204", None)?;
    trivial.stop();
    Ok(format!(
        "the hub alone, then trivial axum, under one client, {seconds} s, \
         {subscriptions} subscriptions\n\
         {hub_lines}\
         trivial axum acked/s  {trivial_rate:.0}\n\
         hub / trivial axum (%)  {:.0}\n",
        if trivial_rate > 0.0 {
            rate * 100.0 / trivial_rate
        } else {
            0.0
        }
    ))
}

/// `client`'s load on `url` for `seconds` over `connections` connections (1 KiB events, at
/// `rate` events/s if given, else as fast as answered): the rate and the count answered with
/// `expect`.
pub(crate) fn load(
    client: &Path,
    url: &str,
    seconds: u64,
    connections: usize,
    expect: &str,
    rate: Option<f64>,
) -> anyhow::Result<(f64, f64)> {
    let mut command = Command::new(client);
    command
        .args(["load", "--url", url, "--seconds", &seconds.to_string()])
        .args([
            "--connections",
            &connections.to_string(),
            "--event-bytes",
            "1024",
        ])
        .args(["--token", crate::TOKEN, "--expect", expect]);
    if let Some(rate) = rate {
        command.args(["--rate", &rate.to_string()]);
    }
    let output = command.output()?;
    anyhow::ensure!(
        output.status.success(),
        "the load failed: {}",
        String::from_utf8_lossy(&output.stderr).trim()
    );
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let figure = |name: &str| summary[name].as_f64().unwrap_or(0.0);
    Ok((figure("rate"), figure("acknowledged")))
}

/// `binary`'s hub alone (`hub-process`) with one subscription per sink, every event matching
/// each; the sinks in a process of this tree (`sink-process`), and this tree's load client
/// (16 connections, 1 KiB events, every event new; at `rate` events/s if given). After a
/// warm-up delivered in full, `seconds` of publishing and every delivery of what was
/// published: deliveries/s from the first publish to the last delivery, and the hub's CPU
/// per delivery over that time. Both hubs get the same work to finish whatever their pacing
/// (`e663a56` acknowledges faster than it delivers, this tree paces its publishers), so the
/// time to finish it and the CPU it took compare like for like.
fn deliver_one_client(
    binary: &Path,
    client: &Path,
    seconds: u64,
    (sinks, ordering): (usize, &str),
    rate: Option<f64>,
) -> anyhow::Result<String> {
    let counted =
        Served::start(Command::new(client).args(["sink-process", "--sinks", &sinks.to_string()]))?;
    let delivered = || -> anyhow::Result<f64> {
        let (status, body) = request(&counted.base, "GET", "/", "")?;
        anyhow::ensure!(status == 200, "the sinks' count answered {status}");
        Ok(body.trim().parse()?)
    };
    let (_, urls) = request(&counted.base, "GET", "/sinks", "")?;
    let urls: Vec<String> = urls.lines().map(str::to_owned).collect();
    anyhow::ensure!(
        urls.len() == sinks,
        "the sink process named {} sinks",
        urls.len()
    );
    let mut hub = Hub::start(binary, crate::ordering_subscriptions(&urls, ordering))?;
    let (stat, url) = (hub.stat.clone(), hub.events.clone());
    // Until `expected` deliveries arrived in all (at most a minute); when the last did.
    let all_in = |expected: f64| -> anyhow::Result<std::time::Instant> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let now = delivered()?;
            if now >= expected {
                return Ok(std::time::Instant::now());
            }
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "{now} of {expected} deliveries arrived in a minute"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    };
    let (_, warm) = load(client, &url, 2, 16, "202", rate)?;
    all_in(warm * sinks as f64)?;
    let before = delivered()?;
    let cpu_before = crate::proc_cpu(&stat, 14);
    let started = std::time::Instant::now();
    let (published, acknowledged) = load(client, &url, seconds, 16, "202", rate)?;
    let deliveries = acknowledged * sinks as f64;
    let finished = all_in(before + deliveries)?;
    let cpu = crate::proc_cpu(&stat, 14) - cpu_before;
    hub.stop();
    let took = finished.duration_since(started).as_secs_f64();
    Ok(format!(
        "each side's hub in its own process, {sinks} sinks in another ({ordering}), under one \
         client (16 connections, 1 KiB events{}), {seconds} s, then until every delivery \
         arrived\n\
         published/s  {published:.0}\n\
         deliveries/s, first publish to last delivery  {:.0}\n\
         seconds to the last delivery  {took:.2}\n\
         hub CPU per delivery (µs)  {:.2}\n",
        rate.map(|rate| format!(", {rate:.0}/s"))
            .unwrap_or_default(),
        deliveries / took,
        cpu * 1e6 / deliveries.max(1.0),
    ))
}

/// `binary`'s hub in a process of its own (`hub-process`) on a fresh store, with these
/// subscriptions; stopped (and its store removed) when dropped.
pub(crate) struct Hub {
    served: Served,
    /// Its `/proc/<pid>/stat`, for the CPU it used.
    pub(crate) stat: String,
    /// Where events are published.
    pub(crate) events: String,
    /// Removed after the hub stopped (fields drop in this order).
    _data: tempfile::TempDir,
}

impl Hub {
    pub(crate) fn start(
        binary: &Path,
        subscriptions: Vec<serde_json::Value>,
    ) -> anyhow::Result<Hub> {
        let data = tempfile::tempdir()?;
        let served = Served::start(
            Command::new(binary)
                .args(["hub-process", "--data"])
                .arg(data.path()),
        )?;
        let hub = Hub {
            stat: format!("/proc/{}/stat", served.child.id()),
            events: format!("{}/v1/events", served.base),
            served,
            _data: data,
        };
        for body in subscriptions {
            let (status, _) = request(
                &hub.served.base,
                "POST",
                "/v1/subscriptions",
                &body.to_string(),
            )?;
            anyhow::ensure!(status == 201, "creating a subscription answered {status}");
        }
        Ok(hub)
    }

    pub(crate) fn stop(&mut self) {
        self.served.stop();
    }
}

/// A server in a child process, killed when dropped.
struct Served {
    child: std::process::Child,
    /// The address its first line names (`http://…`).
    base: String,
}

impl Served {
    fn start(command: &mut Command) -> anyhow::Result<Self> {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let mut line = String::new();
        if let Some(stdout) = child.stdout.take() {
            std::io::BufReader::new(stdout).read_line(&mut line)?;
        }
        let mut served = Served {
            child,
            base: String::new(),
        };
        let Some(at) = line.find("http://") else {
            anyhow::bail!("the server printed {:?}", line.trim());
        };
        let address = line[at..].split_whitespace().next().unwrap_or_default();
        served.base = address.trim_end_matches('/').to_owned();
        Ok(served)
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.stop();
    }
}

/// `method` (`body`: JSON) on `base` + `path` with the bench's token; the answer's status
/// and body.
fn request(base: &str, method: &str, path: &str, body: &str) -> anyhow::Result<(u16, String)> {
    use std::io::{Read, Write};
    let address = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address)?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        crate::TOKEN,
        body.len()
    )?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|status| status.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("an answer that is not HTTP: {answer:?}"))?;
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, body)| body)
        .to_owned();
    Ok((status, body))
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

/// The `--rate` among the workload's arguments, if one is given.
fn offered(extra: &[String]) -> Option<f64> {
    extra
        .iter()
        .any(|arg| arg == "--rate")
        .then(|| flag(extra, "--rate", 0.0))
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

/// Runs `binary` with `args`; its output.
fn run(binary: &Path, args: &[String]) -> anyhow::Result<String> {
    let output = Command::new(binary).args(args).output()?;
    anyhow::ensure!(
        output.status.success(),
        "{} {} failed: {}",
        binary.display(),
        args.join(" "),
        String::from_utf8_lossy(&output.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
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
                settle();
                println!("== {workload}, round {round}: {name}");
                let before = children_cpu();
                let output = match workload.as_str() {
                    ONE_CLIENT => one_client(
                        binary,
                        &current,
                        flag(extra, "--seconds", 8),
                        flag(extra, "--subscriptions", 100),
                        offered(extra),
                    )?,
                    DELIVER_ONE_CLIENT => deliver_one_client(
                        binary,
                        &current,
                        flag(extra, "--seconds", 5),
                        (
                            flag(extra, "--sinks", 16),
                            &flag(extra, "--ordering", "unordered".to_owned()),
                        ),
                        offered(extra),
                    )?,
                    _ => run(binary, &args)?,
                };
                let cpu = children_cpu() - before;
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

/// Lets the last run's writes reach the disk before the next run starts: the run after
/// one that left a large log behind (e663a56's `deliver` at 16 sinks, its publishers not
/// paced) was slower, most likely its `fdatasync`s while the kernel wrote that log back
/// (0.82-0.84x at 16 sinks without this, 0.98x with it).
fn settle() {
    let _ = Command::new("sync").status();
    std::thread::sleep(std::time::Duration::from_secs(3));
}

/// The value of `name` among the extra arguments; `default` when absent.
fn flag<T: std::str::FromStr>(extra: &[String], name: &str, default: T) -> T {
    extra
        .iter()
        .position(|arg| arg == name)
        .and_then(|at| extra.get(at + 1))
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
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
