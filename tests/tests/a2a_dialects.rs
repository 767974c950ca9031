//! `POST /a2a/` in A2A 0.3's and 1.0's vocabularies over real processes, byte for byte: 1.0's
//! `SendMessage` / `GetTask` / `CancelTask` with `A2A-Version`, 0.3's `message/send` with `kind`
//! parts, the `messageId` idempotency key (a resend with `1.0` for `1` is the same call), a task
//! read on another edge, the seed's error rows through every method, the card at
//! `agent-card.json`, and the per-method metrics.

use reqwest::StatusCode;
use serde_json::{Value, json};
use world_model::HashRef;
use world_tests::{Setup, World, http};

/// Posts `body` to `/a2a/` of `base` with the bearer (when given) and `A2A-Version` (when
/// given); every answer must be HTTP 200 JSON.
async fn post_to(base: &str, token: Option<&str>, version: Option<&str>, body: &str) -> String {
    let mut request =
        http().post(format!("{base}/a2a/")).header("Content-Type", "application/json").body(body.to_owned());
    if let Some(token) = token {
        request = request.header("Authorization", format!("Bearer {token}"));
    }
    if let Some(version) = version {
        request = request.header("A2A-Version", version);
    }
    let response = request.send().await.expect("a2a request");
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "application/json");
    response.text().await.expect("body")
}

async fn post(world: &World, token: &str, version: Option<&str>, body: &str) -> String {
    post_to(&world.url(""), Some(token), version, body).await
}

const V1: Option<&str> = Some("1.0");

fn send_message(id: Value, message_id: &str, metadata: Value, data: Value) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":"SendMessage","params":{"metadata":metadata,
        "message":{"messageId":message_id,"role":"ROLE_USER","parts":[{"data":data}]}}})
    .to_string()
}

fn message_send_03(id: Value, message_id: &str, metadata: Value, data: Value) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":"message/send","params":{"metadata":metadata,
        "message":{"kind":"message","messageId":message_id,"role":"user","parts":[{"kind":"data","data":data}]}}})
    .to_string()
}

fn task_query(method: &str, id: Value, task: &str) -> String {
    json!({"jsonrpc":"2.0","id":id,"method":method,"params":{"id":task}}).to_string()
}

fn skill(id: &str) -> Value {
    json!({ "skill_id": id })
}

/// The seed's error body, Go-encoded as the reference writes it (`<`, `>`, `&` escaped).
fn error(code: i64, message: &str, id: &str) -> String {
    let message = json!(message).to_string().replace('<', "\\u003c").replace('>', "\\u003e").replace('&', "\\u0026");
    format!("{{\"error\":{{\"code\":{code},\"message\":{message}}},\"id\":{id},\"jsonrpc\":\"2.0\"}}\n")
}

fn world_ref(body: &str) -> String {
    let parsed: Value = serde_json::from_str(body).expect("a JSON answer");
    let task = if parsed["result"]["task"].is_object() { &parsed["result"]["task"] } else { &parsed["result"] };
    let world_ref =
        task["metadata"]["world_ref"].as_str().unwrap_or_else(|| panic!("a world ref in {body}")).to_owned();
    assert!(HashRef::parse(&world_ref).is_ok(), "{world_ref}");
    world_ref
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn send_message_commits_once_per_message_id_and_get_task_reads_it_on_any_edge() {
    let world = World::invoke(Setup::default());
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);

    let first =
        post(&world, &token, V1, &send_message(json!(1), "m-1", skill("tools.echo"), json!({"n":1,"s":"<"}))).await;
    let world_ref = world_ref(&first);
    let task = format!(
        concat!(
            r#"{{"artifacts":[{{"artifactId":"output","parts":[{{"data":{{"echo":{{"n":1,"s":"\u003c"}}}}}}]}}],"#,
            r#""contextId":"ep1","id":"m-1","metadata":{{"entry_index":1,"invocation_id":"a2a:ep1:m-1","world_ref":"{}"}},"#,
            r#""status":{{"state":"TASK_STATE_COMPLETED"}}}}"#
        ),
        world_ref
    );
    assert_eq!(first, format!("{{\"id\":1,\"jsonrpc\":\"2.0\",\"result\":{{\"task\":{task}}}}}\n"));
    assert_eq!(world.log_len(&token).await, 2);

    // The same messageId with `1.0` for `1` (as protobuf-JSON clients send integers), the skill
    // named in the message's metadata instead: the same call, answered from the store.
    let resend = json!({"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"configuration":{"acceptedOutputModes":[]},
        "message":{"messageId":"m-1","role":"ROLE_USER","metadata":{"skill_id":"tools.echo"},
            "parts":[{"data":{"s":"<","n":1.0}}]}}});
    let again = post(&world, &token, V1, &resend.to_string()).await;
    assert_eq!(again, format!("{{\"id\":2,\"jsonrpc\":\"2.0\",\"result\":{{\"task\":{task}}}}}\n"));
    assert_eq!(world.log_len(&token).await, 2, "the resend committed nothing");
    // The same messageId for other arguments is the seed's task-id row.
    let other = post(&world, &token, V1, &send_message(json!(3), "m-1", skill("tools.echo"), json!({"n":2}))).await;
    assert_eq!(other, error(-32602, "task id already used in this session", "3"));
    // A messageId is a task id in the seed's grammar.
    let bad = post(&world, &token, V1, &send_message(json!(4), "bad id!", skill("tools.echo"), json!({}))).await;
    assert_eq!(bad, error(-32602, "invalid params", "4"));

    // GetTask: the committed task itself, here and on a second edge in front of the same core.
    let got = post(&world, &token, V1, &task_query("GetTask", json!("g"), "m-1")).await;
    assert_eq!(got, format!("{{\"id\":\"g\",\"jsonrpc\":\"2.0\",\"result\":{task}}}\n"));
    let (_edge, other_edge) = world.extra_edge(&[]);
    let elsewhere = post_to(&other_edge, Some(&token), V1, &task_query("GetTask", json!("g"), "m-1")).await;
    assert_eq!(elsewhere, got);
    // Unknown ids, ids outside the grammar and another episode's tasks are not found; a task
    // that exists completed when it committed.
    let not_found = error(-32001, "task not found", "5");
    for unknown in ["m-2", "bad id!", &"x".repeat(129)] {
        assert_eq!(post(&world, &token, V1, &task_query("GetTask", json!(5), unknown)).await, not_found, "{unknown}");
    }
    let neighbour = world.mint("ep2", &["world.apply=world:1000"], 3600);
    assert_eq!(post(&world, &neighbour, V1, &task_query("GetTask", json!(5), "m-1")).await, not_found);
    assert_eq!(post(&world, &neighbour, V1, &task_query("CancelTask", json!(5), "m-1")).await, not_found);
    assert_eq!(
        post(&world, &token, V1, &task_query("CancelTask", json!(6), "m-1")).await,
        error(-32002, "task cannot be canceled: it completed when it committed", "6")
    );
    assert_eq!(
        post(&world, &token, V1, r#"{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":7}}"#).await,
        error(-32602, "invalid params", "7")
    );

    // The per-method answer counts.
    let metrics = http().get(world.url("/metrics")).send().await.unwrap().text().await.unwrap();
    for line in [
        r#"world_edge_a2a_requests_total{method="SendMessage",code="ok"} 2"#,
        r#"world_edge_a2a_requests_total{method="SendMessage",code="-32602"} 2"#,
        r#"world_edge_a2a_requests_total{method="GetTask",code="-32001"} 4"#,
        r#"world_edge_a2a_requests_total{method="CancelTask",code="-32002"} 1"#,
    ] {
        assert!(metrics.contains(&format!("{line}\n")), "{line} in\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a2a_1_0_methods_need_a2a_version_1_0() {
    let world = World::invoke(Setup::default());
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let body = send_message(json!(1), "v-1", skill("tools.echo"), json!({}));
    assert_eq!(
        post(&world, &token, None, &body).await,
        error(-32009, "A2A-Version is absent, which means 0.3; this method is A2A 1.0: send A2A-Version: 1.0", "1")
    );
    for version in ["0.3", "2.0", "1.1"] {
        assert_eq!(
            post(&world, &token, Some(version), &body).await,
            error(-32009, &format!("A2A-Version \"{version}\" is not supported: send A2A-Version: 1.0"), "1"),
        );
        let query = task_query("GetTask", json!(1), "v-1");
        assert!(post(&world, &token, Some(version), &query).await.contains("-32009"));
    }
    assert_eq!(world.log_len(&token).await, 1, "nothing ran");
    // A patch level is ignored.
    assert!(post(&world, &token, Some("1.0.3"), &body).await.contains("TASK_STATE_COMPLETED"));
    // The seed's and 0.3's methods do not read the header.
    let seed = json!({"jsonrpc":"2.0","id":2,"method":"tasks/send","params":{"id":"v-2","metadata":skill("tools.echo"),
        "message":{"role":"user","parts":[{"type":"data","data":{}}]}}});
    assert!(post(&world, &token, Some("0.3"), &seed.to_string()).await.contains(r#""state":"completed""#));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_send_speaks_a2a_0_3_exactly_beside_the_seed_shape() {
    let world = World::invoke(Setup::default());
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let request = r#"{"jsonrpc":"2.0","id":"r1","method":"message/send","params":{"message":{"kind":"message","messageId":"msg-1","role":"user","parts":[{"kind":"data","data":{"b":2,"a":1}}],"metadata":{"skill_id":"tools.echo"}}}}"#;
    let answer = post(&world, &token, None, request).await;
    let world_ref = world_ref(&answer);
    assert_eq!(
        answer,
        format!(
            concat!(
                r#"{{"id":"r1","jsonrpc":"2.0","result":{{"artifacts":[{{"artifactId":"output","parts":[{{"data":{{"echo":{{"a":1,"b":2}}}},"kind":"data"}}]}}],"#,
                r#""contextId":"ep1","id":"msg-1","kind":"task","metadata":{{"entry_index":1,"invocation_id":"a2a:ep1:msg-1","world_ref":"{}"}},"#,
                r#""status":{{"state":"completed"}}}}}}"#,
                "\n"
            ),
            world_ref
        )
    );
    assert_eq!(post(&world, &token, None, request).await, answer, "the resend returns the committed task");
    assert_eq!(world.log_len(&token).await, 2);
    // 0.3 names kinds: a part without one is not a data part.
    let kindless = request.replace(r#"{"kind":"data","data""#, r#"{"data""#).replace("msg-1", "msg-2");
    assert_eq!(post(&world, &token, None, &kindless).await, error(-32602, "invalid params", "\"r1\""));
    // The seed's shape under this name still works, answered in the seed's vocabulary.
    let seed = json!({"jsonrpc":"2.0","id":3,"method":"message/send","params":{"id":"legacy-1","metadata":skill("tools.echo"),
        "message":{"role":"user","parts":[{"type":"data","data":{}}]}}});
    let legacy = post(&world, &token, None, &seed.to_string()).await;
    assert!(legacy.contains(r#""parts":[{"data":{"echo":{}},"type":"data"}]}],"id":"legacy-1""#), "{legacy}");
    assert!(legacy.ends_with("\"status\":{\"state\":\"completed\"}}}\n"), "{legacy}");
}

/// The seed's table through `SendMessage` and 0.3's `message/send` alike: the same codes and
/// messages, the session checks first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_seed_row_answers_the_same_through_each_vocabulary() {
    let world = World::invoke(Setup::default());
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let expired = world.mint("ep1", &["world.apply=world:1000"], 0);
    // Expiry has a one-second resolution.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let base = world.url("");
    let other_pin = HashRef::of(b"some other source").to_string();
    type Build = fn(Value, &str, Value, Value) -> String;
    let vocabularies: [(&str, Build); 2] = [("SendMessage", send_message), ("message/send", message_send_03)];
    for (n, (method, build)) in vocabularies.into_iter().enumerate() {
        let id = json!(n);
        let idn = n.to_string();
        let echo = build(id.clone(), &format!("s-{n}"), skill("tools.echo"), json!({}));
        // Session rows, whatever the method and whatever the version header says.
        let absent = "session credential is absent: send Authorization: Bearer <session-credential>";
        assert_eq!(post_to(&base, None, Some("0.3"), &echo).await, error(-32001, absent, "null"), "{method}");
        let malformed = "malformed Authorization header: expected Bearer <64-hex-credential>";
        assert_eq!(post_to(&base, Some("nothex"), V1, &echo).await, error(-32600, malformed, "null"), "{method}");
        assert_eq!(
            post_to(&base, Some(&"0".repeat(64)), V1, &echo).await,
            error(-32001, "unknown session credential", "null")
        );
        assert_eq!(
            post_to(&base, Some(&expired), V1, &echo).await,
            error(-32001, "session credential has expired", "null")
        );

        let rows: [(Value, Value, i64, &str); 9] = [
            (skill("tests.hidden"), json!({}), -32602, "not authorized"),
            (skill("tests.nope"), json!({}), -32602, "not authorized"),
            (json!({}), json!({}), -32602, "not authorized"),
            (skill("tests.named"), json!({"name": 7}), -32602, "invalid params"),
            (skill("tools.echo"), json!([1]), -32602, "invalid params"),
            (
                json!({"skill_id":"tools.echo","transition_fn":other_pin}),
                json!({}),
                -32602,
                "proposal does not match the registered transition",
            ),
            (
                skill("tests.nomain"),
                json!({}),
                -32603,
                "transition does not implement the invocation calling convention",
            ),
            (skill("tests.divide"), json!({}), -32603, "transition execution failed"),
            (skill("tests.array"), json!({}), -32603, "transition output is not a JSON object"),
        ];
        for (row, (metadata, data, code, message)) in rows.into_iter().enumerate() {
            let body = build(id.clone(), &format!("r-{n}-{row}"), metadata, data);
            assert_eq!(post(&world, &token, V1, &body).await, error(code, message, &idn), "{method} row {row}");
        }
        // Params that do not decode, and a method the endpoint does not have.
        let undecodable = json!({"jsonrpc":"2.0","id":n,"method":method,"params":[]}).to_string();
        assert_eq!(post(&world, &token, V1, &undecodable).await, error(-32602, "invalid params", &idn));
    }
    for method in ["GetTask", "CancelTask"] {
        let query = task_query(method, json!(9), "s-0");
        let absent = "session credential is absent: send Authorization: Bearer <session-credential>";
        assert_eq!(post_to(&base, None, V1, &query).await, error(-32001, absent, "null"), "{method}");
        assert_eq!(
            post_to(&base, Some(&expired), V1, &query).await,
            error(-32001, "session credential has expired", "null")
        );
    }
    let unknown = json!({"jsonrpc":"2.0","id":9,"method":"ListTasks","params":{}}).to_string();
    assert_eq!(post(&world, &token, V1, &unknown).await, error(-32601, "method not found", "9"));
    assert_eq!(world.log_len(&token).await, 1, "no refused call committed anything");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_core_without_an_interpreter_is_not_available_through_send_message() {
    let world = World::invoke(Setup { interpreter: false, ..Setup::default() });
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let message = "transition invocation is not available in this daemon";
    let body = send_message(json!(1), "u-1", skill("tools.echo"), json!({}));
    assert_eq!(post(&world, &token, V1, &body).await, error(-32603, message, "1"));
    // The service check comes before the part checks; authorization before both.
    let text = json!({"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"metadata":skill("tools.echo"),
        "message":{"messageId":"u-2","parts":[{"text":"x"}]}}});
    assert_eq!(post(&world, &token, V1, &text.to_string()).await, error(-32603, message, "2"));
    let hidden = send_message(json!(3), "u-3", skill("tests.hidden"), json!({}));
    assert_eq!(post(&world, &token, V1, &hidden).await, error(-32602, "not authorized", "3"));
    // Reading tasks needs no coordinator.
    assert_eq!(
        post(&world, &token, V1, &task_query("GetTask", json!(4), "u-1")).await,
        error(-32001, "task not found", "4")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_card_json_is_a2a_1_0_with_0_3_fields_and_agent_json_stays_the_seed_s() {
    let world = World::invoke(Setup::default());
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    let get = |path: &'static str, token: Option<String>| {
        let mut request = http().get(world.url(path));
        if let Some(token) = token {
            request = request.header("Authorization", format!("Bearer {token}"));
        }
        async move {
            let response = request.send().await.expect("card request");
            (response.status(), response.text().await.expect("body"))
        }
    };
    let (status, body) = get("/.well-known/agent-card.json", Some(token.clone())).await;
    assert_eq!(status, StatusCode::OK);
    let card: Value = serde_json::from_str(&body).unwrap();
    let host = world.url("").trim_start_matches("http://").to_owned();
    let a2a_url = format!("http://{host}/a2a/");
    assert_eq!(
        card["supportedInterfaces"],
        json!([{"protocolBinding":"JSONRPC","protocolVersion":"1.0","url":a2a_url}])
    );
    assert_eq!(
        (&card["url"], &card["preferredTransport"], &card["protocolVersion"]),
        (&json!(a2a_url), &json!("JSONRPC"), &json!("0.3.0"))
    );
    assert_eq!(card["capabilities"]["streaming"], false);
    assert_eq!(card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"], "Bearer");
    assert_eq!(card["securitySchemes"]["bearer"]["type"], "http");
    let skills: Vec<&str> = card["skills"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert!(skills.contains(&"tools.echo") && !skills.contains(&"tests.hidden"), "{skills:?}");
    assert!(card["skills"].as_array().unwrap().iter().all(|s| s["tags"][0] == "transition" && s["name"].is_string()));
    // The seed's card is unchanged: no A2A 1.0 fields.
    let (_, seed) = get("/.well-known/agent.json", Some(token)).await;
    assert!(
        seed.contains(&format!(r#""url":"http://{host}","version""#)) && !seed.contains("supportedInterfaces"),
        "{seed}"
    );
    // The seed's denial rows, as for agent.json.
    let (status, body) = get("/.well-known/agent-card.json", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body.contains(r#""class":"SessionAbsent""#), "{body}");
    let (status, body) = get("/.well-known/agent-card.json", Some("nothex".into())).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains(r#""class":"InvalidSession""#), "{body}");
}
