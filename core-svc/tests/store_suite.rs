//! The store suite: every rule of the store API, run against SQLite and
//! against PostgreSQL (`WORLD_TEST_POSTGRES_URL`, an admin URL such as
//! `postgres://postgres@127.0.0.1:5432/postgres`; each test gets a fresh
//! database). Without that variable the PostgreSQL half fails: `tests/run.sh`
//! starts a throwaway server and sets it.

use std::time::Duration;

mod common;

use common::{Fresh, both_backends, fresh_location};
use sqlx::Connection;
use world_core::genesis::{self, entry_hash};
use world_core::store::{
    Claim, Commit, FENCE, Liveness, LockError, LockMode, LogEntry, OpenMode, Reader, Receipt, ServingLock, SessionRow,
    Store, StoreError, StoreLocation, StoredObject, WorldRow,
};
use world_model::{AccessTriple, Episode, HashRef};

const BUDGET: Duration = Duration::from_secs(10);

/// The commit that extends `head` (a world of `revision`) with one entry
/// carrying `payload`.
fn next_commit(head: Option<&WorldRow>, payload: &str, invocation_id: Option<&str>) -> Commit {
    let object = StoredObject::new("test/payload/v1", "store-suite", payload.as_bytes().to_vec());
    let (index, prev) = match head {
        Some(world) => (world.revision + 1, world.log_head),
        None => (0, HashRef::of(b"")),
    };
    let entry = LogEntry {
        entry_index: index,
        semantics_epoch: 1,
        transition_fn: object.hash,
        interpreter: object.hash,
        prev_entry_hash: prev,
        written_by: "store-suite".into(),
        entry_hash: object.hash,
        transition_ref: object.hash,
    };
    let (entry, next_world) = genesis::seal(entry, object.hash);
    Commit {
        invocation_id: invocation_id.map(str::to_owned),
        episode: None,
        observed_head: head.map(|w| w.reference),
        objects: vec![object],
        next_world,
        entry,
        logical_time: 1_700_000_000,
        effect_outcomes: Vec::new(),
    }
}

async fn head_world(store: &Store) -> Option<WorldRow> {
    let head = store.selected_head().await.expect("head")?;
    store.world(&head).await.expect("world")
}

both_backends!(
    fresh_location;
    a_fresh_store_is_created_and_reopens,
    a_store_from_the_future_is_refused_untouched,
    a_version_1_store_is_migrated_in_place,
    objects_verify_their_hash_and_keep_the_first_writer,
    objects_page_by_semantic_id_in_hash_order,
    genesis_commits_once,
    a_stale_observed_head_conflicts_and_writes_nothing,
    a_journaled_commit_is_idempotent_and_its_id_is_single_use,
    log_pages_stop_at_the_first_gap_and_clamp,
    registry_heads_move_only_by_compare_and_swap,
    sessions_store_only_credential_ids,
    the_serving_lock_excludes_the_exclusive_writer,
    concurrent_commits_on_one_head_have_one_winner,
    invocation_claims_guard_an_id_and_name_its_call,
    episode_leases_pass_on_when_given_back_or_expired,
    a_planned_commit_extends_the_current_head_and_reports_a_committed_id,
    concurrent_commits_share_transactions_and_each_is_checked_alone,
    a_commit_of_many_objects_is_written_whole,
    concurrent_effect_intents_get_gapless_ordinals_and_sum_their_spend,
    a_version_3_store_gets_its_spend_from_its_intents,
    a_reader_reads_its_episode_and_what_belongs_to_none,
    a_version_4_store_learns_whose_entries_and_objects_it_holds,
    a_version_7_store_reads_as_before_and_new_objects_name_their_first_writer,
);

async fn a_fresh_store_is_created_and_reopens(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.expect("create");
    assert_eq!(store.selected_head().await.unwrap(), None);
    store.close().await;
    let store = Store::open(&location, OpenMode::MustExist).await.expect("reopen");
    assert_eq!(store.selected_head().await.unwrap(), None);
}

/// A connection to the store's database that bypasses the store, to alter it behind its back.
async fn raw_connection(location: &StoreLocation) -> sqlx::AnyConnection {
    let url = match location {
        StoreLocation::Sqlite(path) => format!("sqlite://{}", path.display()),
        StoreLocation::Postgres(url) => url.clone(),
    };
    sqlx::AnyConnection::connect(&url).await.expect("raw connect")
}

/// Runs `sql` on a [`raw_connection`], which it returns.
async fn raw_execute(location: &StoreLocation, sql: String) -> sqlx::AnyConnection {
    let mut conn = raw_connection(location).await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone())).execute(&mut conn).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    conn
}

async fn a_store_from_the_future_is_refused_untouched(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.expect("create");
    store.close().await;
    let mut conn = raw_execute(&location, "UPDATE world_schema SET version = 99".into()).await;
    match Store::open(&location, OpenMode::MustExist).await {
        Err(StoreError::FutureSchema { found: 99, supported, .. }) => {
            assert_eq!(supported, world_core::store::SCHEMA_VERSION)
        }
        other => panic!("expected a future-schema refusal, got {:?}", other.map(|_| ())),
    }
    let version: i64 =
        sqlx::Row::get(&sqlx::query("SELECT version FROM world_schema").fetch_one(&mut conn).await.unwrap(), 0);
    assert_eq!(version, 99, "the refused store was modified");
}

/// The names of the store's indexes that its migrations created (not the backends' own).
async fn index_names(conn: &mut sqlx::AnyConnection, location: &StoreLocation) -> Vec<String> {
    let sql = match location {
        StoreLocation::Sqlite(_) => "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL",
        StoreLocation::Postgres(_) => {
            "SELECT indexname::text AS name FROM pg_indexes WHERE schemaname = current_schema() \
             AND indexname NOT LIKE '%_pkey' AND indexname NOT LIKE '%_key'"
        }
    };
    let rows = sqlx::query(sql).fetch_all(conn).await.expect("list indexes");
    let mut names: Vec<String> = rows.iter().map(|row| sqlx::Row::get(row, "name")).collect();
    names.sort();
    names
}

async fn a_version_1_store_is_migrated_in_place(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.expect("create");
    let first = next_commit(None, "kept across the migration", None);
    store.commit(first.clone(), BUDGET).await.expect("commit");
    store.close().await;
    let mut conn = raw_connection(&location).await;
    let current = index_names(&mut conn, &location).await;
    // Put the store back as version 1 left it: its three indexes no query reads, none of
    // version 3's and 4's effect tables, and none of version 5's liveness.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "{UNDO_VERSION_8} {UNDO_VERSION_7} {UNDO_VERSION_6} DROP TABLE effect_spend; DROP TABLE effect_intents; DROP TABLE episode_leases; \
         DROP TABLE cores; ALTER TABLE invocation_claims DROP COLUMN expires_at; \
         CREATE INDEX worlds_by_state_root ON worlds (state_root, world_ref); \
         CREATE INDEX log_entries_by_transition_ref ON log_entries (transition_ref, entry_index); \
         CREATE INDEX log_entries_by_transition_fn ON log_entries (transition_fn, entry_index); \
         UPDATE world_schema SET version = 1",
    )))
    .execute(&mut conn)
    .await
    .expect("make a version 1 store");

    let store = Store::open(&location, OpenMode::MustExist).await.expect("open and migrate");
    assert_eq!(head_world(&store).await, Some(first.next_world), "the data survives the migration");
    assert_eq!(store.log_entry(0).await.unwrap(), Some(first.entry.clone()));
    store.close().await;
    let version: i64 =
        sqlx::Row::get(&sqlx::query("SELECT version FROM world_schema").fetch_one(&mut conn).await.unwrap(), 0);
    assert_eq!(version, world_core::store::SCHEMA_VERSION);
    assert_eq!(index_names(&mut conn, &location).await, current, "a migrated store has a fresh store's indexes");
    assert!(current.contains(&"objects_by_semantic_id".to_owned()), "{current:?}");
}

/// SQLite only: on PostgreSQL the database is its operator's to create, and opening never creates one.
#[tokio::test]
async fn a_missing_sqlite_store_is_not_created_when_it_must_exist() {
    let (location, _guard) = fresh_location("sqlite").await;
    let StoreLocation::Sqlite(path) = &location else {
        unreachable!("fresh_location(\"sqlite\") is a SQLite location")
    };
    assert!(matches!(Store::open(&location, OpenMode::MustExist).await, Err(StoreError::Missing(_))));
    assert!(!path.exists());
}

async fn objects_verify_their_hash_and_keep_the_first_writer(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    let first = StoredObject::new("test/a/v1", "first", b"payload".to_vec());
    store.put_object(&first).await.unwrap();
    let second = StoredObject { provenance: "second".into(), ..first.clone() };
    store.put_object(&second).await.unwrap();
    let read = store.get_object(&first.hash, true).await.unwrap().unwrap();
    assert_eq!(read, first);
    let bare = store.get_object(&first.hash, false).await.unwrap().unwrap();
    assert_eq!(bare.payload, None);

    let forged =
        StoredObject { payload: Some(b"other".to_vec()), ..StoredObject::new("test/a/v1", "x", b"zzz".to_vec()) };
    assert!(matches!(store.put_object(&forged).await, Err(StoreError::Invalid { .. })));
    assert_eq!(store.get_object(&forged.hash, false).await.unwrap(), None);
    assert_eq!(store.get_object(&HashRef::of(b"absent"), false).await.unwrap(), None);
}

async fn objects_page_by_semantic_id_in_hash_order(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    let mut hashes = Vec::new();
    for i in 0..5 {
        let object = StoredObject::new("test/page/v1", "suite", format!("item {i}").into_bytes());
        store.put_object(&object).await.unwrap();
        hashes.push(object.hash);
    }
    store.put_object(&StoredObject::new("test/other/v1", "suite", b"x".to_vec())).await.unwrap();
    hashes.sort();
    let reads = store.reads(&Reader::Everything);
    let page = reads.objects_by_semantic_id("test/page/v1", None, 2).await.unwrap();
    assert_eq!(page.iter().map(|o| o.hash).collect::<Vec<_>>(), hashes[..2]);
    assert!(page.iter().all(|o| o.payload.is_none()));
    let rest = reads.objects_by_semantic_id("test/page/v1", Some(&hashes[1]), 0).await.unwrap();
    assert_eq!(rest.iter().map(|o| o.hash).collect::<Vec<_>>(), hashes[2..]);
    assert!(reads.objects_by_semantic_id("test/none/v1", None, 10).await.unwrap().is_empty());
}

async fn genesis_commits_once(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    let world = genesis::commit_genesis(&store, 1).await.expect("genesis");
    assert_eq!(world.revision, 0);
    assert_eq!(store.selected_head().await.unwrap(), Some(world.reference));
    assert_eq!(store.world(&world.reference).await.unwrap(), Some(world));
    let entry = store.log_entry(0).await.unwrap().expect("entry 0");
    assert_eq!(entry.written_by, "genesis");
    assert_eq!(entry.entry_hash, world.log_head);
    assert_eq!(entry_hash(&entry), entry.entry_hash);
    match genesis::commit_genesis(&store, 2).await {
        Err(StoreError::Conflict { observed: None, selected }) => assert_eq!(selected, Some(world.reference)),
        other => panic!("a second genesis must conflict, got {other:?}"),
    }
}

async fn a_stale_observed_head_conflicts_and_writes_nothing(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    let genesis = genesis::commit_genesis(&store, 1).await.unwrap();
    let first = next_commit(Some(&genesis), "first", None);
    store.commit(first.clone(), BUDGET).await.unwrap();
    let stale = next_commit(Some(&genesis), "stale", Some("rest:stale"));
    let stale_object = stale.objects[0].hash;
    match store.commit(stale, BUDGET).await {
        Err(StoreError::Conflict { observed, selected }) => {
            assert_eq!(observed, Some(genesis.reference));
            assert_eq!(selected, Some(first.next_world.reference));
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(store.get_object(&stale_object, false).await.unwrap(), None, "a refused commit wrote its object");
    assert_eq!(store.receipt("rest:stale").await.unwrap(), Receipt::NotStarted);
    assert_eq!(store.log_entry(1).await.unwrap(), Some(first.entry));
    assert_eq!(store.log_entry(2).await.unwrap(), None);
}

async fn a_journaled_commit_is_idempotent_and_its_id_is_single_use(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    let genesis = genesis::commit_genesis(&store, 1).await.unwrap();
    assert_eq!(store.receipt("rest:a").await.unwrap(), Receipt::NotStarted);
    let commit = next_commit(Some(&genesis), "journaled", Some("rest:a"));
    let first = store.commit(commit.clone(), BUDGET).await.unwrap();
    assert!(!first.replayed);
    let journal = store.journal_len().await.unwrap();
    assert_eq!(journal, 2, "one intent and one outcome");

    let mut later = commit.clone();
    later.logical_time += 60;
    let again = store.commit(later, BUDGET).await.unwrap();
    assert!(again.replayed, "an identical resend is an idempotent success");
    assert_eq!(again.selected_head, first.selected_head);
    assert_eq!(store.journal_len().await.unwrap(), journal);

    let head = head_world(&store).await.unwrap();
    let different = next_commit(Some(&head), "different", Some("rest:a"));
    assert!(matches!(
        store.commit(different, BUDGET).await,
        Err(StoreError::DuplicateInvocation { kind: "commit", .. })
    ));
    assert_eq!(store.receipt("rest:a").await.unwrap(), Receipt::Resolved { result_ref: first.selected_head });
    assert_eq!(store.selected_head().await.unwrap(), Some(first.selected_head));
}

async fn log_pages_stop_at_the_first_gap_and_clamp(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    let mut head = genesis::commit_genesis(&store, 1).await.unwrap();
    for i in 0..4 {
        let commit = next_commit(Some(&head), &format!("entry {i}"), None);
        head = commit.next_world;
        store.commit(commit, BUDGET).await.unwrap();
    }
    let all = store.log_page(0, 0).await.unwrap();
    assert_eq!(all.iter().map(|e| e.entry_index).collect::<Vec<_>>(), vec![0, 1, 2, 3, 4]);
    assert_eq!(store.log_page(3, 1).await.unwrap().len(), 1);
    assert!(store.log_page(5, 10).await.unwrap().is_empty());
    assert!(store.log_page(i64::MAX, 500).await.unwrap().is_empty());
    // An entry beyond a gap (a REST commit may name any index) is not reached.
    let mut gap = next_commit(Some(&head), "gap", None);
    gap.entry.entry_index = 9;
    gap.next_world.revision = 9;
    store.commit(gap, BUDGET).await.unwrap();
    assert_eq!(store.log_page(0, 500).await.unwrap().len(), 5);
    assert_eq!(store.log_entry(9).await.unwrap().map(|e| e.entry_index), Some(9));
}

async fn registry_heads_move_only_by_compare_and_swap(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    let name = "world/transition-registry/v1";
    let one = StoredObject::new("test/registry/v1", "suite", b"one".to_vec());
    let two = StoredObject::new("test/registry/v1", "suite", b"two".to_vec());
    assert!(matches!(
        store.compare_and_set_registry_head(name, None, &one.hash).await,
        Err(StoreError::Invalid { .. })
    ));
    store.put_object(&one).await.unwrap();
    store.put_object(&two).await.unwrap();
    store.compare_and_set_registry_head(name, None, &one.hash).await.unwrap();
    assert_eq!(store.registry_head(name).await.unwrap(), Some(one.hash));
    match store.compare_and_set_registry_head(name, None, &two.hash).await {
        Err(StoreError::RegistryConflict { expected: None, actual, .. }) => assert_eq!(actual, Some(one.hash)),
        other => panic!("expected a registry conflict, got {other:?}"),
    }
    store.compare_and_set_registry_head(name, Some(&one.hash), &two.hash).await.unwrap();
    assert_eq!(store.registry_head(name).await.unwrap(), Some(two.hash));
    assert_eq!(store.registry_head("world/other/v1").await.unwrap(), None);
}

async fn sessions_store_only_credential_ids(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    let row = SessionRow {
        credential_id: "a".repeat(64),
        episode: "ep1".into(),
        grants_json: "[]".into(),
        expires_at: 10,
        created_at: 1,
    };
    store.insert_session(&row).await.unwrap();
    assert!(matches!(store.insert_session(&row).await, Err(StoreError::SessionExists(_))));
    store
        .insert_session(&SessionRow { credential_id: "b".repeat(64), episode: "ep2".into(), ..row.clone() })
        .await
        .unwrap();
    assert_eq!(store.session(&row.credential_id).await.unwrap(), Some(row.clone()));
    // Admission reads the session and the registry head in one statement.
    let registry = "world/transition-registry/v1";
    let both = store.session_and_registry_head(&row.credential_id, registry).await.unwrap();
    assert_eq!(both, Some((row.clone(), None)));
    let revision = StoredObject::new("test/registry/v1", "suite", b"revision".to_vec());
    store.put_object(&revision).await.unwrap();
    store.compare_and_set_registry_head(registry, None, &revision.hash).await.unwrap();
    let both = store.session_and_registry_head(&row.credential_id, registry).await.unwrap();
    assert_eq!(both, Some((row.clone(), Some(revision.hash))));
    assert_eq!(store.session_and_registry_head(&"c".repeat(64), registry).await.unwrap(), None);
    assert_eq!(store.list_sessions(None).await.unwrap().len(), 2);
    assert_eq!(store.list_sessions(Some("ep2")).await.unwrap().len(), 1);
    assert!(store.delete_session(&row.credential_id).await.unwrap());
    assert!(!store.delete_session(&row.credential_id).await.unwrap());
    assert_eq!(store.session(&row.credential_id).await.unwrap(), None);
    assert_eq!(store.revoke_episode("ep2", 1).await.unwrap(), vec!["b".repeat(64)]);
    assert!(store.list_sessions(None).await.unwrap().is_empty());
}

async fn the_serving_lock_excludes_the_exclusive_writer(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    let serving = ServingLock::acquire(&location, LockMode::Serve).await.expect("serve lock");
    if matches!(location, StoreLocation::Postgres(_)) {
        // Several cores may serve one PostgreSQL database.
        let _second = ServingLock::acquire(&location, LockMode::Serve).await.expect("a second serving core");
    }
    assert!(matches!(ServingLock::acquire(&location, LockMode::Exclusive).await, Err(LockError::Held(_))));
    drop(serving);
    let exclusive = ServingLock::acquire(&location, LockMode::Exclusive).await.expect("free after release");
    assert!(matches!(ServingLock::acquire(&location, LockMode::Serve).await, Err(LockError::Held(_))));
    drop(exclusive);
    store.close().await;
}

/// A core that dies while an interpreter it is starting has not yet exec'd (the child holds
/// copies of all its descriptors) must not leave its store "already served" to its successor.
#[tokio::test]
async fn a_sqlite_serving_lock_ends_with_its_holder_not_with_copies_of_its_descriptor() {
    let (location, _dir) = fresh_location("sqlite").await;
    let serving = ServingLock::acquire(&location, LockMode::Serve).await.expect("serve lock");
    // SAFETY: the child only waits for signals until it is killed below.
    let child = unsafe { libc::fork() };
    if child == 0 {
        loop {
            // SAFETY: async-signal-safe.
            unsafe { libc::pause() };
        }
    }
    assert!(child > 0, "fork: {}", std::io::Error::last_os_error());
    drop(serving);
    let successor = ServingLock::acquire(&location, LockMode::Exclusive).await;
    // SAFETY: our own child.
    unsafe {
        libc::kill(child, libc::SIGKILL);
        libc::waitpid(child, std::ptr::null_mut(), 0);
    }
    successor.expect("the lock is free once its holder let go, while copies of its descriptor live on");
}

const RACE_CHILD: &str = "WORLD_STORE_RACE_CHILD";
const RACE_ROUNDS: usize = 40;

/// Two processes repeatedly extend whatever head they read. Each round at
/// most one of them can win; the log must end gapless with one entry per win.
async fn concurrent_commits_on_one_head_have_one_winner(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    genesis::commit_genesis(&store, 1).await.unwrap();
    store.close().await;
    let text = match &location {
        StoreLocation::Sqlite(path) => path.display().to_string(),
        StoreLocation::Postgres(url) => url.clone(),
    };
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..2)
        .map(|n| {
            std::process::Command::new(&exe)
                .args(["--exact", "race_child", "--ignored", "--nocapture", "--test-threads", "1"])
                .env(RACE_CHILD, format!("{n}|{text}"))
                .stdout(std::process::Stdio::piped())
                .spawn()
                .expect("spawn racer")
        })
        .collect();
    let mut wins = 0;
    for child in children {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "a racer failed");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let line = stdout
            .lines()
            .find_map(|l| l.split_once("wins=").map(|(_, n)| n))
            .unwrap_or_else(|| panic!("racer reports its wins; it printed:\n{stdout}"));
        wins += line.trim().parse::<i64>().unwrap();
    }
    let store = Store::open(&location, OpenMode::MustExist).await.unwrap();
    let head = head_world(&store).await.unwrap();
    assert_eq!(head.revision, wins, "every win is one revision and no revision was won twice");
    let log = store.log_page(0, 500).await.unwrap();
    assert_eq!(log.len() as i64, wins + 1, "the log is gapless");
    for pair in log.windows(2) {
        assert_eq!(pair[1].prev_entry_hash, pair[0].entry_hash, "each entry chains to the one before");
    }
}

/// The racer half of the test above, which runs it in child processes; not a test of its own.
#[tokio::test]
#[ignore = "the racer half of concurrent_commits_on_one_head_have_one_winner, run only by it"]
async fn race_child() {
    let spec = std::env::var(RACE_CHILD).expect("spawned by concurrent_commits_on_one_head_have_one_winner");
    let (n, text) = spec.split_once('|').unwrap();
    let location = StoreLocation::parse(text).unwrap();
    let store = Store::open(&location, OpenMode::MustExist).await.unwrap();
    let mut wins = 0;
    for round in 0..RACE_ROUNDS {
        let head = head_world(&store).await;
        let commit = next_commit(head.as_ref(), &format!("racer {n} round {round}"), None);
        match store.commit(commit, BUDGET).await {
            Ok(_) => wins += 1,
            Err(StoreError::Conflict { .. }) => {}
            Err(other) => panic!("racer {n}: {other}"),
        }
    }
    println!("wins={wins}");
}

async fn invocation_claims_guard_an_id_and_name_its_call(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    let id = "a2a:ep1:t1";
    assert_eq!(store.claim_invocation(id, "call-a", "core-1/a", 100, 134).await.unwrap(), Claim::Acquired);
    assert_eq!(store.claim_invocation(id, "call-a", "core-2/b", 101, 135).await.unwrap(), Claim::InFlight);
    assert_eq!(store.claim_invocation(id, "call-b", "core-2/b", 101, 135).await.unwrap(), Claim::DifferentCall);
    // A running claim holds until the expiry its owner gave it, and not a second longer.
    assert_eq!(store.claim_invocation(id, "call-a", "core-2/b", 133, 167).await.unwrap(), Claim::InFlight);
    assert_eq!(store.claim_invocation(id, "call-a", "core-2/b", 134, 168).await.unwrap(), Claim::Acquired);
    assert_eq!(store.claim_invocation(id, "call-a", "core-1/a", 135, 169).await.unwrap(), Claim::InFlight);
    // A failed call frees the id; a new attempt may take it.
    store.release_invocation(id, false).await.unwrap();
    assert_eq!(store.claim_invocation(id, "call-b", "core-3/c", 600, 634).await.unwrap(), Claim::Acquired);
    store.release_invocation(id, true).await.unwrap();
    assert_eq!(store.claim_invocation(id, "call-b", "core-3/c", 700, 734).await.unwrap(), Claim::Committed);
    assert_eq!(store.claim_invocation(id, "call-a", "core-3/c", 700, 734).await.unwrap(), Claim::DifferentCall);
    // Releasing a committed claim as failed keeps it committed, expired or not.
    store.release_invocation(id, false).await.unwrap();
    assert_eq!(store.claim_invocation(id, "call-b", "core-3/c", 9000, 9034).await.unwrap(), Claim::Committed);
}

async fn episode_leases_pass_on_when_given_back_or_expired(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    assert!(store.acquire_episode_lease("ep1", "turn-1", 100, 134, true).await.unwrap());
    assert!(!store.acquire_episode_lease("ep1", "turn-2", 133, 167, true).await.unwrap());
    assert!(store.acquire_episode_lease("ep2", "turn-2", 133, 167, true).await.unwrap(), "episodes apart");
    assert!(store.acquire_episode_lease("ep1", "turn-2", 134, 168, true).await.unwrap(), "expired");
    // Giving back a lease someone else took over changes nothing.
    store.release_episode_lease("ep1", "turn-1").await.unwrap();
    assert!(!store.acquire_episode_lease("ep1", "turn-3", 140, 174, true).await.unwrap());
    store.release_episode_lease("ep1", "turn-2").await.unwrap();
    assert!(store.acquire_episode_lease("ep1", "turn-3", 140, 174, true).await.unwrap());
    store.close().await;
}

/// A PostgreSQL store opened as core `core`, with the session that keeps it alive.
async fn serving_as(location: &StoreLocation, core: &str) -> (Store, Liveness) {
    let store = Store::open(location, OpenMode::CreateIfMissing).await.unwrap();
    let liveness = Liveness::start(&store, core).await.expect("register the core");
    (store, liveness)
}

/// Moves the liveness times of `core` [`FENCE`] into the past, as if that long had passed.
async fn age_core(location: &StoreLocation, core: &str) {
    let sql = format!(
        "UPDATE cores SET started_at = started_at - {0}, gone_since = gone_since - {0} WHERE core = '{core}'",
        FENCE.as_secs()
    );
    raw_execute(location, sql).await;
}

/// Waits (bounded) until the store no longer sees `owner` alive: the server ends a closed
/// session's locks on its own time.
async fn until_dead(store: &Store, owner: &str) {
    for _ in 0..100 {
        if !store.owner_alive(owner).await.unwrap() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{owner} still looks alive");
}

/// `core-a` and `core-b` serving one fresh PostgreSQL store, each with the session that keeps
/// it alive.
async fn two_cores_on_postgres() -> (StoreLocation, Fresh, (Store, Liveness), (Store, Liveness)) {
    let (location, fresh) = fresh_location("postgres").await;
    let a = serving_as(&location, "core-a").await;
    let b = serving_as(&location, "core-b").await;
    (location, fresh, a, b)
}

/// What two cores contend for, asked over one window of time from now: the claim on
/// [`CONTENDED`] and the lease on `ep1`.
struct Contention {
    now: i64,
    later: i64,
}

const CONTENDED: &str = "a2a:ep1:t1";

impl Contention {
    fn from_now() -> Contention {
        let now = world_core::session::now_unix();
        Contention { now, later: now + 1000 }
    }

    /// `store`'s core claims [`CONTENDED`].
    async fn claim(&self, store: &Store) -> Claim {
        store.claim_invocation(CONTENDED, "call", store.owner(), self.now, self.later).await.unwrap()
    }

    /// `store`'s core takes the lease on `ep1` for `turn`, asking a holder that may be dead
    /// whether it is when `ask_holder`.
    async fn lease(&self, store: &Store, turn: &str, ask_holder: bool) -> bool {
        store.acquire_episode_lease("ep1", turn, self.now, self.later, ask_holder).await.unwrap()
    }

    /// `store`'s core takes the claim and the lease (as `turn-a`); returns the owner it holds
    /// them as.
    async fn hold(&self, store: &Store) -> String {
        assert_eq!(self.claim(store).await, Claim::Acquired);
        assert!(self.lease(store, "turn-a", true).await);
        store.owner().to_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_cores_claims_leases_and_intents_are_told_apart_from_a_live_ones_on_postgres() {
    let (location, _guard, (dead, dead_liveness), (live, _live_liveness)) = two_cores_on_postgres().await;
    let contention = Contention::from_now();
    let dead_owner = contention.hold(&dead).await;
    append_intent(&dead, "ep1", CONTENDED, 1).await;
    assert_eq!(live.effect_intent_writer("effect:ep1:0").await.unwrap().as_deref(), Some(dead_owner.as_str()));

    // While core-a lives, what it holds is its own.
    assert!(live.owner_alive(&dead_owner).await.unwrap());
    assert_eq!(contention.claim(&live).await, Claim::InFlight);
    assert!(!contention.lease(&live, "turn-b", true).await);

    // Its session ends, as when its process dies.
    drop(dead_liveness);
    dead.close().await;
    until_dead(&live, &dead_owner).await;
    // Found without its lock, but not yet for FENCE: a core that lost its session while it
    // runs has that long to stop.
    assert_eq!(contention.claim(&live).await, Claim::InFlight);
    assert!(!contention.lease(&live, "turn-b", true).await);
    // Not asking the holder leaves the lease to its expiry.
    age_core(&location, "core-a").await;
    assert!(!contention.lease(&live, "turn-b", false).await);
    assert!(contention.lease(&live, "turn-b", true).await);
    assert_eq!(contention.claim(&live).await, Claim::Acquired);
    assert!(live.owner_alive(live.owner()).await.unwrap());
    assert!(!live.owner_alive("core-a/unknown").await.unwrap());
    assert!(!live.owner_alive("").await.unwrap(), "intents from before cores registered count as dead");
    live.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_core_restarted_under_its_identity_ends_its_dead_runs_claims_on_postgres() {
    let (location, _guard, (first, first_liveness), (other, _other_liveness)) = two_cores_on_postgres().await;
    let contention = Contention::from_now();
    let first_owner = contention.hold(&first).await;
    drop(first_liveness);
    first.close().await;

    // core-a serves again: its dead run is no one's while the new one lives.
    let (second, _second_liveness) = serving_as(&location, "core-a").await;
    assert_ne!(second.owner(), first_owner);
    assert!(!other.owner_alive(&first_owner).await.unwrap());
    assert!(other.owner_alive(second.owner()).await.unwrap());
    // Within FENCE of the restart the dead run's claims still hold (its lock is held, by
    // the new run); after it they end.
    assert_eq!(contention.claim(&other).await, Claim::InFlight);
    age_core(&location, "core-a").await;
    assert_eq!(contention.claim(&second).await, Claim::Acquired);
    assert!(contention.lease(&other, "turn-b", true).await);
    // The new run's own claims are its own.
    assert_eq!(contention.claim(&other).await, Claim::InFlight);
    second.close().await;
    other.close().await;
}

async fn a_planned_commit_extends_the_current_head_and_reports_a_committed_id(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    let planner = |payload: &'static str| -> world_core::store::Planner {
        Box::new(move |world: &WorldRow| next_commit(Some(world), payload, Some("a2a:ep1:planned")))
    };
    assert!(matches!(
        store.commit_next("a2a:ep1:planned", planner("x"), true, BUDGET).await,
        Err(StoreError::WorldAbsent)
    ));
    let genesis = genesis::commit_genesis(&store, 1).await.unwrap();
    // Another commit lands first: the planned one still extends whatever is current.
    store.commit(next_commit(Some(&genesis), "other", None), BUDGET).await.unwrap();
    let (_, commit) = store.commit_next("a2a:ep1:planned", planner("planned"), true, BUDGET).await.unwrap();
    assert_eq!(commit.entry.entry_index, 2);
    assert_eq!(store.selected_head().await.unwrap(), Some(commit.next_world.reference));
    match store.commit_next("a2a:ep1:planned", planner("again"), true, BUDGET).await {
        Err(StoreError::AlreadyCommitted { result_ref, .. }) => assert_eq!(result_ref, commit.next_world.reference),
        other => panic!("a committed id must not be planned again: {other:?}"),
    }
    assert_eq!(
        store.receipt("a2a:ep1:planned").await.unwrap(),
        Receipt::Resolved { result_ref: commit.next_world.reference }
    );
}

/// Commits arriving together are committed together, each checked against the world the
/// ones before it left: distinct ids all land once, in one gapless chain; the second send of
/// an id is told it already committed; a commit fixed on a stale head conflicts.
async fn concurrent_commits_share_transactions_and_each_is_checked_alone(location: StoreLocation) {
    const IDS: usize = 30;
    const SENDS: usize = 40;
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    let genesis = genesis::commit_genesis(&store, 1).await.unwrap();
    let stale = next_commit(Some(&genesis), "stale", None);
    let sends: Vec<_> = (0..SENDS)
        .map(|n| {
            let store = store.clone();
            let id = format!("mcp:ep1:call-{}", n % IDS);
            tokio::spawn(async move {
                let planner: world_core::store::Planner = {
                    let id = id.clone();
                    Box::new(move |world: &WorldRow| next_commit(Some(world), &format!("send {n}"), Some(&id)))
                };
                (id.clone(), store.commit_next(&id, planner, false, BUDGET).await)
            })
        })
        .collect();
    let stale_send = tokio::spawn({
        let store = store.clone();
        async move {
            // Let the planned commits move the head first.
            tokio::time::sleep(Duration::from_millis(200)).await;
            store.commit(stale, BUDGET).await
        }
    });
    let mut committed = std::collections::HashMap::new();
    let mut repeats = Vec::new();
    for send in sends {
        match send.await.unwrap() {
            (id, Ok((_, commit))) => {
                assert!(committed.insert(id, commit.next_world.reference).is_none(), "an id committed twice");
            }
            (_, Err(StoreError::AlreadyCommitted { invocation_id, result_ref })) => {
                repeats.push((invocation_id, result_ref))
            }
            (id, Err(other)) => panic!("{id}: {other}"),
        }
    }
    assert_eq!(committed.len(), IDS);
    assert_eq!(repeats.len(), SENDS - IDS);
    for (id, result_ref) in repeats {
        assert_eq!(committed[&id], result_ref, "a repeat names the world its id committed");
    }
    assert!(matches!(stale_send.await.unwrap(), Err(StoreError::Conflict { .. })));

    let head = head_world(&store).await.unwrap();
    assert_eq!(head.revision, IDS as i64);
    let log = store.log_page(0, 500).await.unwrap();
    assert_eq!(log.len(), IDS + 1, "the log is gapless");
    for pair in log.windows(2) {
        assert_eq!(pair[1].prev_entry_hash, pair[0].entry_hash, "each entry chains to the one before");
    }
    assert_eq!(store.journal_len().await.unwrap(), 2 * IDS as i64, "one intent and one outcome per id");
    for (id, result_ref) in &committed {
        assert_eq!(store.receipt(id).await.unwrap(), Receipt::Resolved { result_ref: *result_ref });
    }
}

async fn a_commit_of_many_objects_is_written_whole(location: StoreLocation) {
    // Far more rows than one INSERT takes: the objects span many statements of one batch.
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.expect("create");
    let mut commit = next_commit(None, "many", None);
    commit.objects.extend(
        (0..8_000).map(|i| StoredObject::new("test/payload/v1", "store-suite", format!("object {i}").into_bytes())),
    );
    let last = commit.objects.last().expect("objects").hash;
    let next = commit.next_world.reference;
    store.commit(commit, BUDGET).await.expect("commit");
    assert_eq!(store.selected_head().await.unwrap(), Some(next));
    let stored = store.get_object(&last, true).await.unwrap().expect("the last object is stored");
    assert_eq!(stored.payload.as_deref(), Some(&b"object 7999"[..]));
}

/// Appends one intent of `episode` costing `cost`; returns its ordinal.
async fn append_intent(store: &Store, episode: &str, call: &str, cost: i64) -> i64 {
    let requirement = AccessTriple { effect: "Workspace.Read".into(), scope: "worktree".into(), cost };
    let request = StoredObject::new("world/effect-request/v1", "test", format!("{episode}/{call}").into_bytes());
    let episode_owned = episode.to_owned();
    let intent = move |ordinal: i64| {
        StoredObject::new("world/effect-intent/v1", "test", format!("{episode_owned}:{ordinal}").into_bytes())
    };
    let (ordinal, object) = store.append_effect_intent(episode, call, &requirement, &request, intent).await.unwrap();
    assert_eq!(object.payload.as_deref(), Some(format!("{episode}:{ordinal}").as_bytes()));
    ordinal
}

async fn concurrent_effect_intents_get_gapless_ordinals_and_sum_their_spend(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    genesis::commit_genesis(&store, 1).await.unwrap();
    // Intents of four episodes queued together, beside commits: they share transactions.
    let intents = (0..20).map(|i| {
        let store = store.clone();
        async move { (i % 4, append_intent(&store, &format!("ep{}", i % 4), &format!("call-{i}"), 1 + i % 4).await) }
    });
    let commits = (0..8).map(|i| {
        let store = store.clone();
        async move {
            let id = format!("commit-{i}");
            let planner: world_core::store::Planner =
                Box::new(move |world: &WorldRow| next_commit(Some(world), &format!("c{i}"), Some(&id)));
            store.commit_next(&format!("commit-{i}"), planner, false, BUDGET).await.unwrap();
        }
    });
    let (ordinals, _) = tokio::join!(futures::future::join_all(intents), futures::future::join_all(commits));
    for episode in 0..4 {
        let mut got: Vec<i64> = ordinals.iter().filter(|(e, _)| *e == episode).map(|(_, o)| *o).collect();
        got.sort();
        assert_eq!(got, vec![0, 1, 2, 3, 4], "episode {episode}: gapless ordinals");
        let spend = store.effect_spend(&format!("ep{episode}")).await.unwrap();
        assert_eq!(spend, vec![("Workspace.Read".to_owned(), "worktree".to_owned(), 5 * (1 + episode))]);
        for ordinal in 0..5 {
            let id = format!("effect:ep{episode}:{ordinal}");
            assert_eq!(store.effect_receipt(&id).await.unwrap(), "indeterminate", "{id}");
        }
    }
    assert_eq!(head_world(&store).await.unwrap().revision, 8, "every commit beside the intents landed");
    store.close().await;
}

async fn a_version_3_store_gets_its_spend_from_its_intents(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    for (call, cost) in [("a", 2), ("b", 3)] {
        append_intent(&store, "ep1", call, cost).await;
    }
    append_intent(&store, "ep2", "c", 7).await;
    assert_eq!(store.claim_invocation("a2a:ep1:t1", "call", "old-core", 100, 9999).await.unwrap(), Claim::Acquired);
    store.close().await;
    let undo = "DROP TABLE effect_spend; UPDATE world_schema SET version = 3";
    raw_execute(&location, format!("{UNDO_VERSION_8} {UNDO_VERSION_7} {UNDO_VERSION_6} {UNDO_VERSION_5} {undo}")).await;

    let store = Store::open(&location, OpenMode::MustExist).await.expect("open and migrate");
    let spend = |n: i64| vec![("Workspace.Read".to_owned(), "worktree".to_owned(), n)];
    assert_eq!(store.effect_spend("ep1").await.unwrap(), spend(5));
    assert_eq!(store.effect_spend("ep2").await.unwrap(), spend(7));
    assert_eq!(append_intent(&store, "ep1", "d", 1).await, 2, "ordinals go on");
    assert_eq!(store.effect_spend("ep1").await.unwrap(), spend(6));
    // A claim from before claims carried their expiry keeps the 120 s it was given.
    assert_eq!(store.claim_invocation("a2a:ep1:t1", "call", "core/x", 219, 300).await.unwrap(), Claim::InFlight);
    assert_eq!(store.claim_invocation("a2a:ep1:t1", "call", "core/x", 220, 300).await.unwrap(), Claim::Acquired);
    assert_eq!(store.effect_intent_writer("effect:ep1:0").await.unwrap().as_deref(), Some(""));
    store.close().await;
}

/// Take a store back from version N to what version N - 1 left.
const UNDO_VERSION_5: &str = "DROP TABLE cores; ALTER TABLE invocation_claims DROP COLUMN expires_at; \
     ALTER TABLE episode_leases DROP COLUMN core; ALTER TABLE effect_intents DROP COLUMN core;";
const UNDO_VERSION_6: &str = "DROP TABLE oauth_refresh_tokens; DROP TABLE oauth_sessions; \
     DROP TABLE oauth_approvals; DROP TABLE oauth_clients;";
const UNDO_VERSION_7: &str =
    "DROP TABLE object_episodes; DROP INDEX log_entries_by_episode; ALTER TABLE log_entries DROP COLUMN episode;";
/// Version 7 kept every object's episodes and entries in rows of their own.
const UNDO_VERSION_8: &str = "INSERT INTO object_episodes (object_ref, episode) SELECT hash, episode FROM objects \
     WHERE episode IS NOT NULL ON CONFLICT DO NOTHING; \
     INSERT INTO commit_objects (object_ref, entry_index) SELECT hash, entry_index FROM objects \
     WHERE entry_index IS NOT NULL ON CONFLICT DO NOTHING; \
     ALTER TABLE objects DROP COLUMN episode; ALTER TABLE objects DROP COLUMN entry_index;";

/// The commit of one call of `episode` on `head`: `objects` and an invocation record naming the
/// episode (as the coordinator writes it), journaled under `a2a:<episode>:<task>`.
fn call_commit(head: &WorldRow, episode: &str, task: &str, objects: Vec<StoredObject>) -> Commit {
    let id = format!("a2a:{episode}:{task}");
    let record = serde_json::json!({"invocationId": id, "episodeId": episode, "skillId": "echo"});
    let record = StoredObject::new("world/invocation-record/v1", "coordinator:a2a", record.to_string().into_bytes());
    let mut commit = next_commit(Some(head), task, Some(&id));
    commit.entry.transition_ref = record.hash;
    (commit.entry, commit.next_world) = genesis::seal(commit.entry, commit.next_world.state_root);
    commit.objects.extend(objects);
    commit.objects.push(record);
    commit.episode = Some(Episode::parse(episode).unwrap());
    commit
}

fn object(text: &str) -> StoredObject {
    StoredObject::new("test/object/v1", "store-suite", text.as_bytes().to_vec())
}

/// Whether `reader` reads each of `objects`, in order.
async fn readable(store: &Store, reader: &Reader, objects: &[&StoredObject]) -> Vec<bool> {
    let mut read = Vec::new();
    for object in objects {
        read.push(store.reads(reader).object(&object.hash, true).await.unwrap().is_some());
    }
    read
}

fn indexes(entries: &[LogEntry]) -> Vec<i64> {
    entries.iter().map(|e| e.entry_index).collect()
}

async fn a_reader_reads_its_episode_and_what_belongs_to_none(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    let genesis = genesis::commit_genesis(&store, 1).await.unwrap();
    let source = object("a transition source");
    store.put_object(&source).await.unwrap();
    let (shared, own1, own2) = (object("the same input"), object("ep1's output"), object("ep2's output"));
    let first = call_commit(&genesis, "ep1", "t1", vec![shared.clone(), own1.clone()]);
    store.commit(first.clone(), BUDGET).await.unwrap();
    let second = call_commit(&first.next_world, "ep2", "t2", vec![shared.clone(), own2.clone()]);
    store.commit(second.clone(), BUDGET).await.unwrap();
    // ep1's effect objects outside any commit: an intent's request, an outcome's record, a denial.
    append_intent(&store, "ep1", "a2a:ep1:t3", 1).await;
    let request = StoredObject::new("world/effect-request/v1", "test", b"ep1/a2a:ep1:t3".to_vec());
    let record = StoredObject::new("world/effect-record/v1", "test", b"ep1's record".to_vec());
    let outcome = StoredObject::new("world/effect-outcome/v1", "test", b"ep1's outcome".to_vec());
    store.append_effect_outcome("effect:ep1:0", &[&record], &outcome).await.unwrap();
    let denial = StoredObject::new("world/effect-record/v1", "test", b"ep1's denial".to_vec());
    store.put_objects("ep1", &[&denial]).await.unwrap();

    let (ep1, ep2) = (Reader::Episode("ep1".into()), Reader::Episode("ep2".into()));
    let all = [&source, &shared, &own1, &own2, &request, &record, &outcome, &denial];
    assert_eq!(readable(&store, &ep1, &all).await, [true, true, true, false, true, true, true, true]);
    assert_eq!(readable(&store, &ep2, &all).await, [true, true, false, true, false, false, false, false]);
    assert_eq!(readable(&store, &Reader::Everything, &all).await, [true; 8]);
    let nobody = Reader::Episode("ep3".into());
    assert_eq!(readable(&store, &nobody, &all).await, [true, false, false, false, false, false, false, false]);
    let genesis_object = store.log_entry(0).await.unwrap().unwrap().transition_ref;
    assert!(store.reads(&nobody).object(&genesis_object, false).await.unwrap().is_some(), "genesis is everyone's");

    // Entries: each episode's own and genesis, in every read of the log.
    for (reader, own) in [(&ep1, 1), (&ep2, 2)] {
        let reads = store.reads(reader);
        assert_eq!(indexes(&reads.log_page(0, 0).await.unwrap()), [0, own]);
        assert_eq!(indexes(&reads.log_page_newest_first(None, 10).await.unwrap()), [own, 0]);
        assert_eq!(indexes(&reads.log_page_newest_first(Some(own), 10).await.unwrap()), [0]);
        assert_eq!(reads.log_entry(own).await.unwrap().map(|e| e.entry_index), Some(own));
        assert_eq!(reads.log_entry(3 - own).await.unwrap(), None, "the other episode's entry reads as absent");
        // The same bytes lead each episode to its own entry.
        assert_eq!(reads.entry_of_object(&shared.hash).await.unwrap().map(|e| e.entry_index), Some(own));
        let payloads = reads.payloads(&[own1.hash, own2.hash, source.hash]).await.unwrap();
        assert_eq!(payloads.len(), 2, "its own output and the source");
    }
    assert_eq!(store.reads(&ep2).entry_of_object(&own1.hash).await.unwrap(), None);
    assert_eq!(indexes(&store.reads(&Reader::Everything).log_page_newest_first(None, 10).await.unwrap()), [2, 1, 0]);
    assert_eq!(indexes(&store.reads(&nobody).log_page(0, 0).await.unwrap()), [0]);
    let page = store.reads(&ep2).objects_by_semantic_id("test/object/v1", None, 0).await.unwrap();
    let mut expected = vec![source.hash, shared.hash, own2.hash];
    expected.sort();
    assert_eq!(page.iter().map(|o| o.hash).collect::<Vec<_>>(), expected);
    assert_eq!(
        store.reads(&Reader::Everything).objects_by_semantic_id("test/object/v1", None, 0).await.unwrap().len(),
        4
    );
    // A kind calls write is outside the semantic-id index, and lists the same way.
    let records = [first.entry.transition_ref, second.entry.transition_ref];
    let kind = "world/invocation-record/v1";
    for (reader, own) in [(&ep1, records[0]), (&ep2, records[1])] {
        let page = store.reads(reader).objects_by_semantic_id(kind, None, 0).await.unwrap();
        assert_eq!(page.iter().map(|o| o.hash).collect::<Vec<_>>(), [own]);
    }
    let (low, high) = (records[0].min(records[1]), records[0].max(records[1]));
    let everything = store.reads(&Reader::Everything);
    let page = everything.objects_by_semantic_id(kind, None, 1).await.unwrap();
    assert_eq!(page.iter().map(|o| o.hash).collect::<Vec<_>>(), [low]);
    let page = everything.objects_by_semantic_id(kind, Some(&low), 1).await.unwrap();
    assert_eq!(page.iter().map(|o| o.hash).collect::<Vec<_>>(), [high]);
    store.close().await;
}

async fn a_version_4_store_learns_whose_entries_and_objects_it_holds(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    let genesis = genesis::commit_genesis(&store, 1).await.unwrap();
    let source = object("a transition source");
    store.put_object(&source).await.unwrap();
    let (output1, output2) = (object("ep1's output"), object("ep2's output"));
    let first = call_commit(&genesis, "ep1", "t1", vec![output1.clone()]);
    store.commit(first.clone(), BUDGET).await.unwrap();
    let second = call_commit(&first.next_world, "ep2", "t2", vec![output2.clone()]);
    store.commit(second.clone(), BUDGET).await.unwrap();
    // A REST commit of no episode, and an uncommitted effect of ep1 whose intent and outcome
    // name its request, record and result.
    let rest = next_commit(Some(&second.next_world), "a REST commit", Some("rest:r"));
    store.commit(rest.clone(), BUDGET).await.unwrap();
    let request = StoredObject::new("world/effect-request/v1", "test", b"a request".to_vec());
    let result = StoredObject::new("world/effect-result/v1", "test", b"a result".to_vec());
    let record = serde_json::json!({"requestRef": request.hash.to_string(), "resultRef": result.hash.to_string()});
    let record = StoredObject::new("world/effect-record/v1", "test", record.to_string().into_bytes());
    let requirement = AccessTriple { effect: "Workspace.Read".into(), scope: "worktree".into(), cost: 1 };
    let intent = serde_json::json!({"requestRef": request.hash.to_string()}).to_string().into_bytes();
    let intent = move |_| StoredObject::new("world/effect-intent/v1", "test", intent);
    store.append_effect_intent("ep1", "a2a:ep1:t3", &requirement, &request, intent).await.unwrap();
    let outcome = serde_json::json!({"recordRef": record.hash.to_string()}).to_string().into_bytes();
    let outcome = StoredObject::new("world/effect-outcome/v1", "test", outcome);
    store.append_effect_outcome("effect:ep1:0", &[&result, &record], &outcome).await.unwrap();
    store.close().await;

    let undo = "UPDATE world_schema SET version = 4";
    raw_execute(&location, format!("{UNDO_VERSION_8} {UNDO_VERSION_7} {UNDO_VERSION_6} {UNDO_VERSION_5} {undo}")).await;
    let store = Store::open(&location, OpenMode::MustExist).await.expect("open and migrate");
    let (ep1, ep2) = (Reader::Episode("ep1".into()), Reader::Episode("ep2".into()));
    assert_eq!(indexes(&store.reads(&ep1).log_page(0, 0).await.unwrap()), [0, 1, 3]);
    assert_eq!(indexes(&store.reads(&ep2).log_page(0, 0).await.unwrap()), [0, 2, 3]);
    let all = [&source, &output1, &output2, &request, &result, &record, &outcome, &rest.objects[0]];
    assert_eq!(readable(&store, &ep1, &all).await, [true, true, false, true, true, true, true, true]);
    assert_eq!(readable(&store, &ep2, &all).await, [true, false, true, false, false, false, false, true]);
    let record1 = first.entry.transition_ref;
    assert!(readable(&store, &ep1, &[&store.get_object(&record1, true).await.unwrap().unwrap()]).await[0]);
    assert!(!readable(&store, &ep2, &[&store.get_object(&record1, true).await.unwrap().unwrap()]).await[0]);
    store.close().await;
}

/// How many rows of `table` name `object` in `column`.
async fn rows_naming(conn: &mut sqlx::AnyConnection, table: &str, object: &StoredObject) -> i64 {
    let sql = format!("SELECT COUNT(*) AS n FROM {table} WHERE object_ref = $1");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(object.hash.to_string()).fetch_one(conn).await.unwrap();
    sqlx::Row::get(&row, "n")
}

async fn a_version_7_store_reads_as_before_and_new_objects_name_their_first_writer(location: StoreLocation) {
    let store = Store::open(&location, OpenMode::CreateIfMissing).await.unwrap();
    let genesis = genesis::commit_genesis(&store, 1).await.unwrap();
    let (shared, own1, own2) = (object("the same input"), object("ep1's output"), object("ep2's output"));
    let first = call_commit(&genesis, "ep1", "t1", vec![shared.clone(), own1.clone()]);
    store.commit(first.clone(), BUDGET).await.unwrap();
    let second = call_commit(&first.next_world, "ep2", "t2", vec![shared.clone(), own2.clone()]);
    store.commit(second.clone(), BUDGET).await.unwrap();
    store.close().await;
    raw_execute(&location, format!("{UNDO_VERSION_8} UPDATE world_schema SET version = 7")).await;

    let store = Store::open(&location, OpenMode::MustExist).await.expect("open and migrate");
    let (ep1, ep2, ep3) = (Reader::Episode("ep1".into()), Reader::Episode("ep2".into()), Reader::Episode("ep3".into()));
    let entry_of = async |reader: &Reader, object: &StoredObject| {
        store.reads(reader).entry_of_object(&object.hash).await.unwrap().map(|e| e.entry_index)
    };
    let before = [&shared, &own1, &own2];
    assert_eq!(readable(&store, &ep1, &before).await, [true, true, false]);
    assert_eq!(readable(&store, &ep2, &before).await, [true, false, true]);
    assert_eq!(readable(&store, &ep3, &before).await, [false; 3]);
    assert_eq!((entry_of(&ep1, &shared).await, entry_of(&ep2, &shared).await), (Some(1), Some(2)));
    assert_eq!(entry_of(&Reader::Everything, &shared).await, Some(1));

    // An object from before version 8 gains rows; a new one names its first writer on its own row.
    let own3 = object("ep3's output");
    let third = call_commit(&second.next_world, "ep3", "t3", vec![shared.clone(), own3.clone()]);
    store.commit(third.clone(), BUDGET).await.unwrap();
    let again = call_commit(&third.next_world, "ep1", "t4", vec![own3.clone()]);
    store.commit(again.clone(), BUDGET).await.unwrap();
    assert_eq!(readable(&store, &ep3, &[&shared, &own1, &own3]).await, [true, false, true]);
    assert_eq!(readable(&store, &ep2, &[&own3]).await, [false]);
    assert_eq!(readable(&store, &ep1, &[&own3]).await, [true], "written again for ep1");
    assert_eq!((entry_of(&ep3, &shared).await, entry_of(&ep3, &own3).await), (Some(3), Some(3)));
    assert_eq!((entry_of(&ep1, &own3).await, entry_of(&Reader::Everything, &own3).await), (Some(4), Some(3)));
    store.close().await;
    let mut conn = raw_connection(&location).await;
    assert_eq!(rows_naming(&mut conn, "object_episodes", &own1).await, 1, "kept from version 7");
    assert_eq!(rows_naming(&mut conn, "object_episodes", &shared).await, 3);
    assert_eq!(rows_naming(&mut conn, "commit_objects", &shared).await, 3);
    // ep3 wrote it first: only ep1's second write has rows.
    assert_eq!(rows_naming(&mut conn, "object_episodes", &own3).await, 1);
    assert_eq!(rows_naming(&mut conn, "commit_objects", &own3).await, 1);
}
