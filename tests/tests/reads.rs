//! Reads are granted (DESIGN, Milestone 3): over a real core and edge, two sessions in two
//! episodes each make an effectful read of a file of their own. Neither reads the other's
//! calls, entries, inputs, outputs, plans, effect records or results through REST, gRPC or
//! `why --core`, and each such read answers exactly as a made-up one does; both read the shared
//! transition source and their own records, and a call of each with the same arguments gives
//! both the same input bytes, which lead each to its own entry. A third session minted with `--preset operator` (`Log.Read` at `world`) reads
//! both episodes until it is revoked, when its next read is refused.

use std::process::Command;

use base64::Engine as _;
use serde_json::{Value, json};
use tonic::transport::Channel;
use world_proto::v1 as pb;
use world_proto::v1::store_client::StoreClient;
use world_tests::{Setup, World, authorized, bin, fixture, http, run_attended, tasks_send};

/// A call's log entry and every object it reached.
struct Call {
    task: String,
    entry: i64,
    /// (role, ref): record, input, output, plan, effect record, request, result.
    objects: Vec<(&'static str, String)>,
    source: String,
}

/// A ref no store holds.
const MADE_UP: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
/// An entry index far beyond the log.
const MADE_UP_INDEX: i64 = 987_654;

fn effect_world() -> World {
    let root = tempfile::tempdir().expect("workspace root").keep();
    for episode in ["ep1", "ep2"] {
        std::fs::create_dir(root.join(episode)).expect("episode worktree");
        std::fs::write(root.join(episode).join(format!("{episode}.txt")), format!("{episode}'s secret\n")).unwrap();
        std::fs::write(root.join(episode).join("shared.txt"), "the same in both\n").expect("sample file");
    }
    let root_arg = root.display().to_string();
    World::published(
        &fixture("effects/transitions.json"),
        5,
        Setup { core_args: &["--workspace-root", root_arg.as_str()], ..Setup::default() },
    )
}

async fn get(world: &World, token: &str, path: &str) -> (u16, String) {
    let response = http()
        .get(world.url(path))
        .header("Authorization", format!("Bearer {token}"))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    (response.status().as_u16(), response.text().await.expect("body"))
}

async fn get_json(world: &World, token: &str, path: &str) -> Value {
    let (status, body) = get(world, token, path).await;
    assert_eq!(status, 200, "GET {path}: {body}");
    serde_json::from_str(&body).expect("JSON")
}

async fn payload(world: &World, token: &str, reference: &str) -> Value {
    let object = get_json(world, token, &format!("/v1/objects/{reference}?payload=true")).await;
    let bytes = base64::engine::general_purpose::STANDARD.decode(object["payload"].as_str().expect("payload")).unwrap();
    serde_json::from_slice(&bytes).expect("a JSON payload")
}

/// An effectful read of `path` in the session's episode, and everything it reached.
async fn read_call(world: &World, token: &str, task: &str, path: &str) -> Call {
    let answer = world.a2a(token, &tasks_send(task, "fx.read", json!({"path":path}))).await;
    let entry = answer["result"]["metadata"]["entry_index"].as_i64().unwrap_or_else(|| panic!("{answer}"));
    let log_entry = get_json(world, token, &format!("/v1/log/{entry}")).await;
    let record_ref = log_entry["transitionRef"].as_str().expect("transitionRef").to_owned();
    let record = payload(world, token, &record_ref).await;
    let effect_ref = record["effects"][0].as_str().expect("an effect record").to_owned();
    let effect = payload(world, token, &effect_ref).await;
    let text = |value: &Value, key: &str| value[key].as_str().unwrap_or_else(|| panic!("{key} in {value}")).to_owned();
    Call {
        task: task.to_owned(),
        entry,
        objects: vec![
            ("record", record_ref),
            ("input", text(&record, "input")),
            ("output", text(&record, "output")),
            ("plan", text(&record, "plan")),
            ("effect record", effect_ref),
            ("request", text(&effect, "requestRef")),
            ("result", text(&effect, "resultRef")),
        ],
        source: text(&log_entry["header"], "transitionFn"),
    }
}

async fn store_client(world: &World) -> StoreClient<Channel> {
    StoreClient::connect(format!("http://{}", world.core_addr)).await.expect("connect to the core")
}

/// What the gRPC Store reads answer for `reference` and `index`, as comparable text.
async fn grpc_answers(client: &mut StoreClient<Channel>, token: &str, reference: &str, index: i64) -> Vec<String> {
    let object = client
        .get_object(authorized(pb::GetObjectRequest { r#ref: reference.into(), with_payload: true }, token))
        .await
        .expect("GetObject")
        .into_inner();
    let entry_of = client
        .object_entry(authorized(pb::ObjectEntryRequest { r#ref: reference.into() }, token))
        .await
        .expect("ObjectEntry")
        .into_inner();
    let entry = client
        .get_log_entry(authorized(pb::GetLogEntryRequest { index }, token))
        .await
        .expect("GetLogEntry")
        .into_inner();
    let found = client
        .calls(authorized(pb::CallsRequest { find: reference.into(), ..Default::default() }, token))
        .await
        .expect("Calls")
        .into_inner();
    let by_index = client
        .calls(authorized(pb::CallsRequest { find: index.to_string(), ..Default::default() }, token))
        .await
        .expect("Calls")
        .into_inner();
    vec![
        format!("{object:?}"),
        format!("{entry_of:?}"),
        format!("{entry:?}"),
        format!("{found:?}"),
        format!("{by_index:?}"),
    ]
}

/// Whether the gRPC reads of the object and the entry found what they asked for (not every
/// object is carried by an entry: a source, an effect's request).
fn grpc_found(answers: &[String]) -> bool {
    !answers[0].contains("Failure") && !answers[2].contains("Failure")
}

/// What REST answers for the object `reference` and the entry `index`: status and body of each
/// read, plus the calls `find` names for each.
async fn rest_answers(world: &World, token: &str, reference: &str, index: i64) -> Vec<(u16, String)> {
    let mut answers = Vec::new();
    for path in [
        format!("/v1/objects/{reference}?payload=true"),
        format!("/v1/objects/{reference}"),
        format!("/v1/log/{index}"),
        format!("/v1/calls?find={reference}"),
        format!("/v1/calls?find={index}"),
    ] {
        answers.push(get(world, token, &path).await);
    }
    answers
}

/// `world-core why --core` for `target`: (success, stdout, stderr with `target` replaced).
fn why_core(world: &World, token: &str, target: &str) -> (bool, String, String) {
    let output = Command::new(bin("world-core"))
        .args(["why", target, "--core", &format!("http://{}", world.core_addr), "--session", token, "--json"])
        .output()
        .expect("why");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).replace(target, "TARGET"),
    )
}

/// Indexes of the entries a session's `GET /v1/log` and `GET /v1/calls` show.
async fn visible_entries(world: &World, token: &str) -> (Vec<i64>, Vec<i64>) {
    let log = get_json(world, token, "/v1/log?from=0&limit=500").await;
    let log = log["items"].as_array().unwrap().iter().map(|e| e["header"]["entryIndex"].as_i64().unwrap()).collect();
    let calls = get_json(world, token, "/v1/calls?limit=100").await;
    let calls = calls["items"].as_array().unwrap().iter().map(|c| c["entryIndex"].as_i64().unwrap()).collect();
    (log, calls)
}

fn mint_operator(world: &World) -> String {
    let mut command = Command::new(bin("world-core"));
    command.args(["session", "mint", "--episode", "ops", "--preset", "operator", "--store"]).arg(&world.store);
    let run = run_attended(command, "y\n");
    assert!(run.status.success(), "mint: {}", run.stderr);
    run.stdout.trim().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn episodes_read_only_their_own_calls_unless_a_session_holds_log_read() {
    let world = effect_world();
    let one = world.mint("ep1", &["Workspace.Read=worktree:10"], 3600);
    let two = world.mint("ep2", &["Workspace.Read=worktree:10"], 3600);
    let first = read_call(&world, &one, "t-1", "ep1.txt").await;
    let second = read_call(&world, &two, "t-2", "ep2.txt").await;
    assert_eq!(first.source, second.source, "one published transition");
    let refs = |call: &Call| call.objects.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>();
    assert!(refs(&first).iter().all(|r| !refs(&second).contains(r)), "the two calls share no object");
    let input = |call: &Call| call.objects.iter().find(|(role, _)| *role == "input").unwrap().1.clone();
    let shared_one = read_call(&world, &one, "t-3", "shared.txt").await;
    let shared_two = read_call(&world, &two, "t-4", "shared.txt").await;
    assert_eq!(input(&shared_one), input(&shared_two), "the same arguments are the same input bytes");
    let mut grpc = store_client(&world).await;

    for (reader, own, other) in [(&one, &first, &second), (&two, &second, &first)] {
        // Its own records and the shared source, over REST and gRPC; the shared input leads to
        // its own entry.
        for (role, reference) in own.objects.iter().chain([&("source", own.source.clone())]) {
            let (status, body) = get(&world, reader, &format!("/v1/objects/{reference}?payload=true")).await;
            assert_eq!(status, 200, "own {role}: {body}");
            assert!(grpc_found(&grpc_answers(&mut grpc, reader, reference, own.entry).await), "own {role} over gRPC");
        }
        let shared = if own.entry == first.entry { &shared_one } else { &shared_two };
        let found = get_json(&world, reader, &format!("/v1/calls?find={}", input(shared))).await;
        assert_eq!(found["items"][0]["entryIndex"], shared.entry, "the shared input leads to its own call: {found}");
        let (status, _) = get(&world, reader, &format!("/v1/objects/{}?payload=true", input(shared))).await;
        assert_eq!(status, 200, "the shared input");
        let (ok, walk, stderr) = why_core(&world, reader, &own.objects[4].1);
        assert!(ok, "why --core of its own effect record: {stderr}");
        assert_eq!(serde_json::from_str::<Value>(&walk).unwrap()["entry"]["index"], own.entry);

        // Nothing of the other episode's that is not its own too: every read answers as a
        // made-up ref or index does.
        let made_up_rest = rest_answers(&world, reader, MADE_UP, MADE_UP_INDEX).await;
        let made_up_grpc = grpc_answers(&mut grpc, reader, MADE_UP, MADE_UP_INDEX).await;
        assert_eq!(made_up_rest[0].0, 404);
        for (role, reference) in &other.objects {
            let rest = rest_answers(&world, reader, reference, other.entry).await;
            let rest: Vec<_> = rest.into_iter().map(|(s, b)| (s, b.replace(&other.entry.to_string(), "N"))).collect();
            let made_up: Vec<_> =
                made_up_rest.iter().map(|(s, b)| (*s, b.replace(&MADE_UP_INDEX.to_string(), "N"))).collect();
            assert_eq!(rest, made_up, "the other episode's {role} over REST");
            let answers = grpc_answers(&mut grpc, reader, reference, other.entry).await;
            assert_eq!(answers, made_up_grpc, "the other episode's {role} over gRPC");
            assert_eq!(why_core(&world, reader, reference), why_core(&world, reader, MADE_UP), "why of {role}");
        }
        let index = other.entry.to_string();
        let (ok, stdout, stderr) = why_core(&world, reader, &index);
        assert_eq!((ok, stdout), (false, String::new()));
        assert_eq!(stderr, why_core(&world, reader, &MADE_UP_INDEX.to_string()).2, "why of the other's entry");
        let episode = |call: &Call| if call.entry == first.entry { "ep1" } else { "ep2" };
        for find in [format!("a2a:{}:{}", episode(other), other.task), other.task.clone()] {
            let found = get_json(&world, reader, &format!("/v1/calls?find={find}")).await;
            assert_eq!(found["items"], json!([]), "find {find}");
        }
        let (log, calls) = visible_entries(&world, reader).await;
        assert!(log.contains(&0) && log.contains(&own.entry) && !log.contains(&other.entry), "{log:?}");
        assert!(calls.contains(&own.entry) && !calls.contains(&other.entry), "{calls:?}");
        let filtered = get_json(&world, reader, &format!("/v1/calls?episode={}", episode(other))).await;
        assert_eq!(filtered, get_json(&world, reader, "/v1/calls?episode=nobody").await, "a filter for the other");
        let outputs = get_json(&world, reader, "/v1/objects/by-semantic-id/world/invocation-output/v1").await;
        let outputs: Vec<&str> =
            outputs["items"].as_array().unwrap().iter().map(|o| o["hash"].as_str().unwrap()).collect();
        assert!(outputs.contains(&own.objects[2].1.as_str()), "its own output is listed");
        assert!(!outputs.contains(&other.objects[2].1.as_str()), "the other's output is not");
        let session = get_json(&world, reader, "/v1/session").await;
        assert_eq!(session["readsEveryEpisode"], false);
    }

    // A session minted with the operator preset reads both episodes, fresh on every request.
    let operator = mint_operator(&world);
    let session = get_json(&world, &operator, "/v1/session").await;
    assert_eq!(session["readsEveryEpisode"], true, "{session}");
    assert_eq!(session["grants"][0]["effect"], "Log.Read");
    for call in [&first, &second] {
        for (role, reference) in &call.objects {
            let (status, body) = get(&world, &operator, &format!("/v1/objects/{reference}?payload=true")).await;
            assert_eq!(status, 200, "{role}: {body}");
            assert!(grpc_found(&grpc_answers(&mut grpc, &operator, reference, call.entry).await), "{role} over gRPC");
        }
        assert!(why_core(&world, &operator, &call.objects[4].1).0, "why --core of each episode's effect record");
    }
    let (log, calls) = visible_entries(&world, &operator).await;
    for entry in [first.entry, second.entry] {
        assert!(log.contains(&entry) && calls.contains(&entry), "{log:?} {calls:?}");
    }
    let revoked = world.core_verb(&["session", "revoke", "--episode", "ops"]);
    assert!(revoked.status.success(), "{}", String::from_utf8_lossy(&revoked.stderr));
    let (status, body) = get(&world, &operator, &format!("/v1/objects/{}", first.objects[0].1)).await;
    assert_eq!(status, 401, "the revoked session's next read: {body}");
    let answers = grpc_answers(&mut grpc, &operator, &first.objects[0].1, first.entry).await;
    assert!(answers.iter().all(|answer| answer.contains("session_unknown")), "{answers:?}");
}
