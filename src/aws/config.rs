//! AWS configuration like the AWS CLI: the SDK's default chain (environment, `AWS_PROFILE`/`--profile`, SSO, web
//! identity in the cluster, IMDS), `--region` over `AWS_REGION`, and the SDK's standard `AWS_ENDPOINT_URL` /
//! `AWS_ENDPOINT_URL_<SERVICE>` overrides (how the tests point it at moto). Checked at start, so a missing region
//! or credentials is said plainly instead of failing on the first call.

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_credential_types::provider::ProvideCredentials;
use thiserror::Error;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AwsOptions {
    pub profile: Option<String>,
    pub region: Option<String>,
}

#[derive(Debug, Error)]
pub enum AwsError {
    #[error("no AWS region: pass --region or set AWS_REGION (or a region in the profile)")]
    NoRegion,
    #[error("no AWS credentials: {0} (set AWS_PROFILE, run `aws sso login`, or provide AWS_ACCESS_KEY_ID)")]
    NoCredentials(String),
    #[error("SQS queue {name:?} does not exist in {region} (check --interruption-queue)")]
    NoQueue { name: String, region: String },
    #[error("{what}: {message}")]
    Call { what: String, message: String },
}

impl AwsError {
    /// A failed SDK call, with the service's error code and message when there is one (never credentials).
    pub fn call<E: std::error::Error>(what: impl Into<String>, e: E) -> AwsError {
        let mut message = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            message = format!("{message}: {s}");
            source = s.source();
        }
        AwsError::Call { what: what.into(), message }
    }
}

/// Loads the configuration and checks that a region and credentials are there.
pub async fn load(opts: &AwsOptions) -> Result<SdkConfig, AwsError> {
    let mut loader = aws_config::defaults(BehaviorVersion::latest());
    if let Some(p) = &opts.profile {
        loader = loader.profile_name(p);
    }
    if let Some(r) = &opts.region {
        loader = loader.region(Region::new(r.clone()));
    }
    let sdk = loader.load().await;
    if sdk.region().is_none() {
        return Err(AwsError::NoRegion);
    }
    let provider = sdk.credentials_provider().ok_or_else(|| AwsError::NoCredentials("no provider".into()))?;
    provider.provide_credentials().await.map_err(|e| AwsError::NoCredentials(e.to_string()))?;
    Ok(sdk)
}
