fn main() {
    // Behave like other Unix tools when the reader of our output goes away
    // (`numasched topo | head`): end quietly instead of panicking in println!.
    // SAFETY: called first thing, before any thread exists; SIG_DFL is a valid handler.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    std::process::exit(numasched::cli::main());
}
