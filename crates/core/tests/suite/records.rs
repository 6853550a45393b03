//! Typed records: reading every record of a kind with the ids needed to act on each.

use holdpoint_core::record::{Records, put};
use holdpoint_core::store::RecordKind;
use holdpoint_test_support::TempStore;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

#[derive(Serialize, Deserialize, PartialEq, Debug)]
struct Note {
    text: String,
}

#[tokio::test]
async fn all_keyed_gives_every_record_with_its_id_and_version() {
    let temp = TempStore::new();
    let records = Records::new(temp.dyn_store());
    let mut written = Vec::new();
    for i in 0..3 {
        let id = Uuid::now_v7();
        let note = Note {
            text: format!("note {i}"),
        };
        let write = put(RecordKind::Session, id, None, None, 1, &note).unwrap();
        records.commit(vec![write], vec![]).await.unwrap();
        written.push((id, 1, note));
    }
    // One of them changed since: its version is the one to update it at.
    let changed = Note {
        text: "note 1, edited".into(),
    };
    let write = put(RecordKind::Session, written[1].0, None, None, 2, &changed).unwrap();
    records.commit(vec![write], vec![]).await.unwrap();
    written[1] = (written[1].0, 2, changed);
    let read: Vec<(Uuid, u64, Note)> = records
        .all_keyed::<Note>(RecordKind::Session, None)
        .await
        .unwrap()
        .into_iter()
        .map(|k| (k.id, k.version, k.value))
        .collect();
    assert_eq!(read, written);
}
