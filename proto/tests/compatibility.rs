//! The compatibility promise of `onesided.v1` (proto/README.md), checked: everything the
//! checked-in baseline `proto/v1-baseline.txt` lists — every service method, message field
//! (name, number, type, label, oneof) and enum value — must still be there, unchanged.
//! Additions are fine; `UPDATE_PROTO_BASELINE=1 cargo test -p onesided-proto --test
//! compatibility` records them. A removal or a change fails here: it would need `onesided.v2`.
//! The one change it lets the update record is an `int32` field given an enum type under the
//! same name and number: both are the same varint on the wire, so no peer sees a difference
//! (how `RmaOp.datatype`, `RmaOp.op` and `MpiError.class` became `Datatype`, `Op` and
//! `ErrorClass`).

use std::collections::BTreeSet;
use std::path::PathBuf;

use prost::Message;
use prost_types::{DescriptorProto, EnumDescriptorProto, FileDescriptorSet};

fn enum_lines(scope: &str, descriptor: &EnumDescriptorProto, lines: &mut BTreeSet<String>) {
    for value in &descriptor.value {
        lines.insert(format!(
            "enum {scope}{} {} = {}",
            descriptor.name(),
            value.name(),
            value.number()
        ));
    }
}

fn message_lines(scope: &str, descriptor: &DescriptorProto, lines: &mut BTreeSet<String>) {
    let name = format!("{scope}{}", descriptor.name());
    lines.insert(format!("message {name}"));
    for field in &descriptor.field {
        let oneof = field
            .oneof_index
            .and_then(|index| descriptor.oneof_decl.get(index as usize))
            .map(|oneof| format!(" oneof {}", oneof.name()))
            .unwrap_or_default();
        let line = format!(
            "field {name}.{} = {} {:?} {:?} {}{oneof}",
            field.name(),
            field.number(),
            field.label(),
            field.r#type(),
            field.type_name(),
        );
        lines.insert(line.trim_end().replace("  ", " "));
    }
    let inner = format!("{name}.");
    for nested in &descriptor.nested_type {
        message_lines(&inner, nested, lines);
    }
    for nested in &descriptor.enum_type {
        enum_lines(&inner, nested, lines);
    }
}

/// Whether baseline line `old` is an `int32` field that `current` holds as an enum, with the
/// same name, number and label: a wire-compatible retype.
fn retyped_as_enum(old: &str, current: &BTreeSet<String>) -> bool {
    let Some(head) = old.strip_suffix(" Int32") else {
        return false;
    };
    let enum_prefix = format!("{head} Enum .");
    current
        .iter()
        .any(|line| line.starts_with(&enum_prefix) && !line.contains(" oneof "))
}

/// One line per thing the promise covers.
fn surface() -> BTreeSet<String> {
    let set = FileDescriptorSet::decode(onesided_proto::FILE_DESCRIPTOR_SET).unwrap();
    let mut lines = BTreeSet::new();
    for file in set
        .file
        .iter()
        .filter(|file| file.package() == "onesided.v1")
    {
        for service in &file.service {
            for method in &service.method {
                lines.insert(format!(
                    "rpc {}.{}({}{}) returns ({}{})",
                    service.name(),
                    method.name(),
                    if method.client_streaming() {
                        "stream "
                    } else {
                        ""
                    },
                    method.input_type(),
                    if method.server_streaming() {
                        "stream "
                    } else {
                        ""
                    },
                    method.output_type(),
                ));
            }
        }
        for message in &file.message_type {
            message_lines("", message, &mut lines);
        }
        for descriptor in &file.enum_type {
            enum_lines("", descriptor, &mut lines);
        }
    }
    lines
}

#[test]
fn v1_keeps_everything_it_ever_had() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("v1-baseline.txt");
    let current = surface();
    assert!(current.len() > 100, "the descriptor set was read");
    if std::env::var_os("UPDATE_PROTO_BASELINE").is_some() {
        let previous = std::fs::read_to_string(&path).unwrap_or_default();
        let kept: BTreeSet<String> = previous.lines().map(str::to_string).collect();
        let gone: Vec<&String> = kept
            .difference(&current)
            .filter(|line| !retyped_as_enum(line, &current))
            .collect();
        assert!(
            gone.is_empty(),
            "the baseline only grows; these are gone or changed: {gone:#?}"
        );
        let text: String = current.iter().map(|line| format!("{line}\n")).collect();
        std::fs::write(&path, text).unwrap();
        return;
    }
    let baseline = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (UPDATE_PROTO_BASELINE=1 writes it)",
            path.display()
        )
    });
    let missing: Vec<&str> = baseline
        .lines()
        .filter(|line| !current.contains(*line))
        .collect();
    assert!(
        missing.is_empty(),
        "onesided.v1 lost or changed (see proto/README.md: that needs onesided.v2):\n{}",
        missing.join("\n")
    );
}

#[test]
fn only_an_int32_field_may_become_an_enum() {
    let current: BTreeSet<String> = [
        "field RmaOp.datatype = 4 Optional Enum .onesided.v1.Datatype".to_string(),
        "field Oneof.choice = 7 Optional Enum .onesided.v1.Kind oneof pick".to_string(),
    ]
    .into();
    assert!(retyped_as_enum(
        "field RmaOp.datatype = 4 Optional Int32",
        &current
    ));
    // another number, another wire type, or a oneof member is not the same field
    assert!(!retyped_as_enum(
        "field RmaOp.datatype = 5 Optional Int32",
        &current
    ));
    assert!(!retyped_as_enum(
        "field RmaOp.datatype = 4 Optional Uint64",
        &current
    ));
    assert!(!retyped_as_enum(
        "field Oneof.choice = 7 Optional Int32",
        &current
    ));
}
