//! One request/reply exchange with the daemon's control socket, bounded in
//! time as a whole.
//!
//! This runs inside slurmstepd while the user's tasks are forked but held
//! before exec, so every millisecond here delays the job's start; and the
//! daemon is optional, so no failure here may become the job's failure. Hence
//! a single deadline for connect + write + read, and no threads (the task
//! callbacks run in a process that forks).

use socket2::{Domain, SockAddr, Socket, Type};
use std::fmt;
use std::io::{self, Read};
use std::path::Path;
use std::time::{Duration, Instant};

/// Total budget for connect + write + read of one event. Small because tasks
/// wait for it (once per task, sequentially), yet far above a healthy
/// daemon's sub-millisecond answer.
pub const BUDGET: Duration = Duration::from_millis(200);

/// Cap on what we read, so a daemon that streams without a newline cannot keep
/// us reading until the deadline for nothing.
const MAX_REPLY: usize = 4096;

/// What went wrong talking to the daemon, with the phase, for the debug log.
#[derive(Debug)]
pub enum NotifyError {
    /// The whole budget was used up during this phase: the daemon is alive
    /// but not answering, so later events of the same step should not wait.
    Timeout(&'static str),
    /// Any other failure (socket missing, connection refused, reset...).
    Io(&'static str, io::Error),
    /// The daemon closed the connection without a full reply line.
    Closed,
}

impl NotifyError {
    /// Whether waiting again would likely burn another full budget.
    pub fn is_timeout(&self) -> bool {
        matches!(self, NotifyError::Timeout(_))
    }

    fn from_io(phase: &'static str, e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => NotifyError::Timeout(phase),
            _ => NotifyError::Io(phase, e),
        }
    }
}

impl fmt::Display for NotifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotifyError::Timeout(phase) => {
                write!(f, "{phase}: no answer within {} ms", BUDGET.as_millis())
            }
            NotifyError::Io(phase, e) => write!(f, "{phase}: {e}"),
            NotifyError::Closed => write!(f, "read: daemon closed the connection without a reply"),
        }
    }
}

impl std::error::Error for NotifyError {}

/// Time left before `deadline`, or a timeout error in `phase`. Never returns
/// zero, which `set_*_timeout` would reject as "no timeout".
fn remaining(deadline: Instant, phase: &'static str) -> Result<Duration, NotifyError> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err(NotifyError::Timeout(phase))
    } else {
        Ok(left)
    }
}

/// Send `line` (which ends in a newline) to the unix stream socket at `path`
/// and read one reply line, all within `budget`. Returns the time it took and
/// the reply, without its newline.
pub fn send_line(
    path: &Path,
    line: &[u8],
    budget: Duration,
) -> Result<(Duration, String), NotifyError> {
    let start = Instant::now();
    let deadline = start + budget;

    let addr = SockAddr::unix(path).map_err(|e| NotifyError::Io("address", e))?;
    let sock =
        Socket::new(Domain::UNIX, Type::STREAM, None).map_err(|e| NotifyError::Io("socket", e))?;
    // Non-blocking connect + poll: a plain connect() blocks while the
    // daemon's listen backlog is full.
    sock.connect_timeout(&addr, remaining(deadline, "connect")?)
        .map_err(|e| NotifyError::from_io("connect", e))?;

    let mut sent = 0;
    while sent < line.len() {
        sock.set_write_timeout(Some(remaining(deadline, "write")?))
            .map_err(|e| NotifyError::Io("write", e))?;
        // MSG_NOSIGNAL: a daemon that hangs up must not SIGPIPE slurmstepd
        // (a cdylib gets none of Rust's SIGPIPE handling for executables).
        match sock.send_with_flags(&line[sent..], libc::MSG_NOSIGNAL) {
            Ok(0) => return Err(NotifyError::Closed),
            Ok(n) => sent += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(NotifyError::from_io("write", e)),
        }
    }

    let mut buf = [0u8; 512];
    let mut reply: Vec<u8> = Vec::new();
    loop {
        sock.set_read_timeout(Some(remaining(deadline, "read")?))
            .map_err(|e| NotifyError::Io("read", e))?;
        match (&sock).read(&mut buf) {
            Ok(0) => return Err(NotifyError::Closed),
            Ok(n) => {
                reply.extend_from_slice(&buf[..n]);
                if let Some(end) = reply.iter().position(|&b| b == b'\n') {
                    reply.truncate(end);
                    return Ok((
                        start.elapsed(),
                        String::from_utf8_lossy(&reply).into_owned(),
                    ));
                }
                if reply.len() >= MAX_REPLY {
                    return Ok((start.elapsed(), String::new()));
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(NotifyError::from_io("read", e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixListener;
    use std::path::PathBuf;
    use std::thread;

    fn sock_path(name: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!("nsspank-{}-{name}.sock", std::process::id()));
        let _ = std::fs::remove_file(&p);
        p
    }

    #[test]
    fn answers_are_read() {
        let path = sock_path("ok");
        let listener = UnixListener::bind(&path).unwrap();
        let server = thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            (&conn).write_all(b"{\"ok\":true}\n").unwrap();
            line
        });
        let (_, reply) = send_line(&path, b"job-task {}\n", BUDGET).unwrap();
        assert_eq!(reply, "{\"ok\":true}");
        assert_eq!(server.join().unwrap(), "job-task {}\n");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn missing_socket_fails_fast() {
        let path = sock_path("missing");
        let t = Instant::now();
        let err = send_line(&path, b"x\n", BUDGET).unwrap_err();
        assert!(!err.is_timeout(), "{err}");
        assert!(t.elapsed() < Duration::from_millis(50));
    }

    #[test]
    fn silent_daemon_times_out_within_budget() {
        let path = sock_path("silent");
        let listener = UnixListener::bind(&path).unwrap();
        let server = thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            thread::sleep(Duration::from_millis(500));
            drop(conn);
        });
        let t = Instant::now();
        let err = send_line(&path, b"x\n", Duration::from_millis(100)).unwrap_err();
        let took = t.elapsed();
        assert!(err.is_timeout(), "{err}");
        assert!(
            took >= Duration::from_millis(90) && took < Duration::from_millis(150),
            "{took:?}"
        );
        server.join().unwrap();
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn hang_up_without_reply_is_an_error() {
        let path = sock_path("hangup");
        let listener = UnixListener::bind(&path).unwrap();
        let server = thread::spawn(move || {
            let (conn, _) = listener.accept().unwrap();
            let mut line = String::new();
            BufReader::new(conn).read_line(&mut line).unwrap();
        });
        let err = send_line(&path, b"x\n", BUDGET).unwrap_err();
        assert!(matches!(err, NotifyError::Closed), "{err}");
        server.join().unwrap();
        let _ = std::fs::remove_file(&path);
    }
}
