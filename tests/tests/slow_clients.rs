//! Slow clients cannot starve the edge: a client trickling its headers is cut off once
//! `--header-read-timeout` passes, one trickling its body gets its answer (and the connection
//! closes) once `--body-read-timeout` passes, and meanwhile everyone else is served. The header
//! timeout holds whatever the protocol (a silent connection, a half-sent HTTP/2 preface, an
//! HTTP/2 connection that never sends a request), idle keep-alive connections are closed, and
//! an MCP body trickled past the seed's 20 s aggregate deadline is answered by it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use world_tests::{World, http, tasks_send};

/// The HTTP/2 connection preface.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty HTTP/2 SETTINGS frame: length 0, type 4, no flags, stream 0.
const H2_EMPTY_SETTINGS: [u8; 9] = [0, 0, 0, 4, 0, 0, 0, 0, 0];

const SLOW_CLIENTS: usize = 48;

/// Connects to the edge behind `base` (`http://host:port`).
fn connect(base: &str) -> TcpStream {
    let stream = TcpStream::connect(base.trim_start_matches("http://")).expect("connect to the edge");
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
}

/// Reads until the edge closes the connection; returns what it sent and when it closed.
fn read_to_close(mut stream: TcpStream) -> (String, Instant) {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => received.extend_from_slice(&buffer[..n]),
            Err(error) if error.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(error) => panic!("the edge kept a slow connection open: {error}"),
        }
    }
    (String::from_utf8_lossy(&received).into_owned(), Instant::now())
}

/// Sends `head` and then one more header byte every 100 ms until the edge hangs up.
fn trickle_headers(base: &str, head: &'static str) -> (String, Instant) {
    let mut stream = connect(base);
    stream.write_all(head.as_bytes()).unwrap();
    let writer = stream.try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        let mut writer = writer;
        let _ = writer.write_all(b"X-Slow: ");
        for _ in 0..200 {
            std::thread::sleep(Duration::from_millis(100));
            if writer.write_all(b"a").is_err() {
                return;
            }
        }
    });
    let closed = read_to_close(stream);
    let _ = trickle.join();
    closed
}

/// An echo world whose edge runs with `edge_args`, and a session of episode `ep1` on it.
fn echo_world(edge_args: &[&str]) -> (World, String) {
    let mut world = World::echo_core();
    world.attach_edge(edge_args, &[]);
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);
    (world, token)
}

async fn a2a_echo(world: &World, token: &str, task: &str) -> serde_json::Value {
    world.a2a(token, &tasks_send(task, "tools.echo", serde_json::json!({"a":1}))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_and_never_starve_the_others() {
    let (world, token) = echo_world(&["--header-read-timeout", "1s", "--body-read-timeout", "1s"]);
    let edge_url = world.edge_url.clone();

    // Headers trickled byte by byte: every such connection is closed about a second in.
    let started = Instant::now();
    let slow: Vec<_> = (0..SLOW_CLIENTS)
        .map(|_| {
            let base = edge_url.clone();
            std::thread::spawn(move || trickle_headers(&base, "POST /a2a/ HTTP/1.1\r\nHost: edge\r\n"))
        })
        .collect();
    // Meanwhile the edge answers everyone else.
    for n in 0..5 {
        let answer = a2a_echo(&world, &token, &format!("fast-{n}")).await;
        assert_eq!(answer["result"]["status"]["state"], "completed", "{answer}");
    }
    for client in slow {
        let (received, closed) = client.join().expect("slow client");
        let after = closed - started;
        assert!(after < Duration::from_secs(5), "a header trickler was held {after:?}");
        assert!(received.is_empty() || received.starts_with("HTTP/1.1 408"), "{received:?}");
    }

    // A body that stops half-way: the edge answers its JSON-RPC refusal and hangs up.
    for (path, refusal) in [("/a2a/", r#""code":-32600"#), ("/mcp/", r#""code":"#)] {
        let mut stream = connect(&edge_url);
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{{\"jsonrpc\":"
        );
        let sent = Instant::now();
        stream.write_all(head.as_bytes()).unwrap();
        let (received, closed) = read_to_close(stream);
        let after = closed - sent;
        assert!(
            after >= Duration::from_millis(900) && after < Duration::from_secs(5),
            "{path}: closed after {after:?}"
        );
        assert!(received.starts_with("HTTP/1.1 200 OK"), "{path}: {received:?}");
        assert!(received.contains(refusal), "{path}: {received:?}");
    }

    let answer = a2a_echo(&world, &token, "after").await;
    assert_eq!(answer["result"]["status"]["state"], "completed", "{answer}");
}

/// Opens a connection, sends `first` (possibly nothing) and waits for the edge to close it;
/// returns how long that took.
fn held_for(base: &str, first: &[u8]) -> Duration {
    let mut stream = connect(base);
    let opened = Instant::now();
    stream.write_all(first).unwrap();
    let (_, closed) = read_to_close(stream);
    closed - opened
}

async fn metrics(base: &str) -> String {
    // A client of its own, so no pooled connection of another test step is counted or reused.
    let response = http().get(format!("{base}/metrics")).header("Connection", "close").send().await;
    response.expect("GET /metrics").text().await.expect("metrics text")
}

fn metric(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{series} in {text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_without_a_request_are_closed_whatever_the_protocol_and_idle_ones_too() {
    let (world, token) = echo_world(&["--header-read-timeout", "2s", "--idle-timeout", "2s"]);
    let edge_url = world.edge_url.clone();
    let bound = Duration::from_secs(2) + Duration::from_millis(2500);

    // Ten that send nothing, ten that stop two bytes short of the HTTP/2 preface (so no
    // protocol is ever chosen), and five that complete it and never send a request.
    let mut full_preface = H2_PREFACE.to_vec();
    full_preface.extend_from_slice(&H2_EMPTY_SETTINGS);
    let kinds: [(&str, Vec<u8>, usize); 3] =
        [("silent", Vec::new(), 10), ("h2 preface", H2_PREFACE[..22].to_vec(), 10), ("h2 settings", full_preface, 5)];
    let mut silent = Vec::new();
    for (kind, first, count) in kinds {
        for _ in 0..count {
            let (base, first) = (edge_url.clone(), first.clone());
            silent.push((kind, std::thread::spawn(move || held_for(&base, &first))));
        }
    }
    // Meanwhile a client that speaks is served.
    for n in 0..5 {
        let answer = a2a_echo(&world, &token, &format!("served-{n}")).await;
        assert_eq!(answer["result"]["status"]["state"], "completed", "{answer}");
    }
    for (kind, client) in silent {
        let held = client.join().expect("silent client");
        assert!(held < bound, "a {kind} connection was held {held:?}");
    }
    let text = metrics(&edge_url).await;
    assert!(metric(&text, "world_edge_connections_closed_total{reason=\"header_timeout\"}") >= 25, "{text}");

    // HTTP/1.1 keep-alive: after its answer the connection must start another request within
    // the header timeout.
    let request = "GET /v1/health HTTP/1.1\r\nHost: edge\r\n\r\n";
    let held = held_for(&edge_url, request.as_bytes());
    assert!(held < bound, "an idle HTTP/1.1 connection was held {held:?}");

    // HTTP/2: a connection that served a request and then has none in flight is closed once
    // the idle timeout passes, while the client would have kept it.
    let h2 = reqwest::Client::builder().http2_prior_knowledge().build().expect("an HTTP/2 client");
    let answer = h2.get(format!("{edge_url}/metrics")).send().await.expect("an HTTP/2 request");
    assert_eq!(answer.version(), reqwest::Version::HTTP_2);
    let with_h2 = answer.text().await.expect("metrics text");
    assert_eq!(metric(&with_h2, "world_edge_open_connections"), 1, "{with_h2}");
    let idle_closed = metric(&with_h2, "world_edge_connections_closed_total{reason=\"idle\"}");
    tokio::time::sleep(bound).await;
    let text = metrics(&edge_url).await;
    assert_eq!(metric(&text, "world_edge_open_connections"), 1, "only this request's own: {text}");
    assert_eq!(metric(&text, "world_edge_connections_closed_total{reason=\"idle\"}"), idle_closed + 1, "{text}");
    drop(h2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_body_trickled_past_the_aggregate_deadline_is_answered_by_it() {
    let (world, token) = echo_world(&[]);
    let edge_url = world.edge_url.clone();

    // A 50-byte body, one byte every 500 ms: 25 s to arrive, past the seed's 20 s.
    let mut stream = connect(&edge_url);
    stream.set_read_timeout(Some(Duration::from_secs(40))).unwrap();
    let head = format!(
        "POST /mcp/ HTTP/1.1\r\nHost: edge\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: 50\r\n\r\n"
    );
    let sent = Instant::now();
    stream.write_all(head.as_bytes()).unwrap();
    let mut writer = stream.try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        for byte in br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}    "# {
            std::thread::sleep(Duration::from_millis(500));
            if writer.write_all(&[*byte]).is_err() {
                return;
            }
        }
    });
    let (received, closed) = read_to_close(stream);
    let after = closed - sent;
    let _ = trickle.join();
    assert!(after >= Duration::from_secs(19) && after < Duration::from_secs(22), "answered after {after:?}");
    assert!(received.starts_with("HTTP/1.1 200 OK"), "{received:?}");
    let body = received.split("\r\n\r\n").nth(1).unwrap_or_default();
    assert_eq!(
        body,
        "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,\"message\":\"host callback timed out\"}}\n"
    );
}
