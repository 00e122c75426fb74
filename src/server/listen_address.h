// Why a host:port cannot be listened on, in words a user can act on ("invalid address", "address
// already in use"), checked before the model loads so that a bad --host or --port fails fast.
#pragma once

#include <string>

namespace qs {

/// Empty when a TCP socket can be bound to `host`:`port` (0..65535; 0: any free port), else the
/// reason: "invalid address" for a host that is neither a numeric IPv4/IPv6 address nor a name the
/// resolver knows (a host made of digits and dots, or containing ':', is never looked up in DNS),
/// else the bind error of the last address tried ("address already in use", "address not
/// available on this machine", "permission denied", or strerror). Binds a probe socket with
/// SO_REUSEADDR (as the server does) and closes it again. Never throws.
std::string listen_address_problem(const std::string& host, int port);

/// The reason for a bind() failure with `error_number` (an errno value), as listen_address_problem
/// words it.
std::string bind_error_reason(int error_number);

}  // namespace qs
