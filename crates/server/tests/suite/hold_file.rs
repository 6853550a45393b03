//! `GET /api/v1/holds/{hold}/file`: the file a `write_file` approval would write, as it is now
//! in the world's working directory — for people who may see the hold, never outside the
//! directory, and size-capped.

use serde_json::json;

use super::{TestServer, approval, held, raise};

#[tokio::test]
async fn a_write_files_approval_reads_the_file_as_it_is_now_within_the_world_only() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_owned();
    let t = TestServer::on(dir, super::ASK_ALL, |_| {}).await;
    let lab = t.world("lab").await["id"].as_str().unwrap().to_owned();
    t.world("prod").await;
    let bot = t.caller("bot", "agent", None).await;
    let alice = t.caller("alice", "approver", None).await;
    let prod_only = t.caller("pat", "approver", Some("prod")).await;
    let files = data.join("worlds").join(&lab);
    std::fs::create_dir_all(&files).unwrap();
    std::fs::write(files.join("notes.txt"), "one\ntwo\n").unwrap();
    std::fs::write(data.join("secret.txt"), "outside").unwrap();

    let write = |path: &str| approval("write_file", json!({"path": path, "content": "x\n"}));
    let r = raise(
        &bot,
        "lab",
        vec![
            write("notes.txt"),
            write("new/file.txt"),
            write("../../secret.txt"),
        ],
    )
    .await;
    let (there, missing, outside) = (held(&r, 0), held(&r, 1), held(&r, 2));

    let now = alice
        .get(&format!("/api/v1/holds/{there}/file"))
        .await
        .expect(200);
    assert_eq!(
        now,
        json!({"path": "notes.txt", "exists": true, "bytes": 8, "content": "one\ntwo\n"})
    );
    let now = alice
        .get(&format!("/api/v1/holds/{missing}/file"))
        .await
        .expect(200);
    assert_eq!(
        now,
        json!({"path": "new/file.txt", "exists": false, "bytes": 0})
    );
    // Never outside the world's directory.
    let (code, message) = alice
        .get(&format!("/api/v1/holds/{outside}/file"))
        .await
        .error(422);
    assert_eq!(code, "invalid_input");
    assert!(
        message.contains("leaves the world's directory"),
        "{message}"
    );

    // Guarded like the hold: not for agents, nor for a person who cannot see the hold.
    bot.get(&format!("/api/v1/holds/{there}/file"))
        .await
        .error(403);
    prod_only
        .get(&format!("/api/v1/holds/{there}/file"))
        .await
        .error(404);

    // Only a write_file approval writes a file.
    let r = raise(
        &bot,
        "lab",
        vec![approval("shell_cmd", json!({"command": "ls"}))],
    )
    .await;
    let (code, _) = alice
        .get(&format!("/api/v1/holds/{}/file", held(&r, 0)))
        .await
        .error(422);
    assert_eq!(code, "invalid_input");

    // A file past the file tools' limit: its size, not its text.
    std::fs::write(files.join("big.log"), vec![b'a'; 300 * 1024]).unwrap();
    let r = raise(&bot, "lab", vec![write("big.log")]).await;
    let now = alice
        .get(&format!("/api/v1/holds/{}/file", held(&r, 0)))
        .await
        .expect(200);
    assert_eq!(
        now,
        json!({"path": "big.log", "exists": true, "bytes": 300 * 1024, "too_large": true})
    );
}
