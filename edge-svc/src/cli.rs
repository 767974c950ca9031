//! `world-edge` flags; each can also be set by the `WORLD_*` variable `--help` names.

use std::net::SocketAddr;
use std::time::Duration;

use crate::limits::{Limits, parse_duration};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

#[derive(Clone, Debug, clap::Parser)]
#[command(
    name = "world-edge",
    version,
    about = "The stateless HTTP edge of World: agent card, REST /v1, POST /mcp/ and POST /a2a/, forwarded to world-core over gRPC"
)]
pub struct EdgeArgs {
    /// The HTTP listen address (port 0 picks a free port; the startup line names it).
    #[arg(long, env = "WORLD_LISTEN", default_value = "127.0.0.1:7644")]
    pub listen: SocketAddr,
    /// A world-core gRPC URL such as http://127.0.0.1:7650; repeat the flag or give a comma
    /// list to spread calls over several cores (a core that cannot be connected to is passed
    /// over for a moment and the call goes to another).
    #[arg(long = "core", env = "WORLD_CORE", value_delimiter = ',', required = true)]
    pub core: Vec<String>,
    /// Browser origins allowed to call /mcp/ besides loopback ones (exact, comma list; `*`
    /// allows any).
    #[arg(long, env = "WORLD_ALLOWED_ORIGINS", value_delimiter = ',')]
    pub allowed_origins: Vec<String>,
    /// The address MCP clients reach this edge at (an origin such as https://world.example.com,
    /// the proxy's when there is one): OAuth sign-in's issuer and endpoints are named under it.
    /// Default: the edge's own listen address.
    #[arg(long, env = "WORLD_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Log line format on stderr.
    #[arg(long, env = "WORLD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Human)]
    pub log_format: LogFormat,
    /// The aggregate deadline of one POST to /mcp/ or /a2a/ (e.g. 20s, 500ms).
    #[arg(long, env = "WORLD_REQUEST_DEADLINE", value_parser = parse_duration, default_value = "20s")]
    pub request_deadline: Duration,
    /// MCP host callbacks (admission, each tools/call) running at once on this edge.
    #[arg(long, env = "WORLD_CALLBACK_SLOTS", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    pub callback_slots: u16,
    /// How long one MCP host callback may run.
    #[arg(long, env = "WORLD_CALLBACK_TIMEOUT", value_parser = parse_duration, default_value = "20s")]
    pub callback_timeout: Duration,
    /// How long an MCP host callback waits for a free slot before it is refused with
    /// "host callback capacity exceeded".
    #[arg(long, env = "WORLD_CALLBACK_SLOT_WAIT", value_parser = parse_duration, default_value = "20s")]
    pub callback_slot_wait: Duration,
    /// How long a client may take to send a request's headers before the connection is
    /// closed, whatever the protocol: from the moment it opens until its first request's
    /// headers (HTTP/1.1 and HTTP/2 alike), and from one HTTP/1.1 request to the next (slow
    /// or silent clients cannot hold connections open).
    #[arg(long, env = "WORLD_HEADER_READ_TIMEOUT", value_parser = parse_duration, default_value = "5s")]
    pub header_read_timeout: Duration,
    /// How long an HTTP/2 connection may stay open with no request in flight before it is
    /// closed (an idle HTTP/1.1 connection ends at the header timeout).
    #[arg(long, env = "WORLD_IDLE_TIMEOUT", value_parser = parse_duration, default_value = "120s")]
    pub idle_timeout: Duration,
    /// How long a client may take to send a request's body once its headers arrived (on
    /// /mcp/ the POST's aggregate deadline ends it sooner).
    #[arg(long, env = "WORLD_BODY_READ_TIMEOUT", value_parser = parse_duration, default_value = "30s")]
    pub body_read_timeout: Duration,
}

impl EdgeArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            request_deadline: self.request_deadline,
            callback_slots: usize::from(self.callback_slots),
            callback_timeout: self.callback_timeout,
            callback_slot_wait: self.callback_slot_wait,
            header_read_timeout: self.header_read_timeout,
            idle_timeout: self.idle_timeout,
            body_read_timeout: self.body_read_timeout,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn core_urls_repeat_or_split_on_commas() {
        let args = EdgeArgs::try_parse_from([
            "world-edge",
            "--core",
            "http://a:1,http://b:2",
            "--core",
            "http://c:3",
            "--listen",
            "127.0.0.1:0",
        ])
        .unwrap();
        assert_eq!(args.core, ["http://a:1", "http://b:2", "http://c:3"]);
        assert_eq!(args.listen.port(), 0);
        assert_eq!(args.log_format, LogFormat::Human);
        assert_eq!(args.limits(), Limits::default());
        let sized = EdgeArgs::try_parse_from([
            "world-edge",
            "--core",
            "http://a:1",
            "--callback-slots",
            "2",
            "--callback-slot-wait",
            "250ms",
        ])
        .unwrap();
        assert_eq!(sized.limits().callback_slots, 2);
        assert_eq!(sized.limits().callback_slot_wait, Duration::from_millis(250));
        assert!(EdgeArgs::try_parse_from(["world-edge", "--core", "http://a:1", "--callback-slots", "0"]).is_err());
        assert!(EdgeArgs::try_parse_from(["world-edge", "--core", "http://a:1", "--log-format", "xml"]).is_err());
    }
}
