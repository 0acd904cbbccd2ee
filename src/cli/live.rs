//! Commands that read a live cluster: connect, start the watches, wait for the initial sync, then work on what the
//! cache holds.

use std::time::Duration;

use anyhow::{Context as _, Result, anyhow};
use serde_json::json;

use crate::engine::catalog::Catalog;
use crate::engine::manifests::ClusterObjects;
use crate::kube::cache::Problem;
use crate::kube::connect::{ConnectOptions, connect};
use crate::kube::watch;

/// What a one-shot read of the cluster gives.
pub struct ClusterRead {
    pub context: String,
    pub cluster_name: String,
    pub server: String,
    pub manifests: ClusterObjects,
    /// Objects skipped because they could not be parsed.
    pub skipped: Vec<Problem>,
    /// The upstream Karpenter release installed, if any.
    pub detected: Option<crate::kube::upstream::DetectedVersion>,
}

/// Lists everything the engine reads (through the same watchers the dashboard uses) and stops.
pub async fn read_cluster(
    opts: &ConnectOptions,
    timeout: Duration,
    default_spread: &crate::engine::api::scheduler_config::SchedulerConfig,
) -> Result<ClusterRead> {
    let conn = connect(opts).await?;
    let mut watches = watch::spawn(conn.client.clone(), default_spread.default_constraints());
    let detected = crate::kube::upstream::detect_version(&conn.client).await;
    if let Err(missing) = watches.wait_synced(timeout).await {
        return Err(anyhow!(
            "could not read the cluster at {} (context {}):\n  {}",
            conn.server,
            conn.context,
            missing.join("\n  ")
        ));
    }
    let mut cache = watches.cache.lock().map_err(|_| anyhow!("the watch cache is poisoned"))?;
    Ok(ClusterRead {
        context: conn.context.clone(),
        cluster_name: conn.cluster_name.clone(),
        server: conn.server.clone(),
        manifests: cache.manifests(),
        skipped: cache.problems().cloned().collect(),
        detected,
    })
}

pub enum PlanOutput {
    Json,
    Table,
}

/// What `plan` decides as: the Karpenter it stands in for and how it packs.
pub struct PlanChoices {
    pub gates: crate::controller::settings::FeatureGates,
    pub packing: crate::engine::packing::Packing,
    /// `None`: the version of the Karpenter found in the cluster, else the newest modelled.
    pub version: Option<crate::engine::version::KarpenterVersion>,
    pub default_spread: crate::engine::api::scheduler_config::SchedulerConfig,
}

/// `karpenter-tui plan` against the cluster: the report text.
pub fn plan(
    opts: &ConnectOptions,
    catalog: &Catalog,
    timeout: Duration,
    output: PlanOutput,
    choices: &PlanChoices,
) -> Result<String> {
    let PlanChoices { gates, packing, version, default_spread } = choices;
    let (gates, packing, version) = (*gates, *packing, *version);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let read = rt.block_on(read_cluster(opts, timeout, default_spread))?;
    let (version, version_source) = super::live_dashboard::resolve_version(version, read.detected.clone());
    super::args::check_default_spread(default_spread, version)?;
    let gates = gates.for_version(version);
    let now = chrono::Utc::now().timestamp_millis();
    let m = &read.manifests;
    let provisioning = super::plan::plan_packed(m, catalog, gates, packing);
    let (pass, outlook) = super::plan::disruption_with(m, catalog, &provisioning, now, gates, version);
    let packed = super::plan::packing_comparison(m, catalog, gates);
    Ok(match output {
        PlanOutput::Json => {
            let mut v = super::plan::to_json(m, &provisioning);
            if let Some(map) = v.as_object_mut() {
                map.insert(
                    "cluster".into(),
                    json!({"context": read.context, "name": read.cluster_name, "server": read.server}),
                );
                map.insert("karpenterVersion".into(), json!(version));
                map.insert("packing".into(), super::plan::packing_json(&packed, packing));
                map.insert("disruption".into(), super::plan::disruption_json(&pass, &outlook));
                map.insert(
                    "skipped".into(),
                    read.skipped
                        .iter()
                        .map(|p| json!({"resource": p.kind.resource_name(), "object": p.key, "error": p.message}))
                        .collect(),
                );
            }
            format!("{}\n", serde_json::to_string_pretty(&v)?)
        }
        PlanOutput::Table => {
            let mut out = format!(
                "cluster {} (context {}, {}): {} nodes, {} NodeClaims, {} NodePools, {} pods\n\n",
                read.cluster_name,
                read.context,
                read.server,
                m.nodes.len(),
                m.nodeclaims.len(),
                m.nodepools.len(),
                m.pods.len()
            );
            out.push_str(&format!("Karpenter {version} decisions: {version_source}\n\n"));
            out.push_str(&super::plan::to_table(&provisioning));
            out.push_str(&super::plan::packing_table(&packed, packing));
            out.push_str(&super::plan::disruption_table(&pass, &outlook));
            if !read.skipped.is_empty() {
                out.push_str("\nSKIPPED (could not be read)\n");
                for p in &read.skipped {
                    out.push_str(&format!("{p}\n"));
                }
            }
            out
        }
    })
}
