//! The events file of an SQLite store (`audit.db-events` beside `audit.db`): large events
//! written once, beside the database instead of in their rows.
//!
//! Owns: which events go there (`FILE_EVENT_BYTES`), the file's lock (one appending process),
//! its appends (one block-aligned write per commit, through `O_DIRECT` where the file system
//! takes it, synced before the rows that point at them commit; the buffer kept for the next)
//! and the reads of the spans rows point at. Must not: insert rows or read them (`commit` and
//! `log` do, and hand it the rows and the spans; it reads only where the last event a row or
//! a group points at ends, when it opens), or judge an event it cannot read (the read says why, and
//! verification fails at its row).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use onesided_core::audit::Body;
use sqlx::SqliteConnection;

use super::NewRow;

/// Events whose protobuf bytes reach this size go to an SQLite store's events file
/// ([`EventFile`]) instead of its rows. A commit that holds one syncs the file and then the
/// database: one more `fdatasync`, paid by commits that carry at least this many bytes, which
/// the write-ahead log would have written twice (BENCHMARKS.md, "Large events written once").
pub const FILE_EVENT_BYTES: usize = 128 << 10;

/// The file beside an SQLite store's database (`audit.db-events` for `audit.db`) that large
/// events ([`FILE_EVENT_BYTES`]) are appended to, each written once: in a row, SQLite writes
/// the bytes into its write-ahead log and then, at the checkpoint, again into the database,
/// which halved what a `sync` bulk put got of the disk (issue 12, item 3). The row keeps the
/// event's offset and length (`event_at`, `event_len`); its hash covers the event's bytes as
/// ever, so a changed, truncated or missing file fails verification at the rows it held.
///
/// Order: the bytes are written and `fdatasync`ed before the commit of the rows that point at
/// them, so a committed row never points at bytes not on disk. A crash between the two leaves
/// bytes no row points at; appends continue after them. The first writer of a process takes an
/// exclusive lock on the file (`flock`) and appends from the end of the file or of the last
/// event a row or a group's entry points at, whichever is further; a store whose file cannot be opened or is
/// locked by another process keeps its events in their rows, as before, and says so once.
#[derive(Debug)]
pub struct EventFile {
    path: PathBuf,
    appender: Arc<tokio::sync::Mutex<Appender>>,
    /// Whether to try `O_DIRECT` (tests turn it off to take the path of file systems without).
    direct: bool,
}

#[derive(Debug)]
enum Appender {
    /// Not needed yet.
    Unopened,
    /// Appends at `end`: through `direct` when the file system takes `O_DIRECT`, else through
    /// `file` (which holds the lock).
    Open {
        file: Arc<std::fs::File>,
        direct: Option<Arc<std::fs::File>>,
        end: u64,
        /// The block-aligned buffer the last append wrote from, kept for the next
        /// ([`KEPT_BUFFER_BYTES`] at most): a new one for every commit cost zeroing (or fresh
        /// pages) of all its bytes, about 8 ms of the server's thread per 64 MiB put.
        buffer: Vec<u8>,
    },
    /// Events stay in their rows.
    Refused,
}

/// What an append's blocking write hands back: see [`PendingAppend`].
type Written = (
    tokio::sync::OwnedMutexGuard<Appender>,
    Vec<u8>,
    std::io::Result<bool>,
);

/// An [`EventFile`] append under way ([`EventFile::append`]): its write and sync run on a
/// blocking thread while the appender stays locked.
#[derive(Debug)]
pub(super) struct PendingAppend {
    /// The appender's lock (held by the write until it is done: an append given up before
    /// its end never lets the next one write beside it), the write's buffer, and whether the
    /// file system refused `O_DIRECT`.
    written: tokio::task::JoinHandle<Written>,
    placed: Vec<Option<(i64, i64)>>,
    padded: usize,
    path: PathBuf,
}

impl PendingAppend {
    /// Waits for the write and the sync: `(offset, length)` for each row whose event is now
    /// in the file, `None` for the rest.
    ///
    /// # Errors
    /// The write or the sync failed.
    pub(super) async fn finish(self) -> anyhow::Result<Vec<Option<(i64, i64)>>> {
        let (mut appender, buffer, written) = self
            .written
            .await
            .context("the events file's writer panicked")?;
        let Appender::Open {
            direct,
            end,
            buffer: kept,
            ..
        } = &mut *appender
        else {
            unreachable!("an append is only begun on an open file");
        };
        if buffer.len() <= KEPT_BUFFER_BYTES {
            *kept = buffer;
        }
        let direct_failed =
            written.with_context(|| format!("cannot write {}", self.path.display()))?;
        if direct_failed {
            *direct = None;
        }
        *end += self.padded as u64;
        Ok(self.placed)
    }
}

/// The bytes of `row`'s event when they go to the events file ([`FILE_EVENT_BYTES`] or more).
pub(super) fn in_file(row: &NewRow) -> Option<&[u8]> {
    match &row.body {
        Body::Binary(bytes) if bytes.len() >= FILE_EVENT_BYTES => Some(bytes),
        _ => None,
    }
}

/// What `O_DIRECT` needs aligned: the file offset, the length and the buffer's address (the
/// largest logical block size of common disks).
const DIRECT_ALIGN: usize = 4096;

/// The largest buffer [`EventFile::append`] keeps for the next append: a commit's large events
/// come in batches of about an eighth of the audit writer's byte budget (8 MiB), and a buffer
/// kept after a rare larger one would hold its memory for good.
const KEPT_BUFFER_BYTES: usize = 16 << 20;

/// `len` rounded up to [`DIRECT_ALIGN`].
fn aligned(len: u64) -> u64 {
    len.div_ceil(DIRECT_ALIGN as u64) * DIRECT_ALIGN as u64
}

impl EventFile {
    /// The events file of the SQLite database at `database`.
    pub fn beside(database: &Path) -> Self {
        let mut name = database.as_os_str().to_owned();
        name.push("-events");
        EventFile {
            path: PathBuf::from(name),
            appender: Arc::new(tokio::sync::Mutex::new(Appender::Unopened)),
            direct: true,
        }
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Starts appending the events of `rows` of at least [`FILE_EVENT_BYTES`]: they are
    /// copied and their write and sync started on a blocking thread;
    /// [`PendingAppend::finish`] waits for them and says where each row's event now is. `None`
    /// when no event goes to the file (none large enough, or the file refused). Until it
    /// finishes, the next append waits.
    ///
    /// # Errors
    /// The file could not be opened (the write's own failure comes from `finish`: nothing of
    /// it is pointed at then, and the next append writes over it).
    pub(super) async fn append(
        &self,
        conn: &mut SqliteConnection,
        rows: &[NewRow],
    ) -> anyhow::Result<Option<PendingAppend>> {
        let total: usize = rows.iter().filter_map(in_file).map(<[u8]>::len).sum();
        if total == 0 {
            return Ok(None);
        }
        let mut appender = Arc::clone(&self.appender).lock_owned().await;
        if matches!(*appender, Appender::Unopened) {
            *appender = match self.open(conn).await {
                Ok(open) => open,
                Err(error) => {
                    tracing::warn!(
                        path = %self.path.display(),
                        "large audit events stay in their rows: {error:#}"
                    );
                    Appender::Refused
                }
            };
        }
        let Appender::Open {
            file,
            direct,
            end,
            buffer: kept,
        } = &mut *appender
        else {
            return Ok(None);
        };
        // One write for all of them, from a copy (the rows stay the writer's until the
        // commit), padded with zeros to whole blocks and from a block-aligned buffer for
        // O_DIRECT: the bytes go from this buffer to the disk without a copy into the page
        // cache, which cost more than the disk's own time here (BENCHMARKS.md, "Large events
        // written once"). The padding is never pointed at; `end` stays aligned.
        let padded = aligned(total as u64) as usize;
        let mut buffer = std::mem::take(kept);
        if buffer.len() < padded + DIRECT_ALIGN {
            buffer = vec![0u8; padded + DIRECT_ALIGN];
        }
        let start = buffer.as_ptr().align_offset(DIRECT_ALIGN);
        let mut placed = Vec::with_capacity(rows.len());
        let mut filled = start;
        for row in rows {
            placed.push(in_file(row).map(|event| {
                let at = *end + (filled - start) as u64;
                buffer[filled..filled + event.len()].copy_from_slice(event);
                filled += event.len();
                (at as i64, event.len() as i64)
            }));
        }
        // a kept buffer holds an earlier append's bytes past `filled`
        buffer[filled..start + padded].fill(0);
        let (file, direct, at) = (Arc::clone(file), direct.clone(), *end);
        let path = self.path.clone();
        let written = tokio::task::spawn_blocking(move || -> Written {
            let written = (|| -> std::io::Result<bool> {
                use std::os::unix::fs::FileExt;
                let bytes = &buffer[start..start + padded];
                let mut direct_failed = false;
                if let Some(direct) = direct {
                    match direct.write_all_at(bytes, at) {
                        Ok(()) => return direct.sync_data().map(|()| false),
                        // the file system refused the alignment: the page cache from now on
                        Err(error) if error.raw_os_error() == Some(libc::EINVAL) => {
                            tracing::info!(
                                path = %path.display(),
                                "the events file is written through the page cache: {error}"
                            );
                            direct_failed = true;
                        }
                        Err(error) => return Err(error),
                    }
                }
                file.write_all_at(bytes, at)?;
                file.sync_data()?;
                Ok(direct_failed)
            })();
            (appender, buffer, written)
        });
        Ok(Some(PendingAppend {
            written,
            placed,
            padded,
            path: self.path.clone(),
        }))
    }

    /// Opens the file for appending, creating it (and syncing its directory) when new.
    async fn open(&self, conn: &mut SqliteConnection) -> anyhow::Result<Appender> {
        // where the last event a row or a group points at ends (each by its partial index)
        let pointed: Option<i64> = sqlx::query_scalar(
            "SELECT MAX(end) FROM ( \
             SELECT * FROM (SELECT event_at + event_len AS end FROM audit_events \
             WHERE event_at IS NOT NULL ORDER BY event_at DESC LIMIT 1) \
             UNION ALL \
             SELECT * FROM (SELECT file_end FROM audit_groups WHERE file_end IS NOT NULL \
             ORDER BY file_end DESC LIMIT 1))",
        )
        .fetch_one(&mut *conn)
        .await?;
        let path = self.path.clone();
        let try_direct = self.direct;
        let (file, direct, len) = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
            use std::os::unix::fs::OpenOptionsExt;
            let open = |create: bool| {
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(create)
                    .mode(0o600)
                    .open(&path)
            };
            let file = match open(false) {
                Ok(file) => file,
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                    let file = open(true)?;
                    // the new name must survive a crash as the bytes written under it do
                    if let Some(dir) = path.parent() {
                        let dir = if dir.as_os_str().is_empty() {
                            Path::new(".")
                        } else {
                            dir
                        };
                        std::fs::File::open(dir)?.sync_all()?;
                    }
                    file
                }
                Err(error) => return Err(error.into()),
            };
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    anyhow::bail!("another process appends to it")
                }
                Err(std::fs::TryLockError::Error(error)) => return Err(error.into()),
            }
            let len = file.metadata()?.len();
            // a second handle that bypasses the page cache, where the file system allows it
            // (not every one does: tmpfs before Linux 6.6, some network file systems)
            let direct = try_direct
                .then(|| {
                    std::fs::OpenOptions::new()
                        .write(true)
                        .custom_flags(libc::O_DIRECT)
                        .open(&path)
                        .ok()
                })
                .flatten();
            Ok((file, direct, len))
        })
        .await
        .context("the events file's opener panicked")??;
        let pointed = u64::try_from(pointed.unwrap_or(0)).unwrap_or(0);
        Ok(Appender::Open {
            file: Arc::new(file),
            direct: direct.map(Arc::new),
            end: aligned(len.max(pointed)),
            buffer: Vec::new(),
        })
    }

    /// Reads the events at `spans` (`(offset, length)` as stored): each one's bytes, or why
    /// they cannot be read.
    ///
    /// # Errors
    /// Only when the reader could not run; a missing file or a span past its end is an `Err`
    /// for that span.
    pub async fn read(
        &self,
        spans: Vec<(i64, i64)>,
    ) -> anyhow::Result<Vec<Result<Vec<u8>, String>>> {
        let path = self.path.clone();
        tokio::task::spawn_blocking(move || {
            use std::os::unix::fs::FileExt;
            let file = std::fs::File::open(&path).and_then(|file| {
                let len = file.metadata()?.len();
                Ok((file, len))
            });
            spans
                .into_iter()
                .map(|(at, len)| {
                    let (file, size) = file.as_ref().map_err(|error| {
                        format!("the events file {} cannot be read: {error}", path.display())
                    })?;
                    let (Ok(at), Ok(len)) = (u64::try_from(at), u64::try_from(len)) else {
                        return Err(format!("the event's place in the events file is negative ({at}, {len})"));
                    };
                    if at.checked_add(len).is_none_or(|end| end > *size) {
                        return Err(format!(
                            "the event ({len} bytes at {at}) lies past the end of {} ({size} bytes)",
                            path.display()
                        ));
                    }
                    let mut bytes = vec![0; len as usize];
                    file.read_exact_at(&mut bytes, at).map_err(|error| {
                        format!("cannot read the event at {at} of {}: {error}", path.display())
                    })?;
                    Ok(bytes)
                })
                .collect()
        })
        .await
        .context("the events file's reader panicked")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use onesided_core::audit::{verify, Event, StoredRow, GENESIS};
    use sqlx::sqlite::SqlitePool;

    use super::super::tests::chained_events;
    use super::super::{scratch, AuditStore, Committer, Snapshot};

    /// A published block of `len` bytes, all `byte`.
    fn published(len: usize, byte: u8) -> Event {
        Event::Published {
            offset: 0,
            data: vec![byte; len],
        }
    }

    /// `(event IS NULL, event_len)` of each row of `window`, in order.
    async fn placements(pool: &SqlitePool, window: i64) -> Vec<(bool, Option<i64>)> {
        sqlx::query_as(
            "SELECT event IS NULL, event_len FROM audit_events WHERE window_id = $1 ORDER BY seq",
        )
        .bind(window)
        .fetch_all(pool)
        .await
        .unwrap()
    }

    /// Large events are appended to `audit.db-events` once, their rows point at them, small ones
    /// stay in their rows; readers get every event's bytes back and the chain verifies, also
    /// after a restart, which appends after what is there — including bytes a crash left that
    /// no row points at.
    #[tokio::test]
    async fn large_events_are_written_once_beside_the_database() {
        large_events_are_written_once(true).await;
    }

    /// The same through the page cache, as on a file system that refuses `O_DIRECT`.
    #[tokio::test]
    async fn large_events_are_written_once_beside_the_database_without_o_direct() {
        large_events_are_written_once(false).await;
    }

    /// A store on `dir` whose events file tries `O_DIRECT` or not.
    async fn open_store(dir: &Path, direct: bool) -> AuditStore {
        match AuditStore::open(None, dir).await.unwrap() {
            AuditStore::Sqlite(pool, Some(_), rows) => {
                let mut file = EventFile::beside(&dir.join("audit.db"));
                file.direct = direct;
                AuditStore::Sqlite(pool, Some(Arc::new(file)), rows)
            }
            _ => panic!("not SQLite on disk"),
        }
    }

    async fn large_events_are_written_once(direct: bool) {
        let dir = scratch(&format!("event-file-{direct}"));
        let store = open_store(&dir, direct).await;
        let pool = store.sqlite_pool();
        let used = || async {
            let pages: i64 = sqlx::query_scalar(
                "SELECT (SELECT page_count FROM pragma_page_count) \
                 - (SELECT freelist_count FROM pragma_freelist_count)",
            )
            .fetch_one(pool)
            .await
            .unwrap();
            pages * 4096
        };
        let before = used().await;
        let events = [
            published(FILE_EVENT_BYTES - 100, 1),
            Event::Flush { origin: 0 },
            published(1 << 20, 2),
            published(3 << 20, 3),
        ];
        let rows = chained_events(1, 1, events, GENESIS);
        let mut committer = Committer::new(store.clone());
        committer.insert(&rows, &[]).await.unwrap();
        if !direct {
            let AuditStore::Sqlite(_, Some(events), _) = &store else {
                unreachable!()
            };
            let appender = events.appender.lock().await;
            assert!(
                matches!(*appender, Appender::Open { direct: None, .. }),
                "{appender:?}"
            );
        }
        let file = dir.join("audit.db-events");
        let large: Vec<usize> = rows[2..]
            .iter()
            .map(|row| match &row.body {
                Body::Binary(bytes) => bytes.len(),
                Body::Json(_) => unreachable!(),
            })
            .collect();
        // one write, padded to whole blocks
        assert_eq!(
            std::fs::metadata(&file).unwrap().len(),
            aligned(large.iter().sum::<usize>() as u64)
        );
        assert_eq!(
            placements(pool, 1).await,
            vec![
                (false, None),
                (false, None),
                (true, Some(large[0] as i64)),
                (true, Some(large[1] as i64)),
            ]
        );
        // the 4 MiB are not in the database: it grew by the small event's rows and pages
        let grown = used().await - before;
        assert!(grown < 1 << 20, "the database grew by {grown} bytes");
        let stored = store.rows(1, 1).await.unwrap();
        assert_eq!(verify(&stored), Ok(()));
        for (row, stored) in rows.iter().zip(&stored) {
            assert_eq!(stored.record, row.record);
            assert_eq!(stored.body, row.body);
        }
        let tail = rows[3].hash;
        drop(committer);
        pool.close().await;
        drop(store);

        // a crash after the file's write, before the rows' commit: bytes no row points at
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap()
            .write_all(&[0xee; 1000])
            .unwrap();
        let store = open_store(&dir, direct).await;
        let more = chained_events(1, 5, [published(FILE_EVENT_BYTES, 4)], tail);
        Committer::new(store.clone())
            .insert(&more, &[])
            .await
            .unwrap();
        let stored = store.rows(1, 1).await.unwrap();
        assert_eq!(stored.len(), 5);
        assert_eq!(verify(&stored), Ok(()));
        assert_eq!(stored[4].body, more[0].body);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The buffer one append wrote from serves the next: a smaller event after a larger one
    /// is written whole, read back as it was, and the rest of its last block is zeros, not
    /// the earlier event's bytes.
    #[tokio::test]
    async fn an_append_after_a_larger_one_writes_its_own_bytes_and_zeros() {
        let dir = scratch("event-file-kept");
        let store = open_store(&dir, true).await;
        let mut committer = Committer::new(store.clone());
        let first = chained_events(1, 1, [published(3 << 20, 0xaa)], GENESIS);
        committer.insert(&first, &[]).await.unwrap();
        let small = FILE_EVENT_BYTES + 1;
        let second = chained_events(1, 2, [published(small, 0x55)], first[0].hash);
        committer.insert(&second, &[]).await.unwrap();
        let stored = store.rows(1, 1).await.unwrap();
        assert_eq!(verify(&stored), Ok(()));
        assert_eq!(stored[0].body, first[0].body);
        assert_eq!(stored[1].body, second[0].body);
        let Body::Binary(encoded) = &second[0].body else {
            unreachable!()
        };
        let bytes = std::fs::read(dir.join("audit.db-events")).unwrap();
        let Body::Binary(earlier) = &first[0].body else {
            unreachable!()
        };
        let at = aligned(earlier.len() as u64) as usize;
        assert_eq!(&bytes[at..at + encoded.len()], &encoded[..]);
        assert_eq!(bytes.len(), at + aligned(encoded.len() as u64) as usize);
        assert!(
            bytes[at + encoded.len()..].iter().all(|byte| *byte == 0),
            "the padding holds stale bytes"
        );
        drop(committer);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A batch of more rows than one statement takes is inserted in pieces inside a
    /// transaction: each piece's rows point at their own events in the file, and a snapshot in
    /// the same commit is stored beside them.
    #[tokio::test]
    async fn large_events_in_a_batch_of_several_statements_point_at_their_own_bytes() {
        let dir = scratch("event-file-pieces");
        let store = AuditStore::open(None, &dir).await.unwrap();
        let large = [3usize, 255, 256, 299];
        let events = (0..300u32).map(|index| {
            if large.contains(&(index as usize)) {
                published(FILE_EVENT_BYTES + index as usize, index as u8)
            } else {
                Event::Flush { origin: index }
            }
        });
        let rows = chained_events(1, 1, events, GENESIS);
        let snapshot = Snapshot {
            window: 1,
            rank: 0,
            seq: 300,
            data: vec![7; 64],
        };
        Committer::new(store.clone())
            .insert(&rows, std::slice::from_ref(&snapshot))
            .await
            .unwrap();
        let pool = store.sqlite_pool();
        let placements = placements(pool, 1).await;
        for (index, (in_file, len)) in placements.iter().enumerate() {
            assert_eq!(*in_file, large.contains(&index), "row {index}");
            assert_eq!(len.is_some(), large.contains(&index), "row {index}");
        }
        let stored = store.rows(1, 1).await.unwrap();
        assert_eq!(verify(&stored), Ok(()));
        for (row, stored) in rows.iter().zip(&stored) {
            assert_eq!(stored.body, row.body, "seq {}", row.record.seq);
        }
        assert_eq!(store.snapshots(1).await.unwrap(), vec![snapshot]);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A changed, cut or missing events file fails verification at the rows whose events it
    /// held, and only those; nothing panics and nothing reads as another event.
    #[tokio::test]
    async fn a_damaged_events_file_fails_verification_at_its_rows() {
        let dir = scratch("event-file-damaged");
        let store = AuditStore::open(None, &dir).await.unwrap();
        flush_and_two_large(&store).await;
        let file = dir.join("audit.db-events");
        assert_eq!(broken_at(&store.rows(1, 1).await.unwrap()), None);

        // one byte of the third row's event changed: its last
        let (at, len): (i64, i64) = store
            .sqlite_row(
                "SELECT event_at, event_len FROM audit_events WHERE window_id = 1 AND seq = 3",
            )
            .await;
        let end = (at + len) as usize;
        let mut bytes = std::fs::read(&file).unwrap();
        let last = end - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&file, &bytes).unwrap();
        assert_eq!(broken_at(&store.rows(1, 1).await.unwrap()), Some(3));
        assert_eq!(broken_at(&store.rows(1, 1).await.unwrap()[..2]), None);

        // cut inside the third row's event
        bytes[last] ^= 0xff;
        std::fs::write(&file, &bytes[..end - 10]).unwrap();
        let stored = store.rows(1, 1).await.unwrap();
        assert!(unreadable(&stored[2]).contains("past the end"));
        assert_eq!(broken_at(&stored), Some(3));

        gone_fails_at_the_second_event(&store, &file).await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Window 1's first three events, inserted into `store`: a flush (in the database) and two
    /// large ones (in the events file).
    async fn flush_and_two_large(store: &AuditStore) -> Vec<NewRow> {
        let events = [
            Event::Flush { origin: 0 },
            published(FILE_EVENT_BYTES, 1),
            published(FILE_EVENT_BYTES, 2),
        ];
        let rows = chained_events(1, 1, events, GENESIS);
        store.insert(&rows, &[]).await.unwrap();
        rows
    }

    /// Where verification of `stored` fails, if it does.
    fn broken_at(stored: &[StoredRow]) -> Option<u64> {
        verify(stored).err()
    }

    /// Why `row` cannot be read (it must not be readable).
    fn unreadable(row: &StoredRow) -> String {
        row.unreadable.clone().expect("an unreadable row")
    }

    /// With `file` gone, window 1's first event (in the database) still reads, its second
    /// (the first in the file) cannot be, and verification fails there.
    async fn gone_fails_at_the_second_event(store: &AuditStore, file: &std::path::Path) {
        std::fs::remove_file(file).unwrap();
        let stored = store.rows(1, 1).await.unwrap();
        assert!(stored[0].unreadable.is_none());
        assert!(unreadable(&stored[1]).contains("cannot be read"));
        assert_eq!(broken_at(&stored), Some(2));
    }

    /// In groups (the default shape) the large events are entries of their commit's one group
    /// that point into the file: a changed, cut or missing file fails verification at their
    /// events, and only there; and a new appender on a file shorter than what a group points
    /// at appends after the last event a group points at, never over it.
    #[tokio::test]
    async fn in_groups_a_damaged_events_file_fails_at_its_events_and_appends_go_after_them() {
        use super::super::Rows;
        let dir = scratch("event-file-groups");
        let store = AuditStore::open(None, &dir)
            .await
            .unwrap()
            .writing(Rows::Groups);
        let rows = flush_and_two_large(&store).await;
        let file = dir.join("audit.db-events");
        let stored = store.rows(1, 1).await.unwrap();
        assert_eq!(broken_at(&stored), None);
        assert_eq!(stored[2].body, rows[2].body);
        let counts: (i64, i64, Option<i64>) = store
            .sqlite_row(
                "SELECT (SELECT COUNT(*) FROM audit_events), (SELECT COUNT(*) FROM audit_groups), \
                 (SELECT MAX(file_end) FROM audit_groups)",
            )
            .await;
        let Body::Binary(third) = &rows[2].body else {
            unreachable!("new rows are binary")
        };
        let Body::Binary(second) = &rows[1].body else {
            unreachable!("new rows are binary")
        };
        // one group, no row; the third event ends where the group says
        let end = (second.len() + third.len()) as i64;
        assert_eq!(counts, (0, 1, Some(end)));

        // one byte of the third event changed: its last
        let mut bytes = std::fs::read(&file).unwrap();
        let last = end as usize - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&file, &bytes).unwrap();
        assert_eq!(broken_at(&store.rows(1, 1).await.unwrap()), Some(3));
        assert_eq!(broken_at(&store.rows(1, 1).await.unwrap()[..2]), None);

        // cut inside the third event
        bytes[last] ^= 0xff;
        std::fs::write(&file, &bytes[..end as usize - 10]).unwrap();
        let stored = store.rows(1, 1).await.unwrap();
        assert!(unreadable(&stored[2]).contains("past the end"));
        assert_eq!(broken_at(&stored), Some(3));

        // the next process appends after the group's last event, not at the cut file's end
        store.sqlite_pool().close().await;
        drop(store);
        let store = AuditStore::open(None, &dir)
            .await
            .unwrap()
            .writing(Rows::Groups);
        let more = chained_events(1, 4, [published(FILE_EVENT_BYTES, 4)], rows[2].hash);
        store.insert(&more, &[]).await.unwrap();
        let (new_end,): (i64,) = store
            .sqlite_row("SELECT file_end FROM audit_groups WHERE first_seq = 4")
            .await;
        let Body::Binary(fourth) = &more[0].body else {
            unreachable!("new rows are binary")
        };
        assert_eq!(new_end - fourth.len() as i64, aligned(end as u64) as i64);
        let stored = store.rows(1, 4).await.unwrap();
        assert_eq!(stored[0].body, more[0].body);
        assert!(stored[0].unreadable.is_none());

        gone_fails_at_the_second_event(&store, &file).await;
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// While one process appends to a store's events file, another store on the same database
    /// keeps its large events in their rows (never two appenders at one end of the file).
    #[tokio::test]
    async fn a_second_appender_keeps_large_events_in_their_rows() {
        let dir = scratch("event-file-locked");
        let first = AuditStore::open(None, &dir).await.unwrap();
        let second = AuditStore::open(None, &dir).await.unwrap();
        let mut one = Committer::new(first.clone());
        let ones = chained_events(1, 1, [published(FILE_EVENT_BYTES, 1)], GENESIS);
        one.insert(&ones, &[]).await.unwrap();
        let Body::Binary(appended) = &ones[0].body else {
            unreachable!()
        };
        let rows = chained_events(2, 1, [published(FILE_EVENT_BYTES, 2)], GENESIS);
        Committer::new(second.clone())
            .insert(&rows, &[])
            .await
            .unwrap();
        let AuditStore::Sqlite(pool, ..) = &second else {
            panic!("not SQLite")
        };
        assert_eq!(
            placements(pool, 1).await,
            vec![(true, Some(appended.len() as i64))]
        );
        assert_eq!(placements(pool, 2).await, vec![(false, None)]);
        for window in [1, 2] {
            let stored = first.rows(window, 1).await.unwrap();
            assert_eq!(verify(&stored), Ok(()));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
