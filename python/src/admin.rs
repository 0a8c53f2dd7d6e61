//! The admin side: `Admin` (worlds and windows), `WindowSpec`, and what the server answers.

use std::future::Future;
use std::time::Duration;

use onesided_client::{Datatype, Endpoint, ErrorClass, Flavor, MemoryModel, WindowDesc};
use onesided_core::window::ELEMENT_TYPE_KEY;
use pyo3::prelude::*;

use crate::errors::{bad_argument, config, to_py};
use crate::wait;
use crate::window::datatype_of;

/// Where the server is: a URL, with the options every connection takes.
pub(crate) fn endpoint(
    py: Python<'_>,
    url: &str,
    ca_file: Option<&str>,
    connect_timeout: Option<f64>,
    timeout: Option<f64>,
) -> PyResult<Endpoint> {
    let mut endpoint = Endpoint::new(url);
    if let Some(path) = ca_file {
        endpoint = endpoint.ca_file(path).map_err(|error| to_py(py, error))?;
    }
    if let Some(seconds) = connect_timeout {
        endpoint = endpoint.connect_timeout(timeout_of(py, "connect_timeout", seconds)?);
    }
    if let Some(seconds) = timeout {
        endpoint = endpoint.timeout(timeout_of(py, "timeout", seconds)?);
    }
    Ok(endpoint)
}

/// A client of the admin token (`Admin`, `Audit`), connected by `connect` (the client's own
/// `connect`) to the server at `url`, with the options every connection takes and the token
/// checked.
pub(crate) fn admin_connection<'t, C, F>(
    py: Python<'_>,
    url: &str,
    token: &'t str,
    ca_file: Option<&str>,
    connect_timeout: Option<f64>,
    timeout: Option<f64>,
    connect: impl FnOnce(Endpoint, &'t str) -> F,
) -> PyResult<C>
where
    F: Future<Output = onesided_client::Result<C>> + Send,
    C: Send,
{
    let endpoint = endpoint(py, url, ca_file, connect_timeout, timeout)?;
    let token = token_of(py, token)?;
    wait(py, connect(endpoint, token))
}

/// A timeout option given in seconds: a finite number > 0 (a timeout of 0 would fail every
/// call), else `ConfigError` naming the option.
fn timeout_of(py: Python<'_>, option: &str, seconds: f64) -> PyResult<Duration> {
    match Duration::try_from_secs_f64(seconds) {
        Ok(duration) if !duration.is_zero() => Ok(duration),
        _ => Err(config(
            py,
            format!("{option} must be a number of seconds > 0, not {seconds}"),
        )),
    }
}

/// A duration option in seconds that may be 0: a finite number >= 0, else `ConfigError`.
pub(crate) fn seconds_of(py: Python<'_>, option: &str, seconds: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(seconds).map_err(|_| {
        config(
            py,
            format!("{option} must be a number of seconds >= 0, not {seconds}"),
        )
    })
}

/// The token as it goes to the server: printable ASCII, no spaces, not empty; else
/// `ConfigError` (a token read from a file with its newline is the usual mistake).
pub(crate) fn token_of<'t>(py: Python<'_>, token: &'t str) -> PyResult<&'t str> {
    if token.is_empty() {
        return Err(config(py, "the token is empty"));
    }
    if let Some(bad) = token.chars().find(|c| !c.is_ascii_graphic()) {
        return Err(config(
            py,
            format!(
                "the token holds {bad:?}: a token is printable ASCII without spaces or line \
                 ends (onesided.read_token reads a token file)"
            ),
        ));
    }
    Ok(token)
}

/// A world as created: its name and one token per rank (index = rank).
#[pyclass(frozen, get_all, module = "onesided")]
#[derive(Debug)]
pub(crate) struct WorldTokens {
    name: String,
    tokens: Vec<String>,
}

#[pymethods]
impl WorldTokens {
    fn __repr__(&self) -> String {
        // the tokens are secrets: never in a repr
        format!(
            "WorldTokens(name={:?}, ranks={})",
            self.name,
            self.tokens.len()
        )
    }
}

/// One world, as `Admin.list_worlds` shows it.
#[pyclass(frozen, get_all, module = "onesided")]
#[derive(Debug)]
pub(crate) struct WorldSummary {
    name: String,
    ranks: u32,
    windows: u32,
}

impl From<onesided_client::WorldSummary> for WorldSummary {
    fn from(world: onesided_client::WorldSummary) -> Self {
        let onesided_client::WorldSummary {
            name,
            ranks,
            windows,
        } = world;
        WorldSummary {
            name,
            ranks,
            windows,
        }
    }
}

#[pymethods]
impl WorldSummary {
    fn __repr__(&self) -> String {
        format!(
            "WorldSummary(name={:?}, ranks={}, windows={})",
            self.name, self.ranks, self.windows
        )
    }
}

/// What every rank knows about a window.
#[pyclass(frozen, get_all, module = "onesided")]
#[derive(Debug)]
pub(crate) struct WindowDescription {
    /// The server's id of the window.
    id: u64,
    name: String,
    world: String,
    /// `"allocate"`, `"create"` or `"dynamic"`.
    flavor: &'static str,
    /// `"separate"` or `"unified"`.
    model: &'static str,
    /// Each rank's size in bytes.
    sizes: Vec<u64>,
    /// Each rank's disp_unit in bytes.
    disp_units: Vec<u32>,
    /// The element type the window's creator named (info key `onesided_element_type`), a
    /// datatype name such as `"i64"`, or None.
    element_type: Option<&'static str>,
    /// Info key `no_locks`.
    no_locks: bool,
    /// The window's group: the world rank of each window rank.
    group: Vec<u32>,
}

impl From<&WindowDesc> for WindowDescription {
    fn from(desc: &WindowDesc) -> Self {
        WindowDescription {
            id: desc.id,
            name: desc.name.clone(),
            world: desc.world.clone(),
            flavor: desc.flavor.name(),
            model: desc.model.name(),
            sizes: desc.sizes.clone(),
            disp_units: desc.disp_units.clone(),
            element_type: desc.info.element_type.map(Datatype::name),
            no_locks: desc.info.no_locks,
            group: desc.group.clone(),
        }
    }
}

#[pymethods]
impl WindowDescription {
    /// The number of ranks.
    #[getter]
    fn nranks(&self) -> usize {
        self.sizes.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "WindowDescription(id={}, world={:?}, name={:?}, flavor={:?}, sizes={:?}, \
             disp_units={:?}, element_type={:?})",
            self.id,
            self.world,
            self.name,
            self.flavor,
            self.sizes,
            self.disp_units,
            self.element_type
        )
    }
}

/// What a new window looks like: `WindowSpec.of(name, ranks, count, dtype)` for `count`
/// elements per rank, `WindowSpec.bytes(name, ranks, size, disp_unit)` in bytes,
/// `WindowSpec.dynamic(name, ranks)` for a dynamic window, or the constructor for sizes that
/// differ per rank. `info(key, value)` and `flavor(name)` return
/// a new spec.
#[pyclass(frozen, module = "onesided")]
#[derive(Clone, Debug)]
pub(crate) struct WindowSpec {
    spec: onesided_client::WindowSpec,
}

#[pymethods]
impl WindowSpec {
    #[new]
    #[pyo3(signature = (name, sizes, disp_units, info = Vec::new(), flavor = "allocate", model = "separate"))]
    fn new(
        py: Python<'_>,
        name: &str,
        sizes: Vec<u64>,
        disp_units: Vec<u32>,
        info: Vec<(String, String)>,
        flavor: &str,
        model: &str,
    ) -> PyResult<Self> {
        Ok(WindowSpec {
            spec: onesided_client::WindowSpec {
                name: name.to_string(),
                flavor: flavor_of(py, flavor)?,
                model: model_of(py, model)?,
                group: None,
                sizes,
                disp_units,
                info,
            },
        })
    }

    /// `ranks` ranks exposing `count` elements of `dtype` (a datatype name such as `"i64"`)
    /// each, disp_unit = the element's size; the window records `dtype` as its element type.
    #[staticmethod]
    fn of(py: Python<'_>, name: &str, ranks: u32, count: u64, dtype: &str) -> PyResult<Self> {
        let datatype = datatype_of(py, dtype)?;
        let unit = datatype.size() as u64;
        let spec = onesided_client::WindowSpec::bytes(name, ranks, count * unit, unit as u32)
            .info(ELEMENT_TYPE_KEY, datatype.name());
        Ok(WindowSpec { spec })
    }

    /// `ranks` ranks exposing no memory until each attaches regions (`MPI_Win_create_dynamic`:
    /// flavor `"dynamic"`, size 0, disp_unit 1; operations name a region's address as `disp`).
    #[staticmethod]
    fn dynamic(name: &str, ranks: u32) -> Self {
        WindowSpec {
            spec: onesided_client::WindowSpec::bytes(name, ranks, 0, 1).flavor(Flavor::Dynamic),
        }
    }

    /// `ranks` ranks exposing `size` bytes each with `disp_unit`.
    #[staticmethod]
    #[pyo3(signature = (name, ranks, size, disp_unit = 1))]
    fn bytes(name: &str, ranks: u32, size: u64, disp_unit: u32) -> Self {
        WindowSpec {
            spec: onesided_client::WindowSpec::bytes(name, ranks, size, disp_unit),
        }
    }

    /// This spec with one more info key.
    fn info(&self, key: &str, value: &str) -> Self {
        WindowSpec {
            spec: self.spec.clone().info(key, value),
        }
    }

    /// This spec over part of the world: these world ranks, window rank `r` being `group[r]`
    /// (the spec needs one size per member).
    fn group(&self, group: Vec<u32>) -> Self {
        WindowSpec {
            spec: self.spec.clone().group(&group),
        }
    }

    /// This spec with another memory model (`"separate"` or `"unified"`).
    fn model(&self, py: Python<'_>, model: &str) -> PyResult<Self> {
        Ok(WindowSpec {
            spec: self.spec.clone().model(model_of(py, model)?),
        })
    }

    /// This spec with another flavor (`"allocate"`, `"create"` or `"dynamic"`: then each
    /// rank's size is 0, its memory the regions it attaches).
    fn flavor(&self, py: Python<'_>, flavor: &str) -> PyResult<Self> {
        Ok(WindowSpec {
            spec: self.spec.clone().flavor(flavor_of(py, flavor)?),
        })
    }

    #[getter]
    fn name(&self) -> &str {
        &self.spec.name
    }

    #[getter]
    fn sizes(&self) -> Vec<u64> {
        self.spec.sizes.clone()
    }

    #[getter]
    fn disp_units(&self) -> Vec<u32> {
        self.spec.disp_units.clone()
    }

    #[getter]
    fn info_keys(&self) -> Vec<(String, String)> {
        self.spec.info.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "WindowSpec(name={:?}, sizes={:?}, disp_units={:?}, info={:?}, flavor={:?})",
            self.spec.name,
            self.spec.sizes,
            self.spec.disp_units,
            self.spec.info,
            self.spec.flavor.name()
        )
    }
}

pub(crate) fn flavor_of(py: Python<'_>, name: &str) -> PyResult<Flavor> {
    Flavor::parse(name).ok_or_else(|| {
        bad_argument(
            py,
            ErrorClass::Arg,
            format!("flavor {name:?} is not \"allocate\", \"create\" or \"dynamic\""),
        )
    })
}

pub(crate) fn model_of(py: Python<'_>, name: &str) -> PyResult<MemoryModel> {
    MemoryModel::parse(name).ok_or_else(|| {
        bad_argument(
            py,
            ErrorClass::Arg,
            format!("memory model {name:?} is neither \"separate\" nor \"unified\""),
        )
    })
}

/// An admin connection (the admin token): worlds and windows.
#[pyclass(frozen, module = "onesided")]
#[derive(Debug)]
pub(crate) struct Admin {
    admin: onesided_client::Admin,
}

#[pymethods]
impl Admin {
    /// Connects to the server at `url` with the admin token.
    #[new]
    #[pyo3(signature = (url, token, *, ca_file = None, connect_timeout = None, timeout = None))]
    fn connect(
        py: Python<'_>,
        url: &str,
        token: &str,
        ca_file: Option<&str>,
        connect_timeout: Option<f64>,
        timeout: Option<f64>,
    ) -> PyResult<Self> {
        let connect = onesided_client::Admin::connect;
        let admin = admin_connection(py, url, token, ca_file, connect_timeout, timeout, connect)?;
        Ok(Admin { admin })
    }

    /// Creates a world of `ranks` ranks; its tokens are one per rank.
    fn create_world(&self, py: Python<'_>, name: &str, ranks: u32) -> PyResult<WorldTokens> {
        let world = wait(py, self.admin.create_world(name, ranks))?;
        Ok(WorldTokens {
            name: world.name,
            tokens: world.tokens,
        })
    }

    /// Every world.
    fn list_worlds(&self, py: Python<'_>) -> PyResult<Vec<WorldSummary>> {
        let worlds = wait(py, self.admin.list_worlds())?;
        Ok(worlds.into_iter().map(WorldSummary::from).collect())
    }

    /// Deletes a world with its windows.
    fn delete_world(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        wait(py, self.admin.delete_world(name))
    }

    /// Creates a window on `world` as `spec` describes it.
    fn create_window(
        &self,
        py: Python<'_>,
        world: &str,
        spec: &WindowSpec,
    ) -> PyResult<WindowDescription> {
        let desc = wait(py, self.admin.create_window(world, &spec.spec))?;
        Ok(WindowDescription::from(&desc))
    }

    /// Every window of `world`.
    fn list_windows(&self, py: Python<'_>, world: &str) -> PyResult<Vec<WindowDescription>> {
        let windows = wait(py, self.admin.list_windows(world))?;
        Ok(windows.iter().map(WindowDescription::from).collect())
    }

    /// One window.
    fn describe_window(
        &self,
        py: Python<'_>,
        world: &str,
        name: &str,
    ) -> PyResult<WindowDescription> {
        let desc = wait(py, self.admin.describe_window(world, name))?;
        Ok(WindowDescription::from(&desc))
    }

    /// Frees a window that no rank is using.
    fn free_window(&self, py: Python<'_>, world: &str, name: &str) -> PyResult<()> {
        wait(py, self.admin.free_window(world, name))
    }

    /// Ends the live session of world rank `rank` of `world` as a lapsed lease would (its
    /// locks released, the other ranks' fences and waits told it was ended by an operator),
    /// recorded in the audit log; returns the ended session's incarnation.
    fn end_session(&self, py: Python<'_>, world: &str, rank: u32) -> PyResult<u64> {
        wait(py, self.admin.end_session(world, rank))
    }

    /// Takes away the locks the live session of world rank `rank` holds on window `name` of
    /// `world` (its next call in that lock epoch fails with `ErrorClass.RMA_SYNC`, waiters are
    /// granted), recorded in the audit log; returns the session's incarnation and the targets
    /// where a lock was revoked.
    fn revoke_locks(
        &self,
        py: Python<'_>,
        world: &str,
        name: &str,
        rank: u32,
    ) -> PyResult<(u64, Vec<u32>)> {
        wait(py, self.admin.revoke_locks(world, name, rank))
    }
}
