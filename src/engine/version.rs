//! Which upstream Karpenter's decisions the engine makes: the minor versions modelled, what a version name or a
//! controller image says, and the few API forms one version accepts and another refuses. Every place a decision or
//! a validation differs between versions asks a [`KarpenterVersion`] here, so the differences are listed in one
//! file.

use std::fmt;
use std::str::FromStr;

/// An upstream Karpenter minor version the engine models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum KarpenterVersion {
    /// v1.14, the LTS line (v1.14.3 and its fixes).
    V1_14,
    /// v1.15 (v1.15.1).
    #[default]
    V1_15,
}

/// A version name that is not a modelled one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown Karpenter version {got:?}: expected {}", KarpenterVersion::expected())]
pub struct UnknownVersion {
    pub got: String,
}

impl KarpenterVersion {
    /// Oldest first.
    pub const MODELLED: [KarpenterVersion; 2] = [KarpenterVersion::V1_14, KarpenterVersion::V1_15];
    /// What scenarios, `plan --file` and a cluster without upstream Karpenter get.
    pub const NEWEST: KarpenterVersion = KarpenterVersion::V1_15;

    pub fn as_str(self) -> &'static str {
        match self {
            KarpenterVersion::V1_14 => "1.14",
            KarpenterVersion::V1_15 => "1.15",
        }
    }

    fn expected() -> String {
        let names: Vec<&str> = Self::MODELLED.iter().map(|v| v.as_str()).collect();
        names.join(" or ")
    }

    /// The budget `reasons` the version's NodePool CRD lists.
    pub fn budget_reasons(self) -> &'static [&'static str] {
        match self {
            KarpenterVersion::V1_14 => &["Underutilized", "Empty", "Drifted"],
            KarpenterVersion::V1_15 => &["Underutilized", "Empty", "Drifted", "Unhealthy"],
        }
    }

    /// Whether a NodePool's `spec.disruption`, when written, must name `consolidateAfter`. v1.14's CRD requires it
    /// there; v1.15's defaults it to `0s`. (A pool without a `disruption` block is defaulted in both.)
    pub fn requires_consolidate_after(self) -> bool {
        self == KarpenterVersion::V1_14
    }

    /// Whether the version reads `karpenter.sh/do-not-repair` (added in v1.15).
    pub fn reads_do_not_repair(self) -> bool {
        self >= KarpenterVersion::V1_15
    }

    /// Whether the version takes default topology spread constraints (`--scheduler-config`, new in v1.15.0, #3205).
    pub fn has_default_spread(self) -> bool {
        self >= KarpenterVersion::V1_15
    }

    /// Whether Balanced consolidation's estimated savings price a replacement only at offerings compatible with it
    /// (v1.15.0, #3217); v1.14 takes its first option's cheapest available offering of any capacity type or zone.
    pub fn estimates_compatible_offerings(self) -> bool {
        self >= KarpenterVersion::V1_15
    }

    /// Whether instance types can declare their CSI attach limits, so new NodeClaims count their pods' volumes
    /// before a CSINode exists (v1.15.0, #3202).
    pub fn counts_declared_volume_limits(self) -> bool {
        self >= KarpenterVersion::V1_15
    }

    /// Whether a launch that fails for want of capacity is told to each pod nominated to the NodeClaim, as a
    /// Warning `InsufficientCapacityError` (v1.15.0, #3143), besides the NodeClaim's own event.
    pub fn tells_pods_of_failed_launches(self) -> bool {
        self >= KarpenterVersion::V1_15
    }

    /// The modelled version whose decisions a release (`1.15.1`, `v1.14.3`) makes: its own minor when modelled,
    /// else the nearest one (an older v1 release decides as v1.14, a newer one as v1.15). `None` when the text is
    /// not a v1 release.
    pub fn of_release(release: &str) -> Option<KarpenterVersion> {
        let mut parts = release.strip_prefix('v').unwrap_or(release).split(['.', '-', '+']);
        let major: u32 = parts.next()?.parse().ok()?;
        let minor: u32 = parts.next()?.parse().ok()?;
        if major != 1 {
            return None;
        }
        Some(if minor <= 14 { KarpenterVersion::V1_14 } else { KarpenterVersion::V1_15 })
    }
}

impl fmt::Display for KarpenterVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for KarpenterVersion {
    type Err = UnknownVersion;
    fn from_str(s: &str) -> Result<Self, UnknownVersion> {
        Self::MODELLED.into_iter().find(|v| v.as_str() == s).ok_or_else(|| UnknownVersion { got: s.to_string() })
    }
}

impl serde::Serialize for KarpenterVersion {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// `"1.15"`, or the YAML number `1.15` an unquoted value reads as.
impl<'de> serde::Deserialize<'de> for KarpenterVersion {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = KarpenterVersion;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "a Karpenter version: {}", KarpenterVersion::expected())
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<KarpenterVersion, E> {
                s.parse().map_err(E::custom)
            }
            fn visit_f64<E: serde::de::Error>(self, x: f64) -> Result<KarpenterVersion, E> {
                self.visit_str(&x.to_string())
            }
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<KarpenterVersion, E> {
                self.visit_str(&n.to_string())
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<KarpenterVersion, E> {
                self.visit_str(&n.to_string())
            }
        }
        d.deserialize_any(V)
    }
}

/// The Karpenter release a controller image runs, from its tag (`public.ecr.aws/karpenter/controller:1.15.1@sha256:…`
/// → `1.15.1`). `None` for an untagged or digest-only image, or a tag that is not a release (`latest`).
pub fn release_of_image(image: &str) -> Option<&str> {
    let name = image.split('@').next()?;
    // A registry's port also follows a colon: the tag is after the last slash.
    let last = name.rsplit('/').next()?;
    let tag = last.split_once(':')?.1;
    KarpenterVersion::of_release(tag).map(|_| tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_exactly_and_unknown_ones_say_what_is_modelled() {
        assert_eq!("1.14".parse(), Ok(KarpenterVersion::V1_14));
        assert_eq!("1.15".parse(), Ok(KarpenterVersion::V1_15));
        for bad in ["1.13", "1.16", "v1.15", "1.15.1", "", "latest"] {
            let e = bad.parse::<KarpenterVersion>().unwrap_err().to_string();
            assert!(e.contains(&format!("{bad:?}")) && e.contains("1.14 or 1.15"), "{e}");
        }
        assert_eq!(KarpenterVersion::default(), KarpenterVersion::NEWEST);
    }

    #[test]
    fn yaml_takes_a_string_or_the_number_an_unquoted_version_reads_as() {
        let v: KarpenterVersion = serde_yaml::from_str("1.14").expect("number");
        assert_eq!(v, KarpenterVersion::V1_14);
        let v: KarpenterVersion = serde_yaml::from_str("\"1.15\"").expect("string");
        assert_eq!(v, KarpenterVersion::V1_15);
        assert!(serde_yaml::from_str::<KarpenterVersion>("1.2").is_err());
        assert!(serde_yaml::from_str::<KarpenterVersion>("[1.15]").is_err());
    }

    #[test]
    fn releases_map_to_the_nearest_modelled_minor() {
        assert_eq!(KarpenterVersion::of_release("1.14.3"), Some(KarpenterVersion::V1_14));
        assert_eq!(KarpenterVersion::of_release("v1.15.1"), Some(KarpenterVersion::V1_15));
        assert_eq!(KarpenterVersion::of_release("1.12.0"), Some(KarpenterVersion::V1_14));
        assert_eq!(KarpenterVersion::of_release("1.16.0-rc.1"), Some(KarpenterVersion::V1_15));
        assert_eq!(KarpenterVersion::of_release("0.37.0"), None);
        assert_eq!(KarpenterVersion::of_release("latest"), None);
    }

    #[test]
    fn an_image_names_its_release_in_its_tag() {
        let image = "public.ecr.aws/karpenter/controller:1.15.1@sha256:0123456789abcdef";
        assert_eq!(release_of_image(image), Some("1.15.1"));
        assert_eq!(release_of_image("registry.local:5000/karpenter/controller:v1.14.3"), Some("v1.14.3"));
        assert_eq!(release_of_image("registry.local:5000/karpenter/controller"), None);
        assert_eq!(release_of_image("public.ecr.aws/karpenter/controller@sha256:0123"), None);
        assert_eq!(release_of_image("karpenter/controller:latest"), None);
    }

    #[test]
    fn the_versions_differ_where_their_crds_do() {
        assert!(!KarpenterVersion::V1_14.budget_reasons().contains(&"Unhealthy"));
        assert!(KarpenterVersion::V1_15.budget_reasons().contains(&"Unhealthy"));
        assert!(KarpenterVersion::V1_14.requires_consolidate_after());
        assert!(!KarpenterVersion::V1_15.requires_consolidate_after());
    }
}
