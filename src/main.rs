//! karpenter-tui: argument parsing and wiring only.

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use karpenter_tui::cli;
use karpenter_tui::engine::catalog::report;

#[derive(Parser)]
#[command(name = "karpenter-tui", version, about = "See and steer Karpenter-style node autoscaling")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, ValueEnum)]
enum Output {
    Table,
    Json,
}

#[derive(Clone, Copy, ValueEnum)]
enum Source {
    Aws,
    Kwok,
}

#[derive(Subcommand)]
enum Command {
    /// The instance types, capacities, allocatable and prices the engine uses.
    Catalog {
        #[arg(long, default_value = "us-east-1")]
        region: String,
        #[arg(long, value_enum, default_value = "aws")]
        source: Source,
        #[arg(short, long, value_enum, default_value = "table")]
        output: Output,
    },
    /// What would be provisioned for the pending pods in a set of manifests, and why the rest stay pending.
    Plan {
        /// Multi-document YAML: NodePools, EC2NodeClasses, Pods, Deployments, DaemonSets, Nodes, NodeClaims,
        /// PDBs, PVCs, PVs, StorageClasses, Namespaces.
        #[arg(short, long)]
        file: String,
        #[arg(long, value_enum, default_value = "aws")]
        source: Source,
        #[arg(long, default_value = "us-east-1")]
        region: String,
        #[arg(short, long, value_enum, default_value = "table")]
        output: Output,
    },
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Catalog { region, source, output } => {
            let catalog = match cli::catalog::load(matches!(source, Source::Kwok), &region, None) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    return Ok(ExitCode::from(2));
                }
            };
            match output {
                Output::Json => emit(&format!("{}\n", serde_json::to_string_pretty(&report::catalog_json(&catalog))?)),
                Output::Table => emit(&report::catalog_table(&catalog)),
            }
        }
        Command::Plan { file, source, region, output } => {
            let manifests = match cli::plan::load(&file) {
                Ok(m) => m,
                Err(e) => {
                    eprintln!("error: {e:#}");
                    return Ok(ExitCode::from(2));
                }
            };
            let catalog = cli::catalog::load(matches!(source, Source::Kwok), &region, None)?;
            let result = cli::plan::plan(&manifests, &catalog);
            match output {
                Output::Json => {
                    emit(&format!("{}\n", serde_json::to_string_pretty(&cli::plan::to_json(&manifests, &result))?))
                }
                Output::Table => emit(&cli::plan::to_table(&result)),
            }
        }
    }
}

/// Writes a command's output. A closed pipe (`| head`) is not an error worth a panic or a message.
fn emit(text: &str) -> anyhow::Result<ExitCode> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(e.into()),
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
