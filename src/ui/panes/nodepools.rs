//! NodePools: weight, nodes, usage against limits, cost, budgets allowed now per reason, drifted count.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Cell;

use super::{Columns, limit_bar, table};
use crate::ui::action::Pane;
use crate::ui::app::AppState;
use crate::ui::rows::fmt_res;

pub fn render(s: &AppState, area: Rect, buf: &mut Buffer) {
    let v = &s.view;
    let widths = [
        Constraint::Fill(2),
        Constraint::Length(3),
        Constraint::Length(5),
        Constraint::Fill(3),
        Constraint::Fill(3),
        Constraint::Length(7),
        Constraint::Length(12),
        Constraint::Length(5),
    ];
    let header = ["NAME", "WT", "NODES", "CPU / LIMIT", "MEMORY / LIMIT", "$/H", "BUDGET E/D/U", "DRIFT"];
    table(s, Pane::NodePools, area, buf, Columns { header: &header, widths: &widths, empty: "no NodePools" }, |i| {
        let r = &v.nodepools[i];
        let usage = |res: &str| {
            r.usage.iter().find(|u| u.resource == res).map(|u| {
                let text = match u.limit {
                    Some(l) => format!("{}/{}", fmt_res(res, u.used), fmt_res(res, l)),
                    None => fmt_res(res, u.used),
                };
                limit_bar(&s.theme, u.used, u.limit, 6, text)
            })
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
        vec![
            Cell::from(r.name.clone()),
            Cell::from(r.weight.to_string()),
            Cell::from(r.nodes.to_string()),
            usage("cpu").unwrap_or_default(),
            usage("memory").unwrap_or_default(),
            Cell::from(format!("{:.4}", r.cost_per_hour)),
            Cell::from(Line::from(budgets)),
            Cell::from(Span::styled(
                r.drifted.to_string(),
                if r.drifted > 0 { s.theme.fg(s.theme.warn) } else { s.theme.muted() },
            )),
        ]
    });
}
