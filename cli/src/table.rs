//! The tables of the `ls` commands: every column as wide as its longest cell, so a long world
//! or window name widens its column instead of pushing the rest of its row out of line.
//!
//! Owns: the tables' layout (no borders, two spaces between columns, each column's alignment).
//! Must not: choose the columns or their contents (each command does), or write except through
//! `out`.

use comfy_table::presets::NOTHING;
use comfy_table::{Cell, CellAlignment, Table};

/// How a column's cells line up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    /// Names and lists.
    Left,
    /// Numbers.
    Right,
}

/// A row of `cells`, each as it displays.
pub fn row(cells: &[&dyn std::fmt::Display]) -> Vec<String> {
    cells.iter().map(|cell| cell.to_string()).collect()
}

/// Prints a table: a header row, then `rows`, columns two spaces apart, no borders and no
/// trailing spaces.
pub fn print(header: &[(&str, Align)], rows: impl IntoIterator<Item = Vec<String>>) {
    let mut table = Table::new();
    table.load_style(NOTHING);
    table.set_header(header.iter().map(|(title, _)| Cell::new(title)));
    for row in rows {
        table.add_row(row);
    }
    for (column, (_, align)) in table.column_iter_mut().zip(header) {
        column.set_padding((0, 2));
        column.set_cell_alignment(match align {
            Align::Left => CellAlignment::Left,
            Align::Right => CellAlignment::Right,
        });
    }
    for line in table.lines() {
        outln!("{}", line.trim_end());
    }
}
