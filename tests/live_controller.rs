//! The live controller's planner in a closed loop: its effects are applied to an in-memory cluster with the API
//! server's semantics that matter here (generated names, finalizers turning deletes into deletion timestamps,
//! node objects as KWOK instances), while the simulated Deployment controller and scheduler play the rest of the
//! cluster. This is the same story the real-cluster suite tells against an API server: pending pods → NodeClaims
//! → nodes → pods bound; scale to zero → a proposal → approve → nodes removed; a NodePool edit → drift.

use crate::harness;

use harness::{Harness, manifests};
use karpenter_tui::controller::cloud::CloudInstance;
use karpenter_tui::controller::{CommandState, Effect};
use karpenter_tui::engine::api::nodeclaim::{COND_DRIFTED, COND_INITIALIZED, COND_REGISTERED};
use karpenter_tui::engine::disruption::gate::Mode;
use karpenter_tui::engine::labels;
use karpenter_tui::engine::lifecycle::ms_time;
use karpenter_tui::engine::manifests::ClusterObjects;

#[test]
fn pending_pods_get_nodeclaims_nodes_and_are_bound() {
    let mut h = Harness::new(Mode::Approve);
    h.run_until("all six pods bound", 120, Harness::all_bound);
    h.run_until("every claim initialized", 10, |h| h.cluster.nodeclaims.values().all(|c| c.is_true(COND_INITIALIZED)));
    // 6 × 1 CPU on 4-CPU KWOK types: more than one node, and no more claims than nodes (no duplicates).
    assert!(h.cluster.nodeclaims.len() >= 2, "{:?}", h.cluster.nodeclaims.keys());
    assert_eq!(h.cluster.nodeclaims.len(), h.cluster.nodes.len());
    for c in h.cluster.nodeclaims.values() {
        assert!(c.is_true(COND_REGISTERED) && c.is_true(COND_INITIALIZED), "{} went through its lifecycle", c.name());
        assert!(c.name().starts_with("default-"));
    }
    for n in h.cluster.nodes.values() {
        let l = n.metadata.labels.as_ref().unwrap();
        assert_eq!(l.get(labels::NODEPOOL).map(String::as_str), Some("default"));
        assert_eq!(l.get(labels::INITIALIZED).map(String::as_str), Some("true"));
        let taints = n.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
        assert!(!taints.iter().any(|t| t.key == labels::TAINT_UNREGISTERED), "registration removed the taint");
        assert!(n.metadata.finalizers.iter().flatten().any(|f| f == labels::TERMINATION_FINALIZER));
    }
    // Settled: nothing more to create.
    let claims = h.cluster.nodeclaims.len();
    for _ in 0..30 {
        h.tick();
    }
    assert_eq!(h.cluster.nodeclaims.len(), claims);
}

#[test]
fn scale_to_zero_proposes_then_approval_removes_the_nodes() {
    let mut h = Harness::new(Mode::Approve);
    h.run_until("all pods bound", 120, Harness::all_bound);
    h.scale(0);
    h.run_until("an emptiness proposal", 120, |h| {
        h.controller.records().iter().any(|r| r.state == CommandState::AwaitingApproval)
    });
    // Waiting for approval changes nothing.
    let nodes = h.cluster.nodes.len();
    for _ in 0..20 {
        h.tick();
    }
    assert_eq!(h.cluster.nodes.len(), nodes, "nothing is disrupted without approval");
    let rec = h.controller.records().iter().find(|r| r.state == CommandState::AwaitingApproval).unwrap().clone();
    assert_eq!(rec.command.method.as_str(), "emptiness");
    let m = manifests(&h.cluster);
    let (effects, msg) = h.controller.approve(&m, &rec.id, h.now).unwrap();
    assert!(msg.contains("started"), "{msg}");
    assert!(effects.iter().any(
        |e| matches!(e, Effect::SyncNode { taints: Some(taints), .. } if taints.iter().any(|t| t.key == labels::TAINT_DISRUPTED))
    ));
    h.apply(effects);
    let candidates = rec.command.node_names();
    h.run_until("the candidates gone", 120, |h| candidates.iter().all(|c| !h.cluster.nodes.contains_key(c)));
    h.run_until("their claims finalized", 60, |h| h.cluster.nodeclaims.len() == h.cluster.nodes.len());
    assert!(h.controller.records().iter().any(|r| r.id == rec.id && r.state == CommandState::Executed));
    for c in &candidates {
        assert!(h.events.iter().any(|(o, r, _)| o == c && r == "DisruptionTerminating"), "an event says why {c} went");
    }
}

#[test]
fn pods_no_nodepool_can_take_get_one_failed_scheduling_event_not_one_per_tick() {
    let mut h = Harness::new(Mode::Approve);
    let text = r#"
apiVersion: v1
kind: Pod
metadata: {name: huge, namespace: default, uid: uid-huge}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "64"}}}]
status:
  phase: Pending
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
"#;
    h.cluster.apply(&ClusterObjects::parse(text, "huge.yaml").unwrap());
    h.run_until("the others bound", 120, |h| h.cluster.pods.values().filter(|p| p.node_name.is_some()).count() == 6);
    for _ in 0..30 {
        h.tick();
    }
    let failed: Vec<_> = h.events.iter().filter(|(o, r, _)| o == "huge" && r == "FailedScheduling").collect();
    assert_eq!(failed.len(), 1, "{failed:?}");
    assert!(failed[0].2.contains("Failed to schedule pod"), "{}", failed[0].2);
}

#[test]
fn editing_the_nodepool_drifts_its_claims_and_auto_mode_replaces_them() {
    let mut h = Harness::new(Mode::Auto);
    h.run_until("all pods bound", 120, Harness::all_bound);
    let before: Vec<String> = h.cluster.nodeclaims.keys().cloned().collect();
    // The edit: only 8-CPU types from now on.
    for p in h.cluster.nodepools.values_mut() {
        for r in &mut p.spec.template.spec.requirements {
            if r.key == "karpenter.kwok.sh/instance-cpu" {
                r.values = ["8".to_string()].into();
            }
        }
    }
    h.run_until("a claim drifted", 30, |h| h.cluster.nodeclaims.values().any(|c| c.is_true(COND_DRIFTED)));
    h.run_until("every old claim replaced", 900, |h| {
        before.iter().all(|c| !h.cluster.nodeclaims.contains_key(c)) && h.all_bound()
    });
    for n in h.cluster.nodes.values() {
        assert_eq!(
            n.metadata.labels.as_ref().unwrap().get("karpenter.kwok.sh/instance-cpu").map(String::as_str),
            Some("8")
        );
    }
}

#[test]
fn a_disrupted_taint_left_by_a_stopped_process_is_removed_and_nodes_in_commands_are_not() {
    let mut h = Harness::new(Mode::Approve);
    h.run_until("all pods bound", 120, Harness::all_bound);
    let victim = h.cluster.nodes.keys().next().unwrap().clone();
    let n = h.cluster.nodes.get_mut(&victim).unwrap();
    n.spec
        .get_or_insert_with(Default::default)
        .taints
        .get_or_insert_with(Vec::new)
        .push(karpenter_tui::engine::termination::disrupted_taint());
    h.tick();
    let taints = h.cluster.nodes[&victim].spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    assert!(!taints.iter().any(|t| t.key == labels::TAINT_DISRUPTED), "the stale taint is gone");

    // A node an approved command is draining keeps its taint.
    h.scale(0);
    h.run_until("a proposal", 120, |h| {
        h.controller.records().iter().any(|r| r.state == CommandState::AwaitingApproval)
    });
    let rec = h.controller.records().iter().find(|r| r.state == CommandState::AwaitingApproval).unwrap().clone();
    let m = manifests(&h.cluster);
    let (effects, _) = h.controller.approve(&m, &rec.id, h.now).unwrap();
    h.apply(effects);
    h.tick();
    let node = &rec.command.candidates[0].node;
    if let Some(n) = h.cluster.nodes.get(node) {
        let taints = n.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
        assert!(taints.iter().any(|t| t.key == labels::TAINT_DISRUPTED), "the command's node keeps its taint");
    }
}

#[test]
fn nodes_and_claims_of_another_cloud_are_never_touched() {
    let mut h = Harness::new(Mode::Auto);
    h.scale(0);
    let text = r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: default-ec2aa
  labels: {karpenter.sh/nodepool: default}
  finalizers: [karpenter.sh/termination]
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]
status:
  providerID: aws:///us-east-1a/i-0123456789abcdef0
  conditions:
    - {type: Launched, status: "True", reason: Launched, message: "", lastTransitionTime: "2023-11-14T22:00:00Z"}
    - {type: Registered, status: "True", reason: Registered, message: "", lastTransitionTime: "2023-11-14T22:00:00Z"}
    - {type: Initialized, status: "True", reason: Initialized, message: "", lastTransitionTime: "2023-11-14T22:00:00Z"}
---
apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-0-1.ec2.internal
  labels: {karpenter.sh/nodepool: default, karpenter.sh/registered: "true", karpenter.sh/initialized: "true"}
  finalizers: [karpenter.sh/termination]
spec:
  providerID: aws:///us-east-1a/i-0123456789abcdef0
status:
  allocatable: {cpu: "4", memory: 16Gi, pods: "110"}
  conditions: [{type: Ready, status: "True"}]
"#;
    h.cluster.apply(&ClusterObjects::parse(text, "ec2.yaml").unwrap());
    // Empty and old, in auto mode: a KWOK node like it would be consolidated; this one is left alone.
    for _ in 0..120 {
        h.tick();
    }
    assert!(h.cluster.nodeclaims["default-ec2aa"].metadata.deletion_timestamp.is_none());
    assert!(
        h.controller.records().is_empty(),
        "{:?}",
        h.controller.records().iter().map(|r| r.command.summary()).collect::<Vec<_>>()
    );
    // Even deleted by someone else, it is not drained or finalized by this cloud.
    h.cluster.nodes.get_mut("ip-10-0-0-1.ec2.internal").unwrap().metadata.deletion_timestamp = Some(ms_time(h.now));
    h.cluster.nodeclaims.get_mut("default-ec2aa").unwrap().metadata.deletion_timestamp = Some(ms_time(h.now));
    let m = manifests(&h.cluster);
    let effects = h.controller.plan(&m, h.now + 1_000);
    // Only the NodePool's own status may change (its node count); nothing touches the claim or the node.
    let touching: Vec<String> =
        effects.iter().filter(|e| !matches!(e, Effect::PatchNodePoolStatus { .. })).map(Effect::describe).collect();
    assert!(touching.is_empty(), "{touching:?}");
    // Nor does this cloud write pod-event times on another provider's claim.
    h.cluster.nodeclaims.get_mut("default-ec2aa").unwrap().metadata.deletion_timestamp = None;
    h.cluster.nodes.get_mut("ip-10-0-0-1.ec2.internal").unwrap().metadata.deletion_timestamp = None;
    let mut m = manifests(&h.cluster);
    h.controller.plan(&m, h.now + 2_000);
    let text = "apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: default, uid: uid-web}\nspec:\n  nodeName: ip-10-0-0-1.ec2.internal\n  containers: [{name: c, image: x}]\nstatus: {phase: Running}\n";
    m.pods.extend(ClusterObjects::parse(text, "pod.yaml").unwrap().pods);
    let effects = h.controller.plan(&m, h.now + 30_000);
    assert!(
        !effects.iter().any(|e| matches!(e, Effect::PatchClaimStatus { name, .. } if name == "default-ec2aa")),
        "{:?}",
        effects.iter().map(Effect::describe).collect::<Vec<_>>()
    );
}

#[test]
fn nodepools_get_upstreams_status_and_claims_a_ready_condition() {
    let mut h = Harness::new(Mode::Approve);
    h.run_until("all six pods bound", 120, Harness::all_bound);
    h.run_until("every claim initialized", 10, |h| h.cluster.nodeclaims.values().all(|c| c.is_true(COND_INITIALIZED)));
    h.tick();
    let pool = &h.cluster.nodepools["default"];
    let status = pool.status.as_ref().expect("a status");
    assert_eq!(status.nodes, Some(h.cluster.nodes.len() as i64));
    assert_eq!(status.resources.get("nodes").map(|q| q.0.clone()), Some(h.cluster.nodes.len().to_string()));
    let cpu: i64 = h.cluster.nodes.len() as i64 * 4;
    assert_eq!(status.resources.get("cpu").map(|q| q.0.clone()), Some(cpu.to_string()), "4-CPU KWOK nodes");
    for t in ["ValidationSucceeded", "NodeClassReady", "NodeRegistrationHealthy", "Ready"] {
        let c = status.conditions.iter().find(|c| c.type_ == t).unwrap_or_else(|| panic!("{t}"));
        assert_eq!(c.status, "True", "{t}: {c:?}");
    }
    for c in h.cluster.nodeclaims.values() {
        assert!(c.is_true("Ready"), "{} is Ready", c.name());
    }
    // Settled: the status is not written again while nothing changes.
    let m = manifests(&h.cluster);
    let effects = h.controller.plan(&m, h.now + 1_000);
    assert!(!effects.iter().any(|e| matches!(e, Effect::PatchNodePoolStatus { .. })));
}

#[test]
fn nodes_that_cannot_be_disrupted_say_why_in_events_without_repeats() {
    let mut h = Harness::new(Mode::Approve);
    h.run_until("all pods bound", 120, Harness::all_bound);
    let (key, node) = h.cluster.pods.iter().find_map(|(k, p)| Some((k.clone(), p.node_name.clone()?))).unwrap();
    let pod = h.cluster.pods.get_mut(&key).unwrap();
    pod.metadata
        .annotations
        .get_or_insert_with(Default::default)
        .insert(labels::ANNOTATION_DO_NOT_DISRUPT.into(), "true".into());
    for _ in 0..400 {
        h.tick();
    }
    // KWOK nodes are named after their claims: one event on each object, once in 400 s, naming the pod.
    for kind in ["Node", "NodeClaim"] {
        let prefix = format!("Cannot disrupt {kind}:");
        let blocked: Vec<_> = h
            .events
            .iter()
            .filter(|(o, r, m)| o == &node && r == "DisruptionBlocked" && m.starts_with(&prefix))
            .collect();
        assert_eq!(blocked.len(), 1, "once, not every round: {blocked:?}");
        assert!(blocked[0].2.contains(&key.1), "{}", blocked[0].2);
    }
}

#[test]
fn events_stay_within_the_api_servers_limit_when_a_hundred_nodes_go_at_once() {
    let objects = harness::OBJECTS
        .replace("consolidateAfter: 30s}", "consolidateAfter: 30s, budgets: [{nodes: '100%'}]}")
        .replace("replicas: 6", "replicas: 100")
        .replace("cpu: \"1\", memory: 1Gi", "cpu: \"3\", memory: 1Gi");
    let mut h = Harness::with_objects(Mode::Approve, &objects);
    h.run_until("a hundred pods bound", 300, Harness::all_bound);
    assert_eq!(h.cluster.nodes.len(), 100, "one 4-CPU node per 3-CPU pod");
    h.scale(0);
    h.run_until("an emptiness proposal", 120, |h| {
        h.controller.records().iter().any(|r| r.state == CommandState::AwaitingApproval)
    });
    let rec = h.controller.records().iter().find(|r| r.state == CommandState::AwaitingApproval).unwrap().clone();
    assert_eq!(rec.command.candidates.len(), 100);
    let m = manifests(&h.cluster);
    let (effects, _) = h.controller.approve(&m, &rec.id, h.now).unwrap();
    let terminating: Vec<&String> = effects
        .iter()
        .filter_map(|e| match e {
            Effect::Event { reason, message, .. } if reason == "DisruptionTerminating" => Some(message),
            _ => None,
        })
        .collect();
    assert_eq!(terminating.len(), 100, "one per node");
    for m in terminating {
        assert!(m.chars().count() <= 1024, "{} characters: {m}", m.chars().count());
        assert!(m.contains("and 97 other(s)"), "{m}");
    }
    let long = karpenter_tui::controller::fit_event_message("x".repeat(5_000));
    assert!(long.chars().count() <= 1024 && long.ends_with("(4016 more characters)"), "{long}");
}

#[test]
fn an_unreadable_do_not_disrupt_is_ignored_and_its_pod_told_once() {
    let mut h = Harness::new(Mode::Approve);
    h.run_until("all pods bound", 120, Harness::all_bound);
    let key = h.cluster.pods.keys().next().cloned().unwrap();
    if let Some(p) = h.cluster.pods.get_mut(&key) {
        p.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert("karpenter.sh/do-not-disrupt".into(), "forever".into());
    }
    // Two rounds of explanations (every 5 minutes); the same Event is not sent again within 10 minutes.
    for _ in 0..500 {
        h.tick();
    }
    let told: Vec<_> = h.events.iter().filter(|(o, r, _)| *o == key.1 && r == "InvalidDoNotDisrupt").collect();
    assert_eq!(told.len(), 1, "one warning, not one per round: {told:?}");
    assert!(told[0].2.contains("\"forever\""), "{}", told[0].2);
    // Ignored: nothing says the node is protected by it.
    assert!(
        !h.events.iter().any(|(_, r, m)| r == "DisruptionBlocked" && m.contains("do-not-disrupt")),
        "{:?}",
        h.events
    );
}

/// Upstream's `nodeclaim/garbagecollection`: a registered claim whose instance the cloud no longer lists goes, unless
/// its node still reports Ready (the kubelet runs, so the listing is what's wrong).
#[test]
fn a_claim_whose_instance_is_gone_is_collected_unless_its_node_is_ready() {
    let mut h = Harness::new(Mode::Approve);
    h.run_until("all pods bound", 120, Harness::all_bound);
    h.run_until("every claim registered", 10, |h| h.cluster.nodeclaims.values().all(|c| c.is_true(COND_REGISTERED)));
    let victim = h.cluster.nodeclaims.values().next().unwrap().clone();
    let pid = victim.provider_id().unwrap().to_string();
    let instance = |p: &str| CloudInstance {
        provider_id: p.to_string(),
        launched_at: Some(h.now),
        terminating: false,
        capacity_type: None,
    };
    let listed = |h: &Harness| -> Vec<CloudInstance> {
        h.cluster
            .nodeclaims
            .values()
            .filter_map(|c| c.provider_id())
            .filter(|p| *p != pid)
            .map(|p| CloudInstance {
                provider_id: p.to_string(),
                launched_at: Some(h.now),
                terminating: false,
                capacity_type: None,
            })
            .collect()
    };
    // Every instance listed: nothing to collect.
    let all: Vec<CloudInstance> = h.cluster.nodeclaims.values().filter_map(|c| c.provider_id()).map(instance).collect();
    assert!(h.controller.garbage_collect(&manifests(&h.cluster).view(), &all, h.now).is_empty());
    // Its instance unlisted but its node Ready: kept.
    assert!(h.controller.garbage_collect(&manifests(&h.cluster).view(), &listed(&h), h.now).is_empty());
    // The node stops reporting Ready: collected.
    let node = h
        .cluster
        .nodes
        .values()
        .find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(pid.as_str()))
        .unwrap()
        .metadata
        .name
        .clone()
        .unwrap();
    for c in h.cluster.nodes.get_mut(&node).unwrap().status.as_mut().unwrap().conditions.as_mut().unwrap() {
        if c.type_ == "Ready" {
            c.status = "Unknown".into();
        }
    }
    let effects = h.controller.garbage_collect(&manifests(&h.cluster).view(), &listed(&h), h.now);
    assert_eq!(
        effects,
        vec![Effect::DeleteNodeClaim {
            name: victim.name().to_string(),
            reason: karpenter_tui::engine::lifecycle::DeleteReason::GarbageCollected
        }]
    );
    h.apply(effects);
    assert!(h.cluster.nodeclaims.get(victim.name()).is_none_or(|c| c.metadata.deletion_timestamp.is_some()));
}

/// What the live loop relies on to sleep: a controller run only when the cluster changed or its `next_wake` is due
/// does, second by second, exactly what one run every second does — scale-out, registration, a proposal after a
/// scale to zero, approval, drain and removal — while running far less often once the cluster is settled.
#[test]
fn a_controller_run_only_on_changes_and_at_its_next_wake_matches_one_run_every_second() {
    let mut eager = Harness::new(Mode::Approve);
    let mut lazy = Harness::new(Mode::Approve);
    lazy.lazy = true;
    let picture = |h: &Harness| {
        let claims: Vec<(String, bool)> =
            h.cluster.nodeclaims.values().map(|c| (c.name().to_string(), c.is_true(COND_INITIALIZED))).collect();
        let nodes: Vec<&String> = h.cluster.nodes.keys().collect();
        let bound = h.cluster.pods.values().filter(|p| p.node_name.is_some()).count();
        let records: Vec<(String, String, Vec<String>, CommandState)> = h
            .controller
            .records()
            .iter()
            .map(|r| (r.id.clone(), r.command.method.as_str().to_string(), r.command.node_names(), r.state.clone()))
            .collect();
        format!("{claims:?} {nodes:?} {bound} {records:?}")
    };
    let step = |eager: &mut Harness, lazy: &mut Harness, secs: u32| {
        for _ in 0..secs {
            eager.tick();
            lazy.tick();
            assert_eq!(picture(eager), picture(lazy), "at {} (the lazy one's next wake: {:?})", eager.now, lazy.wake());
        }
    };
    step(&mut eager, &mut lazy, 90);
    assert!(eager.all_bound() && lazy.all_bound());
    let before = lazy.runs;
    step(&mut eager, &mut lazy, 60);
    assert!(
        lazy.runs - before <= 15,
        "a settled cluster: {} runs in 60 s rather than 60 (next wake {:?} at {})",
        lazy.runs - before,
        lazy.controller.next_wake(lazy.now),
        lazy.now
    );

    eager.scale(0);
    lazy.scale(0);
    for _ in 0..120 {
        step(&mut eager, &mut lazy, 1);
        if eager.controller.records().iter().any(|r| r.state == CommandState::AwaitingApproval) {
            break;
        }
    }
    step(&mut eager, &mut lazy, 40);
    let rec = eager.controller.records().iter().find(|r| r.state == CommandState::AwaitingApproval).unwrap().clone();
    for h in [&mut eager, &mut lazy] {
        let m = manifests(&h.cluster);
        let (effects, _) = h.controller.approve(&m, &rec.id, h.now).unwrap();
        h.apply(effects);
        h.poke();
    }
    step(&mut eager, &mut lazy, 120);
    let candidates = rec.command.node_names();
    assert!(candidates.iter().all(|c| !lazy.cluster.nodes.contains_key(c)), "approved and carried out");
    assert!(lazy.runs < eager.runs / 2, "{} runs against {}", lazy.runs, eager.runs);
}

/// An instance no NodeClaim holds (a crash between the launch and recording it) is terminated with its Node once it
/// is over 30 s old; a young one, one a claim holds, and one already shutting down are left alone.
#[test]
fn instances_no_claim_holds_are_terminated_with_their_nodes_once_old_enough() {
    let mut h = Harness::new(Mode::Approve);
    h.run_until("all pods bound", 120, Harness::all_bound);
    let held = h.cluster.nodeclaims.values().next().unwrap().provider_id().unwrap().to_string();
    let now = h.now;
    let inst = |p: &str, age: i64, terminating: bool| CloudInstance {
        provider_id: p.to_string(),
        launched_at: Some(now - age),
        terminating,
        capacity_type: None,
    };
    let stray = "kwok://stray-1";
    let mut m = manifests(&h.cluster);
    let node: k8s_openapi::api::core::v1::Node =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "stray-1"}, "spec": {"providerID": stray}}))
            .unwrap();
    m.nodes.push(node.into());
    let list = vec![
        inst(&held, 600_000, false),
        inst(stray, 31_000, false),
        inst("kwok://young-1", 5_000, false),
        inst("kwok://going-1", 600_000, true),
    ];
    let effects = h.controller.garbage_collect(&m.view(), &list, now);
    assert_eq!(
        effects,
        vec![Effect::DeleteInstance { provider_id: stray.into() }, Effect::DeleteNode { name: "stray-1".into() }]
    );
}

#[test]
fn a_capacity_buffer_keeps_room_on_the_live_path() {
    // The live planner (Controller::plan over a watch-cache read) with the CapacityBuffer gate: a buffer of 50% of
    // the Deployment (3 pods of 1 CPU) resolves from the Deployment, its status is written, and its virtual pods
    // get room beside the Deployment's own pods.
    let objects = format!(
        "{}---\napiVersion: autoscaling.x-k8s.io/v1beta1\nkind: CapacityBuffer\nmetadata: {{name: headroom, namespace: default}}\nspec: {{scalableRef: {{apiGroup: apps, kind: Deployment, name: inflate}}, percentage: 50}}\n",
        harness::OBJECTS
    );
    let mut h = Harness::with_objects(Mode::Approve, &objects);
    let mut settings = karpenter_tui::controller::Settings::default();
    settings.gates.capacity_buffer = true;
    settings.mode = Mode::Approve;
    h.controller = karpenter_tui::controller::Controller::with_settings(h.catalog.clone(), settings, h.now);
    h.run_until("all six pods bound", 120, Harness::all_bound);
    let key = ("default".to_string(), "headroom".to_string());
    h.run_until("the buffer fits existing capacity", 120, |h| {
        h.cluster.capacitybuffers[&key].condition("Provisioning").is_some_and(|c| c.status == "True")
    });
    let b = h.cluster.capacitybuffers[&key].clone();
    assert_eq!(b.status.as_ref().unwrap().replicas, Some(3));
    assert_eq!(
        b.condition("ReadyForProvisioning").map(|c| c.reason.clone().unwrap_or_default()).as_deref(),
        Some("Resolved")
    );
    // 6 + 3 CPU of 1 CPU pods on 4-CPU KWOK nodes (3 pods each): three nodes, where the pods alone need two.
    assert_eq!(h.cluster.nodes.len(), 3, "{:?}", h.cluster.nodes.keys());
    // The virtual pods are not pods: none in the cluster, no events about them.
    assert!(h.cluster.pods.keys().all(|(_, n)| !n.starts_with("capacity-buffer-")));
    assert!(h.events.iter().all(|(o, _, _)| !o.contains("capacity-buffer-")), "{:?}", h.events);
    // Settled: emptiness does not take the node the buffer holds, and nothing more is created.
    for _ in 0..120 {
        h.tick();
    }
    assert_eq!(h.cluster.nodes.len(), 3);
    assert!(h.controller.records().is_empty(), "{:?}", h.controller.records());
}

#[test]
fn a_launch_the_cloud_can_never_make_ends_its_claim_once_and_its_types_are_left_out() {
    use karpenter_tui::controller::Outcome;
    use karpenter_tui::engine::lifecycle::claim_instance_types;
    let mut h = Harness::new(Mode::Approve);
    h.run_until("a claim", 60, |h| !h.cluster.nodeclaims.is_empty());
    let claim = h.cluster.nodeclaims.values().next().expect("a claim").clone();
    let refused = claim_instance_types(&claim);
    assert!(!refused.is_empty(), "a claim names its instance types");
    // What an executor reports when the cloud can launch none of the claim's types; the claim is then gone.
    let impossible =
        Outcome::LaunchImpossible { claim: Box::new((*claim).clone()), message: "nothing holds it".into() };
    h.controller.outcome(impossible, h.now);
    h.cluster.nodeclaims.remove(claim.name());
    let before: Vec<String> = h.cluster.nodeclaims.keys().cloned().collect();
    // Its instance, if it got one before the test stepped in, goes with it, and the pods on it.
    if let Some(pid) = claim.provider_id() {
        let gone: Vec<String> = h
            .cluster
            .nodes
            .iter()
            .filter(|(_, n)| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(pid))
            .map(|(k, _)| k.clone())
            .collect();
        for node in gone {
            h.cluster.nodes.remove(&node);
            h.cluster.pods.retain(|_, p| p.node_name() != Some(node.as_str()));
        }
    }
    // A minute on: whatever is created for the pods left pending offers none of the refused types (if every type
    // that fits them was refused, they stay pending rather than cycle through claims).
    for _ in 0..60 {
        h.tick();
    }
    for c in h.cluster.nodeclaims.values().filter(|c| !before.iter().any(|b| b == c.name())) {
        let again: Vec<String> = claim_instance_types(c).into_iter().filter(|t| refused.contains(t)).collect();
        assert!(again.is_empty(), "{} offers {again:?} again", c.name());
    }
    let said: Vec<&(String, String, String)> =
        h.events.iter().filter(|(o, r, _)| o == claim.name() && r == "LaunchImpossible").collect();
    assert_eq!(said.len(), 1, "one event on the claim: {:?}", h.events);
    assert!(said[0].2.contains("nothing holds it") && said[0].2.contains("NodePool default"), "{}", said[0].2);
}
