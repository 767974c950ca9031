//! Effects under crashes and concurrency: a core killed after the effect intent, after the
//! handler, or before the commit leaves the effect journaled once, debited once, and never
//! run again; two cores on one PostgreSQL database serialise one episode's effects.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Value, json};
use world_core::store::{OpenMode, Store, StoreLocation};
use world_proto::v1 as pb;
use world_proto::v1::invocation_client::InvocationClient;
use world_tests::{
    PostgresStore, Setup, World, a2a_invoke, a2a_post, bin, faults_core, fixture, http, scripted_write_args, tasks_send,
};

const TRANSITIONS: usize = 5;

fn workspace() -> PathBuf {
    let root = tempfile::tempdir().expect("workspace root").keep();
    std::fs::create_dir(root.join("ep1")).expect("episode worktree");
    root
}

fn write_task(task: &str, path: &str) -> String {
    tasks_send(task, "fx.scripted_write", scripted_write_args(path)).to_string()
}

async fn a2a(world: &World, token: &str, body: String) -> Option<Value> {
    let response = a2a_post(&http(), &world.url("/a2a/"), token).body(body).send().await.ok()?;
    response.json().await.ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_core_killed_mid_effect_never_runs_it_again_and_debits_it_once() {
    let faults = faults_core();
    for (point, ran, receipt) in [
        ("after-intent", false, "indeterminate"),
        ("after-handler", true, "indeterminate"),
        ("before-commit", true, "indeterminate"),
    ] {
        let root = workspace();
        let root_arg = root.display().to_string();
        let ailang = bin("ailang").display().to_string();
        let args = ["--ailang-bin", ailang.as_str(), "--workspace-root", root_arg.as_str()];
        let mut world = World::published(&fixture("effects/transitions.json"), TRANSITIONS, Setup::default());
        world.restart_core(&faults, &args, &[("WORLD_FAULT_POINT", point)]);
        let token = world.mint("ep1", &["Workspace.Write=worktree:5"], 3600);

        let answer = a2a(&world, &token, write_task("crash", "out.txt")).await;
        assert!(
            answer.as_ref().is_none_or(|a| a.get("result").is_none()),
            "{point}: the call cannot succeed: {answer:?}"
        );
        world.restart_core(&bin("world-core"), &args, &[]);
        assert_eq!(root.join("ep1/out.txt").exists(), ran, "{point}: the handler ran only past the intent");

        let store = Store::open(&StoreLocation::Sqlite(world.store.clone()), OpenMode::MustExist).await.expect("store");
        assert_eq!(store.effect_receipt("effect:ep1:0").await.expect("receipt"), receipt, "{point}");
        assert_eq!(store.effect_receipt("effect:ep1:1").await.expect("receipt"), "not-started", "{point}: one effect");
        let spend = store.effect_spend("ep1").await.expect("spend");
        assert_eq!(spend, vec![("Workspace.Write".to_owned(), "worktree".to_owned(), 1)], "{point}: debited once");
        if receipt == "indeterminate" {
            let logged = world.core.stderr();
            assert!(logged.contains("recovery: effect intent without an outcome"), "{point}: {logged}");
        }

        // A resend of the task id is spent: it runs nothing, whatever the crash left.
        let _ = std::fs::remove_file(root.join("ep1/out.txt"));
        let answer = a2a(&world, &token, write_task("crash", "out.txt")).await.expect("an answer");
        assert_eq!(
            answer["error"],
            json!({"code":-32603,"message":"invocation was not committed; send a new task id"}),
            "{point}: {answer}"
        );
        assert!(!root.join("ep1/out.txt").exists(), "{point}: the effect never runs again");
        assert_eq!(store.effect_spend("ep1").await.expect("spend")[0].2, 1, "{point}");
        store.close().await;
    }
}

/// A read runs while its intent is written: a core killed right after the read leaves either
/// a durable intent (debited once, indeterminate, the task id spent) or nothing at all (not
/// debited, the task id free to run the read again), never a debit without its intent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_core_killed_after_a_read_leaves_its_intent_and_its_debit_together() {
    let faults = faults_core();
    let dir = tempfile::tempdir().expect("hold folder");
    let hold = dir.path().join("hold");
    // Held: the intent is still waiting when the core dies. Not held: it is usually durable.
    for held in [true, false] {
        let root = workspace();
        std::fs::write(root.join("ep1/hello.txt"), "hello").expect("sample");
        let root_arg = root.display().to_string();
        let ailang = bin("ailang").display().to_string();
        let args = ["--ailang-bin", ailang.as_str(), "--workspace-root", root_arg.as_str()];
        let mut world = World::published(&fixture("effects/transitions.json"), TRANSITIONS, Setup::default());
        let hold_env = format!("read-intent:{}", hold.display());
        if held {
            std::fs::write(&hold, "").expect("hold file");
        }
        let env = [("WORLD_FAULT_POINT", "after-handler"), ("WORLD_FAULT_HOLD", hold_env.as_str())];
        world.restart_core(&faults, &args, &env);
        let token = world.mint("ep1", &["Workspace.Read=worktree:5"], 3600);
        let read = || tasks_send("crash", "fx.read", json!({"path": "hello.txt"})).to_string();

        let answer = a2a(&world, &token, read()).await;
        assert!(answer.as_ref().is_none_or(|a| a.get("result").is_none()), "the call cannot succeed: {answer:?}");
        let _ = std::fs::remove_file(&hold);
        world.restart_core(&bin("world-core"), &args, &[]);

        let store = Store::open(&StoreLocation::Sqlite(world.store.clone()), OpenMode::MustExist).await.expect("store");
        let receipt = store.effect_receipt("effect:ep1:0").await.expect("receipt");
        let spent: i64 = store.effect_spend("ep1").await.expect("spend").iter().map(|(_, _, n)| n).sum();
        if held {
            assert_eq!(receipt, "not-started", "the intent was still held when the core died");
        }
        let answer = a2a(&world, &token, read()).await.expect("an answer");
        match receipt {
            "indeterminate" => {
                assert_eq!(spent, 1, "the durable intent is the debit");
                assert_eq!(
                    answer["error"],
                    json!({"code":-32603,"message":"invocation was not committed; send a new task id"}),
                    "{answer}"
                );
            }
            "not-started" => {
                assert_eq!(spent, 0, "a read whose intent never landed is not debited");
                assert_eq!(answer["result"]["status"]["state"], "completed", "the read runs again: {answer}");
                assert_eq!(store.effect_receipt("effect:ep1:0").await.expect("receipt"), "resolved");
                let spent: i64 = store.effect_spend("ep1").await.expect("spend").iter().map(|(_, _, n)| n).sum();
                assert_eq!(spent, 1, "the read that answered is debited once");
            }
            other => panic!("unexpected receipt {other}"),
        }
        store.close().await;
    }
}

async fn invoke(
    client: &mut InvocationClient<tonic::transport::Channel>,
    token: &str,
    task: &str,
) -> pb::invoke_reply::Outcome {
    let request = a2a_invoke(token, "fx.read", task, br#"{"path":"hello.txt"}"#);
    client.invoke(request).await.expect("invoke").into_inner().outcome.expect("an outcome")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_cores_on_postgres_serialise_one_episodes_effects() {
    let PostgresStore { url, dir, artifacts } = PostgresStore::fresh().await;
    let store = PathBuf::from(&url);
    let root = workspace();
    std::fs::write(root.join("ep1/hello.txt"), "hello").expect("sample");
    let effects = fixture("effects/transitions.json");
    let serve = world_tests::bootstrap_store(&store, dir.path(), &effects, TRANSITIONS, Some(&artifacts));
    let mut serve: Vec<&str> = serve.iter().map(String::as_str).collect();
    let root_arg = root.display().to_string();
    serve.extend(["--workspace-root", root_arg.as_str(), "--max-subprocesses", "32"]);
    let logs_b = dir.path().join("b");
    std::fs::create_dir_all(&logs_b).expect("logs");
    let (_a, a_addr) = world_tests::start_core(&store, dir.path(), &serve);
    let (_b, b_addr) = world_tests::start_core(&store, &logs_b, &serve);
    let token = world_tests::mint(&store, "ep1", &["Workspace.Read=worktree:60"], 3600);

    let a = InvocationClient::connect(format!("http://{a_addr}")).await.expect("core a");
    let b = InvocationClient::connect(format!("http://{b_addr}")).await.expect("core b");
    let calls = (0..100).map(|i| {
        let mut client = if i % 2 == 0 { a.clone() } else { b.clone() };
        let token = token.clone();
        async move { invoke(&mut client, &token, &format!("pg-{i}")).await }
    });
    let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
    for outcome in futures::future::join_all(calls).await {
        let status = match outcome {
            pb::invoke_reply::Outcome::Invoked(invoked) => {
                let output: Value = serde_json::from_slice(&invoked.output).expect("output JSON");
                output["world"]["effects"][0]["status"].as_str().unwrap_or("?").to_owned()
            }
            pb::invoke_reply::Outcome::Failure(failure) => format!("failure:{}", failure.code),
        };
        *statuses.entry(status).or_default() += 1;
    }
    assert_eq!(statuses, BTreeMap::from([("denied".to_owned(), 40), ("ok".to_owned(), 60)]));

    let pg = Store::open(&StoreLocation::Postgres(url.clone()), OpenMode::MustExist).await.expect("store");
    assert_eq!(pg.effect_spend("ep1").await.expect("spend")[0].2, 60, "each allowed effect debited once");
    journal_is_gapless_and_serial(&url).await;
    pg.close().await;
}

/// Ordinals 0..n with no gap, and each effect's intent directly followed by its outcome
/// in the journal: no other effect of the episode started in between.
async fn journal_is_gapless_and_serial(url: &str) {
    use sqlx::Row;
    let pool = sqlx::postgres::PgPool::connect(url).await.expect("connect");
    let ordinals: Vec<i64> = sqlx::query("SELECT ordinal FROM effect_intents WHERE episode = 'ep1' ORDER BY ordinal")
        .fetch_all(&pool)
        .await
        .expect("ordinals")
        .iter()
        .map(|row| row.get("ordinal"))
        .collect();
    assert_eq!(ordinals, (0..60).collect::<Vec<i64>>());
    let rows: Vec<(String, String)> =
        sqlx::query("SELECT invocation_id, kind FROM journal WHERE invocation_id LIKE 'effect:ep1:%' ORDER BY seq")
            .fetch_all(&pool)
            .await
            .expect("journal")
            .iter()
            .map(|row| (row.get("invocation_id"), row.get("kind")))
            .collect();
    assert_eq!(rows.len(), 120);
    for pair in rows.chunks(2) {
        assert_eq!((pair[0].1.as_str(), pair[1].1.as_str()), ("intent", "outcome"), "{pair:?}");
        assert_eq!(pair[0].0, pair[1].0, "an effect's outcome follows its own intent: {pair:?}");
    }
    pool.close().await;
}
