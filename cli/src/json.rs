//! Values and reports as JSON.
//!
//! Owns: how a typed value reads in JSON (integers beyond 64 bits and non-finite floats as
//! strings, pairs as `[value, index]`) and `print`, the one writer of a JSON document to
//! stdout. Must not: choose what a command reports (each command builds its document), or
//! write except through `out`.

use onesided_core::datatype::Value;
use onesided_scenario::Observed;
use serde_json::{json, Value as Json};

/// One element: integers as numbers (as strings beyond 64 bits), floats as numbers (non-finite
/// ones as strings), bools, pairs as `[value, index]`.
pub fn value(element: &Value) -> Json {
    match element {
        Value::Int(v) => {
            if let Ok(small) = i64::try_from(*v) {
                json!(small)
            } else if let Ok(big) = u64::try_from(*v) {
                json!(big)
            } else {
                json!(v.to_string())
            }
        }
        Value::Float(v) => serde_json::Number::from_f64(*v)
            .map(Json::Number)
            .unwrap_or_else(|| json!(v.to_string())),
        Value::Bool(v) => json!(v),
        Value::Pair(v, index) => json!([value(v), index]),
    }
}

/// A list of elements.
pub fn values(values: &[Value]) -> Json {
    Json::Array(values.iter().map(value).collect())
}

/// A scalar or a list.
pub fn observed(observed: &Observed) -> Json {
    match observed {
        Observed::Scalar(v) => value(v),
        Observed::List(list) => values(list),
    }
}

/// Prints a JSON document on stdout.
pub fn print(document: &Json) {
    outln!("{document}");
}
