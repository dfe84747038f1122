//! RESP2/RESP3: the request parser and the reply encoder.

pub mod parser;
pub mod reply;
pub mod request;
