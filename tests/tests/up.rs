//! `world-core up` on a fresh directory, driven through a pseudo-terminal:
//! the attended publish and mint on first run, then a served world an agent
//! can use; a rerun reuses the state and asks nothing.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command};
use std::sync::mpsc;
use std::time::Duration;

use world_tests::{bin, http, spawn_attended};

fn up(dir: &Path, answer: &str) -> (Child, mpsc::Receiver<String>, std::thread::JoinHandle<String>) {
    let mut command = Command::new(bin("world-core"));
    command
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .args(["up", "--core-listen", "127.0.0.1:0", "--edge-listen", "127.0.0.1:0", "--dir"])
        .arg(dir);
    let (mut child, terminal) = spawn_attended(command, answer);
    let stdout = child.stdout.take().unwrap();
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    (child, received, terminal)
}

fn wait_for_mcp_url(lines: &mpsc::Receiver<String>, child: &mut Child) -> String {
    loop {
        match lines.recv_timeout(Duration::from_secs(60)) {
            Ok(line) => {
                if let Some(url) = line.trim().strip_prefix("MCP URL:") {
                    return url.trim().to_owned();
                }
            }
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let mut stderr = String::new();
                if let Some(mut pipe) = child.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
                }
                panic!("up did not print its MCP URL; stderr:\n{stderr}");
            }
        }
    }
}

fn interrupt(mut child: Child) {
    // SAFETY: signals our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert!(status.success(), "up did not stop cleanly: {status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_on_a_fresh_directory_serves_the_echo_tool_and_reruns_without_asking() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join(".world");
    let store = state.join("world.db").display().to_string();
    let phrases = format!("publish 1 transitions to {store}\npublish 8 transitions to {store}\n");
    let (mut child, lines, terminal) = up(&state, &format!("{phrases}y\n"));
    let mcp = wait_for_mcp_url(&lines, &mut child);
    assert!(mcp.starts_with("http://127.0.0.1:") && mcp.ends_with("/mcp/"), "{mcp}");

    let session = state.join("session");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&session).unwrap().permissions().mode() & 0o777, 0o600);
    let token = std::fs::read_to_string(&session).unwrap().trim().to_owned();
    let base = mcp.trim_end_matches("/mcp/");
    let card: serde_json::Value = http()
        .get(format!("{base}/.well-known/agent.json"))
        .header("Authorization", format!("Bearer {token}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let skills: Vec<&str> = card["skills"].as_array().unwrap().iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert!(skills.contains(&"tools.echo") && skills.contains(&"ailang-read"), "{skills:?}");
    assert!(state.join("ws/demo/hello.ail").is_file(), "the demo worktree has the sample program");
    // The real MCP client reads the sample through the coding tools.
    let python = std::env::var_os("WORLD_TEST_PYTHON").expect("WORLD_TEST_PYTHON is not set: run tests/run.sh");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/agent_session.py");
    let calls = r#"[["ailang-read", {"path": "hello.ail"}], ["ailang-check", {"path": "hello.ail"}]]"#;
    let run = Command::new(python).arg(&script).arg(&mcp).arg(&token).arg(calls).output().unwrap();
    let seen: serde_json::Value = serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|_| panic!("agent session: {}", String::from_utf8_lossy(&run.stderr)));
    assert!(seen["results"][0]["output"]["content"].as_str().is_some_and(|c| c.contains("module hello")), "{seen}");
    assert_eq!(seen["results"][1]["output"]["passed"], true, "{seen}");
    interrupt(child);
    let prompts = terminal.join().unwrap();
    assert!(prompts.contains("publish 1 transitions to"), "{prompts}");
    assert!(prompts.contains("publish 8 transitions to"), "{prompts}");
    assert!(prompts.contains("Mint a demo session for episode demo"), "{prompts}");

    // A rerun reuses everything: nothing is typed, nothing is asked.
    let (mut child, lines, terminal) = up(&state, "");
    let again = wait_for_mcp_url(&lines, &mut child);
    assert!(again.ends_with("/mcp/"));
    interrupt(child);
    let prompts = terminal.join().unwrap();
    assert!(!prompts.contains("Type exactly") && !prompts.contains("[y/N]"), "a rerun asked: {prompts}");
    assert_eq!(std::fs::read_to_string(&session).unwrap().trim(), token, "the session was reused");
}
