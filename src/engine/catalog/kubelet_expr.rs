//! Kubelet settings by CEL expression (Karpenter v1.15's AWS provider, gate `NodeClassCEL`; spec engine-v115 §7):
//! an EC2NodeClass's `kubelet.maxPods`, and any `kubeReserved` or `systemReserved` value that is not a quantity, is an
//! expression over the instance type, resolved per type. Pure: compile, evaluate, round.

use std::sync::{Arc, OnceLock};

use cel::{Context, Env, Program, Value};

use crate::engine::resources;

/// The variables an expression may name.
pub const VARIABLES: [&str; 6] = ["vcpus", "memory_mib", "default_enis", "ips_per_eni", "max_pods", "instance_type"];

/// Why an expression cannot be used; the reasons are upstream's `ValidationSucceeded=False` reasons.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExprError {
    /// It does not compile, or names a variable that does not exist.
    #[error("{field}: {message}")]
    Invalid { field: String, message: String },
    /// It compiles but gives no usable number.
    #[error("{field}: {message}")]
    Evaluation { field: String, message: String },
}

impl ExprError {
    /// The condition reason upstream's nodeclass controller gives.
    pub fn reason(&self) -> &'static str {
        match self {
            ExprError::Invalid { .. } => "KubeletExpressionInvalid",
            ExprError::Evaluation { .. } => "KubeletExpressionEvaluationFailed",
        }
    }
}

/// The facts an expression sees for one instance type.
#[derive(Debug, Clone, PartialEq)]
pub struct Vars<'a> {
    pub vcpus: i64,
    pub memory_mib: i64,
    pub default_enis: i64,
    pub ips_per_eni: i64,
    /// In the maxPods expression, the type's default pod count; in reserved expressions, the resolved maxPods.
    pub max_pods: i64,
    pub instance_type: &'a str,
}

/// A compiled expression, with the field it came from (for errors).
#[derive(Clone)]
pub struct Expr {
    pub field: String,
    program: Arc<Program>,
}

impl std::fmt::Debug for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Expr({})", self.field)
    }
}

fn env() -> &'static Arc<Env> {
    static ENV: OnceLock<Arc<Env>> = OnceLock::new();
    ENV.get_or_init(|| Arc::new(Env::stdlib()))
}

/// Compiles `source`; a variable other than [`VARIABLES`] is a compile error, as upstream's declared environment
/// makes it.
pub fn compile(field: &str, source: &str) -> Result<Expr, ExprError> {
    let invalid = |message: String| ExprError::Invalid { field: field.to_string(), message };
    let program = env().compile(source).map_err(|e| invalid(format!("does not compile: {e}")))?;
    if let Some(v) = program.references().variables().into_iter().find(|v| !VARIABLES.contains(v)) {
        return Err(invalid(format!("undeclared reference to {v:?} (known: {})", VARIABLES.join(", "))));
    }
    Ok(Expr { field: field.to_string(), program: Arc::new(program) })
}

impl Expr {
    /// The expression's number for one type: an int, uint or finite double.
    pub fn number(&self, vars: &Vars<'_>) -> Result<f64, ExprError> {
        let failed = |message: String| ExprError::Evaluation { field: self.field.clone(), message };
        let mut ctx = Context::with_env(Arc::clone(env()));
        for (name, f) in [("max", cel::functions::max as fn(_) -> _), ("min", cel::functions::min as fn(_) -> _)] {
            ctx.add_function(name, f).map_err(|e| failed(format!("{name}: {e}")))?;
        }
        for (name, v) in [
            ("vcpus", vars.vcpus),
            ("memory_mib", vars.memory_mib),
            ("default_enis", vars.default_enis),
            ("ips_per_eni", vars.ips_per_eni),
            ("max_pods", vars.max_pods),
        ] {
            ctx.add_variable_from_value(name, Value::Int(v));
        }
        ctx.add_variable_from_value("instance_type", Value::String(Arc::new(vars.instance_type.to_string())));
        let n = match self.program.execute(&ctx) {
            Ok(Value::Int(n)) => n as f64,
            Ok(Value::UInt(n)) => n as f64,
            Ok(Value::Float(n)) => n,
            Ok(other) => return Err(failed(format!("gives {other:?}, not a number"))),
            Err(e) => return Err(failed(format!("evaluation failed for {}: {e}", vars.instance_type))),
        };
        if !n.is_finite() {
            return Err(failed(format!("gives {n} for {}", vars.instance_type)));
        }
        Ok(n)
    }

    /// maxPods for one type: rounded up, within [0, 2³¹−1].
    pub fn max_pods(&self, vars: &Vars<'_>) -> Result<i64, ExprError> {
        let n = self.number(vars)?.ceil();
        if !(0.0..=f64::from(i32::MAX)).contains(&n) {
            return Err(ExprError::Evaluation {
                field: self.field.clone(),
                message: format!("maxPods {n} for {} is outside [0, {}]", vars.instance_type, i32::MAX),
            });
        }
        Ok(n as i64)
    }

    /// A reserved resource for one type, in the engine's units (millicores, bytes, a count), from a bare number in
    /// the key's unit rounded up: cpu in millicores to a multiple of 10m, memory in MiB to a multiple of 16 MiB,
    /// ephemeral-storage in GiB, pid a count. `None` for a key that is not reserved this way.
    pub fn reserved(&self, key: &str, vars: &Vars<'_>) -> Result<i64, ExprError> {
        let n = self.number(vars)?;
        if n < 0.0 {
            return Err(ExprError::Evaluation {
                field: self.field.clone(),
                message: format!("negative value {n} for {}", vars.instance_type),
            });
        }
        const MIB: f64 = 1024.0 * 1024.0;
        let v = match key {
            resources::CPU => (n / 10.0).ceil() * 10.0,
            resources::MEMORY => (n / 16.0).ceil() * 16.0 * MIB,
            resources::EPHEMERAL_STORAGE => (n * 1024.0 * MIB).ceil(),
            _ => n.ceil(),
        };
        Ok(v.min(i64::MAX as f64) as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m5_large(max_pods: i64) -> Vars<'static> {
        Vars { vcpus: 2, memory_mib: 8192, default_enis: 3, ips_per_eni: 10, max_pods, instance_type: "m5.large" }
    }

    #[test]
    fn expressions_see_the_types_facts_and_min_and_max() {
        let e = compile("spec.kubelet.maxPods", "min(110, max_pods * 2)").unwrap();
        assert_eq!(e.max_pods(&m5_large(29)), Ok(58));
        assert_eq!(e.max_pods(&m5_large(80)), Ok(110));
        let e = compile("x", "default_enis * (ips_per_eni - 1) + 2").unwrap();
        assert_eq!(e.max_pods(&m5_large(0)), Ok(29));
        let e = compile("x", "instance_type == 'm5.large' ? 7 : 8").unwrap();
        assert_eq!(e.max_pods(&m5_large(0)), Ok(7));
        // Doubles round up.
        let e = compile("x", "double(vcpus) * 2.5").unwrap();
        assert_eq!(e.max_pods(&m5_large(0)), Ok(5));
    }

    #[test]
    fn reserved_values_round_up_in_each_resources_unit() {
        let vars = m5_large(29);
        let cpu = compile("x", "double(vcpus) * 41.5").unwrap();
        assert_eq!(cpu.reserved("cpu", &vars), Ok(90), "83m → 90m");
        let mem = compile("x", "11 * max_pods + 255").unwrap();
        assert_eq!(mem.reserved("memory", &vars), Ok(576 * 1024 * 1024), "574 MiB → 576 MiB");
        let disk = compile("x", "1.5").unwrap();
        assert_eq!(disk.reserved("ephemeral-storage", &vars), Ok(1536 * 1024 * 1024));
        let pid = compile("x", "max_pods * 100").unwrap();
        assert_eq!(pid.reserved("pid", &vars), Ok(2900));
    }

    #[test]
    fn bad_expressions_are_invalid_or_fail_with_upstreams_reasons() {
        let e = compile("spec.kubelet.maxPods", "min(110,").unwrap_err();
        assert_eq!(e.reason(), "KubeletExpressionInvalid");
        let e = compile("spec.kubelet.maxPods", "cores * 2").unwrap_err();
        assert_eq!(e.reason(), "KubeletExpressionInvalid");
        assert!(e.to_string().contains("cores"), "{e}");
        let vars = m5_large(29);
        for (source, what) in
            [("'many'", "a string"), ("-1", "negative"), ("1.0 / 0.0", "infinite"), ("1 / 0", "error")]
        {
            let e = compile("spec.kubelet.maxPods", source).unwrap();
            assert_eq!(e.max_pods(&vars).unwrap_err().reason(), "KubeletExpressionEvaluationFailed", "{what}");
        }
        let e = compile("x", "vcpus - 10").unwrap();
        assert!(e.reserved("cpu", &vars).is_err(), "negative reserved values are refused");
    }
}
