//! `holdpoint completions`: shell completion scripts.

use clap::Args;
use clap_complete::Shell;

use crate::Failure;

#[derive(Args)]
#[command(
    after_help = "Examples:\n  holdpoint completions bash > ~/.local/share/bash-completion/completions/holdpoint\n  holdpoint completions zsh > \"${fpath[1]}/_holdpoint\"\n  holdpoint completions fish > ~/.config/fish/completions/holdpoint.fish"
)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_parser = ["bash", "zsh", "fish"])]
    shell: String,
}

pub fn run(args: CompletionsArgs, mut command: clap::Command) -> Result<(), Failure> {
    let shell: Shell = args
        .shell
        .parse()
        .map_err(|e| Failure::Usage(format!("shell: {e}")))?;
    clap_complete::generate(shell, &mut command, "holdpoint", &mut std::io::stdout());
    Ok(())
}
