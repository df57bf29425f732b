//! The control socket: a unix stream socket, mode 0600, that answers `status` with the
//! daemon's [`DaemonStatus`] as one JSON line, and takes `job-task {json}` lines from the
//! Slurm SPANK plugin (a task of a job started or exited, see [`super::jobs`]).
//!
//! Why a socket and not a file: the status is the daemon's memory, only valid while it
//! runs; a reader that cannot connect knows at once that no daemon is there. Safety:
//! only root, or the user the daemon runs as, is answered (`SO_PEERCRED`); a symlink at
//! the socket path is refused rather than followed; a live socket of another daemon is
//! never taken over (two schedulers would fight), a stale one is replaced.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use nix::sys::stat::{umask, Mode};
use numasched_model::files::MadeDir;

use super::conns::{self, Conns};
use super::jobs::{Jobs, TaskEvent, TaskEventKind};
use super::status::DaemonStatus;
use super::status_board::Board;
use numasched_linux::observe::slurm::JobStep;

/// How long a client may take to send its request, so a stuck client cannot hold the
/// server thread.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error("{}: cannot create the control socket: {err} (pass --socket PATH to use another place)", path.display())]
    Create { path: PathBuf, err: std::io::Error },
    #[error("{}: is a symlink; refusing to follow it for the control socket", path.display())]
    Symlink { path: PathBuf },
    #[error("{}: exists and is not a socket; refusing to replace it", path.display())]
    NotSocket { path: PathBuf },
    #[error("{}: another numasched daemon is listening there; stop it first (two schedulers would undo each other)", path.display())]
    InUse { path: PathBuf },
    #[error("cannot reach the numasched daemon at {}: {err} ({hint})", path.display())]
    Unreachable {
        path: PathBuf,
        err: std::io::Error,
        hint: &'static str,
    },
    #[error("the numasched daemon at {}: {what}", path.display())]
    Protocol { path: PathBuf, what: String },
}

/// The status board the epoch loop answers and the servers read.
pub type Shared = Arc<Board>;

/// How long a reader waits for the loop to build the status (it builds between
/// epochs; an epoch in progress can take this long on a loaded machine).
pub const STATUS_PATIENCE: Duration = Duration::from_secs(3);

/// A bound control socket; the file is removed when dropped.
pub struct Server {
    path: PathBuf,
    /// The socket's directory, if this start made it; goes after the socket.
    _dir: MadeDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Refuses a symlink or anything but a socket at the path. Looks only, so the start
/// can check every path before it writes any ([`super::paths`]).
pub fn check_path(path: &Path) -> Result<(), SocketError> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(SocketError::Symlink { path: path.into() }),
        Ok(m) if !m.file_type().is_socket() => Err(SocketError::NotSocket { path: path.into() }),
        _ => Ok(()),
    }
}

/// Prepares the path: refuses symlinks, other files and a live daemon; removes a stale
/// socket; creates its own directory (0755) if missing, not the ones above it, and
/// returns it then.
fn prepare(path: &Path) -> Result<Option<PathBuf>, SocketError> {
    check_path(path)?;
    // A socket is there: a live daemon's, or one a killed daemon left.
    if std::fs::symlink_metadata(path).is_ok() {
        if UnixStream::connect(path).is_ok() {
            return Err(SocketError::InUse { path: path.into() });
        }
        std::fs::remove_file(path).map_err(|err| SocketError::Create {
            path: path.into(),
            err,
        })?;
    }
    let made = numasched_model::files::create_dir_of(
        path,
        0o755,
        Path::new(super::config::DEFAULT_SOCKET),
    )
    .map_err(|e| SocketError::Create {
        path: path.into(),
        err: std::io::Error::other(e.without_path()),
    })?;
    if let Some(dir) = &made {
        tracing::info!(directory = %dir.display(), "created the control socket's directory");
    }
    Ok(made)
}

/// A socket bound but not yet answered. The daemon binds, drops its capabilities, and
/// only then starts the thread that answers: a thread started before the drop would
/// keep every capability.
pub struct Bound {
    listener: UnixListener,
    server: Server,
}

impl Bound {
    /// Answers `shared` from a background thread, and tells `jobs` what the SPANK
    /// plugin says.
    pub fn serve(self, shared: Shared, jobs: Option<Arc<Jobs>>) -> Result<Server, SocketError> {
        let Bound { listener, server } = self;
        std::thread::Builder::new()
            .name("numasched-socket".into())
            .spawn(move || serve(listener, shared, jobs))
            .map_err(|err| SocketError::Create {
                path: server.path.clone(),
                err,
            })?;
        Ok(server)
    }
}

impl Server {
    /// Binds the socket and serves `shared` from a background thread.
    pub fn start(path: &Path, shared: Shared) -> Result<Server, SocketError> {
        Server::bind(path)?.serve(shared, None)
    }

    /// Binds the socket, mode 0600; nothing answers until [`Bound::serve`].
    pub fn bind(path: &Path) -> Result<Bound, SocketError> {
        let dir = MadeDir::new(prepare(path)?);
        let create = |err| SocketError::Create {
            path: path.into(),
            err,
        };
        // Bind with a umask that leaves only the owner's bits, so the socket is never
        // reachable by others even for the instant before the chmod below.
        let old = umask(Mode::from_bits_truncate(0o177));
        let bound = UnixListener::bind(path);
        umask(old);
        let listener = bound.map_err(create)?;
        // From here on the file is ours: dropping `server` on an error removes it.
        let server = Server {
            path: path.into(),
            _dir: dir,
        };
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(create)?;
        Ok(Bound { listener, server })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn serve(listener: UnixListener, shared: Shared, jobs: Option<Arc<Jobs>>) {
    let me = nix::unistd::geteuid().as_raw();
    let conns = Conns::new();
    for conn in listener.incoming() {
        let Ok(stream) = conn else { continue };
        let allowed = getsockopt(&stream, PeerCredentials)
            .map(|c| c.uid() == 0 || c.uid() == me)
            .unwrap_or(false);
        let shared = Arc::clone(&shared);
        let jobs = jobs.clone();
        conns.spawn("numasched-status", stream, BUSY, move |s, req| {
            let _ = answer(s, &shared, jobs.as_deref(), allowed, &req);
        });
    }
}

/// What a client turned away for want of room reads.
const BUSY: &[u8] = b"{\"error\":\"busy: 32 clients are being served at once; try again\"}\n";

fn answer(
    mut stream: UnixStream,
    shared: &Shared,
    jobs: Option<&Jobs>,
    allowed: bool,
    req: &conns::Request,
) -> std::io::Result<()> {
    stream.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let mut w = stream.try_clone()?;
    // The request is read before anything is answered, a refused peer's included:
    // closing on a client that is still writing would give it EPIPE instead of the
    // reason. One bounded line by one deadline, so a client that never sends a
    // newline, or sends it a byte at a time, cannot hold the connection.
    let Some(bytes) = conns::read_until(&mut stream, req, 4096, |b| {
        b.iter().position(|&c| c == b'\n')
    })?
    else {
        return Ok(());
    };
    let line = String::from_utf8_lossy(&bytes).into_owned();
    if !allowed {
        return writeln!(w, "{{\"error\":\"permission denied: only root may ask\"}}");
    }
    let reply = match line.trim() {
        "status" => match shared.current(STATUS_PATIENCE) {
            Some(st) => serde_json::to_string(&st).unwrap_or_else(|e| error_json(&e.to_string())),
            None => match shared.epochs() {
                0 => error_json("starting: no epoch has run yet"),
                n => error_json(&format!(
                    "busy: the epoch after epoch {n} has taken over {} s; try again",
                    STATUS_PATIENCE.as_secs()
                )),
            },
        },
        other => match other.strip_prefix("job-task ") {
            Some(event) => job_task(jobs, event),
            None => error_json(&format!(
                "unknown request {other:?} (known: status, job-task)"
            )),
        },
    };
    writeln!(w, "{reply}")
}

/// A task event from the SPANK plugin: `{"event":"start","job":12,"step":"0",...}`.
fn job_task(jobs: Option<&Jobs>, json: &str) -> String {
    let Some(jobs) = jobs else {
        return error_json("this daemon does not follow Slurm jobs");
    };
    match serde_json::from_str::<TaskEvent>(json) {
        Ok(e) => match jobs.told(e.clone()) {
            // At a task's exit, what was done for its step (and its job): the plugin
            // tells Slurm at the step's last task.
            Ok(()) if e.event == TaskEventKind::Exit => {
                let step = JobStep {
                    job: e.job,
                    step: e.step,
                };
                let (report, job) = jobs.reports(&step);
                serde_json::json!({ "ok": true, "report": report, "job_report": job }).to_string()
            }
            Ok(()) => serde_json::json!({ "ok": true }).to_string(),
            Err(what) => error_json(&format!("job-task: {what}")),
        },
        Err(e) => error_json(&format!("job-task: {e}")),
    }
}

fn error_json(what: &str) -> String {
    serde_json::json!({ "error": what }).to_string()
}

/// What to do about a socket that could not be reached, by what is at the path: the
/// usual cause of each error is not the same.
fn unreachable_hint(path: &Path, err: &std::io::Error) -> &'static str {
    let elsewhere = "is `numasched daemon` running? pass --socket if it uses another path";
    match std::fs::metadata(path) {
        Ok(m) if !m.file_type().is_socket() => {
            "that path is not a socket: pass --socket with the daemon's socket"
        }
        _ if err.kind() == std::io::ErrorKind::PermissionDenied => {
            "the socket is private to the daemon's user (mode 0600): run as root or as that user"
        }
        Ok(_) if err.kind() == std::io::ErrorKind::ConnectionRefused => {
            "no daemon listens on it: a daemon that was killed leaves its socket behind; start `numasched daemon`"
        }
        _ => elsewhere,
    }
}

/// Asks the daemon at `path` for its status.
pub fn request_status(path: &Path) -> Result<DaemonStatus, SocketError> {
    let unreachable = |err: std::io::Error| SocketError::Unreachable {
        path: path.into(),
        hint: unreachable_hint(path, &err),
        err,
    };
    let mut stream = UnixStream::connect(path).map_err(unreachable)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(unreachable)?;
    writeln!(stream, "status").map_err(unreachable)?;
    let mut line = String::new();
    BufReader::new(stream)
        .read_line(&mut line)
        .map_err(unreachable)?;
    let protocol = |what: String| SocketError::Protocol {
        path: path.into(),
        what,
    };
    if line.is_empty() {
        return Err(protocol(
            "closed the connection without an answer (stopping, or too busy); try again"
                .to_string(),
        ));
    }
    let v: serde_json::Value =
        serde_json::from_str(&line).map_err(|e| protocol(format!("unreadable answer: {e}")))?;
    if let Some(e) = v.get("error").and_then(|e| e.as_str()) {
        return Err(protocol(e.to_string()));
    }
    serde_json::from_value(v).map_err(|e| protocol(format!("unexpected answer: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client turned away reads one JSON error naming the cap, as every other error.
    #[test]
    fn the_busy_answer_is_one_json_error_naming_the_cap() {
        let line = std::str::from_utf8(BUSY).expect("utf-8");
        assert_eq!(line.matches('\n').count(), 1);
        let v: serde_json::Value = serde_json::from_str(line).expect("json");
        let e = v["error"].as_str().expect("error");
        assert!(e.contains(&conns::MAX_CONNS.to_string()), "{e}");
    }

    #[test]
    fn refuses_symlinks_files_and_live_daemons_and_replaces_stale_sockets() {
        let dir = tempfile::tempdir().expect("tempdir");
        let link = dir.path().join("link.sock");
        std::os::unix::fs::symlink("/etc/passwd", &link).expect("symlink");
        assert!(matches!(prepare(&link), Err(SocketError::Symlink { .. })));
        let file = dir.path().join("file.sock");
        std::fs::write(&file, "x").expect("write");
        assert!(matches!(prepare(&file), Err(SocketError::NotSocket { .. })));

        let path = dir.path().join("run/d.sock");
        let (wake, _loop) = std::sync::mpsc::channel();
        let shared: Shared = Arc::new(Board::new(wake));
        let server = Server::start(&path, shared.clone()).expect("start");
        let mode = std::fs::metadata(&path).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(matches!(
            Server::start(&path, shared.clone()),
            Err(SocketError::InUse { .. })
        ));
        // Before the first epoch the daemon says so.
        let e = request_status(&path).expect_err("no status yet");
        assert!(e.to_string().contains("no epoch has run yet"), "{e}");
        std::mem::forget(server); // leave the file behind, as a crash would
                                  // The listener thread still runs here, so simulate staleness with a fresh path.
        let stale = dir.path().join("stale.sock");
        drop(UnixListener::bind(&stale).expect("bind"));
        prepare(&stale).expect("stale socket replaced");
        assert!(!stale.exists());
    }

    #[test]
    fn an_unreachable_daemon_gets_the_hint_for_what_is_at_the_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let hint = |p: &Path| match request_status(p) {
            Err(SocketError::Unreachable { hint, .. }) => hint,
            other => panic!("{other:?}"),
        };
        assert!(hint(&dir.path().join("none.sock")).contains("is `numasched daemon` running"));
        let file = dir.path().join("file");
        std::fs::write(&file, "x").expect("write");
        assert!(hint(&file).contains("not a socket"));
        assert!(hint(dir.path()).contains("not a socket"));
        let stale = dir.path().join("stale.sock");
        drop(UnixListener::bind(&stale).expect("bind"));
        assert!(hint(&stale).contains("no daemon listens on it"));
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert!(unreachable_hint(&stale, &denied).contains("mode 0600"));
    }

    /// One request line, one answer line.
    fn ask(path: &Path, line: &str) -> serde_json::Value {
        let mut stream = UnixStream::connect(path).expect("connect");
        writeln!(stream, "{line}").expect("write");
        let mut answer = String::new();
        BufReader::new(stream).read_line(&mut answer).expect("read");
        serde_json::from_str(&answer).expect("json")
    }

    #[test]
    fn the_spank_plugins_task_events_reach_the_job_table() {
        let dir = tempfile::tempdir().expect("tempdir");
        let jobs = Arc::new(Jobs::new(
            numasched_linux::observe::slurm::SlurmReader::new(
                &dir.path().join("proc"),
                &dir.path().join("cg"),
            ),
        ));
        let (wake, _loop) = std::sync::mpsc::channel();
        let shared: Shared = Arc::new(Board::new(wake));
        let path = dir.path().join("d.sock");
        let _server = Server::bind(&path)
            .expect("bind")
            .serve(shared, Some(jobs.clone()))
            .expect("serve");
        let start = r#"job-task {"event":"start","job":12,"step":"0","pid":4242,"mode":"off","cpus":"0-1"}"#;
        assert_eq!(ask(&path, start), serde_json::json!({ "ok": true }));
        jobs.begin_pass();
        let key = numasched_model::ProcessKey {
            pid: 4242,
            start_time: 1,
        };
        assert_eq!(
            jobs.mode(key, "t"),
            Some(numasched_linux::observe::slurm::JobMode::Off)
        );
        let bad = ask(&path, r#"job-task {"event":"start","job":"x"}"#);
        let e = bad["error"].as_str().expect("error");
        assert!(e.starts_with("job-task: invalid type"), "{e}");
        // What an epoch saw of the task is what its exit is answered with.
        let topo = numasched_model::topology::spec::parse("1n:1l:2c:1t").expect("spec");
        let step = JobStep {
            job: 12,
            step: "0".into(),
        };
        jobs.note_tasks(
            &topo,
            &[],
            vec![crate::step_reports::TaskSeen {
                key,
                step,
                mode: numasched_linux::observe::slurm::JobMode::Off,
                placed: None,
                memory: Default::default(),
                cpus: Default::default(),
                moved: Default::default(),
            }],
        );
        let exit =
            r#"job-task {"event":"exit","job":12,"step":"0","pid":4242,"mode":null,"cpus":null}"#;
        let line = "step 12.0: --numasched=off, 1 task left alone";
        assert_eq!(
            ask(&path, exit),
            serde_json::json!({ "ok": true, "report": line, "job_report": line })
        );
        assert_eq!(jobs.mode(key, "t"), None);
        let e = ask(&path, "jobs");
        assert!(e["error"]
            .as_str()
            .expect("error")
            .contains("known: status, job-task"));
    }

    #[test]
    fn an_absent_daemon_is_one_clear_line() {
        let e = request_status(Path::new("/nonexistent/numasched.sock")).expect_err("absent");
        let s = e.to_string();
        assert!(s.starts_with("cannot reach the numasched daemon at /nonexistent/numasched.sock"));
        assert!(!s.contains('\n'));
    }
}
