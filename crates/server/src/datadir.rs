//! The data directory: only its owner may read it, and on PostgreSQL every node must use the
//! same one, since the worlds' working directories are in it and a turn runs on any node.

use std::io::Write as _;
use std::path::Path;

use holdpoint_core::record::{Records, put};
use holdpoint_core::store::{CommitError, RecordKind};
use serde::{Deserialize, Serialize};

use crate::launch::LaunchError;

/// The file, in the worlds' directory, that names the workspace the nodes share.
const MARKER: &str = ".holdpoint-workspace";
/// The one `Workspace` record's key.
const KEY: &str = "worlds";

/// Takes every permission but its owner's from `dir` and the files directly in it (the
/// database, its journals, the admin token). Refuses, naming the path, what it cannot change.
pub(crate) fn make_private(dir: &Path) -> Result<(), LaunchError> {
    use std::os::unix::fs::PermissionsExt;
    let private = |path: &Path, meta: std::fs::Metadata| {
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o077 == 0 {
            return Ok(());
        }
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode & 0o700)).map_err(|e| {
            LaunchError::Start(format!(
                "{} is readable by others (mode {mode:o}) and cannot be made private: {e}; \
                     run `chmod go-rwx` on it, or start as its owner",
                path.display()
            ))
        })
    };
    let unreadable = |e: std::io::Error| {
        LaunchError::Start(format!(
            "cannot read the data directory {}: {e}",
            dir.display()
        ))
    };
    private(dir, std::fs::metadata(dir).map_err(unreadable)?)?;
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        // Not followed: a link's target is not the data directory's to change.
        let meta = entry.metadata().map_err(unreadable)?;
        if meta.is_file() {
            private(&entry.path(), meta)?;
        }
    }
    Ok(())
}

/// What the database says the nodes' worlds directory holds.
#[derive(Serialize, Deserialize)]
struct Workspace {
    marker: String,
}

/// On a database several nodes share: checks that `worlds` is the directory the other nodes
/// use. The first node writes a marker there and the same marker through the database; a node
/// whose directory lacks it, or holds another, is refused, naming what to do.
pub(crate) async fn check_shared(records: &Records, worlds: &Path) -> Result<(), LaunchError> {
    let fail = |why: String| LaunchError::Start(why);
    std::fs::create_dir_all(worlds).map_err(|e| {
        fail(format!(
            "cannot create the worlds directory {}: {e}",
            worlds.display()
        ))
    })?;
    let file = worlds.join(MARKER);
    let mut known = recorded(records).await?;
    if known.is_none() {
        // The first node: its directory's marker (made now unless it is there) becomes the
        // database's. Another node starting at the same moment may win: then its is read.
        let marker =
            own_marker(&file).map_err(|e| fail(format!("cannot write {}: {e}", file.display())))?;
        let write = put(
            RecordKind::Workspace,
            uuid::Uuid::now_v7(),
            None,
            Some(KEY.to_owned()),
            1,
            &Workspace { marker },
        )
        .map_err(|e| fail(e.to_string()))?;
        match records.commit(vec![write], vec![]).await {
            Ok(()) | Err(CommitError::Conflict(_)) => {}
            Err(CommitError::Store(e)) => {
                return Err(fail(format!("cannot record the workspace's marker: {e}")));
            }
        }
        known = recorded(records).await?;
    }
    let Some(known) = known else {
        return Err(fail("the workspace's marker was not recorded".into()));
    };
    let here = std::fs::read_to_string(&file).ok();
    if here.as_deref().map(str::trim) == Some(known.value.marker.as_str()) {
        return Ok(());
    }
    Err(fail(format!(
        "{} is not the worlds directory the other nodes on this database use ({}): every node \
         must run with the same data directory, on a volume they all mount, or a turn taken \
         over by another node runs its tools in other files (docs/deploy.md, \"Several nodes\")",
        worlds.display(),
        match here {
            None => format!("it has no {MARKER}"),
            Some(_) => format!("its {MARKER} names another workspace"),
        }
    )))
}

/// The marker the database holds, if any.
async fn recorded(
    records: &Records,
) -> Result<Option<holdpoint_core::record::Keyed<Workspace>>, LaunchError> {
    records
        .by_key::<Workspace>(RecordKind::Workspace, None, KEY)
        .await
        .map_err(|e| LaunchError::Start(format!("cannot read the workspace's marker: {e}")))
}

/// The marker in `file`, written now (a new random one) unless it is there.
fn own_marker(file: &Path) -> std::io::Result<String> {
    if let Ok(marker) = std::fs::read_to_string(file) {
        return Ok(marker.trim().to_owned());
    }
    let marker = uuid::Uuid::new_v4().to_string();
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(file)
    {
        Ok(mut f) => {
            f.write_all(marker.as_bytes())?;
            f.sync_all()?;
            Ok(marker)
        }
        // Another node on the shared volume made it first.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            Ok(std::fs::read_to_string(file)?.trim().to_owned())
        }
        Err(e) => Err(e),
    }
}
