//! The plugin's arguments from its plugstack.conf line, e.g.
//! `optional /usr/lib/.../libnumasched_spank.so socket=/run/numasched/numasched.sock`.

use std::fmt;
use std::path::PathBuf;

/// Where the numasched daemon listens unless plugstack.conf says otherwise;
/// must match the daemon's own default control socket.
pub const DEFAULT_SOCKET: &str = "/run/numasched/numasched.sock";

/// Parsed plugin arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The daemon's unix stream control socket.
    pub socket: PathBuf,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            socket: PathBuf::from(DEFAULT_SOCKET),
        }
    }
}

/// A plugstack.conf argument the plugin does not understand. Refused rather
/// than ignored so that a typo (`sokcet=`) shows up in slurmd's log instead of
/// silently notifying the default socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadArg(pub String);

impl fmt::Display for BadArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "bad plugstack.conf argument '{}': the only argument is socket=/absolute/path",
            self.0.escape_debug()
        )
    }
}

impl std::error::Error for BadArg {}

impl Config {
    /// Parse `key=value` words; the last `socket=` wins, like a command line.
    /// The path must be absolute because slurmstepd's working directory is
    /// the user's, which differs from job to job.
    pub fn parse<'a, I: IntoIterator<Item = &'a str>>(args: I) -> Result<Config, BadArg> {
        let mut cfg = Config::default();
        for arg in args {
            match arg.split_once('=') {
                Some(("socket", path)) if path.starts_with('/') => {
                    cfg.socket = PathBuf::from(path);
                }
                _ => return Err(BadArg(arg.to_owned())),
            }
        }
        Ok(cfg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_override() {
        assert_eq!(Config::parse([]).unwrap(), Config::default());
        assert_eq!(
            Config::parse(["socket=/tmp/x.sock"]).unwrap().socket,
            PathBuf::from("/tmp/x.sock")
        );
    }

    #[test]
    fn rejects_typos_and_relative_paths() {
        for bad in ["sokcet=/x", "socket", "socket=", "socket=rel.sock", "=/x"] {
            let err = Config::parse([bad]).unwrap_err();
            assert_eq!(err, BadArg(bad.to_owned()));
            assert!(err.to_string().contains("socket="));
        }
    }
}
