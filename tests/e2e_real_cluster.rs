//! End to end against a real API server, with the KWOK cloud (nodes are Node objects; install KWOK's controller so
//! they stay Ready). Ignored by default: it changes the cluster it is pointed at, so use a disposable one (kind,
//! k3d, a test EKS cluster without upstream Karpenter running):
//!
//!     KARPENTER_TUI_E2E_KUBECONFIG=~/.kube/kind cargo test --test integration e2e_real_cluster -- --ignored --nocapture
//!
//! It installs deploy/crds/, then runs the acting engine in this process: pending pods → NodeClaims → nodes →
//! pods bound; scale to zero → an emptiness proposal → approved → nodes removed; a NodePool edit → Drifted.
//! Everything it created is removed at the end, also on failure.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Node};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};

use karpenter_tui::cli::live_dashboard::{CloudChoice, LiveOptions, Prepared, prepare};
use karpenter_tui::controller::CommandState;
use karpenter_tui::engine::api::nodeclaim::COND_DRIFTED;
use karpenter_tui::engine::api::{NodeClaim, NodePool};
use karpenter_tui::engine::catalog::kwok::kwok_catalog;
use karpenter_tui::engine::disruption::gate::Mode;
use karpenter_tui::engine::labels;
use karpenter_tui::kube::connect::ConnectOptions;
use karpenter_tui::kube::leader::Role;
use karpenter_tui::shell::acting::Acting;

const ENV: &str = "KARPENTER_TUI_E2E_KUBECONFIG";
const MANAGER: &str = "karpenter-tui-e2e";

fn nodepool(name: &str, cpu: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
        "spec": {
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "10s",
                           "budgets": [{"nodes": "100%"}]},
            "limits": {"cpu": "64"},
            "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": name},
                "requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
                    {"key": "karpenter.kwok.sh/instance-cpu", "operator": "In", "values": [cpu]},
                ],
            }},
        },
    })
}

fn deployment(ns: &str, pool: &str, replicas: i32) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "inflate", "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "inflate"}},
            "template": {
                "metadata": {"labels": {"app": "inflate"}},
                "spec": {
                    "nodeSelector": {"karpenter.sh/nodepool": pool},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.9",
                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}],
                },
            },
        },
    })
}

async fn apply<K>(api: &Api<K>, name: &str, v: &serde_json::Value)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch(name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(v))
        .await
        .unwrap_or_else(|e| panic!("apply {name}: {e}"));
}

struct Run {
    p: Prepared,
    acting: Acting,
}

impl Run {
    /// Ticks the engine once a second until `cond` holds.
    async fn until<F, Fut>(&mut self, what: &str, limit: Duration, mut cond: F) -> Result<(), String>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let start = Instant::now();
        while start.elapsed() < limit {
            if cond().await {
                eprintln!("e2e: {what} after {:.0}s", start.elapsed().as_secs_f64());
                return Ok(());
            }
            if *self.p.role.borrow() == Role::Leader {
                let m = self.p.watches.cache.lock().unwrap().manifests();
                let report = self.acting.tick(&m, chrono::Utc::now().timestamp_millis()).await;
                for d in report.done {
                    eprintln!("e2e:   {d}");
                }
                for e in report.errors {
                    eprintln!("e2e:   error: {e}");
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        Err(format!("e2e: {what}: not within {limit:?}"))
    }
}

async fn pool_nodes(nodes: &Api<Node>, pool: &str) -> Vec<Node> {
    let lp = ListParams::default().labels(&format!("{}={pool}", labels::NODEPOOL));
    nodes.list(&lp).await.map(|l| l.items).unwrap_or_default()
}

async fn pool_claims(claims: &Api<NodeClaim>, pool: &str) -> Vec<NodeClaim> {
    let lp = ListParams::default().labels(&format!("{}={pool}", labels::NODEPOOL));
    claims.list(&lp).await.map(|l| l.items).unwrap_or_default()
}

/// Removes what the test made, finalizers included, so a failed run leaves the cluster clean.
async fn clean_up(client: kube::Client, ns: &str, pool: &str) {
    let _ = Api::<Namespace>::all(client.clone()).delete(ns, &DeleteParams::default()).await;
    let _ = Api::<NodePool>::all(client.clone()).delete(pool, &DeleteParams::default()).await;
    let strip = serde_json::json!({"metadata": {"finalizers": null}});
    let claims: Api<NodeClaim> = Api::all(client.clone());
    for c in pool_claims(&claims, pool).await {
        let _ = claims.patch(c.name(), &PatchParams::default(), &Patch::Merge(&strip)).await;
        let _ = claims.delete(c.name(), &DeleteParams::default()).await;
    }
    let nodes: Api<Node> = Api::all(client.clone());
    for n in pool_nodes(&nodes, pool).await {
        let name = n.metadata.name.clone().unwrap_or_default();
        let _ = nodes.patch(&name, &PatchParams::default(), &Patch::Merge(&strip)).await;
        let _ = nodes.delete(&name, &DeleteParams::default()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a real cluster: set KARPENTER_TUI_E2E_KUBECONFIG"]
async fn kwok_loop_on_a_real_api_server() {
    let kubeconfig =
        std::env::var_os(ENV).unwrap_or_else(|| panic!("set {ENV} to a kubeconfig of a disposable cluster"));
    let suffix = format!("{:x}", chrono::Utc::now().timestamp() % 0xffffff);
    let (ns, pool) = (format!("karpenter-tui-e2e-{suffix}"), format!("e2e-{suffix}"));
    let connect =
        ConnectOptions { kubeconfig: Some(kubeconfig.into()), context: None, cluster_name: None, in_cluster: false };
    let client = karpenter_tui::kube::connect::connect(&connect).await.expect("connect").client;

    // The CRDs, as shipped.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for file in [
        "karpenter.sh_nodepools.yaml",
        "karpenter.sh_nodeclaims.yaml",
        "karpenter.k8s.aws_ec2nodeclasses.yaml",
        "karpenter.sh_nodeoverlays.yaml",
    ] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crds").join(file);
        let crd: CustomResourceDefinition = serde_yaml::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let name = crd.metadata.name.clone().unwrap();
        apply(&crds, &name, &serde_json::to_value(&crd).unwrap()).await;
    }
    let start = Instant::now();
    loop {
        let all = crds.list(&ListParams::default()).await.unwrap().items;
        let established =
            ["nodepools.karpenter.sh", "nodeclaims.karpenter.sh", "ec2nodeclasses.karpenter.k8s.aws"].iter().all(|n| {
                all.iter().any(|c| {
                    c.metadata.name.as_deref() == Some(n)
                        && c.status
                            .iter()
                            .flat_map(|s| s.conditions.iter().flatten())
                            .any(|x| x.type_ == "Established" && x.status == "True")
                })
            });
        if established {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "CRDs not established");
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &serde_json::from_value(serde_json::json!({"metadata": {"name": ns}})).unwrap())
        .await
        .expect("create the test namespace");
    let result = tokio::spawn(scenario(client.clone(), connect, ns.clone(), pool.clone())).await;
    clean_up(client, &ns, &pool).await;
    if let Err(e) = result {
        std::panic::resume_unwind(e.into_panic());
    }
}

async fn scenario(client: kube::Client, connect: ConnectOptions, ns: String, pool: String) {
    let classes: Api<kube::api::DynamicObject> =
        Api::all_with(client.clone(), &kube::api::ApiResource::erase::<karpenter_tui::engine::api::EC2NodeClass>(&()));
    let class = serde_json::json!({
        "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": pool},
        "spec": {"role": "KarpenterNodeRole-e2e", "amiSelectorTerms": [{"alias": "al2023@latest"}],
                 "subnetSelectorTerms": [{"tags": {"e2e": "true"}}], "securityGroupSelectorTerms": [{"tags": {"e2e": "true"}}]},
    });
    apply(&classes, &pool, &class).await;
    let pools: Api<NodePool> = Api::all(client.clone());
    apply(&pools, &pool, &nodepool(&pool, "4")).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    apply(&deployments, "inflate", &deployment(&ns, &pool, 4)).await;

    let opts = LiveOptions {
        connect,
        readonly: false,
        theme: None,
        catalog: kwok_catalog("us-east-1"),
        sync_timeout: Duration::from_secs(60),
        cloud: Some(CloudChoice::Kwok),
        mode: Mode::Approve,
        settings: Default::default(),
        feature_gates: None,
        packing: None,
        karpenter_version: None,
        scheduler_config: None,
        legacy_node_repair: false,
        repairs_without_approval: false,
        takeover: true,
        lease_namespace: ns.clone(),
    };
    let mut p = prepare(&opts, |_| false).await.expect("prepare");
    // The dashboard's `prepare` returns at the first list; the engine is fed only once every kind is listed.
    p.watches.wait_synced(Duration::from_secs(30)).await.expect("every kind listed");
    assert!(p.observe_reason.is_none(), "the engine can't act here: {:?}", p.observe_reason);
    let acting = p.acting.take().expect("acting");
    let mut run = Run { p, acting };
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(client.clone(), &ns);
    let nodes: Api<Node> = Api::all(client.clone());
    let claims: Api<NodeClaim> = Api::all(client.clone());

    // 1. Pending pods → NodeClaims → nodes → pods bound.
    run.until("four pods bound to KWOK nodes", Duration::from_secs(240), || async {
        let list = pods.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
        let ours: Vec<String> = pool_nodes(&nodes, &pool).await.into_iter().filter_map(|n| n.metadata.name).collect();
        list.len() == 4
            && list.iter().all(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some_and(|n| ours.contains(n)))
    })
    .await
    .unwrap();
    let cs = pool_claims(&claims, &pool).await;
    assert!(!cs.is_empty() && cs.iter().all(|c| c.name().starts_with(&format!("{pool}-"))));
    assert!(
        cs.iter().all(|c| c.metadata.owner_references.iter().flatten().any(|o| o.kind == "NodePool" && o.name == pool))
    );

    // 2. Scale to zero → proposal → approve → nodes removed.
    apply(&deployments, "inflate", &deployment(&ns, &pool, 0)).await;
    for _ in 0..240 {
        if run_open(&run.acting) {
            break;
        }
        run.until("a tick", Duration::from_secs(2), || async { false }).await.ok();
    }
    assert!(run_open(&run.acting), "no emptiness proposal within 4 minutes");
    let id =
        run.acting.controller.records().iter().find(|r| r.state == CommandState::AwaitingApproval).unwrap().id.clone();
    let m = run.p.watches.cache.lock().unwrap().manifests();
    let message = run.acting.approve(&m, &id, chrono::Utc::now().timestamp_millis()).await.expect("approve");
    eprintln!("e2e: {message}");
    run.until("the pool's nodes and claims removed", Duration::from_secs(300), || async {
        pool_nodes(&nodes, &pool).await.is_empty() && pool_claims(&claims, &pool).await.is_empty()
    })
    .await
    .unwrap();

    // 3. Capacity again, then a NodePool edit → Drifted.
    apply(&deployments, "inflate", &deployment(&ns, &pool, 2)).await;
    run.until("nodes again", Duration::from_secs(240), || async {
        pool_claims(&claims, &pool).await.iter().any(|c| c.is_true("Initialized"))
    })
    .await
    .unwrap();
    apply(&pools, &pool, &nodepool(&pool, "8")).await;
    run.until("a drifted NodeClaim", Duration::from_secs(300), || async {
        pool_claims(&claims, &pool).await.iter().any(|c| c.is_true(COND_DRIFTED))
    })
    .await
    .unwrap();
    run.p.release().await;
}

fn run_open(a: &Acting) -> bool {
    a.controller
        .records()
        .iter()
        .any(|r| r.state == CommandState::AwaitingApproval && r.command.method.as_str() == "emptiness")
}
