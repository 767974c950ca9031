//! The surface is exactly what the grants allow. Over random registries (access triples drawn
//! from a small vocabulary) and random grant sets, a session's MCP `tools/list`, its agent
//! card's skills and the set of tools it can call are each exactly the descriptors the grant
//! law allows; a call to any other published tool answers byte for byte as a call to a tool
//! that was never published, on MCP and on A2A.
//!
//! The draws come from a seeded generator; the seed is printed so a failure can be replayed
//! with `WORLD_SURFACE_SEED`.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use world_model::{AccessTriple, Grant, escape, grants_allow};
use world_tests::{Setup, World, http, mcp_answer, mcp_post};

const REGISTRIES: usize = 3;
const TRANSITIONS: usize = 6;
const SESSIONS: usize = 6;
const EFFECTS: [&str; 3] = ["world.apply", "Workspace.Read", "Net.Fetch"];
const SCOPES: [&str; 3] = ["world", "worktree", "repo"];

/// xorshift64*: small, seeded, good enough to draw test cases.
struct Draw(u64);

impl Draw {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[(self.next() % from.len() as u64) as usize]
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

async fn rpc(world: &World, path: &str, token: &str, body: &Value) -> String {
    let response = mcp_post(&http(), &world.url(path), token).body(body.to_string()).send().await.expect("request");
    let text = response.text().await.expect("body");
    mcp_answer(&text).to_owned()
}

fn call(tool: &str) -> Value {
    json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":tool,"arguments":{"a":1}}})
}

fn send(skill: &str) -> Value {
    json!({"jsonrpc":"2.0","id":8,"method":"tasks/send","params":{"id":format!("t-{skill}"),"metadata":{"skill_id":skill},
        "message":{"role":"user","parts":[{"type":"data","data":{"a":1}}]}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_surface_is_exactly_what_the_grants_allow() {
    let seed = std::env::var("WORLD_SURFACE_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64 | 1
    });
    println!("WORLD_SURFACE_SEED={seed}");
    let mut draw = Draw(seed);
    let (mut seen, mut hidden) = (0, 0);
    for registry in 0..REGISTRIES {
        let accesses: Vec<AccessTriple> = (0..TRANSITIONS)
            .map(|_| AccessTriple {
                effect: draw.pick(&EFFECTS).to_owned(),
                scope: draw.pick(&SCOPES).to_owned(),
                cost: draw.below(4) as i64,
            })
            .collect();
        let ids: Vec<String> = (0..TRANSITIONS).map(|t| format!("r{registry}.t{t}")).collect();
        let manifest: Vec<Value> = ids
            .iter()
            .zip(&accesses)
            .map(|(id, access)| {
                json!({"id": id, "title": id, "description": "echo under a drawn access triple",
                    "transitionFnFile": "packages/examples/echo.ail",
                    "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"},
                    "access": {"effect": access.effect, "scope": access.scope, "cost": access.cost},
                    "declaredEffects": []})
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("transitions.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
        let world = World::published(&path, TRANSITIONS, Setup::default());

        for session in 0..SESSIONS {
            let grants: Vec<String> = (0..1 + draw.below(3))
                .map(|_| format!("{}={}:{}", draw.pick(&EFFECTS), draw.pick(&SCOPES), draw.below(5)))
                .collect();
            let grant_refs: Vec<&str> = grants.iter().map(String::as_str).collect();
            let token = world.mint(&format!("ep{session}"), &grant_refs, 3600);
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
            let parsed: Vec<Grant> = grants.iter().map(|g| Grant::parse_cli(g, now + 3600).unwrap()).collect();
            let expected: BTreeSet<String> = ids
                .iter()
                .zip(&accesses)
                .filter(|(_, a)| grants_allow(&parsed, a, now))
                .map(|(id, _)| id.clone())
                .collect();
            let case = format!("seed {seed}, registry {accesses:?}, grants {grants:?}");

            let list: Value = serde_json::from_str(
                &rpc(&world, "/mcp/", &token, &json!({"jsonrpc":"2.0","id":1,"method":"tools/list"})).await,
            )
            .unwrap();
            let listed: BTreeSet<String> = list["result"]["tools"]
                .as_array()
                .unwrap_or_else(|| panic!("{case}: {list}"))
                .iter()
                .map(|tool| tool["name"].as_str().unwrap().to_owned())
                .collect();
            let expected_names: BTreeSet<String> = expected.iter().map(|id| escape(id).unwrap()).collect();
            assert_eq!(listed, expected_names, "tools/list, {case}");

            let card: Value = world.get_json(&token, "/.well-known/agent.json").await;
            let skills: BTreeSet<String> = card["skills"]
                .as_array()
                .map(|skills| skills.iter().map(|s| s["id"].as_str().unwrap().to_owned()).collect())
                .unwrap_or_default();
            assert_eq!(skills, expected, "the card's skills, {case}");

            for id in &ids {
                let name = escape(id).unwrap();
                let answer = rpc(&world, "/mcp/", &token, &call(&name)).await;
                let a2a = rpc(&world, "/a2a/", &token, &send(id)).await;
                if expected.contains(id) {
                    seen += 1;
                    assert!(answer.contains(r#""echo":{"a":1}"#), "{id} is callable over MCP, {case}: {answer}");
                    assert!(a2a.contains(r#""state":"completed""#), "{id} is callable over A2A, {case}: {a2a}");
                } else {
                    hidden += 1;
                    let never = "never.published";
                    let unknown = rpc(&world, "/mcp/", &token, &call(&escape(never).unwrap())).await;
                    assert_eq!(answer, unknown.replace(&escape(never).unwrap(), &name), "MCP {id}, {case}");
                    let unknown = rpc(&world, "/a2a/", &token, &send(never)).await;
                    assert_eq!(a2a, unknown.replace(never, id), "A2A {id}, {case}");
                }
            }
        }
    }
    assert!(seen > 0 && hidden > 0, "seed {seed} drew {seen} callable and {hidden} hidden tools: draw again");
}
