//! `NativeSession`: this process attached as one rank, over the Rust client's `Session` (its
//! stream, heartbeats and audit shipping are that code's).

use onesided_client::{Claim, NewWindow, Session};
use pyo3::prelude::*;

use crate::admin::{endpoint, seconds_of, token_of};
use crate::window::NativeWindow;
use crate::{str_pairs, wait, InRuntime};

/// One attached rank; `onesided.Session` wraps it.
#[pyclass(frozen, module = "onesided._onesided")]
#[derive(Debug)]
pub(crate) struct NativeSession {
    session: InRuntime<Session>,
}

#[pymethods]
impl NativeSession {
    /// Attaches to `url` as the rank whose token this is. `audit_database_url` makes the
    /// session write its own audit events to the store (otherwise `ONESIDED_AUDIT_DATABASE_URL`
    /// does, unless `ship_audit_events`); `world` and `rank` are a claim the server checks;
    /// `reattach_within` (seconds, 0 = never) bounds how long the session keeps trying to
    /// attach again by itself after its stream was lost (the library's default otherwise).
    #[staticmethod]
    #[pyo3(signature = (
        url, token, *, audit_database_url = None, ship_audit_events = false, world = None,
        rank = None, ca_file = None, connect_timeout = None, timeout = None,
        reattach_within = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn attach(
        py: Python<'_>,
        url: &str,
        token: &str,
        audit_database_url: Option<String>,
        ship_audit_events: bool,
        world: Option<String>,
        rank: Option<u32>,
        ca_file: Option<&str>,
        connect_timeout: Option<f64>,
        timeout: Option<f64>,
        reattach_within: Option<f64>,
    ) -> PyResult<Self> {
        let endpoint = endpoint(py, url, ca_file, connect_timeout, timeout)?;
        let token = token_of(py, token)?;
        let mut builder = Session::builder(endpoint, token).claim(&Claim { world, rank });
        if let Some(seconds) = reattach_within {
            builder = builder.reattach_within(seconds_of(py, "reattach_within", seconds)?);
        }
        if ship_audit_events {
            builder = builder.ship_audit_events();
        }
        if let Some(database) = audit_database_url {
            builder = builder.audit_database_url(database);
        }
        let session = wait(py, builder.attach())?;
        Ok(NativeSession {
            session: InRuntime::new(session),
        })
    }

    #[getter]
    fn world(&self) -> &str {
        self.session.world()
    }

    #[getter]
    fn rank(&self) -> u32 {
        self.session.rank()
    }

    #[getter]
    fn nranks(&self) -> u32 {
        self.session.nranks()
    }

    #[getter]
    fn incarnation(&self) -> u64 {
        self.session.incarnation()
    }

    #[getter]
    fn audited(&self) -> bool {
        self.session.audited()
    }

    #[getter]
    fn persists_audit_events(&self) -> bool {
        self.session.persists_audit_events()
    }

    /// Opens the window `name` of this world.
    fn window(&self, py: Python<'_>, name: &str) -> PyResult<NativeWindow> {
        let window = wait(py, self.session.window(name))?;
        Ok(NativeWindow::new(window))
    }

    /// `MPI_Win_allocate` / `MPI_Win_create` / `MPI_Win_create_dynamic` (by `flavor`) by this
    /// rank (collective over the world's ranks, or over the members of `group`, world ranks in
    /// window-rank order): its own `size` in bytes (0 for `"dynamic"`) and `disp_unit`, the
    /// same `name`, `flavor`, `info` pairs and `group` as every other member.
    #[pyo3(signature = (name, size, disp_unit, flavor = "allocate", info = Vec::new(), model = "separate", group = Vec::new()))]
    #[allow(clippy::too_many_arguments)]
    fn create_window(
        &self,
        py: Python<'_>,
        name: &str,
        size: u64,
        disp_unit: u32,
        flavor: &str,
        info: Vec<(String, String)>,
        model: &str,
        group: Vec<u32>,
    ) -> PyResult<NativeWindow> {
        let flavor = crate::admin::flavor_of(py, flavor)?;
        let model = crate::admin::model_of(py, model)?;
        let pairs = str_pairs(&info);
        let call = NewWindow::new(name, size, disp_unit)
            .flavor(flavor)
            .model(model)
            .info(&pairs)
            .group(&group);
        let window = wait(py, self.session.create(&call))?;
        Ok(NativeWindow::new(window))
    }

    /// `MPI_Barrier` over the world.
    fn barrier(&self, py: Python<'_>) -> PyResult<()> {
        wait(py, self.session.barrier())
    }

    /// Ships what is pending (loads and stores since the last call, deferred calls) and waits
    /// until the server has it, then ends the session (`Session::close`).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let session = Session::clone(&self.session);
        wait(py, session.close())
    }
}
