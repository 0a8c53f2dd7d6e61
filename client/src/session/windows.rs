//! Opening and creating windows from a session: `Session::window` and `window_zeroed`, and the
//! ranks' own creation (`MPI_Win_allocate`/`MPI_Win_create`, `Session::create` with
//! `NewWindow`).
//!
//! Owns: `NewWindow` (one rank's arguments to a creation), the calls that open or create a
//! window and the handle they give (its description, a dynamic window's regions and a static
//! window's public copy restored into it, a unified window followed), and info pairs as the
//! wire carries them (`info_entries`, `info_to_wire`). Must not: decide whether the ranks'
//! arguments agree or a name is free (the server does), or keep the window's state (the
//! `Window` does; the session only watches it).

use onesided_proto::v1::{self, OpenWindow};

use super::*;
use crate::admin::desc_from_wire;
use crate::window::Window;

/// Info pairs as the wire carries them.
pub(crate) fn info_entries(info: &[(&str, &str)]) -> Vec<v1::InfoEntry> {
    info.iter()
        .map(|(key, value)| v1::InfoEntry {
            key: (*key).to_string(),
            value: (*value).to_string(),
        })
        .collect()
}

/// One rank's arguments to `MPI_Win_allocate`/`MPI_Win_create` ([`Session::create`]): its own
/// size and disp_unit, and what every member gives alike (name, group, flavor, model, info).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewWindow {
    name: String,
    size: u64,
    disp_unit: u32,
    flavor: crate::Flavor,
    model: crate::MemoryModel,
    info: Vec<(String, String)>,
    group: Vec<u32>,
}

impl NewWindow {
    /// Window `name`, this rank exposing `size` bytes with `disp_unit`; allocated, of the
    /// separate model, no info, over the whole world.
    pub fn new(name: &str, size: u64, disp_unit: u32) -> Self {
        NewWindow {
            name: name.to_string(),
            size,
            disp_unit,
            flavor: crate::Flavor::Allocate,
            model: crate::MemoryModel::default(),
            info: Vec::new(),
            group: Vec::new(),
        }
    }

    /// How its memory is made (`MPI_Win_create` or `MPI_Win_allocate`).
    #[must_use]
    pub fn flavor(mut self, flavor: crate::Flavor) -> Self {
        self.flavor = flavor;
        self
    }

    /// Its memory model.
    #[must_use]
    pub fn model(mut self, model: crate::MemoryModel) -> Self {
        self.model = model;
        self
    }

    /// Its info keys.
    #[must_use]
    pub fn info(mut self, info: &[(&str, &str)]) -> Self {
        self.info = info
            .iter()
            .map(|(key, value)| ((*key).to_string(), (*value).to_string()))
            .collect();
        self
    }

    /// The world ranks it spans, window rank r being `group[r]`; empty (the default): the
    /// whole world.
    #[must_use]
    pub fn group(mut self, group: &[u32]) -> Self {
        self.group = group.to_vec();
        self
    }
}

/// Info pairs held as strings, as the wire carries them.
pub(crate) fn info_to_wire(info: &[(String, String)]) -> Vec<v1::InfoEntry> {
    info.iter()
        .map(|(key, value)| v1::InfoEntry {
            key: key.clone(),
            value: value.clone(),
        })
        .collect()
}

impl Session {
    /// Opens the window `name` of this world. A window is opened once per session (its epoch
    /// state lives in the session until it is freed). On a dynamic window the handle knows the
    /// regions this rank attached earlier (in another session, or before a restart) and not
    /// detached: [`Window::regions`] lists them and its private copy holds their public bytes.
    /// The private copy of any window starts as the rank's public copy: what the rank
    /// published before (in another session, or before a restart) and what other ranks put
    /// there.
    ///
    /// # Errors
    /// `MPI_ERR_WIN` for an unknown window; `MPI_ERR_ARG` when it is already open here.
    pub async fn window(&self, name: &str) -> Result<Window> {
        self.open_window(name, true).await
    }

    /// Opens the window `name` as [`Session::window`] does, but with a zeroed private copy
    /// instead of the rank's public copy (a dynamic window's regions still come with their
    /// bytes): for a handle that only reaches other ranks' memory — the CLI's one-shot calls —
    /// which need not carry this rank's bytes.
    ///
    /// # Errors
    /// As [`Session::window`].
    pub async fn window_zeroed(&self, name: &str) -> Result<Window> {
        self.open_window(name, false).await
    }

    async fn open_window(&self, name: &str, with_copy: bool) -> Result<Window> {
        let reply = self
            .call(Call::OpenWindow(OpenWindow {
                name: name.to_string(),
                with_copy,
            }))
            .await?;
        let Reply::Window(mut desc) = reply else {
            return Err(Error::Protocol(
                "open_window answered without a window".into(),
            ));
        };
        // a dynamic window: the regions this rank attached in an earlier session
        let attached = std::mem::take(&mut desc.attached);
        // a static window: its public copy (a unified one's comes by `follow`)
        let public = std::mem::take(&mut desc.public_copy);
        let window = Window::new(self.clone(), desc_from_wire(desc)?)?;
        window.restore_regions(attached)?;
        window.restore_copy(public)?;
        window.follow().await?;
        Ok(window)
    }

    /// `MPI_Win_allocate` (or `MPI_Win_create`, by `flavor`) by this rank: collective over the
    /// world's ranks. Every rank calls it with the same `name`, `flavor`, `model` and `info`,
    /// and its own `size` (bytes) and `disp_unit`; it returns once every rank has, with the
    /// window created and open in this session (logged as an admin's creation is). Ranks may
    /// expose 0 bytes. [`Session::create`] does the same over part of the world.
    ///
    /// # Errors
    /// `MPI_ERR_INFO` for a bad info value (at once), `MPI_ERR_ARG` or `MPI_ERR_INFO` on every
    /// rank when the ranks' flavor, model or info differ, `MPI_ERR_DISP` for a zero disp_unit,
    /// `MPI_ERR_SIZE`/`MPI_ERR_NO_MEM` past the server's limits, `MPI_ERR_ARG` for a name
    /// taken or malformed; then nothing was created. `MPI_ERR_PROC_FAILED` when a rank's
    /// session ends first.
    pub async fn create_window(
        &self,
        name: &str,
        size: u64,
        disp_unit: u32,
        flavor: crate::Flavor,
        model: crate::MemoryModel,
        info: &[(&str, &str)],
    ) -> Result<Window> {
        let call = NewWindow::new(name, size, disp_unit)
            .flavor(flavor)
            .model(model)
            .info(info);
        self.create(&call).await
    }

    /// `MPI_Win_allocate`/`MPI_Win_create` by this rank, with every argument in `call`:
    /// collective over the members of its group (the whole world when it has none), as MPI's
    /// creation over a subcommunicator is. Every member calls it with the same name, group,
    /// flavor, model and info and its own size and disp_unit; it returns once every member
    /// has, with the window open here and numbered in the group ([`Window::rank`] is this
    /// rank's position in it). Ranks outside the group do not take part. Members that give
    /// different groups wait for the members of theirs, as MPI ranks calling a collective on
    /// different communicators do, until a member's session ends.
    ///
    /// # Errors
    /// As [`Session::create_window`]; `MPI_ERR_GROUP` (this call alone) for a group with a
    /// rank twice or outside the world, or without this rank.
    pub async fn create(&self, call: &NewWindow) -> Result<Window> {
        let call = Call::CreateWindow(v1::CreateWindow {
            name: call.name.clone(),
            size: call.size,
            disp_unit: call.disp_unit,
            info: info_to_wire(&call.info),
            flavor: onesided_proto::flavor_to_wire(call.flavor),
            model: onesided_proto::model_to_wire(call.model),
            group: call.group.clone(),
        });
        let Reply::Window(desc) = self.call(call).await? else {
            return Err(Error::Protocol(
                "create_window answered without a window".into(),
            ));
        };
        let window = Window::new(self.clone(), desc_from_wire(desc)?)?;
        window.follow().await?;
        Ok(window)
    }
}
