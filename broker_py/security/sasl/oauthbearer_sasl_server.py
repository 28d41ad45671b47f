"""The OAUTHBEARER SASL mechanism (RFC 7628) with unsecured JWTs, as Kafka's
OAuthBearerSaslServer with its default OAuthBearerUnsecuredValidatorCallbackHandler.

The client's first message is ``gs2-header %x01 *(key=value %x01) %x01``: a GS2
header ``n,,`` or ``n,a=<authzid>,``, then ``auth=Bearer <token>`` and any SASL
extensions (accepted unchecked, as the unsecured validator does).

The token is an unsecured JWS (RFC 7515 compact form ``header.payload.``, no
signature): its header must say ``"alg":"none"``; its payload is a JSON object of
claims. The principal claim (``sub`` unless ``unsecuredValidatorPrincipalClaimName``)
must be a non-empty string and becomes the authorization id; ``exp`` (seconds since
the epoch) is required and must be in the future, ``iat`` if present in the past,
each within ``unsecuredValidatorAllowableClockSkewMs``; the scope claim (``scope``, a
string of space-separated scopes or a list) must hold every scope of
``unsecuredValidatorRequiredScope``. An authzid, if given, must equal the principal.

A token that fails validation is answered, as RFC 7628 section 3.2.2 says, with an
error challenge (``{"status":"invalid_token"}``); the client then sends a lone
``%x01`` and the exchange fails with the reason.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import re
import time
from collections.abc import Callable

from logstore.protocol.errors import SaslAuthenticationFailedError

CONTROL_A = "\x01"
_GS2_HEADER = re.compile(r"^n,(?:a=(?P<authzid>[^,]*))?,$")
_BEARER = re.compile(r"^[Bb]earer +(?P<token>[-_.!~*'()A-Za-z0-9+/=]+)$")


@dataclasses.dataclass(frozen=True)
class UnsecuredValidatorOptions:
    """The ``unsecuredValidator*`` options of the listener's OAuthBearerLoginModule."""

    principal_claim_name: str = "sub"
    scope_claim_name: str = "scope"
    required_scope: tuple[str, ...] = ()
    allowable_clock_skew_ms: int = 0

    @classmethod
    def from_jaas_options(cls, options: dict[str, str]) -> UnsecuredValidatorOptions:
        """ValueError naming the option when one is malformed."""
        skew = options.get("unsecuredValidatorAllowableClockSkewMs", "0")
        try:
            skew_ms = int(skew)
        except ValueError:
            raise ValueError(
                f"unsecuredValidatorAllowableClockSkewMs={skew!r} is not an integer"
            ) from None
        if skew_ms < 0:
            raise ValueError("unsecuredValidatorAllowableClockSkewMs must not be negative")
        principal = options.get("unsecuredValidatorPrincipalClaimName", "sub").strip()
        scope = options.get("unsecuredValidatorScopeClaimName", "scope").strip()
        if not principal or not scope:
            raise ValueError(
                "unsecuredValidatorPrincipalClaimName and unsecuredValidatorScopeClaimName "
                "must not be empty"
            )
        required = tuple(
            s for s in re.split(r"[\s,]+", options.get("unsecuredValidatorRequiredScope", "")) if s
        )
        return cls(principal, scope, required, skew_ms)


class InvalidTokenError(Exception):
    """A token the validator refuses; ``status`` is RFC 7628's error status."""

    def __init__(self, message: str, status: str = "invalid_token") -> None:
        super().__init__(message)
        self.status = status


def _b64url_json(part: str, what: str) -> dict:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw)
    except (binascii.Error, ValueError):
        raise InvalidTokenError(f"the token's {what} is not Base64URL-encoded JSON") from None
    if not isinstance(value, dict):
        raise InvalidTokenError(f"the token's {what} is not a JSON object")
    return value


def _time_claim(claims: dict, name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidTokenError(f"the {name!r} claim is not a number")
    return value * 1000


def validate_unsecured_token(
    token: str, options: UnsecuredValidatorOptions, now_ms: float
) -> tuple[str, float]:
    """The token's principal and expiry (ms since the epoch), or InvalidTokenError."""
    parts = token.split(".")
    if len(parts) != 3 or parts[2]:
        raise InvalidTokenError(
            "an unsecured JWS has 3 dot-separated Base64URL values and the third is empty"
        )
    header = _b64url_json(parts[0], "header")
    claims = _b64url_json(parts[1], "payload")
    if header.get("alg") != "none":
        raise InvalidTokenError(f"an unsecured token must have alg none, not {header.get('alg')!r}")
    principal = claims.get(options.principal_claim_name)
    if not isinstance(principal, str) or not principal.strip():
        raise InvalidTokenError(
            f"no principal claim {options.principal_claim_name!r} (a non-empty string)"
        )
    skew = options.allowable_clock_skew_ms
    expires = _time_claim(claims, "exp")
    if expires is None:
        raise InvalidTokenError("the token has no 'exp' claim")
    if now_ms - skew >= expires:
        raise InvalidTokenError(
            f"the token expired at {expires / 1000:.0f} (now {now_ms / 1000:.0f})"
        )
    issued = _time_claim(claims, "iat")
    if issued is not None and now_ms + skew < issued:
        raise InvalidTokenError(
            f"the token's 'iat' {issued / 1000:.0f} is in the future (now {now_ms / 1000:.0f})"
        )
    if options.required_scope:
        scope = claims.get(options.scope_claim_name)
        granted = (
            set(scope.split())
            if isinstance(scope, str)
            else set(scope)
            if isinstance(scope, list)
            else set()
        )
        missing = [s for s in options.required_scope if s not in granted]
        if missing:
            raise InvalidTokenError(
                f"the token's scope lacks {', '.join(missing)}", "insufficient_scope"
            )
    return principal, expires


class OAuthBearerSaslServer:
    mechanism = "OAUTHBEARER"

    def __init__(
        self, options: UnsecuredValidatorOptions, clock: Callable[[], float] = time.time
    ) -> None:
        self._options = options
        self._clock = clock
        self._error: str | None = None
        self.complete = False
        self.authorization_id: str | None = None
        self.credential_expiration_ms: float | None = None  # the token's exp

    def evaluate(self, response: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationFailedError("OAUTHBEARER authentication already complete")
        if self._error is not None:
            # After an error challenge the client's %x01 (or anything else) ends it.
            raise SaslAuthenticationFailedError(f"Authentication failed: {self._error}")
        try:
            text = response.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationFailedError(
                "Invalid OAUTHBEARER client first message: not UTF-8"
            ) from None
        header, sep, rest = text.partition(CONTROL_A)
        gs2 = _GS2_HEADER.match(header)
        if gs2 is None or not sep or not rest.endswith(CONTROL_A + CONTROL_A):
            raise SaslAuthenticationFailedError("Invalid OAUTHBEARER client first message")
        pairs: dict[str, str] = {}
        for item in rest[:-2].split(CONTROL_A):
            key, eq, value = item.partition("=")
            if not eq or not key:
                raise SaslAuthenticationFailedError(
                    f"Invalid OAUTHBEARER client first message: bad key/value {item!r}"
                )
            pairs[key] = value
        bearer = _BEARER.match(pairs.get("auth", ""))
        if bearer is None:
            raise SaslAuthenticationFailedError(
                "Invalid OAUTHBEARER client first message: no auth=Bearer <token>"
            )
        try:
            principal, expires = validate_unsecured_token(
                bearer["token"], self._options, self._clock() * 1000
            )
        except InvalidTokenError as e:
            self._error = str(e)
            challenge = {"status": e.status}
            if e.status == "insufficient_scope":
                challenge["scope"] = " ".join(self._options.required_scope)
            return json.dumps(challenge, separators=(",", ":")).encode()
        authzid = gs2["authzid"]
        if authzid and authzid != principal:
            raise SaslAuthenticationFailedError(
                f"Authentication failed: Client requested an authorization id ({authzid}) "
                f"that is different from the token's principal name ({principal})"
            )
        self.complete = True
        self.authorization_id = principal
        self.credential_expiration_ms = expires
        return b""
