//! Window descriptions cross the wire through one mapping with one flavor rule, both ways.

use onesided_core::window::{Flavor, MemoryModel, WindowDesc, WindowInfo};
use onesided_core::ErrorClass;
use onesided_proto::{desc_from_wire, desc_to_wire, flavor_from_wire, flavor_to_wire, v1};

fn desc(flavor: Flavor) -> WindowDesc {
    WindowDesc {
        id: 9,
        name: "counters".to_string(),
        world: "jobs".to_string(),
        flavor,
        model: MemoryModel::Separate,
        sizes: vec![16, 0, 24],
        disp_units: vec![8, 1, 4],
        info: WindowInfo::parse([("no_locks", "true")]).expect("valid info"),
        group: vec![4, 0, 2],
    }
}

#[test]
fn a_description_survives_the_wire_both_ways() {
    for flavor in [Flavor::Create, Flavor::Allocate, Flavor::Dynamic] {
        let original = desc(flavor);
        assert_eq!(desc_from_wire(desc_to_wire(&original)).unwrap(), original);
        assert_eq!(flavor_from_wire(flavor_to_wire(flavor)).unwrap(), flavor);
    }
}

#[test]
fn an_unset_flavor_is_allocate_and_an_unknown_one_is_refused() {
    assert_eq!(
        flavor_from_wire(v1::Flavor::Unspecified as i32).unwrap(),
        Flavor::Allocate
    );
    assert_eq!(flavor_from_wire(77).unwrap_err().class, ErrorClass::Arg);
    let mut wire = desc_to_wire(&desc(Flavor::Create));
    wire.flavor = 77;
    assert_eq!(desc_from_wire(wire).unwrap_err().class, ErrorClass::Arg);
}

#[test]
fn a_description_with_mismatched_shapes_is_refused() {
    let mut wire = desc_to_wire(&desc(Flavor::Create));
    wire.disp_units.pop();
    assert_eq!(desc_from_wire(wire).unwrap_err().class, ErrorClass::Arg);
}

#[test]
fn a_description_without_a_group_spans_the_world_and_a_group_of_another_length_is_refused() {
    let mut wire = desc_to_wire(&desc(Flavor::Allocate));
    wire.group.clear();
    assert_eq!(desc_from_wire(wire.clone()).unwrap().group, vec![0, 1, 2]);
    wire.group = vec![1];
    assert_eq!(desc_from_wire(wire).unwrap_err().class, ErrorClass::Arg);
}
