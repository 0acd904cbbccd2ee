//! Pending pods: requests, age, and the engine's reason per NodePool.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Widget, Wrap};

use super::{Columns, table};
use crate::engine::resources::{format_bytes_approx, format_cpu};
use crate::protocol::view::{BufferRow, PackingRow};
use crate::ui::action::Pane;
use crate::ui::app::AppState;
use crate::ui::rows::{age, clock};

pub fn render(s: &AppState, area: Rect, buf: &mut Buffer) {
    let v = &s.view;
    let area = match &v.packing_pass {
        Some(p) => footer(s, p, area, buf),
        None => area,
    };
    let area = buffers(s, &v.buffers, area, buf);
    let widths =
        [Constraint::Fill(2), Constraint::Length(6), Constraint::Length(7), Constraint::Length(7), Constraint::Fill(5)];
    table(
        s,
        Pane::Pending,
        area,
        buf,
        Columns { header: &["POD", "CPU", "MEM", "AGE", "WHY"], widths: &widths, empty: "no pending pods" },
        |i| {
            let r = &v.pending[i];
            let why = match r.reasons.as_slice() {
                [] => Span::styled("being provisioned", s.theme.fg(s.theme.info)),
                [(pool, w), rest @ ..] => {
                    let more = if rest.is_empty() { String::new() } else { format!(" (+{} more, Enter)", rest.len()) };
                    let head = if pool.is_empty() { w.clone() } else { format!("{pool}: {w}") };
                    Span::styled(format!("{head}{more}"), s.theme.fg(s.theme.warn))
                }
            };
            vec![
                Cell::from(format!("{}/{}", r.namespace, r.name)),
                Cell::from(format_cpu(r.cpu_millis)),
                Cell::from(format_bytes_approx(r.memory_bytes)),
                Cell::from(age(v.now, r.created_at)),
                Cell::from(why),
            ]
        },
    );
}

/// The footer: what each packing strategy would launch for the latest launching pass's pods, and the LP bound,
/// with the strategy that pass used in bold: `packing cost · upstream $145.900/h (2 nodes) · cost $37.150/h
/// (367 nodes) · bound $34.360/h · 1500 pods at 10:00:41` (observing: `1500 pods pending now`). One line, two when
/// the pane is narrow, and only when the table keeps its header and a row; returns the area left for the table.
fn footer(s: &AppState, p: &PackingRow, area: Rect, buf: &mut Buffer) -> Rect {
    use crate::engine::packing::Packing;
    let t = &s.theme;
    let c = &p.comparison;
    let nodes = |n: usize| if n == 1 { "1 node".to_string() } else { format!("{n} nodes") };
    let plan = |which: Packing| {
        let price = c.of(which);
        let text = format!("{which} ${:.3}/h ({})", price.per_hour, nodes(price.nodes));
        let style = if which == p.packing { t.fg(t.accent).add_modifier(Modifier::BOLD) } else { t.base() };
        Span::styled(text, style)
    };
    let sep = || Span::styled(" · ", t.muted());
    let mut spans = vec![Span::styled(format!("packing {}", p.packing), t.muted()), sep(), plan(Packing::Upstream)];
    spans.extend([sep(), plan(Packing::Cost), sep()]);
    spans.push(match c.bound {
        Some(b) => Span::raw(format!("bound ${b:.3}/h")),
        None => Span::styled("no bound", t.muted()),
    });
    let pods = if p.pods == 1 { "1 pod".to_string() } else { format!("{} pods", p.pods) };
    let when = match p.at {
        Some(at) => format!("{pods} at {}", clock(at)),
        None => format!("{pods} pending now"),
    };
    spans.extend([sep(), Span::styled(when, t.muted())]);
    let line = Line::from(spans);
    let lines: u16 = if line.width() > usize::from(area.width) { 2 } else { 1 };
    if area.height < lines + 2 {
        return area;
    }
    let [table, foot] = Layout::vertical([Constraint::Fill(1), Constraint::Length(lines)]).areas(area);
    Paragraph::new(line).wrap(Wrap { trim: true }).style(t.base()).render(foot, buf);
    table
}

/// Most buffer lines shown under the table; the rest are counted.
const BUFFER_LINES: usize = 3;

/// CapacityBuffers under the table, one line each: the room they keep is capacity, not pods waiting.
/// `buffer default/headroom  3 × cpu 1, memory 1Gi  Provisioning True (FitsExistingCapacity)`. Only when the table
/// keeps its header and a row; returns the area left for it.
fn buffers(s: &AppState, rows: &[BufferRow], area: Rect, buf: &mut Buffer) -> Rect {
    if rows.is_empty() {
        return area;
    }
    let t = &s.theme;
    let shown = rows.len().min(BUFFER_LINES);
    let more = rows.len() > BUFFER_LINES;
    let lines = (shown + usize::from(more)) as u16;
    if area.height < lines + 2 {
        return area;
    }
    let mut text: Vec<Line<'_>> = rows
        .iter()
        .take(shown)
        .map(|r| {
            let (status, reason) = if r.ready.0 == "True" { &r.provisioning } else { &r.ready };
            let state = if r.ready.0 == "True" { "Provisioning" } else { "ReadyForProvisioning" };
            let colour = if status == "True" { t.ok } else { t.warn };
            let mut spans = vec![
                Span::styled("buffer ", t.muted()),
                Span::raw(format!("{}/{}  ", r.namespace, r.name)),
                Span::raw(format!("{} × {}  ", r.replicas, if r.requests.is_empty() { "-" } else { &r.requests })),
                Span::styled(format!("{state} {status} ({reason})"), t.fg(colour)),
            ];
            if status != "True" && !r.message.is_empty() {
                spans.push(Span::styled(format!(": {}", r.message), t.muted()));
            }
            Line::from(spans)
        })
        .collect();
    if more {
        text.push(Line::styled(format!("+{} more buffers", rows.len() - shown), t.muted()));
    }
    let [table, foot] = Layout::vertical([Constraint::Fill(1), Constraint::Length(lines)]).areas(area);
    Paragraph::new(text).style(t.base()).render(foot, buf);
    table
}
