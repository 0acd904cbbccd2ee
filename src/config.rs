//! Where things live (XDG), and the user's config file.
//!
//! - config: `$KARPENTER_TUI_CONFIG_DIR` or `$XDG_CONFIG_HOME/karpenter-tui/` → `config.yaml`, `themes/*.toml`
//! - state: `$KARPENTER_TUI_STATE_DIR` or `$XDG_STATE_HOME/karpenter-tui/` → `karpenter-tui.log`, `audit.log`
//!
//! `karpenter-tui info` prints the resolved paths. A config file that fails to parse is an error naming its line
//! and column (the program does not guess); unknown action names under `keys:` are only warnings.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    pub config_dir: PathBuf,
    pub state_dir: PathBuf,
}

impl Paths {
    pub fn resolve() -> Paths {
        let dirs = directories::ProjectDirs::from("", "", "karpenter-tui");
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
        let config_dir = std::env::var_os("KARPENTER_TUI_CONFIG_DIR")
            .map(PathBuf::from)
            .or_else(|| dirs.as_ref().map(|d| d.config_dir().to_path_buf()))
            .unwrap_or_else(|| home.join(".config/karpenter-tui"));
        let state_dir = std::env::var_os("KARPENTER_TUI_STATE_DIR")
            .map(PathBuf::from)
            .or_else(|| dirs.as_ref().and_then(|d| d.state_dir().map(Path::to_path_buf)))
            .unwrap_or_else(|| home.join(".local/state/karpenter-tui"));
        Paths { config_dir, state_dir }
    }

    pub fn config_file(&self) -> PathBuf {
        self.config_dir.join("config.yaml")
    }
    pub fn themes_dir(&self) -> PathBuf {
        self.config_dir.join("themes")
    }
    pub fn log_file(&self) -> PathBuf {
        self.state_dir.join("karpenter-tui.log")
    }
    pub fn audit_file(&self) -> PathBuf {
        self.state_dir.join("audit.log")
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Config {
    /// A built-in theme name, a theme in the config's themes/ directory, or a path to a .toml file.
    #[serde(default)]
    pub theme: Option<String>,
    #[serde(default)]
    pub read_only: bool,
    /// Action name → keys, replacing that action's default keys (`approve: [y]`).
    #[serde(default)]
    pub keys: BTreeMap<String, OneOrMany>,
    /// Per kube context overrides.
    #[serde(default)]
    pub contexts: BTreeMap<String, ContextConfig>,
    /// The demo clock's default speed.
    #[serde(default)]
    pub demo_speed: Option<f64>,
    /// The controller's settings when it acts on a live cluster (a scenario's `settings` set them in `simulate`).
    #[serde(default)]
    pub controller: ControllerConfig,
    /// How provisioning sizes new NodeClaims on a live cluster: `upstream` (default) or `cost`; `--packing`
    /// overrides it (a scenario's `settings.packing` sets it in `simulate` and `demo`). An unknown strategy fails
    /// the parse, at its line and column.
    #[serde(default, deserialize_with = "packing_strategy")]
    pub packing: Option<crate::engine::packing::Packing>,
    /// Whose decisions and validation to follow on a live cluster: `"1.14"` or `"1.15"`; `--karpenter-version`
    /// overrides it, and without either the version of the upstream Karpenter found in the cluster applies (else
    /// the newest modelled). An unknown version fails the parse, at its line and column.
    #[serde(default)]
    pub karpenter_version: Option<crate::engine::version::KarpenterVersion>,
    /// Label keys the Nodes & NodeClaims pane shows as columns of their own; `--extra-labels` replaces them.
    #[serde(default)]
    pub extra_labels: Vec<String>,
    /// Default topology spread on a live cluster (Karpenter v1.15's `--scheduler-config` document:
    /// `{podTopologySpread: {defaultConstraints: [...]}}`); the flag replaces it. Checked as the flag is, each problem
    /// at its line and column.
    #[serde(default)]
    pub scheduler_config: Option<crate::engine::api::scheduler_config::SchedulerConfig>,
}

/// `packing: cost`, by [`crate::engine::packing::Packing`]'s names.
fn packing_strategy<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<crate::engine::packing::Packing>, D::Error> {
    Ok(Option::<PackingName>::deserialize(d)?.map(|p| p.0))
}

/// A packing strategy's name, refused where it stands in the file when unknown (the error then names the value's
/// line and column and the key).
struct PackingName(crate::engine::packing::Packing);

impl<'de> Deserialize<'de> for PackingName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Name;
        impl serde::de::Visitor<'_> for Name {
            type Value = PackingName;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a packing strategy: upstream or cost")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<PackingName, E> {
                v.parse().map(PackingName).map_err(E::custom)
            }
        }
        d.deserialize_str(Name)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ControllerConfig {
    /// Feature gate `SpotToSpotConsolidation` (default off, as upstream); the same as
    /// `featureGates: {SpotToSpotConsolidation: true}`.
    #[serde(default)]
    pub spot_to_spot: Option<bool>,
    /// Upstream's feature gates by name (`NodeRepair: true`); unset gates keep upstream v1.14.1's defaults, and
    /// `--feature-gates` overrides these.
    #[serde(default)]
    pub feature_gates: BTreeMap<String, bool>,
    /// Provisioning batch windows (Go durations: `1s`, `10s`).
    #[serde(default)]
    pub batch_idle: Option<String>,
    #[serde(default)]
    pub batch_max: Option<String>,
    /// How long a consolidation command waits before it is validated again and started (default `15s`).
    #[serde(default)]
    pub validation_delay: Option<String>,
    /// Candidates multi-node consolidation looks at, at most (default 100).
    #[serde(default)]
    pub multi_node_cap: Option<usize>,
    /// Karpenter v1.15's `--legacy-node-repair` (default false).
    #[serde(default)]
    pub legacy_node_repair: Option<bool>,
    /// In approve mode, node repairs start without an operator (default false).
    #[serde(default)]
    pub repairs_without_approval: Option<bool>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ContextConfig {
    #[serde(default)]
    pub read_only: Option<bool>,
    #[serde(default)]
    pub theme: Option<String>,
}

/// `approve: y` or `approve: [y, ctrl-a]`: the same one-or-many shape as an inline instance type's `os:`.
pub use crate::engine::catalog::inline::OneOrMany;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("{path}: {message}")]
    Read { path: String, message: String },
    #[error("{path}:{line}:{column}: {message}")]
    Parse { path: String, line: usize, column: usize, message: String },
}

impl Config {
    /// Reads the config file; a missing file is the default config.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Config::default()),
            Err(e) => return Err(ConfigError::Read { path: path.display().to_string(), message: e.to_string() }),
        };
        Config::parse(&text, &path.display().to_string())
    }

    pub fn parse(text: &str, path: &str) -> Result<Config, ConfigError> {
        if text.trim().is_empty() {
            return Ok(Config::default());
        }
        let config: Config = serde_yaml::from_str(text).map_err(|e| {
            let (line, column) = e.location().map(|l| (l.line(), l.column())).unwrap_or((1, 1));
            ConfigError::Parse { path: path.to_string(), line, column, message: e.to_string() }
        })?;
        if let Some(sc) = &config.scheduler_config {
            config.check_scheduler_config(sc, text, path)?;
        }
        Ok(config)
    }

    /// What `deny_unknown_fields` cannot see in `schedulerConfig` (the Kubernetes constraint type skips unknown
    /// keys) and the rules upstream checks its flag against, at the field's line and column.
    fn check_scheduler_config(
        &self,
        sc: &crate::engine::api::scheduler_config::SchedulerConfig,
        text: &str,
        path: &str,
    ) -> Result<(), ConfigError> {
        use crate::engine::api::strict::{YamlIndex, ignored_path};
        use crate::engine::api::validation::FieldPath;
        let index = YamlIndex::parse(text).ok();
        let located = |at: &FieldPath, message: String| {
            let pos = index.as_ref().map(|i| i.locate_nearest(at));
            let (line, column) = pos.map_or((1, 1), |p| (p.line, p.column));
            ConfigError::Parse { path: path.to_string(), line, column, message: format!("{at}: {message}") }
        };
        let mut unknown: Vec<FieldPath> = Vec::new();
        let _: Result<Config, _> =
            serde_ignored::deserialize(serde_yaml::Deserializer::from_str(text), |p| unknown.push(ignored_path(&p)));
        if let Some(at) = unknown.first() {
            return Err(located(at, "unknown field".into()));
        }
        if let Some(e) = crate::engine::api::scheduler_config::validate_scheduler_config(sc).into_iter().next() {
            let at = FieldPath(FieldPath::root().field("schedulerConfig").0.into_iter().chain(e.path.0).collect());
            return Err(located(&at, e.message));
        }
        Ok(())
    }

    /// Read-only wins from the most specific source: the flag, then the context, then the global setting.
    pub fn readonly_for(&self, flag: bool, context: &str) -> bool {
        flag || self.contexts.get(context).and_then(|c| c.read_only).unwrap_or(self.read_only)
    }

    pub fn theme_for(&self, flag: Option<&str>, context: &str) -> Option<String> {
        flag.map(str::to_string)
            .or_else(|| self.contexts.get(context).and_then(|c| c.theme.clone()))
            .or_else(|| self.theme.clone())
    }

    /// The controller's settings in disruption mode `mode` (a flag), from the `controller:` block and `packing:`
    /// over the defaults, with `--feature-gates` (`gates_flag`) and `--packing` (`packing_flag`) over both. A
    /// duration that does not parse or a gate that does not exist is an error naming the field.
    pub fn controller_settings(
        &self,
        mode: crate::engine::disruption::gate::Mode,
        gates_flag: Option<&str>,
        packing_flag: Option<crate::engine::packing::Packing>,
        path: &str,
    ) -> Result<crate::controller::Settings, ConfigError> {
        let mut s = crate::controller::Settings {
            mode,
            scheduler_config: self.scheduler_config.clone().unwrap_or_default(),
            ..Default::default()
        };
        let c = &self.controller;
        let duration = |field: &str, v: &Option<String>, default| match v {
            None => Ok(default),
            Some(text) => {
                crate::engine::lifecycle::duration_ms(text).filter(|d| *d > 0).ok_or_else(|| ConfigError::Read {
                    path: path.to_string(),
                    message: format!("controller.{field}: {text:?} is not a positive duration (such as 1s, 10s, 2m)"),
                })
            }
        };
        s.batch_idle = duration("batchIdle", &c.batch_idle, s.batch_idle)?;
        s.batch_max = duration("batchMax", &c.batch_max, s.batch_max)?;
        s.validation_delay = duration("validationDelay", &c.validation_delay, s.validation_delay)?;
        if let Some(v) = c.spot_to_spot {
            s.gates.spot_to_spot_consolidation = v;
        }
        for (name, on) in &c.feature_gates {
            s.gates.set(name, *on).map_err(|e| ConfigError::Read {
                path: path.to_string(),
                message: format!("controller.featureGates.{name}: {e}"),
            })?;
        }
        if let Some(flag) = gates_flag {
            s.gates = s
                .gates
                .with_flag(flag)
                .map_err(|e| ConfigError::Read { path: "--feature-gates".to_string(), message: e.to_string() })?;
        }
        if let Some(n) = c.multi_node_cap {
            s.multi_node_cap = n.max(1);
        }
        s.legacy_node_repair = c.legacy_node_repair.unwrap_or(s.legacy_node_repair);
        s.approve_repairs = !c.repairs_without_approval.unwrap_or(!s.approve_repairs);
        s.packing = packing_flag.or(self.packing).unwrap_or_default();
        Ok(s)
    }

    pub fn key_overrides(&self) -> BTreeMap<String, Vec<String>> {
        self.keys.iter().map(|(k, v)| (k.clone(), v.to_vec())).collect()
    }
}

/// A theme by name: built in, then `<config>/themes/<name>.toml`, then a path.
pub fn load_theme(paths: &Paths, name: &str) -> Result<crate::ui::theme::Theme, crate::ui::theme::ThemeError> {
    use crate::ui::theme::Theme;
    if let Some(t) = Theme::builtin(name) {
        return Ok(t);
    }
    let local = paths.themes_dir().join(format!("{name}.toml"));
    if local.is_file() {
        return Theme::load(&local.display().to_string());
    }
    Theme::load(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_keys_contexts_and_precedence() {
        let c = Config::parse(
            "theme: light\nreadOnly: false\nkeys:\n  approve: y\n  reject: [x, ctrl-r]\ncontexts:\n  prod:\n    readOnly: true\n",
            "config.yaml",
        )
        .expect("valid config");
        assert_eq!(c.key_overrides()["reject"], vec!["x".to_string(), "ctrl-r".to_string()]);
        assert!(c.readonly_for(false, "prod"));
        assert!(!c.readonly_for(false, "dev"));
        assert!(c.readonly_for(true, "dev"), "the flag always wins");
        assert_eq!(c.theme_for(None, "dev").as_deref(), Some("light"));
        assert_eq!(c.theme_for(Some("dark"), "dev").as_deref(), Some("dark"));
    }

    #[test]
    fn the_scheduler_config_is_checked_at_its_line_and_column() {
        let ok = "schedulerConfig:\n  podTopologySpread:\n    defaultConstraints:\n    - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}\n";
        let c = Config::parse(ok, "c.yaml").expect("valid");
        let s =
            c.controller_settings(crate::engine::disruption::gate::Mode::Auto, None, None, "c.yaml").expect("settings");
        assert_eq!(s.scheduler_config.default_constraints().len(), 1);
        let typo = ok.replace("maxSkew: 1,", "maxSkew: 1, weight: 2,");
        let err = Config::parse(&typo, "c.yaml").unwrap_err().to_string();
        assert!(err.starts_with("c.yaml:4:") && err.contains("defaultConstraints[0].weight: unknown field"), "{err}");
        let bad = ok.replace("DoNotSchedule", "Never");
        let err = Config::parse(&bad, "c.yaml").unwrap_err().to_string();
        assert!(err.starts_with("c.yaml:4:") && err.contains("whenUnsatisfiable: Unsupported value"), "{err}");
    }

    #[test]
    fn an_unknown_field_names_line_and_column() {
        let err = Config::parse("theme: dark\nreadonly: true\n", "/x/config.yaml").unwrap_err().to_string();
        assert!(err.starts_with("/x/config.yaml:2:1:"), "{err}");
        assert!(err.contains("readonly"), "{err}");
    }

    #[test]
    fn the_controller_block_sets_the_controllers_settings() {
        use crate::engine::disruption::gate::Mode;
        let c =
            Config::parse("controller:\n  spotToSpot: true\n  batchIdle: 2s\n  validationDelay: 30s\n", "config.yaml")
                .expect("valid config");
        let s = c.controller_settings(Mode::Approve, None, None, "config.yaml").expect("valid settings");
        assert_eq!(
            (s.mode, s.gates.spot_to_spot_consolidation, s.batch_idle, s.batch_max, s.validation_delay),
            (Mode::Approve, true, 2_000, 10_000, 30_000)
        );
        let bad = Config::parse("controller:\n  batchMax: soon\n", "/x/config.yaml").expect("parses");
        let err = bad.controller_settings(Mode::Auto, None, None, "/x/config.yaml").unwrap_err().to_string();
        assert!(err.starts_with("/x/config.yaml: controller.batchMax:") && err.contains("\"soon\""), "{err}");
        let unknown = Config::parse("controller:\n  spotToSpotConsolidation: true\n", "/x/config.yaml").unwrap_err();
        assert!(unknown.to_string().starts_with("/x/config.yaml:2:3:"), "{unknown}");
    }

    #[test]
    fn feature_gates_come_from_the_config_under_the_flag() {
        use crate::engine::disruption::gate::Mode;
        let c = Config::parse("controller:\n  featureGates: {NodeRepair: true, StaticCapacity: true}\n", "c.yaml")
            .expect("valid config");
        let s = c.controller_settings(Mode::Auto, Some("StaticCapacity=false"), None, "c.yaml").expect("valid");
        assert!(s.gates.node_repair && !s.gates.static_capacity && s.gates.reserved_capacity);
        let bad = Config::parse("controller:\n  featureGates: {NodeRepare: true}\n", "c.yaml").expect("parses");
        let err = bad.controller_settings(Mode::Auto, None, None, "c.yaml").unwrap_err().to_string();
        assert!(err.starts_with("c.yaml: controller.featureGates.NodeRepare: unknown feature gate"), "{err}");
        let err = c.controller_settings(Mode::Auto, Some("NodeRepair=maybe"), None, "c.yaml").unwrap_err().to_string();
        assert!(err.starts_with("--feature-gates: "), "{err}");
    }

    #[test]
    fn repair_settings_come_from_the_config() {
        use crate::engine::disruption::gate::Mode;
        let none = Config::parse("theme: dark\n", "c.yaml").expect("valid config");
        let s = none.controller_settings(Mode::Approve, None, None, "c.yaml").expect("valid");
        assert!(!s.legacy_node_repair && s.approve_repairs, "upstream's default, and repairs held in approve mode");
        let c = Config::parse("controller: {legacyNodeRepair: true, repairsWithoutApproval: true}\n", "c.yaml")
            .expect("valid config");
        let s = c.controller_settings(Mode::Approve, None, None, "c.yaml").expect("valid");
        assert!(s.legacy_node_repair && !s.approve_repairs);
        let err = Config::parse("controller: {legacyNodeRepair: sometimes}\n", "c.yaml").unwrap_err().to_string();
        assert!(err.starts_with("c.yaml:1:"), "located: {err}");
    }

    #[test]
    fn packing_comes_from_the_config_under_the_flag() {
        use crate::engine::disruption::gate::Mode;
        use crate::engine::packing::Packing;
        let none = Config::parse("theme: dark\n", "c.yaml").expect("valid config");
        assert_eq!(
            none.controller_settings(Mode::Auto, None, None, "c.yaml").expect("valid").packing,
            Packing::Upstream
        );
        let c = Config::parse("packing: cost\ncontroller: {batchIdle: 2s}\n", "c.yaml").expect("valid config");
        let s = c.controller_settings(Mode::Auto, None, None, "c.yaml").expect("valid");
        assert_eq!((s.packing, s.batch_idle), (Packing::Cost, 2_000));
        let s = c.controller_settings(Mode::Auto, None, Some(Packing::Upstream), "c.yaml").expect("valid");
        assert_eq!(s.packing, Packing::Upstream, "--packing goes over the config file");
        let s = none.controller_settings(Mode::Auto, None, Some(Packing::Cost), "c.yaml").expect("valid");
        assert_eq!(s.packing, Packing::Cost);
        let err = Config::parse("theme: dark\npacking: cheapest\n", "/x/config.yaml").unwrap_err().to_string();
        assert!(err.starts_with("/x/config.yaml:2:10: "), "the value's line and column: {err}");
        assert!(err.contains("packing: unknown packing strategy \"cheapest\": expected upstream or cost"), "{err}");
        let err = Config::parse("packing: [cost]\n", "/x/config.yaml").unwrap_err().to_string();
        assert!(err.starts_with("/x/config.yaml:1:"), "{err}");
    }

    #[test]
    fn the_karpenter_version_is_one_modelled_and_a_wrong_one_is_located() {
        use crate::engine::version::KarpenterVersion;
        assert_eq!(Config::parse("theme: dark\n", "c.yaml").expect("valid").karpenter_version, None);
        let c = Config::parse("karpenterVersion: \"1.14\"\n", "c.yaml").expect("valid config");
        assert_eq!(c.karpenter_version, Some(KarpenterVersion::V1_14));
        let c = Config::parse("karpenterVersion: 1.15\n", "c.yaml").expect("an unquoted version reads the same");
        assert_eq!(c.karpenter_version, Some(KarpenterVersion::V1_15));
        let err = Config::parse("theme: dark\nkarpenterVersion: \"1.16\"\n", "/x/config.yaml").unwrap_err().to_string();
        assert!(err.starts_with("/x/config.yaml:2:"), "the value's line: {err}");
        assert!(err.contains("unknown Karpenter version \"1.16\": expected 1.14 or 1.15"), "{err}");
    }

    #[test]
    fn extra_labels_are_a_list_of_keys() {
        let c = Config::parse("extraLabels: [karpenter.sh/capacity-type, topology.kubernetes.io/zone]\n", "x")
            .expect("parses");
        assert_eq!(c.extra_labels, ["karpenter.sh/capacity-type", "topology.kubernetes.io/zone"]);
        assert!(Config::parse("extraLabels: {a: b}\n", "/x/config.yaml").is_err());
    }

    #[test]
    fn a_missing_file_is_the_default() {
        let c = Config::load(Path::new("/nonexistent/karpenter-tui/config.yaml")).expect("default");
        assert_eq!(c, Config::default());
    }
}
