"""``logstore console``: a web console for any Kafka-compatible cluster.

An aiohttp server renders jinja2 templates; it speaks only the Kafka protocol (through
confluent-kafka and the CLI's helpers, :mod:`logstore.cli`) and, with ``--registry``, a
schema registry's REST API. Modules: :mod:`.settings` (options, pure), :mod:`.history`
(sampled series, pure), :mod:`.charts` (SVG, pure), :mod:`.render` (record bytes as
text, JSON or hex, pure), :mod:`.registry` (schema-id decoding), :mod:`.kafka` (the
shared admin client and the thread pool its blocking calls run in), one module per page
family (:mod:`.overview`, :mod:`.topics`, :mod:`.records`, :mod:`.groups`,
:mod:`.security`) and :mod:`.app` (the application factory, authentication, the sampler).
"""
