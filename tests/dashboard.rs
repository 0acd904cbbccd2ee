//! The dashboard without a terminal: the reducer driven by keys over pictures of the demo world, the simulated
//! backend's handling of commands, and snapshots of every pane and of full screens (ratatui's TestBackend).

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use karpenter_tui::cli::demo::DEMO_SCENARIO;
use karpenter_tui::controller::tick::Host;
use karpenter_tui::engine::disruption::gate::Mode;
use karpenter_tui::engine::packing::Packing;
use karpenter_tui::protocol::view::{ClusterView, ProposalState};
use karpenter_tui::protocol::{Command, Event};
use karpenter_tui::shell::sim_driver::SimDriver;
use karpenter_tui::sim::run::Playback;
use karpenter_tui::sim::scenario::parse_scenario;
use karpenter_tui::ui::action::{KeyMap, Pane};
use karpenter_tui::ui::app::{AppState, Effect, Msg, Overlay, update};
use karpenter_tui::ui::rows::NodeSelector;
use karpenter_tui::ui::theme::Theme;
use ratatui::Terminal;
use ratatui::backend::TestBackend;

/// The demo world played to `secs` simulated seconds, as a driver (approve mode, as `demo` runs it).
fn driver_at(secs: i64, readonly: bool) -> SimDriver {
    let s = parse_scenario(DEMO_SCENARIO, "demo.yaml").expect("the demo scenario parses");
    let mut p = Playback::new(&s).expect("the demo world builds");
    let end = p.start + secs * 1000;
    p.advance(end).expect("the demo timeline plays");
    SimDriver::new(p, "demo".into(), 10.0, readonly)
}

fn view_at(secs: i64) -> Arc<ClusterView> {
    Arc::new(driver_at(secs, false).view())
}

fn app(view: Arc<ClusterView>, readonly: bool) -> AppState {
    let (km, warnings) = KeyMap::new(&BTreeMap::new(), readonly);
    assert!(warnings.is_empty());
    let mut s = AppState::new(km, Theme::default(), true, 10.0);
    update(&mut s, Msg::View(view));
    s
}

fn key(s: &mut AppState, c: char) -> Vec<Effect> {
    update(s, Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE)))
}

fn code(s: &mut AppState, c: KeyCode) -> Vec<Effect> {
    update(s, Msg::Key(KeyEvent::new(c, KeyModifiers::NONE)))
}

fn typed(s: &mut AppState, text: &str) -> Vec<Effect> {
    text.chars().flat_map(|c| key(s, c)).collect()
}

/// Selects the first open proposal in the Disruptions pane and returns its id.
fn select_open(s: &mut AppState) -> String {
    key(s, '4');
    key(s, 'g');
    for _ in 0..s.view.disruptions.len() {
        let i = s.selected_row(Pane::Disruptions).expect("a row is selected");
        if s.view.disruptions[i].state.is_open() {
            return s.view.disruptions[i].id.clone();
        }
        key(s, 'j');
    }
    panic!("no open proposal in {:?}", s.view.disruptions);
}

#[test]
fn the_demo_shows_the_story_within_the_first_minute() {
    // At ×10, the first real minute is ten simulated minutes.
    let early = view_at(20);
    assert!(early.pending.iter().any(|p| p.name.starts_with("inflate")), "inflate pods are pending early on");
    use karpenter_tui::protocol::view::Lifecycle;
    assert!(
        early.nodes.iter().any(|n| matches!(n.state, Lifecycle::Launching | Lifecycle::Launched)),
        "capacity for them is in flight: {:?}",
        early.nodes
    );
    let v = view_at(180);
    let launched = v.nodes.iter().filter(|n| n.nodeclaim.as_deref().is_some_and(|c| c.starts_with("default-")));
    assert!(launched.count() >= 1, "a NodeClaim was launched for the pending pods: {:?}", v.nodes);
    assert!(v.pending.iter().all(|p| p.name == "trainer"), "everything but the GPU pod is bound: {:?}", v.pending);
    let trainer = v.pending.iter().find(|p| p.name == "trainer").expect("the GPU pod stays pending");
    assert!(trainer.reasons.iter().any(|(_, why)| why.contains("nvidia.com/gpu")), "{:?}", trainer.reasons);
    assert!(v.disruptions.iter().any(|d| d.state == ProposalState::AwaitingApproval), "a proposal waits");
    assert_eq!(v.interruptions.len(), 1, "the spot interruption at 170s is on the board");
    assert_eq!(v.interruptions[0].node, "spot-b");
    assert_eq!(v.mode, Mode::Approve);
}

#[test]
fn approving_takes_a_confirmation_then_sends_the_command_and_audits_the_outcome() {
    let mut s = app(view_at(180), false);
    let id = select_open(&mut s);
    assert!(key(&mut s, 'a').is_empty(), "the first phase sends nothing");
    let Overlay::Confirm(c) = &s.overlay else { panic!("a confirmation opens: {:?}", s.overlay) };
    assert!(c.title.contains(&id));
    let d = s.view.disruptions.iter().find(|d| d.id == id).expect("the proposal");
    let body = c.body.join("\n");
    for cand in &d.candidates {
        assert!(body.contains(cand), "the dialog names candidate {cand}: {body}");
    }
    assert!(body.contains("evicted"), "{body}");
    let effects = key(&mut s, 'y');
    let request = match effects.as_slice() {
        [Effect::Send(Command::Approve { request, id: sent })] if *sent == id => *request,
        other => panic!("expected one approve command for {id}, got {other:?}"),
    };
    assert_eq!(s.overlay, Overlay::None);
    let audit = update(&mut s, Msg::Done { request, outcome: Ok(format!("{id} approved and started")) });
    assert_eq!(
        audit,
        vec![Effect::Audit {
            action: "approve".into(),
            target: id.clone(),
            outcome: "ok".into(),
            detail: audit_detail(&audit)
        }]
    );
    assert!(s.status.as_ref().is_some_and(|st| !st.error && st.text.contains(&id)));
}

fn audit_detail(effects: &[Effect]) -> String {
    match effects {
        [Effect::Audit { detail, .. }] => {
            assert!(detail.contains("candidates="), "{detail}");
            detail.clone()
        }
        other => panic!("expected one audit record, got {other:?}"),
    }
}

#[test]
fn cancelling_sends_nothing_and_reject_needs_its_own_confirmation() {
    let mut s = app(view_at(180), false);
    let id = select_open(&mut s);
    key(&mut s, 'a');
    assert!(key(&mut s, 'n').is_empty());
    assert_eq!(s.overlay, Overlay::None);
    key(&mut s, 'r');
    assert!(matches!(&s.overlay, Overlay::Confirm(c) if c.title.starts_with("Reject")));
    let effects = code(&mut s, KeyCode::Enter);
    assert!(
        matches!(effects.as_slice(), [Effect::Send(Command::Reject { id: sent, .. })] if *sent == id),
        "{effects:?}"
    );
}

#[test]
fn a_closed_proposal_cannot_be_approved() {
    let mut s = app(view_at(180), false);
    key(&mut s, '4');
    key(&mut s, 'g');
    let closed = (0..s.view.disruptions.len()).find(|_| {
        let i = s.selected_row(Pane::Disruptions).expect("selected");
        let open = s.view.disruptions[i].state.is_open();
        if open {
            key(&mut s, 'j');
        }
        !open
    });
    if closed.is_some() {
        assert!(key(&mut s, 'a').is_empty());
        assert_eq!(s.overlay, Overlay::None);
        assert!(s.status.as_ref().is_some_and(|st| st.error), "an error says why");
    } else {
        // Every proposal is still open at this point of the demo: check the rule on an executed one instead.
        let mut v = (*s.view).clone();
        v.disruptions[0].state = ProposalState::Executed;
        update(&mut s, Msg::View(Arc::new(v)));
        key(&mut s, 'g');
        assert!(key(&mut s, 'a').is_empty());
        assert_eq!(s.overlay, Overlay::None);
    }
}

#[test]
fn approve_all_requires_the_typed_phrase() {
    let mut s = app(view_at(180), false);
    key(&mut s, '4');
    let open = s.view.disruptions.iter().filter(|d| d.state.is_open()).count();
    assert!(open >= 1);
    key(&mut s, 'A');
    let phrase = match &s.overlay {
        Overlay::Confirm(c) => c.phrase.clone().expect("a typed confirmation"),
        other => panic!("{other:?}"),
    };
    assert_eq!(phrase, format!("approve {open}"));
    assert!(typed(&mut s, "y").is_empty(), "a single key does not confirm a bulk action");
    assert!(code(&mut s, KeyCode::Enter).is_empty(), "a wrong phrase confirms nothing");
    assert!(matches!(s.overlay, Overlay::Confirm(_)), "the dialog stays open");
    code(&mut s, KeyCode::Backspace);
    typed(&mut s, &phrase);
    let effects = code(&mut s, KeyCode::Enter);
    let approvals = effects.iter().filter(|e| matches!(e, Effect::Send(Command::Approve { .. }))).count();
    assert_eq!(approvals, open);
}

#[test]
fn read_only_offers_no_mutation_at_all() {
    let mut s = app(view_at(180), true);
    select_open(&mut s);
    assert!(key(&mut s, 'a').is_empty());
    assert!(key(&mut s, 'A').is_empty());
    assert_eq!(s.overlay, Overlay::None, "no confirmation even opens");
    key(&mut s, ':');
    typed(&mut s, "mode auto");
    assert!(code(&mut s, KeyCode::Enter).is_empty());
    assert!(s.status.as_ref().is_some_and(|st| st.error && st.text.contains("read-only")));
    // The backend refuses too, whatever the UI does.
    let mut d = driver_at(180, true);
    let id = d.view().disruptions.iter().find(|x| x.state.is_open()).expect("open").id.clone();
    let out = d.handle(Command::Approve { request: 9, id });
    assert!(
        matches!(out.as_slice(), [Event::Done { request: 9, outcome: Err(e) }] if e.contains("read-only")),
        "{out:?}"
    );
}

#[test]
fn the_palette_focuses_panes_and_changes_the_mode_after_confirmation() {
    let mut s = app(view_at(180), false);
    key(&mut s, ':');
    typed(&mut s, "nodep");
    code(&mut s, KeyCode::Tab);
    assert_eq!(s.overlay, Overlay::Palette { input: "nodepools".into() }, "Tab completes");
    code(&mut s, KeyCode::Enter);
    assert_eq!(s.focus, Pane::NodePools);
    key(&mut s, ':');
    typed(&mut s, "mode auto");
    assert!(code(&mut s, KeyCode::Enter).is_empty());
    assert!(matches!(&s.overlay, Overlay::Confirm(c) if c.body.iter().any(|l| l.contains("withdrawn"))));
    let effects = key(&mut s, 'y');
    assert!(matches!(effects.as_slice(), [Effect::Send(Command::SetMode { mode: Mode::Auto, .. })]), "{effects:?}");
    key(&mut s, ':');
    typed(&mut s, "frobnicate");
    code(&mut s, KeyCode::Enter);
    assert!(s.status.as_ref().is_some_and(|st| st.error && st.text.contains("frobnicate")));
}

fn status_error(s: &AppState, needle: &str) -> bool {
    s.status.as_ref().is_some_and(|st| st.error && st.text.contains(needle))
}

#[test]
fn the_palette_switches_the_controllers_packing_strategy_after_confirmation() {
    let mut d = driver_at(180, false);
    let mut s = app(Arc::new(d.view()), false);
    assert_eq!(s.view.packing, Packing::Upstream, "the demo scenario packs as upstream does");
    // No strategy, an unknown one, or too many: said in the status line, nothing sent.
    for (input, needle) in [("packing", "expected upstream or cost"), ("packing cheapest", "\"cheapest\"")] {
        key(&mut s, ':');
        typed(&mut s, input);
        assert!(code(&mut s, KeyCode::Enter).is_empty(), ":{input}");
        assert_eq!(s.overlay, Overlay::None, ":{input}");
        assert!(status_error(&s, needle), ":{input}: {:?}", s.status);
    }
    key(&mut s, ':');
    typed(&mut s, "packing cost now");
    assert!(code(&mut s, KeyCode::Enter).is_empty());
    assert!(status_error(&s, "expected upstream or cost"), "{:?}", s.status);
    key(&mut s, ':');
    typed(&mut s, "packing upstream");
    assert!(code(&mut s, KeyCode::Enter).is_empty());
    assert_eq!(s.overlay, Overlay::None, "already upstream: nothing to confirm");

    // Tab completes it; a confirmation says what changes; only then is the command sent.
    key(&mut s, ':');
    typed(&mut s, "packing c");
    code(&mut s, KeyCode::Tab);
    assert_eq!(s.overlay, Overlay::Palette { input: "packing cost".into() });
    assert!(code(&mut s, KeyCode::Enter).is_empty(), "the first phase sends nothing");
    assert!(
        matches!(&s.overlay, Overlay::Confirm(c) if c.title.contains("upstream to cost") && c.body.iter().any(|l| l.contains("cheapest"))),
        "{:?}",
        s.overlay
    );
    let effects = key(&mut s, 'y');
    let (request, cmd) = match effects.as_slice() {
        [Effect::Send(c @ Command::SetPacking { request, packing: Packing::Cost })] => (*request, c.clone()),
        other => panic!("expected one packing command, got {other:?}"),
    };
    // The backend switches the controller: the next picture (read from the controller) says so.
    let out = d.handle(cmd);
    let outcome = match out.as_slice() {
        [Event::Done { request: r, outcome: Ok(m) }] if *r == request && m.contains("cost") => Ok(m.clone()),
        other => panic!("expected the switch to succeed, got {other:?}"),
    };
    let audit = update(&mut s, Msg::Done { request, outcome });
    assert!(
        matches!(audit.as_slice(), [Effect::Audit { action, target, outcome, .. }] if action == "packing" && target == "cost" && outcome == "ok"),
        "the switch is audited: {audit:?}"
    );
    let v = d.view();
    assert_eq!(v.packing, Packing::Cost);
    update(&mut s, Msg::View(Arc::new(v)));
    assert!(screen(&s, 160, 45).contains("packing: cost"), "the header shows the strategy");
    // And back.
    let out = d.handle(Command::SetPacking { request: 7, packing: Packing::Upstream });
    assert!(matches!(out.as_slice(), [Event::Done { request: 7, outcome: Ok(_) }]), "{out:?}");
    assert_eq!(d.view().packing, Packing::Upstream);
}

#[test]
fn the_help_lists_packing_and_a_narrow_header_keeps_leadership_first() {
    for readonly in [false, true] {
        let mut s = app(view_at(180), readonly);
        key(&mut s, '?');
        let help = screen(&s, 120, 200);
        assert_eq!(help.contains(":packing cost") && help.contains(":packing upstream"), !readonly, "{help}");
        assert!(help.contains("Karpenter 1.15 decisions: the scenario's settings.karpenterVersion"), "{help}");
    }
    let s = app(view_at(180), true);
    let narrow = screen(&s, 80, 24);
    let header = narrow.lines().next().expect("a header line");
    assert!(header.contains("READ-ONLY"), "{header}");
    assert!(
        screen(&s, 160, 45)
            .lines()
            .next()
            .is_some_and(|l| l.contains("APPROVE  packing: upstream · karpenter 1.15  acting"))
    );
}

#[test]
fn switching_the_packing_strategy_is_refused_read_only() {
    let mut s = app(view_at(180), true);
    key(&mut s, ':');
    typed(&mut s, "packing cost");
    assert!(code(&mut s, KeyCode::Enter).is_empty());
    assert_eq!(s.overlay, Overlay::None, "no confirmation in read-only mode");
    assert!(status_error(&s, "read-only"), "{:?}", s.status);
    // The backend refuses too, and the controller keeps its strategy.
    let mut d = driver_at(180, true);
    let out = d.handle(Command::SetPacking { request: 9, packing: Packing::Cost });
    assert!(
        matches!(out.as_slice(), [Event::Done { request: 9, outcome: Err(e) }] if e.contains("read-only")),
        "{out:?}"
    );
    assert_eq!(d.view().packing, Packing::Upstream);
}

#[test]
fn the_filter_narrows_the_focused_pane_and_esc_clears_it() {
    let mut s = app(view_at(180), false);
    key(&mut s, '3');
    let all = s.pane(Pane::Nodes).visible.len();
    assert!(all >= 2);
    key(&mut s, '/');
    typed(&mut s, "spot-a");
    assert_eq!(s.pane(Pane::Nodes).visible.len(), 1);
    code(&mut s, KeyCode::Enter);
    assert_eq!(s.pane(Pane::Nodes).filter, "spot-a", "Enter keeps the filter");
    code(&mut s, KeyCode::Esc);
    assert_eq!(s.pane(Pane::Nodes).visible.len(), all, "Esc clears it");
    key(&mut s, '/');
    typed(&mut s, "!spot-a");
    assert_eq!(s.pane(Pane::Nodes).visible.len(), all - 1, "! inverts");
}

#[test]
fn the_selection_follows_its_object_when_rows_move() {
    let mut s = app(view_at(180), false);
    key(&mut s, '3');
    key(&mut s, 'G');
    let i = s.selected_row(Pane::Nodes).expect("selected");
    let name = s.view.nodes[i].name.clone();
    let mut v = (*s.view).clone();
    v.nodes.reverse();
    update(&mut s, Msg::View(Arc::new(v)));
    let j = s.selected_row(Pane::Nodes).expect("still selected");
    assert_eq!(s.view.nodes[j].name, name);
}

#[test]
fn enter_explains_a_pending_pod_and_a_node() {
    let mut s = app(view_at(180), false);
    key(&mut s, '1');
    code(&mut s, KeyCode::Enter);
    let Overlay::Detail { lines, .. } = &s.overlay else { panic!("{:?}", s.overlay) };
    let text = lines.join("\n");
    assert!(text.contains("NodePool critical") && text.contains("dedicated=critical"), "{text}");
    code(&mut s, KeyCode::Esc);
    key(&mut s, '3');
    key(&mut s, 'd');
    let Overlay::Detail { lines, .. } = &s.overlay else { panic!("{:?}", s.overlay) };
    assert!(lines.iter().any(|l| l.contains("Why it is (not) being consolidated")), "{lines:?}");
}

#[test]
fn demo_clock_controls_reach_the_backend() {
    let mut s = app(view_at(10), false);
    assert_eq!(key(&mut s, 'p'), vec![Effect::Send(Command::SetPaused { paused: true })]);
    assert_eq!(key(&mut s, '+'), vec![Effect::Send(Command::SetSpeed { speed: 20.0 })]);
    assert_eq!(key(&mut s, 'q'), vec![Effect::Quit]);
}

#[test]
fn the_backend_applies_approvals_and_refuses_invalid_nodepools() {
    let mut d = driver_at(180, false);
    let v = d.view();
    let open = v.disruptions.iter().find(|x| x.state.is_open()).expect("open").clone();
    let out = d.handle(Command::Approve { request: 1, id: open.id.clone() });
    assert!(matches!(out.as_slice(), [Event::Done { request: 1, .. }]), "{out:?}");
    let after = d.view();
    let now = after.disruptions.iter().find(|x| x.id == open.id).expect("still listed");
    assert_ne!(now.state, ProposalState::AwaitingApproval, "approval moved it on");

    let pool = after.nodepools.iter().find(|p| p.name == "default").expect("pool").yaml.clone();
    let broken = pool.replace("consolidateAfter: 30s", "consolidateAfter: soon");
    let out = d.handle(Command::ApplyNodePool { request: 2, name: "default".into(), yaml: broken });
    assert!(
        matches!(out.as_slice(), [Event::Done { outcome: Err(e), .. }] if e.contains("consolidateAfter")),
        "{out:?}"
    );
    assert_eq!(d.view().nodepools.iter().find(|p| p.name == "default").expect("pool").yaml, pool, "nothing changed");
    let renamed = pool.replace("name: default", "name: other");
    let out = d.handle(Command::ApplyNodePool { request: 3, name: "default".into(), yaml: renamed });
    assert!(matches!(out.as_slice(), [Event::Done { outcome: Err(_), .. }]), "{out:?}");
    let edited = pool.replace("consolidateAfter: 30s", "consolidateAfter: 2m");
    let out = d.handle(Command::ApplyNodePool { request: 4, name: "default".into(), yaml: edited });
    assert!(matches!(out.as_slice(), [Event::Done { outcome: Ok(_), .. }]), "{out:?}");
    assert_eq!(d.view().nodepools.iter().find(|p| p.name == "default").expect("pool").consolidate_after, "2m");
}

fn screen(s: &AppState, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).expect("test terminal");
    t.draw(|f| f.render_widget(s, f.area())).expect("draws");
    format!("{}", t.backend())
}

#[test]
fn snapshot_full_screens() {
    let mut s = app(view_at(180), false);
    insta::assert_snapshot!("grid_160x45", screen(&s, 160, 45));
    insta::assert_snapshot!("tabs_80x24", screen(&s, 80, 24));
    key(&mut s, '?');
    insta::assert_snapshot!("help_100x40", screen(&s, 100, 40));
}

#[test]
fn snapshot_every_pane() {
    let mut s = app(view_at(180), false);
    for p in Pane::ALL {
        key(&mut s, char::from(b'1' + p.index() as u8));
        insta::assert_snapshot!(format!("pane_{}", p.command()), screen(&s, 120, 20));
    }
    key(&mut s, '4');
    select_open(&mut s);
    key(&mut s, 'a');
    insta::assert_snapshot!("confirm_approve", screen(&s, 100, 30));
}

#[test]
fn tiny_and_odd_terminals_render_without_panicking() {
    let mut s = app(view_at(180), false);
    for (w, h) in [(1, 1), (10, 3), (40, 10), (80, 24), (300, 100)] {
        screen(&s, w, h);
        key(&mut s, '?');
        screen(&s, w, h);
        code(&mut s, KeyCode::Esc);
    }
}

fn ctrl(s: &mut AppState, c: char) -> Vec<Effect> {
    update(s, Msg::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL)))
}

/// Opens the editor on the `default` NodePool.
fn open_editor(s: &mut AppState) {
    key(s, '2');
    key(s, 'g');
    while s.selected_row(Pane::NodePools).map(|i| s.view.nodepools[i].name.as_str()) != Some("default") {
        key(s, 'j');
    }
    assert!(key(s, 'e').is_empty());
    assert!(s.editor.is_some(), "e opens the editor");
}

#[test]
fn editing_a_nodepool_reviews_the_what_if_then_applies_through_the_backend() {
    let mut d = driver_at(180, false);
    let mut s = app(Arc::new(d.view()), false);
    open_editor(&mut s);
    // Ctrl-S with nothing changed applies nothing.
    assert!(ctrl(&mut s, 's').is_empty());
    // Append a label to the template: valid, and it changes the template.
    let ed = &mut s.editor.as_mut().expect("editor").editor;
    let text = ed.text().replace(
        "    spec:\n      requirements:",
        "    metadata:\n      labels:\n        team: web\n    spec:\n      requirements:",
    );
    assert_ne!(text, ed.text(), "the fixture YAML has the expected shape");
    ed.set_text(&text);
    let effects = ctrl(&mut s, 's');
    let (request, yaml) = match effects.as_slice() {
        [Effect::Send(Command::PreviewNodePool { request, name, yaml })] if name == "default" => {
            (*request, yaml.clone())
        }
        other => panic!("Ctrl-S asks the backend for a what-if: {other:?}"),
    };
    // The backend computes it on the world as it is.
    let Event::Preview { result, .. } =
        d.handle(Command::PreviewNodePool { request, name: "default".into(), yaml }).remove(0)
    else {
        panic!("a preview comes back")
    };
    let preview = result.expect("the edit is valid");
    assert!(!preview.drifted.is_empty(), "a template label drifts the pool's claims");
    assert!(key(&mut s, 'y').is_empty(), "cannot apply before the what-if arrives");
    update(&mut s, Msg::Preview { request, result: Ok(preview) });
    let effects = key(&mut s, 'y');
    let apply = match effects.as_slice() {
        [Effect::Send(c @ Command::ApplyNodePool { .. })] => c.clone(),
        other => panic!("y applies: {other:?}"),
    };
    let Command::ApplyNodePool { request, .. } = apply.clone() else { unreachable!() };
    let done = d.handle(apply).remove(0);
    let Event::Done { outcome, .. } = done else { panic!("{done:?}") };
    assert!(outcome.is_ok(), "{outcome:?}");
    let audit = update(&mut s, Msg::Done { request, outcome });
    assert!(
        matches!(audit.as_slice(), [Effect::Audit { action, outcome, .. }] if action == "apply-nodepool" && outcome == "ok")
    );
    assert!(s.editor.is_none(), "the editor closes once applied");
    assert!(d.view().nodepools.iter().find(|p| p.name == "default").expect("pool").yaml.contains("team: web"));
}

#[test]
fn a_failed_apply_keeps_the_buffer_and_invalid_text_cannot_be_saved() {
    use karpenter_tui::ui::app::EditStage;
    let mut s = app(view_at(180), false);
    open_editor(&mut s);
    let ed = &mut s.editor.as_mut().expect("editor").editor;
    let good = ed.text().replace("consolidateAfter: 30s", "consolidateAfter: 45s");
    ed.set_text(&good.replace("consolidateAfter: 45s", "consolidateAfter: [oops"));
    assert!(ctrl(&mut s, 's').is_empty(), "invalid YAML is never sent");
    assert!(s.status.as_ref().is_some_and(|st| st.error));
    s.editor.as_mut().expect("editor").editor.set_text(&good);
    let effects = ctrl(&mut s, 's');
    let [Effect::Send(Command::PreviewNodePool { request, .. })] = effects.as_slice() else { panic!("{effects:?}") };
    update(&mut s, Msg::Preview { request: *request, result: Err("no preview: backend busy".into()) });
    let effects = key(&mut s, 'y');
    let [Effect::Send(Command::ApplyNodePool { request, .. })] = effects.as_slice() else { panic!("{effects:?}") };
    update(&mut s, Msg::Done { request: *request, outcome: Err("conflict: the NodePool changed".into()) });
    let ed = s.editor.as_ref().expect("the editor stays open");
    assert!(matches!(ed.stage, EditStage::Editing));
    assert_eq!(ed.editor.text(), good, "the buffer is intact");
    // Esc on a modified buffer needs a second Esc.
    code(&mut s, KeyCode::Esc);
    assert!(s.editor.is_some());
    code(&mut s, KeyCode::Esc);
    assert!(s.editor.is_none());
}

#[test]
fn read_only_cannot_open_the_editor() {
    let mut s = app(view_at(180), true);
    key(&mut s, '2');
    assert!(key(&mut s, 'e').is_empty());
    assert!(s.editor.is_none());
}

#[test]
fn snapshot_editor_and_review() {
    let mut d = driver_at(180, false);
    let mut s = app(Arc::new(d.view()), false);
    open_editor(&mut s);
    insta::assert_snapshot!("editor_valid", screen(&s, 100, 30));
    let ed = &mut s.editor.as_mut().expect("editor").editor;
    let text = ed.text().replace("- '4'", "- '5'");
    ed.set_text(&text);
    let effects = ctrl(&mut s, 's');
    let [Effect::Send(cmd @ Command::PreviewNodePool { request, .. })] = effects.as_slice() else {
        panic!("{effects:?}")
    };
    let request = *request;
    let Event::Preview { result, .. } = d.handle(cmd.clone()).remove(0) else { panic!("preview") };
    update(&mut s, Msg::Preview { request, result });
    insta::assert_snapshot!("editor_review", screen(&s, 120, 45));
}

#[test]
fn s_sorts_the_focused_pane_by_its_next_column_and_shift_s_reverses() {
    let mut s = app(view_at(600), false);
    key(&mut s, '3');
    let prices = |s: &AppState| -> Vec<f64> {
        s.pane(Pane::Nodes).visible.iter().map(|&i| s.view.nodes[i].price).collect::<Vec<_>>()
    };
    assert!(s.view.nodes.len() >= 2, "the demo has nodes at 10 minutes");
    // default → name → pool → type → zone → capacity → price
    for _ in 0..6 {
        key(&mut s, 's');
    }
    assert!(s.status.as_ref().is_some_and(|st| st.text.contains("sorted by price")), "{:?}", s.status);
    let p = prices(&s);
    assert!(p.windows(2).all(|w| w[0] >= w[1]), "most expensive first: {p:?}");
    key(&mut s, 'S');
    let p = prices(&s);
    assert!(p.windows(2).all(|w| w[0] <= w[1]), "reversed: {p:?}");
    // The selection stays on its node through a re-sort, and a fresh picture keeps the order.
    let selected = s.pane(Pane::Nodes).selected_key.clone();
    update(&mut s, Msg::View(view_at(600)));
    assert_eq!(s.pane(Pane::Nodes).selected_key, selected);
    assert!(prices(&s).windows(2).all(|w| w[0] <= w[1]));
    // Names sort alphabetically; other panes are unaffected.
    key(&mut s, 'S');
    for _ in 0..6 {
        key(&mut s, 's');
    }
    assert!(s.status.as_ref().is_some_and(|st| st.text.contains("sorted by default")), "{:?}", s.status);
    key(&mut s, 's');
    let names: Vec<String> = s.pane(Pane::Nodes).visible.iter().map(|&i| s.view.nodes[i].name.clone()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    assert_eq!(s.pane(Pane::Events).sort, 0);
}

/// `scenarios/repair.yaml` played to `secs`: node-a has been Unknown since 2m.
fn repair_driver_at(secs: i64) -> SimDriver {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/repair.yaml")).expect("file");
    let s = parse_scenario(&text, "repair.yaml").expect("parses");
    let mut p = Playback::new(&s).expect("builds");
    let end = p.start + secs * 1000;
    p.advance(end).expect("plays");
    SimDriver::new(p, "demo".into(), 10.0, false)
}

#[test]
fn an_unhealthy_node_shows_its_condition_and_time_left_and_r_repairs_it_now() {
    use karpenter_tui::protocol::view::Lifecycle;
    let mut d = repair_driver_at(300);
    let v = Arc::new(d.view());
    assert!(v.feature_gates.contains(&("NodeRepair", true)), "{:?}", v.feature_gates);
    let row = v.nodes.iter().find(|n| n.name == "node-a").expect("node-a");
    assert_eq!(row.state, Lifecycle::Unhealthy);
    let u = row.repair.as_ref().expect("repair info");
    assert_eq!((u.condition.as_str(), u.status.as_str()), ("Ready", "Unknown"));
    assert_eq!(u.repair_at - u.since, 10 * 60_000, "KWOK's 10 minute toleration");
    assert!(
        v.nodes.iter().filter(|n| n.name != "node-a").all(|n| n.repair.is_none() && n.state != Lifecycle::Unhealthy)
    );

    let mut s = app(v.clone(), false);
    key(&mut s, '3');
    key(&mut s, 'g');
    while s.selected_row(Pane::Nodes).map(|i| s.view.nodes[i].name.as_str()) != Some("node-a") {
        key(&mut s, 'j');
    }
    // The details say what and when.
    key(&mut s, 'd');
    let text = format!("{:?}", s.overlay);
    assert!(text.contains("Unhealthy: Ready=Unknown (NodeStatusUnknown)") && text.contains("in 7m00s"), "{text}");
    code(&mut s, KeyCode::Esc);
    assert!(key(&mut s, 'R').is_empty(), "the first phase sends nothing");
    let Overlay::Confirm(c) = &s.overlay else { panic!("a confirmation opens: {:?}", s.overlay) };
    assert!(c.title.contains("node-a") && c.body.join(" ").contains("without eviction"), "{c:?}");
    let sent = key(&mut s, 'y');
    let cmd = match sent.as_slice() {
        [Effect::Send(cmd @ Command::RepairNode { node, .. })] if node == "node-a" => cmd.clone(),
        other => panic!("expected a repair command, got {other:?}"),
    };
    let out = d.handle(cmd);
    assert!(
        matches!(out.as_slice(), [Event::Done { outcome: Ok(m), .. }] if m.contains("repairing node-a")),
        "{out:?}"
    );
    let after = d.view();
    let a = after.nodes.iter().find(|n| n.name == "node-a");
    assert!(a.is_none_or(|n| n.state == Lifecycle::Deleting), "{a:?}");

    // A healthy node is refused in the UI and by the backend.
    let healthy = after.nodes.iter().find(|n| n.name == "node-b").expect("node-b").name.clone();
    let out = d.handle(Command::RepairNode { request: 9, node: healthy });
    assert!(
        matches!(out.as_slice(), [Event::Done { outcome: Err(e), .. }] if e.contains("matches no repair policy")),
        "{out:?}"
    );
}

#[test]
fn repair_is_refused_read_only() {
    let mut s = app(Arc::new(repair_driver_at(300).view()), true);
    key(&mut s, '3');
    assert!(key(&mut s, 'R').is_empty());
    assert_eq!(s.overlay, Overlay::None, "no confirmation in read-only mode");
}

fn scenario_driver_at(file: &str, secs: i64) -> SimDriver {
    let path = format!("{}/scenarios/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).expect("file");
    let s = parse_scenario(&text, file).expect("parses");
    let mut p = Playback::new(&s).expect("builds");
    let end = p.start + secs * 1000;
    p.advance(end).expect("plays");
    SimDriver::new(p, "demo".into(), 10.0, false)
}

#[test]
fn a_static_pool_shows_ready_over_wanted_and_brackets_scale_it_after_confirmation() {
    let mut d = scenario_driver_at("static.yaml", 300);
    let v = Arc::new(d.view());
    let row = v.nodepools.iter().find(|p| p.name == "fixed").expect("pool");
    assert_eq!((row.replicas, row.ready), (Some(3), 3));
    let mut s = app(v.clone(), false);
    key(&mut s, '2');
    key(&mut s, 'd');
    let details = format!("{:?}", s.overlay);
    assert!(details.contains("Static: 3 replica(s) wanted, 3 ready"), "{details}");
    code(&mut s, KeyCode::Esc);
    assert!(key(&mut s, ']').is_empty(), "the first phase sends nothing");
    let Overlay::Confirm(c) = &s.overlay else { panic!("a confirmation: {:?}", s.overlay) };
    assert!(c.title.contains("from 3 to 4"), "{}", c.title);
    let sent = key(&mut s, 'y');
    let [Effect::Send(cmd @ Command::ScaleNodePool { name, replicas: 4, .. })] = sent.as_slice() else {
        panic!("one scale command: {sent:?}")
    };
    assert_eq!(name, "fixed");
    let out = d.handle(cmd.clone());
    assert!(matches!(out.as_slice(), [Event::Done { outcome: Ok(_), .. }]), "{out:?}");
    assert_eq!(d.view().nodepools.iter().find(|p| p.name == "fixed").and_then(|p| p.replicas), Some(4));
    // The palette takes a number; a dynamic pool is refused by the backend.
    let mut s = app(Arc::new(d.view()), false);
    typed(&mut s, ":scale fixed 1");
    code(&mut s, KeyCode::Enter);
    let Overlay::Confirm(c) = &s.overlay else { panic!("a confirmation: {:?}", s.overlay) };
    assert!(c.body.join(" ").contains("without asking budgets"), "{c:?}");
    let out = d.handle(Command::ScaleNodePool { request: 7, name: "nope".into(), replicas: 1 });
    assert!(matches!(out.as_slice(), [Event::Done { outcome: Err(e), .. }] if e.contains("does not exist")), "{out:?}");
}

#[test]
fn overlays_show_their_state_and_the_prices_they_set() {
    let v = scenario_driver_at("overlay.yaml", 700).view();
    let names: Vec<(&str, &str)> = v.overlays.iter().map(|o| (o.name.as_str(), o.state.as_str())).collect();
    // Evaluation order: weight, then name descending.
    assert_eq!(names[0], ("z-conflicting", "Applied"));
    assert_eq!(names[1].0, "c-large-list-price");
    assert!(names[1].1.starts_with("Conflict"), "{names:?}");
    assert_eq!(names[2], ("c-family-discount", "Applied"));
    let node = v.nodes.iter().find(|n| n.instance_type == "c-large").expect("the c-large node");
    assert_eq!(node.price_overlay.as_deref(), Some("z-conflicting"));
    assert!((node.price - 1.2).abs() < 1e-9, "the overlaid price: {}", node.price);
    let pool = v.nodepools.iter().find(|p| p.name == "default").expect("pool");
    assert!(pool.overlays.iter().any(|l| l.contains("c-large") && l.contains("z-conflicting")), "{:?}", pool.overlays);
}

#[test]
fn a_node_overlay_is_edited_in_place_validated_reviewed_and_applied() {
    let mut d = scenario_driver_at("overlay.yaml", 60);
    let mut s = app(Arc::new(d.view()), false);
    typed(&mut s, ":overlay c-family-discount");
    code(&mut s, KeyCode::Enter);
    let ed = &mut s.editor.as_mut().expect("the palette opens the overlay editor").editor;
    assert!(
        ed.text().contains("priceAdjustment: -40%") || ed.text().contains("priceAdjustment: '-40%'"),
        "{}",
        ed.text()
    );
    // An unsigned adjustment breaks the CRD's pattern: Ctrl-S refuses and says why.
    let broken = ed.text().replace("-40%", "40%");
    ed.set_text(&broken);
    assert!(ctrl(&mut s, 's').is_empty());
    let diags = &s.editor.as_ref().expect("still editing").editor.diagnostics().to_vec();
    assert!(diags.iter().any(|d| d.path.contains("priceAdjustment")), "{diags:?}");
    // A valid change: the review shows the diff, no what-if request; y applies through the backend.
    let ed = &mut s.editor.as_mut().expect("editor").editor;
    ed.set_text(&broken.replace("40%", "-10%"));
    assert!(ctrl(&mut s, 's').is_empty(), "no what-if request for an overlay");
    let effects = key(&mut s, 'y');
    let apply = match effects.as_slice() {
        [Effect::Send(c @ Command::ApplyNodeOverlay { name, .. })] if name == "c-family-discount" => c.clone(),
        other => panic!("y applies the overlay: {other:?}"),
    };
    let out = d.handle(apply);
    assert!(matches!(out.as_slice(), [Event::Done { outcome: Ok(_), .. }]), "{out:?}");
    let v = d.view();
    let o = v.overlays.iter().find(|o| o.name == "c-family-discount").expect("overlay");
    assert!(o.yaml.contains("-10%"), "{}", o.yaml);
    // The backend refuses invalid text and renames whatever sends them.
    let out = d.handle(Command::ApplyNodeOverlay { request: 3, name: "c-family-discount".into(), yaml: broken });
    assert!(
        matches!(out.as_slice(), [Event::Done { outcome: Err(e), .. }] if e.contains("priceAdjustment")),
        "{out:?}"
    );
    let renamed = o.yaml.replace("name: c-family-discount", "name: other");
    let out = d.handle(Command::ApplyNodeOverlay { request: 4, name: "c-family-discount".into(), yaml: renamed });
    assert!(matches!(out.as_slice(), [Event::Done { outcome: Err(e), .. }] if e.contains("renaming")), "{out:?}");
}

/// After a provisioning pass that launched, the Pending pods pane's footer says what each packing strategy would
/// have launched for that pass's pods and the LP bound, with the strategy that pass used in bold; the figures are
/// the controller's, the same ones the report sums. `gpu.yaml` has a real gap between the strategies.
#[test]
fn the_pending_pane_shows_both_packing_strategies_after_a_provisioning_pass() {
    use karpenter_tui::protocol::view::PackingRow;
    let path = format!("{}/scenarios/gpu.yaml", env!("CARGO_MANIFEST_DIR"));
    let s = parse_scenario(&std::fs::read_to_string(&path).expect("file"), "gpu.yaml").expect("parses");
    let played = |secs: i64, cost_after: Option<i64>| {
        let mut p = Playback::new(&s).expect("builds");
        let start = p.start;
        if let Some(t) = cost_after {
            p.advance(start + t * 1000).expect("plays");
            p.world.controller_mut().set_packing(Packing::Cost);
        }
        p.advance(start + secs * 1000).expect("plays");
        let last = p.world.record.packing.last().copied();
        (SimDriver::new(p, "demo".into(), 10.0, false).view(), last)
    };
    let (before, none) = played(0, None);
    assert!(before.packing_pass.is_none() && none.is_none(), "nothing launched yet: no footer");
    assert!(!screen(&app(Arc::new(before), false), 200, 45).contains("packing upstream · "));

    for (packing, secs, cost_after) in [(Packing::Upstream, 120, None), (Packing::Cost, 120, Some(0))] {
        let (v, last) = played(secs, cost_after);
        let last = last.expect("a provisioning pass launched");
        let row: PackingRow = v.packing_pass.expect("the picture carries the latest launching pass");
        assert_eq!((row.at, row.packing, row.pods), (Some(last.at), packing, last.pods));
        assert_eq!(row.comparison, last.comparison);
        let c = row.comparison;
        let bound = c.bound.expect("a bound");
        assert!(c.cost.per_hour < c.upstream.per_hour && bound <= c.cost.per_hour + 1e-9, "{c:?}");

        let mut s = app(Arc::new(v), false);
        key(&mut s, '1');
        let nodes = |n: usize| if n == 1 { "1 node".to_string() } else { format!("{n} nodes") };
        let upstream = format!("upstream ${:.3}/h ({})", c.upstream.per_hour, nodes(c.upstream.nodes));
        let cost = format!("cost ${:.3}/h ({})", c.cost.per_hour, nodes(c.cost.nodes));
        // One pane at a time (below 140×40): the footer has the width for one line.
        let mut t = Terminal::new(TestBackend::new(130, 30)).expect("test terminal");
        t.draw(|f| f.render_widget(&s, f.area())).expect("draws");
        let text = format!("{}", t.backend());
        let prefix = format!("packing {packing} · ");
        let (y, footer) = text.lines().enumerate().find(|(_, l)| l.contains(&prefix)).expect("a footer");
        for needle in [&upstream, &cost, &format!("bound ${bound:.3}/h"), &format!("{} pods at ", row.pods)] {
            assert!(footer.contains(needle.as_str()), "{needle} in {footer}");
        }
        // The strategy in use is marked: its figure is bold, the other's is not. (The line is quoted: one
        // character before the first cell.)
        let bold = |needle: &str| {
            let x = footer[..footer.find(needle).expect("in the footer")].chars().count() - 1;
            t.backend().buffer()[(x as u16, y as u16)].modifier.contains(ratatui::style::Modifier::BOLD)
        };
        let (used, other) = if packing == Packing::Upstream { (&upstream, &cost) } else { (&cost, &upstream) };
        assert!(bold(used) && !bold(other), "{footer}");
    }
}

#[test]
fn the_pending_pane_shows_capacity_buffers_as_room_not_pods() {
    let text = format!(
        r#"name: buffer-pane
until: 5m
settings:
  featureGates: {{CapacityBuffer: true}}
{}
objects:
  - apiVersion: karpenter.sh/v1
    kind: NodePool
    metadata: {{name: default}}
    spec:
      template:
        spec:
          nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  - apiVersion: v1
    kind: PodTemplate
    metadata: {{name: worker, namespace: default}}
    template:
      spec:
        containers: [{{name: c, image: x, resources: {{requests: {{cpu: "1", memory: 1Gi}}}}}}]
  - apiVersion: autoscaling.x-k8s.io/v1beta1
    kind: CapacityBuffer
    metadata: {{name: headroom, namespace: default}}
    spec: {{podTemplateRef: {{name: worker}}, replicas: 3}}
  - apiVersion: autoscaling.x-k8s.io/v1beta1
    kind: CapacityBuffer
    metadata: {{name: broken, namespace: default}}
    spec: {{podTemplateRef: {{name: missing}}, replicas: 1}}
"#,
        common::SMALL_LARGE_TYPES
    );
    let s = karpenter_tui::sim::scenario::parse_scenario(&text, "buffer-pane.yaml").unwrap();
    let mut p = Playback::new(&s).expect("builds");
    let start = p.start;
    p.advance(start + 120_000).expect("plays");
    let v = SimDriver::new(p, "demo".into(), 10.0, false).view();
    assert!(v.pending.is_empty(), "virtual pods are not pending pods: {:?}", v.pending);
    assert_eq!(v.buffers.len(), 2);
    let mut s = app(Arc::new(v), false);
    key(&mut s, '1');
    let text = screen(&s, 130, 30);
    let line =
        |needle: &str| text.lines().find(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle} in\n{text}"));
    let ok = line("default/headroom");
    assert!(ok.contains("3 × cpu 1, memory 1Gi") && ok.contains("Provisioning True (FitsExistingCapacity)"), "{ok}");
    let broken = line("default/broken");
    assert!(
        broken.contains("ReadyForProvisioning False (PodTemplateNotFound): podtemplates \"missing\" not found"),
        "{broken}"
    );
    assert!(text.contains("no pending pods"), "{text}");
}

#[test]
fn the_nodepools_pane_lists_capacity_reservations_and_reserved_nodes_count() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/scenarios/reserved.yaml")).unwrap();
    let s = parse_scenario(&text, "reserved.yaml").unwrap();
    let mut p = Playback::new(&s).expect("builds");
    let start = p.start;
    p.advance(start + 120_000).expect("plays");
    let v = SimDriver::new(p, "demo".into(), 10.0, false).view();
    assert_eq!(v.reservations.len(), 2);
    assert_eq!(v.cost.reserved_nodes, 4, "{:?}", v.cost);
    let mut s = app(Arc::new(v), false);
    key(&mut s, '2');
    let text = screen(&s, 130, 30);
    let line =
        |needle: &str| text.lines().find(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle} in\n{text}"));
    let block = line("cr-0a1b2c3d4e5f60002");
    assert!(
        block.contains("c-large test-zone-1 capacity-block") && block.contains("2/2 used, ends 12:00:00"),
        "{block}"
    );
    let odcr = line("cr-0a1b2c3d4e5f60001");
    assert!(
        odcr.contains("m-large test-zone-1 default") && odcr.contains("2/2 used") && !odcr.contains("ends"),
        "{odcr}"
    );
    assert!(text.contains("2 spot, 0 on-demand, 4 reserved"), "{text}");
}

/// The README's picture of the dashboard (docs/dashboard.svg): the demo at three simulated minutes at 160×45, drawn
/// from the same buffer the snapshot above checks, so it cannot fall behind the dashboard. `UPDATE_PICTURE=1`
/// rewrites it after a change to what the dashboard shows.
#[test]
fn the_readme_picture_is_the_dashboard_as_it_draws_now() {
    let s = app(view_at(180), false);
    let mut t = Terminal::new(TestBackend::new(160, 45)).expect("test terminal");
    t.draw(|f| f.render_widget(&s, f.area())).expect("draws");
    let svg = svg(t.backend().buffer());
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/dashboard.svg");
    if std::env::var_os("UPDATE_PICTURE").is_some() {
        std::fs::write(path, &svg).expect("write docs/dashboard.svg");
    }
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed == svg,
        "docs/dashboard.svg is not the dashboard as it draws now: rerun with UPDATE_PICTURE=1 and commit it"
    );
    // It is the screen, not an empty frame: the panes' titles are in it.
    for title in ["Pending pods", "NodePools", "Nodes &amp; NodeClaims", "Disruptions", "Budgets", "Events"] {
        assert!(svg.contains(title), "{title}");
    }
}

/// A terminal buffer as SVG: one rectangle per run of background colour, one text element per run of one style.
fn svg(buf: &ratatui::buffer::Buffer) -> String {
    use ratatui::style::{Color, Modifier};
    const CW: f32 = 8.4;
    const CH: f32 = 17.0;
    const FG: &str = "#d4d4d4";
    const BG: &str = "#1e1e1e";
    fn hex(c: Color, default: &'static str) -> String {
        let named = match c {
            Color::Reset => default,
            Color::Black => "#000000",
            Color::Red => "#cd3131",
            Color::Green => "#0dbc79",
            Color::Yellow => "#e5e510",
            Color::Blue => "#2472c8",
            Color::Magenta => "#bc3fbc",
            Color::Cyan => "#11a8cd",
            Color::Gray => "#c0c0c0",
            Color::DarkGray => "#666666",
            Color::LightRed => "#f14c4c",
            Color::LightGreen => "#23d18b",
            Color::LightYellow => "#f5f543",
            Color::LightBlue => "#3b8eea",
            Color::LightMagenta => "#d670d6",
            Color::LightCyan => "#29b8db",
            Color::White => "#ffffff",
            Color::Rgb(r, g, b) => return format!("#{r:02x}{g:02x}{b:02x}"),
            Color::Indexed(_) => default,
        };
        named.to_string()
    }
    let area = buf.area;
    let (w, h) = (f32::from(area.width) * CW, f32::from(area.height) * CH);
    let mut out = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" viewBox=\"0 0 {w:.0} {h:.0}\" \
         font-family=\"'DejaVu Sans Mono', Menlo, Consolas, monospace\" font-size=\"14\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"{BG}\"/>\n"
    );
    for y in 0..area.height {
        let row: Vec<_> = (0..area.width).map(|x| &buf[(x, y)]).collect();
        let colours = |cell: &ratatui::buffer::Cell| {
            let (mut fg, mut bg) = (hex(cell.fg, FG), hex(cell.bg, BG));
            if cell.modifier.contains(Modifier::REVERSED) {
                std::mem::swap(&mut fg, &mut bg);
            }
            (fg, bg)
        };
        let mut x = 0;
        while x < row.len() {
            let (fg, bg) = colours(row[x]);
            let bold = row[x].modifier.contains(Modifier::BOLD);
            let mut end = x + 1;
            while end < row.len()
                && colours(row[end]) == (fg.clone(), bg.clone())
                && row[end].modifier.contains(Modifier::BOLD) == bold
            {
                end += 1;
            }
            let (x0, y0) = (x as f32 * CW, f32::from(y) * CH);
            if bg != BG {
                out.push_str(&format!(
                    "<rect x=\"{x0:.1}\" y=\"{y0:.0}\" width=\"{:.1}\" height=\"{CH:.0}\" fill=\"{bg}\"/>\n",
                    (end - x) as f32 * CW
                ));
            }
            let text: String = row[x..end].iter().map(|c| c.symbol()).collect();
            if !text.trim().is_empty() {
                let escaped = text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
                out.push_str(&format!(
                    "<text x=\"{x0:.1}\" y=\"{:.1}\" fill=\"{fg}\"{} xml:space=\"preserve\" textLength=\"{:.1}\" \
                     lengthAdjust=\"spacingAndGlyphs\">{escaped}</text>\n",
                    y0 + CH * 0.78,
                    if bold { " font-weight=\"bold\"" } else { "" },
                    (end - x) as f32 * CW
                ));
            }
            x = end;
        }
    }
    out.push_str("</svg>\n");
    out
}

#[test]
fn pausing_holds_every_voluntary_disruption_and_resuming_lets_it_go_on() {
    use karpenter_tui::controller::{CommandState, Hold};
    let s = parse_scenario(DEMO_SCENARIO, "demo.yaml").expect("the demo scenario parses");
    let mut p = Playback::new(&s).expect("the demo world builds");
    let start = p.start;
    p.advance(start + 100_000).expect("plays");
    let now = p.world.now;
    // Auto mode, as upstream runs: without the pause the empty node would be deleted after validation.
    p.world.controller_mut().set_mode(Mode::Auto, now);
    let paused_at = p.world.now;
    let hold = Hold { since: paused_at, by: "alice".into() };
    p.world.controller_mut().set_hold(Some(hold.clone()), paused_at).expect("pauses");
    assert!(p.world.controller_mut().set_hold(Some(hold), paused_at).is_err(), "already paused");
    p.advance(start + 240_000).expect("plays");
    let o = p.world.controller().orchestrator();
    let started = |o: &karpenter_tui::controller::Orchestrator, after: i64| {
        o.records
            .iter()
            .filter(|r| r.at >= after)
            .filter(|r| matches!(r.state, CommandState::Validating | CommandState::InProgress | CommandState::Executed))
            .count()
    };
    assert_eq!(started(o, paused_at), 0, "nothing voluntary started while paused: {:?}", o.records);
    let held: Vec<String> = o.gate().awaiting().map(|p| p.id.clone()).collect();
    assert!(!held.is_empty(), "what it found is held as a proposal: {:?}", o.records);
    let now = p.world.now;
    let refused = tick_approve(&mut p, &held[0]);
    assert!(refused.as_ref().is_err_and(|e| e.contains("paused")), "{refused:?}");
    // Resuming in auto mode withdraws what was held and decides again at once.
    p.world.controller_mut().set_hold(None, now).expect("resumes");
    let o = p.world.controller().orchestrator();
    assert_eq!(o.gate().awaiting().count(), 0, "held proposals are withdrawn in auto mode");
    p.advance(start + 400_000).expect("plays");
    assert!(started(p.world.controller().orchestrator(), now) > 0, "{:?}", p.world.controller().orchestrator().records);
}

/// Approves proposal `id` through the world's controller, as the demo backend does.
fn tick_approve(p: &mut Playback, id: &str) -> Result<String, String> {
    use karpenter_tui::controller::tick;
    match tick::immediate(tick::approve(&mut p.world, id)) {
        Some(Ok((approval, _))) => approval.message(id),
        Some(Err(e)) => Err(e),
        None => Err("no answer at once".into()),
    }
}

#[test]
fn the_pause_is_asked_for_confirmed_audited_and_shown() {
    let mut d = driver_at(180, false);
    let mut s = app(Arc::new(d.view()), false);
    assert!(!screen(&s, 160, 45).contains("PAUSED"));
    key(&mut s, ':');
    typed(&mut s, "resume");
    assert!(code(&mut s, KeyCode::Enter).is_empty());
    assert_eq!(s.overlay, Overlay::None, "not paused: nothing to resume");
    key(&mut s, ':');
    typed(&mut s, "pause");
    assert!(code(&mut s, KeyCode::Enter).is_empty(), "the first phase sends nothing");
    let Overlay::Confirm(c) = &s.overlay else { panic!("a confirmation opens: {:?}", s.overlay) };
    assert!(c.body.join(" ").contains("cannot be approved"), "{c:?}");
    assert!(c.body.join(" ").contains("a restart resumes"), "the hold's limit is said: {c:?}");
    // The durable form is offered by name: through the NodePools' budgets, even where this instance acts.
    code(&mut s, KeyCode::Esc);
    key(&mut s, ':');
    typed(&mut s, "pause budgets");
    code(&mut s, KeyCode::Enter);
    let Overlay::Confirm(c) = &s.overlay else { panic!("a confirmation opens: {:?}", s.overlay) };
    assert!(c.body.join(" ").contains("karpenter-tui.sh/paused-budgets"), "{c:?}");
    let durable = key(&mut s, 'y');
    let [Effect::Send(cmd @ Command::PauseDisruption { pause: true, budgets: true, .. })] = durable.as_slice() else {
        panic!("{durable:?}")
    };
    let refused = d.handle(cmd.clone());
    assert!(matches!(refused.as_slice(), [Event::Done { outcome: Err(e), .. }] if e.contains("demo")), "{refused:?}");
    key(&mut s, ':');
    typed(&mut s, "pause");
    code(&mut s, KeyCode::Enter);
    let effects = key(&mut s, 'y');
    let (request, cmd) = match effects.as_slice() {
        [Effect::Send(c @ Command::PauseDisruption { request, pause: true, budgets: false })] => (*request, c.clone()),
        other => panic!("expected one pause command, got {other:?}"),
    };
    let outcome = match d.handle(cmd).as_slice() {
        [Event::Done { request: r, outcome }] if *r == request => outcome.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(outcome, Ok("voluntary disruption paused".to_string()));
    let audit = update(&mut s, Msg::Done { request, outcome });
    assert!(
        matches!(audit.as_slice(), [Effect::Audit { action, outcome, .. }] if action == "pause" && outcome == "ok"),
        "{audit:?}"
    );
    update(&mut s, Msg::View(Arc::new(d.view())));
    let paused = s.view.paused.clone().expect("the picture says it is paused");
    assert_eq!(paused.how, "held by this engine");
    let shown = screen(&s, 160, 45);
    assert!(shown.contains("PAUSED"), "the header shows it");
    assert!(shown.contains("(held by this engine)"), "and how it holds: {shown}");
    // An approval is refused while paused, by the backend (the proposal stays open).
    let open = s.view.disruptions.iter().find(|x| x.state.is_open()).expect("an open proposal").id.clone();
    let out = d.handle(Command::Approve { request: 50, id: open.clone() });
    assert!(matches!(out.as_slice(), [Event::Done { outcome: Err(e), .. }] if e.contains("paused")), "{out:?}");
    // Read-only refuses it outright.
    let mut ro = app(Arc::new(d.view()), true);
    key(&mut ro, ':');
    typed(&mut ro, "resume");
    assert!(code(&mut ro, KeyCode::Enter).is_empty());
    assert!(status_error(&ro, "read-only"), "{:?}", ro.status);
    // Resume: confirmed, then the approval goes through.
    key(&mut s, ':');
    typed(&mut s, "resume");
    code(&mut s, KeyCode::Enter);
    let effects = key(&mut s, 'y');
    let [Effect::Send(cmd @ Command::PauseDisruption { pause: false, .. })] = effects.as_slice() else {
        panic!("{effects:?}")
    };
    assert!(matches!(d.handle(cmd.clone()).as_slice(), [Event::Done { outcome: Ok(_), .. }]));
    assert!(d.view().paused.is_none());
    // The approval now reaches validation against the cluster (whose verdict depends on what changed meanwhile).
    let out = d.handle(Command::Approve { request: 51, id: open });
    assert!(
        matches!(out.as_slice(), [Event::Done { outcome, .. }] if !outcome.as_ref().is_err_and(|e| e.contains("paused"))),
        "{out:?}"
    );
}

/// The rows the Nodes pane shows, by name, in order.
fn node_rows(s: &AppState) -> Vec<String> {
    s.pane(Pane::Nodes).visible.iter().map(|&i| s.view.nodes[i].name.clone()).collect()
}

fn selector(text: &str) -> Option<NodeSelector> {
    Some(NodeSelector::parse(text).expect("the selector parses"))
}

#[test]
fn a_label_selector_narrows_the_nodes_pane_and_extra_labels_are_columns() {
    let mut s = app(view_at(180), false);
    let all = node_rows(&s);
    let managed: Vec<String> =
        s.view.nodes.iter().filter(|n| n.instance_type == "m5.large").map(|n| n.name.clone()).collect();
    assert!(!managed.is_empty() && managed.len() < all.len(), "the demo has an m5.large and others: {all:?}");
    s.set_node_options(
        selector("node.kubernetes.io/instance-type=m5.large"),
        vec!["karpenter.sh/capacity-type".into(), "karpenter.k8s.aws/instance-cpu".into(), "example.com/team".into()],
    );
    assert_eq!(node_rows(&s), managed);
    key(&mut s, '3');
    let text = screen(&s, 120, 20);
    insta::assert_snapshot!("pane_nodes_selector_extra_labels", text);
    assert!(
        text.contains(&format!(
            "3 Nodes & NodeClaims {}/{} · -l node.kubernetes.io/instance-type=m5.large",
            managed.len(),
            all.len()
        )),
        "{text}"
    );
    for h in ["CAPACITY-TYPE", "INSTANCE-CPU", "TEAM"] {
        assert!(text.contains(h), "{h}: {text}");
    }
    // On a small terminal the tab strip says the pane is narrowed.
    let small = screen(&s, 80, 24);
    assert!(small.contains("3 Nodes(-l)"), "{small}");
    // The cluster's cost stays the whole cluster's.
    assert!(text.contains(&format!("${:.3}/h", s.view.cost.per_hour)), "{text}");
    // The grid shows the selector on the pane and in the header too (with one label column: the pane is narrow).
    s.set_node_options(
        selector("node.kubernetes.io/instance-type=m5.large"),
        vec!["topology.kubernetes.io/zone".into()],
    );
    let grid = screen(&s, 160, 45);
    insta::assert_snapshot!("grid_160x45_selector", grid);
    assert!(grid.contains("nodes -l node.kubernetes.io/instance-type=m5.large"), "the header says so: {grid}");
    // `!=` matches what has no such label at all, as kubectl's does.
    s.set_node_options(selector("node.kubernetes.io/instance-type!=m5.large"), Vec::new());
    let rest: Vec<String> = all.iter().filter(|n| !managed.contains(n)).cloned().collect();
    assert_eq!(node_rows(&s), rest);
    // An empty selector clears it.
    s.set_node_options(selector(""), Vec::new());
    assert_eq!(node_rows(&s), all);
    assert!(s.selector.is_none());
}

#[test]
fn a_nodeclaim_without_a_node_matches_on_its_own_labels() {
    let mut s = app(view_at(20), false);
    use karpenter_tui::protocol::view::Lifecycle;
    let ghost = s
        .view
        .nodes
        .iter()
        .find(|n| matches!(n.state, Lifecycle::Launching | Lifecycle::Launched))
        .map(|n| n.name.clone())
        .expect("a NodeClaim in flight at 20s");
    s.set_node_options(selector("karpenter.sh/nodepool in (default),karpenter.sh/capacity-type"), Vec::new());
    assert!(node_rows(&s).contains(&ghost), "{:?}", node_rows(&s));
    s.set_node_options(selector("!karpenter.sh/nodepool"), Vec::new());
    assert!(!node_rows(&s).contains(&ghost), "{:?}", node_rows(&s));
}

#[test]
fn the_palette_sets_and_clears_the_selector_and_a_bad_one_keeps_the_old() {
    let mut s = app(view_at(180), false);
    let all = node_rows(&s);
    key(&mut s, ':');
    typed(&mut s, "selector node.kubernetes.io/instance-type in (m5.large, m6i.large)");
    assert!(code(&mut s, KeyCode::Enter).is_empty());
    assert_eq!(
        s.selector.as_ref().map(|x| x.text.as_str()),
        Some("node.kubernetes.io/instance-type in (m5.large, m6i.large)")
    );
    assert!(s.status.as_ref().is_some_and(|st| !st.error), "{:?}", s.status);
    let narrowed = node_rows(&s);
    assert!(narrowed.len() < all.len(), "{narrowed:?}");
    // A bad one is an error naming where, and the selector in force stays.
    key(&mut s, ':');
    typed(&mut s, "selector zone in (a");
    code(&mut s, KeyCode::Enter);
    assert!(status_error(&s, "at character 11"), "{:?}", s.status);
    assert!(status_error(&s, "no closing ')'"), "{:?}", s.status);
    assert_eq!(
        s.selector.as_ref().map(|x| x.text.as_str()),
        Some("node.kubernetes.io/instance-type in (m5.large, m6i.large)")
    );
    assert_eq!(node_rows(&s), narrowed);
    // `l` in the Nodes pane opens the palette on the selector in force, to edit it.
    key(&mut s, '3');
    key(&mut s, 'l');
    let input = "selector node.kubernetes.io/instance-type in (m5.large, m6i.large)".to_string();
    assert_eq!(s.overlay, Overlay::Palette { input });
    code(&mut s, KeyCode::Esc);
    // Nothing after it clears it.
    key(&mut s, ':');
    typed(&mut s, "selector");
    code(&mut s, KeyCode::Enter);
    assert!(s.selector.is_none());
    assert_eq!(node_rows(&s), all);
    // `:selectorx` is not the command.
    key(&mut s, ':');
    typed(&mut s, "selectorx");
    code(&mut s, KeyCode::Enter);
    assert!(status_error(&s, "unknown command"), "{:?}", s.status);
}

#[test]
fn a_reversed_sort_shows_its_column_and_direction_and_keeps_the_selection() {
    let mut s = app(view_at(600), false);
    key(&mut s, '3');
    key(&mut s, 'G');
    let selected = s.pane(Pane::Nodes).selected_key.clone().expect("a node is selected");
    // default → name → pool → type → zone → capacity → price
    for _ in 0..6 {
        key(&mut s, 's');
    }
    assert!(s.status.as_ref().is_some_and(|st| st.text.contains("sorted by price ▼")), "{:?}", s.status);
    assert_eq!(s.pane(Pane::Nodes).selected_key.as_ref(), Some(&selected), "the selection stays on its node");
    key(&mut s, 'S');
    assert_eq!(s.pane(Pane::Nodes).selected_key.as_ref(), Some(&selected));
    let at = s.pane(Pane::Nodes).selected;
    assert_eq!(s.selected_row(Pane::Nodes).map(|i| s.view.nodes[i].name.clone()), Some(selected), "row {at}");
    let prices: Vec<f64> = s.pane(Pane::Nodes).visible.iter().map(|&i| s.view.nodes[i].price).collect();
    assert!(prices.windows(2).all(|w| w[0] <= w[1]), "cheapest first: {prices:?}");
    let text = screen(&s, 120, 20);
    insta::assert_snapshot!("pane_nodes_by_price_reversed", text);
    assert!(text.contains("$/H▲"), "{text}");
    assert!(text.contains("▲price"), "{text}");
    // Wide enough for the month's cost next to the hour's, sorted with it.
    let wide = screen(&s, 160, 30);
    assert!(wide.contains("$/H▲") && wide.contains("$/MO"), "{wide}");
}

#[test]
fn extra_label_columns_sort_after_the_panes_own() {
    let mut s = app(view_at(600), false);
    s.set_node_options(None, vec!["topology.kubernetes.io/zone".into()]);
    key(&mut s, '3');
    let own = karpenter_tui::ui::rows::sort_keys(Pane::Nodes).len();
    for _ in 0..own {
        key(&mut s, 's');
    }
    assert_eq!(s.sort_key(Pane::Nodes), "label:topology.kubernetes.io/zone");
    let zones: Vec<String> = s
        .pane(Pane::Nodes)
        .visible
        .iter()
        .map(|&i| s.view.nodes[i].labels.get("topology.kubernetes.io/zone").cloned().unwrap_or_default())
        .collect();
    let mut sorted = zones.clone();
    sorted.sort();
    assert_eq!(zones, sorted);
    // The arrow goes on the label's column, not the pane's own ZONE.
    let text = screen(&s, 160, 30);
    let header = text.lines().find(|l| l.contains("NAME")).expect("the header");
    assert!(header.contains("ZONE ") && header.contains("ZONE▲"), "{header}");
    key(&mut s, 's');
    assert_eq!(s.sort_key(Pane::Nodes), "default", "then back to the backend's order");
    // However many keys a flag gives, and however odd, nothing panics and at most 16 columns are shown.
    let many: Vec<String> =
        (0..200).map(|n| format!("example.com/label-{n}")).chain(["/".into(), "a/".into()]).collect();
    s.set_node_options(selector("!example.com/label-0"), many);
    assert_eq!(s.extra_labels.len(), karpenter_tui::ui::app::MAX_EXTRA_LABELS);
    assert!(status_error(&s, "the first 16 are shown"), "{:?}", s.status);
    for (w, h) in [(1, 1), (10, 3), (40, 10), (80, 24), (160, 45), (300, 100)] {
        screen(&s, w, h);
    }
    for _ in 0..40 {
        key(&mut s, 's');
        screen(&s, 120, 20);
    }
}

#[test]
fn the_nodepools_pane_shows_a_month_of_cost_when_it_has_room() {
    let s = {
        let mut s = app(view_at(180), false);
        key(&mut s, '2');
        s
    };
    let pool = s.view.nodepools.iter().find(|p| p.name == "default").expect("default pool");
    let month = format!("{:.0}", (pool.cost_per_hour * 730.0).round());
    let grid = screen(&s, 160, 45);
    let row = grid.lines().find(|l| l.contains("┃default ")).expect("the pool's row");
    assert!(grid.contains("$/MO"), "{grid}");
    assert!(row.contains(&format!(" {month} ")), "{month}: {row}");
    // 80 columns keep the hour's cost and leave the month to the header.
    let narrow = screen(&s, 80, 24);
    assert!(!narrow.contains("$/MO") && narrow.contains("$/H"), "{narrow}");
    assert!(narrow.contains("/month"), "{narrow}");
}

#[test]
fn enter_drills_from_a_nodepool_to_its_nodes_to_a_nodes_pods_and_esc_comes_back() {
    use karpenter_tui::ui::app::Crumb;
    let mut d = driver_at(180, false);
    let mut s = app(Arc::new(d.view()), false);
    key(&mut s, '2');
    let pools: Vec<String> = s.view.nodepools.iter().map(|p| p.name.clone()).collect();
    // Select the pool that has nodes, then Enter: the Nodes pane shows only its nodes and claims.
    let with_nodes = s.view.nodes.iter().find_map(|n| n.nodepool.clone()).expect("a managed node");
    let at = pools.iter().position(|p| *p == with_nodes).expect("listed");
    key(&mut s, 'g');
    for _ in 0..at {
        key(&mut s, 'j');
    }
    assert!(code(&mut s, KeyCode::Enter).is_empty(), "narrowing the Nodes pane asks the backend nothing");
    assert_eq!(s.drill, vec![Crumb::Pool(with_nodes.clone())]);
    assert_eq!(s.focus, Pane::Nodes);
    let shown: Vec<&str> = s.pane(Pane::Nodes).visible.iter().map(|&i| s.view.nodes[i].name.as_str()).collect();
    let expected: Vec<&str> = s
        .view
        .nodes
        .iter()
        .filter(|n| n.nodepool.as_deref() == Some(with_nodes.as_str()))
        .map(|n| n.name.as_str())
        .collect();
    assert!(!shown.is_empty() && shown.len() == expected.len(), "{shown:?} against {expected:?}");
    let screen_pool = screen(&s, 160, 45);
    assert!(screen_pool.contains(&format!("NodePools › {with_nodes} › Nodes & NodeClaims")), "{screen_pool}");
    insta::assert_snapshot!("drilled_into_a_nodepool_120x30", screen(&s, 120, 30));

    // Enter on a node with pods: its page, filled by the backend's answer.
    let node = s
        .pane(Pane::Nodes)
        .visible
        .iter()
        .map(|&i| &s.view.nodes[i])
        .find(|n| n.pods > 0)
        .map(|n| n.name.clone())
        .expect("a node with pods");
    let pos = s.pane(Pane::Nodes).visible.iter().position(|&i| s.view.nodes[i].name == node).unwrap();
    key(&mut s, 'g');
    for _ in 0..pos {
        key(&mut s, 'j');
    }
    let asked = code(&mut s, KeyCode::Enter);
    let [Effect::Send(cmd @ Command::DescribeNode { node: asked_for, .. })] = asked.as_slice() else {
        panic!("{asked:?}")
    };
    assert_eq!(asked_for, &node);
    assert!(screen(&s, 160, 45).contains("asking for its pods"));
    for e in d.handle(cmd.clone()) {
        if let Event::NodePods { request, node, result } = e {
            update(&mut s, Msg::NodePods { request, node, result });
        }
    }
    let page = s.node_page().expect("the node's page is open");
    let pods = page.pods.clone().expect("answered").expect("the node exists");
    let bound = s.view.nodes.iter().find(|n| n.name == node).unwrap();
    assert_eq!(pods.len(), bound.pods, "every pod bound to the node");
    assert!(pods.iter().all(|p| p.cpu_millis > 0 && p.owner.contains('/')), "requests and owners: {pods:?}");
    let page_screen = screen(&s, 160, 45);
    assert!(page_screen.contains(&format!("{node} › pods")), "{page_screen}");
    assert!(page_screen.contains(&format!("{}/{}", pods[0].namespace, pods[0].name)), "{page_screen}");
    assert!(page_screen.contains("ReplicaSet/"), "the owner column: {page_screen}");
    insta::assert_snapshot!("node_page_120x20", screen(&s, 120, 20));
    // A new picture asks again, so the page follows the cluster.
    let again = update(&mut s, Msg::View(Arc::new(d.view())));
    assert!(matches!(again.as_slice(), [Effect::Send(Command::DescribeNode { .. })]), "{again:?}");

    // Esc: back to the pool's nodes, then back to the NodePools pane and every node.
    code(&mut s, KeyCode::Esc);
    assert_eq!(s.drill, vec![Crumb::Pool(with_nodes)]);
    code(&mut s, KeyCode::Esc);
    assert!(s.drill.is_empty());
    assert_eq!(s.focus, Pane::NodePools);
    assert_eq!(s.pane(Pane::Nodes).visible.len(), s.view.nodes.len());
    assert!(!screen(&s, 160, 45).contains("Esc: back"));
    // A node that went away answers with an error on its page, not a panic.
    let gone = d.handle(Command::DescribeNode { request: 99, node: "no-such-node".into() });
    assert!(matches!(gone.as_slice(), [Event::NodePods { result: Err(e), .. }] if e.contains("no node")), "{gone:?}");
}

#[test]
fn ctx_lists_the_kubeconfig_contexts_and_switches_to_a_known_one() {
    let mut view = (*view_at(180)).clone();
    view.source.context = "prod".into();
    let mut s = app(Arc::new(view), false);
    key(&mut s, ':');
    typed(&mut s, "ctx");
    code(&mut s, KeyCode::Enter);
    assert!(status_error(&s, "no kubeconfig contexts"), "demo has none: {:?}", s.status);
    s.contexts = vec!["prod".into(), "staging".into()];
    key(&mut s, ':');
    typed(&mut s, "ctx");
    code(&mut s, KeyCode::Enter);
    let Overlay::Detail { lines, .. } = &s.overlay else { panic!("{:?}", s.overlay) };
    assert!(lines.iter().any(|l| l.contains("* prod") && l.contains("in use")), "{lines:?}");
    assert!(lines.iter().any(|l| l.trim() == "staging"), "{lines:?}");
    code(&mut s, KeyCode::Esc);
    for (input, needle) in [("ctx nowhere", "no such context"), ("ctx prod", "already on context prod")] {
        key(&mut s, ':');
        typed(&mut s, input);
        assert!(code(&mut s, KeyCode::Enter).is_empty(), ":{input}");
        assert!(s.status.as_ref().is_some_and(|st| st.text.contains(needle)), ":{input}: {:?}", s.status);
    }
    key(&mut s, ':');
    typed(&mut s, "ctx staging");
    let sent = code(&mut s, KeyCode::Enter);
    assert!(
        matches!(sent.as_slice(), [Effect::Send(Command::SwitchContext { context, .. })] if context == "staging"),
        "{sent:?}"
    );
}

#[test]
fn every_pane_sorts_by_each_of_its_columns_and_marks_the_one_it_sorts_by() {
    let mut s = app(view_at(180), false);
    let mut missing = Vec::new();
    for p in Pane::ALL {
        key(&mut s, char::from(b'1' + p.index() as u8));
        let keys = karpenter_tui::ui::rows::sort_keys(p);
        for k in &keys[1..] {
            key(&mut s, 's');
            let header = karpenter_tui::ui::rows::sort_header(p, k);
            for reversed in [false, true] {
                let shown = screen(&s, 120, 30);
                // The title always names the key with its direction; the column's header carries the arrow too when
                // the column is drawn at this width (after the text, or before it when the column is narrow).
                // One pane at a time (below the grid's size), so a header found on screen is this pane's.
                let title = shown
                    .lines()
                    .find(|l| l.contains(p.title()) && (l.contains('┏') || l.contains('┌')))
                    .unwrap_or_default();
                let shown_key = k.to_string();
                if !(title.contains(&format!("▲{shown_key}")) || title.contains(&format!("▼{shown_key}"))) {
                    missing.push(format!("{p:?} by {k} (reversed {reversed}): the title does not say so"));
                }
                if let Some(h) = &header {
                    let stem: String = h.chars().take(3).collect();
                    let drawn = shown.contains(h.as_str());
                    let marked = shown.contains(&format!("{h}▲"))
                        || shown.contains(&format!("{h}▼"))
                        || shown.contains(&format!("▲{stem}"))
                        || shown.contains(&format!("▼{stem}"));
                    if drawn && !marked {
                        missing.push(format!("{p:?} by {k} (reversed {reversed}): no arrow on {h}"));
                    }
                }
                key(&mut s, 'S');
            }
        }
        // Round to the backend's order again.
        key(&mut s, 's');
        assert_eq!(s.pane(p).sort, 0, "{p:?}");
    }
    assert!(missing.is_empty(), "{missing:#?}");
}
