//! One module per pane. Each renders its rows of the picture as a table, building only the rows that fit (a
//! 20,000-pod cluster costs what a screenful costs), with the selection kept in view.

mod budgets;
mod disruptions;
mod events;
mod interruptions;
mod nodepools;
mod nodes;
mod pending;

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Flex, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Cell, Paragraph, Row, Table, Widget};

use crate::ui::action::Pane;
use crate::ui::app::AppState;
use crate::ui::theme::Theme;

/// Renders pane `p` into `area`.
pub fn render(s: &AppState, p: Pane, area: Rect, buf: &mut Buffer) {
    let focused = s.focus == p;
    let ps = s.pane(p);
    let total = crate::ui::rows::count(&s.view, p);
    let mut title = vec![Span::styled(format!(" {} {} ", p.index() + 1, p.title()), s.theme.title(focused))];
    let selector = s.selector.as_ref().filter(|_| p == Pane::Nodes);
    let narrowed = !ps.filter.is_empty() || selector.is_some();
    let shown = if narrowed { format!("{}/{total} ", ps.visible.len()) } else { format!("{total} ") };
    title.push(Span::styled(shown, s.theme.muted()));
    if let Some(sel) = selector {
        title.push(Span::styled(format!("· -l {} ", sel.text), Style::default().fg(s.theme.warn)));
    }
    if !ps.filter.is_empty() {
        title.push(Span::styled(format!("/{} ", ps.filter), Style::default().fg(s.theme.accent)));
    }
    if let Some((key, arrow)) = sorted_by(s, p) {
        title.push(Span::styled(format!("{arrow}{key} "), s.theme.muted()));
    } else if ps.reverse {
        title.push(Span::styled("reversed ", s.theme.muted()));
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(if focused { BorderType::Thick } else { BorderType::Plain })
        .border_style(s.theme.border(focused))
        .title(Line::from(title));
    let inner = block.inner(area);
    block.render(area, buf);
    if inner.height == 0 || inner.width == 0 {
        return;
    }
    match p {
        Pane::Pending => pending::render(s, inner, buf),
        Pane::NodePools => nodepools::render(s, inner, buf),
        Pane::Nodes => nodes::render(s, inner, buf),
        Pane::Disruptions => disruptions::render(s, inner, buf),
        Pane::Budgets => budgets::render(s, inner, buf),
        Pane::Interruptions => interruptions::render(s, inner, buf),
        Pane::Events => events::render(s, inner, buf),
    }
}

/// The column pane `p` is sorted by and its direction as shown (`▼` largest, or oldest, first; `▲` A to Z), unless
/// it is in the backend's order.
pub(crate) fn sorted_by(s: &AppState, p: Pane) -> Option<(String, &'static str)> {
    let key = s.sort_key(p);
    if key == "default" {
        return None;
    }
    let down = crate::ui::rows::sort_descends(p, &key) != s.pane(p).reverse;
    let shown = key.strip_prefix("label:").map(crate::ui::rows::label_header).unwrap_or(key);
    Some((shown, if down { "▼" } else { "▲" }))
}

/// Column headers and widths of a pane's table, and what it says when empty.
pub(crate) struct Columns<'h> {
    pub header: &'h [&'h str],
    pub widths: &'h [Constraint],
    pub empty: &'h str,
}

/// A table over the pane's visible rows: only the window around the selection is built.
pub(crate) fn table<'a>(
    s: &AppState,
    p: Pane,
    area: Rect,
    buf: &mut Buffer,
    cols: Columns<'_>,
    row: impl Fn(usize) -> Vec<Cell<'a>>,
) {
    let Columns { header, widths, empty } = cols;
    let ps = s.pane(p);
    if ps.visible.is_empty() {
        let text = if ps.filter.is_empty() { empty.to_string() } else { format!("nothing matches /{}", ps.filter) };
        Paragraph::new(Span::styled(text, s.theme.muted())).render(area, buf);
        return;
    }
    let height = area.height.saturating_sub(1).max(1) as usize;
    let offset = if ps.selected < height { 0 } else { ps.selected + 1 - height };
    let rows: Vec<Row> = ps
        .visible
        .iter()
        .enumerate()
        .skip(offset)
        .take(height)
        .map(|(pos, &i)| {
            let r = Row::new(row(i));
            if pos == ps.selected && s.focus == p { r.style(s.theme.selected()) } else { r }
        })
        .collect();
    // The sorted column's header carries the direction.
    // An extra label column comes after the pane's own, so a label whose header repeats one of them (`ZONE`) is
    // looked for from the end.
    let sorted = sorted_by(s, p).and_then(|(_, arrow)| {
        let key = s.sort_key(p);
        let h = crate::ui::rows::sort_header(p, &key)?;
        let at = if key.starts_with("label:") {
            header.iter().rposition(|c| *c == h)
        } else {
            // A header drawn longer on a wide pane ("CPU CORES / LIMIT") ends with the short one.
            header.iter().position(|c| *c == h || c.ends_with(&format!(" {h}")))
        };
        at.map(|at| (at, arrow))
    });
    // A column too narrow for its header and the arrow shows the arrow first: the table cuts the text's end.
    let drawn = Layout::horizontal(widths.to_vec()).flex(Flex::Start).spacing(1).split(area);
    let head = Row::new(header.iter().enumerate().map(|(n, h)| match sorted {
        Some((at, arrow)) if at == n => {
            let room = drawn.get(n).map_or(u16::MAX, |r| r.width) as usize;
            if h.chars().count() < room { Cell::from(format!("{h}{arrow}")) } else { Cell::from(format!("{arrow}{h}")) }
        }
        _ => Cell::from(h.to_string()),
    }))
    .style(Style::default().fg(s.theme.muted).add_modifier(Modifier::BOLD));
    Table::new(rows, widths.to_vec()).header(head).column_spacing(1).style(s.theme.base()).render(area, buf);
}

/// A request-packing bar, eks-node-viewer style: the colour says how well the node is used (low use is waste,
/// so it is the bad colour).
pub(crate) fn bar<'a>(theme: &Theme, used: i64, total: i64, width: usize) -> Cell<'a> {
    let frac = if total > 0 { (used as f64 / total as f64).clamp(0.0, 1.0) } else { 0.0 };
    let filled = (frac * width as f64).round() as usize;
    let colour = if total <= 0 {
        theme.muted
    } else if frac >= 0.9 {
        theme.ok
    } else if frac >= 0.6 {
        theme.warn
    } else {
        theme.bad
    };
    Cell::from(Line::from(vec![
        Span::styled("█".repeat(filled), Style::default().fg(colour)),
        Span::styled("░".repeat(width.saturating_sub(filled)), Style::default().fg(theme.border)),
        Span::styled(format!(" {:>3.0}%", frac * 100.0), Style::default().fg(colour)),
    ]))
}

/// A usage-against-limit gauge: here filling up is the warning.
pub(crate) fn limit_bar<'a>(theme: &Theme, used: i64, limit: Option<i64>, width: usize, text: String) -> Cell<'a> {
    let Some(limit) = limit else {
        return Cell::from(Span::styled(format!("{text} (no limit)"), theme.muted()));
    };
    let frac = if limit > 0 { (used as f64 / limit as f64).clamp(0.0, 1.0) } else { 1.0 };
    let filled = (frac * width as f64).round() as usize;
    let colour = if frac >= 0.9 {
        theme.bad
    } else if frac >= 0.7 {
        theme.warn
    } else {
        theme.ok
    };
    Cell::from(Line::from(vec![
        Span::styled("█".repeat(filled), Style::default().fg(colour)),
        Span::styled("░".repeat(width.saturating_sub(filled)), Style::default().fg(theme.border)),
        Span::raw(format!(" {text}")),
    ]))
}

pub(crate) fn capacity_style(theme: &Theme, capacity_type: &str) -> Style {
    match capacity_type {
        "spot" => Style::default().fg(theme.spot),
        "on-demand" => Style::default().fg(theme.on_demand),
        "reserved" => Style::default().fg(theme.reserved),
        _ => theme.muted(),
    }
}
