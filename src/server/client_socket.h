// Noticing that a client went away while a non-streaming response is being generated.
//
// cpp-httplib 0.11.4 (Debian's) gives a handler neither its socket nor a "connection closed"
// check, so the socket is found by its addresses: the descriptor in /proc/self/fd whose peer is
// (remote_addr, remote_port) and whose local port is local_port. httplib keeps that socket open
// until the handler returns, so the descriptor stays ours while we poll it.
#pragma once

#include <functional>
#include <string>

namespace qs {

/// The connected socket with these addresses, or -1 (not found, or not Linux).
int find_client_socket(const std::string& remote_addr, int remote_port, int local_port);

/// True when the peer has closed the connection (recv with MSG_PEEK reads end-of-stream or a
/// reset). Pending bytes (a pipelined request) mean still connected. Never blocks.
bool peer_closed(int fd);

/// A probe for run_generation: finds the socket once, then answers peer_closed(); always false
/// when the socket cannot be found.
std::function<bool()> disconnect_probe(const std::string& remote_addr, int remote_port, int local_port);

}  // namespace qs
