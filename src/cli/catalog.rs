//! Choosing the catalog a command runs against.

use anyhow::{Context as _, Result, anyhow};

use crate::engine::api::EC2NodeClass;
use crate::engine::catalog::{Catalog, aws, kwok};

/// The embedded AWS catalog of `region` (spot prices simulated from seed 0) or the KWOK synthetic one.
pub fn load(kwok: bool, region: &str, nodeclass: Option<&EC2NodeClass>) -> Result<Catalog> {
    if kwok {
        return Ok(kwok::kwok_catalog(region));
    }
    Ok(aws::aws_catalog(region, None, nodeclass, 0)?)
}

/// The region's catalog as the AWS API gives it now, built as the dashboard with `--cloud aws` builds its own:
/// instance types and offerings from EC2, spot prices from EC2, on-demand prices from the Pricing API (the embedded
/// table stands in for the ones that can't be read). Region-wide: no NodeClass narrows zones or kubelet settings.
pub async fn discover_aws(opts: &crate::aws::config::AwsOptions) -> Result<Catalog> {
    use crate::aws::cloud::AwsCloud;
    use crate::aws::launch::ClusterInfo;
    use crate::aws::nodeclass::AliasContext;
    let sdk = crate::aws::config::load(opts).await?;
    // Nothing is launched: no cluster to join, no AMI alias to resolve.
    let alias = AliasContext { k8s_version: String::new(), ssm_prefix: "/aws/service".into() };
    let cloud = AwsCloud::new(&sdk, ClusterInfo::default(), alias);
    tracing::info!(region = %cloud.region, "discovering EC2 instance types");
    cloud.refresh_types().await.context("listing EC2 instance types (check the credentials' ec2:Describe* rights)")?;
    for e in cloud.refresh_prices().await {
        tracing::warn!("prices: {e} (the embedded on-demand table stands in)");
    }
    cloud
        .catalog_for(None, chrono::Utc::now().timestamp_millis())
        .ok_or_else(|| anyhow!("no EC2 instance types were discovered in {}", cloud.region))?
        .with_context(|| format!("building the catalog of {}", cloud.region))
}

/// `discover_aws` for the synchronous commands, on a runtime of its own.
pub fn discover_aws_blocking(opts: &crate::aws::config::AwsOptions) -> Result<Catalog> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(discover_aws(opts))
}
