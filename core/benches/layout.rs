//! Micro-benchmarks of layout flattening and of the packing that moves a layout's bytes
//! (`core::layout`): `Layout::flatten`, `Layout::check_no_overlap` (what every writing
//! operation's validation runs), `gather` (get-like reads) and `scatter` (put-like writes).
//!
//! Every layout is sized by its payload, the bytes it covers: 64 B, 4 KiB and 1 MiB.
//! `flatten` and `check_no_overlap` report blocks per second (their cost is per block);
//! `gather` and `scatter` report payload bytes per second.
//! Run with `cargo bench -p onesided-core --bench layout`; see BENCHMARKS.md.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use onesided_core::layout::{gather, scatter, Block, Layout};

const SIZES: [(u64, &str); 3] = [(64, "64B"), (4 << 10, "4KiB"), (1 << 20, "1MiB")];

/// A struct-like record of 48 bytes: an i32 id at 0, three f64 at 8..32, an i32 flags word
/// at 32, padding to 48. Layouts have one element type, so it is an indexed layout of bytes.
const RECORD: u64 = 48;
const FIELDS: [(u64, u64); 3] = [(0, 4), (8, 24), (32, 4)];

/// One benchmarked shape: its name, the layout and the element size it is flattened with.
struct Case {
    name: &'static str,
    layout: Layout,
    elem_size: u64,
}

/// The shapes for a payload of `bytes` (a multiple of 64).
fn cases(bytes: u64) -> Vec<Case> {
    let f64s = bytes / 8;
    // Irregular indexed blocks of 1..=4 elements with gaps of 1..=3, the last one cut to fit.
    let mut blocks = Vec::new();
    let (mut disp, mut left, mut i) = (0u64, f64s, 0u64);
    while left > 0 {
        let len = (1 + i % 4).min(left);
        blocks.push(Block { disp, len });
        disp += len + 1 + i % 3;
        left -= len;
        i += 1;
    }
    let records = bytes / FIELDS.iter().map(|(_, len)| len).sum::<u64>();
    let fields = (0..records)
        .flat_map(|r| {
            FIELDS.map(|(offset, len)| Block {
                disp: r * RECORD + offset,
                len,
            })
        })
        .collect();
    vec![
        Case {
            name: "contiguous",
            layout: Layout::contiguous(f64s),
            elem_size: 8,
        },
        Case {
            name: "vector_1of2",
            layout: Layout::Vector {
                count: f64s,
                blocklen: 1,
                stride: 2,
            },
            elem_size: 8,
        },
        Case {
            name: "vector_8of16",
            layout: Layout::Vector {
                count: f64s / 8,
                blocklen: 8,
                stride: 16,
            },
            elem_size: 8,
        },
        Case {
            name: "indexed",
            layout: Layout::Indexed { blocks },
            elem_size: 8,
        },
        Case {
            name: "struct",
            layout: Layout::Indexed { blocks: fields },
            elem_size: 1,
        },
    ]
}

fn bench_layouts(c: &mut Criterion) {
    let mut flatten = c.benchmark_group("layout/flatten");
    for (bytes, label) in SIZES {
        for case in cases(bytes) {
            flatten.throughput(Throughput::Elements(case.layout.block_count()));
            flatten.bench_function(BenchmarkId::new(case.name, label), |b| {
                b.iter(|| black_box(&case.layout).flatten(case.elem_size).unwrap())
            });
        }
    }
    flatten.finish();

    let mut overlap = c.benchmark_group("layout/check_no_overlap");
    for (bytes, label) in SIZES {
        for case in cases(bytes) {
            overlap.throughput(Throughput::Elements(case.layout.block_count()));
            overlap.bench_function(BenchmarkId::new(case.name, label), |b| {
                b.iter(|| {
                    black_box(&case.layout)
                        .check_no_overlap(case.elem_size)
                        .unwrap()
                })
            });
        }
    }
    overlap.finish();

    let mut packing = c.benchmark_group("layout/gather");
    for (bytes, label) in SIZES {
        for case in cases(bytes) {
            let runs = case.layout.flatten(case.elem_size).unwrap();
            assert_eq!(case.layout.total_bytes(case.elem_size).unwrap(), bytes);
            let src = vec![0x5au8; case.layout.extent(case.elem_size).unwrap() as usize];
            packing.throughput(Throughput::Bytes(bytes));
            packing.bench_function(BenchmarkId::new(case.name, label), |b| {
                b.iter(|| gather(black_box(&runs), 0, black_box(&src)).unwrap())
            });
        }
    }
    packing.finish();

    let mut unpacking = c.benchmark_group("layout/scatter");
    for (bytes, label) in SIZES {
        for case in cases(bytes) {
            let runs = case.layout.flatten(case.elem_size).unwrap();
            let mut dst = vec![0u8; case.layout.extent(case.elem_size).unwrap() as usize];
            let packed = vec![0xa5u8; bytes as usize];
            unpacking.throughput(Throughput::Bytes(bytes));
            unpacking.bench_function(BenchmarkId::new(case.name, label), |b| {
                b.iter(|| scatter(black_box(&runs), 0, black_box(&mut dst), black_box(&packed)))
            });
        }
    }
    unpacking.finish();
}

criterion_group!(benches, bench_layouts);
criterion_main!(benches);
