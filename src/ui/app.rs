//! The dashboard's state and reducer. [`update`] takes a message (a key, a fresh picture, a request's outcome) and
//! returns effects for the shell to carry out; it does no I/O and reads no clock, so every behaviour here is
//! tested without a terminal. Every mutation is two-phase: an intent opens a confirmation that says what will
//! happen, and only the confirmation sends the command.

use std::collections::BTreeMap;
use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::engine::disruption::gate::Mode;
use crate::engine::packing::Packing;
use crate::engine::whatif::EditPreview;
use crate::protocol::Command;
use crate::protocol::view::{ClusterView, ProposalState};
use crate::ui::action::{Action, Key, KeyMap, Pane};
use crate::ui::editor::{DiffLine, EditKind, EditorEvent, NodePoolEditor, diff_lines};
use crate::ui::rows;
use crate::ui::theme::{self, Theme};

/// Rows a page key moves.
pub const PAGE: usize = 10;

/// The most extra label columns the Nodes pane shows.
pub const MAX_EXTRA_LABELS: usize = 16;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PaneState {
    /// Index into the visible (filtered) rows.
    pub selected: usize,
    /// The selected row's identity, so the selection stays on the same object when rows move.
    pub selected_key: Option<String>,
    pub filter: String,
    /// Indices into the pane's rows in the picture that pass the filter, in display order.
    pub visible: Vec<usize>,
    /// Index into [`rows::sort_keys`] (0: the backend's order), and whether reversed.
    pub sort: usize,
    pub reverse: bool,
}

/// What the operator is about to confirm.
#[derive(Debug, Clone, PartialEq)]
pub enum Pending {
    Approve {
        id: String,
        detail: String,
    },
    Reject {
        id: String,
    },
    ApproveAll {
        ids: Vec<String>,
    },
    SetMode(Mode),
    SetPacking(Packing),
    ApplyEdit {
        name: String,
        yaml: String,
    },
    Repair {
        node: String,
    },
    Scale {
        name: String,
        replicas: i64,
    },
    /// Pause (`true`) or resume voluntary disruption; through the NodePools' budgets (`true`) or held by the
    /// acting controller.
    PauseDisruption(bool, bool),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Confirm {
    pub title: String,
    /// What will happen, one sentence per line.
    pub body: Vec<String>,
    /// When set, the operator must type this phrase exactly (bulk actions).
    pub phrase: Option<String>,
    pub typed: String,
    pub pending: Pending,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Overlay {
    None,
    Help { scroll: u16 },
    Palette { input: String },
    Filter { input: String },
    Confirm(Confirm),
    Detail { title: String, lines: Vec<String>, scroll: u16 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub text: String,
    pub error: bool,
}

/// An open NodePool editor: editing, or reviewing the diff and what-if before applying.
pub struct EditSession {
    pub editor: NodePoolEditor,
    pub stage: EditStage,
    /// Esc on a modified buffer arms a discard; a second Esc discards.
    pub discard_armed: bool,
}

pub enum EditStage {
    Editing,
    Reviewing {
        diff: Vec<DiffLine>,
        /// The what-if, once the backend has computed it (request id while waiting).
        preview: Result<Box<EditPreview>, String>,
        waiting: Option<u64>,
        scroll: u16,
    },
    /// The apply request is in flight.
    Applying(u64),
}

/// Inputs to the reducer.
#[derive(Debug, Clone)]
pub enum Msg {
    Key(KeyEvent),
    View(Arc<ClusterView>),
    /// The picture stands; only the backend's clock moved.
    Clock(crate::engine::provisioning::Millis),
    /// The picture stands; only what the backend is still waiting for moved on.
    Progress(String),
    Done {
        request: u64,
        outcome: Result<String, String>,
    },
    Preview {
        request: u64,
        result: Result<Box<EditPreview>, String>,
    },
    /// The pods on a node, for its page in the drill-down.
    NodePods {
        request: u64,
        node: String,
        result: Result<Vec<crate::protocol::view::NodePodRow>, String>,
    },
    /// The external editor returned (new text, or why not: the buffer is kept either way).
    ExternalEdited(Result<String, String>),
    BackendStopped(Option<String>),
    /// A key-map or config warning to show once.
    Warn(String),
}

/// What the shell must do.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    Send(Command),
    /// Append to the audit log (the shell stamps the time and context).
    Audit {
        action: String,
        target: String,
        outcome: String,
        detail: String,
    },
    /// Suspend the dashboard and edit this text in `$EDITOR`; the result comes back as `Msg::ExternalEdited`.
    ExternalEdit {
        name: String,
        text: String,
    },
    Quit,
}

pub struct AppState {
    pub view: Arc<ClusterView>,
    pub focus: Pane,
    /// Per-pane state, indexed by [`Pane::index`].
    pub panes: [PaneState; Pane::ALL.len()],
    pub overlay: Overlay,
    /// The NodePool editor, drawn over the panes while open.
    pub editor: Option<Box<EditSession>>,
    pub keymap: KeyMap,
    pub theme: Theme,
    pub status: Option<Status>,
    /// The backend is the simulated world (pause and speed apply).
    pub demo: bool,
    pub paused: bool,
    pub speed: f64,
    pub quit: bool,
    /// Requests sent and not answered: request → (action, target, detail) for the audit log.
    pub in_flight: BTreeMap<u64, (String, String, String)>,
    next_request: u64,
    /// The Nodes pane shows only the rows whose labels match (`--selector`, `:selector`).
    pub selector: Option<rows::NodeSelector>,
    /// Label keys the Nodes pane shows as columns of their own (`--extra-labels`, config `extraLabels`).
    pub extra_labels: Vec<String>,
    /// Where Enter has drilled to, outermost first: a NodePool (the Nodes pane shows only its nodes and claims),
    /// then a node (a page of its pods). Esc goes back one step.
    pub drill: Vec<Crumb>,
    /// The kubeconfig's contexts, which `:ctx` lists and switches between (none in `demo`).
    pub contexts: Vec<String>,
}

/// One step of the drill-down.
#[derive(Debug, Clone, PartialEq)]
pub enum Crumb {
    Pool(String),
    Node(NodePage),
}

/// A node's page: its pods, asked of the backend (`request` while the answer is awaited) and asked again with each
/// new picture, so the page follows the cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct NodePage {
    pub name: String,
    pub request: Option<u64>,
    pub pods: Option<Result<Vec<crate::protocol::view::NodePodRow>, String>>,
    pub selected: usize,
}

impl AppState {
    pub fn new(keymap: KeyMap, theme: Theme, demo: bool, speed: f64) -> AppState {
        let mut s = AppState {
            view: Arc::new(ClusterView::default()),
            focus: Pane::Disruptions,
            panes: Default::default(),
            overlay: Overlay::None,
            editor: None,
            keymap,
            theme,
            status: None,
            demo,
            paused: false,
            speed,
            quit: false,
            in_flight: BTreeMap::new(),
            next_request: 1,
            selector: None,
            extra_labels: Vec::new(),
            drill: Vec::new(),
            contexts: Vec::new(),
        };
        s.refilter_all();
        s
    }

    pub fn readonly(&self) -> bool {
        self.keymap.readonly()
    }

    /// The Nodes pane's label selector (an empty one clears it) and extra label columns, as the flags give them.
    pub fn set_node_options(&mut self, selector: Option<rows::NodeSelector>, extra_labels: Vec<String>) {
        self.selector = selector.filter(|s| !s.text.is_empty());
        let mut keys: Vec<String> = Vec::new();
        for k in extra_labels.iter().map(|k| k.trim()).filter(|k| !k.is_empty()) {
            if !keys.iter().any(|have| have == k) {
                keys.push(k.to_string());
            }
        }
        if keys.len() > MAX_EXTRA_LABELS {
            self.error(format!("extra labels: {} keys given; the first {MAX_EXTRA_LABELS} are shown", keys.len()));
            keys.truncate(MAX_EXTRA_LABELS);
        }
        self.extra_labels = keys;
        self.refilter(Pane::Nodes);
    }

    /// The columns pane `p` sorts by, in the order `s` steps through them: the pane's own, then (Nodes) the extra
    /// label columns.
    pub fn sort_keys(&self, p: Pane) -> Vec<String> {
        let own = rows::sort_keys(p).iter().map(|k| k.to_string());
        match p {
            Pane::Nodes => own.chain(self.extra_labels.iter().map(|k| rows::label_sort_key(k))).collect(),
            _ => own.collect(),
        }
    }

    /// The key pane `p` is sorted by now (`default`: the backend's order).
    pub fn sort_key(&self, p: Pane) -> String {
        self.sort_keys(p).into_iter().nth(self.pane(p).sort).unwrap_or_else(|| "default".to_string())
    }

    pub fn pane(&self, p: Pane) -> &PaneState {
        &self.panes[p.index()]
    }

    fn pane_mut(&mut self, p: Pane) -> &mut PaneState {
        &mut self.panes[p.index()]
    }

    /// The selected row of a pane, as an index into the picture's rows.
    pub fn selected_row(&self, p: Pane) -> Option<usize> {
        let ps = self.pane(p);
        ps.visible.get(ps.selected).copied()
    }

    fn refilter(&mut self, p: Pane) {
        let view = self.view.clone();
        let key = self.sort_key(p);
        let selector = if p == Pane::Nodes { self.selector.clone() } else { None };
        let pool = if p == Pane::Nodes { self.drilled_pool().map(str::to_string) } else { None };
        let ps = self.pane_mut(p);
        let needle = ps.filter.to_lowercase();
        ps.visible = (0..rows::count(&view, p))
            .filter(|&i| selector.as_ref().is_none_or(|sel| rows::selected_by(&view, i, sel)))
            .filter(|&i| pool.as_ref().is_none_or(|pool| view.nodes[i].nodepool.as_deref() == Some(pool.as_str())))
            .filter(|&i| needle.is_empty() || rows::matches(&view, p, i, &needle))
            .collect();
        if key != "default" {
            // Stable either way: rows that tie keep the backend's order.
            let mut keyed: Vec<(rows::SortValue, usize)> =
                ps.visible.iter().map(|&i| (rows::sort_value(&view, p, &key, i), i)).collect();
            let reverse = ps.reverse;
            keyed.sort_by(|a, b| {
                let o = a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal);
                if reverse { o.reverse() } else { o }
            });
            ps.visible = keyed.into_iter().map(|(_, i)| i).collect();
        } else if ps.reverse {
            ps.visible.reverse();
        }
        // Keep the selection on the same object if it is still there.
        if let Some(key) = &ps.selected_key
            && let Some(pos) = ps.visible.iter().position(|&i| rows::key(&view, p, i).as_deref() == Some(key.as_str()))
        {
            ps.selected = pos;
        }
        ps.selected = ps.selected.min(ps.visible.len().saturating_sub(1));
        ps.selected_key = ps.visible.get(ps.selected).and_then(|&i| rows::key(&view, p, i));
    }

    /// The NodePool drilled into, whose nodes the Nodes pane is narrowed to.
    pub fn drilled_pool(&self) -> Option<&str> {
        self.drill.iter().find_map(|c| match c {
            Crumb::Pool(name) => Some(name.as_str()),
            Crumb::Node(_) => None,
        })
    }

    /// The node page on top of the drill-down, when one is open.
    pub fn node_page(&self) -> Option<&NodePage> {
        match self.drill.last() {
            Some(Crumb::Node(page)) => Some(page),
            _ => None,
        }
    }

    fn node_page_mut(&mut self) -> Option<&mut NodePage> {
        match self.drill.last_mut() {
            Some(Crumb::Node(page)) => Some(page),
            _ => None,
        }
    }

    /// Asks the backend for the open node page's pods, unless an answer is awaited.
    fn ask_node_pods(&mut self) -> Vec<Effect> {
        let Some(name) = self.node_page().filter(|p| p.request.is_none()).map(|p| p.name.clone()) else {
            return Vec::new();
        };
        let request = self.next_id();
        if let Some(page) = self.node_page_mut() {
            page.request = Some(request);
        }
        vec![Effect::Send(Command::DescribeNode { request, node: name })]
    }

    fn refilter_all(&mut self) {
        for p in Pane::ALL {
            self.refilter(p);
        }
    }

    fn move_selection(&mut self, p: Pane, to: impl FnOnce(usize, usize) -> usize) {
        let view = self.view.clone();
        let ps = self.pane_mut(p);
        let len = ps.visible.len();
        if len == 0 {
            return;
        }
        ps.selected = to(ps.selected, len).min(len - 1);
        ps.selected_key = ps.visible.get(ps.selected).and_then(|&i| rows::key(&view, p, i));
    }

    fn next_id(&mut self) -> u64 {
        self.next_request += 1;
        self.next_request - 1
    }

    fn request(&mut self, cmd: impl FnOnce(u64) -> Command, action: &str, target: &str, detail: String) -> Effect {
        let id = self.next_id();
        self.in_flight.insert(id, (action.to_string(), target.to_string(), detail));
        Effect::Send(cmd(id))
    }

    fn info(&mut self, text: impl Into<String>) {
        self.status = Some(Status { text: text.into(), error: false });
    }

    fn error(&mut self, text: impl Into<String>) {
        self.status = Some(Status { text: text.into(), error: true });
    }
}

/// The reducer.
pub fn update(s: &mut AppState, msg: Msg) -> Vec<Effect> {
    match msg {
        Msg::View(v) => {
            s.view = v;
            s.refilter_all();
            // An open node page follows the cluster: its pods are asked for again.
            s.ask_node_pods()
        }
        Msg::Clock(now) => {
            // The reducer holds the only reference to the picture once the backend sent it, so this is no copy.
            Arc::make_mut(&mut s.view).now = now;
            Vec::new()
        }
        Msg::Progress(text) => {
            Arc::make_mut(&mut s.view).progress = Some(text);
            Vec::new()
        }
        Msg::Done { request, outcome } => {
            if let Some(ed) = s.editor.as_mut()
                && matches!(ed.stage, EditStage::Applying(r) if r == request)
            {
                if outcome.is_ok() {
                    s.editor = None;
                } else {
                    // Not applied: back to the buffer, nothing lost.
                    ed.stage = EditStage::Editing;
                }
            }
            let Some((action, target, detail)) = s.in_flight.remove(&request) else { return Vec::new() };
            let outcome_s = match &outcome {
                Ok(t) => {
                    s.info(t.clone());
                    "ok".to_string()
                }
                Err(e) => {
                    s.error(e.clone());
                    format!("error: {e}")
                }
            };
            vec![Effect::Audit { action, target, outcome: outcome_s, detail }]
        }
        Msg::NodePods { request, node, result } => {
            if let Some(page) = s.node_page_mut()
                && page.request == Some(request)
                && page.name == node
            {
                page.request = None;
                if let Ok(rows) = &result {
                    page.selected = page.selected.min(rows.len().saturating_sub(1));
                }
                page.pods = Some(result);
            }
            Vec::new()
        }
        Msg::Preview { request, result } => {
            if let Some(ed) = s.editor.as_mut()
                && let EditStage::Reviewing { preview, waiting, .. } = &mut ed.stage
                && *waiting == Some(request)
            {
                *preview = result;
                *waiting = None;
            }
            Vec::new()
        }
        Msg::ExternalEdited(result) => {
            match (result, s.editor.as_mut()) {
                (Ok(text), Some(ed)) => {
                    ed.editor.set_text(&text);
                    ed.stage = EditStage::Editing;
                    let n = ed.editor.diagnostics().len();
                    if n == 0 {
                        s.info("edited in $EDITOR: valid; Ctrl-S to review and apply");
                    } else {
                        s.error(format!("edited in $EDITOR: {n} problem(s) to fix"));
                    }
                }
                (Err(e), _) => s.error(format!("$EDITOR: {e}; the buffer is unchanged")),
                (Ok(_), None) => {}
            }
            Vec::new()
        }
        Msg::BackendStopped(err) => {
            match err {
                Some(e) => s.error(format!("the backend stopped: {e}")),
                None => s.info("the backend stopped"),
            }
            Vec::new()
        }
        Msg::Warn(w) => {
            s.error(w);
            Vec::new()
        }
        Msg::Key(k) => key(s, k),
    }
}

/// The new offset when `code` is a scroll key (j/k, arrows, PageUp/PageDown) in a scrollable overlay.
fn scrolled(code: KeyCode, scroll: u16) -> Option<u16> {
    match code {
        KeyCode::Down | KeyCode::Char('j') => Some(scroll.saturating_add(1)),
        KeyCode::Up | KeyCode::Char('k') => Some(scroll.saturating_sub(1)),
        KeyCode::PageDown => Some(scroll.saturating_add(PAGE as u16)),
        KeyCode::PageUp => Some(scroll.saturating_sub(PAGE as u16)),
        _ => None,
    }
}

fn is_ctrl_c(k: &KeyEvent) -> bool {
    k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL)
}

fn key(s: &mut AppState, k: KeyEvent) -> Vec<Effect> {
    if is_ctrl_c(&k) {
        s.quit = true;
        return vec![Effect::Quit];
    }
    if s.editor.is_some() && s.overlay == Overlay::None {
        return editor_key(s, k);
    }
    match std::mem::replace(&mut s.overlay, Overlay::None) {
        Overlay::None => {}
        Overlay::Help { scroll } => {
            // Scroll keys scroll; any other key closes help.
            if let Some(scroll) = scrolled(k.code, scroll) {
                s.overlay = Overlay::Help { scroll };
            }
            return Vec::new();
        }
        Overlay::Detail { title, lines, scroll } => {
            s.overlay = match (scrolled(k.code, scroll), k.code) {
                (Some(scroll), _) => Overlay::Detail { title, lines, scroll },
                (None, KeyCode::Esc | KeyCode::Enter | KeyCode::Char('q')) => Overlay::None,
                (None, _) => Overlay::Detail { title, lines, scroll },
            };
            return Vec::new();
        }
        Overlay::Filter { mut input } => {
            match k.code {
                KeyCode::Esc => {
                    s.pane_mut(s.focus).filter.clear();
                    s.refilter(s.focus);
                }
                KeyCode::Enter => {}
                KeyCode::Backspace => {
                    input.pop();
                    s.pane_mut(s.focus).filter = input.clone();
                    s.refilter(s.focus);
                    s.overlay = Overlay::Filter { input };
                }
                KeyCode::Char(c) => {
                    input.push(c);
                    s.pane_mut(s.focus).filter = input.clone();
                    s.refilter(s.focus);
                    s.overlay = Overlay::Filter { input };
                }
                _ => s.overlay = Overlay::Filter { input },
            }
            return Vec::new();
        }
        Overlay::Palette { mut input } => {
            match k.code {
                KeyCode::Esc => {}
                KeyCode::Enter => return palette(s, input.trim()),
                KeyCode::Backspace => {
                    input.pop();
                    s.overlay = Overlay::Palette { input };
                }
                KeyCode::Tab => {
                    let done = complete(&input);
                    s.overlay = Overlay::Palette { input: done };
                }
                KeyCode::Char(c) => {
                    input.push(c);
                    s.overlay = Overlay::Palette { input };
                }
                _ => s.overlay = Overlay::Palette { input },
            }
            return Vec::new();
        }
        Overlay::Confirm(c) => return confirm_key(s, c, k),
    }
    let Some(key) = Key::from_event(&k) else { return Vec::new() };
    let Some(action) = s.keymap.resolve(&key, s.focus) else { return Vec::new() };
    act(s, action)
}

/// Carries out an action from the registry (keys and the palette both come here).
pub fn act(s: &mut AppState, action: Action) -> Vec<Effect> {
    let focus = s.focus;
    match action {
        Action::Quit => {
            s.quit = true;
            return vec![Effect::Quit];
        }
        Action::Help => s.overlay = Overlay::Help { scroll: 0 },
        Action::Palette => s.overlay = Overlay::Palette { input: String::new() },
        Action::Filter => s.overlay = Overlay::Filter { input: s.pane(focus).filter.clone() },
        Action::NextPane => s.focus = Pane::ALL[(focus.index() + 1) % Pane::ALL.len()],
        Action::PrevPane => s.focus = Pane::ALL[(focus.index() + Pane::ALL.len() - 1) % Pane::ALL.len()],
        Action::Focus(p) => s.focus = p,
        Action::Up | Action::Down | Action::Top | Action::Bottom if s.node_page().is_some() => {
            let len = match s.node_page().and_then(|p| p.pods.as_ref()) {
                Some(Ok(rows)) => rows.len(),
                _ => 0,
            };
            if let Some(page) = s.node_page_mut() {
                page.selected = match action {
                    Action::Up => page.selected.saturating_sub(1),
                    Action::Down => (page.selected + 1).min(len.saturating_sub(1)),
                    Action::Top => 0,
                    _ => len.saturating_sub(1),
                };
            }
        }
        Action::Up => s.move_selection(focus, |i, _| i.saturating_sub(1)),
        Action::Down => s.move_selection(focus, |i, _| i + 1),
        Action::Top => s.move_selection(focus, |_, _| 0),
        Action::Bottom => s.move_selection(focus, |_, len| len - 1),
        Action::PageUp => s.move_selection(focus, |i, _| i.saturating_sub(PAGE)),
        Action::PageDown => s.move_selection(focus, |i, _| i + PAGE),
        Action::Back if !s.drill.is_empty() => {
            if let Some(Crumb::Pool(_)) = s.drill.pop() {
                s.focus = Pane::NodePools;
            }
            s.refilter(Pane::Nodes);
            s.status = None;
        }
        Action::Back => {
            if !s.pane(focus).filter.is_empty() {
                s.pane_mut(focus).filter.clear();
                s.refilter(focus);
            }
            s.status = None;
        }
        Action::Open if s.node_page().is_some() => {}
        // Enter drills down: a NodePool to its nodes and claims, a node to its pods.
        Action::Open if focus == Pane::NodePools => {
            if let Some(pool) = s.selected_row(focus).and_then(|i| s.view.nodepools.get(i)).map(|p| p.name.clone()) {
                s.drill = vec![Crumb::Pool(pool.clone())];
                s.focus = Pane::Nodes;
                s.refilter(Pane::Nodes);
                s.info(format!("NodePool {pool}: its nodes and NodeClaims (Enter: a node's pods · Esc: back)"));
            }
        }
        Action::Open if focus == Pane::Nodes => {
            let Some(row) = s.selected_row(focus).and_then(|i| s.view.nodes.get(i)) else { return Vec::new() };
            if row.nodeclaim.as_deref() == Some(row.name.as_str()) && row.pods == 0 {
                // A NodeClaim with no node yet has no pods to show: its detail instead.
                let (title, lines) = rows::detail(&s.view, focus, s.selected_row(focus).unwrap_or_default());
                s.overlay = Overlay::Detail { title, lines, scroll: 0 };
                return Vec::new();
            }
            let name = row.name.clone();
            s.drill.retain(|c| matches!(c, Crumb::Pool(_)));
            s.drill.push(Crumb::Node(NodePage { name, request: None, pods: None, selected: 0 }));
            return s.ask_node_pods();
        }
        Action::Open | Action::Details => {
            let page = s.node_page().map(|p| p.name.clone());
            let row = match page {
                Some(name) => s.view.nodes.iter().position(|n| n.name == name).map(|i| (Pane::Nodes, i)),
                None => s.selected_row(focus).map(|i| (focus, i)),
            };
            if let Some((pane, i)) = row {
                let (title, lines) = rows::detail(&s.view, pane, i);
                s.overlay = Overlay::Detail { title, lines, scroll: 0 };
            }
        }
        Action::Approve | Action::Reject => return proposal_intent(s, action == Action::Approve),
        Action::Repair => return repair_intent(s),
        Action::Selector => {
            let current = s.selector.as_ref().map(|x| x.text.as_str()).unwrap_or_default();
            s.overlay = Overlay::Palette { input: format!("selector {current}") };
        }
        Action::ScaleUp | Action::ScaleDown => {
            let Some(i) = s.selected_row(Pane::NodePools) else {
                s.info("no NodePool selected");
                return Vec::new();
            };
            let Some(pool) = s.view.nodepools.get(i).cloned() else { return Vec::new() };
            let Some(n) = pool.replicas else {
                s.error(format!("{} is dynamic (no spec.replicas): only a static NodePool is scaled", pool.name));
                return Vec::new();
            };
            let to = if action == Action::ScaleUp { n.saturating_add(1) } else { n.saturating_sub(1) };
            return scale_intent(s, &pool.name, to);
        }
        Action::ApproveAll => {
            let ids: Vec<String> =
                s.view.disruptions.iter().filter(|d| d.state.is_open()).map(|d| d.id.clone()).collect();
            if ids.is_empty() {
                s.info("no proposal is waiting for approval");
                return Vec::new();
            }
            let savings: f64 =
                s.view.disruptions.iter().filter(|d| d.state.is_open()).map(|d| d.savings_per_hour).sum();
            let nodes: usize =
                s.view.disruptions.iter().filter(|d| d.state.is_open()).map(|d| d.candidates.len()).sum();
            s.overlay = Overlay::Confirm(Confirm {
                title: format!("Approve all {} open proposals", ids.len()),
                body: vec![
                    format!("{} proposals: {}", ids.len(), ids.join(", ")),
                    format!("{nodes} node(s) will be drained and deleted, replacements launched first where needed."),
                    format!("Estimated savings ${savings:.4}/h (${:.2}/month).", savings * 730.0),
                    "Each is validated against the cluster as it is now; one that no longer holds is withdrawn.".into(),
                ],
                phrase: Some(format!("approve {}", ids.len())),
                typed: String::new(),
                pending: Pending::ApproveAll { ids },
            });
        }
        Action::Edit | Action::EditExternal => {
            let Some(i) = s.selected_row(Pane::NodePools) else {
                s.info("no NodePool selected");
                return Vec::new();
            };
            let Some(pool) = s.view.nodepools.get(i) else { return Vec::new() };
            let mut editor = NodePoolEditor::new(pool.name.clone(), &pool.yaml).with_version(s.view.karpenter_version);
            editor.apply_theme(&s.theme);
            let name = pool.name.clone();
            let text = pool.yaml.clone();
            s.editor = Some(Box::new(EditSession { editor, stage: EditStage::Editing, discard_armed: false }));
            s.status = None;
            if action == Action::EditExternal {
                return vec![Effect::ExternalEdit { name, text }];
            }
        }
        Action::Sort | Action::ReverseSort => {
            let p = s.focus;
            let columns = s.sort_keys(p).len().max(1);
            let ps = s.pane_mut(p);
            if action == Action::Sort {
                ps.sort = (ps.sort + 1) % columns;
            } else {
                ps.reverse = !ps.reverse;
            }
            let reverse = ps.reverse;
            s.refilter(p);
            let key = s.sort_key(p);
            let how = match (key.as_str(), rows::sort_descends(p, &key) != reverse) {
                ("default", _) => String::new(),
                (_, true) => " ▼".to_string(),
                (_, false) => " ▲".to_string(),
            };
            s.info(format!("{}: sorted by {key}{how}{}", p.title(), if reverse { ", reversed" } else { "" }));
        }
        Action::CycleTheme => {
            let names: Vec<&str> = theme::BUILTIN.iter().map(|(n, _)| *n).collect();
            let at = names.iter().position(|n| *n == s.theme.name).map(|i| i + 1).unwrap_or(0) % names.len();
            if let Some(t) = Theme::builtin(names[at]) {
                s.info(format!("theme {}", t.name));
                s.theme = t;
            }
        }
        Action::Pause | Action::Faster | Action::Slower => {
            if !s.demo {
                s.info("the clock is real time on a live cluster");
                return Vec::new();
            }
            return match action {
                Action::Pause => {
                    s.paused = !s.paused;
                    s.info(if s.paused { "paused" } else { "resumed" });
                    vec![Effect::Send(Command::SetPaused { paused: s.paused })]
                }
                _ => {
                    let f = if action == Action::Faster { 2.0 } else { 0.5 };
                    s.speed = (s.speed * f).clamp(0.25, 512.0);
                    s.info(format!("clock ×{}", s.speed));
                    vec![Effect::Send(Command::SetSpeed { speed: s.speed })]
                }
            };
        }
    }
    Vec::new()
}

/// `a` / `r` on the selected proposal: a confirmation that says exactly what will happen.
/// The first phase of scaling a static NodePool: what changes, then a confirmation.
fn scale_intent(s: &mut AppState, name: &str, to: i64) -> Vec<Effect> {
    let Some(pool) = s.view.nodepools.iter().find(|p| p.name == name).cloned() else {
        s.error(format!("no NodePool {name}"));
        return Vec::new();
    };
    let Some(from) = pool.replicas else {
        s.error(format!("{name} is dynamic (no spec.replicas): only a static NodePool is scaled"));
        return Vec::new();
    };
    if to < 0 {
        s.error(format!("{name} has {from} replica(s); it cannot go below 0"));
        return Vec::new();
    }
    if to == from {
        s.info(format!("{name} already has {from} replica(s)"));
        return Vec::new();
    }
    let what = if to > from {
        format!(
            "{} NodeClaim(s) will be launched from its template, as far as limits.nodes allows.",
            to.saturating_sub(from.max(0))
        )
    } else {
        format!(
            "{} node(s) will be deleted at once, without asking budgets: unlaunched claims first, then empty nodes, \
             then those whose pods are cheapest to move; their pods are drained (PDBs and grace periods apply).",
            from.saturating_sub(to)
        )
    };
    s.overlay = Overlay::Confirm(Confirm {
        title: format!("Scale NodePool {name} from {from} to {to} replicas"),
        body: vec![what, "The change is written through the NodePool's scale subresource (kubectl scale).".into()],
        phrase: None,
        typed: String::new(),
        pending: Pending::Scale { name: name.to_string(), replicas: to },
    });
    Vec::new()
}

/// The first phase of `:pause` / `:resume`: what will hold voluntary disruption, or let it go on, spelled out for
/// the acting engine (it holds every command) and for a cluster where someone else acts (the NodePools' budgets).
fn pause_intent(s: &mut AppState, pause: bool, budgets: bool) -> Vec<Effect> {
    let verb = if pause { "pause" } else { "resume" };
    if s.readonly() {
        s.error(format!("read-only: voluntary disruption cannot be {verb}d here"));
        return Vec::new();
    }
    match (&s.view.paused, pause) {
        (Some(p), true) => {
            s.info(format!("voluntary disruption is already paused ({}, by {})", p.how, p.by));
            return Vec::new();
        }
        (None, false) => {
            s.info("voluntary disruption is not paused");
            return Vec::new();
        }
        _ => {}
    }
    let pools = s.view.nodepools.len();
    let acting = matches!(s.view.leadership, crate::protocol::view::Leadership::Acting);
    // Resuming undoes whichever pause is in force: the picture says which.
    let budgets =
        if pause { budgets || !acting } else { s.view.paused.as_ref().is_some_and(|p| p.how.starts_with("budgets")) };
    let body = match (acting && !budgets, pause) {
        (true, true) => vec![
            "This engine will start no voluntary disruption (consolidation, drift, emptiness): each one it finds \
             waits as a proposal that cannot be approved until :resume."
                .to_string(),
            "Disruptions already started finish; forceful ones (expiry, interruption, repair) go on.".into(),
            "The hold lasts while this instance runs: a restart resumes. :pause budgets pauses through the \
             NodePools' budgets instead, which survives restarts."
                .into(),
        ],
        (true, false) => {
            let held = s.view.disruptions.iter().filter(|d| d.state == ProposalState::AwaitingApproval).count();
            let mut body = vec!["Voluntary disruption goes on under the current mode.".to_string()];
            if held > 0 && s.view.mode == Mode::Auto {
                body.push(format!("{held} held proposal(s) are withdrawn and recomputed."));
            }
            body
        }
        (false, true) => vec![
            format!(
                "Every NodePool ({pools}) gets a single disruption budget of nodes: \"0\", so the Karpenter that acts \
                 starts no voluntary disruption."
            ),
            "The budgets each one had are kept in its annotation karpenter-tui.sh/paused-budgets; :resume restores \
             exactly them, from any instance, even after a restart."
                .into(),
        ],
        (false, false) => vec![
            "Every paused NodePool gets back the disruption budgets kept in its annotation, and the annotation is \
             removed."
                .to_string(),
        ],
    };
    s.overlay = Overlay::Confirm(Confirm {
        title: if pause { "Pause all voluntary disruption?".into() } else { "Resume voluntary disruption?".into() },
        body,
        phrase: None,
        typed: String::new(),
        pending: Pending::PauseDisruption(pause, budgets),
    });
    Vec::new()
}

/// The first phase of "repair now": only a node node repair would replace anyway, with what happens spelled out.
fn repair_intent(s: &mut AppState) -> Vec<Effect> {
    let Some(i) = s.selected_row(Pane::Nodes) else {
        s.info("no node selected");
        return Vec::new();
    };
    let Some(n) = s.view.nodes.get(i).cloned() else { return Vec::new() };
    let Some(u) = &n.repair else {
        s.error(format!(
            "{} matches no repair policy (or node repair is off: feature gate NodeRepair); nothing to repair",
            n.name
        ));
        return Vec::new();
    };
    let when = if u.repair_at > s.view.now {
        format!("node repair would replace it in {}", crate::ui::rows::age(u.repair_at, s.view.now))
    } else {
        "its toleration is already over".to_string()
    };
    s.overlay = Overlay::Confirm(Confirm {
        title: format!("Repair node {} now", n.name),
        body: vec![
            format!("{} is unhealthy: {}={}; {when}.", n.name, u.condition, u.status),
            format!(
                "NodeClaim {} is deleted with a termination time of now: its {} pod(s) are deleted at once, without \
                 eviction, PDBs or budgets, and a new node is launched for them afterwards.",
                n.nodeclaim.as_deref().unwrap_or("?"),
                n.pods
            ),
        ],
        phrase: None,
        typed: String::new(),
        pending: Pending::Repair { node: n.name.clone() },
    });
    Vec::new()
}

fn proposal_intent(s: &mut AppState, approve: bool) -> Vec<Effect> {
    let Some(i) = s.selected_row(Pane::Disruptions) else {
        s.info("no proposal selected");
        return Vec::new();
    };
    let Some(d) = s.view.disruptions.get(i).cloned() else { return Vec::new() };
    if !d.state.is_open() {
        s.error(format!(
            "{} is {}; only proposals awaiting approval can be approved or rejected",
            d.id,
            d.state.as_str()
        ));
        return Vec::new();
    }
    let mut body = vec![format!("{} ({}, {}): {}", d.id, d.method, d.reason, d.summary)];
    if approve {
        let repl = if d.replacements.is_empty() {
            "no replacement is needed: the pods fit on other nodes".to_string()
        } else {
            format!(
                "{} replacement(s) launch first ({}), then the candidates drain",
                d.replacements.len(),
                d.replacements
                    .iter()
                    .map(|r| r.iter().take(3).cloned().collect::<Vec<_>>().join("|"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        body.push(format!(
            "Node(s) {} will be tainted, drained and deleted; {repl}.",
            crate::ui::rows::nodes_summary(&s.view, &d.candidates)
        ));
        let pdb_limited = d.evictions.iter().filter(|(_, p)| p.as_ref().is_some_and(|(_, a)| *a <= 0)).count();
        body.push(format!(
            "{} pod(s) will be evicted through the Eviction API{}.",
            d.evictions.len(),
            if pdb_limited > 0 {
                format!(" ({pdb_limited} behind a PDB with no headroom now: they wait)")
            } else {
                String::new()
            }
        ));
        if d.savings_per_hour > 0.0 {
            body.push(format!("Saves ${:.4}/h (${:.2}/month).", d.savings_per_hour, d.savings_per_hour * 730.0));
        }
        for (pool, n, allowed) in &d.budget_use {
            body.push(format!("Uses {n} of the {allowed} {} disruption(s) NodePool {pool} allows now.", d.reason));
        }
        body.push("It is validated against the cluster as it is now before anything starts.".into());
        let detail = format!(
            "{} {} candidates={} savings/h={:.4}",
            d.method,
            d.reason,
            d.candidates.join(","),
            d.savings_per_hour
        );
        s.overlay = Overlay::Confirm(Confirm {
            title: format!("Approve {}?", d.id),
            body,
            phrase: None,
            typed: String::new(),
            pending: Pending::Approve { id: d.id.clone(), detail },
        });
    } else {
        body.push("Nothing changes. The same proposal is not offered again until the cluster changes.".into());
        s.overlay = Overlay::Confirm(Confirm {
            title: format!("Reject {}?", d.id),
            body,
            phrase: None,
            typed: String::new(),
            pending: Pending::Reject { id: d.id.clone() },
        });
    }
    Vec::new()
}

fn confirm_key(s: &mut AppState, mut c: Confirm, k: KeyEvent) -> Vec<Effect> {
    if let Some(phrase) = c.phrase.clone() {
        match k.code {
            KeyCode::Esc => {
                s.info("cancelled");
            }
            KeyCode::Enter if c.typed == phrase => return confirmed(s, c.pending.clone()),
            KeyCode::Enter => {
                s.overlay = Overlay::Confirm(c.clone());
                s.error(format!("type {phrase:?} exactly to confirm, or Esc to cancel"));
            }
            KeyCode::Backspace => {
                c.typed.pop();
                s.overlay = Overlay::Confirm(c.clone());
            }
            KeyCode::Char(ch) => {
                c.typed.push(ch);
                s.overlay = Overlay::Confirm(c.clone());
            }
            _ => s.overlay = Overlay::Confirm(c.clone()),
        }
        return Vec::new();
    }
    match k.code {
        KeyCode::Char('y') | KeyCode::Enter => confirmed(s, c.pending.clone()),
        KeyCode::Char('n') | KeyCode::Esc | KeyCode::Char('q') => {
            s.info("cancelled");
            Vec::new()
        }
        _ => {
            s.overlay = Overlay::Confirm(c.clone());
            Vec::new()
        }
    }
}

/// The second phase: the command goes to the backend.
fn confirmed(s: &mut AppState, p: Pending) -> Vec<Effect> {
    if s.readonly() {
        s.error("read-only: nothing was sent");
        return Vec::new();
    }
    match p {
        Pending::Approve { id, detail } => {
            s.info(format!("approving {id} ..."));
            vec![s.request(|request| Command::Approve { request, id: id.clone() }, "approve", &id, detail)]
        }
        Pending::Reject { id } => {
            s.info(format!("rejecting {id} ..."));
            vec![s.request(|request| Command::Reject { request, id: id.clone() }, "reject", &id, String::new())]
        }
        Pending::ApproveAll { ids } => {
            s.info(format!("approving {} proposals ...", ids.len()));
            ids.into_iter()
                .map(|id| {
                    s.request(
                        |request| Command::Approve { request, id: id.clone() },
                        "approve",
                        &id,
                        "approve-all".into(),
                    )
                })
                .collect()
        }
        Pending::SetMode(mode) => {
            vec![s.request(|request| Command::SetMode { request, mode }, "mode", mode.as_str(), String::new())]
        }
        Pending::PauseDisruption(pause, budgets) => {
            let action = if pause { "pause" } else { "resume" };
            vec![s.request(
                |request| Command::PauseDisruption { request, pause, budgets },
                action,
                "voluntary-disruption",
                String::new(),
            )]
        }
        Pending::SetPacking(packing) => vec![s.request(
            |request| Command::SetPacking { request, packing },
            "packing",
            packing.as_str(),
            String::new(),
        )],
        Pending::Scale { name, replicas } => {
            s.info(format!("scaling {name} to {replicas} ..."));
            vec![s.request(
                |request| Command::ScaleNodePool { request, name: name.clone(), replicas },
                "scale",
                &name,
                format!("replicas {replicas}"),
            )]
        }
        Pending::Repair { node } => {
            s.info(format!("repairing {node} ..."));
            vec![s.request(
                |request| Command::RepairNode { request, node: node.clone() },
                "repair",
                &node,
                String::new(),
            )]
        }
        Pending::ApplyEdit { name, yaml } => {
            let detail = format!("{} bytes of YAML", yaml.len());
            vec![s.request(
                |request| Command::ApplyNodePool { request, name: name.clone(), yaml },
                "apply-nodepool",
                &name,
                detail,
            )]
        }
    }
}

/// Keys while the NodePool editor is open.
fn editor_key(s: &mut AppState, k: KeyEvent) -> Vec<Effect> {
    let Some(mut ed) = s.editor.take() else { return Vec::new() };
    let mut effects = Vec::new();
    match &mut ed.stage {
        EditStage::Applying(_) => {
            s.info("applying ...");
        }
        EditStage::Reviewing { waiting, scroll, .. } => match k.code {
            KeyCode::Char('y') | KeyCode::Enter => {
                if waiting.is_some() {
                    s.info("the what-if is still being computed");
                } else if s.readonly() {
                    s.error("read-only: nothing was applied");
                } else {
                    let name = ed.editor.pool_name().to_string();
                    let yaml = ed.editor.text();
                    let detail = format!("{} bytes of YAML", yaml.len());
                    let kind = ed.editor.kind();
                    let e = match kind {
                        EditKind::NodePool => s.request(
                            |request| Command::ApplyNodePool { request, name: name.clone(), yaml },
                            "apply-nodepool",
                            &name,
                            detail,
                        ),
                        EditKind::NodeOverlay => s.request(
                            |request| Command::ApplyNodeOverlay { request, name: name.clone(), yaml },
                            "apply-nodeoverlay",
                            &name,
                            detail,
                        ),
                    };
                    if let Effect::Send(
                        Command::ApplyNodePool { request, .. } | Command::ApplyNodeOverlay { request, .. },
                    ) = &e
                    {
                        ed.stage = EditStage::Applying(*request);
                    }
                    s.info(format!("applying {} {name} ...", kind.as_str()));
                    effects.push(e);
                }
            }
            KeyCode::Char('n') | KeyCode::Esc => ed.stage = EditStage::Editing,
            code => {
                if let Some(to) = scrolled(code, *scroll) {
                    *scroll = to;
                }
            }
        },
        EditStage::Editing => match ed.editor.input(k) {
            EditorEvent::Cancelled => {
                if ed.editor.is_modified() && !ed.discard_armed {
                    ed.discard_armed = true;
                    s.error("unsaved changes: Esc again discards them, Ctrl-S reviews and applies");
                } else {
                    s.info("edit closed; nothing applied");
                    return Vec::new();
                }
            }
            EditorEvent::SaveBlocked { errors } => {
                s.error(format!("{errors} problem(s) to fix before saving (the cursor is on the first)"));
            }
            EditorEvent::SaveRequested => {
                ed.discard_armed = false;
                if !ed.editor.is_modified() {
                    s.info("no changes to apply");
                } else {
                    let name = ed.editor.pool_name().to_string();
                    let yaml = ed.editor.text();
                    let diff = diff_lines(ed.editor.live_yaml(), &yaml);
                    s.status = None;
                    if ed.editor.kind() == EditKind::NodeOverlay {
                        // An overlay's effect shows in the NodePools' details and prices once applied.
                        ed.stage = EditStage::Reviewing {
                            diff,
                            preview: Err(
                                "The diff to apply (y applies, n goes back); prices and choices follow on the next \
                                 evaluation"
                                    .into(),
                            ),
                            waiting: None,
                            scroll: 0,
                        };
                    } else {
                        let request = s.next_id();
                        ed.stage = EditStage::Reviewing {
                            diff,
                            preview: Err("computing the what-if ...".into()),
                            waiting: Some(request),
                            scroll: 0,
                        };
                        effects.push(Effect::Send(Command::PreviewNodePool { request, name, yaml }));
                    }
                }
            }
            EditorEvent::ExternalEditorRequested => {
                effects.push(Effect::ExternalEdit { name: ed.editor.pool_name().to_string(), text: ed.editor.text() });
            }
            EditorEvent::Edited => {
                ed.discard_armed = false;
            }
            EditorEvent::Unchanged | EditorEvent::Ignored => {}
        },
    }
    s.editor = Some(ed);
    effects
}

pub use crate::ui::action::PALETTE;

/// `:packing upstream|cost`: a confirmation that switches the controller's packing strategy.
fn packing_intent(s: &mut AppState, args: &[&str]) -> Vec<Effect> {
    let packing = match args {
        [p] => match p.parse::<Packing>() {
            Ok(p) => p,
            Err(e) => {
                s.error(format!(":packing {p}: {e}"));
                return Vec::new();
            }
        },
        _ => {
            s.error(":packing: expected upstream or cost");
            return Vec::new();
        }
    };
    if s.readonly() {
        s.error("read-only: the packing strategy cannot be changed");
        return Vec::new();
    }
    if packing == s.view.packing {
        s.info(format!("the packing strategy is already {packing}"));
        return Vec::new();
    }
    let what = match packing {
        Packing::Upstream => "New NodeClaims will be sized as Karpenter sizes them.",
        Packing::Cost => "New NodeClaims will be sized for the cheapest fleet that holds each batch of pending pods.",
    };
    s.overlay = Overlay::Confirm(Confirm {
        title: format!("Switch packing from {} to {packing}?", s.view.packing),
        body: vec![what.to_string(), "Nodes already launched stay as they are.".to_string()],
        phrase: None,
        typed: String::new(),
        pending: Pending::SetPacking(packing),
    });
    Vec::new()
}

/// Completes the palette input to the longest common prefix of the matching commands.
fn complete(input: &str) -> String {
    let matches: Vec<&str> = PALETTE.iter().map(|(c, _)| *c).filter(|c| c.starts_with(input)).collect();
    let Some(first) = matches.first() else { return input.to_string() };
    let mut prefix = first.to_string();
    for m in &matches[1..] {
        while !m.starts_with(&prefix) {
            prefix.pop();
        }
    }
    if prefix.len() > input.len() { prefix } else { input.to_string() }
}

/// `:selector SELECTOR`: the Nodes pane shows only the rows whose labels match; nothing after it clears it. A bad
/// selector is an error in the status line and the one in force stays.
fn selector_command(s: &mut AppState, text: &str) -> Vec<Effect> {
    match rows::NodeSelector::parse(text) {
        Err(e) => s.error(format!(":selector {text}: {e} (the selector in force is unchanged)")),
        Ok(sel) if sel.text.is_empty() => {
            s.selector = None;
            s.refilter(Pane::Nodes);
            s.info("Nodes & NodeClaims: no selector, every row");
        }
        Ok(sel) => {
            let text = sel.text.clone();
            s.selector = Some(sel);
            s.refilter(Pane::Nodes);
            let shown = s.pane(Pane::Nodes).visible.len();
            s.info(format!("Nodes & NodeClaims: -l {text} ({shown} of {} rows)", s.view.nodes.len()));
        }
    }
    Vec::new()
}

fn palette(s: &mut AppState, input: &str) -> Vec<Effect> {
    // A selector may hold spaces (`zone in (a, b)`): the rest of the line is its text.
    if let Some(rest) = input.strip_prefix("selector")
        && (rest.is_empty() || rest.starts_with(char::is_whitespace))
    {
        return selector_command(s, rest);
    }
    let words: Vec<&str> = input.split_whitespace().collect();
    match words.as_slice() {
        [] => Vec::new(),
        ["q" | "quit" | "q!"] => act(s, Action::Quit),
        ["help" | "?"] => act(s, Action::Help),
        ["clock", "pause"] if !s.paused => act(s, Action::Pause),
        ["clock", "resume"] if s.paused => act(s, Action::Pause),
        ["clock", "pause" | "resume"] => Vec::new(),
        ["ctx" | "context"] => {
            if s.contexts.is_empty() {
                s.error("no kubeconfig contexts to switch between here");
                return Vec::new();
            }
            let current = s.view.source.context.clone();
            let lines = s
                .contexts
                .iter()
                .map(|c| if *c == current { format!("* {c}  (in use)") } else { format!("  {c}") })
                .chain(["".to_string(), ":ctx NAME switches to one in place (it is then observed).".to_string()])
                .collect();
            s.overlay = Overlay::Detail { title: "kubeconfig contexts".into(), lines, scroll: 0 };
            Vec::new()
        }
        ["ctx" | "context", name] => {
            let name = name.to_string();
            if !s.contexts.contains(&name) {
                s.error(format!(":ctx {name}: no such context (:ctx lists them)"));
                return Vec::new();
            }
            if name == s.view.source.context {
                s.info(format!("already on context {name}"));
                return Vec::new();
            }
            // The drill-down belongs to the cluster being left.
            s.drill.clear();
            s.refilter(Pane::Nodes);
            s.info(format!("switching to context {name} ..."));
            vec![s.request(
                |request| Command::SwitchContext { request, context: name.clone() },
                "context",
                &name,
                String::new(),
            )]
        }
        ["pause"] => pause_intent(s, true, false),
        ["pause", "budgets"] => pause_intent(s, true, true),
        ["resume"] => pause_intent(s, false, false),
        ["theme", name] => {
            match Theme::load(name) {
                Ok(t) => {
                    s.info(format!("theme {}", t.name));
                    s.theme = t;
                }
                Err(e) => s.error(e.to_string()),
            }
            Vec::new()
        }
        ["speed", x] => match x.trim_start_matches(['x', '×']).parse::<f64>() {
            Ok(v) if s.demo && v > 0.0 && v.is_finite() => {
                s.speed = v.clamp(0.25, 512.0);
                s.info(format!("clock ×{}", s.speed));
                vec![Effect::Send(Command::SetSpeed { speed: s.speed })]
            }
            Ok(_) if !s.demo => {
                s.info("the clock is real time on a live cluster");
                Vec::new()
            }
            _ => {
                s.error(format!(":speed {x}: expected a positive number such as 10"));
                Vec::new()
            }
        },
        ["overlay", name] => {
            if s.readonly() {
                s.error("read-only: NodeOverlays cannot be edited");
                return Vec::new();
            }
            let Some(o) = s.view.overlays.iter().find(|o| o.name == *name).cloned() else {
                s.error(format!("no NodeOverlay {name}"));
                return Vec::new();
            };
            let mut editor = NodePoolEditor::for_overlay(o.name.clone(), &o.yaml);
            editor.apply_theme(&s.theme);
            s.editor = Some(Box::new(EditSession { editor, stage: EditStage::Editing, discard_armed: false }));
            s.status = None;
            Vec::new()
        }
        ["scale", name, n] => {
            if s.readonly() {
                s.error("read-only: nothing can be scaled");
                return Vec::new();
            }
            let Ok(to) = n.parse::<i64>() else {
                s.error(format!(":scale {name} {n}: expected a number of replicas"));
                return Vec::new();
            };
            scale_intent(s, name, to)
        }
        ["mode", m] => {
            let mode = match *m {
                "approve" => Mode::Approve,
                "auto" => Mode::Auto,
                "dry-run" | "dryrun" => Mode::DryRun,
                other => {
                    s.error(format!(":mode {other}: expected approve, auto or dry-run"));
                    return Vec::new();
                }
            };
            if s.readonly() {
                s.error("read-only: the mode cannot be changed");
                return Vec::new();
            }
            if mode == s.view.mode {
                s.info(format!("the mode is already {mode}"));
                return Vec::new();
            }
            let open = s.view.disruptions.iter().filter(|d| d.state == ProposalState::AwaitingApproval).count();
            let what = match mode {
                Mode::Auto => "Voluntary disruptions will start on their own after validation, as Karpenter does.",
                Mode::Approve => "Every voluntary disruption will wait for an operator's approval.",
                Mode::DryRun => "Disruptions will be computed and shown, never started.",
            };
            let mut body = vec![what.to_string()];
            if open > 0 {
                body.push(format!("{open} open proposal(s) will be withdrawn and recomputed under the new mode."));
            }
            s.overlay = Overlay::Confirm(Confirm {
                title: format!("Switch the engine from {} to {mode}?", s.view.mode),
                body,
                phrase: None,
                typed: String::new(),
                pending: Pending::SetMode(mode),
            });
            Vec::new()
        }
        ["packing", args @ ..] => packing_intent(s, args),
        [name] => {
            if let Some(p) = crate::ui::action::Pane::ALL
                .iter()
                .find(|p| p.command() == *name || p.command().starts_with(name) && name.len() >= 3)
            {
                s.focus = *p;
            } else {
                s.error(format!(":{name}: unknown command (Tab completes; ? lists keys)"));
            }
            Vec::new()
        }
        _ => {
            s.error(format!(":{input}: unknown command (Tab completes; ? lists keys)"));
            Vec::new()
        }
    }
}
