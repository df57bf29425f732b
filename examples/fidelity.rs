//! Prints the model against published measurements as the markdown table of
//! docs/fidelity.md. `cargo run --release --example fidelity`.

fn main() {
    match numasched::sim::fidelity::rows() {
        Ok(rows) => print!("{}", numasched::sim::fidelity::markdown(&rows)),
        Err(e) => {
            eprintln!("fidelity: {e}");
            std::process::exit(1);
        }
    }
}
