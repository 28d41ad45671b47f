"""A schema registry speaking Confluent Schema Registry's REST API (v1).

`schemas/` holds the schema types (AVRO, JSON, PROTOBUF) and their compatibility rules;
`errors.py` is the one error hierarchy, each error carrying its HTTP status and Confluent's
`error_code`.
"""
