//! Micro-benchmarks of the reduction kernels behind accumulate, get_accumulate and
//! fetch_and_op (`core::reduce::reduce`), and of the one-element compare-and-swap.
//!
//! Throughput is the size of the target buffer: the bytes one `reduce` call rewrites.
//! Run with `cargo bench -p onesided-core --bench reduce`; see BENCHMARKS.md.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use onesided_core::reduce::{compare_and_swap, reduce};
use onesided_core::{Datatype, Op};

/// Buffer sizes in bytes: one cache line, one page, and a bulk accumulate.
const SIZES: [(usize, &str); 3] = [(64, "64B"), (4 << 10, "4KiB"), (1 << 20, "1MiB")];

const DTYPES: [Datatype; 3] = [Datatype::I32, Datatype::I64, Datatype::F64];

const OPS: [Op; 4] = [Op::Sum, Op::Max, Op::Band, Op::Replace];

/// `bytes` of `dtype` elements holding small varied values (`seed`, `seed + 1`, …), so that
/// repeated sums stay finite and normal for floats and `max` takes both branches.
fn buffer(dtype: Datatype, bytes: usize, seed: i64) -> Vec<u8> {
    let count = bytes / dtype.size();
    let mut out = Vec::with_capacity(bytes);
    for i in 0..count as i64 {
        let v = (seed + i * 7) % 1000 - 500;
        match dtype {
            Datatype::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
            Datatype::I64 => out.extend_from_slice(&v.to_le_bytes()),
            Datatype::F64 => out.extend_from_slice(&(v as f64 * 0.25).to_le_bytes()),
            other => unreachable!("no sample values for {other}"),
        }
    }
    out
}

fn bench_reduce(c: &mut Criterion) {
    for op in OPS {
        let mut group = c.benchmark_group(format!("reduce/{op}"));
        for dtype in DTYPES {
            // `band` is not defined for floats: `reduce` would only measure the refusal.
            if !op.is_defined_for(dtype) {
                continue;
            }
            for (bytes, label) in SIZES {
                let origin = buffer(dtype, bytes, 3);
                let mut target = buffer(dtype, bytes, 0);
                group.throughput(Throughput::Bytes(bytes as u64));
                group.bench_function(BenchmarkId::new(dtype.to_string(), label), |b| {
                    b.iter(|| {
                        reduce(op, dtype, black_box(&mut target), black_box(&origin))
                            .expect("op is defined and lengths match")
                    })
                });
            }
        }
        group.finish();
    }
}

fn bench_compare_and_swap(c: &mut Criterion) {
    let mut group = c.benchmark_group("compare_and_swap");
    group.throughput(Throughput::Elements(1));
    for dtype in [Datatype::I32, Datatype::I64] {
        let size = dtype.size();
        let current = vec![7u8; size];
        let other = vec![9u8; size];
        // "swap": compare equals the target, which is written with the same bytes again so
        // every iteration sees the same state; "no_swap": compare differs, the target is only
        // read
        for (case, compare) in [("swap", &current), ("no_swap", &other)] {
            let mut target = current.clone();
            group.bench_function(BenchmarkId::new(dtype.to_string(), case), |b| {
                b.iter(|| {
                    compare_and_swap(
                        dtype,
                        black_box(&mut target),
                        black_box(compare),
                        black_box(compare),
                    )
                    .expect("integer element of the right size")
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench_reduce, bench_compare_and_swap);
criterion_main!(benches);
