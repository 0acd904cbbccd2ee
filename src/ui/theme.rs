//! Colour themes: TOML files (themes/*.toml ship built in; more can live in the config directory). Every colour is
//! a name ratatui knows (`red`, `lightblue`, `reset` for the terminal's own) or `#rrggbb`.

use std::str::FromStr;

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;
use thiserror::Error;

/// The themes compiled into the binary, by name.
pub const BUILTIN: &[(&str, &str)] = &[
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    ("high-contrast", include_str!("../../themes/high-contrast.toml")),
];

#[derive(Debug, Error)]
pub enum ThemeError {
    #[error("{source_name}: {message}")]
    Parse { source_name: String, message: String },
    #[error("{source_name}: {field}: {message}")]
    Colour { source_name: String, field: &'static str, message: String },
    #[error("unknown theme {0:?} (built in: dark, light, high-contrast; or a path to a .toml file)")]
    Unknown(String),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    name: String,
    fg: String,
    bg: String,
    muted: String,
    accent: String,
    border: String,
    border_focus: String,
    title: String,
    selected_fg: String,
    selected_bg: String,
    header_fg: String,
    header_bg: String,
    ok: String,
    warn: String,
    bad: String,
    info: String,
    spot: String,
    on_demand: String,
    /// Optional (themes from before reserved capacity): `info` stands in.
    #[serde(default)]
    reserved: Option<String>,
    diff_add: String,
    diff_del: String,
}

/// Resolved colours. Panes ask for roles (`ok`, `bad`, `muted`), never for literal colours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Theme {
    pub name: String,
    pub fg: Color,
    pub bg: Color,
    pub muted: Color,
    pub accent: Color,
    pub border: Color,
    pub border_focus: Color,
    pub title: Color,
    pub selected_fg: Color,
    pub selected_bg: Color,
    pub header_fg: Color,
    pub header_bg: Color,
    pub ok: Color,
    pub warn: Color,
    pub bad: Color,
    pub info: Color,
    pub spot: Color,
    pub on_demand: Color,
    pub reserved: Color,
    pub diff_add: Color,
    pub diff_del: Color,
}

impl Theme {
    /// Parses a theme file; `source_name` (a path or `builtin:dark`) names it in errors.
    pub fn parse(text: &str, source_name: &str) -> Result<Theme, ThemeError> {
        let f: ThemeFile = toml::from_str(text)
            .map_err(|e| ThemeError::Parse { source_name: source_name.to_string(), message: e.to_string() })?;
        let c = |field: &'static str, v: &str| {
            Color::from_str(v).map_err(|_| ThemeError::Colour {
                source_name: source_name.to_string(),
                field,
                message: format!("{v:?} is not a colour (a name such as lightblue, or #rrggbb)"),
            })
        };
        Ok(Theme {
            name: f.name.clone(),
            fg: c("fg", &f.fg)?,
            bg: c("bg", &f.bg)?,
            muted: c("muted", &f.muted)?,
            accent: c("accent", &f.accent)?,
            border: c("border", &f.border)?,
            border_focus: c("border_focus", &f.border_focus)?,
            title: c("title", &f.title)?,
            selected_fg: c("selected_fg", &f.selected_fg)?,
            selected_bg: c("selected_bg", &f.selected_bg)?,
            header_fg: c("header_fg", &f.header_fg)?,
            header_bg: c("header_bg", &f.header_bg)?,
            ok: c("ok", &f.ok)?,
            warn: c("warn", &f.warn)?,
            bad: c("bad", &f.bad)?,
            info: c("info", &f.info)?,
            spot: c("spot", &f.spot)?,
            on_demand: c("on_demand", &f.on_demand)?,
            reserved: c("reserved", f.reserved.as_ref().unwrap_or(&f.info))?,
            diff_add: c("diff_add", &f.diff_add)?,
            diff_del: c("diff_del", &f.diff_del)?,
        })
    }

    /// A built-in theme by name.
    pub fn builtin(name: &str) -> Option<Theme> {
        BUILTIN.iter().find(|(n, _)| *n == name).map(|(n, text)| {
            // The built-ins are tested to parse; a failure here is a build defect, so fall back rather than panic.
            Theme::parse(text, &format!("builtin:{n}")).unwrap_or_else(|_| Theme::fallback())
        })
    }

    /// A theme by built-in name or by path to a TOML file.
    pub fn load(name_or_path: &str) -> Result<Theme, ThemeError> {
        if let Some(t) = Theme::builtin(name_or_path) {
            return Ok(t);
        }
        if name_or_path.ends_with(".toml") {
            let text = std::fs::read_to_string(name_or_path)
                .map_err(|e| ThemeError::Parse { source_name: name_or_path.to_string(), message: e.to_string() })?;
            return Theme::parse(&text, name_or_path);
        }
        Err(ThemeError::Unknown(name_or_path.to_string()))
    }

    /// Plain terminal colours; used only if a built-in theme were ever broken.
    fn fallback() -> Theme {
        Theme {
            name: "fallback".into(),
            fg: Color::Reset,
            bg: Color::Reset,
            muted: Color::DarkGray,
            accent: Color::Cyan,
            border: Color::DarkGray,
            border_focus: Color::Cyan,
            title: Color::White,
            selected_fg: Color::Black,
            selected_bg: Color::Cyan,
            header_fg: Color::Black,
            header_bg: Color::Gray,
            ok: Color::Green,
            warn: Color::Yellow,
            bad: Color::Red,
            info: Color::Blue,
            spot: Color::Magenta,
            on_demand: Color::Cyan,
            reserved: Color::Blue,
            diff_add: Color::Green,
            diff_del: Color::Red,
        }
    }

    pub fn base(&self) -> Style {
        Style::default().fg(self.fg).bg(self.bg)
    }
    pub fn muted(&self) -> Style {
        Style::default().fg(self.muted)
    }
    pub fn selected(&self) -> Style {
        Style::default().fg(self.selected_fg).bg(self.selected_bg).add_modifier(Modifier::BOLD)
    }
    pub fn header(&self) -> Style {
        Style::default().fg(self.header_fg).bg(self.header_bg)
    }
    pub fn border(&self, focused: bool) -> Style {
        Style::default().fg(if focused { self.border_focus } else { self.border })
    }
    pub fn title(&self, focused: bool) -> Style {
        let s = Style::default().fg(if focused { self.border_focus } else { self.title });
        if focused { s.add_modifier(Modifier::BOLD) } else { s }
    }
    pub fn fg(&self, c: Color) -> Style {
        Style::default().fg(c)
    }
}

impl Default for Theme {
    fn default() -> Self {
        Theme::builtin("dark").unwrap_or_else(Theme::fallback)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_theme_parses_and_differs() {
        let themes: Vec<Theme> =
            BUILTIN.iter().map(|(n, t)| Theme::parse(t, n).unwrap_or_else(|e| panic!("{n}: {e}"))).collect();
        assert_eq!(themes.len(), 3);
        assert_ne!(themes[0], themes[1]);
        assert_eq!(themes[2].bg, Color::Black, "high contrast sets its own background");
    }

    #[test]
    fn a_bad_colour_names_the_field() {
        let text = BUILTIN[0].1.replace("ok = \"#a3be8c\"", "ok = \"greenish\"");
        let err = Theme::parse(&text, "mine.toml").unwrap_err().to_string();
        assert!(err.contains("mine.toml") && err.contains("ok") && err.contains("greenish"), "{err}");
    }

    #[test]
    fn an_unknown_field_is_rejected_with_its_line() {
        let text = format!("{}\nsparkle = \"red\"\n", BUILTIN[0].1);
        let err = Theme::parse(&text, "mine.toml").unwrap_err().to_string();
        assert!(err.contains("sparkle") && err.contains("line"), "{err}");
    }
}
