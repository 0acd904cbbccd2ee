//! The disruption controller's state machine, written once for every backend (upstream
//! `pkg/controllers/disruption`): when a pass is due, what becomes of the command it finds (validated after a
//! delay in `auto`, held for an operator in `approve`, only shown in `dry-run`), approval, rejection and
//! withdrawal of proposals, and the orchestration queue that deletes the candidates once their replacements are
//! initialized or gives them back.
//!
//! It decides; it does not touch the cluster. What must happen to objects comes back as [`Act`]s, which the caller
//! carries out: the live controller turns them into API writes, the simulated world applies them to its store.
//! The cluster is read through arguments (the pass and validation run by the caller on its own snapshot), and
//! time is an argument.

use std::collections::{BTreeMap, BTreeSet};

use crate::engine::api::nodeclaim::COND_DISRUPTION_REASON;
use crate::engine::api::{NodeClaim, NodePool};
use crate::engine::disruption::gate::{Gate, Mode};
use crate::engine::disruption::queue::{self, InFlight, Step};
use crate::engine::disruption::{Command, DisruptionOptions, Method, PassResult};
use crate::engine::lifecycle::set_condition;
use crate::engine::objects::Objects;
use crate::engine::provisioning::Millis;
use crate::engine::stored_pod::StoredPod;

use super::timing::{DISRUPTION_POLL, MINUTE, SECOND, STATE_REFRESH};

/// Where a disruption command is, for reports and the dashboard.
#[derive(Debug, Clone, PartialEq)]
pub enum CommandState {
    /// Auto mode: waiting out the validation delay.
    Validating,
    AwaitingApproval,
    /// Dry-run: shown, never started.
    DryRun,
    /// Started: replacements launching, or candidates draining.
    InProgress,
    Executed,
    Rejected,
    Invalidated(String),
    Failed(String),
}

/// Where a disruption command is, without the why: what the dashboard shows (and what [`CommandState`] holds with
/// its reasons).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Phase {
    #[default]
    AwaitingApproval,
    Validating,
    DryRun,
    InProgress,
    Executed,
    Rejected,
    Invalidated,
    Failed,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::AwaitingApproval => "awaiting approval",
            Phase::Validating => "validating",
            Phase::DryRun => "dry-run",
            Phase::InProgress => "in progress",
            Phase::Executed => "executed",
            Phase::Rejected => "rejected",
            Phase::Invalidated => "invalidated",
            Phase::Failed => "failed",
        }
    }

    /// A short form for table cells.
    pub fn short(self) -> &'static str {
        match self {
            Phase::AwaitingApproval => "awaiting",
            Phase::InProgress => "running",
            other => other.as_str(),
        }
    }

    /// Still actionable by an operator.
    pub fn is_open(self) -> bool {
        self == Phase::AwaitingApproval
    }
}

impl CommandState {
    /// The phase, without the reason an invalidated or failed command carries.
    pub fn phase(&self) -> Phase {
        match self {
            CommandState::Validating => Phase::Validating,
            CommandState::AwaitingApproval => Phase::AwaitingApproval,
            CommandState::DryRun => Phase::DryRun,
            CommandState::InProgress => Phase::InProgress,
            CommandState::Executed => Phase::Executed,
            CommandState::Rejected => Phase::Rejected,
            CommandState::Invalidated(_) => Phase::Invalidated,
            CommandState::Failed(_) => Phase::Failed,
        }
    }

    /// Why an invalidated or failed command ended.
    pub fn reason(&self) -> Option<&str> {
        match self {
            CommandState::Invalidated(why) | CommandState::Failed(why) => Some(why),
            _ => None,
        }
    }
}

/// A disruption command as operators see it.
#[derive(Debug, Clone)]
pub struct CommandRecord {
    pub id: String,
    pub at: Millis,
    pub command: Command,
    pub state: CommandState,
}

/// What the caller must do to the cluster.
#[derive(Debug, Clone)]
pub enum Act {
    /// Taint the candidates' nodes `karpenter.sh/disrupted`, set `DisruptionReason` on their NodeClaims, and create
    /// the replacements, reporting each one's name through [`Orchestrator::replacement_created`].
    Start { id: String, command: Command },
    /// Every replacement is initialized: delete the candidates' NodeClaims (their finalizer drains them).
    DeleteCandidates { id: String, command: Command },
    /// The command failed: remove the taint and `DisruptionReason` again.
    RollBack { id: String, command: Command },
}

/// The outcome of an operator's approval.
#[derive(Debug, Clone)]
pub enum Approval {
    /// Valid against the cluster as it is now: started (what it says of itself).
    Started { summary: String },
    /// No longer valid (recorded as invalidated with this reason); nothing was started.
    Invalidated(String),
}

impl Approval {
    /// What the operator is told about approving `id`: `Err` when it no longer holds.
    pub fn message(&self, id: &str) -> Result<String, String> {
        match self {
            Approval::Started { summary } => Ok(format!("{id} approved and started: {summary}")),
            Approval::Invalidated(why) => Err(format!("{id} no longer holds: {why}")),
        }
    }
}

/// One pass's answer, as [`Orchestrator::pass_done`] takes it.
pub struct PassOutcome {
    pub result: PassResult,
    /// The consolidation state the pass saw: the cluster's state, moving every 5 minutes by itself (upstream).
    pub generation: u64,
    /// The cluster state as rejections remember it (a rejected command is not offered again until it changes).
    pub state: u64,
    /// What a quiet period is keyed on: a pass that found nothing is not run again while this holds (and the
    /// quiet period lasts). Backends that can tell any write apart pass something finer than `state`.
    pub quiet_key: u64,
}

/// Voluntary disruption held by an operator (the dashboard's `:pause`): since when, and who asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub since: Millis,
    pub by: String,
}

pub struct Orchestrator {
    gate: Gate,
    /// While set, no voluntary command starts: each is held as a proposal that cannot be approved until the hold
    /// is lifted. Commands already started go on (stopping one halfway would leave tainted nodes behind).
    hold: Option<Hold>,
    options: DisruptionOptions,
    validation_delay: Millis,
    /// `approve` mode holds repairs for an operator too (off: they start at once, as in `auto`).
    approve_repairs: bool,
    /// Auto mode: the command being validated, and when it is due.
    validating: Option<(String, Command, Millis)>,
    in_flight: Vec<InFlight>,
    /// Commands whose replacements are still being created, with how many are outstanding.
    replacements_pending: BTreeMap<String, usize>,
    next_pass: Millis,
    /// The consolidation methods found nothing at this generation; valid until the recheck time.
    consolidated: Option<(u64, Millis)>,
    /// After a pass that found nothing: the state it saw, and until when the same state gives the same answer.
    /// Passes are skipped while both hold.
    quiet: Option<(u64, Millis)>,
    /// The quiet key of the cluster as last asked about in [`Orchestrator::pass_due`].
    key_seen: Option<u64>,
    pub records: Vec<CommandRecord>,
}

impl Orchestrator {
    pub fn new(
        mode: Mode,
        options: DisruptionOptions,
        validation_delay: Millis,
        approve_repairs: bool,
    ) -> Orchestrator {
        Orchestrator {
            gate: Gate::new(mode),
            hold: None,
            options,
            validation_delay,
            approve_repairs,
            validating: None,
            in_flight: Vec::new(),
            replacements_pending: BTreeMap::new(),
            next_pass: Millis::MIN,
            consolidated: None,
            quiet: None,
            key_seen: None,
            records: Vec::new(),
        }
    }

    pub fn mode(&self) -> Mode {
        self.gate.mode()
    }

    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// The options passes and explanations run with (without the per-pass `consolidated` mark).
    pub fn options(&self) -> &DisruptionOptions {
        &self.options
    }

    pub fn in_flight(&self) -> &[InFlight] {
        &self.in_flight
    }

    /// Nodes a command is working on, being validated or waiting for approval on: no other command takes them.
    pub fn busy(&self) -> BTreeSet<String> {
        let mut busy = self.gate.busy_nodes();
        for f in &self.in_flight {
            busy.extend(f.command.node_names());
        }
        if let Some((_, c, _)) = &self.validating {
            busy.extend(c.node_names());
        }
        busy
    }

    /// Commands not started yet that the next pass must assume will happen: those being validated and those
    /// waiting for an operator (in `approve` mode; dry-run proposals are only shown). Their candidates count as
    /// disrupting against budgets and their pods as moving, so a queue of proposals approved in order stays valid.
    pub fn pending_commands(&self) -> Vec<&Command> {
        let mut out: Vec<&Command> = self.validating.iter().map(|(_, c, _)| c).collect();
        if self.gate.mode() == Mode::Approve || self.hold.is_some() && self.gate.mode() == Mode::Auto {
            out.extend(self.gate.awaiting().map(|p| &p.command));
        }
        out
    }

    /// Ids of proposals waiting for an operator.
    pub fn awaiting_approval(&self) -> Vec<String> {
        if self.gate.mode() == Mode::DryRun {
            return Vec::new();
        }
        self.gate.awaiting().map(|p| p.id.clone()).collect()
    }

    fn record(&mut self, id: &str, state: CommandState) {
        if let Some(r) = self.records.iter_mut().rev().find(|r| r.id == id) {
            r.state = state;
        }
    }

    pub fn record_of(&self, id: &str) -> Option<&CommandRecord> {
        self.records.iter().rev().find(|r| r.id == id)
    }

    /// Drives started commands: candidates are deleted once every replacement is initialized; a replacement that
    /// is gone, or a command that takes too long, fails it. Returns what to do, and whether any command still
    /// waits (look again in a second).
    pub fn orchestrate<'c>(&mut self, now: Millis, claim: impl Fn(&str) -> Option<&'c NodeClaim>) -> (Vec<Act>, bool) {
        let mut acts = Vec::new();
        let mut waiting = false;
        let n = self.in_flight.len();
        let mut keep = Vec::new();
        for f in std::mem::take(&mut self.in_flight) {
            if self.replacements_pending.contains_key(&f.id) {
                keep.push(f);
                continue;
            }
            match queue::step(&f, &claim, now, n) {
                Step::Wait => {
                    waiting = true;
                    keep.push(f);
                }
                Step::DeleteCandidates => {
                    self.record(&f.id, CommandState::Executed);
                    acts.push(Act::DeleteCandidates { id: f.id, command: f.command });
                }
                Step::Fail(why) => {
                    self.record(&f.id, CommandState::Failed(why));
                    acts.push(Act::RollBack { id: f.id, command: f.command });
                }
            }
        }
        self.in_flight = keep;
        (acts, waiting)
    }

    /// The command whose validation delay is over, taken out for the caller to validate against the cluster as
    /// it is now (see [`Orchestrator::validated`]).
    pub fn due_validation(&mut self, now: Millis) -> Option<(String, Command)> {
        match &self.validating {
            Some((_, _, due)) if now >= *due => self.validating.take().map(|(id, cmd, _)| (id, cmd)),
            _ => None,
        }
    }

    /// When the command under validation is due, if any.
    pub fn validation_due_at(&self) -> Option<Millis> {
        self.validating.as_ref().map(|(_, _, due)| *due)
    }

    /// The verdict on a command from [`Orchestrator::due_validation`]: started, or recorded as invalidated. A pass
    /// may run at once either way.
    pub fn validated(&mut self, id: String, cmd: Command, verdict: Result<(), String>, now: Millis) -> Vec<Act> {
        self.next_pass = now;
        match verdict {
            Ok(()) => vec![self.start(id, cmd, now)],
            Err(why) => {
                self.record(&id, CommandState::Invalidated(why));
                Vec::new()
            }
        }
    }

    /// Forgets that consolidation found nothing (upstream `MarkUnconsolidated`): the instance types changed (a
    /// NodeOverlay), so the next pass must look again.
    pub fn mark_unconsolidated(&mut self) {
        self.consolidated = None;
        self.quiet = None;
    }

    /// Whether a disruption pass should run now over a cluster in `state` (a pass over the same state during a
    /// quiet period would find the same nothing).
    pub fn pass_due(&mut self, now: Millis, quiet_key: u64) -> bool {
        self.key_seen = Some(quiet_key);
        if now < self.next_pass || self.validating.is_some() {
            return false;
        }
        !self.quiet.is_some_and(|(k, until)| now < until && k == quiet_key)
    }

    /// The quiet period after a pass that found nothing: its key and when it ends.
    pub fn quiet(&self) -> Option<(u64, Millis)> {
        self.quiet
    }

    /// When the next pass may run.
    pub fn next_pass_at(&self) -> Millis {
        self.next_pass
    }

    /// When a pass may next be needed if nothing else happens: the next poll, or while a quiet period holds (the
    /// cluster is as the pass that found nothing saw it) its end, whichever is later; and the validation due.
    pub fn pass_wakes(&self) -> Vec<Millis> {
        let mut wakes = Vec::new();
        match self.quiet.filter(|(k, _)| Some(*k) == self.key_seen) {
            // Nothing can change the answer but a change in the cluster, which is a reason to run by itself.
            Some((_, Millis::MAX)) => {}
            Some((_, until)) => wakes.push(until.max(self.next_pass)),
            None => wakes.push(self.next_pass),
        }
        if let Some((_, _, due)) = &self.validating {
            wakes.push(*due);
        }
        wakes
    }

    /// Proposals whose nodes are gone or going are withdrawn. `node` says of a node name whether it is there and
    /// whether it is being deleted.
    pub fn withdraw_stale(&mut self, now: Millis, node: impl Fn(&str) -> Option<bool>) {
        let mut stale = Vec::new();
        for p in self.gate.awaiting() {
            for c in &p.command.candidates {
                let gone = match node(&c.node) {
                    None => Some(format!("node {} is gone", c.node)),
                    Some(true) => Some(format!("node {} is being deleted", c.node)),
                    Some(false) => None,
                };
                if let Some(why) = gone {
                    stale.push((p.id.clone(), why));
                    break;
                }
            }
        }
        for (id, why) in stale {
            self.gate.withdraw(&id, &why, now);
            self.record(&id, CommandState::Invalidated(why));
        }
    }

    /// Starts a pass: the next is due after upstream's polling period unless this one finds a command. Returns
    /// the options to run it with (`consolidated` set while the cluster has not changed since the consolidation
    /// methods last found nothing).
    pub fn begin_pass(&mut self, now: Millis, generation: u64) -> DisruptionOptions {
        self.next_pass = now + DISRUPTION_POLL;
        let consolidated = self.consolidated.is_some_and(|(g, recheck)| g == generation && now < recheck);
        DisruptionOptions { consolidated, ..self.options.clone() }
    }

    /// Takes a pass's result. `new_id` names a new command; `quiet_until` says, for a pass that found nothing,
    /// until when an unchanged cluster would give the same answer (from the pass's own recheck time and whatever
    /// timed inputs the caller knows of). Returns what to start now (a drift command in `auto` mode).
    pub fn pass_done(
        &mut self,
        out: PassOutcome,
        now: Millis,
        new_id: impl FnOnce() -> String,
        quiet_until: impl FnOnce(Option<Millis>) -> Millis,
    ) -> Vec<Act> {
        let PassOutcome { result, generation, state, quiet_key } = out;
        let was_consolidated = self.consolidated.is_some_and(|(g, recheck)| g == generation && now < recheck);
        if result.consolidated && !was_consolidated {
            self.consolidated = Some((generation, result.recheck_at.unwrap_or(Millis::MAX)));
        }
        let Some(cmd) = result.command else {
            self.quiet = Some((quiet_key, quiet_until(result.recheck_at)));
            return Vec::new();
        };
        let mode = self.gate.mode();
        let held = self.hold.is_some();
        if (mode != Mode::Auto || held) && self.gate.suppressed(&cmd, state) {
            // Only what is already proposed or was rejected: as good as nothing until the cluster changes (which
            // also lifts a rejection) or the gate does.
            self.quiet = Some((quiet_key, quiet_until(result.recheck_at)));
            return Vec::new();
        }
        self.quiet = None;
        // A command: look again soon, like upstream's immediate requeue.
        self.next_pass = now + SECOND;
        let id = new_id();
        // Drift and repair are not validated after a delay upstream; a repair goes unapproved when told to.
        let unvalidated = matches!(cmd.method, Method::Drift | Method::StaticDrift | Method::Repair);
        let unattended = cmd.method == Method::Repair && !self.approve_repairs && mode == Mode::Approve && !held;
        let state = match mode {
            Mode::Auto if held => CommandState::AwaitingApproval,
            Mode::Auto if unvalidated => CommandState::InProgress,
            Mode::Auto => CommandState::Validating,
            Mode::Approve if unattended => CommandState::InProgress,
            Mode::Approve => CommandState::AwaitingApproval,
            Mode::DryRun => CommandState::DryRun,
        };
        self.records.push(CommandRecord { id: id.clone(), at: now, command: cmd.clone(), state });
        match mode {
            Mode::Auto if held => {
                self.gate.propose(id, cmd, now);
                Vec::new()
            }
            Mode::Auto if unvalidated => vec![self.start(id, cmd, now)],
            Mode::Approve if unattended => vec![self.start(id, cmd, now)],
            Mode::Auto => {
                self.validating = Some((id, cmd, now + self.validation_delay));
                Vec::new()
            }
            Mode::Approve | Mode::DryRun => {
                self.gate.propose(id, cmd, now);
                Vec::new()
            }
        }
    }

    fn start(&mut self, id: String, cmd: Command, now: Millis) -> Act {
        // A reboot is done once committed: the reboot controller carries it out, nothing waits in the queue.
        if cmd.is_reboot() {
            self.record(&id, CommandState::Executed);
            return Act::Start { id, command: cmd };
        }
        if !cmd.replacements.is_empty() {
            self.replacements_pending.insert(id.clone(), cmd.replacements.len());
        }
        self.record(&id, CommandState::InProgress);
        self.in_flight.push(InFlight {
            id: id.clone(),
            command: cmd.clone(),
            replacements: Vec::new(),
            started_at: now,
        });
        Act::Start { id, command: cmd }
    }

    /// A replacement of command `id` was created (`Some(name)`) or could not be (`None`: the command fails on
    /// the next orchestration, since a replacement that does not exist can never initialize).
    pub fn replacement_created(&mut self, id: &str, name: Option<String>) {
        if let Some(f) = self.in_flight.iter_mut().find(|f| f.id == id) {
            f.replacements.push(name.unwrap_or_else(|| "(creation failed)".to_string()));
        }
        if let Some(left) = self.replacements_pending.get_mut(id) {
            *left = left.saturating_sub(1);
            if *left == 0 {
                self.replacements_pending.remove(id);
            }
        }
    }

    /// The command of open proposal `id`, for the caller to validate against the cluster as it is now (with its
    /// own nodes not counted as busy) before [`Self::approve`].
    pub fn proposal(&self, id: &str) -> Option<&Command> {
        self.gate.awaiting().find(|p| p.id == id).map(|p| &p.command)
    }

    /// An operator approved proposal `id`, whose validation gave `verdict`: started (with what to do), or recorded
    /// as invalidated. `Err` when there is no such open proposal (or in dry-run mode).
    pub fn approve(
        &mut self,
        id: &str,
        now: Millis,
        verdict: Result<(), String>,
    ) -> Result<(Approval, Vec<Act>), String> {
        if let Some(h) = &self.hold {
            return Err(format!("voluntary disruption is paused (by {}): resume it first", h.by));
        }
        let cmd = self.gate.approve(id, now)?;
        // Its nodes are no longer held by an open proposal: the next pass may find something else.
        self.quiet = None;
        match verdict {
            Ok(()) => {
                let summary = cmd.summary();
                Ok((Approval::Started { summary }, vec![self.start(id.to_string(), cmd, now)]))
            }
            Err(why) => {
                self.record(id, CommandState::Invalidated(why.clone()));
                Ok((Approval::Invalidated(why), Vec::new()))
            }
        }
    }

    /// An operator rejected proposal `id`; it is not offered again until the cluster's `state` changes.
    pub fn reject(&mut self, id: &str, state: u64, now: Millis) -> Result<(), String> {
        self.gate.reject(id, state, now)?;
        self.record(id, CommandState::Rejected);
        // The proposal's nodes are free again: the next pass may find another command with them.
        self.quiet = None;
        Ok(())
    }

    /// Switches the disruption mode. Open proposals were made under the old mode's rules and are withdrawn; a
    /// pass runs at once under the new one.
    /// Repack joins the methods under cost packing (from the next pass).
    pub fn set_packing(&mut self, packing: crate::engine::packing::Packing) {
        self.options.packing = packing;
    }

    pub fn hold(&self) -> Option<&Hold> {
        self.hold.as_ref()
    }

    /// Pauses (`Some`) or resumes (`None`) voluntary disruption. Pausing drops the command being validated (it
    /// would start at the end of its validation); resuming in `auto` mode withdraws what was held, since those
    /// proposals have no one to approve them, and runs a pass at once. `Err` when already in that state.
    pub fn set_hold(&mut self, hold: Option<Hold>, now: Millis) -> Result<(), String> {
        match (&self.hold, &hold) {
            (Some(h), Some(_)) => return Err(format!("voluntary disruption is already paused (by {})", h.by)),
            (None, None) => return Err("voluntary disruption is not paused".into()),
            _ => {}
        }
        if hold.is_some() {
            if let Some((id, _, _)) = self.validating.take() {
                self.record(&id, CommandState::Invalidated("voluntary disruption paused".into()));
            }
        } else if self.gate.mode() == Mode::Auto {
            let held: Vec<String> = self.gate.awaiting().map(|p| p.id.clone()).collect();
            for id in held {
                let why = "held while voluntary disruption was paused; recomputed";
                self.gate.withdraw(&id, why, now);
                self.record(&id, CommandState::Invalidated(why.into()));
            }
        }
        self.hold = hold;
        self.next_pass = now;
        self.quiet = None;
        Ok(())
    }

    pub fn set_mode(&mut self, mode: Mode, now: Millis) {
        let open: Vec<String> = self.gate.awaiting().map(|p| p.id.clone()).collect();
        self.gate.set_mode(mode, now);
        for id in open {
            self.record(&id, CommandState::Invalidated(format!("disruption mode changed to {mode}")));
        }
        self.next_pass = now;
        self.quiet = None;
    }
}

/// The consolidation state: the cluster's `state`, moving every 5 minutes by itself (upstream), so a cluster
/// marked consolidated is looked at again now and then even when nothing changes.
pub fn consolidation_generation(state: u64, now: Millis) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    state.hash(&mut h);
    now.div_euclid(STATE_REFRESH).hash(&mut h);
    h.finish()
}

/// Until when a pass over an unchanged cluster could give no other answer than "nothing": the pass's own recheck
/// time (consolidateAfter and nominations running out), the next minute when a budget has a schedule (cron
/// resolution), and the end of the soonest timed `do-not-disrupt` on a pod.
pub fn quiet_until<'p>(
    now: Millis,
    recheck_at: Option<Millis>,
    mut pools: impl Iterator<Item = &'p NodePool>,
    pods: impl Iterator<Item = &'p StoredPod>,
) -> Millis {
    let mut until = recheck_at.unwrap_or(Millis::MAX);
    if pools.any(|p| p.spec.disruption.budgets.iter().any(|b| b.schedule.is_some())) {
        until = until.min((now.div_euclid(MINUTE) + 1) * MINUTE);
    }
    let expiries = pods.filter_map(crate::engine::termination::do_not_disrupt_expiry);
    if let Some(end) = expiries.filter(|end| *end > now).min() {
        until = until.min(end);
    }
    until
}

/// The NodeClaims as a pass should see them when the `pending` commands (see
/// [`Orchestrator::pending_commands`]) are taken to happen, as upstream's next pass sees a command in flight: their
/// candidates marked for deletion (they count as disrupting against budgets, and their pods need a place) and
/// their replacements present as NodeClaims not launched yet. `None` when nothing is pending.
pub fn assumed_nodeclaims(claims: Objects<'_, NodeClaim>, pending: &[&Command], now: Millis) -> Option<Vec<NodeClaim>> {
    if pending.is_empty() {
        return None;
    }
    let marked: BTreeMap<&str, &Command> =
        pending.iter().flat_map(|cmd| cmd.candidates.iter().map(move |c| (c.nodeclaim.as_str(), *cmd))).collect();
    let mut out: Vec<NodeClaim> = claims
        .iter()
        .map(|c| {
            let mut c = c.clone();
            if let Some(cmd) = marked.get(c.name()) {
                set_condition(&mut c, COND_DISRUPTION_REASON, "True", cmd.reason().as_str(), "assumed", now);
            }
            c
        })
        .collect();
    for (i, cmd) in pending.iter().enumerate() {
        for (j, r) in cmd.replacements.iter().enumerate() {
            let mut c = r.nodeclaim.clone();
            // Never a real name: generated names end in five random characters.
            c.metadata.name = Some(format!("{}-assumed-replacement-{i}-{j}", r.nodepool));
            out.push(c);
        }
    }
    Some(out)
}
