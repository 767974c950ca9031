//! A real A2A client against real processes: the official A2A Python SDK (`a2a-sdk`, pinned in
//! `tests/python/requirements.txt`) resolves `/.well-known/agent-card.json` with a bearer
//! header, sends `SendMessage` to the echo skill, resends it, reads it back with `GetTask`,
//! tries `CancelTask`, asks for an unknown task, sends from a session that does not see the
//! skill, and sends A2A 0.3's `message/send` through the SDK's 0.3 transport.
//!
//! `WORLD_TEST_PYTHON` names a Python that has the SDK installed; `tests/run.sh` sets it.

use serde_json::{Value, json};
use world_tests::{Setup, World, http, run_python_client};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_a2a_sdk_resolves_the_card_sends_resends_and_gets_the_task() {
    let world = World::invoke(Setup::default());
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let denied = world.mint("ep1", &["world.apply=elsewhere:10"], 3600);

    // A client that writes integers as integers sent this messageId first; the SDK writes
    // protobuf JSON, where every number is a double (`1.0`): the same call.
    let first = json!({"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"metadata":{"skill_id":"tools.echo"},
        "message":{"messageId":"sdk-1","role":"ROLE_USER","parts":[{"data":{"greeting":"hello","n":1}}]}}});
    let response = http()
        .post(world.url("/a2a/"))
        .header("Authorization", format!("Bearer {token}"))
        .header("A2A-Version", "1.0")
        .body(first.to_string())
        .send()
        .await
        .unwrap();
    let first: Value = response.json().await.unwrap();
    let committed = first["result"]["task"].clone();
    assert_eq!(committed["status"]["state"], "TASK_STATE_COMPLETED", "{first}");
    assert_eq!(world.log_len(&token).await, 2);

    let seen = run_python_client(
        "a2a_client.py",
        &[&world.url(""), &token, &denied, "tools.echo", "sdk-1", r#"{"greeting":"hello","n":1}"#],
    );

    let a2a_url = format!("{}/a2a/", world.url(""));
    assert_eq!(seen["card"]["name"], "ailang-worldd");
    assert_eq!(seen["card"]["interfaces"], json!([{"url": a2a_url, "binding": "JSONRPC", "version": "1.0"}]));
    assert_eq!(seen["card"]["streaming"], false);
    assert_eq!(seen["card"]["schemes"], json!(["bearer", "oauth"]));
    assert_eq!(seen["card"]["bearer"], "Bearer");
    let skills = seen["card"]["skills"].as_array().expect("skills");
    assert!(skills.contains(&json!("tools.echo")) && !skills.contains(&json!("tests.hidden")), "{skills:?}");

    // The resend of the committed messageId: the committed task, as the SDK parsed it.
    let task = json!({
        "id": "sdk-1",
        "contextId": "ep1",
        "state": "TASK_STATE_COMPLETED",
        "artifacts": [{"artifactId": "output", "data": [{"echo": {"greeting": "hello", "n": 1.0}}]}],
        "metadata": {
            "entry_index": 1.0,
            "invocation_id": "a2a:ep1:sdk-1",
            "world_ref": committed["metadata"]["world_ref"],
        },
    });
    assert_eq!(seen["sent"], json!({"tasks": [task]}));
    assert_eq!(seen["resent"], json!({"tasks": [task]}));
    assert_eq!(seen["got"], task);
    assert_eq!(
        seen["canceled"],
        json!({"error": "TaskNotCancelableError", "message": "task cannot be canceled: it completed when it committed"})
    );
    assert_eq!(seen["unknown"], json!({"error": "TaskNotFoundError", "message": "task not found"}));

    // A2A 0.3's transport: a new task committed after the first.
    let v03 = &seen["v03"];
    assert_eq!(
        (&v03["id"], &v03["contextId"], &v03["state"]),
        (&json!("sdk-1-03"), &json!("ep1"), &json!("TASK_STATE_COMPLETED"))
    );
    assert_eq!(
        v03["artifacts"],
        json!([{"artifactId": "output", "data": [{"echo": {"greeting": "hello", "n": 1.0}}]}])
    );
    assert_eq!(v03["metadata"]["entry_index"], 2.0);
    assert_eq!(v03["metadata"]["invocation_id"], "a2a:ep1:sdk-1-03");

    // A session that does not see the skill: the seed's -32602, which the SDK types as invalid params.
    assert_eq!(seen["denied"], json!({"error": "InvalidParamsError", "message": "not authorized"}));
    assert_eq!(world.log_len(&token).await, 3, "genesis, sdk-1 once, sdk-1-03");
}
