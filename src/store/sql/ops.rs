//! The primitives of both SQL stores, written once over [`Dialect`] and
//! [`Backend`].
//!
//! [`Entries`] is one tenant's rows seen through one connection or
//! transaction; its methods are the checks and statements of each
//! primitive, so several of them compose inside one transaction.
//! [`super::run`] picks where each primitive runs (a plain connection for
//! reads, the locked transaction for mutations).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{Dialect, Fail, Param};
use crate::path::MemoryPath;
use crate::store::{
    Change, DirEntry, EntryKind, FileContent, Metadata, Quota, StoreError, Tree, Updated, Version,
    WriteMode, check_quota,
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

    /// Writes a non-root file; run it in the locked transaction. One query
    /// reads the file's row and its ancestors'; directories are inserted
    /// only when missing.
    pub(crate) fn write(
        &mut self,
        path: &MemoryPath,
        data: &[u8],
        mode: WriteMode,
    ) -> Result<Version, Fail> {
        if let Some(sql) = D::WRITE_CHECKED {
            return self.write_checked(sql, path, data, mode, None);
        }
        let rows = self.lineage(path.components())?;
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
    /// [`write_within`](Self::write_within) and
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
                if let Err(e) = check_quota(path, after, quota) {
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
    /// transaction, so no other edit comes between the read and the write.
    pub(crate) fn update(
        &mut self,
        path: &MemoryPath,
        limit: u64,
        change: &mut Change<'_>,
    ) -> Result<Updated, Fail> {
        let current = self.read(path, limit)?;
        let Ok(new) = change(&current.data) else {
            return Ok(Updated::Aborted);
        };
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

    /// [`write`](Self::write) under a size cap, checked in the same locked
    /// transaction (so concurrent writers cannot overshoot it): "already
    /// exists" first for a create, then the cap, then the write's checks.
    pub(crate) fn write_within(
        &mut self,
        path: &MemoryPath,
        data: &[u8],
        mode: WriteMode,
        quota: Quota<'_>,
    ) -> Result<Version, Fail> {
        if let Some(sql) = D::WRITE_CHECKED {
            return self.write_checked(sql, path, data, mode, Some(quota));
        }
        let rows = self.lineage(path.components())?;
        let replaced = match (rows.last(), mode) {
            (Some(Some(_)), WriteMode::Create) => return self.write_over(path, data, mode, rows),
            (Some(Some(r)), _) if !r.is_dir => r.len as u64,
            _ => 0,
        };
        let after = self
            .bytes_below(quota.scope)?
            .saturating_sub(replaced)
            .saturating_add(data.len() as u64);
        check_quota(path, after, quota)?;
        self.write_over(path, data, mode, rows)
    }

    /// [`update`](Self::update) under a size cap, in one locked
    /// transaction: read, `change` once, the cap, write.
    pub(crate) fn update_within(
        &mut self,
        path: &MemoryPath,
        limit: u64,
        quota: Quota<'_>,
        change: &mut Change<'_>,
    ) -> Result<Updated, Fail> {
        let current = self.read(path, limit)?;
        let Ok(new) = change(&current.data) else {
            return Ok(Updated::Aborted);
        };
        let after = self
            .bytes_below(quota.scope)?
            .saturating_sub(current.data.len() as u64)
            .saturating_add(new.len() as u64);
        check_quota(path, after, quota)?;
        self.put_file(path.components(), &new)?;
        Ok(Updated::Written(new))
    }

    /// Deletes the file at `path` if `still` accepts its metadata, in one
    /// locked transaction.
    pub(crate) fn delete_file_if(
        &mut self,
        path: &MemoryPath,
        still: &mut dyn FnMut(&Metadata) -> bool,
    ) -> Result<bool, Fail> {
        match self.stat(path)? {
            Some(m) if m.kind == EntryKind::File && still(&m) => {}
            _ => return Ok(false),
        }
        self.delete(path)?;
        Ok(true)
    }

    /// The children of a directory (the root included). Below the root,
    /// the directory's own row comes in the same query (flagged), so a
    /// listing is one statement.
    pub(crate) fn list(&mut self, dir: &MemoryPath) -> Result<Vec<DirEntry>, Fail> {
        let k = key(dir.components());
        let sql = if dir.is_root() {
            "SELECT name, is_dir, len, modified_ms, FALSE FROM claude_memory_entries WHERE tenant = $1 AND parent = $2"
        } else {
            "SELECT name, is_dir, len, modified_ms, FALSE FROM claude_memory_entries WHERE tenant = $1 AND parent = $2
             UNION ALL
             SELECT name, is_dir, len, modified_ms, TRUE FROM claude_memory_entries WHERE tenant = $1 AND path = $2"
        };
        // (is this the directory's own row, the entry)
        let rows = self
            .db
            .fetch_all(sql, &[Param::Text(self.tenant), Param::Text(&k)], |r| {
                let is_dir = r.flag(1)?;
                Ok((
                    r.flag(4)?,
                    DirEntry {
                        name: r.text(0)?,
                        kind: if is_dir {
                            EntryKind::Directory
                        } else {
                            EntryKind::File
                        },
                        len: r.int(2)? as u64,
                        modified: if is_dir { None } else { to_time(r.int(3)?) },
                    },
                ))
            })?;
        if !dir.is_root() {
            let path = dir.clone();
            match rows.iter().find(|(own, _)| *own) {
                None => return Err(StoreError::NotFound { path }.into()),
                Some((_, e)) if e.kind != EntryKind::Directory => {
                    return Err(StoreError::NotADirectory { path }.into());
                }
                Some(_) => {}
            }
        }
        Ok(rows
            .into_iter()
            .filter_map(|(own, e)| (!own).then_some(e))
            .collect())
    }

    /// Every entry below directory `dir` (the root included), grouped by
    /// parent, in one query: the rows of the key range below `dir` and,
    /// below the root, the directory's own row (flagged), checked as
    /// [`list`](Self::list) checks it. `None` past [`TREE_LIMIT`] entries.
    pub(crate) fn list_tree(&mut self, dir: &MemoryPath) -> Result<Option<Tree>, Fail> {
        let k = key(dir.components());
        let (lo, hi) = below(&k);
        let limit = TREE_LIMIT + 1;
        let mut tree = Tree::new();
        // The directory's own row: is it one (below the root).
        let mut own: Option<bool> = None;
        let mut entries: i64 = 0;
        // The row's parent key, one buffer for every row.
        let mut parent = String::new();
        // Each row goes into the tree as it is read.
        let add = |r: &dyn super::Columns<Error = D::Error>| {
            let is_dir = r.flag(2)?;
            // Only below the root is there an own row (and a sixth column).
            if !dir.is_root() && r.flag(5)? {
                own = Some(is_dir);
                return Ok(());
            }
            entries += 1;
            r.text_into(0, &mut parent)?;
            // The parent's key below `dir`: "" for `dir` itself.
            let below_dir = if dir.is_root() {
                Some(parent.as_str())
            } else if parent == k {
                Some("")
            } else {
                parent
                    .strip_prefix(k.as_str())
                    .and_then(|p| p.strip_prefix('/'))
            };
            if let Some(p) = below_dir
                && entries <= TREE_LIMIT
            {
                let entry = DirEntry {
                    name: r.text(1)?,
                    kind: if is_dir {
                        EntryKind::Directory
                    } else {
                        EntryKind::File
                    },
                    len: r.int(3)? as u64,
                    modified: if is_dir { None } else { to_time(r.int(4)?) },
                };
                tree.push(p, entry);
            }
            Ok(())
        };
        if dir.is_root() {
            self.db.fetch_all(
                "SELECT parent, name, is_dir, len, modified_ms FROM claude_memory_entries
                 WHERE tenant = $1 LIMIT $2",
                &[Param::Text(self.tenant), Param::Int(limit)],
                add,
            )?;
        } else {
            self.db.fetch_all(
                "SELECT parent, name, is_dir, len, modified_ms, FALSE FROM (
                    SELECT parent, name, is_dir, len, modified_ms FROM claude_memory_entries
                    WHERE tenant = $1 AND path >= $2 AND path < $3 LIMIT $4
                 ) AS below
                 UNION ALL
                 SELECT parent, name, is_dir, len, modified_ms, TRUE FROM claude_memory_entries
                 WHERE tenant = $1 AND path = $5",
                &[
                    Param::Text(self.tenant),
                    Param::Text(&lo),
                    Param::Text(&hi),
                    Param::Int(limit),
                    Param::Text(&k),
                ],
                add,
            )?;
            let path = dir.clone();
            match own {
                None => return Err(StoreError::NotFound { path }.into()),
                Some(false) => return Err(StoreError::NotADirectory { path }.into()),
                Some(true) => {}
            }
        }
        if entries > TREE_LIMIT {
            return Ok(None);
        }
        Ok(Some(tree))
    }

    /// Removes a non-root entry and everything below it; run it in the
    /// locked transaction.
    pub(crate) fn delete(&mut self, path: &MemoryPath) -> Result<(), Fail> {
        let k = key(path.components());
        let (lo, hi) = below(&k);
        let params = [
            Param::Text(self.tenant),
            Param::Text(&k),
            Param::Text(&lo),
            Param::Text(&hi),
        ];
        if !D::REMOTE {
            // Two statements, each a lookup or a range of the primary key
            // (as one statement, SQLite either scans the tenant's children
            // index for the OR, or prepares it again at every execution
            // for an IN): the entry, then, if it was a directory, what is
            // below it.
            let removed = self.db.fetch_all(
                "DELETE FROM claude_memory_entries WHERE tenant = $1 AND path = $2 RETURNING is_dir",
                &params[..2],
                |r| r.flag(0),
            )?;
            match removed.first() {
                None => return Err(StoreError::NotFound { path: path.clone() }.into()),
                Some(false) => return Ok(()),
                Some(true) => {}
            }
            self.db.last_statement();
            self.db.run(
                "DELETE FROM claude_memory_entries WHERE tenant = $1 AND path >= $2 AND path < $3",
                &[params[0], params[2], params[3]],
            )?;
            return Ok(());
        }
        // One statement, the transaction's last: the rows it removed say
        // whether the entry was there. Nothing below a missing entry is
        // removed. Each arm of the OR is an index range.
        self.db.last_statement();
        let removed = self.db.fetch_all(
            "DELETE FROM claude_memory_entries
             WHERE (tenant = $1 AND path = $2)
                OR (tenant = $1 AND path >= $3 AND path < $4
                    AND EXISTS (SELECT 1 FROM claude_memory_entries WHERE tenant = $1 AND path = $2))
             RETURNING path = $2",
            &params,
            |r| r.flag(0),
        )?;
        if !removed.contains(&true) {
            return Err(StoreError::NotFound { path: path.clone() }.into());
        }
        Ok(())
    }

    /// Moves an entry and everything below it, after
    /// [`StoreError::check_rename`]; run it in the locked transaction.
    pub(crate) fn rename(&mut self, from: &MemoryPath, to: &MemoryPath) -> Result<(), Fail> {
        let (fk, tk) = (key(from.components()), key(to.components()));
        let tc = to.components();
        // The source's row, the destination's ancestors' and its own, in
        // one query; checked in the contract's order.
        let mut keys = vec![fk.clone()];
        keys.extend((1..=tc.len()).map(|depth| key(&tc[..depth])));
        // With the length of the longest key below the source, in the
        // same query (for the path limit's check, below).
        let (lo, hi) = below(&fk);
        let (mut rows, longest) = self.rows_and_longest(&keys, Some((&lo, &hi)))?;
        let destination = if to.is_root() {
            None // the root has no row, and always exists
        } else {
            rows.pop().flatten()
        };
        if rows.first().is_none_or(Option::is_none) {
            return Err(StoreError::NotFound { path: from.clone() }.into());
        }
        if to.is_root() || destination.is_some() {
            return Err(StoreError::AlreadyExists { path: to.clone() }.into());
        }
        let need_parents = Self::check_ancestors(to, &rows[1..])?;
        // Every entry below must still have a legal path at the
        // destination (SPEC §2), checked in this transaction.
        let longest = usize::try_from(longest).unwrap_or(usize::MAX);
        StoreError::check_depth(from, to, longest.saturating_sub(fk.len()))?;
        if need_parents {
            self.make_parents(tc)?;
        }
        let (parent, name) = tc.split_at(tc.len() - 1);
        // Remote, one statement (the OR's arms are two index ranges to
        // PostgreSQL); local, the entry and then the range below it, so
        // SQLite searches the primary key for each instead of scanning
        // the tenant's children index for the OR. The first statement
        // moves the entry out of the range the second selects.
        const MOVE: &str = "UPDATE claude_memory_entries SET
                path = $5 || substr(path, length($2) + 1),
                parent = CASE WHEN path = $2 THEN $6 ELSE $5 || substr(parent, length($2) + 1) END,
                name = CASE WHEN path = $2 THEN $7 ELSE name END";
        let sql = if D::REMOTE {
            format!(
                "{MOVE} WHERE (tenant = $1 AND path = $2) OR (tenant = $1 AND path >= $3 AND path < $4)"
            )
        } else {
            format!("{MOVE} WHERE tenant = $1 AND path = $2")
        };
        if !D::REMOTE {
            self.db.run(
                &sql,
                &[
                    Param::Text(self.tenant),
                    Param::Text(&fk),
                    Param::Text(&lo),
                    Param::Text(&hi),
                    Param::Text(&tk),
                    Param::Text(&key(parent)),
                    Param::Text(&name[0]),
                ],
            )?;
        }
        let sql = if D::REMOTE {
            sql
        } else {
            format!("{MOVE} WHERE tenant = $1 AND path >= $3 AND path < $4")
        };
        self.db.last_statement();
        self.db.run(
            &sql,
            &[
                Param::Text(self.tenant),
                Param::Text(&fk),
                Param::Text(&lo),
                Param::Text(&hi),
                Param::Text(&tk),
                Param::Text(&key(parent)),
                Param::Text(&name[0]),
            ],
        )?;
        Ok(())
    }

    /// Removes directory `path` if it has no children, in one locked
    /// transaction (`rmdir` semantics, for expiry).
    pub(crate) fn remove_empty_dir(&mut self, path: &MemoryPath) -> Result<bool, Fail> {
        let k = key(path.components());
        self.db.last_statement();
        let removed = self.db.fetch_all(
            "DELETE FROM claude_memory_entries WHERE tenant = $1 AND path = $2 AND is_dir
               AND NOT EXISTS (SELECT 1 FROM claude_memory_entries WHERE tenant = $1 AND parent = $2)
             RETURNING path",
            &[Param::Text(self.tenant), Param::Text(&k)],
            |r| r.text(0),
        )?;
        Ok(!removed.is_empty())
    }

    /// Total bytes of this tenant's files.
    pub(crate) fn total_size(&mut self) -> Result<u64, Fail> {
        let n = self.one(
            "SELECT CAST(COALESCE(SUM(len), 0) AS BIGINT) FROM claude_memory_entries WHERE tenant = $1 AND NOT is_dir",
            &[Param::Text(self.tenant)],
            |r| r.int(0),
        )?;
        Ok(n as u64)
    }
}
