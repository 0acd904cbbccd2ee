//! Cost packing (`packing: cost`): the same scheduler, the same constraint checks, but NodeClaims sized for the
//! cheapest fleet instead of the largest type.
//!
//! Upstream opens a NodeClaim for the first pod that fits nowhere and keeps adding pods while any compatible type
//! can still hold them, so a large batch ends on the largest types (with ENI-sized max-pods, the very largest).
//! Here, existing nodes are filled first; then, per NodePool in weight order:
//! 1. the assignment LP ([`crate::engine::packing::lp`]), offered each class's best types, names the best-value
//!    types, how many of each the batch needs and which pods each holds (in the first round, for a batch without
//!    topology constraints, with whole-instance patterns on small types, so the mixes it names are ones an
//!    instance holds);
//! 2. the whole instances it buys are opened, each claim capped at its type (its options cut to the types no
//!    larger than it); the plan's pods for the type are dealt round-robin over them, largest first, so each holds
//!    about the plan's mix; then each takes the plan's other pods for the type, then anything that still fits, the
//!    best match for the room left first (largest dot product, both scaled by the type's capacity);
//! 3. the LP is solved again for what is left, and from the third round on (or once a later round buys no whole
//!    instance) the fraction of an instance it buys is split over smaller best-value types (`fraction_type`);
//! 4. whatever could not be placed that way (a constraint only relaxation satisfies, a pod larger than every
//!    target) goes through upstream's pod-by-pod path, which may still use the claims opened here.
//!
//! Every placement goes through the same `can_add_to_claim` / `open_claim` checks as upstream mode, so every
//! constraint upstream honours (requirements, affinity, topology spread, taints, host ports, volume zones,
//! DaemonSet overhead, limits, minValues, weights) holds for cost plans too. The launch itself is unchanged: the
//! cheapest option that holds the claim's pods.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::bitset::Bitset;
use super::pod::PodData;
use super::template::Template;
use super::{Input, Prepared, Results, Scheduler, topology};
use crate::engine::explain::PoolRejection;
use crate::engine::packing::lp::{self, Column};
use crate::engine::requirements::Requirements;
use crate::engine::resources::Resources;

/// Capacity each type of `tpl` leaves pods once its DaemonSets run.
pub(super) fn net_capacity(tpl: &Template) -> Vec<Resources> {
    let mut out = tpl.allocatable.clone();
    for g in &tpl.daemon_groups {
        if g.overhead.is_zero() {
            continue;
        }
        for ti in g.types.iter() {
            let mut r = tpl.allocatable[ti].minus(&g.overhead);
            r.floor_zero();
            out[ti] = r;
        }
    }
    out
}

/// The LP columns of a template: one per type, at its cheapest offering under the template's requirements (no
/// pod can buy it cheaper, so the bound stays a bound whatever zones or capacity types pods ask for).
fn columns(tpl: &Template, net: &[Resources]) -> Vec<Column> {
    (0..tpl.types.len())
        .map(|ti| Column { price: tpl.price(ti, &tpl.requirements), capacity: net[ti].clone() })
        .collect()
}

/// The types of `tpl` one pod could launch on alone: requirements, offerings, its requests plus DaemonSets.
fn pod_types(tpl: &Template, pod: &PodData) -> Bitset {
    let mut reqs: Requirements = tpl.requirements.clone();
    let strict = pod.strict_requirements();
    if !reqs.admits(&strict, None) {
        return Bitset::empty(tpl.types.len());
    }
    reqs = reqs.intersected(&strict);
    let mut b = tpl.compatible_types(&reqs).and(&tpl.offered_types(&reqs));
    b.and_with(&tpl.fitting_types(&pod.requests, &pod.host_ports));
    b
}

/// Pods that are interchangeable for placement: same requests and same constraints. Only their names, uids,
/// creation times and priorities may differ.
pub(super) fn same_class(a: &PodData, b: &PodData) -> bool {
    a.requests == b.requests
        && a.namespace == b.namespace
        && a.labels == b.labels
        && a.tolerations == b.tolerations
        && a.node_selector == b.node_selector
        && a.required_terms == b.required_terms
        && a.preferred_terms == b.preferred_terms
        && a.spreads == b.spreads
        && a.affinity == b.affinity
        && a.preferred_affinity == b.preferred_affinity
        && a.anti_affinity == b.anti_affinity
        && a.preferred_anti_affinity == b.preferred_anti_affinity
        && a.host_ports == b.host_ports
        && a.pvcs == b.pvcs
        && a.tolerate_prefer_no_schedule == b.tolerate_prefer_no_schedule
}

pub(super) fn class_hash(p: &PodData) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    p.requests.hash(&mut h);
    p.namespace.hash(&mut h);
    p.labels.hash(&mut h);
    p.node_selector.hash(&mut h);
    p.pvcs.hash(&mut h);
    h.finish()
}

/// Interchangeable pods, in queue order.
struct Class {
    pods: Vec<usize>,
    /// Next pod of `pods` not placed yet.
    next: usize,
    requests: Resources,
    /// The pods' requirements when they have no topology constraints: then every pod of the class has the same
    /// context wherever it is tried, and it is built once (`None` inside: built per try).
    plain: std::cell::OnceCell<Option<Requirements>>,
}

impl Class {
    fn head(&self) -> Option<usize> {
        self.pods.get(self.next).copied()
    }
}

/// Groups `order` (queue order) into classes, the classes in order of their first pod.
fn classes(pods: &[Arc<PodData>], order: &[usize]) -> Vec<Class> {
    // Pods are compared in memory order, then dealt out in queue order: comparing a pod with its class touches most
    // of it, and twenty thousand pods visited in queue order are a cache miss or more each.
    const NONE: usize = usize::MAX;
    let mut wanted = vec![false; pods.len()];
    for &i in order {
        wanted[i] = true;
    }
    let mut class_of = vec![NONE; pods.len()];
    let mut first: Vec<usize> = Vec::new();
    let mut by_hash: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, p) in pods.iter().enumerate() {
        if !wanted[i] {
            continue;
        }
        let bucket = by_hash.entry(class_hash(p)).or_default();
        class_of[i] = match bucket.iter().find(|&&c| same_class(&pods[first[c]], p)) {
            Some(&c) => c,
            None => {
                bucket.push(first.len());
                first.push(i);
                first.len() - 1
            }
        };
    }
    let mut renumbered = vec![NONE; first.len()];
    let mut out: Vec<Class> = Vec::with_capacity(first.len());
    for &i in order {
        let c = &mut renumbered[class_of[i]];
        if *c == NONE {
            *c = out.len();
            out.push(Class {
                pods: Vec::new(),
                next: 0,
                requests: pods[i].requests.clone(),
                plain: Default::default(),
            });
        }
        out[*c].pods.push(i);
    }
    out
}

/// How well `need` fills `room`: their dot product with both scaled by the target's capacity. Large pods shaped
/// like the room score highest.
fn score(need: &Resources, room: &Resources, cap: &Resources) -> f64 {
    // Called for every class at every placement: no allocation.
    let term = |n: i64, r: i64, c: i64| if c <= 0 { 0.0 } else { (n as f64 / c as f64) * (r.max(0) as f64 / c as f64) };
    let mut s = term(need.cpu, room.cpu, cap.cpu)
        + term(need.memory, room.memory, cap.memory)
        + term(need.ephemeral_storage, room.ephemeral_storage, cap.ephemeral_storage)
        + term(need.pods, room.pods, cap.pods);
    for (k, c) in &cap.extended {
        s += term(need.get(k), room.get(k), *c);
    }
    s
}

impl Scheduler<'_> {
    /// The pod's requirements and topology contexts, as `add` computes them.
    fn context(&self, pod: &PodData) -> (Requirements, Vec<topology::GroupCtx>) {
        let strict = pod.strict_requirements();
        let reqs = pod.requirements();
        let group_ids = self.topology.constraints_for(pod);
        let groups = self.topology.prepare(pod, &group_ids, &strict);
        (reqs, groups)
    }

    /// [`Scheduler::context`] for a pod of `class`, built once for a class without topology constraints.
    fn class_context<'c>(
        &self,
        class: &'c Class,
        pod: &PodData,
    ) -> (std::borrow::Cow<'c, Requirements>, Vec<topology::GroupCtx>) {
        let plain =
            class.plain.get_or_init(|| self.topology.constraints_for(pod).is_empty().then(|| pod.requirements()));
        match plain {
            Some(r) => (std::borrow::Cow::Borrowed(r), Vec::new()),
            None => {
                let (r, g) = self.context(pod);
                (std::borrow::Cow::Owned(r), g)
            }
        }
    }

    /// Cost packing's solve (see the module comment). `pods` must be the slice given to `new`.
    pub(super) fn solve_cost(mut self, pods: &[Arc<PodData>]) -> Results {
        let mut results = Results::default();
        let queue = self.queue(pods, &mut results);
        // Existing nodes first, each filled with the pending pods that best match its room. Claims an earlier cost
        // solve made and that have not launched yet are such nodes: this finds them the pods they were made for,
        // where upstream's first fit in queue order would scatter those pods and launch again for the rest.
        let rank: HashMap<usize, usize> = queue.iter().enumerate().map(|(r, &i)| (i, r)).collect();
        let queue = self.place_hinted(pods, queue);
        let mut waiting = classes(pods, &queue);
        self.fill_nodes(pods, &mut waiting);
        // What is left of each class, the classes in order of their first pod left (as `classes` would group them).
        let mut all: Vec<Class> = waiting
            .into_iter()
            .filter(|c| c.next < c.pods.len())
            .map(|c| Class { pods: c.pods[c.next..].to_vec(), next: 0, requests: c.requests, plain: c.plain })
            .collect();
        all.sort_by_key(|c| rank.get(&c.pods[0]).copied().unwrap_or(usize::MAX));
        // The NodePool each class would open a NodeClaim from: the first, in weight order, whose template takes it.
        let mut per_template: Vec<Vec<usize>> = vec![Vec::new(); self.fixed.templates.len()];
        let mut leftover: Vec<usize> = Vec::new();
        for (k, class) in all.iter().enumerate() {
            let i = class.pods[0];
            let (reqs, groups) = self.context(&pods[i]);
            let mut chosen = None;
            for t in 0..self.fixed.templates.len() {
                match self.probe_template(t, i, &pods[i], &reqs, &groups) {
                    Ok(()) => {
                        chosen = Some(t);
                        break;
                    }
                    // Waiting for a held reservation bars lower-weight NodePools, as in upstream's path.
                    Err(PoolRejection::ReservedOffering { .. }) => break,
                    Err(_) => {}
                }
            }
            match chosen {
                Some(t) => per_template[t].push(k),
                None => leftover.extend(class.pods.iter().copied()),
            }
        }
        for (t, ks) in per_template.iter().enumerate() {
            if ks.is_empty() {
                continue;
            }
            let mut mine: Vec<Class> = ks.iter().map(|&k| std::mem::replace(&mut all[k], empty_class())).collect();
            self.pack_template(t, pods, &mut mine);
            leftover.extend(mine.iter().flat_map(|c| c.pods[c.next..].iter().copied()));
        }
        // Upstream's path for the rest, in queue order, with its retries and relaxation.
        leftover.sort_by_key(|i| rank.get(i).copied().unwrap_or(usize::MAX));
        self.run_queue(pods, leftover, &mut results);
        self.finalize(&mut results);
        results
    }

    /// Pods an earlier solve made an in-flight claim for go back onto it when it still takes them; returns the rest
    /// in queue order.
    fn place_hinted(&mut self, pods: &[Arc<PodData>], queue: Vec<usize>) -> Vec<usize> {
        let hints = self.input.options.hints.clone();
        if hints.is_empty() {
            return queue;
        }
        let by_name: HashMap<String, usize> =
            self.nodes.iter().enumerate().map(|(n, x)| (x.name.to_string(), n)).collect();
        let mut rest = Vec::with_capacity(queue.len());
        for i in queue {
            let target = hints.get(&pods[i].uid).and_then(|name| by_name.get(name)).copied();
            let placed = target.is_some_and(|n| {
                if self.gone.get(n).copied().unwrap_or(false)
                    || self.settling.as_ref().is_some_and(|(first, s)| i >= *first && s[n])
                {
                    return false;
                }
                let (reqs, groups) = self.context(&pods[i]);
                let admitted = self.fixed.node_compat.admitted(&reqs);
                if self.can_add_to_node(n, i, &pods[i], &admitted, &groups) {
                    self.place_on_node(n, i, &pods[i]);
                    true
                } else {
                    false
                }
            });
            if !placed {
                rest.push(i);
            }
        }
        rest
    }

    /// Fills each existing node, in the scheduler's node order, with the waiting pods that best match its room.
    fn fill_nodes(&mut self, pods: &[Arc<PodData>], classes: &mut [Class]) {
        for n in 0..self.nodes.len() {
            if self.gone.get(n).copied().unwrap_or(false) {
                continue;
            }
            let cap = self.nodes[n].remaining.clone();
            let mut blocked = vec![false; classes.len()];
            loop {
                let room = &self.nodes[n].remaining;
                let mut best: Option<(usize, f64)> = None;
                for (k, class) in classes.iter().enumerate() {
                    if blocked[k] || class.head().is_none() || !class.requests.fits_in(room) {
                        continue;
                    }
                    let s = score(&class.requests, room, &cap);
                    if best.is_none_or(|(_, b)| s > b) {
                        best = Some((k, s));
                    }
                }
                let Some((k, _)) = best else { break };
                let Some(i) = classes[k].head() else { break };
                let off_limits = self.settling.as_ref().is_some_and(|(first, s)| i >= *first && s[n]);
                let (reqs, groups) = self.class_context(&classes[k], &pods[i]);
                let admitted = self.fixed.node_compat.admitted(&reqs);
                if !off_limits && self.can_add_to_node(n, i, &pods[i], &admitted, &groups) {
                    self.place_on_node(n, i, &pods[i]);
                    classes[k].next += 1;
                } else {
                    blocked[k] = true;
                }
            }
        }
    }

    /// Whether template `t` would open a NodeClaim for the pod now, or why not (nothing is kept).
    fn probe_template(
        &mut self,
        t: usize,
        i: usize,
        pod: &PodData,
        reqs: &Requirements,
        groups: &[topology::GroupCtx],
    ) -> Result<(), PoolRejection> {
        self.open_claim(t, i, pod, reqs, groups, None, false).map(|_| ())
    }

    /// Opens and fills NodeClaims of template `t` for `classes`, following the LP's plan: rounds of "buy the whole
    /// instances the plan buys, fill each with the pods the plan puts on its type, top it up with any pod that still
    /// fits", the plan solved again for what is left, until nothing is left or a round places nothing.
    fn pack_template(&mut self, t: usize, pods: &[Arc<PodData>], classes: &mut [Class]) {
        let net = net_capacity(&self.fixed.templates[t]);
        let cols = columns(&self.fixed.templates[t], &net);
        // Per class, the types its pod fits alone (constant over the rounds), and of those the ones the plan may
        // buy: the cheapest per pod filled whole, filled fractionally, and for the batch's mix. The rest rarely take
        // part in an optimum and make the LP many times slower; the bound ([`lower_bound`]) still offers every type.
        let allowed: Vec<Bitset> =
            classes.iter().map(|c| pod_types(&self.fixed.templates[t], &pods[c.pods[0]])).collect();
        let mut mix = Resources::default();
        for c in classes.iter() {
            for _ in c.next..c.pods.len() {
                mix.add(&c.requests);
            }
        }
        // The batch's mix is the same for every class: its price per instance share is computed once per type.
        let mix_cost: Vec<f64> = (0..cols.len()).map(|ti| cols[ti].price * share_of(&mix, &net[ti])).collect();
        // Classes that differ only in constraints the types don't see (topology) rank alike: worked out once.
        let mut ranked: Vec<(&Resources, &Bitset, usize)> = Vec::new();
        let mut fits: Vec<Vec<usize>> = Vec::with_capacity(classes.len());
        for (c, a) in classes.iter().zip(&allowed) {
            if let Some(&(_, _, k)) = ranked.iter().find(|(r, b, _)| **r == c.requests && **b == *a) {
                let same = fits[k].clone();
                fits.push(same);
                continue;
            }
            ranked.push((&c.requests, a, fits.len()));
            fits.push({
                let usable: Vec<usize> = a.iter().filter(|&ti| cols[ti].price < f64::MAX).collect();
                let top = |per_pod: &dyn Fn(usize) -> f64| -> Vec<usize> {
                    let mut ranked: Vec<(f64, usize)> = usable.iter().map(|&ti| (per_pod(ti), ti)).collect();
                    let order = |a: &(f64, usize), b: &(f64, usize)| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1));
                    if ranked.len() > PLAN_TYPES_PER_CLASS {
                        ranked.select_nth_unstable_by(PLAN_TYPES_PER_CLASS, order);
                        ranked.truncate(PLAN_TYPES_PER_CLASS);
                    }
                    ranked.into_iter().map(|(_, ti)| ti).collect()
                };
                // Filled with whole pods of this class, and filled fractionally (what shares it with other pods).
                let mut keep = top(&|ti| cols[ti].price / c.requests.copies_in(&net[ti]).max(1) as f64);
                keep.extend(top(&|ti| cols[ti].price * share_of(&c.requests, &net[ti])));
                // And what holds the whole batch's mix best: pods of opposite shapes share those.
                keep.extend(top(&|ti| mix_cost[ti]));
                keep.sort_unstable();
                keep.dedup();
                keep
            });
        }
        // Per type, the types no larger than it: a claim capped at it may launch only these.
        let mut caps: HashMap<usize, Bitset> = HashMap::new();
        let cap_of = |caps: &mut HashMap<usize, Bitset>, ti: usize| {
            caps.entry(ti)
                .or_insert_with(|| {
                    let mut b = Bitset::empty(net.len());
                    for (tj, r) in net.iter().enumerate() {
                        if r.fits_in(&net[ti]) {
                            b.set(tj);
                        }
                    }
                    b
                })
                .clone()
        };
        // With whole-instance patterns the plan buys whole instances of exact mixes. Pods with topology constraints
        // often cannot follow them: in examples/inflate.yaml six zone-spread pods, planned as whole instances of
        // three, went on five claims for $0.17/h against three for $0.15/h without. So only a batch free of such
        // constraints gets the patterns.
        let patterns =
            classes.iter().filter_map(Class::head).all(|i| self.topology.constraints_for(&pods[i]).is_empty());
        for round in 0..MAX_ROUNDS {
            // Shapes: classes with the same requests and types are one LP class.
            let mut shapes: Vec<lp::Class> = Vec::new();
            let mut shape_allowed: Vec<&Bitset> = Vec::new();
            let mut shape_of: Vec<Option<usize>> = vec![None; classes.len()];
            for (k, c) in classes.iter().enumerate() {
                let left = c.pods.len() - c.next;
                if left == 0 || fits[k].is_empty() {
                    continue;
                }
                let s = match shapes.iter().position(|x| x.requests == c.requests && x.columns == fits[k]) {
                    Some(s) => {
                        shapes[s].count += left;
                        s
                    }
                    None => {
                        shapes.push(lp::Class { requests: c.requests.clone(), count: left, columns: fits[k].clone() });
                        shape_allowed.push(&allowed[k]);
                        shapes.len() - 1
                    }
                };
                shape_of[k] = Some(s);
            }
            if shapes.is_empty() {
                return;
            }
            // Whole-instance patterns in the first round only, which places nearly everything: with them in every
            // round, seeds 1–200 came out the same at worst (1.044× the bound) and 0.1 point better on average,
            // for a tenth more solve time at 1,000 pods.
            let Some(plan) = lp::plan_with(&cols, &shapes, round == 0 && patterns) else { return };
            // Pods of each shape the plan still puts on each type.
            // Shared by the fill's "may it go here" and "it went here" callbacks.
            let quota: std::cell::RefCell<Vec<HashMap<usize, f64>>> = std::cell::RefCell::new(
                plan.assigned.iter().map(|a| a.iter().map(|&(c, n)| (c, n)).collect()).collect(),
            );
            // Whole instances first; in the last rounds the fractions too.
            // Also once a later round's plan buys no whole instance: nothing else would place those leftovers, and
            // upstream's path would put them all on one claim of the largest type. A batch whose first plan buys no
            // whole instance is small, and upstream's path packs it as well or better (examples/inflate.yaml, six
            // zone-spread pods: three claims for $0.15/h, where fractions made five for $0.17/h).
            let last = round + 1 >= MAX_ROUNDS / 2 || (round > 0 && plan.amounts.iter().all(|a| *a < 1.0));
            let mut targets: Vec<(usize, usize)> = plan
                .amounts
                .iter()
                .enumerate()
                .map(|(ti, a)| (ti, a.floor() as usize))
                .filter(|&(ti, n)| n > 0 || (last && plan.amounts[ti] > 1e-6))
                .collect();
            targets.sort_by(|a, b| plan.amounts[b.0].total_cmp(&plan.amounts[a.0]).then(a.0.cmp(&b.0)));
            let mut placed_any = false;
            let mut topup: Vec<(usize, usize)> = Vec::new();
            // `fullest_subset`'s answers this round (shape indices are the round's own).
            let mut subsets: HashMap<SubsetCase, Vec<usize>> = HashMap::new();
            for (target, count) in targets {
                let within = cap_of(&mut caps, target);
                let planned =
                    |k: usize| shape_of[k].is_some_and(|s| quota.borrow()[s].get(&target).is_some_and(|q| *q > 0.5));
                // The plan's pods on this type, largest first, dealt round-robin over its instances (the fraction
                // counting as one): each instance then holds about the plan's average mix, which fits (the plan is
                // feasible) and wastes little, and no instance gets more than its share of the largest pods.
                let planned_total = left_on(&quota.borrow(), target);
                let mut by_size: Vec<usize> = (0..planned_total.len()).filter(|&s| planned_total[s] > 0).collect();
                by_size.sort_by(|&a, &b| {
                    share_of(&shapes[b].requests, &net[target])
                        .total_cmp(&share_of(&shapes[a].requests, &net[target]))
                        .then(a.cmp(&b))
                });
                let mut first = vec![0usize; planned_total.len()];
                let mut next = 0;
                for &s in &by_size {
                    first[s] = next;
                    next += planned_total[s];
                }
                let dealt_over = (plan.amounts[target] - 1e-6).ceil().max(1.0) as usize;
                for node in 0..count + FRACTION_CLAIMS {
                    let (size, mut want) = if node < count {
                        // How many of positions [from, to) fall to this instance.
                        let below = |x: usize| if x > node { (x - node).div_ceil(dealt_over) } else { 0 };
                        let share = |s: usize| below(first[s] + planned_total[s]) - below(first[s]);
                        (target, (0..planned_total.len()).map(share).collect::<Vec<usize>>())
                    } else if last {
                        // The fraction: what the plan still puts on this type, on the best-value types no larger
                        // than it, one claim at a time (a fifth of a 192-CPU instance is a 48-CPU one, not a
                        // 192-CPU one a fifth full).
                        let want = left_on(&quota.borrow(), target);
                        if want.iter().all(|&w| w == 0) {
                            break;
                        }
                        fraction_type(&within, &cols, &net, &shapes, &shape_allowed, &want, target)
                    } else {
                        break;
                    };
                    let cap = cap_of(&mut caps, size);
                    // Seed: the largest pod of this instance's share (else any the plan puts here) that opens a claim
                    // capped at its size.
                    let mut opened: Option<usize> = None;
                    for pass in 0..2 {
                        for k in 0..classes.len() {
                            let Some(i) = classes[k].head() else { continue };
                            let wanted_here = shape_of[k].is_some_and(|s| want[s] > 0);
                            if !(if pass == 0 { wanted_here } else { planned(k) }) {
                                continue;
                            }
                            let (reqs, groups) = self.class_context(&classes[k], &pods[i]);
                            if let Ok(c) = self.open_claim(t, i, &pods[i], &reqs, &groups, Some(&cap), true) {
                                classes[k].next += 1;
                                take(&mut quota.borrow_mut(), shape_of[k], target);
                                if let Some(s) = shape_of[k] {
                                    want[s] = want[s].saturating_sub(1);
                                }
                                opened = Some(c);
                                break;
                            }
                        }
                        if opened.is_some() {
                            break;
                        }
                    }
                    let Some(c) = opened else { break };
                    placed_any = true;
                    if node < count {
                        // The LP is optimistic about how a mix of a few pods packs, so the dealt share may not fit
                        // a whole instance. Keep the subset of it that fills the instance most (the rest stays for
                        // the plan's other instances and the next round), not whatever largest-first leaves room for.
                        let room = net[size].minus(&self.claims[c].requests);
                        let mut avail = vec![0usize; shapes.len()];
                        for (k, cl) in classes.iter().enumerate() {
                            if let Some(s) = shape_of[k] {
                                avail[s] += cl.pods.len() - cl.next;
                            }
                        }
                        let items: Vec<usize> = (0..shapes.len()).filter(|&s| want[s].min(avail[s]) > 0).collect();
                        let limits: Vec<usize> = items.iter().map(|&s| want[s].min(avail[s])).collect();
                        // Thousands of instances share a handful of (type, room, share) cases: search each once.
                        let key = (size, room, items.iter().copied().zip(limits.iter().copied()).collect::<Vec<_>>());
                        let counts = match subsets.get(&key) {
                            Some(c) => c.clone(),
                            None => {
                                let reqs: Vec<&Resources> = items.iter().map(|&s| &shapes[s].requests).collect();
                                let c = fullest_subset(&key.1, &net[size], &reqs, &limits);
                                subsets.insert(key, c.clone());
                                c
                            }
                        };
                        want.iter_mut().for_each(|w| *w = 0);
                        for (j, &s) in items.iter().enumerate() {
                            want[s] = counts[j];
                        }
                    }
                    // This instance's share of the plan, largest pods first.
                    let mut dealt_order: Vec<usize> =
                        (0..classes.len()).filter(|&k| shape_of[k].is_some_and(|s| want[s] > 0)).collect();
                    dealt_order.sort_by(|&a, &b| {
                        share_of(&classes[b].requests, &net[size])
                            .total_cmp(&share_of(&classes[a].requests, &net[size]))
                            .then(a.cmp(&b))
                    });
                    for k in dealt_order {
                        let Some(s) = shape_of[k] else { continue };
                        while want[s] > 0 {
                            let Some(i) = classes[k].head() else { break };
                            let (reqs, groups) = self.class_context(&classes[k], &pods[i]);
                            // Pods without topology terms go in as one run (the same outcome, far fewer checks).
                            if want[s] > 1 && classes[k].plain.get().is_some_and(Option::is_some) {
                                let (from, to) =
                                    (classes[k].next, (classes[k].next + want[s]).min(classes[k].pods.len()));
                                if let Some(n) = self.grow_claim_run(c, &classes[k].pods[from..to], pods, &reqs) {
                                    classes[k].next += n;
                                    for _ in 0..n {
                                        take(&mut quota.borrow_mut(), Some(s), target);
                                    }
                                    want[s] -= n;
                                    if n < to - from {
                                        break;
                                    }
                                    continue;
                                }
                            }
                            match self.can_add_to_claim(c, i, &pods[i], &reqs, &groups, false) {
                                Ok(cand) => {
                                    self.grow_claim(c, i, &pods[i], cand);
                                    classes[k].next += 1;
                                    take(&mut quota.borrow_mut(), Some(s), target);
                                    want[s] -= 1;
                                }
                                Err(_) => break,
                            }
                        }
                    }
                    // Then the plan's other pods for this type, then anything that still fits.
                    self.fill_claim(c, &net[size], pods, classes, planned, &mut |k| {
                        take(&mut quota.borrow_mut(), shape_of[k], target)
                    });
                    if node >= count {
                        // A fraction's claim is sized for its own pods; the other types' fractions follow.
                        continue;
                    }
                    topup.push((c, size));
                }
            }
            for (c, size) in topup {
                self.fill_claim(c, &net[size], pods, classes, |_| true, &mut |k| {
                    // A pod placed beyond the plan uses up its own plan elsewhere.
                    let mut quota = quota.borrow_mut();
                    if let Some(s) = shape_of[k]
                        && let Some((&other, _)) = quota[s]
                            .iter()
                            .filter(|(_, q)| **q > 0.0)
                            .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0)))
                    {
                        take(&mut quota, Some(s), other);
                    }
                });
            }
            if !placed_any {
                return;
            }
        }
    }

    /// Adds pods of the classes `eligible` admits to claim `c` while any fits, best match for the room left first.
    fn fill_claim(
        &mut self,
        c: usize,
        cap: &Resources,
        pods: &[Arc<PodData>],
        classes: &mut [Class],
        eligible: impl Fn(usize) -> bool,
        placed: &mut dyn FnMut(usize),
    ) {
        let mut blocked = vec![false; classes.len()];
        loop {
            let room = cap.minus(&self.claims[c].requests);
            let mut best: Option<(usize, f64)> = None;
            for (k, class) in classes.iter().enumerate() {
                if blocked[k] || class.head().is_none() || !class.requests.fits_in(&room) || !eligible(k) {
                    continue;
                }
                let s = score(&class.requests, &room, cap);
                if best.is_none_or(|(_, b)| s > b) {
                    best = Some((k, s));
                }
            }
            let Some((k, _)) = best else { return };
            let Some(i) = classes[k].head() else { return };
            let (reqs, groups) = self.class_context(&classes[k], &pods[i]);
            match self.can_add_to_claim(c, i, &pods[i], &reqs, &groups, false) {
                Ok(cand) => {
                    self.grow_claim(c, i, &pods[i], cand);
                    classes[k].next += 1;
                    placed(k);
                }
                Err(_) => blocked[k] = true,
            }
        }
    }
}

/// Per item, how many to take (at most `avail`) so the items fill `room` most, each valued by the share of `cap`
/// it uses summed over CPU and memory. A depth-first search, largest items first, with a node budget: the first
/// branch it follows is the greedy fill, so it never does worse than that.
fn fullest_subset(room: &Resources, cap: &Resources, reqs: &[&Resources], avail: &[usize]) -> Vec<usize> {
    let mut all = Resources::default();
    for (r, &n) in reqs.iter().zip(avail) {
        for (k, v) in r.nonzero() {
            all.set_value(k, all.get(k) + v * n as i64);
        }
    }
    if all.fits_in(room) {
        return avail.to_vec();
    }
    let val = |r: &Resources| r.cpu as f64 / cap.cpu.max(1) as f64 + r.memory as f64 / cap.memory.max(1) as f64;
    let mut order: Vec<usize> = (0..reqs.len()).collect();
    order.sort_by(|&a, &b| val(reqs[b]).total_cmp(&val(reqs[a])).then(a.cmp(&b)));
    struct S<'a> {
        reqs: Vec<&'a Resources>,
        vals: Vec<f64>,
        avail: Vec<usize>,
        cur: Vec<usize>,
        best: Vec<usize>,
        best_val: f64,
        budget: usize,
        cap: &'a Resources,
    }
    fn dfs(st: &mut S<'_>, idx: usize, room: &Resources, value: f64) {
        if value > st.best_val + 1e-12 {
            st.best_val = value;
            st.best = st.cur.clone();
        }
        if idx >= st.reqs.len() || st.budget == 0 {
            return;
        }
        st.budget -= 1;
        let bound = value
            + room.cpu.max(0) as f64 / st.cap.cpu.max(1) as f64
            + room.memory.max(0) as f64 / st.cap.memory.max(1) as f64;
        if bound <= st.best_val + 1e-12 {
            return;
        }
        let max = (st.reqs[idx].copies_in(room).max(0) as usize).min(st.avail[idx]);
        for n in (0..=max).rev() {
            let mut r = room.clone();
            for (k, v) in st.reqs[idx].nonzero() {
                r.set_value(k, r.get(k) - v * n as i64);
            }
            st.cur[idx] = n;
            dfs(st, idx + 1, &r, value + n as f64 * st.vals[idx]);
            st.cur[idx] = 0;
            if st.budget == 0 {
                break;
            }
        }
    }
    let mut st = S {
        reqs: order.iter().map(|&j| reqs[j]).collect(),
        vals: order.iter().map(|&j| val(reqs[j])).collect(),
        avail: order.iter().map(|&j| avail[j]).collect(),
        cur: vec![0; reqs.len()],
        best: vec![0; reqs.len()],
        best_val: 0.0,
        budget: SUBSET_SEARCH_NODES,
        cap,
    };
    dfs(&mut st, 0, room, 0.0);
    let mut out = vec![0; reqs.len()];
    for (pos, &j) in order.iter().enumerate() {
        out[j] = st.best[pos];
    }
    out
}

/// A [`fullest_subset`] question: the instance's type, its room, and (shape, how many at most) of its share.
type SubsetCase = (usize, Resources, Vec<(usize, usize)>);

/// Search nodes [`fullest_subset`] may visit per instance.
const SUBSET_SEARCH_NODES: usize = 300;

/// Rounds of plan-and-pack before the rest goes to upstream's path.
const MAX_ROUNDS: usize = 6;
/// Types per class the plan may buy (see `pack_template`).
const PLAN_TYPES_PER_CLASS: usize = 12;
/// The largest share of `room` one pod of `requests` takes in any resource.
fn share_of(requests: &Resources, room: &Resources) -> f64 {
    requests.asked_with_room(room).map(|(need, have)| need as f64 / have.max(1) as f64).fold(0.0, f64::max)
}

/// Claims at most for the fraction of an instance the plan buys beyond its whole ones.
const FRACTION_CLAIMS: usize = 16;

/// The type for the next claim of a fraction of `target`: of the types no larger than it (`within`) that hold
/// each of the pods `want`s (per shape) alone, the one that buys the most of them per dollar, the larger share on
/// a tie. What a type buys is what one instance of it takes when filled largest pods first, each pod valued as the
/// share of `target` it uses in its scarcest resource there; those pods, per shape, are returned with it. So a fifth of a 192-CPU instance's pods go on a
/// 48-CPU type at a quarter of its price, not on the 192-CPU type a fifth full.
fn fraction_type(
    within: &Bitset,
    cols: &[Column],
    net: &[Resources],
    shapes: &[lp::Class],
    allowed: &[&Bitset],
    want: &[usize],
    target: usize,
) -> (usize, Vec<usize>) {
    let full = &net[target];
    let dims: Vec<(&str, f64)> =
        full.entries().into_iter().filter(|(_, v)| *v > 0).map(|(k, v)| (k, v as f64)).collect();
    let value = |r: &Resources| -> f64 { dims.iter().map(|(k, c)| r.get(k) as f64 / c).fold(0.0, f64::max) };
    // Largest pods first.
    let mut order: Vec<usize> = (0..want.len()).filter(|&s| want[s] > 0).collect();
    order.sort_by(|&a, &b| value(&shapes[b].requests).total_cmp(&value(&shapes[a].requests)).then(a.cmp(&b)));
    let mut best: Option<(usize, f64, f64, Vec<usize>)> = None;
    for ti in within.iter() {
        let price = cols[ti].price;
        if !price.is_finite() || price <= 0.0 || order.iter().any(|&s| !allowed[s].get(ti)) {
            continue;
        }
        let mut room = net[ti].clone();
        let mut took = 0.0;
        let mut counts = vec![0; want.len()];
        for &s in &order {
            let r = &shapes[s].requests;
            let n = r.copies_in(&room).clamp(0, want[s] as i64) as usize;
            for (k, v) in r.entries() {
                room.set_value(k, room.get(k) - v * n as i64);
            }
            took += n as f64 * value(r);
            counts[s] = n;
        }
        let rate = took / price;
        let better = best.as_ref().is_none_or(|(_, best_rate, best_took, _)| {
            rate > best_rate * (1.0 + 1e-9) || (rate >= best_rate * (1.0 - 1e-9) && took > best_took + 1e-12)
        });
        if took > 0.0 && better {
            best = Some((ti, rate, took, counts));
        }
    }
    best.map_or_else(|| (target, want.to_vec()), |(ti, _, _, counts)| (ti, counts))
}

/// Per shape, the pods the plan still puts on `target`, to the nearest whole pod.
fn left_on(quota: &[HashMap<usize, f64>], target: usize) -> Vec<usize> {
    quota.iter().map(|q| q.get(&target).copied().unwrap_or(0.0).max(0.0).round() as usize).collect()
}

/// One pod of `shape` placed on `target`: one less in the plan.
fn take(quota: &mut [HashMap<usize, f64>], shape: Option<usize>, target: usize) {
    if let Some(q) = shape.and_then(|s| quota[s].get_mut(&target)) {
        *q -= 1.0;
    }
}

fn empty_class() -> Class {
    Class { pods: Vec::new(), next: 0, requests: Resources::default(), plain: Default::default() }
}

/// Every template's LP columns, one list, and where each template's start.
fn all_columns(templates: &[Template]) -> (Vec<Column>, Vec<usize>) {
    let mut cols: Vec<Column> = Vec::new();
    let mut offset: Vec<usize> = Vec::with_capacity(templates.len());
    for tpl in templates {
        offset.push(cols.len());
        cols.extend(columns(tpl, &net_capacity(tpl)));
    }
    (cols, offset)
}

/// The LP columns pod `pod` may use in template `t` (offset into [`all_columns`]).
fn pod_columns(tpl: &Template, base: usize, cols: &[Column], pod: &PodData) -> Vec<usize> {
    pod_types(tpl, pod).iter().filter(|&ti| cols[base + ti].price < f64::MAX).map(|ti| base + ti).collect()
}

/// Counts `count` more pods of `requests` on `columns` among `shapes`.
fn add_to_shapes(shapes: &mut Vec<lp::Class>, requests: &Resources, count: usize, columns: Vec<usize>) {
    match shapes.iter_mut().find(|k| k.requests == *requests && k.columns == columns) {
        Some(k) => k.count += count,
        None => shapes.push(lp::Class { requests: requests.clone(), count, columns }),
    }
}

/// The LP lower bound, in USD per hour, on new capacity for the pods `results` put on new NodeClaims: fractional
/// instances of any type their NodePool allows, each pod's requests on instances of a type it fits, every
/// resource (CPU, memory, pods, extended) covered per type, each type at the cheapest offering the NodePool
/// allows (see [`lp`]). No packing of those pods, by either strategy, can cost
/// less. `None` when the LP has no optimum.
pub fn lower_bound(input: &Input<'_>, pods: &[Arc<PodData>], results: &Results) -> Option<f64> {
    bound_mix(input, pods, results).map(|(cost, _)| cost)
}

/// Fractional instances of one type: (NodePool, type name, amount).
pub type Amount = (String, String, f64);

/// [`lower_bound`] with the fractional instances it buys: what the diagnostics compare a plan's fleet with.
pub fn bound_mix(input: &Input<'_>, pods: &[Arc<PodData>], results: &Results) -> Option<(f64, Vec<Amount>)> {
    let prepared = Prepared::new(input);
    let templates = &prepared.fixed.templates;
    let (cols, offset) = all_columns(templates);
    // Interchangeable pods share their columns: computed once per class, not per pod.
    let mut per_template: Vec<Vec<usize>> = vec![Vec::new(); templates.len()];
    for claim in &results.new_claims {
        let Some(t) = templates.iter().position(|tpl| tpl.nodepool == claim.nodepool) else { continue };
        per_template[t].extend(claim.pods.iter().copied());
    }
    let mut shapes: Vec<lp::Class> = Vec::new();
    for (t, idx) in per_template.iter().enumerate() {
        for class in classes(pods, idx) {
            let first = &pods[class.pods[0]];
            let columns = pod_columns(&templates[t], offset[t], &cols, first);
            add_to_shapes(&mut shapes, &first.requests, class.pods.len(), columns);
        }
    }
    let plan = lp::plan(&cols, &shapes)?;
    let mut mix = Vec::new();
    for (t, tpl) in templates.iter().enumerate() {
        for (ti, ty) in tpl.types.iter().enumerate() {
            let a = plan.amounts[offset[t] + ti];
            if a > 1e-9 {
                mix.push((tpl.nodepool.clone(), ty.name.clone(), a));
            }
        }
    }
    Some((plan.cost, mix))
}

/// The LP lower bound on new capacity for `pods`, each on the first NodePool (in weight order) with a type that
/// holds it alone: what repack compares a group of nodes against before trying to re-solve it. `None` when some
/// pod fits no NodePool or the LP has no optimum.
pub fn pods_bound(prepared: &Prepared, pods: &[Arc<PodData>]) -> Option<f64> {
    let templates = &prepared.fixed.templates;
    let (cols, offset) = all_columns(templates);
    let mut shapes: Vec<lp::Class> = Vec::new();
    let all: Vec<usize> = (0..pods.len()).collect();
    for class in classes(pods, &all) {
        let pod = &pods[class.pods[0]];
        let columns = templates
            .iter()
            .enumerate()
            .map(|(t, tpl)| pod_columns(tpl, offset[t], &cols, pod))
            .find(|cs| !cs.is_empty())?;
        add_to_shapes(&mut shapes, &pod.requests, class.pods.len(), columns);
    }
    lp::plan(&cols, &shapes).map(|p| p.cost)
}
