//! How provisioning packs pods onto new NodeClaims: `upstream` reproduces Karpenter (fill each NodeClaim as far as
//! the largest compatible type allows, then launch the cheapest type that holds it); `cost` chooses NodeClaims to
//! minimise the batch's price, guided by the LP relaxation in [`lp`].

pub mod lp;

use std::fmt;
use std::str::FromStr;

/// The packing strategy (`settings.packing`, `--packing`, `:packing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Packing {
    /// Karpenter's decisions, unchanged.
    #[default]
    Upstream,
    /// Cost-optimal packing: NodeClaims sized for the cheapest fleet that holds the batch.
    Cost,
}

impl Packing {
    pub fn as_str(self) -> &'static str {
        match self {
            Packing::Upstream => "upstream",
            Packing::Cost => "cost",
        }
    }

    /// The other strategy, whose cost is shown next to this one's.
    pub fn other(self) -> Packing {
        match self {
            Packing::Upstream => Packing::Cost,
            Packing::Cost => Packing::Upstream,
        }
    }
}

impl fmt::Display for Packing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Packing {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "upstream" => Ok(Packing::Upstream),
            "cost" => Ok(Packing::Cost),
            other => Err(format!("unknown packing strategy {other:?}: expected upstream or cost")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_both_strategies() {
        for p in [Packing::Upstream, Packing::Cost] {
            assert_eq!(p.as_str().parse::<Packing>(), Ok(p));
            assert_eq!(p.other().other(), p);
        }
        let err = "cheapest".parse::<Packing>().unwrap_err();
        assert!(err.contains("\"cheapest\"") && err.contains("upstream or cost"), "{err}");
    }
}
