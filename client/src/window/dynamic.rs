//! Dynamic windows (`MPI_Win_create_dynamic`): attaching and detaching regions of this rank's
//! memory, and local loads and stores by address.
//!
//! This rank's memory is laid out as its target lays out the public copy: a region at address
//! `a` is the bytes at offset `a - DYNAMIC_BASE` of the private copy, which grows as regions are
//! attached (and keeps the bytes of detached ones), so pushes and pulls stay segments by offset.
//!
//! Owns: `attach`, `attach_at` and `detach` on this rank's side, the regions this handle knows
//! (`regions`, and those a new session's `OpenWindow` answer names with their bytes,
//! `restore_regions`), and loads and stores by address inside one attached region. Must not:
//! decide where a region may go or whether another rank's access reaches one (the target does,
//! at attach and at apply time), or take the server's bytes budget.

use super::*;

impl Window {
    /// `MPI_Win_attach`: attaches a region of `size` bytes of this rank's memory to the
    /// (dynamic) window and returns its address, which other ranks use as the `disp` of their
    /// operations (the address of the region's first byte; disp_unit 1). A local call: no epoch
    /// is needed, and the other ranks learn the address from this rank. A region of 0 bytes is
    /// allowed, as in MPI: it has an address to detach, and no access reaches it.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_FLAVOR` on a window not of flavor dynamic, `MPI_ERR_RMA_ATTACH` when the rank's attached memory would pass the server's limit.
    pub async fn attach(&self, size: u64) -> Result<u64> {
        self.attach_region(size, 0).await
    }

    /// `MPI_Win_attach` of a region at the address `at` (MPI attaches memory the program
    /// owns, at its own address).
    ///
    /// # Errors
    /// As [`Window::attach`]; `MPI_ERR_RMA_ATTACH` when the region overlaps one attached.
    pub async fn attach_at(&self, at: u64, size: u64) -> Result<u64> {
        if at == 0 {
            return Err(
                RmaError::new(ErrorClass::RmaAttach, "address 0 cannot be attached").into(),
            );
        }
        self.attach_region(size, at).await
    }

    async fn attach_region(&self, size: u64, at: u64) -> Result<u64> {
        self.note(Vec::new());
        let reply = self.session.call(Call::Attach(v1::Attach {
            window: self.id(),
            size,
            at,
        }));
        let base = match reply.await? {
            Reply::Region(region) => region.base,
            other => return Err(Error::Protocol(format!("expected a region, got {other:?}"))),
        };
        let offset = base.checked_sub(DYNAMIC_BASE).ok_or_else(|| {
            Error::Protocol(format!("the server attached a region at address {base:#x}"))
        })?;
        let mut state = self.state();
        let end = (offset + size) as usize;
        state.copy.grow(end);
        if size > 0 {
            // a region of no bytes holds nothing to load or store, and never takes the key
            // of one that does
            state.regions.insert(offset, size);
        }
        Ok(base)
    }

    /// `MPI_Win_detach`: the region attached at `base` is no longer part of the window (remote
    /// operations on it fail with `MPI_ERR_RMA_RANGE`). A local call.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_ATTACH` when no region attached by this rank starts at `base`,
    /// `MPI_ERR_RMA_FLAVOR` on a window not of flavor dynamic.
    pub async fn detach(&self, base: u64) -> Result<()> {
        self.note(Vec::new());
        let reply = self.session.call(Call::Detach(v1::Detach {
            window: self.id(),
            base,
        }));
        match reply.await? {
            Reply::Done(_) => {}
            other => return Err(Error::Protocol(format!("expected done, got {other:?}"))),
        }
        self.state()
            .regions
            .remove(&base.saturating_sub(DYNAMIC_BASE));
        Ok(())
    }

    /// The regions this rank attached before this handle was opened (the server's answer to
    /// opening a dynamic window): known as if attached here, their bytes in the private copy
    /// as the public copy has them.
    ///
    /// # Errors
    /// A region the server describes at an address below [`DYNAMIC_BASE`], or overlapping
    /// another, is a protocol error.
    pub(crate) fn restore_regions(&self, attached: Vec<v1::AttachedRegion>) -> Result<()> {
        let mut state = self.state();
        for region in attached {
            let size = region.data.len() as u64;
            let offset = region
                .base
                .checked_sub(DYNAMIC_BASE)
                .filter(|offset| {
                    let before = state
                        .regions
                        .range(..offset.saturating_add(size))
                        .next_back();
                    size > 0 && before.is_none_or(|(&start, &len)| start + len <= *offset)
                })
                .ok_or_else(|| {
                    Error::Protocol(format!(
                        "the server described a region of {size} bytes at address {:#x}",
                        region.base
                    ))
                })?;
            state.copy.place(offset as usize, &region.data);
            state.regions.insert(offset, size);
        }
        Ok(())
    }

    /// This rank's attached regions of a dynamic window: (address, size), by address.
    pub fn regions(&self) -> Vec<(u64, u64)> {
        self.state()
            .regions
            .iter()
            .map(|(&offset, &size)| (DYNAMIC_BASE + offset, size))
            .collect()
    }

    /// Stores `values` at `address` of a region this rank attached (a local store, as
    /// [`Window::store`]).
    ///
    /// # Errors
    /// `MPI_ERR_RMA_RANGE` unless the bytes lie inside one attached region.
    pub fn store_at<T: Element>(&self, address: u64, values: &[T]) -> Result<()> {
        let bytes: &[u8] = bytemuck::cast_slice(values);
        let offset = self.attached_offset("store", address, bytes.len() as u64)?;
        self.store_bytes(offset, bytes)
    }

    /// Loads `count` elements of `T` at `address` of a region this rank attached.
    ///
    /// # Errors
    /// `MPI_ERR_RMA_RANGE` unless the bytes lie inside one attached region.
    pub fn load_at<T: Element>(&self, address: u64, count: u64) -> Result<Vec<T>> {
        let len = count.saturating_mul(std::mem::size_of::<T>() as u64);
        let offset = self.attached_offset("load", address, len)?;
        Ok(decode(&self.load_bytes(offset, len)?))
    }

    /// The offset in this rank's memory of `len` bytes at `address`, inside one region.
    fn attached_offset(&self, what: &str, address: u64, len: u64) -> Result<u64> {
        let state = self.state();
        let offset = address.checked_sub(DYNAMIC_BASE);
        let inside = offset.is_some_and(|offset| {
            state
                .regions
                .range(..=offset)
                .next_back()
                .is_some_and(|(&start, &size)| {
                    offset
                        .checked_add(len)
                        .is_some_and(|end| end <= start + size)
                })
        });
        match offset {
            Some(offset) if inside => Ok(offset),
            _ => Err(RmaError::new(
                ErrorClass::RmaRange,
                format!(
                    "local {what} of {len} bytes at address {address:#x} is not inside a region \
                     this rank attached"
                ),
            )
            .into()),
        }
    }
}
