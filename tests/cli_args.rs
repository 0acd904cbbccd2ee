//! The command line against the README's Commands table: every flag the table lists for a command is one that
//! command takes, every documented command line parses, flags where they mean nothing are refused, and accepted
//! flags reach the options the command runs with.

use std::collections::BTreeSet;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use karpenter_tui::cli::args::{Cli, CloudArg, Command, Output, PackingArg, Source};
use karpenter_tui::cli::live_dashboard::{AwsChoice, CloudChoice};
use karpenter_tui::cli::logging::LogFormat;
use karpenter_tui::engine::disruption::gate::Mode;
use karpenter_tui::engine::packing::Packing;

fn parse(line: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("karpenter-tui").chain(line.iter().copied()))
}

fn parses(line: &[&str]) -> Cli {
    parse(line).unwrap_or_else(|e| panic!("`karpenter-tui {}` does not parse:\n{e}", line.join(" ")))
}

fn refused(line: &[&str], kind: ErrorKind) -> String {
    match parse(line) {
        Ok(cli) => panic!("`karpenter-tui {}` was accepted: {cli:?}", line.join(" ")),
        Err(e) => {
            assert_eq!(e.kind(), kind, "`karpenter-tui {}`: {e}", line.join(" "));
            e.to_string()
        }
    }
}

/// (command, flag) for every flag in the README's Commands table and in docs/commands.md: `None` is the command
/// without a subcommand.
fn documented_flags() -> BTreeSet<(Option<String>, String)> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README.md");
    let table = readme.split("## Commands").nth(1).expect("a Commands section");
    let mut out = BTreeSet::new();
    for row in table.lines().take_while(|l| !l.starts_with("## ")).filter(|l| l.starts_with("| `karpenter-tui")) {
        let row = row.replace("\\|", "/");
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (usage, what) = (cells[1], cells[2]);
        // Each backticked usage in the first cell (`demo ...` and `--sim ...`); the second cell's flags belong to
        // the first usage ("With `--cloud aws`: `--profile P`, ...").
        let usages: Vec<&str> = usage.split('`').skip(1).step_by(2).collect();
        let mut first_command = None;
        for (n, u) in usages.iter().enumerate() {
            let mut words = u.split_whitespace();
            assert_eq!(words.next(), Some("karpenter-tui"), "{u}");
            let rest: Vec<&str> = words.collect();
            let command = rest.first().filter(|w| w.chars().all(|c| c.is_ascii_lowercase())).map(|w| w.to_string());
            if n == 0 {
                first_command = Some(command.clone());
            }
            for flag in flags_in(u) {
                out.insert((command.clone(), flag));
            }
        }
        let command = first_command.expect("a usage in the first cell");
        for flag in flags_in(what) {
            out.insert((command.clone(), flag));
        }
    }
    // docs/commands.md, each command in full: a code block of usages, then what it does.
    let full = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/commands.md")).expect("commands.md");
    for section in full.split("\n## ").skip(1) {
        let mut blocks = section.split("```");
        let (Some(_), Some(usages), Some(what)) = (blocks.next(), blocks.next(), blocks.next()) else { continue };
        // A section's first block is its usage; an example's output is not.
        if !usages.trim_start().starts_with("karpenter-tui") {
            continue;
        }
        let mut first_command = None;
        for u in usages.lines().filter(|l| !l.trim().is_empty()) {
            let mut words = u.split_whitespace();
            assert_eq!(words.next(), Some("karpenter-tui"), "docs/commands.md: {u}");
            let command = words.next().filter(|w| w.chars().all(|c| c.is_ascii_lowercase())).map(str::to_string);
            first_command.get_or_insert(command.clone());
            for flag in flags_in(u) {
                out.insert((command.clone(), flag));
            }
        }
        for flag in flags_in(what) {
            out.insert((first_command.clone().expect("a usage in docs/commands.md"), flag));
        }
    }
    out
}

/// `--long` and `-o` flags in a piece of README text.
fn flags_in(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|w| (w.starts_with("--") && w.len() > 2) || *w == "-o")
        .map(str::to_string)
        .collect()
}

#[test]
fn every_flag_in_the_readme_table_is_taken_by_its_command() {
    let documented = documented_flags();
    // The table is really being read: these come from its first row's text and from the controller row.
    for expected in [
        (None, "--region"),
        (None, "--service-cidr"),
        (Some("controller"), "--health-addr"),
        (Some("controller"), "--lease-namespace"),
        (Some("demo"), "--speed"),
    ] {
        let key = (expected.0.map(str::to_string), expected.1.to_string());
        assert!(documented.contains(&key), "{key:?} not found in the README: {documented:?}");
    }
    // Built, so clap's own `--help` and `--version` are among the arguments.
    let mut root = Cli::command();
    root.build();
    let mut missing = Vec::new();
    for (command, flag) in &documented {
        let cmd = match command {
            None => &root,
            Some(name) => root.find_subcommand(name).unwrap_or_else(|| panic!("no `{name}` command")),
        };
        let takes = cmd.get_arguments().any(|a| match flag.strip_prefix("--") {
            Some(long) => a.get_long() == Some(long),
            None => a.get_short() == flag.strip_prefix('-').and_then(|s| s.chars().next()),
        });
        if !takes {
            missing.push(format!("{} {flag}", command.as_deref().unwrap_or("(dashboard)")));
        }
    }
    assert!(missing.is_empty(), "documented but not accepted: {missing:?}");
}

#[test]
fn every_documented_command_line_parses() {
    let aws = [
        "--profile",
        "prod",
        "--region",
        "eu-west-1",
        "--cluster-name",
        "blue",
        "--interruption-queue",
        "blue-interruptions",
        "--cluster-endpoint",
        "https://blue.example",
        "--cluster-ca-bundle",
        "Q0E=",
        "--service-cidr",
        "10.100.0.0/16",
    ];
    let lines: Vec<Vec<&str>> = vec![
        vec![],
        vec!["--kubeconfig", "k.yaml", "--context", "c", "--cloud", "aws", "--mode", "approve", "--takeover"],
        vec!["--cloud", "kwok", "--mode", "auto", "--readonly"],
        vec!["--mode", "dry-run", "--theme", "light", "--log-format", "json", "--sync-timeout-secs", "5"],
        [&["--cloud", "aws"][..], &aws].concat(),
        vec!["plan", "--kubeconfig", "k.yaml", "--context", "c", "-o", "table"],
        vec!["plan", "-o", "json"],
        vec!["plan", "--output", "json", "--log-format", "json"],
        vec!["plan", "--cloud", "aws", "--profile", "prod", "--region", "eu-west-1"],
        vec!["plan", "--cloud", "kwok"],
        vec!["controller", "--in-cluster", "--cloud", "aws", "--mode", "auto", "--health-addr", "0.0.0.0:8081"],
        vec!["controller", "--cloud", "kwok", "--kubeconfig", "k.yaml", "--context", "c", "--log-format", "plain"],
        [&["controller", "--in-cluster", "--cloud", "aws"][..], &aws].concat(),
        vec!["plan", "--file", "m.yaml", "--source", "aws", "--region", "eu-west-1", "-o", "json"],
        vec!["plan", "-f", "m.yaml", "--source", "kwok", "-o", "table"],
        vec!["simulate", "s.yaml", "-o", "json", "--until", "2h", "--seed", "7"],
        vec!["simulate", "s.yaml"],
        vec!["demo"],
        vec!["demo", "s.yaml", "--speed", "20", "--readonly", "--theme", "high-contrast", "--log-format", "json"],
        vec!["--sim"],
        vec!["--sim", "s.yaml", "--readonly", "--theme", "dark"],
        vec!["info"],
        vec!["catalog", "--region", "eu-west-1", "--source", "kwok", "-o", "json"],
        vec!["catalog"],
        vec!["--cloud", "kwok", "--packing", "cost"],
        vec!["controller", "--cloud", "kwok", "--packing", "upstream"],
        vec!["plan", "-f", "m.yaml", "--packing", "cost"],
        vec!["simulate", "s.yaml", "--packing", "cost"],
        vec!["demo", "s.yaml", "--packing", "cost"],
        vec!["--sim", "s.yaml", "--packing", "cost"],
    ];
    for line in &lines {
        parses(line);
    }
    // What the deploy/ manifests run.
    for file in ["controller.yaml", "controller-aws.yaml"] {
        let text = std::fs::read_to_string(format!("{}/deploy/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
        let args: Vec<String> = text
            .lines()
            .skip_while(|l| l.trim() != "args:")
            .skip(1)
            .map(str::trim)
            .take_while(|l| l.starts_with("- ") || l.starts_with('#'))
            .filter_map(|l| l.strip_prefix("- ").map(str::to_string))
            .collect();
        assert_eq!(args.first().map(String::as_str), Some("controller"), "{file}");
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        parses(&args);
    }
}

#[test]
fn flags_that_mean_nothing_for_a_command_are_refused() {
    for line in [
        &["simulate", "s.yaml", "--cloud", "aws"][..],
        &["simulate", "s.yaml", "--kubeconfig", "k.yaml"],
        &["catalog", "--kubeconfig", "k.yaml"],
        &["catalog", "--log-format", "json"],
        &["demo", "--cloud", "aws"],
        &["demo", "--region", "eu-west-1"],
        &["info", "--region", "eu-west-1"],
        &["controller", "--cloud", "kwok", "--readonly"],
        &["controller", "--cloud", "kwok", "--theme", "dark"],
        &["plan", "--mode", "auto"],
        &["plan", "--interruption-queue", "q"],
        &["plan", "--theme", "dark"],
    ] {
        let e = refused(line, ErrorKind::UnknownArgument);
        assert!(e.contains("unexpected argument"), "{e}");
    }
    for line in [
        &["--sim", "--cloud", "aws"][..],
        &["--sim", "--kubeconfig", "k.yaml"],
        &["--sim", "--region", "eu-west-1"],
        &["controller", "--in-cluster", "--kubeconfig", "k.yaml", "--cloud", "kwok"],
        &["plan", "--file", "m.yaml", "--kubeconfig", "k.yaml"],
        &["plan", "--file", "m.yaml", "--context", "c"],
        &["plan", "--source", "kwok", "--cloud", "aws"],
    ] {
        refused(line, ErrorKind::ArgumentConflict);
    }
    // The dashboard's flags before a subcommand would be dropped by it: refused.
    assert!(parse(&["--cloud", "aws", "plan"]).is_err());
    assert!(parse(&["--readonly", "controller", "--cloud", "kwok"]).is_err());
    let e = refused(&["controller"], ErrorKind::MissingRequiredArgument);
    assert!(e.contains("--cloud"), "{e}");
    let e = refused(&["--mode", "yolo"], ErrorKind::InvalidValue);
    assert!(e.contains("dry-run"), "{e}");
    refused(&["--log-format", "xml"], ErrorKind::InvalidValue);
    for line in [
        &["--packing", "cheapest"][..],
        &["controller", "--cloud", "kwok", "--packing", "cheapest"],
        &["plan", "--packing", "cheapest"],
        &["simulate", "s.yaml", "--packing", "cheapest"],
        &["demo", "--packing", "Cost"],
    ] {
        let e = refused(line, ErrorKind::InvalidValue);
        assert!(e.contains("upstream") && e.contains("cost"), "the values are listed: {e}");
    }
    refused(&["catalog", "--packing", "cost"], ErrorKind::UnknownArgument);
    refused(&["info", "--packing", "cost"], ErrorKind::UnknownArgument);
}

#[test]
fn packing_reaches_every_command() {
    let cli = parses(&["--cloud", "kwok", "--packing", "cost"]);
    let o = cli.live.options(cli.cloud, false, Mode::Approve, Some(&cli.ui)).expect("options");
    assert_eq!(o.packing, Some(Packing::Cost), "the dashboard");
    let cli = parses(&["--cloud", "kwok"]);
    let o = cli.live.options(cli.cloud, false, Mode::Approve, Some(&cli.ui)).expect("options");
    assert_eq!(o.packing, None, "left to the config file");
    let Some(Command::Controller { in_cluster, cloud, live, .. }) =
        parses(&["controller", "--cloud", "kwok", "--packing", "cost"]).command
    else {
        panic!("controller")
    };
    let o = live.options(Some(cloud), in_cluster, Mode::Auto, None).expect("options");
    assert_eq!(o.packing, Some(Packing::Cost), "the controller");
    // As `controller` and the dashboard read their settings: the flag over the config file's `packing:`.
    let config = karpenter_tui::config::Config::parse("packing: upstream\n", "c.yaml").expect("config");
    let settings = config.controller_settings(o.mode, o.feature_gates.as_deref(), o.packing, "c.yaml").expect("valid");
    assert_eq!(settings.packing, Packing::Cost);
    let Some(Command::Plan { packing, .. }) = parses(&["plan", "-f", "m.yaml", "--packing", "cost"]).command else {
        panic!("plan")
    };
    assert_eq!(packing, Some(PackingArg::Cost));
    let Some(Command::Simulate { packing, .. }) = parses(&["simulate", "s.yaml", "--packing", "cost"]).command else {
        panic!("simulate")
    };
    assert_eq!(packing.map(Packing::from), Some(Packing::Cost));
    let Some(Command::Demo { packing, .. }) = parses(&["demo", "--packing", "upstream"]).command else {
        panic!("demo")
    };
    assert_eq!(packing, Some(PackingArg::Upstream));
    let mut cli = parses(&["--sim", "s.yaml", "--packing", "cost"]);
    let Some(Command::Demo { packing, .. }) = cli.sim_as_demo() else { panic!("demo") };
    assert_eq!(packing, Some(PackingArg::Cost), "--sim is the demo, --packing included");
}

#[test]
fn the_aws_providers_gates_have_their_own_flag() {
    let options = |line: &[&str]| {
        let Some(Command::Controller { in_cluster, cloud, live, .. }) = parses(line).command else {
            panic!("controller")
        };
        live.options(Some(cloud), in_cluster, Mode::Auto, None)
    };
    let o = options(&[
        "controller",
        "--cloud",
        "aws",
        "--feature-gates",
        "NodeRepair=true",
        "--aws-feature-gates",
        "RebootForRepair=true",
    ])
    .expect("options");
    let config = karpenter_tui::config::Config::parse("theme: dark\n", "c.yaml").expect("config");
    let s = config.controller_settings(o.mode, o.feature_gates.as_deref(), o.packing, "c.yaml").expect("valid");
    assert!(s.gates.node_repair && s.gates.reboot_for_repair);
    let e = options(&["controller", "--cloud", "aws", "--feature-gates", "RebootForRepair=true"])
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("--feature-gates: RebootForRepair is the AWS provider's gate"), "{e}");
    let e = options(&["controller", "--cloud", "aws", "--aws-feature-gates", "NodeRepair=true"])
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("--aws-feature-gates: NodeRepair is not an AWS provider gate"), "{e}");
}

#[test]
fn repair_flags_reach_the_controllers_settings() {
    let Some(Command::Controller { in_cluster, cloud, live, .. }) =
        parses(&["controller", "--cloud", "kwok", "--legacy-node-repair", "--repairs-without-approval"]).command
    else {
        panic!("controller")
    };
    let o = live.options(Some(cloud), in_cluster, Mode::Approve, None).expect("options");
    let s = o.controller_settings();
    assert!(s.legacy_node_repair && !s.approve_repairs);
    let cli = parses(&["--cloud", "kwok"]);
    let o = cli.live.options(cli.cloud, false, Mode::Approve, Some(&cli.ui)).expect("options");
    let s = o.controller_settings();
    assert!(!s.legacy_node_repair && s.approve_repairs, "upstream's default; repairs wait in approve mode");
}

#[test]
fn controller_aws_flags_reach_its_options() {
    let cli = parses(&[
        "controller",
        "--cloud",
        "aws",
        "--region",
        "eu-west-1",
        "--profile",
        "prod",
        "--cluster-name",
        "blue",
        "--interruption-queue",
        "blue-interruptions",
        "--cluster-endpoint",
        "https://blue.example",
        "--cluster-ca-bundle",
        "Q0E=",
        "--service-cidr",
        "10.100.0.0/16",
        "--kubeconfig",
        "k.yaml",
        "--context",
        "c",
        "--sync-timeout-secs",
        "5",
        "--takeover",
        "--lease-namespace",
        "karpenter-tui",
        "--log-format",
        "json",
    ]);
    let Some(Command::Controller { in_cluster, cloud, live, log, .. }) = cli.command else { panic!("controller") };
    assert_eq!(log.log_format, LogFormat::Json);
    let o = live.options(Some(cloud), in_cluster, Mode::Auto, None).expect("options");
    assert_eq!(o.mode, Mode::Auto, "the controller's default mode");
    assert_eq!(o.catalog.region, "eu-west-1");
    assert_eq!(o.sync_timeout, Duration::from_secs(5));
    assert!(o.takeover);
    assert_eq!(o.lease_namespace, "karpenter-tui");
    assert!(!o.readonly);
    assert_eq!(o.connect.kubeconfig.as_deref(), Some(std::path::Path::new("k.yaml")));
    assert_eq!(o.connect.context.as_deref(), Some("c"));
    assert_eq!(o.connect.cluster_name.as_deref(), Some("blue"));
    assert!(!o.connect.in_cluster);
    let Some(CloudChoice::Aws(AwsChoice {
        aws,
        interruption_queue,
        cluster_endpoint,
        cluster_ca_bundle,
        service_cidr,
    })) = o.cloud
    else {
        panic!("--cloud aws: {:?}", o.cloud)
    };
    assert_eq!(aws.region.as_deref(), Some("eu-west-1"));
    assert_eq!(aws.profile.as_deref(), Some("prod"));
    assert_eq!(interruption_queue.as_deref(), Some("blue-interruptions"));
    assert_eq!(cluster_endpoint.as_deref(), Some("https://blue.example"));
    assert_eq!(cluster_ca_bundle.as_deref(), Some("Q0E="));
    assert_eq!(service_cidr.as_deref(), Some("10.100.0.0/16"));
}

#[test]
fn dashboard_flags_reach_its_options() {
    let cli =
        parses(&["--cloud", "kwok", "--region", "eu-west-1", "--readonly", "--theme", "light", "--mode", "dry-run"]);
    let o = cli.live.options(cli.cloud, false, Mode::Approve, Some(&cli.ui)).expect("options");
    assert_eq!(o.cloud, Some(CloudChoice::Kwok));
    assert_eq!(o.mode, Mode::DryRun);
    assert!(o.readonly);
    assert_eq!(o.theme.as_deref(), Some("light"));
    assert_eq!(o.catalog.region, "eu-west-1");
    let kwok_types: BTreeSet<&str> = o.catalog.instance_types.iter().map(|t| t.name.as_str()).collect();
    let aws = parses(&["--region", "eu-west-1"]);
    let o = aws.live.options(aws.cloud, false, Mode::Approve, Some(&aws.ui)).expect("options");
    assert_eq!((o.cloud, o.mode, o.readonly), (None, Mode::Approve, false), "observes, approve by default");
    let aws_types: BTreeSet<&str> = o.catalog.instance_types.iter().map(|t| t.name.as_str()).collect();
    assert_ne!(kwok_types, aws_types, "--cloud kwok plans with the KWOK catalog");

    // AWS settings without the AWS cloud would be ignored: said instead.
    for line in [&["--profile", "prod"][..], &["--cloud", "kwok", "--interruption-queue", "q"]] {
        let cli = parses(line);
        let Err(e) = cli.live.options(cli.cloud, false, Mode::Approve, Some(&cli.ui)) else { panic!("accepted") };
        assert!(e.to_string().contains("only apply with --cloud aws"), "{e}");
    }
}

#[test]
fn sim_is_the_demo_with_the_dashboards_look() {
    let mut cli = parses(&["--sim", "s.yaml", "--readonly", "--theme", "dark", "--log-format", "json"]);
    let Some(Command::Demo { scenario, speed, packing, karpenter_version, ui, log }) = cli.sim_as_demo() else {
        panic!("demo")
    };
    assert_eq!(scenario.as_deref(), Some("s.yaml"));
    assert_eq!((speed, packing, karpenter_version), (None, None, None));
    assert!(ui.readonly);
    assert_eq!(ui.theme.as_deref(), Some("dark"));
    assert_eq!(log.log_format, LogFormat::Json);
    let Some(Command::Demo { scenario: None, .. }) = parses(&["--sim"]).sim_as_demo() else { panic!("demo") };
    assert!(parses(&[]).sim_as_demo().is_none());
}

#[test]
fn plan_takes_its_catalog_flags() {
    let Some(Command::Plan { file, source, cloud, profile, region, output, kube, .. }) =
        parses(&["plan", "--cloud", "aws", "--profile", "prod", "--region", "eu-west-1", "-o", "json"]).command
    else {
        panic!("plan")
    };
    assert_eq!((file, source, cloud, output), (None, None, Some(CloudArg::Aws), Output::Json));
    assert_eq!((profile.as_deref(), region.as_deref()), (Some("prod"), Some("eu-west-1")));
    assert_eq!(kube.sync_timeout_secs, 30);
    let Some(Command::Plan { file, source, .. }) = parses(&["plan", "-f", "m.yaml", "--source", "kwok"]).command else {
        panic!("plan")
    };
    assert_eq!((file.as_deref(), source), (Some("m.yaml"), Some(Source::Kwok)));
}

#[test]
fn plan_refuses_an_aws_profile_without_the_aws_cloud() {
    let Err(e) = karpenter_tui::cli::args::plan_catalog(None, None, Some("prod".into()), None) else {
        panic!("accepted")
    };
    assert!(e.to_string().contains("--profile only applies with --cloud aws"), "{e}");
    let kwok = karpenter_tui::cli::args::plan_catalog(None, Some(CloudArg::Kwok), None, None).expect("kwok");
    let source_kwok = karpenter_tui::cli::args::plan_catalog(Some(Source::Kwok), None, None, None).expect("kwok");
    assert_eq!(kwok.instance_types.len(), source_kwok.instance_types.len());
}

#[test]
fn info_lists_the_packing_strategy_in_effect() {
    let dir = std::env::temp_dir().join(format!("ktui-cli-args-info-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let info = |config: Option<&str>| {
        let file = dir.join("config.yaml");
        match config {
            Some(text) => std::fs::write(&file, text).unwrap(),
            None => {
                let _ = std::fs::remove_file(&file);
            }
        }
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_karpenter-tui"))
            .arg("info")
            .env("KARPENTER_TUI_CONFIG_DIR", &dir)
            .env("KARPENTER_TUI_STATE_DIR", &dir)
            .output()
            .expect("runs the binary");
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).expect("utf-8");
        text.lines().find(|l| l.starts_with("packing strategy")).unwrap_or_else(|| panic!("{text}")).to_string()
    };
    assert!(info(None).starts_with("packing strategy  upstream (default)"), "{}", info(None));
    let set = info(Some("packing: cost\n"));
    assert!(set.starts_with("packing strategy  cost (set in the config file"), "{set}");
    let bad = info(Some("packing: cheapest\n"));
    assert!(bad.starts_with("packing strategy  upstream") && bad.contains("not valid"), "{bad}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let err = parse(&["--version"]).expect_err("--version prints and stops");
    assert_eq!(err.kind(), ErrorKind::DisplayVersion);
    let text = err.to_string();
    let commit = text.split("(commit ").nth(1).and_then(|r| r.split(')').next()).expect("a commit in --version");
    assert!(!commit.is_empty(), "{text}");
    // A clone has its .git, so the commit is a hash, not the stand-in for a build without one.
    if std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.git")).exists() {
        assert!(commit.chars().all(|c| c.is_ascii_hexdigit()) && commit.len() >= 7, "{text}");
    }
}

#[test]
fn completions_and_the_man_page_cover_every_command_and_flag() {
    use karpenter_tui::cli::args::ShellArg;
    use karpenter_tui::cli::generated::{completions, man_page};
    let cli = Cli::command();
    let commands: Vec<String> = cli.get_subcommands().map(|c| c.get_name().to_string()).collect();
    assert!(commands.iter().any(|c| c == "completions") && commands.iter().any(|c| c == "man"), "{commands:?}");
    let man = String::from_utf8(man_page().expect("man page")).expect("roff is text");
    for shell in [ShellArg::Bash, ShellArg::Zsh, ShellArg::Fish] {
        let script = String::from_utf8(completions(shell)).expect("scripts are text");
        for c in &commands {
            assert!(script.contains(c.as_str()), "{shell:?} completion lacks `{c}`");
        }
    }
    for sub in cli.get_subcommands() {
        let heading = format!("COMMAND KARPENTER-TUI {}", sub.get_name().to_uppercase());
        assert!(man.contains(&heading), "man page lacks {heading}");
        for arg in sub.get_arguments().filter_map(|a| a.get_long()) {
            // roff escapes the dashes of a flag.
            let flag = format!("\\-\\-{}", arg.replace('-', "\\-"));
            assert!(man.contains(&flag), "man page lacks {} {flag}", sub.get_name());
        }
    }
    // `completions` refuses a shell it does not write for.
    refused(&["completions", "powershell"], ErrorKind::InvalidValue);
}

#[test]
fn the_dashboards_take_a_node_label_selector_and_extra_label_columns() {
    let cli = parses(&["-l", "karpenter.sh/capacity-type=spot", "--extra-labels", "karpenter.sh/nodepool,team"]);
    let o = cli.ui.node_options();
    assert_eq!(o.selector.map(|s| s.text).as_deref(), Some("karpenter.sh/capacity-type=spot"), "the dashboard");
    assert_eq!(o.extra_labels, ["karpenter.sh/nodepool", "team"]);
    let Some(Command::Demo { ui, .. }) =
        parses(&["demo", "--selector", "zone in (a, b),!gpu", "--extra-labels", "zone"]).command
    else {
        panic!("demo")
    };
    let sel = ui.selector.expect("a selector");
    assert_eq!(sel.text, "zone in (a, b),!gpu");
    let labels = |pairs: &[(&str, &str)]| -> std::collections::BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    assert!(sel.matches(&labels(&[("zone", "b")])));
    assert!(!sel.matches(&labels(&[("zone", "b"), ("gpu", "")])));
    assert_eq!(ui.extra_labels, ["zone"]);
    let mut cli = parses(&["--sim", "-l", "a=b"]);
    let Some(Command::Demo { ui, .. }) = cli.sim_as_demo() else { panic!("demo") };
    assert_eq!(ui.selector.map(|s| s.text).as_deref(), Some("a=b"), "--sim keeps the selector");
    // A bad selector is a usage error (exit code 2) naming the flag and where the problem is.
    for (line, at) in [(&["-l", "zone in a"][..], 9), (&["demo", "--selector", "a=b,,c"], 5)] {
        let e = refused(line, ErrorKind::ValueValidation);
        assert!(e.contains("--selector"), "{e}");
        assert!(e.contains(&format!("at character {at}")), "{e}");
        assert_eq!(parse(line).expect_err("refused").exit_code(), 2);
    }
    refused(&["controller", "--cloud", "kwok", "-l", "a=b"], ErrorKind::UnknownArgument);
    refused(&["plan", "--extra-labels", "a"], ErrorKind::UnknownArgument);
}

/// The README is the product page: short enough to read (under 10 KB), with the picture of the dashboard, and no
/// issue numbers or figures without a date (the reference pages in docs/ carry the details).
#[test]
fn the_readme_stays_a_page_people_read() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README.md");
    assert!(readme.len() < 10 * 1024, "README.md is {} bytes; move detail into docs/", readme.len());
    assert!(readme.contains("](docs/dashboard.svg)"), "the picture");
    let issue = readme.match_indices('#').find(|(i, _)| {
        readme[i + 1..].chars().next().is_some_and(|c| c.is_ascii_digit())
            && !readme[..*i].ends_with('(')
            && !readme[..*i].ends_with('/')
    });
    assert!(issue.is_none(), "an issue number in the README: {:?}", issue.map(|(i, _)| &readme[i..i + 8]));
    for section in ["## Install", "## Quick start", "## Commands", "## What is and isn't modelled"] {
        assert!(readme.contains(section), "{section}");
    }
}
