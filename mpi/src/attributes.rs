//! Attributes on communicators (`MPI_Comm_create_keyval`, `set_attr`, `get_attr`,
//! `delete_attr`, `free_keyval`) and the predefined ones of `MPI_COMM_WORLD` (`MPI_TAG_UB`,
//! `MPI_HOST`, `MPI_IO`, `MPI_WTIME_IS_GLOBAL`, `MPI_UNIVERSE_SIZE`, `MPI_LASTUSEDCODE`,
//! `MPI_APPNUM`). Attributes are not copied to a duplicate (as if every keyval's copy function
//! were `MPI_COMM_NULL_COPY_FN`); freeing a communicator deletes them, calling their delete
//! functions.
//!
//! Owns: the keyval table and each communicator's attributes. Must not: interpret an
//! attribute's value (the program's pointer).

use std::ffi::{c_int, c_void};

use crate::abi::*;
use crate::env::out;
use crate::error::{fail, On, OnObject, Res};
use crate::state::{self, CPtr, Callback, Mpi, WinDelete};

/// The values the predefined attributes point to: the largest tag, no host, every rank can do
/// I/O, clocks not synchronized, the universe is the world, the last error code, one app.
struct Predefined {
    tag_ub: c_int,
    host: c_int,
    io: c_int,
    wtime_is_global: c_int,
    lastusedcode: c_int,
    appnum: c_int,
}

static PREDEFINED: Predefined = Predefined {
    tag_ub: c_int::MAX,
    host: MPI_PROC_NULL,
    io: MPI_ANY_SOURCE,
    wtime_is_global: 0,
    lastusedcode: MPI_ERR_LASTCODE,
    appnum: 0,
};

/// The world's size, for `MPI_UNIVERSE_SIZE` (written once, at the first query).
static UNIVERSE: std::sync::OnceLock<c_int> = std::sync::OnceLock::new();

/// A predefined attribute's value pointer, if `keyval` is one.
fn predefined(mpi: &Mpi, keyval: c_int) -> Option<*const c_int> {
    Some(match keyval {
        MPI_TAG_UB => &PREDEFINED.tag_ub,
        MPI_HOST => &PREDEFINED.host,
        MPI_IO => &PREDEFINED.io,
        MPI_WTIME_IS_GLOBAL => &PREDEFINED.wtime_is_global,
        MPI_LASTUSEDCODE => &PREDEFINED.lastusedcode,
        MPI_APPNUM => &PREDEFINED.appnum,
        MPI_UNIVERSE_SIZE => UNIVERSE.get_or_init(|| mpi.size as c_int),
        _ => return None,
    })
}

/// The keyval's delete callback, or `MPI_ERR_KEYVAL`.
fn callback(mpi: &Mpi, keyval: c_int) -> Res<Callback> {
    mpi.comm_keyvals
        .get(&keyval)
        .copied()
        .ok_or_else(|| fail(MPI_ERR_KEYVAL, format!("{keyval:#x} is not a keyval")))
}

/// Takes the value of `keyval` out of `attrs`, if one is set.
fn take(attrs: &mut Vec<(i32, CPtr)>, keyval: c_int) -> Option<CPtr> {
    let at = attrs.iter().position(|(k, _)| *k == keyval)?;
    Some(attrs.remove(at).1)
}

/// The attributes set on the communicator or window `on`, and the delete callback of their
/// `keyval` (the communicators' keyvals or the windows').
fn attrs_of(mpi: &mut Mpi, on: On, keyval: c_int) -> Res<(&mut Vec<(i32, CPtr)>, Callback)> {
    let keyvals = match on {
        On::Comm(_) => &mpi.comm_keyvals,
        On::Win(_) => &mpi.win_keyvals,
    };
    let callback = keyvals
        .get(&keyval)
        .copied()
        .ok_or_else(|| fail(MPI_ERR_KEYVAL, format!("{keyval:#x} is not a keyval")).on(on))?;
    let attrs = match on {
        On::Comm(comm) => &mut mpi.comm_mut(comm).on(on)?.attrs,
        On::Win(win) => &mut mpi.win(win).on(on)?.user_attrs,
    };
    Ok((attrs, callback))
}

/// `MPI_Comm_set_attr` and `MPI_Win_set_attr`: `value` under `keyval` on the object `on`, the
/// keyval's delete function called on the value it replaces.
pub(crate) unsafe fn set_attr(on: On, keyval: c_int, value: *mut c_void) -> Res {
    let old = state::with(|mpi| {
        let (attrs, callback) = attrs_of(mpi, on, keyval)?;
        let old = take(attrs, keyval);
        attrs.push((keyval, CPtr(value.cast())));
        Ok(old.map(|old| (callback, old)))
    })?;
    if let Some(((Some(delete), extra), old)) = old {
        delete(on.handle(), keyval, old.0.cast(), extra.0.cast());
    }
    Ok(())
}

/// `MPI_Comm_delete_attr` and `MPI_Win_delete_attr`: the attribute of `keyval` off the object
/// `on`, the keyval's delete function called on it.
pub(crate) unsafe fn delete_attr(on: On, keyval: c_int) -> Res {
    let old = state::with(|mpi| {
        let (attrs, callback) = attrs_of(mpi, on, keyval)?;
        let value = take(attrs, keyval)
            .ok_or_else(|| fail(MPI_ERR_KEYVAL, "no attribute of this keyval is set").on(on))?;
        Ok((callback, value))
    })?;
    if let ((Some(delete), extra), value) = old {
        delete(on.handle(), keyval, value.0.cast(), extra.0.cast());
    }
    Ok(())
}

/// Calls the delete function of every attribute of a communicator being freed.
pub fn delete_all(comm: c_int, attrs: Vec<(i32, CPtr)>, keyvals: &[(i32, Callback)]) {
    for (keyval, value) in attrs {
        let callback = keyvals.iter().find(|(k, _)| *k == keyval).map(|(_, c)| *c);
        if let Some((Some(delete), extra)) = callback {
            // SAFETY: the program's callback, called as MPI calls it
            unsafe { delete(comm, keyval, value.0.cast(), extra.0.cast()) };
        }
    }
}

export! {
    fn MPI_Comm_create_keyval / PMPI_Comm_create_keyval(
        _copy_fn: *mut c_void,
        delete_fn: Option<WinDelete>,
        keyval: *mut c_int,
        extra_state: *mut c_void,
    ) {
        state::create_keyval(keyval, |mpi| &mut mpi.comm_keyvals, delete_fn, extra_state)
    }

    fn MPI_Comm_free_keyval / PMPI_Comm_free_keyval(keyval: *mut c_int) {
        // attributes still set keep using it until deleted: only the handle goes
        state::free(keyval, "keyval", MPI_ERR_ARG, MPI_KEYVAL_INVALID, |mpi, handle| {
            callback(mpi, handle).map(drop)
        })
    }

    fn MPI_Comm_set_attr / PMPI_Comm_set_attr(comm: c_int, keyval: c_int, attribute_val: *mut c_void) {
        set_attr(On::Comm(comm), keyval, attribute_val)
    }

    fn MPI_Comm_get_attr / PMPI_Comm_get_attr(
        comm: c_int,
        keyval: c_int,
        attribute_val: *mut *mut c_void,
        flag: *mut c_int,
    ) {
        let found = state::with(|mpi| {
            let entry = mpi.comm(comm).on(On::Comm(comm))?;
            if let Some(&(_, value)) = entry.attrs.iter().find(|(k, _)| *k == keyval) {
                return Ok(Some(value.0.cast::<c_void>()));
            }
            if let Some(value) = predefined(mpi, keyval) {
                return Ok(Some(value.cast_mut().cast::<c_void>()));
            }
            callback(mpi, keyval).on(On::Comm(comm))?;
            Ok(None)
        })?;
        if let Some(value) = found {
            out(attribute_val, value)?;
        }
        out(flag, c_int::from(found.is_some()))
    }

    fn MPI_Comm_delete_attr / PMPI_Comm_delete_attr(comm: c_int, keyval: c_int) {
        delete_attr(On::Comm(comm), keyval)
    }
}
