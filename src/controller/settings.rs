//! The controller's settings: one struct, filled from a scenario's `settings`, the command line and the config
//! file alike, so every backend runs the controller the same way.

use std::collections::BTreeMap;
use std::fmt;

use crate::engine::disruption::gate::Mode;
use crate::engine::packing::Packing;
use crate::engine::provisioning::Millis;
use crate::engine::version::KarpenterVersion;

use super::timing::{SECOND, VALIDATION_DELAY};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// What happens to voluntary disruptions: `auto` (Karpenter's behaviour), `approve`, `dry-run`.
    pub mode: Mode,
    /// Upstream's feature gates (`--feature-gates`), with upstream v1.14.1's defaults.
    pub gates: FeatureGates,
    /// How provisioning sizes new NodeClaims: `upstream` (Karpenter's decisions) or `cost` (`--packing`,
    /// `settings.packing`, the config file's `packing:`).
    pub packing: Packing,
    /// Provisioning batches close after this long without a new pending pod (upstream `BATCH_IDLE_DURATION`, 1 s)
    pub batch_idle: Millis,
    /// ... or after this long in all (upstream `BATCH_MAX_DURATION`, 10 s).
    pub batch_max: Millis,
    /// Consolidation commands are checked again after this long before they start (upstream 15 s).
    pub validation_delay: Millis,
    /// Candidates multi-node consolidation looks at, at most (upstream 100).
    pub multi_node_cap: usize,
    /// Whose decisions and validation the controller follows: `1.14` or `1.15` (`--karpenter-version`,
    /// `settings.karpenterVersion`, the config file's `karpenterVersion:`; live, by default the upstream Karpenter
    /// found in the cluster).
    pub karpenter_version: KarpenterVersion,
    /// v1.15's `--legacy-node-repair`: v1.14's forceful repair runs instead of repair as a voluntary method.
    pub legacy_node_repair: bool,
    /// In `approve` mode, repairs wait for an operator like every voluntary disruption unless this is off
    /// (`--repairs-without-approval`, the config file's `repairsWithoutApproval: true`).
    pub approve_repairs: bool,
    /// v1.15's `--scheduler-config` (`settings.schedulerConfig`, the config file's `schedulerConfig:`): default
    /// topology spread for pods that declare none. Whoever reads the cluster applies it
    /// ([`crate::engine::manifests::ClusterObjects::default_spread`]), as the simulated kube-scheduler takes it too.
    pub scheduler_config: crate::engine::api::scheduler_config::SchedulerConfig,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            mode: Mode::Auto,
            gates: FeatureGates::default(),
            packing: Packing::Upstream,
            batch_idle: SECOND,
            batch_max: 10 * SECOND,
            validation_delay: VALIDATION_DELAY,
            multi_node_cap: 100,
            karpenter_version: KarpenterVersion::NEWEST,
            legacy_node_repair: false,
            approve_repairs: true,
            scheduler_config: Default::default(),
        }
    }
}

/// Upstream Karpenter's feature gates, by their upstream names, defaulting as v1.14.1 does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeatureGates {
    /// `NodeRepair`: delete nodes whose conditions match the cloud's repair policies for long enough.
    pub node_repair: bool,
    /// `ReservedCapacity`: capacity reservations as a capacity type.
    pub reserved_capacity: bool,
    /// `SpotToSpotConsolidation`: single-node consolidation may replace a spot node with a cheaper spot node.
    pub spot_to_spot_consolidation: bool,
    /// `NodeOverlay`: NodeOverlay objects adjust instance types' prices and capacity.
    pub node_overlay: bool,
    /// `StaticCapacity`: NodePools with `spec.replicas`.
    pub static_capacity: bool,
    /// `CapacityBuffer`: CapacityBuffer objects keep room for virtual pods.
    pub capacity_buffer: bool,
    /// The AWS provider's `RebootForRepair` (v1.15, `--aws-feature-gates`): its repair policies may reboot a node
    /// instead of replacing it.
    pub reboot_for_repair: bool,
    /// `TerminateFirstDrift` (v1.15): a drifted node whose replacement cannot be staged first (a static pool at its
    /// node limit, a full capacity reservation) is deleted first and its slot refilled.
    pub terminate_first_drift: bool,
    /// `TerminateFirstRepair` (v1.15): the same for node repair.
    pub terminate_first_repair: bool,
    /// The AWS provider's `NodeClassCEL` (v1.15, `--aws-feature-gates`): EC2NodeClass kubelet settings may be CEL
    /// expressions, resolved per instance type.
    pub node_class_cel: bool,
}

impl Default for FeatureGates {
    fn default() -> Self {
        FeatureGates {
            node_repair: false,
            reserved_capacity: true,
            spot_to_spot_consolidation: false,
            node_overlay: false,
            static_capacity: false,
            capacity_buffer: false,
            reboot_for_repair: false,
            // Upstream's default is not known; every upstream test sets them explicitly (engine-v115 §2, assumed).
            terminate_first_drift: false,
            terminate_first_repair: false,
            node_class_cel: false,
        }
    }
}

/// A gate name the program does not know, or a `--feature-gates` entry that is not `Name=true|false`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GateError {
    #[error("unknown feature gate {name:?} (known: {})", FeatureGates::NAMES.join(", "))]
    Unknown { name: String },
    #[error("feature gate {entry:?}: expected Name=true or Name=false")]
    Malformed { entry: String },
}

impl FeatureGates {
    /// The gates by their upstream names, in upstream's order.
    pub const NAMES: [&'static str; 10] = [
        "NodeRepair",
        "ReservedCapacity",
        "SpotToSpotConsolidation",
        "NodeOverlay",
        "StaticCapacity",
        "CapacityBuffer",
        "TerminateFirstDrift",
        "TerminateFirstRepair",
        "NodeClassCEL",
        "RebootForRepair",
    ];
    /// The AWS provider's gates among [`Self::NAMES`]: upstream sets them with `--aws-feature-gates`.
    pub const AWS_NAMES: [&'static str; 2] = ["NodeClassCEL", "RebootForRepair"];

    fn slot(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "NodeRepair" => &mut self.node_repair,
            "ReservedCapacity" => &mut self.reserved_capacity,
            "SpotToSpotConsolidation" => &mut self.spot_to_spot_consolidation,
            "NodeOverlay" => &mut self.node_overlay,
            "StaticCapacity" => &mut self.static_capacity,
            "CapacityBuffer" => &mut self.capacity_buffer,
            "RebootForRepair" => &mut self.reboot_for_repair,
            "TerminateFirstDrift" => &mut self.terminate_first_drift,
            "TerminateFirstRepair" => &mut self.terminate_first_repair,
            "NodeClassCEL" => &mut self.node_class_cel,
            _ => return None,
        })
    }

    /// Whether the gate `name` is on (`None`: no such gate).
    pub fn get(&self, name: &str) -> Option<bool> {
        let mut copy = *self;
        copy.slot(name).map(|v| *v)
    }

    /// Turns the gate `name` on or off.
    pub fn set(&mut self, name: &str, on: bool) -> Result<(), GateError> {
        *self.slot(name).ok_or_else(|| GateError::Unknown { name: name.to_string() })? = on;
        Ok(())
    }

    /// These gates with `overrides` applied (a scenario's or the config file's `featureGates:` map); nothing is
    /// changed when a name is unknown.
    pub fn with(mut self, overrides: &BTreeMap<String, bool>) -> Result<FeatureGates, GateError> {
        for (name, on) in overrides {
            self.set(name, *on)?;
        }
        Ok(self)
    }

    /// Applies `--feature-gates` text as upstream's flag takes it: `Name=true,Other=false` (spaces around entries
    /// are allowed; an empty string changes nothing).
    pub fn with_flag(mut self, text: &str) -> Result<FeatureGates, GateError> {
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let malformed = || GateError::Malformed { entry: entry.to_string() };
            let (name, value) = entry.split_once('=').ok_or_else(malformed)?;
            let on = match value.trim().to_ascii_lowercase().as_str() {
                "true" => true,
                "false" => false,
                _ => return Err(malformed()),
            };
            self.set(name.trim(), on)?;
        }
        Ok(self)
    }

    /// The gates a Karpenter version has: v1.14 has none of v1.15's (`TerminateFirstDrift`, `TerminateFirstRepair`,
    /// `NodeClassCEL`, `RebootForRepair`), so setting them there changes nothing.
    pub fn for_version(mut self, version: crate::engine::version::KarpenterVersion) -> FeatureGates {
        if version < crate::engine::version::KarpenterVersion::V1_15 {
            self.terminate_first_drift = false;
            self.terminate_first_repair = false;
            self.node_class_cel = false;
            self.reboot_for_repair = false;
        }
        self
    }

    /// Every gate with its value, in upstream's order.
    pub fn entries(&self) -> Vec<(&'static str, bool)> {
        Self::NAMES.iter().map(|n| (*n, self.get(n).unwrap_or(false))).collect()
    }
}

/// `NodeRepair=false,ReservedCapacity=true,...`: the form `--feature-gates` takes.
impl fmt::Display for FeatureGates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.entries().into_iter().map(|(n, v)| format!("{n}={v}")).collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_upstream_v1_14_1s() {
        assert_eq!(
            FeatureGates::default().to_string(),
            "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,\
             StaticCapacity=false,CapacityBuffer=false,TerminateFirstDrift=false,TerminateFirstRepair=false,\
             NodeClassCEL=false,RebootForRepair=false"
        );
    }

    #[test]
    fn flag_sets_named_gates_and_refuses_unknown_or_malformed_entries() {
        let g = FeatureGates::default().with_flag("NodeRepair=true, ReservedCapacity=False ,").unwrap();
        assert!(g.node_repair && !g.reserved_capacity && !g.node_overlay);
        assert_eq!(
            FeatureGates::default().with_flag("NodeRepiar=true").unwrap_err(),
            GateError::Unknown { name: "NodeRepiar".into() }
        );
        assert!(matches!(FeatureGates::default().with_flag("NodeRepair"), Err(GateError::Malformed { .. })));
        assert!(matches!(FeatureGates::default().with_flag("NodeRepair=yes"), Err(GateError::Malformed { .. })));
        let map = BTreeMap::from([("StaticCapacity".to_string(), true), ("Nope".to_string(), true)]);
        assert!(FeatureGates::default().with(&map).is_err());
    }
}
