"""Which Host (and Origin) a request may name: the browser serves only its own pages.

A page on another site can make a browser send requests to 127.0.0.1 (an <img>, a form) or, through
DNS rebinding, read the answers under its own name (``Host: evil.example.com`` pointing at 127.0.0.1).
So a request is served only when its Host is the bound address or a loopback name (localhost,
127.0.0.1, [::1]) with the bound port, or an entry of ``--allowed-hosts`` (a proxy's name); a request
that carries an Origin must come from one of those; and an API request that the browser marks as
coming from another site (``Sec-Fetch-Site``) is refused. ``ssh -L PORT:127.0.0.1:PORT`` keeps working:
the laptop's browser names 127.0.0.1:PORT.
"""

from __future__ import annotations

import ipaddress
import re

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$")


def _name(name: str) -> str | None:
    """A host name or address in Host-header form (IPv6 bracketed, lower case); None if it is neither."""
    name = name.strip().lower()
    bare = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        return name if _NAME.match(name) and not name.startswith("[") else None
    return f"[{address.compressed}]" if address.version == 6 else address.compressed


def parse_host(value: str) -> tuple[str, int | None] | None:
    """A Host header (``name``, ``name:port``, ``[v6]``, ``[v6]:port``) as (name, port); None if malformed."""
    value = value.strip()
    if value.startswith("["):
        end = value.find("]")
        name, rest = value[: end + 1], value[end + 1 :]
        if end < 0 or (rest and not rest.startswith(":")):
            return None
        port = rest[1:] if rest else None
    elif value.count(":") == 1:
        name, port = value.split(":")
    elif ":" in value:
        name, port = f"[{value}]", None  # a bare IPv6 address (only as an --allowed-hosts entry)
    else:
        name, port = value, None
    name = _name(name)
    if name is None or (port is not None and not (port.isdigit() and 0 < int(port) < 65536)):
        return None
    return name, None if port is None else int(port)


class HostCheck:
    """The (name, port) pairs a request's Host may name; a port of None in an ``--allowed-hosts`` entry
    matches any port (a proxy in front may listen on 443 or 80)."""

    def __init__(self, bound: str, port: int, extra: list[str] | tuple[str, ...] = ()):
        names = set(LOOPBACK_NAMES)
        bound_name = _name(bound)
        if bound_name and bound_name not in ("0.0.0.0", "[::]"):  # a wildcard bind is no name a browser uses
            names.add(bound_name)
        self.exact = {(n, port) for n in names} | ({(n, None) for n in names} if port == 80 else set())
        self.any_port: set[str] = set()
        for entry in extra:
            parsed = parse_host(entry)
            if parsed is None:
                raise ValueError(f"--allowed-hosts: {entry!r} is not a host name, address or host:port "
                                 "(IPv6 as [2001:db8::1] or [2001:db8::1]:8765)")
            if parsed[1] is None:
                self.any_port.add(parsed[0])
            else:
                self.exact.add(parsed)

    def allows(self, host: str | None) -> bool:
        parsed = parse_host(host) if host else None
        return parsed is not None and (parsed in self.exact or parsed[0] in self.any_port)

    def allows_origin(self, origin: str) -> bool:
        """An Origin header (``scheme://host[:port]``) naming an allowed host; "null" never."""
        scheme, sep, host = origin.partition("://")
        if not sep or scheme not in ("http", "https") or "/" in host:
            return False
        parsed = parse_host(host)
        if parsed is None:
            return False
        if parsed[1] is None:  # the scheme's default port
            parsed = (parsed[0], 443 if scheme == "https" else 80)
        return parsed in self.exact or parsed[0] in self.any_port

    def refusal(self, headers, path: str) -> str | None:
        """Why a request with these headers is refused, or None when it may be served."""
        host = headers.get("host")
        if not self.allows(host):
            return (f"Host {host!r} is not this server's address: the run browser answers only to its own name "
                    "(127.0.0.1, localhost, [::1] or the bound address, with its port); behind a proxy, name it "
                    "with --allowed-hosts")
        origin = headers.get("origin")
        if origin is not None and not self.allows_origin(origin):
            return f"Origin {origin!r} is another site: the run browser serves only its own pages"
        if path.startswith("/api/") and headers.get("sec-fetch-site") in ("cross-site", "same-site"):
            return "a request from another site: the run browser's data is for its own pages"
        return None
