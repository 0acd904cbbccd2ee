//! The cloud-provider port over the AWS SDK (`--cloud aws`): configuration like the AWS CLI with start-up checks
//! ([`config`]); the live catalog from DescribeInstanceTypes/Offerings ([`instancetypes`]) priced by the Pricing
//! API and spot price history ([`pricing`]); EC2NodeClass resolution and status ([`nodeclass`]); launches planned
//! ([`launch`], [`userdata`]) and sent through launch templates and CreateFleet ([`ec2`]) with capacity errors
//! keeping offerings out for a while ([`unavailable`]); NodeClass drift ([`drift`]); and the interruption queue ([`interruption`], [`sqs`]).
//! [`cloud::AwsCloud`] ties them together for the controller.

pub mod cloud;
pub mod config;
pub mod drift;
pub mod ec2;
pub mod instanceprofile;
pub mod instancetypes;
pub mod interruption;
pub mod launch;
pub mod nodeclass;
pub mod pricing;
pub mod sqs;
pub mod unavailable;
pub mod userdata;
