//! A window's info keys (`MPI_Win_create`'s info, `MPI_WIN_GET_INFO`, `MPI_Win_set_info`):
//! the keys onesided reads, their values and limits, and the unknown keys a window keeps.
//!
//! Owns: parsing and rendering of info keys. Must not: decide what a key changes in a
//! window's behaviour (the target and origin engines read `WindowInfo`).

use super::*;

/// The `accumulate_ops` info key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccumulateOps {
    /// `same_op`: concurrent accumulates to one location all use the same op.
    SameOp,
    /// `same_op_no_op` (default): the same op, or `MPI_NO_OP`.
    SameOpNoOp,
}

/// The `accumulate_ordering` info key: which orderings hold between accumulates from one
/// origin to one target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AccumulateOrdering {
    /// Read after read.
    pub rar: bool,
    /// Read after write.
    pub raw: bool,
    /// Write after read.
    pub war: bool,
    /// Write after write.
    pub waw: bool,
}

impl AccumulateOrdering {
    /// The default: every ordering.
    pub const ALL: Self = AccumulateOrdering {
        rar: true,
        raw: true,
        war: true,
        waw: true,
    };

    /// Whether any ordering is required.
    pub fn any(self) -> bool {
        self.rar || self.raw || self.war || self.waw
    }

    /// Whether it keeps `second` after `first`, two accumulates (atomic reads included) of
    /// one origin to overlapping bytes of one target, `first` issued before, each given as
    /// (reads the target, writes it) ([`OpKind::accumulate_access`]): every ordering the
    /// pair needs (a write then a read needs `raw`, …) is in the set (MPI §11.7.2).
    pub fn orders(self, first: (bool, bool), second: (bool, bool)) -> bool {
        let ((r1, w1), (r2, w2)) = (first, second);
        (!(w1 && r2) || self.raw)
            && (!(r1 && w2) || self.war)
            && (!(w1 && w2) || self.waw)
            && (!(r1 && r2) || self.rar)
    }

    /// The key's value: `none` or the orderings joined by commas.
    pub fn render(self) -> String {
        let names: Vec<&str> = [
            (self.rar, "rar"),
            (self.raw, "raw"),
            (self.war, "war"),
            (self.waw, "waw"),
        ]
        .into_iter()
        .filter(|(set, _)| *set)
        .map(|(_, name)| name)
        .collect();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(",")
        }
    }
}

/// The info keys in use on a window (`MPI_WIN_GET_INFO`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowInfo {
    /// `no_locks`: lock and lock_all are refused, and free needs no barrier.
    pub no_locks: bool,
    /// `accumulate_ordering`.
    pub accumulate_ordering: AccumulateOrdering,
    /// `accumulate_ops`.
    pub accumulate_ops: AccumulateOps,
    /// `same_size`.
    pub same_size: bool,
    /// `same_disp_unit`.
    pub same_disp_unit: bool,
    /// `onesided_element_type` (ours, not MPI's): the type of the window's elements, when its
    /// creator said. Nothing checks operations against it; clients use it as the type of an
    /// operation that names none (`onesided get` without `--type`).
    pub element_type: Option<Datatype>,
    /// `mpi_accumulate_granularity` (MPI-4): the granularity, in bytes, at which the
    /// application would like accumulates synchronized; a hint (0, the default: none). Every
    /// accumulate here is applied whole by the target's one actor, whatever it says.
    pub accumulate_granularity: u64,
    /// Keys this implementation does not use, with their values, kept as given: MPI-4's
    /// `MPI_WIN_GET_INFO` reports them too.
    pub kept: std::collections::BTreeMap<String, String>,
}

/// The longest info key MPI allows (`MPI_MAX_INFO_KEY`, without its terminating NUL).
pub const MAX_INFO_KEY: usize = 255;

/// The longest info value MPI allows (`MPI_MAX_INFO_VAL`, without its terminating NUL).
pub const MAX_INFO_VAL: usize = 1023;

/// The most unknown keys a window keeps.
pub const MAX_KEPT_INFO_KEYS: usize = 64;

/// The info key that names a window's element type ([`WindowInfo::element_type`]).
pub const ELEMENT_TYPE_KEY: &str = "onesided_element_type";

impl Default for WindowInfo {
    fn default() -> Self {
        WindowInfo {
            no_locks: false,
            accumulate_ordering: AccumulateOrdering::ALL,
            accumulate_ops: AccumulateOps::SameOpNoOp,
            same_size: false,
            same_disp_unit: false,
            element_type: None,
            accumulate_granularity: 0,
            kept: std::collections::BTreeMap::new(),
        }
    }
}

impl WindowInfo {
    /// Parses info keys. Unknown keys are hints this implementation does not use: kept as
    /// given and reported ([`WindowInfo::to_pairs`]); known keys with bad values are refused.
    ///
    /// # Errors
    /// `MPI_ERR_INFO` for a bad value, a key or value longer than MPI allows
    /// ([`MAX_INFO_KEY`], [`MAX_INFO_VAL`]), an empty key, or more than
    /// [`MAX_KEPT_INFO_KEYS`] unknown keys.
    pub fn parse<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> RmaResult<Self> {
        let mut info = WindowInfo::default();
        for (key, value) in pairs {
            if key.is_empty() || key.len() > MAX_INFO_KEY {
                return Err(rma_err!(
                    Info,
                    "an info key has 1 to {MAX_INFO_KEY} bytes (MPI_MAX_INFO_KEY), not {}: {}",
                    key.len(),
                    quoted(key)
                ));
            }
            if value.len() > MAX_INFO_VAL {
                return Err(rma_err!(
                    Info,
                    "the value of info key {} has {} bytes, more than MPI_MAX_INFO_VAL \
                     ({MAX_INFO_VAL})",
                    quoted(key),
                    value.len()
                ));
            }
            match key {
                "no_locks" => info.no_locks = parse_bool(key, value)?,
                "same_size" => info.same_size = parse_bool(key, value)?,
                "same_disp_unit" => info.same_disp_unit = parse_bool(key, value)?,
                "accumulate_ops" => {
                    info.accumulate_ops = match value {
                        "same_op" => AccumulateOps::SameOp,
                        "same_op_no_op" => AccumulateOps::SameOpNoOp,
                        _ => {
                            return Err(rma_err!(
                                Info,
                                "accumulate_ops must be same_op or same_op_no_op, not {}",
                                quoted(value)
                            ))
                        }
                    }
                }
                "accumulate_ordering" => {
                    info.accumulate_ordering = parse_ordering(value)?;
                }
                ELEMENT_TYPE_KEY => {
                    info.element_type = Some(Datatype::parse(value).ok_or_else(|| {
                        rma_err!(
                            Info,
                            "{ELEMENT_TYPE_KEY} must name a datatype (i8 … u64, f32, f64, \
                             byte, bool, pairs as f64_i32 …), not {}",
                            quoted(value)
                        )
                    })?);
                }
                "mpi_accumulate_granularity" => {
                    info.accumulate_granularity = value.parse().map_err(|_| {
                        rma_err!(
                            Info,
                            "mpi_accumulate_granularity must be a number of bytes >= 0, not {}",
                            quoted(value)
                        )
                    })?;
                }
                _ => {
                    info.kept.insert(key.to_string(), value.to_string());
                    if info.kept.len() > MAX_KEPT_INFO_KEYS {
                        return Err(rma_err!(
                            Info,
                            "more than {MAX_KEPT_INFO_KEYS} info keys this implementation does \
                             not use"
                        ));
                    }
                }
            }
        }
        Ok(info)
    }

    /// The info after `MPI_Win_set_info(pairs)` on a window whose info is `self`: the keys a
    /// window's life may change — `accumulate_ops`, `accumulate_ordering`,
    /// `mpi_accumulate_granularity` and the keys this implementation does not use — take the
    /// values given, the others keep theirs. Keys that describe the window's creation
    /// (`no_locks`, `same_size`, `same_disp_unit`, `onesided_element_type`) are checked and
    /// then ignored, as MPI allows for hints an implementation takes only at creation.
    ///
    /// # Errors
    /// As [`WindowInfo::parse`]: nothing is changed.
    pub fn updated<'a>(
        &self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)> + Clone,
    ) -> RmaResult<Self> {
        let given = WindowInfo::parse(pairs.clone())?;
        let mut next = self.clone();
        for (key, _) in pairs {
            match key {
                "accumulate_ops" => next.accumulate_ops = given.accumulate_ops,
                "accumulate_ordering" => next.accumulate_ordering = given.accumulate_ordering,
                "mpi_accumulate_granularity" => {
                    next.accumulate_granularity = given.accumulate_granularity;
                }
                "no_locks" | "same_size" | "same_disp_unit" | ELEMENT_TYPE_KEY => {}
                other => {
                    if let Some(value) = given.kept.get(other) {
                        next.kept.insert(other.to_string(), value.clone());
                    }
                }
            }
        }
        if next.kept.len() > MAX_KEPT_INFO_KEYS {
            return Err(rma_err!(
                Info,
                "more than {MAX_KEPT_INFO_KEYS} info keys this implementation does not use"
            ));
        }
        Ok(next)
    }

    /// Refuses a shape that breaks the window's promises: `same_size` with ranks of different
    /// sizes, `same_disp_unit` with different disp_units (MPI makes either erroneous; here the
    /// creation fails and nothing is created).
    ///
    /// # Errors
    /// `MPI_ERR_INFO`, naming the key and the first rank that differs.
    pub fn check_shape(&self, sizes: &[u64], disp_units: &[u32]) -> RmaResult<()> {
        fn first_different<T: PartialEq + std::fmt::Display>(
            key: &str,
            what: &str,
            values: &[T],
        ) -> RmaResult<()> {
            let Some(first) = values.first() else {
                return Ok(());
            };
            match values.iter().position(|value| value != first) {
                None => Ok(()),
                Some(rank) => Err(rma_err!(
                    Info,
                    "{key}=true, but rank {rank} has {what} {} and rank 0 has {first}",
                    values[rank]
                )),
            }
        }
        if self.same_size {
            first_different("same_size", "size", sizes)?;
        }
        if self.same_disp_unit {
            first_different("same_disp_unit", "disp_unit", disp_units)?;
        }
        Ok(())
    }

    /// The hints in use, as key/value pairs, then the keys kept as given (what MPI-4's
    /// `MPI_WIN_GET_INFO` reports).
    pub fn to_pairs(&self) -> Vec<(String, String)> {
        let ops = match self.accumulate_ops {
            AccumulateOps::SameOp => "same_op",
            AccumulateOps::SameOpNoOp => "same_op_no_op",
        };
        vec![
            ("no_locks".into(), self.no_locks.to_string()),
            (
                "accumulate_ordering".into(),
                self.accumulate_ordering.render(),
            ),
            ("accumulate_ops".into(), ops.into()),
            ("same_size".into(), self.same_size.to_string()),
            ("same_disp_unit".into(), self.same_disp_unit.to_string()),
        ]
        .into_iter()
        .chain(
            self.element_type
                .map(|dtype| (ELEMENT_TYPE_KEY.to_string(), dtype.name().to_string())),
        )
        .chain(std::iter::once((
            "mpi_accumulate_granularity".to_string(),
            self.accumulate_granularity.to_string(),
        )))
        .chain(self.kept.clone())
        .collect()
    }
}

fn parse_bool(key: &str, value: &str) -> RmaResult<bool> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(rma_err!(
            Info,
            "{key} must be true or false, not {}",
            quoted(value)
        )),
    }
}

fn parse_ordering(value: &str) -> RmaResult<AccumulateOrdering> {
    if value == "none" {
        return Ok(AccumulateOrdering {
            rar: false,
            raw: false,
            war: false,
            waw: false,
        });
    }
    let mut ordering = AccumulateOrdering {
        rar: false,
        raw: false,
        war: false,
        waw: false,
    };
    for part in value.split(',') {
        match part {
            "rar" => ordering.rar = true,
            "raw" => ordering.raw = true,
            "war" => ordering.war = true,
            "waw" => ordering.waw = true,
            _ => {
                return Err(rma_err!(
                    Info,
                    "accumulate_ordering must be none or a list of rar,raw,war,waw, not {}",
                    quoted(value)
                ))
            }
        }
    }
    Ok(ordering)
}
