//! `numasched completions SHELL`: a completion script generated from the clap
//! definition, so every subcommand and flag is completed without a hand-kept list.
//!
//! Install, e.g.: `numasched completions bash > /usr/share/bash-completion/completions/numasched`.

use clap::Args;
use clap_complete::Shell;

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

pub fn run(args: CompletionsArgs) -> anyhow::Result<()> {
    print!("{}", script(args.shell));
    Ok(())
}

/// The completion script for `shell`.
pub fn script(shell: Shell) -> String {
    let mut cmd = super::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "numasched", &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bash_completes_subcommands_and_their_flags() {
        let s = script(Shell::Bash);
        assert!(s.contains("complete -F _numasched"), "a bash completion");
        for word in [
            "daemon",
            "--migrate-pages",
            "--exclude-cgroup",
            "completions",
        ] {
            assert!(s.contains(word), "{word} missing");
        }
    }

    #[test]
    fn every_shell_gets_a_script_naming_the_daemon() {
        for shell in [
            Shell::Bash,
            Shell::Zsh,
            Shell::Fish,
            Shell::Elvish,
            Shell::PowerShell,
        ] {
            let s = script(shell);
            assert!(s.contains("daemon"), "{shell}");
            assert!(s.contains("migrate-pages"), "{shell}");
        }
    }
}
