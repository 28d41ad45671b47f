"""Transaction verification of a partition leader (KIP-890 part 1, Kafka's
``AddPartitionsToTxnManager``).

Before the first transactional batch of a producer's transaction is appended to a
partition, the leader asks the producer's transaction coordinator whether the
partition is in that ongoing transaction: AddPartitionsToTxn v4 with ``verify_only``
over the inter-broker listener, or the local coordinator when this broker is it. A
batch from a transaction already ended (a late retry after the coordinator's ABORT
marker) is refused instead of opening a transaction nobody will end.

The coordinator is the leader of the transactional id's ``__transaction_state``
partition in the metadata cache. Its answer per partition is returned as is, except
PRODUCER_FENCED, which a leader answers as INVALID_PRODUCER_EPOCH; a request that
fails on the way (no coordinator known, disconnect, timeout) answers
NETWORK_EXCEPTION, or COORDINATOR_NOT_AVAILABLE when no coordinator is known.
Callers map these to what their own API answers (the replica manager's
``verification_produce_error``, the group coordinator's ``offset_commit_error``).
"""

from __future__ import annotations

import logging

from broker_py.common.internal_topics import TRANSACTION_STATE_TOPIC
from broker_py.coordinator.transaction.transaction_log import partition_for
from broker_py.server.inter_broker_clients import ClientFactory, EndpointOf, InterBrokerClients
from logstore.protocol.api_keys import ApiKey
from logstore.protocol.error_codes import ErrorCode
from logstore.protocol.errors import KafkaError
from logstore.protocol.messages.transactions import AddPartitionsToTxnRequest

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class AddPartitionsToTxnManager:
    def __init__(
        self,
        apis,
        endpoint_of: EndpointOf | None,
        make_client: ClientFactory | None,
        request_timeout_ms: int = 30_000,
    ) -> None:
        self.apis = apis
        self.request_timeout_ms = request_timeout_ms
        self._clients = InterBrokerClients(
            f"broker-{apis.broker_id}-txn-verification", endpoint_of, make_client
        )

    def coordinator_of(self, transactional_id: str) -> int:
        """The broker leading the id's ``__transaction_state`` partition, -1 if none."""
        topic = self.apis.metadata_cache.get(TRANSACTION_STATE_TOPIC)
        if topic is None:
            return -1
        state = self.apis.metadata_cache.partition_state(
            TRANSACTION_STATE_TOPIC, partition_for(transactional_id, topic.partitions)
        )
        return -1 if state is None else state.leader

    async def verify(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """The coordinator's answer for each partition (NONE: in the ongoing transaction)."""
        node = self.coordinator_of(transactional_id)
        if node < 0:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if node == self.apis.broker_id:
            coordinator = self.apis.transaction_coordinator
            if coordinator is None:
                return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
            answers = coordinator.verify_partitions(
                transactional_id, producer_id, producer_epoch, partitions
            )
        else:
            answers = await self._ask(
                node, transactional_id, producer_id, producer_epoch, partitions
            )
        return {
            tp: ErrorCode.INVALID_PRODUCER_EPOCH if e == ErrorCode.PRODUCER_FENCED else e
            for tp, e in answers.items()
        }

    async def _ask(
        self,
        node: int,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        client = self._clients.get(node)
        if client is None:
            return dict.fromkeys(partitions, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = AddPartitionsToTxnRequest(
            transactions=[
                AddPartitionsToTxnRequest.AddPartitionsToTxnTransaction(
                    transactional_id=transactional_id,
                    producer_id=producer_id,
                    producer_epoch=producer_epoch,
                    verify_only=True,
                    topics=[
                        AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=ps)
                        for t, ps in by_topic.items()
                    ],
                )
            ]
        )
        try:
            response = await client.send(
                ApiKey.ADD_PARTITIONS_TO_TXN, request, self.request_timeout_ms, version=4
            )
        except (KafkaError, OSError, TimeoutError) as e:
            log.info("transaction verification at broker %d failed: %s", node, e)
            return dict.fromkeys(partitions, ErrorCode.NETWORK_EXCEPTION)
        if response.error_code:
            return dict.fromkeys(partitions, _code(response.error_code))
        answers: dict[TopicPartition, ErrorCode] = {}
        for result in response.results_by_transaction:
            for t in result.topic_results:
                for p in t.results_by_partition:
                    answers[(t.name, p.partition_index)] = _code(p.partition_error_code)
        return {tp: answers.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in partitions}

    async def close(self) -> None:
        await self._clients.close()


def _code(code: int) -> ErrorCode:
    return (
        ErrorCode(code) if code in ErrorCode._value2member_map_ else ErrorCode.UNKNOWN_SERVER_ERROR
    )
