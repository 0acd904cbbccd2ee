//! Nodes and NodeClaims without a node yet: type, zone, capacity type, price (and a month of it when the pane is
//! wide), age, lifecycle state, request bars, and a column per `--extra-labels` key.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::Cell;

use super::{Columns, bar, capacity_style, table};
use crate::protocol::view::Lifecycle;
use crate::ui::action::Pane;
use crate::ui::app::AppState;
use crate::ui::rows::{age, label_header, month_cell};

/// The widest an extra label column grows (longer values are cut).
const LABEL_WIDTH: usize = 24;

/// The pane's own columns, in order (extra label columns go before `Age`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Col {
    Name,
    Pool,
    Type,
    Zone,
    Capacity,
    Price,
    Month,
    State,
    Cpu,
    Memory,
    Pods,
    Age,
}

impl Col {
    fn header(self) -> &'static str {
        match self {
            Col::Name => "NAME",
            Col::Pool => "POOL",
            Col::Type => "TYPE",
            Col::Zone => "ZONE",
            Col::Capacity => "CAPACITY",
            Col::Price => "$/H",
            Col::Month => "$/MO",
            Col::State => "STATE",
            Col::Cpu => "CPU",
            Col::Memory => "MEMORY",
            Col::Pods => "PODS",
            Col::Age => "AGE",
        }
    }

    /// Its width, with request bar cells `bar_cells` wide (`Name` grows, `Pool` takes what is left).
    fn width(self, bar_cells: u16) -> Constraint {
        match self {
            Col::Name => Constraint::Min(16),
            Col::Pool => Constraint::Fill(1),
            Col::Type => Constraint::Length(12),
            Col::Zone => Constraint::Length(11),
            Col::Capacity => Constraint::Length(9),
            Col::Price | Col::Pods | Col::Age => Constraint::Length(7),
            Col::Month => Constraint::Length(6),
            Col::State => Constraint::Length(11),
            Col::Cpu | Col::Memory => Constraint::Length(bar_cells),
        }
    }

    /// The cells it needs, with the space after it (`Pool` counted at its smallest useful width).
    fn room(self, bar_cells: u16) -> u16 {
        match self.width(bar_cells) {
            Constraint::Length(n) | Constraint::Min(n) => n + 1,
            _ => 9,
        }
    }
}

/// The narrow layout, and the wide one's extra columns.
const NARROW: [Col; 8] =
    [Col::Name, Col::Type, Col::Capacity, Col::Price, Col::State, Col::Cpu, Col::Memory, Col::Pods];
/// What the narrow layout leaves out, in this order, while the extra label columns lack the room.
const LEFT_OUT_FOR_LABELS: [Col; 2] = [Col::Capacity, Col::Pods];

pub fn render(s: &AppState, area: Rect, buf: &mut Buffer) {
    let v = &s.view;
    let t = &s.theme;
    // One column per extra label, as wide as its header or its longest value among the rows shown.
    let label_headers: Vec<String> = s.extra_labels.iter().map(|k| label_header(k)).collect();
    let shown = &s.pane(Pane::Nodes).visible;
    let label_widths: Vec<u16> = s
        .extra_labels
        .iter()
        .zip(&label_headers)
        .map(|(key, h)| {
            let longest =
                shown.iter().filter_map(|&i| v.nodes.get(i)?.labels.get(key)).map(|l| l.chars().count()).max();
            longest.unwrap_or(1).max(h.chars().count()).min(LABEL_WIDTH) as u16
        })
        .collect();
    let labels_room: u16 = label_widths.iter().fold(0, |sum, w| sum.saturating_add(w + 1));
    let room =
        |cols: &[Col], bar_cells: u16| cols.iter().fold(labels_room, |sum, c| sum.saturating_add(c.room(bar_cells)));
    // Wide: the pool, zone, month's cost and age besides, when they and the labels fit. Narrow: request bars of 6
    // cells when everything fits with them, else of 3; and while the labels still lack the room, the capacity type
    // and pod count are left out.
    let wide_cols = [
        Col::Name,
        Col::Pool,
        Col::Type,
        Col::Zone,
        Col::Capacity,
        Col::Price,
        Col::Month,
        Col::State,
        Col::Cpu,
        Col::Memory,
        Col::Pods,
        Col::Age,
    ];
    let (mut cols, bar_width, bar_cells) = if room(&wide_cols, 13) <= area.width.saturating_add(1) {
        (wide_cols.to_vec(), 6, 13)
    } else if room(&NARROW, 13) <= area.width.saturating_add(1) {
        (NARROW.to_vec(), 6, 13)
    } else {
        (NARROW.to_vec(), 3, 8)
    };
    for drop in LEFT_OUT_FOR_LABELS {
        if labels_room == 0 || room(&cols, bar_cells) <= area.width.saturating_add(1) {
            break;
        }
        cols.retain(|c| *c != drop);
    }
    // Extra labels go before the age.
    let own_before_labels = cols.iter().take_while(|c| **c != Col::Age).count();
    let mut widths: Vec<Constraint> = cols.iter().map(|c| c.width(bar_cells)).collect();
    let mut header: Vec<&str> = cols.iter().map(|c| c.header()).collect();
    for (n, (w, h)) in label_widths.iter().zip(&label_headers).enumerate() {
        widths.insert(own_before_labels + n, Constraint::Length(*w));
        header.insert(own_before_labels + n, h);
    }
    table(s, Pane::Nodes, area, buf, Columns { header: &header, widths: &widths, empty: "no nodes" }, |i| {
        let r = &v.nodes[i];
        let state_colour = match r.state {
            Lifecycle::Initialized => t.ok,
            Lifecycle::Launching | Lifecycle::Launched | Lifecycle::Registered => t.info,
            Lifecycle::Drifted | Lifecycle::Rebooting => t.warn,
            Lifecycle::Unhealthy => t.bad,
            Lifecycle::Disrupting | Lifecycle::Deleting => t.bad,
        };
        let ghost = r.state <= Lifecycle::Launched;
        let cell = |c: Col| -> Cell<'static> {
            match c {
                Col::Name => Cell::from(Span::styled(r.name.clone(), if ghost { t.muted() } else { t.base() })),
                Col::Pool => Cell::from(r.nodepool.clone().unwrap_or_else(|| "-".into())),
                Col::Type => Cell::from(r.instance_type.clone()),
                Col::Zone => Cell::from(r.zone.clone()),
                Col::Capacity => Cell::from(Span::styled(r.capacity_type.clone(), capacity_style(t, &r.capacity_type))),
                // A trailing * marks a price a NodeOverlay set (Enter names it).
                Col::Price => Cell::from(match (r.price > 0.0, &r.price_overlay) {
                    (true, Some(_)) => format!("{:.4}*", r.price),
                    (true, None) => format!("{:.4}", r.price),
                    (false, _) => "-".into(),
                }),
                Col::Month => Cell::from(if r.price > 0.0 { month_cell(r.price) } else { "-".into() }),
                Col::State => Cell::from(Span::styled(r.state.as_str(), t.fg(state_colour))),
                Col::Cpu => bar(t, r.cpu_requested, r.cpu_allocatable, bar_width),
                Col::Memory => bar(t, r.memory_requested, r.memory_allocatable, bar_width),
                Col::Pods => Cell::from(if r.max_pods > 0 { format!("{}/{}", r.pods, r.max_pods) } else { "-".into() }),
                Col::Age => Cell::from(age(v.now, r.created_at)),
            }
        };
        let mut cells: Vec<Cell> = cols.iter().map(|c| cell(*c)).collect();
        for (n, key) in s.extra_labels.iter().enumerate() {
            cells.insert(
                own_before_labels + n,
                match r.labels.get(key) {
                    Some(value) => Cell::from(value.clone()),
                    None => Cell::from(Span::styled("-", t.muted())),
                },
            );
        }
        cells
    });
}
