//! The primitives of both SQL stores, written once over [`Dialect`] and
//! [`Backend`].
//!
//! [`Entries`] is one tenant's rows seen through one connection or
//! transaction; its methods are the checks and statements of each
//! primitive, so several of them compose inside one transaction.
//! [`super::run`] picks where each primitive runs (a plain connection for
//! reads, the locked transaction for mutations).

mod tree;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Dialect, Fail, Param};
use crate::path::MemoryPath;
use crate::store::{
    Change, DeleteIf, DirEntry, EntryKind, FileContent, Metadata, Quota, StoreError, Tree,
    UpdateOptions, Updated, Version, WriteMode, WriteOptions,
};

/// A query that always returns a row returned none.
#[derive(Debug, thiserror::Error)]
#[error("the query returned no row")]
struct NoRow;

/// The database refused a write whose rows pass every check here: the
/// statement's checks and these disagree (a bug, never a user's error).
#[derive(Debug, thiserror::Error)]
#[error("the write was refused, but its rows pass its checks")]
struct Refused;

/// The most entries [`Entries::list_tree`] reads at once: a larger tree is
/// walked a directory at a time, so a view never holds a huge tree whole.
const TREE_LIMIT: i64 = 10_000;

/// The row key of a path: `a/b/c` for `/memories/a/b/c`, `""` for the root.
fn key(components: &[String]) -> String {
    components.join("/")
}

/// Bounds selecting everything strictly below `p` in byte order:
/// `path >= "p/"` and `path < "p0"` (`'0'` is the byte after `'/'`).
fn below(p: &str) -> (String, String) {
    (format!("{p}/"), format!("{p}0"))
}

/// Now, in milliseconds since the Unix epoch.
fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A stored millisecond timestamp as a time.
fn to_time(ms: i64) -> Option<SystemTime> {
    UNIX_EPOCH.checked_add(Duration::from_millis(u64::try_from(ms).ok()?))
}

/// An entry's row, without its data.
struct Row {
    is_dir: bool,
    len: i64,
    version: i64,
    modified_ms: i64,
}

impl Row {
    fn kind(&self) -> EntryKind {
        if self.is_dir {
            EntryKind::Directory
        } else {
            EntryKind::File
        }
    }

    /// The file's version, or `None` for a directory.
    fn file_version(&self) -> Option<Version> {
        (!self.is_dir).then_some(Version::new(self.version as u128))
    }
}

/// One tenant's entries, through one connection or transaction.
pub(crate) struct Entries<'a, D> {
    db: &'a mut D,
    tenant: &'a str,
}

impl<'a, D: Dialect> Entries<'a, D> {
    pub(crate) fn new(db: &'a mut D, tenant: &'a str) -> Self {
        Entries { db, tenant }
    }

    /// The row at key `path`, if any.
    fn row(&mut self, path: &str) -> Result<Option<Row>, D::Error> {
        self.db.fetch_opt(
            "SELECT is_dir, len, version, modified_ms FROM claude_memory_entries WHERE tenant = $1 AND path = $2",
            &[Param::Text(self.tenant), Param::Text(path)],
            |r| {
                Ok(Row {
                    is_dir: r.flag(0)?,
                    len: r.int(1)?,
                    version: r.int(2)?,
                    modified_ms: r.int(3)?,
                })
            },
        )
    }

    /// The rows at each of `keys` (`None` where there is none), in one
    /// query.
    fn rows(&mut self, keys: &[String]) -> Result<Vec<Option<Row>>, D::Error> {
        Ok(self.rows_and_longest(keys, None)?.0)
    }

    /// [`rows`](Self::rows) and, given a key range [`lo`, `hi`), the
    /// length of its longest key ([`Dialect::LONGEST_KEY`], 0 without a
    /// range), in one query: its row has the key `""`, which no entry has.
    fn rows_and_longest(
        &mut self,
        keys: &[String],
        range: Option<(&str, &str)>,
    ) -> Result<(Vec<Option<Row>>, i64), D::Error> {
        let mut sql = String::from(
            "SELECT path, is_dir, len, version, modified_ms FROM claude_memory_entries WHERE tenant = $1 AND path IN (",
        );
        let mut params = vec![Param::Text(self.tenant)];
        let first = if range.is_some() { 4 } else { 2 };
        for (i, k) in keys.iter().enumerate() {
            if i > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!("${}", i + first));
            params.push(Param::Text(k));
        }
        sql.push(')');
        if let Some((lo, hi)) = range {
            // The two bounds are $2 and $3, as LONGEST_KEY numbers them.
            params.splice(1..1, [Param::Text(lo), Param::Text(hi)]);
            sql.push_str(&format!(
                " UNION ALL SELECT '', FALSE, ({}), 0, 0",
                D::LONGEST_KEY
            ));
        }
        let mut found = self.db.fetch_all(&sql, &params, |r| {
            Ok((
                r.text(0)?,
                Row {
                    is_dir: r.flag(1)?,
                    len: r.int(2)?,
                    version: r.int(3)?,
                    modified_ms: r.int(4)?,
                },
            ))
        })?;
        let longest = match found.iter().position(|(p, _)| p.is_empty()) {
            Some(i) if range.is_some() => found.swap_remove(i).1.len,
            _ => 0,
        };
        let rows = keys
            .iter()
            .map(|k| {
                found.iter().find(|(p, _)| p == k).map(|(_, r)| Row {
                    is_dir: r.is_dir,
                    len: r.len,
                    version: r.version,
                    modified_ms: r.modified_ms,
                })
            })
            .collect();
        Ok((rows, longest))
    }

    /// The rows of `path`'s ancestors (from the top) and of `path` last,
    /// in one query.
    fn lineage(&mut self, components: &[String]) -> Result<Vec<Option<Row>>, D::Error> {
        let keys: Vec<String> = (1..=components.len())
            .map(|depth| key(&components[..depth]))
            .collect();
        self.rows(&keys)
    }

    /// [`StoreError::ParentNotDirectory`] if an ancestor of `path` is a
    /// file, given the ancestors' rows from the top; else how many
    /// ancestors are missing (all below the first missing one are).
    fn check_ancestors(path: &MemoryPath, ancestors: &[Option<Row>]) -> Result<bool, Fail> {
        for (i, row) in ancestors.iter().enumerate() {
            match row {
                Some(r) if !r.is_dir => {
                    return Err(StoreError::parent_not_directory(path, i + 1).into());
                }
                Some(_) => {}
                None => return Ok(true), // a missing ancestor: nothing below it exists
            }
        }
        Ok(false)
    }

    /// Inserts the missing directories above `components`' last one.
    fn make_parents(&mut self, components: &[String]) -> Result<(), D::Error> {
        let now = now_ms();
        for depth in 1..components.len() {
            self.db.run(
                D::INSERT_DIR,
                &[
                    Param::Text(self.tenant),
                    Param::Text(&key(&components[..depth])),
                    Param::Text(&key(&components[..depth - 1])),
                    Param::Text(&components[depth - 1]),
                    Param::Int(now),
                ],
            )?;
        }
        Ok(())
    }

    /// The first row of a query that always returns one.
    fn one<T>(
        &mut self,
        sql: &str,
        params: &[Param<'_>],
        f: impl FnOnce(&dyn super::Columns<Error = D::Error>) -> Result<T, D::Error>,
    ) -> Result<T, Fail> {
        self.db
            .fetch_opt(sql, params, f)?
            .ok_or_else(|| Fail::Sql(Box::new(NoRow)))
    }

    /// Kind, size and time of a non-root entry.
    pub(crate) fn stat(&mut self, path: &MemoryPath) -> Result<Option<Metadata>, Fail> {
        Ok(self.row(&key(path.components()))?.map(|r| Metadata {
            kind: r.kind(),
            len: r.len as u64,
            modified: if r.is_dir {
                None
            } else {
                to_time(r.modified_ms)
            },
        }))
    }

    /// A non-root file of at most `limit` bytes.
    pub(crate) fn read(&mut self, path: &MemoryPath, limit: u64) -> Result<FileContent, Fail> {
        let found = self.db.fetch_opt(
            "SELECT is_dir, len, version, CASE WHEN len <= $3 THEN data END FROM claude_memory_entries
             WHERE tenant = $1 AND path = $2",
            &[
                Param::Text(self.tenant),
                Param::Text(&key(path.components())),
                Param::Int(i64::try_from(limit).unwrap_or(i64::MAX)),
            ],
            |r| Ok((r.flag(0)?, r.int(1)?, r.int(2)?, r.bytes(3)?)),
        )?;
        let path = path.clone();
        match found {
            None => Err(StoreError::NotFound { path }.into()),
            Some((true, ..)) => Err(StoreError::IsADirectory { path }.into()),
            Some((false, len, _, None)) => Err(StoreError::TooLarge {
                path,
                len: len as u64,
            }
            .into()),
            Some((false, _, version, Some(data))) => Ok(FileContent {
                data,
                version: Version::new(version as u128),
            }),
        }
    }

    /// Writes a non-root file, under a size cap if `options` has one; run
    /// it in the locked transaction (so concurrent writers cannot
    /// overshoot the cap). One query reads the file's row and its
    /// ancestors'; directories are inserted only when missing. Checks:
    /// "already exists" first for a create, then the cap, then the
    /// write's.
    pub(crate) fn write(
        &mut self,
        path: &MemoryPath,
        data: &[u8],
        options: WriteOptions<'_>,
    ) -> Result<Version, Fail> {
        let WriteOptions { mode, quota, .. } = options;
        if let Some(sql) = D::WRITE_CHECKED {
            return self.write_checked(sql, path, data, mode, quota);
        }
        let rows = self.lineage(path.components())?;
        let Some(quota) = quota else {
            return self.write_over(path, data, mode, rows);
        };
        let replaced = match (rows.last(), mode) {
            (Some(Some(_)), WriteMode::Create) => return self.write_over(path, data, mode, rows),
            (Some(Some(r)), _) if !r.is_dir => r.len as u64,
            _ => 0,
        };
        let after = self
            .bytes_below(quota.scope)?
            .saturating_sub(replaced)
            .saturating_add(data.len() as u64);
        quota.check(path, after)?;
        self.write_over(path, data, mode, rows)
    }

    /// A write (under `quota`, if any) as the one statement
    /// [`Dialect::WRITE_CHECKED`], the transaction's last: the checks are
    /// the statement's, made in the locked transaction on the rows it
    /// reads; a refusal is named here from those rows, by the checks
    /// every dialect makes ([`refusal`](Self::refusal)).
    fn write_checked(
        &mut self,
        sql: &str,
        path: &MemoryPath,
        data: &[u8],
        mode: WriteMode,
        quota: Option<Quota<'_>>,
    ) -> Result<Version, Fail> {
        let comps = path.components();
        let (code, expected) = match mode {
            WriteMode::Create => (0, 0),
            WriteMode::Overwrite => (1, 0),
            // Past `i64`, no row's version (a BIGINT) can match: -1 neither.
            WriteMode::Update(v) => (2, i64::try_from(v.get()).unwrap_or(-1)),
        };
        let (lo, hi) = match quota {
            Some(q) if !q.scope.is_root() => below(&key(q.scope.components())),
            _ => (String::new(), String::new()),
        };
        let max = quota.map_or(-1, |q| i64::try_from(q.max_bytes).unwrap_or(i64::MAX));
        self.db.last_statement();
        let found = self.db.fetch_all(
            sql,
            &[
                Param::Text(self.tenant),
                Param::Text(&key(comps)),
                Param::Bytes(data),
                Param::Int(data.len() as i64),
                Param::Int(now_ms()),
                Param::Int(code),
                Param::Int(expected),
                Param::Text(&lo),
                Param::Text(&hi),
                Param::Int(max),
            ],
            |r| Ok((r.int(0)?, r.flag(1)?, r.int(2)?, r.int(3)?)),
        )?;
        let mut rows: Vec<Option<Row>> = comps.iter().map(|_| None).collect();
        let mut outcome = None;
        for (depth, is_dir, len, version) in found {
            match usize::try_from(depth).ok().and_then(|d| d.checked_sub(1)) {
                None => outcome = Some((is_dir, len, version)),
                Some(at) => {
                    if let Some(slot) = rows.get_mut(at) {
                        *slot = Some(Row {
                            is_dir,
                            len,
                            version,
                            modified_ms: 0,
                        });
                    }
                }
            }
        }
        let (written, total, version) = outcome.ok_or_else(|| Fail::Sql(Box::new(NoRow)))?;
        if written {
            return Ok(Version::new(version as u128));
        }
        Err(Self::refusal(
            path,
            data.len(),
            mode,
            rows,
            quota.map(|q| (q, total as u64)),
        ))
    }

    /// Why a write of `len` bytes was refused, from its lineage's rows
    /// (the ancestors' from the top, then its own) and, under a cap, the
    /// bytes below the cap's scope: the checks of
    /// [`write`](Self::write) under a cap and
    /// [`write_over`](Self::write_over), in their order.
    fn refusal(
        path: &MemoryPath,
        len: usize,
        mode: WriteMode,
        mut rows: Vec<Option<Row>>,
        quota: Option<(Quota<'_>, u64)>,
    ) -> Fail {
        if let Some((quota, total)) = quota {
            let replaced = match (rows.last(), mode) {
                // "Already exists" comes before the cap.
                (Some(Some(_)), WriteMode::Create) => None,
                (Some(Some(r)), _) if !r.is_dir => Some(r.len as u64),
                _ => Some(0),
            };
            if let Some(replaced) = replaced {
                let after = total.saturating_sub(replaced).saturating_add(len as u64);
                if let Err(e) = quota.check(path, after) {
                    return e.into();
                }
            }
        }
        let existing = rows.pop().flatten().map(|r| r.file_version());
        if let Err(e) = Self::check_ancestors(path, &rows) {
            return e;
        }
        match StoreError::check_write(path, existing, mode) {
            Err(e) => e.into(),
            Ok(()) => Fail::Sql(Box::new(Refused)),
        }
    }

    /// [`write`](Self::write) given the rows [`lineage`](Self::lineage)
    /// read, so no row is read twice.
    fn write_over(
        &mut self,
        path: &MemoryPath,
        data: &[u8],
        mode: WriteMode,
        mut rows: Vec<Option<Row>>,
    ) -> Result<Version, Fail> {
        let comps = path.components();
        let existing = rows.pop().flatten().map(|r| r.file_version());
        let missing = Self::check_ancestors(path, &rows)?;
        StoreError::check_write(path, existing, mode)?;
        if missing {
            self.make_parents(comps)?;
        }
        self.put_file(comps, data)
    }

    /// Inserts or replaces the file at `comps` (its parents exist) with a
    /// fresh version: the transaction's last statement.
    fn put_file(&mut self, comps: &[String], data: &[u8]) -> Result<Version, Fail> {
        let (parent, name) = comps.split_at(comps.len() - 1);
        let (k, parent) = (key(comps), key(parent));
        let now = now_ms();
        let version = match D::UPSERT_FILE_NEXT {
            Some(sql) => {
                self.db.last_statement();
                self.one(
                    sql,
                    &[
                        Param::Text(self.tenant),
                        Param::Text(&k),
                        Param::Text(&parent),
                        Param::Text(&name[0]),
                        Param::Bytes(data),
                        Param::Int(data.len() as i64),
                        Param::Int(now),
                    ],
                    |r| r.int(0),
                )?
            }
            None => {
                let version = self.one(D::NEXT_VERSION, &[], |r| r.int(0))?;
                self.db.last_statement();
                self.db.run(
                    D::UPSERT_FILE,
                    &[
                        Param::Text(self.tenant),
                        Param::Text(&k),
                        Param::Text(&parent),
                        Param::Text(&name[0]),
                        Param::Bytes(data),
                        Param::Int(data.len() as i64),
                        Param::Int(version),
                        Param::Int(now),
                    ],
                )?;
                version
            }
        };
        Ok(Version::new(version as u128))
    }

    /// Read-modify-write of a non-root file; run it in the locked
    /// transaction, so no other edit comes between the read and the write:
    /// read, `change` once, the cap if any, write.
    pub(crate) fn update(
        &mut self,
        path: &MemoryPath,
        options: UpdateOptions<'_>,
        change: &mut Change<'_>,
    ) -> Result<Updated, Fail> {
        let current = self.read(path, options.limit)?;
        let Ok(new) = change(&current.data) else {
            return Ok(Updated::Aborted);
        };
        if let Some(quota) = options.quota {
            let after = self
                .bytes_below(quota.scope)?
                .saturating_sub(current.data.len() as u64)
                .saturating_add(new.len() as u64);
            quota.check(path, after)?;
        }
        self.put_file(path.components(), &new)?;
        Ok(Updated::Written(new))
    }

    /// Bytes of this tenant's files below directory `scope` (all of them
    /// for the root).
    fn bytes_below(&mut self, scope: &MemoryPath) -> Result<u64, Fail> {
        if scope.is_root() {
            return self.total_size();
        }
        let (lo, hi) = below(&key(scope.components()));
        let n = self.one(
            "SELECT CAST(COALESCE(SUM(len), 0) AS BIGINT) FROM claude_memory_entries
             WHERE tenant = $1 AND NOT is_dir AND path >= $2 AND path < $3",
            &[Param::Text(self.tenant), Param::Text(&lo), Param::Text(&hi)],
            |r| r.int(0),
        )?;
        Ok(n as u64)
    }

    /// Deletes the non-root entry at `path` if `condition` holds, in the
    /// locked transaction.
    pub(crate) fn delete_if(
        &mut self,
        path: &MemoryPath,
        condition: DeleteIf<'_>,
    ) -> Result<bool, Fail> {
        match condition {
            DeleteIf::Exists => self.delete(path).map(|()| true),
            DeleteIf::EmptyDir => self.remove_empty_dir(path),
            DeleteIf::FileWhere(still) => {
                match self.stat(path)? {
                    Some(m) if m.kind == EntryKind::File && still(&m) => {}
                    _ => return Ok(false),
                }
                self.delete(path)?;
                Ok(true)
            }
        }
    }
}
