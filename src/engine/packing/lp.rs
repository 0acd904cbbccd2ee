//! The LP relaxation of provisioning: buy fractional instances and assign pods to them fractionally, each pod's
//! requests all on instances of one type. Its optimum is a lower bound on what any packing of those pods can cost
//! (every real packing is a feasible point of it), and its solution names the best-value types, how many of each
//! and which pods they hold, which cost packing follows.
//!
//! Three kinds of constraint: per type and resource, the pods put there fit the instances bought (fractionally);
//! per type and resource, the pods' weights under each of a family of dual-feasible functions (a pod over half an
//! instance weighs 1 in the first; one over two thirds 1 and one over a third 1/2 in the second; ...) sum to at
//! most the instances bought, since one instance's pods weigh at most 1 in each; and, when asked ([`plan_with`]:
//! cost packing's first plan), on types that hold only a few pods, the pods put there are covered by
//! whole-instance patterns (every maximal filling of one instance), bought at most as many times as instances are.
//!
//! Why not the looser "enough CPU, memory and pods in total" relaxation: with burstable types in the catalog it
//! buys a t3a.nano's cheap CPU and an r-type's cheap memory and pretends one pod can use both, a bound no packing
//! comes near. Here a pod's CPU and memory sit on the same type, which every packing obeys, so the bound is still
//! a bound and far closer to what can be bought.

use microlp::{ComparisonOp, OptimizationDirection, Problem, SolutionStatus};

use crate::engine::resources::Resources;

/// Something that can be bought: an instance type at one price, with what it gives pods.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// USD per hour.
    pub price: f64,
    /// Capacity left for pods: allocatable minus the DaemonSet overhead of that type.
    pub capacity: Resources,
}

/// Pods with the same requests that may use the same columns.
#[derive(Debug, Clone, PartialEq)]
pub struct Class {
    /// One pod's requests.
    pub requests: Resources,
    pub count: usize,
    /// Indices into the columns, each able to hold one of these pods alone.
    pub columns: Vec<usize>,
}

/// The optimum of the relaxation.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// USD per hour.
    pub cost: f64,
    /// Fractional instances bought of each column.
    pub amounts: Vec<f64>,
    /// Per class, the (column, pods) it puts there.
    pub assigned: Vec<Vec<(usize, f64)>>,
}

/// Dual-feasible functions per column and resource, k = 1..=this: the larger k bind rarely.
const MAX_SIZE_LIMITS: usize = 16;
/// Rounds of "add the size limits the solution breaks and solve again".
const MAX_CUT_ROUNDS: usize = 50;

/// Most maximal patterns enumerated for one column; a column with more keeps only the per-resource rows and cuts.
const MAX_PATTERNS: usize = 400;
/// Search steps allowed per column when enumerating its patterns.
const MAX_PATTERN_STEPS: usize = 5_000;
/// Columns one instance of which holds more pods than this (of any one size) lose little to whole pods: their
/// patterns are not enumerated.
const MAX_PATTERN_PODS: usize = 12;

/// Every maximal way to fill one instance of `capacity` with whole pods of `sizes` (at most `limits[i]` of the
/// i-th), as counts per size; `None` when there are more than [`MAX_PATTERNS`] or the search runs out of steps.
/// A pattern is maximal when no further pod of any size fits beside it; every instance's pods are a subset of one.
fn maximal_patterns(capacity: &Resources, sizes: &[&Resources], limits: &[usize]) -> Option<Vec<Vec<usize>>> {
    struct Walk<'a> {
        sizes: &'a [&'a Resources],
        limits: &'a [usize],
        cur: Vec<usize>,
        out: Vec<Vec<usize>>,
        steps: usize,
        failed: bool,
    }
    fn fits_one(walk: &Walk<'_>, room: &Resources) -> bool {
        (0..walk.sizes.len()).any(|j| walk.cur[j] < walk.limits[j] && walk.sizes[j].fits_in(room))
    }
    fn go(walk: &mut Walk<'_>, i: usize, room: &Resources) {
        if walk.failed {
            return;
        }
        walk.steps += 1;
        if walk.steps > MAX_PATTERN_STEPS {
            walk.failed = true;
            return;
        }
        if i == walk.sizes.len() {
            // Maximal: nothing of any size still fits (sizes before `i` were taken as far as they go or stopped
            // short on purpose, so check them all).
            if !fits_one(walk, room) {
                walk.out.push(walk.cur.clone());
                if walk.out.len() > MAX_PATTERNS {
                    walk.failed = true;
                }
            }
            return;
        }
        let mut r = room.clone();
        let mut n = 0;
        // Take as many of size i as fit, then one fewer each time.
        while n < walk.limits[i] && walk.sizes[i].fits_in(&r) {
            r = r.minus(walk.sizes[i]);
            n += 1;
        }
        loop {
            walk.cur[i] = n;
            go(walk, i + 1, &r);
            walk.cur[i] = 0;
            if n == 0 || walk.failed {
                break;
            }
            n -= 1;
            r.add(walk.sizes[i]);
        }
    }
    let most =
        sizes.iter().zip(limits).map(|(r, &l)| (r.copies_in(capacity).max(0) as usize).min(l)).max().unwrap_or(0);
    if most > MAX_PATTERN_PODS {
        return None;
    }
    let mut walk = Walk { sizes, limits, cur: vec![0; sizes.len()], out: Vec::new(), steps: 0, failed: false };
    go(&mut walk, 0, capacity);
    (!walk.failed).then_some(walk.out)
}

/// Fekete and Schepers' dual-feasible function u_k at `need / room` (0 < need <= room): floor((k + 1) x) / k, or x
/// itself when (k + 1) x is a whole number. Pods whose sizes sum to at most `room` weigh at most 1 in total.
fn dual_feasible(need: i64, room: i64, k: i64) -> f64 {
    let scaled = i128::from(need) * i128::from(k + 1);
    let room128 = i128::from(room);
    if scaled % room128 == 0 { need as f64 / room as f64 } else { (scaled / room128) as f64 / k as f64 }
}

/// Columns no cheaper column matches: `a` is dominated when some `b` costs no more, holds at least as much of
/// everything, and serves every class `a` serves. Dropping them leaves the optimum unchanged and the problem small.
fn undominated(columns: &[Column], classes: &[Class], used: &[usize]) -> Vec<usize> {
    let serves = |c: usize| -> Vec<usize> {
        classes.iter().enumerate().filter(|(_, k)| k.columns.binary_search(&c).is_ok()).map(|(i, _)| i).collect()
    };
    let served: Vec<Vec<usize>> = used.iter().map(|&c| serves(c)).collect();
    let dominates = |b: usize, a: usize| {
        let (cb, ca) = (&columns[used[b]], &columns[used[a]]);
        cb.price <= ca.price
            && ca.capacity.fits_in(&cb.capacity)
            && served[a].iter().all(|k| served[b].binary_search(k).is_ok())
            // Equal columns: keep the first.
            && (cb.price < ca.price || cb.capacity != ca.capacity || served[a] != served[b] || b < a)
    };
    (0..used.len()).filter(|&a| !(0..used.len()).any(|b| b != a && dominates(b, a))).map(|a| used[a]).collect()
}

/// The cheapest fractional purchase and assignment that holds every class, or `None` when none exists (a class with
/// no column) or the solver could not prove an optimum.
pub fn plan(columns: &[Column], classes: &[Class]) -> Option<Plan> {
    plan_with(columns, classes, false)
}

/// [`plan`], with the pods on types that hold only a few of them also covered by whole-instance patterns when
/// `patterns` is set. Still a bound, and the mixes it names are ones an instance holds; but over a whole catalog,
/// with dozens of small types, it is many times slower (about 1.3 s at 20,000 pods, release), so the bound leaves
/// them out and cost packing's first plan uses them over its classes' best types only.
pub fn plan_with(columns: &[Column], classes: &[Class], patterns: bool) -> Option<Plan> {
    let empty = || Plan { cost: 0.0, amounts: vec![0.0; columns.len()], assigned: vec![Vec::new(); classes.len()] };
    if classes.iter().all(|k| k.count == 0) {
        return Some(empty());
    }
    let mut classes_sorted: Vec<Class> = classes.to_vec();
    for k in &mut classes_sorted {
        k.columns.sort_unstable();
        k.columns.dedup();
        if k.columns.iter().any(|&c| c >= columns.len()) {
            return None;
        }
    }
    let mut used: Vec<usize> =
        classes_sorted.iter().filter(|k| k.count > 0).flat_map(|k| k.columns.iter().copied()).collect();
    used.sort_unstable();
    used.dedup();
    if used.iter().any(|&c| !columns[c].price.is_finite() || columns[c].price < 0.0) {
        return None;
    }
    let used = undominated(columns, &classes_sorted, &used);
    let mut problem = Problem::new(OptimizationDirection::Minimize);
    let x: Vec<_> = used.iter().map(|&c| problem.add_var(columns[c].price, (0.0, f64::INFINITY))).collect();
    // y[k]: (column, var) — the pods of class k on column c, in units of the class's pod count.
    let mut y: Vec<Vec<(usize, microlp::Variable)>> = Vec::new();
    for k in &classes_sorted {
        let vars: Vec<(usize, microlp::Variable)> = if k.count == 0 {
            Vec::new()
        } else {
            used.iter()
                .enumerate()
                .filter(|(_, c)| k.columns.binary_search(c).is_ok())
                .map(|(u, _)| (u, problem.add_var(0.0, (0.0, f64::INFINITY))))
                .collect()
        };
        if k.count > 0 {
            if vars.is_empty() {
                return None;
            }
            let row: Vec<_> = vars.iter().map(|(_, v)| (*v, 1.0)).collect();
            problem.add_constraint(row.as_slice(), ComparisonOp::Ge, 1.0);
        }
        y.push(vars);
    }
    // Per column and resource: what its pods ask, in units of one instance's capacity, within what is bought.
    let dims: Vec<&str> = {
        let mut d: Vec<&str> = Vec::new();
        for k in &classes_sorted {
            for (name, v) in k.requests.entries() {
                if v > 0 && !d.contains(&name) {
                    d.push(name);
                }
            }
        }
        d
    };
    for (u, &c) in used.iter().enumerate() {
        for dim in &dims {
            let cap = columns[c].capacity.get(dim) as f64;
            let mut row = vec![(x[u], -1.0)];
            for (ki, k) in classes_sorted.iter().enumerate() {
                let need = k.requests.get(dim) as f64 * k.count as f64;
                if need <= 0.0 {
                    continue;
                }
                if let Some((_, v)) = y[ki].iter().find(|(uu, _)| *uu == u) {
                    // A column that can't hold this resource at all was not offered to the class.
                    row.push((*v, need / cap.max(1.0)));
                }
            }
            if row.len() > 1 {
                problem.add_constraint(row.as_slice(), ComparisonOp::Le, 0.0);
            }
        }
    }
    // Integrality a relaxation may keep. Per type and resource, give each pod of size s on an instance of capacity C
    // the weight u_k(s) = floor((k + 1) s / C) / k (s / C when (k + 1) s / C is a whole number): Fekete and
    // Schepers' dual-feasible functions, under which the pods of any one instance weigh at most 1 for every k. So
    // the pods put on a type weigh at most the instances bought, for each k. k = 1 says two pods over half an
    // instance never share it; k = 2 that a pod over two thirds weighs a whole instance and one over a third half
    // of one, and so on: one 1 GiB pod or two 512 MiB pods per 1.4 GiB instance, whatever the fractions say. Every
    // packing obeys these, so the bound stays a bound, and it is far closer to what can be packed on small types.
    // There are thousands of them over a big catalog and few bind, so they are added only when the solution breaks
    // them (a cutting-plane loop).
    let mut cuts: Vec<Vec<(microlp::Variable, f64)>> = Vec::new();
    for (u, &c) in used.iter().enumerate() {
        let cap = &columns[c].capacity;
        for dim in &dims {
            let room = cap.get(dim);
            // (size, var, pods) for the classes on this column asking for the resource.
            let mut sized: Vec<(i64, microlp::Variable, f64)> = Vec::new();
            for (ki, k) in classes_sorted.iter().enumerate() {
                let need = k.requests.get(dim);
                if need <= 0 {
                    continue;
                }
                if let Some((_, v)) = y[ki].iter().find(|(uu, _)| *uu == u) {
                    if need > room {
                        // Not even one fits: the class may not use this column.
                        problem.add_constraint([(*v, 1.0)], ComparisonOp::Le, 0.0);
                        continue;
                    }
                    sized.push((need, *v, k.count as f64));
                }
            }
            let mut seen: Vec<Vec<(usize, f64)>> = Vec::new();
            for k in 1..=MAX_SIZE_LIMITS as i64 {
                let weights: Vec<(usize, f64)> = sized
                    .iter()
                    .enumerate()
                    .map(|(i, &(need, _, _))| (i, dual_feasible(need, room, k)))
                    .filter(|(_, w)| *w > 0.0)
                    .collect();
                // Never binding when all of them fit one instance by weight; skip repeats.
                let total: f64 = weights.iter().map(|&(i, w)| w * sized[i].2).sum();
                if total <= 1.0 + 1e-9 || seen.contains(&weights) {
                    continue;
                }
                let mut row: Vec<_> = weights.iter().map(|&(i, w)| (sized[i].1, w * sized[i].2)).collect();
                row.push((x[u], -1.0));
                cuts.push(row);
                seen.push(weights);
            }
        }
    }
    // Small types hold few pods, and there the per-resource rows accept mixes no instance holds: each resource is
    // counted apart, so pods that fill CPU and memory "on average" pass although no instance takes them together.
    // For those types, the pods a column holds are also covered by whole-instance patterns: every maximal way to
    // fill one instance, bought at most as many times as instances are. Every packing obeys this (each instance's
    // pods lie within one maximal pattern), so the bound stays a bound, and the plan learns which mixes fit.
    for (u, &c) in used.iter().enumerate().filter(|_| patterns) {
        let on: Vec<usize> = (0..classes_sorted.len()).filter(|&ki| y[ki].iter().any(|(uu, _)| *uu == u)).collect();
        if on.is_empty() {
            continue;
        }
        let sizes: Vec<&Resources> = on.iter().map(|&ki| &classes_sorted[ki].requests).collect();
        let limits: Vec<usize> = on.iter().map(|&ki| classes_sorted[ki].count).collect();
        let Some(pats) = maximal_patterns(&columns[c].capacity, &sizes, &limits) else { continue };
        if pats.is_empty() {
            continue;
        }
        let z: Vec<_> = pats.iter().map(|_| problem.add_var(0.0, (0.0, f64::INFINITY))).collect();
        let mut row: Vec<_> = z.iter().map(|v| (*v, 1.0)).collect();
        row.push((x[u], -1.0));
        problem.add_constraint(row.as_slice(), ComparisonOp::Le, 0.0);
        for (j, &ki) in on.iter().enumerate() {
            let Some((_, v)) = y[ki].iter().find(|(uu, _)| *uu == u) else { continue };
            let mut row = vec![(*v, classes_sorted[ki].count as f64)];
            for (p, pat) in pats.iter().enumerate() {
                if pat[j] > 0 {
                    row.push((z[p], -(pat[j] as f64)));
                }
            }
            problem.add_constraint(row.as_slice(), ComparisonOp::Le, 0.0);
        }
    }
    let mut solution = problem.solve().ok()?.into_solution().ok()?;
    let mut added = vec![false; cuts.len()];
    let breaks = |row: &[(microlp::Variable, f64)], solution: &microlp::Solution| {
        row.iter().map(|(v, a)| a * solution.var_value(*v)).sum::<f64>() > 1e-7
    };
    for _ in 0..MAX_CUT_ROUNDS {
        let violated: Vec<usize> = (0..cuts.len()).filter(|&i| !added[i] && breaks(&cuts[i], &solution)).collect();
        if violated.is_empty() {
            break;
        }
        for i in violated {
            // Each cut re-solves; one added before may already have mended this one.
            if !breaks(&cuts[i], &solution) {
                continue;
            }
            added[i] = true;
            solution = solution.add_constraint(cuts[i].as_slice(), ComparisonOp::Le, 0.0).ok()?.into_solution().ok()?;
        }
    }
    if solution.status() != SolutionStatus::Optimal {
        return None;
    }
    // Whatever the loop stopped at, every cut must hold for the optimum to be this LP's (and so a bound).
    if cuts.iter().any(|row| row.iter().map(|(v, a)| a * solution.var_value(*v)).sum::<f64>() > 1e-6) {
        return None;
    }
    let mut out = empty();
    for (u, &c) in used.iter().enumerate() {
        out.amounts[c] = solution.var_value(x[u]).max(0.0);
    }
    for (ki, k) in classes_sorted.iter().enumerate() {
        for (u, v) in &y[ki] {
            let share = solution.var_value(*v);
            if share > 1e-9 {
                out.assigned[ki].push((used[*u], share * k.count as f64));
            }
        }
    }
    out.cost = solution.objective().max(0.0);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: i64 = 1 << 30;

    fn col(price: f64, cpu: i64, mem_gib: i64, pods: i64) -> Column {
        Column { price, capacity: Resources::new(cpu * 1000, mem_gib * GIB, pods) }
    }

    fn demand(cpu: i64, mem_gib: i64, pods: i64) -> Resources {
        Resources::new(cpu * 1000, mem_gib * GIB, pods)
    }

    fn class(cpu: i64, mem_gib: i64, count: usize, columns: Vec<usize>) -> Class {
        Class { requests: demand(cpu, mem_gib, 1), count, columns }
    }

    #[test]
    fn one_resource_buys_the_best_value_column_fractionally() {
        // 4 CPUs for $1 beats 2 for $0.60; 10 one-CPU pods cost 2.5 of the former.
        let cols = [col(1.0, 4, 100, 100), col(0.6, 2, 100, 100)];
        let p = plan(&cols, &[class(1, 0, 10, vec![0, 1])]).unwrap();
        assert!((p.cost - 2.5).abs() < 1e-6, "{p:?}");
        assert!((p.amounts[0] - 2.5).abs() < 1e-6 && p.amounts[1].abs() < 1e-6);
        assert_eq!(p.assigned[0].len(), 1);
        assert!((p.assigned[0][0].1 - 10.0).abs() < 1e-6);
    }

    #[test]
    fn shapes_go_to_the_type_of_their_shape() {
        // Compute (8 CPU, 16 GiB, $1), memory (8 CPU, 64 GiB, $1.5). 8 CPU-heavy pods (1 CPU, 2 GiB) fill one
        // compute instance; 8 memory-heavy pods (1 CPU, 8 GiB) one memory instance: $2.50. The aggregate relaxation
        // would mix them for less, but no pod can split its CPU from its memory.
        let cols = [col(1.0, 8, 16, 100), col(1.5, 8, 64, 100)];
        let p = plan(&cols, &[class(1, 2, 8, vec![0, 1]), class(1, 8, 8, vec![0, 1])]).unwrap();
        assert!((p.cost - 2.5).abs() < 1e-6, "{p:?}");
        assert_eq!(p.assigned[0].iter().map(|(c, _)| *c).collect::<Vec<_>>(), vec![0]);
        assert_eq!(p.assigned[1].iter().map(|(c, _)| *c).collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn the_cheap_cpu_of_a_memoryless_type_does_not_help_memory_pods() {
        // A "nano" (2 CPU, 0 GiB usable, $0.01) and a balanced type (4 CPU, 16 GiB, $1). Pods of 1 CPU and 4 GiB
        // can only use the balanced one: 8 pods cost $2, however cheap the nano's CPU.
        let cols = [col(0.01, 2, 0, 4), col(1.0, 4, 16, 100)];
        let p = plan(&cols, &[class(1, 4, 8, vec![1])]).unwrap();
        assert!((p.cost - 2.0).abs() < 1e-6, "{p:?}");
    }

    #[test]
    fn an_instance_holds_only_whole_pods_of_one_class() {
        // 1.5-CPU instances at $1 and 1-CPU pods: one pod per instance whatever the fractions say, so 3 pods cost $3,
        // not $2.
        let cols = [col(1.0, 0, 100, 100)];
        let mut cols = cols.to_vec();
        cols[0].capacity.cpu = 1500;
        let p = plan(&cols, &[class(1, 1, 3, vec![0])]).unwrap();
        assert!((p.cost - 3.0).abs() < 1e-6, "{p:?}");
    }

    #[test]
    fn pods_too_large_to_share_count_whole_instances() {
        // 1.5 GiB instances at $1: no two 1 GiB pods share one, so 3 of them need 3 instances, where memory
        // alone says 3/1.5 = 2. Adding 0.25 GiB pods, which fit beside them, costs nothing more.
        let mut c = col(1.0, 100, 0, 100);
        c.capacity.memory = 3 << 29;
        let big = Class { requests: Resources::new(1, 1 << 30, 1), count: 3, columns: vec![0] };
        let p = plan(std::slice::from_ref(&c), std::slice::from_ref(&big)).unwrap();
        assert!((p.cost - 3.0).abs() < 1e-6, "{p:?}");
        let small = Class { requests: Resources::new(1, 1 << 28, 1), count: 3, columns: vec![0] };
        let p = plan(&[c], &[big, small]).unwrap();
        assert!((p.cost - 3.0).abs() < 1e-6, "{p:?}");
    }

    #[test]
    fn a_pod_over_two_thirds_leaves_no_room_for_one_over_a_third() {
        // 1.4 GiB instances at $1, two 1 GiB pods and two 512 MiB pods: no 1 GiB pod shares an instance with
        // anything and the 512 MiB pods pair up, so 3 instances. "At most two pods over a third per instance"
        // alone says 2.
        let mut c = col(1.0, 100, 0, 100);
        c.capacity.memory = 1400 << 20;
        let big = Class { requests: Resources::new(1, 1 << 30, 1), count: 2, columns: vec![0] };
        let half = Class { requests: Resources::new(1, 512 << 20, 1), count: 2, columns: vec![0] };
        let p = plan(&[c], &[big, half]).unwrap();
        assert!((p.cost - 3.0).abs() < 1e-6, "{p:?}");
    }

    #[test]
    fn dual_feasible_weights_of_one_instance_sum_to_at_most_one() {
        // Every way to fill a 100-unit instance with pods of sizes 1..=100, for each k.
        for k in 1..=6 {
            assert_eq!(dual_feasible(50, 100, 1), 0.5);
            assert_eq!(dual_feasible(51, 100, 1), 1.0);
            assert_eq!(dual_feasible(49, 100, 1), 0.0);
            for a in 1..=100 {
                for b in 1..=(100 - a) {
                    let c = 100 - a - b;
                    let mut w = dual_feasible(a, 100, k) + dual_feasible(b, 100, k);
                    if c > 0 {
                        w += dual_feasible(c, 100, k);
                    }
                    assert!(w <= 1.0 + 1e-12, "k {k}: {a} + {b} + {c} weigh {w}");
                }
            }
        }
    }

    #[test]
    fn whole_instance_patterns_stop_pods_sharing_what_no_instance_holds() {
        // 10 CPU / 10 GiB instances at $1 and one pod each of (6 CPU, 1 GiB), (1 CPU, 6 GiB), (4 CPU, 4 GiB): any
        // two share an instance, never all three. The per-resource rows and cuts allow 1.1 instances (11 of 10 in
        // each resource); every instance's pods lie within one of the three two-pod patterns, so covering each pod
        // once takes 1.5 of them.
        let cols = [col(1.0, 10, 10, 100)];
        let classes = [class(6, 1, 1, vec![0]), class(1, 6, 1, vec![0]), class(4, 4, 1, vec![0])];
        let p = plan_with(&cols, &classes, true).unwrap();
        assert!((p.cost - 1.5).abs() < 1e-6, "{p:?}");
        let plain = plan(&cols, &classes).unwrap();
        assert!((plain.cost - 1.1).abs() < 1e-6, "{plain:?}");
    }

    #[test]
    fn maximal_patterns_are_every_filling_nothing_more_fits_beside() {
        let cap = demand(10, 10, 100);
        let sizes = [demand(6, 1, 1), demand(1, 6, 1), demand(4, 4, 1), demand(1, 1, 1)];
        let limits = [2, 2, 2, 3];
        let refs: Vec<&Resources> = sizes.iter().collect();
        let mut got = maximal_patterns(&cap, &refs, &limits).expect("few patterns");
        // Every count vector within the limits, by brute force.
        let fits = |v: &[usize]| {
            let mut r = Resources::default();
            for (s, &n) in sizes.iter().zip(v) {
                for _ in 0..n {
                    r.add(s);
                }
            }
            r.fits_in(&cap)
        };
        let mut want = Vec::new();
        for a in 0..=2 {
            for b in 0..=2 {
                for c in 0..=2 {
                    for d in 0..=3 {
                        let v = vec![a, b, c, d];
                        let maximal = (0..4).all(|i| {
                            let mut w = v.clone();
                            w[i] += 1;
                            w[i] > limits[i] || !fits(&w)
                        });
                        if fits(&v) && maximal {
                            want.push(v);
                        }
                    }
                }
            }
        }
        got.sort();
        want.sort();
        assert_eq!(got, want);
        assert!(!want.is_empty());
    }

    #[test]
    fn types_holding_many_pods_are_not_enumerated() {
        // 64 CPUs of 1-CPU pods: thousands of ways, and whole pods cost a big type little.
        let cap = demand(64, 256, 1000);
        let sizes = [demand(1, 1, 1), demand(2, 1, 1)];
        let refs: Vec<&Resources> = sizes.iter().collect();
        assert_eq!(maximal_patterns(&cap, &refs, &[100, 100]), None);
        // Limited to a few pods by the counts, it is.
        assert_eq!(maximal_patterns(&cap, &refs, &[2, 1]), Some(vec![vec![2, 1]]));
    }

    #[test]
    fn a_class_with_no_column_has_no_plan() {
        assert_eq!(plan(&[col(1.0, 8, 16, 100)], &[class(1, 1, 1, vec![])]), None);
    }

    #[test]
    fn dominated_columns_do_not_change_the_optimum() {
        let cols = [col(1.0, 8, 16, 100), col(1.2, 8, 16, 100), col(0.9, 4, 8, 100)];
        let all = plan(&cols, &[class(1, 2, 12, vec![0, 1, 2])]).unwrap();
        let kept = plan(&cols, &[class(1, 2, 12, vec![0, 2])]).unwrap();
        assert!((all.cost - kept.cost).abs() < 1e-9);
        assert_eq!(all.amounts[1], 0.0);
    }
}
