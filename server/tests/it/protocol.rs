//! The protocol's promises: lazy locks travel as one message, NOPRECEDE fences do not
//! synchronize, per-rank shapes are honoured, and every datatype × op reaches the public copy
//! exactly as core computes it.

use bytes::Bytes;
use onesided_client::{
    Assert, Block, ByteBlock, Datatype, ErrorClass, IntIndex, Layout, LockType, Op, OpKind, OpSpec,
    Order, StructBlock, WindowSpec,
};
use onesided_core::reduce::{check_op, reduce};

use crate::{unique, Fixture};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_ops_unlock_to_one_target_is_one_message_and_one_reply() {
    let (_fixture, w) = Fixture::with_window::<i64>(2, 4).await;
    let session = w[0].session();
    let before = session.wire_stats();
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    w[0].put(1, 0, &[1i64, 2]).unwrap();
    w[0].accumulate(1, 2, &[5i64], Op::Sum).unwrap();
    let old = w[0].fetch_and_op(1, 3, 7i64, Op::Replace).unwrap();
    let got = w[0].get::<i64>(1, 0, 4).unwrap();
    w[0].unlock(1).await.unwrap();
    let after = session.wire_stats();
    assert_eq!(after.sent - before.sent, 1, "one message to the server");
    assert_eq!(after.received - before.received, 1, "one reply");
    assert_eq!(old.value().await.unwrap(), 0);
    assert_eq!(
        got.value().await.unwrap(),
        vec![1, 2, 5, 7],
        "applied in order"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_noprecede_fence_is_not_a_barrier() {
    let (_fixture, w) = Fixture::with_window::<i64>(2, 1).await;
    // rank 1 has not called any fence: rank 0's NOPRECEDE fence returns anyway
    w[0].fence(Assert::NOPRECEDE).await.unwrap();
    w[0].put(1, 0, &[3i64]).unwrap();
    // … but its put is not applied before rank 1 enters its fence
    w[1].lock(LockType::Shared, 1, 0).await.unwrap();
    let early = w[1].get::<i64>(1, 0, 1).unwrap();
    w[1].unlock(1).await.unwrap();
    assert_eq!(early.value().await.unwrap(), vec![0]);
    tokio::join!(
        async {
            w[0].fence(0).await.unwrap();
        },
        async {
            w[1].fence(Assert::NOPRECEDE).await.unwrap();
            w[1].fence(0).await.unwrap();
        }
    );
    assert_eq!(w[1].load::<i64>(0, 1).unwrap(), vec![3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_rank_sizes_and_disp_units() {
    let fixture = Fixture::new(3).await;
    let spec = WindowSpec {
        sizes: vec![16, 0, 8],
        disp_units: vec![4, 1, 8],
        ..WindowSpec::bytes(&unique("w"), 3, 0, 1)
    };
    let w = fixture.window(spec).await;
    assert_eq!(w[1].load_bytes(0, 0).unwrap(), Vec::<u8>::new());
    w[0].lock_all(0).await.unwrap();
    let refused = w[0].put(1, 0, &[1u8]).unwrap_err();
    assert_eq!(
        refused.class(),
        Some(ErrorClass::RmaRange),
        "rank 1 exposes nothing"
    );
    w[0].put::<u8>(1, 0, &[]).unwrap();
    // rank 2's disp_unit is 8: displacement 1 is byte 8, past its 8 bytes
    assert_eq!(
        w[0].put(2, 1, &[1u8]).unwrap_err().class(),
        Some(ErrorClass::RmaRange)
    );
    w[0].put(2, 0, &[9u32, 10]).unwrap();
    // rank 0's disp_unit is 4: displacement 3 is byte 12
    w[0].put(0, 3, &[77u32]).unwrap();
    w[0].unlock_all().await.unwrap();
    w[2].lock(LockType::Exclusive, 2, 0).await.unwrap();
    assert_eq!(w[2].load::<u32>(0, 2).unwrap(), vec![9, 10]);
    w[2].unlock(2).await.unwrap();
    w[0].lock(LockType::Exclusive, 0, 0).await.unwrap();
    assert_eq!(w[0].load::<u32>(3, 1).unwrap(), vec![77]);
    w[0].unlock(0).await.unwrap();
}

fn bytes_for(dtype: Datatype, seed: u64, count: usize) -> Vec<u8> {
    // small deterministic pseudo-random bytes; bool and pairs keep their domains honest enough
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..count * dtype.size())
        .map(|i| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
            let byte = (state >> 33) as u8;
            if dtype.is_bool() {
                byte & 1
            } else if dtype.is_float() && i % dtype.size() == dtype.size() - 1 {
                // keep exponents moderate: no NaN/inf surprises in the reference
                byte & 0x3f
            } else {
                byte
            }
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_datatype_and_op_is_applied_as_core_computes_it() {
    let fixture = Fixture::new(2).await;
    let count = 4usize;
    let w = fixture
        .window(WindowSpec::bytes(&unique("w"), 2, 64, 1))
        .await;
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    let mut checked = 0;
    for dtype in Datatype::ALL {
        for op in Op::ALL {
            if op == Op::NoOp || check_op(op, dtype).is_err() {
                let refused = w[0]
                    .issue(
                        1,
                        OpSpec {
                            kind: OpKind::Accumulate(op),
                            dtype,
                            disp: 0,
                            layout: Layout::Contiguous { count: 1 },
                            data: Bytes::from(bytes_for(dtype, 1, 1)),
                            compare: Bytes::new(),
                        },
                        false,
                    )
                    .unwrap_err();
                assert_eq!(refused.class(), Some(ErrorClass::Op), "{op} on {dtype}");
                continue;
            }
            let initial = bytes_for(dtype, checked as u64 * 2 + 1, count);
            let origin = bytes_for(dtype, checked as u64 * 2 + 2, count);
            let spec = |kind, data: &[u8]| OpSpec {
                kind,
                dtype,
                disp: 0,
                layout: Layout::Contiguous {
                    count: count as u64,
                },
                data: Bytes::copy_from_slice(data),
                compare: Bytes::new(),
            };
            w[0].issue(1, spec(OpKind::Put, &initial), false).unwrap();
            let old = w[0]
                .issue(1, spec(OpKind::GetAccumulate(op), &origin), false)
                .unwrap();
            let now = w[0].issue(1, spec(OpKind::Get, &[]), false).unwrap();
            w[0].flush(1).await.unwrap();
            let mut expected = initial.clone();
            reduce(op, dtype, &mut expected, &origin).unwrap();
            assert_eq!(
                old.value().await.unwrap(),
                initial,
                "{op} on {dtype}: old value"
            );
            assert_eq!(
                now.value().await.unwrap(),
                expected,
                "{op} on {dtype}: result"
            );
            checked += 1;
        }
    }
    w[0].unlock(1).await.unwrap();
    assert!(checked > 80, "only {checked} combinations were valid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn maxloc_with_a_typed_pair() {
    let (_fixture, w) = Fixture::with_window::<IntIndex>(3, 1).await;
    for (rank, window) in w.iter().enumerate() {
        let value = [5, 9, 9][rank];
        window.lock(LockType::Shared, 0, 0).await.unwrap();
        window
            .accumulate(
                0,
                0,
                &[IntIndex {
                    value,
                    index: rank as i32,
                }],
                Op::MaxLoc,
            )
            .unwrap();
        window.unlock(0).await.unwrap();
    }
    w[0].lock(LockType::Shared, 0, 0).await.unwrap();
    let best = w[0].load::<IntIndex>(0, 1).unwrap();
    w[0].unlock(0).await.unwrap();
    assert_eq!(
        best,
        vec![IntIndex { value: 9, index: 1 }],
        "ties keep the lower index"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nocheck_locks_do_not_wait_for_each_other() {
    let (_fixture, w) = Fixture::with_window::<i64>(3, 2).await;
    w[1].lock(LockType::Exclusive, 0, Assert::NOCHECK)
        .await
        .unwrap();
    w[1].put(0, 0, &[1i64]).unwrap();
    w[1].flush(0).await.unwrap();
    // the user promised no conflicting access: a second nocheck lock is not queued behind
    w[2].lock(LockType::Exclusive, 0, Assert::NOCHECK)
        .await
        .unwrap();
    w[2].put(0, 1, &[2i64]).unwrap();
    w[2].flush(0).await.unwrap();
    w[2].unlock(0).await.unwrap();
    w[1].unlock(0).await.unwrap();
    w[0].lock(LockType::Shared, 0, 0).await.unwrap();
    assert_eq!(w[0].load::<i64>(0, 2).unwrap(), vec![1, 2]);
    w[0].unlock(0).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn origin_layouts_pack_and_unpack() {
    let (_fixture, w) = Fixture::with_window::<i32>(2, 8).await;
    let origin: Vec<i32> = (0..10).collect();
    // origin: every other element (0, 2, 4); target: elements 6, 7 and 0
    let origin_layout = Layout::Vector {
        count: 3,
        blocklen: 1,
        stride: 2,
    };
    let target_layout = Layout::Indexed {
        blocks: vec![Block { disp: 6, len: 2 }, Block { disp: 0, len: 1 }],
    };
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    w[0].put_from(1, 0, target_layout, &origin, &origin_layout)
        .unwrap();
    let back = w[0].get::<i32>(1, 0, 8).unwrap();
    w[0].unlock(1).await.unwrap();
    let back = back.value().await.unwrap();
    assert_eq!(back, vec![4, 0, 0, 0, 0, 0, 0, 2]);
    let mut buffer = vec![-1i32; 6];
    let picked = [back[6], back[7], back[0]];
    onesided_client::unpack(&picked, &mut buffer, &origin_layout).unwrap();
    assert_eq!(buffer, vec![0, -1, 2, -1, 4, -1]);
    let too_short = onesided_client::unpack(&picked, &mut buffer[..3], &origin_layout).unwrap_err();
    assert_eq!(too_short.class(), Some(ErrorClass::RmaRange));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_and_a_get_larger_than_grpcs_default_message_size() {
    let fixture = Fixture::new(2).await;
    // 6 MiB: past tonic's default limit of 4 MiB per message
    let count = 768 * 1024u64;
    let w = fixture.window_of::<u64>(count).await;
    let values: Vec<u64> = (0..count).map(|i| i * 7 + 1).collect();
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    w[0].put(1, 0, &values).unwrap();
    w[0].flush(1).await.unwrap();
    let back = w[0].get::<u64>(1, 0, count).unwrap();
    w[0].unlock(1).await.unwrap();
    assert!(
        back.value().await.unwrap() == values,
        "6 MiB came back changed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_transfers_travel_in_pieces_and_arrive_whole() {
    let server = crate::spawn_server_with(|config| {
        config.durability = onesided_server::audit::Durability::Off;
    })
    .await;
    let fixture = crate::Fixture::on(server, 2).await;
    // 3 MiB of i64 at displacement 5 of a 3-byte disp_unit: pieces must start on a byte that
    // is both a whole element and a whole number of units in
    let count = 3 << 17;
    let spec = WindowSpec {
        sizes: vec![0, 15 + 8 * count + 9],
        disp_units: vec![1, 3],
        ..WindowSpec::bytes(&unique("w"), 2, 0, 1)
    };
    let w = fixture.window(spec).await;
    let values: Vec<i64> = (0..count as i64).map(|i| i * 7 - 3).collect();
    let session = w[0].session();
    let before = session.wire_stats();
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    w[0].put(1, 5, &values).unwrap();
    w[0].unlock(1).await.unwrap();
    let sent = session.wire_stats().sent - before.sent;
    // 4 pieces of at most 1 MiB; as one message it would be [lock, put] then [unlock]
    assert!(sent >= 3, "a 3 MiB put streams in pieces: {sent} messages");

    w[0].lock(LockType::Shared, 1, 0).await.unwrap();
    w[0].accumulate(1, 5, &values, Op::Sum).unwrap();
    let whole = w[0].get::<u8>(1, 0, 15 + 8 * count + 9).unwrap();
    w[0].unlock(1).await.unwrap();
    let whole = whole.value().await.unwrap();
    assert_eq!(&whole[..15], &[0; 15], "nothing before the displacement");
    assert_eq!(
        &whole[15 + 8 * count as usize..],
        &[0; 9],
        "nothing after the data"
    );
    let doubled: Vec<i64> = whole[15..15 + 8 * count as usize]
        .chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let expected: Vec<i64> = values.iter().map(|v| v * 2).collect();
    assert!(
        doubled == expected,
        "put then accumulate of every piece, in order"
    );

    // a get that spans pieces gives the elements in order
    w[0].lock(LockType::Shared, 1, 0).await.unwrap();
    let got = w[0].get::<i64>(1, 5, count).unwrap();
    w[0].unlock(1).await.unwrap();
    assert!(got.value().await.unwrap() == expected);
}

/// `put_bytes` (a buffer the caller shares): its 1 MiB pieces arrive whole and in order at
/// a displacement that is not a piece boundary; one that does not fit is refused with
/// `MPI_ERR_RMA_RANGE` before anything is sent, and the window is unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_put_travels_in_pieces_and_arrives_whole() {
    let fixture = Fixture::new(2).await;
    let size = (3 << 20) + 64;
    let w = fixture
        .window(WindowSpec::bytes(&unique("w"), 2, size as u64, 1))
        .await;
    let data = Bytes::from(
        (0..(3 << 20) + 5)
            .map(|i| (i % 253) as u8)
            .collect::<Vec<u8>>(),
    );
    let session = w[0].session();
    let before = session.wire_stats();
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    w[0].put_bytes(1, 7, data.clone()).unwrap();
    w[0].unlock(1).await.unwrap();
    let sent = session.wire_stats().sent - before.sent;
    assert!(sent >= 3, "a 3 MiB put streams in pieces: {sent} messages");

    let sent = session.wire_stats().sent;
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    let error = w[0].put_bytes(1, 60, data.clone()).unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::RmaRange), "{error}");
    let whole = w[0].get::<u8>(1, 0, size as u64).unwrap();
    w[0].unlock(1).await.unwrap();
    let whole = whole.value().await.unwrap();
    assert_eq!(&whole[..7], &[0; 7], "nothing before the displacement");
    assert!(
        whole[7..7 + data.len()] == data[..],
        "every piece, in order"
    );
    assert_eq!(&whole[7 + data.len()..], &[0; 52], "nothing after the data");
    // lock, get and unlock travelled; the refused put did not
    assert!(session.wire_stats().sent - sent <= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_integer_accumulates_travel_as_one_operation_and_floats_do_not() {
    let fixture = Fixture::new(2).await;
    let name = unique("w");
    let w = fixture.window(WindowSpec::of::<i64>(&name, 2, 2)).await;
    let fw = fixture
        .window(WindowSpec::of::<f64>(&unique("f"), 2, 1))
        .await;
    w[0].lock(LockType::Shared, 1, 0).await.unwrap();
    for _ in 0..100 {
        w[0].accumulate(1, 0, &[3i64], Op::Sum).unwrap();
    }
    // another element, then the first again: only neighbours fold
    w[0].accumulate(1, 1, &[5i64], Op::Max).unwrap();
    w[0].accumulate(1, 1, &[2i64], Op::Max).unwrap();
    w[0].accumulate(1, 0, &[1i64], Op::Sum).unwrap();
    let got = w[0].get::<i64>(1, 0, 2).unwrap();
    w[0].unlock(1).await.unwrap();
    assert_eq!(got.value().await.unwrap(), vec![301, 5]);

    fw[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    fw[0].put(1, 0, &[1.0f64]).unwrap();
    fw[0].unlock(1).await.unwrap();
    fw[0].lock(LockType::Shared, 1, 0).await.unwrap();
    for value in [1e16, -1e16] {
        fw[0].accumulate(1, 0, &[value], Op::Sum).unwrap();
    }
    let sum = fw[0].get::<f64>(1, 0, 1).unwrap();
    fw[0].unlock(1).await.unwrap();
    // applied one by one, as written: 1 rounds away against 1e16 and the sum ends at 0;
    // folded into one accumulate of (1e16 + -1e16) = 0 it would stay 1
    assert_eq!(sum.value().await.unwrap(), vec![0.0]);

    let audit = onesided_client::Audit::connect(&fixture.server.url, crate::ADMIN_TOKEN)
        .await
        .unwrap();
    let applied = |window: u64| {
        let audit = &audit;
        async move {
            let events = audit.events(window, 1).await.unwrap();
            events
                .iter()
                .filter(|entry| {
                    entry.rank == 1
                        && matches!(entry.event, Some(onesided_core::audit::Event::Op { .. }))
                })
                .count()
        }
    };
    // the 100 sums, the two maxes, the sum, the get
    assert_eq!(applied(w[0].desc().id).await, 4);
    assert_eq!(
        applied(fw[0].desc().id).await,
        4,
        "the put, the two float sums, the get"
    );
}

/// The byte-placed and multi-dimensional layouts (hvector, hindexed, subarray) on the target
/// and on the origin, through put, get, accumulate and get_accumulate; what each selects is
/// what core's flattening says, and the audit records the same bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hvector_hindexed_and_subarray_layouts_on_both_sides() {
    // a 4x6 array of i32 at rank 1
    let (_fixture, w) = Fixture::with_window::<i32>(2, 24).await;
    let block = crate::subarray([4, 6], [2, 3], [1, 2], Order::C);
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    // put six values into the 2x3 block: elements 8, 9, 10 and 14, 15, 16
    w[0].put_layout(1, 0, block.clone(), &[1i32, 2, 3, 4, 5, 6])
        .unwrap();
    // hvector at the target: every third element (12 bytes apart) of row 0
    let every_third = Layout::Hvector {
        count: 2,
        blocklen: 1,
        stride_bytes: 12,
    };
    w[0].put_layout(1, 0, every_third, &[7i32, 8]).unwrap();
    // accumulate from an hindexed origin (bytes 4 and 16: values 10 and 40) into the
    // block's first column, Fortran view of the same memory: elements 8 and 14
    let origin = [0i32, 10, 20, 30, 40];
    let origin_layout = Layout::Hindexed {
        blocks: vec![
            ByteBlock { offset: 4, len: 1 },
            ByteBlock { offset: 16, len: 1 },
        ],
    };
    let column = crate::subarray([6, 4], [1, 2], [2, 1], Order::Fortran);
    w[0].accumulate_from(1, 0, column.clone(), &origin, &origin_layout, Op::Sum)
        .unwrap();
    // get_accumulate(replace) from a vector origin (elements 0 and 2: values 0, 20) into the
    // same column:
    // the old values come back in the target layout's order
    let old = w[0]
        .get_accumulate_from(
            1,
            0,
            column,
            &origin,
            &Layout::Vector {
                count: 2,
                blocklen: 1,
                stride: 2,
            },
            Op::Replace,
        )
        .unwrap();
    let all = w[0].get::<i32>(1, 0, 24).unwrap();
    let picked = w[0].get_layout::<i32>(1, 0, block.clone()).unwrap();
    w[0].unlock(1).await.unwrap();
    assert_eq!(old.value().await.unwrap(), vec![11, 44]);
    let all = all.value().await.unwrap();
    let mut expected = vec![0i32; 24];
    expected[0] = 7;
    expected[3] = 8;
    for (at, value) in [(8, 0), (9, 2), (10, 3), (14, 20), (15, 5), (16, 6)] {
        expected[at] = value;
    }
    assert_eq!(all, expected);
    assert_eq!(picked.value().await.unwrap(), vec![0, 2, 3, 20, 5, 6]);
    // a get's origin layout: the block's values land in a 2x3 hole of a local 3x4 array
    let mut local = vec![-1i32; 12];
    let hole = crate::subarray([3, 4], [2, 3], [0, 1], Order::C);
    onesided_client::unpack(&[0, 2, 3, 20, 5, 6], &mut local, &hole).unwrap();
    assert_eq!(local, vec![-1, 0, 2, 3, -1, 20, 5, 6, -1, -1, -1, -1]);
    // a subarray MPI refuses is MPI_ERR_ARG before anything travels
    let bad = crate::subarray([4, 6], [2, 3], [3, 0], Order::C);
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    let error = w[0].put_layout(1, 0, bad, &[0i32; 6]).unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::Arg), "{error}");
    w[0].unlock(1).await.unwrap();
}

fn block(offset: u64, dtype: Datatype, len: u64) -> StructBlock {
    StructBlock { offset, dtype, len }
}

/// A resized layout (`MPI_Type_create_resized` with a count) puts and gets one column of a
/// row-major matrix at the target and picks one at the origin; its lower bound moves no byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resized_layouts_move_a_matrix_column() {
    // a 3x4 matrix of i64 at rank 1: a row is 32 bytes
    let (_fixture, w) = Fixture::with_window::<i64>(2, 12).await;
    let column = Layout::resized(Layout::contiguous(1), 0, 32, 3);
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    // column 2: the layout starts at element 2
    w[0].put_layout(1, 2, column.clone(), &[1i64, 2, 3])
        .unwrap();
    // column 1 with a lower bound of -8: the same places, shifted by nothing
    w[0].put_layout(
        1,
        1,
        Layout::resized(Layout::contiguous(1), -8, 32, 3),
        &[4i64, 5, 6],
    )
    .unwrap();
    // column 0 from column 3 of a local matrix: an origin layout resized around element 3
    let local: Vec<i64> = (0..12).map(|i| 100 + i).collect();
    let local_column = Layout::resized(
        Layout::Indexed {
            blocks: vec![Block { disp: 3, len: 1 }],
        },
        0,
        32,
        3,
    );
    w[0].put_from(1, 0, column.clone(), &local, &local_column)
        .unwrap();
    let back = w[0].get_layout::<i64>(1, 2, column.clone()).unwrap();
    let all = w[0].get::<i64>(1, 0, 12).unwrap();
    // a column one past the matrix is refused before it travels
    let error = w[0]
        .put_layout(
            1,
            3,
            Layout::resized(Layout::contiguous(1), 0, 32, 4),
            &[0i64; 4],
        )
        .unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::RmaRange), "{error}");
    w[0].unlock(1).await.unwrap();
    assert_eq!(back.value().await.unwrap(), vec![1, 2, 3]);
    assert_eq!(
        all.value().await.unwrap(),
        vec![103, 4, 1, 0, 107, 5, 2, 0, 111, 6, 3, 0]
    );
}

/// A struct layout (`MPI_Type_create_struct` of basic types) moves exactly its blocks' bytes
/// in a put and a get, whatever the types; an accumulate through a struct whose blocks are all
/// the call's datatype works like any other, one of mixed datatypes is MPI_ERR_TYPE and
/// changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn struct_layouts_move_their_blocks_bytes_and_accumulate_of_one_type() {
    let fixture = Fixture::new(2).await;
    let bytes = fixture
        .window(WindowSpec::of::<u8>(&unique("bytes"), 2, 32))
        .await;
    // an i32, a gap of 2 bytes, a u16, then two f64s
    let record = Layout::Struct {
        blocks: vec![
            block(0, Datatype::I32, 1),
            block(6, Datatype::U16, 1),
            block(8, Datatype::F64, 2),
        ],
    };
    let mut packed = (-7i32).to_le_bytes().to_vec();
    packed.extend_from_slice(&513u16.to_le_bytes());
    packed.extend_from_slice(&1.5f64.to_le_bytes());
    packed.extend_from_slice(&(-2.25f64).to_le_bytes());
    bytes[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    bytes[0].put(1, 0, &[0xAAu8; 32]).unwrap();
    bytes[0].put_layout(1, 0, record.clone(), &packed).unwrap();
    let back = bytes[0].get_layout::<u8>(1, 0, record.clone()).unwrap();
    let all = bytes[0].get::<u8>(1, 0, 32).unwrap();
    bytes[0].unlock(1).await.unwrap();
    assert_eq!(back.value().await.unwrap(), packed);
    let mut expected = packed[..4].to_vec();
    expected.extend_from_slice(&[0xAA, 0xAA]);
    expected.extend_from_slice(&packed[4..]);
    expected.extend_from_slice(&[0xAA; 8]);
    assert_eq!(all.value().await.unwrap(), expected);
    // a get's struct lands where another struct says at the origin
    let mut local = vec![0u8; 24];
    let spread = Layout::Struct {
        blocks: vec![
            block(20, Datatype::I32, 1),
            block(0, Datatype::U16, 1),
            block(2, Datatype::F64, 2),
        ],
    };
    onesided_client::unpack(&packed, &mut local, &spread).unwrap();
    assert_eq!(&local[20..], &(-7i32).to_le_bytes());
    assert_eq!(&local[..2], &513u16.to_le_bytes());
    assert_eq!(onesided_client::pack(&local, &spread).unwrap(), packed);

    let w = fixture.window_of::<i64>(4).await;
    let same = Layout::Struct {
        blocks: vec![block(24, Datatype::I64, 1), block(0, Datatype::I64, 2)],
    };
    let mixed = Layout::Struct {
        blocks: vec![block(0, Datatype::I64, 1), block(8, Datatype::F64, 1)],
    };
    w[0].lock(LockType::Exclusive, 1, 0).await.unwrap();
    w[0].put(1, 0, &[1i64, 2, 3, 4]).unwrap();
    w[0].accumulate_from(
        1,
        0,
        same.clone(),
        &[10i64, 20, 30],
        &Layout::contiguous(3),
        Op::Sum,
    )
    .unwrap();
    let old = w[0]
        .get_accumulate_from(1, 0, same.clone(), &[5i64, 5, 5], &same_origin(), Op::Max)
        .unwrap();
    let error = w[0]
        .accumulate_from(
            1,
            0,
            mixed.clone(),
            &[1i64, 1],
            &Layout::contiguous(2),
            Op::Sum,
        )
        .unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::Type), "{error}");
    // a struct origin of another datatype is refused the same way
    let error = w[0]
        .accumulate_from(1, 0, Layout::contiguous(2), &[1i64, 1], &mixed, Op::Sum)
        .unwrap_err();
    assert_eq!(error.class(), Some(ErrorClass::Type), "{error}");
    let all = w[0].get::<i64>(1, 0, 4).unwrap();
    w[0].unlock(1).await.unwrap();
    // element 3 first (+10), then 0 and 1 (+20, +30)
    assert_eq!(old.value().await.unwrap(), vec![14, 21, 32]);
    assert_eq!(all.value().await.unwrap(), vec![21, 32, 3, 14]);
}

/// Three contiguous elements as an origin layout of one datatype.
fn same_origin() -> Layout {
    Layout::Struct {
        blocks: vec![block(0, Datatype::I64, 3)],
    }
}
