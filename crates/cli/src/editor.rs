//! Editing JSON in the person's editor (`$VISUAL` or `$EDITOR`).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;

use serde_json::Value;

/// Opens `value`, pretty-printed, in `editor` on the terminal, and returns the text saved.
/// The editor command may carry arguments (`code --wait`); it is run by `sh` as Git does.
pub async fn edit(editor: &str, value: &Value) -> Result<String, String> {
    let path = std::env::temp_dir().join(format!("holdpoint-{}.json", uuid::Uuid::now_v7()));
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .and_then(|mut f| f.write_all(format!("{text}\n").as_bytes()));
    if let Err(e) = written {
        return Err(format!("cannot write {}: {e}", path.display()));
    }
    let status = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(format!("{editor} \"$1\""))
        .arg("editor")
        .arg(&path)
        .status()
        .await;
    let result = match status {
        Ok(s) if s.success() => std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display())),
        Ok(s) => Err(format!(
            "the editor ({editor}) failed ({s}); the hold is unchanged"
        )),
        Err(e) => Err(format!("cannot run the editor ({editor}): {e}")),
    };
    let _ = std::fs::remove_file(&path);
    result
}
