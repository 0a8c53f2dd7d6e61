//! A window's attributes, keyvals, error handlers and hints: `MPI_Win_get_attr` (the
//! predefined `MPI_WIN_BASE`, `SIZE`, `DISP_UNIT`, `CREATE_FLAVOR`, `MODEL` and the program's
//! own), `MPI_Win_create_keyval` and the rest of the attribute calls, the user error handler
//! calls on windows, and `MPI_Win_set_info` / `MPI_Win_get_info`.
//!
//! Owns: the window's attribute storage and callbacks. Must not: synchronize or move data
//! (`set_info` goes through `rma`'s `synchronize` like every call that reaches the service).

use std::ffi::{c_int, c_void};

use crate::abi::*;
use crate::env::out;
use crate::error::{fail, On, OnObject, Res};
use crate::rma::synchronize;
use crate::state::{self, WinAttrs};

/// `MPI_Win_create_errhandler` and `MPI_Comm_create_errhandler` (the same C signature, one
/// table).
pub(crate) unsafe fn create_errhandler(
    function: Option<state::WinErrhandler>,
    errhandler: *mut c_int,
) -> Res {
    let Some(function) = function else {
        return Err(fail(MPI_ERR_ARG, "a null error handler function"));
    };
    state::create(errhandler, |mpi| {
        let handle = mpi.handle(MPI_ERRHANDLER_NULL as u32);
        mpi.win_errhandlers.insert(handle, function);
        Ok(handle)
    })
}

/// `MPI_Win_call_errhandler` and `MPI_Comm_call_errhandler`: `handler` of the object `on`
/// hears `errorcode`.
pub(crate) unsafe fn call_errhandler(handler: c_int, on: On, errorcode: c_int) -> Res {
    if let Some(function) = state::user_errhandler(handler) {
        let (On::Win(mut object) | On::Comm(mut object)) = on;
        let mut code = errorcode;
        function(&mut object, &mut code);
        return Ok(());
    }
    if handler == MPI_ERRORS_RETURN {
        return Ok(());
    }
    Err(fail(errorcode, "the error handler was called").on(on))
}

export! {
    fn MPI_Win_get_attr / PMPI_Win_get_attr(
        win: c_int,
        keyval: c_int,
        attribute_val: *mut c_void,
        flag: *mut c_int,
    ) {
        let value: *mut c_void = state::with(|mpi| {
            let on = On::Win(win);
            let entry = mpi.win(win).on(on)?;
            let attrs: *mut WinAttrs = &mut *entry.attrs;
            Ok(match keyval {
                MPI_WIN_BASE => entry.base.0.cast(),
                MPI_WIN_SIZE => std::ptr::addr_of_mut!((*attrs).size).cast(),
                MPI_WIN_DISP_UNIT => std::ptr::addr_of_mut!((*attrs).disp_unit).cast(),
                MPI_WIN_CREATE_FLAVOR => std::ptr::addr_of_mut!((*attrs).flavor).cast(),
                MPI_WIN_MODEL => std::ptr::addr_of_mut!((*attrs).model).cast(),
                _ => std::ptr::null_mut(),
            })
        })?;
        let predefined = matches!(
            keyval,
            MPI_WIN_BASE | MPI_WIN_SIZE | MPI_WIN_DISP_UNIT | MPI_WIN_CREATE_FLAVOR | MPI_WIN_MODEL
        );
        let value = if predefined {
            Some(value)
        } else {
            state::with(|mpi| {
                let on = On::Win(win);
                if !mpi.win_keyvals.contains_key(&keyval) {
                    return Err(fail(MPI_ERR_KEYVAL, format!("{keyval:#x} is not a keyval")).on(on));
                }
                let entry = mpi.win(win).on(on)?;
                Ok(entry
                    .user_attrs
                    .iter()
                    .find(|(k, _)| *k == keyval)
                    .map(|(_, v)| v.0.cast::<c_void>()))
            })?
        };
        if let Some(value) = value {
            out(attribute_val.cast::<*mut c_void>(), value)?;
        }
        out(flag, c_int::from(value.is_some()))
    }

    fn MPI_Win_set_errhandler / PMPI_Win_set_errhandler(win: c_int, errhandler: c_int) {
        state::with(|mpi| {
            let on = On::Win(win);
            let known = errhandler == MPI_ERRORS_ARE_FATAL
                || errhandler == MPI_ERRORS_RETURN
                || mpi.win_errhandlers.contains_key(&errhandler);
            if !known {
                return Err(fail(MPI_ERR_ARG, format!("{errhandler:#x} is not an error handler")).on(on));
            }
            mpi.win(win).on(on)?.errhandler = errhandler;
            Ok(())
        })
    }

    fn MPI_Win_create_keyval / PMPI_Win_create_keyval(
        _copy_fn: *mut c_void,
        delete_fn: Option<state::WinDelete>,
        keyval: *mut c_int,
        extra_state: *mut c_void,
    ) {
        state::create_keyval(keyval, |mpi| &mut mpi.win_keyvals, delete_fn, extra_state)
    }

    fn MPI_Win_free_keyval / PMPI_Win_free_keyval(keyval: *mut c_int) {
        // attributes still set keep using it until deleted: only the handle goes
        state::free(keyval, "keyval", MPI_ERR_ARG, MPI_KEYVAL_INVALID, |mpi, handle| {
            if !mpi.win_keyvals.contains_key(&handle) {
                return Err(fail(MPI_ERR_KEYVAL, format!("{handle:#x} is not a keyval")));
            }
            Ok(())
        })
    }

    fn MPI_Win_set_attr / PMPI_Win_set_attr(win: c_int, keyval: c_int, attribute_val: *mut c_void) {
        crate::attributes::set_attr(On::Win(win), keyval, attribute_val)
    }

    fn MPI_Win_delete_attr / PMPI_Win_delete_attr(win: c_int, keyval: c_int) {
        crate::attributes::delete_attr(On::Win(win), keyval)
    }

    fn MPI_Win_create_errhandler / PMPI_Win_create_errhandler(
        function: Option<state::WinErrhandler>,
        errhandler: *mut c_int,
    ) {
        create_errhandler(function, errhandler)
    }

    fn MPI_Win_call_errhandler / PMPI_Win_call_errhandler(win: c_int, errorcode: c_int) {
        let handler = state::with(|mpi| Ok(mpi.win(win).on(On::Win(win))?.errhandler))?;
        call_errhandler(handler, On::Win(win), errorcode)
    }

    /// Collective over the window's ranks (the service's `set_info`: every rank must ask for
    /// the same hints; the race checker reads them for the accesses after it).
    fn MPI_Win_set_info / PMPI_Win_set_info(win: c_int, info: c_int) {
        let on = On::Win(win);
        let pairs = state::with(|mpi| {
            mpi.win(win).on(on)?;
            if info == MPI_INFO_NULL {
                return Ok(Vec::new());
            }
            mpi.infos
                .get(&info)
                .cloned()
                .ok_or_else(|| fail(MPI_ERR_INFO, format!("{info:#x} is not an info object")).on(on))
        })?;
        synchronize(win, None, |mpi, window| {
            let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            mpi.block_on(window.set_info(&pairs))
        })
    }

    /// A new info object holding the hints in use (the program frees it).
    fn MPI_Win_get_info / PMPI_Win_get_info(win: c_int, info_used: *mut c_int) {
        state::create(info_used, |mpi| {
            let pairs = mpi.win(win).on(On::Win(win))?.window.get_info();
            Ok(mpi.new_info(pairs))
        })
    }

    fn MPI_Win_get_errhandler / PMPI_Win_get_errhandler(win: c_int, errhandler: *mut c_int) {
        let handler = state::with(|mpi| Ok(mpi.win(win).on(On::Win(win))?.errhandler))?;
        out(errhandler, handler)
    }
}
