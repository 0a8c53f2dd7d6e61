//! The writer's commits: rows, the windows they create and snapshots, inserted on one held
//! connection in one statement or one transaction.
//!
//! Owns: the writer's own connection (`Committer`: kept between commits, closed after a
//! failed one), the order of a commit (its large events staged in the events file and synced
//! first, the guard checked, then the windows, rows and snapshots), and the batched INSERT
//! (`padded_insert`: its shapes, and their statements' text built once per database). Must
//! not: number, hash or encode rows (the writer hands them ready), decide whether a guard holds
//! (`postgres` asks, the database's trigger enforces it), or retry a failed commit (the writer
//! does).

use onesided_core::audit::{Body, Event};
use sqlx::pool::PoolConnection;
use sqlx::{Connection, PgConnection, Postgres, QueryBuilder, Sqlite, SqliteConnection};

use super::events_file::{in_file, PendingAppend};
use super::groups::{split, GroupRow, Single};
use super::postgres::{commit_failed_postgres, guard_postgres};
use super::sqlite::{commit_failed_sqlite, guard_sqlite};
use super::{AuditStore, Fenced, Guard, NewRow, Rows, Snapshot};

impl AuditStore {
    /// Inserts rows (and the windows they create) and replaces snapshots, in one transaction,
    /// on a connection of the pool. The audit writer commits through a [`Committer`] instead.
    ///
    /// # Errors
    /// Database failures; nothing is stored then.
    pub async fn insert(&self, rows: &[NewRow], snapshots: &[Snapshot]) -> anyhow::Result<()> {
        Committer::new(self.clone()).insert(rows, snapshots).await
    }

    async fn acquire(&self) -> anyhow::Result<Held> {
        Ok(match self {
            AuditStore::Sqlite(pool, ..) => Held::Sqlite(pool.acquire().await?),
            AuditStore::Postgres(pool) => Held::Postgres(pool.acquire().await?),
        })
    }
}

/// Rows whose large events [`Committer::stage`] started writing: for
/// [`Committer::insert_staged`].
#[derive(Debug)]
pub struct Staged(Option<PendingAppend>);

/// The audit writer's own connection for its commits, taken from the store's pool once and
/// kept: a commit then goes straight to its connection (for SQLite, to that connection's
/// worker thread) without taking one from the pool and handing it back around every commit,
/// which cost a single-row SQLite commit 15–70 µs here (BENCHMARKS.md, "One connection for
/// the writer"). A connection whose commit failed is closed, not pooled again, and the next
/// commit takes a fresh one.
#[derive(Debug)]
pub struct Committer {
    store: AuditStore,
    held: Option<Held>,
}

#[derive(Debug)]
enum Held {
    Sqlite(PoolConnection<Sqlite>),
    Postgres(PoolConnection<Postgres>),
}

impl Committer {
    /// A committer over `store`; it takes its connection at the first commit.
    pub fn new(store: AuditStore) -> Self {
        Committer { store, held: None }
    }

    /// [`AuditStore::insert`] on the held connection.
    ///
    /// # Errors
    /// Database failures; nothing is stored then, and the connection is closed.
    pub async fn insert(&mut self, rows: &[NewRow], snapshots: &[Snapshot]) -> anyhow::Result<()> {
        self.insert_guarded(rows, snapshots, None).await
    }

    /// [`Committer::insert`], in a transaction that first checks `guard` (PostgreSQL only).
    ///
    /// # Errors
    /// [`Fenced`] (nothing is stored, the connection is kept) when the guard's leases are not
    /// this node's any more; otherwise as [`Committer::insert`].
    pub async fn insert_guarded(
        &mut self,
        rows: &[NewRow],
        snapshots: &[Snapshot],
        guard: Option<&Guard>,
    ) -> anyhow::Result<()> {
        let staged = self.stage(rows).await?;
        self.insert_staged(rows, staged, snapshots, guard).await
    }

    /// Starts writing the large events of `rows` to an SQLite store's events file on a
    /// blocking thread, and returns without waiting for the write: what needs only the
    /// rows' bodies is done, so their hashes may be filled in meanwhile. The rows, with the
    /// same bodies, then go to [`Committer::insert_staged`].
    ///
    /// # Errors
    /// The events file could not be opened, or no connection could be had.
    pub async fn stage(&mut self, rows: &[NewRow]) -> anyhow::Result<Staged> {
        let AuditStore::Sqlite(_, Some(file), _) = &self.store else {
            return Ok(Staged(None));
        };
        if rows.iter().all(|row| in_file(row).is_none()) {
            return Ok(Staged(None));
        }
        let mut held = match self.held.take() {
            Some(held) => held,
            None => self.store.acquire().await?,
        };
        let begun = match &mut held {
            Held::Sqlite(conn) => file.append(conn, rows).await,
            Held::Postgres(_) => Ok(None),
        };
        self.held = Some(held);
        Ok(Staged(begun?))
    }

    /// [`Committer::insert_guarded`] of rows [`Committer::stage`]d: waits for their large
    /// events' write, then inserts them.
    ///
    /// # Errors
    /// As [`Committer::insert_guarded`].
    pub async fn insert_staged(
        &mut self,
        rows: &[NewRow],
        staged: Staged,
        snapshots: &[Snapshot],
        guard: Option<&Guard>,
    ) -> anyhow::Result<()> {
        if rows.is_empty() && snapshots.is_empty() {
            return Ok(());
        }
        let mut held = match self.held.take() {
            Some(held) => held,
            None => self.store.acquire().await?,
        };
        let inserted = match (&self.store, &mut held) {
            (AuditStore::Sqlite(_, _, shape), Held::Sqlite(conn)) => {
                // the large events first, on disk before any row that points at them
                let placed = match staged.0 {
                    Some(pending) => pending.finish().await,
                    None => Ok(Vec::new()),
                };
                match placed {
                    Ok(placed) => {
                        let split = shaped(*shape, rows, &placed);
                        insert_sqlite(conn, &split, snapshots, guard).await
                    }
                    Err(error) => {
                        // the file failed, not the connection
                        self.held = Some(held);
                        return Err(error);
                    }
                }
            }
            (_, Held::Postgres(conn)) => {
                let split = shaped(Rows::PerEvent, rows, &[]);
                insert_postgres(conn, &split, snapshots, guard).await
            }
            (_, Held::Sqlite(conn)) => {
                let split = shaped(Rows::PerEvent, rows, &[]);
                insert_sqlite(conn, &split, snapshots, guard).await
            }
        };
        match inserted {
            Ok(()) => self.held = Some(held),
            // the connection is fine: the database refused the rows, on purpose
            Err(ref error) if error.is::<Fenced>() => self.held = Some(held),
            // it may be broken (a restarted PostgreSQL): closed rather than pooled again
            Err(_) => match &mut held {
                Held::Sqlite(conn) => conn.close_on_drop(),
                Held::Postgres(conn) => conn.close_on_drop(),
            },
        }
        inserted
    }
}

/// A commit's rows as they are stored: rows of `audit_events` (each with where its event lies
/// in the events file, if it does) and rows of `audit_groups`.
pub(super) struct Split<'a> {
    /// The commit's rows, all of them (the windows they create are found here).
    rows: &'a [NewRow],
    singles: Vec<Single<'a>>,
    groups: Vec<GroupRow>,
}

/// `rows` as `shape` stores them; `placed[i]`: where row `i`'s event lies in the events file
/// (`placed` is empty when none does).
fn shaped<'a>(shape: Rows, rows: &'a [NewRow], placed: &[Option<(i64, i64)>]) -> Split<'a> {
    let (singles, groups) = match shape {
        Rows::PerEvent => {
            let singles = rows
                .iter()
                .enumerate()
                .map(|(index, row)| (row, placed.get(index).copied().flatten()))
                .collect();
            (singles, Vec::new())
        }
        Rows::Groups => split(rows, placed),
    };
    Split {
        rows,
        singles,
        groups,
    }
}

/// One INSERT into `audit_events` of `rows` (at most [`MAX_ROWS_PER_INSERT`]), padded with
/// rows of NULLs up to the next of [`SHAPES`], which the statement filters out before anything
/// is inserted: a batch of any length is one statement of at most 24 shapes, each prepared
/// once per connection and then served from sqlx's statement cache. Up to 16 rows a batch has
/// a shape of its own length, so the small commits that latency waits for bind no padding (with
/// powers of two only, a lock-put-unlock's 9 rows bound 7 rows of NULLs: 84 of 192 parameters,
/// each bound, copied for SQLite's thread, cleared and evaluated for nothing); above 16 the
/// shapes grow by halves of powers of two, so at most a third of a statement is padding. (With
/// one shape per length, nearly every group commit prepared a fresh multi-row statement, which
/// cost more than its fsync; with exact power-of-two pieces, a batch of 159 rows was six
/// statements inside BEGIN … COMMIT, eight round trips to the database instead of one.) The
/// statements' text is built once ([`padded_texts`]: `texts`), not for every commit.
///
/// With `file_columns` (SQLite) each row also binds `event_at` and `event_len`: where its event
/// was written in the events file ([`EventFile::append`](super::EventFile::append)), and then no
/// `event`.
pub(super) fn padded_insert<'a, DB: sqlx::Database>(
    texts: &'static [String],
    file_columns: bool,
    rows: &[Single<'a>],
) -> sqlx::query::Query<'a, DB, <DB as sqlx::Database>::Arguments<'a>>
where
    Option<i64>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    Option<i32>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    Option<&'a str>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    Option<&'a [u8]>: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    let (index, padded) = padded(&SHAPES, rows);
    let mut query = sqlx::query(texts[index].as_str());
    for single in padded {
        let row = single.map(|(row, _)| *row);
        let in_file = single.and_then(|(_, placed)| *placed);
        let (json, binary) = match row.map(|row| &row.body) {
            _ if in_file.is_some() => (None, None),
            Some(Body::Json(text)) => (Some(text.as_str()), None),
            Some(Body::Binary(bytes)) => (None, Some(bytes.as_slice())),
            None => (None, None),
        };
        query = query
            .bind(row.map(|row| row.record.window as i64))
            .bind(row.map(|row| row.record.seq as i64))
            .bind(row.map(|row| row.record.at_ns as i64))
            .bind(row.map(|row| row.record.rank as i32))
            .bind(row.map(|row| row.record.incarnation as i64))
            .bind(row.map(|row| row.record.event.kind()))
            .bind(json)
            .bind(binary)
            .bind(row.map(|row| row.prev_hash.as_slice()))
            .bind(row.map(|row| row.hash.as_slice()));
        if file_columns {
            query = query
                .bind(in_file.map(|(at, _)| at))
                .bind(in_file.map(|(_, len)| len));
        }
    }
    query
}

/// [`padded_insert`] for `audit_groups` (SQLite): `groups` (at most [`MAX_GROUPS_PER_INSERT`])
/// padded up to the next of [`GROUP_SHAPES`].
fn padded_group_insert<'a>(
    groups: &'a [GroupRow],
) -> sqlx::query::Query<'a, Sqlite, <Sqlite as sqlx::Database>::Arguments<'a>> {
    let (index, padded) = padded(&GROUP_SHAPES, groups);
    let mut query = sqlx::query(PADDED_GROUP_INSERTS[index].as_str());
    for group in padded {
        query = query
            .bind(group.map(|group| group.window as i64))
            .bind(group.map(|group| group.first_seq as i64))
            .bind(group.map(|group| group.last_seq as i64))
            .bind(group.map(|group| group.last_at_ns as i64))
            .bind(group.map(|group| i64::from(group.regions)))
            .bind(group.map(|group| group.prev_hash.as_slice()))
            .bind(group.map(|group| group.last_hash.as_slice()))
            .bind(group.map(|group| group.entries.as_slice()))
            .bind(group.and_then(|group| group.file_end));
    }
    query
}

/// Columns of `audit_events` that [`padded_insert`] binds per row.
const PADDED_COLUMNS: &str =
    "window_id, seq, at_ns, rank, incarnation, kind, body, event, prev_hash, hash";

/// The same for SQLite, which may keep an event in the events file.
const PADDED_COLUMNS_SQLITE: &str = "window_id, seq, at_ns, rank, incarnation, kind, body, \
     event, prev_hash, hash, event_at, event_len";

/// The row counts of [`padded_insert`]'s statements: every length up to 16, then 24, 32, 48 …
/// [`MAX_ROWS_PER_INSERT`] (a power of two and one and a half times it).
const SHAPES: [usize; 24] = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 24, 32, 48, 64, 96, 128, 192, 256,
];

/// The index in `shapes` ([`SHAPES`] or [`GROUP_SHAPES`]) of the smallest shape that holds
/// `rows` rows (1 ≤ `rows` ≤ the largest).
fn shape_index(shapes: &[usize], rows: usize) -> usize {
    shapes.partition_point(|&shape| shape < rows)
}

/// `items` padded with `None` up to the smallest of `shapes` that holds them, and that shape's
/// index (which statement of its padded inserts takes them).
fn padded<'i, T>(shapes: &[usize], items: &'i [T]) -> (usize, impl Iterator<Item = Option<&'i T>>) {
    let index = shape_index(shapes, items.len());
    let padding = std::iter::repeat_n(None, shapes[index] - items.len());
    (index, items.iter().map(Some).chain(padding))
}

/// The group counts of [`padded_group_insert`]'s statements: a commit writes one group per
/// window it holds events of, and the hot paths hold one or a few.
const GROUP_SHAPES: [usize; 10] = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32];

/// The most groups one INSERT carries; a commit of more windows is several in a transaction.
const MAX_GROUPS_PER_INSERT: usize = GROUP_SHAPES[GROUP_SHAPES.len() - 1];

/// Columns of `audit_groups` that [`padded_group_insert`] binds per group.
const GROUP_COLUMNS: &str = "window_id, first_seq, last_seq, last_at_ns, regions, prev_hash, \
     last_hash, entries, file_end";

/// The statements of [`padded_group_insert`], one per [`GROUP_SHAPES`], built once.
static PADDED_GROUP_INSERTS: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
    padded_texts("audit_groups", GROUP_COLUMNS, &GROUP_SHAPES, |_| {
        "?".to_string()
    })
});

// the largest shape holds the most rows one INSERT carries
const _: () = assert!(SHAPES[SHAPES.len() - 1] == MAX_ROWS_PER_INSERT);

/// The text of [`padded_insert`]'s statement into `table` for each of `shapes`, built once: formatting a
/// 128-row statement's 1 280 placeholders for every commit cost the audit writer a fifth of its
/// own instructions per commit (`valgrind --tool=callgrind`, BENCHMARKS.md). `VALUES` names its
/// columns `column1` … in SQLite and PostgreSQL alike.
fn padded_texts(
    table: &str,
    columns: &str,
    shapes: &[usize],
    placeholder: fn(usize) -> String,
) -> Vec<String> {
    let width = columns.split(',').count();
    shapes
        .iter()
        .map(|&shape| {
            let mut sql = format!("INSERT INTO {table} ({columns}) SELECT * FROM (VALUES ");
            for row in 0..shape {
                if row > 0 {
                    sql.push_str(", ");
                }
                let first = row * width + 1;
                let placeholders: Vec<String> = (first..first + width).map(placeholder).collect();
                sql.push('(');
                sql.push_str(&placeholders.join(", "));
                sql.push(')');
            }
            sql.push_str(") AS batch WHERE column1 IS NOT NULL");
            sql
        })
        .collect()
}

/// [`padded_texts`] for SQLite: anonymous `?` placeholders, bound in order. (With `$n`, sqlx
/// looks each parameter's name up in SQLite, `sqlite3_bind_parameter_name`, a walk of the
/// statement's list of names: quadratic in the 2 560 parameters of a 256-row statement.)
static PADDED_INSERTS_SQLITE: std::sync::LazyLock<Vec<String>> = std::sync::LazyLock::new(|| {
    padded_texts("audit_events", PADDED_COLUMNS_SQLITE, &SHAPES, |_| {
        "?".to_string()
    })
});

/// [`padded_texts`] for PostgreSQL: `$1` … `$n`.
pub(super) static PADDED_INSERTS_POSTGRES: std::sync::LazyLock<Vec<String>> =
    std::sync::LazyLock::new(|| {
        padded_texts("audit_events", PADDED_COLUMNS, &SHAPES, |n| format!("${n}"))
    });

macro_rules! insert_fn {
    ($name:ident, $conn:ty, $db:ty, $guard:ident, $commit_failed:ident, $texts:ident, $file_columns:expr, $groups:ident) => {
        /// `split`: the commit's rows as they are stored, in `audit_events` (with where their
        /// events lie in the events file) and in `audit_groups`.
        async fn $name(
            conn: &mut $conn,
            split: &Split<'_>,
            snapshots: &[Snapshot],
            guard: Option<&Guard>,
        ) -> anyhow::Result<()> {
            let creates = split
                .rows
                .iter()
                .any(|row| matches!(row.record.event, Event::WindowCreated { .. }));
            let singles = &split.singles;
            let groups = &split.groups;
            let one_statement = snapshots.is_empty()
                && !creates
                && guard.is_none()
                && singles.len() <= MAX_ROWS_PER_INSERT
                && groups.len() <= MAX_GROUPS_PER_INSERT
                && (singles.is_empty() || groups.is_empty());
            if one_statement {
                // one statement is its own transaction: no BEGIN and COMMIT round trips to the
                // database (sqlite's worker thread, or PostgreSQL over the network)
                if groups.is_empty() {
                    padded_insert::<$db>(&$texts, $file_columns, singles)
                        .persistent(true)
                        .execute(&mut *conn)
                        .await?;
                } else {
                    $groups(&mut *conn, groups).await?;
                }
                return Ok(());
            }
            let mut tx = conn.begin().await?;
            let written: anyhow::Result<()> = async {
                if let Some(guard) = guard {
                    $guard(&mut *tx, guard).await?;
                }
                for snapshot in snapshots {
                    sqlx::query(
                        "INSERT INTO snapshots (window_id, rank, seq, data) VALUES ($1, $2, $3, $4) \
                         ON CONFLICT (window_id, rank) DO UPDATE SET seq = excluded.seq, data = excluded.data",
                    )
                    .bind(snapshot.window as i64)
                    .bind(snapshot.rank as i32)
                    .bind(snapshot.seq as i64)
                    .bind(snapshot.data.as_slice())
                    .execute(&mut *tx)
                    .await?;
                }
                for chunk in split.rows.chunks(MAX_ROWS_PER_INSERT) {
                    let created: Vec<(u64, &str, &str)> = chunk
                        .iter()
                        .filter_map(|row| match &row.record.event {
                            Event::WindowCreated { world, name, .. } => {
                                Some((row.record.window, world.as_str(), name.as_str()))
                            }
                            _ => None,
                        })
                        .collect();
                    if !created.is_empty() {
                        let mut query: QueryBuilder<'_, $db> =
                            QueryBuilder::new("INSERT INTO audit_windows (window_id, world, name) ");
                        query.push_values(created, |mut values, (id, world, name)| {
                            values.push_bind(id as i64).push_bind(world).push_bind(name);
                        });
                        query.build().execute(&mut *tx).await?;
                    }
                }
                for chunk in singles.chunks(MAX_ROWS_PER_INSERT) {
                    padded_insert::<$db>(&$texts, $file_columns, chunk)
                        .execute(&mut *tx)
                        .await?;
                }
                for chunk in groups.chunks(MAX_GROUPS_PER_INSERT) {
                    $groups(&mut *tx, chunk).await?;
                }
                Ok(())
            }
            .await;
            match written {
                Ok(()) => tx.commit().await.map_err($commit_failed)?,
                // ended now: a dropped transaction only queues its ROLLBACK for the
                // connection's next use, and a connection kept while the node is idle (a
                // fenced commit keeps it) would hold the transaction's locks until then
                Err(error) => {
                    if let Err(ending) = tx.rollback().await {
                        // not `Fenced` any more: the connection's state is unknown, so the
                        // committer closes it
                        return Err(anyhow::Error::new(ending).context(format!(
                            "cannot roll back a refused commit ({error:#})"
                        )));
                    }
                    return Err(error);
                }
            }
            Ok(())
        }
    };
}

/// Inserts `groups` (at most [`MAX_GROUPS_PER_INSERT`]) into an SQLite store's `audit_groups`.
async fn insert_groups_sqlite(
    conn: &mut SqliteConnection,
    groups: &[GroupRow],
) -> anyhow::Result<()> {
    padded_group_insert(groups)
        .persistent(true)
        .execute(conn)
        .await?;
    Ok(())
}

/// PostgreSQL keeps one row per event: [`shaped`] never makes groups for it.
async fn insert_groups_postgres(_: &mut PgConnection, groups: &[GroupRow]) -> anyhow::Result<()> {
    anyhow::ensure!(
        groups.is_empty(),
        "a PostgreSQL store keeps one row per event"
    );
    Ok(())
}

/// The most rows one INSERT carries: a batch of at most this many, with no snapshot and no
/// new window, is one statement in autocommit; a larger one is several inside a transaction.
const MAX_ROWS_PER_INSERT: usize = 256;

insert_fn!(
    insert_sqlite,
    SqliteConnection,
    Sqlite,
    guard_sqlite,
    commit_failed_sqlite,
    PADDED_INSERTS_SQLITE,
    true,
    insert_groups_sqlite
);
insert_fn!(
    insert_postgres,
    PgConnection,
    Postgres,
    guard_postgres,
    commit_failed_postgres,
    PADDED_INSERTS_POSTGRES,
    false,
    insert_groups_postgres
);

#[cfg(test)]
mod tests {
    use super::*;

    use onesided_core::audit::{verify, GENESIS};

    use super::super::tests::chained;

    /// Every batch length gets the smallest shape that holds it: its own up to 16 rows, so a
    /// small commit binds no padding, and never more than half again as many rows above.
    #[test]
    fn a_batch_takes_the_smallest_shape_that_holds_it() {
        for rows in 1..=MAX_ROWS_PER_INSERT {
            let shape = SHAPES[shape_index(&SHAPES, rows)];
            assert!(shape >= rows, "{rows} rows in a shape of {shape}");
            let smaller = shape_index(&SHAPES, rows)
                .checked_sub(1)
                .map(|index| SHAPES[index]);
            assert!(smaller.is_none_or(|smaller| smaller < rows), "{rows} rows");
            if rows <= 16 {
                assert_eq!(shape, rows);
            } else {
                assert!(2 * shape <= 3 * rows, "{rows} rows padded to {shape}");
            }
        }
    }

    /// Batches of shapes' lengths, one past them and one short of them, each on a window of its
    /// own, are stored row for row — no padding row lands, none is lost — and the chains verify:
    /// in SQLite and in PostgreSQL, in one statement (up to 256 rows) and in a transaction.
    async fn padded_batches_store_exactly_their_rows(url: Option<&str>) {
        let dir = std::env::temp_dir().join(format!(
            "onesided-padded-{}-{}",
            std::process::id(),
            url.is_some()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let store = AuditStore::open(url, &dir).await.unwrap();
        let mut committer = Committer::new(store.clone());
        let lengths = [
            1, 2, 3, 5, 9, 15, 16, 17, 24, 25, 63, 64, 65, 128, 159, 192, 193, 255, 256, 257, 700,
        ];
        for (window, &len) in (1u64..).zip(lengths.iter()) {
            let rows = chained(window, 1..=len as u64, GENESIS);
            committer.insert(&rows, &[]).await.unwrap();
            let stored = store.rows(window, 1).await.unwrap();
            assert_eq!(stored.len(), len, "a batch of {len} rows");
            for (row, stored) in rows.iter().zip(&stored) {
                assert_eq!(stored.record, row.record, "a batch of {len} rows");
            }
            assert_eq!(verify(&stored), Ok(()), "a batch of {len} rows");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn padded_batches_store_exactly_their_rows_in_sqlite() {
        padded_batches_store_exactly_their_rows(None).await;
    }

    #[tokio::test]
    async fn padded_batches_store_exactly_their_rows_in_postgres() {
        let database = onesided_test_support::PgDatabase::create().await;
        padded_batches_store_exactly_their_rows(Some(&database.url)).await;
    }
}
