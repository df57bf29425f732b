//! Connections of the control socket and the metrics server, handled so that no client
//! can hold either: each connection gets a thread of its own and one deadline for its
//! whole request (not a timeout per read, which one byte every 1.5 s defeats), and at
//! most [`MAX_CONNS`] are open at once. To make room, the oldest connection still
//! waiting for its request is dropped first: a client that connects and sends nothing
//! costs the next one nothing, and an answer being written is not cut off for it. When
//! every one is being answered, the newcomer is turned away instead. Whoever is turned
//! away is told so in its protocol's words before the close (an empty reply gave
//! clients beyond the 32nd nothing to report). The
//! accept loop itself never reads from a client, and neither server ever touches the
//! epoch loop, which only publishes to the status board.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Connections served at once; a further one closes the oldest idle one.
pub const MAX_CONNS: usize = 32;

/// How long one request may take, from accept to the last byte read.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(2);

/// How long telling a turned-away client why may take: the words fit any socket
/// buffer, so only a peer that stopped reading can make it wait.
const REFUSE_TIMEOUT: Duration = Duration::from_millis(100);

/// A stream both servers accept: read with a timeout, and closable from another thread.
pub trait Conn: Read + Send + 'static {
    fn set_read_timeout(&self, d: Option<Duration>) -> std::io::Result<()>;
    /// Shuts both directions, so a handler blocked in a read returns at once.
    fn close(&self);
    /// Writes `why` (briefly, best effort), then closes.
    fn refuse(&self, why: &[u8]);
    fn try_clone_conn(&self) -> std::io::Result<Self>
    where
        Self: Sized;
}

macro_rules! conn_for {
    ($t:ty) => {
        impl Conn for $t {
            fn set_read_timeout(&self, d: Option<Duration>) -> std::io::Result<()> {
                <$t>::set_read_timeout(self, d)
            }
            fn close(&self) {
                let _ = self.shutdown(std::net::Shutdown::Both);
            }
            fn refuse(&self, why: &[u8]) {
                let _ = self.set_write_timeout(Some(REFUSE_TIMEOUT));
                let _ = (&mut &*self).write_all(why);
                self.close();
            }
            fn try_clone_conn(&self) -> std::io::Result<Self> {
                self.try_clone()
            }
        }
    };
}

conn_for!(std::os::unix::net::UnixStream);
conn_for!(std::net::TcpStream);

/// Closes a connection, with the words that say why when it is turned away.
type Closer = Box<dyn Fn(Option<&[u8]>) + Send>;

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

    /// Serves `conn` on a thread of its own with `handle`. With [`MAX_CONNS`] open,
    /// the oldest idle connection is sent `busy` and closed to make room; when every
    /// one is being answered, `conn` is sent `busy` instead, and not served.
    pub fn spawn<C: Conn>(
        self: &Arc<Self>,
        name: &str,
        conn: C,
        busy: &'static [u8],
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
                let idle = open
                    .iter()
                    .position(|o| !o.answering.load(Ordering::Relaxed));
                match idle.and_then(|v| open.remove(v)) {
                    Some(o) => (o.close)(Some(busy)),
                    None => {
                        conn.refuse(busy);
                        return;
                    }
                }
            }
            open.push_back(Open {
                id,
                answering: Arc::clone(&answering),
                close: Box::new(move |why| match why {
                    Some(why) => closer.refuse(why),
                    None => closer.close(),
                }),
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
                (o.close)(None);
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
            conns.spawn("t", server, BUSY, |mut c, req| {
                let _ = read_until(&mut c, &req, 16, |b| b.contains(&b'\n').then_some(0));
            });
        }
        assert!(conns.len() <= MAX_CONNS, "{}", conns.len());
        // The first three were told why and shut: reading from them ends at once.
        assert_eq!(told(&mut clients[0]), "busy\n");
    }

    const BUSY: &[u8] = b"busy\n";

    /// Serves `server` with a handler that reads a line, then answers "ok" once
    /// released (or after 5 s).
    fn answer_when_released(
        conns: &Arc<Conns>,
        server: UnixStream,
        wait: Arc<Mutex<std::sync::mpsc::Receiver<()>>>,
    ) {
        conns.spawn("t", server, BUSY, move |mut c, req| {
            let got = read_until(&mut c, &req, 16, |b| b.iter().position(|&x| x == b'\n'));
            if matches!(got, Ok(Some(_))) {
                let _ = wait
                    .lock()
                    .expect("lock")
                    .recv_timeout(Duration::from_secs(5));
                let _ = c.try_clone().expect("clone").write_all(b"ok\n");
            }
        });
    }

    /// Waits until open connection `i` has read its request.
    fn until_answering(conns: &Conns, i: usize) {
        let t = Instant::now();
        while !conns.open.lock().expect("lock")[i]
            .answering
            .load(Ordering::Relaxed)
        {
            assert!(t.elapsed() < Duration::from_secs(5), "never read");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// What a client reads until the server closes (or 1 s passes).
    fn told(c: &mut UnixStream) -> String {
        c.set_read_timeout(Some(Duration::from_secs(1)))
            .expect("timeout");
        let mut got = String::new();
        let _ = c.read_to_string(&mut got);
        got
    }

    /// With every connection being answered, the newcomer is the one turned away, and
    /// it is told so rather than given an empty reply (issue 41).
    #[test]
    fn with_every_connection_answering_a_newcomer_is_told_it_is_busy() {
        let conns = Conns::new();
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let wait = Arc::new(Mutex::new(wait));
        let mut clients = Vec::new();
        for i in 0..MAX_CONNS + 1 {
            let (server, mut client) = UnixStream::pair().expect("pair");
            client.write_all(b"status\n").expect("write");
            clients.push(client);
            let wait = Arc::clone(&wait);
            answer_when_released(&conns, server, wait);
            if i < MAX_CONNS {
                until_answering(&conns, i);
            }
        }
        assert_eq!(told(&mut clients[MAX_CONNS]), "busy\n");
        for _ in 0..MAX_CONNS {
            release.send(()).expect("release");
        }
        for (i, c) in clients.iter_mut().enumerate().take(MAX_CONNS) {
            c.set_read_timeout(Some(Duration::from_secs(5)))
                .expect("timeout");
            let mut line = [0u8; 3];
            c.read_exact(&mut line).expect("answer");
            assert_eq!(&line, b"ok\n", "client {i}");
        }
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
            answer_when_released(&conns, server, wait);
            if i == 0 {
                // Let it read its request before the others crowd in.
                until_answering(&conns, 0);
            }
        }
        assert!(conns.len() <= MAX_CONNS, "{}", conns.len());
        // The three oldest idle ones (clients 1, 2, 3) were told and closed to make
        // room...
        for (i, c) in clients.iter_mut().enumerate().skip(1).take(3) {
            assert_eq!(told(c), "busy\n", "idle client {i}");
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
