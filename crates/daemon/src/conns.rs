//! Connections of the control socket and the metrics server, handled so that no client
//! can hold either: each connection gets a thread of its own and one deadline for its
//! whole request (not a timeout per read, which one byte every 1.5 s defeats), and at
//! most [`MAX_CONNS`] are open at once. To make room, the oldest connection still
//! waiting for its request is dropped first: a client that connects and sends nothing
//! costs the next one nothing, and an answer being written is not cut off for it. The
//! accept loop itself never reads from a client, and neither server ever touches the
//! epoch loop, which only publishes to the status board.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Connections served at once; a further one closes the oldest idle one.
pub const MAX_CONNS: usize = 32;

/// How long one request may take, from accept to the last byte read.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(2);

/// A stream both servers accept: read with a timeout, and closable from another thread.
pub trait Conn: Read + Send + 'static {
    fn set_read_timeout(&self, d: Option<Duration>) -> std::io::Result<()>;
    /// Shuts both directions, so a handler blocked in a read returns at once.
    fn close(&self);
    fn try_clone_conn(&self) -> std::io::Result<Self>
    where
        Self: Sized;
}

impl Conn for std::os::unix::net::UnixStream {
    fn set_read_timeout(&self, d: Option<Duration>) -> std::io::Result<()> {
        std::os::unix::net::UnixStream::set_read_timeout(self, d)
    }
    fn close(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
    fn try_clone_conn(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
}

impl Conn for std::net::TcpStream {
    fn set_read_timeout(&self, d: Option<Duration>) -> std::io::Result<()> {
        std::net::TcpStream::set_read_timeout(self, d)
    }
    fn close(&self) {
        let _ = self.shutdown(std::net::Shutdown::Both);
    }
    fn try_clone_conn(&self) -> std::io::Result<Self> {
        self.try_clone()
    }
}

type Closer = Box<dyn Fn() + Send>;

/// One request being served: its deadline, and whether the whole request has arrived
/// (then the connection is answering, no longer idle).
pub struct Request {
    pub deadline: Instant,
    answering: Arc<AtomicBool>,
}

impl Request {
    fn read(&self) {
        self.answering.store(true, Ordering::Relaxed);
    }
}

struct Open {
    id: u64,
    answering: Arc<AtomicBool>,
    close: Closer,
}

/// The open connections, oldest first.
#[derive(Default)]
pub struct Conns {
    open: Mutex<VecDeque<Open>>,
    next: Mutex<u64>,
}

impl Conns {
    pub fn new() -> Arc<Conns> {
        Arc::new(Conns::default())
    }

    /// Serves `conn` on a thread of its own with `handle`, after closing the oldest
    /// idle connection (the oldest of all when every one is answering) if
    /// [`MAX_CONNS`] are open.
    pub fn spawn<C: Conn>(
        self: &Arc<Self>,
        name: &str,
        conn: C,
        handle: impl FnOnce(C, Request) + Send + 'static,
    ) {
        let Ok(closer) = conn.try_clone_conn() else {
            return;
        };
        let id = {
            let mut n = self.next.lock().unwrap_or_else(|e| e.into_inner());
            *n += 1;
            *n
        };
        let answering = Arc::new(AtomicBool::new(false));
        {
            let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
            while open.len() >= MAX_CONNS {
                let victim = open
                    .iter()
                    .position(|o| !o.answering.load(Ordering::Relaxed))
                    .unwrap_or(0);
                if let Some(o) = open.remove(victim) {
                    (o.close)();
                }
            }
            open.push_back(Open {
                id,
                answering: Arc::clone(&answering),
                close: Box::new(move || closer.close()),
            });
        }
        let me = Arc::clone(self);
        let req = Request {
            deadline: Instant::now() + REQUEST_DEADLINE,
            answering,
        };
        let spawned = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                handle(conn, req);
                me.done(id);
            });
        if spawned.is_err() {
            self.close(id);
        }
    }

    fn done(&self, id: u64) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|o| o.id != id);
    }

    fn close(&self, id: u64) {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = open.iter().position(|o| o.id == id) {
            if let Some(o) = open.remove(i) {
                (o.close)();
            }
        }
    }

    /// Connections open now.
    pub fn len(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Reads until `done(buf)` says the request is complete, `limit` bytes arrived, the
/// peer closed, or the request's deadline passed. `None` unless complete; once
/// complete, the connection counts as answering.
pub fn read_until<C: Conn>(
    conn: &mut C,
    req: &Request,
    limit: usize,
    done: impl Fn(&[u8]) -> Option<usize>,
) -> std::io::Result<Option<Vec<u8>>> {
    let deadline = req.deadline;
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = done(&buf) {
            buf.truncate(end);
            req.read();
            return Ok(Some(buf));
        }
        if buf.len() > limit {
            return Ok(None);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        conn.set_read_timeout(Some(left))?;
        match conn.read(&mut chunk) {
            Ok(0) => return Ok(None),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Ok(None)
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// Discards what the peer still sends, until it stops or `deadline`, at most `limit`
/// bytes: closing with unread input would reset the connection and could lose the
/// answer already written.
pub fn drain<C: Conn>(conn: &mut C, deadline: Instant, limit: usize) {
    let mut chunk = [0u8; 4096];
    let mut total = 0;
    while total < limit {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || conn.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => total += n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    #[test]
    fn the_oldest_connection_is_closed_to_make_room() {
        let conns = Conns::new();
        let mut clients = Vec::new();
        for _ in 0..MAX_CONNS + 3 {
            let (server, client) = UnixStream::pair().expect("pair");
            clients.push(client);
            conns.spawn("t", server, |mut c, req| {
                let _ = read_until(&mut c, &req, 16, |b| b.contains(&b'\n').then_some(0));
            });
        }
        assert!(conns.len() <= MAX_CONNS, "{}", conns.len());
        // The first three were shut: reading from them ends at once.
        let mut b = [0u8; 1];
        clients[0]
            .set_read_timeout(Some(Duration::from_secs(1)))
            .expect("timeout");
        assert_eq!(clients[0].read(&mut b).expect("eof"), 0);
    }

    /// Issue 17: the cap dropped the oldest connection, so a burst of clients that send
    /// nothing cut off an answer being written. The oldest idle one goes first now.
    #[test]
    fn the_oldest_idle_connection_goes_first_not_one_being_answered() {
        let conns = Conns::new();
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let wait = Arc::new(Mutex::new(wait));
        let mut clients = Vec::new();
        for i in 0..MAX_CONNS + 3 {
            let (server, mut client) = UnixStream::pair().expect("pair");
            if i == 0 {
                // The first client sends its whole request; its handler then "answers"
                // until released.
                client.write_all(b"status\n").expect("write");
            }
            clients.push(client);
            let wait = Arc::clone(&wait);
            conns.spawn("t", server, move |mut c, req| {
                let got = read_until(&mut c, &req, 16, |b| b.iter().position(|&x| x == b'\n'));
                if matches!(got, Ok(Some(_))) {
                    let _ = wait
                        .lock()
                        .expect("lock")
                        .recv_timeout(Duration::from_secs(5));
                    let _ = std::io::Write::write_all(&mut c.try_clone().expect("clone"), b"ok\n");
                }
            });
            if i == 0 {
                // Let it read its request before the others crowd in.
                let t = Instant::now();
                while !conns.open.lock().expect("lock")[0]
                    .answering
                    .load(Ordering::Relaxed)
                {
                    assert!(t.elapsed() < Duration::from_secs(5), "never read");
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
        assert!(conns.len() <= MAX_CONNS, "{}", conns.len());
        let closed = |c: &mut UnixStream| {
            c.set_read_timeout(Some(Duration::from_millis(200)))
                .expect("timeout");
            let mut b = [0u8; 4];
            matches!(c.read(&mut b), Ok(0))
        };
        // The three oldest idle ones (clients 1, 2, 3) were closed to make room...
        for (i, c) in clients.iter_mut().enumerate().skip(1).take(3) {
            assert!(closed(c), "idle client {i} still open");
        }
        // ...and the one being answered still gets its answer.
        release.send(()).expect("release");
        let mut answer = String::new();
        clients[0]
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let _ = clients[0].read_to_string(&mut answer);
        assert_eq!(answer, "ok\n");
    }

    #[test]
    fn a_drip_cannot_outlast_the_deadline() {
        let (mut server, mut client) = UnixStream::pair().expect("pair");
        let t = Instant::now();
        let writer = std::thread::spawn(move || {
            for _ in 0..20 {
                if client.write_all(b"x").is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        });
        let req = Request {
            deadline: Instant::now() + Duration::from_millis(500),
            answering: Arc::default(),
        };
        let got =
            read_until(&mut server, &req, 4096, |b| b.contains(&b'\n').then_some(0)).expect("read");
        assert!(got.is_none());
        assert!(
            t.elapsed() < Duration::from_millis(900),
            "{:?}",
            t.elapsed()
        );
        drop(server);
        let _ = writer.join();
    }
}
