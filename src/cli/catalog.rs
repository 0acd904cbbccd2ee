//! Choosing the catalog a command runs against.

use anyhow::Result;

use crate::engine::api::EC2NodeClass;
use crate::engine::catalog::{Catalog, aws, kwok};

/// The embedded AWS catalog of `region` (spot prices simulated from seed 0) or the KWOK synthetic one.
pub fn load(kwok: bool, region: &str, nodeclass: Option<&EC2NodeClass>) -> Result<Catalog> {
    if kwok {
        return Ok(kwok::kwok_catalog(region));
    }
    Ok(aws::aws_catalog(region, None, nodeclass, 0)?)
}
