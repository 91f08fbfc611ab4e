//! The processes under test: `genplane apiserver` children on free loopback ports, the bare
//! server child, their memory, and how long the apiserver takes to become ready.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hyper::{Method, StatusCode};
use tokio::io::AsyncBufReadExt as _;
use tokio::process::{Child, Command};

use crate::client::Client;

/// How long a child may take to start before the benchmark gives up.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running child process and a client connected to it.
#[derive(Debug)]
pub(crate) struct Server {
    child: Child,
    /// The server's URL, `https://127.0.0.1:PORT`.
    pub(crate) base: String,
    /// A connection authenticated as the admin (the kubeconfig's client certificate).
    pub(crate) client: Client,
    /// The client TLS configuration, for further connections.
    pub(crate) tls: std::sync::Arc<rustls::ClientConfig>,
    /// Where the child's output goes.
    pub(crate) log: PathBuf,
}

/// A free loopback port (free when asked; the child binds it soon after).
pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The last lines of a log, for error messages.
pub(crate) fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

fn spawn_apiserver(
    bin: &Path,
    role: &str,
    data_dir: &Path,
    port: u16,
    extra: &[String],
    log: &Path,
) -> anyhow::Result<Child> {
    let out = std::fs::File::create(log)?;
    Command::new(bin)
        .arg(role)
        .arg("--bind-address=127.0.0.1")
        .arg(format!("--secure-port={port}"))
        .arg(format!("--data-dir={}", data_dir.display()))
        .args(extra)
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("starting {}", bin.display()))
}

impl Server {
    /// Starts `genplane apiserver` on a free port with `data_dir` and `extra` flags, and waits
    /// until `/readyz` answers 200 to the admin.
    pub(crate) async fn apiserver(
        bin: &Path,
        data_dir: &Path,
        extra: &[String],
    ) -> anyhow::Result<Server> {
        Self::role(bin, "apiserver", data_dir, extra).await
    }

    /// Like [`Server::apiserver`], for `genplane ROLE` (a role taking the API server's
    /// flags, such as `all-in-one`).
    pub(crate) async fn role(
        bin: &Path,
        role: &str,
        data_dir: &Path,
        extra: &[String],
    ) -> anyhow::Result<Server> {
        Self::role_within(bin, role, data_dir, extra, START_TIMEOUT).await
    }

    /// Like [`Server::role`], giving the server `timeout` to become ready (one that starts
    /// on a large store, say).
    pub(crate) async fn role_within(
        bin: &Path,
        role: &str,
        data_dir: &Path,
        extra: &[String],
        timeout: Duration,
    ) -> anyhow::Result<Server> {
        let port = free_port()?;
        let log = data_dir.with_extension("log");
        let mut child = spawn_apiserver(bin, role, data_dir, port, extra, &log)?;
        let kubeconfig = data_dir.join("admin.kubeconfig");
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = child.try_wait()? {
                anyhow::bail!("genplane {role} exited ({status}):\n{}", tail(&log));
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "genplane {role} did not become ready:\n{}",
                tail(&log)
            );
            // The kubeconfig may be half written, the server not serving yet: try again.
            if let Ok(config) = crate::tls::kubeconfig(&kubeconfig)
                && let Ok(client) = Client::connect(&config.server, config.tls.clone()).await
                && let Ok((StatusCode::OK, _)) = client.call(Method::GET, "/readyz", None).await
            {
                return Ok(Server {
                    child,
                    base: config.server,
                    client,
                    tls: config.tls,
                    log,
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Starts the bare server (this executable with `--serve-bare routes`), trusted and
    /// authenticated with `tls`.
    pub(crate) async fn bare(
        routes: &Path,
        tls: std::sync::Arc<rustls::ClientConfig>,
    ) -> anyhow::Result<Server> {
        let log = routes.with_extension("log");
        let mut child = Command::new(std::env::current_exe()?)
            .arg("--serve-bare")
            .arg(routes)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log)?)
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut line = String::new();
        tokio::time::timeout(
            START_TIMEOUT,
            tokio::io::BufReader::new(stdout).read_line(&mut line),
        )
        .await??;
        let port: u16 = line
            .trim()
            .strip_prefix("port ")
            .with_context(|| format!("the bare server said {line:?}:\n{}", tail(&log)))?
            .parse()?;
        let base = format!("https://127.0.0.1:{port}");
        let client = Client::connect(&base, tls.clone()).await?;
        Ok(Server {
            child,
            base,
            client,
            tls,
            log,
        })
    }

    /// The child's process id.
    pub(crate) fn pid(&self) -> anyhow::Result<u32> {
        self.child.id().context("the child has exited")
    }

    /// Fails with the log's tail when the child has exited.
    pub(crate) fn check_alive(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.child.try_wait()? {
            anyhow::bail!("{} exited ({status}):\n{}", self.base, tail(&self.log));
        }
        Ok(())
    }

    /// Stops the child with SIGTERM (SIGKILL after 10 s).
    pub(crate) async fn stop(mut self) -> anyhow::Result<()> {
        terminate(&mut self.child).await
    }
}

/// Sends SIGTERM to `child` and waits for it; kills it if it is still there after 10 s.
async fn terminate(child: &mut Child) -> anyhow::Result<()> {
    if let Some(pid) = child.id() {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
            .await;
        if tokio::time::timeout(Duration::from_secs(10), child.wait())
            .await
            .is_ok()
        {
            return Ok(());
        }
    }
    child.kill().await?;
    Ok(())
}

/// `VmRSS` and `VmHWM` (peak) of a process, in KiB.
pub(crate) fn memory(pid: u32) -> anyhow::Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let field = |name: &str| -> anyhow::Result<u64> {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .with_context(|| format!("no {name} for {pid}"))?;
        Ok(line
            .trim_start_matches(name)
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()?)
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

/// The process's VmRSS in KiB once it has stopped moving: sampled every 250 ms until it
/// moved less than 1 MiB over the last 2 s, at most `limit`.
pub(crate) async fn settled(pid: u32, limit: Duration) -> anyhow::Result<u64> {
    let deadline = Instant::now() + limit;
    let mut samples: Vec<u64> = Vec::new();
    loop {
        samples.push(memory(pid)?.0);
        let recent = &samples[samples.len().saturating_sub(9)..];
        let spread = recent.iter().max().unwrap_or(&0) - recent.iter().min().unwrap_or(&0);
        if (recent.len() == 9 && spread < 1024) || Instant::now() >= deadline {
            return Ok(*samples.last().unwrap_or(&0));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// What one start measured.
pub(crate) struct Started {
    /// From the spawn until `/readyz` first answered 200.
    pub(crate) took: Duration,
    /// VmRSS at readiness, in KiB.
    pub(crate) rss: u64,
    /// VmRSS once it stopped moving after readiness (when asked for), in KiB.
    pub(crate) settled: Option<u64>,
}

/// Spawns `genplane apiserver` on `data_dir` with the `extra` flags and measures the time from
/// the spawn until `/readyz` first answers 200 (polled every millisecond, anonymously, as a
/// load balancer would), the memory then and, with `settle`, once it has settled (up to that
/// long); then stops it.
pub(crate) async fn time_to_ready(
    bin: &Path,
    data_dir: &Path,
    extra: &[String],
    settle: Option<Duration>,
) -> anyhow::Result<Started> {
    let port = free_port()?;
    let log = data_dir.with_extension("log");
    let base = format!("https://127.0.0.1:{port}");
    let tls = crate::tls::insecure()?;
    let started = Instant::now();
    let mut child = spawn_apiserver(bin, "apiserver", data_dir, port, extra, &log)?;
    let deadline = started + START_TIMEOUT;
    let mut client = None;
    let took = loop {
        if let Some(status) = child.try_wait()? {
            anyhow::bail!("the apiserver exited ({status}):\n{}", tail(&log));
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the apiserver did not become ready:\n{}",
            tail(&log)
        );
        if client.is_none()
            && let Ok(tcp) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await
        {
            client = Client::handshake(&base, tls.clone(), tcp).await.ok();
        }
        if let Some(c) = &client {
            match c.call(Method::GET, "/readyz", None).await {
                Ok((StatusCode::OK, _)) => break started.elapsed(),
                Ok(_) => {}
                Err(_) => client = None,
            }
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    };
    let pid = child.id().context("the apiserver exited")?;
    let rss = memory(pid)?.0;
    drop(client);
    let settled = match settle {
        Some(limit) => Some(settled(pid, limit).await?),
        None => None,
    };
    terminate(&mut child).await?;
    Ok(Started { took, rss, settled })
}

/// Clock ticks per second of `/proc/<pid>/stat` (`USER_HZ`, 100 on Linux).
pub(crate) const TICKS_PER_SECOND: u64 = 100;

/// The user and system CPU time of `pids` so far, all threads, in clock ticks.
pub(crate) fn cpu_ticks(pids: &[u32]) -> anyhow::Result<u64> {
    let mut ticks = 0;
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        // The fields after the command name, which is in parentheses and may hold spaces.
        let fields: Vec<&str> = stat
            .rsplit_once(')')
            .context("malformed stat")?
            .1
            .split_whitespace()
            .collect();
        // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name.
        ticks += fields[11].parse::<u64>()? + fields[12].parse::<u64>()?;
    }
    Ok(ticks)
}

/// The process id of this process's child named `name` (its `comm`).
pub(crate) fn child_named(name: &str) -> anyhow::Result<u32> {
    let me = std::process::id();
    for entry in std::fs::read_dir("/proc")? {
        let Some(pid) = entry?
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some((head, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let parent = rest
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse::<u32>().ok());
        if parent == Some(me) && head.ends_with(&format!("({name}")) {
            return Ok(pid);
        }
    }
    anyhow::bail!("no child process named {name}")
}

/// What `hack/symbol-order.sh --check` says of the executable `bin`: whether it was laid out
/// by `cmd/genplane/symbol-order.txt` and how many of the listed functions it has.
pub(crate) fn symbol_order(bin: &Path) -> anyhow::Result<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../symbol-order.sh");
    let out = std::process::Command::new(&script)
        .arg("--check")
        .arg(bin)
        .output()
        .with_context(|| format!("running {}", script.display()))?;
    anyhow::ensure!(
        out.status.success(),
        "{} failed: {}",
        script.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}
