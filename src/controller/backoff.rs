//! Per-object backoff for writes the cluster or the cloud refused, as controller-runtime's workqueue rate limiter
//! does it: the first retry after 5 ms, doubling on each further refusal, at most 1,000 s apart. A conflict (409)
//! is not a refusal: the next tick plans again from the fresh object. Anything else (400, 403, a 404 on a gone
//! object, 422 Invalid, a server error, a timeout) would fail the same way if sent again at once, so the object's
//! effects are held until its retry is due, and the same error is logged once with a count of its repeats.

use std::collections::BTreeMap;

use crate::engine::provisioning::Millis;

/// The first retry's delay.
pub const BASE_DELAY: Millis = 5;
/// The longest delay between two tries.
pub const MAX_DELAY: Millis = 1_000_000;

/// One object whose writes are being refused.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// What was being written (`update the status of NodePool default`).
    pub effect: String,
    /// The last error, as the server or the cloud said it.
    pub error: String,
    /// Refusals in a row.
    pub failures: u32,
    /// How many of them repeated the error before them (not logged again).
    pub repeats: u64,
    /// When the first refusal in this row came.
    pub since: Millis,
    /// The next try is not before this.
    pub retry_at: Millis,
}

/// What the caller should say about a refusal just recorded.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// A new error for this object (or one different from the last): log it and show it.
    New,
    /// The same error again: counted, not logged.
    Repeat,
}

/// Objects with refused writes, by object key ([`crate::controller::Effect::object_key`]).
#[derive(Debug, Clone, Default)]
pub struct WriteBackoff {
    refusals: BTreeMap<String, Refusal>,
}

/// The delay before the next try after `failures` refusals in a row.
pub fn delay(failures: u32) -> Millis {
    let doublings = failures.saturating_sub(1).min(40);
    BASE_DELAY.saturating_mul(1i64 << doublings).min(MAX_DELAY)
}

impl WriteBackoff {
    /// Whether writes to `key` are held at `now`.
    pub fn holds(&self, key: &str, now: Millis) -> bool {
        self.refusals.get(key).is_some_and(|r| now < r.retry_at)
    }

    /// Records a refusal of a write to `key`.
    pub fn refused(&mut self, key: &str, effect: &str, error: &str, now: Millis) -> Verdict {
        let r = self.refusals.entry(key.to_string()).or_insert_with(|| Refusal {
            effect: effect.to_string(),
            error: String::new(),
            failures: 0,
            repeats: 0,
            since: now,
            retry_at: now,
        });
        r.failures = r.failures.saturating_add(1);
        r.retry_at = now.saturating_add(delay(r.failures));
        r.effect = effect.to_string();
        if r.error == error {
            r.repeats += 1;
            Verdict::Repeat
        } else {
            r.error = error.to_string();
            r.repeats = 0;
            Verdict::New
        }
    }

    /// A write to `key` went through: its backoff ends. Returns the refusals it ends, if there were any.
    pub fn succeeded(&mut self, key: &str) -> Option<Refusal> {
        self.refusals.remove(key)
    }

    /// When the earliest held object may be tried again.
    pub fn next_retry(&self) -> Option<Millis> {
        self.refusals.values().map(|r| r.retry_at).min()
    }

    /// Objects with refused writes, by key.
    pub fn refusals(&self) -> impl Iterator<Item = (&str, &Refusal)> {
        self.refusals.iter().map(|(k, r)| (k.as_str(), r))
    }

    pub fn is_empty(&self) -> bool {
        self.refusals.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_doubles_from_five_milliseconds_to_a_cap_of_a_thousand_seconds() {
        assert_eq!(delay(1), 5);
        assert_eq!(delay(2), 10);
        assert_eq!(delay(3), 20);
        assert_eq!(delay(18), 655_360);
        assert_eq!(delay(19), MAX_DELAY);
        assert_eq!(delay(u32::MAX), MAX_DELAY);
    }

    #[test]
    fn a_refused_object_is_held_until_its_retry_and_released_by_a_success() {
        let mut b = WriteBackoff::default();
        assert!(!b.holds("NodePool/a", 0));
        assert_eq!(b.refused("NodePool/a", "update a", "422 Invalid", 1_000), Verdict::New);
        assert!(b.holds("NodePool/a", 1_004));
        assert!(!b.holds("NodePool/a", 1_005));
        assert!(!b.holds("NodePool/b", 1_000), "other objects are not held");
        assert_eq!(b.refused("NodePool/a", "update a", "422 Invalid", 1_005), Verdict::Repeat);
        assert_eq!(b.next_retry(), Some(1_015));
        assert_eq!(b.refused("NodePool/a", "update a", "403 Forbidden", 1_015), Verdict::New, "a new error");
        let r = b.succeeded("NodePool/a").expect("it was refused");
        assert_eq!((r.failures, r.since), (3, 1_000));
        assert!(b.is_empty());
        assert!(!b.holds("NodePool/a", 1_016));
    }

    #[test]
    fn a_thousand_refusals_in_a_row_are_a_few_dozen_tries_an_hour_not_seventy_a_second() {
        let mut b = WriteBackoff::default();
        let mut now = 0;
        let mut tries = 0;
        while now < 3_600_000 {
            if !b.holds("k", now) {
                b.refused("k", "e", "422", now);
                tries += 1;
            }
            now += 14;
        }
        assert!(tries < 30, "{tries} tries in an hour");
    }
}
