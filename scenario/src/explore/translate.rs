//! A parsed scenario as the simulator's windows and one program of [`Action`]s per rank.
//!
//! Owns: which scenario lines the simulator runs and how (a window of either model over the
//! whole world or its group, ids from 1 in file order; a store or load as one action per byte
//! run of its location; every other call as one core [`Call`], the world ranks the file names
//! made the window's — a rank outside its group refused as the runner refuses it; a `barrier`
//! line as a barrier of every rank; a `crash` and the `attach` after it as the simulator's,
//! the requests a crash took with it refused as the runner refuses them), where each action
//! came from ([`Source`]) — never a line silently skipped. Must not: run anything, or decide
//! whether a call is legal (admission does, as the server's session).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use onesided_core::datatype::{encode_all, Value};
use onesided_core::origin::Call;
use onesided_core::sim::Action;
use onesided_core::window::{Flavor, MemoryModel, WindowDesc, WindowInfo};
use onesided_core::{ErrorClass, RmaError};

use super::super::ast::{
    self, FlavorDecl, Loc, Model, OpCallSpec, RankCall, Scenario, Step, WindowDecl,
};
use super::super::buffers::{byte_runs, target_op};
use super::super::parse::{not_in_group, request_not_active};
use super::ExploreError;

/// Where an action of a rank's program came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Source {
    /// The rank call at this index of the scenario's steps.
    Call(usize),
    /// The `barrier` of this line.
    Barrier(usize),
}

/// One rank call in a rank's program: its index in the scenario's steps and its actions.
#[derive(Clone, Debug)]
pub(super) struct Planned {
    pub step: usize,
    pub actions: Range<usize>,
}

/// The simulator's input for a scenario.
#[derive(Clone, Debug)]
pub(super) struct Plan {
    pub nranks: u32,
    /// The windows, window `i` of the file with id `i + 1`.
    pub windows: Vec<WindowDesc>,
    /// One program per rank.
    pub programs: Vec<Vec<Action>>,
    /// Per rank, per action of its program: where it came from.
    pub sources: Vec<Vec<Source>>,
    /// Per rank, its calls in program order.
    pub calls: Vec<Vec<Planned>>,
}

impl Plan {
    /// The file's name of the window with simulator id `id`.
    pub fn window_name(&self, id: u64) -> &str {
        let index = id.checked_sub(1).and_then(|i| usize::try_from(i).ok());
        index
            .and_then(|i| self.windows.get(i))
            .map_or("?", |desc| desc.name.as_str())
    }
}

/// The simulator's id of the file's window `index`.
pub(super) fn window_id(index: usize) -> u64 {
    index as u64 + 1
}

/// The plan of `scenario`, or the first line the simulator cannot run.
pub(super) fn plan(scenario: &Scenario) -> Result<Plan, ExploreError> {
    let nranks = scenario.ranks;
    let windows = scenario
        .windows
        .iter()
        .enumerate()
        .map(|(index, decl)| window_desc(index, decl, nranks))
        .collect::<Result<Vec<_>, _>>()?;
    let mut plan = Plan {
        nranks,
        windows,
        programs: vec![Vec::new(); nranks as usize],
        sources: vec![Vec::new(); nranks as usize],
        calls: vec![Vec::new(); nranks as usize],
    };
    // per rank: each request (`as r`) the action of the operation that made it
    let mut requests: Vec<BTreeMap<&str, usize>> = vec![BTreeMap::new(); nranks as usize];
    // per rank: the requests made since its last crash (active or null), and those a crash
    // took with it (their names not given again since)
    let mut named: Vec<BTreeSet<&str>> = vec![BTreeSet::new(); nranks as usize];
    let mut forgotten: Vec<BTreeSet<&str>> = vec![BTreeSet::new(); nranks as usize];
    for (index, step) in scenario.steps.iter().enumerate() {
        match step {
            Step::Barrier { line } => {
                for rank in 0..nranks as usize {
                    plan.programs[rank].push(Action::Barrier);
                    plan.sources[rank].push(Source::Barrier(*line));
                }
            }
            Step::Call(call) => {
                let rank = call.rank as usize;
                let Some(program) = plan.programs.get_mut(rank) else {
                    // the parser refuses it: a scenario built otherwise
                    let why = format!("rank {rank} is outside the world of {nranks} rank(s)");
                    return Err(ExploreError::Call {
                        line: call.line,
                        text: call.text.clone(),
                        source: RmaError::new(ErrorClass::Rank, why),
                    });
                };
                let start = program.len();
                if let ast::Call::Op(OpCallSpec {
                    request: Some(name),
                    ..
                }) = &call.call
                {
                    requests[rank].insert(name, start);
                    named[rank].insert(name);
                }
                let actions = match lost_request(&call.call, &forgotten[rank]) {
                    Some(name) => vec![Action::Refuse {
                        error: request_not_active(name),
                    }],
                    None => actions(scenario, call, &requests[rank])?,
                };
                for mut action in actions {
                    let load = match &mut action {
                        Action::InRegion { action, .. } => action.as_mut(),
                        action => action,
                    };
                    if let Action::Load { label, .. } = load {
                        // a load's bytes are found again by the action's place
                        *label = program.len().to_string();
                    }
                    program.push(action);
                    plan.sources[rank].push(Source::Call(index));
                }
                match &call.call {
                    // from now on the request names a null handle: passed over by the
                    // calls that list it
                    ast::Call::FreeReq(name) => {
                        requests[rank].remove(name.as_str());
                    }
                    // the crashed process's requests are gone, null ones too: naming one is
                    // an error
                    ast::Call::Crash => {
                        requests[rank].clear();
                        forgotten[rank].extend(std::mem::take(&mut named[rank]));
                    }
                    ast::Call::Op(OpCallSpec {
                        request: Some(name),
                        ..
                    }) => {
                        forgotten[rank].remove(name.as_str());
                    }
                    _ => {}
                }
                let actions = start..program.len();
                plan.calls[rank].push(Planned {
                    step: index,
                    actions,
                });
            }
        }
    }
    Ok(plan)
}

/// A declared window as the simulator runs it: either model, whole world, create or
/// allocate, disp_unit the element's size.
fn window_desc(index: usize, decl: &WindowDecl, nranks: u32) -> Result<WindowDesc, ExploreError> {
    let line = decl.line;
    let flavor = match decl.flavor {
        FlavorDecl::Create => Flavor::Create,
        FlavorDecl::Allocate => Flavor::Allocate,
        FlavorDecl::Dynamic => Flavor::Dynamic,
    };
    let pairs = decl.info.iter().map(|(k, v)| (k.as_str(), v.as_str()));
    let info = WindowInfo::parse(pairs).map_err(|source| ExploreError::Window {
        line,
        name: decl.name.clone(),
        source,
    })?;
    // a dynamic window's displacements are addresses
    let unit = match flavor {
        Flavor::Dynamic => 1,
        _ => decl.dtype.size() as u64,
    };
    Ok(WindowDesc {
        id: window_id(index),
        name: decl.name.clone(),
        world: "explore".to_string(),
        flavor,
        model: match decl.model {
            Model::Unified => MemoryModel::Unified,
            _ => MemoryModel::Separate,
        },
        sizes: decl.sizes.iter().map(|count| count * unit).collect(),
        disp_units: vec![unit as u32; decl.sizes.len()],
        info,
        group: decl
            .group
            .clone()
            .unwrap_or_else(|| WindowDesc::whole_world(nranks)),
    })
}

/// The actions of one rank call.
fn actions(
    scenario: &Scenario,
    call: &RankCall,
    requests: &BTreeMap<&str, usize>,
) -> Result<Vec<Action>, ExploreError> {
    use ast::Call as C;
    // a request the file names is one of the rank's earlier operations (the parser says so)
    let requested = |names: &[String]| -> Vec<usize> {
        let calls = names.iter().filter_map(|name| requests.get(name.as_str()));
        calls.copied().collect()
    };
    let waits = |names: &[String]| {
        let calls = requested(names);
        Ok(vec![Action::WaitRequests { calls }])
    };
    let translated = |source: RmaError| ExploreError::Call {
        line: call.line,
        text: call.text.clone(),
        source,
    };
    // a call on a window its rank is not in fails before anything, as the runner's does
    if let Some(error) = window_of(&call.call).and_then(|w| outside(scenario, w, call.rank)) {
        return Ok(vec![Action::Refuse { error }]);
    }
    // a location in a region of a dynamic window is at the region's address, known once run
    let placed = |loc: &Loc, actions: Vec<Action>| match &loc.region {
        Some(region) => actions
            .into_iter()
            .map(|action| Action::InRegion {
                name: region.name.clone(),
                action: Box::new(action),
            })
            .collect(),
        None => actions,
    };
    match &call.call {
        C::Store { loc, values } => {
            let actions = stores(scenario, loc, values).map_err(translated)?;
            Ok(placed(loc, actions))
        }
        C::Load { loc, .. } => Ok(placed(loc, loads(scenario, loc).map_err(translated)?)),
        C::AttachRegion {
            window,
            count,
            name,
        } => {
            let unit = scenario.windows[*window].dtype.size() as u64;
            Ok(vec![Action::Attach {
                window: window_id(*window),
                size: count.saturating_mul(unit),
                name: name.clone(),
            }])
        }
        C::DetachRegion { window, name } => Ok(vec![Action::Detach {
            window: window_id(*window),
            name: name.clone(),
        }]),
        C::WaitReq(name) => waits(std::slice::from_ref(name)),
        C::WaitAll(names) => waits(names),
        // the operation goes on; nothing waits for it, and its handle is null (`plan`); freed
        // twice, the second is refused as the runner refuses it
        C::FreeReq(name) => {
            let refusal = request_not_active(name);
            Ok(vec![match requests.get(name.as_str()) {
                Some(&call) => Action::FreeRequest { call, refusal },
                None => Action::Refuse { error: refusal },
            }])
        }
        C::TestReq { request, .. } => {
            let calls = requested(std::slice::from_ref(request));
            Ok(vec![Action::TestRequests { calls }])
        }
        C::TestAll { requests, .. } => {
            let calls = requested(requests);
            Ok(vec![Action::TestRequests { calls }])
        }
        C::WaitAny {
            requests: names, ..
        } => {
            // a freed request's handle is null
            let calls = names
                .iter()
                .map(|name| requests.get(name.as_str()).copied());
            Ok(vec![Action::WaitAny {
                calls: calls.collect(),
            }])
        }
        C::SetInfo { window, info } => Ok(vec![Action::SetInfo {
            window: window_id(*window),
            info: info.clone(),
        }]),
        // a pause moves nothing and orders nothing (the format: "to make an interleaving
        // likely, never to make a test pass"); the schedules reach every interleaving it could
        // make likely without it
        C::Sleep { .. } => Ok(Vec::new()),
        C::Crash => Ok(vec![Action::Crash]),
        C::Attach => Ok(vec![Action::Rejoin]),
        _ => Ok(match window_call(scenario, &call.call) {
            Ok(single) => match &call.call {
                C::Op(spec) => placed(&spec.loc, vec![Action::Call(single)]),
                _ => vec![Action::Call(single)],
            },
            // a rank the window does not span, refused as the runner refuses it
            Err(error) => vec![Action::Refuse { error }],
        }),
    }
}

/// The first request `call` names that a crash took with it (`forgotten`): the runner
/// refuses the call with `MPI_ERR_REQUEST` before it waits for, tests or frees anything.
fn lost_request<'a>(call: &'a ast::Call, forgotten: &BTreeSet<&str>) -> Option<&'a str> {
    use ast::Call as C;
    let names: &[String] = match call {
        C::WaitReq(name) | C::FreeReq(name) | C::TestReq { request: name, .. } => {
            std::slice::from_ref(name)
        }
        C::WaitAll(names)
        | C::TestAll {
            requests: names, ..
        } => names,
        C::WaitAny { requests, .. } => requests,
        _ => &[],
    };
    names
        .iter()
        .map(String::as_str)
        .find(|name| forgotten.contains(name))
}

/// The window (its index in the file) a rank call works on, if one.
fn window_of(call: &ast::Call) -> Option<usize> {
    use ast::Call as C;
    match call {
        C::Store { loc, .. } | C::Load { loc, .. } => Some(loc.window),
        C::Op(spec) => Some(spec.loc.window),
        C::Fence { window, .. }
        | C::Post { window, .. }
        | C::Start { window, .. }
        | C::Complete { window }
        | C::Wait { window }
        | C::Test { window, .. }
        | C::Lock { window, .. }
        | C::Unlock { window, .. }
        | C::LockAll { window, .. }
        | C::UnlockAll { window }
        | C::Flush { window, .. }
        | C::FlushAll { window }
        | C::SetInfo { window, .. }
        | C::FlushLocal { window, .. }
        | C::FlushLocalAll { window }
        | C::Sync { window }
        | C::AttachRegion { window, .. }
        | C::DetachRegion { window, .. } => Some(*window),
        C::WaitReq(_)
        | C::TestReq { .. }
        | C::TestAll { .. }
        | C::WaitAll(_)
        | C::WaitAny { .. }
        | C::FreeReq(_)
        | C::Sleep { .. }
        | C::Crash
        | C::Attach => None,
    }
}

/// `MPI_ERR_GROUP` when world rank `rank` is not in the group of the file's window `index`
/// (the runner's words).
fn outside(scenario: &Scenario, index: usize, rank: u32) -> Option<RmaError> {
    let decl = &scenario.windows[index];
    let group = decl.group.as_ref()?;
    (!group.contains(&rank))
        .then(|| not_in_group(ErrorClass::Group, rank, scenario.ranks, &decl.name))
}

/// The rank in the file's window `index` of world rank `rank` (the file names world ranks);
/// `MPI_ERR_RANK` for one outside its group, as the runner says.
fn in_window(scenario: &Scenario, index: usize, rank: u32) -> Result<u32, RmaError> {
    let decl = &scenario.windows[index];
    let Some(group) = &decl.group else {
        return Ok(rank);
    };
    let position = group.iter().position(|&member| member == rank);
    position
        .map(|at| at as u32)
        .ok_or_else(|| not_in_group(ErrorClass::Rank, rank, scenario.ranks, &decl.name))
}

/// A call on a window as core's [`Call`], its ranks those of the window.
fn window_call(scenario: &Scenario, call: &ast::Call) -> Result<Call, RmaError> {
    use ast::Call as C;
    let id = window_id;
    let to = |window: usize, rank: u32| in_window(scenario, window, rank);
    let group = |window: usize, ranks: &[u32]| -> Result<Vec<u32>, RmaError> {
        ranks.iter().map(|&rank| to(window, rank)).collect()
    };
    Ok(match call {
        C::Op(spec) => {
            let dtype = scenario.windows[spec.loc.window].dtype;
            // in a region: bytes from its address (disp_unit 1), added once it is known
            let disp = match spec.loc.region {
                Some(_) => spec.loc.index.saturating_mul(dtype.size() as u64),
                None => spec.loc.index,
            };
            Call::Op {
                window: id(spec.loc.window),
                target: to(spec.loc.window, spec.target)?,
                token: 0,
                request_based: spec.request_based,
                // one that does not build is refused by admission in its turn, as the
                // server's session refuses it
                op: target_op(spec, dtype, disp),
            }
        }
        C::Fence { window, assert } => Call::fence(id(*window), *assert),
        C::Post {
            window,
            group: ranks,
            assert,
        } => Call::post(id(*window), group(*window, ranks)?, *assert),
        C::Start {
            window,
            group: ranks,
            assert,
        } => Call::start(id(*window), group(*window, ranks)?, *assert),
        C::Complete { window } => Call::Complete {
            window: id(*window),
        },
        C::Wait { window } => Call::Wait {
            window: id(*window),
        },
        C::Lock {
            window,
            lock_type,
            target,
            assert,
        } => Call::lock(id(*window), *lock_type, to(*window, *target)?, *assert),
        C::Unlock { window, target } => Call::unlock(id(*window), to(*window, *target)?),
        C::LockAll { window, assert } => Call::lock_all(id(*window), *assert),
        C::UnlockAll { window } => Call::unlock_all(id(*window)),
        C::Flush { window, target } | C::FlushLocal { window, target } => Call::Flush {
            window: id(*window),
            target: to(*window, *target)?,
            local: matches!(call, C::FlushLocal { .. }),
        },
        C::FlushAll { window } | C::FlushLocalAll { window } => Call::FlushAll {
            window: id(*window),
            local: matches!(call, C::FlushLocalAll { .. }),
        },
        C::Sync { window } => Call::Sync {
            window: id(*window),
            push: Vec::new(),
        },
        C::Test { window, .. } => Call::Test {
            window: id(*window),
        },
        other => unreachable!("not a call on a window's epochs or data: {other:?}"),
    })
}

/// `store LOC = V…`: one store per byte run of the location, the values in type-map order
/// (as the runner, the values past the location's elements are not stored).
fn stores(scenario: &Scenario, loc: &Loc, values: &[Value]) -> Result<Vec<Action>, RmaError> {
    let dtype = scenario.windows[loc.window].dtype;
    let bytes = encode_all(dtype, values)?;
    let mut rest = bytes.as_slice();
    let mut actions = Vec::new();
    for (offset, len) in byte_runs(loc, dtype)? {
        let take = rest.len().min(usize::try_from(len).unwrap_or(usize::MAX));
        let (run, after) = rest.split_at(take);
        rest = after;
        actions.push(Action::Store {
            window: window_id(loc.window),
            offset,
            bytes: run.to_vec(),
        });
    }
    Ok(actions)
}

/// `load LOC -> var`: one load per byte run of the location (labelled by the caller).
fn loads(scenario: &Scenario, loc: &Loc) -> Result<Vec<Action>, RmaError> {
    let dtype = scenario.windows[loc.window].dtype;
    Ok(byte_runs(loc, dtype)?
        .into_iter()
        .map(|(offset, len)| Action::Load {
            window: window_id(loc.window),
            offset,
            len,
            label: String::new(),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    #[test]
    fn a_rank_outside_the_world_is_refused_with_its_line() {
        let mut scenario = parse("window W ranks=2 size=2 type=i64\n\nA: fence\n").unwrap();
        if let Step::Call(call) = &mut scenario.steps[0] {
            call.rank = 7;
        }
        match plan(&scenario) {
            Err(ExploreError::Call { line, source, .. }) => {
                assert_eq!((line, source.class), (3, ErrorClass::Rank), "{source}");
            }
            other => panic!("not refused: {other:?}"),
        }
    }

    /// A crash and the attach after it are the simulator's; a request the crash took with it
    /// is refused as the runner refuses it, one made again under its name after is not.
    #[test]
    fn a_crash_forgets_the_rank_s_requests() {
        let scenario = parse(
            "window W ranks=2 size=2 type=i64\n\
             A: lock shared B\nA: rget B W[0] -> x as r\nA: rput B W[1] = 1 as p\n\
             A: free_req p\nA: crash\nA: attach\nA: wait_req r\nA: wait_req p\n\
             A: lock shared B\nA: rput B W[1] = 2 as q\nA: wait_all q\nA: unlock B\n",
        )
        .unwrap();
        let plan = plan(&scenario).unwrap();
        let program = &plan.programs[0];
        assert!(matches!(program[4], Action::Crash));
        assert!(matches!(program[5], Action::Rejoin));
        // an active request and a null one (freed) alike
        for (at, name) in [(6, "r"), (7, "p")] {
            let Action::Refuse { error } = &program[at] else {
                panic!("not refused: {:?}", program[at]);
            };
            assert_eq!(error.class, ErrorClass::Request);
            let words = format!("request {name} is not active");
            assert!(error.message.contains(&words), "{error}");
        }
        assert!(
            matches!(&program[10], Action::WaitRequests { calls } if calls == &[9]),
            "{:?}",
            program[10]
        );
    }

    /// The file names world ranks; the simulator's calls name the window's, and a rank the
    /// window does not span is refused as the runner refuses it.
    #[test]
    fn a_window_over_part_of_the_world_numbers_its_ranks_in_its_group() {
        let scenario = parse(
            "window G ranks=3 size=2 type=i64 group={C,A}\n\
             C: G.fence\nA: put C G[1] = 5\nB: G.fence\nA: put B G[0] = 1\nC: lock shared A\n",
        )
        .unwrap();
        let plan = plan(&scenario).unwrap();
        assert_eq!(plan.windows[0].group, vec![2, 0]);
        let refused = |action: &Action| match action {
            Action::Refuse { error } => Some((error.class, error.message.clone())),
            _ => None,
        };
        let target = |action: &Action| match action {
            Action::Call(Call::Op { target, .. } | Call::Lock { target, .. }) => Some(*target),
            _ => None,
        };
        // A's put into C is to G's rank 0; C's lock of A is of G's rank 1
        assert_eq!(target(&plan.programs[0][0]), Some(0));
        assert_eq!(target(&plan.programs[2][1]), Some(1));
        let outside = "rank B is not in the group of window G".to_string();
        assert_eq!(
            refused(&plan.programs[1][0]),
            Some((ErrorClass::Group, outside.clone()))
        );
        assert_eq!(
            refused(&plan.programs[0][1]),
            Some((ErrorClass::Rank, outside))
        );
    }

    #[test]
    fn a_strided_store_is_one_store_per_run_and_a_barrier_one_action_per_rank() {
        let scenario = parse(
            "window W ranks=2 size=6 type=i32\nA: store W[0..6:2] = 1,2,3\nbarrier\nB: load W[1..3] -> b\n",
        )
        .unwrap();
        let plan = plan(&scenario).unwrap();
        let stores: Vec<(u64, Vec<u8>)> = plan.programs[0]
            .iter()
            .filter_map(|action| match action {
                Action::Store { offset, bytes, .. } => Some((*offset, bytes.clone())),
                _ => None,
            })
            .collect();
        let le = |v: i32| v.to_le_bytes().to_vec();
        assert_eq!(stores, vec![(0, le(1)), (8, le(2)), (16, le(3))]);
        assert!(matches!(plan.programs[0][3], Action::Barrier));
        assert!(matches!(plan.programs[1][0], Action::Barrier));
        assert!(
            matches!(&plan.programs[1][1], Action::Load { offset: 4, len: 8, label, .. } if label == "1")
        );
        assert_eq!(plan.sources[1], vec![Source::Barrier(3), Source::Call(2)]);
    }
}
