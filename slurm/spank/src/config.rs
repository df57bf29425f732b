//! The plugin's arguments from its plugstack.conf line, e.g.
//! `optional /usr/lib/.../libnumasched_spank.so socket=/run/numasched/numasched.sock default=manage allow_opt_out=no`.
//!
//! The site's word on a job's mode lives here, beside the socket, because
//! plugstack.conf is the one file every node and every submit host reads
//! alike: `default=` is the mode of a job whose user said nothing, and
//! `allow_opt_out=no` refuses a user's `--numasched=off`.

use std::fmt;
use std::path::PathBuf;

use crate::proto::Mode;

/// Where the numasched daemon listens unless plugstack.conf says otherwise;
/// must match the daemon's own default control socket.
pub const DEFAULT_SOCKET: &str = "/run/numasched/numasched.sock";

/// Parsed plugin arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The daemon's unix stream control socket.
    pub socket: PathBuf,
    /// The mode of a job whose user gave no `--numasched`; `None` leaves it to
    /// the daemon's own settings (no `NUMASCHED=` is set).
    pub default: Option<Mode>,
    /// Whether a user may say `--numasched=off`.
    pub allow_opt_out: bool,
    /// Whether each step's end writes one line on what numasched did to the job's
    /// stderr (`report=yes`, the default).
    pub report: bool,
    /// Whether that line, for every step of the job on the node, also goes into the
    /// job's AdminComment (`admin_comment=yes`; off by default, as it overwrites
    /// whatever the site keeps there).
    pub admin_comment: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            socket: PathBuf::from(DEFAULT_SOCKET),
            default: None,
            allow_opt_out: true,
            report: true,
            admin_comment: false,
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
            "bad plugstack.conf argument '{}': the arguments are socket=/absolute/path, \
             default=off|advise|manage, allow_opt_out=yes|no, report=yes|no and \
             admin_comment=yes|no",
            self.0.escape_debug()
        )
    }
}

impl std::error::Error for BadArg {}

/// What a user's `--numasched` value (or its absence) comes to under a site's
/// settings, and what the user is told when it is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The mode the job runs with (`None`: the daemon's own settings).
    Use(Option<Mode>),
    /// The value is not allowed here; the text says why, for the user.
    Refuse(String),
}

impl Config {
    /// Parse `key=value` words; the last of a key wins, like a command line.
    /// The socket path must be absolute because slurmstepd's working directory
    /// is the user's, which differs from job to job.
    pub fn parse<'a, I: IntoIterator<Item = &'a str>>(args: I) -> Result<Config, BadArg> {
        let mut cfg = Config::default();
        for arg in args {
            let bad = || BadArg(arg.to_owned());
            match arg.split_once('=') {
                Some(("socket", path)) if path.starts_with('/') => {
                    cfg.socket = PathBuf::from(path);
                }
                Some(("default", mode)) => cfg.default = Some(mode.parse().map_err(|_| bad())?),
                Some(("allow_opt_out", "yes")) => cfg.allow_opt_out = true,
                Some(("allow_opt_out", "no")) => cfg.allow_opt_out = false,
                Some(("report", "yes")) => cfg.report = true,
                Some(("report", "no")) => cfg.report = false,
                Some(("admin_comment", "yes")) => cfg.admin_comment = true,
                Some(("admin_comment", "no")) => cfg.admin_comment = false,
                _ => return Err(bad()),
            }
        }
        Ok(cfg)
    }

    /// The job's mode from the user's `--numasched` value, if any, else a valid
    /// `NUMASCHED` the job's environment already carries (the way to say it
    /// without the plugin): the user's word where the site allows it, else the
    /// site's default.
    pub fn decide(&self, option: Option<Mode>, env: Option<&str>) -> Decision {
        match option.or_else(|| env.and_then(|v| v.parse().ok())) {
            Some(Mode::Off) if !self.allow_opt_out => Decision::Refuse(format!(
                "opting out of numasched (off) is not allowed on this cluster \
                 (plugstack.conf: allow_opt_out=no); jobs run with {}",
                self.default
                    .map_or("the daemon's own settings", Mode::as_str)
            )),
            Some(mode) => Decision::Use(Some(mode)),
            None => Decision::Use(self.default),
        }
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
        let site = Config::parse(["default=manage", "allow_opt_out=no", "default=advise"]).unwrap();
        assert_eq!(site.default, Some(Mode::Advise), "the last one wins");
        assert!(!site.allow_opt_out);
        let told = Config::parse(["report=no", "admin_comment=yes"]).unwrap();
        assert!(!told.report && told.admin_comment);
        assert!(Config::default().report && !Config::default().admin_comment);
    }

    #[test]
    fn rejects_typos_and_relative_paths() {
        for bad in [
            "sokcet=/x",
            "socket",
            "socket=",
            "socket=rel.sock",
            "=/x",
            "default=Manage",
            "default=",
            "allow_opt_out=false",
            "allow-opt-out=no",
            "report=on",
            "admin_comment=true",
        ] {
            let err = Config::parse([bad]).unwrap_err();
            assert_eq!(err, BadArg(bad.to_owned()));
            assert!(err.to_string().contains("socket="), "{err}");
            assert!(err.to_string().contains("allow_opt_out=yes|no"), "{err}");
            assert!(err.to_string().contains("admin_comment=yes|no"), "{err}");
        }
    }

    #[test]
    fn the_site_decides_what_a_silent_user_gets_and_whether_off_is_allowed() {
        let open = Config::default();
        assert_eq!(open.decide(None, None), Decision::Use(None));
        assert_eq!(
            open.decide(Some(Mode::Off), None),
            Decision::Use(Some(Mode::Off))
        );
        let site = Config::parse(["default=manage", "allow_opt_out=no"]).unwrap();
        assert_eq!(site.decide(None, None), Decision::Use(Some(Mode::Manage)));
        assert_eq!(
            site.decide(Some(Mode::Advise), None),
            Decision::Use(Some(Mode::Advise))
        );
        let Decision::Refuse(why) = site.decide(Some(Mode::Off), None) else {
            panic!("off allowed");
        };
        assert!(
            why.contains("allow_opt_out=no") && why.contains("manage"),
            "{why}"
        );
        // Said in the environment instead: the same rules, the option first.
        assert!(matches!(
            site.decide(None, Some("off")),
            Decision::Refuse(_)
        ));
        assert_eq!(
            site.decide(None, Some("advise")),
            Decision::Use(Some(Mode::Advise))
        );
        assert_eq!(
            site.decide(Some(Mode::Manage), Some("off")),
            Decision::Use(Some(Mode::Manage))
        );
        assert_eq!(
            site.decide(None, Some("Off")),
            Decision::Use(Some(Mode::Manage))
        );
        // Opting out allowed: the user's off stands against a default.
        let lax = Config::parse(["default=manage"]).unwrap();
        assert_eq!(
            lax.decide(Some(Mode::Off), None),
            Decision::Use(Some(Mode::Off))
        );
        assert_eq!(
            lax.decide(None, Some("off")),
            Decision::Use(Some(Mode::Off))
        );
    }
}
