//! Reading an index's pages ahead of a scan of all of it: start reads every open hold's mark
//! from the open holds' index, whose leaves lie spread among the table's pages across the
//! whole file (the B-trees grow together). From a cold page cache SQLite reads them one at a
//! time per reader, each a wait on the disk that the kernel cannot read ahead of, since the
//! next leaf is far from the last. Here the index's interior pages are read from the file
//! (a few thousand at ten million holds) and every leaf is named to the kernel at once
//! (`posix_fadvise(WILLNEED)`, as PostgreSQL prefetches its heap pages), so the disk has many
//! reads in flight and SQLite finds the leaves in the page cache.
//!
//! Only a hint: SQLite's own reads decide what is read, so a page read here that the WAL has
//! a newer copy of, or an interior page that changed under the walk, costs a wasted read and
//! nothing else. Anything unexpected in a page ends the walk. The format read is SQLite's
//! documented file format (<https://www.sqlite.org/fileformat2.html>, "B-tree Pages").

use std::fs::File;
use std::io;
use std::num::NonZeroU64;
use std::os::unix::fs::FileExt;
use std::path::Path;

use rustix::fs::Advice;

/// The header that begins every SQLite database file.
const MAGIC: &[u8; 16] = b"SQLite format 3\0";
/// Page types (the first byte of a B-tree page's header).
const INTERIOR_INDEX: u8 = 2;
const LEAF_INDEX: u8 = 10;
/// Deeper than any B-tree a file of 2^32 pages can hold: a cycle in a damaged file ends here.
const MAX_DEPTH: usize = 32;
/// The kernel is asked for this many leaves from each part of the index in turn: start reads
/// the index in parts at once, from their beginnings, and each should find its next leaves
/// already read.
const STRIDE: usize = 64;

/// Reads the interior pages of the index B-tree rooted at page `root` of the database at
/// `path`, and asks the kernel to read all its leaves ahead, in the order `parts` readers
/// scanning equal shares of it from their beginnings want them. Returns how many leaves were
/// named (none when the walk stopped at something it did not expect).
pub(super) fn index(path: &Path, root: u32, parts: usize) -> io::Result<usize> {
    let file = Pages::open(path)?;
    let Some(leaves) = file.leaves(root)? else {
        return Ok(0);
    };
    let share = leaves.len().div_ceil(parts.max(1)).max(1);
    let shares: Vec<&[u32]> = leaves.chunks(share).collect();
    for turn in 0..share.div_ceil(STRIDE) {
        for part in &shares {
            let from = (turn * STRIDE).min(part.len());
            let until = (from + STRIDE).min(part.len());
            file.advise(&part[from..until])?;
        }
    }
    Ok(leaves.len())
}

/// A database file, read a page at a time.
struct Pages {
    file: File,
    size: usize,
    count: u64,
}

impl Pages {
    fn open(path: &Path) -> io::Result<Pages> {
        let file = File::open(path)?;
        let mut header = [0u8; 100];
        file.read_exact_at(&mut header, 0)?;
        if &header[..16] != MAGIC {
            return Err(io::Error::other("not an SQLite database"));
        }
        // Big-endian at offset 16; 1 stands for 65,536.
        let size = match u16::from_be_bytes([header[16], header[17]]) {
            1 => 65_536,
            n if n >= 512 && n.is_power_of_two() => usize::from(n),
            n => return Err(io::Error::other(format!("page size {n}"))),
        };
        let count = file.metadata()?.len() / size as u64;
        Ok(Pages { file, size, count })
    }

    /// Page `n` (numbered from 1), or `None` past the file's end.
    fn read(&self, n: u32, buf: &mut Vec<u8>) -> io::Result<Option<()>> {
        if n == 0 || u64::from(n) > self.count {
            return Ok(None);
        }
        buf.resize(self.size, 0);
        self.file
            .read_exact_at(buf, (u64::from(n) - 1) * self.size as u64)?;
        Ok(Some(()))
    }

    /// The leaves of the index rooted at `root`, left to right; `None` if a page is not what
    /// an index B-tree holds. Every leaf of a B-tree is as deep as the leftmost: the levels
    /// above it are read (each named to the kernel before it is read), the leaves only named.
    fn leaves(&self, root: u32) -> io::Result<Option<Vec<u32>>> {
        let mut buf = Vec::new();
        let mut depth = 0;
        let mut page = root;
        loop {
            if self.read(page, &mut buf)?.is_none() {
                return Ok(None);
            }
            match node(&buf, page) {
                Some(Node::Interior(children)) if depth < MAX_DEPTH => {
                    page = children[0];
                    depth += 1;
                }
                Some(Node::Leaf) => break,
                _ => return Ok(None),
            }
        }
        let mut level = vec![root];
        for _ in 0..depth {
            self.advise(&level)?;
            let mut below = Vec::new();
            for &page in &level {
                if self.read(page, &mut buf)?.is_none() {
                    return Ok(None);
                }
                match node(&buf, page) {
                    Some(Node::Interior(children)) => below.extend(children),
                    _ => return Ok(None),
                }
                // No level of a tree has more pages than the file: a damaged one whose
                // pointers loop ends here rather than multiplying.
                if below.len() as u64 > self.count {
                    return Ok(None);
                }
            }
            level = below;
        }
        Ok(Some(level))
    }

    /// Asks the kernel to read `pages` into its cache in the background; neighbours in one
    /// request.
    fn advise(&self, pages: &[u32]) -> io::Result<()> {
        let mut runs = pages.iter().peekable();
        while let Some(&first) = runs.next() {
            let mut last = first;
            while let Some(&&next) = runs.peek() {
                if next != last.wrapping_add(1) {
                    break;
                }
                last = next;
                runs.next();
            }
            let size = self.size as u64;
            let len = NonZeroU64::new((u64::from(last) - u64::from(first) + 1) * size);
            rustix::fs::fadvise(
                &self.file,
                (u64::from(first) - 1) * size,
                len,
                Advice::WillNeed,
            )?;
        }
        Ok(())
    }
}

/// What a B-tree page is, as far as the walk cares.
enum Node {
    /// An interior index page's children, left to right (never empty).
    Interior(Vec<u32>),
    Leaf,
}

/// Reads page `n`'s B-tree header (after the file's header on page 1); `None` for anything
/// but an index page, or one whose numbers point outside it.
fn node(page: &[u8], n: u32) -> Option<Node> {
    let at = if n == 1 { 100 } else { 0 };
    let header = page.get(at..at + 12)?;
    match header[0] {
        LEAF_INDEX => Some(Node::Leaf),
        INTERIOR_INDEX => {
            let cells = usize::from(u16::from_be_bytes([header[3], header[4]]));
            let mut children = Vec::with_capacity(cells + 1);
            for i in 0..cells {
                let slot = page.get(at + 12 + 2 * i..at + 14 + 2 * i)?;
                let cell = usize::from(u16::from_be_bytes([slot[0], slot[1]]));
                children.push(be32(page.get(cell..cell + 4)?));
            }
            children.push(be32(&header[8..12]));
            Some(Node::Interior(children))
        }
        _ => None,
    }
}

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rusqlite::Connection;

    use super::*;

    /// A database with an index of `rows` entries, interleaved with a table's pages as
    /// Holdpoint's grow; the index's root page.
    fn database(dir: &Path, rows: usize) -> (std::path::PathBuf, Connection, u32) {
        let path = dir.join("t.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT, w TEXT);
             CREATE INDEX t_w ON t (w, k);",
        )
        .unwrap();
        let tx = conn.unchecked_transaction().unwrap();
        {
            let mut insert = tx.prepare("INSERT INTO t (v, w) VALUES (?, ?)").unwrap();
            for i in 0..rows {
                insert
                    .execute(("x".repeat(300), format!("world-{}-{i}", i % 10)))
                    .unwrap();
            }
        }
        tx.commit().unwrap();
        let root = conn
            .query_row(
                "SELECT rootpage FROM sqlite_schema WHERE name = 't_w'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        (path, conn, root)
    }

    /// SQLite's own account of the index's leaves (its `dbstat` table), in key order.
    fn leaves_by_sqlite(conn: &Connection) -> Vec<u32> {
        let mut stmt = conn
            .prepare(
                "SELECT pageno FROM dbstat WHERE name = 't_w' AND pagetype = 'leaf' ORDER BY path",
            )
            .unwrap();
        stmt.query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }

    #[test]
    fn the_walk_finds_every_leaf_of_an_index_in_key_order_as_sqlite_does() {
        let dir = tempfile::tempdir().unwrap();
        // Three levels: a root, interior pages, leaves.
        let (path, conn, root) = database(dir.path(), 60_000);
        let expected = leaves_by_sqlite(&conn);
        let interior: u32 = conn
            .query_row(
                "SELECT count(*) FROM dbstat WHERE name = 't_w' AND pagetype = 'internal'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(
            interior >= 3,
            "{interior} interior pages: fewer than three levels"
        );
        assert!(expected.len() > 300, "{} leaves", expected.len());
        let file = Pages::open(&path).unwrap();
        assert_eq!(file.leaves(root).unwrap(), Some(expected.clone()));
        assert_eq!(index(&path, root, 4).unwrap(), expected.len());
    }

    #[test]
    fn an_index_of_one_page_is_its_own_leaf() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _conn, root) = database(dir.path(), 3);
        assert_eq!(
            Pages::open(&path).unwrap().leaves(root).unwrap(),
            Some(vec![root])
        );
    }

    #[test]
    fn a_page_that_is_not_an_index_s_ends_the_walk() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn, _) = database(dir.path(), 100);
        let table: u32 = conn
            .query_row(
                "SELECT rootpage FROM sqlite_schema WHERE name = 't'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let file = Pages::open(&path).unwrap();
        assert_eq!(file.leaves(table).unwrap(), None);
        assert_eq!(file.leaves(1_000_000).unwrap(), None);
        assert_eq!(index(&path, table, 4).unwrap(), 0);
    }

    #[test]
    fn a_damaged_tree_whose_pointers_loop_ends_the_walk() {
        let dir = tempfile::tempdir().unwrap();
        let (path, conn, root) = database(dir.path(), 60_000);
        drop(conn);
        // The root's children all point back at the root.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .unwrap();
        let pages = Pages::open(&path).unwrap();
        let mut page = Vec::new();
        pages.read(root, &mut page).unwrap().unwrap();
        let cells = usize::from(u16::from_be_bytes([page[3], page[4]]));
        for i in 0..cells {
            let cell = usize::from(u16::from_be_bytes([page[12 + 2 * i], page[13 + 2 * i]]));
            page[cell..cell + 4].copy_from_slice(&root.to_be_bytes());
        }
        page[8..12].copy_from_slice(&root.to_be_bytes());
        let at = (u64::from(root) - 1) * pages.size as u64;
        file.write_all_at(&page, at).unwrap();
        assert_eq!(pages.leaves(root).unwrap(), None);
        assert_eq!(index(&path, root, 4).unwrap(), 0);
    }

    #[test]
    fn a_file_that_is_not_a_database_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("not.db");
        std::fs::write(&path, vec![7u8; 8192]).unwrap();
        assert!(index(&path, 2, 4).is_err());
    }
}
