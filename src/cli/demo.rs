//! `karpenter-tui demo [SCENARIO]`: the dashboard on the simulated world, in accelerated real time.

use std::path::PathBuf;

use anyhow::Context as _;

use crate::config::{Config, Paths, load_theme};
use crate::shell::sim_driver::{SimDriver, spawn};
use crate::sim::run::Playback;
use crate::sim::scenario::parse_scenario_as;
use crate::ui::action::KeyMap;
use crate::ui::app::{AppState, Msg, update};
use crate::ui::audit::AuditLog;
use crate::ui::terminal::{Session, run};

/// The built-in demo scenario.
pub const DEMO_SCENARIO: &str = include_str!("../../scenarios/demo.yaml");

pub struct DemoOptions {
    pub scenario: Option<PathBuf>,
    pub speed: Option<f64>,
    /// `--packing`, over the scenario's `settings.packing`.
    pub packing: Option<crate::engine::packing::Packing>,
    /// `--karpenter-version`, over the scenario's `settings.karpenterVersion`.
    pub karpenter_version: Option<crate::engine::version::KarpenterVersion>,
    pub readonly: bool,
    pub theme: Option<String>,
    /// `--selector` and `--extra-labels`.
    pub nodes: super::args::NodeOptions,
    pub log_format: super::logging::LogFormat,
}

pub fn run_demo(opts: DemoOptions) -> anyhow::Result<()> {
    let paths = Paths::resolve();
    let config = Config::load(&paths.config_file())?;
    let _guard = super::logging::to_file(&paths, opts.log_format);
    let (name, text) = match &opts.scenario {
        Some(p) => {
            (p.display().to_string(), std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?)
        }
        None => ("builtin:demo".to_string(), DEMO_SCENARIO.to_string()),
    };
    // Parsed on a thread of its own: the parser's garbage then lives in that thread's heap arena, which is handed
    // back whole once the scenario is dropped, instead of leaving holes among the world's objects (at 20,000 pods
    // about 70 MiB resident; see docs/performance.md).
    let mut scenario =
        std::thread::scope(|t| t.spawn(|| parse_scenario_as(&text, &name, opts.karpenter_version)).join())
            .map_err(|_| anyhow::anyhow!("the scenario parser panicked on {name}"))??;
    if let Some(p) = opts.packing {
        scenario.settings.controller.packing = p;
    }
    let mut playback = Playback::new(&scenario)?;
    // The Events pane shows why nodes are not disrupted, as against a cluster.
    playback.world.explain_events = true;
    // The world has its own copy of every object now.
    let scenario_name = scenario.name.clone();
    drop(scenario);
    drop(text);
    let readonly = config.readonly_for(opts.readonly, "demo");
    let theme = match config.theme_for(opts.theme.as_deref(), "demo") {
        Some(t) => load_theme(&paths, &t)?,
        None => crate::ui::theme::Theme::default(),
    };
    let (keymap, warnings) = KeyMap::new(&config.key_overrides(), readonly);
    let speed = opts.speed.or(config.demo_speed).unwrap_or(10.0);
    let mut state = AppState::new(keymap, theme, true, speed);
    opts.nodes.clone().apply(&mut state, &config);
    for w in warnings {
        update(&mut state, Msg::Warn(format!("config: {w}")));
    }
    tracing::info!(scenario = %name, speed, readonly, "demo starting");

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let (etx, erx) = tokio::sync::mpsc::unbounded_channel();
        let driver = SimDriver::new(playback, scenario_name, speed, readonly);
        let (commands, handle) = spawn(driver, etx).context("starting the simulation thread")?;
        let session =
            Session { state, commands, events: erx, audit: AuditLog::new(paths.audit_file()), context: "demo".into() };
        let result = run(session).await;
        // The driver stops when its command channel closes (dropped with the session).
        let _ = tokio::task::spawn_blocking(move || handle.join()).await;
        result
    })
}

/// `karpenter-tui info`: where configuration, themes, logs and the audit log live.
pub fn info() -> String {
    let p = Paths::resolve();
    let mut out = String::new();
    out.push_str(&format!("version           {}\n", super::args::VERSION));
    out.push_str(&format!("config directory  {}\n", p.config_dir.display()));
    out.push_str(&format!(
        "config file       {}{}\n",
        p.config_file().display(),
        if p.config_file().is_file() { "" } else { " (absent: defaults)" }
    ));
    out.push_str(&format!("themes            {} (built in: dark, light, high-contrast)\n", p.themes_dir().display()));
    out.push_str(&format!("state directory   {}\n", p.state_dir.display()));
    out.push_str(&format!("log file          {}\n", p.log_file().display()));
    out.push_str(&format!("audit log         {}\n", p.audit_file().display()));
    out.push_str(&packing_info(&p));
    out.push_str(&version_info(&p));
    out.push_str(&feature_gates_info(&p));
    out
}

/// The Karpenter version a live dashboard or controller would follow: the config file's `karpenterVersion:`, else
/// the cluster's (found when it connects), else the newest modelled.
fn version_info(p: &Paths) -> String {
    use crate::engine::version::KarpenterVersion;
    let modelled: Vec<&str> = KarpenterVersion::MODELLED.iter().map(|v| v.as_str()).collect();
    let line = match crate::config::Config::load(&p.config_file()) {
        Ok(c) => match c.karpenter_version {
            Some(set) => format!("{set} (set in the config file)"),
            None => format!(
                "the cluster's upstream Karpenter, else {} (scenarios and plan --file: {})",
                KarpenterVersion::NEWEST,
                KarpenterVersion::NEWEST
            ),
        },
        Err(_) => format!("{} (default shown: the config file is not valid, see below)", KarpenterVersion::NEWEST),
    };
    format!(
        "karpenter version {line}\n                  modelled: {}  (--karpenter-version; config karpenterVersion:)\n",
        modelled.join(", ")
    )
}

/// The packing strategy a live dashboard or controller would run with: the config file's `packing:`, else
/// upstream (`--packing` goes over it; a scenario's `settings.packing` sets it for `simulate` and `demo`).
fn packing_info(p: &Paths) -> String {
    use crate::engine::packing::Packing;
    let default = Packing::default();
    let line = match crate::config::Config::load(&p.config_file()) {
        Ok(c) => match c.packing {
            Some(set) => format!("{set} (set in the config file; default {default})"),
            None => format!("{default} (default)"),
        },
        Err(_) => format!("{default} (default shown: the config file is not valid, see below)"),
    };
    format!("packing strategy  {line}  (--packing upstream|cost; config packing:)\n")
}

/// The feature gates a live dashboard or controller would run with: upstream v1.14.1's defaults under the config
/// file's `controller.featureGates` (`--feature-gates` goes over these; a scenario's `settings.featureGates` sets
/// them for `simulate` and `demo`).
fn feature_gates_info(p: &Paths) -> String {
    use crate::controller::settings::FeatureGates;
    let defaults = FeatureGates::default();
    let config = crate::config::Config::load(&p.config_file());
    let effective = config.as_ref().map_err(ToString::to_string).and_then(|c| {
        let path = p.config_file().display().to_string();
        c.controller_settings(crate::engine::disruption::gate::Mode::Auto, None, None, &path)
            .map(|s| s.gates)
            .map_err(|e| e.to_string())
    });
    let mut out = String::from("feature gates     (--feature-gates Name=true,...; config controller.featureGates)\n");
    for (name, default) in defaults.entries() {
        let now = match &effective {
            Ok(g) => g.get(name).unwrap_or(default),
            Err(_) => default,
        };
        let note = if now == default { "" } else { "  (set in the config file)" };
        out.push_str(&format!("  {name:<24}{now:<6} default {default}{note}\n"));
    }
    if let Err(e) = effective {
        out.push_str(&format!("  the config file is not valid, defaults shown: {e}\n"));
    }
    out
}
