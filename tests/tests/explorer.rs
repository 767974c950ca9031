//! The world explorer (`/ui/`) in a real browser: Debian's Chromium, driven by Playwright
//! (`tests/python/explorer.py`), against a core and an edge serving a pure transition, an
//! effectful read and a scripted plan. The script checks denials, the session's budgets, three
//! calls appearing without a reload, a provenance chain verified in the browser, an object
//! altered in the store marked as not matching, the episode filter and the search box, another
//! episode's calls hidden from a session and shown to one holding `Log.Read` at `world`, and
//! saves a screenshot of each view under `target/tmp/explorer-screenshots`.
//!
//! `WORLD_TEST_PYTHON` (a python with `tests/python/requirements.txt`) and `WORLD_TEST_CHROMIUM`
//! (a Chromium executable) must be set: `tests/run.sh` provides both.

use std::path::Path;

use world_tests::{Setup, World, fixture, http, python_script, required_env, tasks_send};

#[test]
fn the_explorer_shows_the_session_the_log_and_verified_provenance_in_a_browser() {
    let chromium = required_env("WORLD_TEST_CHROMIUM", "a Chromium executable (Debian: apt-get install chromium)");
    let root = tempfile::tempdir().expect("workspace root");
    std::fs::create_dir(root.path().join("ep1")).expect("episode worktree");
    std::fs::write(root.path().join("ep1/hello.txt"), "hello, explorer\n").expect("sample file");
    let root_arg = root.path().display().to_string();
    let world = World::published(
        &fixture("explorer/transitions.json"),
        3,
        Setup { core_args: &["--workspace-root", &root_arg], ..Setup::default() },
    );
    let token = world.mint("ep1", &["world.apply=world:1000", "Workspace.Read=worktree:5"], 3600);
    let other = world.mint("ep2", &["world.apply=world:1000"], 3600);
    let operator = world.mint("ops", &["Log.Read=world:0"], 3600);
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("explorer-screenshots");
    let _ = std::fs::remove_dir_all(&shots);

    let run = python_script("explorer.py")
        .arg(&world.edge_url)
        .arg(&token)
        .arg(&other)
        .arg(&operator)
        .arg(&world.store)
        .arg(&shots)
        .arg(&chromium)
        .output()
        .expect("run the browser script");
    assert!(
        run.status.success(),
        "the explorer check failed:\n{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    for view in ["1-denied", "2-log", "3-provenance", "4-altered", "5-filtered", "6-search", "7-every-episode"] {
        assert!(shots.join(format!("{view}.png")).is_file(), "no screenshot of {view}");
    }
}

/// `/ui` redirects to `/ui/`; the assets carry the policy; unknown names are 404; the explorer's
/// reads refuse what every `/v1` read refuses.
#[tokio::test]
async fn the_explorer_routes_follow_the_v1_rules() {
    let world = World::published(&fixture("explorer/transitions.json"), 3, Setup::default());
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().expect("client");
    let redirect = client.get(world.url("/ui")).send().await.expect("GET /ui");
    assert_eq!(redirect.status(), 301);
    assert_eq!(redirect.headers()["location"], "/ui/");
    for (path, status) in [("/ui/", 200), ("/ui/app.js", 200), ("/ui/app.css", 200), ("/ui/nope.js", 404)] {
        let response = http().get(world.url(path)).send().await.expect("GET asset");
        assert_eq!(response.status(), status, "{path}");
        if status == 200 {
            assert!(response.headers()["content-security-policy"].to_str().unwrap().starts_with("default-src 'none'"));
        }
    }

    let absent = http().get(world.url("/v1/calls")).send().await.expect("GET /v1/calls");
    assert_eq!(absent.status(), 401);
    let body: serde_json::Value = absent.json().await.expect("envelope");
    assert_eq!(body["error"]["class"], "SessionAbsent");
    let token = world.mint("ep1", &["world.apply=world:1000", "Workspace.Read=worktree:5"], 3600);
    let get = |path: &str| http().get(world.url(path)).header("Authorization", format!("Bearer {token}")).send();
    let bad = get("/v1/calls?before=-1").await.expect("GET");
    assert_eq!(bad.status(), 400);
    let body: serde_json::Value = bad.json().await.expect("envelope");
    assert_eq!(body["error"]["message"], "before must be a non-negative integer");

    let session: serde_json::Value = get("/v1/session").await.expect("GET").json().await.expect("JSON");
    assert_eq!(session["episode"], "ep1");
    let grants = session["grants"].as_array().expect("grants");
    let read = grants.iter().find(|g| g["effect"] == "Workspace.Read").expect("the read grant");
    assert_eq!((read["budget"].as_i64(), read["spent"].as_i64(), read["left"].as_i64()), (Some(5), Some(0), Some(5)));

    // Genesis and the publication are entries too; none is a call of an episode.
    let page: serde_json::Value = get("/v1/calls").await.expect("GET").json().await.expect("JSON");
    let items = page["items"].as_array().expect("items");
    assert!(!items.is_empty());
    assert!(items.windows(2).all(|w| w[0]["entryIndex"].as_i64() > w[1]["entryIndex"].as_i64()), "newest first");
    assert!(items.iter().all(|call| call["episode"] == "" && call["outcome"] == ""), "{page}");
    let filtered: serde_json::Value = get("/v1/calls?episode=ep1").await.expect("GET").json().await.expect("JSON");
    assert_eq!(filtered["items"], serde_json::json!([]));
    assert_eq!(filtered["next"], serde_json::Value::Null);
    let none: serde_json::Value = get("/v1/calls?find=no-such-task").await.expect("GET").json().await.expect("JSON");
    assert_eq!(none["items"], serde_json::json!([]));

    // Five calls, read back two at a time by following `next`: each once, newest first.
    for n in 0..5 {
        let answer =
            world.a2a(&token, &tasks_send(&format!("page-{n}"), "tools.echo", serde_json::json!({"n":n}))).await;
        assert!(answer.get("error").is_none(), "{answer}");
    }
    let mut seen = Vec::new();
    let mut query = "/v1/calls?episode=ep1&limit=2".to_owned();
    loop {
        let page: serde_json::Value = get(&query).await.expect("GET").json().await.expect("JSON");
        for call in page["items"].as_array().expect("items") {
            assert_eq!(call["outcome"], "ok");
            assert_eq!(call["writtenBy"], "coordinator:a2a");
            assert!(call["time"].as_i64().unwrap_or(0) > 0, "{call}");
            seen.push(call["invocationId"].as_str().expect("id").to_owned());
        }
        match page["next"].as_i64() {
            Some(next) => query = format!("/v1/calls?episode=ep1&limit=2&before={next}"),
            None => break,
        }
    }
    let want: Vec<String> = (0..5).rev().map(|n| format!("a2a:ep1:page-{n}")).collect();
    assert_eq!(seen, want);
    let found: serde_json::Value = get("/v1/calls?find=page-3").await.expect("GET").json().await.expect("JSON");
    assert_eq!(found["items"][0]["invocationId"], "a2a:ep1:page-3");
}
