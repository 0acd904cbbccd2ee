//! The approval queue and the decisions in flight: method, reason, candidates, replacements, savings, pods.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::Cell;

use super::{Columns, table};
use crate::protocol::view::ProposalState;
use crate::ui::action::Pane;
use crate::ui::app::AppState;
use crate::ui::rows::age;

pub fn render(s: &AppState, area: Rect, buf: &mut Buffer) {
    let v = &s.view;
    let t = &s.theme;
    let widths = [
        Constraint::Length(5),
        Constraint::Length(11),
        Constraint::Length(11),
        Constraint::Fill(3),
        Constraint::Fill(2),
        Constraint::Length(9),
        Constraint::Length(4),
        Constraint::Length(7),
    ];
    let header = ["ID", "STATE", "METHOD", "NODES", "REPLACEMENT", "SAVE $/H", "PODS", "AGE"];
    table(
        s,
        Pane::Disruptions,
        area,
        buf,
        Columns { header: &header, widths: &widths, empty: "no disruption proposals" },
        |i| {
            let r = &v.disruptions[i];
            let colour = match r.state {
                ProposalState::AwaitingApproval => t.warn,
                ProposalState::Validating | ProposalState::InProgress | ProposalState::DryRun => t.info,
                ProposalState::Executed => t.ok,
                ProposalState::Rejected | ProposalState::Invalidated | ProposalState::Failed => t.muted,
            };
            let repl = match r.replacements.as_slice() {
                [] => "-".to_string(),
                [one] => one.first().cloned().unwrap_or_default(),
                many => format!("{} NodeClaims", many.len()),
            };
            vec![
                Cell::from(r.id.clone()),
                Cell::from(Span::styled(r.state.short(), t.fg(colour))),
                Cell::from(r.method.clone()),
                Cell::from(r.candidates.join(",")),
                Cell::from(repl),
                Cell::from(format!("{:.4}", r.savings_per_hour)),
                Cell::from(r.evictions.len().to_string()),
                Cell::from(age(v.now, r.at)),
            ]
        },
    );
}
