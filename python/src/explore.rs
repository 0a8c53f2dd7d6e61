//! `explore`: the schedule explorer of `onesided explore` (`onesided_scenario::explore`) on a
//! scenario's text, in memory, no server: the report as the JSON document `onesided explore
//! --json` prints (`onesided_scenario::explore::json`), which the package parses.
//!
//! Owns: the function's arguments and which exception each refusal is. Must not: explore
//! anything itself or shape the report (the scenario crate does both, for the CLI too).

use onesided_core::ErrorClass;
use onesided_scenario::explore::json::report_json;
use onesided_scenario::explore::{ExploreError, Explorer, Strategy};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::errors;

/// Explores `text` (a `.rma` scenario) under `schedules` schedules of `seed` drawn by
/// `strategy`, and returns the report as JSON (`name` is its `file`). Text that does not parse
/// is a `ValueError` naming the line; a bad strategy or count an `ArgumentError`; a window or
/// call the server would refuse too, its `MpiError`.
#[pyfunction]
#[pyo3(signature = (text, *, schedules = 1000, seed = 0, strategy = "random", check = false, name = "<scenario>"))]
pub(crate) fn explore(
    py: Python<'_>,
    text: &str,
    schedules: u64,
    seed: u64,
    strategy: &str,
    check: bool,
    name: &str,
) -> PyResult<String> {
    let parsed: Strategy = strategy.parse().map_err(|why| {
        errors::bad_argument(py, ErrorClass::Arg, format!("strategy {strategy:?}: {why}"))
    })?;
    if schedules == 0 {
        let why = "schedules: 1 or more";
        return Err(errors::bad_argument(py, ErrorClass::Arg, why));
    }
    let scenario = onesided_scenario::parse(text)
        .map_err(|error| PyValueError::new_err(format!("{name}:{error}")))?;
    let explorer = match Explorer::new(&scenario) {
        Ok(explorer) => explorer.with_strategy(parsed),
        Err(ExploreError::Window { source, .. } | ExploreError::Call { source, .. }) => {
            return Err(errors::to_py(py, source.into()));
        }
        Err(error) => return Err(PyValueError::new_err(format!("{name}: {error}"))),
    };
    let report = py.detach(|| explorer.explore(seed, schedules));
    Ok(report_json(name, &scenario, &report, check).to_string())
}
