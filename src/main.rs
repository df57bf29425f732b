fn main() {
    std::process::exit(numasched::cli::main());
}
