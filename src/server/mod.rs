//! The socket side of the server: listening sockets, client connections, the single-thread
//! event loop and the I/O threads. They feed requests to the
//! executor (`commands::executor`) and write its replies; no command semantics live here.

pub mod connection;
pub mod event_loop;
pub mod io_threads;
pub mod latency_trace;
pub mod listeners;
pub mod outq;
pub mod stream;
pub mod tls_refusal;
pub mod tls_stream;
