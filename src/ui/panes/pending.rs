//! Pending pods: requests, age, and the engine's reason per NodePool.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::Cell;

use super::{Columns, table};
use crate::engine::resources::{format_bytes_approx, format_cpu};
use crate::ui::action::Pane;
use crate::ui::app::AppState;
use crate::ui::rows::age;

pub fn render(s: &AppState, area: Rect, buf: &mut Buffer) {
    let v = &s.view;
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
