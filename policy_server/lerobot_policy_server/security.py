"""Who may call the policy server and over what: a shared token (gRPC metadata) and TLS, optionally mutual.

The token is a secret string both hosts hold: read from a file (`--token-file`, the policy node's
`remote_token_file`) or the environment variable `TOKEN_ENV`. A client sends it with every call as
``authorization: Bearer <token>``; the server compares it in constant time. TLS takes PEM files: the server's
certificate chain and key, and, for mutual TLS, the CA that signs the clients' certificates; the client takes
the CA that signs the server's certificate and, for mutual TLS, its own certificate and key.
"""

from __future__ import annotations

import hmac
import ipaddress
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc

TOKEN_ENV = "LEROBOT_POLICY_SERVER_TOKEN"
TOKEN_METADATA = "authorization"
# The shortest token a server takes (e.g. `openssl rand -hex 32` makes 64 characters).
MIN_TOKEN_CHARS = 16
NO_TOKEN = "the call carries no token"
WRONG_TOKEN = "the call's token is not this server's"
_BEARER = "Bearer "


class SecurityError(ValueError):
    """A token or TLS file cannot be used; the message is one line naming the file and what is wrong."""


def _read(path: str | Path, what: str) -> bytes:
    try:
        data = Path(path).expanduser().read_bytes()
    except OSError as err:
        raise SecurityError(f"{what} {path}: cannot read it ({err.strerror or err})") from None
    if not data.strip():
        raise SecurityError(f"{what} {path} is empty")
    return data


def read_token(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """The token from the file `path` (surrounding whitespace dropped), else from `TOKEN_ENV`; None when neither."""
    if path:
        token = _read(path, "token file").decode("utf-8", errors="strict").strip()
        if any(c.isspace() for c in token):
            raise SecurityError(f"token file {path}: the token is one line without spaces")
        return token
    value = (os.environ if environ is None else environ).get(TOKEN_ENV, "").strip()
    return value or None


def token_metadata(token: str) -> tuple[tuple[str, str], ...]:
    """The call metadata carrying `token`."""
    return ((TOKEN_METADATA, _BEARER + token),)


def token_problem(token: str, metadata: Sequence[tuple[str, str | bytes]] | None) -> str:
    """Why a call's metadata does not carry `token` ('' when it does); the comparison takes constant time."""
    given = [value for key, value in metadata or () if key == TOKEN_METADATA]
    if not given:
        return NO_TOKEN
    value = given[0] if isinstance(given[0], str) else given[0].decode("utf-8", errors="replace")
    presented = value[len(_BEARER) :] if value.startswith(_BEARER) else value
    if not hmac.compare_digest(presented.encode(), token.encode()):
        return WRONG_TOKEN
    return ""


@dataclass(frozen=True)
class ServerSecurity:
    """What the server asks of callers: `token` (None: none), TLS files (`tls_cert` + `tls_key`; `client_ca`:
    mutual TLS, clients must present a certificate it signed). Beyond loopback a server needs authentication (a
    token or client certificates; TLS alone encrypts but lets anyone in) unless `insecure` (`refusal`)."""

    token: str | None = None
    tls_cert: str = ""
    tls_key: str = ""
    client_ca: str = ""
    insecure: bool = False  # may listen beyond loopback without authentication

    def __post_init__(self) -> None:
        if self.token is not None and len(self.token) < MIN_TOKEN_CHARS:
            raise SecurityError(
                f"the token has {len(self.token)} characters, fewer than the {MIN_TOKEN_CHARS} a server takes; "
                "make one with: openssl rand -hex 32 > policy.token"
            )
        if bool(self.tls_cert) != bool(self.tls_key):
            raise SecurityError("TLS needs both a certificate (--tls-cert) and its key (--tls-key)")
        if self.client_ca and not self.tls_cert:
            raise SecurityError("--tls-client-ca (mutual TLS) needs --tls-cert and --tls-key")

    @property
    def tls(self) -> bool:
        return bool(self.tls_cert)

    @property
    def authenticates(self) -> bool:
        """Whether callers must prove who they are: a token, or a client certificate (mutual TLS)."""
        return self.token is not None or bool(self.client_ca)

    def refusal(self, host: str) -> str:
        """Why a server with this security must not listen on `host` ('' when it may): beyond loopback without
        authentication, unless `insecure`."""
        if is_loopback(host) or self.authenticates or self.insecure:
            return ""
        tls = " (TLS encrypts, but lets in any client)" if self.tls else ""
        return (
            f"refusing to listen on {host} (beyond this machine) without authentication{tls}: give a token "
            f"(--token-file or ${TOKEN_ENV}) or client certificates (--tls-client-ca), or --insecure to let anyone "
            "who reaches the port use the policy"
        )

    def missing(self) -> str:
        """What a server beyond loopback lacks ('' when nothing): authentication, then encryption."""
        if not self.authenticates:
            lacks = "no token and no client certificates: anyone who reaches the port can use the policy"
            return lacks + ("" if self.tls else ", and calls cross the network in clear text")
        if not self.tls:
            return "no TLS: the token crosses the network in clear text"
        return ""

    def credentials(self) -> grpc.ServerCredentials | None:
        """gRPC server credentials for the TLS files (None without TLS)."""
        if not self.tls:
            return None
        pair = (_read(self.tls_key, "TLS key"), _read(self.tls_cert, "TLS certificate"))
        client_ca = _read(self.client_ca, "TLS client CA") if self.client_ca else None
        return grpc.ssl_server_credentials([pair], root_certificates=client_ca, require_client_auth=bool(client_ca))

    def describe(self) -> str:
        tls = "mutual TLS" if self.client_ca else "TLS" if self.tls else "no TLS"
        return f"{'token' if self.token else 'no token'}, {tls}"


@dataclass(frozen=True)
class ClientSecurity:
    """What a client presents: `token` (None: none), TLS files (`tls_ca`: the CA that signs the server's certificate;
    `tls_cert` + `tls_key`: this client's certificate, for mutual TLS). TLS is on when any file is given."""

    token: str | None = None
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""

    def __post_init__(self) -> None:
        if bool(self.tls_cert) != bool(self.tls_key):
            raise SecurityError("a client certificate needs its key (tls_cert and tls_key together)")

    @classmethod
    def from_files(
        cls,
        token_file: str = "",
        tls_ca: str = "",
        tls_cert: str = "",
        tls_key: str = "",
        environ: Mapping[str, str] | None = None,
    ) -> ClientSecurity:
        """The token from `token_file` (else `TOKEN_ENV`) and the TLS file names; files are checked when used."""
        return cls(read_token(token_file, environ), tls_ca, tls_cert, tls_key)

    @property
    def tls(self) -> bool:
        return bool(self.tls_ca or self.tls_cert)

    def credentials(self) -> grpc.ChannelCredentials | None:
        """gRPC channel credentials for the TLS files (None without TLS)."""
        if not self.tls:
            return None
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.tls_ca, "TLS CA") if self.tls_ca else None,
            private_key=_read(self.tls_key, "TLS key") if self.tls_key else None,
            certificate_chain=_read(self.tls_cert, "TLS certificate") if self.tls_cert else None,
        )


def is_loopback(host: str) -> bool:
    """Whether listening on `host` keeps the server on this machine (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
