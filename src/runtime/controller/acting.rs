//! The controller with its hands: the planner, the cluster port and the cloud, ticked by whoever runs the loop
//! (the live dashboard's backend, or the headless `controller`). Operator requests go through here too, so an
//! approval is validated against the same cache the planner reads.

use crate::engine::disruption::gate::Mode;
use crate::engine::provisioning::Millis;
use crate::kube::writer::Writer;
use crate::sim::manifests::Manifests;

use super::execute::{Cloud, Report, execute};
use super::{Controller, generation};

pub struct Acting {
    pub controller: Controller,
    pub writer: Writer,
    pub cloud: Cloud,
}

impl Acting {
    async fn run(&mut self, effects: Vec<super::Effect>, now: Millis) -> Report {
        let report = execute(effects, &self.writer, &self.cloud, now).await;
        for o in &report.outcomes {
            self.controller.outcome(o.clone(), now);
        }
        report
    }

    /// One reconcile over the cache as it is.
    pub async fn tick(&mut self, m: &Manifests, now: Millis) -> Report {
        let effects = self.controller.plan(m, now, generation(m));
        self.run(effects, now).await
    }

    pub async fn approve(&mut self, m: &Manifests, id: &str, now: Millis) -> Result<String, String> {
        let (effects, message) = self.controller.approve(m, id, now)?;
        let report = self.run(effects, now).await;
        if report.errors.is_empty() {
            Ok(message)
        } else {
            Err(format!("{message}, but: {}", report.errors.join("; ")))
        }
    }

    pub fn reject(&mut self, m: &Manifests, id: &str, now: Millis) -> Result<String, String> {
        self.controller.reject(id, generation(m), now)
    }

    pub fn set_mode(&mut self, mode: Mode, now: Millis) -> String {
        self.controller.set_mode(mode, now);
        format!("disruption mode is now {mode}")
    }
}
