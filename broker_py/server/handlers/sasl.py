"""SaslHandshake and SaslAuthenticate, on a connection's SaslServerAuthenticator
(``broker_py/security/sasl/sasl_authenticator.py``); and the SCRAM credential admin APIs,
DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554).

On a PLAINTEXT listener there is nothing to authenticate: both SASL requests get
ILLEGAL_SASL_STATE, as Kafka answers them there.

AlterUserScramCredentials takes the salted password the client derived and keeps only
the salt, StoredKey and ServerKey (``broker_py/security/sasl/scram_credentials.py``). As Kafka:
UNSUPPORTED_SASL_MECHANISM for an unknown mechanism, UNACCEPTABLE_CREDENTIAL for an
empty user name or salted password or iterations outside 4096-16384,
DUPLICATE_RESOURCE when one request names a user's mechanism twice,
RESOURCE_NOT_FOUND for deleting a credential that does not exist; a user's changes
apply only if all of that user's are valid. DescribeUserScramCredentials lists every
user with credentials, or the users asked for (RESOURCE_NOT_FOUND for one without any,
DUPLICATE_RESOURCE for one asked twice). With an authorizer, describing needs DESCRIBE
and altering ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED).

In a cluster credentials live in ZooKeeper (:mod:`broker_py.zk.zk_scram_credential_store`):
altering waits for the writes (a user whose write fails gets UNKNOWN_SERVER_ERROR alone),
describing reads ZooKeeper, as Kafka's ZooKeeper mode does.
"""

from __future__ import annotations

from broker_py.security.authorizer import auth_helper
from broker_py.security.authorizer.acl_binding import AclOperation
from broker_py.security.sasl.scram_credentials import (
    MAX_ITERATIONS,
    MECHANISM_IDS,
    MIN_ITERATIONS,
    ScramCredential,
)
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import (
    IllegalSaslStateError,
    KafkaError,
    SaslAuthenticationFailedError,
)
from logstore.protocol.messages.sasl import SaslAuthenticateResponse, SaslHandshakeResponse
from logstore.protocol.messages.scram import (
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsResponse,
)

_IDS = {name: i for i, name in MECHANISM_IDS.items()}


def handle_sasl_handshake(apis, request, connection):
    auth = getattr(connection, "sasl", None)
    if auth is None:
        return SaslHandshakeResponse(error_code=int(ErrorCode.ILLEGAL_SASL_STATE), mechanisms=[])
    try:
        auth.handshake(request.body.mechanism, request.api_version)
    except KafkaError as e:
        connection.authentication_failed(request.body.mechanism, e)
        connection.close_after_response()
        return SaslHandshakeResponse(error_code=int(e.errno), mechanisms=list(auth.mechanisms))
    return SaslHandshakeResponse(error_code=0, mechanisms=list(auth.mechanisms))


def handle_sasl_authenticate(apis, request, connection):
    auth = getattr(connection, "sasl", None)
    if auth is None:
        return SaslAuthenticateResponse(
            error_code=int(ErrorCode.ILLEGAL_SASL_STATE),
            error_message="this listener does not authenticate",
            auth_bytes=b"",
        )
    try:
        challenge = auth.authenticate(bytes(request.body.auth_bytes))
    except (SaslAuthenticationFailedError, IllegalSaslStateError) as e:
        connection.authentication_failed(auth.mechanism, e)
        connection.close_after_response()
        return SaslAuthenticateResponse(
            error_code=int(e.errno), error_message=str(e), auth_bytes=b""
        )
    return SaslAuthenticateResponse(
        error_code=0,
        error_message=None,
        auth_bytes=challenge,
        session_lifetime_ms=auth.session_lifetime_ms if auth.state == "complete" else 0,
    )


def handle_describe_user_scram_credentials(apis, request, connection):
    if not auth_helper.authorize_cluster(apis, connection, AclOperation.DESCRIBE):
        return DescribeUserScramCredentialsResponse(
            throttle_time_ms=0,
            error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
            error_message="DESCRIBE on the cluster is not authorized",
            results=[],
        )
    # A broker alone answers from its store; a cluster's reads ZooKeeper (to await).
    shared = apis.scram_credentials.describe_shared()
    if shared is None:
        return _describe(apis.scram_credentials.describe(), request)

    async def described():
        try:
            known = await shared
        except KafkaError as e:
            return DescribeUserScramCredentialsResponse(
                throttle_time_ms=0, error_code=int(e.errno), error_message=str(e), results=[]
            )
        return _describe(known, request)

    return described()


def _describe(known: dict[str, dict[str, int]], request):
    asked = request.body.users
    results = []

    def result(user: str, error: ErrorCode = ErrorCode.NONE, message: str | None = None):
        infos = (
            []
            if error
            else [
                DescribeUserScramCredentialsResponse.CredentialInfo(mechanism=_IDS[m], iterations=i)
                for m, i in sorted(known[user].items())
            ]
        )
        return DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult(
            user=user, error_code=int(error), error_message=message, credential_infos=infos
        )

    if asked is None or not asked:
        results = [result(user) for user in sorted(known)]
    else:
        names = [u.name for u in asked]
        for name in dict.fromkeys(names):
            if names.count(name) > 1:
                results.append(
                    result(
                        name,
                        ErrorCode.DUPLICATE_RESOURCE,
                        "Cannot describe SCRAM credentials for the same user twice "
                        f"in a single request: {name}",
                    )
                )
            elif name not in known:
                results.append(
                    result(
                        name,
                        ErrorCode.RESOURCE_NOT_FOUND,
                        f"Attempt to describe a user credential that does not exist: {name}",
                    )
                )
            else:
                results.append(result(name))
    return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=0, results=results)


def handle_alter_user_scram_credentials(apis, request, connection):
    store = apis.scram_credentials
    body = request.body
    errors: dict[str, tuple[ErrorCode, str]] = {}
    users: list[str] = []
    seen: dict[tuple[str, int], int] = {}
    for item in [*body.deletions, *body.upsertions]:
        users.append(item.name)
        seen[(item.name, item.mechanism)] = seen.get((item.name, item.mechanism), 0) + 1

    def refuse(user: str, error: ErrorCode, message: str) -> None:
        errors.setdefault(user, (error, message))

    if not auth_helper.authorize_cluster(apis, connection, AclOperation.ALTER):
        for user in users:
            refuse(
                user,
                ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "ALTER on the cluster is not authorized",
            )
    for (user, _mechanism), count in seen.items():
        if count > 1:
            refuse(
                user,
                ErrorCode.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            )

    def item_error(item) -> tuple[ErrorCode, str] | None:
        """What every deletion and upsertion must get right."""
        if not item.name:
            return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
        if item.mechanism not in MECHANISM_IDS:
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
        return None

    for d in body.deletions:
        if (error := item_error(d)) is not None:
            refuse(d.name, *error)
        elif store.get(d.name, MECHANISM_IDS[d.mechanism]) is None:
            refuse(
                d.name,
                ErrorCode.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
    for u in body.upsertions:
        if (error := item_error(u)) is not None:
            refuse(u.name, *error)
        elif not MIN_ITERATIONS <= u.iterations <= MAX_ITERATIONS:
            refuse(
                u.name,
                ErrorCode.UNACCEPTABLE_CREDENTIAL,
                f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}",
            )
        elif not u.salt or not u.salted_password:
            refuse(
                u.name,
                ErrorCode.UNACCEPTABLE_CREDENTIAL,
                "Salt and salted password must not be empty",
            )
    writes = store.apply(
        [
            (
                u.name,
                MECHANISM_IDS[u.mechanism],
                ScramCredential.from_salted_password(
                    MECHANISM_IDS[u.mechanism],
                    bytes(u.salt),
                    bytes(u.salted_password),
                    u.iterations,
                ),
            )
            for u in body.upsertions
            if u.name not in errors
        ],
        [(d.name, MECHANISM_IDS[d.mechanism]) for d in body.deletions if d.name not in errors],
    )

    def response():
        results = []
        for user in dict.fromkeys(users):
            error, message = errors.get(user, (ErrorCode.NONE, None))
            results.append(
                AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult(
                    user=user, error_code=int(error), error_message=message
                )
            )
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)

    # A broker alone stored them at once (None); a cluster's store returns the ZooKeeper
    # writes to await, which give the users whose change failed.
    if writes is None:
        return response()

    async def written():
        for user, e in (await writes).items():
            refuse(user, e.errno, str(e))
        return response()

    return written()


HANDLERS = {
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: handle_alter_user_scram_credentials,
}
