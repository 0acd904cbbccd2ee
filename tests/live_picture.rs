//! The live dashboard's picture, built from the objects a watch cache would hold. The objects come from the
//! simulated world part-way through the walkthrough (the closest thing to a real cluster's state the tests have),
//! so the picture can be checked against what the world knows: prices, empty nodes, pending pods.

use karpenter_tui::engine::manifests::ClusterObjects;
use karpenter_tui::engine::provisioning::Millis;
use karpenter_tui::protocol::view::{Leadership, Lifecycle, ProposalState};
use karpenter_tui::shell::live_picture::{LiveInfo, picture};
use karpenter_tui::sim::run::{Playback, run_world};
use karpenter_tui::sim::scenario::parse_scenario;
use karpenter_tui::sim::world::World;

const WALKTHROUGH: &str = include_str!("../scenarios/walkthrough.yaml");

/// What a watch cache of the world's cluster would hold.
fn cache_of(w: &World) -> ClusterObjects {
    ClusterObjects {
        nodepools: w.cluster.nodepools.values().map(|o| (**o).clone()).collect(),
        nodeclaims: w.cluster.nodeclaims.values().cloned().collect(),
        nodes: w.cluster.nodes.values().cloned().collect(),
        pods: w.cluster.pods.values().cloned().collect(),
        ..Default::default()
    }
}

fn world_at(minutes: f64) -> (World, Millis) {
    let s = parse_scenario(WALKTHROUGH, "walkthrough.yaml").unwrap();
    let start = Playback::new(&s).unwrap().start;
    let w = run_world(&s, Some(std::time::Duration::from_secs_f64(minutes * 60.0))).unwrap();
    (w, start)
}

fn info() -> LiveInfo {
    LiveInfo {
        context: "prod".into(),
        cluster: "prod-cluster".into(),
        leadership: Leadership::Observing("upstream Karpenter holds its lease".into()),
        clock: "live".into(),
        gates: Default::default(),
        packing: Default::default(),
        version: Default::default(),
        version_source: String::new(),
    }
}

#[test]
fn nodes_are_priced_from_the_catalog_and_match_the_world() {
    let (w, _) = world_at(20.0);
    let m = cache_of(&w);
    let v = picture(&m, w.catalog(), w.now, &info(), &[], 1, None);
    assert_eq!(v.source.context, "prod");
    assert_eq!(v.leadership, Leadership::Observing("upstream Karpenter holds its lease".into()));
    let nodes: Vec<_> = v.nodes.iter().filter(|n| n.state != Lifecycle::Launching).collect();
    assert!(!nodes.is_empty(), "20 inflate pods need nodes at 20m");
    for n in &nodes {
        let rec = w.record.nodes.iter().rev().find(|r| r.name == n.name).expect("a record per node");
        assert!((n.price - rec.price).abs() < 1e-9, "{}: {} vs {}", n.name, n.price, rec.price);
        assert!(n.nodeclaim.is_some(), "{} is matched to its NodeClaim", n.name);
    }
    let total: f64 = nodes.iter().map(|n| n.price).sum();
    assert!((v.cost.per_hour - total).abs() < 1e-9);
    let pool = v.nodepools.iter().find(|p| p.name == "default").expect("the NodePool row");
    assert_eq!(pool.nodes, v.nodes.iter().filter(|n| n.nodepool.as_deref() == Some("default")).count());
    assert_eq!(v.budgets.iter().filter(|b| b.nodepool == "default").count(), 3, "one row per disruption reason");
    let bound: usize = v.nodes.iter().map(|n| n.pods).sum();
    assert!(bound >= 20, "the inflate pods are on the nodes ({bound})");
}

#[test]
fn empty_nodes_show_as_a_dry_run_emptiness_proposal_and_nothing_is_awaiting_approval() {
    // Scaled to zero at 1h; at 1h00m30s the nodes are empty but consolidateAfter (1m) has not passed in the world.
    let (w, _) = world_at(60.5);
    let m = cache_of(&w);
    let empty: Vec<String> = m
        .nodes
        .iter()
        .map(|n| n.metadata.name.clone().unwrap())
        .filter(|n| !m.pods.iter().any(|p| p.node_name() == Some(n)))
        .collect();
    assert!(!empty.is_empty(), "nodes are still there, empty");
    // Looked at five minutes later, they are past consolidateAfter.
    let v = picture(&m, w.catalog(), w.now + 5 * 60_000, &info(), &[], 1, None);
    let d = v.disruptions.first().expect("a proposal");
    assert_eq!(d.state, ProposalState::DryRun);
    assert_eq!(d.method, "emptiness");
    for c in &d.candidates {
        assert!(empty.contains(c), "{c} is one of the empty nodes");
    }
    assert!(v.disruptions.iter().all(|d| !d.state.is_open()), "observing: nothing can be approved");
    assert!(v.events.iter().any(|e| e.reason == "WouldDisrupt"));
    // At the world's own time the same nodes are held back by consolidateAfter, and the node rows say so.
    let v = picture(&m, w.catalog(), w.now, &info(), &[], 2, None);
    assert!(v.disruptions.is_empty());
    let row = v.nodes.iter().find(|n| n.name == empty[0]).unwrap();
    assert!(row.outlook.iter().any(|l| l.contains("consolidateAfter")), "{:?}", row.outlook);
}

#[test]
fn pending_pods_carry_the_engine_reasons() {
    let (w, _) = world_at(20.0);
    let mut m = cache_of(&w);
    let mut pod = m.pods[0].to_pod();
    pod.metadata.name = Some("needs-gpu-zone".into());
    pod.metadata.uid = Some("uid-needs-gpu-zone".into());
    let spec = pod.spec.as_mut().unwrap();
    spec.node_name = None;
    spec.node_selector = Some([("topology.kubernetes.io/zone".to_string(), "mars-1a".to_string())].into());
    pod.status = Some(unschedulable());
    m.pods.push(std::sync::Arc::new(pod.into()));
    let v = picture(&m, w.catalog(), w.now, &info(), &[], 1, None);
    let p = v.pending.iter().find(|p| p.name == "needs-gpu-zone").expect("the pending pod");
    assert_eq!(p.cpu_millis, 500);
    assert!(!p.reasons.is_empty(), "the engine says why");
    assert!(p.reasons.iter().any(|(_, r)| r.contains("mars-1a") || r.contains("zone")), "{:?}", p.reasons);
    assert!(v.events.iter().all(|e| e.reason != "WouldProvision"), "nothing can be launched for it");
}

/// An observing dashboard told the cluster's Karpenter runs `NodeOverlay` shows the gates it was given, the overlays'
/// states and the overlaid prices, as it decides with them.
#[test]
fn an_observer_with_the_overlay_gate_shows_what_the_overlays_do() {
    let (w, _) = world_at(20.0);
    let mut m = cache_of(&w);
    let overlay: karpenter_tui::engine::api::nodeoverlay::NodeOverlay = serde_yaml::from_str(
        "apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\nmetadata: {name: everything-half}\nspec:\n  requirements: [{key: kubernetes.io/os, operator: In, values: [linux]}]\n  priceAdjustment: \"-50%\"\n",
    )
    .expect("overlay");
    m.nodeoverlays.push(overlay);
    let mut with_gate = info();
    with_gate.gates.node_overlay = true;
    let off = picture(&m, w.catalog(), w.now, &info(), &[], 1, None);
    let on = picture(&m, w.catalog(), w.now, &with_gate, &[], 1, None);
    assert!(on.feature_gates.contains(&("NodeOverlay", true)));
    assert!(off.overlays[0].state.starts_with("not evaluated"), "{:?}", off.overlays);
    assert_eq!(on.overlays[0].state, "Applied");
    let priced: Vec<_> = on.nodes.iter().filter(|n| n.price_overlay.is_some()).collect();
    assert!(!priced.is_empty(), "the walkthrough's linux nodes are repriced");
    for n in priced {
        let before = off.nodes.iter().find(|x| x.name == n.name).expect("same node").price;
        assert!((n.price - before / 2.0).abs() < 1e-9, "{}: {} vs {before}", n.name, n.price);
    }
}

/// The picture says which packing strategy provisioning uses: an observer's from its settings, an acting engine's
/// from its controller (which the dashboard's `:packing` switches).
#[test]
fn the_picture_carries_the_packing_strategy_of_whoever_decides() {
    use karpenter_tui::controller::Controller;
    use karpenter_tui::engine::disruption::gate::Mode;
    use karpenter_tui::engine::packing::Packing;
    let (w, _) = world_at(5.0);
    let m = cache_of(&w);
    assert_eq!(picture(&m, w.catalog(), w.now, &info(), &[], 1, None).packing, Packing::Upstream);
    let cost = LiveInfo { packing: Packing::Cost, ..info() };
    assert_eq!(picture(&m, w.catalog(), w.now, &cost, &[], 1, None).packing, Packing::Cost);
    let catalog = std::sync::Arc::new(w.catalog().clone());
    let mut engine = Controller::with_settings(
        catalog,
        karpenter_tui::controller::Settings { mode: Mode::Approve, packing: Packing::Cost, ..Default::default() },
        w.now,
    );
    assert_eq!(engine.packing(), Packing::Cost);
    assert_eq!(engine.scheduler_options().packing, Packing::Cost, "what its provisioning solves are given");
    let acting = LiveInfo { leadership: Leadership::Acting, ..info() };
    assert_eq!(picture(&m, w.catalog(), w.now, &acting, &[], 1, Some(&engine)).packing, Packing::Cost);
    engine.set_packing(Packing::Upstream);
    assert_eq!(engine.scheduler_options().packing, Packing::Upstream);
    assert_eq!(picture(&m, w.catalog(), w.now, &cost, &[], 1, Some(&engine)).packing, Packing::Upstream);
}

/// Pods pending in `m`: copies of its first pod, unbound and marked unschedulable as kube-scheduler leaves them.
fn add_pending(m: &mut ClusterObjects, n: usize) {
    for i in 0..n {
        let mut pod = m.pods[0].to_pod();
        pod.metadata.name = Some(format!("waiting-{i}"));
        pod.metadata.uid = Some(format!("uid-waiting-{i}"));
        pod.spec.as_mut().unwrap().node_name = None;
        pod.status = Some(unschedulable());
        m.pods.push(std::sync::Arc::new(pod.into()));
    }
}

/// Both packing strategies on the live picture: an observer works them out for the pods pending now (when its pass
/// would launch something), an acting engine shows its controller's latest launching pass.
#[test]
fn the_picture_compares_the_packing_strategies_of_whoever_decides() {
    use karpenter_tui::controller::Controller;
    use karpenter_tui::engine::disruption::gate::Mode;
    use karpenter_tui::engine::packing::Packing;
    use karpenter_tui::shell::passes::packing_comparison;
    let (w, _) = world_at(20.0);
    let mut m = cache_of(&w);
    let settled = picture(&m, w.catalog(), w.now, &info(), &[], 1, None);
    assert!(settled.pending.is_empty() && settled.packing_pass.is_none(), "nothing pending: nothing to compare");
    // More than the nodes' spare room: new NodeClaims.
    add_pending(&mut m, 40);
    for packing in [Packing::Upstream, Packing::Cost] {
        let v = picture(&m, w.catalog(), w.now, &LiveInfo { packing, ..info() }, &[], 1, None);
        let row = v.packing_pass.expect("the observer compares the pods pending now");
        assert_eq!((row.at, row.packing), (None, packing));
        assert!(row.pods > 0 && row.pods <= 40, "{row:?}");
        assert_eq!(row.comparison, packing_comparison(&m, w.catalog(), Default::default()), "as plan shows it");
        let c = row.comparison;
        assert!(c.bound.is_some_and(|b| b <= c.cost.per_hour + 1e-9 && b <= c.upstream.per_hour + 1e-9), "{c:?}");
    }

    // Acting: nothing until its controller launches, then that pass.
    let catalog = std::sync::Arc::new(w.catalog().clone());
    let settings = karpenter_tui::controller::Settings { mode: Mode::Approve, ..Default::default() };
    let mut engine = Controller::with_settings(catalog, settings, w.now);
    let acting = LiveInfo { leadership: Leadership::Acting, ..info() };
    assert!(picture(&m, w.catalog(), w.now, &acting, &[], 1, Some(&engine)).packing_pass.is_none());
    let mut t = w.now;
    while engine.last_packing().is_none() && t < w.now + 60_000 {
        engine.plan(&m, t);
        t += 1_000;
    }
    let pass = *engine.last_packing().expect("the controller's batch window closed and it launched");
    let row = picture(&m, w.catalog(), t, &acting, &[], 1, Some(&engine)).packing_pass.expect("its pass");
    assert_eq!(
        (row.at, row.packing, row.pods, row.comparison),
        (Some(pass.at), Packing::Upstream, pass.pods, pass.comparison)
    );
    assert!(pass.comparison.upstream.nodes > 0);
}

/// Acting, the picture reads the controller's latest solve rather than solving again: a pod the controller has not
/// solved for yet carries no reason (its batch window is open), and after the solve, the reasons it gave. Pods it
/// launched for are being provisioned (no reason), and nothing is "would" anything.
#[test]
fn an_acting_picture_shows_the_controllers_reasons() {
    use karpenter_tui::controller::Controller;
    use karpenter_tui::engine::disruption::gate::Mode;
    let (w, _) = world_at(20.0);
    let mut m = cache_of(&w);
    add_pending(&mut m, 3);
    let mut pod = m.pods[0].to_pod();
    pod.metadata.name = Some("needs-mars".into());
    pod.metadata.uid = Some("uid-needs-mars".into());
    let spec = pod.spec.as_mut().unwrap();
    spec.node_name = None;
    spec.node_selector = Some([("topology.kubernetes.io/zone".to_string(), "mars-1a".to_string())].into());
    pod.status = m.pods.last().unwrap().status.clone();
    m.pods.push(std::sync::Arc::new(pod.into()));

    let catalog = std::sync::Arc::new(w.catalog().clone());
    let settings = karpenter_tui::controller::Settings { mode: Mode::Approve, ..Default::default() };
    let mut engine = Controller::with_settings(catalog, settings, w.now);
    let acting = LiveInfo { leadership: Leadership::Acting, ..info() };
    let before = picture(&m, w.catalog(), w.now, &acting, &[], 1, Some(&engine));
    assert!(engine.last_solve().is_none());
    assert!(before.pending.iter().all(|p| p.reasons.is_empty()), "no solve yet: {:?}", before.pending);
    let mut t = w.now;
    while engine.last_solve().is_none() && t < w.now + 60_000 {
        engine.plan(&m, t);
        t += 1_000;
    }
    let solved = engine.last_solve().expect("the batch window closed and the controller solved").clone();
    let v = picture(&m, w.catalog(), t, &acting, &[], 1, Some(&engine));
    let mars = v.pending.iter().find(|p| p.name == "needs-mars").expect("still pending");
    let theirs = solved.pending_reasons();
    let key = ("default".to_string(), "needs-mars".to_string());
    assert_eq!(Some(&mars.reasons), theirs.get(&key), "the controller's reasons, as it gave them");
    assert!(!mars.reasons.is_empty());
    for p in v.pending.iter().filter(|p| p.name.starts_with("waiting-")) {
        assert!(p.reasons.is_empty(), "launched for: being provisioned, {p:?}");
    }
    assert!(v.events.iter().all(|e| e.reason != "WouldProvision" && e.reason != "WouldDisrupt"), "{:?}", v.events);
}

/// A pending pod's status as kube-scheduler leaves it when no node fits.
fn unschedulable() -> k8s_openapi::api::core::v1::PodStatus {
    k8s_openapi::api::core::v1::PodStatus {
        phase: Some("Pending".into()),
        conditions: Some(vec![k8s_openapi::api::core::v1::PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some("Unschedulable".into()),
            ..Default::default()
        }]),
        ..Default::default()
    }
}
