//! The orchestration queue (engine.md §5.10): a started command waits until its replacements are initialized, and
//! only then are its candidates deleted; a replacement that disappears, or a command that takes too long, fails
//! it and the candidates are given back.

use super::Command;
use crate::engine::api::NodeClaim;
use crate::engine::api::nodeclaim::COND_INITIALIZED;
use crate::engine::provisioning::Millis;

/// A started command.
#[derive(Debug, Clone)]
pub struct InFlight {
    /// The decision id (`d-7`).
    pub id: String,
    pub command: Command,
    /// Names of the replacement NodeClaims created for it.
    pub replacements: Vec<String>,
    pub started_at: Millis,
}

/// What to do next with a started command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Replacements are still launching or initializing.
    Wait,
    /// Every replacement is initialized: delete the candidates.
    DeleteCandidates,
    /// Unrecoverable: roll back (untaint, clear `DisruptionReason`), orphaned replacements stay as capacity.
    Fail(String),
}

/// clamp(80 ms × commands in the queue, 10 min, 1 h).
pub fn command_timeout(queue_len: usize) -> Millis {
    let n = Millis::try_from(queue_len).unwrap_or(Millis::MAX);
    n.saturating_mul(80).clamp(10 * 60_000, 60 * 60_000)
}

pub fn step<'c>(f: &InFlight, claim: impl Fn(&str) -> Option<&'c NodeClaim>, now: Millis, queue_len: usize) -> Step {
    let mut ready = true;
    for name in &f.replacements {
        match claim(name) {
            None => return Step::Fail(format!("replacement NodeClaim {name} was deleted before it initialized")),
            Some(c) if c.metadata.deletion_timestamp.is_some() => {
                return Step::Fail(format!("replacement NodeClaim {name} is being deleted"));
            }
            Some(c) => ready &= c.is_true(COND_INITIALIZED),
        }
    }
    if ready {
        return Step::DeleteCandidates;
    }
    let timeout = command_timeout(queue_len);
    if now - f.started_at >= timeout {
        return Step::Fail(format!("replacements not initialized after {}", super::human_duration(timeout)));
    }
    Step::Wait
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::engine::disruption::Method;
    use crate::engine::lifecycle::set_condition;

    fn flight(replacements: &[&str]) -> InFlight {
        InFlight {
            id: "d-1".into(),
            command: Command {
                method: Method::SingleNode,
                candidates: Vec::new(),
                replacements: Vec::new(),
                savings_per_hour: 0.0,
                computed_at: 0,
                terminate_first: false,
                repair: None,
            },
            replacements: replacements.iter().map(|s| s.to_string()).collect(),
            started_at: 0,
        }
    }

    fn claim(name: &str, initialized: bool) -> (String, NodeClaim) {
        let mut c = NodeClaim::new(name, Default::default());
        if initialized {
            set_condition(&mut c, COND_INITIALIZED, "True", "", "", 0);
        }
        (name.to_string(), c)
    }

    #[test]
    fn waits_for_initialization_then_deletes() {
        let f = flight(&["r1"]);
        let claims: BTreeMap<_, _> = [claim("r1", false)].into();
        assert_eq!(step(&f, |n| claims.get(n), 1_000, 1), Step::Wait);
        let claims: BTreeMap<_, _> = [claim("r1", true)].into();
        assert_eq!(step(&f, |n| claims.get(n), 1_000, 1), Step::DeleteCandidates);
        assert_eq!(step(&flight(&[]), |_| None, 0, 1), Step::DeleteCandidates);
    }

    #[test]
    fn a_vanished_replacement_or_timeout_fails_the_command() {
        let f = flight(&["r1"]);
        assert!(matches!(step(&f, |_| None, 1_000, 1), Step::Fail(m) if m.contains("r1")));
        let claims: BTreeMap<_, _> = [claim("r1", false)].into();
        assert!(matches!(step(&f, |n| claims.get(n), 10 * 60_000, 1), Step::Fail(m) if m.contains("10m")));
        assert_eq!(command_timeout(100_000), 60 * 60_000);
    }
}
