//! The socket side of the server: listening sockets, client connections, the single-thread
//! event loop and the I/O threads, and startup's log replay. They feed requests to the
//! executor (`commands::executor`) and write its replies; no command semantics live here.

pub mod aof_startup;
pub mod connection;
pub mod event_loop;
pub mod io_threads;
pub mod listeners;
pub mod outq;
pub mod stream;
