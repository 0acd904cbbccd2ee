//! The controller's disruption commands as the world's report and the demo's dashboard show them, and the
//! disruption context of the world's current state for the engine's benchmarks.

use super::World;
use crate::controller::disruption::CommandState;
use crate::engine::disruption::{Context, DisruptionOptions, Method};
use crate::engine::provisioning::Millis;

/// A disruption decision as the report and the dashboard show it.
#[derive(Debug, Clone, PartialEq)]
pub struct DisruptionRecord {
    pub id: String,
    pub at: Millis,
    pub method: Method,
    pub candidates: Vec<String>,
    pub replacements: Vec<Vec<String>>,
    pub savings_per_hour: f64,
    pub state: CommandState,
    pub summary: String,
    /// Repair's condition, when it is a repair.
    pub condition: Option<String>,
    pub reboot: bool,
    /// Deleted first, its replacement left to provisioning (v1.15's terminate-first).
    pub terminate_first: bool,
}

impl World {
    /// A disruption decision as the report and the dashboard show it.
    pub fn disruption_record(&self, id: &str) -> Option<DisruptionRecord> {
        let r = self.controller.orchestrator().record_of(id)?;
        let cmd = &r.command;
        Some(DisruptionRecord {
            id: r.id.clone(),
            at: r.at,
            method: cmd.method,
            candidates: cmd.node_names(),
            replacements: cmd.replacements.iter().map(|r| r.instance_types.clone()).collect(),
            savings_per_hour: cmd.savings_per_hour,
            state: r.state.clone(),
            summary: cmd.summary(),
            condition: cmd.repair.as_ref().map(|r| r.condition.clone()),
            reboot: cmd.is_reboot(),
            terminate_first: cmd.terminate_first,
        })
    }

    /// Every disruption pass the controller ran: when, over how many candidates, how long it took.
    pub fn disruption_passes(&self) -> &[super::PassTiming] {
        &self.tick.passes
    }

    /// Runs `f` on the disruption context of the current state, as a pass would see it (`options` overrides the
    /// controller's own): for benchmarks of the engine's passes.
    pub fn with_disruption_context<R>(
        &mut self,
        options: Option<DisruptionOptions>,
        f: impl FnOnce(&Context<'_>) -> R,
    ) -> R {
        let catalogs = self.catalogs();
        let busy = self.controller.busy();
        let snap = self.cluster.snapshot_into(&mut self.caches.snapshot);
        let options = options.unwrap_or_else(|| self.controller.orchestrator().options().clone());
        let ctx = Context {
            snap,
            catalogs: &catalogs,
            policy: &self.catalog.label_policy,
            now: self.now,
            busy: &busy,
            nominated: self.controller.nominated(),
            buffer_nodes: self.controller.buffer_nodes(),
            options: &options,
            repair: &crate::engine::disruption::repair::NO_REPAIRS,
        };
        f(&ctx)
    }
}
