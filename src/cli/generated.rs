//! Text generated from the command-line definition itself: shell completion scripts and the manual page. Both come
//! from `Cli`, so a flag added there is completed and documented without another edit.

use clap::CommandFactory;

use super::args::{Cli, ShellArg};

/// The completion script for `shell`.
pub fn completions(shell: ShellArg) -> Vec<u8> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    let name = cmd.get_name().to_string();
    match shell {
        ShellArg::Bash => clap_complete::generate(clap_complete::Shell::Bash, &mut cmd, name, &mut out),
        ShellArg::Zsh => clap_complete::generate(clap_complete::Shell::Zsh, &mut cmd, name, &mut out),
        ShellArg::Fish => clap_complete::generate(clap_complete::Shell::Fish, &mut cmd, name, &mut out),
    }
    out
}

/// The manual page, in roff: the top-level command and, as sections, each subcommand with its flags.
pub fn man_page() -> std::io::Result<Vec<u8>> {
    let cmd = Cli::command();
    let mut out = Vec::new();
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(&mut out)?;
    man.render_name_section(&mut out)?;
    man.render_synopsis_section(&mut out)?;
    man.render_description_section(&mut out)?;
    man.render_options_section(&mut out)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("{} {}", cmd.get_name(), sub.get_name());
        // Each subcommand's page body under its own heading, without repeating the title line.
        let sub_man = clap_mangen::Man::new(sub.clone().display_name(name.clone()).bin_name(name.clone()));
        out.extend_from_slice(format!(".SH \"COMMAND {}\"\n", name.to_uppercase()).as_bytes());
        if let Some(about) = sub.get_long_about().or(sub.get_about()) {
            // roff treats a line starting with '.' or '\'' as a request; these texts start with words.
            out.extend_from_slice(format!("{}\n", about.to_string().replace('\\', "\\\\")).as_bytes());
        }
        sub_man.render_synopsis_section(&mut out)?;
        sub_man.render_options_section(&mut out)?;
    }
    man.render_version_section(&mut out)?;
    Ok(out)
}
