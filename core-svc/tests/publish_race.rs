//! Concurrent publishers over one store: the registry head moves only by
//! compare-and-swap and a loser retries once over the winner.

use std::sync::Arc;

use world_core::archive::Archive;
use world_core::publish::{Changes, Outcome, publish_set};
use world_core::registry::{bootstrap_epochs, read_revision};
use world_core::store::{OpenMode, Store, StoreLocation, StoredObject};
use world_core::subprocess::Slots;
use world_model::registry::{TRANSITION_REGISTRY, TRANSITION_SOURCE};
use world_model::{AccessTriple, Descriptor, HashRef, Schema, TransitionId};

async fn setup() -> (tempfile::TempDir, Store, Archive, HashRef, Slots) {
    let dir = tempfile::tempdir().unwrap();
    let location = StoreLocation::Sqlite(dir.path().join("world.db"));
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    let archive = Archive::for_store(&location, None).unwrap();
    let slots = Slots::new(8);
    // Any executable serves as a pinned interpreter here: these changes carry
    // their own sources, which publish_set does not re-check.
    let interpreter = archive.archive(std::path::Path::new("/bin/true"), &slots).await.unwrap();
    bootstrap_epochs(&store, &interpreter.release()).await.unwrap();
    (dir, store, archive, interpreter.reference, slots)
}

fn change(id: &str, interpreter: HashRef, body: &str) -> Changes {
    let source = StoredObject::new(TRANSITION_SOURCE, "test", body.as_bytes().to_vec());
    let descriptor = Descriptor {
        id: TransitionId::parse(id).unwrap(),
        title: id.into(),
        description: String::new(),
        transition_fn: source.hash,
        interpreter,
        semantics_epoch: 1,
        input_schema: Schema::parse(b"{\"type\":\"object\"}").unwrap(),
        output_schema: Schema::parse(b"{\"type\":\"object\"}").unwrap(),
        access: AccessTriple { effect: "world.apply".into(), scope: "world".into(), cost: 1 },
        declared_effects: Vec::new(),
    };
    Changes { descriptors: vec![descriptor], sources: vec![source], derived_epoch: None }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_publishes_of_different_ids_both_land() {
    let (_dir, store, archive, interpreter, slots) = setup().await;
    let store = Arc::new(store);
    let mut tasks = Vec::new();
    for i in 0..4 {
        let (store, archive, slots) = (Arc::clone(&store), archive.clone(), slots.clone());
        tasks.push(tokio::spawn(async move {
            publish_set(&store, &archive, &change(&format!("t{i}"), interpreter, &format!("source {i}")), &slots).await
        }));
    }
    let mut published = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(Outcome::Published { .. }) => published += 1,
            Ok(other) => panic!("unexpected {other:?}"),
            // Four racers can outrun one retry; that is reported, never silent.
            Err(message) => assert!(message.contains("kept moving"), "{message}"),
        }
    }
    let head = store.registry_head(TRANSITION_REGISTRY).await.unwrap().unwrap();
    let revision = read_revision(&store, &head).await.unwrap();
    assert_eq!(revision.revision, published);
    assert_eq!(revision.entries.len() as i64, published, "no published entry was lost");
}

#[tokio::test]
async fn republishing_an_id_is_unchanged_for_the_same_bytes_and_replaces_for_new_ones() {
    let (_dir, store, archive, interpreter, slots) = setup().await;
    let first = publish_set(&store, &archive, &change("t", interpreter, "one"), &slots).await.unwrap();
    let Outcome::Published { revision: 1, .. } = first else { panic!("{first:?}") };
    let same = publish_set(&store, &archive, &change("t", interpreter, "one"), &slots).await.unwrap();
    assert!(matches!(same, Outcome::Unchanged { revision: 1, .. }));
    let replaced = publish_set(&store, &archive, &change("t", interpreter, "two"), &slots).await.unwrap();
    assert!(matches!(replaced, Outcome::Published { revision: 2, .. }));
}
