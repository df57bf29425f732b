//! Waiting for the terminal's input here rather than in crossterm. crossterm 0.28
//! spins inside `event::poll` once its terminal is gone: a hung-up tty is readable
//! forever and reads EOF, its read loop retries at once, and the poll never returns
//! even with a timeout (crossterm-rs/crossterm#793). So a closed tmux pane or a
//! dropped ssh session left `top` burning a CPU for good, its stop flag never looked
//! at. Here a hang-up ends the loop, and crossterm is asked only when input is there.

use std::fs::File;
use std::io::IsTerminal;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use ratatui::crossterm::event;

/// What a wait for input found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ready {
    /// Input to read.
    Input,
    /// Nothing within the wait.
    Quiet,
    /// The terminal hung up (its pane, window or session closed): nothing will come.
    Gone,
}

/// The terminal crossterm reads keys from: stdin when it is one, else the
/// controlling terminal (as crossterm itself chooses). `None` when neither can be
/// had: then the wait is crossterm's own, as before.
pub struct Input {
    tty: Option<OwnedFd>,
}

impl Input {
    pub fn open() -> Input {
        let tty = if std::io::stdin().is_terminal() {
            std::io::stdin().as_fd().try_clone_to_owned().ok()
        } else {
            File::open("/dev/tty").ok().map(OwnedFd::from)
        };
        Input { tty }
    }

    /// Waits at most `wait` (a signal cuts it short: then [`Ready::Quiet`]).
    pub fn wait(&self, wait: Duration) -> Ready {
        let Some(tty) = &self.tty else {
            return match event::poll(wait) {
                Ok(true) => Ready::Input,
                Ok(false) => Ready::Quiet,
                Err(_) => Ready::Gone,
            };
        };
        let ms = u16::try_from(wait.as_millis()).unwrap_or(u16::MAX);
        let mut fds = [PollFd::new(tty.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => Ready::Quiet,
            Ok(_) => classify(fds[0].revents().unwrap_or(PollFlags::empty())),
            // The descriptor itself is unusable: no key can come either.
            Err(_) => Ready::Gone,
        }
    }
}

/// A hung-up terminal reports POLLHUP (with POLLIN: it reads EOF), a closed or bad
/// descriptor POLLNVAL or POLLERR.
fn classify(revents: PollFlags) -> Ready {
    if revents.intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL) {
        Ready::Gone
    } else if revents.contains(PollFlags::POLLIN) {
        Ready::Input
    } else {
        Ready::Quiet
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hang_up_is_gone_even_with_input_readable() {
        assert_eq!(classify(PollFlags::POLLIN), Ready::Input);
        assert_eq!(
            classify(PollFlags::POLLIN | PollFlags::POLLHUP),
            Ready::Gone
        );
        assert_eq!(classify(PollFlags::POLLNVAL), Ready::Gone);
        assert_eq!(classify(PollFlags::empty()), Ready::Quiet);
    }
}
