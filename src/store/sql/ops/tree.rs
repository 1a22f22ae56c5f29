//! The primitives over a whole directory: listing one (or a tree of
//! them), deleting one, renaming one, and the tenant's total size.

use super::*;

impl<D: Dialect> Entries<'_, D> {
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
        let add = |r: &dyn crate::store::sql::Columns<Error = D::Error>| {
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
