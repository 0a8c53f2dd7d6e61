//! Layouts: the derived datatypes a location or an origin may name, `KIND:ARGS[@i]`, as
//! core's [`Layout`].
//!
//! Owns: the argument grammar of each layout kind (`vector`, `hvector`, `indexed`,
//! `hindexed`, `subarray`, `resized`, `struct`, the list in `LAYOUT_KINDS`), the `@i` a
//! layout's displacements count from, and how a struct's blocks are counted in elements of the
//! window's type. Must not: check what core's [`Layout`] checks itself (its element count and
//! overflows come back as its errors), or know which call the layout is for.

use onesided_core::layout::{Block, ByteBlock, Layout, Order, StructBlock, Subarray, MAX_BLOCKS};
use onesided_core::Datatype;

use super::super::ast::Shape;
use super::lines::split_list;
use super::locations::{index_at, number_at, selection};
use super::{err, ParseError};

/// The layout kinds a location may name.
pub(super) const LAYOUT_KINDS: &str =
    "vector, indexed, hvector, hindexed, subarray, resized, struct";

/// `KIND:ARGS[@i]`, starting at `column`: a derived-datatype layout whose displacements count
/// from element `i` (0 without `@`).
///
/// - `vector:COUNT,BLOCKLEN,STRIDE` (MPI_Type_vector; stride in elements)
/// - `hvector:COUNT,BLOCKLEN,STRIDE` (MPI_Type_create_hvector; stride in bytes)
/// - `indexed:B[,B...]`, each block `i..j` (elements i to j-1) or `i` (MPI_Type_indexed)
/// - `hindexed:B[,B...]`, each block `OFFSET+LEN`: LEN elements from byte OFFSET
///   (MPI_Type_create_hindexed)
/// - `subarray:sizes=AxB..,subsizes=AxB..,starts=AxB..[,order=c|fortran]`
///   (MPI_Type_create_subarray)
/// - `resized:COUNT,EXTENT[,LB]:SEL`: COUNT copies of SEL (an element, a range, a strided
///   range or a layout, without `@`), EXTENT bytes apart, lower bound LB (MPI_Type_create_resized)
/// - `struct:B[,B...]`, each block `OFFSET+LEN:TYPE`: LEN elements of TYPE from byte OFFSET
///   (MPI_Type_create_struct)
pub(super) fn layout_selection(
    line: usize,
    column: usize,
    text: &str,
) -> Result<(u64, Shape), ParseError> {
    let Some((kind, rest)) = text.split_once(':') else {
        return Err(err(
            line,
            column,
            format!(
                "expected an element index or a layout KIND:ARGS, found \"{text}\" \
                 (KIND one of {LAYOUT_KINDS})"
            ),
        ));
    };
    let args_column = column + kind.chars().count() + 1;
    let (args, base) = match rest.rsplit_once('@') {
        Some((args, base)) => {
            let base_column = args_column + args.chars().count() + 1;
            (args, index_at(line, base_column, base)?)
        }
        None => (rest, 0),
    };
    let layout = match kind {
        "vector" | "hvector" => vector_layout(line, args_column, kind, args)?,
        "indexed" => indexed_layout(line, args_column, args)?,
        "hindexed" => hindexed_layout(line, args_column, args)?,
        "subarray" => subarray(line, args_column, args)?,
        "resized" => resized(line, args_column, args)?,
        "struct" => struct_layout(line, args_column, args)?,
        other => {
            return Err(err(
                line,
                column,
                format!("unknown layout \"{other}\" (one of {LAYOUT_KINDS})"),
            ))
        }
    };
    let count = layout.element_count().map_err(|e| {
        let message = if e.message.starts_with(kind) {
            e.message
        } else {
            format!("{kind}: {}", e.message)
        };
        err(line, column, message)
    })?;
    Ok((
        base,
        Shape::Layout {
            layout: Box::new(layout),
            count,
        },
    ))
}

/// The arguments of `vector:` and `hvector:` (`kind`), starting at `column`:
/// `COUNT,BLOCKLEN,STRIDE`, the stride in elements or in bytes.
fn vector_layout(line: usize, column: usize, kind: &str, args: &str) -> Result<Layout, ParseError> {
    let parts = split_list(args);
    let stride_unit = if kind == "vector" { "" } else { "_BYTES" };
    if parts.len() != 3 {
        return Err(err(
            line,
            column,
            format!(
                "{kind} takes COUNT,BLOCKLEN,STRIDE{stride_unit} (3 numbers), not {} \
                 parts",
                parts.len()
            ),
        ));
    }
    let mut numbers = [0u64; 3];
    for ((offset, part), (slot, what)) in
        parts.iter().zip(
            numbers
                .iter_mut()
                .zip(["a block count", "a block length", "a stride"]),
        )
    {
        *slot = number_at(line, column + offset, part, what)?;
    }
    let [count, blocklen, stride] = numbers;
    Ok(if kind == "vector" {
        Layout::Vector {
            count,
            blocklen,
            stride,
        }
    } else {
        Layout::Hvector {
            count,
            blocklen,
            stride_bytes: stride,
        }
    })
}

/// The arguments of `indexed:`, starting at `column`: blocks `i..j` or `i`.
fn indexed_layout(line: usize, column: usize, args: &str) -> Result<Layout, ParseError> {
    let mut blocks = Vec::new();
    for (offset, part) in split_list(args) {
        let (disp, shape) = selection(line, column + offset, part)?;
        let len = match shape {
            Shape::Single => 1,
            Shape::Range { count } => count,
            _ => {
                return Err(err(
                    line,
                    column + offset,
                    format!("an indexed block is a range i..j or an element i, not \"{part}\""),
                ))
            }
        };
        blocks.push(Block { disp, len });
    }
    Ok(Layout::Indexed { blocks })
}

/// The arguments of `hindexed:`, starting at `column`: blocks `OFFSET+LEN`.
fn hindexed_layout(line: usize, column: usize, args: &str) -> Result<Layout, ParseError> {
    let mut blocks = Vec::new();
    for (offset, part) in split_list(args) {
        let Some((bytes, len)) = part.split_once('+') else {
            return Err(err(
                line,
                column + offset,
                format!(
                    "an hindexed block is OFFSET+LEN (LEN elements from byte OFFSET), \
                     not \"{part}\""
                ),
            ));
        };
        let len_column = column + offset + bytes.chars().count() + 1;
        blocks.push(ByteBlock {
            offset: number_at(line, column + offset, bytes, "a byte offset")?,
            len: number_at(line, len_column, len, "a number of elements")?,
        });
    }
    Ok(Layout::Hindexed { blocks })
}

/// The arguments of `struct:`, starting at `column`: blocks `OFFSET+LEN:TYPE`.
fn struct_layout(line: usize, column: usize, args: &str) -> Result<Layout, ParseError> {
    let mut blocks = Vec::new();
    for (offset, part) in split_list(args) {
        let at = column + offset;
        let shape_error = || {
            err(
                line,
                at,
                format!(
                    "a struct block is OFFSET+LEN:TYPE (LEN elements of TYPE from byte \
                     OFFSET), not \"{part}\""
                ),
            )
        };
        let (bytes, rest) = part.split_once('+').ok_or_else(shape_error)?;
        let (len, dtype) = rest.split_once(':').ok_or_else(shape_error)?;
        let len_column = at + bytes.chars().count() + 1;
        let type_column = len_column + len.chars().count() + 1;
        blocks.push(StructBlock {
            offset: number_at(line, at, bytes, "a byte offset")?,
            len: number_at(line, len_column, len, "a number of elements")?,
            dtype: Datatype::parse(dtype)
                .ok_or_else(|| err(line, type_column, format!("unknown datatype \"{dtype}\"")))?,
        });
    }
    Ok(Layout::Struct { blocks })
}

/// The arguments of `resized:`, starting at `column`: `COUNT,EXTENT[,LB]:SEL`.
fn resized(line: usize, column: usize, args: &str) -> Result<Layout, ParseError> {
    let Some((head, inner)) = args.split_once(':') else {
        return Err(err(
            line,
            column,
            format!("resized takes COUNT,EXTENT[,LB]:SEL (copies of SEL), not \"{args}\""),
        ));
    };
    let parts = split_list(head);
    if !(2..=3).contains(&parts.len()) {
        return Err(err(
            line,
            column,
            format!(
                "resized takes COUNT,EXTENT[,LB] before its `:`, not {} parts",
                parts.len()
            ),
        ));
    }
    let count = number_at(line, column + parts[0].0, parts[0].1, "a number of copies")?;
    let extent = number_at(line, column + parts[1].0, parts[1].1, "an extent in bytes")?;
    let lb = match parts.get(2) {
        Some(&(offset, text)) => text.parse::<i64>().map_err(|_| {
            err(
                line,
                column + offset,
                format!("expected a lower bound in bytes, found \"{text}\""),
            )
        })?,
        None => 0,
    };
    let inner_column = column + head.chars().count() + 1;
    let (first, shape) = selection(line, inner_column, inner)?;
    let inner =
        match shape {
            _ if first == 0 => shape.layout(),
            Shape::Single | Shape::Range { .. } => Layout::Indexed {
                blocks: vec![Block {
                    disp: first,
                    len: shape.count(),
                }],
            },
            Shape::Strided { count, stride } => {
                if count > MAX_BLOCKS as u64 {
                    return Err(err(
                        line,
                        inner_column,
                        format!("{count} elements are more blocks than the limit of {MAX_BLOCKS}"),
                    ));
                }
                // the elements one by one, as a vector cannot start past 0
                Layout::Indexed {
                    blocks: (0..count)
                        .map(|i| Block {
                            disp: first.saturating_add(i.saturating_mul(stride)),
                            len: 1,
                        })
                        .collect(),
                }
            }
            Shape::Layout { .. } => return Err(err(
                line,
                inner_column,
                "a resized layout's inner layout takes no `@` (place the whole with its own `@`)",
            )),
        };
    Ok(Layout::resized(inner, lb, extent, count))
}

/// A shape in elements of a window of `dtype`: a struct's blocks carry their own datatypes,
/// so its values are its packed bytes read as elements of `dtype`, and each block must be a
/// whole number of them.
pub(super) fn in_elements_of(
    line: usize,
    column: usize,
    shape: Shape,
    dtype: Datatype,
) -> Result<Shape, ParseError> {
    let Shape::Layout { layout, count } = shape else {
        return Ok(shape);
    };
    let size = dtype.size() as u64;
    let mut blocks_fit = true;
    let mut has_struct = false;
    struct_blocks(&layout, &mut |block| {
        has_struct = true;
        let bytes = block.len.saturating_mul(block.dtype.size() as u64);
        blocks_fit &= bytes % size == 0;
    });
    if !has_struct {
        return Ok(Shape::Layout { layout, count });
    }
    if !blocks_fit {
        return Err(err(
            line,
            column,
            format!(
                "a struct's values are elements of the window's type {dtype}: every block must \
                 be a whole number of its {size} bytes"
            ),
        ));
    }
    let bytes = layout
        .total_bytes(size)
        .map_err(|e| err(line, column, format!("struct: {}", e.message)))?;
    Ok(Shape::Layout {
        layout,
        count: bytes / size,
    })
}

/// Calls `f` for every struct block of a layout (in a resized layout's inner one too).
fn struct_blocks(layout: &Layout, f: &mut dyn FnMut(&StructBlock)) {
    match layout {
        Layout::Struct { blocks } => blocks.iter().for_each(f),
        Layout::Resized(resized) => struct_blocks(&resized.inner, f),
        _ => {}
    }
}

/// The arguments of `subarray:`, starting at `column`.
fn subarray(line: usize, column: usize, args: &str) -> Result<Layout, ParseError> {
    let mut sizes = None;
    let mut subsizes = None;
    let mut starts = None;
    let mut order = None;
    for (offset, part) in split_list(args) {
        let at = column + offset;
        let Some((key, value)) = part.split_once('=') else {
            return Err(err(
                line,
                at,
                format!("expected sizes=, subsizes=, starts= or order=, found \"{part}\""),
            ));
        };
        let value_column = at + key.chars().count() + 1;
        let dims = || -> Result<Vec<u64>, ParseError> {
            let mut dims = Vec::new();
            let mut dim_column = value_column;
            for dim in value.split('x') {
                dims.push(number_at(line, dim_column, dim, "a dimension (AxBxC)")?);
                dim_column += dim.chars().count() + 1;
            }
            Ok(dims)
        };
        let slot_taken = match key {
            "sizes" => sizes.replace(dims()?).is_some(),
            "subsizes" => subsizes.replace(dims()?).is_some(),
            "starts" => starts.replace(dims()?).is_some(),
            "order" => {
                let parsed = match value {
                    "c" | "C" => Order::C,
                    "fortran" | "Fortran" => Order::Fortran,
                    _ => {
                        return Err(err(
                            line,
                            value_column,
                            format!("order is c or fortran, not \"{value}\""),
                        ))
                    }
                };
                order.replace(parsed).is_some()
            }
            _ => {
                return Err(err(
                    line,
                    at,
                    format!("unknown subarray argument \"{key}\" (sizes, subsizes, starts, order)"),
                ))
            }
        };
        if slot_taken {
            return Err(err(line, at, format!("{key}= is given twice")));
        }
    }
    let end = column + args.chars().count();
    let missing = |what: &str| err(line, end, format!("subarray needs {what}=AxB..."));
    Ok(Layout::Subarray(Box::new(Subarray {
        sizes: sizes.ok_or_else(|| missing("sizes"))?,
        subsizes: subsizes.ok_or_else(|| missing("subsizes"))?,
        starts: starts.ok_or_else(|| missing("starts"))?,
        order: order.unwrap_or_default(),
    })))
}

#[cfg(test)]
mod tests {
    use onesided_core::datatype::Value;
    use onesided_core::layout::{Block, ByteBlock, Layout, Order, StructBlock, Subarray};
    use onesided_core::Datatype;

    use crate::ast::{Call, Observed, Shape};
    use crate::parse::parse;
    use crate::parse::tests::{assert_call_errors, error_of, only_call, HEAD};

    /// The layout and base of the only call's location.
    fn laid_out(location: &str) -> (u64, Layout) {
        let call = only_call(&format!("A: get B {location} -> v"));
        let Call::Op(spec) = call.call else { panic!() };
        match spec.loc.shape {
            Shape::Layout { layout, count } => {
                assert_eq!(layout.element_count().unwrap(), count);
                (spec.loc.index, *layout)
            }
            other => panic!("{location}: not a layout: {other:?}"),
        }
    }

    #[test]
    fn resized_and_struct_locations() {
        // copies of an element, a range, a strided range, a layout; the lower bound is kept
        assert_eq!(
            laid_out("W[resized:3,32:0@1]"),
            (1, Layout::resized(Layout::contiguous(1), 0, 32, 3))
        );
        assert_eq!(
            laid_out("W[resized:2,64,-8:1..3]"),
            (
                0,
                Layout::resized(
                    Layout::Indexed {
                        blocks: vec![Block { disp: 1, len: 2 }]
                    },
                    -8,
                    64,
                    2
                )
            )
        );
        assert_eq!(
            laid_out("W[resized:2,8:1..5:2]"),
            (
                0,
                Layout::resized(
                    Layout::Indexed {
                        blocks: vec![Block { disp: 1, len: 1 }, Block { disp: 3, len: 1 }]
                    },
                    0,
                    8,
                    2
                )
            )
        );
        assert_eq!(
            laid_out("W[resized:2,100:vector:2,1,3@4]"),
            (
                4,
                Layout::resized(
                    Layout::Vector {
                        count: 2,
                        blocklen: 1,
                        stride: 3
                    },
                    0,
                    100,
                    2
                )
            )
        );
        // a struct's values are its bytes in elements of the window's type (i64 here)
        let call = only_call("A: put B W[struct:24+1:i64,0+2:f64,16+2:i32] = 1,2,3,4");
        let Call::Op(spec) = call.call else { panic!() };
        let Shape::Layout { layout, count } = spec.loc.shape else {
            panic!("not a layout")
        };
        assert_eq!(count, 4);
        assert_eq!(
            *layout,
            Layout::Struct {
                blocks: vec![
                    StructBlock {
                        offset: 24,
                        dtype: Datatype::I64,
                        len: 1
                    },
                    StructBlock {
                        offset: 0,
                        dtype: Datatype::F64,
                        len: 2
                    },
                    StructBlock {
                        offset: 16,
                        dtype: Datatype::I32,
                        len: 2
                    },
                ]
            }
        );
        // inside a resized layout, and as an origin
        let call = only_call(
            "A: put B W[resized:2,16:struct:0+2:i32] = 1,2 origin=struct:8+1:u64,0+1:i64",
        );
        let Call::Op(spec) = call.call else { panic!() };
        assert_eq!(spec.loc.shape.count(), 2);
        assert_eq!(spec.origin.unwrap().shape.count(), 2);
    }

    #[test]
    fn resized_and_struct_location_errors() {
        let cases: [(&str, (usize, usize), &str); 8] = [
            (
                "A: put B W[resized:3:0] = 1,2,3",
                (2, 20),
                "resized takes COUNT,EXTENT[,LB] before its `:`, not 1 parts",
            ),
            (
                "A: put B W[resized:3,8] = 1,2,3",
                (2, 20),
                "resized takes COUNT,EXTENT[,LB]:SEL",
            ),
            (
                "A: put B W[resized:3,8,x:0] = 1,2,3",
                (2, 24),
                "expected a lower bound in bytes, found \"x\"",
            ),
            (
                "A: put B W[resized:3,8:vector:1,1,1@2@0] = 1,2,3",
                (2, 24),
                "a resized layout's inner layout takes no `@`",
            ),
            (
                "A: put B W[resized:2,9223372036854775808:0] = 1,2",
                (2, 12),
                "resized layout: lower bound 0 plus extent 9223372036854775808 overflows",
            ),
            (
                "A: put B W[struct:0+1] = 1",
                (2, 19),
                "a struct block is OFFSET+LEN:TYPE",
            ),
            (
                "A: put B W[struct:0+1:int] = 1",
                (2, 23),
                "unknown datatype \"int\"",
            ),
            (
                "A: put B W[struct:0+1:i32] = 1",
                (2, 12),
                "every block must be a whole number of its 8 bytes",
            ),
        ];
        assert_call_errors(&cases);
    }

    #[test]
    fn layout_locations() {
        assert_eq!(
            laid_out("W[vector:2,3,4]"),
            (
                0,
                Layout::Vector {
                    count: 2,
                    blocklen: 3,
                    stride: 4
                }
            )
        );
        assert_eq!(
            laid_out("W[hvector:3,1,6@2]"),
            (
                2,
                Layout::Hvector {
                    count: 3,
                    blocklen: 1,
                    stride_bytes: 6
                }
            )
        );
        assert_eq!(
            laid_out("W[indexed:6..8,1,3..3]"),
            (
                0,
                Layout::Indexed {
                    blocks: vec![
                        Block { disp: 6, len: 2 },
                        Block { disp: 1, len: 1 },
                        Block { disp: 3, len: 0 },
                    ]
                }
            )
        );
        assert_eq!(
            laid_out("W[hindexed:16+2,0+1@1]"),
            (
                1,
                Layout::Hindexed {
                    blocks: vec![
                        ByteBlock { offset: 16, len: 2 },
                        ByteBlock { offset: 0, len: 1 },
                    ]
                }
            )
        );
        let subarray = |order| {
            Layout::Subarray(Box::new(Subarray {
                sizes: vec![3, 4],
                subsizes: vec![2, 1],
                starts: vec![1, 3],
                order,
            }))
        };
        assert_eq!(
            laid_out("W[subarray:sizes=3x4,subsizes=2x1,starts=1x3]"),
            (0, subarray(Order::C))
        );
        assert_eq!(
            laid_out("W[subarray:starts=1x3,order=fortran,subsizes=2x1,sizes=3x4@5]"),
            (5, subarray(Order::Fortran))
        );
        // a layout location is a list of its elements, in values and in variables
        let call = only_call("A: put B W[indexed:3,0..2] = 1,2,3");
        let Call::Op(spec) = call.call else { panic!() };
        assert_eq!(spec.values.len(), 3);
        assert!(spec.loc.shape.is_list());
        let (line, column, message) =
            error_of(&format!("{HEAD}A: put B W[vector:2,2,4] = 1,2,3\n"));
        assert_eq!((line, column), (2, 28));
        assert!(
            message.contains("3 values for a location of 4 elements"),
            "{message}"
        );
        // aliases and expectations take them too
        let scenario = parse(&format!(
            "{HEAD}alias D = W[vector:2,1,3]\nA: get B D -> d\nexpect A d == 1,2\nexpect public B W[hindexed:8+1] == 4\n"
        ))
        .unwrap();
        assert_eq!(
            scenario.expectations[1].accepted,
            [Observed::List(vec![Value::Int(4)])]
        );
    }

    #[test]
    fn layout_errors_name_line_column_and_what_is_wrong() {
        let cases: [(&str, (usize, usize), &str); 17] = [
            (
                "A: put B W[vector:2,1] = 1,2",
                (2, 19),
                "vector takes COUNT,BLOCKLEN,STRIDE (3 numbers), not 2 parts",
            ),
            (
                "A: put B W[hvector:2,x,8] = 1,2",
                (2, 22),
                "expected a block length, found \"x\"",
            ),
            (
                "A: put B W[vector:2,1,2@z] = 1,2",
                (2, 25),
                "expected an element index, found \"z\"",
            ),
            ("A: put B W[blob:1] = 1", (2, 12), "unknown layout \"blob\""),
            (
                "A: put B W[x] = 1",
                (2, 12),
                "expected an element index or a layout KIND:ARGS",
            ),
            (
                "A: put B W[indexed:1..3:2] = 1",
                (2, 20),
                "an indexed block is a range i..j or an element i",
            ),
            (
                "A: put B W[indexed:4..2] = 1",
                (2, 23),
                "ends before it starts",
            ),
            (
                "A: put B W[indexed:] = 1",
                (2, 20),
                "expected an element index, found \"\"",
            ),
            (
                "A: put B W[hindexed:4] = 1",
                (2, 21),
                "an hindexed block is OFFSET+LEN",
            ),
            (
                "A: put B W[hindexed:4+q] = 1",
                (2, 23),
                "expected a number of elements, found \"q\"",
            ),
            (
                "A: put B W[subarray:sizes=3x4,subsizes=2x2] = 1,2,3,4",
                (2, 43),
                "subarray needs starts=",
            ),
            (
                "A: put B W[subarray:sizes=3x4,subsizes=4x1,starts=0x0] = 1,2,3,4",
                (2, 12),
                "subarray dimension 0: size 3, subsize 4",
            ),
            (
                "A: put B W[subarray:sizes=3x4,subsizes=2,starts=0x0] = 1,2",
                (2, 12),
                "2 sizes, 1 subsizes, 2 starts",
            ),
            (
                "A: put B W[subarray:sizes=3xy,subsizes=1x1,starts=0x0] = 1",
                (2, 29),
                "expected a dimension",
            ),
            (
                "A: put B W[subarray:sizes=3,sizes=3,subsizes=1,starts=0] = 1",
                (2, 29),
                "sizes= is given twice",
            ),
            (
                "A: put B W[subarray:sizes=3,subsizes=1,starts=0,order=f] = 1",
                (2, 55),
                "order is c or fortran",
            ),
            (
                "A: put B W[subarray:size=3,subsizes=1,starts=0] = 1",
                (2, 21),
                "unknown subarray argument \"size\"",
            ),
        ];
        assert_call_errors(&cases);
    }
}
