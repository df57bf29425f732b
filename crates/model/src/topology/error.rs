use std::path::PathBuf;

/// Everything that can be wrong with a machine description. Variants that come from
/// files carry the path, so one line tells the operator what to look at.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("invalid topology: {0}")]
    Invalid(String),
    #[error("{path}: {err}")]
    Io { path: PathBuf, err: std::io::Error },
    #[error("{path}: {what}")]
    Parse { path: PathBuf, what: String },
    #[error(
        "unknown machine '{name}': not `this` (this machine), a preset ({presets}) nor a spec \
         string like 4n:2l:4c:2t"
    )]
    UnknownMachine { name: String, presets: String },
    #[error("bad machine spec '{spec}': {what}")]
    Spec { spec: String, what: String },
}
