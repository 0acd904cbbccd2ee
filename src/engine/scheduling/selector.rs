//! Label selectors (`matchLabels` + `matchExpressions`), compiled once and matched many times.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Expr {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
    /// An unknown operator matches nothing (fail closed).
    Never,
}

/// A compiled label selector. `None` selector semantics (match nothing) are the caller's concern.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Selector {
    exprs: Vec<Expr>,
}

impl Selector {
    pub fn from_label_selector(s: &LabelSelector) -> Selector {
        let mut exprs = Vec::new();
        for (k, v) in s.match_labels.iter().flatten() {
            exprs.push(Expr::In(k.clone(), vec![v.clone()]));
        }
        for e in s.match_expressions.iter().flatten() {
            let mut values = e.values.clone().unwrap_or_default();
            values.sort();
            values.dedup();
            exprs.push(match e.operator.as_str() {
                "In" => Expr::In(e.key.clone(), values),
                "NotIn" => Expr::NotIn(e.key.clone(), values),
                "Exists" => Expr::Exists(e.key.clone()),
                "DoesNotExist" => Expr::DoesNotExist(e.key.clone()),
                _ => Expr::Never,
            });
        }
        exprs.sort();
        Selector { exprs }
    }

    /// Adds `key In [value]` (how `matchLabelKeys` are applied: the pod's own value for each key).
    pub fn with_label(mut self, key: &str, value: &str) -> Selector {
        self.exprs.push(Expr::In(key.to_string(), vec![value.to_string()]));
        self.exprs.sort();
        self
    }

    /// Adds `key NotIn [value]` (`mismatchLabelKeys`).
    pub fn without_label(mut self, key: &str, value: &str) -> Selector {
        self.exprs.push(Expr::NotIn(key.to_string(), vec![value.to_string()]));
        self.exprs.sort();
        self
    }

    /// A selector in kubectl's `-l` syntax: comma-separated requirements that must all hold, each `k=v`, `k==v`,
    /// `k!=v`, `k in (a,b)`, `k notin (a,b)`, `k` or `!k` (`!=` and `notin` also match objects without the label).
    /// Keys and values are checked as the API server checks labels. An empty text selects everything.
    pub fn parse(text: &str) -> Result<Selector, SelectorError> {
        let tokens = lex(text);
        let end = text.chars().count() + 1;
        let mut p = Parser { tokens: &tokens, at: 0, end };
        let mut exprs = Vec::new();
        if tokens.is_empty() {
            return Ok(Selector::default());
        }
        loop {
            exprs.push(p.requirement()?);
            match p.next() {
                None => break,
                Some((Tok::Comma, _)) => {}
                Some((t, at)) => return Err(SelectorError::new(at, format!("expected ',' or the end, found {t}"))),
            }
        }
        exprs.sort();
        Ok(Selector { exprs })
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.exprs.iter().all(|e| match e {
            Expr::In(k, vs) => labels.get(k).is_some_and(|v| vs.binary_search(v).is_ok()),
            Expr::NotIn(k, vs) => labels.get(k).is_none_or(|v| vs.binary_search(v).is_err()),
            Expr::Exists(k) => labels.contains_key(k),
            Expr::DoesNotExist(k) => !labels.contains_key(k),
            Expr::Never => false,
        })
    }
}

/// Why a selector's text does not parse, and where: `at` is the character (from 1) the problem starts at.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("at character {at}: {message}")]
pub struct SelectorError {
    pub at: usize,
    pub message: String,
}

impl SelectorError {
    fn new(at: usize, message: impl Into<String>) -> SelectorError {
        SelectorError { at, message: message.into() }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Word(String),
    Comma,
    Eq,
    DoubleEq,
    NotEq,
    Bang,
    Open,
    Close,
    /// `<`, `>` and other operators kubectl's label selectors do not take here.
    Other(String),
}

impl std::fmt::Display for Tok {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tok::Word(w) => write!(f, "{w:?}"),
            Tok::Comma => f.write_str("','"),
            Tok::Eq => f.write_str("'='"),
            Tok::DoubleEq => f.write_str("'=='"),
            Tok::NotEq => f.write_str("'!='"),
            Tok::Bang => f.write_str("'!'"),
            Tok::Open => f.write_str("'('"),
            Tok::Close => f.write_str("')'"),
            Tok::Other(o) => write!(f, "'{o}'"),
        }
    }
}

/// Tokens with the character (from 1) each starts at.
fn lex(text: &str) -> Vec<(Tok, usize)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let special = |c: char| c.is_whitespace() || matches!(c, ',' | '=' | '!' | '(' | ')' | '<' | '>');
    while i < chars.len() {
        let c = chars[i];
        let at = i + 1;
        let next = chars.get(i + 1).copied();
        let (tok, len) = match c {
            c if c.is_whitespace() => {
                i += 1;
                continue;
            }
            ',' => (Tok::Comma, 1),
            '(' => (Tok::Open, 1),
            ')' => (Tok::Close, 1),
            '=' if next == Some('=') => (Tok::DoubleEq, 2),
            '=' => (Tok::Eq, 1),
            '!' if next == Some('=') => (Tok::NotEq, 2),
            '!' => (Tok::Bang, 1),
            '<' | '>' => (Tok::Other(c.to_string()), 1),
            _ => {
                let len = chars[i..].iter().take_while(|c| !special(**c)).count();
                (Tok::Word(chars[i..i + len].iter().collect()), len)
            }
        };
        out.push((tok, at));
        i += len;
    }
    out
}

struct Parser<'t> {
    tokens: &'t [(Tok, usize)],
    at: usize,
    /// The character just past the text, where "the end" is.
    end: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&(Tok, usize)> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<(Tok, usize)> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    fn found(&self) -> (String, usize) {
        match self.peek() {
            Some((t, at)) => (t.to_string(), *at),
            None => ("the end".to_string(), self.end),
        }
    }

    fn key(&mut self) -> Result<String, SelectorError> {
        match self.peek().cloned() {
            Some((Tok::Word(k), at)) => {
                self.at += 1;
                if let Some(e) = crate::engine::api::validation::qualified_name_errors(&k).first() {
                    return Err(SelectorError::new(at, format!("label key {k:?}: {e}")));
                }
                Ok(k)
            }
            _ => {
                let (what, at) = self.found();
                Err(SelectorError::new(at, format!("expected a label key, found {what}")))
            }
        }
    }

    /// A value: a word, or nothing (`k=` selects an empty value) before a ',', a ')' or the end.
    fn value(&mut self) -> Result<String, SelectorError> {
        match self.peek().cloned() {
            Some((Tok::Word(v), at)) => {
                self.at += 1;
                if let Some(e) = crate::engine::api::validation::label_value_errors(&v).first() {
                    return Err(SelectorError::new(at, format!("label value {v:?}: {e}")));
                }
                Ok(v)
            }
            None | Some((Tok::Comma | Tok::Close, _)) => Ok(String::new()),
            _ => {
                let (what, at) = self.found();
                Err(SelectorError::new(at, format!("expected a label value, found {what}")))
            }
        }
    }

    /// `(a,b,...)`: at least one value.
    fn values(&mut self, op: &str) -> Result<Vec<String>, SelectorError> {
        match self.peek() {
            Some((Tok::Open, _)) => self.at += 1,
            _ => {
                let (what, at) = self.found();
                return Err(SelectorError::new(at, format!("expected '(' after {op}, found {what}")));
            }
        }
        if let Some((Tok::Close, at)) = self.peek() {
            return Err(SelectorError::new(*at, format!("{op} needs at least one value")));
        }
        let mut values = Vec::new();
        loop {
            values.push(self.value()?);
            match self.next() {
                Some((Tok::Comma, _)) => {}
                Some((Tok::Close, _)) => break,
                Some((t, at)) => return Err(SelectorError::new(at, format!("expected ',' or ')', found {t}"))),
                None => return Err(SelectorError::new(self.end, format!("the {op} list has no closing ')'"))),
            }
        }
        values.sort();
        values.dedup();
        Ok(values)
    }

    fn requirement(&mut self) -> Result<Expr, SelectorError> {
        if let Some((Tok::Bang, _)) = self.peek() {
            self.at += 1;
            return Ok(Expr::DoesNotExist(self.key()?));
        }
        let key = self.key()?;
        let op = match self.peek().cloned() {
            None | Some((Tok::Comma, _)) => return Ok(Expr::Exists(key)),
            Some((op, at)) => (op, at),
        };
        self.at += 1;
        Ok(match op {
            (Tok::Eq | Tok::DoubleEq, _) => Expr::In(key, vec![self.value()?]),
            (Tok::NotEq, _) => Expr::NotIn(key, vec![self.value()?]),
            (Tok::Word(w), _) if w == "in" => Expr::In(key, self.values("in")?),
            (Tok::Word(w), _) if w == "notin" => Expr::NotIn(key, self.values("notin")?),
            (t, at) => {
                return Err(SelectorError::new(
                    at,
                    format!("expected an operator (=, ==, !=, in, notin), ',' or the end after {key:?}, found {t}"),
                ));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    #[test]
    fn matches_labels_and_expressions() {
        let s = Selector::from_label_selector(&LabelSelector {
            match_labels: Some([("app".to_string(), "web".to_string())].into()),
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "tier".into(),
                operator: "NotIn".into(),
                values: Some(vec!["db".into()]),
            }]),
        });
        let mut l = BTreeMap::new();
        l.insert("app".to_string(), "web".to_string());
        assert!(s.matches(&l));
        l.insert("tier".to_string(), "db".to_string());
        assert!(!s.matches(&l));
        assert!(Selector::default().matches(&BTreeMap::new()), "empty selector matches everything");
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn kubectl_syntax_parses_and_matches_as_kubectl_does() {
        let spot = labels(&[("karpenter.sh/capacity-type", "spot"), ("zone", "a"), ("gpu", "")]);
        let od = labels(&[("karpenter.sh/capacity-type", "on-demand"), ("zone", "b")]);
        let cases: &[(&str, bool, bool)] = &[
            ("", true, true),
            ("karpenter.sh/capacity-type=spot", true, false),
            ("karpenter.sh/capacity-type==spot", true, false),
            ("karpenter.sh/capacity-type!=spot", false, true),
            ("zone in (a, c)", true, false),
            ("zone notin (a,c)", false, true),
            ("gpu", true, false),
            ("!gpu", false, true),
            ("gpu=", true, false),
            ("missing!=x", true, true),
            ("missing notin (x)", true, true),
            (" zone = b , !gpu ", false, true),
            ("zone in (a,b),karpenter.sh/capacity-type in (on-demand)", false, true),
        ];
        for (text, on_spot, on_od) in cases {
            let s = Selector::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!((s.matches(&spot), s.matches(&od)), (*on_spot, *on_od), "{text:?}");
        }
    }

    #[test]
    fn a_bad_selector_says_what_and_where() {
        let cases: &[(&str, usize, &str)] = &[
            ("zone in a", 9, "expected '(' after in"),
            ("zone in ()", 10, "in needs at least one value"),
            ("zone in (a", 11, "no closing ')'"),
            ("zone=a b", 8, "expected ',' or the end"),
            ("=a", 1, "expected a label key"),
            ("zone>1", 5, "expected an operator"),
            ("a,,b", 3, "expected a label key"),
            ("zone=a,", 8, "expected a label key, found the end"),
            ("-bad=x", 1, "label key \"-bad\""),
            ("zone=b@d", 6, "label value \"b@d\""),
            ("!", 2, "expected a label key"),
            ("zone notin", 11, "expected '(' after notin"),
        ];
        for (text, at, needle) in cases {
            let e = Selector::parse(text).expect_err(text);
            assert_eq!(e.at, *at, "{text:?}: {e}");
            assert!(e.to_string().contains(needle), "{text:?}: {e}");
            assert!(e.to_string().starts_with(&format!("at character {at}: ")), "{e}");
        }
    }
}
