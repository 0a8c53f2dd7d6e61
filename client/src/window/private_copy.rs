//! The private copy: local loads and stores (they touch only this rank's memory).
//!
//! Owns: `store`, `load` and their byte forms, which mark what they touch (dirty and stored
//! ranges for the next push and the audit, loaded ranges for the audit), the unified model's
//! store published at once (numbered, unanswered), and `inspect_bytes`, a read that records
//! nothing. Must not: pull or wait for anything, push a separate-model store (synchronization
//! calls do), or check anything but the bounds of the private copy.

use super::*;

impl Window {
    /// Stores `values` into the private copy at element `index` (byte offset `index × size of
    /// T`). A local store: in the separate model nothing is published until the next post,
    /// fence, unlock, unlock_all or sync; in the unified model it is sent to the public copy at
    /// once (without waiting for it to arrive).
    ///
    /// # Errors
    /// `MPI_ERR_RMA_RANGE` outside the window.
    pub fn store<T: Element>(&self, index: u64, values: &[T]) -> Result<()> {
        let offset = index.saturating_mul(std::mem::size_of::<T>() as u64);
        self.store_bytes(offset, bytemuck::cast_slice(values))
    }

    /// Stores raw bytes into the private copy at byte `offset`.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_RANGE` outside the window.
    pub fn store_bytes(&self, offset: u64, bytes: &[u8]) -> Result<()> {
        let mut state = self.state();
        let size = state.copy.len();
        let (start, end) = local_range("store", offset, bytes.len() as u64, size)?;
        state.stored.insert(start as u64, end as u64);
        let publish_later = !state.unified || state.gone.is_some();
        state.copy.store(start, bytes, publish_later);
        if publish_later {
            return Ok(());
        }
        // numbered before the lock is let go, so no update can overwrite it meanwhile; its
        // audit event travels before it
        let publish = super::number(&mut state, start as u64, bytes);
        drop(state);
        self.note(Vec::new());
        self.session
            .call_unanswered(Call::Publish(super::v1::Publish {
                window: self.id(),
                ..publish
            }));
        Ok(())
    }

    /// Loads `count` elements of `T` from the private copy at element `index`.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_RANGE` outside the window.
    pub fn load<T: Element>(&self, index: u64, count: u64) -> Result<Vec<T>> {
        let unit = std::mem::size_of::<T>() as u64;
        let offset = index.saturating_mul(unit);
        let len = count.saturating_mul(unit);
        Ok(decode(&self.load_bytes(offset, len)?))
    }

    /// Loads raw bytes from the private copy.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_RANGE` outside the window.
    pub fn load_bytes(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        let mut state = self.state();
        let (start, end) = local_range("load", offset, len, state.copy.len())?;
        state.loaded.insert(start as u64, end as u64);
        Ok(state.copy.bytes()[start..end].to_vec())
    }

    /// Reads raw bytes of the private copy without recording a load: for tools that observe a
    /// program rather than take part in it (the scenario runner's `expect private`).
    ///
    /// # Errors
    /// `MPI_ERR_RMA_RANGE` outside the window.
    pub fn inspect_bytes(&self, offset: u64, len: u64) -> Result<Vec<u8>> {
        let state = self.state();
        let (start, end) = local_range("load", offset, len, state.copy.len())?;
        Ok(state.copy.bytes()[start..end].to_vec())
    }
}
