//! NodePools: weight, nodes, usage against limits (cores and GiB, as limits are written), cost per hour and per
//! month, budgets allowed now per reason, drifted count.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Paragraph, Widget};

use super::{Columns, capacity_style, limit_bar, table};
use crate::protocol::view::ReservationRow;
use crate::ui::action::Pane;
use crate::ui::app::AppState;
use crate::ui::rows::{month_cell, usage_text};

pub fn render(s: &AppState, area: Rect, buf: &mut Buffer) {
    let v = &s.view;
    let area = reservations(s, &v.reservations, area, buf);
    // Narrower gauges make room for the month's cost in a pane of the 160-column grid; below that the month is
    // left to the header and the detail (Enter).
    let month = area.width >= MONTH_MIN_WIDTH;
    let gauge = if area.width >= WIDE_GAUGE_MIN_WIDTH { 6 } else { 4 };
    let mut widths = vec![
        Constraint::Fill(2),
        Constraint::Length(3),
        Constraint::Length(5),
        Constraint::Fill(3),
        Constraint::Fill(3),
        Constraint::Length(7),
        Constraint::Length(12),
        Constraint::Length(5),
    ];
    let (cpu, memory) =
        if gauge == 6 { ("CPU CORES / LIMIT", "MEMORY GiB / LIMIT") } else { ("CORES / LIMIT", "GiB / LIMIT") };
    let mut header = vec!["NAME", "WT", "NODES", cpu, memory, "$/H", "BUDGET E/D/U", "DRIFT"];
    if month {
        widths.insert(6, Constraint::Length(6));
        header.insert(6, "$/MO");
    }
    table(s, Pane::NodePools, area, buf, Columns { header: &header, widths: &widths, empty: "no NodePools" }, |i| {
        let r = &v.nodepools[i];
        let usage = |res: &str| {
            r.usage
                .iter()
                .find(|u| u.resource == res)
                .map(|u| limit_bar(&s.theme, u.used, u.limit, gauge, usage_text(res, u.used, u.limit)))
        };
        let budgets: Vec<Span> = r
            .budgets
            .iter()
            .enumerate()
            .flat_map(|(n, (_, allowed, _))| {
                let style = if *allowed == 0 { s.theme.fg(s.theme.bad) } else { s.theme.fg(s.theme.ok) };
                let sep = if n == 0 { "" } else { "/" };
                let text = if *allowed > 9999 { "∞".to_string() } else { allowed.to_string() };
                [Span::styled(sep, s.theme.muted()), Span::styled(text, style)]
            })
            .collect();
        let mut cells = vec![
            Cell::from(r.name.clone()),
            Cell::from(r.weight.to_string()),
            // A static pool: ready/wanted.
            Cell::from(match r.replicas {
                Some(n) => format!("{}/{n}", r.ready),
                None => r.nodes.to_string(),
            }),
            usage("cpu").unwrap_or_default(),
            usage("memory").unwrap_or_default(),
            Cell::from(format!("{:.4}", r.cost_per_hour)),
            Cell::from(Line::from(budgets)),
            Cell::from(Span::styled(
                r.drifted.to_string(),
                if r.drifted > 0 { s.theme.fg(s.theme.warn) } else { s.theme.muted() },
            )),
        ];
        if month {
            cells.insert(6, Cell::from(month_cell(r.cost_per_hour)));
        }
        cells
    });
}

/// The pane width from which the table has a $/MO column.
const MONTH_MIN_WIDTH: u16 = 84;
/// The pane width from which the usage gauges are six cells wide rather than four.
const WIDE_GAUGE_MIN_WIDTH: u16 = 100;

/// Most reservation lines shown under the table; the rest are counted.
const RESERVATION_LINES: usize = 4;

/// Capacity reservations under the table, one line each: `reserved cr-0a1b… m-large test-zone-1 default 2/2 used,
/// ends 12:00:00`. Only when the table keeps its header and a row; returns the area left for it.
fn reservations(s: &AppState, rows: &[ReservationRow], area: Rect, buf: &mut Buffer) -> Rect {
    if rows.is_empty() {
        return area;
    }
    let t = &s.theme;
    let shown = rows.len().min(RESERVATION_LINES);
    let more = rows.len() > RESERVATION_LINES;
    let lines = (shown + usize::from(more)) as u16;
    if area.height < lines + 3 {
        return area;
    }
    let mut text: Vec<Line<'_>> = rows
        .iter()
        .take(shown)
        .map(|r| {
            let full = r.used as i64 >= r.total;
            let ends = r.ends.map_or(String::new(), |e| format!(", ends {}", crate::ui::rows::clock(e)));
            Line::from(vec![
                Span::styled("reserved ", capacity_style(t, "reserved")),
                Span::raw(format!("{} {} {} {}  ", r.id, r.instance_type, r.zone, r.kind)),
                Span::styled(format!("{}/{} used", r.used, r.total), if full { t.fg(t.warn) } else { t.fg(t.ok) }),
                Span::styled(ends, t.muted()),
            ])
        })
        .collect();
    if more {
        text.push(Line::styled(format!("+{} more reservations", rows.len() - shown), t.muted()));
    }
    let [table, foot] = Layout::vertical([Constraint::Fill(1), Constraint::Length(lines)]).areas(area);
    Paragraph::new(text).style(t.base()).render(foot, buf);
    table
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use crate::protocol::view::{ClusterView, NodePoolRow, ResourceUse};
    use crate::ui::action::KeyMap;
    use crate::ui::app::{AppState, Msg, update};
    use crate::ui::theme::Theme;

    fn screen(view: ClusterView, w: u16, h: u16) -> Vec<String> {
        let (km, _) = KeyMap::new(&BTreeMap::new(), false);
        let mut s = AppState::new(km, Theme::default(), true, 1.0);
        update(&mut s, Msg::View(Arc::new(view)));
        // The NodePools pane, full width.
        update(&mut s, Msg::Key(crossterm::event::KeyEvent::from(crossterm::event::KeyCode::Char('2'))));
        let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
        t.draw(|f| f.render_widget(&s, f.area())).unwrap();
        let buf = t.backend().buffer();
        (0..h).map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect::<String>()).collect()
    }

    #[test]
    fn usage_over_the_limit_reads_in_cores_and_gib_with_a_capped_gauge() {
        let pool = |name: &str, cpu: (i64, Option<i64>), mem: (i64, Option<i64>)| NodePoolRow {
            name: name.into(),
            usage: vec![
                ResourceUse { resource: "cpu".into(), used: cpu.0, limit: cpu.1 },
                ResourceUse { resource: "memory".into(), used: mem.0, limit: mem.1 },
            ],
            ..Default::default()
        };
        let view = ClusterView {
            nodepools: vec![
                pool("burst", (16_015_900, Some(1_000_000)), (40 << 40, Some(4 << 40))),
                pool("steady", (5_850, Some(64_000)), (14_173_392_076, None)),
            ],
            ..Default::default()
        };
        let lines = screen(view, 160, 20);
        let row = |name: &str| lines.iter().find(|l| l.contains(name)).cloned().unwrap_or_default();
        let burst = row("burst");
        assert!(burst.contains("██████ 16,016 / 1,000, over by 15,016"), "{burst}");
        assert!(burst.contains("██████ 40,960 / 4,096, over by 36,864"), "{burst}");
        assert!(!burst.contains("16015900m"), "{burst}");
        let steady = row("steady");
        assert!(steady.contains("█░░░░░ 5.85 / 64 "), "{steady}");
        assert!(steady.contains("13.2 (no limit)"), "{steady}");
        assert!(lines.iter().any(|l| l.contains("CPU CORES / LIMIT") && l.contains("MEMORY GiB / LIMIT")));
    }
}
