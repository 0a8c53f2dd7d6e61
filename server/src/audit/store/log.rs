//! Reads of the log: a window's rows and its tail, its snapshots, the recorded windows, what a
//! restart continues from, and the rows clients persisted themselves (`client_events`).
//!
//! Owns: every read of `audit_events`, `audit_groups`, `audit_windows`, `snapshots` and
//! `client_events` (a window's rows and region rows, tails, snapshots, event counts, the
//! highest window id, incarnation and timestamp), and a stored row as read (`stored_row`: its
//! event from its row or from the events file, an unreadable one marked so, never dropped). An
//! SQLite store's events may lie in both tables, whichever shape wrote them (`Rows`): every
//! read takes both and merges them by sequence number, so readers see the same rows either
//! way. Must not: write (the writer commits through `commit`), or verify a chain or decide what
//! an event means (core does).

use futures::TryStreamExt;
use onesided_core::audit::{AuditRecord, Body, Event, RecordedWindow, StoredRow};

use super::groups::{expand, heads, is_region, with_event};
use super::{hash32, on_pool, AuditStore, Snapshot};

/// A key or lower bound read from a request, as SQL's BIGINT: `None` past `i64::MAX`, which no
/// stored window id or sequence number reaches. (`as i64` wraps such a value to a negative
/// one, and `seq >= $2` then matches the whole log.)
fn bigint(value: u64) -> Option<i64> {
    i64::try_from(value).ok()
}

impl AuditStore {
    /// The highest window id ever recorded (0 when none), so new windows never reuse an id.
    ///
    /// # Errors
    /// Database failures.
    pub async fn max_window_id(&self) -> anyhow::Result<u64> {
        let sql = "SELECT COALESCE(MAX(window_id), 0) FROM audit_windows";
        let max: i64 = match self {
            AuditStore::Sqlite(pool, ..) => sqlx::query_scalar(sql).fetch_one(pool).await?,
            AuditStore::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await?,
        };
        Ok(max as u64)
    }

    /// The last sequence number and hash of a window (`None` for a new one).
    ///
    /// # Errors
    /// Database failures.
    pub async fn tail(&self, window: u64) -> anyhow::Result<Option<(u64, [u8; 32])>> {
        Ok(self
            .tail_at(window)
            .await?
            .map(|(seq, hash, _)| (seq, hash)))
    }

    /// [`AuditStore::tail`] and the last row's timestamp.
    ///
    /// # Errors
    /// Database failures.
    pub async fn tail_at(&self, window: u64) -> anyhow::Result<Option<(u64, [u8; 32], u64)>> {
        let sql = "SELECT seq, hash, at_ns FROM audit_events WHERE window_id = $1 \
                   ORDER BY seq DESC LIMIT 1";
        // the later of the last row and the last group
        let sqlite = "SELECT seq, hash, at_ns FROM ( \
                      SELECT * FROM (SELECT seq, hash, at_ns FROM audit_events \
                      WHERE window_id = $1 ORDER BY seq DESC LIMIT 1) \
                      UNION ALL \
                      SELECT * FROM (SELECT last_seq, last_hash, last_at_ns FROM audit_groups \
                      WHERE window_id = $1 ORDER BY last_seq DESC LIMIT 1)) \
                      ORDER BY seq DESC LIMIT 1";
        let Some(window_id) = bigint(window) else {
            return Ok(None);
        };
        let row: Option<(i64, Vec<u8>, i64)> = match self {
            AuditStore::Sqlite(pool, ..) => {
                sqlx::query_as(sqlite)
                    .bind(window_id)
                    .fetch_optional(pool)
                    .await?
            }
            AuditStore::Postgres(pool) => {
                sqlx::query_as(sql)
                    .bind(window_id)
                    .fetch_optional(pool)
                    .await?
            }
        };
        Ok(row.map(|(seq, hash, at_ns)| (seq as u64, hash32(&hash), at_ns as u64)))
    }

    /// The latest snapshot of each rank of `window`.
    ///
    /// # Errors
    /// Database failures.
    pub async fn snapshots(&self, window: u64) -> anyhow::Result<Vec<Snapshot>> {
        let sql = "SELECT CAST(rank AS BIGINT), seq, data FROM snapshots WHERE window_id = $1";
        let rows: Vec<(i64, i64, Vec<u8>)> = on_pool!(self, pool => {
            sqlx::query_as(sql).bind(window as i64).fetch_all(pool).await?
        });
        Ok(rows
            .into_iter()
            .map(|(rank, seq, data)| Snapshot {
                window,
                rank: rank as u32,
                seq: seq as u64,
                data,
            })
            .collect())
    }

    /// The highest session incarnation recorded per `(world, rank)`, so a restarted server
    /// never hands out an incarnation twice.
    ///
    /// # Errors
    /// Database failures.
    pub async fn incarnations(&self) -> anyhow::Result<Vec<(String, u32, u64)>> {
        let sql = "SELECT w.world, CAST(e.rank AS BIGINT), MAX(e.incarnation) FROM audit_events e \
                   JOIN audit_windows w ON w.window_id = e.window_id \
                   WHERE e.incarnation > 0 GROUP BY w.world, e.rank";
        let rows: Vec<(String, i64, i64)> = on_pool!(self, pool => {
            sqlx::query_as(sql).fetch_all(pool).await?
        });
        let mut max: std::collections::BTreeMap<(String, u32), u64> = rows
            .into_iter()
            .map(|(world, rank, max)| ((world, rank as u32), max as u64))
            .collect();
        if let AuditStore::Sqlite(pool, ..) = self {
            // the groups' events, read a group at a time (their ranks and incarnations only)
            let sql = "SELECT w.world, g.entries FROM audit_groups g \
                       JOIN audit_windows w ON w.window_id = g.window_id";
            let mut groups = sqlx::query_as::<_, (String, Vec<u8>)>(sql).fetch(pool);
            while let Some((world, entries)) = groups.try_next().await? {
                for (rank, incarnation) in heads(&entries).unwrap_or_default() {
                    if incarnation > 0 {
                        let known = max.entry((world.clone(), rank)).or_insert(0);
                        *known = (*known).max(incarnation);
                    }
                }
            }
        }
        Ok(max
            .into_iter()
            .map(|((world, rank), max)| (world, rank, max))
            .collect())
    }

    /// The latest timestamp in the log (0 when empty): a restarted server's clock continues
    /// after it, so timestamps stay monotonic per window.
    ///
    /// # Errors
    /// Database failures.
    pub async fn last_at_ns(&self) -> anyhow::Result<u64> {
        let sql = "SELECT COALESCE(MAX(at_ns), 0) FROM audit_events";
        let sqlite = "SELECT MAX((SELECT COALESCE(MAX(at_ns), 0) FROM audit_events), \
                      (SELECT COALESCE(MAX(last_at_ns), 0) FROM audit_groups))";
        let max: i64 = match self {
            AuditStore::Sqlite(pool, ..) => sqlx::query_scalar(sqlite).fetch_one(pool).await?,
            AuditStore::Postgres(pool) => sqlx::query_scalar(sql).fetch_one(pool).await?,
        };
        Ok(max as u64)
    }

    /// Every recorded window with its event count.
    ///
    /// # Errors
    /// Database failures.
    pub async fn windows(&self) -> anyhow::Result<Vec<RecordedWindow>> {
        let sql = "SELECT w.window_id, w.world, w.name, \
                   (SELECT COUNT(*) FROM audit_events e WHERE e.window_id = w.window_id) \
                   FROM audit_windows w ORDER BY w.window_id";
        let sqlite = "SELECT w.window_id, w.world, w.name, \
                      (SELECT COUNT(*) FROM audit_events e WHERE e.window_id = w.window_id) \
                      + (SELECT COALESCE(SUM(g.last_seq - g.first_seq + 1), 0) \
                      FROM audit_groups g WHERE g.window_id = w.window_id) \
                      FROM audit_windows w ORDER BY w.window_id";
        let rows: Vec<(i64, String, String, i64)> = match self {
            AuditStore::Sqlite(pool, ..) => sqlx::query_as(sqlite).fetch_all(pool).await?,
            AuditStore::Postgres(pool) => sqlx::query_as(sql).fetch_all(pool).await?,
        };
        Ok(rows
            .into_iter()
            .map(|(id, world, name, events)| RecordedWindow {
                id: id as u64,
                world,
                name,
                events: events as u64,
            })
            .collect())
    }

    /// A window's rows with `seq >= from`, in stored order of sequence number.
    ///
    /// # Errors
    /// Database failures, or a body this version cannot read.
    pub async fn rows(&self, window: u64, from: u64) -> anyhow::Result<Vec<StoredRow>> {
        self.rows_where(window, Which::From(from)).await
    }

    /// A dynamic window's rows that attach or detach a region, with `seq < before`: what
    /// recovery reads of the log before the oldest snapshot (a snapshot holds bytes, not
    /// regions). A partial index keeps this cheap however long the log.
    ///
    /// # Errors
    /// Database failures, or a body this version cannot read.
    pub async fn region_rows(&self, window: u64, before: u64) -> anyhow::Result<Vec<StoredRow>> {
        self.rows_where(window, Which::RegionsBefore(before)).await
    }

    /// `window`'s rows that `which` selects, in order of sequence number: its `audit_events`
    /// rows and, in SQLite, its groups' events, merged.
    async fn rows_where(&self, window: u64, which: Which) -> anyhow::Result<Vec<StoredRow>> {
        let (condition, group_condition, seq) = match which {
            Which::From(from) => ("seq >= $2", "last_seq >= $2", from),
            // the indexes' own conditions, word for word (both databases match them so)
            Which::RegionsBefore(before) => (
                "seq < $2 AND kind IN ('region_attached', 'region_detached')",
                "first_seq < $2 AND regions = 1",
                before,
            ),
        };
        let sql = format!(
            "SELECT seq, at_ns, CAST(rank AS BIGINT), incarnation, body, event, prev_hash, \
             hash, event_at, event_len \
             FROM audit_events WHERE window_id = $1 AND {condition} ORDER BY seq"
        );
        let (Some(window_id), Some(seq)) = (bigint(window), bigint(seq)) else {
            return Ok(Vec::new());
        };
        let raw: Vec<Raw> = on_pool!(self, pool => {
            sqlx::query_as(&sql)
                .bind(window_id)
                .bind(seq)
                .fetch_all(pool)
                .await?
        });
        let rows = self.stored_rows(window, raw).await?;
        let AuditStore::Sqlite(pool, ..) = self else {
            return Ok(rows);
        };
        let sql = format!(
            "SELECT first_seq, last_seq, prev_hash, entries FROM audit_groups \
             WHERE window_id = $1 AND {group_condition} ORDER BY last_seq"
        );
        let groups: Vec<(i64, i64, Vec<u8>, Vec<u8>)> = sqlx::query_as(&sql)
            .bind(window_id)
            .bind(seq)
            .fetch_all(pool)
            .await?;
        if groups.is_empty() {
            return Ok(rows);
        }
        let expanded: Vec<_> = groups
            .into_iter()
            .flat_map(|(first, last, prev_hash, entries)| {
                expand(window, first as u64, last as u64, &prev_hash, &entries)
            })
            .filter(|(row, span)| which.in_range(row, span.is_some()))
            .collect();
        // the events the groups keep in the events file, read from it
        let spans: Vec<(i64, i64)> = expanded.iter().filter_map(|(_, span)| *span).collect();
        let mut read = self.read_spans(spans).await?.into_iter();
        let grouped = expanded
            .into_iter()
            .map(|(row, span)| match span {
                Some(_) => with_event(
                    row,
                    read.next()
                        .unwrap_or_else(|| Err("the events file gave no bytes".to_string())),
                ),
                None => row,
            })
            .filter(|row| which.takes(row));
        let mut merged: Vec<StoredRow> = rows.into_iter().chain(grouped).collect();
        merged.sort_by_key(|row| row.record.seq);
        Ok(merged)
    }

    /// The events at `spans` of the events file: each one's bytes, or why they cannot be read.
    async fn read_spans(
        &self,
        spans: Vec<(i64, i64)>,
    ) -> anyhow::Result<Vec<Result<Vec<u8>, String>>> {
        if spans.is_empty() {
            return Ok(Vec::new());
        }
        Ok(match self {
            AuditStore::Sqlite(_, Some(file), _) => file.read(spans).await?,
            _ => spans
                .iter()
                .map(|_| {
                    Err("the row's event lies in an events file this store has none of".to_string())
                })
                .collect(),
        })
    }

    /// The rows of `window` as selected, with the events kept in the events file read from it.
    async fn stored_rows(&self, window: u64, raw: Vec<Raw>) -> anyhow::Result<Vec<StoredRow>> {
        let spans: Vec<(i64, i64)> = raw.iter().filter_map(|raw| raw.8.zip(raw.9)).collect();
        let mut read = self.read_spans(spans).await?.into_iter();
        Ok(raw
            .into_iter()
            .map(|raw| {
                let in_file = if raw.8.is_some() && raw.9.is_some() {
                    read.next()
                } else {
                    None
                };
                stored_row(window, raw, in_file)
            })
            .collect())
    }
}

/// Which of a window's rows [`AuditStore::rows_where`] reads.
#[derive(Clone, Copy, Debug)]
enum Which {
    /// Every row from this sequence number on.
    From(u64),
    /// The rows that attach or detach a region, before this sequence number.
    RegionsBefore(u64),
}

impl Which {
    /// Whether `row`, an event of a group the query selected, may be one of them, before its
    /// event is read from the events file when it lies there (`in_file`): in the range of
    /// sequence numbers asked for, and for region rows not in the file, which holds only
    /// events of `FILE_EVENT_BYTES` or more, never a region's (as the rows' query selects
    /// by kind and so never reads a large event's row).
    fn in_range(self, row: &StoredRow, in_file: bool) -> bool {
        match self {
            Which::From(from) => row.record.seq >= from,
            Which::RegionsBefore(before) => row.record.seq < before && !in_file,
        }
    }

    /// Whether `row`, an event of a group the query selected, is one of them (a group holds
    /// others too). An unreadable event of a group with regions is taken: what reads it says
    /// so, rather than miss a region.
    fn takes(self, row: &StoredRow) -> bool {
        match self {
            Which::From(from) => row.record.seq >= from,
            Which::RegionsBefore(before) => {
                row.record.seq < before
                    && (row.unreadable.is_some() || is_region(&row.record.event))
            }
        }
    }
}

/// A row as selected: seq (or cseq), at_ns, rank, incarnation, JSON body, binary event, hashes,
/// and where in the events file its event lies (offset, length).
type Raw = (
    i64,
    i64,
    i64,
    i64,
    Option<String>,
    Option<Vec<u8>>,
    Vec<u8>,
    Vec<u8>,
    Option<i64>,
    Option<i64>,
);

/// `raw` as a row; `in_file` is its event as read from the events file, when it lies there.
fn stored_row(
    window: u64,
    (seq, at_ns, rank, incarnation, json, binary, prev_hash, hash, _, _): Raw,
    in_file: Option<Result<Vec<u8>, String>>,
) -> StoredRow {
    // the schema's CHECK keeps exactly one; a row with none reads as empty JSON and fails
    // verification
    let (body, lost) = match (in_file, binary, json) {
        (Some(Ok(bytes)), ..) => (Body::Binary(bytes), None),
        // an event that cannot be read from the file is no bytes: its hash fails, verification
        // names its row
        (Some(Err(why)), ..) => (Body::Binary(Vec::new()), Some(why)),
        (None, Some(bytes), _) => (Body::Binary(bytes), None),
        (None, None, text) => (Body::Json(text.unwrap_or_default()), None),
    };
    // an unreadable body fails verification, which names its row; readers that act on events
    // refuse it (core's `readable`)
    let (event, unreadable) = match (lost, body.decode()) {
        (Some(why), _) => (Event::Detach, Some(why)),
        (None, Ok(event)) => (event, None),
        (None, Err(error)) => (Event::Detach, Some(error.message)),
    };
    StoredRow {
        record: AuditRecord {
            window,
            seq: seq as u64,
            at_ns: at_ns as u64,
            rank: rank as u32,
            incarnation: incarnation as u64,
            cseq: None,
            event,
        },
        unreadable,
        body,
        prev_hash,
        hash,
    }
}

/// Which client rows to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientRows {
    /// Every client row of the window.
    All,
    /// Rows `from..=to` of one chain.
    Range {
        /// The client's rank.
        rank: u32,
        /// Its session incarnation.
        incarnation: u64,
        /// The first cseq.
        from: u64,
        /// The last.
        to: u64,
    },
}

impl AuditStore {
    /// Rows clients persisted themselves for `window` (table `client_events`), ordered by rank,
    /// incarnation and cseq; `record.seq` is the cseq (the row's place in its own chain).
    ///
    /// # Errors
    /// Database failures.
    pub async fn client_rows(
        &self,
        window: u64,
        which: ClientRows,
    ) -> anyhow::Result<Vec<StoredRow>> {
        // clients keep every event in its row
        const COLUMNS: &str = "SELECT cseq, at_ns, CAST(rank AS BIGINT), incarnation, body, \
                               event, prev_hash, hash, CAST(NULL AS BIGINT), \
                               CAST(NULL AS BIGINT) FROM client_events WHERE window_id = $1";
        let (sql, chain) = match which {
            ClientRows::All => (format!("{COLUMNS} ORDER BY rank, incarnation, cseq"), None),
            ClientRows::Range {
                rank,
                incarnation,
                from,
                to,
            } => (
                format!(
                    "{COLUMNS} AND rank = $2 AND incarnation = $3 AND cseq >= $4 AND cseq <= $5 \
                     ORDER BY cseq"
                ),
                Some((rank, incarnation, from, to)),
            ),
        };
        let Some(window_id) = bigint(window) else {
            return Ok(Vec::new());
        };
        let chain = match chain {
            None => None,
            Some((rank, incarnation, from, to)) => {
                let (Some(incarnation), Some(from)) = (bigint(incarnation), bigint(from)) else {
                    return Ok(Vec::new());
                };
                Some((rank, incarnation, from, bigint(to).unwrap_or(i64::MAX)))
            }
        };
        macro_rules! fetch {
            ($pool:expr) => {{
                let mut query = sqlx::query_as::<_, Raw>(&sql).bind(window_id);
                if let Some((rank, incarnation, from, to)) = chain {
                    query = query
                        .bind(rank as i32)
                        .bind(incarnation)
                        .bind(from)
                        .bind(to);
                }
                query.fetch_all($pool).await?
            }};
        }
        let raw: Vec<Raw> = match self {
            AuditStore::Sqlite(pool, ..) => fetch!(pool),
            AuditStore::Postgres(pool) => fetch!(pool),
        };
        // record.seq is the cseq: the row's place in its own chain
        self.stored_rows(window, raw).await
    }
}
