//! The calls that move data: `store`, `load`, and the operations (put, get, accumulate,
//! get_accumulate, fetch_and_op, compare_and_swap, and their request-based forms), through the
//! library's `Window`.
//!
//! Owns: what each of these calls does with the rank's window handle, and a fetched value's
//! variable (pending until its reply is here) and request. Must not: convert between values
//! and bytes itself (`buffers` does, for the explorer too), check a location against a window
//! (the library and the server do, as `RMA_RANGE`), or test or wait for a request (the
//! `requests` calls do).

use bytes::Bytes;
use futures::FutureExt;
use onesided_core::datatype::{encode_all, Value};

use super::super::ast::{Loc, OpCall, OpCallSpec};
use super::super::buffers::{element_offsets, target_op, unpacked};
use super::super::parse::returns_list;
use super::executor::VarSlot;
use super::{RankExecutor, VarValue};
use onesided_client::{Error, Request};

impl RankExecutor {
    /// `store LOC = V[,V...]`: writes the values into this rank's private copy, element by
    /// element (in a region: by address, while this rank has it attached).
    pub(super) fn store(&self, loc: &Loc, values: &[Value]) -> Result<(), Error> {
        let dtype = self.dtypes[loc.window];
        let window = self.window(loc.window)?;
        let offsets = element_offsets(loc, dtype)?;
        let region = match &loc.region {
            Some(region) => Some(self.regions.address(region)?),
            None => None,
        };
        for (offset, value) in offsets.iter().zip(values) {
            let bytes = encode_all(dtype, std::slice::from_ref(value))?;
            match region {
                // by address, inside a region this rank attached
                Some(address) => window.store_at::<u8>(address.saturating_add(*offset), &bytes)?,
                None => window.store_bytes(*offset, &bytes)?,
            }
        }
        Ok(())
    }

    /// `load LOC -> var`: reads this rank's private copy into `var`.
    pub(super) fn load(&mut self, loc: &Loc, var: &str) -> Result<(), Error> {
        let value = self.private(loc)?;
        let dtype = self.dtypes[loc.window];
        self.vars
            .insert(var.to_string(), VarSlot::Ready(VarValue { dtype, value }));
        Ok(())
    }

    /// An operation: issued at once; its fetched value defines its variable once the reply is
    /// here, and a request-based one is active under its name.
    pub(super) fn operation(&mut self, spec: &OpCallSpec) -> Result<(), Error> {
        let dtype = self.dtypes[spec.loc.window];
        let window = self.window(spec.loc.window)?;
        let disp = self.regions.disp(&spec.loc, dtype.size() as u64)?;
        let op = target_op(spec, dtype, disp)?;
        let target = self.in_window(spec.loc.window, spec.target)?;
        let pending = window.issue(target, op, spec.request_based)?;
        if let Some(var) = &spec.var {
            let fetched = pending.clone().value();
            let reply = match (&spec.kind, &spec.origin) {
                // a get's origin layout says where its values land (`unpack`)
                (OpCall::Get, Some(origin)) => {
                    let origin = origin.clone();
                    async move { Ok(unpacked(dtype, &origin, &fetched.await?)?) }.boxed()
                }
                _ => fetched.boxed(),
            };
            self.vars.insert(
                var.clone(),
                VarSlot::Pending {
                    dtype,
                    list: returns_list(spec.kind, &spec.loc, spec.origin.as_deref()),
                    reply: reply.shared(),
                },
            );
        }
        if let Some(name) = &spec.request {
            // rget-like requests complete when the data is here; rput and racc at once
            // (the origin's values were copied when the call returned)
            let request = match &spec.var {
                Some(_) => Request::pending(pending),
                None => Request::complete(Bytes::new()),
            };
            self.activate(name, request, spec.var.clone());
        }
        Ok(())
    }
}
