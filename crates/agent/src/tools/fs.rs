//! The file tools, confined to the world's directory.

use std::path::{Component, Path, PathBuf};

use serde_json::{Value, json};

/// Resolves `rel` inside `root`, refusing what would leave it: absolute paths, `..`, and
/// symbolic links that point outside (checked on the deepest part of the path that exists).
pub(crate) fn confine(root: &Path, rel: &str) -> Result<PathBuf, String> {
    if rel.contains('\0') {
        return Err("the path contains a NUL byte".into());
    }
    let rel_path = Path::new(rel);
    for c in rel_path.components() {
        match c {
            Component::Normal(_) | Component::CurDir => {}
            Component::ParentDir => {
                return Err(format!(
                    "{rel:?} leaves the world's directory ('..' is not allowed)"
                ));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(format!(
                    "{rel:?} is absolute; give a path relative to the world's directory"
                ));
            }
        }
    }
    let root = root
        .canonicalize()
        .map_err(|e| format!("the world's directory is unavailable: {e}"))?;
    let full = root.join(rel_path);
    // Symbolic links: the deepest existing ancestor (the path itself, if it exists) must
    // resolve inside the root.
    let mut existing = full.as_path();
    loop {
        if existing.symlink_metadata().is_ok() {
            let resolved = existing
                .canonicalize()
                .map_err(|e| format!("{rel:?}: {e}"))?;
            if !resolved.starts_with(&root) {
                return Err(format!(
                    "{rel:?} leads outside the world's directory through a symbolic link"
                ));
            }
            break;
        }
        match existing.parent() {
            Some(p) => existing = p,
            None => break,
        }
    }
    Ok(full)
}

fn shown(root: &Path, p: &Path) -> String {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    p.strip_prefix(&root).unwrap_or(p).display().to_string()
}

pub(crate) fn read_file(root: &Path, args: &Value, max: usize) -> Result<Value, String> {
    let rel = args["path"].as_str().ok_or("`path` is required")?;
    let path = confine(root, rel)?;
    let meta = std::fs::metadata(&path).map_err(|e| format!("{rel}: {e}"))?;
    if meta.is_dir() {
        return Err(format!("{rel} is a directory; use list_files"));
    }
    use std::io::Read;
    let file = std::fs::File::open(&path).map_err(|e| format!("{rel}: {e}"))?;
    let mut bytes = Vec::new();
    file.take(max as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{rel}: {e}"))?;
    let truncated = meta.len() > max as u64;
    Ok(json!({
        "path": shown(root, &path),
        "content": String::from_utf8_lossy(&bytes),
        "bytes": meta.len(),
        "truncated": truncated,
    }))
}

/// A file of a world's directory as it is now, for people to compare a write against.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileNow {
    /// Nothing is there (nor the world's directory, or a directory on the way).
    Missing,
    /// A file of `bytes` bytes; its text when it is UTF-8 and at most the limit, else `None`
    /// (`too_large` when the limit is why).
    File {
        bytes: u64,
        text: Option<String>,
        too_large: bool,
    },
}

/// Reads `rel` in `root` as `write_file` would reach it (confined: never outside `root`), up
/// to `max` bytes.
pub(crate) fn file_now(root: &Path, rel: &str, max: usize) -> Result<FileNow, String> {
    if !root.exists() {
        return Ok(FileNow::Missing);
    }
    let path = confine(root, rel)?;
    let meta = match std::fs::metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(FileNow::Missing),
        // A file where a directory would be ("a/b" where "a" is a file): nothing is there.
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => return Ok(FileNow::Missing),
        Err(e) => return Err(format!("{rel}: {e}")),
    };
    if meta.is_dir() {
        return Err(format!("{rel} is a directory"));
    }
    if meta.len() > max as u64 {
        return Ok(FileNow::File {
            bytes: meta.len(),
            text: None,
            too_large: true,
        });
    }
    use std::io::Read;
    let file = std::fs::File::open(&path).map_err(|e| format!("{rel}: {e}"))?;
    let mut bytes = Vec::new();
    // The length may have grown since: never more than the limit.
    file.take(max as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{rel}: {e}"))?;
    Ok(FileNow::File {
        bytes: bytes.len() as u64,
        text: String::from_utf8(bytes).ok(),
        too_large: false,
    })
}

pub(crate) fn write_file(root: &Path, args: &Value, max: usize) -> Result<Value, String> {
    let rel = args["path"].as_str().ok_or("`path` is required")?;
    let content = args["content"].as_str().ok_or("`content` is required")?;
    if content.len() > max {
        return Err(format!(
            "the content is {} bytes; at most {max} can be written at once",
            content.len()
        ));
    }
    let path = confine(root, rel)?;
    if path.is_dir() {
        return Err(format!("{rel} is a directory"));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| format!("{rel}: {e}"))?;
        // Creating directories may not have stepped outside, but check the result again.
        confine(root, rel)?;
    }
    let append = args["append"].as_bool().unwrap_or(false);
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(&path)
        .map_err(|e| format!("{rel}: {e}"))?;
    file.write_all(content.as_bytes())
        .map_err(|e| format!("{rel}: {e}"))?;
    Ok(json!({ "path": shown(root, &path), "bytes_written": content.len(), "appended": append }))
}

/// Entries listed at most.
const MAX_ENTRIES: usize = 1000;

pub(crate) fn list_files(root: &Path, args: &Value) -> Result<Value, String> {
    let rel = args["path"].as_str().unwrap_or(".");
    let recursive = args["recursive"].as_bool().unwrap_or(false);
    let dir = confine(root, rel)?;
    if !dir.is_dir() {
        return Err(format!("{rel} is not a directory"));
    }
    let base = root.canonicalize().map_err(|e| e.to_string())?;
    let mut entries = Vec::new();
    let mut pending = vec![dir];
    let mut truncated = false;
    while let Some(d) = pending.pop() {
        let mut names: Vec<_> = std::fs::read_dir(&d)
            .map_err(|e| format!("{rel}: {e}"))?
            .filter_map(Result::ok)
            .collect();
        names.sort_by_key(|e| e.file_name());
        for e in names {
            if entries.len() >= MAX_ENTRIES {
                truncated = true;
                break;
            }
            let Ok(meta) = e.path().symlink_metadata() else {
                continue;
            };
            let kind = if meta.file_type().is_symlink() {
                "symlink"
            } else if meta.is_dir() {
                "directory"
            } else {
                "file"
            };
            let path = e.path();
            let shown_path = path
                .strip_prefix(&base)
                .unwrap_or(&path)
                .display()
                .to_string();
            entries.push(json!({ "path": shown_path, "kind": kind, "size": meta.len() }));
            if recursive && kind == "directory" {
                pending.push(path);
            }
        }
    }
    Ok(json!({ "path": rel, "entries": entries, "truncated": truncated }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_inside_the_world() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        assert!(confine(root, "a/b/c.txt").is_ok());
        assert!(confine(root, "./a").is_ok());
        assert!(
            confine(root, "new/dir/file").is_ok(),
            "paths that do not exist yet"
        );
        for bad in ["../x", "a/../../x", "/etc/passwd", "a/\0"] {
            assert!(confine(root, bad).is_err(), "{bad:?}");
        }
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("escape")).unwrap();
        let err = confine(root, "escape/secret").unwrap_err();
        assert!(err.contains("symbolic link"), "{err}");
        std::os::unix::fs::symlink(root.join("a"), root.join("inside")).unwrap();
        assert!(
            confine(root, "inside/b").is_ok(),
            "links that stay inside are fine"
        );
    }

    #[test]
    fn reading_writing_and_listing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let w = write_file(
            root,
            &json!({"path": "notes/today.md", "content": "hello"}),
            100,
        )
        .unwrap();
        assert_eq!(w["bytes_written"], 5);
        write_file(
            root,
            &json!({"path": "notes/today.md", "content": " world", "append": true}),
            100,
        )
        .unwrap();
        let r = read_file(root, &json!({"path": "notes/today.md"}), 100).unwrap();
        assert_eq!(
            (r["content"].as_str(), r["truncated"].as_bool()),
            (Some("hello world"), Some(false))
        );
        let r = read_file(root, &json!({"path": "notes/today.md"}), 4).unwrap();
        assert_eq!(
            (r["content"].as_str(), r["truncated"].as_bool()),
            (Some("hell"), Some(true))
        );
        assert!(
            write_file(
                root,
                &json!({"path": "big", "content": "x".repeat(101)}),
                100
            )
            .unwrap_err()
            .contains("at most 100")
        );
        let l = list_files(root, &json!({"recursive": true})).unwrap();
        let paths: Vec<&str> = l["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["path"].as_str().unwrap())
            .collect();
        assert_eq!(paths, vec!["notes", "notes/today.md"]);
        assert!(read_file(root, &json!({"path": "missing"}), 10).is_err());
        assert!(
            read_file(root, &json!({"path": "notes"}), 10)
                .unwrap_err()
                .contains("directory")
        );
    }
}
