//! Budgets per NodePool and reason: what is allowed now, and the next 24 hours of scheduled windows as a strip
//! (each character is 30 minutes; `█` a window that blocks, `▒` a window that allows some, `·` the default).

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Cell;

use super::{Columns, table};
use crate::ui::action::Pane;
use crate::ui::app::AppState;

const SLOTS: usize = 48;

pub fn render(s: &AppState, area: Rect, buf: &mut Buffer) {
    let v = &s.view;
    let t = &s.theme;
    let widths = [Constraint::Min(10), Constraint::Length(13), Constraint::Length(7), Constraint::Length(SLOTS as u16)];
    let header = ["NODEPOOL", "REASON", "ALLOWED", "NEXT 24H (30 min per mark)"];
    table(s, Pane::Budgets, area, buf, Columns { header: &header, widths: &widths, empty: "no NodePools" }, |i| {
        let r = &v.budgets[i];
        let mut slots = [None::<bool>; SLOTS];
        for (a, z, nodes) in &r.windows {
            let blocks = nodes.trim() == "0" || nodes.trim() == "0%";
            for (n, slot) in slots.iter_mut().enumerate() {
                let m = (n * 30) as u32;
                if m + 30 > *a && m < *z {
                    *slot = Some(slot.unwrap_or(false) || blocks);
                }
            }
        }
        let strip: Vec<Span> = slots
            .iter()
            .map(|s| match s {
                Some(true) => Span::styled("█", t.fg(t.bad)),
                Some(false) => Span::styled("▒", t.fg(t.warn)),
                None => Span::styled("·", t.muted()),
            })
            .collect();
        let allowed = if r.error.is_some() {
            Span::styled("error", t.fg(t.bad))
        } else if r.allowed_now > 9999 {
            Span::styled("all", t.fg(t.ok))
        } else {
            Span::styled(r.allowed_now.to_string(), t.fg(if r.allowed_now == 0 { t.bad } else { t.ok }))
        };
        vec![
            Cell::from(r.nodepool.clone()),
            Cell::from(r.reason.clone()),
            Cell::from(allowed),
            Cell::from(Line::from(strip)),
        ]
    });
}
