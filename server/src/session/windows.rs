//! A window's life in the session: opening it (`open_window`, the session's own call) and
//! changing its info (`MPI_Win_set_info`), collectives of the world (freeing it is a route's
//! step: `route.rs`).
//!
//! Also the ranks' own creation (`MPI_Win_create`/`MPI_Win_allocate`, `create_window`).
//!
//! Owns: a window's entry into and exit from this session — its fresh epoch state and rank in
//! the window's group, the description it answers with (a dynamic window's regions, or the
//! non-zero public bytes when asked), the checks of a creating rank's own part, holding the
//! window's later calls behind `set_info`, and recording `info_set` once the info is in use.
//! Must not: create, change or free the window itself (the world's collective and the
//! registry do), decide whether the ranks' arguments or info agree (core's `Collectives`),
//! or read a public copy except through its actor.

use onesided_core::audit::Event;
use onesided_core::epoch::EpochState;
use onesided_core::target::Input;
use onesided_core::{ErrorClass, RmaError};
use onesided_proto::v1::{self, server_message};
use tokio::sync::oneshot;

use onesided_core::collective::{SharedArgs, WindowPart};

use super::{Control, OpenWindow, Session};
use crate::reply::{Answer, Reply};

impl Session {
    /// Opens window `name` in this session: a fresh epoch state, every rank's actor told that
    /// this rank may take part in its epochs again, then the window's description — on a
    /// dynamic window with the regions this rank attached (in an earlier session, or before a
    /// restart) and their public bytes, so that the new session knows them; on a static window
    /// of the separate model, when `with_copy` asks, with the bytes of this rank's public copy
    /// that are not zero, so that a new handle's private copy starts as the public copy.
    pub(super) async fn open_window(
        &mut self,
        id: u64,
        name: &str,
        with_copy: bool,
    ) -> Result<(), RmaError> {
        let mut desc = self.opened(name).await?;
        if let Some(open) = self.windows.get(&desc.id) {
            // after `Opened` in the actor's inbox; this rank's attach and detach come only
            // from this session, so the regions cannot change before the answer is read
            let actor = &open.entry.ranks[open.me as usize];
            let window = &open.entry.desc;
            if window.flavor == onesided_core::window::Flavor::Dynamic {
                desc.attached = actor
                    .regions()
                    .await?
                    .into_iter()
                    .map(|(base, data)| v1::AttachedRegion {
                        base,
                        data: data.into(),
                    })
                    .collect();
            } else if with_copy && window.model == onesided_core::window::MemoryModel::Separate {
                // what changes after this read reaches the private copy at the next pull
                desc.public_copy = onesided_proto::segments_to_wire(actor.written().await?);
            }
        }
        self.reply(id).send(Ok(server_message::Reply::Window(desc)));
        Ok(())
    }

    /// Opens window `name` in this session (as [`Session::open_window`]) and returns its
    /// description, for the caller to answer with.
    async fn opened(&mut self, name: &str) -> Result<v1::WindowDescription, RmaError> {
        let entry = self
            .registry
            .window(&self.member.world, name)
            .ok_or_else(|| onesided_core::window::unknown_window(name))?;
        // ranks are numbered in the window's group
        let me = entry.desc.member(self.member.rank)?;
        if self.windows.contains_key(&entry.desc.id) {
            // the epoch state (and PSCW generations) live on: a second handle with a fresh
            // private copy would silently diverge from it
            return Err(RmaError::new(
                ErrorClass::Arg,
                format!("window {name} is already open in this session"),
            ));
        }
        let desc = onesided_proto::desc_to_wire(&entry.now());
        let epoch = EpochState::new(me, entry.desc.nranks(), entry.desc.info.no_locks);
        let window_id = entry.desc.id;
        for actor in &entry.ranks {
            actor.send(Input::Opened { origin: me }).await?;
        }
        self.windows.insert(
            window_id,
            OpenWindow {
                entry,
                me,
                epoch,
                next_cseq: 1,
                fenced: None,
            },
        );
        self.log(window_id, Event::Attach, None).await;
        Ok(desc)
    }

    /// `MPI_Win_create`/`MPI_Win_allocate` by this rank: its part (checked here: a bad flavor,
    /// model or info fails at once) goes to the world's collective, which creates the window
    /// once every rank called with matching arguments; then it opens here
    /// ([`Session::created`]).
    pub(super) async fn create_window(
        &mut self,
        id: u64,
        create: v1::CreateWindow,
    ) -> Result<(), RmaError> {
        let mut info: Vec<(String, String)> = create
            .info
            .into_iter()
            .map(|entry| (entry.key, entry.value))
            .collect();
        info.sort();
        onesided_core::window::WindowInfo::parse(
            info.iter()
                .map(|(key, value)| (key.as_str(), value.as_str())),
        )?;
        let flavor = onesided_proto::flavor_from_wire(create.flavor)?;
        onesided_core::window::WindowDesc::validate_flavor_part(
            flavor,
            self.member.rank,
            create.size,
            create.disp_unit,
        )?;
        let part = WindowPart {
            size: create.size,
            disp_unit: create.disp_unit,
            shared: SharedArgs {
                flavor,
                model: onesided_proto::model_from_wire(create.model)?,
                info,
            },
        };
        let reply = self.reply(id);
        let (sender, answer) = oneshot::channel();
        self.member
            .collectives
            .propose_window(
                &create.name,
                self.member.rank,
                create.group,
                part,
                Reply::Session(sender),
            )
            .await?;
        self.back_from_world(Control::Created(create.name), reply, answer);
        Ok(())
    }

    /// The ranks' window was created (or refused): opened here, the call is answered with
    /// its description.
    pub(super) async fn created(&mut self, name: String, reply: Reply, answer: Answer) {
        if let Err(error) = answer {
            reply.send(Err(error));
            return;
        }
        let opened = self.opened(&name).await;
        reply.send(opened.map(server_message::Reply::Window));
    }

    /// `MPI_Win_set_info`: the window's info with the caller's keys set ([`onesided_core::window::WindowInfo::updated`];
    /// a bad value fails at once) is proposed to the world's collective, which answers once
    /// every rank called and puts the info in place when all asked for the same
    /// ([`Session::info_set`] records it and answers).
    pub(super) async fn set_info(&mut self, id: u64, set: v1::SetInfo) -> Result<(), RmaError> {
        let Some(open) = self.windows.get(&set.window) else {
            return Err(RmaError::new(
                ErrorClass::Win,
                format!("window {} is not open in this session", set.window),
            ));
        };
        let pairs: Vec<(&str, &str)> = set
            .info
            .iter()
            .map(|entry| (entry.key.as_str(), entry.value.as_str()))
            .collect();
        let info = open.entry.now().info.updated(pairs.iter().copied())?;
        let group = open.entry.desc.group.clone();
        // the next calls see the info this call sets: they wait for its answer
        let reply = self.reply(id);
        let reply = self.hold(set.window, reply);
        let (sender, answer) = oneshot::channel();
        self.member
            .collectives
            .propose_info(
                set.window,
                self.member.rank,
                info,
                group,
                Reply::Session(sender),
            )
            .await?;
        self.back_from_world(Control::InfoSet(set.window), reply, answer);
        Ok(())
    }

    /// `MPI_Win_set_info` returned: the info in use from here on is recorded at this rank,
    /// and the call answered once it is in the log (sync durability).
    pub(super) async fn info_set(&mut self, window: u64, reply: Reply, answer: Answer) {
        let Some(open) = self.windows.get(&window).filter(|_| answer.is_ok()) else {
            reply.send(answer);
            return;
        };
        let info = open.entry.now().info.to_pairs().into_iter().collect();
        self.log(window, Event::InfoSet { info }, Some(reply)).await;
    }
}
