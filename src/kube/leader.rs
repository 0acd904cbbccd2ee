//! Leadership through a `coordination.k8s.io/v1` Lease, as Kubernetes controllers do it: only the holder acts, the
//! others observe. The holder renews every third of the lease duration; a lease not renewed within its duration
//! may be taken; `--takeover` takes it at once; leaving hands it over by expiring it.
//!
//! The decision is a pure function of the lease and the time ([`step`]) so it can be tested without a server;
//! writes go through `replace` with the lease's resourceVersion, so two candidates racing can't both win.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use tokio::sync::watch;

pub const LEASE_NAME: &str = "karpenter-tui";
pub const LEASE_DURATION: Duration = Duration::from_secs(15);

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    /// Not known yet (first attempt in flight).
    Unknown,
    Leader,
    /// Someone else holds the lease.
    Follower {
        holder: String,
    },
}

/// What to do with the lease now.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Create(LeaseSpec),
    /// Renew our own lease or take an expired (or, with takeover, any) one.
    Update(LeaseSpec),
    Observe {
        holder: String,
    },
}

fn expired(spec: &LeaseSpec, now: Timestamp) -> bool {
    let Some(renewed) = spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) else { return true };
    let duration = i64::from(spec.lease_duration_seconds.unwrap_or(0));
    renewed.0.as_second() + duration < now.as_second()
}

pub fn step(current: Option<&LeaseSpec>, me: &str, now: Timestamp, takeover: bool) -> Step {
    let fresh = |transitions: i32| LeaseSpec {
        holder_identity: Some(me.into()),
        lease_duration_seconds: Some(LEASE_DURATION.as_secs() as i32),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(transitions),
        ..Default::default()
    };
    let Some(spec) = current else { return Step::Create(fresh(0)) };
    let holder = spec.holder_identity.clone().unwrap_or_default();
    if holder == me {
        let mut renewed = spec.clone();
        renewed.renew_time = Some(MicroTime(now));
        renewed.lease_duration_seconds = Some(LEASE_DURATION.as_secs() as i32);
        return Step::Update(renewed);
    }
    if holder.is_empty() || expired(spec, now) || takeover {
        return Step::Update(fresh(spec.lease_transitions.unwrap_or(0) + 1));
    }
    Step::Observe { holder }
}

/// This process's identity in the lease: host and pid, so `kubectl get lease` says who holds it.
pub fn identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok().map(|h| h.trim().to_string()))
        .unwrap_or_else(|| "unknown-host".into());
    format!("karpenter-tui@{host}-{}", std::process::id())
}

pub struct Elector {
    api: Api<Lease>,
    me: String,
    takeover: bool,
}

impl Elector {
    pub fn new(client: kube::Client, namespace: &str, me: String, takeover: bool) -> Elector {
        Elector { api: Api::namespaced(client, namespace), me, takeover }
    }

    /// One round: read the lease, decide, write. A lost race (409) or a create that someone beat us to means
    /// following for now.
    pub async fn round(&mut self) -> Result<Role, kube::Error> {
        let current = self.api.get_opt(LEASE_NAME).await?;
        let now = Timestamp::now();
        let result = match step(current.as_ref().and_then(|l| l.spec.as_ref()), &self.me, now, self.takeover) {
            Step::Observe { holder } => return Ok(Role::Follower { holder }),
            Step::Create(spec) => {
                let lease = Lease {
                    metadata: ObjectMeta { name: Some(LEASE_NAME.into()), ..Default::default() },
                    spec: Some(spec),
                };
                self.api.create(&PostParams::default(), &lease).await.map(drop)
            }
            Step::Update(spec) => {
                let mut lease = current.unwrap_or_default();
                lease.spec = Some(spec);
                self.api.replace(LEASE_NAME, &PostParams::default(), &lease).await.map(drop)
            }
        };
        match result {
            Ok(()) => {
                // Take over once; afterwards play by the rules.
                self.takeover = false;
                Ok(Role::Leader)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(Role::Follower { holder: "another instance".into() }),
            Err(e) => Err(e),
        }
    }

    /// Hands the lease over on exit: expired at once, so the next candidate needn't wait out the duration.
    pub async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(LEASE_NAME).await? else { return Ok(()) };
        let Some(spec) = lease.spec.as_mut() else { return Ok(()) };
        if spec.holder_identity.as_deref() != Some(self.me.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        self.api.replace(LEASE_NAME, &PostParams::default(), &lease).await.map(drop)
    }

    /// Runs rounds forever, publishing the role. A leader that can't renew within the lease duration steps down
    /// (someone else may hold it by then).
    pub async fn run(mut self, tx: watch::Sender<Role>) {
        let period = LEASE_DURATION / 3;
        let mut last_ok = tokio::time::Instant::now();
        loop {
            match self.round().await {
                Ok(role) => {
                    last_ok = tokio::time::Instant::now();
                    tx.send_if_modified(|r| std::mem::replace(r, role.clone()) != role);
                }
                Err(e) => {
                    tracing::warn!("leader election: {e}");
                    if last_ok.elapsed() > LEASE_DURATION {
                        let role = Role::Follower { holder: format!("unknown (lease unreachable: {e})") };
                        tx.send_if_modified(|r| std::mem::replace(r, role.clone()) != role);
                    }
                }
            }
            tokio::time::sleep(period).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).unwrap()
    }

    fn held_by(holder: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            renew_time: Some(MicroTime(at(renewed))),
            lease_transitions: Some(3),
            ..Default::default()
        }
    }

    #[test]
    fn a_missing_lease_is_created_and_our_own_is_renewed() {
        assert!(
            matches!(step(None, "me", at(0), false), Step::Create(s) if s.holder_identity.as_deref() == Some("me"))
        );
        let Step::Update(s) = step(Some(&held_by("me", 0)), "me", at(5), false) else { panic!() };
        assert_eq!(s.renew_time, Some(MicroTime(at(5))));
        assert_eq!(s.lease_transitions, Some(3), "renewing is not a transition");
    }

    #[test]
    fn a_live_lease_of_someone_else_is_observed_until_it_expires_or_we_take_over() {
        let theirs = held_by("them", 0);
        assert_eq!(step(Some(&theirs), "me", at(10), false), Step::Observe { holder: "them".into() });
        let Step::Update(s) = step(Some(&theirs), "me", at(16), false) else { panic!("expired lease is taken") };
        assert_eq!((s.holder_identity.as_deref(), s.lease_transitions), (Some("me"), Some(4)));
        assert!(matches!(step(Some(&theirs), "me", at(1), true), Step::Update(_)), "--takeover");
        let released = LeaseSpec { holder_identity: None, ..theirs };
        assert!(matches!(step(Some(&released), "me", at(1), false), Step::Update(_)), "a released lease is free");
    }
}
