//! The run's windows: created in the run's fresh world before any rank attaches, by the admin
//! or (`by=ranks`) by the ranks themselves.
//!
//! Owns: how a window declaration becomes a [`WindowSpec`] (flavor, model, sizes and
//! disp_units, a dynamic window's none, the element type in its info) and the sessions that
//! create a `by=ranks` window, closed once it exists. Must not: create or delete the world
//! ([`run`](super::run) does), or keep a session of its own past the creation.

use onesided_core::window::{Flavor, MemoryModel, ELEMENT_TYPE_KEY};
use onesided_core::Datatype;

use super::super::ast::{FlavorDecl, Model, Scenario, WindowDecl};
use super::{CreatedWindow, RunConfig};
use onesided_client::{Admin, Error, NewWindow, Session, WindowSpec};

/// Creates every declared window in `world`, in file order.
pub(super) async fn create_windows(
    scenario: &Scenario,
    config: &RunConfig,
    admin: &Admin,
    world: &str,
    tokens: &[String],
) -> Result<Vec<CreatedWindow>, Error> {
    let mut windows = Vec::new();
    for decl in &scenario.windows {
        let desc = if decl.by_ranks {
            created_by_ranks(config, tokens, decl).await?
        } else {
            admin.create_window(world, &spec_of(decl)).await?
        };
        windows.push(CreatedWindow {
            name: desc.name,
            id: desc.id,
        });
    }
    Ok(windows)
}

/// A dynamic window has no memory at creation and disp_unit 1 (its displacements are
/// addresses, as `MPI_Win_create_dynamic`'s); the others expose their elements, disp_unit the
/// element's size.
fn spec_of(decl: &WindowDecl) -> WindowSpec {
    let dynamic = decl.flavor == FlavorDecl::Dynamic;
    let unit = if dynamic { 1 } else { decl.dtype.size() as u64 };
    WindowSpec {
        name: decl.name.clone(),
        flavor: match decl.flavor {
            FlavorDecl::Create => Flavor::Create,
            FlavorDecl::Allocate => Flavor::Allocate,
            FlavorDecl::Dynamic => Flavor::Dynamic,
        },
        model: match decl.model {
            Model::Separate => MemoryModel::Separate,
            Model::Unified => MemoryModel::Unified,
        },
        sizes: decl.sizes.iter().map(|count| count * unit).collect(),
        disp_units: vec![unit as u32; decl.sizes.len()],
        info: with_element_type(&decl.info, decl.dtype),
        group: decl.group.clone(),
    }
}

/// A window declared `by=ranks`: every rank of its group (the world without one) creates it
/// (`MPI_Win_allocate`, collective over the group), each in a session of its own that ends
/// once the window exists; the run's sessions then open it like any other.
async fn created_by_ranks(
    config: &RunConfig,
    tokens: &[String],
    decl: &WindowDecl,
) -> Result<onesided_client::WindowDesc, Error> {
    let spec = spec_of(decl);
    let info: Vec<(&str, &str)> = spec
        .info
        .iter()
        .map(|(key, value)| (key.as_str(), value.as_str()))
        .collect();
    let group = spec.group.clone().unwrap_or_default();
    // world ranks, in window-rank order
    let members: Vec<usize> = if group.is_empty() {
        (0..tokens.len()).collect()
    } else {
        group.iter().map(|&rank| rank as usize).collect()
    };
    let mut sessions = Vec::new();
    for &member in &members {
        let token = tokens.get(member).ok_or_else(|| {
            Error::Protocol(format!("rank {member} of the group is outside the world"))
        })?;
        sessions.push(Session::attach(&config.endpoint, token).await?);
    }
    let created = futures::future::join_all(sessions.iter().enumerate().map(|(rank, session)| {
        let call = NewWindow::new(&spec.name, spec.sizes[rank], spec.disp_units[rank])
            .flavor(spec.flavor)
            .model(spec.model)
            .info(&info)
            .group(&group);
        async move { session.create(&call).await }
    }))
    .await;
    let mut desc = None;
    for window in created {
        let window = window?;
        desc.get_or_insert_with(|| window.desc().clone());
    }
    for session in sessions {
        session.close().await?;
    }
    desc.ok_or_else(|| Error::Protocol("a world without ranks created a window".into()))
}

/// The declared info keys, plus the window's element type unless the file names one itself.
fn with_element_type(info: &[(String, String)], dtype: Datatype) -> Vec<(String, String)> {
    let mut info = info.to_vec();
    if !info.iter().any(|(key, _)| key == ELEMENT_TYPE_KEY) {
        info.push((ELEMENT_TYPE_KEY.to_string(), dtype.name().to_string()));
    }
    info
}
