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
//! So the separate model's outcomes — a store not yet published, a public update not yet
//! pulled — are the program's exactly as in `.rma`. The program's loads are not seen (no
//! `load` events), and its stores are seen at the next synchronization call, as the bytes
//! that changed.

use crate::error::Res;
use crate::state::{Mpi, Win};

impl Win {
    /// The program's window memory.
    fn memory(&mut self) -> &mut [u8] {
        if self.size == 0 || self.base.0.is_null() {
            return &mut [];
        }
        // SAFETY: the program gave `size` bytes at `base` for the window's lifetime
        unsafe { std::slice::from_raw_parts_mut(self.base.0, self.size) }
    }

    /// Stores into the private copy what the program changed since the last call.
    pub fn push_stores(&mut self) -> Res {
        let mut shadow = std::mem::take(&mut self.shadow);
        let memory: Vec<u8> = self.memory().to_vec();
        let mut result = Ok(());
        for (start, end) in differing(&memory, &shadow) {
            if let Err(error) = self.window.store_bytes(start as u64, &memory[start..end]) {
                result = Err(error.into());
                break;
            }
            shadow[start..end].copy_from_slice(&memory[start..end]);
        }
        self.shadow = shadow;
        result
    }

    /// Writes into the program's memory what the private copy gained (a pull).
    pub fn pull(&mut self) -> Res {
        if self.size == 0 {
            return Ok(());
        }
        let private = self.window.inspect_bytes(0, self.size as u64)?;
        let mut shadow = std::mem::take(&mut self.shadow);
        let memory = self.memory();
        for (start, end) in differing(&private, &shadow) {
            memory[start..end].copy_from_slice(&private[start..end]);
            shadow[start..end].copy_from_slice(&private[start..end]);
        }
        self.shadow = shadow;
        Ok(())
    }
}

impl Mpi {
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

/// The maximal ranges where `a` and `b` differ.
fn differing(a: &[u8], b: &[u8]) -> Vec<(usize, usize)> {
    let mut ranges = Vec::new();
    let mut start = None;
    for i in 0..a.len().min(b.len()) {
        match (a[i] != b[i], start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                ranges.push((s, i));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        ranges.push((s, a.len().min(b.len())));
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
}
