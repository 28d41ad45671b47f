"""The schema registry's errors: one hierarchy, each carrying its HTTP status and Confluent's
`error_code`, rendered as the body `{"error_code": N, "message": "..."}`.

Codes are Confluent Schema Registry's (its `rest.exceptions.Errors`): 404xx not found,
409 incompatible, 422xx invalid input, 500xx the store or forwarding.
"""

from __future__ import annotations


class SchemaRegistryError(Exception):
    """Base of every error the registry answers; `status` is the HTTP status."""

    status = 500
    error_code = 500

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def body(self) -> dict[str, object]:
        return {"error_code": self.error_code, "message": self.message}


class BadRequestError(SchemaRegistryError):
    """A request body that is not JSON at all."""

    status, error_code = 400, 400


class UnauthorizedError(SchemaRegistryError):
    status, error_code = 401, 401


class RequestTooLargeError(SchemaRegistryError):
    """A request body over the registry's limit, refused before it is read."""

    status, error_code = 413, 413


class SubjectNotFoundError(SchemaRegistryError):
    status, error_code = 404, 40401


class VersionNotFoundError(SchemaRegistryError):
    status, error_code = 404, 40402


class SchemaNotFoundError(SchemaRegistryError):
    status, error_code = 404, 40403


class SubjectSoftDeletedError(SchemaRegistryError):
    status, error_code = 404, 40404


class SubjectNotSoftDeletedError(SchemaRegistryError):
    status, error_code = 404, 40405


class SchemaVersionSoftDeletedError(SchemaRegistryError):
    status, error_code = 404, 40406


class SchemaVersionNotSoftDeletedError(SchemaRegistryError):
    status, error_code = 404, 40407


class SubjectCompatibilityNotConfiguredError(SchemaRegistryError):
    status, error_code = 404, 40408


class SubjectModeNotConfiguredError(SchemaRegistryError):
    status, error_code = 404, 40409


class IncompatibleSchemaError(SchemaRegistryError):
    status, error_code = 409, 409


class UnprocessableEntityError(SchemaRegistryError):
    """A request body that is not the JSON the endpoint takes."""

    status, error_code = 422, 422


class InvalidSchemaError(SchemaRegistryError):
    """A schema that does not parse as its type, or whose references do not resolve."""

    status, error_code = 422, 42201


class InvalidVersionError(SchemaRegistryError):
    status, error_code = 422, 42202


class InvalidCompatibilityLevelError(SchemaRegistryError):
    status, error_code = 422, 42203


class InvalidModeError(SchemaRegistryError):
    status, error_code = 422, 42204


class OperationNotPermittedError(SchemaRegistryError):
    status, error_code = 422, 42205


class ReferenceExistsError(SchemaRegistryError):
    status, error_code = 422, 42206


class StoreError(SchemaRegistryError):
    status, error_code = 500, 50001


class OperationTimeoutError(SchemaRegistryError):
    status, error_code = 500, 50002


class RequestForwardingFailedError(SchemaRegistryError):
    status, error_code = 500, 50003


class UnknownLeaderError(SchemaRegistryError):
    status, error_code = 500, 50004
