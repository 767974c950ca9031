//! Slow clients cannot starve the edge: a client trickling its headers is cut off once
//! `--header-read-timeout` passes, one trickling its body gets its answer (and the connection
//! closes) once `--body-read-timeout` passes, and meanwhile everyone else is served.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use world_tests::{World, http};

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

async fn a2a_echo(world: &World, token: &str, task: &str) -> serde_json::Value {
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tasks/send","params":{{"id":"{task}","metadata":{{"skill_id":"tools.echo"}},"message":{{"role":"user","parts":[{{"type":"data","data":{{"a":1}}}}]}}}}}}"#
    );
    let response =
        http().post(world.url("/a2a/")).header("Authorization", format!("Bearer {token}")).body(body).send().await;
    response.expect("a2a request").json().await.expect("a JSON-RPC answer")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_and_never_starve_the_others() {
    let mut world = World::echo_core();
    let edge_args = ["--header-read-timeout", "1s", "--body-read-timeout", "1s"];
    let (edge, edge_url) = world_tests::start_edge(&[&world.core_addr], world.dir.path(), &edge_args);
    world.edge = Some(edge);
    world.edge_url = edge_url.clone();
    let token = world.mint("ep1", &["world.apply=world:1000"], 3600);

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
