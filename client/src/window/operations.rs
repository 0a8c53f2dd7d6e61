//! Communication: put, get, accumulate and the rest, their typed and request-based forms.
//!
//! Owns: issuing an operation — validated here whole with core's `TargetOp::validate` (a
//! dynamic window's addresses only turned into offsets: the target checks its regions), the
//! epoch's tag for it from `EpochState::op`, a large contiguous one cut into core's
//! `TargetOp::pieces` whose data is sliced from the caller's buffer (`Carried`), each piece
//! deferred on the session, and one `Pending` that completes when every piece did — and the
//! typed and request-based wrappers. Must not: apply the operation to any copy (the target
//! does), wait for its answer before returning, or send anything itself except through the
//! session.

use super::*;

impl Window {
    /// Issues an operation in the general form: validated here (bounds, types, epoch) and sent
    /// at once, pipelined. Returns its reply: the fetched bytes for get-like operations.
    ///
    /// # Errors
    /// `MPI_ERR_RANK`, `MPI_ERR_RMA_RANGE`, `MPI_ERR_TYPE`, `MPI_ERR_OP`, `MPI_ERR_COUNT`,
    /// `MPI_ERR_RMA_SYNC` — the call is refused and nothing is sent.
    pub fn issue(&self, target: u32, spec: OpSpec, request_based: bool) -> Result<Pending<Bytes>> {
        self.issue_from(target, spec, request_based)
    }

    /// [`Window::issue`], its wire pieces cut from `spec`'s data ([`Carried`]).
    fn issue_from<D: Carried>(
        &self,
        target: u32,
        spec: TargetOp<D>,
        request_based: bool,
    ) -> Result<Pending<Bytes>> {
        self.note(Vec::new());
        let nranks = self.desc.nranks();
        if target >= nranks {
            return Err(RmaError::new(
                ErrorClass::Rank,
                format!("rank {target} is outside the window's group of {nranks} ranks"),
            )
            .into());
        }
        let target_op = spec;
        let dynamic = self.desc.flavor == Flavor::Dynamic;
        let disp_unit = if dynamic {
            1
        } else {
            self.desc.disp_units[target as usize]
        };
        if dynamic {
            // `disp` is an address: only the target knows its regions, and checks it when it
            // applies the operation (MPI_ERR_RMA_RANGE then)
            onesided_core::window::dynamic_offsets(target_op.validate(u64::MAX, 1)?)?;
        } else {
            target_op.validate(self.desc.sizes[target as usize], disp_unit)?;
        }
        let (kind, op) = onesided_proto::op_kind_to_wire(target_op.kind);
        let returns_data = target_op.kind.returns_data();
        // a request completes on one answer, so it travels whole
        let split = (!request_based)
            .then(|| target_op.pieces(disp_unit, PIECE_BYTES))
            .flatten();
        let pieces: Vec<(u64, Layout, std::ops::Range<usize>)> = match split {
            Some(pieces) => pieces
                .into_iter()
                .map(|piece| {
                    (
                        piece.disp,
                        Layout::Contiguous { count: piece.count },
                        piece.data,
                    )
                })
                .collect(),
            None => vec![(
                target_op.disp,
                target_op.layout.clone(),
                0..target_op.data.as_ref().len(),
            )],
        };
        let mut state = self.live_state()?;
        self.renew_refused_locks(&mut state, Some(target));
        let mut replies = Vec::with_capacity(pieces.len());
        for (disp, layout, data) in pieces {
            let plan = state.epoch.op(target, request_based)?;
            let token = match plan.tag {
                AccessTag::Lock => state.tokens[target as usize],
                AccessTag::Fence { .. } | AccessTag::Pscw { .. } => 0,
            };
            replies.push(self.session.defer(Call::Op(v1::RmaOp {
                window: self.id(),
                target,
                kind,
                datatype: target_op.dtype.code(),
                op,
                disp,
                layout: Some(layout_to_wire(&layout)),
                data: target_op.data.cut(data),
                compare: target_op.compare.cut(0..target_op.compare.as_ref().len()),
                request_based,
                token,
            })));
        }
        let reply = match <[_; 1]>::try_from(replies) {
            Ok([reply]) => SharedReply::of(reply),
            Err(replies) => SharedReply::new(async move {
                // every piece is awaited, so the call completes only when all of it did
                let answers = futures::future::join_all(replies).await;
                let mut data = BytesMut::new();
                for answer in answers {
                    data.extend_from_slice(&bytes_of(answer?)?);
                }
                Ok(data.freeze())
            }),
        };
        state.outstanding.push(Outstanding {
            target: Some(target),
            returns_data,
            reply: reply.clone(),
            lock: None,
        });
        Ok(Pending {
            reply,
            decode: |bytes| Bytes::copy_from_slice(bytes),
            session: self.session.clone(),
        })
    }

    fn typed<T: Element>(pending: Pending<Bytes>) -> Pending<Vec<T>> {
        Pending {
            reply: pending.reply,
            decode: |bytes| decode(bytes),
            session: pending.session,
        }
    }

    fn single<T: Element>(pending: Pending<Bytes>) -> Pending<T> {
        Pending {
            reply: pending.reply,
            decode: |bytes| {
                decode::<T>(bytes)
                    .first()
                    .copied()
                    .unwrap_or_else(T::zeroed)
            },
            session: pending.session,
        }
    }

    /// Issued as a request-based call whose request is complete at once (the values were
    /// copied).
    fn ready(&self, target: u32, spec: OpSpec) -> Result<Request<()>> {
        self.issue(target, spec, true)?;
        Ok(Request::complete(()))
    }

    /// Issued as a request-based call whose request completes when the data is here.
    fn awaited<T: Element>(&self, target: u32, spec: OpSpec) -> Result<Request<Vec<T>>> {
        let pending = self.issue(target, spec, true).map(Self::typed)?;
        Ok(Request::pending(pending))
    }

    /// `MPI_Put` of `values` to `target` at displacement `disp` (in the target's disp_units).
    ///
    /// # Errors
    /// As [`Window::issue`].
    pub fn put<T: Element>(&self, target: u32, disp: u64, values: &[T]) -> Result<()> {
        self.issue_from(target, borrowed(OpKind::Put, disp, values), false)
            .map(drop)
    }

    /// `MPI_Put` of `data` as bytes (`MPI_BYTE`) to `target` at displacement `disp` (in the
    /// target's disp_units), from a buffer the caller shares instead of lending: its wire
    /// pieces are slices of `data`, never copied by the client, where [`Window::put`] copies
    /// each 1 MiB piece out of the values it borrows. `data` is held until the pieces are
    /// sent, as MPI holds an origin buffer until the put completes.
    ///
    /// # Errors
    /// As [`Window::issue`].
    pub fn put_bytes(&self, target: u32, disp: u64, data: Bytes) -> Result<()> {
        let count = data.len() as u64;
        let spec = OpSpec::contiguous(OpKind::Put, onesided_core::Datatype::U8, disp, count, data);
        self.issue(target, spec, false).map(drop)
    }

    /// `MPI_Put` with a target layout (vector, indexed, …); `values` are in layout order.
    /// A [`Layout::Struct`]'s blocks carry their own datatypes: put its packed bytes as `u8`
    /// (`pack::<u8>` packs them from a buffer laid out by another struct).
    ///
    /// # Errors
    /// As [`Window::issue`].
    pub fn put_layout<T: Element>(
        &self,
        target: u32,
        disp: u64,
        layout: Layout,
        values: &[T],
    ) -> Result<()> {
        let spec = laid_out::<T>(OpKind::Put, disp, layout, encode(values));
        self.issue(target, spec, false).map(drop)
    }

    /// `MPI_Put` with an origin layout too: the elements of `origin` that `origin_layout`
    /// selects (in its type-map order) go to the elements `target_layout` selects.
    ///
    /// # Errors
    /// As [`Window::issue`]; `MPI_ERR_RMA_RANGE` when `origin_layout` reaches past `origin`.
    pub fn put_from<T: Element>(
        &self,
        target: u32,
        disp: u64,
        target_layout: Layout,
        origin: &[T],
        origin_layout: &Layout,
    ) -> Result<()> {
        let packed = Bytes::from(pack(origin, origin_layout)?);
        let spec = laid_out::<T>(OpKind::Put, disp, target_layout, packed);
        self.issue(target, spec, false).map(drop)
    }

    /// `MPI_Get` of `count` elements.
    ///
    /// # Errors
    /// As [`Window::issue`].
    pub fn get<T: Element>(&self, target: u32, disp: u64, count: u64) -> Result<Pending<Vec<T>>> {
        let spec = OpSpec::contiguous(OpKind::Get, T::DATATYPE, disp, count, Bytes::new());
        self.issue(target, spec, false).map(Self::typed)
    }

    /// `MPI_Get` with a target layout; the result is in layout order. Get a
    /// [`Layout::Struct`]'s packed bytes as `u8` ([`unpack`](crate::unpack) places them).
    ///
    /// # Errors
    /// As [`Window::issue`].
    pub fn get_layout<T: Element>(
        &self,
        target: u32,
        disp: u64,
        layout: Layout,
    ) -> Result<Pending<Vec<T>>> {
        let spec = laid_out::<T>(OpKind::Get, disp, layout, Bytes::new());
        self.issue(target, spec, false).map(Self::typed)
    }

    /// `MPI_Accumulate` of `values` with `op`.
    ///
    /// # Errors
    /// As [`Window::issue`]; `MPI_ERR_OP` for `NO_OP` or an op the datatype does not take.
    pub fn accumulate<T: Element>(
        &self,
        target: u32,
        disp: u64,
        values: &[T],
        op: Op,
    ) -> Result<()> {
        self.issue_from(
            target,
            borrowed(OpKind::Accumulate(op), disp, values),
            false,
        )
        .map(drop)
    }

    /// `MPI_Accumulate` with layouts on both sides: the elements of `origin` that
    /// `origin_layout` selects (in its type-map order) are combined with `op` into the
    /// elements `target_layout` selects. Any layout kind on either side (vector, indexed,
    /// hvector, hindexed, subarray, resized, and a struct whose blocks are all of `T`'s
    /// datatype, as MPI requires).
    ///
    /// # Errors
    /// As [`Window::accumulate`]; `MPI_ERR_RMA_RANGE` when `origin_layout` reaches past
    /// `origin`; `MPI_ERR_TYPE` when either layout is a struct with a block of another
    /// datatype (nothing is sent).
    pub fn accumulate_from<T: Element>(
        &self,
        target: u32,
        disp: u64,
        target_layout: Layout,
        origin: &[T],
        origin_layout: &Layout,
        op: Op,
    ) -> Result<()> {
        origin_layout.check_elements_are(T::DATATYPE)?;
        let packed = Bytes::from(pack(origin, origin_layout)?);
        let spec = laid_out::<T>(OpKind::Accumulate(op), disp, target_layout, packed);
        self.issue(target, spec, false).map(drop)
    }

    /// `MPI_Get_accumulate` with layouts: the origin elements `origin_layout` selects are
    /// combined with `op` into the elements `target_layout` selects; the old contents come
    /// back in `target_layout`'s order ([`unpack`](crate::unpack) puts them where a result
    /// layout says). With `Op::NoOp` the origin is not read, as in MPI.
    ///
    /// # Errors
    /// As [`Window::accumulate_from`].
    pub fn get_accumulate_from<T: Element>(
        &self,
        target: u32,
        disp: u64,
        target_layout: Layout,
        origin: &[T],
        origin_layout: &Layout,
        op: Op,
    ) -> Result<Pending<Vec<T>>> {
        let packed = match op {
            Op::NoOp => Bytes::new(),
            _ => {
                origin_layout.check_elements_are(T::DATATYPE)?;
                Bytes::from(pack(origin, origin_layout)?)
            }
        };
        let spec = laid_out::<T>(OpKind::GetAccumulate(op), disp, target_layout, packed);
        self.issue(target, spec, false).map(Self::typed)
    }

    /// `MPI_Get_accumulate`: the old contents come back, then `op` is applied. With
    /// `Op::NoOp` it is an atomic read of `values.len()` elements (the values are ignored).
    ///
    /// # Errors
    /// As [`Window::issue`].
    pub fn get_accumulate<T: Element>(
        &self,
        target: u32,
        disp: u64,
        values: &[T],
        op: Op,
    ) -> Result<Pending<Vec<T>>> {
        let spec = carrying(OpKind::GetAccumulate(op), disp, values);
        self.issue(target, spec, false).map(Self::typed)
    }

    /// `MPI_Fetch_and_op` on one element.
    ///
    /// # Errors
    /// As [`Window::issue`].
    pub fn fetch_and_op<T: Element>(
        &self,
        target: u32,
        disp: u64,
        value: T,
        op: Op,
    ) -> Result<Pending<T>> {
        let spec = carrying(OpKind::FetchAndOp(op), disp, &[value]);
        self.issue(target, spec, false).map(Self::single)
    }

    /// `MPI_Compare_and_swap`: if the target element equals `compare` (bitwise), it becomes
    /// `value`; the old element comes back either way.
    ///
    /// # Errors
    /// As [`Window::issue`]; `MPI_ERR_TYPE` for floating-point types.
    pub fn compare_and_swap<T: Element>(
        &self,
        target: u32,
        disp: u64,
        compare: T,
        value: T,
    ) -> Result<Pending<T>> {
        let spec = OpSpec {
            compare: encode(&[compare]),
            ..carrying(OpKind::CompareAndSwap, disp, &[value])
        };
        self.issue(target, spec, false).map(Self::single)
    }

    /// `MPI_Rput`: only in a passive-target epoch; locally complete at once (the values were
    /// copied), remotely complete at the next flush or unlock.
    ///
    /// # Errors
    /// As [`Window::issue`]; `MPI_ERR_RMA_SYNC` outside a passive epoch.
    pub fn rput<T: Element>(&self, target: u32, disp: u64, values: &[T]) -> Result<Request<()>> {
        self.ready(target, carrying(OpKind::Put, disp, values))
    }

    /// `MPI_Rget`: its request completes when the data is here.
    ///
    /// # Errors
    /// As [`Window::rput`].
    pub fn rget<T: Element>(&self, target: u32, disp: u64, count: u64) -> Result<Request<Vec<T>>> {
        let spec = OpSpec::contiguous(OpKind::Get, T::DATATYPE, disp, count, Bytes::new());
        self.awaited(target, spec)
    }

    /// `MPI_Raccumulate`.
    ///
    /// # Errors
    /// As [`Window::rput`].
    pub fn raccumulate<T: Element>(
        &self,
        target: u32,
        disp: u64,
        values: &[T],
        op: Op,
    ) -> Result<Request<()>> {
        self.ready(target, carrying(OpKind::Accumulate(op), disp, values))
    }

    /// `MPI_Rget_accumulate`.
    ///
    /// # Errors
    /// As [`Window::rput`].
    pub fn rget_accumulate<T: Element>(
        &self,
        target: u32,
        disp: u64,
        values: &[T],
        op: Op,
    ) -> Result<Request<Vec<T>>> {
        self.awaited(target, carrying(OpKind::GetAccumulate(op), disp, values))
    }
}

/// `values` as a contiguous operation of their datatype. A fetching `NO_OP` carries no data:
/// MPI ignores its origin buffer.
/// Origin data that an operation's wire pieces are cut from ([`TargetOp::pieces`]).
trait Carried: AsRef<[u8]> {
    /// The bytes of `range`, as a message carries them.
    fn cut(&self, range: std::ops::Range<usize>) -> Bytes;
}

impl Carried for Bytes {
    fn cut(&self, range: std::ops::Range<usize>) -> Bytes {
        self.slice(range)
    }
}

/// A call's own values, copied piece by piece into the messages: no buffer of the whole call.
/// (A fresh 64 MiB buffer per put, which glibc always maps anew above its 32 MiB threshold,
/// cost a tenth of a bulk put's client time in page faults; 1 MiB pieces reuse freed memory.)
impl Carried for &[u8] {
    fn cut(&self, range: std::ops::Range<usize>) -> Bytes {
        Bytes::copy_from_slice(&self[range])
    }
}

/// `values` as a contiguous operation's origin data, borrowed: [`Window::issue_from`] copies
/// each piece out of it.
fn borrowed<T: Element>(kind: OpKind, disp: u64, values: &[T]) -> TargetOp<&[u8]> {
    TargetOp::contiguous(
        kind,
        T::DATATYPE,
        disp,
        values.len() as u64,
        bytemuck::cast_slice(values),
    )
}

fn carrying<T: Element>(kind: OpKind, disp: u64, values: &[T]) -> OpSpec {
    let data = match kind {
        OpKind::GetAccumulate(Op::NoOp) | OpKind::FetchAndOp(Op::NoOp) => Bytes::new(),
        _ => encode(values),
    };
    OpSpec::contiguous(kind, T::DATATYPE, disp, values.len() as u64, data)
}

/// An operation on the target elements `layout` selects, of `T`'s datatype.
fn laid_out<T: Element>(kind: OpKind, disp: u64, layout: Layout, data: Bytes) -> OpSpec {
    OpSpec {
        kind,
        dtype: T::DATATYPE,
        disp,
        layout,
        data,
        compare: Bytes::new(),
    }
}
