//! The NodePool editor component (ui::editor): validation as you type, key handling, the diff, rendering into a
//! buffer, and the external-editor round trip.

use crate::common;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use karpenter_tui::engine::api::strict::DiagnosticKind;
use karpenter_tui::engine::catalog::fake::fake_catalog;
use karpenter_tui::engine::provisioning::Snapshot;
use karpenter_tui::engine::whatif::preview_nodepool_edit;
use karpenter_tui::ui::editor::{
    DiffKind, EditorEvent, EditorView, NodePoolEditor, PreviewView, diff_lines, edit_with,
};
use karpenter_tui::ui::theme::Theme;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::Widget;

const LIVE: &str = "\
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: [on-demand]
";

fn key(code: KeyCode) -> KeyEvent {
    KeyEvent::new(code, KeyModifiers::NONE)
}

fn ctrl(c: char) -> KeyEvent {
    KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)
}

fn type_str(e: &mut NodePoolEditor, s: &str) {
    for c in s.chars() {
        let k = if c == '\n' { key(KeyCode::Enter) } else { key(KeyCode::Char(c)) };
        e.input(k);
    }
}

/// Moves the cursor to the end of 1-based line `line`.
fn end_of_line(e: &mut NodePoolEditor, line: usize) {
    for _ in 0..100 {
        e.input(key(KeyCode::Up));
    }
    for _ in 1..line {
        e.input(key(KeyCode::Down));
    }
    e.input(key(KeyCode::End));
}

/// Everything the buffer shows, one string per row.
fn screen(buf: &Buffer) -> Vec<String> {
    let area = buf.area;
    (area.top()..area.bottom())
        .map(|y| (area.left()..area.right()).map(|x| buf[(x, y)].symbol()).collect::<String>())
        .collect()
}

fn render(widget: impl Widget, w: u16, h: u16) -> Vec<String> {
    let area = Rect::new(0, 0, w, h);
    let mut buf = Buffer::empty(area);
    widget.render(area, &mut buf);
    screen(&buf)
}

#[test]
fn the_live_object_is_valid_and_unmodified() {
    let e = NodePoolEditor::new("default", LIVE);
    assert!(e.is_valid(), "{:?}", e.diagnostics());
    assert!(!e.is_modified());
    assert_eq!(e.text(), LIVE);
    assert_eq!(e.parsed().and_then(|p| p.metadata.name.as_deref()), Some("default"));
}

#[test]
fn editable_yaml_round_trips_without_status() {
    let pool: karpenter_tui::engine::api::NodePool = serde_yaml::from_str(LIVE).unwrap();
    let mut with_status = pool.clone();
    with_status.status = Some(Default::default());
    let text = karpenter_tui::engine::api::strict::editable_yaml(&with_status).expect("serialises");
    assert!(!text.contains("status"), "{text}");
    let e = NodePoolEditor::new("default", &text);
    assert!(e.is_valid(), "{:?}\n{text}", e.diagnostics());
    assert_eq!(e.parsed().map(|p| &p.spec), Some(&pool.spec));
}

#[test]
fn breaking_the_yaml_reports_the_line_and_column() {
    let mut e = NodePoolEditor::new("default", LIVE);
    end_of_line(&mut e, 12);
    assert_eq!(e.input(key(KeyCode::Char(']'))), EditorEvent::Edited);
    assert!(!e.is_valid() && e.parsed().is_none());
    let d = &e.diagnostics()[0];
    assert_eq!(d.kind, DiagnosticKind::Syntax, "{d:?}");
    // `          values: [on-demand]]`: the stray bracket is the 30th character of line 12.
    assert_eq!((d.line, d.column), (12, 30), "{d:?}");
    // Undo brings it back.
    assert_eq!(e.input(ctrl('u')), EditorEvent::Edited);
    assert!(e.is_valid(), "{:?}", e.diagnostics());
}

#[test]
fn an_unknown_field_is_reported_where_it_was_typed() {
    let mut e = NodePoolEditor::new("default", LIVE);
    end_of_line(&mut e, 5);
    type_str(&mut e, "\n  wieght: 10");
    let d = e.diagnostics().iter().find(|d| d.kind == DiagnosticKind::UnknownField).expect("unknown field");
    assert_eq!((d.line, d.column), (6, 3), "{d:?}");
    assert!(d.message.contains("wieght"), "{d:?}");
}

#[test]
fn a_valid_edit_parses() {
    let mut e = NodePoolEditor::new("default", LIVE);
    end_of_line(&mut e, 5);
    type_str(&mut e, "\n  weight: 10");
    assert!(e.is_valid(), "{:?}", e.diagnostics());
    assert!(e.is_modified());
    assert_eq!(e.parsed().and_then(|p| p.spec.weight), Some(10));
    assert_eq!(e.input(ctrl('s')), EditorEvent::SaveRequested);
}

#[test]
fn an_invalid_value_is_reported_with_its_field() {
    let mut e = NodePoolEditor::new("default", LIVE);
    end_of_line(&mut e, 11);
    type_str(&mut e, "x");
    let d = &e.diagnostics()[0];
    assert_eq!(d.kind, DiagnosticKind::Invalid, "{d:?}");
    assert_eq!(d.line, 11);
    assert!(d.path.contains("operator"), "{d:?}");
}

#[test]
fn renaming_is_rejected() {
    let mut e = NodePoolEditor::new("default", LIVE);
    end_of_line(&mut e, 4);
    type_str(&mut e, "2");
    assert!(!e.is_valid());
    let d = &e.diagnostics()[0];
    assert_eq!((d.line, d.path.as_str()), (4, "metadata.name"), "{d:?}");
    assert!(d.message.contains("renaming") && d.message.contains("default2"), "{d:?}");
    // Ctrl-S refuses and puts the cursor on the problem.
    end_of_line(&mut e, 1);
    assert_eq!(e.input(ctrl('s')), EditorEvent::SaveBlocked { errors: 1 });
    assert_eq!(e.cursor().0, 3);
}

#[test]
fn editor_keys_and_ignored_events() {
    let mut e = NodePoolEditor::new("default", LIVE);
    assert_eq!(e.input(ctrl('s')), EditorEvent::SaveRequested);
    assert_eq!(e.input(key(KeyCode::Esc)), EditorEvent::Cancelled);
    assert_eq!(e.input(ctrl('e')), EditorEvent::ExternalEditorRequested);
    assert_eq!(e.input(key(KeyCode::Down)), EditorEvent::Unchanged);
    let mut release = key(KeyCode::Char('x'));
    release.kind = KeyEventKind::Release;
    assert_eq!(e.input(release), EditorEvent::Ignored);
    assert_eq!(e.input(key(KeyCode::Insert)), EditorEvent::Ignored);
    assert_eq!(e.text(), LIVE);
}

#[test]
fn garbage_empty_text_and_huge_lines_never_panic() {
    let mut e = NodePoolEditor::new("default", "");
    assert!(!e.is_valid());
    assert!(e.diagnostics()[0].message.contains("empty"));
    type_str(&mut e, ": : [ { ] } \t- - &a *b !!x %TAG\n\n---\n...\n");
    assert!(!e.is_valid());
    e.set_text(&"x".repeat(100_000));
    assert!(!e.is_valid());
    e.set_text(&"- [".repeat(5_000));
    assert!(!e.is_valid());
    // Delete everything.
    e.set_text("");
    assert_eq!(e.text(), "");
    assert!(!e.is_valid());
    for w in [0, 1, 5, 80] {
        for h in [0, 1, 3, 24] {
            render(EditorView { editor: &e, theme: &Theme::default() }, w, h);
        }
    }
    e.set_text(LIVE);
    assert!(e.is_valid());
}

#[test]
fn diff_marks_added_and_removed_lines() {
    let edited = LIVE
        .replace("values: [on-demand]", "values: [spot]")
        .replace("spec:\n  template:", "spec:\n  weight: 5\n  template:");
    let diff = diff_lines(LIVE, &edited);
    let kinds = |k: DiffKind| diff.iter().filter(|d| d.kind == k).map(|d| d.to_string()).collect::<Vec<_>>();
    assert_eq!(kinds(DiffKind::Added), ["+  weight: 5", "+          values: [spot]"]);
    assert_eq!(kinds(DiffKind::Removed), ["-          values: [on-demand]"]);
    assert_eq!(diff[0].kind, DiffKind::Hunk);
    assert!(diff[0].text.starts_with("@@ -"), "{:?}", diff[0]);
    assert!(diff.iter().any(|d| d.kind == DiffKind::Context));
    let added = diff.iter().find(|d| d.kind == DiffKind::Added).expect("added");
    assert_eq!((added.old_line, added.new_line), (None, Some(6)));
    // Identical texts, or only a missing final newline: no diff.
    assert!(diff_lines(LIVE, LIVE).is_empty());
    assert!(diff_lines(LIVE, LIVE.trim_end()).is_empty());
}

#[test]
fn the_editor_view_shows_errors_and_hints() {
    let theme = Theme::default();
    let mut e = NodePoolEditor::new("default", LIVE);
    e.apply_theme(&theme);
    let rows = render(EditorView { editor: &e, theme: &theme }, 80, 24).join("\n");
    assert!(rows.contains("NodePool default") && rows.contains("valid"), "{rows}");
    assert!(rows.contains("Ctrl-S save · Esc cancel · Ctrl-E $EDITOR"), "{rows}");
    assert!(rows.contains(" 4 ") && rows.contains("name: default"), "line numbers and text: {rows}");

    end_of_line(&mut e, 4);
    type_str(&mut e, "2");
    let area = Rect::new(0, 0, 80, 24);
    let mut buf = Buffer::empty(area);
    EditorView { editor: &e, theme: &theme }.render(area, &mut buf);
    let rows = screen(&buf).join("\n");
    assert!(rows.contains("1 error"), "{rows}");
    assert!(rows.contains("4:3 metadata.name: renaming is not supported"), "{rows}");
    // The border is drawn in the theme's `bad` colour.
    assert_eq!(buf[(0, 0)].fg, theme.bad);
}

#[test]
fn the_preview_view_shows_the_diff_and_the_what_if() {
    let theme = Theme::default();
    let edited_text = format!("{LIVE}      taints: [{{key: dedicated, effect: NoSchedule}}]\n");
    let diff = diff_lines(LIVE, &edited_text);
    let live: karpenter_tui::engine::api::NodePool = serde_yaml::from_str(LIVE).unwrap();
    let edited: karpenter_tui::engine::api::NodePool = serde_yaml::from_str(&edited_text).unwrap();
    // A pending pod that does not tolerate the new taint.
    let pods = vec![std::sync::Arc::new(common::with_requests(common::pod("web"), Some("1"), Some("1Gi")).into())];
    let snapshot = Snapshot { nodepools: vec![live], pods, ..Snapshot::default() };
    let preview = preview_nodepool_edit(&snapshot, &fake_catalog(), 1_700_000_000_000, &edited);

    let area = Rect::new(0, 0, 80, 24);
    let mut buf = Buffer::empty(area);
    PreviewView::new(&diff, Some(&preview), &theme).render(area, &mut buf);
    let rows = screen(&buf);
    let text = rows.join("\n");
    assert!(text.contains("+      taints: [{key: dedicated, effect: NoSchedule}]"), "{text}");
    assert!(text.contains("What if") && text.contains("Cost (estimated)"), "{text}");
    assert!(text.contains("1 unschedulable") && text.contains("default/web"), "{text}");
    assert!(text.contains("total: −$"), "{text}");
    assert!(text.contains("Enter/y apply · n/Esc back to editing"), "{text}");
    // Added and removed lines carry the diff colours.
    let row = rows.iter().position(|r| r.contains("+      taints")).expect("added row");
    let col = rows[row].find('+').expect("marker") as u16;
    assert_eq!(buf[(col, row as u16)].fg, theme.diff_add);

    // Without a preview, and scrolled past the diff.
    let view = PreviewView { diff: &diff, preview: None, theme: &theme, scroll: 0 };
    let n = view.line_count(80);
    let rows = render(PreviewView { scroll: 5, ..view }, 80, 10).join("\n");
    assert!(rows.contains("No what-if preview"), "{rows}");
    assert!(n > 5);
    let rows = render(PreviewView::new(&[], None, &theme), 80, 10).join("\n");
    assert!(rows.contains("No changes to apply"), "{rows}");
}

#[test]
fn the_external_editor_round_trip_keeps_the_buffer_on_failure() {
    let script = |s: &str| vec!["-c".to_string(), s.to_string()];
    let out = edit_with(LIVE, "ext-test", "sh", &script("printf '  weight: 7\\n' >> \"$0\"")).expect("edited");
    assert_eq!(out, format!("{LIVE}  weight: 7\n"));

    let err = edit_with(LIVE, "ext-test", "sh", &script("echo changed > \"$0\"; exit 3")).unwrap_err();
    assert!(err.to_string().contains("exited"), "{err}");
    let err = edit_with(LIVE, "ext-test", "/nonexistent/editor", &[]).unwrap_err();
    assert!(err.to_string().contains("could not start"), "{err}");

    // Every temporary file is gone.
    let leftovers: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .expect("temp dir")
        .filter_map(Result::ok)
        .filter(|f| f.file_name().to_string_lossy().starts_with("karpenter-tui-nodepool-ext-test-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn the_editor_validates_by_the_karpenter_version_in_force() {
    use karpenter_tui::engine::version::KarpenterVersion;
    // A disruption block naming only its policy: 1.15 defaults consolidateAfter, 1.14's CRD requires it.
    let text = format!("{LIVE}  disruption:\n    consolidationPolicy: WhenEmpty\n");
    let e = NodePoolEditor::new("default", &text);
    assert!(e.is_valid(), "the newest modelled by default: {:?}", e.diagnostics());
    let e = NodePoolEditor::new("default", &text).with_version(KarpenterVersion::V1_15);
    assert_eq!(e.parsed().map(|p| p.spec.disruption.consolidate_after.as_str()), Some("0s"));
    let mut e = NodePoolEditor::new("default", &text).with_version(KarpenterVersion::V1_14);
    assert!(!e.is_valid());
    let d = &e.diagnostics()[0];
    assert_eq!((d.line, d.kind), (13, DiagnosticKind::Invalid), "{d}");
    assert!(d.path == "spec.disruption.consolidateAfter" && d.message.contains("Required value"), "{d}");
    // Writing it out mends it.
    end_of_line(&mut e, 14);
    type_str(&mut e, "\n    consolidateAfter: 5m");
    assert!(e.is_valid(), "{:?}", e.diagnostics());
}
