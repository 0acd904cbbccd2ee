//! Nodes and NodeClaims without a node yet: type, zone, capacity type, price, age, lifecycle state, request bars.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::Cell;

use super::{Columns, bar, capacity_style, table};
use crate::protocol::view::Lifecycle;
use crate::ui::action::Pane;
use crate::ui::app::AppState;
use crate::ui::rows::age;

pub fn render(s: &AppState, area: Rect, buf: &mut Buffer) {
    let v = &s.view;
    let t = &s.theme;
    let wide = area.width >= 120;
    let mut widths = vec![
        Constraint::Min(16),
        Constraint::Length(12),
        Constraint::Length(9),
        Constraint::Length(7),
        Constraint::Length(11),
        Constraint::Length(13),
        Constraint::Length(13),
        Constraint::Length(7),
    ];
    let mut header = vec!["NAME", "TYPE", "CAPACITY", "$/H", "STATE", "CPU", "MEMORY", "PODS"];
    if wide {
        widths.insert(1, Constraint::Fill(1));
        header.insert(1, "POOL");
        widths.insert(3, Constraint::Length(11));
        header.insert(3, "ZONE");
        widths.push(Constraint::Length(7));
        header.push("AGE");
    }
    table(s, Pane::Nodes, area, buf, Columns { header: &header, widths: &widths, empty: "no nodes" }, |i| {
        let r = &v.nodes[i];
        let state_colour = match r.state {
            Lifecycle::Initialized => t.ok,
            Lifecycle::Launching | Lifecycle::Launched | Lifecycle::Registered => t.info,
            Lifecycle::Drifted => t.warn,
            Lifecycle::Unhealthy => t.bad,
            Lifecycle::Disrupting | Lifecycle::Deleting => t.bad,
        };
        let ghost = r.state <= Lifecycle::Launched;
        let mut cells = vec![
            Cell::from(Span::styled(r.name.clone(), if ghost { t.muted() } else { t.base() })),
            Cell::from(r.instance_type.clone()),
            Cell::from(Span::styled(r.capacity_type.clone(), capacity_style(t, &r.capacity_type))),
            // A trailing * marks a price a NodeOverlay set (Enter names it).
            Cell::from(match (r.price > 0.0, &r.price_overlay) {
                (true, Some(_)) => format!("{:.4}*", r.price),
                (true, None) => format!("{:.4}", r.price),
                (false, _) => "-".into(),
            }),
            Cell::from(Span::styled(r.state.as_str(), t.fg(state_colour))),
            bar(t, r.cpu_requested, r.cpu_allocatable, 6),
            bar(t, r.memory_requested, r.memory_allocatable, 6),
            Cell::from(if r.max_pods > 0 { format!("{}/{}", r.pods, r.max_pods) } else { "-".into() }),
        ];
        if wide {
            cells.insert(1, Cell::from(r.nodepool.clone().unwrap_or_else(|| "-".into())));
            cells.insert(3, Cell::from(r.zone.clone()));
            cells.push(Cell::from(age(v.now, r.created_at)));
        }
        cells
    });
}
