//! Spot interruption warnings, rebalance recommendations and scheduled changes, with what happened since.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::Cell;

use super::{Columns, capacity_style, table};
use crate::ui::action::Pane;
use crate::ui::app::AppState;
use crate::ui::rows::age;

pub fn render(s: &AppState, area: Rect, buf: &mut Buffer) {
    let v = &s.view;
    let t = &s.theme;
    let widths = [
        Constraint::Length(7),
        Constraint::Length(27),
        Constraint::Fill(2),
        Constraint::Length(9),
        Constraint::Length(4),
        Constraint::Length(8),
        Constraint::Fill(3),
    ];
    let header = ["AGE", "KIND", "NODE", "CAPACITY", "PODS", "REPLACED", "PROGRESS"];
    table(
        s,
        Pane::Interruptions,
        area,
        buf,
        Columns { header: &header, widths: &widths, empty: "no interruptions" },
        |i| {
            let r = &v.interruptions[i];
            let done = r.replaced_after.is_some();
            vec![
                Cell::from(age(v.now, r.at)),
                Cell::from(Span::styled(
                    r.kind.clone(),
                    t.fg(if r.kind.contains("Rebalance") { t.info } else { t.warn }),
                )),
                Cell::from(r.node.clone()),
                Cell::from(Span::styled(r.capacity_type.clone(), capacity_style(t, &r.capacity_type))),
                Cell::from(r.pods.to_string()),
                Cell::from(r.replaced_after.map(|s| format!("{s:.0}s")).unwrap_or_else(|| "-".into())),
                Cell::from(Span::styled(r.progress.clone(), t.fg(if done { t.ok } else { t.fg }))),
            ]
        },
    );
}
