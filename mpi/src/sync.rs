//! How the program's window memory and the client's private copy stay one.
//!
//! In C the window memory the program loads and stores *is* the private copy. The client
//! keeps its own private copy (the separate model's), so the library copies between the two
//! around every synchronization call on the window, where the separate model lets the copies
//! differ or meet:
//! - before the call ([`Win::push_stores`]): every byte of the program's memory that differs
//!   from the shadow (what the library last left there) was stored by the program; it is
//!   stored into the client's private copy (recorded as a store now, at the call);
//! - after the call ([`Mpi::land`], [`Win::pull`]): completed get-like operations write their
//!   results into the program's buffers, then every byte of the client's private copy that
//!   differs from the shadow (a pull at fence, wait, lock of one's own rank, lock_all, sync)
//!   is written into the program's memory.
//!
//! A dynamic window's attached regions (module `dynamic`) are the program's memory each at
//! the private copy's offset of the address the service gave it, synchronized alike.
//!
//! So the separate model's outcomes — a store not yet published, a public update not yet
//! pulled — are the program's exactly as in `.rma`. The program's loads are not seen (no
//! `load` events), and its stores are seen at the next synchronization call, as the bytes
//! that changed.

use onesided_client::Window;

use crate::error::Res;
use crate::state::{CPtr, Mpi, Win};

impl Win {
    /// Stores into the private copy what the program changed since the last call: in the
    /// window's memory, and in each region attached to a dynamic window.
    pub fn push_stores(&mut self) -> Res {
        self.each_memory(push)
    }

    /// Writes into the program's memory what the private copy gained (a pull).
    pub fn pull(&mut self) -> Res {
        self.each_memory(pull)
    }

    /// `step` over the window's memory and each attached region, with its offset in the
    /// private copy and its shadow.
    fn each_memory(&mut self, step: fn(&Window, Memory<'_>) -> Res) -> Res {
        let own = Memory {
            base: self.base,
            size: self.size,
            offset: 0,
            shadow: &mut self.shadow,
        };
        step(&self.window, own)?;
        for region in &mut self.regions {
            step(&self.window, region.memory())?;
        }
        Ok(())
    }
}

/// The program's memory that is a window's (its memory, or a region attached to a dynamic
/// window): `size` bytes at `base`, at `offset` in the private copy, and its `shadow`.
pub(crate) struct Memory<'a> {
    pub base: CPtr,
    pub size: usize,
    pub offset: u64,
    /// What the library last left in it.
    pub shadow: &'a mut [u8],
}

impl Memory<'_> {
    /// The program's bytes.
    ///
    /// # Safety
    /// The program gave them to the window (`MPI_Win_create`, `MPI_Win_attach`) for as long
    /// as they are part of it.
    unsafe fn bytes<'b>(&self) -> &'b mut [u8] {
        if self.size == 0 || self.base.0.is_null() {
            return &mut [];
        }
        std::slice::from_raw_parts_mut(self.base.0, self.size)
    }
}

/// Stores into the private copy what the program changed in `at` since the library last left
/// it as its shadow.
pub(crate) fn push(window: &Window, at: Memory<'_>) -> Res {
    // SAFETY: the window's memory (or an attached region) while it is part of the window
    let memory = unsafe { at.bytes() };
    for (start, end) in differing(memory, at.shadow) {
        window.store_bytes(at.offset + start as u64, &memory[start..end])?;
        at.shadow[start..end].copy_from_slice(&memory[start..end]);
    }
    Ok(())
}

/// Writes into the program's memory `at` what its part of the private copy gained since the
/// library last left it as its shadow.
pub(crate) fn pull(window: &Window, at: Memory<'_>) -> Res {
    if at.size == 0 {
        return Ok(());
    }
    let private = window.inspect_bytes(at.offset, at.size as u64)?;
    // SAFETY: as in `push`
    let memory = unsafe { at.bytes() };
    for (start, end) in differing(&private, at.shadow) {
        memory[start..end].copy_from_slice(&private[start..end]);
        at.shadow[start..end].copy_from_slice(&private[start..end]);
    }
    Ok(())
}

impl Mpi {
    /// Unified model ([`crate::rma::memory_model`]): public and private copy are one memory in
    /// MPI, so every unified window meets its client's copy at every call that can order
    /// processes — a message sent, received or probed, a collective — besides its own
    /// synchronization calls: the program's stores since are published, and what other ranks
    /// changed in its public copy (the service's updates, already in the client's copy when a
    /// message sent after them arrives: one stream carries both, in order) reaches its memory.
    pub fn settle(&mut self) -> Res {
        for win in self.windows.values_mut() {
            if win.attrs.model == crate::abi::MPI_WIN_UNIFIED && !win.freeing {
                win.push_stores()?;
                win.pull()?;
            }
        }
        Ok(())
    }

    /// Writes the results of completed get-like operations on window `handle` (those to
    /// `target`, or all) into the program's buffers.
    pub fn land(&mut self, handle: i32, target: Option<u32>) -> Res {
        let win = self.win(handle)?;
        let landings = std::mem::take(&mut win.landings);
        let (now, later): (Vec<_>, Vec<_>) = landings
            .into_iter()
            .partition(|landing| target.is_none_or(|t| t == landing.target));
        win.landings = later;
        let mut result = Ok(());
        for landing in now {
            if landing.landed.load(std::sync::atomic::Ordering::Acquire) {
                continue;
            }
            match self.runtime.block_on(landing.pending.value()) {
                Ok(bytes) => {
                    // SAFETY: the program's result buffer, valid until the operation
                    // completes, which it just did
                    unsafe { crate::datatype::scatter(landing.into.0, &landing.runs, &bytes) };
                    landing
                        .landed
                        .store(true, std::sync::atomic::Ordering::Release);
                }
                Err(error) => {
                    if result.is_ok() {
                        result = Err(error.into());
                    }
                }
            }
        }
        result
    }
}

/// The maximal ranges where `a` and `b` differ. Compared a block at a time (slice equality is
/// `memcmp`, fast in debug builds too), byte by byte only inside blocks that differ: every
/// synchronization call compares the whole window, mostly unchanged.
fn differing(a: &[u8], b: &[u8]) -> Vec<(usize, usize)> {
    const BLOCK: usize = 256;
    let len = a.len().min(b.len());
    let (a, b) = (&a[..len], &b[..len]);
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for (index, (x, y)) in a.chunks(BLOCK).zip(b.chunks(BLOCK)).enumerate() {
        if x == y {
            continue;
        }
        let at = index * BLOCK;
        for (i, _) in x.iter().zip(y).enumerate().filter(|(_, (p, q))| p != q) {
            match ranges.last_mut() {
                Some((_, end)) if *end == at + i => *end += 1,
                _ => ranges.push((at + i, at + i + 1)),
            }
        }
    }
    ranges
}

#[cfg(test)]
mod tests {
    #[test]
    fn differing_finds_maximal_ranges() {
        assert_eq!(super::differing(&[1, 2, 3, 4], &[1, 0, 0, 4]), vec![(1, 3)]);
        assert_eq!(
            super::differing(&[9, 2, 3, 7], &[1, 2, 3, 4]),
            vec![(0, 1), (3, 4)]
        );
        assert!(super::differing(&[1], &[1]).is_empty());
    }

    #[test]
    fn a_range_across_blocks_is_one_and_unchanged_blocks_have_none() {
        let a = vec![0u8; 1000];
        let mut b = a.clone();
        b[250..270].fill(1);
        b[999] = 2;
        assert_eq!(super::differing(&a, &b), vec![(250, 270), (999, 1000)]);
        assert_eq!(super::differing(&a[..600], &b), vec![(250, 270)]);
        assert!(super::differing(&a, &a).is_empty());
    }
}
