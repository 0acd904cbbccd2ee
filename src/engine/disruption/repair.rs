//! Node repair as a voluntary disruption method (Karpenter v1.15 with the `NodeRepair` gate; spec engine-v115
//! §1.4–§1.5): a node whose conditions a repair policy has tolerated long enough is replaced like a drifted one —
//! its replacement launched first, paced by the `Unhealthy` budget, held by `karpenter.sh/do-not-repair` — and the
//! node is deleted with its drain bounded by the policy's grace period. Which policies a node matches and what they
//! add up to is the cloud's business, worked out by the controller ([`RepairInputs`]); this is what the disruption
//! controller does with it. v1.14's forceful repair is `controller::repair`.

use std::collections::BTreeMap;

use super::candidates::{Candidate, Survey};
use super::consolidation::Simulator;
use super::{Command, Context, Method, Replacement};
use crate::engine::labels;
use crate::engine::provisioning::Millis;
use crate::engine::static_capacity as sc;

/// At most this share of a NodePool's nodes may be unhealthy for repair to go on in it, rounded up.
pub const ALLOWED_UNHEALTHY_PERCENT: u64 = 20;

/// `ceil(20 % × total)`: how many unhealthy nodes a pool of `total` nodes tolerates.
pub fn unhealthy_threshold(total: usize) -> usize {
    (total as u64 * ALLOWED_UNHEALTHY_PERCENT).div_ceil(100) as usize
}

/// What the cloud's repair policies say of one node whose repair is due.
#[derive(Debug, Clone, PartialEq)]
pub struct Due {
    /// The condition whose policy chose the action.
    pub condition: String,
    /// Urgency: the policy's priority rank plus half-hours past eligibility (higher goes first).
    pub score: f64,
    /// When that condition's policy became eligible.
    pub eligible_since: Millis,
    /// The shortest termination grace period the eligible policies set (`None`: none does).
    pub policy_grace: Option<Millis>,
    /// The policies say reboot the node in place rather than replace it.
    pub reboot: bool,
}

/// `karpenter.sh/do-not-repair` vetoes repair: only the exact value `"true"` does.
pub fn says_do_not_repair(annotations: Option<&BTreeMap<String, String>>) -> bool {
    annotations.and_then(|a| a.get(labels::ANNOTATION_DO_NOT_REPAIR)).is_some_and(|v| v == "true")
}

/// What repair reads besides the cluster: the nodes due for repair and each pool's health.
#[derive(Debug, Clone, Default)]
pub struct RepairInputs {
    /// Nodes whose repair is due, by node name.
    pub due: BTreeMap<String, Due>,
    /// Per NodePool: (its Nodes, those with a condition some policy watches, however new).
    pub health: BTreeMap<String, (usize, usize)>,
    /// When the earliest match not yet due becomes due: a pass must look again then.
    pub next_due: Option<Millis>,
}

/// Nothing to repair (repair off, or a backend that does not model it).
pub static NO_REPAIRS: RepairInputs = RepairInputs { due: BTreeMap::new(), health: BTreeMap::new(), next_due: None };

/// The repair half of a command: why the node goes and how long its drain may take.
#[derive(Debug, Clone, PartialEq)]
pub struct RepairDetail {
    pub condition: String,
    pub score: f64,
    pub eligible_since: Millis,
    /// Replace: min(policy grace, NodeClaim grace) when the policy sets one, the drain's deadline stamped this long
    /// after the replacement is up (`None`: the NodeClaim's own terminationGracePeriod, if any, governs). Reboot:
    /// how long the drain before the reboot may take, the policy's bound or else the NodeClaim's (`None`:
    /// unbounded).
    pub drain: Option<Millis>,
    /// Reboot the node in place (no replacement, no deletion).
    pub reboot: bool,
}

/// Why a node a method would disrupt is held back: repair's vetoes and breaker, and what a static pool can neither
/// replace first nor terminate first. Each becomes an Event upstream publishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockReason {
    /// `karpenter.sh/do-not-repair: "true"` on the Node or the NodeClaim.
    DoNotRepair,
    /// Pods that block eviction, and no grace period to end the drain.
    NeedsGracePeriod,
    /// No NodePool (label missing, or the pool is gone): no template to replace from, no budget to pace by.
    NoNodePool,
    /// More than 20 % of the pool's nodes are unhealthy.
    Breaker { nodepool: String },
    /// A static pool at `limits.nodes` cannot stage the replacement (and cannot terminate first).
    StaticAtLimit,
    /// A reserved-only static pool whose reservations are all full, for a node that frees no slot in one of them.
    StaticReservationsFull,
    /// The node's pods would not all find a place.
    Unschedulable { why: String },
}

impl BlockReason {
    /// The Event's reason: the breaker is `NodeDisruptionBlocked`, the rest `DisruptionBlocked`.
    pub fn event_reason(&self) -> &'static str {
        match self {
            BlockReason::Breaker { .. } => "NodeDisruptionBlocked",
            _ => "DisruptionBlocked",
        }
    }

    /// Upstream's message.
    pub fn message(&self) -> String {
        match self {
            BlockReason::DoNotRepair => {
                format!("repair is blocked through the \"{}\" annotation", labels::ANNOTATION_DO_NOT_REPAIR)
            }
            BlockReason::NeedsGracePeriod => {
                "repair requires a termination grace period to bypass blocking pods".into()
            }
            BlockReason::NoNodePool => "repair requires a NodePool to construct and budget a safe replacement".into(),
            BlockReason::Breaker { nodepool } => {
                format!("more than {ALLOWED_UNHEALTHY_PERCENT}% of nodes in nodepool \"{nodepool}\" are unhealthy")
            }
            BlockReason::StaticAtLimit => "static NodePool is at its node limit and cannot stage a replacement".into(),
            BlockReason::StaticReservationsFull => {
                "static NodePool's capacity reservations are full and cannot stage a replacement".into()
            }
            BlockReason::Unschedulable { why } => format!("repair would leave pods unschedulable: {why}"),
        }
    }
}

/// A node held back from repair or static drift, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DisruptionBlocked {
    pub node: String,
    pub nodeclaim: String,
    /// Set for the breaker, whose Event goes to the NodePool too.
    pub nodepool: Option<String>,
    pub why: BlockReason,
}

impl DisruptionBlocked {
    pub(super) fn of(c: &Candidate, why: BlockReason) -> DisruptionBlocked {
        let nodepool = matches!(why, BlockReason::Breaker { .. }).then(|| c.nodepool.clone());
        DisruptionBlocked { node: c.node.clone(), nodeclaim: c.nodeclaim.clone(), nodepool, why }
    }
}

/// The repair method: at most one command a pass, the most urgent node first. `left` is each pool's `Unhealthy`
/// budget. Returns the command and every node due that was held back with an Event's worth of why.
pub(super) fn repair<'s>(
    ctx: &Context<'_>,
    survey: &Survey,
    sim: impl Fn() -> &'s Simulator<'s>,
    left: &BTreeMap<String, i64>,
) -> (Option<Command>, Vec<DisruptionBlocked>) {
    let mut blocked = survey.repair_blocked.clone();
    // Upstream filters every candidate (its vetoes published) before it computes a command.
    let mut list = Vec::new();
    for (c, due) in due_candidates(ctx, survey) {
        match veto(c, due) {
            Some(why) => blocked.push(DisruptionBlocked::of(c, why)),
            None => list.push((c, due)),
        }
    }
    for (c, due) in list {
        match evaluate(ctx, c, due, &sim, left) {
            Verdict::Repair(cmd) => return (Some(*cmd), blocked),
            Verdict::Blocked(why) => blocked.push(DisruptionBlocked::of(c, why)),
            Verdict::Budget | Verdict::OverScaled => {}
        }
    }
    (None, blocked)
}

/// What repair would do with one node due for it.
pub(super) enum Verdict {
    Repair(Box<Command>),
    /// Held back with an Event's worth of why.
    Blocked(BlockReason),
    /// The pool's `Unhealthy` budget allows nothing now (no Event, as upstream).
    Budget,
    /// A static pool over its replicas: its scale-down goes first (no Event).
    OverScaled,
}

/// The nodes due for repair that repair may consider, most urgent first (ties: the cheaper disruption, then the
/// name).
pub(super) fn due_candidates<'a>(ctx: &Context<'a>, survey: &'a Survey) -> Vec<(&'a Candidate, &'a Due)> {
    let inputs: &'a RepairInputs = ctx.repair;
    let mut list: Vec<(&Candidate, &Due)> = survey
        .candidates
        .iter()
        .chain(&survey.repair_candidates)
        .chain(&survey.static_candidates)
        .filter_map(|c| Some((c, inputs.due.get(&c.node)?)))
        .collect();
    list.sort_by(|(a, da), (b, db)| {
        db.score.total_cmp(&da.score).then(a.reschedule_cost.total_cmp(&b.reschedule_cost)).then(a.node.cmp(&b.node))
    });
    list
}

/// What keeps a node due for repair out of it whatever the pool's state: `do-not-repair`, or pods that block
/// eviction with nothing to bound the drain.
pub(super) fn veto(c: &Candidate, due: &Due) -> Option<BlockReason> {
    if c.do_not_repair {
        return Some(BlockReason::DoNotRepair);
    }
    if !c.pod_blockers.is_empty() && due.policy_grace.is_none() && !c.has_termination_grace_period {
        return Some(BlockReason::NeedsGracePeriod);
    }
    None
}

/// Upstream's checks for one candidate, in its order: the vetoes, the pool's 20% rule, the budget, then the
/// replacement (a static pool's template, or whatever a simulation of its pods needs).
pub(super) fn evaluate<'s>(
    ctx: &Context<'_>,
    c: &Candidate,
    due: &Due,
    sim: &impl Fn() -> &'s Simulator<'s>,
    left: &BTreeMap<String, i64>,
) -> Verdict {
    if let Some(why) = veto(c, due) {
        return Verdict::Blocked(why);
    }
    let (total, unhealthy) = ctx.repair.health.get(&c.nodepool).copied().unwrap_or((0, 0));
    if unhealthy > unhealthy_threshold(total) {
        return Verdict::Blocked(BlockReason::Breaker { nodepool: c.nodepool.clone() });
    }
    // Uninitialized nodes never had the pool's trust: their repair is not paced.
    if c.initialized && left.get(&c.nodepool).copied().unwrap_or(0) <= 0 {
        return Verdict::Budget;
    }
    let detail = |drain, reboot| RepairDetail {
        condition: due.condition.clone(),
        score: due.score,
        eligible_since: due.eligible_since,
        drain,
        reboot,
    };
    if due.reboot {
        return Verdict::Repair(Box::new(Command {
            method: Method::Repair,
            candidates: vec![c.clone()],
            replacements: Vec::new(),
            savings_per_hour: 0.0,
            computed_at: ctx.now,
            terminate_first: false,
            repair: Some(detail(due.policy_grace.or(c.termination_grace_period), true)),
        }));
    }
    let drain = due.policy_grace.map(|p| c.termination_grace_period.map_or(p, |t| t.min(p)));
    let pool = ctx.snap.nodepools.iter().find(|p| p.name() == c.nodepool);
    let replacements = match pool.filter(|p| sc::is_static(p)) {
        Some(pool) => {
            let nodes = crate::engine::state::Nodes::of(&ctx.snap);
            let count = sc::count(&c.nodepool, ctx.snap.nodeclaims.iter(), &nodes, ctx.busy);
            // Over-scaled: scale-down goes first.
            if count.active + count.pending > pool.spec.replicas.unwrap_or(0) {
                return Verdict::OverScaled;
            }
            if sc::grant(sc::node_limit(pool), &count, 1) < 1 {
                // v1.15's TerminateFirstRepair: delete first and let static provisioning refill the slot.
                if ctx.options.terminate_first_repair && super::terminate_first::refillable(pool) {
                    return Verdict::Repair(Box::new(first(ctx, c, detail(drain, false))));
                }
                return Verdict::Blocked(BlockReason::StaticAtLimit);
            }
            vec![Replacement {
                nodepool: c.nodepool.clone(),
                instance_types: Vec::new(),
                option_prices: Vec::new(),
                price: 0.0,
                nodeclaim: sc::static_nodeclaim(pool),
            }]
        }
        None => {
            let out = sim().run(&[c], false);
            if let Some(e) = out.errors.first() {
                if ctx.options.terminate_first_repair && super::terminate_first::fits_after_delete(ctx, sim(), c) {
                    return Verdict::Repair(Box::new(first(ctx, c, detail(drain, false))));
                }
                return Verdict::Blocked(BlockReason::Unschedulable { why: e.to_string() });
            }
            out.new_claims.into_iter().map(|n| super::consolidation::replacement(ctx, n)).collect()
        }
    };
    Verdict::Repair(Box::new(Command {
        method: Method::Repair,
        candidates: vec![c.clone()],
        replacements,
        savings_per_hour: 0.0,
        computed_at: ctx.now,
        terminate_first: false,
        repair: Some(detail(drain, false)),
    }))
}

/// A repair that deletes its node before anything replaces it (terminate-first).
fn first(ctx: &Context<'_>, c: &Candidate, detail: RepairDetail) -> Command {
    Command { repair: Some(detail), ..super::terminate_first::command(ctx, Method::Repair, vec![c.clone()]) }
}
