//! The parsed form of a scenario: windows, per-rank calls in file order, barriers, and
//! expectations. Plain data; [`mod@super::parse`] builds it and [`mod@super::run`] executes it.
//!
//! Owns: the shape of a parsed scenario — window declarations (flavor, model, group, info),
//! locations and origin layouts, every call with its arguments and expected error class, steps
//! in file order, and expectations with what they observe. Must not: parse text, check
//! anything, or run anything: it is built already checked and read by the runner.

use onesided_core::datatype::Value;
use onesided_core::epoch::LockType;
use onesided_core::layout::Layout;
use onesided_core::{Datatype, ErrorClass, Op};

/// A whole `.rma` file.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// The world size (`ranks=` of the first window).
    pub ranks: u32,
    /// The declared windows, in file order; [`Loc::window`] and the `window` fields of calls
    /// index into it.
    pub windows: Vec<WindowDecl>,
    /// Rank calls and barriers in file order.
    pub steps: Vec<Step>,
    /// The expectations, checked after every rank finished.
    pub expectations: Vec<Expectation>,
}

/// The memory model a window asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// `model=separate` (the default).
    Separate,
    /// `model=unified`: the public and private copies are one (MPI-3.1 §11.4).
    Unified,
}

/// The flavor a window asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlavorDecl {
    /// `flavor=create`.
    Create,
    /// `flavor=allocate` (the default).
    Allocate,
    /// `flavor=dynamic` (`MPI_Win_create_dynamic`): no memory at creation; ranks attach
    /// regions ([`Call::AttachRegion`]) and locations name them ([`Loc::region`]).
    Dynamic,
}

/// `window NAME ranks=N size=S type=T …`.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowDecl {
    /// The name in the file (the run creates it under a unique name).
    pub name: String,
    /// The line it was declared on.
    pub line: usize,
    /// The element type; disp_unit is its size.
    pub dtype: Datatype,
    /// Elements per rank.
    pub sizes: Vec<u64>,
    /// `model=`.
    pub model: Model,
    /// `flavor=`.
    pub flavor: FlavorDecl,
    /// `info KEY=VAL …`, in order.
    pub info: Vec<(String, String)>,
    /// `by=ranks`: the ranks create the window themselves, collectively
    /// (`Session::create_window`), instead of the admin (`by=admin`, the default).
    pub by_ranks: bool,
    /// `group={A,C}`: the world ranks the window spans, window rank `r` being `group[r]`;
    /// `None`: every rank of the world. `sizes` has one entry per member.
    pub group: Option<Vec<u32>>,
}

/// The elements a location covers, starting at [`Loc::index`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shape {
    /// `NAME[i]`: one element; a variable read from it holds a scalar.
    Single,
    /// `NAME[i..j]`: `count` consecutive elements.
    Range {
        /// Number of elements.
        count: u64,
    },
    /// `NAME[i..j:s]`: `count` elements `stride` apart (a vector layout).
    Strided {
        /// Number of elements.
        count: u64,
        /// Distance between consecutive elements, in elements.
        stride: u64,
    },
    /// `NAME[KIND:ARGS]` or `NAME[KIND:ARGS@i]`: a derived-datatype layout (vector, indexed,
    /// hvector, hindexed, subarray, resized, struct) whose elements, in type-map order, form a
    /// list (a struct's are its bytes read as elements of the window's type).
    Layout {
        /// The layout, relative to [`Loc::index`] (boxed: calls carry locations, and the
        /// common ones stay small).
        layout: Box<Layout>,
        /// Its number of elements of the window's type (checked when parsed).
        count: u64,
    },
}

impl Shape {
    /// Number of elements.
    pub fn count(&self) -> u64 {
        match self {
            Shape::Single => 1,
            Shape::Range { count } | Shape::Strided { count, .. } | Shape::Layout { count, .. } => {
                *count
            }
        }
    }

    /// Whether values read from it form a list.
    pub fn is_list(&self) -> bool {
        !matches!(self, Shape::Single)
    }

    /// The layout of its elements, relative to the first.
    pub fn layout(&self) -> Layout {
        match self {
            Shape::Single => Layout::Contiguous { count: 1 },
            Shape::Range { count } => Layout::Contiguous { count: *count },
            Shape::Strided { count, stride } => Layout::Vector {
                count: *count,
                blocklen: 1,
                stride: *stride,
            },
            Shape::Layout { layout, .. } => layout.as_ref().clone(),
        }
    }
}

/// A location: elements of one window, on whichever rank a call targets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loc {
    /// Index into [`Scenario::windows`].
    pub window: usize,
    /// First element (the displacement a layout is relative to); in a region, counted from
    /// the region's first element.
    pub index: u64,
    /// Which elements.
    pub shape: Shape,
    /// `r[…]`: the elements are in the region `r` of a dynamic window, whose address the run
    /// learns when its rank attaches it (boxed: most locations are in no region).
    pub region: Option<Box<RegionRef>>,
}

/// A region of a dynamic window named by `R: attach N -> r`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionRef {
    /// Its name in the file.
    pub name: String,
    /// The rank whose memory it is (the one that attaches it).
    pub owner: u32,
    /// The line of its attach.
    pub line: usize,
}

/// `origin=SEL`: which elements of the origin buffer an operation sends (put, acc, get_acc:
/// the buffer is the values written after `=`) or where the values it fetches land (get: the
/// variable is the buffer). SEL is what goes between a location's brackets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// First element of the buffer (a layout's base).
    pub index: u64,
    /// Which elements.
    pub shape: Shape,
}

/// The communication call kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpCall {
    /// `put`.
    Put,
    /// `get`.
    Get,
    /// `acc op=OP`.
    Acc(Op),
    /// `get_acc op=OP`.
    GetAcc(Op),
    /// `fop op=OP`.
    Fop(Op),
    /// `cas compare=C`.
    Cas,
}

/// One communication call (`put`, `rget`, …).
#[derive(Clone, Debug, PartialEq)]
pub struct OpCallSpec {
    /// Which call.
    pub kind: OpCall,
    /// `rput`, `rget`, `racc`, `rget_acc`.
    pub request_based: bool,
    /// The target rank.
    pub target: u32,
    /// Where at the target.
    pub loc: Loc,
    /// Origin values (empty for get and no_op): the values sent in type-map order, or with
    /// [`OpCallSpec::origin`] the origin buffer it selects from.
    pub values: Vec<Value>,
    /// `origin=SEL`: the origin layout (boxed, as [`Shape::Layout`]'s layout).
    pub origin: Option<Box<Origin>>,
    /// The compare value of `cas`.
    pub compare: Option<Value>,
    /// `-> var`.
    pub var: Option<String>,
    /// `as REQ`.
    pub request: Option<String>,
}

/// One call a rank performs.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// `store LOC = V…` into the own private copy.
    Store {
        /// Where (in the own window).
        loc: Loc,
        /// What.
        values: Vec<Value>,
    },
    /// `load LOC -> var` from the own private copy.
    Load {
        /// Where.
        loc: Loc,
        /// Into which variable.
        var: String,
    },
    /// A communication call.
    Op(OpCallSpec),
    /// `wait_req REQ`.
    WaitReq(String),
    /// `test_req REQ -> flag`: `MPI_Test`.
    TestReq {
        /// The request.
        request: String,
        /// Set to whether it completed.
        var: String,
    },
    /// `test_all REQ[,REQ...] -> flag`: `MPI_Testall`.
    TestAll {
        /// The requests.
        requests: Vec<String>,
        /// Set to whether all completed.
        var: String,
    },
    /// `wait_all REQ[,REQ...]`: `MPI_Waitall`.
    WaitAll(Vec<String>),
    /// `wait_any REQ[,REQ...] -> index`: `MPI_Waitany`.
    WaitAny {
        /// The requests.
        requests: Vec<String>,
        /// Set to the position (from 0) of the request that completed.
        var: String,
    },
    /// `free_req REQ`: `MPI_Request_free`.
    FreeReq(String),
    /// `fence [assert=…]`.
    Fence {
        /// Window index.
        window: usize,
        /// Assertion bits.
        assert: u32,
    },
    /// `post {G} [assert=…]`.
    Post {
        /// Window index.
        window: usize,
        /// The group.
        group: Vec<u32>,
        /// Assertion bits.
        assert: u32,
    },
    /// `start {G} [assert=…]`.
    Start {
        /// Window index.
        window: usize,
        /// The group.
        group: Vec<u32>,
        /// Assertion bits.
        assert: u32,
    },
    /// `complete`.
    Complete {
        /// Window index.
        window: usize,
    },
    /// `wait`.
    Wait {
        /// Window index.
        window: usize,
    },
    /// `test -> flag`.
    Test {
        /// Window index.
        window: usize,
        /// The flag variable.
        var: String,
    },
    /// `lock shared|exclusive T [assert=nocheck]`.
    Lock {
        /// Window index.
        window: usize,
        /// Lock type.
        lock_type: LockType,
        /// Target.
        target: u32,
        /// Assertion bits.
        assert: u32,
    },
    /// `unlock T`.
    Unlock {
        /// Window index.
        window: usize,
        /// Target.
        target: u32,
    },
    /// `lock_all [assert=nocheck]`.
    LockAll {
        /// Window index.
        window: usize,
        /// Assertion bits.
        assert: u32,
    },
    /// `unlock_all`.
    UnlockAll {
        /// Window index.
        window: usize,
    },
    /// `flush T`.
    Flush {
        /// Window index.
        window: usize,
        /// Target.
        target: u32,
    },
    /// `flush_all`.
    FlushAll {
        /// Window index.
        window: usize,
    },
    /// `set_info KEY=VAL ...` (`MPI_Win_set_info`, collective).
    SetInfo {
        /// Window index.
        window: usize,
        /// The keys and values, in order.
        info: Vec<(String, String)>,
    },
    /// `flush_local T`.
    FlushLocal {
        /// Window index.
        window: usize,
        /// Target.
        target: u32,
    },
    /// `flush_local_all`.
    FlushLocalAll {
        /// Window index.
        window: usize,
    },
    /// `sync` (`MPI_Win_sync`).
    Sync {
        /// Window index.
        window: usize,
    },
    /// `sleep MS`.
    Sleep {
        /// Milliseconds.
        ms: u64,
    },
    /// `crash`: the session vanishes without cleanup.
    Crash,
    /// `attach`: a new incarnation after `crash`.
    Attach,
    /// `attach N -> r` (`MPI_Win_attach`): attaches a region of N elements of a dynamic
    /// window's type in the rank's memory and names it.
    AttachRegion {
        /// Window index.
        window: usize,
        /// Elements.
        count: u64,
        /// The region's name.
        name: String,
    },
    /// `detach r` (`MPI_Win_detach`) of a region the rank attached.
    DetachRegion {
        /// Window index.
        window: usize,
        /// The region's name.
        name: String,
    },
}

/// `R: CALL [!CLASS]`.
#[derive(Clone, Debug, PartialEq)]
pub struct RankCall {
    /// 1-based line number.
    pub line: usize,
    /// The rank performing it.
    pub rank: u32,
    /// The call as written (without the rank prefix and comment).
    pub text: String,
    /// What it does.
    pub call: Call,
    /// `!CLASS`: the call must fail with this class.
    pub expect_fail: Option<ErrorClass>,
}

/// One line of the program.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// A call of one rank (boxed: a call is large, a barrier small).
    Call(Box<RankCall>),
    /// `barrier`: every rank calls the world barrier.
    Barrier {
        /// 1-based line number.
        line: usize,
    },
}

/// What an expectation reads.
#[derive(Clone, Debug, PartialEq)]
pub enum Subject {
    /// `expect R var …`.
    Var {
        /// Whose variable.
        rank: u32,
        /// Its name.
        var: String,
    },
    /// `expect public T LOC …`: T's public copy after the run.
    Public {
        /// Whose copy.
        rank: u32,
        /// Where.
        loc: Loc,
    },
    /// `expect private T LOC …`: T's private copy after the run, read without syncing.
    Private {
        /// Whose copy.
        rank: u32,
        /// Where.
        loc: Loc,
    },
}

/// An observed or expected value: a scalar or a list.
#[derive(Clone, Debug, PartialEq)]
pub enum Observed {
    /// One element.
    Scalar(Value),
    /// Several (a range).
    List(Vec<Value>),
}

impl std::fmt::Display for Observed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Observed::Scalar(value) => write!(f, "{value}"),
            Observed::List(values) => {
                let texts: Vec<String> = values.iter().map(Value::to_string).collect();
                f.write_str(&texts.join(","))
            }
        }
    }
}

/// `expect …`.
#[derive(Clone, Debug, PartialEq)]
pub struct Expectation {
    /// 1-based line number.
    pub line: usize,
    /// The line as written (without the comment).
    pub text: String,
    /// What is read.
    pub subject: Subject,
    /// It holds when the observed value equals one of these (`==` gives exactly one).
    pub accepted: Vec<Observed>,
}
