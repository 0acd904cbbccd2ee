//! The approval gate between "computed" and "started". In `auto` mode commands start as upstream's would; in
//! `approve` mode every voluntary command becomes a proposal that waits for an operator; in `dry-run` proposals
//! are shown and never started. A rejected proposal is not offered again until the cluster changes.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use super::Command;
use crate::engine::provisioning::Millis;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Auto,
    Approve,
    DryRun,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Approve => "approve",
            Mode::DryRun => "dry-run",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Mode::Auto),
            "approve" => Ok(Mode::Approve),
            "dry-run" => Ok(Mode::DryRun),
            other => Err(format!("unknown disruption mode {other:?}: expected auto, approve or dry-run")),
        }
    }
}

/// What the operator (or the engine) decided about a proposal at the gate; the command's own progress is the
/// controller's `CommandState`.
#[derive(Debug, Clone, PartialEq)]
pub enum GateVerdict {
    Awaiting,
    /// Approved and started (or queued to start).
    Approved,
    Rejected,
    /// Withdrawn because it no longer holds.
    Withdrawn(String),
}

#[derive(Debug, Clone)]
pub struct Proposal {
    pub id: String,
    pub command: Command,
    pub state: GateVerdict,
    pub updated_at: Millis,
}

/// What operators and the engine did at the gate, for the event log and the dashboard.
#[derive(Debug, Clone, PartialEq)]
pub enum GateEvent {
    ModeChanged { from: Mode, to: Mode },
    Proposed { id: String },
    Approved { id: String },
    Rejected { id: String },
    Withdrawn { id: String, reason: String },
}

#[derive(Debug, Clone, Default)]
pub struct Gate {
    mode: Mode,
    proposals: Vec<Proposal>,
    /// Proposal key → the cluster generation it was rejected at.
    rejections: BTreeMap<String, u64>,
    events: Vec<(Millis, GateEvent)>,
}

impl Gate {
    pub fn new(mode: Mode) -> Self {
        Gate { mode, ..Default::default() }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Switching mode withdraws open proposals: they were computed under the old rules.
    pub fn set_mode(&mut self, mode: Mode, now: Millis) {
        if mode == self.mode {
            return;
        }
        let from = self.mode;
        self.mode = mode;
        self.events.push((now, GateEvent::ModeChanged { from, to: mode }));
        let open: Vec<String> = self.awaiting().map(|p| p.id.clone()).collect();
        for id in open {
            self.withdraw(&id, &format!("disruption mode changed to {mode}"), now);
        }
    }

    /// Whether an equal proposal is open, or was rejected and the cluster has not changed since.
    pub fn suppressed(&self, cmd: &Command, generation: u64) -> bool {
        let key = cmd.key();
        self.rejections.get(&key).is_some_and(|g| *g == generation) || self.awaiting().any(|p| p.command.key() == key)
    }

    pub fn propose(&mut self, id: String, command: Command, now: Millis) {
        self.events.push((now, GateEvent::Proposed { id: id.clone() }));
        self.proposals.push(Proposal { id, command, state: GateVerdict::Awaiting, updated_at: now });
    }

    pub fn awaiting(&self) -> impl Iterator<Item = &Proposal> {
        self.proposals.iter().filter(|p| p.state == GateVerdict::Awaiting)
    }

    pub fn proposals(&self) -> &[Proposal] {
        &self.proposals
    }

    pub fn get(&self, id: &str) -> Option<&Proposal> {
        self.proposals.iter().find(|p| p.id == id)
    }

    /// Nodes in open proposals: not offered in other proposals meanwhile.
    pub fn busy_nodes(&self) -> BTreeSet<String> {
        self.awaiting().flat_map(|p| p.command.candidates.iter().map(|c| c.node.clone())).collect()
    }

    /// Marks an open proposal approved and hands its command over for validation and start. Dry-run never
    /// approves.
    pub fn approve(&mut self, id: &str, now: Millis) -> Result<Command, String> {
        if self.mode == Mode::DryRun {
            return Err("dry-run mode: proposals are only shown".into());
        }
        let p = self.open_mut(id)?;
        p.state = GateVerdict::Approved;
        p.updated_at = now;
        let cmd = p.command.clone();
        self.events.push((now, GateEvent::Approved { id: id.to_string() }));
        Ok(cmd)
    }

    pub fn reject(&mut self, id: &str, generation: u64, now: Millis) -> Result<(), String> {
        let p = self.open_mut(id)?;
        p.state = GateVerdict::Rejected;
        p.updated_at = now;
        let key = p.command.key();
        self.rejections.insert(key, generation);
        self.events.push((now, GateEvent::Rejected { id: id.to_string() }));
        Ok(())
    }

    pub fn withdraw(&mut self, id: &str, reason: &str, now: Millis) {
        if let Ok(p) = self.open_mut(id) {
            p.state = GateVerdict::Withdrawn(reason.to_string());
            p.updated_at = now;
            self.events.push((now, GateEvent::Withdrawn { id: id.to_string(), reason: reason.to_string() }));
        }
    }

    /// Events since `from` (an index into the log).
    pub fn events(&self) -> &[(Millis, GateEvent)] {
        &self.events
    }

    fn open_mut(&mut self, id: &str) -> Result<&mut Proposal, String> {
        match self.proposals.iter_mut().find(|p| p.id == id) {
            Some(p) if p.state == GateVerdict::Awaiting => Ok(p),
            Some(p) => Err(format!("proposal {id} is not awaiting approval ({:?})", p.state)),
            None => Err(format!("no proposal {id}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::disruption::Method;

    fn cmd(node: &str) -> Command {
        let mut c = crate::engine::disruption::Candidate {
            node: node.into(),
            nodeclaim: String::new(),
            provider_id: String::new(),
            nodepool: "default".into(),
            instance_type: "m5.large".into(),
            zone: String::new(),
            capacity_type: String::new(),
            reservation_id: None,
            price: 0.1,
            price_known: true,
            created_at: 0,
            pods: Vec::new(),
            reschedule_cost: 1.0,
            drifted: None,
            pod_blockers: Vec::new(),
            has_termination_grace_period: false,
            termination_grace_period: None,
            initialized: true,
            do_not_repair: false,
            consolidation_wait: None,
            policy: String::new(),
            buffer_pods: 0,
        };
        c.node = node.into();
        Command {
            method: Method::Emptiness,
            candidates: vec![c],
            replacements: vec![],
            savings_per_hour: 0.1,
            computed_at: 0,
            terminate_first: false,
            repair: None,
        }
    }

    #[test]
    fn rejection_suppresses_until_the_cluster_changes() {
        let mut g = Gate::new(Mode::Approve);
        g.propose("d-1".into(), cmd("a"), 0);
        assert!(g.suppressed(&cmd("a"), 1), "an open proposal is not offered twice");
        assert_eq!(g.busy_nodes().into_iter().collect::<Vec<_>>(), ["a"]);
        g.reject("d-1", 1, 5).unwrap();
        assert!(g.suppressed(&cmd("a"), 1));
        assert!(!g.suppressed(&cmd("a"), 2));
        assert!(g.reject("d-1", 1, 6).is_err(), "a decided proposal can't be decided again");
    }

    #[test]
    fn dry_run_never_approves_and_mode_switch_withdraws() {
        let mut g = Gate::new(Mode::DryRun);
        g.propose("d-1".into(), cmd("a"), 0);
        assert!(g.approve("d-1", 1).is_err());
        g.set_mode(Mode::Approve, 2);
        assert!(matches!(g.get("d-1").unwrap().state, GateVerdict::Withdrawn(_)));
        g.propose("d-2".into(), cmd("b"), 3);
        assert!(g.approve("d-2", 4).is_ok());
        assert_eq!(g.get("d-2").unwrap().state, GateVerdict::Approved);
        assert!(g.events().iter().any(|(_, e)| matches!(e, GateEvent::ModeChanged { .. })));
    }
}
