//! The cloud-provider port over the AWS SDK (`--cloud aws`): configuration like the AWS CLI with start-up checks
//! ([`config`]); the live catalog from DescribeInstanceTypes/Offerings ([`instancetypes`]) priced by the Pricing
//! API and spot price history ([`pricing`]); EC2NodeClass resolution and status ([`nodeclass`]); launches planned
//! ([`launch`], [`userdata`]) and sent through launch templates and CreateFleet ([`ec2`]) with capacity errors
//! keeping offerings out for a while ([`unavailable`]); NodeClass drift ([`drift`]); and the interruption queue ([`interruption`], [`sqs`]).
//! [`cloud::AwsCloud`] ties them together for the controller.

pub mod capacityreservation;
pub mod cloud;
pub mod config;
pub mod drift;
pub mod ec2;
pub mod instanceprofile;
pub mod instancestatus;
pub mod instancetypes;
pub mod interruption;
pub mod launch;
pub mod nodeclass;
pub mod pricing;
pub mod sqs;
pub mod unavailable;
pub mod upkeep;
pub mod userdata;

/// A stable 64-bit FNV-1a hash: names of launch templates and instance profiles, spec hashes and client tokens
/// must be the same across processes and releases (std's hasher is not).
pub fn stable_hash(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in *part {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        // A separator, so ("ab", "c") and ("a", "bc") differ.
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    #[test]
    fn stable_hash_separates_its_parts() {
        let h = super::stable_hash;
        assert_ne!(h(&[b"ab", b"c"]), h(&[b"a", b"bc"]));
        assert_eq!(h(&[b"demo", b"x"]), h(&[b"demo", b"x"]));
        // FNV-1a of "a" (0xaf63dc4c8601ec8c), then the separator: fixed forever, names built on it stay valid.
        assert_eq!(h(&[b"a"]), (0xaf63_dc4c_8601_ec8c_u64 ^ 0xff).wrapping_mul(0x0000_0100_0000_01b3));
    }
}
