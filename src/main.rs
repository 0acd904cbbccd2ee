//! karpenter-tui: argument parsing and wiring only.

use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use karpenter_tui::cli;

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
                Output::Json => println!("{}", serde_json::to_string_pretty(&cli::plan::to_json(&manifests, &result))?),
                Output::Table => print!("{}", cli::plan::to_table(&result)),
            }
            Ok(ExitCode::SUCCESS)
        }
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
