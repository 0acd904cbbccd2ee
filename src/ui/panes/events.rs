//! The engine's decisions and the cluster's relevant events, newest first.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::Cell;

use super::{Columns, table};
use crate::ui::action::Pane;
use crate::ui::app::AppState;
use crate::ui::rows::clock;

pub fn render(s: &AppState, area: Rect, buf: &mut Buffer) {
    let v = &s.view;
    let t = &s.theme;
    let widths = [Constraint::Length(8), Constraint::Length(20), Constraint::Fill(1), Constraint::Fill(2)];
    table(
        s,
        Pane::Events,
        area,
        buf,
        Columns { header: &["TIME", "REASON", "OBJECT", "MESSAGE"], widths: &widths, empty: "no events yet" },
        |i| {
            let r = &v.events[i];
            let colour = if r.kind == "Warning" { t.warn } else { t.fg };
            vec![
                Cell::from(Span::styled(clock(r.at), t.muted())),
                Cell::from(Span::styled(r.reason.clone(), t.fg(colour))),
                Cell::from(r.object.clone()),
                Cell::from(r.message.clone()),
            ]
        },
    );
}
