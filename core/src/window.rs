//! Windows: their description (flavor, model, per-rank size and disp_unit, info keys), the
//! operations that reach a target, their validation, and [`apply`], the one function that
//! carries out an operation on window bytes. It is not the only code that writes them: the
//! owner's pushes and a dynamic window's growth are the target engine's (`crate::target`), and
//! replay copies a recorded publication in itself (ARCHITECTURE.md, invariant 4).
//!
//! Owns: what an operation means at the target. Must not: know where the bytes live (the
//! target engine holds the public copy, inside the server's actor, and calls [`apply`] on it;
//! replay calls it on the copies it rebuilds).

use crate::datatype::Datatype;
use crate::error::{quoted, ErrorClass, RmaResult};
use crate::layout::{Layout, Run};
use crate::reduce::{self, Op};
use crate::rma_err;

mod info;
pub use info::{
    AccumulateOps, AccumulateOrdering, WindowInfo, ELEMENT_TYPE_KEY, MAX_INFO_KEY, MAX_INFO_VAL,
    MAX_KEPT_INFO_KEYS,
};

/// How the window's memory came to be (`MPI_WIN_CREATE_FLAVOR`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// `MPI_WIN_CREATE`: the ranks bring their own memory (their private copies).
    Create,
    /// `MPI_WIN_ALLOCATE`: the service allocates it.
    Allocate,
    /// `MPI_WIN_CREATE_DYNAMIC`: no memory at creation; each rank attaches regions
    /// (`MPI_WIN_ATTACH`) at addresses its target hands out, and operations address bytes by
    /// those addresses (`disp` = address, disp_unit 1).
    Dynamic,
}

impl Flavor {
    /// Scenario/CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Flavor::Create => "create",
            Flavor::Allocate => "allocate",
            Flavor::Dynamic => "dynamic",
        }
    }

    /// Parses a name.
    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "create" => Some(Flavor::Create),
            "allocate" => Some(Flavor::Allocate),
            "dynamic" => Some(Flavor::Dynamic),
            _ => None,
        }
    }
}

/// `MPI_WIN_MODEL`, chosen when the window is created (MPI leaves the choice to the
/// implementation; onesided offers both, docs/memory-models.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum MemoryModel {
    /// `MPI_WIN_SEPARATE` (the default): a rank's stores reach its public copy, and remote
    /// updates its private copy, only at its synchronization calls (rules 5 and 6).
    #[default]
    Separate,
    /// `MPI_WIN_UNIFIED`: the owner's stores are published as they happen, and every change
    /// to its public copy is sent to it as it happens; neither waits for a synchronization
    /// call.
    Unified,
}

impl MemoryModel {
    /// Scenario/CLI name.
    pub fn name(self) -> &'static str {
        match self {
            MemoryModel::Separate => "separate",
            MemoryModel::Unified => "unified",
        }
    }

    /// Parses a name.
    pub fn parse(text: &str) -> Option<Self> {
        match text.to_ascii_lowercase().as_str() {
            "separate" => Some(MemoryModel::Separate),
            "unified" => Some(MemoryModel::Unified),
            _ => None,
        }
    }
}

/// Largest window a rank may expose, in bytes (a guard against absurd requests).
pub const MAX_WINDOW_BYTES: u64 = 1 << 34;

/// The address of byte 0 of a dynamic window's memory at each rank: a region attached at
/// offset `o` of the rank's memory (one growing byte vector, never reused) has the address
/// `DYNAMIC_BASE + o`. Nonzero, so that address 0 is never valid.
pub const DYNAMIC_BASE: u64 = 1 << 12;

/// The offsets of a dynamic window's memory an access at the absolute addresses `access`
/// touches: each run moved down by [`DYNAMIC_BASE`].
///
/// # Errors
/// `MPI_ERR_RMA_RANGE` when a run starts below [`DYNAMIC_BASE`] (no region is there).
pub fn dynamic_offsets(access: TargetAccess) -> RmaResult<TargetAccess> {
    let runs = access
        .runs
        .into_iter()
        .map(|run| {
            run.offset
                .checked_sub(DYNAMIC_BASE)
                .map(|offset| Run {
                    offset,
                    len: run.len,
                })
                .ok_or_else(|| {
                    rma_err!(
                        RmaRange,
                        "address {:#x} is not in a region attached to the dynamic window",
                        run.offset
                    )
                })
        })
        .collect::<RmaResult<Vec<Run>>>()?;
    Ok(TargetAccess {
        runs,
        bytes: access.bytes,
    })
}

/// Everything every rank knows about a window from its creation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowDesc {
    /// Server-assigned id.
    pub id: u64,
    /// Name, unique within the world.
    pub name: String,
    /// The world the window spans.
    pub world: String,
    /// How the memory came to be.
    pub flavor: Flavor,
    /// The memory model.
    pub model: MemoryModel,
    /// Each rank's size in bytes.
    pub sizes: Vec<u64>,
    /// Each rank's disp_unit in bytes.
    pub disp_units: Vec<u32>,
    /// Info keys in use.
    pub info: WindowInfo,
    /// The window's group: the world rank of each window rank (`MPI_Win_get_group`). Ranks
    /// are numbered in the group, as MPI numbers them: window rank `r` is world rank
    /// `group[r]`. A window over its whole world has `0..n`.
    pub group: Vec<u32>,
}

impl WindowDesc {
    /// A window created (`MPI_Win_create`) over the whole world of `sizes.len()` ranks, of
    /// the separate model and default info.
    pub fn created(id: u64, name: &str, sizes: Vec<u64>, disp_units: Vec<u32>) -> WindowDesc {
        WindowDesc {
            id,
            name: name.to_string(),
            world: name.to_string(),
            flavor: Flavor::Create,
            model: MemoryModel::Separate,
            group: WindowDesc::whole_world(sizes.len() as u32),
            sizes,
            disp_units,
            info: WindowInfo::default(),
        }
    }

    /// Number of ranks.
    pub fn nranks(&self) -> u32 {
        self.sizes.len() as u32
    }

    /// The window rank of world rank `world_rank`, if it is in the window's group.
    pub fn rank_of(&self, world_rank: u32) -> Option<u32> {
        self.group
            .iter()
            .position(|&member| member == world_rank)
            .map(|rank| rank as u32)
    }

    /// The window rank of world rank `world_rank`, which opens the window.
    ///
    /// # Errors
    /// `MPI_ERR_GROUP` when it is not in the window's group: it may not open the window.
    pub fn member(&self, world_rank: u32) -> RmaResult<u32> {
        self.rank_of(world_rank).ok_or_else(|| {
            rma_err!(
                Group,
                "rank {world_rank} of the world is not in the group of window {} (world ranks \
                 {:?})",
                self.name,
                self.group
            )
        })
    }

    /// The group of a window over the whole world of `nranks` ranks.
    pub fn whole_world(nranks: u32) -> Vec<u32> {
        (0..nranks).collect()
    }

    /// Checks a window's group in a world of `world_ranks` ranks: `None` is the whole world;
    /// otherwise distinct world ranks, at least one. Returns the group.
    ///
    /// # Errors
    /// `MPI_ERR_GROUP` for an empty group, a repeated rank or one outside the world.
    pub fn validate_group(world_ranks: u32, group: Option<&[u32]>) -> RmaResult<Vec<u32>> {
        let Some(group) = group else {
            return Ok(Self::whole_world(world_ranks));
        };
        if group.is_empty() {
            return Err(rma_err!(Group, "a window's group needs at least one rank"));
        }
        if let Some(&outside) = group.iter().find(|&&rank| rank >= world_ranks) {
            return Err(rma_err!(
                Group,
                "rank {outside} of the group is outside the world of {world_ranks} ranks"
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(&twice) = group.iter().find(|&&rank| !seen.insert(rank)) {
            return Err(rma_err!(Group, "rank {twice} is twice in the group"));
        }
        Ok(group.to_vec())
    }

    /// Checks what a window's flavor asks of its shape: a dynamic window
    /// (`MPI_Win_create_dynamic`, which takes neither) has no memory at creation — every size
    /// 0 — and disp_unit 1, since its displacements are addresses. Another disp_unit is
    /// refused rather than replaced, so a window never has other units than were asked for.
    ///
    /// # Errors
    /// `MPI_ERR_SIZE` for a dynamic window with a nonzero size, `MPI_ERR_DISP` for one with a
    /// disp_unit other than 1.
    pub fn validate_flavor(flavor: Flavor, sizes: &[u64], disp_units: &[u32]) -> RmaResult<()> {
        for (rank, (&size, &unit)) in sizes.iter().zip(disp_units).enumerate() {
            Self::validate_flavor_part(flavor, rank as u32, size, unit)?;
        }
        Ok(())
    }

    /// [`WindowDesc::validate_flavor`] of one rank's part (`rank` names it in the message):
    /// what a rank's own `MPI_Win_create`/`MPI_Win_allocate` call can be refused for at once.
    ///
    /// # Errors
    /// As [`WindowDesc::validate_flavor`].
    pub fn validate_flavor_part(flavor: Flavor, rank: u32, size: u64, unit: u32) -> RmaResult<()> {
        if flavor != Flavor::Dynamic {
            return Ok(());
        }
        if size != 0 {
            return Err(rma_err!(
                Size,
                "rank {rank} asks for {size} bytes of a dynamic window: it has no memory at \
                 creation (its ranks attach regions), so every size is 0"
            ));
        }
        if unit != 1 {
            return Err(rma_err!(
                Disp,
                "rank {rank} gives disp_unit {unit} for a dynamic window: its displacements \
                 are addresses, so every disp_unit is 1"
            ));
        }
        Ok(())
    }

    /// Checks a window request: one size and disp_unit per rank of a world of `nranks`.
    ///
    /// # Errors
    /// `MPI_ERR_SIZE` for a missing or absurd size, `MPI_ERR_DISP` for a zero disp_unit.
    pub fn validate_shape(nranks: u32, sizes: &[u64], disp_units: &[u32]) -> RmaResult<()> {
        if sizes.len() != nranks as usize {
            return Err(rma_err!(
                Size,
                "{} sizes given for a window of {nranks} ranks",
                sizes.len()
            ));
        }
        if disp_units.len() != nranks as usize {
            return Err(rma_err!(
                Disp,
                "{} disp_units given for a window of {nranks} ranks",
                disp_units.len()
            ));
        }
        if let Some((rank, size)) = sizes
            .iter()
            .enumerate()
            .find(|(_, &size)| size > MAX_WINDOW_BYTES)
        {
            return Err(rma_err!(
                Size,
                "rank {rank} asks for {size} bytes, more than the {MAX_WINDOW_BYTES} a window may have"
            ));
        }
        if let Some(rank) = disp_units.iter().position(|&unit| unit == 0) {
            return Err(rma_err!(Disp, "disp_unit of rank {rank} must be positive"));
        }
        Ok(())
    }
}

/// What an operation does at its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// `MPI_PUT`.
    Put,
    /// `MPI_GET`.
    Get,
    /// `MPI_ACCUMULATE` with an op.
    Accumulate(Op),
    /// `MPI_GET_ACCUMULATE` with an op (NO_OP allowed).
    GetAccumulate(Op),
    /// `MPI_FETCH_AND_OP` with an op (NO_OP allowed).
    FetchAndOp(Op),
    /// `MPI_COMPARE_AND_SWAP`.
    CompareAndSwap,
}

impl OpKind {
    /// The MPI-ish call name.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Put => "put",
            OpKind::Get => "get",
            OpKind::Accumulate(_) => "accumulate",
            OpKind::GetAccumulate(_) => "get_accumulate",
            OpKind::FetchAndOp(_) => "fetch_and_op",
            OpKind::CompareAndSwap => "compare_and_swap",
        }
    }

    /// Whether the operation writes the target.
    pub fn writes(self) -> bool {
        match self {
            OpKind::Get => false,
            OpKind::GetAccumulate(op) | OpKind::FetchAndOp(op) => op != Op::NoOp,
            _ => true,
        }
    }

    /// For the accumulate family (atomic reads included), whether it reads the target and
    /// whether it writes it, as `accumulate_ordering` sees it; `None` for put and get, which
    /// no ordering covers.
    pub fn accumulate_access(self) -> Option<(bool, bool)> {
        match self {
            OpKind::Put | OpKind::Get => None,
            OpKind::Accumulate(_) => Some((false, true)),
            OpKind::GetAccumulate(op) | OpKind::FetchAndOp(op) => Some((true, op != Op::NoOp)),
            OpKind::CompareAndSwap => Some((true, true)),
        }
    }

    /// Whether the origin receives data back.
    pub fn returns_data(self) -> bool {
        !matches!(self, OpKind::Put | OpKind::Accumulate(_))
    }

    /// Whether the operation carries origin data.
    pub fn carries_data(self) -> bool {
        match self {
            OpKind::Get => false,
            OpKind::GetAccumulate(op) | OpKind::FetchAndOp(op) => op != Op::NoOp,
            _ => true,
        }
    }
}

/// One operation as it reaches its target: the target layout in elements of `dtype`, at
/// displacement `disp` (in the target's disp_units), with packed origin data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetOp<D> {
    /// What to do.
    pub kind: OpKind,
    /// The basic datatype every element has; a struct layout's blocks carry their own (a put
    /// or get moves their bytes, an accumulate needs them all to be this one).
    pub dtype: Datatype,
    /// Displacement in the target's disp_units.
    pub disp: u64,
    /// Target layout, in elements of `dtype`.
    pub layout: Layout,
    /// Packed origin data (empty for get and NO_OP).
    pub data: D,
    /// Packed compare value (compare_and_swap only).
    pub compare: D,
}

/// One wire operation of a call split by [`TargetOp::pieces`]: its own displacement and
/// contiguous count, and the bytes of the call's origin data it carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    /// Displacement in the target's disp_units.
    pub disp: u64,
    /// Elements of the call's datatype.
    pub count: u64,
    /// Its share of the call's origin data (empty for a get).
    pub data: std::ops::Range<usize>,
}

/// A validated operation's target byte runs, absolute in the target's window.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetAccess {
    /// Absolute byte runs, in type-map order.
    pub runs: Vec<Run>,
    /// Total bytes the runs cover.
    pub bytes: u64,
}

impl<D: Default> TargetOp<D> {
    /// `count` contiguous elements of `dtype` at `disp`, carrying `data` (no compare value).
    pub fn contiguous(kind: OpKind, dtype: Datatype, disp: u64, count: u64, data: D) -> Self {
        TargetOp {
            kind,
            dtype,
            disp,
            layout: Layout::Contiguous { count },
            data,
            compare: D::default(),
        }
    }
}

impl<D: AsRef<[u8]>> TargetOp<D> {
    /// How a contiguous put, get or accumulate travels as operations of at most `max_bytes`
    /// each, every piece starting on an element and a `disp_unit` boundary; `None` when it
    /// travels whole (another kind or layout, or it fits). MPI gives these operations no
    /// atomicity beyond one element, so the pieces, applied in order, mean the call.
    pub fn pieces(&self, disp_unit: u32, max_bytes: u64) -> Option<Vec<Piece>> {
        let splittable = matches!(self.kind, OpKind::Put | OpKind::Get | OpKind::Accumulate(_));
        let Layout::Contiguous { count } = self.layout else {
            return None;
        };
        let element = self.dtype.size() as u64;
        let unit = u64::from(disp_unit.max(1));
        // a piece's first byte is a whole number of elements and of units in
        let step = lcm(element, unit);
        let per_piece = max_bytes / step * step / element;
        if !splittable || per_piece == 0 || count <= per_piece {
            return None;
        }
        let carries_data = !self.data.as_ref().is_empty();
        let mut pieces = Vec::new();
        let mut first = 0;
        while first < count {
            let elements = per_piece.min(count - first);
            let start = (first * element) as usize;
            let end = start + (elements * element) as usize;
            pieces.push(Piece {
                disp: self.disp + first * element / unit,
                count: elements,
                data: if carries_data { start..end } else { 0..0 },
            });
            first += elements;
        }
        Some(pieces)
    }

    /// Checks the operation against the target's size and disp_unit and returns the byte runs
    /// it touches. The origin and the server both call this: the origin to refuse a bad call at
    /// once, the server so that no bad request reaches a public copy.
    ///
    /// # Errors
    /// `MPI_ERR_OP` / `MPI_ERR_TYPE` for an op or datatype the call does not take,
    /// `MPI_ERR_TYPE` for an accumulate-like call whose layout is a struct with a block of
    /// another datatype, `MPI_ERR_COUNT` when data and layout disagree, `MPI_ERR_RMA_RANGE` when the target range
    /// is not inside the window.
    pub fn validate(&self, target_size: u64, disp_unit: u32) -> RmaResult<TargetAccess> {
        self.check_kind()?;
        let size = self.dtype.size() as u64;
        let count = self.layout.element_count()?;
        match self.kind {
            OpKind::FetchAndOp(_) | OpKind::CompareAndSwap if count != 1 => {
                return Err(rma_err!(
                    Count,
                    "{} takes exactly one element, not {count}",
                    self.kind.name()
                ));
            }
            _ => {}
        }
        if !matches!(self.kind, OpKind::Put | OpKind::Get) {
            // MPI: every basic component of an accumulate's datatypes is the op's datatype
            self.layout.check_elements_are(self.dtype)?;
        }
        let expected_data = if self.kind.carries_data() {
            self.layout.total_bytes(size).ok()
        } else {
            Some(0)
        };
        let data_len = self.data.as_ref().len() as u64;
        if expected_data != Some(data_len) {
            return Err(rma_err!(
                Count,
                "{} carries {data_len} bytes of origin data, the layout needs {}",
                self.kind.name(),
                expected_data.map_or_else(|| "more".to_string(), |n| n.to_string())
            ));
        }
        let compare_len = self.compare.as_ref().len() as u64;
        let expected_compare = if self.kind == OpKind::CompareAndSwap {
            size
        } else {
            0
        };
        if compare_len != expected_compare {
            return Err(rma_err!(
                Count,
                "{} carries a compare value of {compare_len} bytes, expected {expected_compare}",
                self.kind.name()
            ));
        }
        // one walk of the layout: the overlap check and the extent read its runs
        let relative = self.layout.flatten(size)?;
        if self.kind.writes() {
            crate::layout::check_disjoint(&relative)?;
        }
        let extent = crate::layout::runs_extent(&relative);
        let bytes: u64 = relative.iter().map(|run| run.len).sum();
        if bytes == 0 {
            return Ok(TargetAccess {
                runs: Vec::new(),
                bytes: 0,
            });
        }
        let base = self
            .disp
            .checked_mul(u64::from(disp_unit))
            .ok_or_else(|| out_of_range(self.disp, disp_unit, extent, target_size))?;
        let end = base
            .checked_add(extent)
            .ok_or_else(|| out_of_range(self.disp, disp_unit, extent, target_size))?;
        if end > target_size {
            return Err(out_of_range(self.disp, disp_unit, extent, target_size));
        }
        let runs = relative
            .into_iter()
            .map(|run| Run {
                offset: base + run.offset,
                len: run.len,
            })
            .collect();
        Ok(TargetAccess { runs, bytes })
    }

    fn check_kind(&self) -> RmaResult<()> {
        match self.kind {
            OpKind::Put | OpKind::Get => Ok(()),
            OpKind::Accumulate(Op::NoOp) => Err(rma_err!(
                Op,
                "no_op is not allowed in accumulate, only in get_accumulate and fetch_and_op"
            )),
            OpKind::Accumulate(op) | OpKind::GetAccumulate(op) | OpKind::FetchAndOp(op) => {
                reduce::check_op(op, self.dtype)
            }
            OpKind::CompareAndSwap => {
                if self.dtype.is_integer() || self.dtype.is_byte() || self.dtype.is_bool() {
                    Ok(())
                } else {
                    Err(rma_err!(
                        Type,
                        "compare_and_swap is not defined for datatype {}",
                        self.dtype
                    ))
                }
            }
        }
    }
}

fn out_of_range(
    disp: u64,
    disp_unit: u32,
    extent: u64,
    target_size: u64,
) -> crate::error::RmaError {
    rma_err!(
        RmaRange,
        "access of {extent} bytes at displacement {disp} (disp_unit {disp_unit}) is outside the target window of {target_size} bytes"
    )
}

/// Applies a validated operation to a public copy and returns what goes back to the origin
/// (the old contents for get-like operations, nothing otherwise). Each element is updated
/// atomically with respect to every other operation because the caller (the rank's actor)
/// applies one operation at a time.
///
/// # Errors
/// Only for inputs [`TargetOp::validate`] would have refused; the public copy is then unchanged.
pub fn apply<D: AsRef<[u8]>>(
    public: &mut [u8],
    access: &TargetAccess,
    op: &TargetOp<D>,
) -> RmaResult<Vec<u8>> {
    if let Some(run) = access
        .runs
        .iter()
        .find(|run| run.offset.saturating_add(run.len) > public.len() as u64)
    {
        return Err(rma_err!(
            RmaRange,
            "run at {} of {} bytes is outside a public copy of {} bytes",
            run.offset,
            run.len,
            public.len()
        ));
    }
    let data = op.data.as_ref();
    let mut result = Vec::new();
    if op.kind.returns_data() {
        result.reserve(access.bytes as usize);
        for run in &access.runs {
            let start = run.offset as usize;
            result.extend_from_slice(&public[start..start + run.len as usize]);
        }
    }
    match op.kind {
        OpKind::Get => {}
        OpKind::CompareAndSwap => {
            let run = access
                .runs
                .first()
                .copied()
                .unwrap_or(Run { offset: 0, len: 0 });
            let start = run.offset as usize;
            let element = &mut public[start..start + run.len as usize];
            reduce::compare_and_swap(op.dtype, element, op.compare.as_ref(), data)?;
        }
        OpKind::Put => {
            let mut consumed = 0usize;
            for run in &access.runs {
                let start = run.offset as usize;
                let len = run.len as usize;
                public[start..start + len].copy_from_slice(&data[consumed..consumed + len]);
                consumed += len;
            }
        }
        OpKind::Accumulate(reduction)
        | OpKind::GetAccumulate(reduction)
        | OpKind::FetchAndOp(reduction) => {
            if reduction != Op::NoOp {
                let mut consumed = 0usize;
                for run in &access.runs {
                    let start = run.offset as usize;
                    let len = run.len as usize;
                    reduce::reduce(
                        reduction,
                        op.dtype,
                        &mut public[start..start + len],
                        &data[consumed..consumed + len],
                    )?;
                    consumed += len;
                }
            }
        }
    }
    Ok(result)
}

/// The [`ErrorClass`] a refused window request maps to when the window is unknown.
pub fn unknown_window(name: &str) -> crate::error::RmaError {
    crate::error::RmaError::new(ErrorClass::Win, format!("no window named {}", quoted(name)))
}

fn lcm(a: u64, b: u64) -> u64 {
    let (mut x, mut y) = (a, b);
    while y != 0 {
        (x, y) = (y, x % y);
    }
    a / x * b
}

#[cfg(test)]
mod pieces {
    use super::*;
    use proptest::prelude::*;

    fn put(dtype: Datatype, disp: u64, count: u64) -> TargetOp<Vec<u8>> {
        TargetOp {
            kind: OpKind::Put,
            dtype,
            disp,
            layout: Layout::Contiguous { count },
            data: (0..count as usize * dtype.size())
                .map(|i| i as u8)
                .collect(),
            compare: Vec::new(),
        }
    }

    proptest! {
        #[test]
        fn pieces_cover_the_call_in_order_on_element_and_unit_boundaries(
            disp in 0u64..50,
            count in 1u64..5000,
            unit in 1u32..12,
            max_bytes in 1u64..4096,
            wide in any::<bool>(),
        ) {
            let dtype = if wide { Datatype::F64 } else { Datatype::I16 };
            let op = put(dtype, disp, count);
            let element = dtype.size() as u64;
            let Some(pieces) = op.pieces(unit, max_bytes) else {
                return Ok(());
            };
            prop_assert!(pieces.len() > 1);
            let mut next_byte = disp * u64::from(unit);
            let mut next_data = 0;
            for piece in &pieces {
                // each piece targets exactly the bytes after the previous one
                prop_assert_eq!(piece.disp * u64::from(unit), next_byte);
                prop_assert_eq!(piece.data.start, next_data);
                prop_assert_eq!((piece.data.end - piece.data.start) as u64, piece.count * element);
                prop_assert!(piece.count * element <= max_bytes);
                next_byte += piece.count * element;
                next_data = piece.data.end;
            }
            prop_assert_eq!(next_data, op.data.len());
        }
    }

    #[test]
    fn only_large_contiguous_puts_gets_and_accumulates_split() {
        assert_eq!(put(Datatype::I64, 0, 4).pieces(1, 32), None, "it fits");
        assert_eq!(
            put(Datatype::I64, 0, 5).pieces(1, 32).map(|p| p.len()),
            Some(2)
        );
        let get = TargetOp {
            kind: OpKind::Get,
            data: Vec::new(),
            ..put(Datatype::I64, 0, 5)
        };
        let pieces = get.pieces(1, 32).unwrap();
        assert!(pieces.iter().all(|piece| piece.data.is_empty()));
        let fop = TargetOp {
            kind: OpKind::GetAccumulate(Op::Sum),
            ..put(Datatype::I64, 0, 5)
        };
        assert_eq!(
            fop.pieces(1, 32),
            None,
            "get_accumulate returns the old values whole"
        );
        let vector = TargetOp {
            layout: Layout::Vector {
                count: 5,
                blocklen: 1,
                stride: 2,
            },
            ..put(Datatype::I64, 0, 5)
        };
        assert_eq!(vector.pieces(1, 32), None);
        // 8-byte elements, 3-byte units: a piece starts every 24 bytes
        assert_eq!(
            put(Datatype::I64, 0, 4).pieces(3, 20),
            None,
            "no 24-byte step fits"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_window_has_no_size_and_disp_unit_1() {
        let class = |result: RmaResult<()>| result.unwrap_err().class;
        WindowDesc::validate_flavor(Flavor::Dynamic, &[0, 0], &[1, 1]).unwrap();
        WindowDesc::validate_flavor(Flavor::Allocate, &[8, 0], &[8, 1]).unwrap();
        let sized = WindowDesc::validate_flavor(Flavor::Dynamic, &[0, 8], &[1, 1]);
        assert_eq!(class(sized), ErrorClass::Size);
        let unit = WindowDesc::validate_flavor(Flavor::Dynamic, &[0, 0], &[1, 8]);
        assert_eq!(class(unit), ErrorClass::Disp);
        let part = WindowDesc::validate_flavor_part(Flavor::Dynamic, 3, 16, 1).unwrap_err();
        assert!(
            part.message.starts_with("rank 3 asks for 16 bytes"),
            "{part}"
        );
    }

    fn op(
        kind: OpKind,
        dtype: Datatype,
        disp: u64,
        count: u64,
        data: Vec<u8>,
    ) -> TargetOp<Vec<u8>> {
        TargetOp::contiguous(kind, dtype, disp, count, data)
    }

    #[test]
    fn put_then_accumulate_then_get() {
        let mut public = vec![0u8; 16];
        let put = op(
            OpKind::Put,
            Datatype::I64,
            1,
            1,
            5i64.to_le_bytes().to_vec(),
        );
        let access = put.validate(16, 8).unwrap();
        apply(&mut public, &access, &put).unwrap();
        let acc = op(
            OpKind::Accumulate(Op::Sum),
            Datatype::I64,
            1,
            1,
            7i64.to_le_bytes().to_vec(),
        );
        let access = acc.validate(16, 8).unwrap();
        assert!(apply(&mut public, &access, &acc).unwrap().is_empty());
        let get = op(OpKind::Get, Datatype::I64, 0, 2, Vec::new());
        let access = get.validate(16, 8).unwrap();
        let result = apply(&mut public, &access, &get).unwrap();
        assert_eq!(&result[8..], &12i64.to_le_bytes());
        assert_eq!(&result[..8], &0i64.to_le_bytes());
    }

    #[test]
    fn range_is_checked_against_size_and_disp_unit() {
        let get = op(OpKind::Get, Datatype::I32, 2, 1, Vec::new());
        assert!(get.validate(12, 4).is_ok());
        assert_eq!(get.validate(11, 4).unwrap_err().class, ErrorClass::RmaRange);
        let overflowing = op(OpKind::Get, Datatype::I32, u64::MAX / 2, 1, Vec::new());
        assert_eq!(
            overflowing.validate(16, 4).unwrap_err().class,
            ErrorClass::RmaRange
        );
    }

    #[test]
    fn zero_size_transfers_succeed_anywhere() {
        let get = op(OpKind::Get, Datatype::I32, 1000, 0, Vec::new());
        assert!(get.validate(0, 4).unwrap().runs.is_empty());
    }

    #[test]
    fn classes_of_refused_kinds() {
        let acc = op(
            OpKind::Accumulate(Op::NoOp),
            Datatype::I32,
            0,
            1,
            vec![0; 4],
        );
        assert_eq!(acc.validate(4, 4).unwrap_err().class, ErrorClass::Op);
        let band = op(
            OpKind::Accumulate(Op::Band),
            Datatype::F64,
            0,
            1,
            vec![0; 8],
        );
        assert_eq!(band.validate(8, 8).unwrap_err().class, ErrorClass::Op);
        let mut cas = op(OpKind::CompareAndSwap, Datatype::F32, 0, 1, vec![0; 4]);
        cas.compare = vec![0; 4];
        assert_eq!(cas.validate(4, 4).unwrap_err().class, ErrorClass::Type);
        let short = op(OpKind::Put, Datatype::I32, 0, 2, vec![0; 4]);
        assert_eq!(short.validate(8, 4).unwrap_err().class, ErrorClass::Count);
    }

    #[test]
    fn struct_puts_move_bytes_and_accumulates_need_one_datatype() {
        use crate::layout::StructBlock;
        let mixed = Layout::Struct {
            blocks: vec![
                StructBlock {
                    offset: 0,
                    dtype: Datatype::I32,
                    len: 1,
                },
                StructBlock {
                    offset: 8,
                    dtype: Datatype::F64,
                    len: 1,
                },
            ],
        };
        let mut public = vec![0u8; 16];
        let mut data = 7i32.to_le_bytes().to_vec();
        data.extend_from_slice(&2.5f64.to_le_bytes());
        // a put's datatype does not size a struct: its 12 bytes go where the blocks say
        let put = TargetOp {
            kind: OpKind::Put,
            dtype: Datatype::Byte,
            disp: 0,
            layout: mixed.clone(),
            data: data.clone(),
            compare: Vec::new(),
        };
        let access = put.validate(16, 1).unwrap();
        assert_eq!(access.bytes, 12);
        apply(&mut public, &access, &put).unwrap();
        assert_eq!(&public[..4], &7i32.to_le_bytes());
        assert_eq!(&public[8..], &2.5f64.to_le_bytes());
        let get = TargetOp {
            kind: OpKind::Get,
            data: Vec::new(),
            ..put.clone()
        };
        let access = get.validate(16, 1).unwrap();
        assert_eq!(apply(&mut public, &access, &get).unwrap(), data);
        // an accumulate of mixed components is MPI_ERR_TYPE, whichever datatype it names
        for (kind, dtype) in [
            (OpKind::Accumulate(Op::Sum), Datatype::F64),
            (OpKind::Accumulate(Op::Replace), Datatype::I32),
            (OpKind::GetAccumulate(Op::NoOp), Datatype::F64),
        ] {
            let acc = TargetOp {
                kind,
                dtype,
                data: if kind.carries_data() {
                    data.clone()
                } else {
                    Vec::new()
                },
                ..put.clone()
            };
            assert_eq!(acc.validate(16, 1).unwrap_err().class, ErrorClass::Type);
        }
        let fop = TargetOp {
            kind: OpKind::FetchAndOp(Op::Sum),
            dtype: Datatype::F64,
            layout: Layout::Struct {
                blocks: vec![StructBlock {
                    offset: 8,
                    dtype: Datatype::I64,
                    len: 1,
                }],
            },
            data: vec![0; 8],
            ..put.clone()
        };
        assert_eq!(fop.validate(16, 1).unwrap_err().class, ErrorClass::Type);
        // one datatype throughout: an accumulate like any other
        let same = Layout::Struct {
            blocks: vec![
                StructBlock {
                    offset: 8,
                    dtype: Datatype::F64,
                    len: 1,
                },
                StructBlock {
                    offset: 0,
                    dtype: Datatype::F64,
                    len: 1,
                },
            ],
        };
        let mut public = vec![0u8; 16];
        public[..8].copy_from_slice(&1.0f64.to_le_bytes());
        let mut data = 10.0f64.to_le_bytes().to_vec();
        data.extend_from_slice(&20.0f64.to_le_bytes());
        let acc = TargetOp {
            kind: OpKind::Accumulate(Op::Sum),
            dtype: Datatype::F64,
            layout: same,
            data,
            ..put
        };
        let access = acc.validate(16, 1).unwrap();
        apply(&mut public, &access, &acc).unwrap();
        assert_eq!(&public[..8], &21.0f64.to_le_bytes());
        assert_eq!(&public[8..], &10.0f64.to_le_bytes());
    }

    #[test]
    fn compare_and_swap_returns_the_old_value() {
        let mut public = 3i32.to_le_bytes().to_vec();
        let mut cas = op(
            OpKind::CompareAndSwap,
            Datatype::I32,
            0,
            1,
            9i32.to_le_bytes().to_vec(),
        );
        cas.compare = 3i32.to_le_bytes().to_vec();
        let access = cas.validate(4, 4).unwrap();
        assert_eq!(
            apply(&mut public, &access, &cas).unwrap(),
            3i32.to_le_bytes()
        );
        assert_eq!(public, 9i32.to_le_bytes());
        assert_eq!(
            apply(&mut public, &access, &cas).unwrap(),
            9i32.to_le_bytes()
        );
        assert_eq!(public, 9i32.to_le_bytes());
    }

    #[test]
    fn the_element_type_key_round_trips_and_refuses_unknown_types() {
        let info = WindowInfo::parse([(ELEMENT_TYPE_KEY, "i64")]).unwrap();
        assert_eq!(info.element_type, Some(Datatype::I64));
        let pairs = info.to_pairs();
        assert!(pairs.contains(&(ELEMENT_TYPE_KEY.to_string(), "i64".to_string())));
        let again = WindowInfo::parse(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        assert_eq!(again.unwrap(), info);
        let error = WindowInfo::parse([(ELEMENT_TYPE_KEY, "i65")]).unwrap_err();
        assert_eq!(error.class, ErrorClass::Info);
        assert!(error.message.contains("\"i65\""), "{}", error.message);
        assert!(!WindowInfo::default()
            .to_pairs()
            .iter()
            .any(|(key, _)| key == ELEMENT_TYPE_KEY));
    }

    #[test]
    fn info_defaults_and_bad_values() {
        let info = WindowInfo::parse([]).unwrap();
        assert_eq!(info, WindowInfo::default());
        let pairs = info.to_pairs();
        assert!(pairs.contains(&("accumulate_ordering".into(), "rar,raw,war,waw".into())));
        let info =
            WindowInfo::parse([("no_locks", "true"), ("accumulate_ordering", "none")]).unwrap();
        assert!(info.no_locks);
        assert!(!info.accumulate_ordering.any());
        let err = WindowInfo::parse([("accumulate_ops", "any")]).unwrap_err();
        assert_eq!(err.class, ErrorClass::Info);
    }

    #[test]
    fn same_size_and_same_disp_unit_refuse_shapes_that_break_them() {
        let info = |pairs: &[(&'static str, &'static str)]| {
            WindowInfo::parse(pairs.iter().copied()).unwrap()
        };
        let same_size = info(&[("same_size", "true")]);
        assert!(same_size.check_shape(&[8, 8, 8], &[1, 4, 8]).is_ok());
        let err = same_size.check_shape(&[8, 8, 16], &[1, 1, 1]).unwrap_err();
        assert_eq!(err.class, ErrorClass::Info);
        assert!(
            err.message.contains("rank 2 has size 16"),
            "{}",
            err.message
        );
        let same_disp = info(&[("same_disp_unit", "true")]);
        assert!(same_disp.check_shape(&[8, 16], &[4, 4]).is_ok());
        let err = same_disp.check_shape(&[8, 8], &[4, 8]).unwrap_err();
        assert_eq!(err.class, ErrorClass::Info);
        assert!(err.message.contains("same_disp_unit"), "{}", err.message);
        // without the keys (or with them false) any shape goes
        assert!(info(&[]).check_shape(&[1, 2], &[1, 8]).is_ok());
        assert!(info(&[("same_size", "false")])
            .check_shape(&[1, 2], &[1, 1])
            .is_ok());
    }

    #[test]
    fn set_info_changes_what_a_window_may_change_and_keeps_the_rest() {
        let created = WindowInfo::parse([
            ("no_locks", "true"),
            ("accumulate_ops", "same_op"),
            ("kept", "as given"),
        ])
        .unwrap();
        let next = created
            .updated([
                ("accumulate_ops", "same_op_no_op"),
                ("accumulate_ordering", "none"),
                ("mpi_accumulate_granularity", "128"),
                ("no_locks", "false"),
                ("new_hint", "x"),
            ])
            .unwrap();
        assert_eq!(next.accumulate_ops, AccumulateOps::SameOpNoOp);
        assert!(!next.accumulate_ordering.any());
        assert_eq!(next.accumulate_granularity, 128);
        // a creation hint is checked, then ignored
        assert!(next.no_locks);
        assert_eq!(next.kept.get("kept").map(String::as_str), Some("as given"));
        assert_eq!(next.kept.get("new_hint").map(String::as_str), Some("x"));
        // an empty update changes nothing; a bad value changes nothing either
        assert_eq!(created.updated([]).unwrap(), created);
        let refused = created.updated([("no_locks", "maybe")]).unwrap_err();
        assert_eq!(refused.class, ErrorClass::Info);
    }
}
