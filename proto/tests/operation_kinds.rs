//! Operation kinds cross the wire through one mapping, both ways.

use onesided_core::window::OpKind;
use onesided_core::Op;
use onesided_proto::{op_kind_from_wire, op_kind_to_wire};

#[test]
fn every_operation_kind_survives_the_wire() {
    let ops = [Op::Sum, Op::Replace, Op::NoOp, Op::Max, Op::Band];
    let mut kinds = vec![OpKind::Put, OpKind::Get, OpKind::CompareAndSwap];
    for op in ops {
        kinds.extend([
            OpKind::Accumulate(op),
            OpKind::GetAccumulate(op),
            OpKind::FetchAndOp(op),
        ]);
    }
    for kind in kinds {
        let (wire_kind, wire_op) = op_kind_to_wire(kind);
        assert_eq!(op_kind_from_wire(wire_kind, wire_op).unwrap(), kind);
    }
}
