//! Go-style durations (`90s`, `1h30m`, `720h`) and the `Never` that some Karpenter fields accept.

use std::time::Duration;

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid duration {input:?}: {problem}")]
pub struct DurationError {
    pub input: String,
    pub problem: &'static str,
}

/// Parses a Go `time.ParseDuration` string (units ns, us, µs, ms, s, m, h; fractions allowed; a lone "0" allowed).
/// Negative durations are rejected: no Karpenter field accepts them.
pub fn parse_go_duration(input: &str) -> Result<Duration, DurationError> {
    let err = |problem| DurationError { input: input.to_string(), problem };
    let s = input.trim();
    if s.is_empty() {
        return Err(err("empty"));
    }
    if s.starts_with('-') {
        return Err(err("negative"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total: f64 = 0.0;
    let mut rest = s;
    if rest.is_empty() {
        return Err(err("no number"));
    }
    while !rest.is_empty() {
        let n_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (num, tail) = rest.split_at(n_end);
        if num.is_empty() || num == "." || num.matches('.').count() > 1 {
            return Err(err("expected a number"));
        }
        let value: f64 = num.parse().map_err(|_| err("expected a number"))?;
        let u_end = tail.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(tail.len());
        let (unit, next) = tail.split_at(u_end);
        let nanos_per = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "" => return Err(err("missing unit")),
            _ => return Err(err("unknown unit")),
        };
        total += value * nanos_per;
        rest = next;
    }
    if !total.is_finite() || total > 9.2e18 {
        return Err(err("too large"));
    }
    Ok(Duration::from_nanos(total.round() as u64))
}

/// A duration that may be `Never`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NillableDuration {
    Never,
    After(Duration),
}

impl NillableDuration {
    pub fn parse(input: &str) -> Result<Self, DurationError> {
        if input.trim() == "Never" {
            Ok(NillableDuration::Never)
        } else {
            parse_go_duration(input).map(NillableDuration::After)
        }
    }
    pub fn duration(self) -> Option<Duration> {
        match self {
            NillableDuration::Never => None,
            NillableDuration::After(d) => Some(d),
        }
    }
}

/// Renders a duration the short way people write it: `1h30m`, `90s` → `1m30s`, `0s`.
pub fn format_duration(d: Duration) -> String {
    let mut secs = d.as_secs();
    let millis = d.subsec_millis();
    if secs == 0 && millis == 0 {
        return "0s".to_string();
    }
    let mut out = String::new();
    let h = secs / 3600;
    secs %= 3600;
    let m = secs / 60;
    secs %= 60;
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if secs > 0 || millis > 0 {
        if millis > 0 {
            out.push_str(&format!("{secs}.{millis:03}s"));
        } else {
            out.push_str(&format!("{secs}s"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_go_duration("720h").unwrap(), Duration::from_secs(720 * 3600));
        assert_eq!(parse_go_duration("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse_go_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_go_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_go_duration("0s").unwrap(), Duration::ZERO);
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
        assert_eq!(parse_go_duration("300ms").unwrap(), Duration::from_millis(300));
        for bad in ["", "5", "h", "1d", "-5s", "1..5s", "abc", "1h 30m", "99999999999999999999h"] {
            assert!(parse_go_duration(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn never() {
        assert_eq!(NillableDuration::parse("Never").unwrap(), NillableDuration::Never);
        assert_eq!(NillableDuration::parse("5m").unwrap().duration(), Some(Duration::from_secs(300)));
    }

    #[test]
    fn formats() {
        assert_eq!(format_duration(Duration::from_secs(5400)), "1h30m");
        assert_eq!(format_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(format_duration(Duration::ZERO), "0s");
    }
}
