//! The whole screen, rendered from `&AppState` alone: header, panes, footer and whichever overlay is open.
//!
//! Layout: at 140×40 and above every pane is on screen at once; below that the focused pane fills the body under
//! a tab strip, so 80×24 stays readable.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget, Wrap};

use crate::protocol::view::Leadership;
use crate::ui::action::{Pane, REGISTRY, Scope};
use crate::ui::app::{AppState, EditSession, EditStage, Overlay, PALETTE};
use crate::ui::editor::{EditorView, PreviewView};
use crate::ui::panes;
use crate::ui::rows::clock;

/// Below this the dashboard shows one pane at a time.
pub const GRID_MIN: (u16, u16) = (140, 40);

impl Widget for &AppState {
    fn render(self, area: Rect, buf: &mut Buffer) {
        buf.set_style(area, self.theme.base());
        let [header, body, footer] =
            Layout::vertical([Constraint::Length(2), Constraint::Fill(1), Constraint::Length(1)]).areas(area);
        render_header(self, header, buf);
        // The drill-down's breadcrumb takes the body's first line.
        let body = if self.drill.is_empty() || self.editor.is_some() {
            body
        } else {
            let [crumb, rest] = Layout::vertical([Constraint::Length(1), Constraint::Fill(1)]).areas(body);
            Paragraph::new(crate::ui::drill::breadcrumb(self)).render(crumb, buf);
            rest
        };
        if let Some(ed) = &self.editor {
            render_editor(self, ed, body, buf);
        } else if let Some(page) = self.node_page() {
            crate::ui::drill::render_node_page(self, page, body, buf);
        } else if area.width >= GRID_MIN.0 && area.height >= GRID_MIN.1 {
            render_grid(self, body, buf);
        } else {
            render_tabs(self, body, buf);
        }
        render_footer(self, footer, buf);
        render_overlay(self, area, buf);
    }
}

fn render_header(s: &AppState, area: Rect, buf: &mut Buffer) {
    let v = &s.view;
    let t = &s.theme;
    buf.set_style(area, t.header());
    let mode_style = Style::default().fg(t.header_bg).bg(match v.mode {
        crate::engine::disruption::gate::Mode::Auto => t.warn,
        crate::engine::disruption::gate::Mode::Approve => t.ok,
        crate::engine::disruption::gate::Mode::DryRun => t.info,
    });
    let lead = match &v.leadership {
        Leadership::Acting => Span::styled(" acting ", t.header()),
        Leadership::Observing(why) => {
            Span::styled(format!(" observing: {} ", observing_reason(why)), t.header().fg(t.warn))
        }
    };
    let mut first = vec![
        Span::styled(" karpenter-tui ", t.header().add_modifier(Modifier::BOLD)),
        Span::styled(format!("{} · {} ", v.source.context, v.source.cluster), t.header()),
        Span::styled(format!("{} {} ", clock(v.now), v.source.clock), t.header()),
        Span::styled(format!(" {} ", v.mode.as_str().to_uppercase()), mode_style.add_modifier(Modifier::BOLD)),
    ];
    // Right after the mode, which it overrides: nothing voluntary starts while it shows.
    if v.paused.is_some() {
        first.push(Span::styled(" PAUSED ", Style::default().fg(t.header_bg).bg(t.bad).add_modifier(Modifier::BOLD)));
    }
    let packing = Span::styled(format!(" packing: {} · karpenter {} ", v.packing, v.karpenter_version), t.header());
    let mut rest = vec![lead];
    if s.readonly() {
        rest.push(Span::styled(" READ-ONLY ", Style::default().fg(t.header_bg).bg(t.bad)));
    }
    // The strategy goes next to the mode when the line has room; on a narrow terminal after leadership and
    // READ-ONLY, which must stay visible.
    let width: usize = first.iter().chain(&rest).map(Span::width).sum::<usize>() + packing.width();
    if width <= usize::from(area.width) {
        first.push(packing);
        first.extend(rest);
    } else {
        first.extend(rest);
        first.push(packing);
    }
    // The Nodes pane's selector narrows that pane only: the cost line below stays the whole cluster's.
    if let Some(sel) = &s.selector {
        first.push(Span::styled(format!(" nodes -l {} ", sel.text), t.header().fg(t.warn)));
    }
    let c = &v.cost;
    let mut second = vec![
        Span::styled(format!(" ${:.3}/h ", c.per_hour), t.header().add_modifier(Modifier::BOLD)),
        Span::styled(format!("${:.0}/month ", c.per_month()), t.header()),
        Span::styled(format!("· saved ${:.3}/h ", c.saved_per_hour), t.header().fg(t.ok)),
        Span::styled(format!("· pending ${:.3}/h ", c.pending_savings_per_hour), t.header().fg(t.warn)),
        Span::styled(
            match c.reserved_nodes {
                0 => format!("· {} spot, {} on-demand ", c.spot_nodes, c.on_demand_nodes),
                r => format!("· {} spot, {} on-demand, {r} reserved ", c.spot_nodes, c.on_demand_nodes),
            },
            t.header(),
        ),
        Span::styled(format!("· prices: {}", v.price_provenance), t.header()),
    ];
    // Before the prices, which may be cut off on a narrow terminal: who paused, since when, and how it holds.
    if let Some(p) = &v.paused {
        let since = p.since.map(|at| format!(" since {}", clock(at))).unwrap_or_default();
        let at = second.len() - 1;
        second.insert(at, Span::styled(format!("· paused{since} by {} ({}) ", p.by, p.how), t.header().fg(t.bad)));
    }
    Paragraph::new(vec![Line::from(first), Line::from(second)]).style(t.header()).render(area, buf);
}

/// The reason without an "observing:" of its own: the header says it once, whoever built the reason.
fn observing_reason(why: &str) -> &str {
    let mut rest = why.trim();
    while let Some(prefix) = rest.get(..10)
        && prefix.eq_ignore_ascii_case("observing:")
    {
        rest = rest[10..].trim_start();
    }
    rest
}

fn render_grid(s: &AppState, area: Rect, buf: &mut Buffer) {
    let [top, mid, bottom] =
        Layout::vertical([Constraint::Percentage(28), Constraint::Percentage(42), Constraint::Percentage(30)])
            .areas(area);
    let [pending, pools] = Layout::horizontal([Constraint::Percentage(45), Constraint::Percentage(55)]).areas(top);
    let [nodes, disruptions] = Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(mid);
    let [budgets, interruptions, events] =
        Layout::horizontal([Constraint::Percentage(33), Constraint::Percentage(30), Constraint::Percentage(37)])
            .areas(bottom);
    panes::render(s, Pane::Pending, pending, buf);
    panes::render(s, Pane::NodePools, pools, buf);
    panes::render(s, Pane::Nodes, nodes, buf);
    panes::render(s, Pane::Disruptions, disruptions, buf);
    panes::render(s, Pane::Budgets, budgets, buf);
    panes::render(s, Pane::Interruptions, interruptions, buf);
    panes::render(s, Pane::Events, events, buf);
}

fn render_tabs(s: &AppState, area: Rect, buf: &mut Buffer) {
    let [tabs, body] = Layout::vertical([Constraint::Length(1), Constraint::Fill(1)]).areas(area);
    let v = &s.view;
    let badge = |p: Pane| -> String {
        match p {
            Pane::Pending if !v.pending.is_empty() => format!("({})", v.pending.len()),
            Pane::Disruptions => {
                let open = v.disruptions.iter().filter(|d| d.state.is_open()).count();
                if open > 0 { format!("({open}!)") } else { String::new() }
            }
            // The tab says the pane is narrowed, as the header does on a wide terminal.
            Pane::Nodes if s.drilled_pool().is_some() => "(pool)".to_string(),
            Pane::Nodes if s.selector.is_some() => "(-l)".to_string(),
            _ => String::new(),
        }
    };
    let spans: Vec<Span> = Pane::ALL
        .iter()
        .map(|p| {
            let short = match p {
                Pane::Pending => "Pending",
                Pane::NodePools => "Pools",
                Pane::Nodes => "Nodes",
                Pane::Disruptions => "Disruptions",
                Pane::Budgets => "Budgets",
                Pane::Interruptions => "Interrupts",
                Pane::Events => "Events",
            };
            let text = format!(" {} {}{}", p.index() + 1, short, badge(*p));
            if *p == s.focus { Span::styled(text, s.theme.selected()) } else { Span::styled(text, s.theme.muted()) }
        })
        .collect();
    Paragraph::new(Line::from(spans)).render(tabs, buf);
    panes::render(s, s.focus, body, buf);
}

/// The NodePool editor replaces the panes while it is open (the header stays: the cluster keeps moving).
fn render_editor(s: &AppState, ed: &EditSession, area: Rect, buf: &mut Buffer) {
    Clear.render(area, buf);
    match &ed.stage {
        EditStage::Editing => EditorView { editor: &ed.editor, theme: &s.theme }.render(area, buf),
        EditStage::Reviewing { diff, preview, scroll, .. } => {
            let [banner, rest] = Layout::vertical([Constraint::Length(1), Constraint::Fill(1)]).areas(area);
            let (text, style) = match preview {
                Ok(_) => (
                    "What applying this edit would do, computed on the cluster as it is now.".to_string(),
                    s.theme.muted(),
                ),
                Err(e) => (e.clone(), Style::default().fg(s.theme.warn)),
            };
            Paragraph::new(Span::styled(format!(" {text}"), style)).render(banner, buf);
            let mut pv = PreviewView::new(diff, preview.as_ref().ok().map(|b| b.as_ref()), &s.theme);
            pv.scroll = *scroll;
            pv.render(rest, buf);
        }
        EditStage::Applying(_) => {
            let text = format!(" applying {} {} ...", ed.editor.kind().as_str(), ed.editor.pool_name());
            Paragraph::new(Span::styled(text, s.theme.muted())).render(area, buf);
        }
    }
}

fn render_footer(s: &AppState, area: Rect, buf: &mut Buffer) {
    let t = &s.theme;
    if let Some(st) = &s.status {
        let style = if st.error { Style::default().fg(t.bad) } else { Style::default().fg(t.info) };
        Paragraph::new(Span::styled(format!(" {}", st.text), style)).render(area, buf);
        return;
    }
    if let Some(ed) = &s.editor {
        let text = format!(
            " editing {} {} — the cluster keeps running above",
            ed.editor.kind().as_str(),
            ed.editor.pool_name()
        );
        Paragraph::new(Span::styled(text, t.muted())).render(area, buf);
        return;
    }
    // While the picture is not yet whole, what it waits for takes the place of the key hints.
    if let Some(progress) = &s.view.progress {
        Paragraph::new(Span::styled(format!(" {progress}"), Style::default().fg(t.info))).render(area, buf);
        return;
    }
    let mut spans = Vec::new();
    // The focused pane's own actions first: they are what the operator is looking for.
    let pane_first = REGISTRY
        .iter()
        .filter(|sp| sp.scope == Scope::Pane(s.focus))
        .chain(REGISTRY.iter().filter(|sp| sp.scope == Scope::Global));
    for spec in pane_first.filter(|sp| sp.hint) {
        if !s.keymap.is_bound(spec.action) {
            continue;
        }
        spans.push(Span::styled(format!(" {}", s.keymap.label(spec.action)), Style::default().fg(t.accent)));
        spans.push(Span::styled(format!(" {} ", spec.name), t.muted()));
    }
    Paragraph::new(Line::from(spans)).render(area, buf);
}

/// A centred rectangle of at most `w`×`h` inside `area`.
fn centred(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect { x: area.x + (area.width - w) / 2, y: area.y + (area.height - h) / 2, width: w, height: h }
}

fn popup<'a>(s: &AppState, title: String) -> Block<'a> {
    Block::default()
        .borders(Borders::ALL)
        .border_style(s.theme.border(true))
        .title(Span::styled(format!(" {title} "), s.theme.title(true)))
        .style(s.theme.base())
}

fn render_overlay(s: &AppState, area: Rect, buf: &mut Buffer) {
    let t = &s.theme;
    match &s.overlay {
        Overlay::None => {}
        Overlay::Help { scroll } => {
            let r = centred(area, 78, area.height.saturating_sub(2));
            Clear.render(r, buf);
            let mut lines = Vec::new();
            for (name, pane_scoped) in [("Everywhere", false), ("In a pane", true)] {
                let pick = |sc: &Scope| matches!(sc, Scope::Pane(_)) == pane_scoped;
                lines.push(Line::from(Span::styled(name, Style::default().fg(t.accent).add_modifier(Modifier::BOLD))));
                for spec in REGISTRY.iter().filter(|sp| pick(&sp.scope) && s.keymap.is_bound(sp.action)) {
                    let scope = match spec.scope {
                        Scope::Pane(p) => format!(" ({})", p.title()),
                        Scope::Global => String::new(),
                    };
                    lines.push(Line::from(vec![
                        Span::styled(format!("  {:<14}", s.keymap.label(spec.action)), Style::default().fg(t.accent)),
                        Span::raw(format!("{}{scope}", spec.help)),
                        Span::styled(format!("  [{}]", spec.name), t.muted()),
                    ]));
                }
                lines.push(Line::raw(""));
            }
            lines.push(Line::from(Span::styled(
                "Commands (:)",
                Style::default().fg(t.accent).add_modifier(Modifier::BOLD),
            )));
            for (cmd, help) in PALETTE.iter() {
                if s.readonly() && ["mode", "packing", "scale", "pause", "resume"].iter().any(|c| cmd.starts_with(c)) {
                    continue;
                }
                lines.push(Line::from(vec![
                    Span::styled(format!("  :{cmd:<16}"), Style::default().fg(t.accent)),
                    Span::raw(*help),
                ]));
            }
            lines.push(Line::raw(""));
            lines.push(Line::from(vec![
                Span::styled(
                    format!("Karpenter {} decisions", s.view.karpenter_version),
                    Style::default().fg(t.accent).add_modifier(Modifier::BOLD),
                ),
                Span::raw(if s.view.karpenter_version_source.is_empty() {
                    String::new()
                } else {
                    format!(": {}", s.view.karpenter_version_source)
                }),
            ]));
            if !s.view.feature_gates.is_empty() {
                lines.push(Line::raw(""));
                lines.push(Line::from(Span::styled(
                    "Feature gates (upstream's; --feature-gates, config controller.featureGates)",
                    Style::default().fg(t.accent).add_modifier(Modifier::BOLD),
                )));
                for (name, on) in &s.view.feature_gates {
                    let style = if *on { Style::default().fg(t.ok) } else { t.muted() };
                    lines.push(Line::from(vec![
                        Span::raw(format!("  {name:<26}")),
                        Span::styled(if *on { "on" } else { "off" }, style),
                    ]));
                }
            }
            if s.readonly() {
                lines.push(Line::raw(""));
                lines.push(Line::from(Span::styled(
                    "Read-only: actions that change the cluster are not available.",
                    Style::default().fg(t.bad),
                )));
            }
            Paragraph::new(lines)
                .block(popup(s, "help — Esc closes, j/k scroll; keys are remappable by [name] in config.yaml".into()))
                .scroll((*scroll, 0))
                .render(r, buf);
        }
        Overlay::Palette { input } => {
            let suggestions: Vec<&(&str, &str)> =
                PALETTE.iter().filter(|(c, _)| c.starts_with(input.as_str())).take(8).collect();
            let r = centred(area, 60, suggestions.len() as u16 + 3);
            let r = Rect { y: area.y + 3.min(area.height.saturating_sub(r.height)), ..r };
            Clear.render(r, buf);
            let mut lines = vec![Line::from(vec![
                Span::styled(":", Style::default().fg(t.accent)),
                Span::raw(input.clone()),
                Span::styled("▏", Style::default().fg(t.accent)),
            ])];
            for (c, h) in suggestions {
                lines.push(Line::from(vec![
                    Span::styled(format!("  {c:<16}"), Style::default().fg(t.accent)),
                    Span::styled(*h, t.muted()),
                ]));
            }
            Paragraph::new(lines)
                .block(popup(s, "command — Tab completes, Enter runs, Esc closes".into()))
                .render(r, buf);
        }
        Overlay::Filter { input } => {
            let r = Rect {
                x: area.x,
                y: area.y + area.height.saturating_sub(1),
                width: area.width,
                height: 1.min(area.height),
            };
            Clear.render(r, buf);
            Paragraph::new(Line::from(vec![
                Span::styled(format!(" filter {}: /", s.focus.title()), Style::default().fg(t.accent)),
                Span::raw(input.clone()),
                Span::styled("▏  (Enter keeps, Esc clears, ! inverts)", t.muted()),
            ]))
            .render(r, buf);
        }
        Overlay::Confirm(c) => {
            let r = centred(area, 76, c.body.len() as u16 * 2 + 6);
            Clear.render(r, buf);
            let mut lines: Vec<Line> = c.body.iter().map(|b| Line::raw(b.clone())).collect();
            lines.push(Line::raw(""));
            match &c.phrase {
                Some(p) => {
                    lines.push(Line::from(vec![
                        Span::styled(
                            format!("Type \"{p}\" and Enter to confirm, Esc to cancel: "),
                            Style::default().fg(t.warn),
                        ),
                        Span::raw(c.typed.clone()),
                        Span::styled("▏", Style::default().fg(t.accent)),
                    ]));
                }
                None => lines.push(Line::from(vec![
                    Span::styled(" y/Enter ", Style::default().fg(t.header_bg).bg(t.ok)),
                    Span::raw(" confirm   "),
                    Span::styled(" n/Esc ", Style::default().fg(t.header_bg).bg(t.muted)),
                    Span::raw(" cancel"),
                ])),
            }
            Paragraph::new(lines).wrap(Wrap { trim: false }).block(popup(s, c.title.clone())).render(r, buf);
        }
        Overlay::Detail { title, lines, scroll } => {
            let r = centred(area, area.width.saturating_sub(4).max(20), area.height.saturating_sub(2));
            Clear.render(r, buf);
            let text: Vec<Line> = lines.iter().map(|l| Line::raw(l.clone())).collect();
            Paragraph::new(text)
                .wrap(Wrap { trim: false })
                .scroll((*scroll, 0))
                .block(popup(s, format!("{title} — Esc closes, j/k scroll")))
                .render(r, buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use ratatui::Terminal;
    use ratatui::backend::TestBackend;

    use super::*;
    use crate::protocol::view::ClusterView;
    use crate::ui::action::KeyMap;
    use crate::ui::app::{Msg, update};
    use crate::ui::theme::Theme;

    fn header(leadership: Leadership) -> String {
        let (km, _) = KeyMap::new(&BTreeMap::new(), false);
        let mut s = AppState::new(km, Theme::default(), false, 1.0);
        update(&mut s, Msg::View(Arc::new(ClusterView { leadership, ..Default::default() })));
        let mut t = Terminal::new(TestBackend::new(160, 40)).unwrap();
        t.draw(|f| f.render_widget(&s, f.area())).unwrap();
        let buf = t.backend().buffer();
        (0..160).map(|x| buf[(x, 0)].symbol()).collect()
    }

    #[test]
    fn the_header_says_observing_once() {
        let reasons = [
            "no cloud provider (start with --cloud aws)",
            "observing: no cloud provider (start with --cloud aws)",
            "Observing:  observing: no cloud provider (start with --cloud aws)",
        ];
        for why in reasons {
            let line = header(Leadership::Observing(why.into()));
            assert_eq!(line.matches("observing").count(), 1, "{line}");
            assert!(line.contains(" observing: no cloud provider (start with --cloud aws) "), "{line}");
        }
        assert!(header(Leadership::Observing("electing a leader".into())).contains(" observing: electing a leader "));
        assert!(!header(Leadership::Acting).contains("observing"));
    }
}
