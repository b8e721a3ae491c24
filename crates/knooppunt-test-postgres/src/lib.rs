//! Throwaway PostgreSQL clusters for tests, from the PostgreSQL server binaries (`initdb`,
//! `pg_ctl`, `psql`; Debian's `postgresql` package). [`Cluster::start`] makes one on a
//! temporary directory and a free loopback port; dropping it stops the server (immediate
//! shutdown) and removes the directory. When the binaries are missing it installs the
//! package with apt (as root, or through `sudo -n`), so that a fresh machine needs nothing
//! but the repository's test command; no test is skipped for lack of a database.
//!
//! Its default collation is linguistic (ICU `nl-NL`), as on a Dutch operator's cluster, not
//! the bytewise "C" that would hide an order that depends on it.
//!
//! As root (containers, CI), the server runs as the `postgres` user the package creates:
//! PostgreSQL refuses to run as root.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Mutex;

/// A running throwaway cluster. Trust authentication on 127.0.0.1 only, superuser
/// `knooppunt`.
#[derive(Debug)]
pub struct Cluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    as_postgres: bool,
    /// Stops the server and removes its directory if this process dies without dropping
    /// the cluster (killed, or a timeout): no server outlives its test.
    watchdog: Option<std::process::Child>,
}

/// Installing is done once per process, and never by two test threads at once.
static INSTALL: Mutex<()> = Mutex::new(());

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// The directory with `initdb`, `pg_ctl` and `psql`, newest version first.
fn find_binaries() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Some(bin);
    }
    // Elsewhere (not Debian): whatever `pg_ctl` is on the PATH.
    let output = Command::new("pg_config").arg("--bindir").output().ok()?;
    let bin = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    bin.join("initdb").exists().then_some(bin)
}

fn install() {
    let _once = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    if find_binaries().is_some() {
        return;
    }
    let apt = |args: &[&str]| {
        let mut command = if is_root() {
            Command::new("apt-get")
        } else {
            let mut sudo = Command::new("sudo");
            sudo.args(["-n", "apt-get"]);
            sudo
        };
        command
            .args(args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .output()
    };
    eprintln!("PostgreSQL is not installed; installing Debian's postgresql package for the tests");
    let _ = apt(&["update", "-qq"]);
    let installed = apt(&["install", "-y", "-qq", "postgresql"]);
    match installed {
        Ok(output) if output.status.success() => {}
        Ok(output) => panic!(
            "installing PostgreSQL failed; install Debian's `postgresql` package: {}",
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(error) => {
            panic!("installing PostgreSQL failed ({error}); install Debian's `postgresql` package")
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn check(what: &str, output: std::io::Result<Output>) -> Output {
    let output = output.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

impl Cluster {
    /// Creates and starts a cluster (a second or two).
    pub fn start() -> Cluster {
        Cluster::start_with(&[])
    }

    /// The same with these server settings (`name=value`, as `postgres -c` takes them).
    pub fn start_with(settings: &[&str]) -> Cluster {
        let bin = find_binaries().unwrap_or_else(|| {
            install();
            find_binaries().expect("the postgresql package installs initdb")
        });
        let as_postgres = is_root();
        let dir = tempfile::Builder::new()
            .prefix("knooppunt-pg-")
            .tempdir()
            .expect("a temporary directory");
        if as_postgres {
            check(
                "chown the cluster directory to postgres",
                Command::new("chown")
                    .args(["-R", "postgres:postgres"])
                    .arg(dir.path())
                    .output(),
            );
        }
        let mut cluster = Cluster {
            bin,
            dir,
            port: 0,
            as_postgres,
            watchdog: None,
        };
        let data = cluster.data();
        check(
            "initdb",
            cluster
                .command("initdb")
                .args(["--auth=trust", "--username=knooppunt", "--encoding=UTF8"])
                // A linguistic default collation, as an operator's cluster usually has:
                // what the hub lists must not depend on it.
                .args(["--locale=C", "--locale-provider=icu", "--icu-locale=nl-NL"])
                .args(["--no-sync", "-D"])
                .arg(&data)
                .output(),
        );
        // A port taken between finding it free and the server binding it: try another.
        for attempt in 0..5 {
            cluster.port = free_port();
            let mut options = format!(
                "-p {} -k {} -c listen_addresses=127.0.0.1 -c max_connections=200",
                cluster.port,
                cluster.dir.path().display()
            );
            for setting in settings {
                options.push_str(" -c ");
                options.push_str(setting);
            }
            let started = cluster
                .command("pg_ctl")
                .args(["-w", "-t", "60", "-D"])
                .arg(&data)
                .args(["-l"])
                .arg(cluster.dir.path().join("server.log"))
                .args(["-o", &options, "start"])
                .output()
                .expect("pg_ctl");
            if started.status.success() {
                cluster.watchdog = cluster.watch();
                return cluster;
            }
            if attempt == 4 {
                let log = std::fs::read_to_string(cluster.dir.path().join("server.log"))
                    .unwrap_or_default();
                panic!(
                    "pg_ctl start failed: {}{}\n{log}",
                    String::from_utf8_lossy(&started.stdout),
                    String::from_utf8_lossy(&started.stderr)
                );
            }
        }
        unreachable!("the loop returns or panics")
    }

    /// A shell that waits for this process to end, then stops the server (if it still
    /// runs) and removes the directory.
    fn watch(&self) -> Option<std::process::Child> {
        let pg_ctl = self.bin.join("pg_ctl");
        let stop = if self.as_postgres {
            format!("runuser -u postgres -- '{}'", pg_ctl.display())
        } else {
            format!("'{}'", pg_ctl.display())
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
             {stop} -D '{data}' -m immediate -w stop >/dev/null 2>&1; rm -rf '{dir}'",
            pid = std::process::id(),
            data = self.data().display(),
            dir = self.dir.path().display(),
        );
        Command::new("sh")
            .args(["-c", &script])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// One of the server binaries, run as `postgres` when the tests run as root.
    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(path);
            command
        } else {
            Command::new(path)
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The connection URL of database `name` (see [`Cluster::create_database`]).
    pub fn url(&self, name: &str) -> String {
        format!("postgres://knooppunt@127.0.0.1:{}/{name}", self.port)
    }

    /// Creates an empty database and returns its URL.
    pub fn create_database(&self, name: &str) -> String {
        self.psql("postgres", &format!("CREATE DATABASE \"{name}\""));
        self.url(name)
    }

    /// Runs one SQL command in database `database` and returns what `psql` printed
    /// (unaligned, tuples only).
    pub fn psql(&self, database: &str, sql: &str) -> String {
        let output = check(
            "psql",
            Command::new(self.bin.join("psql"))
                .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
                .args(["-U", "knooppunt", "-d", database, "-c", sql])
                .output(),
        );
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    /// Runs the SQL file `file` (such as a `pg_dump`) in database `database`, stopping at the
    /// first error.
    pub fn psql_file(&self, database: &str, file: &Path) {
        check(
            "psql -f",
            Command::new(self.bin.join("psql"))
                .args(["-X", "-q", "-v", "ON_ERROR_STOP=1"])
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
                .args(["-U", "knooppunt", "-d", database, "-f"])
                .arg(file)
                .output(),
        );
    }

    /// A client program of this cluster's version (`pg_dump`, `pg_restore`), not started;
    /// give it the connection with `-h 127.0.0.1 -p <port> -U knooppunt`.
    pub fn client(&self, program: &str) -> Command {
        let mut command = Command::new(self.bin.join(program));
        command.args([
            "-h",
            "127.0.0.1",
            "-p",
            &self.port.to_string(),
            "-U",
            "knooppunt",
        ]);
        command
    }

    /// How often `database` ran statements whose text is `LIKE` `pattern`, by
    /// `pg_stat_statements` (the cluster must load it and the database have the extension);
    /// a statement that failed is not counted.
    pub fn statement_calls(&self, database: &str, pattern: &str) -> u64 {
        self.psql(
            database,
            &format!(
                "SELECT COALESCE(sum(calls), 0)::bigint FROM pg_stat_statements \
                 WHERE query LIKE '{pattern}'"
            ),
        )
        .parse()
        .expect("a count")
    }

    /// The server's log so far (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// The cluster's directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
        let _ = self
            .command("pg_ctl")
            .args(["-D"])
            .arg(self.data())
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}
