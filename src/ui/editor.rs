//! The in-place NodePool editor: a text area with validation as you type, a review screen (diff against the live
//! object plus the engine's what-if preview), and the `$EDITOR` fallback.
//!
//! No terminal I/O here except [`edit_externally`], which the shell calls with the terminal suspended. The editor
//! is a component: the shell feeds it key events and acts on the [`EditorEvent`]s it returns (save → review,
//! cancel → close, external editor → suspend and call [`edit_externally`], then [`NodePoolEditor::set_text`]).
//!
//! Validation is the engine's strict parse ([`parse_nodepool_strict_with`]): YAML syntax with line and column,
//! unknown fields, and every validation rule, plus one rule of the editor's own — `metadata.name` may not change,
//! because an edit that renames would create a second NodePool rather than change this one.

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Widget, Wrap};
use ratatui_textarea::{CursorMove, Input, Key, TextArea};
use similar::{ChangeTag, TextDiff};
use thiserror::Error;

use crate::engine::api::NodePool;
use crate::engine::api::strict::{self, Diagnostic};
use crate::engine::labels::LabelPolicy;
use crate::engine::version::KarpenterVersion;
use crate::engine::whatif::{EditPreview, summary_lines};
use crate::ui::theme::Theme;

/// Diagnostics listed under the text; the rest are counted.
pub const SHOWN_DIAGNOSTICS: usize = 4;
/// Lines of unchanged context around each change in [`diff_lines`].
pub const DIFF_CONTEXT: usize = 3;
/// A diff gives up on an optimal result after this long (pasted garbage must not freeze the UI).
const DIFF_TIMEOUT: Duration = Duration::from_millis(200);
/// YAML indents with spaces; two is the Kubernetes convention.
const TAB_WIDTH: u8 = 2;

/// What a key press did, for the shell to act on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditorEvent {
    /// The text changed; diagnostics are up to date.
    Edited,
    /// The key was consumed but the text did not change (cursor motion, selection, nothing to undo).
    Unchanged,
    /// Ctrl-S on a valid document: show the review ([`diff_lines`], the what-if preview).
    SaveRequested,
    /// Ctrl-S while the document has problems: the cursor moved to the first one; nothing to review.
    SaveBlocked { errors: usize },
    /// Esc: leave the editor (the shell may ask first when [`NodePoolEditor::is_modified`]).
    Cancelled,
    /// Ctrl-E: suspend the terminal and run [`edit_externally`].
    ExternalEditorRequested,
    /// Not a key the editor handles (key releases, keys the text area has no binding for).
    Ignored,
}

/// What an editor edits: the text is validated as that kind, and the review and apply follow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditKind {
    NodePool,
    NodeOverlay,
}

impl EditKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EditKind::NodePool => "NodePool",
            EditKind::NodeOverlay => "NodeOverlay",
        }
    }
}

/// Editing one NodePool's (or NodeOverlay's) YAML.
pub struct NodePoolEditor {
    kind: EditKind,
    pool_name: String,
    live_yaml: String,
    textarea: TextArea<'static>,
    policy: LabelPolicy,
    /// The Karpenter whose CRD and webhook the text must pass.
    version: KarpenterVersion,
    diagnostics: Vec<Diagnostic>,
    parsed: Option<NodePool>,
}

impl fmt::Debug for NodePoolEditor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodePoolEditor")
            .field("pool_name", &self.pool_name)
            .field("lines", &self.textarea.lines().len())
            .field("diagnostics", &self.diagnostics.len())
            .finish()
    }
}

impl NodePoolEditor {
    /// An editor over `live_yaml` (the NodePool as the cluster has it). Validation uses the default label policy;
    /// see [`NodePoolEditor::with_label_policy`].
    pub fn new(pool_name: impl Into<String>, live_yaml: &str) -> Self {
        let mut textarea = TextArea::new(live_yaml.lines().map(str::to_string).collect());
        textarea.set_tab_length(TAB_WIDTH);
        textarea.set_hard_tab_indent(false);
        // Line numbers on; colours come from the theme (apply_theme), never literal here.
        textarea.set_line_number_style(Style::default().add_modifier(Modifier::DIM));
        textarea.set_cursor_line_style(Style::default());
        let mut e = NodePoolEditor {
            kind: EditKind::NodePool,
            pool_name: pool_name.into(),
            live_yaml: live_yaml.to_string(),
            textarea,
            policy: LabelPolicy::default(),
            version: KarpenterVersion::NEWEST,
            diagnostics: Vec::new(),
            parsed: None,
        };
        e.validate();
        e
    }

    /// An editor over a NodeOverlay's YAML (validated by the CRD's rules; no what-if).
    pub fn for_overlay(name: impl Into<String>, live_yaml: &str) -> Self {
        let mut e = NodePoolEditor::new(name, live_yaml);
        e.kind = EditKind::NodeOverlay;
        e.validate();
        e
    }

    pub fn kind(&self) -> EditKind {
        self.kind
    }

    /// Validate with a provider's label policy (restricted domains, well-known labels) instead of the default.
    pub fn with_label_policy(mut self, policy: LabelPolicy) -> Self {
        self.policy = policy;
        self.validate();
        self
    }

    /// Validate as Karpenter `version` would (the newest modelled by default): the version in force.
    pub fn with_version(mut self, version: KarpenterVersion) -> Self {
        self.version = version;
        self.validate();
        self
    }

    /// Styles the text area with the theme's roles (line numbers muted, cursor line plain, selection selected).
    pub fn apply_theme(&mut self, theme: &Theme) {
        self.textarea.set_style(theme.base());
        self.textarea.set_line_number_style(theme.muted());
        self.textarea.set_selection_style(theme.selected());
        self.textarea.set_cursor_style(Style::default().add_modifier(Modifier::REVERSED));
    }

    pub fn pool_name(&self) -> &str {
        &self.pool_name
    }

    /// The YAML the editor started from.
    pub fn live_yaml(&self) -> &str {
        &self.live_yaml
    }

    /// The current text, newline-terminated (empty when there is no text at all).
    pub fn text(&self) -> String {
        let lines = self.textarea.lines();
        if lines.iter().all(String::is_empty) && lines.len() <= 1 {
            return String::new();
        }
        let mut s = lines.join("\n");
        s.push('\n');
        s
    }

    /// The text differs from the live YAML (ignoring a missing final newline).
    pub fn is_modified(&self) -> bool {
        normalized(&self.text()) != normalized(&self.live_yaml)
    }

    /// The text area, for callers that need its cursor or scroll position.
    pub fn textarea(&self) -> &TextArea<'static> {
        &self.textarea
    }

    /// 0-based (row, column) of the cursor.
    pub fn cursor(&self) -> (usize, usize) {
        let c = self.textarea.cursor();
        (c.0, c.1)
    }

    /// Problems of the current text, top to bottom; empty when valid.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    pub fn is_valid(&self) -> bool {
        self.diagnostics.is_empty()
    }

    /// The NodePool the text describes, when it is valid.
    pub fn parsed(&self) -> Option<&NodePool> {
        self.parsed.as_ref()
    }

    /// Handles one key press. Ctrl-S, Esc and Ctrl-E are the editor's; everything else goes to the text area
    /// (which has emacs-style bindings; Ctrl-E is taken, End still goes to the end of the line).
    pub fn input(&mut self, key: KeyEvent) -> EditorEvent {
        if key.kind == KeyEventKind::Release {
            return EditorEvent::Ignored;
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('s' | 'S') if ctrl => {
                if self.is_valid() {
                    return EditorEvent::SaveRequested;
                }
                self.jump_to_first_diagnostic();
                return EditorEvent::SaveBlocked { errors: self.diagnostics.len() };
            }
            KeyCode::Char('e' | 'E') if ctrl => return EditorEvent::ExternalEditorRequested,
            KeyCode::Esc => return EditorEvent::Cancelled,
            _ => {}
        }
        let input = Input::from(key);
        if input.key == Key::Null {
            return EditorEvent::Ignored;
        }
        if self.textarea.input(input) {
            self.validate();
            EditorEvent::Edited
        } else {
            EditorEvent::Unchanged
        }
    }

    /// Replaces the whole text (after [`edit_externally`]), keeping the cursor row where possible.
    pub fn set_text(&mut self, text: &str) {
        let (row, col) = self.cursor();
        let mut textarea = TextArea::new(text.lines().map(str::to_string).collect());
        textarea.set_tab_length(TAB_WIDTH);
        textarea.set_hard_tab_indent(false);
        textarea.set_style(self.textarea.style());
        textarea.set_line_number_style(self.textarea.line_number_style().unwrap_or_default());
        textarea.set_cursor_line_style(self.textarea.cursor_line_style());
        textarea.set_cursor_style(self.textarea.cursor_style());
        textarea.set_selection_style(self.textarea.selection_style());
        textarea.move_cursor(CursorMove::Jump(clamp_u16(row), clamp_u16(col)));
        self.textarea = textarea;
        self.validate();
    }

    /// Moves the cursor to the first diagnostic's line and column.
    pub fn jump_to_first_diagnostic(&mut self) {
        if let Some(d) = self.diagnostics.first() {
            let (row, col) = (d.line.saturating_sub(1), d.column.saturating_sub(1));
            self.textarea.move_cursor(CursorMove::Jump(clamp_u16(row), clamp_u16(col)));
        }
    }

    fn validate(&mut self) {
        if self.kind == EditKind::NodeOverlay {
            self.parsed = None;
            match strict::validate_nodeoverlay_text(&self.text(), &self.pool_name) {
                Ok(_) => self.diagnostics.clear(),
                Err(d) => self.diagnostics = d,
            }
            return;
        }
        match strict::validate_nodepool_text(&self.text(), &self.pool_name, &self.policy, self.version) {
            Ok(p) => {
                self.parsed = Some(p);
                self.diagnostics.clear();
            }
            Err(d) => {
                self.parsed = None;
                self.diagnostics = d;
            }
        }
    }
}

fn clamp_u16(v: usize) -> u16 {
    u16::try_from(v).unwrap_or(u16::MAX)
}

fn normalized(s: &str) -> &str {
    s.trim_end_matches(['\n', '\r'])
}

/// `12:5 spec.template.spec.requirements[0].operator: message` — how the editor lists a problem.
pub fn diagnostic_line(d: &Diagnostic) -> String {
    if d.path.is_empty() {
        format!("{}:{} {}", d.line, d.column, d.message)
    } else {
        format!("{}:{} {}: {}", d.line, d.column, d.path, d.message)
    }
}

/// Renders the editor: the text with line numbers in a border that turns `bad` with an error count while the text
/// is invalid (`ok` when valid), the first few problems below it, and a key hint.
pub struct EditorView<'a> {
    pub editor: &'a NodePoolEditor,
    pub theme: &'a Theme,
}

impl Widget for EditorView<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let (e, theme) = (self.editor, self.theme);
        let errors = e.diagnostics.len();
        let panel_rows = match errors {
            0 => 1,
            n => 1 + n.min(SHOWN_DIAGNOSTICS) + usize::from(n > SHOWN_DIAGNOSTICS),
        };
        let [text_area, panel_area, hint_area] = Layout::vertical([
            Constraint::Min(3),
            Constraint::Length(u16::try_from(panel_rows).unwrap_or(u16::MAX)),
            Constraint::Length(1),
        ])
        .areas(area);

        let status_colour = if errors == 0 { theme.ok } else { theme.bad };
        let status = match errors {
            0 => "valid".to_string(),
            1 => "1 error".to_string(),
            n => format!("{n} errors"),
        };
        let modified = if e.is_modified() { " · modified" } else { "" };
        let title = Line::from(vec![
            Span::styled(format!(" {} {} ", e.kind.as_str(), e.pool_name), theme.title(true)),
            Span::styled(format!("· {status}{modified} "), Style::default().fg(status_colour)),
        ]);
        let block = Block::bordered().title(title).border_style(Style::default().fg(status_colour));
        let inner = block.inner(text_area);
        block.render(text_area, buf);
        (&e.textarea).render(inner, buf);
        mark_error_lines(e, inner, buf, theme);

        let mut lines: Vec<Line> = Vec::new();
        if errors == 0 {
            lines.push(Line::styled("✓ valid NodePool — Ctrl-S to review the change", Style::default().fg(theme.ok)));
        } else {
            lines.push(Line::styled(
                format!("Problems ({errors})"),
                Style::default().fg(theme.bad).add_modifier(Modifier::BOLD),
            ));
            for d in e.diagnostics.iter().take(SHOWN_DIAGNOSTICS) {
                lines.push(Line::styled(diagnostic_line(d), Style::default().fg(theme.bad)));
            }
            if errors > SHOWN_DIAGNOSTICS {
                lines.push(Line::styled(format!("… and {} more", errors - SHOWN_DIAGNOSTICS), theme.muted()));
            }
        }
        Paragraph::new(lines).render(panel_area, buf);
        hint(&[("Ctrl-S", "save"), ("Esc", "cancel"), ("Ctrl-E", "$EDITOR")], theme).render(hint_area, buf);
    }
}

/// Paints the line numbers of lines with a problem in the `bad` colour (the text area can't highlight ranges).
fn mark_error_lines(e: &NodePoolEditor, inner: Rect, buf: &mut Buffer, theme: &Theme) {
    let gutter = e.textarea.line_number_width().min(inner.width);
    let (top, _) = e.textarea.scroll_offset();
    for d in &e.diagnostics {
        let Some(row) = d.line.checked_sub(1).and_then(|r| r.checked_sub(usize::from(top))) else { continue };
        let Ok(row) = u16::try_from(row) else { continue };
        if row >= inner.height {
            continue;
        }
        let line = Rect { x: inner.x, y: inner.y + row, width: gutter, height: 1 };
        buf.set_style(line, Style::default().fg(theme.bad).add_modifier(Modifier::BOLD));
    }
}

/// `Ctrl-S save · Esc cancel`: keys in the accent colour, words muted.
fn hint<'a>(items: &[(&'a str, &'a str)], theme: &Theme) -> Paragraph<'a> {
    let mut spans = Vec::new();
    for (i, (key, what)) in items.iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled(" · ", theme.muted()));
        }
        spans.push(Span::styled(*key, Style::default().fg(theme.accent).add_modifier(Modifier::BOLD)));
        spans.push(Span::styled(format!(" {what}"), theme.muted()));
    }
    Paragraph::new(Line::from(spans))
}

/// One line of a unified diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffLine {
    pub kind: DiffKind,
    /// 1-based line in the live text (context and removed lines).
    pub old_line: Option<usize>,
    /// 1-based line in the edited text (context and added lines).
    pub new_line: Option<usize>,
    /// The line without its newline; for hunks the `@@ -a,b +c,d @@` header.
    pub text: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiffKind {
    Hunk,
    Context,
    Added,
    Removed,
}

impl DiffLine {
    /// The unified-diff prefix: `@@`, ` `, `+`, `-`.
    pub fn marker(&self) -> &'static str {
        match self.kind {
            DiffKind::Hunk => "",
            DiffKind::Context => " ",
            DiffKind::Added => "+",
            DiffKind::Removed => "-",
        }
    }
}

impl fmt::Display for DiffLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.marker(), self.text)
    }
}

/// A unified diff of the live YAML against the edited YAML with [`DIFF_CONTEXT`] lines of context; empty when the
/// texts are the same (a missing final newline is not a change).
pub fn diff_lines(live_yaml: &str, edited_yaml: &str) -> Vec<DiffLine> {
    let (old, new) = (terminated(live_yaml), terminated(edited_yaml));
    let diff = TextDiff::configure().timeout(DIFF_TIMEOUT).diff_lines(old.as_str(), new.as_str());
    let mut out = Vec::new();
    for group in diff.grouped_ops(DIFF_CONTEXT) {
        let (Some(first), Some(last)) = (group.first(), group.last()) else { continue };
        let (os, oe) = (first.old_range().start, last.old_range().end);
        let (ns, ne) = (first.new_range().start, last.new_range().end);
        out.push(DiffLine {
            kind: DiffKind::Hunk,
            old_line: None,
            new_line: None,
            text: format!("@@ -{},{} +{},{} @@", os + 1, oe - os, ns + 1, ne - ns),
        });
        for op in &group {
            for change in diff.iter_changes(op) {
                let kind = match change.tag() {
                    ChangeTag::Equal => DiffKind::Context,
                    ChangeTag::Insert => DiffKind::Added,
                    ChangeTag::Delete => DiffKind::Removed,
                };
                out.push(DiffLine {
                    kind,
                    old_line: change.old_index().map(|i| i + 1),
                    new_line: change.new_index().map(|i| i + 1),
                    text: change.value().trim_end_matches(['\n', '\r']).to_string(),
                });
            }
        }
    }
    out
}

fn terminated(s: &str) -> String {
    let mut s = normalized(s).to_string();
    if !s.is_empty() {
        s.push('\n');
    }
    s
}

/// The review screen: the diff against the live object, the what-if preview, and the key hint. `scroll` is the
/// first content row shown; [`PreviewView::line_count`] bounds it.
pub struct PreviewView<'a> {
    pub diff: &'a [DiffLine],
    /// `None` when no preview could be computed (no snapshot yet).
    pub preview: Option<&'a EditPreview>,
    pub theme: &'a Theme,
    pub scroll: u16,
}

impl<'a> PreviewView<'a> {
    pub fn new(diff: &'a [DiffLine], preview: Option<&'a EditPreview>, theme: &'a Theme) -> Self {
        PreviewView { diff, preview, theme, scroll: 0 }
    }

    /// About how many rows the content takes when drawn `width` columns wide (borders included), for the shell's
    /// scroll bounds. Long lines wrap; this counts them by width, which word wrapping can exceed by a row or so.
    pub fn line_count(&self, width: u16) -> usize {
        let inner = usize::from(width.saturating_sub(2)).max(1);
        self.lines().iter().map(|l| l.width().div_ceil(inner).max(1)).sum()
    }

    fn lines(&self) -> Vec<Line<'static>> {
        let t = self.theme;
        let mut out = Vec::new();
        out.push(Line::styled("Changes", Style::default().fg(t.accent).add_modifier(Modifier::BOLD)));
        if self.diff.is_empty() {
            out.push(Line::styled("No changes to apply.", t.muted()));
        }
        for d in self.diff {
            let style = match d.kind {
                DiffKind::Hunk => Style::default().fg(t.accent),
                DiffKind::Context => t.muted(),
                DiffKind::Added => Style::default().fg(t.diff_add),
                DiffKind::Removed => Style::default().fg(t.diff_del),
            };
            out.push(Line::styled(d.to_string(), style));
        }
        out.push(Line::default());
        out.push(Line::styled("What if", Style::default().fg(t.accent).add_modifier(Modifier::BOLD)));
        match self.preview {
            None => out.push(Line::styled("No what-if preview: the cluster snapshot is not available yet.", t.muted())),
            Some(p) => {
                for l in summary_lines(p) {
                    let style = if l.starts_with("  + ") {
                        Style::default().fg(t.ok)
                    } else if l.starts_with("  − ") {
                        Style::default().fg(t.bad)
                    } else if l.starts_with("  ") {
                        Style::default().fg(t.fg)
                    } else {
                        Style::default().fg(t.fg).add_modifier(Modifier::BOLD)
                    };
                    out.push(Line::styled(l, style));
                }
            }
        }
        out
    }
}

impl Widget for PreviewView<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let [body, hint_area] = Layout::vertical([Constraint::Min(1), Constraint::Length(1)]).areas(area);
        let title = match self.preview {
            Some(p) => format!(" Review edit of NodePool {} ", p.nodepool),
            None => " Review edit ".to_string(),
        };
        let block = Block::default()
            .borders(Borders::ALL)
            .title(Span::styled(title, self.theme.title(true)))
            .border_style(self.theme.border(true));
        Paragraph::new(self.lines()).block(block).wrap(Wrap { trim: false }).scroll((self.scroll, 0)).render(body, buf);
        hint(&[("Enter/y", "apply"), ("n/Esc", "back to editing")], self.theme).render(hint_area, buf);
    }
}

/// Why the external editor did not produce new text. Wrapped in an [`io::Error`] (`ErrorKind::Other`) by
/// [`edit_externally`]; callers can downcast to tell the cases apart.
#[derive(Debug, Error)]
pub enum ExternalEditorError {
    #[error("could not start editor {program:?}: {source}")]
    Spawn { program: String, source: io::Error },
    #[error("editor {program:?} exited with {status}; the edit was discarded")]
    Failed { program: String, status: std::process::ExitStatus },
    #[error("the editor command ${var} is empty")]
    EmptyCommand { var: &'static str },
}

/// The editor command: `$VISUAL`, else `$EDITOR`, else `vi`, split on whitespace (`code --wait` works; no shell).
fn editor_command() -> Result<(String, Vec<String>), ExternalEditorError> {
    for var in ["VISUAL", "EDITOR"] {
        if let Some(v) = std::env::var_os(var) {
            let v = v.to_string_lossy().into_owned();
            if v.trim().is_empty() {
                continue;
            }
            let mut parts = v.split_whitespace().map(str::to_string);
            let program = parts.next().ok_or(ExternalEditorError::EmptyCommand { var })?;
            return Ok((program, parts.collect()));
        }
    }
    Ok(("vi".to_string(), Vec::new()))
}

/// Removes the temporary file however the edit ends.
struct TempFile(PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A file name no other edit (in this or another process) uses: pool name (sanitised), pid, time, counter.
fn temp_path(pool_name: &str) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let safe: String =
        pool_name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).take(60).collect();
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("karpenter-tui-nodepool-{safe}-{}-{nanos}-{n}.yaml", std::process::id()))
}

/// Edits `text` in the user's editor (`$VISUAL`, `$EDITOR`, `vi`) through a temporary file and returns the result.
/// The caller suspends the terminal around the call. On any failure — the editor can't start, exits non-zero, the
/// file can't be read back as UTF-8 — this returns an error and the caller keeps its text: the buffer is never lost.
pub fn edit_externally(text: &str, pool_name: &str) -> io::Result<String> {
    let (program, args) = editor_command().map_err(io::Error::other)?;
    edit_with(text, pool_name, &program, &args)
}

/// [`edit_externally`] with an explicit command: `program args… FILE`. The temporary file is created exclusively
/// (never follows an existing path) and removed in every case.
pub fn edit_with(text: &str, pool_name: &str, program: &str, args: &[String]) -> io::Result<String> {
    let path = temp_path(pool_name);
    let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&path)?;
    let guard = TempFile(path);
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    drop(file);
    run_editor(program, args, &guard.0)?;
    std::fs::read_to_string(&guard.0)
}

fn run_editor(program: &str, args: &[String], path: &Path) -> io::Result<()> {
    let status = Command::new(program)
        .args(args)
        .arg(path)
        .status()
        .map_err(|source| io::Error::other(ExternalEditorError::Spawn { program: program.to_string(), source }))?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(ExternalEditorError::Failed { program: program.to_string(), status }))
    }
}
