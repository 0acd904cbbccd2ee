//! The AWS cloud provider (`--cloud aws`): the live catalog (instance types, offerings and prices from the EC2 and
//! Pricing APIs, less offerings that just failed), EC2NodeClass resolution, launches through CreateFleet,
//! termination, the instance list that finalization and garbage collection read, and unused launch templates
//! cleaned up. It keeps what it learns behind locks so the planner can read it between calls.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use aws_config::SdkConfig;

use crate::engine::api::{EC2NodeClass, NodeClaim};
use crate::engine::catalog::aws::build_catalog;
use crate::engine::catalog::{Catalog, CatalogError};
use crate::engine::labels;
use crate::engine::lifecycle::{LaunchError, LaunchResult};
use crate::engine::provisioning::Millis;

use super::config::AwsError;
use super::ec2::{self, Ec2Instance, FleetOutcome, Templates};
use super::instancetypes::{Discovered, discover};
use super::launch::{ClusterInfo, plan};
use super::nodeclass::{AliasContext, resolve, status};
use super::pricing::{PriceBook, on_demand_prices, spot_prices};
use super::unavailable::{Unavailable, is_capacity_error};

pub const PROVIDER_PREFIX: &str = "aws:///";

/// What the provider has learnt, readable without an await.
#[derive(Default)]
struct Known {
    discovered: Option<Arc<Discovered>>,
    prices: PriceBook,
    unavailable: Unavailable,
    /// The last instance list (provider ids), `None` before the first.
    instances: Option<Vec<Ec2Instance>>,
    /// EC2NodeClasses as last resolved (status filled in), by name.
    nodeclasses: BTreeMap<String, EC2NodeClass>,
}

pub struct AwsCloud {
    pub ec2: aws_sdk_ec2::Client,
    pub ssm: aws_sdk_ssm::Client,
    pub sdk: SdkConfig,
    pub region: String,
    pub cluster: ClusterInfo,
    pub alias: AliasContext,
    known: Mutex<Known>,
    templates: tokio::sync::Mutex<Templates>,
}

fn now_ms() -> Millis {
    chrono::Utc::now().timestamp_millis()
}

impl AwsCloud {
    pub fn new(sdk: &SdkConfig, cluster: ClusterInfo, alias: AliasContext) -> AwsCloud {
        AwsCloud {
            ec2: aws_sdk_ec2::Client::new(sdk),
            ssm: aws_sdk_ssm::Client::new(sdk),
            sdk: sdk.clone(),
            region: sdk.region().map(|r| r.to_string()).unwrap_or_default(),
            cluster,
            alias,
            known: Mutex::new(Known::default()),
            templates: tokio::sync::Mutex::new(Templates::default()),
        }
    }

    fn known(&self) -> std::sync::MutexGuard<'_, Known> {
        // A panic while holding this lock cannot leave it half-written (every update is one assignment).
        self.known.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Instance types and offerings (startup, then every 12 h).
    pub async fn refresh_types(&self) -> Result<usize, AwsError> {
        let d = discover(&self.ec2).await?;
        let n = d.types.len();
        self.known().discovered = Some(Arc::new(d));
        Ok(n)
    }

    /// Spot prices, then on-demand prices; a failure keeps the last prices (on-demand falls back to the embedded
    /// table) and is returned for the log.
    pub async fn refresh_prices(&self) -> Vec<AwsError> {
        let mut errors = Vec::new();
        let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        match spot_prices(&self.ec2).await {
            Ok(p) => self.known().prices.merge_spot(p, at.clone()),
            Err(e) => errors.push(e),
        }
        match on_demand_prices(&self.sdk, &self.region).await {
            Ok(p) => self.known().prices.merge_on_demand(p, at),
            Err(e) => errors.push(e),
        }
        errors
    }

    /// The catalog for a NodeClass (its subnets' zones, its kubelet and AMI family), with unavailable offerings
    /// marked; `None` before the first discovery.
    pub fn catalog_for(&self, nodeclass: Option<&EC2NodeClass>, now: Millis) -> Option<Result<Catalog, CatalogError>> {
        let k = self.known();
        let d = k.discovered.clone()?;
        let zones = d.zones();
        let offered = d.offered();
        let prices = &k.prices;
        let built = build_catalog(
            &self.region,
            &zones,
            &offered,
            nodeclass,
            |f, ct, z| prices.price(f, ct, z),
            prices.source(),
        );
        Some(built.map(|mut c| {
            k.unavailable.apply(&mut c, now);
            c
        }))
    }

    /// Catalogs per resolved NodeClass, for the planner.
    pub fn catalogs(&self, now: Millis) -> BTreeMap<String, Arc<Catalog>> {
        let classes: Vec<EC2NodeClass> = self.known().nodeclasses.values().cloned().collect();
        classes
            .iter()
            .filter_map(|nc| {
                let c = self.catalog_for(Some(nc), now)?.ok()?;
                Some((nc.metadata.name.clone().unwrap_or_default(), Arc::new(c)))
            })
            .collect()
    }

    /// Resolves a NodeClass's selectors and returns the status to write; the resolved class is kept for launches.
    pub async fn resolve_nodeclass(
        &self,
        nc: &EC2NodeClass,
    ) -> Result<crate::engine::api::ec2nodeclass::EC2NodeClassStatus, AwsError> {
        let r = resolve(&self.ec2, &self.ssm, nc, &self.alias).await.map_err(|e| match e {
            super::nodeclass::ResolveError::Aws(a) => a,
        })?;
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let mut st = status(&r, &now);
        // Keep transition times of conditions whose status did not change (status writes stay quiet).
        if let Some(old) = &nc.status {
            for c in &mut st.conditions {
                if let Some(o) = old.conditions.iter().find(|o| o.type_ == c.type_ && o.status == c.status) {
                    c.last_transition_time = o.last_transition_time.clone();
                }
            }
        }
        for c in &mut st.conditions {
            c.observed_generation = nc.metadata.generation;
        }
        let mut resolved = nc.clone();
        resolved.status = Some(st.clone());
        self.known().nodeclasses.insert(nc.metadata.name.clone().unwrap_or_default(), resolved);
        Ok(st)
    }

    /// Forgets NodeClasses no longer in the cluster.
    pub fn retain_nodeclasses(&self, names: &BTreeSet<String>) {
        self.known().nodeclasses.retain(|n, _| names.contains(n));
    }

    pub fn nodeclass(&self, name: &str) -> Option<EC2NodeClass> {
        self.known().nodeclasses.get(name).cloned()
    }

    /// Lists this cluster's live instances and keeps the list.
    pub async fn refresh_instances(&self) -> Result<Vec<Ec2Instance>, AwsError> {
        let list = ec2::list(&self.ec2, &self.cluster.name).await?;
        self.known().instances = Some(list.clone());
        Ok(list)
    }

    /// Provider ids of live instances as last listed; `None` before the first list.
    pub fn live_provider_ids(&self) -> Option<BTreeSet<String>> {
        self.known().instances.as_ref().map(|l| l.iter().map(Ec2Instance::provider_id).collect())
    }

    /// An interruption for a spot instance keeps its offering out for a while, as a capacity error does.
    pub fn spot_interrupted(&self, instance_type: &str, zone: &str) {
        self.known().unavailable.mark(labels::CAPACITY_SPOT, instance_type, zone, now_ms());
    }

    fn result(&self, claim: &NodeClaim, nc: &EC2NodeClass, catalog: &Catalog, i: &Ec2Instance) -> LaunchResult {
        let t = catalog.get(&i.instance_type);
        let mut labels_out = t.map(|t| t.requirements.single_valued_labels()).unwrap_or_default();
        labels_out.insert(labels::ZONE.into(), i.zone.clone());
        labels_out.insert(labels::CAPACITY_TYPE.into(), i.capacity_type().into());
        labels_out.insert(labels::INSTANCE_TYPE.into(), i.instance_type.clone());
        if let Some(zone_id) =
            nc.status.as_ref().and_then(|s| s.subnets.iter().find(|s| s.zone == i.zone)).and_then(|s| s.zone_id.clone())
        {
            labels_out.insert(crate::engine::catalog::aws::ZONE_ID.into(), zone_id);
        }
        let _ = claim;
        LaunchResult {
            provider_id: i.provider_id(),
            instance_type: i.instance_type.clone(),
            zone: i.zone.clone(),
            capacity_type: i.capacity_type().into(),
            labels: labels_out,
            capacity: t.map(|t| t.capacity.clone()).unwrap_or_default(),
            allocatable: t.map(|t| t.allocatable()).unwrap_or_default(),
            image_id: i.image_id.clone(),
        }
    }

    /// The cloud provider's Create: adopt an instance an earlier attempt launched, else plan and CreateFleet.
    pub async fn launch(&self, claim: &NodeClaim) -> Result<LaunchResult, LaunchError> {
        let now = now_ms();
        let nc_name = claim.spec.node_class_ref.name.clone();
        let Some(nc) = self.nodeclass(&nc_name) else {
            return Err(LaunchError::NodeClassNotReady(format!("EC2NodeClass {nc_name} has not been resolved yet")));
        };
        let catalog = match self.catalog_for(Some(&nc), now) {
            None => return Err(LaunchError::Other("instance types have not been discovered yet".into())),
            Some(Err(e)) => return Err(LaunchError::NodeClassNotReady(e.to_string())),
            Some(Ok(c)) => c,
        };
        let other = |e: AwsError| LaunchError::Other(e.to_string());
        if let Some(i) = ec2::find_for_claim(&self.ec2, &self.cluster.name, claim.name()).await.map_err(other)? {
            tracing::info!(nodeclaim = claim.name(), instance = %i.id, "adopting the instance an earlier launch made");
            return Ok(self.result(claim, &nc, &catalog, &i));
        }
        let fleet = plan(claim, &nc, &catalog, &self.cluster)?;
        let token = ec2::client_token(claim.metadata.uid.as_deref().unwrap_or(claim.name()), &fleet);
        let mut retried = false;
        loop {
            {
                let mut templates = self.templates.lock().await;
                for (t, _) in &fleet.configs {
                    templates.ensure(&self.ec2, t, &self.cluster.name, now / 1000).await.map_err(other)?;
                }
            }
            let outcome = match ec2::create_fleet(&self.ec2, &fleet, &token).await {
                Err(AwsError::Call { message, .. })
                    if !retried && message.contains("InvalidLaunchTemplateName.NotFound") =>
                {
                    // A template deleted behind our back: forget it, create it again, once.
                    let mut templates = self.templates.lock().await;
                    for (t, _) in &fleet.configs {
                        templates.forget(&t.name());
                    }
                    retried = true;
                    continue;
                }
                other_result => other_result.map_err(other)?,
            };
            return match outcome {
                FleetOutcome::Launched { instance_id, instance_type, zone, image_id } => {
                    let i = Ec2Instance {
                        id: instance_id,
                        instance_type,
                        zone,
                        state: "pending".into(),
                        launched_at: Some(now / 1000),
                        spot: fleet.capacity_type == labels::CAPACITY_SPOT,
                        image_id,
                        subnet_id: None,
                        security_groups: Vec::new(),
                        tags: fleet.tags.clone(),
                    };
                    Ok(self.result(claim, &nc, &catalog, &i))
                }
                FleetOutcome::Failed { errors } => {
                    {
                        let mut k = self.known();
                        for (code, _, t, z) in &errors {
                            if let (true, Some(t), Some(z)) = (is_capacity_error(code), t, z) {
                                k.unavailable.mark(&fleet.capacity_type, t, z, now);
                            }
                            if code == "AuthFailure.ServiceLinkedRoleCreationNotPermitted" {
                                k.unavailable.mark_capacity_type(labels::CAPACITY_SPOT, now);
                            }
                        }
                    }
                    let summary = errors.iter().map(|(c, m, ..)| format!("{c}: {m}")).collect::<Vec<_>>().join("; ");
                    let outcome = FleetOutcome::Failed { errors };
                    if outcome.all_capacity_errors() {
                        Err(LaunchError::InsufficientCapacity(format!("CreateFleet: {summary}")))
                    } else {
                        Err(LaunchError::Other(format!("CreateFleet launched nothing: {summary}")))
                    }
                }
            };
        }
    }

    /// The annotations a launch for `claim` stamps (the NodeClass spec hash, for drift).
    pub fn launch_annotations(&self, claim: &NodeClaim) -> BTreeMap<String, String> {
        self.nodeclass(&claim.spec.node_class_ref.name)
            .map(|nc| super::drift::launch_annotations(&nc))
            .unwrap_or_default()
    }

    /// Per NodeClaim of this cloud, why it no longer matches its EC2NodeClass (empty before anything is known).
    pub fn class_drift(&self, claims: &[NodeClaim], now: Millis) -> BTreeMap<String, String> {
        let catalogs = self.catalogs(now);
        let k = self.known();
        let instances: BTreeMap<String, &Ec2Instance> =
            k.instances.iter().flatten().map(|i| (i.provider_id(), i)).collect();
        let mut out = BTreeMap::new();
        for c in claims {
            let Some(pid) = c.provider_id().filter(|p| p.starts_with(PROVIDER_PREFIX)) else { continue };
            let class_name = &c.spec.node_class_ref.name;
            let Some(nc) = k.nodeclasses.get(class_name) else { continue };
            let t = c
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::INSTANCE_TYPE))
                .and_then(|t| catalogs.get(class_name).and_then(|cat| cat.get(t)).cloned());
            if let Some(why) = super::drift::drifted(c, nc, instances.get(pid).copied(), t.as_deref()) {
                out.insert(c.name().to_string(), why);
            }
        }
        out
    }

    /// Terminates the instance behind a provider id; `Ok(false)` when it is already gone.
    pub async fn terminate(&self, provider_id: &str) -> Result<bool, AwsError> {
        let Some(id) = ec2::instance_id(provider_id) else { return Ok(false) };
        ec2::terminate(&self.ec2, id).await
    }

    /// Deletes launch templates unused for a minute.
    pub async fn delete_unused_templates(&self) -> Result<Vec<String>, AwsError> {
        self.templates.lock().await.delete_unused(&self.ec2, now_ms() / 1000).await
    }

    /// Picks up this cluster's launch templates after a start.
    pub async fn hydrate_templates(&self) -> Result<usize, AwsError> {
        self.templates.lock().await.hydrate(&self.ec2, &self.cluster.name, now_ms() / 1000).await
    }

    pub async fn template_names(&self) -> Vec<String> {
        self.templates.lock().await.names()
    }
}
