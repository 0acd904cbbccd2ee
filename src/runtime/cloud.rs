//! The cloud port of the live executor, after upstream's `pkg/cloudprovider/types.go`: one interface every cloud
//! implements, so the executor never asks which cloud it has. KWOK (instances are Node objects written through the
//! API server) and AWS (EC2 through CreateFleet) implement it here; the simulated world's cloud
//! ([`crate::sim::cloud::SimCloud`]) plays the same part on its virtual clock.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::aws::cloud::AwsCloud;
use crate::engine::api::NodeClaim;
use crate::engine::catalog::Catalog;
use crate::engine::lifecycle::{LaunchError, LaunchResult};
use crate::engine::provisioning::Millis;
use crate::kube::kwok;
use crate::kube::writer::{WriteError, Writer};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One claim's launch.
pub struct Launched {
    pub result: LaunchResult,
    /// Annotations the claim records with it (AWS: the NodeClass hash it launched with).
    pub annotations: BTreeMap<String, String>,
}

/// Why a launch did not happen: the cloud said no (recorded on the claim by the engine's rule), or a write it
/// needed failed (retried from fresh state on the next tick).
pub enum LaunchFailure {
    Cloud(LaunchError),
    Write(WriteError),
}

/// What a cloud does for the controller's effects.
pub trait CloudProvider: Send + Sync {
    /// `kwok`, `aws`: for logs.
    fn name(&self) -> &'static str;

    /// Launches the claims, in one batch where the cloud can (AWS: claims with the same request share a
    /// CreateFleet); one result per claim, in order.
    fn create<'a>(
        &'a self,
        claims: &'a [NodeClaim],
        writer: &'a Writer,
    ) -> BoxFuture<'a, Vec<Result<Launched, LaunchFailure>>>;

    /// Terminates an instance: a line for the events pane when something was done or could not be.
    fn delete<'a>(
        &'a self,
        provider_id: &'a str,
        writer: &'a Writer,
    ) -> BoxFuture<'a, Result<Option<String>, WriteError>>;

    /// The instance types and prices the cloud offers now, when it has a live catalog (the dashboard prices
    /// nodes from it); `None` when the one the controller started with stands.
    fn live_catalog(&self, _now: Millis) -> Option<Catalog> {
        None
    }
}

/// KWOK: an instance is a Node object named after its claim.
pub struct Kwok {
    pub catalog: Arc<Catalog>,
}

impl CloudProvider for Kwok {
    fn name(&self) -> &'static str {
        "kwok"
    }

    fn create<'a>(
        &'a self,
        claims: &'a [NodeClaim],
        writer: &'a Writer,
    ) -> BoxFuture<'a, Vec<Result<Launched, LaunchFailure>>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(claims.len());
            for claim in claims {
                out.push(match kwok::launch(&self.catalog, claim) {
                    Ok((result, node)) => match writer.create_node(&node).await {
                        Ok(()) => Ok(Launched { result, annotations: BTreeMap::new() }),
                        Err(e) => Err(LaunchFailure::Write(e)),
                    },
                    Err(e) => Err(LaunchFailure::Cloud(e)),
                });
            }
            out
        })
    }

    fn delete<'a>(
        &'a self,
        provider_id: &'a str,
        writer: &'a Writer,
    ) -> BoxFuture<'a, Result<Option<String>, WriteError>> {
        Box::pin(async move {
            match provider_id.strip_prefix(kwok::PROVIDER_PREFIX) {
                Some(node) => writer.delete_node(node).await.map(|()| None),
                // Not a KWOK instance: another cloud's, which this one can't terminate.
                None => Ok(Some(format!("instance {provider_id} is not a KWOK node; left alone"))),
            }
        })
    }
}

/// AWS: EC2 instances that register their own Nodes (user data).
pub struct Aws(pub Arc<AwsCloud>);

impl CloudProvider for Aws {
    fn name(&self) -> &'static str {
        "aws"
    }

    fn create<'a>(
        &'a self,
        claims: &'a [NodeClaim],
        _writer: &'a Writer,
    ) -> BoxFuture<'a, Vec<Result<Launched, LaunchFailure>>> {
        Box::pin(async move {
            let results = self.0.launch_batch(claims).await;
            claims
                .iter()
                .zip(results)
                .map(|(claim, r)| match r {
                    Ok(result) => Ok(Launched { result, annotations: self.0.launch_annotations(claim) }),
                    Err(e) => Err(LaunchFailure::Cloud(e)),
                })
                .collect()
        })
    }

    fn delete<'a>(
        &'a self,
        provider_id: &'a str,
        _writer: &'a Writer,
    ) -> BoxFuture<'a, Result<Option<String>, WriteError>> {
        Box::pin(async move {
            Ok(match self.0.terminate(provider_id).await {
                Ok(true) => Some(format!("terminating instance {provider_id}")),
                Ok(false) => None,
                Err(e) => Some(format!("terminating instance {provider_id} failed, retried: {e}")),
            })
        })
    }

    fn live_catalog(&self, now: Millis) -> Option<Catalog> {
        self.0.catalog_for(None, now).and_then(Result::ok)
    }
}
