//! The one action registry: every key binding, the `?` help, the footer hints, the `:` palette and read-only
//! filtering come from [`REGISTRY`]. Keys are remappable by action name from the config file.

use std::collections::BTreeMap;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

/// Panes of the dashboard, in Tab order (number keys 1–7 focus them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Pane {
    Pending,
    NodePools,
    Nodes,
    Disruptions,
    Budgets,
    Interruptions,
    Events,
}

impl Pane {
    pub const ALL: [Pane; 7] = [
        Pane::Pending,
        Pane::NodePools,
        Pane::Nodes,
        Pane::Disruptions,
        Pane::Budgets,
        Pane::Interruptions,
        Pane::Events,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Pane::Pending => "Pending pods",
            Pane::NodePools => "NodePools",
            Pane::Nodes => "Nodes & NodeClaims",
            Pane::Disruptions => "Disruptions",
            Pane::Budgets => "Budgets",
            Pane::Interruptions => "Interruptions",
            Pane::Events => "Events",
        }
    }

    /// The palette name (`:nodepools`).
    pub fn command(self) -> &'static str {
        match self {
            Pane::Pending => "pending",
            Pane::NodePools => "nodepools",
            Pane::Nodes => "nodes",
            Pane::Disruptions => "disruptions",
            Pane::Budgets => "budgets",
            Pane::Interruptions => "interruptions",
            Pane::Events => "events",
        }
    }

    pub fn index(self) -> usize {
        Pane::ALL.iter().position(|p| *p == self).unwrap_or(0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Action {
    Quit,
    Help,
    Palette,
    Filter,
    NextPane,
    PrevPane,
    Focus(Pane),
    Up,
    Down,
    Top,
    Bottom,
    PageUp,
    PageDown,
    Open,
    Details,
    Back,
    Approve,
    Reject,
    ApproveAll,
    Repair,
    ScaleUp,
    ScaleDown,
    Edit,
    EditExternal,
    CycleTheme,
    Sort,
    ReverseSort,
    /// The Nodes pane's label selector: opens the palette on `:selector` with the one in force.
    Selector,
    Pause,
    Faster,
    Slower,
}

/// Where an action applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    Global,
    Pane(Pane),
}

pub struct ActionSpec {
    pub action: Action,
    /// Stable name used in the config file's `keys:` section and in help.
    pub name: &'static str,
    pub keys: &'static [&'static str],
    pub help: &'static str,
    pub scope: Scope,
    /// Changes the cluster (or the engine's mode): removed entirely in read-only mode.
    pub mutating: bool,
    /// Shown in the footer.
    pub hint: bool,
}

const fn spec(
    action: Action,
    name: &'static str,
    keys: &'static [&'static str],
    help: &'static str,
    scope: Scope,
    mutating: bool,
    hint: bool,
) -> ActionSpec {
    ActionSpec { action, name, keys, help, scope, mutating, hint }
}

use Scope::Global as G;

pub const REGISTRY: &[ActionSpec] = &[
    spec(Action::Help, "help", &["?"], "show this help", G, false, true),
    spec(Action::Palette, "palette", &[":"], "command palette (:nodepools, :mode approve, :quit ...)", G, false, true),
    spec(Action::Filter, "filter", &["/"], "filter the focused pane", G, false, true),
    spec(Action::Quit, "quit", &["q", "ctrl-c"], "quit", G, false, true),
    spec(Action::NextPane, "next-pane", &["tab"], "focus the next pane", G, false, false),
    spec(Action::PrevPane, "prev-pane", &["backtab"], "focus the previous pane", G, false, false),
    spec(Action::Focus(Pane::Pending), "pane-pending", &["1"], "focus Pending pods", G, false, false),
    spec(Action::Focus(Pane::NodePools), "pane-nodepools", &["2"], "focus NodePools", G, false, false),
    spec(Action::Focus(Pane::Nodes), "pane-nodes", &["3"], "focus Nodes & NodeClaims", G, false, false),
    spec(Action::Focus(Pane::Disruptions), "pane-disruptions", &["4"], "focus Disruptions", G, false, false),
    spec(Action::Focus(Pane::Budgets), "pane-budgets", &["5"], "focus Budgets", G, false, false),
    spec(Action::Focus(Pane::Interruptions), "pane-interruptions", &["6"], "focus Interruptions", G, false, false),
    spec(Action::Focus(Pane::Events), "pane-events", &["7"], "focus Events", G, false, false),
    spec(Action::Up, "up", &["k", "up"], "move up", G, false, false),
    spec(Action::Down, "down", &["j", "down"], "move down", G, false, false),
    spec(Action::Top, "top", &["g", "home"], "first row", G, false, false),
    spec(Action::Bottom, "bottom", &["G", "end"], "last row", G, false, false),
    spec(Action::PageUp, "page-up", &["pageup"], "page up", G, false, false),
    spec(Action::PageDown, "page-down", &["pagedown"], "page down", G, false, false),
    spec(
        Action::Open,
        "open",
        &["enter"],
        "drill down (NodePool → its nodes → a node's pods); elsewhere the row's details",
        G,
        false,
        true,
    ),
    spec(Action::Details, "details", &["d"], "details of the selected row (or of the open node)", G, false, false),
    spec(Action::Back, "back", &["esc"], "back one step / close / clear the filter", G, false, false),
    spec(
        Action::Approve,
        "approve",
        &["a"],
        "approve the selected proposal",
        Scope::Pane(Pane::Disruptions),
        true,
        true,
    ),
    spec(Action::Reject, "reject", &["r"], "reject the selected proposal", Scope::Pane(Pane::Disruptions), true, true),
    spec(
        Action::ScaleUp,
        "scale-up",
        &["]"],
        "one more replica for a static NodePool",
        Scope::Pane(Pane::NodePools),
        true,
        false,
    ),
    spec(
        Action::ScaleDown,
        "scale-down",
        &["["],
        "one replica less for a static NodePool",
        Scope::Pane(Pane::NodePools),
        true,
        false,
    ),
    spec(
        Action::Repair,
        "repair",
        &["R"],
        "repair the selected unhealthy node now (node repair)",
        Scope::Pane(Pane::Nodes),
        true,
        false,
    ),
    spec(
        Action::ApproveAll,
        "approve-all",
        &["A"],
        "approve every open proposal (typed confirmation)",
        Scope::Pane(Pane::Disruptions),
        true,
        true,
    ),
    spec(Action::Edit, "edit", &["e"], "edit the NodePool in place", Scope::Pane(Pane::NodePools), true, true),
    spec(
        Action::EditExternal,
        "edit-external",
        &["E"],
        "edit the NodePool in $EDITOR",
        Scope::Pane(Pane::NodePools),
        true,
        false,
    ),
    spec(Action::CycleTheme, "theme", &["T"], "next colour theme", G, false, false),
    spec(Action::Sort, "sort", &["s"], "sort the focused pane by its next column", G, false, false),
    spec(Action::ReverseSort, "reverse-sort", &["S"], "reverse the focused pane's sort order", G, false, false),
    spec(Action::Selector, "selector", &["l"], "label selector (kubectl -l)", Scope::Pane(Pane::Nodes), false, false),
    spec(Action::Pause, "clock", &["p"], "pause / resume the simulated clock (demo)", G, false, false),
    spec(Action::Faster, "faster", &["+"], "simulated clock faster (demo)", G, false, false),
    spec(Action::Slower, "slower", &["-"], "simulated clock slower (demo)", G, false, false),
];

pub fn spec_of(a: Action) -> Option<&'static ActionSpec> {
    REGISTRY.iter().find(|s| s.action == a)
}

/// The palette word of an action that has one (`:nodepools` focuses that pane).
fn palette_word(a: Action) -> Option<&'static str> {
    match a {
        Action::Focus(p) => Some(p.command()),
        Action::Help => Some("help"),
        Action::Quit => Some("quit"),
        _ => None,
    }
}

/// Palette commands that take arguments or set something no key does, between the panes and help/quit.
const PALETTE_ONLY: &[(&str, &str)] = &[
    ("mode approve", "every voluntary disruption waits for an operator"),
    ("mode auto", "Karpenter's behaviour: disruptions start after validation"),
    ("mode dry-run", "decide and show, never act"),
    ("packing upstream", "size new NodeClaims as Karpenter does"),
    ("packing cost", "size new NodeClaims for the cheapest fleet"),
    ("scale POOL N", "set a static NodePool's replicas (after confirmation)"),
    ("overlay NAME", "edit a NodeOverlay in place (validated, diff, then apply)"),
    ("selector EXPR", "Nodes pane: only nodes whose labels match (kubectl -l)"),
    ("theme dark", "switch colour theme (dark, light, high-contrast)"),
    ("speed 10", "demo clock speed"),
    ("ctx", "list the kubeconfig's contexts; :ctx NAME switches in place"),
    ("pause", "hold all voluntary disruption (after confirmation)"),
    ("pause budgets", "pause it through the NodePools' budgets (survives restarts)"),
    ("resume", "let voluntary disruption go on (after confirmation)"),
    ("clock pause", "pause the demo clock"),
    ("clock resume", "resume the demo clock"),
];

/// The `:` palette's commands with their help, for help and completion: the registry's actions that have a
/// palette word (the panes, help, quit), and the commands only the palette has.
pub static PALETTE: std::sync::LazyLock<Vec<(&'static str, &'static str)>> = std::sync::LazyLock::new(|| {
    let of = |s: &'static ActionSpec| palette_word(s.action).map(|w| (w, s.help));
    let (panes, rest): (Vec<_>, Vec<_>) =
        REGISTRY.iter().filter_map(of).partition(|(w, _)| Pane::ALL.iter().any(|p| p.command() == *w));
    panes.into_iter().chain(PALETTE_ONLY.iter().copied()).chain(rest).collect()
});

/// A key as written in the config and shown in help: `a`, `A`, `ctrl-c`, `enter`, `tab`, `backtab`, `f5`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    pub code: KeyCodeKey,
    pub ctrl: bool,
    pub alt: bool,
}

/// The parts of `KeyCode` a binding can name (KeyCode itself is not `Ord`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyCodeKey {
    Char(char),
    Enter,
    Esc,
    Tab,
    BackTab,
    Up,
    Down,
    Left,
    Right,
    Home,
    End,
    PageUp,
    PageDown,
    Backspace,
    Delete,
    F(u8),
}

impl Key {
    pub fn parse(s: &str) -> Result<Key, String> {
        let mut ctrl = false;
        let mut alt = false;
        let mut rest = s;
        loop {
            if let Some(r) = rest.strip_prefix("ctrl-") {
                ctrl = true;
                rest = r;
            } else if let Some(r) = rest.strip_prefix("alt-") {
                alt = true;
                rest = r;
            } else {
                break;
            }
        }
        let code = match rest {
            "enter" => KeyCodeKey::Enter,
            "esc" => KeyCodeKey::Esc,
            "tab" => KeyCodeKey::Tab,
            "backtab" | "shift-tab" => KeyCodeKey::BackTab,
            "up" => KeyCodeKey::Up,
            "down" => KeyCodeKey::Down,
            "left" => KeyCodeKey::Left,
            "right" => KeyCodeKey::Right,
            "home" => KeyCodeKey::Home,
            "end" => KeyCodeKey::End,
            "pageup" | "pgup" => KeyCodeKey::PageUp,
            "pagedown" | "pgdown" => KeyCodeKey::PageDown,
            "backspace" => KeyCodeKey::Backspace,
            "delete" | "del" => KeyCodeKey::Delete,
            "space" => KeyCodeKey::Char(' '),
            f if f.len() > 1 && f.starts_with('f') && f[1..].parse::<u8>().is_ok() => {
                KeyCodeKey::F(f[1..].parse().unwrap_or(1))
            }
            c if c.chars().count() == 1 => KeyCodeKey::Char(c.chars().next().unwrap_or(' ')),
            other => return Err(format!("{other:?} is not a key (examples: a, A, ctrl-a, enter, tab, pageup, f5)")),
        };
        Ok(Key { code, ctrl, alt })
    }

    pub fn from_event(e: &KeyEvent) -> Option<Key> {
        let code = match e.code {
            KeyCode::Char(c) => KeyCodeKey::Char(c),
            KeyCode::Enter => KeyCodeKey::Enter,
            KeyCode::Esc => KeyCodeKey::Esc,
            KeyCode::Tab => KeyCodeKey::Tab,
            KeyCode::BackTab => KeyCodeKey::BackTab,
            KeyCode::Up => KeyCodeKey::Up,
            KeyCode::Down => KeyCodeKey::Down,
            KeyCode::Left => KeyCodeKey::Left,
            KeyCode::Right => KeyCodeKey::Right,
            KeyCode::Home => KeyCodeKey::Home,
            KeyCode::End => KeyCodeKey::End,
            KeyCode::PageUp => KeyCodeKey::PageUp,
            KeyCode::PageDown => KeyCodeKey::PageDown,
            KeyCode::Backspace => KeyCodeKey::Backspace,
            KeyCode::Delete => KeyCodeKey::Delete,
            KeyCode::F(n) => KeyCodeKey::F(n),
            _ => return None,
        };
        // Shift is part of the character ('A'), so it is not tracked separately.
        Some(Key {
            code,
            ctrl: e.modifiers.contains(KeyModifiers::CONTROL),
            alt: e.modifiers.contains(KeyModifiers::ALT),
        })
    }

    pub fn label(&self) -> String {
        let base = match self.code {
            KeyCodeKey::Char(' ') => "space".to_string(),
            KeyCodeKey::Char(c) => c.to_string(),
            KeyCodeKey::Enter => "enter".into(),
            KeyCodeKey::Esc => "esc".into(),
            KeyCodeKey::Tab => "tab".into(),
            KeyCodeKey::BackTab => "shift-tab".into(),
            KeyCodeKey::Up => "↑".into(),
            KeyCodeKey::Down => "↓".into(),
            KeyCodeKey::Left => "←".into(),
            KeyCodeKey::Right => "→".into(),
            KeyCodeKey::Home => "home".into(),
            KeyCodeKey::End => "end".into(),
            KeyCodeKey::PageUp => "pgup".into(),
            KeyCodeKey::PageDown => "pgdn".into(),
            KeyCodeKey::Backspace => "backspace".into(),
            KeyCodeKey::Delete => "del".into(),
            KeyCodeKey::F(n) => format!("f{n}"),
        };
        let mut s = String::new();
        if self.ctrl {
            s.push_str("ctrl-");
        }
        if self.alt {
            s.push_str("alt-");
        }
        s + &base
    }
}

/// Keys → actions, built from the registry defaults and the config's overrides, with read-only filtering applied.
#[derive(Debug, Clone, Default)]
pub struct KeyMap {
    bindings: BTreeMap<Action, Vec<Key>>,
    readonly: bool,
}

impl KeyMap {
    /// The registry's defaults, with `overrides` (action name → keys) replacing an action's keys. Unknown action
    /// names and unparsable keys are returned as warnings, not errors: a typo in the config must not stop the tool.
    pub fn new(overrides: &BTreeMap<String, Vec<String>>, readonly: bool) -> (KeyMap, Vec<String>) {
        let mut warnings = Vec::new();
        let mut bindings: BTreeMap<Action, Vec<Key>> = BTreeMap::new();
        for s in REGISTRY {
            if readonly && s.mutating {
                continue;
            }
            let keys: Vec<Key> = s.keys.iter().filter_map(|k| Key::parse(k).ok()).collect();
            bindings.insert(s.action, keys);
        }
        for (name, keys) in overrides {
            let Some(s) = REGISTRY.iter().find(|s| s.name == name) else {
                warnings.push(format!("keys.{name}: no such action (see `?` for the names)"));
                continue;
            };
            if readonly && s.mutating {
                continue;
            }
            let mut parsed = Vec::new();
            for k in keys {
                match Key::parse(k) {
                    Ok(key) => parsed.push(key),
                    Err(e) => warnings.push(format!("keys.{name}: {e}")),
                }
            }
            bindings.insert(s.action, parsed);
        }
        (KeyMap { bindings, readonly }, warnings)
    }

    pub fn readonly(&self) -> bool {
        self.readonly
    }

    /// The action a key means in the focused pane: pane-scoped actions win over global ones.
    pub fn resolve(&self, key: &Key, focus: Pane) -> Option<Action> {
        let mut global = None;
        for s in REGISTRY {
            let Some(keys) = self.bindings.get(&s.action) else { continue };
            if !keys.contains(key) {
                continue;
            }
            match s.scope {
                Scope::Pane(p) if p == focus => return Some(s.action),
                Scope::Pane(_) => {}
                Scope::Global => global = global.or(Some(s.action)),
            }
        }
        global
    }

    pub fn keys_of(&self, a: Action) -> &[Key] {
        self.bindings.get(&a).map(Vec::as_slice).unwrap_or(&[])
    }

    pub fn is_bound(&self, a: Action) -> bool {
        self.bindings.contains_key(&a)
    }

    /// "a/x" for help and hints.
    pub fn label(&self, a: Action) -> String {
        self.keys_of(a).iter().map(Key::label).collect::<Vec<_>>().join("/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(c: char) -> Key {
        Key::from_event(&KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)).expect("char key")
    }

    #[test]
    fn the_palette_comes_from_the_registry() {
        let words: Vec<&str> = PALETTE.iter().map(|(w, _)| *w).collect();
        let panes: Vec<&str> = Pane::ALL.iter().map(|p| p.command()).collect();
        assert_eq!(&words[..panes.len()], &panes[..], "the panes first, in Tab order");
        for p in Pane::ALL {
            let help = PALETTE.iter().find(|(w, _)| *w == p.command()).map(|(_, h)| *h);
            assert_eq!(help, spec_of(Action::Focus(p)).map(|s| s.help), "{p:?}: the registry's help");
        }
        assert_eq!(&words[words.len() - 2..], ["help", "quit"]);
        let unique: std::collections::BTreeSet<&str> = words.iter().copied().collect();
        assert_eq!(unique.len(), words.len(), "{words:?}");
    }

    #[test]
    fn action_names_and_default_keys_are_unique_per_scope() {
        let mut names = std::collections::BTreeSet::new();
        for s in REGISTRY {
            assert!(names.insert(s.name), "duplicate action name {}", s.name);
            for k in s.keys {
                Key::parse(k).unwrap_or_else(|e| panic!("{}: {e}", s.name));
            }
        }
        let (km, warnings) = KeyMap::new(&BTreeMap::new(), false);
        assert!(warnings.is_empty());
        for p in Pane::ALL {
            let mut seen = BTreeMap::new();
            for s in REGISTRY.iter().filter(|s| s.scope == Scope::Global || s.scope == Scope::Pane(p)) {
                for k in km.keys_of(s.action) {
                    if let Some(other) = seen.insert(*k, s.name) {
                        panic!("{} and {other} share {} in {p:?}", s.name, k.label());
                    }
                }
            }
        }
    }

    #[test]
    fn pane_actions_only_resolve_in_their_pane() {
        let (km, _) = KeyMap::new(&BTreeMap::new(), false);
        assert_eq!(km.resolve(&ev('a'), Pane::Disruptions), Some(Action::Approve));
        assert_eq!(km.resolve(&ev('a'), Pane::Nodes), None);
        assert_eq!(km.resolve(&ev('j'), Pane::Nodes), Some(Action::Down));
    }

    #[test]
    fn overrides_remap_and_typos_warn() {
        let mut o = BTreeMap::new();
        o.insert("approve".to_string(), vec!["y".to_string()]);
        o.insert("aprove".to_string(), vec!["z".to_string()]);
        o.insert("reject".to_string(), vec!["ctrl-".to_string()]);
        let (km, warnings) = KeyMap::new(&o, false);
        assert_eq!(km.resolve(&ev('y'), Pane::Disruptions), Some(Action::Approve));
        assert_eq!(km.resolve(&ev('a'), Pane::Disruptions), None, "the default key is replaced");
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].contains("aprove"));
    }

    #[test]
    fn readonly_removes_every_mutating_action() {
        let (km, _) = KeyMap::new(&BTreeMap::new(), true);
        for s in REGISTRY.iter().filter(|s| s.mutating) {
            assert!(!km.is_bound(s.action), "{} is still bound", s.name);
        }
        assert_eq!(km.resolve(&ev('a'), Pane::Disruptions), None);
        assert_eq!(km.resolve(&ev('?'), Pane::Disruptions), Some(Action::Help));
    }

    #[test]
    fn keys_parse_with_modifiers() {
        let k = Key::parse("ctrl-c").expect("ctrl-c");
        assert!(k.ctrl && k.code == KeyCodeKey::Char('c'));
        assert_eq!(Key::parse("shift-tab").expect("backtab").code, KeyCodeKey::BackTab);
        assert!(Key::parse("hyper-x").is_err());
    }
}
