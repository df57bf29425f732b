//! The kernel's process events connector (`cn_proc`): a netlink multicast of every
//! fork, exec and exit as it happens.
//!
//! Why: a child forked inside a set numasched narrowed carries that set, and a parent
//! numasched placed can exit and leave its children to init. Polled once an epoch,
//! both are seen up to an interval late — long enough for a crash to leave the child
//! narrowed with no journal entry naming it. With the connector the daemon follows
//! them within milliseconds.
//!
//! Subscribing works only from the initial namespaces, and needed CAP_NET_ADMIN
//! before Linux 6.6 (any user may since). A container is refused, and the daemon then
//! polls as before (its sensors line says which). Only messages the kernel sent are taken (sender port 0): a local
//! process can address a netlink socket, but cannot pose as the kernel.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// One process event. Threads are events too (`pid != tgid`); [`Event::is_process`]
/// says which ones concern a whole process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Fork {
        parent_tgid: u32,
        child_pid: u32,
        child_tgid: u32,
        /// CLOCK_MONOTONIC nanoseconds of the fork.
        at_ns: u64,
    },
    Exec {
        pid: u32,
        tgid: u32,
        at_ns: u64,
    },
    Exit {
        pid: u32,
        tgid: u32,
        at_ns: u64,
    },
}

impl Event {
    /// A new process (not a thread), an exec, or a process's main thread gone: the
    /// events that change which processes exist.
    pub fn is_process(&self) -> bool {
        match *self {
            Event::Fork {
                child_pid,
                child_tgid,
                ..
            } => child_pid == child_tgid,
            Event::Exec { .. } => true,
            Event::Exit { pid, tgid, .. } => pid == tgid,
        }
    }
}

const NETLINK_CONNECTOR: i32 = 11;
const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const NLMSG_DONE: u16 = 3;
const NLMSG_HDRLEN: usize = 16;
const CN_MSG_LEN: usize = 20;
const PROC_EVENT_NONE: u32 = 0x0;
const PROC_EVENT_FORK: u32 = 0x1;
const PROC_EVENT_EXEC: u32 = 0x2;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;

/// A subscribed connector socket.
#[derive(Debug)]
pub struct ProcEvents {
    fd: OwnedFd,
}

impl ProcEvents {
    /// Opens the socket, joins the connector's process group and asks the kernel to
    /// start sending. An error is the reason the daemon falls back to polling.
    pub fn subscribe() -> io::Result<ProcEvents> {
        // SAFETY: plain socket(2); the descriptor is owned at once.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                NETLINK_CONNECTOR,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_nl is plain data; zeroed is a valid value.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        addr.nl_groups = CN_IDX_PROC;
        // SAFETY: `addr` is a valid sockaddr_nl of the length given.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_nl).cast(),
                size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        // The acknowledgement goes to every listener: ours is told by the ack number
        // the kernel makes of ours (ours + 1), a nonce. (Its sequence number is the
        // kernel's own count, not ours.)
        let ack = (monotonic_ns() as u32) ^ std::process::id().rotate_left(16);
        let msg = listen_message(std::process::id(), 0, ack);
        // SAFETY: sends `msg.len()` bytes of a live buffer.
        let sent = unsafe { libc::send(fd.as_raw_fd(), msg.as_ptr().cast(), msg.len(), 0) };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        let events = ProcEvents { fd };
        events.await_ack(ack.wrapping_add(1))?;
        Ok(events)
    }

    /// The kernel answers a subscription with an acknowledgement carrying an error
    /// number (EPERM outside the initial namespaces, or without CAP_NET_ADMIN before
    /// Linux 6.6); some kernels refuse a container by not answering at all. Waits up
    /// to a second for it, passing over events and other listeners' answers.
    fn await_ack(&self, ack: u32) -> io::Result<()> {
        self.set_timeout(Some(std::time::Duration::from_secs(1)))?;
        let mut buf = vec![0u8; 8192];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        let answer = loop {
            if std::time::Instant::now() >= deadline {
                break Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the kernel did not answer",
                ));
            }
            let n = match self.recv(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    break Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the kernel did not answer",
                    ))
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => continue,
                Err(e) => break Err(e),
            };
            let ours = acks(&buf[..n]).into_iter().find(|&(_, a, _)| a == ack);
            if let Some((_, _, err)) = ours {
                break match err {
                    0 => Ok(()),
                    e => Err(io::Error::from_raw_os_error(e as i32)),
                };
            }
        };
        self.set_timeout(None)?;
        answer
    }

    fn set_timeout(&self, t: Option<std::time::Duration>) -> io::Result<()> {
        let t = t.unwrap_or_default();
        let tv = libc::timeval {
            tv_sec: t.as_secs() as libc::time_t,
            tv_usec: t.subsec_micros() as libc::suseconds_t,
        };
        // SAFETY: a timeval we own, of the length given, on our own socket.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVTIMEO,
                (&tv as *const libc::timeval).cast(),
                size_of::<libc::timeval>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Blocks for the next datagram and returns its events. `Err` with ENOBUFS means
    /// the kernel dropped events because we read too slowly: the caller must assume it
    /// missed some.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<Vec<Event>> {
        let n = self.recv(buf)?;
        Ok(parse(&buf[..n]))
    }

    /// One datagram from the kernel; its length.
    fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            // SAFETY: sockaddr_nl is plain data.
            let mut from: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
            let mut len = size_of::<libc::sockaddr_nl>() as libc::socklen_t;
            // SAFETY: `buf` and `from` are live and as long as the lengths given.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    0,
                    (&mut from as *mut libc::sockaddr_nl).cast(),
                    &mut len,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if from.nl_pid != 0 {
                // Not the kernel: ignored.
                continue;
            }
            return Ok(n as usize);
        }
    }
}

/// nlmsghdr + cn_msg + PROC_CN_MCAST_LISTEN.
fn listen_message(port: u32, seq: u32, ack: u32) -> Vec<u8> {
    let total = NLMSG_HDRLEN + CN_MSG_LEN + 4;
    let mut m = Vec::with_capacity(total);
    m.extend_from_slice(&(total as u32).to_ne_bytes());
    m.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
    m.extend_from_slice(&0u16.to_ne_bytes()); // flags
    m.extend_from_slice(&0u32.to_ne_bytes()); // seq
    m.extend_from_slice(&port.to_ne_bytes());
    m.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
    m.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&ack.to_ne_bytes());
    m.extend_from_slice(&4u16.to_ne_bytes()); // len
    m.extend_from_slice(&0u16.to_ne_bytes()); // flags
    m.extend_from_slice(&PROC_CN_MCAST_LISTEN.to_ne_bytes());
    m
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The events of one datagram: netlink messages, each a cn_msg from the process
/// connector carrying one proc_event. Anything short, foreign or of another kind is
/// skipped, never trusted.
pub fn parse(buf: &[u8]) -> Vec<Event> {
    messages(buf).filter_map(event).collect()
}

/// The acknowledgements (PROC_EVENT_NONE) in one datagram: the cn_msg's sequence
/// number and ack, and the error number.
fn acks(buf: &[u8]) -> Vec<(u32, u32, u32)> {
    messages(buf)
        .filter_map(|cn| {
            let ev = proc_event(cn)?;
            if u32_at(ev, 0)? != PROC_EVENT_NONE {
                return None;
            }
            Some((u32_at(cn, 8)?, u32_at(cn, 12)?, u32_at(ev, 16)?))
        })
        .collect()
}

/// The cn_msg of each netlink message in a datagram; a short or lying length ends it.
fn messages(buf: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let len = u32_at(buf, at)? as usize;
        if len < NLMSG_HDRLEN || at + len > buf.len() {
            return None;
        }
        let cn = &buf[at + NLMSG_HDRLEN..at + len];
        at += (len + 3) & !3;
        Some(cn)
    })
}

/// The proc_event of a cn_msg from the process connector; `None` for another's.
fn proc_event(cn: &[u8]) -> Option<&[u8]> {
    if u32_at(cn, 0)? != CN_IDX_PROC || u32_at(cn, 4)? != CN_VAL_PROC {
        return None;
    }
    cn.get(CN_MSG_LEN..)
}

/// One cn_msg: the connector's id, then proc_event {what, cpu, timestamp_ns, data}.
fn event(cn: &[u8]) -> Option<Event> {
    let ev = proc_event(cn)?;
    let what = u32_at(ev, 0)?;
    let at_ns = u64_at(ev, 8)?;
    let d = |i: usize| u32_at(ev, 16 + 4 * i);
    Some(match what {
        PROC_EVENT_FORK => Event::Fork {
            parent_tgid: d(1)?,
            child_pid: d(2)?,
            child_tgid: d(3)?,
            at_ns,
        },
        PROC_EVENT_EXEC => Event::Exec {
            pid: d(0)?,
            tgid: d(1)?,
            at_ns,
        },
        PROC_EVENT_EXIT => Event::Exit {
            pid: d(0)?,
            tgid: d(1)?,
            at_ns,
        },
        _ => return None,
    })
}

/// CLOCK_MONOTONIC now, in the connector's unit (nanoseconds).
pub fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map_or(0, |t| Duration::from(t).as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A datagram as the kernel sends it: nlmsghdr, cn_msg, proc_event.
    fn message(what: u32, at_ns: u64, data: [u32; 4]) -> Vec<u8> {
        message_with(what, at_ns, data, 0, 0)
    }

    fn message_with(what: u32, at_ns: u64, data: [u32; 4], seq: u32, ack: u32) -> Vec<u8> {
        let mut ev = Vec::new();
        ev.extend_from_slice(&what.to_ne_bytes());
        ev.extend_from_slice(&1u32.to_ne_bytes()); // cpu
        ev.extend_from_slice(&at_ns.to_ne_bytes());
        for x in data {
            ev.extend_from_slice(&x.to_ne_bytes());
        }
        let mut cn = Vec::new();
        cn.extend_from_slice(&CN_IDX_PROC.to_ne_bytes());
        cn.extend_from_slice(&CN_VAL_PROC.to_ne_bytes());
        cn.extend_from_slice(&seq.to_ne_bytes());
        cn.extend_from_slice(&ack.to_ne_bytes());
        cn.extend_from_slice(&(ev.len() as u16).to_ne_bytes());
        cn.extend_from_slice(&[0; 2]);
        cn.extend_from_slice(&ev);
        let mut m = Vec::new();
        m.extend_from_slice(&((NLMSG_HDRLEN + cn.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&[0; 12]);
        m.extend_from_slice(&cn);
        while m.len() % 4 != 0 {
            m.push(0);
        }
        m
    }

    #[test]
    fn fork_exec_and_exit_are_read_and_threads_told_apart() {
        let mut buf = message(PROC_EVENT_FORK, 7, [10, 10, 11, 11]);
        buf.extend(message(PROC_EVENT_FORK, 8, [10, 10, 12, 10]));
        buf.extend(message(PROC_EVENT_EXEC, 9, [11, 11, 0, 0]));
        buf.extend(message(PROC_EVENT_EXIT, 10, [11, 11, 0, 0]));
        let events = parse(&buf);
        assert_eq!(
            events,
            vec![
                Event::Fork {
                    parent_tgid: 10,
                    child_pid: 11,
                    child_tgid: 11,
                    at_ns: 7
                },
                Event::Fork {
                    parent_tgid: 10,
                    child_pid: 12,
                    child_tgid: 10,
                    at_ns: 8
                },
                Event::Exec {
                    pid: 11,
                    tgid: 11,
                    at_ns: 9
                },
                Event::Exit {
                    pid: 11,
                    tgid: 11,
                    at_ns: 10
                },
            ]
        );
        let process: Vec<bool> = events.iter().map(Event::is_process).collect();
        assert_eq!(process, vec![true, false, true, true]);
    }

    #[test]
    fn short_foreign_and_unknown_messages_are_skipped() {
        let good = message(PROC_EVENT_FORK, 7, [10, 10, 11, 11]);
        // Cut inside the event.
        assert!(parse(&good[..good.len() - 8]).is_empty());
        // Another connector's id.
        let mut foreign = good.clone();
        foreign[NLMSG_HDRLEN..NLMSG_HDRLEN + 4].copy_from_slice(&9u32.to_ne_bytes());
        assert!(parse(&foreign).is_empty());
        // An event kind we do not follow (PROC_EVENT_UID), then a good one.
        let mut buf = message(0x4, 1, [1, 2, 3, 4]);
        buf.extend(&good);
        assert_eq!(parse(&buf).len(), 1);
        // A length field larger than the datagram.
        let mut lying = good.clone();
        lying[0..4].copy_from_slice(&4096u32.to_ne_bytes());
        assert!(parse(&lying).is_empty());
        assert!(parse(&[]).is_empty());
    }

    #[test]
    fn acknowledgements_carry_the_kernels_answer_and_are_no_events() {
        let mut buf = message_with(PROC_EVENT_NONE, 0, [libc::EPERM as u32, 0, 0, 0], 7, 9);
        buf.extend(message(PROC_EVENT_FORK, 7, [10, 10, 11, 11]));
        assert_eq!(acks(&buf), vec![(7, 9, libc::EPERM as u32)]);
        assert_eq!(parse(&buf).len(), 1, "the fork only");
    }

    #[test]
    fn the_subscription_message_asks_the_process_connector_to_listen() {
        let m = listen_message(42, 5, 6);
        assert_eq!(m.len(), 40);
        assert_eq!(u32_at(&m, 0), Some(40));
        assert_eq!(u32_at(&m, 12), Some(42));
        assert_eq!(u32_at(&m, 16), Some(CN_IDX_PROC));
        assert_eq!((u32_at(&m, 24), u32_at(&m, 28)), (Some(5), Some(6)));
        assert_eq!(u32_at(&m, 36), Some(PROC_CN_MCAST_LISTEN));
    }

    /// The real connector, as root: a fork of ours is seen with its child's pid.
    #[test]
    fn a_real_fork_is_seen_when_the_kernel_lets_us_subscribe() {
        let Ok(events) = ProcEvents::subscribe() else {
            eprintln!("skipped: the proc connector is refused here (not root?)");
            return;
        };
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id();
        child.wait().expect("reap true");
        let mut buf = vec![0u8; 4096];
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let mut seen = false;
        // A missed event fails the test instead of hanging it.
        events
            .set_timeout(Some(std::time::Duration::from_secs(1)))
            .expect("timeout");
        while !seen && std::time::Instant::now() < deadline {
            match events.read(&mut buf) {
                Ok(evs) => {
                    seen = evs
                        .iter()
                        .any(|e| matches!(e, Event::Fork { child_tgid, .. } if *child_tgid == pid))
                }
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => panic!("reading the connector: {e}"),
            }
        }
        assert!(seen, "no fork event for child {pid}");
    }
}
