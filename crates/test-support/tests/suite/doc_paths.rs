//! Every repository path that ARCHITECTURE.md, README.md and docs/*.md name exists, so a
//! renamed module or a moved script cannot leave the documents pointing at nothing.
//!
//! The convention the documents follow:
//!
//! - A code span names a path when it holds only path characters (letters, digits, `_`, `-`,
//!   `.`, `/`) and either ends in a file extension the repository uses (`.rs`, `.md`, `.js`,
//!   `.toml`, …), or ends in `/` (a directory), or starts with a top-level entry of the
//!   repository (`crates/core`, `scripts/test`, `fuzz/corpus`). So `/api/v1/holds` (it starts
//!   with `/`), `owner/name`, `application/json` and `tools/call` are not paths.
//! - It is read from the repository root or the document's own folder. Inside a section whose
//!   heading names a directory (`### crates/core`), also from that directory's `src/` and from
//!   the directory itself, so the code map can say `engine/gate.rs` and `tests/suite/crash.rs`;
//!   after a paragraph or list item names a directory (`crates/server/ui/`), also from that
//!   directory until the paragraph ends. Nothing else: a module named without its folder
//!   (`gate.rs` for `engine/gate.rs`) is not found, so a renamed module or folder is.
//! - A component in capitals is a placeholder (`fuzz/corpus/TARGET/`): the path up to it must
//!   exist.
//! - A link's target (`[text](path)`) is read from the document's own folder, as a browser
//!   follows it.
//! - Not read: fenced code blocks (commands, configuration files), what builds and runs create
//!   (`target/`, `fuzz/artifacts/`, …), and the names of a user's own files given as examples
//!   (`config.toml`).

use std::path::{Path, PathBuf};

/// File extensions that make a code span a path even without a `/`.
const EXTENSIONS: &[&str] = &[
    "rs", "md", "js", "toml", "json", "sql", "html", "css", "sh", "yml", "yaml", "lock", "svg",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository root")
}

/// What one document names that looks like a path.
struct Named {
    line: usize,
    text: String,
    /// A link's target, read from the document's folder only.
    link: bool,
    /// The folders it may also be read from, from the repository root: its section's
    /// directory and that directory's `src/`, and the directories named before it in its
    /// paragraph or list item.
    bases: Vec<String>,
}

/// The text with fenced code blocks blanked out (lines kept, so line numbers stay right).
fn without_fences(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fence: Option<&str> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => {
                fence = Some(m);
                out.push('\n');
            }
            (Some(open), Some(m)) if open == m => {
                fence = None;
                out.push('\n');
            }
            (Some(_), _) => out.push('\n'),
            (None, None) => out.push_str(line),
        }
    }
    out
}

fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/')
}

/// Whether a code span's text is meant as a repository path (see the module's comment).
fn looks_like_path(text: &str, top_level: &[String]) -> bool {
    if text.is_empty()
        || !text.chars().all(is_path_char)
        || text.starts_with('/')
        || text.starts_with('.')
        || !text.chars().any(|c| c.is_ascii_alphabetic())
    {
        return false;
    }
    let extension = text
        .rsplit_once('.')
        .is_some_and(|(stem, ext)| !stem.is_empty() && EXTENSIONS.contains(&ext));
    let first = text.split('/').next().unwrap_or_default();
    extension
        || (text.ends_with('/') && text.len() > 1)
        || (text.contains('/') && top_level.iter().any(|t| t == first))
}

/// Whether a line starts a new paragraph or list item (so the directories named before it no
/// longer apply).
fn starts_block(line: &str) -> bool {
    let line = line.trim_start();
    line.is_empty()
        || line.starts_with('#')
        || line.starts_with("- ")
        || line.starts_with("* ")
        || line
            .split_once(". ")
            .is_some_and(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// The part of a named path to look for: up to its first placeholder (`TARGET`, `NAME`: a
/// component in capitals), without a trailing `/`.
fn to_look_for(text: &str) -> String {
    let mut kept = Vec::new();
    for part in text.trim_end_matches('/').split('/') {
        let placeholder = part.len() > 1
            && part
                .chars()
                .all(|c| c.is_ascii_uppercase() || c == '_' || c.is_ascii_digit());
        if placeholder {
            break;
        }
        kept.push(part);
    }
    kept.join("/")
}

/// Where a named path may be.
fn candidates(root: &Path, folder: &Path, named: &Named) -> Vec<PathBuf> {
    let text = to_look_for(&named.text);
    if named.link {
        return vec![folder.join(text)];
    }
    let mut out = vec![root.join(&text), folder.join(&text)];
    out.extend(named.bases.iter().map(|base| root.join(base).join(&text)));
    out
}

/// The code spans and link targets of a document (in `folder`) that look like paths.
fn named(text: &str, root: &Path, folder: &Path, top_level: &[String]) -> Vec<Named> {
    let text = without_fences(text);
    let bytes = text.as_bytes();
    let line_at = |at: usize| text[..at].matches('\n').count() + 1;
    let mut found = Vec::new();
    let mut section: Option<String> = None;
    let mut block: Vec<String> = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if at == 0 || bytes[at - 1] == b'\n' {
            let end = text[at..].find('\n').map_or(text.len(), |n| at + n);
            let line = &text[at..end];
            if starts_block(line) {
                block.clear();
            }
            if line.starts_with('#') {
                // A heading: the first directory it names is its section's.
                section = line
                    .split('`')
                    .skip(1)
                    .step_by(2)
                    .map(|s| s.trim_end_matches('/'))
                    .find(|s| !s.is_empty() && root.join(s).is_dir())
                    .map(str::to_owned);
            }
        }
        if bytes[at] == b'`' {
            let run = bytes[at..].iter().take_while(|&&b| b == b'`').count();
            let fence = &text[at..at + run];
            let Some(len) = text[at + run..].find(fence) else {
                at += run;
                continue;
            };
            let inner = text[at + run..at + run + len].trim();
            if looks_like_path(inner, top_level) {
                let named = Named {
                    line: line_at(at),
                    text: inner.to_owned(),
                    link: false,
                    bases: section
                        .iter()
                        .flat_map(|dir| [format!("{dir}/src"), dir.clone()])
                        .chain(block.iter().cloned())
                        .collect(),
                };
                if inner.ends_with('/') {
                    let dir = candidates(root, folder, &named)
                        .into_iter()
                        .find(|p| p.is_dir());
                    if let Some(rel) = dir.and_then(|d| {
                        d.strip_prefix(root)
                            .ok()
                            .map(|r| r.to_string_lossy().into_owned())
                    }) {
                        block.push(rel);
                    }
                }
                found.push(named);
            }
            at += run + len + run;
            continue;
        }
        if bytes[at..].starts_with(b"](") {
            let start = at + 2;
            let end = text[start..]
                .find([')', '\n'])
                .map_or(text.len(), |n| start + n);
            let target = text[start..end]
                .split('#')
                .next()
                .unwrap_or_default()
                .trim();
            if !target.is_empty() && !target.contains(':') && !target.starts_with('/') {
                found.push(Named {
                    line: line_at(at),
                    text: target.to_owned(),
                    link: true,
                    bases: Vec::new(),
                });
            }
            at = end;
            continue;
        }
        at += 1;
    }
    found
}

/// The documents checked: ARCHITECTURE.md, README.md and every docs/*.md.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ is readable")
        .map(|entry| entry.expect("a docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    let mut all = vec![root.join("ARCHITECTURE.md"), root.join("README.md")];
    all.extend(docs);
    all
}

/// Outputs that builds and runs create, which a checkout does not have.
const GENERATED: &[&str] = &[
    "target/",
    "fuzz/target/",
    "fuzz/artifacts/",
    "fuzz/coverage/",
];

/// Files of a user's own setup that the documents name as examples, not files of the
/// repository.
const USERS_FILES: &[&str] = &["config.toml", "mcp.json"];

/// The paths `document` names that exist nowhere it may mean: `file:line: path` each.
fn missing_in(
    root: &Path,
    document: &Path,
    text: &str,
    top_level: &[String],
) -> (usize, Vec<String>) {
    let folder = document.parent().unwrap_or(root);
    let shown = document
        .strip_prefix(root)
        .unwrap_or(document)
        .display()
        .to_string();
    let mut checked = 0;
    let mut missing = Vec::new();
    for named in named(text, root, folder, top_level) {
        if GENERATED.iter().any(|g| named.text.starts_with(g))
            || USERS_FILES.contains(&named.text.as_str())
        {
            continue;
        }
        checked += 1;
        if !candidates(root, folder, &named).iter().any(|p| p.exists()) {
            let from = if named.link {
                "the document's folder".to_owned()
            } else {
                let mut places = vec![
                    "the repository root".to_owned(),
                    "the document's folder".to_owned(),
                ];
                places.extend(named.bases.iter().cloned());
                places.join(", ")
            };
            missing.push(format!(
                "{shown}:{}: `{}` (looked for from {from})",
                named.line, named.text
            ));
        }
    }
    (checked, missing)
}

fn top_level(root: &Path) -> Vec<String> {
    std::fs::read_dir(root)
        .expect("the repository root is readable")
        .map(|entry| {
            entry
                .expect("a root entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name != "target" && !name.starts_with('.'))
        .collect()
}

#[test]
fn every_path_the_documents_name_exists() {
    let root = root();
    let top_level = top_level(&root);
    let mut missing = Vec::new();
    for document in documents(&root) {
        let text = std::fs::read_to_string(&document)
            .unwrap_or_else(|e| panic!("{} is readable: {e}", document.display()));
        let (checked, mut gone) = missing_in(&root, &document, &text, &top_level);
        if document.ends_with("ARCHITECTURE.md") {
            assert!(
                checked > 50,
                "only {checked} paths found in ARCHITECTURE.md: is the parser still reading it?"
            );
        }
        missing.append(&mut gone);
    }
    assert!(
        missing.is_empty(),
        "paths named in the documents that do not exist (paths are written from the repository \
         root, or from the directory named by the section's heading or earlier in the paragraph):\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn what_is_a_path() {
    let top = ["crates".to_owned(), "scripts".to_owned(), "docs".to_owned()];
    for path in [
        "crates/core",
        "scripts/test",
        "engine/gate.rs",
        "pg/",
        "Cargo.toml",
        "docs/api.md",
    ] {
        assert!(looks_like_path(path, &top), "{path} is a path");
    }
    for not in [
        "/api/v1/holds",
        "owner/name",
        "application/json",
        "tools/call",
        "holdpoint serve",
        "server.turn_lease",
        "/",
        "crates/server/ui/*.html",
        "0.0.0.0",
        "DATA/worlds/<world id>",
    ] {
        assert!(!looks_like_path(not, &top), "{not} is not a path");
    }
    assert_eq!(to_look_for("fuzz/corpus/TARGET/"), "fuzz/corpus");
    assert_eq!(to_look_for("crates/core/src/"), "crates/core/src");
}

/// A module named from its crate's section is found there, and only there; a renamed one is
/// reported with where it was looked for.
#[test]
fn paths_are_read_from_the_root_the_section_or_the_paragraph() {
    let root = root();
    let top = top_level(&root);
    let document = root.join("ARCHITECTURE.md");
    let check = |text: &str| missing_in(&root, &document, text, &top);

    let (checked, missing) = check(
        "## `crates/core`\n\n`engine/gate.rs`, `tests/` and [api](docs/api.md)\n\n\
         ```\n`not/read.rs`\n```\n\n- `crates/server/ui/` holds `app.js` and `api.js`.\n",
    );
    assert_eq!((checked, missing), (7, Vec::<String>::new()));

    let (_, missing) = check("## `crates/core`\n\n`engine/gates.rs` and `gate.rs`\n");
    assert_eq!(missing.len(), 2, "{missing:?}");
    assert!(
        missing[0].starts_with("ARCHITECTURE.md:3: `engine/gates.rs`"),
        "{missing:?}"
    );

    // A section's directory does not carry over to the next section, nor a paragraph's to
    // the next paragraph.
    let (_, missing) = check("## `crates/core`\n\n## Elsewhere\n\n`engine/gate.rs`\n");
    assert_eq!(missing.len(), 1, "{missing:?}");
    let (_, missing) = check("`crates/server/ui/` holds `app.js`.\n\nAnd `api.js`.\n");
    assert_eq!(missing.len(), 1, "{missing:?}");
    let (_, missing) = check("See [the API](docs/apis.md).\n");
    assert_eq!(missing.len(), 1, "{missing:?}");
}
