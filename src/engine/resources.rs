//! Kubernetes quantities parsed once into integers, and the resource vectors the scheduler adds and compares.
//!
//! CPU is kept in millicores, memory and storage in bytes, pods and extended resources as counts. No floats take
//! part in a fit check.

use std::collections::BTreeMap;
use std::fmt;

use thiserror::Error;

pub const CPU: &str = "cpu";
pub const MEMORY: &str = "memory";
pub const EPHEMERAL_STORAGE: &str = "ephemeral-storage";
pub const PODS: &str = "pods";

/// A malformed quantity: never a panic, always this.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid quantity {input:?}: {problem}")]
pub struct QuantityError {
    pub input: String,
    pub problem: &'static str,
}

/// An exact quantity in thousandths of its unit (rounded up to a thousandth, as Kubernetes does).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Quantity {
    milli: i128,
}

impl Quantity {
    pub fn from_milli(milli: i128) -> Self {
        Quantity { milli }
    }
    /// Thousandths of the unit (millicores for CPU), saturated to i64.
    pub fn milli(self) -> i64 {
        self.milli.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }
    /// Whole units, rounded up (bytes for memory, counts for pods), saturated to i64.
    pub fn value(self) -> i64 {
        let v = self.milli.div_euclid(1000) + i128::from(self.milli.rem_euclid(1000) != 0);
        v.clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }
}

impl std::str::FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_quantity(s)
    }
}

fn qerr(input: &str, problem: &'static str) -> QuantityError {
    QuantityError { input: input.to_string(), problem }
}

/// Parses `<sign><digits>[.<digits>]<suffix>` where the suffix is a binary SI (Ki…Ei), decimal SI (n u m k M G T
/// P E) or decimal exponent (e3, E-2). The result is exact to a thousandth, rounded up (away from zero for
/// positive values), like `resource.Quantity.MilliValue`.
pub fn parse_quantity(input: &str) -> Result<Quantity, QuantityError> {
    let s = input.trim();
    if s.is_empty() {
        return Err(qerr(input, "empty"));
    }
    let (negative, rest) = match s.as_bytes()[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(num_end);
    if number.is_empty() || number == "." {
        return Err(qerr(input, "no number"));
    }
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => {
            if f.contains('.') {
                return Err(qerr(input, "more than one decimal point"));
            }
            (i, f)
        }
        None => (number, ""),
    };
    // mantissa digits with `dec_exp` as the power of ten applied to them.
    let digits: String = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return Err(qerr(input, "too many digits"));
    }
    let mut mantissa: i128 = 0;
    for b in digits.bytes() {
        mantissa = mantissa * 10 + i128::from(b - b'0');
    }
    let mut dec_exp: i32 = -(frac_part.len() as i32);
    let mut bin_exp: u32 = 0;
    match suffix {
        "" => {}
        "n" => dec_exp -= 9,
        "u" => dec_exp -= 6,
        "m" => dec_exp -= 3,
        "k" => dec_exp += 3,
        "M" => dec_exp += 6,
        "G" => dec_exp += 9,
        "T" => dec_exp += 12,
        "P" => dec_exp += 15,
        "E" => dec_exp += 18,
        "Ki" => bin_exp = 10,
        "Mi" => bin_exp = 20,
        "Gi" => bin_exp = 30,
        "Ti" => bin_exp = 40,
        "Pi" => bin_exp = 50,
        "Ei" => bin_exp = 60,
        other => {
            let exp = other.strip_prefix(['e', 'E']).ok_or_else(|| qerr(input, "unknown suffix"))?;
            let e: i32 = exp.parse().map_err(|_| qerr(input, "bad exponent"))?;
            if !(-40..=40).contains(&e) {
                return Err(qerr(input, "exponent out of range"));
            }
            dec_exp += e;
        }
    }
    // value in milli = mantissa * 10^(dec_exp+3) * 2^bin_exp, rounded up.
    let overflow = || qerr(input, "too large");
    let mut v = mantissa.checked_mul(1i128 << bin_exp).ok_or_else(overflow)?;
    let e = dec_exp + 3;
    if e >= 0 {
        for _ in 0..e {
            v = v.checked_mul(10).ok_or_else(overflow)?;
        }
    } else {
        let mut div: i128 = 1;
        for _ in 0..(-e) {
            div = match div.checked_mul(10) {
                Some(d) => d,
                None => {
                    // Smaller than any representable thousandth: rounds up to one unless zero.
                    v = i128::from(v != 0);
                    div = 1;
                    break;
                }
            };
        }
        v = v / div + i128::from(v % div != 0);
    }
    if v > i64::MAX as i128 * 1000 {
        return Err(overflow());
    }
    Ok(Quantity { milli: if negative { -v } else { v } })
}

/// Renders millicores the way people write them: `2`, `1930m`.
pub fn format_cpu(milli: i64) -> String {
    if milli % 1000 == 0 { format!("{}", milli / 1000) } else { format!("{milli}m") }
}

/// Renders bytes with the largest exact binary suffix: `6903Mi`, `17Gi`, `100` (bytes).
pub fn format_bytes(bytes: i64) -> String {
    const SUFFIXES: [(&str, u32); 5] = [("Pi", 50), ("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)];
    if bytes != 0 {
        for (s, shift) in SUFFIXES {
            let unit = 1i64 << shift;
            if bytes % unit == 0 {
                return format!("{}{}", bytes / unit, s);
            }
        }
    }
    bytes.to_string()
}

/// Human rendering with one decimal for sentences: `7.4Gi`.
pub fn format_bytes_approx(bytes: i64) -> String {
    const SUFFIXES: [(&str, u32); 4] = [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)];
    for (s, shift) in SUFFIXES {
        let unit = (1i64 << shift) as f64;
        if bytes as f64 >= unit {
            let v = bytes as f64 / unit;
            return if (v - v.round()).abs() < 0.05 { format!("{:.0}{s}", v) } else { format!("{v:.1}{s}") };
        }
    }
    bytes.to_string()
}

/// A resource vector. The four core resources are fields; extended resources (GPUs, ENIs, ...) are a sorted list,
/// empty for most pods so cloning stays cheap.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Resources {
    pub cpu: i64,
    pub memory: i64,
    pub ephemeral_storage: i64,
    pub pods: i64,
    pub extended: Vec<(String, i64)>,
}

impl Resources {
    pub fn new(cpu_milli: i64, memory: i64, pods: i64) -> Self {
        Resources { cpu: cpu_milli, memory, pods, ..Default::default() }
    }

    /// Parses a Kubernetes resource list (`{cpu: 100m, memory: 1Gi}`); the error names the resource.
    pub fn from_quantities<'a, I>(list: I) -> Result<Self, (String, QuantityError)>
    where
        I: IntoIterator<Item = (&'a str, &'a str)>,
    {
        let mut r = Resources::default();
        for (name, q) in list {
            let parsed = parse_quantity(q).map_err(|e| (name.to_string(), e))?;
            r.set(name, parsed);
        }
        Ok(r)
    }

    pub fn set(&mut self, name: &str, q: Quantity) {
        match name {
            CPU => self.cpu = q.milli(),
            _ => self.set_value(name, q.value()),
        }
    }

    /// Sets a resource in its integer unit (millicores for CPU).
    pub fn set_value(&mut self, name: &str, v: i64) {
        match name {
            CPU => self.cpu = v,
            MEMORY => self.memory = v,
            EPHEMERAL_STORAGE => self.ephemeral_storage = v,
            PODS => self.pods = v,
            _ => match self.extended.binary_search_by(|(k, _)| k.as_str().cmp(name)) {
                Ok(i) => self.extended[i].1 = v,
                Err(i) => self.extended.insert(i, (name.to_string(), v)),
            },
        }
    }

    pub fn get(&self, name: &str) -> i64 {
        match name {
            CPU => self.cpu,
            MEMORY => self.memory,
            EPHEMERAL_STORAGE => self.ephemeral_storage,
            PODS => self.pods,
            _ => self.extended.iter().find(|(k, _)| k == name).map_or(0, |(_, v)| *v),
        }
    }

    pub fn add(&mut self, other: &Resources) {
        self.cpu += other.cpu;
        self.memory += other.memory;
        self.ephemeral_storage += other.ephemeral_storage;
        self.pods += other.pods;
        for (k, v) in &other.extended {
            let cur = self.get(k);
            self.set_value(k, cur + v);
        }
    }

    pub fn plus(&self, other: &Resources) -> Resources {
        let mut r = self.clone();
        r.add(other);
        r
    }

    /// `self - other`, per resource (may go negative).
    pub fn minus(&self, other: &Resources) -> Resources {
        let mut r = self.clone();
        r.cpu -= other.cpu;
        r.memory -= other.memory;
        r.ephemeral_storage -= other.ephemeral_storage;
        r.pods -= other.pods;
        for (k, v) in &other.extended {
            let cur = r.get(k);
            r.set_value(k, cur - v);
        }
        r
    }

    /// Element-wise maximum.
    pub fn max_with(&mut self, other: &Resources) {
        self.cpu = self.cpu.max(other.cpu);
        self.memory = self.memory.max(other.memory);
        self.ephemeral_storage = self.ephemeral_storage.max(other.ephemeral_storage);
        self.pods = self.pods.max(other.pods);
        for (k, v) in &other.extended {
            let cur = self.get(k);
            self.set_value(k, cur.max(*v));
        }
    }

    pub fn floor_zero(&mut self) {
        self.cpu = self.cpu.max(0);
        self.memory = self.memory.max(0);
        self.ephemeral_storage = self.ephemeral_storage.max(0);
        self.pods = self.pods.max(0);
        for (_, v) in &mut self.extended {
            *v = (*v).max(0);
        }
    }

    /// (request, room) for each resource `self` asks for. Hot when packing ranks types: the named resources are
    /// read by field, not looked up by name.
    pub fn asked_with_room<'a>(&'a self, room: &'a Resources) -> impl Iterator<Item = (i64, i64)> + 'a {
        [
            (self.cpu, room.cpu),
            (self.memory, room.memory),
            (self.ephemeral_storage, room.ephemeral_storage),
            (self.pods, room.pods),
        ]
        .into_iter()
        .chain(self.extended.iter().map(|(k, need)| (*need, room.get(k))))
        .filter(|(need, _)| *need > 0)
    }

    /// How many copies of `self` fit in `room` (`i64::MAX` when `self` asks for nothing).
    pub fn copies_in(&self, room: &Resources) -> i64 {
        self.asked_with_room(room).map(|(need, have)| have.max(0) / need).min().unwrap_or(i64::MAX)
    }

    /// True when every requested resource fits in `available` (a resource absent from `available` is 0).
    pub fn fits_in(&self, available: &Resources) -> bool {
        self.cpu <= available.cpu
            && self.memory <= available.memory
            && self.ephemeral_storage <= available.ephemeral_storage
            && self.pods <= available.pods
            && self.extended.iter().all(|(k, v)| *v <= 0 || *v <= available.get(k))
    }

    /// `self + other` fits in `available`, without building the sum.
    pub fn sum_fits_in(&self, other: &Resources, available: &Resources) -> bool {
        if !self.extended.is_empty() || !other.extended.is_empty() {
            return self.plus(other).fits_in(available);
        }
        self.cpu + other.cpu <= available.cpu
            && self.memory + other.memory <= available.memory
            && self.ephemeral_storage + other.ephemeral_storage <= available.ephemeral_storage
            && self.pods + other.pods <= available.pods
    }

    /// The names of the resources that do not fit, in a stable order.
    pub fn exceeding(&self, available: &Resources) -> Vec<&str> {
        let mut out = Vec::new();
        if self.cpu > available.cpu {
            out.push(CPU);
        }
        if self.memory > available.memory {
            out.push(MEMORY);
        }
        if self.ephemeral_storage > available.ephemeral_storage {
            out.push(EPHEMERAL_STORAGE);
        }
        if self.pods > available.pods {
            out.push(PODS);
        }
        for (k, v) in &self.extended {
            if *v > 0 && *v > available.get(k) {
                out.push(k.as_str());
            }
        }
        out
    }

    /// True when some resource of `self` exceeds a limit set in `limits` (resources absent from the limits are
    /// unlimited). Mirrors upstream's `ExceededBy`: strictly greater.
    pub fn exceeds_limits(&self, limits: &BTreeMap<String, i64>) -> Option<String> {
        limits.iter().find(|(k, lim)| self.get(k) > **lim).map(|(k, _)| k.clone())
    }

    pub fn is_zero(&self) -> bool {
        self.cpu == 0
            && self.memory == 0
            && self.ephemeral_storage == 0
            && self.pods == 0
            && self.extended.iter().all(|(_, v)| *v == 0)
    }

    /// Non-zero entries as (name, integer) pairs, core resources first.
    pub fn entries(&self) -> Vec<(&str, i64)> {
        self.nonzero().collect()
    }

    /// [`Resources::entries`] without collecting them (hot loops call this per type and pod).
    pub fn nonzero(&self) -> impl Iterator<Item = (&str, i64)> {
        [(CPU, self.cpu), (MEMORY, self.memory), (EPHEMERAL_STORAGE, self.ephemeral_storage), (PODS, self.pods)]
            .into_iter()
            .chain(self.extended.iter().map(|(k, v)| (k.as_str(), *v)))
            .filter(|(_, v)| *v != 0)
    }

    /// Kubernetes quantity strings per non-zero resource, for objects and reports.
    pub fn to_quantity_map(&self) -> BTreeMap<String, String> {
        self.entries().into_iter().map(|(k, v)| (k.to_string(), format_resource(k, v))).collect()
    }
}

/// Formats one resource value as a Kubernetes quantity.
pub fn format_resource(name: &str, v: i64) -> String {
    match name {
        CPU => format_cpu(v),
        MEMORY | EPHEMERAL_STORAGE => format_bytes(v),
        _ => v.to_string(),
    }
}

/// Human rendering for explanations (`cpu 1.5, memory 2Gi`).
pub fn describe_resource(name: &str, v: i64) -> String {
    match name {
        CPU => {
            if v % 1000 == 0 {
                format!("{}", v / 1000)
            } else {
                let s = format!("{:.3}", v as f64 / 1000.0);
                s.trim_end_matches('0').trim_end_matches('.').to_string()
            }
        }
        MEMORY | EPHEMERAL_STORAGE => format_bytes_approx(v),
        _ => v.to_string(),
    }
}

impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> =
            self.entries().into_iter().map(|(k, v)| format!("{k} {}", describe_resource(k, v))).collect();
        if parts.is_empty() { f.write_str("nothing") } else { f.write_str(&parts.join(", ")) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        parse_quantity(s).unwrap()
    }

    #[test]
    fn parses_the_common_forms() {
        assert_eq!(q("100m").milli(), 100);
        assert_eq!(q("1.5").milli(), 1500);
        assert_eq!(q("2").milli(), 2000);
        assert_eq!(q("1Gi").value(), 1 << 30);
        assert_eq!(q("6903Mi").value(), 6903 << 20);
        assert_eq!(q("100M").value(), 100_000_000);
        assert_eq!(q("1e3").value(), 1000);
        assert_eq!(q("1E-3").milli(), 1);
        assert_eq!(q("0.5Gi").value(), 1 << 29);
        assert_eq!(q("+3").value(), 3);
        assert_eq!(q("-1").milli(), -1000);
        assert_eq!(q("2Ti").value(), 2 << 40);
    }

    #[test]
    fn rounds_up_below_a_thousandth() {
        assert_eq!(q("1n").milli(), 1);
        assert_eq!(q("0.0001").milli(), 1);
        assert_eq!(q("0").milli(), 0);
        assert_eq!(q("1500m").value(), 2);
    }

    #[test]
    fn rejects_malformed_quantities() {
        for bad in ["", "abc", "1.2.3", "1Q", "Gi", ".", "1e", "1e999", "99999999999999999999999999999999Ei", "1 Gi"] {
            assert!(parse_quantity(bad).is_err(), "{bad:?} should fail");
        }
    }

    #[test]
    fn formats_back() {
        assert_eq!(format_cpu(1930), "1930m");
        assert_eq!(format_cpu(2000), "2");
        assert_eq!(format_bytes(6903 << 20), "6903Mi");
        assert_eq!(format_bytes(17 << 30), "17Gi");
        assert_eq!(format_bytes(1000), "1000");
    }

    #[test]
    fn fit_and_arithmetic() {
        let mut a = Resources::new(1000, 1 << 30, 1);
        a.set_value("nvidia.com/gpu", 1);
        let b = Resources::new(2000, 2 << 30, 10);
        assert!(!a.fits_in(&b), "gpu missing from b");
        assert_eq!(a.exceeding(&b), vec!["nvidia.com/gpu"]);
        let mut c = b.clone();
        c.set_value("nvidia.com/gpu", 2);
        assert!(a.fits_in(&c));
        let d = c.minus(&a);
        assert_eq!(d.cpu, 1000);
        assert_eq!(d.get("nvidia.com/gpu"), 1);
    }

    proptest::proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,24}") {
            let _ = parse_quantity(&s);
        }

        #[test]
        fn integers_round_trip(n in 0i64..1_000_000_000) {
            proptest::prop_assert_eq!(parse_quantity(&n.to_string()).unwrap().value(), n);
            proptest::prop_assert_eq!(parse_quantity(&format!("{n}m")).unwrap().milli(), n);
        }
    }
}
