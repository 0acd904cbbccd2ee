//! The drill-down: the breadcrumb over the body while Enter has gone into a NodePool or a node, and a node's page
//! (its pods with their requests, owner, PDBs and do-not-disrupt). Pure rendering of `&AppState`.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Cell, Paragraph, Row, Table, TableState, Widget};

use crate::ui::app::{AppState, Crumb, NodePage};
use crate::ui::rows::fmt_quantity;

/// `NodePools › default › Nodes & NodeClaims`, `NodePools › default › ip-10-0-1-2 › pods`.
pub fn breadcrumb(s: &AppState) -> Line<'static> {
    let t = &s.theme;
    let mut parts: Vec<Span<'static>> = Vec::new();
    let sep = || Span::styled(" › ", t.muted());
    for (i, crumb) in s.drill.iter().enumerate() {
        if i > 0 {
            parts.push(sep());
        }
        match crumb {
            Crumb::Pool(name) => {
                parts.push(Span::styled("NodePools", t.muted()));
                parts.push(sep());
                parts.push(Span::styled(name.clone(), t.fg(t.accent).add_modifier(Modifier::BOLD)));
                if s.drill.len() == 1 {
                    parts.push(sep());
                    parts.push(Span::raw("Nodes & NodeClaims"));
                }
            }
            Crumb::Node(page) => {
                if i == 0 {
                    parts.push(Span::styled("Nodes & NodeClaims", t.muted()));
                    parts.push(sep());
                }
                parts.push(Span::styled(page.name.clone(), t.fg(t.accent).add_modifier(Modifier::BOLD)));
                parts.push(sep());
                parts.push(Span::raw("pods"));
            }
        }
    }
    parts.push(Span::styled("   Esc: back", t.muted()));
    Line::from(parts)
}

/// A node's page: a summary line from the picture, then its pods as the backend last told them.
pub fn render_node_page(s: &AppState, page: &NodePage, area: Rect, buf: &mut Buffer) {
    let t = &s.theme;
    let row = s.view.nodes.iter().find(|n| n.name == page.name);
    let summary = match row {
        Some(n) => format!(
            " {} · {} · {} · {} · {} · {}/{} pods · ${:.4}/h ",
            n.name,
            n.nodepool.as_deref().unwrap_or("(no NodePool)"),
            n.instance_type,
            n.zone,
            n.capacity_type,
            n.pods,
            n.max_pods,
            n.price
        ),
        None => format!(" {} · no longer in the cluster ", page.name),
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Thick)
        .border_style(t.border(true))
        .title(Line::from(Span::styled(summary, t.fg(t.title).add_modifier(Modifier::BOLD))));
    let inner = block.inner(area);
    block.render(area, buf);
    let rows = match &page.pods {
        None => {
            Paragraph::new(Span::styled("asking for its pods …", t.muted())).render(inner, buf);
            return;
        }
        Some(Err(e)) => {
            Paragraph::new(Span::styled(e.clone(), t.fg(t.bad))).render(inner, buf);
            return;
        }
        Some(Ok(rows)) if rows.is_empty() => {
            Paragraph::new(Span::styled("no pods on this node", t.muted())).render(inner, buf);
            return;
        }
        Some(Ok(rows)) => rows,
    };
    let header = Row::new(["NAMESPACE/NAME", "PHASE", "CPU", "MEMORY", "OWNER", "PDB (ALLOWED NOW)", "DO-NOT-DISRUPT"])
        .style(t.muted().add_modifier(Modifier::BOLD));
    let body = rows.iter().map(|p| {
        Row::new([
            Cell::from(format!("{}/{}", p.namespace, p.name)),
            Cell::from(p.phase.clone()),
            Cell::from(fmt_quantity(p.cpu_millis as f64 / 1000.0)),
            Cell::from(format!("{}Mi", p.memory_bytes / (1024 * 1024))),
            Cell::from(p.owner.clone()),
            Cell::from(if p.pdbs.is_empty() { "-".to_string() } else { p.pdbs.join(", ") }),
            Cell::from(if p.do_not_disrupt { Span::styled("yes", t.fg(t.warn)) } else { Span::raw("-") }),
        ])
    });
    let widths = [
        Constraint::Fill(3),
        Constraint::Length(10),
        Constraint::Length(7),
        Constraint::Length(9),
        Constraint::Fill(2),
        Constraint::Fill(2),
        Constraint::Length(14),
    ];
    let table = Table::new(body, widths).header(header).row_highlight_style(t.selected());
    let mut state = TableState::default().with_selected(Some(page.selected));
    ratatui::widgets::StatefulWidget::render(table, inner, buf, &mut state);
}
