//! Prints the model against published measurements as the markdown table of
//! docs/fidelity.md. `cargo run --release --example fidelity [-- --profiles FILE]`:
//! with a profile file, its programs replace the built-in ones of the same name (the
//! measured miss curves of docs/profiles/measured-curves.toml, say).

use std::path::Path;

use numasched::model::profile::ProfileSet;
use numasched::sim::fidelity::{markdown, rows_with};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let set = match args.as_slice() {
        [] => Ok(ProfileSet::builtin()),
        [flag, file] if flag == "--profiles" => ProfileSet::load(Path::new(file))
            .map(|extra| ProfileSet::builtin().merge(extra))
            .map_err(|e| e.to_string()),
        _ => Err("usage: fidelity [--profiles FILE]".to_string()),
    };
    match set.and_then(|set| rows_with(&set)) {
        Ok(rows) => print!("{}", markdown(&rows)),
        Err(e) => {
            eprintln!("fidelity: {e}");
            std::process::exit(1);
        }
    }
}
