//! Dynamic windows for C programs (`MPI_Win_create_dynamic`, `MPI_Win_attach`,
//! `MPI_Win_detach`): a program attaches its own memory at its own addresses and other ranks
//! address it by them (`MPI_Get_address`, sent as they like), but the service hands out the
//! addresses of a window's regions itself, one after another from `DYNAMIC_BASE` (its copies
//! are dense, and the program's addresses are anywhere in 64 bits).
//!
//! So each attached region has two addresses: the program's, and the one the service gave it.
//! Every rank keeps a **directory** of its regions (program address, size, service address)
//! in a window of the library's own beside the dynamic one (`<name>-regions`, a log behind a
//! header of generation and length, written under an exclusive lock of the owner's own rank
//! before `MPI_Win_attach` or `MPI_Win_detach` returns). An origin turns a target's program
//! address into the service's by the target's directory, read under a shared lock when the
//! address is not in what it read before, and read again at the first access to that target
//! in each access epoch (fence, lock, lock_all, start): a region detached and another attached
//! over the same addresses is then found, as MPI lets a program learn it only through a
//! synchronization. A rank's own regions need no reading.
//!
//! The program's memory of a region is the private copy at the offset of the service's
//! address (module `sync` copies both ways); what it holds when attached is stored and
//! published at once (a lock of one's own rank, or `MPI_Win_sync` inside a passive epoch).
//!
//! Owns: the regions a rank attached (`Region`), the directories (`Directory`: writing this
//! rank's, reading and caching the others'), turning an operation's target address into the
//! service's (`translate`), and the three calls' argument rules (MPICH's classes). Must not:
//! decide whether an access reaches attached memory beyond finding its first byte's region
//! (the target checks every run, `MPI_ERR_RMA_RANGE`), or move window data (module `sync`).

use std::collections::HashMap;
use std::ffi::{c_int, c_void};

use onesided_client::{Flavor, LockType, NewWindow, OpSpec, Window};
use onesided_core::window::DYNAMIC_BASE;
use onesided_core::ErrorClass;
use tokio::runtime::Runtime;

use crate::abi::*;
use crate::env::out;
use crate::error::{fail, On, OnObject, Res};
use crate::state::{self, CPtr, Mpi};

/// Regions a directory's log holds before it is compacted (each attach and detach is one).
const CAPACITY: u64 = 4096;
/// The log's header: generation (bumped when compacted) and length, two `u64`.
const HEADER: u64 = 16;
/// One entry: program address, size (0: the region at that service address was detached),
/// service address, three `u64`.
const ENTRY: u64 = 24;

/// A region of the program's memory attached to a dynamic window here.
#[derive(Debug)]
pub struct Region {
    pub base: CPtr,
    pub size: usize,
    /// Where it is in the private copy: its service address less `DYNAMIC_BASE`.
    pub offset: u64,
    /// What the library last left in it (module `sync`).
    pub shadow: Vec<u8>,
}

impl Region {
    /// Its memory, as [`crate::sync`] copies it.
    pub(crate) fn memory(&mut self) -> crate::sync::Memory<'_> {
        crate::sync::Memory {
            base: self.base,
            size: self.size,
            offset: self.offset,
            shadow: &mut self.shadow,
        }
    }
}

/// A region as the directories name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    address: u64,
    size: u64,
    service: u64,
}

impl Entry {
    fn words(self) -> [u64; 3] {
        [self.address, self.size, self.service]
    }

    /// The service address of `lo..hi` (program addresses) when they lie in this region.
    fn service_of(&self, lo: u64, hi: u64) -> Option<u64> {
        let end = self.address + self.size;
        (self.address <= lo && lo < end && hi <= end).then(|| self.service + (lo - self.address))
    }
}

/// Another rank's regions as last read from its directory.
#[derive(Debug, Default)]
struct Known {
    generation: u64,
    /// Log entries applied so far.
    read: u64,
    entries: Vec<Entry>,
    /// Read in the current access epoch.
    fresh: bool,
}

/// Every rank's regions of one dynamic window.
#[derive(Debug)]
pub struct Directory {
    window: Window,
    generation: u64,
    /// Entries of this rank's log.
    log: u64,
    /// This rank's regions now.
    mine: Vec<Entry>,
    known: HashMap<u32, Known>,
}

impl Directory {
    /// Creates the directory window of the dynamic window `name` (collective over `group`,
    /// as the dynamic window's creation).
    pub(crate) fn create(mpi: &Mpi, name: &str, group: &[u32]) -> Res<Directory> {
        let call = NewWindow::new(&format!("{name}-regions"), HEADER + CAPACITY * ENTRY, 1)
            .flavor(Flavor::Allocate)
            .group(group);
        let window = mpi.block_on(mpi.session.create(&call))?;
        Ok(Directory {
            window,
            generation: 0,
            log: 0,
            mine: Vec::new(),
            known: HashMap::new(),
        })
    }

    /// Frees the directory window (collective, after the dynamic window's free).
    pub(crate) fn free(&self, runtime: &Runtime) -> Res {
        Ok(runtime.block_on(self.window.free())?)
    }

    /// Every other rank's regions must be read again before this rank's next access to it.
    pub(crate) fn epoch_begins(&mut self) {
        for known in self.known.values_mut() {
            known.fresh = false;
        }
    }

    /// Appends `entry` to this rank's log (compacting it first when full) and publishes it.
    fn append(&mut self, runtime: &Runtime, entry: Entry) -> Res {
        let mut writes: Vec<(u64, Vec<u64>)> = Vec::new();
        if self.log == CAPACITY {
            self.generation += 1;
            self.log = self.mine.len() as u64;
            let words = self.mine.iter().flat_map(|e| e.words()).collect();
            writes.push((HEADER, words));
        }
        if self.log == CAPACITY {
            return Err(fail(
                MPI_ERR_RMA_ATTACH,
                format!("this rank has {CAPACITY} regions attached to the window already"),
            ));
        }
        writes.push((HEADER + self.log * ENTRY, entry.words().to_vec()));
        self.log += 1;
        writes.push((0, vec![self.generation, self.log]));
        let me = self.window.rank();
        let window = &self.window;
        runtime.block_on(async {
            window.lock(LockType::Exclusive, me, 0).await?;
            for (disp, words) in &writes {
                window.put(me, *disp, &words[..])?;
            }
            window.unlock(me).await
        })?;
        Ok(())
    }

    /// Reads `target`'s directory: what its log gained since the last read (all of it when it
    /// was compacted since).
    fn read(&mut self, runtime: &Runtime, target: u32) -> Res {
        let window = &self.window;
        let known = self.known.entry(target).or_default();
        let gained: Vec<u64> = runtime.block_on(async {
            window.lock(LockType::Shared, target, 0).await?;
            let header = window.get::<u64>(target, 0, 2)?;
            window.flush(target).await?;
            let header = header.value().await?;
            let (generation, len) = (header[0], header[1].min(CAPACITY));
            if generation != known.generation {
                *known = Known {
                    generation,
                    ..Known::default()
                };
            }
            let gained = if len > known.read {
                let from = HEADER + known.read * ENTRY;
                let gained = window.get::<u64>(target, from, (len - known.read) * 3)?;
                window.unlock(target).await?;
                gained.value().await?
            } else {
                window.unlock(target).await?;
                Vec::new()
            };
            Ok::<_, onesided_client::Error>(gained)
        })?;
        for words in gained.chunks_exact(3) {
            let entry = Entry {
                address: words[0],
                size: words[1],
                service: words[2],
            };
            if entry.size == 0 {
                known.entries.retain(|e| e.service != entry.service);
            } else {
                known.entries.push(entry);
            }
            known.read += 1;
        }
        known.fresh = true;
        Ok(())
    }

    /// The service address of the program addresses `lo..hi` at `target`.
    fn service_of(&mut self, runtime: &Runtime, target: u32, lo: u64, hi: u64) -> Res<u64> {
        let find = |entries: &[Entry]| entries.iter().find_map(|e| e.service_of(lo, hi));
        if target == self.window.rank() {
            return find(&self.mine).ok_or_else(|| not_attached(target, lo, hi));
        }
        if let Some(known) = self.known.get(&target).filter(|k| k.fresh) {
            if let Some(service) = find(&known.entries) {
                return Ok(service);
            }
        }
        self.read(runtime, target)?;
        find(&self.known[&target].entries).ok_or_else(|| not_attached(target, lo, hi))
    }
}

fn not_attached(target: u32, lo: u64, hi: u64) -> crate::error::Fail {
    fail(
        MPI_ERR_RMA_RANGE,
        format!(
            "addresses {lo:#x}..{hi:#x} are not inside one region attached at rank {target} \
             (MPI_Win_attach)"
        ),
    )
}

/// Turns `spec`'s target address (the program's, at `target`) into the service's, on a
/// dynamic window; leaves other windows' displacements alone.
pub(crate) fn translate(mpi: &mut Mpi, handle: i32, target: u32, spec: &mut OpSpec) -> Res {
    let win = mpi.win(handle)?;
    if target as usize >= win.window.get_group().len() {
        // not a rank of the window: the call says so (MPI_ERR_RANK)
        return Ok(());
    }
    let Some(mut directory) = win.directory.take() else {
        return Ok(());
    };
    let result = span(spec).and_then(|(lo, hi)| {
        let service = directory.service_of(&mpi.runtime, target, lo, hi)?;
        // the layout's offsets are from the displacement: it moves as its first byte did
        spec.disp = service - (lo - spec.disp);
        Ok(())
    });
    mpi.win(handle)?.directory = Some(directory);
    result
}

/// The program addresses an operation touches, first byte to one past the last.
fn span(spec: &OpSpec) -> Res<(u64, u64)> {
    let runs = spec
        .layout
        .flatten(spec.dtype.size() as u64)
        .map_err(|e| fail(MPI_ERR_COUNT, e.to_string()))?;
    let first = runs.iter().map(|r| r.offset).min().unwrap_or(0);
    let last = runs.iter().map(|r| r.offset + r.len).max().unwrap_or(0);
    let out_of_range = || fail(MPI_ERR_RMA_RANGE, "the target addresses overflow");
    let lo = spec.disp.checked_add(first).ok_or_else(out_of_range)?;
    let hi = spec.disp.checked_add(last).ok_or_else(out_of_range)?;
    Ok((lo, hi))
}

fn not_dynamic(call: &str) -> crate::error::Fail {
    fail(
        MPI_ERR_RMA_FLAVOR,
        format!("{call} is only for windows of MPI_Win_create_dynamic"),
    )
}

/// The runtime and the window `handle`, which must be a dynamic one (`call` names the call
/// in the error otherwise).
fn dynamic_window<'a>(
    mpi: &'a mut Mpi,
    handle: i32,
    call: &str,
) -> Res<(&'a Runtime, &'a mut crate::state::Win)> {
    let Mpi {
        runtime, windows, ..
    } = mpi;
    let entry = windows
        .get_mut(&handle)
        .ok_or_else(|| fail(MPI_ERR_WIN, format!("{handle:#x} is not a window")))?;
    if entry.directory.is_none() {
        return Err(not_dynamic(call));
    }
    Ok((runtime, entry))
}

/// `MPI_Win_attach` on the state.
fn attach(mpi: &mut Mpi, handle: i32, base: *mut u8, size: isize) -> Res {
    let (runtime, entry) = dynamic_window(mpi, handle, "MPI_Win_attach")?;
    if size < 0 {
        return Err(fail(MPI_ERR_SIZE, format!("size {size} is negative")));
    }
    if size == 0 {
        // MPI lets a region of no bytes be attached; no access can reach it
        return Ok(());
    }
    if base.is_null() {
        return Err(fail(
            MPI_ERR_ARG,
            "a null base for a region of non-zero size",
        ));
    }
    let (address, size) = (base as u64, size as usize);
    let overlaps = entry.regions.iter().any(|r| {
        let start = r.base.0 as u64;
        address < start + r.size as u64 && start < address + size as u64
    });
    if overlaps {
        return Err(fail(
            MPI_ERR_RMA_ATTACH,
            format!("{size} bytes at {base:p} overlap a region attached already"),
        ));
    }
    let service = runtime.block_on(entry.window.attach(size as u64))?;
    let mut region = Region {
        base: CPtr(base),
        size,
        offset: service - DYNAMIC_BASE,
        shadow: vec![0; size],
    };
    // what the memory holds is the window's from now on: stored and published before any
    // rank can learn the address (the service's copies of a new region are zeros)
    crate::sync::push(&entry.window, region.memory())?;
    if region.shadow.iter().any(|&b| b != 0) {
        let window = &entry.window;
        let me = window.rank();
        let published = runtime.block_on(async {
            match window.lock(LockType::Exclusive, me, 0).await {
                Ok(()) => window.unlock(me).await,
                // inside lock_all or a lock of this rank: Win_sync publishes there
                Err(e) if e.class() == Some(ErrorClass::RmaSync) => window.sync().await,
                Err(e) => Err(e),
            }
        });
        match published {
            // inside a fence or PSCW epoch: the epoch's closing call publishes it
            Err(e) if e.class() == Some(ErrorClass::RmaSync) => {}
            other => other?,
        }
    }
    entry.regions.push(region);
    let region = Entry {
        address,
        size: size as u64,
        service,
    };
    match entry.directory.as_mut() {
        Some(directory) => {
            directory.mine.push(region);
            directory.append(runtime, region)
        }
        None => Ok(()),
    }
}

/// `MPI_Win_detach` on the state.
fn detach(mpi: &mut Mpi, handle: i32, base: *const u8) -> Res {
    let (runtime, entry) = dynamic_window(mpi, handle, "MPI_Win_detach")?;
    if base.is_null() {
        return Err(fail(MPI_ERR_ARG, "a null base"));
    }
    let index = entry
        .regions
        .iter()
        .position(|r| r.base.0.cast_const() == base)
        .ok_or_else(|| {
            fail(
                MPI_ERR_RMA_ATTACH,
                format!("no region attached to the window here starts at {base:p}"),
            )
        })?;
    let service = DYNAMIC_BASE + entry.regions[index].offset;
    runtime.block_on(entry.window.detach(service))?;
    entry.regions.remove(index);
    let tombstone = Entry {
        address: base as u64,
        size: 0,
        service,
    };
    match entry.directory.as_mut() {
        Some(directory) => {
            directory.mine.retain(|e| e.service != service);
            directory.append(runtime, tombstone)
        }
        None => Ok(()),
    }
}

/// Marks the start of an access epoch on window `handle`: other ranks' regions are read again
/// before they are addressed.
pub(crate) fn epoch_begins(handle: c_int) -> Res {
    state::with(|mpi| {
        if let Some(directory) = mpi.win(handle)?.directory.as_mut() {
            directory.epoch_begins();
        }
        Ok(())
    })
    .on(On::Win(handle))
}

export! {
    fn MPI_Win_create_dynamic / PMPI_Win_create_dynamic(info: c_int, comm: c_int, win: *mut c_int) {
        let (handle, _) =
            crate::rma::create(std::ptr::null_mut(), 0, 1, info, comm, Flavor::Dynamic)?;
        out(win, handle)
    }

    fn MPI_Win_attach / PMPI_Win_attach(win: c_int, base: *mut c_void, size: isize) {
        state::with(|mpi| attach(mpi, win, base.cast(), size)).on(On::Win(win))
    }

    fn MPI_Win_detach / PMPI_Win_detach(win: c_int, base: *const c_void) {
        state::with(|mpi| detach(mpi, win, base.cast())).on(On::Win(win))
    }
}
