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
        serde_yaml::from_str(text).map_err(|e| {
            let (line, column) = e.location().map(|l| (l.line(), l.column())).unwrap_or((1, 1));
            ConfigError::Parse { path: path.to_string(), line, column, message: e.to_string() }
        })
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
    fn an_unknown_field_names_line_and_column() {
        let err = Config::parse("theme: dark\nreadonly: true\n", "/x/config.yaml").unwrap_err().to_string();
        assert!(err.starts_with("/x/config.yaml:2:1:"), "{err}");
        assert!(err.contains("readonly"), "{err}");
    }

    #[test]
    fn a_missing_file_is_the_default() {
        let c = Config::load(Path::new("/nonexistent/karpenter-tui/config.yaml")).expect("default");
        assert_eq!(c, Config::default());
    }
}
